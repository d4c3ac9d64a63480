/* Losses, gradients, constants and P*: checked against finite differences,
 * dense reference computations and optimality conditions. */
#include <math.h>

#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/rng.h"
#include "testutil.h"

/* A random sparse dataset with fixed seed: rows x d, about density nnz. */
static void make_data(ec_dataset *ds, uint32_t rows, uint32_t d,
                      double density, uint64_t seed)
{
    ec_rng r;
    uint64_t cap = (uint64_t)rows * d, nnz = 0;

    ec_rng_seed(&r, seed, 0);
    memset(ds, 0, sizeof *ds);
    ds->row_ptr = malloc((rows + 1) * sizeof *ds->row_ptr);
    ds->col = malloc(cap * sizeof *ds->col);
    ds->val = malloc(cap * sizeof *ds->val);
    ds->y = malloc(rows * sizeof *ds->y);
    ds->row_ptr[0] = 0;
    for (uint32_t i = 0; i < rows; i++) {
        for (uint32_t j = 0; j < d; j++) {
            if (ec_rng_uniform(&r) < density) {
                ds->col[nnz] = j;
                ds->val[nnz++] = ec_rng_normal(&r);
            }
        }
        ds->row_ptr[i + 1] = nnz;
        ds->y[i] = ec_rng_uniform(&r) < 0.4 ? 1.0 : -1.0;
    }
    ds->n_rows = rows;
    ds->d = d;
    ds->nnz = nnz;
    ds->label_neg = -1;
    ds->label_pos = 1;
    ds->n_labels = 2;
}

static ec_job base_job(uint32_t workers, ec_loss loss, double lambda1,
                       double lambda2)
{
    ec_job job;

    ec_job_defaults(&job);
    job.workers = workers;
    job.loss = loss;
    job.lambda1 = lambda1;
    job.lambda2 = lambda2;
    return job;
}

/* Logistic on 4 workers with lambda2 relative to lambda_max (1e-2), for
 * the tests of the constants handed to ec_problem_init. */
static ec_job rel_job(void)
{
    ec_job job = base_job(4, EC_LOSS_LOGISTIC, 0, 0.0);

    job.lambda2 = NAN;
    job.lambda2_rel = 1e-2;
    job.algorithm = EC_ALGO_EF21;
    return job;
}

/* A dense, obviously correct P for comparison with the sparse kernels. */
static double dense_value(const ec_dataset *ds, ec_loss loss, double l1,
                          double l2, const double *x)
{
    double s = 0, sq = 0, a1 = 0;

    for (uint32_t i = 0; i < ds->n_rows; i++) {
        double t = 0;
        for (uint64_t p = ds->row_ptr[i]; p < ds->row_ptr[i + 1]; p++)
            t += ds->val[p] * x[ds->col[p]];
        t *= ds->y[i];
        s += loss == EC_LOSS_LOGISTIC ? log(1 + exp(-t)) : 0.5 * (t - 1) * (t - 1);
    }
    for (uint32_t j = 0; j < ds->d; j++) {
        sq += x[j] * x[j];
        a1 += fabs(x[j]);
    }
    return s / ds->n_rows + 0.5 * l2 * sq + l1 * a1;
}

START_TEST(test_value_matches_dense)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    double x[15];
    ec_rng r;

    make_data(&ds, 57, 15, 0.4, 3);
    for (int loss = 0; loss < 2; loss++) {
        ec_job job = base_job(4, (ec_loss)loss, 0.01, 0.1);
        ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
        ec_rng_seed(&r, 9, 1);
        for (int j = 0; j < 15; j++)
            x[j] = ec_rng_normal(&r);
        ck_assert_double_eq_tol(ec_problem_value(&pb, x),
                                dense_value(&ds, (ec_loss)loss, 0.01, 0.1, x),
                                1e-12);
        ec_problem_clear(&pb);
    }
    ec_dataset_clear(&ds);
}
END_TEST

/* Central differences of P (lambda1 = 0) against the analytic gradients:
 * the full one, each shard's (their mean must equal f's), and minibatches. */
