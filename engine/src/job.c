/* Names of algorithms and losses, and the defaults of a job. */
#include "ecopt/job.h"

#include <math.h>
#include <string.h>

static const ec_algo_info algo_rows[EC_ALGO_COUNT] = {
#define EC_ALGO_ROW(id, name, family, compresses, stochastic, has_init, needs, \
                    model_vectors, worker_vectors, gradients, partial, down,  \
                    summary)                                                  \
    [id] = {name, EC_FAMILY_##family, compresses, stochastic, has_init,       \
            needs, model_vectors, worker_vectors, gradients, partial, down,   \
            summary},
    EC_ALGORITHMS(EC_ALGO_ROW)
#undef EC_ALGO_ROW
};

const ec_algo_info *ec_algo_info_of(ec_algo_id a)
{
    return (unsigned)a < EC_ALGO_COUNT ? &algo_rows[a] : NULL;
}

int ec_algo_is(ec_algo_id a, ec_algo_family f)
{
    return (unsigned)a < EC_ALGO_COUNT && algo_rows[a].family == f;
}

const char *ec_algo_family_name(ec_algo_family f)
{
    switch (f) {
    case EC_FAMILY_SGD:
        return "sgd";
    case EC_FAMILY_LSVRG:
        return "lsvrg";
    case EC_FAMILY_KATYUSHA:
        return "katyusha";
    case EC_FAMILY_DIANA:
        return "diana";
    case EC_FAMILY_EF21:
        return "ef21";
    case EC_FAMILY_ADIANA:
        return "adiana";
    case EC_FAMILY_ECONTROL:
        return "econtrol";
    case EC_FAMILY_ADEF:
        return "adef";
    }
    return NULL;
}

const char *ec_algo_name(ec_algo_id a)
{
    return (unsigned)a < EC_ALGO_COUNT ? algo_rows[a].name : NULL;
}

int ec_algo_from_name(const char *name, ec_algo_id *out)
{
    for (int i = 0; i < EC_ALGO_COUNT; i++) {
        if (strcmp(name, algo_rows[i].name) == 0) {
            *out = (ec_algo_id)i;
            return 0;
        }
    }
    return EC_EINVAL;
}

static const struct {
    const char *name, *summary;
} split_rows[EC_SPLIT_COUNT] = {
#define EC_SPLIT_ROW(id, name, summary) [id] = {name, summary},
    EC_SPLITS(EC_SPLIT_ROW)
#undef EC_SPLIT_ROW
};

const char *ec_split_name(ec_split s)
{
    return (unsigned)s < EC_SPLIT_COUNT ? split_rows[s].name : NULL;
}

const char *ec_split_summary(ec_split s)
{
    return (unsigned)s < EC_SPLIT_COUNT ? split_rows[s].summary : NULL;
}

int ec_split_from_name(const char *name, ec_split *out)
{
    for (int i = 0; i < EC_SPLIT_COUNT; i++) {
        if (strcmp(name, split_rows[i].name) == 0) {
            *out = (ec_split)i;
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

static const struct {
    const char *name, *summary;
} eclk_rule_rows[EC_ECLK_RULE_COUNT] = {
#define EC_ECLK_RULE_ROW(id, name, summary) [id] = {name, summary},
    EC_ECLK_RULES(EC_ECLK_RULE_ROW)
#undef EC_ECLK_RULE_ROW
};

const char *ec_eclk_rule_name(ec_eclk_rule r)
{
    return (unsigned)r < EC_ECLK_RULE_COUNT ? eclk_rule_rows[r].name : NULL;
}

const char *ec_eclk_rule_summary(ec_eclk_rule r)
{
    return (unsigned)r < EC_ECLK_RULE_COUNT ? eclk_rule_rows[r].summary : NULL;
}

int ec_eclk_rule_from_name(const char *name, ec_eclk_rule *out)
{
    for (int r = 0; r < EC_ECLK_RULE_COUNT; r++) {
        if (strcmp(name, eclk_rule_rows[r].name) == 0) {
            *out = (ec_eclk_rule)r;
            return 0;
        }
    }
    return EC_EINVAL;
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
    job->participation = NAN;
    job->compressor_down.type = EC_COMP_NONE;
    job->k_frac_down = NAN;
    job->p = NAN;
    job->step_size = NAN;
    job->step_multiplier = 1.0;
    job->smoothness_multiplier = NAN;
    job->eclk_rule = -1;
    job->eclk_guard = -1;
    job->eclk_guard_threshold = NAN;
    job->econtrol_eta = NAN;
    job->max_rounds = 10000;
    job->target = 1e-9;
    job->eval_every = 10;
    job->seed = 1;
    job->split = EC_SPLIT_CONTIGUOUS;
    job->split_alpha = NAN;
    job->max_seconds = 3600.0;
}
