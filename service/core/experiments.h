/*
 * Experiments: several algorithm/compressor variants of one problem (same
 * data, split, seed and target), created together as jobs and compared by
 * the rounds, bits and seconds each took to the target.
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
 * order (1 last when added). On EXPERIMENTS_CREATED *x is the experiment
 * (the caller clears it). On EXPERIMENTS_INVALID the caller's array errors
 * holds every problem found, as jobs report theirs ({field, detail}, one
 * per field, at most EXPERIMENTS_MAX_ERRORS), and sp the first of them.
 */
enum experiments_outcome experiments_create(struct app *a, const char *owner,
                                            int admin, json_t *doc, struct store_experiment *x,
                                            json_t *errors, struct spec_problem *sp,
                                            struct store_err *e);

/*
 * tune's grid into values (room for EXPERIMENTS_MAX_TUNE_VALUES + 1), *n
 * of them: 0, or -1 with sp naming the field (an object with only
 * step_multiplier: an array of 1..16 distinct finite numbers above 0).
 */
int experiments_tune_parse(const json_t *tune, double *values, size_t *n,
                           struct spec_problem *sp);

/* One job of an experiment and how far it got. */
struct experiment_row {
    struct store_job *job;      /* points into the view's jobs */
    json_t *spec;               /* the job's spec, parsed (or NULL) */
    double target;
    int have;                   /* last is its latest row */
    ec_metric last;
    int reached;                /* its latest row is at or below target */
};

/*
 * One variant of a tuned experiment: its runs are rows first .. first +
 * count - 1; the default run (multiplier 1) and the best one (fewest rounds
 * to target, ties by fewer bits; -1 when none reached it).
 */
struct experiment_tuned {
    size_t first, count;
    long default_row, best_row;
    size_t finished;            /* runs no longer queued or running */
};

struct experiment_view {
    struct store_experiment x;
    struct store_job *jobs;
    struct experiment_row *rows;
    size_t n;
    struct experiment_tuned *tuned;   /* per variant; NULL when not tuned */
    size_t ntuned;
};

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