START_TEST(test_gradients_finite_differences)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    uint32_t d = 12;
    double x[12], g[12], gs[12], mean[12] = {0}, xp[12];
    ec_rng r;

    make_data(&ds, 50, d, 0.5, 5);
    for (int loss = 0; loss < 2; loss++) {
        ec_job job = base_job(3, (ec_loss)loss, 0.0, 0.05);
        ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
        ec_rng_seed(&r, 11, 2);
        for (uint32_t j = 0; j < d; j++)
            x[j] = 0.5 * ec_rng_normal(&r);
        ec_problem_grad(&pb, x, g);
        for (uint32_t j = 0; j < d; j++) {
            double h = 1e-6, fp, fm;
            memcpy(xp, x, sizeof xp);
            xp[j] += h;
            fp = ec_problem_value(&pb, xp);
            xp[j] -= 2 * h;
            fm = ec_problem_value(&pb, xp);
            ck_assert_double_eq_tol(g[j], (fp - fm) / (2 * h), 1e-7);
        }
        memset(mean, 0, sizeof mean);
        for (uint32_t t = 0; t < pb.n; t++) {
            ec_shard_grad(&pb, t, x, gs);
            for (uint32_t j = 0; j < d; j++)
                mean[j] += gs[j] / pb.n;
        }
        for (uint32_t j = 0; j < d; j++)
            ck_assert_double_eq_tol(mean[j], g[j], 1e-13);

        /* A minibatch of every row of a shard equals the shard gradient,
         * and the difference form equals the difference of the two. */
        for (uint32_t t = 0; t < pb.n; t++) {
            uint32_t rows[64], m = 0;
            double w[12], gx[12], gw[12];
            for (uint32_t i = pb.shards[t].begin; i < pb.shards[t].end; i++)
                rows[m++] = i;
            for (uint32_t j = 0; j < d; j++)
                w[j] = x[j] * 0.3 - 0.1;
            ec_shard_grad(&pb, t, x, gs);
            ec_shard_grad_rows(&pb, t, rows, m, x, NULL, gx);
            for (uint32_t j = 0; j < d; j++)
                ck_assert_double_eq_tol(gx[j], gs[j], 1e-13);
            ec_shard_grad_rows(&pb, t, rows, m, w, NULL, gw);
            ec_shard_grad_rows(&pb, t, rows, m, x, w, gs);
            for (uint32_t j = 0; j < d; j++)
                ck_assert_double_eq_tol(gs[j], gx[j] - gw[j], 1e-13);
        }
        ec_problem_clear(&pb);
    }
    ec_dataset_clear(&ds);
}
END_TEST

START_TEST(test_prox_l1_soft_threshold)
{
    double x[] = {3.0, -3.0, 0.5, -0.5, 1.0, -1.0, 0.0};
    const double want[] = {2.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0};

    ec_prox_l1(x, 7, 1.0);
    for (int j = 0; j < 7; j++)
        ck_assert(x[j] == want[j]);
}
END_TEST

/* The masks of ec_soft_threshold give the bits of the three cases as
 * branches write them: v - t, v + t, or +0 (NaN, -0 and the boundaries
 * included), for thresholds down to the subnormal. */
START_TEST(test_soft_threshold_bits)
{
    const double ts[] = {1.0, 1e-6, 0x1p-1074, 3.5e300};
    const double vs[] = {3.0, -3.0, 0.5, -0.5, 1.0, -1.0, 1e-6, -1e-6,
                         0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY,
                         0x1p-1074, -0x1p-1073, 1.0000000000000002,
                         -1.0000000000000002, 1e308, -1e308};

    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
        for (size_t j = 0; j < sizeof vs / sizeof vs[0]; j++) {
            double t = ts[i], v = vs[j], want, got = ec_soft_threshold(v, t);
            uint64_t wb, gb;

            if (v > t)
                want = v - t;
            else if (v < -t)
                want = v + t;
            else
                want = 0.0;
            memcpy(&wb, &want, sizeof wb);
            memcpy(&gb, &got, sizeof gb);
            ck_assert_msg(wb == gb, "soft threshold of %a at %a: %a, want %a",
                          v, t, got, want);
        }
}
END_TEST

/* Uneven shards: weights make f the plain mean whatever the split. */
START_TEST(test_uneven_shards_keep_f)
{
    ec_dataset ds;
    ec_problem a, b;
    ec_err e = {0};
    double x[8], ga[8], gb[8];

    make_data(&ds, 23, 8, 0.6, 7);
    ec_job j1 = base_job(1, EC_LOSS_LOGISTIC, 0, 0.1);
    ec_job j5 = base_job(5, EC_LOSS_LOGISTIC, 0, 0.1);
    ck_assert_int_eq(ec_problem_init(&a, &ds, &j1, &e), 0);
    ck_assert_int_eq(ec_problem_init(&b, &ds, &j5, &e), 0);
    ck_assert_uint_eq(b.shards[0].end - b.shards[0].begin, 5);
    ck_assert_uint_eq(b.shards[4].end - b.shards[4].begin, 4);
    for (int j = 0; j < 8; j++)
        x[j] = 0.1 * j - 0.3;
    memset(gb, 0, sizeof gb);
    ec_problem_grad(&a, x, ga);
    for (uint32_t t = 0; t < 5; t++) {
        double gs[8];
        ec_shard_grad(&b, t, x, gs);
        for (int j = 0; j < 8; j++)
            gb[j] += gs[j] / 5;
    }
    for (int j = 0; j < 8; j++)
        ck_assert_double_eq_tol(ga[j], gb[j], 1e-14);
    ec_problem_clear(&a);
    ec_problem_clear(&b);
    ec_dataset_clear(&ds);
}
END_TEST

