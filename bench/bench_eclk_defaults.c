/*
 * ECLK's rules and guard on every dataset and compressor: rounds to
 * relative gap 1e-6 and the largest excursion of the gap above its start,
 * per configuration (a rule, the guard on or off and its threshold: the
 * job fields eclk_rule, eclk_guard, eclk_guard_threshold), so the default
 * is chosen by measurement (docs/algorithms.md, "ECLK's defaults
 * measured"). Every run is in process and a pure function of its job; the
 * runs are spread over --jobs forked processes.
 *
 *   bench_eclk_defaults [--out FILE] [--jobs N] [--configs LIST]
 *                       [--seeds N] [--budget R] [--only DATASETS]
 *                       [--comps LIST] [--lambda2-rel X] [--batch full]
 *
 * LIST is a comma-separated subset of the configurations below (default
 * plain, nominal, online); DATASETS a comma-separated list of dataset
 * name prefixes; the --comps LIST of top-1, top-5%, rand-1, rand-5%,
 * dither.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"

#define TARGET 1e-6
/* A run whose gap goes above this many times its start is stopped there:
 * it already failed the table's rule (no excursion above 2x). */
#define EXCURSION_STOP 10.0

static const char *const ds_names[] = {"a1a", "a5a", "a9a", "mushrooms",
                                       "w8a", "madelon.gz"};
#define NDS (sizeof ds_names / sizeof ds_names[0])

enum { C_TOP1, C_TOPF, C_RAND1, C_RANDF, C_DITHER, NCOMP };
static const char *const comp_names[NCOMP] = {"top-1", "top-5%", "rand-1",
                                              "rand-5%", "dither s=1"};

/* The configurations: a rule, the guard (threshold 0: off) and, to
 * explore, the inflation's margin c (0: the engine's, 1/2; not a job
 * field: set on the resolved parameters). */
static const struct config {
    const char *name;
    ec_eclk_rule rule;
    double guard;
    double c;
} configs[] = {
    {"plain", EC_ECLK_PLAIN, 0, 0},
    {"nominal", EC_ECLK_NOMINAL, 0, 0},
    {"online", EC_ECLK_ONLINE, EC_ECLK_GUARD_THRESHOLD, 0},
    {"guarded-plain", EC_ECLK_PLAIN, EC_ECLK_GUARD_THRESHOLD, 0},
    {"guarded-plain-4", EC_ECLK_PLAIN, 4.0, 0},
    {"guarded-nominal", EC_ECLK_NOMINAL, EC_ECLK_GUARD_THRESHOLD, 0},
    {"online-c1", EC_ECLK_ONLINE, EC_ECLK_GUARD_THRESHOLD, 1.0},
    {"online-c2", EC_ECLK_ONLINE, EC_ECLK_GUARD_THRESHOLD, 2.0},
    {"adaptive", EC_ECLK_ADAPTIVE, EC_ECLK_GUARD_OBJECTIVE, 0},
};
#define NRULES (sizeof configs / sizeof configs[0])

struct task {
    int ds, comp, rule;
    uint64_t seed;
};

struct result {
    int done, stop;           /* ec_stop, or -1 for the excursion stop */
    uint64_t rounds;          /* to the target, or where it stopped */
    double max_gap;           /* largest relative gap seen */
    double final_gap;
    double delta, delta_start, delta_end, inflation_end;
    uint64_t restarts, updates;
    uint32_t k;
};

static ec_dataset dsets[NDS];
static ec_problem probs[NDS];
static struct task *tasks;
static struct result *results;
static unsigned ntasks;
static atomic_uint *next_task;
static uint64_t budget = 100000;
static double lambda2_rel = 1e-3;
static int full_batch;

static ec_comp_spec comp_spec(int c, uint32_t d)
{
    ec_comp_spec s = {EC_COMP_NONE, 0, 0};
    uint32_t kf = (d + 19) / 20;

    switch (c) {
    case C_TOP1: s.type = EC_COMP_TOPK; s.k = 1; break;
    case C_TOPF: s.type = EC_COMP_TOPK; s.k = kf; break;
    case C_RAND1: s.type = EC_COMP_RANDK; s.k = 1; break;
    case C_RANDF: s.type = EC_COMP_RANDK; s.k = kf; break;
    default: s.type = EC_COMP_DITHER; s.s = 1; break;
    }
    return s;
}

struct watch {
    struct result *r;
};

static int watch_row(void *ctx, const ec_metric *row)
{
    struct result *r = ((struct watch *)ctx)->r;

    if (row->rel_gap > r->max_gap || isnan(row->rel_gap))
        r->max_gap = isnan(row->rel_gap) ? INFINITY : row->rel_gap;
    if (r->max_gap > EXCURSION_STOP) {
        r->stop = -1;
        r->rounds = row->round;
        return 1;
    }
    return 0;
}

