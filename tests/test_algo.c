/* The algorithms on real data: ECLK's exactness and convergence, the
 * baselines' behaviour, determinism, bit accounting and stop rules. */
#include <math.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"
#include "testutil.h"

static ec_dataset mushrooms, a9a;

static void load(ec_dataset *ds, const char *name)
{
    char path[1024];
    ec_err e = {0};

    if (ds->n_rows)
        return;
    ck_assert_msg(ec_libsvm_read(tu_data_path(name, path, sizeof path), NULL,
                                 ds, &e) == 0, "%s", e.msg);
}

static ec_job job_for(const char *algo, ec_comp_type comp, uint32_t k)
{
    ec_job job;

    ec_job_defaults(&job);
    job.lambda2_rel = 1e-3;
    job.workers = 20;
    ck_assert_int_eq(ec_algo_from_name(algo, &job.algorithm), 0);
    job.compressor.type = comp;
    job.compressor.k = k;
    return job;
}

/* Everything a run needs, built and torn down together. */
struct fixture {
    ec_problem pb;
    ec_params prm;
    ec_summary sum;
    ec_metric rows[4096];
    unsigned nrows;
};

static int keep_row(void *ctx, const ec_metric *row)
{
    struct fixture *f = ctx;

    if (f->nrows < 4096)
        f->rows[f->nrows++] = *row;
    return 0;
}

static void run_job(struct fixture *f, const ec_dataset *ds, const ec_job *job)
{
    ec_err e = {0};

    f->nrows = 0;
    ck_assert_msg(ec_problem_init(&f->pb, ds, job, &e) == 0, "%s", e.msg);
    ck_assert_msg(ec_problem_solve(&f->pb, &e) == 0, "%s", e.msg);
    ck_assert_msg(ec_params_resolve(job, &f->pb, &f->prm, &e) == 0, "%s", e.msg);
    ck_assert_msg(ec_run_inproc(&f->pb, &f->prm, job, keep_row, f, &f->sum, &e) == 0,
                  "%s", e.msg);
    ec_problem_clear(&f->pb);
}

/*
 * With Q = none, ECLK is exactly L-Katyusha: drive both through the step
 * API round by round and compare every replicated vector bitwise, across
 * rounds where the coin fires and where it does not.
 */
START_TEST(test_eclk_none_is_lkatyusha)
{
    ec_job je = job_for("eclk", EC_COMP_NONE, 0);
    ec_job jl = job_for("lkatyusha", EC_COMP_NONE, 0);
    ec_problem pb;
    ec_params pe, pl;
    ec_model me, ml;
    ec_worker we[20], wl[20];
    ec_up ue[20], ul[20];
    ec_down de, dl;
    ec_err e = {0};
    int coins = 0;

    load(&mushrooms, "mushrooms");
    je.p = jl.p = 0.05;
    ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &je, &e), 0);
    ck_assert_int_eq(ec_params_resolve(&je, &pb, &pe, &e), 0);
    ck_assert_int_eq(ec_params_resolve(&jl, &pb, &pl, &e), 0);
    ck_assert(pe.gamma == pl.gamma && pe.theta1 == pl.theta1);
    ck_assert_int_eq(ec_model_init(&me, &pb, &pe, &e), 0);
    ck_assert_int_eq(ec_model_init(&ml, &pb, &pl, &e), 0);
    ck_assert_int_eq(ec_down_init(&de, pb.d), 0);
    ck_assert_int_eq(ec_down_init(&dl, pb.d), 0);
    for (uint32_t t = 0; t < 20; t++) {
        ck_assert_int_eq(ec_worker_init(&we[t], &pb, &pe, t, &e), 0);
        ck_assert_int_eq(ec_worker_init(&wl[t], &pb, &pl, t, &e), 0);
        ck_assert_int_eq(ec_up_init(&ue[t], pb.d), 0);
        ck_assert_int_eq(ec_up_init(&ul[t], pb.d), 0);
    }
    for (int round = 0; round <= 400; round++) {
        coins += me.coin;
        for (uint32_t t = 0; t < 20; t++) {
            ec_worker_step(&we[t], &me, &ue[t]);
            ec_worker_step(&wl[t], &ml, &ul[t]);
        }
        ec_server_reduce(&me, ue, 20, &de);
        ec_server_reduce(&ml, ul, 20, &dl);
        ec_model_apply(&me, &de);
        ec_model_apply(&ml, &dl);
        ck_assert_int_eq(me.coin, ml.coin);
        ck_assert_int_eq(memcmp(me.x, ml.x, pb.d * sizeof(double)), 0);
        ck_assert_int_eq(memcmp(me.y, ml.y, pb.d * sizeof(double)), 0);
        ck_assert_int_eq(memcmp(me.z, ml.z, pb.d * sizeof(double)), 0);
        ck_assert_int_eq(memcmp(me.w, ml.w, pb.d * sizeof(double)), 0);
        ck_assert_int_eq(memcmp(me.u, ml.u, pb.d * sizeof(double)), 0);
        for (uint32_t t = 0; t < 20; t++)
            for (uint32_t j = 0; j < pb.d; j++)
                ck_assert(we[t].e[j] == 0.0);
    }
    ck_assert_int_gt(coins, 5);           /* the coin fired along the way */
    ck_assert(me.y[0] != 0.0);            /* and the iterates moved */
    for (uint32_t t = 0; t < 20; t++) {
        ec_worker_clear(&we[t]);
        ec_worker_clear(&wl[t]);
        ec_up_clear(&ue[t]);
        ec_up_clear(&ul[t]);
    }
    ec_model_clear(&me);
    ec_model_clear(&ml);
    ec_down_clear(&de);
    ec_down_clear(&dl);
    ec_problem_clear(&pb);
}
END_TEST