/* The largest eigenvalue of the dense A_S^T A_S of rows [begin, end) (d at
 * most 8), by many power steps. */
static double dense_lmax(const ec_dataset *ds, uint32_t begin, uint32_t end,
                         uint32_t d)
{
    double M[64] = {0}, v[8], w[8], lam = 0;

    for (uint32_t i = begin; i < end; i++)
        for (uint64_t p = ds->row_ptr[i]; p < ds->row_ptr[i + 1]; p++)
            for (uint64_t q = ds->row_ptr[i]; q < ds->row_ptr[i + 1]; q++)
                M[ds->col[p] * d + ds->col[q]] += ds->val[p] * ds->val[q];
    for (uint32_t j = 0; j < d; j++)
        v[j] = 1.0 / (j + 1);
    for (int it = 0; it < 5000; it++) {
        double n2 = 0;
        for (uint32_t r = 0; r < d; r++) {
            w[r] = 0;
            for (uint32_t c = 0; c < d; c++)
                w[r] += M[r * d + c] * v[c];
        }
        for (uint32_t r = 0; r < d; r++)
            n2 += w[r] * w[r];
        lam = sqrt(n2);
        if (lam == 0)
            return 0;
        for (uint32_t r = 0; r < d; r++)
            v[r] = w[r] / lam;
    }
    return lam;
}

/* L_f from the Lanczos method against the largest eigenvalue found by the
 * dense Rayleigh quotient over many random starts, and L_i by definition.
 * The shards' L_bar (of rows that use some of the columns only, so the
 * iteration runs over their support) and L_tilde for EF21, the one method
 * that uses them; NaN for the others. */
START_TEST(test_constants)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    uint32_t d = 6;

    make_data(&ds, 40, d, 0.15, 13);
    ec_job job = base_job(4, EC_LOSS_LOGISTIC, 0, 0.0);
    job.lambda2 = NAN;
    job.lambda2_rel = 1e-2;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    double lam = dense_lmax(&ds, 0, ds.n_rows, d);
    ck_assert_double_eq_tol(pb.lmax_data, 0.25 * lam / ds.n_rows, 1e-9 * lam);
    ck_assert(isnan(pb.L_tilde) && isnan(pb.shards[0].L_bar));
    ck_assert_double_eq_tol(pb.lambda2, 1e-2 * pb.lmax_data, 1e-15);
    ck_assert_double_eq_tol(pb.L_f, pb.lmax_data + pb.lambda2, 1e-15);
    ck_assert_double_eq_tol(pb.kappa, pb.L_f / pb.mu, 1e-9);
    double maxsq = 0;
    for (uint32_t i = 0; i < ds.n_rows; i++) {
        double s = 0;
        for (uint64_t p = ds.row_ptr[i]; p < ds.row_ptr[i + 1]; p++)
            s += ds.val[p] * ds.val[p];
        maxsq = s > maxsq ? s : maxsq;
    }
    ck_assert_double_eq_tol(pb.L, 0.25 * maxsq + pb.lambda2, 1e-12);
    ck_assert(pb.L >= pb.L_f);
    ec_problem_clear(&pb);

    job.algorithm = EC_ALGO_EF21;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    double sumsq = 0;
    int narrow = 0;
    for (uint32_t t = 0; t < pb.n; t++) {
        const ec_shard *sh = &pb.shards[t];
        uint32_t m = sh->end - sh->begin, used = 0;

        for (uint32_t c = 0; c < d; c++) {
            int in = 0;
            for (uint64_t p = ds.row_ptr[sh->begin]; p < ds.row_ptr[sh->end]; p++)
                in |= ds.col[p] == c;
            used += in;
        }
        narrow += used < d;
        double want = sh->weight * 0.25 * dense_lmax(&ds, sh->begin, sh->end, d) / m +
                      pb.lambda2;

        ck_assert_double_eq_tol(sh->L_bar, want, 1e-9 * want);
        sumsq += sh->L_bar * sh->L_bar;
    }
    ck_assert_double_eq_tol(pb.L_tilde, sqrt(sumsq / pb.n), 1e-15);
    ck_assert_msg(narrow > 0, "no shard leaves a column out: the support "
                  "is not exercised");
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

/* The constants given (as an MPI worker rank gets rank 0's) build the
 * same problem bit for bit, and are used rather than computed again: a
 * changed lmax_data or L_bar shows in L_f, lambda2 and L_tilde. */
