/*
 * Experiments: several algorithm/compressor variants of one problem (same
 * data, split and target), created together as jobs (at several seeds
 * when asked) and compared by the rounds, bits and seconds each took to
 * the target, and by their median and spread over the seeds.
 */
#ifndef ECOPT_EXPERIMENTS_H
#define ECOPT_EXPERIMENTS_H

#include <jansson.h>

#include "app.h"
#include "jobs.h"
#include "store.h"

#define EXPERIMENTS_MAX_VARIANTS 32
#define EXPERIMENTS_MAX_TUNE_VALUES 16   /* max_tune_values */
#define EXPERIMENTS_MAX_JOBS 256         /* max_experiment_jobs: variants x runs */
#define EXPERIMENTS_MAX_ERRORS 32        /* problems told in one answer */
#define EXPERIMENTS_MAX_SEEDS 16         /* max_seeds */
/* The excursion rule of a tuned variant's best (docs/api.md, "Tuned
   experiments"): a run whose relative gap ever rose above max_excursion
   (its gap above that many times its start; this by default) is not
   eligible. */
#define EXPERIMENTS_MAX_EXCURSION 2.0

enum experiments_outcome {
    EXPERIMENTS_CREATED,
    EXPERIMENTS_INVALID,        /* errors has every problem, sp the first */
    EXPERIMENTS_QUEUE_FULL,     /* its variants would take the owner past
                                   max_queued_per_token: sp says so */
    EXPERIMENTS_STORE_FAILED,   /* e says why */
    EXPERIMENTS_NO_MEMORY
};

/*
 * {"name": ..., "base": JOBSPEC, "variants": [{...}], "tune": {...}}: each
 * variant's keys replace the base's; every resulting spec must pass exactly
 * what a job's submission checks, and problems name the variant
 * ("variants[2].k"). With "tune": {"step_multiplier": [m1, m2, ...]} each
 * variant runs once per multiplier, and once more at 1 (its default) when
 * the grid lacks 1; variant i's runs are consecutive jobs, in the grid's
 * order (1 last when added). With "seeds" each run is made once per seed,
 * consecutively. On EXPERIMENTS_CREATED *x is the experiment (the caller
 * clears it). On EXPERIMENTS_INVALID the caller's array errors holds every
 * problem found, as jobs report theirs ({field, detail}, one per field, at
 * most EXPERIMENTS_MAX_ERRORS), and sp the first of them.
 */
enum experiments_outcome experiments_create(struct app *a, const char *owner,
                                            int admin, json_t *doc, struct store_experiment *x,
                                            json_t *errors, struct spec_problem *sp,
                                            struct store_err *e);

/*
 * tune's grid into values (room for EXPERIMENTS_MAX_TUNE_VALUES + 1), *n
 * of them, and the job field it sets into *axis ("smoothness_multiplier"
 * or "step_multiplier"): 0, or -1 with sp naming the field. tune is
 * {"grid": [...], "axis": ...} (axis smoothness_multiplier unless told
 * otherwise), or {"smoothness_multiplier": [...]} or
 * {"step_multiplier": [...]}; a grid is an array of 1..16 distinct
 * finite numbers above 0.
 */
int experiments_tune_parse(const json_t *tune, double *values, size_t *n,
                           const char **axis, struct spec_problem *sp);

/* The experiment's max_excursion (EXPERIMENTS_MAX_EXCURSION when not
   given): a number >= 1, else -1 with sp naming the field. */
int experiments_excursion_parse(const json_t *doc, double *out, struct spec_problem *sp);

/* The experiment's oracle: 0 for "default" (or none given), 1 for "full"
   (every job batch "full"), -1 with sp naming the field. */
int experiments_oracle_parse(const json_t *doc, struct spec_problem *sp);

