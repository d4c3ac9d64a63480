/*
 * The paper's comparison, regenerated: ECLK against its baselines on the
 * real datasets (rounds, bits and seconds to relative gaps 1e-4, 1e-6 and
 * 1e-9, median of 3 seeds), the acceleration sweep over kappa, ECLK's p
 * trade-off, the step-multiplier sweep, the tuned comparison (every method
 * at its best multiplier of a grid, beside its default) and the convergence
 * plots, and the fair comparison (every method at its defaults and tuned on
 * the smoothness multiplier, with each method's own oracle and with full
 * local gradients, on several seeds: fair.md, fair-DATASET.md). Every
 * run is in process (ec_run_inproc) and a pure function of its job, so the
 * same seed gives the same rounds; the runs are spread over --jobs forked
 * processes that take tasks from a shared counter.
 *
 *   bench_paper [--quick] [--out DIR] [--jobs N]
 *               [--part tables|accel|p|steps|tuned|fair|accel-family|slopes]
 *               [--fair-seeds N] [--fair-grid M,M,...] [--fair-extends FILE]
 *               [--fair-datasets NAME,...] [--fair-compressors topk,randk,top1]
 *               [--fair-lambdas 1e-3,1e-4] [--fair-methods NAME,...]
 *               [--slope-seeds N] [--slope-kappas 3|4]
 *
 * accel-family is the accelerated comparison (accel-family.md,
 * accel-family-DATASET.md): ECLK, ADIANA, ADEF, EControl, L-Katyusha,
 * EC-LSVRG (Qian) and the DIANA/EF21 family under the fair part's
 * protocol and options. slopes: rounds to 1e-6 against kappa for each
 * accelerated method, a slope per seed (accel-slopes.md, .svg).
 *
 * The fair part's defaults: 5 seeds, the grid x0.5 .. x32 in factors of 2,
 * mushrooms, a9a and w8a, topk and randk with k = ceil(d/20), lambda2_rel
 * 1e-3 and 1e-4, every method of the part; --fair-lambdas and
 * --fair-methods narrow a run to the cells to be widened or filled in.
 * The grid contains x1 (the default run) unless --fair-extends names the
 * file whose x1 runs a widening extends: then its x1 cells say "not in
 * this grid" and the slow default runs are not run again.
 *
 * --part regenerates one part's files alone; --only, --seeds and --scale
 * are for development (one dataset's tables, fewer seeds, smaller budgets).
 * --quick is the CI subset: it exits 1 unless ECLK reaches 1e-6 on
 * mushrooms within its budget, the same seed gives the same run twice, and
 * a deterministic combination gives the same run for two seeds.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"
#include "plot.h"

#define NTARGETS 3
static const double targets[NTARGETS] = {1e-4, 1e-6, 1e-9};
#define NSEEDS 3
#define MAX_CURVE 400        /* points kept per run for the plots */
#define PROBE_ROUNDS 300     /* prefix compared by the determinism checks */

enum part { PART_TABLE, PART_DETCHECK, PART_ACCEL, PART_P, PART_STEP,
            PART_STEP_SMALL, PART_REPRO, PART_TUNED, PART_FAIR, PART_FAMILY,
            PART_SLOPE };

/* A stop of our own: the run's rate could not reach its next target. */
#define STOP_STALLED 100

/* Compressor slots of the main table. */
enum comp_slot { CS_NONE, CS_TOPK1, CS_TOPKD, CS_RANDK1, CS_RANDKD, CS_DITHER,
                 CS_COUNT };

struct dataset_info {
    const char *name;        /* file in ECOPT_DATA_DIR */
    const char *label;
    uint64_t rounds_full;    /* R for algorithms with full local gradients */
    uint64_t rounds_stoch;   /* R for the stochastic ones */
    uint32_t eval_full, eval_stoch;
    ec_dataset ds;
};

static struct dataset_info datasets[] = {
    {"a5a", "a5a", 4000, 20000, 10, 50, {0}},
    {"mushrooms", "mushrooms", 4000, 20000, 10, 50, {0}},
    {"a9a", "a9a", 2000, 12000, 10, 50, {0}},
    {"w8a", "w8a", 1200, 8000, 10, 50, {0}},
    {"madelon.gz", "madelon", 1500, 10000, 10, 50, {0}},
};
#define NDATASETS (sizeof datasets / sizeof datasets[0])

static const double table_lambdas[] = {1e-3, 1e-4};
static const double accel_lambdas[] = {1e-2, 1e-3, 1e-4, 1e-5};
static const double p_factors[] = {0.125, 0.25, 0.5, 1, 2, 4, 8};
static const double step_mults[] = {0.5, 1, 2, 4, 8};
/* ECLK with random compressors, below its theory step (same count). */
static const double small_mults[] = {0.0625, 0.125, 0.25, 0.5, 1};
/* The tuned comparison's grid (what an experiment's "tune" runs); x1 is
 * the default run. */
static const double tune_mults[] = {0.25, 0.5, 1, 2, 4, 8, 16, 32, 64};
#define NTUNE (sizeof tune_mults / sizeof tune_mults[0])
static const char *const accel_algos[] = {"eclk", "ec-lsvrg", "ec-gd-diana",
                                          "ef21"};

/* The table's algorithms, compressing ones first. */
static const ec_algo_id table_algos[] = {
    EC_ALGO_ECLK, EC_ALGO_EC_LSVRG, EC_ALGO_EC_SGD_DIANA, EC_ALGO_EC_GD_DIANA,
    EC_ALGO_EC_GD, EC_ALGO_EC_SGD, EC_ALGO_EF21, EC_ALGO_LKATYUSHA, EC_ALGO_GD};
#define NALGOS (sizeof table_algos / sizeof table_algos[0])

/* One solved problem: a dataset at one lambda2_rel (20 workers, logistic,
 * contiguous shards). Solved before the fork and shared copy-on-write. */
struct prob {
    int ds;
    double lambda2_rel;
    ec_problem pb;
};

static struct prob probs[16];
static int nprobs;

struct task {
    int part;
    int prob;
    ec_algo_id algo;
    int slot;                /* enum comp_slot */
    ec_comp_spec comp;
    uint64_t seed;
    double p;                /* NaN: the default */
    double step_mult;
    uint64_t max_rounds;
    uint32_t eval_every;
    double target;           /* the run stops here */
    int stall_rule;          /* stop early when the next target is out of reach */
    int aux;                 /* the index of a sweep's value */
    unsigned id;             /* creation order: the order of the tables */
    /* The fair comparison's: the smoothness multiplier (NaN: unset), the
     * oracle (1: batch "full") and ECLK's rule (-1: the default). */
    double smooth_mult;
    int oracle;
    int rule;
};

struct result {
    int done;
    int stop;                /* ec_stop, or STOP_STALLED */
    uint64_t rounds;
    double final_gap;
    double final_bits;
    double theory_step, p_used, delta, kappa;
    int hit[NTARGETS];
    uint64_t hit_rounds[NTARGETS];
    double hit_bits[NTARGETS], hit_secs[NTARGETS], hit_evals[NTARGETS];
    double hit_paper[NTARGETS];   /* uplink bits as each method's paper counts */
    double peak_gap;         /* the largest relative gap of any row */
    uint64_t restarts;       /* eclk: the guard's restarts */
    /* The row at PROBE_ROUNDS (or the last one before a stop), for the
     * determinism checks: compared bit for bit. */
    uint64_t probe_round;
    double probe_gap, probe_bits;
    unsigned ncurve, stride;
    double curve[MAX_CURVE][3];   /* round, bits up, relative gap */
};

struct shared {
    atomic_uint next;
    unsigned ntasks;
};

static struct task *tasks;
static unsigned ntasks, cap_tasks;
static struct result *results;
static struct shared *shared;

static int quick;
static char command[1024];

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_paper: %s: %s\n", what, msg);
    exit(1);
}

static struct task *task_add(void)
{
    if (ntasks == cap_tasks) {
        cap_tasks = cap_tasks ? 2 * cap_tasks : 256;
        tasks = realloc(tasks, cap_tasks * sizeof *tasks);
        if (!tasks)
            die("tasks", "out of memory");
    }
    memset(&tasks[ntasks], 0, sizeof tasks[ntasks]);
    tasks[ntasks].p = NAN;
    tasks[ntasks].step_mult = 1.0;
    tasks[ntasks].target = targets[NTARGETS - 1];
    tasks[ntasks].id = ntasks;
    tasks[ntasks].smooth_mult = NAN;
    tasks[ntasks].rule = -1;
    return &tasks[ntasks++];
}

static int prob_get(int ds, double lambda2_rel)
{
    for (int i = 0; i < nprobs; i++)
        if (probs[i].ds == ds && probs[i].lambda2_rel == lambda2_rel)
            return i;
    if (nprobs == (int)(sizeof probs / sizeof probs[0]))
        die("problems", "too many");
    probs[nprobs].ds = ds;
    probs[nprobs].lambda2_rel = lambda2_rel;
    return nprobs++;
}

static uint32_t k_frac(uint32_t d)
{
    return (d + 19) / 20;    /* ceil(d / 20) */
}

static ec_comp_spec slot_spec(int slot, uint32_t d)
{
    ec_comp_spec c = {EC_COMP_NONE, 0, 0};

    switch (slot) {
    case CS_TOPK1: c.type = EC_COMP_TOPK; c.k = 1; break;
    case CS_TOPKD: c.type = EC_COMP_TOPK; c.k = k_frac(d); break;
    case CS_RANDK1: c.type = EC_COMP_RANDK; c.k = 1; break;
    case CS_RANDKD: c.type = EC_COMP_RANDK; c.k = k_frac(d); break;
    case CS_DITHER: c.type = EC_COMP_DITHER; c.s = 1; break;
    default: break;
    }
    return c;
}

static void comp_text(const ec_comp_spec *c, char *buf, size_t len)
{
    switch (c->type) {
    case EC_COMP_TOPK: snprintf(buf, len, "topk k=%u", c->k); break;
    case EC_COMP_RANDK: snprintf(buf, len, "randk k=%u", c->k); break;
    case EC_COMP_DITHER: snprintf(buf, len, "dither s=%u", c->s); break;
    default: snprintf(buf, len, "none");
    }
}

/* Full local gradients every round: these get the smaller round budget. */
static int algo_full(ec_algo_id a)
{
    return a == EC_ALGO_GD || a == EC_ALGO_EC_GD || a == EC_ALGO_EC_GD_DIANA ||
           a == EC_ALGO_EF21;
}

/* No randomness in the algorithm or in its compressor: the seed cannot
 * change the run (checked, not assumed: see PART_DETCHECK). */
static int deterministic(ec_algo_id a, const ec_comp_spec *c)
{
    if (a == EC_ALGO_GD)
        return 1;
    return (a == EC_ALGO_EC_GD || a == EC_ALGO_EF21) && c->type == EC_COMP_TOPK;
}

/* ---- one run ------------------------------------------------------- */

struct watch {
    const struct task *t;
    struct result *r;
    double best;             /* smallest gap seen */
    unsigned nbest;
    double best_at[64];      /* the best gap at checkpoint rounds */
    uint64_t best_round[64];
};

/* Records targets, the probe row and the curve; applies the stall rule:
 * from a quarter of the budget on, if the best gap of the last half of the
 * rounds so far, at the rate it improved over that half, would still be
 * ten times above the next target at the budget, the run stops. */
static int watch_row(void *ctx, const ec_metric *row)
{
    struct watch *w = ctx;
    struct result *r = w->r;
    const struct task *t = w->t;

    for (int j = 0; j < NTARGETS; j++)
        if (!r->hit[j] && row->rel_gap <= targets[j]) {
            r->hit[j] = 1;
            r->hit_rounds[j] = row->round;
            r->hit_bits[j] = row->bits_up;
            r->hit_secs[j] = row->seconds;
            r->hit_evals[j] = row->grad_evals;
            r->hit_paper[j] = row->paper_bits;
        }
    if (!(row->rel_gap <= r->peak_gap))
        r->peak_gap = isnan(row->rel_gap) ? INFINITY : row->rel_gap;
    if (row->round <= PROBE_ROUNDS) {
        r->probe_round = row->round;
        r->probe_gap = row->rel_gap;
        r->probe_bits = row->bits_up;
    }
    if (r->ncurve == MAX_CURVE) {
        for (unsigned i = 0; i < MAX_CURVE / 2; i++)
            memcpy(r->curve[i], r->curve[2 * i], sizeof r->curve[i]);
        r->ncurve = MAX_CURVE / 2;
        r->stride *= 2;
    }
    if ((row->round / t->eval_every) % r->stride == 0) {
        r->curve[r->ncurve][0] = (double)row->round;
        r->curve[r->ncurve][1] = row->bits_up;
        r->curve[r->ncurve][2] = row->rel_gap;
        r->ncurve++;
    }
    if (row->rel_gap < w->best)
        w->best = row->rel_gap;
    /* Checkpoints of the best gap at rounds that double (0, e, 2e, 4e, ...),
     * so the best gap of about half the rounds ago is at hand. */
    if (w->nbest < 64 &&
        (w->nbest == 0 ||
         (row->round > 0 && row->round >= 2 * w->best_round[w->nbest - 1]))) {
        w->best_round[w->nbest] = row->round;
        w->best_at[w->nbest] = w->best;
        w->nbest++;
    }
    if (!t->stall_rule || row->round < t->max_rounds / 4 || row->round < 100)
        return 0;
    {
        double next = 0, cp_best = NAN;
        uint64_t cp_round = 0;

        for (int j = 0; j < NTARGETS; j++)
            if (!r->hit[j]) {
                next = targets[j];
                break;
            }
        if (next == 0)
            return 0;
        for (unsigned i = 0; i < w->nbest; i++)
            if (w->best_round[i] <= row->round / 2) {
                cp_best = w->best_at[i];
                cp_round = w->best_round[i];
            }
        if (isnan(cp_best) || !(w->best > 0) || cp_round == 0)
            return 0;
        {
            double ratio = fmax(cp_best / w->best, 1.0);
            double periods = (double)(t->max_rounds - row->round) /
                             (double)(row->round - cp_round);
            double projected = w->best / pow(ratio, periods);

            if (projected > 10 * next) {
                r->stop = STOP_STALLED;
                return 1;
            }
        }
    }
    return 0;
}

static void run_task(unsigned i)
{
    const struct task *t = &tasks[i];
    struct result *r = &results[i];
    const struct prob *pr = &probs[t->prob];
    struct watch w = {t, r, INFINITY, 0, {0}, {0}};
    ec_job job;
    ec_params prm;
    ec_summary sum;
    ec_err e = {0};

    memset(r, 0, sizeof *r);
    r->stride = 1;
    r->stop = -1;
    ec_job_defaults(&job);
    snprintf(job.dataset, sizeof job.dataset, "%s", datasets[pr->ds].name);
    job.lambda2_rel = pr->lambda2_rel;
    job.workers = 20;
    job.algorithm = t->algo;
    job.compressor = t->comp;
    job.p = t->p;
    job.step_multiplier = t->step_mult;
    job.smoothness_multiplier = t->smooth_mult;
    if (t->oracle)
        job.batch = EC_JOB_BATCH_FULL;
    job.eclk_rule = t->rule;
    job.max_rounds = t->max_rounds;
    job.eval_every = t->eval_every;
    job.target = t->target;
    job.seed = t->seed;
    job.max_seconds = 1e9;   /* round budgets only: runs must reproduce */
    if (ec_params_resolve(&job, &pr->pb, &prm, &e) < 0 ||
        ec_run_inproc(&pr->pb, &prm, &job, watch_row, &w, &sum, &e) < 0) {
        fprintf(stderr, "bench_paper: task %u (%s %s): %s\n", i,
                datasets[pr->ds].label, ec_algo_name(t->algo), e.msg);
        _exit(1);
    }
    if (r->stop != STOP_STALLED)
        r->stop = (int)sum.stop;
    r->rounds = sum.rounds;
    r->final_gap = sum.last.rel_gap;
    r->final_bits = sum.last.bits_up;
    r->theory_step = prm.theory_step;
    r->p_used = prm.p;
    r->delta = prm.delta;
    r->kappa = pr->pb.kappa;
    r->restarts = sum.eclk.restarts;
    r->done = 1;
}

