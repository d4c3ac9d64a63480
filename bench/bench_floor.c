/*
 * Large rounds against their memory floor, and top-k old against new.
 *
 * 1. The floor of an ECLK round at d = 1e6 with n = 20 workers, from the
 *    passes the round must make: each worker reads and writes its error
 *    memory once (d doubles in, d out), and the model is read and written
 *    once, so n + 1 copies of d doubles. Its time is measured here, in the
 *    same run, as one memcpy of (n + 1) d doubles between buffers far
 *    larger than the caches; the in-process round time (ec_run_inproc on
 *    data from ec_gen_write, the generator behind `ecopt gen`: 100k rows,
 *    20 nonzeros a row, seed 1; ECLK, topk k = 1000, lambda1 1e-6) is
 *    printed as a ratio to it. Floor and rounds alternate, REPS times.
 * 2. Top-k at d = 1e6: today's selection (EC_TOPK_SELECT_AUTO) against
 *    the radix select that served k > 64 before (EC_TOPK_SELECT_RADIX),
 *    on the same Gaussian vector, alternating batches of each, PAIRS
 *    ratios.
 * Both print the ratios' median and min-max spread and the load average
 * before and after. Writes bench/results/floor.md (or argv[1]).
 *
 *   make bench-floor          (REPS=5 PAIRS=7 by default)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/compress.h"
#include "ecopt/data.h"
#include "ecopt/gen.h"
#include "ecopt/problem.h"
#include "ecopt/rng.h"
#include "ecopt/run.h"

#define FLOOR_D 1000000u
#define FLOOR_ROWS 100000u
#define FLOOR_NNZ 20u
#define FLOOR_WORKERS 20u
#define FLOOR_K 1000u
#define FLOOR_ROUNDS 40u
#define MAX_REPS 32

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU seconds: on a machine whose load exceeds its CPUs the
 * wall clock also counts the time others held the CPU. */