/* The acceptance run: mushrooms, 20 workers, lambda2_rel 1e-3,
 * topk k = 5, batch 1: relative gap 1e-9 within 5000 rounds. */
START_TEST(test_eclk_mushrooms_topk5)
{
    static struct fixture f;
    ec_job job = job_for("eclk", EC_COMP_TOPK, 5);

    load(&mushrooms, "mushrooms");
    job.max_rounds = 5000;
    job.target = 1e-9;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    ck_assert_uint_le(f.sum.rounds, 5000);
    ck_assert_double_le(f.sum.last.rel_gap, 1e-9);
    /* the gap fell all the way: rows start at 1 and end at the target */
    ck_assert_double_eq(f.rows[0].rel_gap, 1.0);
    fprintf(stderr, "eclk mushrooms topk5: %llu rounds, %.4g bits up/worker\n",
            (unsigned long long)f.sum.rounds, f.sum.last.bits_up);
}
END_TEST

/* a9a with topk k = 1: 1e-6 within a budget of 10000 rounds (6800 and
 * 6440 for seeds 1 and 2 in bench/results/eclk-defaults.md). */
START_TEST(test_eclk_a9a_topk1)
{
    static struct fixture f;
    ec_job job = job_for("eclk", EC_COMP_TOPK, 1);

    load(&a9a, "a9a");
    job.max_rounds = 10000;
    job.target = 1e-6;
    job.eval_every = 20;
    run_job(&f, &a9a, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    fprintf(stderr, "eclk a9a topk1: %llu rounds\n",
            (unsigned long long)f.sum.rounds);
}
END_TEST

/* Qian et al.'s EC-LSVRG, ECLK without the momentum, on the same a9a
 * top-1: it converges to the exact optimum too, but in more rounds than
 * ECLK (17780 for seed 1 against ECLK's 6800: bench/results/ablation.md). */
START_TEST(test_ec_lsvrg_qian_a9a_topk1)
{
    static struct fixture f;
    ec_job job = job_for("ec-lsvrg-qian", EC_COMP_TOPK, 1);

    load(&a9a, "a9a");
    job.max_rounds = 25000;
    job.target = 1e-6;
    job.eval_every = 50;
    run_job(&f, &a9a, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    ck_assert_uint_gt(f.sum.rounds, 10000);
    fprintf(stderr, "ec-lsvrg-qian a9a topk1: %llu rounds\n",
            (unsigned long long)f.sum.rounds);
}
END_TEST

/* Gorbunov et al.'s EC-LSVRG-DIANA converges to the exact optimum with a
 * constant step on mushrooms top-5 (4000 rounds to 1e-6 for seed 1), where
 * EC-SGD-DIANA, the same shifts without the variance reduction, stays in
 * a neighbourhood (its gap is 6.5e-4 after 30000 rounds): the claim of
 * their paper's abstract, on heterogeneous shards. */
START_TEST(test_ec_lsvrg_diana_exact)
{
    static struct fixture f, g;
    ec_job job = job_for("ec-lsvrg-diana", EC_COMP_TOPK, 5);

    load(&mushrooms, "mushrooms");
    job.max_rounds = 8000;
    job.target = 1e-6;
    job.eval_every = 50;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    ck_assert_uint_eq(ec_algo_from_name("ec-sgd-diana", &job.algorithm), 0);
    run_job(&g, &mushrooms, &job);
    ck_assert_int_eq(g.sum.stop, EC_STOP_MAX_ROUNDS);
    ck_assert_double_gt(g.sum.last.rel_gap, 1e-5);
    fprintf(stderr, "ec-lsvrg-diana mushrooms topk5: %llu rounds; ec-sgd-diana "
                    "at %llu: gap %.3g\n",
            (unsigned long long)f.sum.rounds, (unsigned long long)g.sum.rounds,
            g.sum.last.rel_gap);
}
END_TEST

/* ADEF with full local gradients on mushrooms' contiguous split (the one
 * where EC-GD stalls, below) with top-5 (k = 5 of 112): its compressed
 * gradient differences let the error memory vanish at the optimum, so the
 * gap falls to 1e-6 at the default weights; and the gap never rises above
 * its start. */
START_TEST(test_adef_mushrooms_topk5)
{
    static struct fixture f;
    ec_job job = job_for("adef", EC_COMP_TOPK, 5);

    load(&mushrooms, "mushrooms");
    job.batch = EC_JOB_BATCH_FULL;
    job.max_rounds = 20000;
    job.target = 1e-6;
    job.eval_every = 50;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    ck_assert_double_le(f.sum.last.rel_gap, 1e-6);
    for (unsigned i = 0; i < f.nrows; i++)
        ck_assert_double_le(f.rows[i].rel_gap, 1.0);
    fprintf(stderr, "adef mushrooms topk5 full: %llu rounds\n",
            (unsigned long long)f.sum.rounds);
}
END_TEST

/*
 * Partial participation: gd with 5 of 20 workers a round counts the bits
 * of those 5 alone (64 d each, averaged over the 20); EF21-PP with 4 of 20
 * still reaches 1e-6 on mushrooms top-5 (3600 rounds for seed 1, against
 * 2900 with every worker) on fewer bits up per worker.
 */
START_TEST(test_partial_participation)
{
    static struct fixture f, g;
    ec_job job = job_for("gd", EC_COMP_NONE, 0);

    load(&mushrooms, "mushrooms");      /* d = 112 */
    job.participation = 0.25;
    job.max_rounds = 40;
    job.eval_every = 40;
    run_job(&f, &mushrooms, &job);
    ck_assert_uint_eq(f.prm.participants, 5);
    ck_assert_uint_eq(f.sum.rounds, 40);
    ck_assert_double_eq(f.sum.last.bits_up, 40.0 * 5 * 64 * 112 / 20);
    /* Only the sampled workers take gradients: their shards' rows. */
    ck_assert_double_lt(f.sum.last.grad_evals, 40.0 * mushrooms.n_rows / 20);

    job = job_for("ef21", EC_COMP_TOPK, 5);
    job.max_rounds = 8000;
    job.target = 1e-6;
    job.eval_every = 100;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    job.participation = 0.2;
    run_job(&g, &mushrooms, &job);
    ck_assert_int_eq(g.sum.stop, EC_STOP_TARGET);
    ck_assert_uint_eq(g.prm.participants, 4);
    ck_assert_double_lt(g.sum.last.bits_up, f.sum.last.bits_up);
    fprintf(stderr, "ef21 mushrooms topk5: %llu rounds, %.4g bits up/worker; "
                    "4 of 20 a round: %llu rounds, %.4g bits\n",
            (unsigned long long)f.sum.rounds, f.sum.last.bits_up,
            (unsigned long long)g.sum.rounds, g.sum.last.bits_up);
}
END_TEST

/*
 * EF21-P on mushrooms (d = 112), gd with the broadcast top-6 (k_frac 0.05):
 * the default step is gd's 1/L_f times alpha_down = 6/112; each round
 * broadcasts 6 (index, value) pairs, 6 (64 + 7) bits, where gd sends
 * 64 d; at gd's own step (the multiplier 1/alpha) it reaches 1e-6 in
 * about gd's rounds (3270 against 3280) on a seventeenth of the bits down.
 * The methods whose row does not admit it, and a compressor that is not a
 * sparsifier, are refused naming the field.
 */
START_TEST(test_ef21p)
{
    static struct fixture f, g;
    ec_job job = job_for("gd", EC_COMP_NONE, 0);
    ec_problem pb;
    ec_params prm;
    ec_err e = {0};

    load(&mushrooms, "mushrooms");
    job.max_rounds = 8000;
    job.target = 1e-6;
    job.eval_every = 10;
    run_job(&g, &mushrooms, &job);
    ck_assert_int_eq(g.sum.stop, EC_STOP_TARGET);
    job.compressor_down.type = EC_COMP_TOPK;
    job.k_frac_down = 0.05;
    job.step_multiplier = 112.0 / 6.0;
    run_job(&f, &mushrooms, &job);
    ck_assert_uint_eq(f.prm.comp_down.k, 6);
    ck_assert(f.prm.delta_down == 6.0 / 112.0);
    ck_assert(f.prm.theory_step == g.prm.theory_step * f.prm.delta_down);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    ck_assert_uint_le(f.sum.rounds, g.sum.rounds * 11 / 10);
    ck_assert_double_eq(f.sum.last.bits_down, (double)f.sum.rounds * 6 * (64 + 7));
    ck_assert_double_eq(g.sum.last.bits_down, (double)g.sum.rounds * 64 * 112);
    fprintf(stderr, "ef21p gd mushrooms top-6 down at gd's step: %llu rounds "
                    "(gd %llu), bits down %.4g (gd %.4g)\n",
            (unsigned long long)f.sum.rounds, (unsigned long long)g.sum.rounds,
            f.sum.last.bits_down, g.sum.last.bits_down);

    /* Refused: a method whose theory does not admit it, and a dither. */
    job = job_for("ec-gd", EC_COMP_TOPK, 5);
    job.compressor_down.type = EC_COMP_TOPK;
    job.compressor_down.k = 5;
    ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &job, &e), 0);
    ck_assert_int_lt(ec_params_resolve(&job, &pb, &prm, &e), 0);
    ck_assert_msg(strstr(e.msg, "compressor_down: ec-gd broadcasts its model "
                                "uncompressed") &&
                  strstr(e.msg, "admit it: ec-gd-diana, gd"), "%s", e.msg);
    job = job_for("ec-gd-diana", EC_COMP_TOPK, 5);
    job.compressor_down.type = EC_COMP_DITHER;
    job.compressor_down.s = 2;
    ck_assert_int_lt(ec_params_resolve(&job, &pb, &prm, &e), 0);
    ck_assert_msg(strstr(e.msg, "compressor_down.type: must be one of topk, randk"),
                  "%s", e.msg);
    job.compressor_down.type = EC_COMP_RANDK;
    job.compressor_down.k = 500;
    ck_assert_int_lt(ec_params_resolve(&job, &pb, &prm, &e), 0);
    ck_assert_msg(strstr(e.msg, "compressor_down: "), "%s", e.msg);
    ec_problem_clear(&pb);
}
END_TEST