static void worker_loop(unsigned id)
{
    unsigned i;

    while ((i = atomic_fetch_add(&shared->next, 1)) < shared->ntasks) {
        const struct task *t = &tasks[i];
        char cb[32];
        struct timespec a, b;

        clock_gettime(CLOCK_MONOTONIC, &a);
        run_task(i);
        clock_gettime(CLOCK_MONOTONIC, &b);
        comp_text(&t->comp, cb, sizeof cb);
        fprintf(stderr, "[%u %4u/%u] %-9s %-5g %-12s %-12s%s seed %llu x%g: %llu rounds, gap %.3g (%.1f s)\n",
                id, i + 1, shared->ntasks, datasets[probs[t->prob].ds].label,
                probs[t->prob].lambda2_rel, ec_algo_name(t->algo), cb,
                t->oracle ? " full" : "", (unsigned long long)t->seed,
                isnan(t->smooth_mult) ? t->step_mult : t->smooth_mult,
                (unsigned long long)results[i].rounds, results[i].final_gap,
                (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
    }
}

/* ---- the task list --------------------------------------------------- */

static void add_table_tasks(int ds_first, int ds_last, int nlam, int nseeds,
                            const int *algo_mask)
{
    for (int ds = ds_first; ds <= ds_last; ds++)
        for (int l = 0; l < nlam; l++) {
            int pi = prob_get(ds, table_lambdas[l]);

            for (unsigned a = 0; a < NALGOS; a++) {
                ec_algo_id algo = table_algos[a];
                int full = algo_full(algo);

                if (algo_mask && !algo_mask[a])
                    continue;
                for (int slot = 0; slot < CS_COUNT; slot++) {
                    ec_comp_spec c = slot_spec(slot, datasets[ds].ds.d);

                    if (!ec_algo_compresses(algo) != (slot == CS_NONE))
                        continue;
                    for (int s = 1; s <= nseeds + 1; s++) {
                        struct task *t;

                        if (s > 1 && deterministic(algo, &c)) {
                            if (s > 2)
                                continue;
                            /* Seed 2 for PROBE_ROUNDS only: the check that
                             * the seed changes nothing. */
                            t = task_add();
                            t->part = PART_DETCHECK;
                            t->max_rounds = PROBE_ROUNDS;
                        } else if (s <= nseeds) {
                            t = task_add();
                            t->part = PART_TABLE;
                            t->max_rounds = full ? datasets[ds].rounds_full
                                                 : datasets[ds].rounds_stoch;
                            t->stall_rule = 1;
                        } else
                            continue;
                        t->prob = pi;
                        t->algo = algo;
                        t->slot = slot;
                        t->comp = c;
                        t->seed = (uint64_t)s;
                        t->eval_every = full ? datasets[ds].eval_full
                                             : datasets[ds].eval_stoch;
                    }
                }
            }
        }
}

#define DS_MUSHROOMS 1

static uint64_t accel_budget(const char *algo, int l)
{
    /* Full-gradient rounds cost a pass over the data each. */
    static const uint64_t full[] = {5000, 20000, 40000, 40000};
    static const uint64_t stoch[] = {20000, 60000, 150000, 150000};

    if (quick)
        return l == 0 ? 5000 : 20000;
    return strcmp(algo, "ec-gd-diana") == 0 || strcmp(algo, "ef21") == 0
               ? full[l] : stoch[l];
}

static void add_accel_tasks(int nlam)
{
    static const uint32_t evals[] = {10, 10, 20, 50};

    for (int l = 0; l < nlam; l++) {
        int pi = prob_get(DS_MUSHROOMS, accel_lambdas[l]);

        for (int a = 0; a < 4; a++) {
            struct task *t = task_add();

            t->part = PART_ACCEL;
            t->prob = pi;
            ec_algo_from_name(accel_algos[a], &t->algo);
            t->comp = slot_spec(CS_TOPKD, datasets[DS_MUSHROOMS].ds.d);
            t->seed = 1;
            t->max_rounds = accel_budget(accel_algos[a], l);
            t->eval_every = evals[l];
            t->target = 1e-6;
            t->stall_rule = 1;
            t->aux = l;
        }
    }
}

/* ECLK's p around delta, for topk k = 1 and k = ceil(d/20), mushrooms at
 * lambda2_rel 1e-3. */
static void add_p_tasks(int nseeds)
{
    int pi = prob_get(DS_MUSHROOMS, 1e-3);
    uint32_t d = datasets[DS_MUSHROOMS].ds.d;
    int slots[2] = {CS_TOPK1, CS_TOPKD};

    for (int k = 0; k < 2; k++) {
        ec_comp_spec c = slot_spec(slots[k], d);
        double delta = (double)c.k / d;

        for (unsigned f = 0; f < sizeof p_factors / sizeof p_factors[0]; f++)
            for (int s = 1; s <= nseeds; s++) {
                struct task *t = task_add();

                t->part = PART_P;
                t->prob = pi;
                t->algo = EC_ALGO_ECLK;
                t->slot = slots[k];
                t->comp = c;
                t->p = fmin(delta * p_factors[f], 1.0);
                t->seed = (uint64_t)s;
                t->max_rounds = 60000;
                t->eval_every = 10;
                t->target = 1e-6;
                t->stall_rule = 1;
                t->aux = (int)f;
            }
    }
}

static void add_step_tasks(void)
{
    int pi = prob_get(DS_MUSHROOMS, 1e-3);
    uint32_t d = datasets[DS_MUSHROOMS].ds.d;

    for (unsigned a = 0; a < NALGOS; a++)
        for (unsigned m = 0; m < sizeof step_mults / sizeof step_mults[0]; m++) {
            struct task *t = task_add();

            t->part = PART_STEP;
            t->prob = pi;
            t->algo = table_algos[a];
            t->slot = ec_algo_compresses(t->algo) ? CS_TOPKD : CS_NONE;
            t->comp = slot_spec(t->slot, d);
            t->step_mult = step_mults[m];
            t->seed = 1;
            t->max_rounds = algo_full(t->algo) ? 5000 : 20000;
            t->eval_every = algo_full(t->algo) ? 10 : 50;
            t->target = 1e-6;
            t->stall_rule = 1;
            t->aux = (int)m;
        }
}

#define DS_A9A 2
#define DS_MADELON 4
/* The rows of the small-step table: where ECLK's theory step fails. */
#define NSMALL_SLOTS 5
static const struct { int ds; double lambda2_rel; int slot; }
    small_rows[NSMALL_SLOTS] = {
        {DS_A9A, 1e-4, CS_RANDK1}, {DS_A9A, 1e-4, CS_RANDKD},
        {DS_A9A, 1e-4, CS_DITHER}, {DS_MADELON, 1e-3, CS_TOPK1},
        {DS_MADELON, 1e-3, CS_TOPKD}};

static void add_small_step_tasks(void)
{
    for (int c = 0; c < NSMALL_SLOTS; c++)
        for (unsigned m = 0; m < sizeof small_mults / sizeof small_mults[0]; m++) {
            struct task *t = task_add();

            t->part = PART_STEP_SMALL;
            t->prob = prob_get(small_rows[c].ds, small_rows[c].lambda2_rel);
            t->algo = EC_ALGO_ECLK;
            t->slot = small_rows[c].slot;
            t->comp = slot_spec(t->slot, datasets[small_rows[c].ds].ds.d);
            t->step_mult = small_mults[m];
            t->seed = 1;
            t->max_rounds = datasets[small_rows[c].ds].rounds_stoch;
            t->eval_every = datasets[small_rows[c].ds].eval_stoch;
            t->target = 1e-6;
            t->stall_rule = 1;
            t->aux = (int)m;
        }
}

/* The tuned comparison: mushrooms and a9a at both lambdas, every algorithm
 * of the tables (topk k = ceil(d/20), or none) at every multiplier of
 * tune_mults, seed 1, to 1e-6 within the tables' budgets. */
static void add_tuned_tasks(void)
{
    static const int tds[2] = {DS_MUSHROOMS, DS_A9A};

    for (int di = 0; di < 2; di++)
        for (int l = 0; l < 2; l++) {
            int ds = tds[di], pi = prob_get(ds, table_lambdas[l]);

            for (unsigned a = 0; a < NALGOS; a++)
                for (unsigned m = 0; m < NTUNE; m++) {
                    struct task *t = task_add();
                    int full = algo_full(table_algos[a]);

                    t->part = PART_TUNED;
                    t->prob = pi;
                    t->algo = table_algos[a];
                    t->slot = ec_algo_compresses(t->algo) ? CS_TOPKD : CS_NONE;
                    t->comp = slot_spec(t->slot, datasets[ds].ds.d);
                    t->step_mult = tune_mults[m];
                    t->seed = 1;
                    t->max_rounds = full ? datasets[ds].rounds_full
                                         : datasets[ds].rounds_stoch;
                    t->eval_every = full ? datasets[ds].eval_full
                                         : datasets[ds].eval_stoch;
                    t->target = 1e-6;
                    t->stall_rule = 1;
                    t->aux = (int)m;
                }
        }
}

/* The quick subset's own checks: ECLK twice with one seed. */
static void add_repro_tasks(void)
{
    int pi = prob_get(DS_MUSHROOMS, 1e-3);

    for (int rep = 0; rep < 2; rep++) {
        struct task *t = task_add();

        t->part = PART_REPRO;
        t->prob = pi;
        t->algo = EC_ALGO_ECLK;
        t->slot = CS_RANDKD;
        t->comp = slot_spec(CS_RANDKD, datasets[DS_MUSHROOMS].ds.d);
        t->seed = 7;
        t->max_rounds = 30000;
        t->eval_every = 10;
        t->target = 1e-6;
        t->aux = rep;
    }
}

/* Longest first, so the two processes finish together. */
static double task_cost(const struct task *t)
{
    const struct dataset_info *di = &datasets[probs[t->prob].ds];
    double nnz = (double)di->ds.nnz;

    return (double)t->max_rounds * nnz *
           (algo_full(t->algo) || ec_algo_full_local(t->algo) || t->oracle
                ? 1.2 : 2.0 / t->eval_every + 0.05);
}

static int cost_cmp(const void *a, const void *b)
{
    double ca = task_cost(a), cb = task_cost(b);

    return ca < cb ? 1 : ca > cb ? -1 : 0;
}

/* The runs went longest first; the tables list them as they were made. */
static void restore_order(void)
{
    struct task *t2 = malloc(ntasks * sizeof *t2);
    struct result *r2 = malloc(ntasks * sizeof *r2);

    if (!t2 || !r2)
        die("results", "out of memory");
    for (unsigned i = 0; i < ntasks; i++) {
        t2[tasks[i].id] = tasks[i];
        r2[tasks[i].id] = results[i];
    }
    tasks = t2;
    results = r2;
}

/* ---- output ---------------------------------------------------------- */

static FILE *out_open(const char *dir, const char *name)
{
    char path[1200];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "w")))
        die(path, strerror(errno));
    return f;
}

static void svg_write(const char *dir, const char *name, const plot_spec *sp,
                      const plot_series *s, size_t ns)
{
    size_t len = 0;
    char *svg = plot_svg(sp, s, ns, &len);
    FILE *f;

    if (!svg)
        die(name, "plot_svg failed");
    f = out_open(dir, name);
    if (fwrite(svg, 1, len, f) != len || fclose(f) != 0)
        die(name, "write failed");
    free(svg);
}

static void header(FILE *f, const char *title)
{
    fprintf(f, "# %s\n\nCommand: `%s`\n\n", title, command);
}

static int dcmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median3(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, dcmp);
    return v[n / 2];
}

/* The results of one table row: every seed (deterministic ones repeat
 * seed 1, after the check). */
static int row_results(unsigned first, const struct result **rs)
{
    int n = 0;
    const struct task *t0 = &tasks[first];

    for (unsigned i = 0; i < ntasks; i++) {
        const struct task *t = &tasks[i];

        if (t->part == PART_TABLE && t->prob == t0->prob &&
            t->algo == t0->algo && t->slot == t0->slot)
            rs[n++] = &results[i];
    }
    if (n == 1 && deterministic(t0->algo, &t0->comp))
        while (n < NSEEDS && !quick)
            rs[n++] = rs[0];
    return n;
}

static void stop_text(const struct result *r, uint64_t budget, char *buf,
                      size_t len)
{
    switch (r->stop) {
    case EC_STOP_DIVERGED:
        snprintf(buf, len, "diverged at round %llu",
                 (unsigned long long)r->rounds);
        break;
    case STOP_STALLED:
        snprintf(buf, len, "not reached in %llu rounds (stopped at %llu, gap %.2g: "
                 "its rate would not get there)",
                 (unsigned long long)budget, (unsigned long long)r->rounds,
                 r->final_gap);
        break;
    default:
        snprintf(buf, len, "not reached in %llu rounds (final gap %.2g)",
                 (unsigned long long)budget, r->final_gap);
    }
}

/* "rounds / bits / s", median over the seeds, or why not; returns whether
 * the median run reached the target. */
static int target_cell(const struct result **rs, int n, int j,
                        uint64_t budget, char *buf, size_t len)
{
    double ro[NSEEDS], bi[NSEEDS], se[NSEEDS], gaps[NSEEDS];
    int reached = 0;

    for (int s = 0; s < n; s++) {
        ro[s] = rs[s]->hit[j] ? (double)rs[s]->hit_rounds[j] : INFINITY;
        bi[s] = rs[s]->hit[j] ? rs[s]->hit_bits[j] : INFINITY;
        se[s] = rs[s]->hit[j] ? rs[s]->hit_secs[j] : INFINITY;
        gaps[s] = rs[s]->final_gap;
        reached += rs[s]->hit[j];
    }
    if (isinf(median3(ro, n))) {
        /* Describe the seed with the median final gap. */
        double g = median3(gaps, n);

        for (int s = 0; s < n; s++)
            if (rs[s]->final_gap == g || isnan(g)) {
                stop_text(rs[s], budget, buf, len);
                return 0;
            }
        snprintf(buf, len, "not reached");
        return 0;
    }
    snprintf(buf, len, "%.0f / %.3g / %.2f%s", median3(ro, n), median3(bi, n),
             median3(se, n), reached < n ? " (1 seed not)" : "");
    return 1;
}