static double cpu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void load_average(char *buf, size_t len)
{
    FILE *f = fopen("/proc/loadavg", "r");

    snprintf(buf, len, "n/a");
    if (f) {
        if (fgets(buf, (int)len, f))
            buf[strcspn(buf, "\n")] = '\0';
        fclose(f);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* The median and min-max of v[0..n), which it sorts. */
static void spread(double *v, int n, double *med, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    *lo = v[0];
    *hi = v[n - 1];
}

static int env_int(const char *name, int dflt, int lo, int hi)
{
    const char *s = getenv(name);
    int v = s ? atoi(s) : dflt;

    return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Wall and CPU seconds for one memcpy of n doubles between buffers made
 * for it (every page written first, so it times memory, not page faults),
 * best of three. The buffers go before the run: kept, they made the
 * run's sparse reads several times slower on this VM.
 */
static int copy_seconds(size_t n, double *wall, double *cpu)
{
    double *src = malloc(n * sizeof *src), *dst = malloc(n * sizeof *dst);

    if (!src || !dst) {
        free(src);
        free(dst);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        src[i] = dst[i] = (double)i;
    *wall = *cpu = INFINITY;
    for (int i = 0; i < 3; i++) {
        double t = now(), c = cpu_now();

        memcpy(dst, src, n * sizeof *dst);
        *cpu = fmin(*cpu, cpu_now() - c);
        *wall = fmin(*wall, now() - t);
    }
    free(src);
    free(dst);
    return 0;
}

/* Wall and CPU seconds of one evaluation (ec_eval) at x, best of three:
 * the timed span of a run holds one. */
static void eval_seconds(const ec_problem *pb, double *x, double *tmp,
                         double *tmp2, double *wall, double *cpu)
{
    ec_metric row;

    *wall = *cpu = INFINITY;
    for (int i = 0; i < 3; i++) {
        double t = now(), c = cpu_now();

        ec_eval(pb, x, tmp, tmp2, &row);
        *cpu = fmin(*cpu, cpu_now() - c);
        *wall = fmin(*wall, now() - t);
    }
}

/* The clock at each evaluated row: the first comes after the init
 * exchange, so the span to the last is the rounds (and one evaluation). */
struct row_clock {
    double first, last, first_cpu, last_cpu;
    uint64_t first_round, last_round;
};

static int clock_row(void *ctx, const ec_metric *row)
{
    struct row_clock *rc = ctx;
    double t = now(), c = cpu_now();

    if (row->round == 0) {
        rc->first = t;
        rc->first_cpu = c;
        rc->first_round = row->round;
    }
    rc->last = t;
    rc->last_cpu = c;
    rc->last_round = row->round;
    return 0;
}

/* The generated problem, solved as far as a timed run needs: P* is set to
 * 0 (a lower bound of the logistic objective), the target to 0, so every
 * run goes its FLOOR_ROUNDS and no 2-minute solve precedes it. */
static int setup(ec_dataset *ds, ec_problem *pb, ec_job *job, ec_params *prm)
{
    ec_gen_opts go = {FLOOR_ROWS, FLOOR_D, FLOOR_NNZ, 1, 0, EC_GEN_LOGISTIC};
    char path[] = "/tmp/ecopt-floor-XXXXXX";
    ec_err e = {0};
    int fd = mkstemp(path), rc = -1;
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;

    if (!f || ec_gen_write(f, &go, &e) < 0 || fclose(f) != 0) {
        fprintf(stderr, "bench_floor: cannot write %s: %s\n", path, e.msg);
        goto out;
    }
    f = NULL;
    ec_job_defaults(job);
    job->workers = FLOOR_WORKERS;
    job->compressor.type = EC_COMP_TOPK;
    job->compressor.k = FLOOR_K;
    job->lambda1 = 1e-6;
    job->lambda2_rel = 1e-4;    /* what a job spec defaults to */
    job->target = 0;
    job->max_rounds = FLOOR_ROUNDS;
    job->eval_every = FLOOR_ROUNDS;
    if (ec_libsvm_read(path, NULL, ds, &e) < 0 ||
        ec_problem_init(pb, ds, job, &e) < 0 ||
        ec_problem_use_pstar(pb, 0.0, NAN, "bench", &e) < 0 ||
        ec_params_resolve(job, pb, prm, &e) < 0) {
        fprintf(stderr, "bench_floor: %s\n", e.msg);
        goto out;
    }
    rc = 0;
out:
    if (f)
        fclose(f);
    if (fd >= 0)
        unlink(path);
    return rc;
}

struct floor_result {
    int reps;
    double copy_gbs[MAX_REPS], floor_ms[MAX_REPS], round_ms[MAX_REPS];
    double ratio[MAX_REPS], eval_ms[MAX_REPS];
    /* The same in CPU time of this thread. */
    double floor_cpu_ms[MAX_REPS], round_cpu_ms[MAX_REPS];
    double ratio_cpu[MAX_REPS];
};

static int measure_floor(struct floor_result *r)
{
    const size_t n = (size_t)(FLOOR_WORKERS + 1) * FLOOR_D;
    double *point = malloc(FLOOR_D * sizeof *point);
    double *tmp = malloc(FLOOR_D * sizeof *tmp);
    double *tmp2 = malloc(FLOOR_D * sizeof *tmp2);
    ec_dataset ds = {0};
    ec_problem pb;
    ec_job job;
    ec_params prm;
    int rc = -1;

    if (!point || !tmp || !tmp2) {
        fprintf(stderr, "bench_floor: out of memory\n");
        goto out;
    }
    /* Touch every page, so the copies time memory, not page faults. */
    /* Written with values that are not zero, which the compiler could
     * turn into a calloc: on this VM sparse reads of pages never written
     * (the shared zero page) measured 100 times slower than of written
     * ones (an evaluation of 4 s instead of 40 ms). */
    for (size_t j = 0; j < FLOOR_D; j++)
        point[j] = tmp[j] = tmp2[j] = 1e-9;
    if (setup(&ds, &pb, &job, &prm) < 0)
        goto out;
    for (int i = 0; i < r->reps; i++) {
        ec_summary sum;
        ec_err e = {0};
        struct row_clock clk = {0};
        double t, c, et, ec, rounds;

        if (copy_seconds(n, &t, &c) < 0) {
            fprintf(stderr, "bench_floor: out of memory\n");
            goto out_pb;
        }
        r->copy_gbs[i] = 2.0 * (double)(n * sizeof(double)) / t / 1e9;
        r->floor_ms[i] = 1e3 * t;
        r->floor_cpu_ms[i] = 1e3 * c;
        eval_seconds(&pb, point, tmp, tmp2, &et, &ec);
        r->eval_ms[i] = 1e3 * et;

        if (ec_run_inproc(&pb, &prm, &job, clock_row, &clk, &sum, &e) < 0 ||
            clk.last_round <= clk.first_round) {
            fprintf(stderr, "bench_floor: %s\n",
                    e.msg[0] ? e.msg : "the run made no rounds");
            goto out_pb;
        }
        rounds = (double)(clk.last_round - clk.first_round);
        r->round_ms[i] = 1e3 * (clk.last - clk.first - et) / rounds;
        r->round_cpu_ms[i] = 1e3 * (clk.last_cpu - clk.first_cpu - ec) /
                             rounds;
        r->ratio[i] = r->round_ms[i] / r->floor_ms[i];
        r->ratio_cpu[i] = r->round_cpu_ms[i] / r->floor_cpu_ms[i];
        fprintf(stderr, "floor %.1f ms, round %.1f ms: %.2fx; CPU time "
                        "%.1f, %.1f ms: %.2fx\n",
                r->floor_ms[i], r->round_ms[i], r->ratio[i],
                r->floor_cpu_ms[i], r->round_cpu_ms[i], r->ratio_cpu[i]);
    }
    rc = 0;
out_pb:
    ec_problem_clear(&pb);
out:
    ec_dataset_clear(&ds);
    free(point);
    free(tmp);
    free(tmp2);
    return rc;
}

/* Seconds per call in one batch of at least 0.1 s. */
static double topk_batch(ec_compressor *c, const double *x, ec_msg *m)
{
    double start = now(), elapsed;
    long calls = 0;

    do {
        ec_compress(c, x, NULL, m);
        calls++;
    } while ((elapsed = now() - start) < 0.1);
    return elapsed / (double)calls;
}

/* Old (radix) and new (auto) alternately: per pair, old / new. */
static int measure_topk(uint32_t k, int pairs, double *old_ms, double *new_ms,
                        double *ratio)
{
    const uint32_t d = FLOOR_D;
    ec_comp_spec spec = {.type = EC_COMP_TOPK, .k = k};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, d, &e);
    double *x = malloc((size_t)d * sizeof *x);
    ec_msg m;
    ec_rng r;
    int rc = -1;

    if (!c || !x || ec_msg_init(&m, d) < 0) {
        fprintf(stderr, "bench_floor: %s\n", c ? "out of memory" : e.msg);
        ec_compressor_free(c);
        free(x);
        return -1;
    }
    ec_rng_seed(&r, 7, 0);
    for (uint32_t j = 0; j < d; j++)
        x[j] = ec_rng_normal(&r);
    for (int p = 0; p < pairs; p++) {
        if (ec_compressor_set_topk_select(c, EC_TOPK_SELECT_RADIX) < 0)
            goto out;
        old_ms[p] = 1e3 * topk_batch(c, x, &m);
        if (ec_compressor_set_topk_select(c, EC_TOPK_SELECT_AUTO) < 0)
            goto out;
        new_ms[p] = 1e3 * topk_batch(c, x, &m);
        ratio[p] = old_ms[p] / new_ms[p];
    }
    rc = 0;
out:
    ec_msg_clear(&m);
    ec_compressor_free(c);
    free(x);
    return rc;
}

static void print_floor(FILE *f, const struct floor_result *res)
{
    double med, lo, hi, fm, flo, fhi, rm, rlo, rhi, gm, glo, ghi;
    struct floor_result sorted = *res, *r = &sorted;
    const int n = res->reps;

    fprintf(f, "## The round against its floor\n\n"
               "Generated data (ec_gen_write, as `ecopt gen --rows %u "
               "--features %u --nnz %u --seed 1`), ECLK, %u workers, topk "
               "k = %u, lambda1 1e-6, lambda2_rel 1e-4, in process (ec_run_inproc), %u rounds "
               "a run, %d runs alternating with the floor's copy.\n\n"
               "Floor = one memcpy of (workers + 1) x d doubles = %.0f MiB "
               "(each worker reads and writes its error memory once; the "
               "model is read and written once), best of 3 copies before "
               "each run.\n\n",
            FLOOR_ROWS, FLOOR_D, FLOOR_NNZ, FLOOR_WORKERS, FLOOR_K,
            FLOOR_ROUNDS, n,
            (double)(FLOOR_WORKERS + 1) * FLOOR_D * 8 / 1048576.0);
    fprintf(f, "Round = the span from the first evaluated row (after the "
               "init exchange) to the last, less one evaluation (timed "
               "alone before each run), over the rounds between. Wall "
               "time, and this thread's CPU time: with the load above the "
               "CPU count the wall clock also counts others' turns.\n\n");
    fprintf(f, "| run | copy, GB/s (read + write) | floor, ms | eval, ms | "
               "round, ms | round / floor | CPU: floor, ms | CPU: round, "
               "ms | CPU: round / floor |\n"
               "|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++)
        fprintf(f, "| %d | %.1f | %.1f | %.1f | %.1f | %.2fx | %.1f | %.1f "
                   "| %.2fx |\n", i + 1,
                res->copy_gbs[i], res->floor_ms[i], res->eval_ms[i],
                res->round_ms[i], res->ratio[i], res->floor_cpu_ms[i],
                res->round_cpu_ms[i], res->ratio_cpu[i]);
    spread(r->copy_gbs, n, &gm, &glo, &ghi);
    spread(r->floor_ms, n, &fm, &flo, &fhi);
    spread(r->round_ms, n, &rm, &rlo, &rhi);
    spread(r->ratio, n, &med, &lo, &hi);
    fprintf(f, "\nMedians: copy %.1f GB/s (%.1f-%.1f), floor %.1f ms "
               "(%.1f-%.1f), round %.1f ms (%.1f-%.1f); **round / floor "
               "%.2fx (%.2f-%.2f)**.\n",
            gm, glo, ghi, fm, flo, fhi, rm, rlo, rhi, med, lo, hi);
    spread(r->floor_cpu_ms, n, &fm, &flo, &fhi);
    spread(r->round_cpu_ms, n, &rm, &rlo, &rhi);
    spread(r->ratio_cpu, n, &med, &lo, &hi);
    fprintf(f, "In CPU time: floor %.1f ms (%.1f-%.1f), round %.1f ms "
               "(%.1f-%.1f); **round / floor %.2fx (%.2f-%.2f)**.\n\n",
            fm, flo, fhi, rm, rlo, rhi, med, lo, hi);
}

int main(int argc, char **argv)
{
    static const uint32_t ks[] = {100, 1000, 10000, 100000};
    enum { NK = sizeof ks / sizeof ks[0] };
    const char *path = argc > 1 ? argv[1] : "bench/results/floor.md";
    const int pairs = env_int("PAIRS", 7, 1, MAX_REPS);
    struct floor_result fr = {.reps = env_int("REPS", 5, 1, MAX_REPS)};
    double old_ms[NK][MAX_REPS], new_ms[NK][MAX_REPS], ratio[NK][MAX_REPS];
    char load0[128], load1[128], load2[128];
    FILE *out;

    load_average(load0, sizeof load0);
    for (int i = 0; i < NK; i++)
        if (measure_topk(ks[i], pairs, old_ms[i], new_ms[i], ratio[i]) < 0)
            return 1;
    load_average(load1, sizeof load1);
    if (measure_floor(&fr) < 0)
        return 1;
    load_average(load2, sizeof load2);
    if (!(out = fopen(path, "w")))
        fprintf(stderr, "bench_floor: cannot write %s; stdout only\n", path);
    for (FILE *f = stdout; f; f = f == stdout ? out : NULL) {
        fprintf(f, "# Large rounds against the memory floor\n\n"
                   "`make bench-floor` (bench/bench_floor.c), %ld CPUs online. "
                   "Load average (1, 5, 15 min) at the start: %s; after the "
                   "top-k table: %s; at the end: %s.\n\n",
                sysconf(_SC_NPROCESSORS_ONLN), load0, load1, load2);
        print_floor(f, &fr);
        fprintf(f, "## Top-k at d = %u: radix select (before) against "
                   "today's selection\n\nOne Gaussian vector, %d pairs of "
                   "batches of at least 0.1 s, old and new alternating; "
                   "ms a call, medians (min-max).\n\n"
                   "| k | radix, ms | today, ms | radix / today |\n"
                   "|---|---|---|---|\n",
                FLOOR_D, pairs);
        for (int i = 0; i < NK; i++) {
            double om, olo, ohi, nm, nlo, nhi, rm, rlo, rhi;

            spread(old_ms[i], pairs, &om, &olo, &ohi);
            spread(new_ms[i], pairs, &nm, &nlo, &nhi);
            spread(ratio[i], pairs, &rm, &rlo, &rhi);
            fprintf(f, "| %u | %.3f (%.3f-%.3f) | %.3f (%.3f-%.3f) | "
                       "%.2fx (%.2f-%.2f) |\n",
                    ks[i], om, olo, ohi, nm, nlo, nhi, rm, rlo, rhi);
        }
    }
    if (out)
        fclose(out);
    return 0;
}