/*
 * lambda2 = 0, least squares on mushrooms: the Hessian is singular (rank
 * 84 of 112, one-hot features), P* comes from Levenberg-Marquardt Newton
 * steps with a certificate far below the target, and gd and ef21 reach a
 * relative gap of 1e-3 (gd in about 6000 rounds: the rate is sublinear,
 * the smallest positive eigenvalue being 2e-4 against L_f = 10.3).
 * Methods whose constants need mu, and the problems whose P* is not
 * certified without it, are refused naming lambda2.
 */
START_TEST(test_general_convex)
{
    static struct fixture f;
    static const struct {
        const char *algo;
        ec_loss loss;
        double lambda1;
        const char *want;
    } refused[] = {
        {"eclk", EC_LOSS_SQUARED, 0.0, "lambda2: 0 makes mu = 0, and eclk's constants"},
        {"lkatyusha", EC_LOSS_SQUARED, 0.0, "lkatyusha's constants"},
        {"gd", EC_LOSS_LOGISTIC, 0.0, "0 is taken for the squared loss only"},
        {"gd", EC_LOSS_SQUARED, 1e-3, "lambda1 = 0"},
    };
    ec_job job = job_for("gd", EC_COMP_NONE, 0);
    ec_problem pb;
    ec_params prm;
    ec_err e = {0};
    char buf[384];

    load(&mushrooms, "mushrooms");
    job.loss = EC_LOSS_SQUARED;
    job.lambda2 = 0.0;
    job.lambda2_rel = NAN;
    job.max_rounds = 20000;
    job.target = 1e-3;
    job.eval_every = 100;
    ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &job, &e), 0);
    ck_assert_msg(ec_problem_solve(&pb, &e) == 0, "%s", e.msg);
    ck_assert_double_eq(pb.mu, 0.0);
    ck_assert_str_eq(pb.solve_method, "newton-lm");
    ck_assert_double_lt(pb.solve_bound, 1e-12 * pb.P_star);
    fprintf(stderr, "gd mushrooms squared lambda2 = 0: P* %.15g (bound %.2g)\n",
            pb.P_star, pb.solve_bound);
    ec_problem_clear(&pb);
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);
    fprintf(stderr, "gd: 1e-3 at %llu rounds\n", (unsigned long long)f.sum.rounds);
    job = job_for("ef21", EC_COMP_TOPK, 5);
    job.loss = EC_LOSS_SQUARED;
    job.lambda2 = 0.0;
    job.lambda2_rel = NAN;
    job.max_rounds = 20000;
    job.target = 1e-3;
    job.eval_every = 100;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_TARGET);

    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        job = job_for(refused[i].algo, EC_COMP_NONE, 0);
        job.loss = refused[i].loss;
        job.lambda1 = refused[i].lambda1;
        job.lambda2 = 0.0;
        job.lambda2_rel = NAN;
        ck_assert_str_eq(ec_job_general_convex_check(&job, 112, buf, sizeof buf), "lambda2");
        ck_assert_msg(strstr(buf, refused[i].want + (strncmp(refused[i].want,
                                                             "lambda2: ", 9) ? 0 : 9)),
                      "case %zu: %s", i, buf);
        if (ec_problem_init(&pb, &mushrooms, &job, &e) < 0)
            continue;           /* the problem itself refused */
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), EC_EINVAL);
        ck_assert_msg(strstr(e.msg, refused[i].want), "case %zu: '%s'", i, e.msg);
        ec_problem_clear(&pb);
    }
    /* d past the dense solver's bound. */
    job = job_for("gd", EC_COMP_NONE, 0);
    job.loss = EC_LOSS_SQUARED;
    job.lambda2 = 0.0;
    ck_assert_ptr_nonnull(ec_job_general_convex_check(&job, 4097, buf, sizeof buf));
    ck_assert_msg(strstr(buf, "0 needs d <= 4096 (the dataset has d = 4097)"), "%s", buf);
    ck_assert_ptr_null(ec_job_general_convex_check(&job, 4096, buf, sizeof buf));
}
END_TEST