static void write_tables(const char *dir)
{
    for (unsigned ds = 0; ds < NDATASETS; ds++) {
        FILE *f = NULL;

        for (unsigned l = 0; l < 2; l++) {
            int printed = 0;

            for (unsigned i = 0; i < ntasks; i++) {
                const struct task *t = &tasks[i];
                const struct prob *pr = &probs[t->prob];
                const struct result *rs[NSEEDS];
                char cb[32], cell[NTARGETS][160];
                int n;

                if (t->part != PART_TABLE || t->seed != 1 ||
                    pr->ds != (int)ds || pr->lambda2_rel != table_lambdas[l])
                    continue;
                if (!f) {
                    char name[64], title[128];

                    snprintf(name, sizeof name, "targets-%s.md", datasets[ds].label);
                    snprintf(title, sizeof title,
                             "%s: rounds, bits and seconds to relative gap 1e-4, 1e-6, 1e-9",
                             datasets[ds].label);
                    f = out_open(dir, name);
                    header(f, title);
                    fprintf(f,
                            "%s: N = %u rows, d = %u. Logistic loss, 20 workers, contiguous "
                            "split, batch 1, default steps (docs/algorithms.md, \"Defaults\"), "
                            "in process.\n"
                            "Round budget R: %llu for gd, ec-gd, ec-gd-diana, ef21 (a full "
                            "local gradient per round), %llu for the others; evaluation "
                            "every %u and %u rounds respectively (rounds are multiples of it).\n"
                            "Each cell: rounds / bits up per worker / wall seconds, the "
                            "median of %d seeds (a run that missed counts as infinite). "
                            "Runs of gd, and of ec-gd and ef21 with topk, have no randomness: "
                            "they ran once; a second seed was run for %d rounds and compared "
                            "bit for bit (see the check below). Wall seconds were measured "
                            "with 2 runs at a time on a shared 2-core machine.\n"
                            "\"stopped at r\": from R/4 on, a run whose best gap, improving "
                            "for the rest of the budget at the rate it improved over about "
                            "the last half of its rounds, would still be 10x above its next "
                            "target at R was stopped there (a stall, a noise floor, or "
                            "divergence too slow for the engine's 1e6 rule). \"not reached\" "
                            "in a later column: not reached either.\n",
                            datasets[ds].label, datasets[ds].ds.n_rows, datasets[ds].ds.d,
                            (unsigned long long)datasets[ds].rounds_full,
                            (unsigned long long)datasets[ds].rounds_stoch,
                            datasets[ds].eval_full, datasets[ds].eval_stoch,
                            quick ? 1 : NSEEDS, PROBE_ROUNDS);
                }
                if (!printed) {
                    fprintf(f, "\n## lambda2_rel = %g (kappa %.4g)\n\n", table_lambdas[l],
                            pr->pb.kappa);
                    fprintf(f, "| algorithm | compressor | to 1e-4 | to 1e-6 | to 1e-9 |\n"
                               "|---|---|---|---|---|\n");
                    printed = 1;
                }
                n = row_results(i, rs);
                for (int j = 0, prev = 1; j < NTARGETS; j++) {
                    if (prev)
                        prev = target_cell(rs, n, j, t->max_rounds, cell[j],
                                           sizeof cell[j]);
                    else
                        snprintf(cell[j], sizeof cell[j], "not reached");
                }
                comp_text(&t->comp, cb, sizeof cb);
                fprintf(f, "| %s | %s | %s | %s | %s |\n", ec_algo_name(t->algo), cb,
                        cell[0], cell[1], cell[2]);
            }
        }
        if (f)
            fclose(f);
    }
}

/* Compares every deterministic check run with its seed-1 run. Returns the
 * number of mismatches; writes the check's table. */
static int write_detchecks(const char *dir)
{
    FILE *f = out_open(dir, "determinism.md");
    int bad = 0, n = 0;

    header(f, "Deterministic combinations: does the seed change them?");
    fprintf(f, "gd, and ec-gd and ef21 with topk, draw no random numbers. Each was "
               "run with seed 2 for %d rounds and its row at the last evaluation "
               "up to round %d compared bit for bit with seed 1's.\n\n"
               "| dataset | lambda2_rel | algorithm | compressor | round | rel gap seed 1 | seed 2 | same |\n"
               "|---|---|---|---|---|---|---|---|\n",
            PROBE_ROUNDS, PROBE_ROUNDS);
    for (unsigned i = 0; i < ntasks; i++) {
        const struct task *t = &tasks[i];
        const struct result *c = &results[i], *r1 = NULL;
        char cb[32];
        int same;

        if (t->part != PART_DETCHECK)
            continue;
        for (unsigned k = 0; k < ntasks; k++)
            if (tasks[k].part == PART_TABLE && tasks[k].prob == t->prob &&
                tasks[k].algo == t->algo && tasks[k].slot == t->slot &&
                tasks[k].seed == 1)
                r1 = &results[k];
        if (!r1)
            continue;
        same = r1->probe_round == c->probe_round &&
               memcmp(&r1->probe_gap, &c->probe_gap, sizeof c->probe_gap) == 0 &&
               memcmp(&r1->probe_bits, &c->probe_bits, sizeof c->probe_bits) == 0;
        bad += !same;
        n++;
        comp_text(&t->comp, cb, sizeof cb);
        fprintf(f, "| %s | %g | %s | %s | %llu | %.17g | %.17g | %s |\n",
                datasets[probs[t->prob].ds].label, probs[t->prob].lambda2_rel,
                ec_algo_name(t->algo), cb, (unsigned long long)c->probe_round,
                r1->probe_gap, c->probe_gap, same ? "yes" : "NO");
    }
    fprintf(f, "\n%d of %d identical.\n", n - bad, n);
    fclose(f);
    return bad;
}

static void write_curves(const char *dir)
{
    for (unsigned i = 0; i < ntasks; i++) {
        const struct task *t0 = &tasks[i];
        plot_series s[NALGOS];
        double *xs[NALGOS][2], *ys[NALGOS];
        char names[NALGOS][48], title[160], file[96], cb[32];
        size_t ns = 0;
        const struct prob *pr = &probs[t0->prob];

        /* One plot per problem, drawn at its first table task. */
        if (t0->part != PART_TABLE || t0->seed != 1 || t0->algo != table_algos[0] ||
            t0->slot != CS_TOPKD)
            continue;
        for (unsigned k = 0; k < ntasks; k++) {
            const struct task *t = &tasks[k];
            const struct result *r = &results[k];

            if (t->part != PART_TABLE || t->seed != 1 || t->prob != t0->prob ||
                (t->slot != CS_TOPKD && t->slot != CS_NONE))
                continue;
            xs[ns][0] = malloc(r->ncurve * sizeof(double) + 1);
            xs[ns][1] = malloc(r->ncurve * sizeof(double) + 1);
            ys[ns] = malloc(r->ncurve * sizeof(double) + 1);
            if (!xs[ns][0] || !xs[ns][1] || !ys[ns])
                die("curves", "out of memory");
            for (unsigned p = 0; p < r->ncurve; p++) {
                xs[ns][0][p] = r->curve[p][0];
                xs[ns][1][p] = r->curve[p][1];
                ys[ns][p] = r->curve[p][2];
            }
            comp_text(&t->comp, cb, sizeof cb);
            snprintf(names[ns], sizeof names[ns], "%s (%s)", ec_algo_name(t->algo),
                     cb);
            s[ns].name = names[ns];
            s[ns].y = ys[ns];
            s[ns].n = r->ncurve;
            ns++;
        }
        for (int axis = 0; axis < 2; axis++) {
            plot_spec sp = {0};

            for (size_t k = 0; k < ns; k++)
                s[k].x = xs[k][axis];
            snprintf(title, sizeof title,
                     "%s, lambda2_rel %g, 20 workers, topk k=%u: relative gap vs %s (seed 1)",
                     datasets[pr->ds].label, pr->lambda2_rel, t0->comp.k,
                     axis ? "bits up per worker" : "rounds");
            sp.title = title;
            sp.xlabel = axis ? "bits sent up per worker" : "rounds";
            sp.ylabel = "relative gap (P - P*) / (P(x0) - P*)";
            sp.ylog = 1;
            sp.xlog = axis;   /* bits span decades (dense init rounds) */
            snprintf(file, sizeof file, "curves-%s-%g-%s.svg", datasets[pr->ds].label,
                     pr->lambda2_rel, axis ? "bits" : "rounds");
            svg_write(dir, file, &sp, s, ns);
        }
        for (size_t k = 0; k < ns; k++) {
            free(xs[k][0]);
            free(xs[k][1]);
            free(ys[k]);
        }
    }
}

static int fit_slope(const double *x, const double *y, int n, double *slope)
{
    double mx = 0, my = 0, sxx = 0, sxy = 0;

    if (n < 2)
        return -1;
    for (int i = 0; i < n; i++) {
        mx += log(x[i]) / n;
        my += log(y[i]) / n;
    }
    for (int i = 0; i < n; i++) {
        sxx += (log(x[i]) - mx) * (log(x[i]) - mx);
        sxy += (log(x[i]) - mx) * (log(y[i]) - my);
    }
    *slope = sxy / sxx;
    return 0;
}

