/*
 * A job: what to solve and how. The same struct is filled from JSON by the
 * command line and by the REST service; the engine checks it against the
 * loaded data before anything runs.
 */
#ifndef ECOPT_JOB_H
#define ECOPT_JOB_H

#include <stdint.h>

#include "ecopt/compress.h"

typedef enum ec_loss {
    EC_LOSS_LOGISTIC = 0,
    EC_LOSS_SQUARED
} ec_loss;

typedef enum ec_algo_id {
    EC_ALGO_ECLK = 0,
    EC_ALGO_LKATYUSHA,
    EC_ALGO_EC_SGD,
    EC_ALGO_EC_GD,
    EC_ALGO_EC_LSVRG,
    EC_ALGO_EC_SGD_DIANA,
    EC_ALGO_EC_GD_DIANA,
    EC_ALGO_EF21,
    EC_ALGO_GD,
    EC_ALGO_SGD,
    EC_ALGO_COUNT
} ec_algo_id;

/* "eclk", "lkatyusha", "ec-sgd", ...; NULL if out of range. */
const char *ec_algo_name(ec_algo_id a);
int ec_algo_from_name(const char *name, ec_algo_id *out);   /* < 0: unknown */
const char *ec_loss_name(ec_loss l);
int ec_loss_from_name(const char *name, ec_loss *out);

/* Limits on what a job may ask for, independent of the data. */
#define EC_JOB_MAX_WORKERS 4096
#define EC_JOB_MAX_ROUNDS 100000000ULL
#define EC_JOB_MAX_DITHER_LEVELS 65535

/*
 * Unset optional numbers are NaN (doubles) or 0 (counts), and the engine
 * resolves them from the problem: see ec_params_resolve().
 */
typedef struct ec_job {
    char dataset[1024];      /* path, or a name inside the data directory */
    ec_loss loss;            /* default logistic */
    double lambda1;          /* >= 0, default 0 */
    double lambda2;          /* >= 0; NaN: use lambda2_rel */
    double lambda2_rel;      /* > 0 relative to the data term's L; NaN: unset */
    uint32_t workers;        /* 1..rows; default 20 */
    ec_algo_id algorithm;    /* default eclk */
    ec_comp_spec compressor; /* default none */
    double k_frac;           /* (0, 1]: k = ceil(k_frac d); NaN: use compressor.k */
    uint32_t batch;          /* >= 1, default 1 */
    double p;                /* (0, 1]; NaN: the algorithm's default */
    double step_size;        /* > 0; NaN: theory step times step_multiplier */
    double step_multiplier;  /* > 0, default 1 */
    uint64_t max_rounds;     /* 1..EC_JOB_MAX_ROUNDS, default 10000 */
    double target;           /* relative gap to stop at, [0, 1); default 1e-9 */
    uint32_t eval_every;     /* >= 1, default 10 */
    uint64_t seed;           /* default 1 */
    int shuffle;             /* 0: contiguous shards in file order (default) */
    double max_seconds;      /* > 0, default 3600 (wall clock) */
} ec_job;

/* Fills every field with its default (dataset empty). */
void ec_job_defaults(ec_job *job);

#endif