/* EC-GD on the same heterogeneous split stalls: its error memory does not
 * vanish because local gradients do not, so the gap levels off. */
START_TEST(test_ec_gd_stalls)
{
    static struct fixture f;
    ec_job job = job_for("ec-gd", EC_COMP_TOPK, 5);
    double best_late = INFINITY;

    load(&mushrooms, "mushrooms");
    job.max_rounds = 5000;
    job.eval_every = 50;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_MAX_ROUNDS);
    for (unsigned i = 0; i < f.nrows; i++)
        if (f.rows[i].round >= 2500 && f.rows[i].rel_gap < best_late)
            best_late = f.rows[i].rel_gap;
    ck_assert_double_gt(best_late, 1e-7);
    fprintf(stderr, "ec-gd mushrooms topk5: best gap after round 2500 %.3g\n",
            best_late);
}
END_TEST

/*
 * EControl at eta = 0 with whole-shard gradients is EF21's recursion (its
 * h after round t + 1 is EF21's g after round t; docs/algorithms.md,
 * "EControl"): at the same step and top-k, every row's objective is
 * EF21's, bit for bit. With eta > 0 the memory enters and they part.
 */
START_TEST(test_econtrol_eta0_is_ef21)
{
    static struct fixture ef21, ec0, ec;
    ec_job job = job_for("ef21", EC_COMP_TOPK, 5);
    int differ = 0;

    load(&mushrooms, "mushrooms");
    job.step_size = 0.5;
    job.max_rounds = 120;
    job.eval_every = 1;
    run_job(&ef21, &mushrooms, &job);
    ck_assert_int_eq(ec_algo_from_name("econtrol", &job.algorithm), 0);
    job.batch = EC_JOB_BATCH_FULL;
    job.econtrol_eta = 0.0;
    run_job(&ec0, &mushrooms, &job);
    job.econtrol_eta = 0.5;
    run_job(&ec, &mushrooms, &job);
    ck_assert_uint_eq(ef21.nrows, ec0.nrows);
    ck_assert_uint_eq(ef21.nrows, ec.nrows);
    for (unsigned i = 0; i < ef21.nrows; i++) {
        ck_assert_msg(ef21.rows[i].P == ec0.rows[i].P, "row %u: %.17g vs %.17g", i,
                      ef21.rows[i].P, ec0.rows[i].P);
        differ |= ef21.rows[i].P != ec.rows[i].P;
    }
    ck_assert(differ);
}
END_TEST