static void write_accel(const char *dir, int nlam, double slopes[4], int npts[4])
{
    FILE *f = out_open(dir, "accel.md");
    double kx[4][4], ry[4][4];
    plot_series s[4];
    char names[4][64];
    plot_spec sp = {0};

    header(f, "Acceleration: rounds to relative gap 1e-6 as kappa grows");
    fprintf(f, "mushrooms, logistic, 20 workers, contiguous split, topk k = %u "
               "(ceil(d/20)), batch 1, default steps, seed 1. Budgets per lambda2_rel: "
               "ec-gd-diana and ef21 (a full local gradient per round) ",
            k_frac(datasets[DS_MUSHROOMS].ds.d));
    for (int l = 0; l < nlam; l++)
        fprintf(f, "%s%llu", l ? ", " : "", (unsigned long long)accel_budget("ef21", l));
    fprintf(f, "; eclk and ec-lsvrg ");
    for (int l = 0; l < nlam; l++)
        fprintf(f, "%s%llu", l ? ", " : "", (unsigned long long)accel_budget("eclk", l));
    fprintf(f, " rounds.\nThe slope is the least-squares fit of log(rounds) on "
               "log(kappa) over the points that reached 1e-6: 1/2 for an accelerated "
               "method, 1 for a non-accelerated one.\n\n| algorithm |");
    for (int l = 0; l < nlam; l++) {
        for (unsigned i = 0; i < ntasks; i++)
            if (tasks[i].part == PART_ACCEL && tasks[i].aux == l) {
                fprintf(f, " kappa %.4g |", results[i].kappa);
                break;
            }
    }
    fprintf(f, " slope |\n|---|");
    for (int l = 0; l <= nlam; l++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (int a = 0; a < 4; a++) {
        npts[a] = 0;
        fprintf(f, "| %s |", accel_algos[a]);
        for (unsigned i = 0; i < ntasks; i++) {
            const struct task *t = &tasks[i];
            const struct result *r = &results[i];
            char buf[160];

            if (t->part != PART_ACCEL || strcmp(ec_algo_name(t->algo), accel_algos[a]))
                continue;
            if (r->hit[1]) {
                kx[a][npts[a]] = r->kappa;
                ry[a][npts[a]] = (double)r->hit_rounds[1];
                npts[a]++;
                fprintf(f, " %llu |", (unsigned long long)r->hit_rounds[1]);
            } else {
                stop_text(r, t->max_rounds, buf, sizeof buf);
                fprintf(f, " %s |", buf);
            }
        }
        if (fit_slope(kx[a], ry[a], npts[a], &slopes[a]) == 0)
            fprintf(f, " %.2f (%d points) |\n", slopes[a], npts[a]);
        else {
            slopes[a] = NAN;
            fprintf(f, " n/a (%d point%s) |\n", npts[a], npts[a] == 1 ? "" : "s");
        }
        if (isnan(slopes[a]))
            snprintf(names[a], sizeof names[a], "%s (no slope: %d point%s)",
                     accel_algos[a], npts[a], npts[a] == 1 ? "" : "s");
        else
            snprintf(names[a], sizeof names[a], "%s (slope %.2f)", accel_algos[a],
                     slopes[a]);
        s[a].name = names[a];
        s[a].x = kx[a];
        s[a].y = ry[a];
        s[a].n = (size_t)npts[a];
    }
    fprintf(f, "\nPlot: `accel.svg`.\n");
    fclose(f);
    sp.title = "mushrooms, topk k=ceil(d/20): rounds to relative gap 1e-6 against kappa";
    sp.xlabel = "kappa = L_f / mu";
    sp.ylabel = "rounds to 1e-6";
    sp.xlog = sp.ylog = 1;
    svg_write(dir, "accel.svg", &sp, s, 4);
}

static void write_p(const char *dir, int nseeds)
{
    FILE *f = out_open(dir, "p-tradeoff.md");
    uint32_t d = datasets[DS_MUSHROOMS].ds.d;
    int slots[2] = {CS_TOPK1, CS_TOPKD};
    const unsigned nf = sizeof p_factors / sizeof p_factors[0];
    double px[2][8], by[2][8];
    size_t np[2] = {0, 0};
    plot_series s[2];
    char names[2][64];
    plot_spec sp = {0};

    header(f, "ECLK: bits to relative gap 1e-6 as p varies around delta = k/d");
    fprintf(f, "mushrooms (d = %u), lambda2_rel 1e-3, logistic, 20 workers, contiguous "
               "split, batch 1, default steps for each p, budget 60000 rounds; median of %d "
               "seeds. The default p is max(b/m, delta) = delta here. Bits are uplink bits "
               "per worker, the dense gradients of the coin rounds included.\n",
            d, nseeds);
    for (int k = 0; k < 2; k++) {
        ec_comp_spec c = slot_spec(slots[k], d);
        double best = INFINITY;
        unsigned best_f = 0;

        fprintf(f, "\n## topk k = %u (delta = %.4g)\n\n"
                   "| p / delta | p | rounds to 1e-6 | bits up to 1e-6 | seeds reached |\n"
                   "|---|---|---|---|---|\n",
                c.k, (double)c.k / d);
        for (unsigned fi = 0; fi < nf; fi++) {
            double ro[NSEEDS], bi[NSEEDS], p = NAN;
            const struct result *last = NULL;
            int n = 0, reached = 0;
            uint64_t budget = 0;

            for (unsigned i = 0; i < ntasks; i++) {
                const struct task *t = &tasks[i];
                const struct result *r = &results[i];

                if (t->part != PART_P || t->slot != slots[k] || t->aux != (int)fi)
                    continue;
                ro[n] = r->hit[1] ? (double)r->hit_rounds[1] : INFINITY;
                bi[n] = r->hit[1] ? r->hit_bits[1] : INFINITY;
                reached += r->hit[1];
                p = t->p;
                budget = t->max_rounds;
                last = r;
                n++;
            }
            if (!n)
                continue;
            median3(ro, n);
            median3(bi, n);
            if (isinf(bi[n / 2])) {
                char buf[160];

                stop_text(last, budget, buf, sizeof buf);
                fprintf(f, "| %g | %.4g | %s | | %d of %d |\n", p_factors[fi], p, buf,
                        reached, n);
            } else {
                fprintf(f, "| %g | %.4g | %.0f | %.4g | %d of %d |\n", p_factors[fi], p,
                        ro[n / 2], bi[n / 2], reached, n);
                px[k][np[k]] = p;
                by[k][np[k]] = bi[n / 2];
                np[k]++;
                if (bi[n / 2] < best) {
                    best = bi[n / 2];
                    best_f = fi;
                }
            }
        }
        if (isfinite(best))
            fprintf(f, "\nFewest bits at p = %g delta.\n", p_factors[best_f]);
        snprintf(names[k], sizeof names[k], "topk k=%u (delta %.3g)", c.k,
                 (double)c.k / d);
        s[k].name = names[k];
        s[k].x = px[k];
        s[k].y = by[k];
        s[k].n = np[k];
    }
    fprintf(f, "\nPlot: `p-tradeoff.svg`.\n");
    fclose(f);
    sp.title = "ECLK on mushrooms, lambda2_rel 1e-3: bits up per worker to 1e-6 against p";
    sp.xlabel = "p (probability of a dense refresh round)";
    sp.ylabel = "bits up per worker to 1e-6";
    sp.xlog = sp.ylog = 1;
    svg_write(dir, "p-tradeoff.svg", &sp, s, 2);
}

static void write_steps(const char *dir)
{
    FILE *f = out_open(dir, "steps.md");
    const unsigned nm = sizeof step_mults / sizeof step_mults[0];

    header(f, "Step multipliers: what converges, what diverges");
    fprintf(f, "mushrooms, lambda2_rel 1e-3, logistic, 20 workers, contiguous split, "
               "batch 1, topk k = %u for the compressing methods (none for lkatyusha "
               "and gd), seed 1. Step = multiplier x the algorithm's default step "
               "(docs/algorithms.md, \"Defaults\"). \"converged\": reached relative "
               "gap 1e-6 (rounds "
               "given); \"diverged\": the engine stopped it (gap not finite, or above "
               "1e6 times the start); otherwise not reached, with the final gap. "
               "Budgets: 5000 rounds for gd, ec-gd, ec-gd-diana, ef21; 20000 for the "
               "others.\n\n| algorithm | compressor | default step |",
            k_frac(datasets[DS_MUSHROOMS].ds.d));
    for (unsigned m = 0; m < nm; m++)
        fprintf(f, " x%g |", step_mults[m]);
    fprintf(f, "\n|---|---|---|");
    for (unsigned m = 0; m < nm; m++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (unsigned a = 0; a < NALGOS + NSMALL_SLOTS; a++) {
        int first = 1;
        int part = a < NALGOS ? PART_STEP : PART_STEP_SMALL;
        ec_algo_id algo = a < NALGOS ? table_algos[a] : EC_ALGO_ECLK;
        int slot = a >= NALGOS ? small_rows[a - NALGOS].slot
                   : ec_algo_compresses(algo) ? CS_TOPKD : CS_NONE;
        int prob = a >= NALGOS ? prob_get(small_rows[a - NALGOS].ds,
                                          small_rows[a - NALGOS].lambda2_rel)
                               : prob_get(DS_MUSHROOMS, 1e-3);

        if (a == NALGOS) {
            fprintf(f, "\n## Smaller steps for ECLK where the plain L-Katyusha constants failed\n\n"
                       "a9a at lambda2_rel 1e-4 with randk and dither, madelon at "
                       "1e-3 with topk (where ECLK did not reach 1e-6 before its "
                       "defaults accounted for delta), seed 1, budgets %llu (a9a) "
                       "and %llu (madelon) rounds, the same rules; the step is "
                       "the multiplier times the default step (for ECLK's online "
                       "rule, the step it starts with).\n\n"
                       "| problem | compressor | default step |",
                    (unsigned long long)datasets[DS_A9A].rounds_stoch,
                    (unsigned long long)datasets[DS_MADELON].rounds_stoch);
            for (unsigned m = 0; m < nm; m++)
                fprintf(f, " x%g |", small_mults[m]);
            fprintf(f, "\n|---|---|---|");
            for (unsigned m = 0; m < nm; m++)
                fprintf(f, "---|");
            fprintf(f, "\n");
        }

        for (unsigned i = 0; i < ntasks; i++) {
            const struct task *t = &tasks[i];
            const struct result *r = &results[i];
            char buf[160], cb[32];

            if (t->part != part || t->algo != algo || t->slot != slot ||
                t->prob != prob)
                continue;
            if (first) {
                comp_text(&t->comp, cb, sizeof cb);
                if (part == PART_STEP)
                    fprintf(f, "| %s | %s | %.4g |", ec_algo_name(t->algo), cb,
                            r->theory_step);
                else
                    fprintf(f, "| eclk, %s %g | %s | %.4g |",
                            datasets[probs[prob].ds].label, probs[prob].lambda2_rel,
                            cb, r->theory_step);
                first = 0;
            }
            if (r->hit[1])
                fprintf(f, " converged (%llu) |", (unsigned long long)r->hit_rounds[1]);
            else if (r->stop == EC_STOP_DIVERGED)
                fprintf(f, " diverged at %llu |", (unsigned long long)r->rounds);
            else {
                stop_text(r, t->max_rounds, buf, sizeof buf);
                fprintf(f, " %s%s |", buf, r->final_gap > 1 ? ", above the start" : "");
            }
        }
        if (!first)
            fprintf(f, "\n");
    }
    fclose(f);
}

/* Fewer rounds to 1e-6, ties by fewer bits: what "best" means here and in
 * an experiment's "tune". */
static int better(const struct result *a, const struct result *b)
{
    if (!a->hit[1])
        return 0;
    if (!b || !b->hit[1])
        return 1;
    return a->hit_rounds[1] < b->hit_rounds[1] ||
           (a->hit_rounds[1] == b->hit_rounds[1] && a->hit_bits[1] < b->hit_bits[1]);
}

static void reached_text(const struct result *r, uint64_t budget, char *buf, size_t len)
{
    if (r->hit[1])
        snprintf(buf, len, "%llu / %.3g / %.2f", (unsigned long long)r->hit_rounds[1],
                 r->hit_bits[1], r->hit_secs[1]);
    else
        stop_text(r, budget, buf, len);
}

static void write_tuned(const char *dir)
{
    FILE *f = out_open(dir, "tuned.md");

    header(f, "The tuned comparison: every method at its best step multiplier, beside its default");
    fprintf(f, "mushrooms and a9a, logistic, 20 workers, contiguous split, batch 1, "
               "topk k = ceil(d/20) for the compressing methods (none for lkatyusha and "
               "gd), seed 1, target relative gap 1e-6, the budgets and stall rule of the "
               "targets tables. Each method ran at step multipliers");
    for (unsigned m = 0; m < NTUNE; m++)
        fprintf(f, "%s %g", m ? "," : "", tune_mults[m]);
    fprintf(f, " times its default step (docs/algorithms.md, \"Defaults\"); x1 is "
               "the default run. "
               "Best = fewest rounds to 1e-6, ties by fewer bits (the rule of an "
               "experiment's `tune`). Cells: rounds / bits up per worker / wall seconds. "
               "A best at the edge of the grid (x%g or x%g) may not be the best step.\n",
            tune_mults[0], tune_mults[NTUNE - 1]);
    for (int di = 0; di < 2; di++)
        for (int l = 0; l < 2; l++) {
            int ds = di ? DS_A9A : DS_MUSHROOMS;
            int pi = prob_get(ds, table_lambdas[l]);
            const struct result *win_def = NULL, *win_tun = NULL;
            const struct result *cwin_def = NULL, *cwin_tun = NULL;
            ec_algo_id wd = EC_ALGO_GD, wt = EC_ALGO_GD, cwd = EC_ALGO_GD, cwt = EC_ALGO_GD;
            const struct result *eclk_def = NULL, *eclk_tun = NULL;
            int printed = 0;

            for (unsigned a = 0; a < NALGOS; a++) {
                const struct result *def = NULL, *best = NULL;
                double best_m = NAN;
                uint64_t budget = 0;
                char cb[32], c1[200], c2[200], ratio[32], bm[32] = "-";

                for (unsigned i = 0; i < ntasks; i++) {
                    const struct task *t = &tasks[i];

                    if (t->part != PART_TUNED || t->prob != pi || t->algo != table_algos[a])
                        continue;
                    if (t->step_mult == 1.0)
                        def = &results[i];
                    if (better(&results[i], best)) {
                        best = &results[i];
                        best_m = t->step_mult;
                    }
                    budget = t->max_rounds;
                    comp_text(&t->comp, cb, sizeof cb);
                }
                if (!def)
                    continue;
                if (!printed) {
                    fprintf(f, "\n## %s, lambda2_rel %g (kappa %.4g)\n\n"
                               "| algorithm | compressor | default step | default (x1) | "
                               "best multiplier | tuned | default / tuned rounds |\n"
                               "|---|---|---|---|---|---|---|\n",
                            datasets[ds].label, table_lambdas[l], probs[pi].pb.kappa);
                    printed = 1;
                }
                reached_text(def, budget, c1, sizeof c1);
                if (best) {
                    snprintf(bm, sizeof bm, "x%g", best_m);
                    snprintf(c2, sizeof c2, "%llu / %.3g / %.2f",
                             (unsigned long long)best->hit_rounds[1], best->hit_bits[1],
                             best->hit_secs[1]);
                    if (def->hit[1])
                        snprintf(ratio, sizeof ratio, "%.2f",
                                 (double)def->hit_rounds[1] / (double)best->hit_rounds[1]);
                    else
                        snprintf(ratio, sizeof ratio, "default not reached");
                } else {
                    snprintf(c2, sizeof c2, "no multiplier reached 1e-6");
                    snprintf(ratio, sizeof ratio, "-");
                }
                fprintf(f, "| %s | %s | %.4g | %s | %s | %s | %s |\n",
                        ec_algo_name(table_algos[a]), cb, def->theory_step, c1,
                        bm, c2, ratio);
                if (better(def, win_def)) {
                    win_def = def;
                    wd = table_algos[a];
                }
                if (best && better(best, win_tun)) {
                    win_tun = best;
                    wt = table_algos[a];
                }
                if (ec_algo_compresses(table_algos[a]) && better(def, cwin_def)) {
                    cwin_def = def;
                    cwd = table_algos[a];
                }
                if (ec_algo_compresses(table_algos[a]) && best && better(best, cwin_tun)) {
                    cwin_tun = best;
                    cwt = table_algos[a];
                }
                if (table_algos[a] == EC_ALGO_ECLK) {
                    eclk_def = def;
                    eclk_tun = best;
                }
            }
            if (!printed)
                continue;
            fprintf(f, "\nFewest rounds at defaults: %s", win_def ? ec_algo_name(wd) : "none");
            if (win_def)
                fprintf(f, " (%llu)", (unsigned long long)win_def->hit_rounds[1]);
            fprintf(f, "; tuned: %s", win_tun ? ec_algo_name(wt) : "none");
            if (win_tun)
                fprintf(f, " (%llu)", (unsigned long long)win_tun->hit_rounds[1]);
            fprintf(f, ". Among the compressing methods, at defaults: %s",
                    cwin_def ? ec_algo_name(cwd) : "none");
            if (cwin_def)
                fprintf(f, " (%llu)", (unsigned long long)cwin_def->hit_rounds[1]);
            fprintf(f, "; tuned: %s", cwin_tun ? ec_algo_name(cwt) : "none");
            if (cwin_tun)
                fprintf(f, " (%llu)", (unsigned long long)cwin_tun->hit_rounds[1]);
            fprintf(f, ". ECLK %s among them at defaults and %s tuned.\n",
                    eclk_def && eclk_def == cwin_def ? "wins" : "does not win",
                    eclk_tun && eclk_tun == cwin_tun ? "wins" : "does not win");
            fprintf(stderr, "tuned %-9s %g: defaults %s (%llu), tuned %s (%llu); eclk among compressing %s/%s\n",
                    datasets[ds].label, table_lambdas[l], win_def ? ec_algo_name(wd) : "none",
                    win_def ? (unsigned long long)win_def->hit_rounds[1] : 0ULL,
                    win_tun ? ec_algo_name(wt) : "none",
                    win_tun ? (unsigned long long)win_tun->hit_rounds[1] : 0ULL,
                    eclk_def && eclk_def == cwin_def ? "wins" : "loses",
                    eclk_tun && eclk_tun == cwin_tun ? "wins" : "loses");
        }
    fclose(f);
}

/* ---- the fair comparison (--part fair) --------------------------------- */

/*
 * Every method at its defaults and tuned, in both oracles, on several
 * seeds (docs/benchmarks.md, "The fair comparison"): for each dataset,
 * lambda2_rel and compressor, each method runs at every smoothness
 * multiplier of fair_grid (for the accelerated methods it moves the step
 * and the momentum together; for the others it is the step multiplier,
 * docs/algorithms.md) on fair_nseeds seeds, with each worker's minibatch
 * of 1 row ("stochastic") and with its whole shard ("full"). x1 is the
 * default run. The best multiplier is the one whose seeds all reached
 * 1e-6 with the fewest rounds at the median (ties by the median bits),
 * among those whose runs all kept their relative gap at or below
 * FAIR_MAX_EXCURSION (an experiment's excursion rule, docs/api.md).
 */
#define FAIR_MAX_SEEDS 5
#define FAIR_MAX_GRID 12
#define FAIR_MAX_EXCURSION 2.0
#define FAIR_MAX_ALGOS 16

static double fair_grid[FAIR_MAX_GRID] = {0.5, 1, 2, 4, 8, 16, 32};
static int fair_ngrid = 7;
static int fair_nseeds = FAIR_MAX_SEEDS;
static int fair_slots[3] = {CS_TOPKD, CS_RANDKD, -1};
static int fair_nslots = 2;
static int fair_ds[NDATASETS];
static int fair_nds;
/* The kappas: table_lambdas' (both unless --fair-lambdas picks one). */
static double fair_lams[2] = {1e-3, 1e-4};
static int fair_nlams = 2;
/* --fair-methods: the part's methods by name (NULL: all of them). */
static const char *fair_methods_text;
/* --fair-extends: the file whose x1 runs a grid without x1 widens (NULL:
 * the grid has x1). */
static const char *fair_extends;

/* The methods: the paper's, and any of the newer ones this build has. */
static const char *const fair_names[] = {
    "eclk", "lkatyusha", "ec-lsvrg-qian", "ec-lsvrg", "ec-gd-diana",
    "ec-sgd-diana", "ef21", "ec-gd", "adiana", "econtrol", "ec-lsvrg-diana"};
/* The accelerated comparison's (--part accel-family): the accelerated
 * methods, L-Katyusha uncompressed as the reference line, the ablation
 * (ec-lsvrg-qian: ECLK without the momentum) and the DIANA/EF21 family. */
static const char *const family_names[] = {
    "eclk", "lkatyusha", "adiana", "adef", "econtrol", "ec-lsvrg-qian",
    "ec-lsvrg-diana", "ec-gd-diana", "ec-sgd-diana", "ef21"};
static ec_algo_id fair_algos[FAIR_MAX_ALGOS];
static int fair_nalgos;
/* Which of the two the fair machinery serves: PART_FAIR or PART_FAMILY
 * (the same protocol; its methods, its tasks and its files differ). */
static int fair_part = PART_FAIR;
/* Row kinds: a method at its defaults and tuned, or ECLK's plain rule
 * at x1 only (item 1's goal: the default rule against plain). */
#define FAIR_PLAIN (-2)

/* What the runs ran on, for the headers: the processes and their nice
 * value (getpriority in main). */
static int run_jobs = 2, run_nice;

static const char *oracle_name(int o)
{
    return o ? "full" : "stochastic";
}

/* Whether name is one of the comma-separated list's entries. */
static int name_listed(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (len == n && strncmp(p, name, n) == 0)
            return 1;
        p += len + (end != NULL);
    }
    return 0;
}

static void fair_pick_algos(void)
{
    int fam = fair_part == PART_FAMILY;
    const char *const *names = fam ? family_names : fair_names;
    unsigned nn = fam ? sizeof family_names / sizeof family_names[0]
                      : sizeof fair_names / sizeof fair_names[0];

    fair_nalgos = 0;
    for (unsigned i = 0; i < nn; i++) {
        ec_algo_id a;

        if (fair_methods_text && !name_listed(fair_methods_text, names[i]))
            continue;
        if (ec_algo_from_name(names[i], &a) == 0 && fair_nalgos < FAIR_MAX_ALGOS)
            fair_algos[fair_nalgos++] = a;
    }
    if (fair_methods_text) {
        /* Every listed name must be one of this part's methods. */
        char buf[256], *save = NULL;

        snprintf(buf, sizeof buf, "%s", fair_methods_text);
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            unsigned i;

            for (i = 0; i < nn; i++)
                if (strcmp(names[i], tok) == 0)
                    break;
            if (i == nn) {
                char msg[160];

                snprintf(msg, sizeof msg, "%s is not a method of --part %s", tok,
                         fam ? "accel-family" : "fair");
                die("--fair-methods", msg);
            }
        }
        if (!fair_nalgos)
            die("--fair-methods", "none of the listed methods is in this build");
    }
}