/*
 * The experiment's seeds (room for EXPERIMENTS_MAX_SEEDS), *n of them, 0
 * when doc has no "seeds": a count c in 1..16 gives base.seed (default 1)
 * .. base.seed + c - 1; a list gives 1..16 distinct seeds, and base.seed
 * must then be left out. 0, or -1 with sp naming the field.
 */
int experiments_seeds_parse(const json_t *doc, uint64_t *seeds, size_t *n,
                            struct spec_problem *sp);

/* One job of an experiment and how far it got. */
struct experiment_row {
    struct store_job *job;      /* points into the view's jobs */
    json_t *spec;               /* the job's spec, parsed (or NULL) */
    double target;
    int have;                   /* last is its latest row */
    ec_metric last;
    int reached;                /* its latest row is at or below target */
    double peak;                /* its largest relative gap (tuned only;
                                   else NaN) */
};

/* Quantiles of one measure over the runs of a group that reached the
   target (linear between order statistics); n = 0: none did. */
struct experiment_spread {
    size_t n;
    double median, q1, q3, min, max;
};

/*
 * Runs that differ only in their seed (and name): rows[i] for the first
 * n entries of rows; the spreads of their measures to target.
 */
struct experiment_group {
    size_t *rows, n;
    size_t reached, finished;
    double peak;                /* the largest of its runs' peaks */
    struct experiment_spread rounds, bits_up, seconds, grad_evals;
};

/* The spreads of g's runs (g->rows, g->n set) from the view's rows. */
void experiment_group_summarise(const struct experiment_row *rows,
                                struct experiment_group *g);

/*
 * One variant of a tuned experiment: its runs are rows first .. first +
 * count - 1, seeds consecutive within a multiplier; the default
 * multiplier's runs (1) and the best one's (the fewest median rounds to
 * target among the multipliers whose every seed reached it, ties by fewer
 * median bits; -1 when none did), as the row of their first seed and the
 * group of all their seeds.
 */
struct experiment_tuned {
    size_t first, count;
    long default_row, best_row;
    size_t finished;            /* runs no longer queued or running */
    struct experiment_group default_group, best_group;
    /* The multiplier that would have been best but for the excursion
       rule (-1: none), and where the best lies in the grid: -1 its
       smallest, 1 its largest, 0 inside (or a grid of one). */
    long excluded_row;
    struct experiment_group excluded_group;
    int best_edge;
};

struct experiment_view {
    struct store_experiment x;
    struct store_job *jobs;
    struct experiment_row *rows;
    size_t n;
    struct experiment_tuned *tuned;   /* per variant; NULL when not tuned */
    size_t ntuned;
    size_t seeds;                     /* seeds per variant (and multiplier) */
    double max_excursion;             /* the excursion rule's bound */
    /* The runs grouped by everything but their seed, in first-row order
       (their rows lists point into group_rows, 0..n-1 grouped). */
    struct experiment_group *groups;
    size_t ngroups;
    size_t *group_rows;
    size_t *identity;                 /* 0..n-1: the tuned groups' rows */
    const char *tune_axis;      /* the job field the grid set (static) */
};

/* gid[i] = the group of job i: jobs whose specs agree but for seed and
   name share one, numbered in order of first appearance; returns how
   many groups. */
size_t experiments_group_jobs(const struct store_job *jobs, size_t n, size_t *gid);

/* The experiment id that owner (NULL: anyone's) may see: 0, or a STORE_*
   code with e filled. The caller clears the view, also on failure. */
int experiments_view(struct app *a, const char *id, const char *owner,
                     struct experiment_view *v, struct store_err *e);
/* The same comparison for any jobs that owner (NULL: anyone's) may see,
   in the order given; STORE_ENOTFOUND when one of them is not. */
int experiments_view_jobs(struct app *a, const char (*ids)[STORE_ID_LEN + 1], size_t n,
                          const char *owner, struct experiment_view *v,
                          struct store_err *e);
void experiment_view_clear(struct experiment_view *v);

#endif