/* Every algorithm: same seed, bitwise the same rows; a different seed
 * changes the stochastic ones; the gap decreases from the start. */
START_TEST(test_every_algorithm_deterministic)
{
    static struct fixture a, b, c;
    const char *algo = ec_algo_name((ec_algo_id)_i);
    int compresses = ec_algo_compresses((ec_algo_id)_i);
    ec_job job = job_for(algo, compresses ? EC_COMP_RANDK : EC_COMP_NONE,
                         compresses ? 10 : 0);

    load(&mushrooms, "mushrooms");
    job.max_rounds = 200;
    run_job(&a, &mushrooms, &job);
    run_job(&b, &mushrooms, &job);
    ck_assert_uint_eq(a.nrows, b.nrows);
    for (unsigned i = 0; i < a.nrows; i++) {
        a.rows[i].seconds = b.rows[i].seconds = 0;
        a.rows[i].time = b.rows[i].time = 0;
        ck_assert_int_eq(memcmp(&a.rows[i], &b.rows[i], sizeof a.rows[i]), 0);
    }
    ck_assert_double_lt(a.sum.last.rel_gap, 1.0);
    if (_i != EC_ALGO_GD) {     /* gd alone draws nothing at random */
        job.seed = 2;
        run_job(&c, &mushrooms, &job);
        ck_assert_double_ne(a.sum.last.P, c.sum.last.P);
    }
}
END_TEST