/* Whether the oracle changes the run: not for the methods that take their
 * whole shard anyway (their one set of runs serves both). */
static int fair_oracle_of(ec_algo_id a, int oracle)
{
    return ec_algo_full_local(a) ? 0 : oracle;
}

static int fair_slot_ok(ec_algo_id a, int slot)
{
    char buf[256];

    if (!ec_algo_compresses(a))
        return slot == CS_NONE;
    return slot != CS_NONE &&
           ec_algo_comp_check(a, slot == CS_RANDKD ? EC_COMP_RANDK : EC_COMP_TOPK,
                              buf, sizeof buf) == NULL;
}

/* ADIANA's own round budget, per lambda2_rel. Its theorem sets its step
 * and momentum from L, kappa and omega; at those constants it needs about
 * 30600 rounds on mushrooms at lambda2_rel 1e-3 and 106800 at 1e-4
 * (accel-slopes.md), far past the full-gradient budget the others get, so
 * its default would say "not reached" for want of rounds alone. About
 * twice those counts, on every dataset. */
static uint64_t adiana_budget(double lambda2_rel)
{
    return lambda2_rel >= 1e-3 ? 60000 : 200000;
}

static void fair_add(int pi, ec_algo_id algo, int slot, int oracle, int rule,
                     int mi, int seed)
{
    const struct dataset_info *di = &datasets[probs[pi].ds];
    int full = algo_full(algo) || ec_algo_full_local(algo) || oracle;
    struct task *t = task_add();

    t->part = fair_part;
    t->prob = pi;
    t->algo = algo;
    t->slot = slot;
    t->comp = slot_spec(slot, di->ds.d);
    t->oracle = oracle;
    t->rule = rule;
    t->smooth_mult = fair_grid[mi];
    t->aux = mi;
    t->seed = (uint64_t)seed;
    t->max_rounds = algo == EC_ALGO_ADIANA ? adiana_budget(probs[pi].lambda2_rel)
                    : full                 ? di->rounds_full
                                           : di->rounds_stoch;
    t->eval_every = full ? di->eval_full : di->eval_stoch;
    t->target = 1e-6;
    t->stall_rule = 1;
}

static int fair_x1(void)
{
    for (int m = 0; m < fair_ngrid; m++)
        if (fair_grid[m] == 1.0)
            return m;
    return -1;
}

static void add_fair_tasks(void)
{
    int x1 = fair_x1();

    fair_pick_algos();
    for (int di = 0; di < fair_nds; di++)
        for (int l = 0; l < fair_nlams; l++) {
            int pi = prob_get(fair_ds[di], fair_lams[l]);

            for (int o = 0; o < 2; o++)
                for (int a = 0; a < fair_nalgos; a++) {
                    ec_algo_id algo = fair_algos[a];

                    if (fair_oracle_of(algo, o) != o)
                        continue;
                    for (int sl = -1; sl < fair_nslots; sl++) {
                        int slot = sl < 0 ? CS_NONE : fair_slots[sl];
                        ec_comp_spec c = slot_spec(slot, datasets[fair_ds[di]].ds.d);

                        if (!fair_slot_ok(algo, slot))
                            continue;
                        for (int m = 0; m < fair_ngrid; m++)
                            for (int s = 1; s <= fair_nseeds; s++) {
                                if (s > 1 && deterministic(algo, &c))
                                    continue;
                                fair_add(pi, algo, slot, o, -1, m, s);
                                if (algo == EC_ALGO_ECLK && m == x1)
                                    fair_add(pi, algo, slot, o, EC_ECLK_PLAIN, m, s);
                            }
                    }
                }
        }
}

/* One multiplier's runs over the seeds: medians and ranges. */
struct fair_group {
    int n, reached;
    double rounds[FAIR_MAX_SEEDS], bits[FAIR_MAX_SEEDS], evals[FAIR_MAX_SEEDS];
    double paper[FAIR_MAX_SEEDS];
    double peak, restarts_max;
    int diverged, stalled;
    double final_gap[FAIR_MAX_SEEDS];
    uint64_t budget;
    double theory_step;
};

static double med(const double *v, int n)
{
    double c[FAIR_MAX_SEEDS];

    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, dcmp);
    return n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
}

static double vmin(const double *v, int n)
{
    double m = v[0];

    for (int i = 1; i < n; i++)
        m = fmin(m, v[i]);
    return m;
}

static double vmax(const double *v, int n)
{
    double m = v[0];

    for (int i = 1; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

static const struct result *fair_find(int pi, ec_algo_id algo, int slot, int oracle,
                                      int rule, int mi, int seed, unsigned *ti)
{
    ec_comp_spec c = slot_spec(slot, datasets[probs[pi].ds].ds.d);

    oracle = fair_oracle_of(algo, oracle);
    if (rule == FAIR_PLAIN)
        rule = EC_ECLK_PLAIN;
    if (deterministic(algo, &c))
        seed = 1;
    for (unsigned i = 0; i < ntasks; i++) {
        const struct task *t = &tasks[i];

        if (t->part == fair_part && t->prob == pi && t->algo == algo &&
            t->slot == slot && t->oracle == oracle && t->rule == rule &&
            t->aux == mi && t->seed == (uint64_t)seed) {
            if (ti)
                *ti = i;
            return &results[i];
        }
    }
    return NULL;
}

static int fair_group(int pi, ec_algo_id algo, int slot, int oracle, int rule, int mi,
                      struct fair_group *g)
{
    memset(g, 0, sizeof *g);
    for (int s = 1; s <= fair_nseeds; s++) {
        unsigned ti = 0;
        const struct result *r = fair_find(pi, algo, slot, oracle, rule, mi, s, &ti);

        if (!r)
            return -1;
        g->rounds[g->n] = r->hit[1] ? (double)r->hit_rounds[1] : INFINITY;
        g->bits[g->n] = r->hit[1] ? r->hit_bits[1] : INFINITY;
        g->evals[g->n] = r->hit[1] ? r->hit_evals[1] : INFINITY;
        g->paper[g->n] = r->hit[1] ? r->hit_paper[1] : INFINITY;
        g->final_gap[g->n] = r->final_gap;
        g->reached += r->hit[1];
        g->diverged += r->stop == EC_STOP_DIVERGED;
        g->stalled += r->stop == STOP_STALLED;
        if (!(r->peak_gap <= g->peak))
            g->peak = r->peak_gap;
        if ((double)r->restarts > g->restarts_max)
            g->restarts_max = (double)r->restarts;
        g->budget = tasks[ti].max_rounds;
        g->theory_step = r->theory_step;
        g->n++;
    }
    return 0;
}

/* "med [min-max]" of a measure, all seeds reached; else how many did. */
static void spread_text(const double *v, int n, int reached, const char *fmt,
                        char *buf, size_t len)
{
    char a[32], b[32], c[32];

    if (reached < n) {
        snprintf(buf, len, "-");
        return;
    }
    snprintf(a, sizeof a, fmt, med(v, n));
    snprintf(b, sizeof b, fmt, vmin(v, n));
    snprintf(c, sizeof c, fmt, vmax(v, n));
    if (n == 1 || strcmp(b, c) == 0)
        snprintf(buf, len, "%s", a);
    else
        snprintf(buf, len, "%s [%s-%s]", a, b, c);
}

/* The cells of one group: rounds, bits, paper bits, oracle calls, and a
 * note. */
static void group_cells(const struct fair_group *g, char cells[4][112], char *note,
                        size_t nlen)
{
    spread_text(g->rounds, g->n, g->reached, "%.0f", cells[0], sizeof cells[0]);
    spread_text(g->bits, g->n, g->reached, "%.3g", cells[1], sizeof cells[1]);
    spread_text(g->paper, g->n, g->reached, "%.3g", cells[2], sizeof cells[2]);
    spread_text(g->evals, g->n, g->reached, "%.4g", cells[3], sizeof cells[3]);
    note[0] = 0;
    if (g->reached < g->n) {
        size_t off = (size_t)snprintf(note, nlen, "%d of %d seeds reached 1e-6",
                                      g->reached, g->n);

        if (g->diverged && off < nlen)
            off += (size_t)snprintf(note + off, nlen - off, "; %d diverged", g->diverged);
        if (g->stalled && off < nlen)
            off += (size_t)snprintf(note + off, nlen - off, "; %d stopped as stalled",
                                    g->stalled);
        if (off < nlen)
            snprintf(note + off, nlen - off, "; median final gap %.2g of budget %llu",
                     med(g->final_gap, g->n), (unsigned long long)g->budget);
        if (g->reached > 0 && g->reached * 2 > g->n) {
            /* The median is finite: say it. */
            char tmp[80];

            snprintf(tmp, sizeof tmp, "%.0f (med)", med(g->rounds, g->n));
            snprintf(cells[0], sizeof cells[0], "%s", tmp);
        }
    }
    if (g->peak > 1.0 && strlen(note) + 40 < nlen)
        snprintf(note + strlen(note), nlen - strlen(note), "%sgap rose to %.3gx its start",
                 note[0] ? "; " : "", g->peak);
    if (g->restarts_max > 0 && strlen(note) + 40 < nlen)
        snprintf(note + strlen(note), nlen - strlen(note), "%sup to %.0f guard restart%s",
                 note[0] ? "; " : "", g->restarts_max, g->restarts_max > 1 ? "s" : "");
}

static int fair_ok(const struct fair_group *g)
{
    return g->n > 0 && g->reached == g->n;
}

/* The service's rule (experiments.c): all seeds reached, fewer median
 * rounds, ties by fewer median bits. */
static int fair_better(const struct fair_group *a, const struct fair_group *b)
{
    double ra, rb;

    if (!fair_ok(a))
        return 0;
    if (!b || !fair_ok(b))
        return 1;
    ra = med(a->rounds, a->n);
    rb = med(b->rounds, b->n);
    return ra < rb || (ra == rb && med(a->bits, a->n) < med(b->bits, b->n));
}

/* One method's row: its default and its best multiplier. */
struct fair_row {
    ec_algo_id algo;
    int rule;
    struct fair_group def, best, excluded;
    int best_m, excluded_m, have_best, have_excluded;
};

static int fair_row(int pi, ec_algo_id algo, int slot, int oracle, int rule,
                    struct fair_row *row)
{
    int x1 = fair_x1();

    memset(row, 0, sizeof *row);
    row->algo = algo;
    row->rule = rule;
    row->best_m = row->excluded_m = -1;
    /* Without x1 in the grid row->def stays empty (n = 0): not in this
     * grid, and never the best at the defaults. */
    if (x1 < 0 && rule == FAIR_PLAIN)
        return -1;
    if (x1 >= 0 && fair_group(pi, algo, slot, oracle, rule, x1, &row->def) < 0)
        return -1;
    if (rule == FAIR_PLAIN)
        return 0;
    for (int m = 0; m < fair_ngrid; m++) {
        struct fair_group g;

        if (fair_group(pi, algo, slot, oracle, rule, m, &g) < 0)
            continue;
        if (g.peak > FAIR_MAX_EXCURSION) {
            if (fair_better(&g, row->have_excluded ? &row->excluded : NULL)) {
                row->excluded = g;
                row->excluded_m = m;
                row->have_excluded = 1;
            }
            continue;
        }
        if (fair_better(&g, row->have_best ? &row->best : NULL)) {
            row->best = g;
            row->best_m = m;
            row->have_best = 1;
        }
    }
    if (row->have_excluded && row->have_best &&
        !fair_better(&row->excluded, &row->best))
        row->have_excluded = 0;
    return 0;
}

static const char *row_name(const struct fair_row *r, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s", ec_algo_name(r->algo),
             r->rule == FAIR_PLAIN ? " (rule plain)" : "");
    return buf;
}

static const char *axis_name(ec_algo_id a)
{
    /* adiana's constants derive from L as L-Katyusha's do (algo.c). */
    return ec_algo_is(a, EC_FAMILY_KATYUSHA) || a == EC_ALGO_ADIANA ? "smoothness"
                                                                    : "step";
}

static const char *slot_label(int slot, uint32_t d, char *buf, size_t len)
{
    ec_comp_spec c = slot_spec(slot, d);

    comp_text(&c, buf, len);
    return buf;
}

/* The fastest compressing method at its defaults or tuned (ECLK's plain
 * rule aside), and ECLK's row. */
struct fair_summary {
    const struct fair_row *win_def, *win_tun, *eclk;
    const struct fair_row *lkat;
};

static void fair_section(FILE *f, int pi, int slot, int oracle, struct fair_row *rows,
                         int *nrows, struct fair_summary *sum)
{
    uint32_t d = datasets[probs[pi].ds].ds.d;
    char cb[32];

    *nrows = 0;
    memset(sum, 0, sizeof *sum);
    fprintf(f, "\n### %s, oracle %s\n\n"
               "| method | axis | default step | x1: rounds | bits up | paper bits | "
               "oracle calls | best x | tuned: rounds | bits up | paper bits | "
               "oracle calls | notes |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            slot_label(slot, d, cb, sizeof cb), oracle_name(oracle));
    for (int a = 0; a < fair_nalgos; a++)
        for (int k = 0; k < 2; k++) {
            ec_algo_id algo = fair_algos[a];
            int s = ec_algo_compresses(algo) ? slot : CS_NONE;
            int rule = k ? FAIR_PLAIN : -1;
            struct fair_row *r = &rows[*nrows];
            char dc[4][112], tc[4][112], dn[400], tn[400], notes[1200], nb[64], bm[32];
            char step[32];

            if (k && algo != EC_ALGO_ECLK)
                continue;
            if (!fair_slot_ok(algo, s)) {
                /* Say why rather than leave the method out. */
                char why[256];
                ec_comp_spec c = slot_spec(s, d);

                if (k || !ec_algo_compresses(algo) ||
                    !ec_algo_comp_check(algo, c.type, why, sizeof why))
                    continue;
                fprintf(f, "| %s | - | - | n/a | | | | | n/a | | | | | n/a: %s |\n",
                        ec_algo_name(algo), why);
                continue;
            }
            if (fair_row(pi, algo, s, oracle, rule, r) < 0)
                continue;
            notes[0] = 0;
            if (r->def.n > 0) {
                group_cells(&r->def, dc, dn, sizeof dn);
                if (dn[0])
                    snprintf(notes, sizeof notes, "x1: %s", dn);
            } else {
                snprintf(dc[0], sizeof dc[0], "not in this grid");
                for (int j = 1; j < 4; j++)
                    dc[j][0] = 0;
            }
            if (rule == FAIR_PLAIN) {
                snprintf(bm, sizeof bm, "(x1 only)");
                for (int j = 0; j < 4; j++)
                    tc[j][0] = 0;
            } else if (r->have_best) {
                group_cells(&r->best, tc, tn, sizeof tn);
                snprintf(bm, sizeof bm, "x%g", fair_grid[r->best_m]);
                if (tn[0])
                    snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                             "%sx%g: %s", notes[0] ? "; " : "", fair_grid[r->best_m], tn);
                if (r->best_m == 0 || r->best_m == fair_ngrid - 1)
                    snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                             "%s**best at the grid's edge**: a %s one may be better%s%s%s",
                             notes[0] ? "; " : "", r->best_m == 0 ? "smaller" : "larger",
                             r->best_m == 0 && fair_extends ? " (the grid below it: `" : "",
                             r->best_m == 0 && fair_extends ? fair_extends : "",
                             r->best_m == 0 && fair_extends ? "`)" : "");
            } else {
                snprintf(bm, sizeof bm, "none");
                for (int j = 0; j < 4; j++)
                    snprintf(tc[j], sizeof tc[j], "-");
                snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                         "%sno multiplier reached 1e-6 on every seed within the "
                         "excursion rule", notes[0] ? "; " : "");
            }
            if (rule != FAIR_PLAIN && r->have_excluded)
                snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                         "%sx%g took %.0f rounds (median) but its gap rose to %.3gx "
                         "its start: set aside by the excursion rule",
                         notes[0] ? "; " : "", fair_grid[r->excluded_m],
                         med(r->excluded.rounds, r->excluded.n), r->excluded.peak);
            if (ec_algo_full_local(algo) && oracle)
                snprintf(notes + strlen(notes), sizeof notes - strlen(notes),
                         "%sthe same runs as the stochastic oracle's (it takes its "
                         "whole shard either way)", notes[0] ? "; " : "");
            /* The default step is x1's (the multiplier moves it). */
            if (r->def.n > 0)
                snprintf(step, sizeof step, "%.4g", r->def.theory_step);
            else
                snprintf(step, sizeof step, "-");
            fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                    row_name(r, nb, sizeof nb), rule == FAIR_PLAIN ? "-" : axis_name(algo),
                    step, dc[0], dc[1], dc[2], dc[3], bm, tc[0], tc[1], tc[2], tc[3], notes);
            if (rule != FAIR_PLAIN) {
                if (algo == EC_ALGO_ECLK)
                    sum->eclk = r;
                if (algo == EC_ALGO_LKATYUSHA)
                    sum->lkat = r;
                if (ec_algo_compresses(algo)) {
                    if (fair_better(&r->def, sum->win_def ? &sum->win_def->def : NULL))
                        sum->win_def = r;
                    if (r->have_best &&
                        fair_better(&r->best, sum->win_tun ? &sum->win_tun->best : NULL))
                        sum->win_tun = r;
                }
            }
            (*nrows)++;
        }
}