START_TEST(test_init_given)
{
    ec_dataset ds;
    ec_problem pb, pg;
    ec_problem_given g;
    ec_err e = {0};
    double L_bar[4];

    make_data(&ds, 40, 6, 0.15, 13);
    ec_job job = rel_job();
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    for (uint32_t t = 0; t < pb.n; t++)
        L_bar[t] = pb.shards[t].L_bar;
    g = (ec_problem_given){pb.lmax_data, pb.lmax_steps, L_bar};
    ck_assert_int_eq(ec_problem_init_given(&pg, &ds, &job, &g, &e), 0);
    ck_assert(memcmp(&pg.lmax_data, &pb.lmax_data, sizeof pb.lmax_data) == 0);
    ck_assert_uint_eq(pg.lmax_steps, pb.lmax_steps);
    ck_assert(memcmp(&pg.lambda2, &pb.lambda2, sizeof pb.lambda2) == 0);
    ck_assert(memcmp(&pg.L, &pb.L, sizeof pb.L) == 0);
    ck_assert(memcmp(&pg.L_f, &pb.L_f, sizeof pb.L_f) == 0);
    ck_assert(memcmp(&pg.L_tilde, &pb.L_tilde, sizeof pb.L_tilde) == 0);
    ck_assert(memcmp(&pg.mu, &pb.mu, sizeof pb.mu) == 0);
    ck_assert(memcmp(&pg.P0, &pb.P0, sizeof pb.P0) == 0);
    for (uint32_t t = 0; t < pb.n; t++) {
        ck_assert_uint_eq(pg.shards[t].begin, pb.shards[t].begin);
        ck_assert_uint_eq(pg.shards[t].end, pb.shards[t].end);
        ck_assert(memcmp(&pg.shards[t].L_max, &pb.shards[t].L_max,
                         sizeof(double)) == 0);
        ck_assert(memcmp(&pg.shards[t].L_bar, &pb.shards[t].L_bar,
                         sizeof(double)) == 0);
    }
    ec_problem_clear(&pg);

    g.lmax_data = 2 * pb.lmax_data;
    L_bar[1] *= 3;
    ck_assert_int_eq(ec_problem_init_given(&pg, &ds, &job, &g, &e), 0);
    ck_assert_double_eq(pg.lmax_data, 2 * pb.lmax_data);
    ck_assert_double_eq(pg.lambda2, 2 * pb.lambda2);
    ck_assert_double_eq_tol(pg.L_f, 2 * pb.L_f, 1e-12 * pb.L_f);
    ck_assert_double_eq(pg.shards[1].L_bar, L_bar[1]);
    ck_assert(pg.L_tilde > pb.L_tilde);
    ec_problem_clear(&pg);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

/* A cached lambda_max (the service's, from an earlier job on the same
 * data) builds the problem ec_problem_init builds, bit for bit, and says
 * so; a changed one shows in lmax_data, lambda2 and L_f. A split that
 * reorders the rows runs Lanczos itself: the cached value was found in
 * the file's order. A value that cannot be lambda_max is not taken. */
START_TEST(test_init_lmax)
{
    ec_dataset ds;
    ec_problem pb, pc;
    ec_err e = {0};

    make_data(&ds, 40, 6, 0.15, 13);
    ec_job job = rel_job();
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    ck_assert_int_eq(pb.lmax_cached, 0);
    ck_assert(pb.lmax_steps >= 1);
    ck_assert(memcmp(&(double){0.25 * pb.lambda_max / ds.n_rows}, &pb.lmax_data,
                     sizeof(double)) == 0);
    ck_assert_int_eq(ec_problem_init_lmax(&pc, &ds, &job, pb.lambda_max,
                                          pb.lmax_steps, &e), 0);
    ck_assert_int_eq(pc.lmax_cached, 1);
    ck_assert_uint_eq(pc.lmax_steps, pb.lmax_steps);
    ck_assert(memcmp(&pc.lambda_max, &pb.lambda_max, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.lmax_data, &pb.lmax_data, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.lambda2, &pb.lambda2, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.L_f, &pb.L_f, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.L_tilde, &pb.L_tilde, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.P0, &pb.P0, sizeof(double)) == 0);
    ec_problem_clear(&pc);

    ck_assert_int_eq(ec_problem_init_lmax(&pc, &ds, &job, 2 * pb.lambda_max, 7, &e), 0);
    ck_assert_int_eq(pc.lmax_cached, 1);
    ck_assert_uint_eq(pc.lmax_steps, 7);
    ck_assert_double_eq(pc.lmax_data, 2 * pb.lmax_data);
    ck_assert_double_eq(pc.lambda2, 2 * pb.lambda2);
    ck_assert_double_eq_tol(pc.L_f, 2 * pb.L_f, 1e-12 * pb.L_f);
    ec_problem_clear(&pc);

    ck_assert_int_eq(ec_problem_init_lmax(&pc, &ds, &job, NAN, 7, &e), 0);
    ck_assert_int_eq(pc.lmax_cached, 0);
    ck_assert(memcmp(&pc.lambda_max, &pb.lambda_max, sizeof(double)) == 0);
    ec_problem_clear(&pc);
    ec_problem_clear(&pb);

    job.split = EC_SPLIT_SHUFFLED;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    ck_assert_int_eq(ec_problem_init_lmax(&pc, &ds, &job, 2 * pb.lambda_max, 7, &e), 0);
    ck_assert_int_eq(pc.lmax_cached, 0);
    ck_assert(memcmp(&pc.lambda_max, &pb.lambda_max, sizeof(double)) == 0);
    ck_assert(memcmp(&pc.L_f, &pb.L_f, sizeof(double)) == 0);
    ec_problem_clear(&pc);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

/* P* by Newton (lambda1 = 0) and by restarted FISTA (lambda1 > 0): the
 * minimiser satisfies its optimality condition, and the two methods agree
 * on a smooth problem when forced onto the same one. */
START_TEST(test_p_star_optimality)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    double g[10];

    make_data(&ds, 80, 10, 0.5, 17);
    ec_job job = base_job(4, EC_LOSS_LOGISTIC, 0, 1e-3);
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    ck_assert_int_eq(ec_problem_solve(&pb, &e), 0);
    ck_assert_str_eq(pb.solve_method, "newton");
    ec_problem_grad(&pb, pb.x_star, g);
    for (int j = 0; j < 10; j++)
        ck_assert_double_le(fabs(g[j]), 1e-10);
    ck_assert_double_le(pb.solve_bound, 1e-13 * fabs(pb.P_star));
    double newton_p = pb.P_star;

    /* The same smooth problem through the prox-gradient path: a lambda1
     * so small that its prox changes nothing still selects that method.
     * The copy shares x_star with pb, which frees it once. */
    {
        ec_problem copy = pb;
        copy.lambda1 = 1e-300;
        ck_assert_int_eq(ec_problem_solve(&copy, &e), 0);
        ck_assert_str_eq(copy.solve_method, "fista-restart");
        ck_assert_double_le(fabs(copy.P_star - newton_p), 1e-12 * newton_p);
    }
    ec_problem_clear(&pb);

    /* With lambda1 the subgradient condition: |g_j| <= lambda1 where
     * x_j = 0, g_j = -lambda1 sign(x_j) elsewhere. */
    ec_job j2 = base_job(4, EC_LOSS_SQUARED, 0.02, 1e-2);
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &j2, &e), 0);
    ck_assert_int_eq(ec_problem_solve(&pb, &e), 0);
    ec_problem_grad(&pb, pb.x_star, g);
    int zeros = 0;
    for (int j = 0; j < 10; j++) {
        if (pb.x_star[j] == 0.0) {
            zeros++;
            ck_assert_double_le(fabs(g[j]), 0.02 + 1e-7);
        } else {
            ck_assert_double_eq_tol(g[j], -0.02 * (pb.x_star[j] > 0 ? 1 : -1), 1e-7);
        }
    }
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