/*
 * Every row of the algorithm table against what the algorithm does: it
 * admits the compressors its row says (contractions when it compresses;
 * those with an unbiased form, every one but topk, when it sends that
 * form; none otherwise), and its rows move with the batch exactly when
 * it is stochastic.
 */
START_TEST(test_table_rows_hold)
{
    static struct fixture one, four;
    const ec_algo_id a = (ec_algo_id)_i;
    const ec_algo_info *ai = ec_algo_info_of(a);
    ec_algo_id back;
    ec_job job;
    char buf[384];
    int same = 1;

    ck_assert_ptr_nonnull(ai);
    ck_assert_int_eq(ec_algo_from_name(ai->name, &back), 0);
    ck_assert_int_eq(back, a);
    ck_assert_ptr_nonnull(ec_algo_family_name(ai->family));
    for (int t = 0; t < EC_COMP_COUNT; t++) {
        int admits = ai->compresses ? ec_comp_info_of((ec_comp_type)t)->contraction &&
                                          (ai->compresses == 1 || t != EC_COMP_TOPK)
                                    : t == EC_COMP_NONE;

        ck_assert_msg((ec_algo_comp_check(a, (ec_comp_type)t, buf, sizeof buf) == NULL) ==
                          admits,
                      "%s with %s: %s", ai->name, ec_comp_name((ec_comp_type)t), buf);
    }
    job = job_for(ai->name,
                  ai->compresses == 2 ? EC_COMP_RANDK
                  : ai->compresses    ? EC_COMP_TOPK : EC_COMP_NONE,
                  ai->compresses ? 10 : 0);
    load(&mushrooms, "mushrooms");
    job.max_rounds = 30;
    job.batch = 1;
    run_job(&one, &mushrooms, &job);
    job.batch = 4;
    run_job(&four, &mushrooms, &job);
    ck_assert_uint_eq(one.nrows, four.nrows);
    for (unsigned i = 0; i < one.nrows; i++)
        same &= one.rows[i].P == four.rows[i].P;
    ck_assert_msg(same == !ai->stochastic, "%s: the batch %s the rows", ai->name,
                  same ? "does not change" : "changes");
}
END_TEST

/* Bits equal the formula: topk k sends 64k value bits and k ceil(log2 d)
 * index bits per worker per round; EC-GD has no other uplink. */