static void run_task(unsigned i)
{
    const struct task *t = &tasks[i];
    struct result *r = &results[i];
    ec_problem *pb = &probs[t->ds];
    struct watch w = {r};
    ec_job job;
    ec_params prm;
    ec_summary sum;
    ec_err e = {0};

    memset(r, 0, sizeof *r);
    r->stop = EC_STOP_FAILED;
    ec_job_defaults(&job);
    job.lambda2_rel = lambda2_rel;
    job.workers = 20;
    job.algorithm = EC_ALGO_ECLK;
    job.compressor = comp_spec(t->comp, pb->d);
    job.max_rounds = budget;
    if (full_batch)
        job.batch = EC_JOB_BATCH_FULL;
    job.eval_every = 10;
    job.target = TARGET;
    job.seed = t->seed;
    job.max_seconds = 1e9;
    job.eclk_rule = (int)configs[t->rule].rule;
    job.eclk_guard = configs[t->rule].guard > 0;
    if (job.eclk_guard && configs[t->rule].rule != EC_ECLK_ADAPTIVE)
        job.eclk_guard_threshold = configs[t->rule].guard;
    if (ec_params_resolve(&job, pb, &prm, &e) < 0) {
        fprintf(stderr, "bench_eclk_defaults: %s\n", e.msg);
        _exit(1);
    }
    if (configs[t->rule].c > 0) {
        prm.eclk_c = configs[t->rule].c;
        ec_params_set_eclk(&prm, prm.eclk_rule, prm.delta);
    }
    r->delta = prm.delta;
    r->delta_start = prm.delta_eff;
    r->k = job.compressor.k;
    if (ec_run_inproc(pb, &prm, &job, watch_row, &w, &sum, &e) < 0) {
        fprintf(stderr, "bench_eclk_defaults: %s\n", e.msg);
        _exit(1);
    }
    if (r->stop != -1) {
        r->stop = (int)sum.stop;
        r->rounds = sum.rounds;
    }
    r->final_gap = sum.last.rel_gap;
    r->delta_end = sum.eclk.delta_eff;
    r->inflation_end = sum.eclk.inflation;
    r->restarts = sum.eclk.restarts;
    r->updates = sum.eclk.updates;
    r->done = 1;
}

static int parse_rules(const char *list, int *want)
{
    char buf[256], *tok, *save = NULL;

    snprintf(buf, sizeof buf, "%s", list);
    for (unsigned i = 0; i < NRULES; i++)
        want[i] = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (unsigned i = 0; i < NRULES; i++)
            if (strcmp(tok, configs[i].name) == 0)
                want[i] = found = 1;
        if (!found)
            return -1;
    }
    return 0;
}

/* Whether name starts with one of the comma-separated prefixes of list. */
static int listed(const char *list, const char *name)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");

        if (n && strncmp(name, p, n) == 0)
            return 1;
        p += n + (p[n] == ',');
    }
    return 0;
}

static void cell(FILE *f, const struct result *r)
{
    if (!r->done)
        fprintf(f, " - |");
    else if (r->stop == EC_STOP_TARGET && r->max_gap <= 2.0)
        fprintf(f, " %llu |", (unsigned long long)r->rounds);
    else if (r->stop == EC_STOP_TARGET)
        fprintf(f, " %llu (up to x%.3g) |", (unsigned long long)r->rounds, r->max_gap);
    else if (r->stop == -1 || r->stop == EC_STOP_DIVERGED)
        fprintf(f, " **x%.3g at %llu** |", r->max_gap, (unsigned long long)r->rounds);
    else
        fprintf(f, " **not reached (%.2g)** |", r->final_gap);
}