static void med_text(const struct fair_group *g, int ok, char *buf, size_t len)
{
    if (ok && g->n == 0)
        snprintf(buf, len, "not in this grid");
    else if (ok && fair_ok(g))
        snprintf(buf, len, "%.0f", med(g->rounds, g->n));
    else
        snprintf(buf, len, "not reached");
}

static const char *fair_prefix(void)
{
    return fair_part == PART_FAMILY ? "accel-family" : "fair";
}

/* Per problem, compressor and oracle: each method's median rounds to 1e-6
 * against the multiplier, a band from the least to the greatest seed (a
 * multiplier where a seed missed is left out). */
static void write_fair_plots(const char *dir)
{
    for (int di = 0; di < fair_nds; di++)
        for (int l = 0; l < fair_nlams; l++)
            for (int sl = 0; sl < fair_nslots; sl++)
                for (int o = 0; o < 2; o++) {
                    int ds = fair_ds[di], pi = prob_get(ds, fair_lams[l]);
                    plot_series s[FAIR_MAX_ALGOS];
                    plot_band b[FAIR_MAX_ALGOS];
                    double xs[FAIR_MAX_ALGOS][FAIR_MAX_GRID], ys[FAIR_MAX_ALGOS][FAIR_MAX_GRID];
                    double lo[FAIR_MAX_ALGOS][FAIR_MAX_GRID], hi[FAIR_MAX_ALGOS][FAIR_MAX_GRID];
                    char names[FAIR_MAX_ALGOS][48], title[200], file[128], cb[32];
                    plot_spec sp = {0};
                    size_t ns = 0, len = 0;
                    char *svg;
                    FILE *f;

                    for (int a = 0; a < fair_nalgos; a++) {
                        ec_algo_id algo = fair_algos[a];
                        int slot = ec_algo_compresses(algo) ? fair_slots[sl] : CS_NONE;
                        size_t np = 0;

                        if (!fair_slot_ok(algo, slot))
                            continue;
                        for (int m = 0; m < fair_ngrid; m++) {
                            struct fair_group g;

                            if (fair_group(pi, algo, slot, o, -1, m, &g) < 0)
                                continue;
                            xs[ns][np] = fair_grid[m];
                            ys[ns][np] = fair_ok(&g) ? med(g.rounds, g.n) : NAN;
                            lo[ns][np] = fair_ok(&g) ? vmin(g.rounds, g.n) : NAN;
                            hi[ns][np] = fair_ok(&g) ? vmax(g.rounds, g.n) : NAN;
                            np++;
                        }
                        snprintf(names[ns], sizeof names[ns], "%s", ec_algo_name(algo));
                        s[ns].name = names[ns];
                        s[ns].x = xs[ns];
                        s[ns].y = ys[ns];
                        s[ns].n = np;
                        b[ns].lo = lo[ns];
                        b[ns].hi = hi[ns];
                        ns++;
                    }
                    slot_label(fair_slots[sl], datasets[ds].ds.d, cb, sizeof cb);
                    snprintf(title, sizeof title,
                             "%s, lambda2_rel %g, %s, oracle %s: rounds to 1e-6 (median of %d "
                             "seeds, band min-max)", datasets[ds].label, fair_lams[l], cb,
                             oracle_name(o), fair_nseeds);
                    sp.title = title;
                    sp.xlabel = "smoothness multiplier (the step multiplier for the "
                                "non-accelerated methods)";
                    sp.ylabel = "rounds to relative gap 1e-6";
                    sp.xlog = sp.ylog = 1;
                    svg = plot_svg_bands(&sp, s, b, ns, &len);
                    if (!svg)
                        die("fair plot", "out of memory");
                    snprintf(file, sizeof file, "%s-%s-%g-%s-%s.svg", fair_prefix(), datasets[ds].label,
                             fair_lams[l], fair_slots[sl] == CS_RANDKD ? "randk"
                             : fair_slots[sl] == CS_TOPK1 ? "top1" : "topk", oracle_name(o));
                    f = out_open(dir, file);
                    if (fwrite(svg, 1, len, f) != len || fclose(f) != 0)
                        die(file, "write failed");
                    free(svg);
                }
}

/* "a, b, c": the methods of the comparison whose workers take their whole
 * shard (full 1) or a minibatch (full 0). */
static const char *fair_oracle_list(int full, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = 0;
    for (int a = 0; a < fair_nalgos && off < len; a++)
        if (ec_algo_full_local(fair_algos[a]) == full)
            off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "",
                                    ec_algo_name(fair_algos[a]));
    return buf;
}

/* The fair comparison's files (fair.md, fair-DATASET.md) or the
 * accelerated comparison's (accel-family.md, accel-family-DATASET.md):
 * the same protocol and tables, for fair_part. */
static void write_fair(const char *dir, double wall, double load0, double load1)
{
    int fam = fair_part == PART_FAMILY;
    char sname[64], ol0[512], ol1[512];
    FILE *sf;
    struct fair_row rows[2 * FAIR_MAX_ALGOS];
    int nrows, goal_n = 0, goal_ok = 0;
    char goal[16384], grid[32768];
    size_t goff = 0, gdoff = 0;

    fair_pick_algos();
    snprintf(sname, sizeof sname, "%s.md", fair_prefix());
    sf = out_open(dir, sname);
    header(sf, fam ? "The accelerated comparison: ECLK, ADIANA, ADEF, EControl, L-Katyusha, "
                     "EC-LSVRG (Qian) and the DIANA/EF21 family under the fair protocol"
                   : "The fair comparison: every method at its defaults and tuned, both "
                     "oracles, several seeds");
    fprintf(sf,
            "Logistic loss, 20 workers, contiguous split, relative gap 1e-6, in process. "
            "Each method runs at every multiplier of the grid x{");
    for (int m = 0; m < fair_ngrid; m++)
        fprintf(sf, "%s%g", m ? ", " : "", fair_grid[m]);
    fprintf(sf, "} of `smoothness_multiplier` (for eclk, lkatyusha and adiana it moves "
                "the step and the momentum together; for the others it multiplies the step: the "
                "step multiplier; docs/algorithms.md, \"The smoothness multiplier\") on "
                "%d seed%s; %s%s%s. Oracle \"stochastic\": each method its own "
                "(a minibatch of 1 row per worker for %s; the whole shard for %s); "
                "\"full\": every method its whole shard (`batch` \"full\"). A method "
                "that does not take a compressor is listed as n/a with the reason the "
                "engine gives at submit.\n\n"
                "Bits up: uplink bits per worker as sent (values and indices); paper "
                "bits: as each method's paper counts them (docs/algorithms.md).\n\n"
                "Best multiplier: the one whose seeds all reached 1e-6 with the fewest "
                "median rounds (ties by median bits), among those whose runs all kept "
                "their relative gap at or below %gx its start (the excursion rule of an "
                "experiment's `max_excursion`, docs/api.md); a best at the grid's edge is "
                "flagged. Cells: the median over the seeds [min-max]; \"-\" where a seed "
                "did not reach 1e-6 (the note says how many did). Oracle calls: gradient "
                "evaluations of one row's loss per worker (`grad_evals`). Runs of ec-gd "
                "and ef21 with topk draw no random numbers: one run stands for every "
                "seed. Round budgets: a full local gradient per round (%s, and every "
                "method in the full oracle) ",
            fair_nseeds, fair_nseeds == 1 ? "" : "s",
            fair_extends ? "x1, the default, is not in this grid: this run widens `" : "",
            fair_extends ? fair_extends : "x1 is the default",
            fair_extends ? "`, whose x1 runs it extends, and its x1 cells say \"not in this "
                           "grid\" (ECLK's plain rule, which runs at x1 only, is not run)" : "",
            fair_oracle_list(0, ol0, sizeof ol0),
            fair_oracle_list(1, ol1, sizeof ol1), FAIR_MAX_EXCURSION, ol1);
    for (int di = 0; di < fair_nds; di++)
        fprintf(sf, "%s%s %llu", di ? ", " : "", datasets[fair_ds[di]].label,
                (unsigned long long)datasets[fair_ds[di]].rounds_full);
    fprintf(sf, "; the others ");
    for (int di = 0; di < fair_nds; di++)
        fprintf(sf, "%s%s %llu", di ? ", " : "", datasets[fair_ds[di]].label,
                (unsigned long long)datasets[fair_ds[di]].rounds_stoch);
    for (int a = 0; a < fair_nalgos; a++)
        if (fair_algos[a] == EC_ALGO_ADIANA) {
            fprintf(sf, "; adiana its own, on every dataset: ");
            for (int l = 0; l < fair_nlams; l++)
                fprintf(sf, "%s%llu at lambda2_rel %g", l ? ", " : "",
                        (unsigned long long)adiana_budget(fair_lams[l]), fair_lams[l]);
            fprintf(sf, " (its theorem's constants need about 30600 and 106800 rounds on "
                        "mushrooms at 1e-3 and 1e-4, accel-slopes.md)");
        }
    fprintf(sf, "; a run whose rate would leave it 10x above 1e-6 at its budget stops "
                "from a quarter of it on (\"stalled\").\n\n"
                "Ran in %.0f s wall on %d process%s (nice %d) on a 2-core machine shared "
                "with other work, load average %.2f at the start and %.2f at the end; "
                "per-dataset tables in `%s-DATASET.md`.\n\n"
                "## Summary: the fastest compressing method (median rounds to 1e-6)\n\n"
                "| dataset | lambda2_rel | compressor | oracle | at defaults | tuned | "
                "eclk x1 | eclk tuned | lkatyusha tuned (no compression) |\n"
                "|---|---|---|---|---|---|---|---|---|\n",
            wall, run_jobs, run_jobs == 1 ? "" : "es", run_nice, load0, load1, fair_prefix());
    gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff,
                              "\n## Every method: median rounds to 1e-6 [min-max over the "
                              "seeds], at x1 / tuned (best x)\n\n"
                              "\"-\": not every seed reached 1e-6 within the budget (the "
                              "per-dataset tables say how far each got); n/a: the method "
                              "takes no such compressor.\n\n| dataset | lambda2_rel | "
                              "compressor | oracle |");
    for (int a = 0; a < fair_nalgos; a++)
        gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff, " %s |",
                                  ec_algo_name(fair_algos[a]));
    gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff, "\n|---|---|---|---|");
    for (int a = 0; a < fair_nalgos; a++)
        gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff, "---|");
    gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff, "\n");
    goff += (size_t)snprintf(goal + goff, sizeof goal - goff,
                             "\n## ECLK's default rule against `plain` (item 1's goal: at most "
                             "1.5x plain's rounds wherever plain converges)\n\n"
                             "Both at x1, the same seeds; median rounds to 1e-6.\n\n"
                             "| dataset | lambda2_rel | compressor | oracle | online "
                             "(default) | plain | ratio | goal |\n|---|---|---|---|---|---|---|---|\n");
    for (int di = 0; di < fair_nds; di++) {
        int ds = fair_ds[di];
        char name[64], title[160];
        FILE *f;

        snprintf(name, sizeof name, "%s-%s.md", fair_prefix(), datasets[ds].label);
        f = out_open(dir, name);
        snprintf(title, sizeof title, "%s: the %s comparison (see %s)",
                 datasets[ds].label, fam ? "accelerated" : "fair", sname);
        header(f, title);
        fprintf(f, "%s: N = %u rows, d = %u. Columns and rules: `%s`.\n",
                datasets[ds].label, datasets[ds].ds.n_rows, datasets[ds].ds.d, sname);
        for (int l = 0; l < fair_nlams; l++) {
            int pi = prob_get(ds, fair_lams[l]);

            fprintf(f, "\n## lambda2_rel %g (kappa %.4g)\n", fair_lams[l],
                    probs[pi].pb.kappa);
            for (int sl = 0; sl < fair_nslots; sl++)
                for (int o = 0; o < 2; o++) {
                    struct fair_summary sm;
                    char cb[32], a[96], b[96], c[32], e[32], k[32];
                    const struct fair_row *plain = NULL;

                    fair_section(f, pi, fair_slots[sl], o, rows, &nrows, &sm);
                    slot_label(fair_slots[sl], datasets[ds].ds.d, cb, sizeof cb);
                    gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff,
                                              "| %s | %g | %s | %s |", datasets[ds].label,
                                              fair_lams[l], cb, oracle_name(o));
                    for (int a = 0; a < fair_nalgos && gdoff < sizeof grid; a++) {
                        const struct fair_row *fr = NULL;
                        char x1c[64], tuc[80];

                        for (int i = 0; i < nrows; i++)
                            if (rows[i].algo == fair_algos[a] && rows[i].rule != FAIR_PLAIN)
                                fr = &rows[i];
                        if (!fr) {
                            gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff,
                                                      " n/a |");
                            continue;
                        }
                        if (fr->def.n > 0)
                            spread_text(fr->def.rounds, fr->def.n, fr->def.reached, "%.0f",
                                        x1c, sizeof x1c);
                        else
                            snprintf(x1c, sizeof x1c, "not in this grid");
                        if (fr->have_best) {
                            char t[64];

                            spread_text(fr->best.rounds, fr->best.n, fr->best.reached,
                                        "%.0f", t, sizeof t);
                            snprintf(tuc, sizeof tuc, "%s (x%g)", t, fair_grid[fr->best_m]);
                        } else
                            snprintf(tuc, sizeof tuc, "-");
                        gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff,
                                                  " %s / %s |", x1c, tuc);
                    }
                    if (gdoff < sizeof grid)
                        gdoff += (size_t)snprintf(grid + gdoff, sizeof grid - gdoff, "\n");
                    if (sm.win_def)
                        snprintf(a, sizeof a, "%s %.0f", ec_algo_name(sm.win_def->algo),
                                 med(sm.win_def->def.rounds, sm.win_def->def.n));
                    else
                        snprintf(a, sizeof a, fair_x1() < 0 ? "not in this grid"
                                                            : "none reached");
                    if (sm.win_tun)
                        snprintf(b, sizeof b, "%s %.0f (x%g)", ec_algo_name(sm.win_tun->algo),
                                 med(sm.win_tun->best.rounds, sm.win_tun->best.n),
                                 fair_grid[sm.win_tun->best_m]);
                    else
                        snprintf(b, sizeof b, "none reached");
                    /* A method left out by --fair-methods is "not run". */
                    med_text(sm.eclk ? &sm.eclk->def : NULL, sm.eclk != NULL, c, sizeof c);
                    if (sm.eclk && sm.eclk->have_best)
                        snprintf(e, sizeof e, "%.0f (x%g)",
                                 med(sm.eclk->best.rounds, sm.eclk->best.n),
                                 fair_grid[sm.eclk->best_m]);
                    else
                        snprintf(e, sizeof e, "not reached");
                    if (!sm.eclk) {
                        snprintf(c, sizeof c, "not run");
                        snprintf(e, sizeof e, "not run");
                    }
                    if (sm.lkat && sm.lkat->have_best)
                        snprintf(k, sizeof k, "%.0f (x%g)",
                                 med(sm.lkat->best.rounds, sm.lkat->best.n),
                                 fair_grid[sm.lkat->best_m]);
                    else
                        snprintf(k, sizeof k, sm.lkat ? "not reached" : "not run");
                    slot_label(fair_slots[sl], datasets[ds].ds.d, cb, sizeof cb);
                    fprintf(sf, "| %s | %g | %s | %s | %s | %s | %s | %s | %s |\n",
                            datasets[ds].label, fair_lams[l], cb, oracle_name(o),
                            a, b, c, e, k);
                    for (int i = 0; i < nrows; i++)
                        if (rows[i].rule == FAIR_PLAIN)
                            plain = &rows[i];
                    if (sm.eclk && plain && goff < sizeof goal) {
                        char on[32], pl[32], ratio[32], verdict[64];

                        med_text(&sm.eclk->def, 1, on, sizeof on);
                        med_text(&plain->def, 1, pl, sizeof pl);
                        if (fair_ok(&plain->def) && fair_ok(&sm.eclk->def)) {
                            double q = med(sm.eclk->def.rounds, sm.eclk->def.n) /
                                       med(plain->def.rounds, plain->def.n);

                            snprintf(ratio, sizeof ratio, "%.2f", q);
                            snprintf(verdict, sizeof verdict, "%s", q <= 1.5 ? "met" : "**not met**");
                            goal_n++;
                            goal_ok += q <= 1.5;
                        } else if (fair_ok(&plain->def)) {
                            snprintf(ratio, sizeof ratio, "-");
                            snprintf(verdict, sizeof verdict, "**not met** (online did not converge)");
                            goal_n++;
                        } else {
                            snprintf(ratio, sizeof ratio, "-");
                            snprintf(verdict, sizeof verdict, "n/a (plain: %d of %d seeds)",
                                     plain->def.reached, plain->def.n);
                        }
                        goff += (size_t)snprintf(goal + goff, sizeof goal - goff,
                                                 "| %s | %g | %s | %s | %s | %s | %s | %s |\n",
                                                 datasets[ds].label, fair_lams[l], cb,
                                                 oracle_name(o), on, pl, ratio, verdict);
                    }
                }
        }
        fclose(f);
    }
    if (fair_extends)
        snprintf(goal, sizeof goal, "\nECLK's default rule against `plain` runs at x1 "
                                    "only: not in this grid (see `%s`).\n", fair_extends);
    else if (goff < sizeof goal)
        snprintf(goal + goff, sizeof goal - goff,
                 "\nThe goal is met in %d of the %d cases where plain converged on every "
                 "seed.\n", goal_ok, goal_n);
    if (gdoff < sizeof grid)
        fputs(grid, sf);
    fputs(goal, sf);
    fprintf(sf, "\nPlots: `%s-DATASET-LAMBDA-COMPRESSOR-ORACLE.svg`, each method's median "
                "rounds to 1e-6 against the multiplier with a band from the least to the "
                "greatest seed.\n", fair_prefix());
    fclose(sf);
    write_fair_plots(dir);
    if (!fair_extends)
        fprintf(stderr, "%s: default rule within 1.5x of plain in %d of %d cases\n",
                fair_prefix(), goal_ok, goal_n);
}