START_TEST(test_bits_match_formula)
{
    static struct fixture f;
    ec_job job = job_for("ec-gd", EC_COMP_TOPK, 3);

    load(&mushrooms, "mushrooms");      /* d = 112: 7 index bits */
    job.max_rounds = 100;
    run_job(&f, &mushrooms, &job);
    ck_assert_double_eq(f.sum.last.bits_up, 100.0 * (64 * 3 + 3 * 7));
    ck_assert_double_eq(f.sum.last.paper_bits, 100.0 * 64 * 3);
    ck_assert_double_gt(f.sum.last.bits_down, 0.0);
}
END_TEST

START_TEST(test_divergence_is_reported)
{
    static struct fixture f;
    ec_job job = job_for("gd", EC_COMP_NONE, 0);

    load(&mushrooms, "mushrooms");
    job.step_multiplier = 5000;
    job.max_rounds = 2000;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_DIVERGED);
    ck_assert_ptr_nonnull(strstr(f.sum.reason, "diverged at round"));
}
END_TEST

START_TEST(test_max_seconds)
{
    static struct fixture f;
    ec_job job = job_for("ec-gd", EC_COMP_TOPK, 1);

    load(&mushrooms, "mushrooms");
    job.max_rounds = 100000000;
    job.max_seconds = 0.2;
    job.eval_every = 1000000;
    run_job(&f, &mushrooms, &job);
    ck_assert_int_eq(f.sum.stop, EC_STOP_MAX_SECONDS);
    ck_assert_double_lt(f.sum.last.seconds, 2.0);
}
END_TEST

/* Data-dependent checks name the field and the allowed range. */
START_TEST(test_param_errors)
{
    static const struct {
        const char *algo;
        ec_comp_type comp;
        uint32_t k, batch;
        double p;
        const char *want;
    } cases[] = {
        {"eclk", EC_COMP_TOPK, 113, 1, NAN, "compressor.k must be in 1..112 (got 113)"},
        {"eclk", EC_COMP_TOPK, 0, 1, NAN, "compressor.k must be in 1..112 (got 0)"},
        {"eclk", EC_COMP_TOPK, 5, 407, NAN, "batch must be in 1..406"},
        {"gd", EC_COMP_TOPK, 5, 1, NAN, "gd sends uncompressed messages"},
        {"eclk", EC_COMP_RANDK_UNBIASED, 5, 1, NAN, "is not a contraction"},
        {"adiana", EC_COMP_TOPK, 5, 1, NAN,
         "compressor.type: topk is contractive only: adiana sends unbiased"},
        {"adiana", EC_COMP_RANDK, 5, 1, 0.0, "p must be in (0, 1] (got 0)"},
        {"eclk", EC_COMP_TOPK, 5, 1, 1.5, "p must be in (0, 1] (got 1.5)"},
    };
    /* Partial participation: refused for the methods whose row does not
     * admit it, naming the method and those that do; out of range. */
    static const struct {
        const char *algo;
        ec_comp_type comp;
        double participation;
        const char *want;
    } part_cases[] = {
        {"eclk", EC_COMP_TOPK, 0.5, "participation: eclk needs every worker in every round"},
        {"ec-sgd-diana", EC_COMP_TOPK, 0.9, "the methods that admit it: ef21, gd, sgd"},
        {"gd", EC_COMP_NONE, 0.0, "participation must be in (0, 1] (got 0)"},
        {"sgd", EC_COMP_NONE, 1.5, "participation must be in (0, 1] (got 1.5)"},
        {"ef21", EC_COMP_TOPK, NAN, NULL},
        {"ef21", EC_COMP_TOPK, 1e-9, NULL},       /* one worker a round */
    };
    ec_problem pb;
    ec_params prm;
    ec_err e = {0};

    load(&mushrooms, "mushrooms");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ec_job job = job_for(cases[i].algo, cases[i].comp, cases[i].k);
        job.batch = cases[i].batch;
        job.p = cases[i].p;
        ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &job, &e), 0);
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), EC_EINVAL);
        ck_assert_msg(strstr(e.msg, cases[i].want), "case %zu: '%s'", i, e.msg);
        ec_problem_clear(&pb);
    }
    /* EControl's eta: [0, 1], its default half of delta, econtrol only. */
    {
        ec_job job = job_for("econtrol", EC_COMP_TOPK, 5);

        ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &job, &e), 0);
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), 0);
        ck_assert_double_eq(prm.econtrol_eta, EC_ECONTROL_ETA_PER_DELTA * prm.delta);
        job.econtrol_eta = 0.0;
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), 0);
        ck_assert_double_eq(prm.econtrol_eta, 0.0);
        job.econtrol_eta = 1.5;
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), EC_EINVAL);
        ck_assert_msg(strstr(e.msg, "econtrol_eta must be in [0, 1] (got 1.5)"), "%s", e.msg);
        job = job_for("ec-gd", EC_COMP_TOPK, 5);
        job.econtrol_eta = 0.5;
        ck_assert_int_eq(ec_params_resolve(&job, &pb, &prm, &e), EC_EINVAL);
        ck_assert_msg(strstr(e.msg, "econtrol_eta applies to econtrol only"), "%s", e.msg);
        ec_problem_clear(&pb);
    }
    for (size_t i = 0; i < sizeof part_cases / sizeof part_cases[0]; i++) {
        ec_job job = job_for(part_cases[i].algo, part_cases[i].comp,
                             part_cases[i].comp == EC_COMP_NONE ? 0 : 5);
        int rc;

        job.participation = part_cases[i].participation;
        ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &job, &e), 0);
        rc = ec_params_resolve(&job, &pb, &prm, &e);
        if (part_cases[i].want) {
            ck_assert_int_eq(rc, EC_EINVAL);
            ck_assert_msg(strstr(e.msg, part_cases[i].want), "case %zu: '%s'", i, e.msg);
        } else {
            ck_assert_msg(rc == 0, "case %zu: %s", i, e.msg);
            ck_assert_uint_eq(prm.participants,
                              isnan(part_cases[i].participation) ? 20 : 1);
        }
        ec_problem_clear(&pb);
    }
}
END_TEST