START_TEST(test_init_errors)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};

    make_data(&ds, 10, 4, 0.8, 19);
    ec_job job = base_job(11, EC_LOSS_LOGISTIC, 0, 0.1);
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "workers must be in 1..10 (the dataset's rows; got 11)"));
    job = base_job(2, EC_LOSS_LOGISTIC, 0, 0.0);
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), EC_EINVAL);
    /* lambda2 = 0 is taken for least squares alone (docs/algorithms.md,
     * "General convex problems: lambda2 = 0"). */
    ck_assert_ptr_nonnull(strstr(e.msg, "lambda2 = 0 is taken for the squared loss"));
    ec_dataset_clear(&ds);
}
END_TEST

/* mushrooms, lambda2_rel 1e-3: the constants and P* printed in the notes. */
START_TEST(test_mushrooms_p_star)
{
    char path[1024];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_err e = {0};
    double g[112], gn;

    ck_assert_int_eq(ec_libsvm_read(tu_data_path("mushrooms", path, sizeof path),
                                    NULL, &ds, &e), 0);
    ec_job job = base_job(20, EC_LOSS_LOGISTIC, 0, NAN);
    job.lambda2_rel = 1e-3;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    ck_assert_int_eq(ec_problem_solve(&pb, &e), 0);
    ck_assert_double_eq_tol(pb.kappa, 1001.0, 1e-6);
    ec_problem_grad(&pb, pb.x_star, g);
    gn = 0;
    for (int j = 0; j < 112; j++)
        gn += g[j] * g[j];
    /* P - P* <= ||g||^2 / (2 mu): relative accuracy far below 1e-12. */
    ck_assert_double_le(gn / (2 * pb.mu), 1e-13 * pb.P_star);
    ck_assert_double_eq_tol(pb.P0, log(2.0), 1e-15);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

/* P* of a smooth problem wider than Newton's dense Hessian allows (d >
 * 4096) by Newton-CG: its certificate holds, the gradient vanishes, and
 * restarted FISTA forced onto the same problem finds the same P*. */
START_TEST(test_p_star_newton_cg)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    uint32_t d = 5000;
    double *g = malloc(d * sizeof *g), gn = 0;

    make_data(&ds, 600, d, 0.003, 23);
    for (int loss = 0; loss < 2; loss++) {
        ec_job job = base_job(4, loss ? EC_LOSS_SQUARED : EC_LOSS_LOGISTIC, 0, NAN);
        job.lambda2_rel = 1e-3;
        ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
        ck_assert_int_eq(ec_problem_solve(&pb, &e), 0);
        ck_assert_str_eq(pb.solve_method, "newton-cg");
        ck_assert_int_gt(pb.solve_products, 0);
        ec_problem_grad(&pb, pb.x_star, g);
        gn = 0;
        for (uint32_t j = 0; j < d; j++)
            gn += g[j] * g[j];
        ck_assert_double_le(gn / (2 * pb.mu), 1e-13 * fabs(pb.P_star));
        ck_assert_double_le(pb.solve_bound, 1e-13 * fabs(pb.P_star));
        {
            ec_problem copy = pb;
            copy.lambda1 = 1e-300;
            ck_assert_int_eq(ec_problem_solve(&copy, &e), 0);
            ck_assert_str_eq(copy.solve_method, "fista-restart");
            printf("d = %u, %s: newton-cg %d steps, %d Hessian products; "
                   "fista %d iterations; P* %.17g vs %.17g\n", d,
                   loss ? "squared" : "logistic", pb.solve_iters,
                   pb.solve_products, copy.solve_iters, pb.P_star, copy.P_star);
            ck_assert_double_le(fabs(copy.P_star - pb.P_star), 1e-12 * fabs(pb.P_star));
        }
        ec_problem_clear(&pb);
    }
    free(g);
    ec_dataset_clear(&ds);
}
END_TEST