/* --fair-grid "0.5,1,2": the multipliers, 1 among them (the default). */
static void fair_parse_grid(const char *text)
{
    char *end;

    fair_ngrid = 0;
    while (*text) {
        double v = strtod(text, &end);

        if (end == text || !(v > 0) || !isfinite(v) || fair_ngrid == FAIR_MAX_GRID)
            die("--fair-grid", "want up to 12 positive numbers, comma-separated");
        fair_grid[fair_ngrid++] = v;
        text = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            die("--fair-grid", "want up to 12 positive numbers, comma-separated");
    }
}

/* The grid contains x1, or --fair-extends names the file whose x1 runs it
 * widens; not both (one file's x1 would be run twice). */
static void fair_check_grid(void)
{
    if (fair_x1() < 0 && !fair_extends)
        die("--fair-grid", "must contain 1 (the default run), unless --fair-extends names "
                           "the file whose x1 runs this grid widens");
    if (fair_x1() >= 0 && fair_extends)
        die("--fair-extends", "is for a grid without 1: this grid runs x1 itself");
    if (fair_extends && (!fair_extends[0] || strchr(fair_extends, '`') ||
                         strchr(fair_extends, '|') || strchr(fair_extends, '\n')))
        die("--fair-extends", "want a file name without backquotes, bars or newlines");
}

static void fair_parse_lists(const char *ds_text, const char *comp_text)
{
    char buf[256], *save = NULL;

    snprintf(buf, sizeof buf, "%s", ds_text);
    fair_nds = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        unsigned i;

        for (i = 0; i < NDATASETS; i++)
            if (strcmp(datasets[i].label, tok) == 0)
                break;
        if (i == NDATASETS || fair_nds == (int)NDATASETS)
            die("--fair-datasets", "an unknown dataset (a5a, mushrooms, a9a, w8a, madelon)");
        fair_ds[fair_nds++] = (int)i;
    }
    snprintf(buf, sizeof buf, "%s", comp_text);
    fair_nslots = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int slot = strcmp(tok, "topk") == 0 ? CS_TOPKD : strcmp(tok, "randk") == 0 ? CS_RANDKD
                   : strcmp(tok, "top1") == 0 ? CS_TOPK1 : -1;

        if (slot < 0 || fair_nslots == 3)
            die("--fair-compressors", "want topk, randk or top1 (k = ceil(d/20) or 1)");
        fair_slots[fair_nslots++] = slot;
    }
    if (!fair_nds || !fair_nslots)
        die("--fair-datasets/--fair-compressors", "empty");
}

/* --fair-lambdas "1e-4": one or both of table_lambdas. */
static void fair_parse_lambdas(const char *text)
{
    char buf[64], *save = NULL;

    snprintf(buf, sizeof buf, "%s", text);
    fair_nlams = 0;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        double v = strtod(tok, &end);

        if (*end || (v != table_lambdas[0] && v != table_lambdas[1]) || fair_nlams == 2)
            die("--fair-lambdas", "want 1e-3, 1e-4 or both, comma-separated");
        fair_lams[fair_nlams++] = v;
    }
    if (!fair_nlams)
        die("--fair-lambdas", "empty");
}

/* ---- the acceleration slopes (--part slopes) -------------------------- */

/*
 * Rounds to relative gap 1e-6 against kappa for each accelerated method,
 * at its defaults, on mushrooms (lambda2_rel 1e-2 .. 1e-4, or 1e-5 with
 * --slope-kappas 4), seeds 1..slope_nseeds: a log-log slope per seed over
 * the kappas it reached, then the median and range of the slopes. 1/2 is
 * the accelerated rate's, 1 the non-accelerated one's. Each method takes
 * its own oracle except adef and econtrol, which take their whole shard
 * (with one row a round neither converges: adef.md, accel-family.md);
 * eclk runs in both, so that it is matched with them as well.
 */
#define SLOPE_MAX_KAPPAS 4
struct slope_method {
    const char *name;
    int slot;                /* enum comp_slot */
    int oracle;              /* 1: batch "full" */
    const char *why;         /* its role in the comparison */
};
static const struct slope_method slope_methods[] = {
    {"eclk", CS_TOPKD, 0, "accelerated, contractive"},
    {"eclk", CS_TOPKD, 1, "accelerated, contractive (matched with adef, econtrol)"},
    {"lkatyusha", CS_NONE, 0, "accelerated, no compression (the reference line)"},
    {"adiana", CS_RANDKD, 0, "accelerated, unbiased only (rand-k's unbiased form)"},
    {"adef", CS_TOPKD, 1, "accelerated (general convex theory), contractive"},
    {"econtrol", CS_TOPKD, 1, "not accelerated: the control"},
    {"ec-lsvrg-qian", CS_TOPKD, 0, "ECLK without the momentum: the ablation"},
};
#define NSLOPE (sizeof slope_methods / sizeof slope_methods[0])
static int slope_nseeds = 3;
static int slope_nkappas = 3;

static uint64_t slope_budget(int l)
{
    static const uint64_t b[SLOPE_MAX_KAPPAS] = {30000, 100000, 300000, 600000};

    return b[l];
}

static void add_slope_tasks(void)
{
    static const uint32_t evals[SLOPE_MAX_KAPPAS] = {10, 10, 20, 50};

    for (int l = 0; l < slope_nkappas; l++) {
        int pi = prob_get(DS_MUSHROOMS, accel_lambdas[l]);

        for (unsigned a = 0; a < NSLOPE; a++) {
            ec_algo_id algo;

            if (ec_algo_from_name(slope_methods[a].name, &algo) < 0)
                continue;
            for (int s = 1; s <= slope_nseeds; s++) {
                struct task *t = task_add();

                t->part = PART_SLOPE;
                t->prob = pi;
                t->algo = algo;
                t->slot = slope_methods[a].slot;
                t->comp = slot_spec(t->slot, datasets[DS_MUSHROOMS].ds.d);
                t->oracle = slope_methods[a].oracle;
                t->seed = (uint64_t)s;
                t->max_rounds = slope_budget(l);
                t->eval_every = evals[l];
                t->target = 1e-6;
                t->stall_rule = 1;
                t->aux = (int)(a * SLOPE_MAX_KAPPAS + (unsigned)l);
            }
        }
    }
}

static const struct result *slope_find(unsigned a, int l, int seed, unsigned *ti)
{
    for (unsigned i = 0; i < ntasks; i++)
        if (tasks[i].part == PART_SLOPE &&
            tasks[i].aux == (int)(a * SLOPE_MAX_KAPPAS + (unsigned)l) &&
            tasks[i].seed == (uint64_t)seed) {
            if (ti)
                *ti = i;
            return &results[i];
        }
    return NULL;
}

static void slope_label(unsigned a, char *buf, size_t len)
{
    const struct slope_method *m = &slope_methods[a];
    char cb[32];

    slot_label(m->slot, datasets[DS_MUSHROOMS].ds.d, cb, sizeof cb);
    snprintf(buf, len, "%s, %s%s", m->name, cb, m->oracle ? ", full" : "");
}

static void write_slopes(const char *dir, double wall, double load0, double load1)
{
    FILE *f = out_open(dir, "accel-slopes.md");
    double kx[NSLOPE][SLOPE_MAX_KAPPAS], ym[NSLOPE][SLOPE_MAX_KAPPAS];
    double lo[NSLOPE][SLOPE_MAX_KAPPAS], hi[NSLOPE][SLOPE_MAX_KAPPAS];
    char names[NSLOPE][128];
    plot_series ps[NSLOPE];
    plot_band pb[NSLOPE];
    size_t np = 0;
    plot_spec sp = {0};
    char *svg;
    size_t len = 0;

    header(f, "The acceleration slopes: rounds to relative gap 1e-6 against kappa, each "
              "accelerated method");
    fprintf(f, "mushrooms, logistic, 20 workers, contiguous split, each method at its "
               "defaults (x1), %d seed%s, in process; compressors at k = ceil(d/20) = %u; "
               "oracle: each method its own (a minibatch of 1 row for eclk, lkatyusha, "
               "ec-lsvrg-qian; adiana takes its whole shard) except adef and econtrol, "
               "which take their whole shard (`batch` \"full\": with 1 row a round "
               "neither converges, adef.md and accel-family.md); eclk also runs so, "
               "matched with them. Round budgets per lambda2_rel:",
            slope_nseeds, slope_nseeds == 1 ? "" : "s", k_frac(datasets[DS_MUSHROOMS].ds.d));
    for (int l = 0; l < slope_nkappas; l++)
        fprintf(f, "%s %g: %llu", l ? "," : "", accel_lambdas[l],
                (unsigned long long)slope_budget(l));
    fprintf(f, "; a run whose rate would leave it 10x above 1e-6 at its budget stops "
               "from a quarter of it on.\n\nThe slope: for each seed, the least-squares "
               "fit of log(rounds) on log(kappa) over the kappas that seed reached (at "
               "least 2), then the median [min-max] over the seeds. 1/2 is the "
               "accelerated rate's, 1 a non-accelerated method's. Cells: rounds to 1e-6, "
               "median [min-max] over the seeds.\n\n"
               "Ran in %.0f s wall (with the other parts of the same command) on %d "
               "process%s (nice %d), a 2-core machine shared with other work, load "
               "average %.2f at the start and %.2f at the end.\n\n"
               "| method | role |", wall, run_jobs, run_jobs == 1 ? "" : "es", run_nice,
               load0, load1);
    for (int l = 0; l < slope_nkappas; l++) {
        unsigned ti = 0;
        const struct result *r = slope_find(0, l, 1, &ti);

        fprintf(f, " kappa %.4g |", r ? r->kappa : NAN);
    }
    fprintf(f, " slope: median [min-max] |\n|---|---|");
    for (int l = 0; l <= slope_nkappas; l++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (unsigned a = 0; a < NSLOPE; a++) {
        double sl[FAIR_MAX_SEEDS];
        int nsl = 0, have = 0;
        char lab[96];

        for (int l = 0; l < slope_nkappas; l++)
            have |= slope_find(a, l, 1, NULL) != NULL;
        if (!have)
            continue;
        slope_label(a, lab, sizeof lab);
        fprintf(f, "| %s | %s |", lab, slope_methods[a].why);
        kx[np][0] = 0;
        for (int l = 0; l < slope_nkappas; l++) {
            double ro[FAIR_MAX_SEEDS];
            int reached = 0, n = 0;
            unsigned ti = 0;
            const struct result *r = NULL;
            char cell[400];

            for (int s = 1; s <= slope_nseeds; s++) {
                r = slope_find(a, l, s, &ti);
                if (!r)
                    continue;
                ro[n++] = r->hit[1] ? (double)r->hit_rounds[1] : INFINITY;
                reached += r->hit[1];
                kx[np][l] = r->kappa;
            }
            spread_text(ro, n, reached, "%.0f", cell, sizeof cell);
            if (reached < n) {
                char why[160];

                stop_text(r, tasks[ti].max_rounds, why, sizeof why);
                snprintf(cell, sizeof cell, "%d of %d seeds reached%s%s", reached, n,
                         reached ? "" : "; ", reached ? "" : why);
            }
            fprintf(f, " %s |", cell);
            ym[np][l] = reached == n ? med(ro, n) : NAN;
            lo[np][l] = reached == n ? vmin(ro, n) : NAN;
            hi[np][l] = reached == n ? vmax(ro, n) : NAN;
        }
        for (int s = 1; s <= slope_nseeds; s++) {
            double x[SLOPE_MAX_KAPPAS], y[SLOPE_MAX_KAPPAS], v;
            int n = 0;

            for (int l = 0; l < slope_nkappas; l++) {
                const struct result *r = slope_find(a, l, s, NULL);

                if (r && r->hit[1]) {
                    x[n] = r->kappa;
                    y[n] = (double)r->hit_rounds[1];
                    n++;
                }
            }
            if (n >= 2 && fit_slope(x, y, n, &v) == 0)
                sl[nsl++] = v;
        }
        if (nsl) {
            char c[96];

            spread_text(sl, nsl, nsl, "%.2f", c, sizeof c);
            fprintf(f, " %s (%d seed%s) |\n", c, nsl, nsl == 1 ? "" : "s");
            snprintf(names[np], sizeof names[np], "%s: slope %.2f", lab, med(sl, nsl));
        } else {
            fprintf(f, " n/a (fewer than 2 kappas reached) |\n");
            snprintf(names[np], sizeof names[np], "%s: no slope", lab);
        }
        fprintf(stderr, "slope %-40s %s\n", lab, nsl ? "" : "n/a");
        ps[np].name = names[np];
        ps[np].x = kx[np];
        ps[np].y = ym[np];
        ps[np].n = (size_t)slope_nkappas;
        pb[np].lo = lo[np];
        pb[np].hi = hi[np];
        np++;
    }
    fprintf(f, "\nPlot: `accel-slopes.svg` (median rounds with a band from the least to "
               "the greatest seed; a kappa where a seed missed is left out).\n");
    fclose(f);
    sp.title = "mushrooms: rounds to relative gap 1e-6 against kappa, defaults";
    sp.xlabel = "kappa = L_f / mu";
    sp.ylabel = "rounds to 1e-6";
    sp.xlog = sp.ylog = 1;
    svg = plot_svg_bands(&sp, ps, pb, np, &len);
    if (!svg)
        die("slopes plot", "out of memory");
    f = out_open(dir, "accel-slopes.svg");
    if (fwrite(svg, 1, len, f) != len || fclose(f) != 0)
        die("accel-slopes.svg", "write failed");
    free(svg);
}

/* ---- main ------------------------------------------------------------- */

static int has_part(int part)
{
    for (unsigned i = 0; i < ntasks; i++)
        if (tasks[i].part == part)
            return 1;
    return 0;
}

static void load_all(const char *dir)
{
    for (unsigned i = 0; i < NDATASETS; i++) {
        char path[1200];
        ec_err e = {0};

        if (quick && i != DS_MUSHROOMS)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, datasets[i].name);
        if (ec_libsvm_read(path, NULL, &datasets[i].ds, &e) < 0)
            die(path, e.msg);
    }
}

