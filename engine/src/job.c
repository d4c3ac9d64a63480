/* Names of algorithms and losses, and the defaults of a job. */
#include "ecopt/job.h"

#include <math.h>
#include <string.h>

static const char *const algo_names[EC_ALGO_COUNT] = {
    [EC_ALGO_ECLK] = "eclk",
    [EC_ALGO_LKATYUSHA] = "lkatyusha",
    [EC_ALGO_EC_SGD] = "ec-sgd",
    [EC_ALGO_EC_GD] = "ec-gd",
    [EC_ALGO_EC_LSVRG] = "ec-lsvrg",
    [EC_ALGO_EC_SGD_DIANA] = "ec-sgd-diana",
    [EC_ALGO_EC_GD_DIANA] = "ec-gd-diana",
    [EC_ALGO_EF21] = "ef21",
    [EC_ALGO_GD] = "gd",
    [EC_ALGO_SGD] = "sgd",
};

const char *ec_algo_name(ec_algo_id a)
{
    return (unsigned)a < EC_ALGO_COUNT ? algo_names[a] : NULL;
}

int ec_algo_from_name(const char *name, ec_algo_id *out)
{
    for (int i = 0; i < EC_ALGO_COUNT; i++) {
        if (strcmp(name, algo_names[i]) == 0) {
            *out = (ec_algo_id)i;
            return 0;
        }
    }
    return EC_EINVAL;
}

const char *ec_loss_name(ec_loss l)
{
    switch (l) {
    case EC_LOSS_LOGISTIC:
        return "logistic";
    case EC_LOSS_SQUARED:
        return "squared";
    }
    return NULL;
}

int ec_loss_from_name(const char *name, ec_loss *out)
{
    if (strcmp(name, "logistic") == 0)
        *out = EC_LOSS_LOGISTIC;
    else if (strcmp(name, "squared") == 0)
        *out = EC_LOSS_SQUARED;
    else
        return EC_EINVAL;
    return 0;
}

void ec_job_defaults(ec_job *job)
{
    memset(job, 0, sizeof *job);
    job->loss = EC_LOSS_LOGISTIC;
    job->lambda1 = 0.0;
    job->lambda2 = NAN;
    job->lambda2_rel = NAN;
    job->workers = 20;
    job->algorithm = EC_ALGO_ECLK;
    job->compressor.type = EC_COMP_NONE;
    job->k_frac = NAN;
    job->batch = 1;
    job->p = NAN;
    job->step_size = NAN;
    job->step_multiplier = 1.0;
    job->max_rounds = 10000;
    job->target = 1e-9;
    job->eval_every = 10;
    job->seed = 1;
    job->shuffle = 0;
    job->max_seconds = 3600.0;
}