/* The largest eigenvalue of the symmetric d x d matrix M (destroyed), by
 * cyclic Jacobi rotations until the off-diagonal part is negligible: an
 * eigen-solve that shares nothing with the engine's Krylov method. */
static double jacobi_lmax(double *M, uint32_t d)
{
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, diag = 0;

        for (uint32_t p = 0; p < d; p++)
            for (uint32_t q = 0; q < d; q++)
                *(p == q ? &diag : &off) += M[p * d + q] * M[p * d + q];
        if (off <= 1e-32 * diag)
            break;
        for (uint32_t p = 0; p + 1 < d; p++)
            for (uint32_t q = p + 1; q < d; q++) {
                double apq = M[p * d + q], th, t, c, sn;

                if (apq == 0.0)
                    continue;
                th = (M[q * d + q] - M[p * d + p]) / (2 * apq);
                t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1));
                c = 1 / sqrt(t * t + 1);
                sn = t * c;
                for (uint32_t k = 0; k < d; k++) {      /* columns p, q */
                    double mkp = M[k * d + p], mkq = M[k * d + q];
                    M[k * d + p] = c * mkp - sn * mkq;
                    M[k * d + q] = sn * mkp + c * mkq;
                }
                for (uint32_t k = 0; k < d; k++) {      /* rows p, q */
                    double mpk = M[p * d + k], mqk = M[q * d + k];
                    M[p * d + k] = c * mpk - sn * mqk;
                    M[q * d + k] = sn * mpk + c * mqk;
                }
            }
    }
    {
        double best = M[0];
        for (uint32_t p = 1; p < d; p++)
            if (M[p * d + p] > best)
                best = M[p * d + p];
        return best;
    }
}

/* lambda_max of real data's A^T A by the engine's Lanczos method against
 * the dense Jacobi eigen-solve, to 1e-12 relative: a9a and mushrooms, the
 * whole data (L_f) and one EF21 shard (L_bar). */