int main(int argc, char **argv)
{
    const char *dir = getenv("ECOPT_DATA_DIR"), *out = NULL, *only = NULL;
    int want[NRULES] = {1, 1, 1}, jobs = 2, nseeds = 2, want_comp[NCOMP] = {1, 1, 1, 1, 1};
    FILE *f = stdout;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc)
            jobs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc)
            nseeds = atoi(argv[++i]);
        else if (strcmp(argv[i], "--budget") == 0 && i + 1 < argc)
            budget = strtoull(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--lambda2-rel") == 0 && i + 1 < argc)
            lambda2_rel = atof(argv[++i]);
        else if (strcmp(argv[i], "--batch") == 0 && i + 1 < argc)
            full_batch = strcmp(argv[++i], "full") == 0;
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if ((strcmp(argv[i], "--configs") == 0 || strcmp(argv[i], "--rules") == 0) &&
                 i + 1 < argc) {
            if (parse_rules(argv[++i], want) < 0) {
                fprintf(stderr, "bench_eclk_defaults: --configs: one of");
                for (unsigned k = 0; k < NRULES; k++)
                    fprintf(stderr, " %s", configs[k].name);
                fputc('\n', stderr);
                return 2;
            }
        } else if (strcmp(argv[i], "--comps") == 0 && i + 1 < argc) {
            const char *list = argv[++i];
            for (int c = 0; c < NCOMP; c++)
                want_comp[c] = strstr(list, comp_names[c]) != NULL ||
                               (c == C_DITHER && strstr(list, "dither"));
        } else {
            fprintf(stderr, "usage: %s [--out FILE] [--jobs N] [--configs LIST] "
                            "[--seeds N] [--budget R] [--only DATASETS] "
                            "[--comps LIST]\n", argv[0]);
            return 2;
        }
    }
    if (!dir)
        dir = "../shared/datasets";
    if (jobs < 1)
        jobs = 1;

    for (unsigned d = 0; d < NDS; d++) {
        char path[1200];
        ec_job job;
        ec_err e = {0};

        if (only && !listed(only, ds_names[d]))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, ds_names[d]);
        ec_job_defaults(&job);
        job.lambda2_rel = lambda2_rel;
        job.workers = 20;
        if (ec_libsvm_read(path, NULL, &dsets[d], &e) < 0 ||
            ec_problem_init(&probs[d], &dsets[d], &job, &e) < 0 ||
            ec_problem_solve(&probs[d], &e) < 0) {
            fprintf(stderr, "bench_eclk_defaults: %s: %s\n", path, e.msg);
            return 1;
        }
    }

    tasks = calloc(NDS * NCOMP * NRULES * (unsigned)nseeds, sizeof *tasks);
    for (unsigned d = 0; d < NDS; d++)
        for (int c = 0; c < NCOMP; c++)
            for (int r = 0; r < (int)NRULES; r++)
                for (int s = 1; s <= nseeds; s++) {
                    if (!want[r] || !dsets[d].n_rows || !want_comp[c])
                        continue;
                    tasks[ntasks++] = (struct task){(int)d, c, r, (uint64_t)s};
                }
    results = mmap(NULL, ntasks * sizeof *results + sizeof *next_task,
                   PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (results == MAP_FAILED)
        return 1;
    next_task = (atomic_uint *)(results + ntasks);
    atomic_init(next_task, 0);
    for (int j = 0; j < jobs; j++) {
        pid_t pid = fork();
        if (pid == 0) {
            unsigned i;
            while ((i = atomic_fetch_add(next_task, 1)) < ntasks) {
                const struct task *t = &tasks[i];
                run_task(i);
                fprintf(stderr, "%-10s %-10s %-7s seed %llu: %s %llu rounds, max x%.3g, delta %.3g -> %.3g, infl %.3g, restarts %llu\n",
                        ds_names[t->ds], comp_names[t->comp],
                        configs[t->rule].name,
                        (unsigned long long)t->seed,
                        results[i].stop == -1 ? "excursion" : ec_stop_name(results[i].stop),
                        (unsigned long long)results[i].rounds, results[i].max_gap,
                        results[i].delta_start, results[i].delta_end,
                        results[i].inflation_end,
                        (unsigned long long)results[i].restarts);
            }
            _exit(0);
        }
    }
    while (wait(NULL) > 0)
        ;

    if (out && !(f = fopen(out, "w"))) {
        perror(out);
        return 1;
    }
    fprintf(f, "| dataset | compressor | delta |");
    for (unsigned r = 0; r < NRULES; r++)
        if (want[r])
            for (int s = 1; s <= nseeds; s++)
                fprintf(f, " %s s%d |", configs[r].name, s);
    fprintf(f, " realised delta (online, end) |\n|---|---|---|");
    for (unsigned r = 0; r < NRULES; r++)
        if (want[r])
            for (int s = 1; s <= nseeds; s++)
                fprintf(f, "---|");
    fprintf(f, "---|\n");
    for (unsigned d = 0; d < NDS; d++)
        for (int c = 0; c < NCOMP; c++) {
            const struct result *first = NULL;
            double dend = NAN;

            for (unsigned i = 0; i < ntasks; i++)
                if (tasks[i].ds == (int)d && tasks[i].comp == c) {
                    if (!first)
                        first = &results[i];
                    if (configs[tasks[i].rule].rule == EC_ECLK_ONLINE && tasks[i].seed == 1)
                        dend = results[i].delta_end;
                }
            if (!first)
                continue;
            fprintf(f, "| %s | %s (k=%u) | %.3g |", ds_names[d], comp_names[c],
                    first->k, first->delta);
            for (unsigned i = 0; i < ntasks; i++)
                if (tasks[i].ds == (int)d && tasks[i].comp == c)
                    cell(f, &results[i]);
            fprintf(f, " %.3g |\n", dend);
        }
    if (f != stdout)
        fclose(f);
    return 0;
}