static void solve_all(void)
{
    for (int i = 0; i < nprobs; i++) {
        ec_job job;
        ec_err e = {0};

        ec_job_defaults(&job);
        snprintf(job.dataset, sizeof job.dataset, "%s", datasets[probs[i].ds].name);
        job.lambda2_rel = probs[i].lambda2_rel;
        job.workers = 20;
        /* One problem serves every algorithm: set it up with every
         * constant any of them needs (ef21's L_tilde is computed only
         * when asked for). */
        job.algorithm = EC_ALGO_EF21;
        if (ec_problem_init(&probs[i].pb, &datasets[probs[i].ds].ds, &job, &e) < 0 ||
            ec_problem_solve(&probs[i].pb, &e) < 0)
            die(datasets[probs[i].ds].label, e.msg);
    }
}

static int quick_checks(void)
{
    const struct result *rep[2] = {NULL, NULL};
    int fails = 0;

    for (unsigned i = 0; i < ntasks; i++)
        if (tasks[i].part == PART_REPRO)
            rep[tasks[i].aux] = &results[i];
    if (!rep[0]->hit[1]) {
        fprintf(stderr, "FAIL: ECLK (randk, seed 7) did not reach 1e-6 on mushrooms in "
                        "30000 rounds (gap %.3g)\n", rep[0]->final_gap);
        fails++;
    }
    if (rep[0]->rounds != rep[1]->rounds ||
        memcmp(&rep[0]->final_gap, &rep[1]->final_gap, sizeof(double)) != 0 ||
        memcmp(&rep[0]->final_bits, &rep[1]->final_bits, sizeof(double)) != 0) {
        fprintf(stderr, "FAIL: the same seed gave different runs: %llu rounds, gap "
                        "%.17g against %llu rounds, gap %.17g\n",
                (unsigned long long)rep[0]->rounds, rep[0]->final_gap,
                (unsigned long long)rep[1]->rounds, rep[1]->final_gap);
        fails++;
    } else
        fprintf(stderr, "ok: same seed, same run twice (%llu rounds, gap %.17g)\n",
                (unsigned long long)rep[0]->rounds, rep[0]->final_gap);
    for (unsigned i = 0; i < ntasks; i++) {
        const struct task *t = &tasks[i];

        if (t->part == PART_TABLE && t->algo == EC_ALGO_ECLK && t->slot == CS_TOPKD &&
            !results[i].hit[1]) {
            fprintf(stderr, "FAIL: ECLK (topk k=%u) did not reach 1e-6 on mushrooms "
                            "in %llu rounds (gap %.3g)\n", t->comp.k,
                    (unsigned long long)t->max_rounds, results[i].final_gap);
            fails++;
        }
    }
    return fails;
}

/* --scale: every run's round budget times scale (at least one
   evaluation); a check keeps to its seed-1 run's budget. */
static void scale_budgets(double scale)
{
    for (unsigned i = 0; i < ntasks; i++)
        if (tasks[i].part != PART_DETCHECK && tasks[i].part != PART_REPRO)
            tasks[i].max_rounds = (uint64_t)fmax(
                (double)tasks[i].eval_every, floor(tasks[i].max_rounds * scale));
    /* A check compares the rows at the same round as its seed-1 run. */
    for (unsigned i = 0; i < ntasks; i++)
        for (unsigned k = 0; k < ntasks; k++)
            if (tasks[i].part == PART_DETCHECK && tasks[k].part == PART_TABLE &&
                tasks[k].prob == tasks[i].prob && tasks[k].algo == tasks[i].algo &&
                tasks[k].slot == tasks[i].slot &&
                tasks[k].max_rounds < tasks[i].max_rounds)
                tasks[i].max_rounds = tasks[k].max_rounds;
}

/* Runs every task on jobs (1..16) processes that take them in turn from
   shared memory, where their results land; dies unless all finished. */
static void run_all(int jobs)
{
    size_t bytes = sizeof *shared + ntasks * sizeof *results;
    void *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t pids[16];

    if (mem == MAP_FAILED)
        die("mmap", strerror(errno));
    shared = mem;
    results = (struct result *)((char *)mem + sizeof *shared);
    atomic_init(&shared->next, 0);
    shared->ntasks = ntasks;
    fprintf(stderr, "bench_paper: %u runs on %d processes\n", ntasks, jobs);
    fflush(stderr);
    for (int j = 0; j < jobs; j++) {
        if ((pids[j] = fork()) < 0)
            die("fork", strerror(errno));
        if (pids[j] == 0) {
            worker_loop((unsigned)j);
            fflush(stderr);
            _exit(0);
        }
    }
    for (int j = 0; j < jobs; j++) {
        int status;

        if (waitpid(pids[j], &status, 0) < 0 || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            die("worker process", "failed");
    }
    for (unsigned i = 0; i < ntasks; i++)
        if (!results[i].done)
            die("results", "a run did not finish");
}

int main(int argc, char **argv)
{
    const char *data_dir = getenv("ECOPT_DATA_DIR");
    const char *out_dir = "bench/results/paper";
    const char *only = NULL;     /* one dataset's tables alone (development) */
    const char *fair_grid_text = NULL, *fair_ds_text = "mushrooms,a9a,w8a";
    const char *fair_comp_text = "topk,randk", *fair_lam_text = NULL;
    double load0 = NAN, load1 = NAN;
    const char *part = NULL;     /* one part alone: tables, accel, p, steps */
    double scale = 1.0;          /* budgets times this (development; the
                                    tables' headers then overstate them) */
    int jobs = 2, nseeds = NSEEDS, nlam_accel = 4, fails = 0;
    struct timespec t0, t1;
    struct rusage ru;
    size_t off = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out_dir = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            nseeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--part") == 0 && i + 1 < argc)
            part = argv[++i];
        else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc)
            scale = atof(argv[++i]);
        else if (strcmp(argv[i], "--fair-seeds") == 0 && i + 1 < argc)
            fair_nseeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--fair-grid") == 0 && i + 1 < argc)
            fair_grid_text = argv[++i];
        else if (strcmp(argv[i], "--fair-extends") == 0 && i + 1 < argc)
            fair_extends = argv[++i];
        else if (strcmp(argv[i], "--fair-datasets") == 0 && i + 1 < argc)
            fair_ds_text = argv[++i];
        else if (strcmp(argv[i], "--fair-compressors") == 0 && i + 1 < argc)
            fair_comp_text = argv[++i];
        else if (strcmp(argv[i], "--fair-lambdas") == 0 && i + 1 < argc)
            fair_lam_text = argv[++i];
        else if (strcmp(argv[i], "--fair-methods") == 0 && i + 1 < argc)
            fair_methods_text = argv[++i];
        else if (strcmp(argv[i], "--slope-seeds") == 0 && i + 1 < argc)
            slope_nseeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--slope-kappas") == 0 && i + 1 < argc)
            slope_nkappas = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--quick] [--out DIR] [--jobs N] "
                            "[--part tables|accel|p|steps|tuned|fair|accel-family|slopes] "
                            "[--only DATASET] [--seeds N] "
                            "[--scale F] [--fair-seeds N] [--fair-grid M,M,...] "
                            "[--fair-extends FILE] "
                            "[--fair-datasets NAME,...] [--fair-compressors topk,randk,top1] "
                            "[--fair-lambdas 1e-3,1e-4] [--fair-methods NAME,...] "
                            "[--slope-seeds N] [--slope-kappas 3|4]\n",
                    argv[0]);
            return 2;
        }
    }
    if (jobs < 1 || jobs > 16)
        jobs = 2;
    run_jobs = jobs;
    errno = 0;
    run_nice = getpriority(PRIO_PROCESS, 0);
    if (run_nice == -1 && errno)
        run_nice = 0;
    if (nseeds < 1 || nseeds > NSEEDS)
        nseeds = NSEEDS;
    if (fair_nseeds < 1 || fair_nseeds > FAIR_MAX_SEEDS)
        die("--fair-seeds", "must be 1..5");
    if (slope_nseeds < 1 || slope_nseeds > FAIR_MAX_SEEDS)
        die("--slope-seeds", "must be 1..5");
    if (slope_nkappas < 3 || slope_nkappas > SLOPE_MAX_KAPPAS)
        die("--slope-kappas", "must be 3 (lambda2_rel 1e-2 .. 1e-4) or 4 (.. 1e-5)");
    if (fair_grid_text)
        fair_parse_grid(fair_grid_text);
    fair_check_grid();
    fair_parse_lists(fair_ds_text, fair_comp_text);
    if (fair_lam_text)
        fair_parse_lambdas(fair_lam_text);
    for (int i = 0; i < argc && off < sizeof command - 1; i++)
        off += (size_t)snprintf(command + off, sizeof command - off, "%s%s",
                                i ? " " : "", argv[i]);
    if (!data_dir)
        data_dir = "../shared/datasets";
    if (mkdir(out_dir, 0777) < 0 && errno != EEXIST)
        die(out_dir, strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &t0);

    load_all(data_dir);
    if (quick) {
        static const int mask[NALGOS] = {1, 0, 0, 1, 0, 0, 1, 0, 1};

        nseeds = 1;
        nlam_accel = 2;
        datasets[DS_MUSHROOMS].rounds_full = 3000;
        datasets[DS_MUSHROOMS].rounds_stoch = 20000;
        add_table_tasks(DS_MUSHROOMS, DS_MUSHROOMS, 1, 1, mask);
        add_accel_tasks(nlam_accel);
        add_repro_tasks();
    } else if (only) {
        for (unsigned i = 0; i < NDATASETS; i++)
            if (strcmp(datasets[i].label, only) == 0)
                add_table_tasks((int)i, (int)i, 2, nseeds, NULL);
        if (!ntasks)
            die(only, "no such dataset");
    } else {
        if (!part || strcmp(part, "tables") == 0)
            add_table_tasks(0, (int)NDATASETS - 1, 2, nseeds, NULL);
        if (!part || strcmp(part, "accel") == 0)
            add_accel_tasks(nlam_accel);
        if (!part || strcmp(part, "p") == 0)
            add_p_tasks(nseeds);
        if (!part || strcmp(part, "steps") == 0) {
            add_step_tasks();
            add_small_step_tasks();
        }
        if (!part || strcmp(part, "tuned") == 0)
            add_tuned_tasks();
        if (!part || strcmp(part, "fair") == 0) {
            fair_part = PART_FAIR;
            add_fair_tasks();
        }
        if (!part || strcmp(part, "accel-family") == 0) {
            fair_part = PART_FAMILY;
            add_fair_tasks();
        }
        if (!part || strcmp(part, "slopes") == 0)
            add_slope_tasks();
        if (!ntasks)
            die(part, "no such part (tables, accel, p, steps, tuned, fair, accel-family "
                      "or slopes)");
    }
    if (scale > 0 && scale != 1.0)
        scale_budgets(scale);
    solve_all();
    {
        double la[1];

        if (getloadavg(la, 1) == 1)
            load0 = la[0];
    }
    qsort(tasks, ntasks, sizeof *tasks, cost_cmp);
    run_all(jobs);
    restore_order();

    write_tables(out_dir);
    if (has_part(PART_DETCHECK))
        fails += write_detchecks(out_dir);
    write_curves(out_dir);
    {
        double slopes[4];
        int npts[4];

        if (has_part(PART_ACCEL)) {
            write_accel(out_dir, nlam_accel, slopes, npts);
            for (int a = 0; a < 4; a++)
                fprintf(stderr, "slope %-12s %.3f (%d points)\n", accel_algos[a],
                        slopes[a], npts[a]);
        }
    }
    if (has_part(PART_P))
        write_p(out_dir, nseeds);
    if (has_part(PART_STEP))
        write_steps(out_dir);
    if (has_part(PART_TUNED))
        write_tuned(out_dir);
    {
        double la[1], wall;

        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (getloadavg(la, 1) == 1)
            load1 = la[0];
        wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (has_part(PART_FAIR)) {
            fair_part = PART_FAIR;
            write_fair(out_dir, wall, load0, load1);
        }
        if (has_part(PART_FAMILY)) {
            fair_part = PART_FAMILY;
            write_fair(out_dir, wall, load0, load1);
        }
        if (has_part(PART_SLOPE))
            write_slopes(out_dir, wall, load0, load1);
    }
    if (quick)
        fails += quick_checks();

    clock_gettime(CLOCK_MONOTONIC, &t1);
    getrusage(RUSAGE_CHILDREN, &ru);
    fprintf(stderr, "bench_paper: %u runs, wall %.1f s, CPU of the runs %.1f s; %s\n",
            ntasks, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec),
            (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec,
            fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