START_TEST(test_lmax_real_data)
{
    static const char *const names[] = {"a9a", "mushrooms"};
    char path[1024];

    for (int n = 0; n < 2; n++) {
        ec_dataset ds = {0};
        ec_problem pb;
        ec_err e = {0};
        uint32_t d;
        double *M, want, got;

        ck_assert_int_eq(ec_libsvm_read(tu_data_path(names[n], path, sizeof path),
                                        NULL, &ds, &e), 0);
        d = ds.d;
        ec_job job = base_job(20, EC_LOSS_LOGISTIC, 0, NAN);
        job.lambda2_rel = 1e-3;
        job.algorithm = EC_ALGO_EF21;
        ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
        for (int part = 0; part < 2; part++) {
            uint32_t b = part ? pb.shards[3].begin : 0;
            uint32_t en = part ? pb.shards[3].end : ds.n_rows;

            M = calloc((size_t)d * d, sizeof *M);
            ck_assert_ptr_nonnull(M);
            for (uint32_t i = b; i < en; i++)
                for (uint64_t p = ds.row_ptr[i]; p < ds.row_ptr[i + 1]; p++)
                    for (uint64_t q = ds.row_ptr[i]; q < ds.row_ptr[i + 1]; q++)
                        M[ds.col[p] * d + ds.col[q]] += ds.val[p] * ds.val[q];
            want = jacobi_lmax(M, d);
            free(M);
            got = part ? (pb.shards[3].L_bar - pb.lambda2) * (en - b) /
                             (pb.shards[3].weight * 0.25)
                       : pb.lmax_data * ds.n_rows / 0.25;
            printf("%s %s: lambda_max %.17g, Jacobi %.17g, relative %.2e\n",
                   names[n], part ? "shard 3" : "all rows", got, want,
                   fabs(got - want) / want);
            ck_assert_double_eq_tol(got, want, 1e-12 * want);
        }
        ec_problem_clear(&pb);
        ec_dataset_clear(&ds);
    }
}
END_TEST

/* Every split is a permutation of the rows in blocks of at least one row,
 * the same for the same seed and another for another seed. */
START_TEST(test_split_deterministic)
{
    ec_split split = (ec_split)_i;
    ec_dataset ds;
    ec_err e = {0};
    const uint32_t N = 301, n = 7;
    uint32_t perm[301], perm2[301], sizes[7], sizes2[7], total = 0;
    uint8_t seen[301] = {0};
    ec_job job = base_job(n, EC_LOSS_LOGISTIC, 0, 0.1);

    make_data(&ds, N, 5, 0.5, 11);
    job.split = split;
    job.seed = 3;
    ck_assert_int_eq(ec_split_rows(&ds, &job, perm, sizes, &e), 0);
    ck_assert_int_eq(ec_split_rows(&ds, &job, perm2, sizes2, &e), 0);
    ck_assert_mem_eq(perm, perm2, sizeof perm);
    ck_assert_mem_eq(sizes, sizes2, sizeof sizes);
    for (uint32_t i = 0; i < N; i++) {
        ck_assert_uint_lt(perm[i], N);
        ck_assert_uint_eq(seen[perm[i]]++, 0);
    }
    for (uint32_t t = 0; t < n; t++) {
        ck_assert_uint_ge(sizes[t], 1);
        total += sizes[t];
    }
    ck_assert_uint_eq(total, N);
    job.seed = 4;
    ck_assert_int_eq(ec_split_rows(&ds, &job, perm2, sizes2, &e), 0);
    if (split == EC_SPLIT_CONTIGUOUS)
        ck_assert_mem_eq(perm, perm2, sizeof perm);
    else
        ck_assert(memcmp(perm, perm2, sizeof perm) != 0);
    ec_dataset_clear(&ds);
}
END_TEST

/* label_skew on mushrooms: equal blocks, and every shard holds one label
 * but the one where the negatives end. */
START_TEST(test_split_label_skew_balance)
{
    char path[1024];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_err e = {0};
    ec_job job = base_job(20, EC_LOSS_LOGISTIC, 0, NAN);
    uint32_t mixed = 0, positives = 0, npos = 0;

    ck_assert_int_eq(ec_libsvm_read(tu_data_path("mushrooms", path, sizeof path),
                                    NULL, &ds, &e), 0);
    job.lambda2_rel = 1e-3;
    job.split = EC_SPLIT_LABEL_SKEW;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
    for (uint32_t i = 0; i < ds.n_rows; i++)
        npos += ds.y[i] > 0;
    for (uint32_t t = 0; t < 20; t++) {
        const ec_shard *sh = &pb.shards[t];
        uint32_t m = sh->end - sh->begin, pos = 0;

        for (uint32_t i = sh->begin; i < sh->end; i++)
            pos += pb.ds->y[i] > 0;
        ck_assert_uint_eq(pos, sh->positives);
        ck_assert_uint_le(m - ds.n_rows / 20, 1);
        mixed += pos > 0 && pos < m;
        positives += pos;
    }
    ck_assert_uint_le(mixed, 1);
    ck_assert_uint_eq(positives, npos);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
}
END_TEST