/* A problem set up for one algorithm lacks constants another may need
 * (ef21's L_tilde for an eclk problem): resolving ef21 on it is refused,
 * not run with a NaN step, and succeeds on a problem set up for ef21. */
START_TEST(test_missing_constant_refused)
{
    ec_job je = job_for("eclk", EC_COMP_TOPK, 5);
    ec_job jf = job_for("ef21", EC_COMP_TOPK, 5);
    ec_problem pb;
    ec_params prm;
    ec_err e = {0};

    load(&mushrooms, "mushrooms");
    ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &je, &e), 0);
    ck_assert(isnan(pb.L_tilde));
    ck_assert_int_eq(ec_params_resolve(&jf, &pb, &prm, &e), EC_EINVAL);
    ck_assert_msg(strstr(e.msg, "ef21: the default step is nan"), "'%s'", e.msg);
    /* A given step needs no constant. */
    jf.step_size = 0.1;
    ck_assert_int_eq(ec_params_resolve(&jf, &pb, &prm, &e), 0);
    ec_problem_clear(&pb);
    jf.step_size = NAN;
    ck_assert_int_eq(ec_problem_init(&pb, &mushrooms, &jf, &e), 0);
    ck_assert_msg(ec_params_resolve(&jf, &pb, &prm, &e) == 0, "%s", e.msg);
    ck_assert(prm.gamma > 0.0 && isfinite(prm.gamma));
    ec_problem_clear(&pb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("algo");
    TCase *tc = tcase_create("core");
    int rc;

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_eclk_none_is_lkatyusha);
    tcase_add_test(tc, test_eclk_mushrooms_topk5);
    tcase_add_test(tc, test_eclk_a9a_topk1);
    tcase_add_test(tc, test_ec_gd_stalls);
    tcase_add_test(tc, test_ec_lsvrg_qian_a9a_topk1);
    tcase_add_test(tc, test_ec_lsvrg_diana_exact);
    tcase_add_test(tc, test_econtrol_eta0_is_ef21);
    tcase_add_test(tc, test_adef_mushrooms_topk5);
    tcase_add_test(tc, test_partial_participation);
    tcase_add_test(tc, test_ef21p);
    tcase_add_test(tc, test_general_convex);
    tcase_add_loop_test(tc, test_every_algorithm_deterministic, 0, EC_ALGO_COUNT);
    tcase_add_loop_test(tc, test_table_rows_hold, 0, EC_ALGO_COUNT);
    tcase_add_test(tc, test_bits_match_formula);
    tcase_add_test(tc, test_divergence_is_reported);
    tcase_add_test(tc, test_max_seconds);
    tcase_add_test(tc, test_param_errors);
    tcase_add_test(tc, test_missing_constant_refused);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    ec_dataset_clear(&mushrooms);
    ec_dataset_clear(&a9a);
    return rc;
}