/* Dirichlet: alpha shapes the shards' label balance (tiny alpha: nearly
 * every shard one label; huge: every shard near the whole's balance). */
START_TEST(test_split_dirichlet_alpha)
{
    ec_dataset ds;
    ec_problem pb;
    ec_err e = {0};
    ec_job job = base_job(10, EC_LOSS_LOGISTIC, 0, 0.1);
    double spread[2];
    const double alphas[2] = {1e-3, 1e5};

    make_data(&ds, 4000, 3, 0.5, 5);
    job.split = EC_SPLIT_DIRICHLET;
    for (int a = 0; a < 2; a++) {
        double lo = 1, hi = 0;

        job.split_alpha = alphas[a];
        ck_assert_msg(ec_problem_init(&pb, &ds, &job, &e) == 0, "%s", e.msg);
        ck_assert(pb.split_alpha == alphas[a]);
        for (uint32_t t = 0; t < 10; t++) {
            const ec_shard *sh = &pb.shards[t];
            double f = (double)sh->positives / (sh->end - sh->begin);

            ck_assert_uint_ge(sh->end - sh->begin, 1);
            lo = f < lo ? f : lo;
            hi = f > hi ? f : hi;
        }
        spread[a] = hi - lo;
        ec_problem_clear(&pb);
    }
    ck_assert_double_gt(spread[0], 0.9);
    ck_assert_double_lt(spread[1], 0.1);
    job.split_alpha = 0.0;
    ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), EC_EINVAL);
    ck_assert_ptr_nonnull(strstr(e.msg, "split_alpha must be > 0"));
    ec_dataset_clear(&ds);
}
END_TEST

/* zeta*^2 on mushrooms, 20 workers, lambda2_rel 1e-3: the file's order
 * makes the shards far apart (8.4e-3), a shuffle nearly iid (3.3e-4 with
 * seed 1); and it is (1/n) sum ||grad f_tau(x*)||^2. */
START_TEST(test_zeta_contiguous_vs_shuffled)
{
    char path[1024];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_err e = {0};
    ec_job job = base_job(20, EC_LOSS_LOGISTIC, 0, NAN);
    double zeta[2], g[112];

    ck_assert_int_eq(ec_libsvm_read(tu_data_path("mushrooms", path, sizeof path),
                                    NULL, &ds, &e), 0);
    job.lambda2_rel = 1e-3;
    for (int s = 0; s < 2; s++) {
        double sum = 0;

        job.split = s ? EC_SPLIT_SHUFFLED : EC_SPLIT_CONTIGUOUS;
        ck_assert_int_eq(ec_problem_init(&pb, &ds, &job, &e), 0);
        ck_assert(isnan(pb.zeta_star));
        ck_assert_int_eq(ec_problem_solve(&pb, &e), 0);
        zeta[s] = pb.zeta_star;
        for (uint32_t t = 0; t < 20; t++) {
            ec_shard_grad(&pb, t, pb.x_star, g);
            for (int j = 0; j < 112; j++)
                sum += g[j] * g[j];
        }
        ck_assert_double_eq_tol(zeta[s], sum / 20, 1e-12 * sum);
        ec_problem_clear(&pb);
    }
    ck_assert_double_eq_tol(zeta[0], 8.40e-3, 0.01e-3);
    ck_assert_double_lt(zeta[1], 5e-4);
    ck_assert_double_gt(zeta[0] / zeta[1], 10);
    ec_dataset_clear(&ds);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("problem");
    TCase *tc = tcase_create("core");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_value_matches_dense);
    tcase_add_test(tc, test_gradients_finite_differences);
    tcase_add_test(tc, test_prox_l1_soft_threshold);
    tcase_add_test(tc, test_soft_threshold_bits);
    tcase_add_test(tc, test_uneven_shards_keep_f);
    tcase_add_test(tc, test_constants);
    tcase_add_test(tc, test_init_given);
    tcase_add_test(tc, test_init_lmax);
    tcase_add_test(tc, test_p_star_optimality);
    tcase_add_test(tc, test_init_errors);
    tcase_add_test(tc, test_mushrooms_p_star);
    tcase_add_test(tc, test_lmax_real_data);
    tcase_add_test(tc, test_p_star_newton_cg);
    tcase_add_loop_test(tc, test_split_deterministic, 0, EC_SPLIT_COUNT);
    tcase_add_test(tc, test_split_label_skew_balance);
    tcase_add_test(tc, test_split_dirichlet_alpha);
    tcase_add_test(tc, test_zeta_contiguous_vs_shuffled);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
