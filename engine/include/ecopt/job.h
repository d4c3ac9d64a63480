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

/* How an algorithm's model and steps are built (algo.c has one of each). */
typedef enum ec_algo_family {
    EC_FAMILY_SGD = 0,        /* x -= gamma (compressed) gradient */
    EC_FAMILY_LSVRG,          /* loopless SVRG with a reference point */
    EC_FAMILY_KATYUSHA,       /* loopless Katyusha: x, y, z, w and a coin */
    EC_FAMILY_DIANA,          /* compressed differences to learned shifts */
    EC_FAMILY_EF21,           /* compressed differences to the last gradient */
    EC_FAMILY_ADIANA,         /* accelerated DIANA: x, y, z, w, shifts, a coin */
    EC_FAMILY_ECONTROL,       /* EControl: error memory and compressed shifts */
    EC_FAMILY_ADEF            /* Nesterov's estimate sequences, two messages */
} ec_algo_family;

/* The constants of the problem an algorithm's step is computed from. */
enum {
    EC_NEEDS_L_F = 1,         /* smoothness of f */
    EC_NEEDS_L = 2,           /* the largest smoothness of a row's loss */
    EC_NEEDS_MU = 4,          /* strong convexity */
    EC_NEEDS_L_TILDE = 8      /* quadratic mean of the workers' smoothness */
};

/*
 * The algorithms, one row each; every list of them (names, checks, the
 * memory account, the parameters printed, the service's menus) comes from
 * here. Rows are append-only (the names are what is stored).
 *
 * X(ID, NAME, FAMILY, COMPRESSES, STOCHASTIC, HAS_INIT, NEEDS,
 *   MODEL_VECTORS, WORKER_VECTORS, GRADIENTS, PARTIAL, DOWN, SUMMARY)
 *   FAMILY          EC_FAMILY_ suffix
 *   COMPRESSES      1: takes a contraction compressor; 2: takes one with an
 *                   unbiased form (randk, dither, natural, natural-dither
 *                   or none; not topk) and sends that form; 0: none
 *   STOCHASTIC      1: a minibatch's gradient; 0: the whole shard's
 *   HAS_INIT        1: a first exchange of dense gradients
 *   NEEDS           EC_NEEDS_ bits
 *   MODEL_VECTORS   d-vectors of the replicated model (ec_model_init)
 *   WORKER_VECTORS  d-vectors of a worker's own state (error memory, ...)
 *   GRADIENTS       gradients a worker takes per round, at most
 *   PARTIAL         1: its theory admits partial participation, a sample of
 *                   the workers each round (the job's participation < 1;
 *                   docs/algorithms.md, "Partial participation")
 *   DOWN            1: its theory admits a compressed broadcast with primal
 *                   error feedback, EF21-P (the job's compressor_down;
 *                   docs/algorithms.md, "Compressed broadcasts: EF21-P")
 */
#define EC_ALGORITHMS(X)                                                      \
    X(EC_ALGO_ECLK, "eclk", KATYUSHA, 1, 1, 1,                                \
      EC_NEEDS_L_F | EC_NEEDS_L | EC_NEEDS_MU, 9, 1, 2, 0, 0,                 \
      "error-compensated loopless Katyusha")                                  \
    X(EC_ALGO_LKATYUSHA, "lkatyusha", KATYUSHA, 0, 1, 1,                      \
      EC_NEEDS_L_F | EC_NEEDS_L | EC_NEEDS_MU, 7, 1, 2, 0, 0,                 \
      "loopless Katyusha, uncompressed")                                      \
    X(EC_ALGO_EC_SGD, "ec-sgd", SGD, 1, 1, 0,                                 \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 1, 1, 0, 0,                               \
      "SGD with error feedback")                                              \
    X(EC_ALGO_EC_GD, "ec-gd", SGD, 1, 0, 0,                                   \
      EC_NEEDS_L_F, 2, 1, 1, 0, 0,                                            \
      "gradient descent with error feedback")                                 \
    X(EC_ALGO_EC_LSVRG, "ec-lsvrg", LSVRG, 1, 1, 0,                           \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 3, 2, 0, 0,                               \
      "loopless SVRG with error feedback")                                    \
    X(EC_ALGO_EC_SGD_DIANA, "ec-sgd-diana", DIANA, 1, 1, 0,                   \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 2, 1, 0, 0,                               \
      "SGD with error feedback and DIANA's shifts")                           \
    X(EC_ALGO_EC_GD_DIANA, "ec-gd-diana", DIANA, 1, 0, 0,                     \
      EC_NEEDS_L_F, 2, 2, 1, 0, 1,                                            \
      "gradient descent with error feedback and DIANA's shifts")              \
    X(EC_ALGO_EF21, "ef21", EF21, 1, 0, 1,                                    \
      EC_NEEDS_L_F | EC_NEEDS_L_TILDE, 2, 2, 1, 1, 0,                         \
      "EF21: compressed gradient differences")                                \
    X(EC_ALGO_GD, "gd", SGD, 0, 0, 0,                                         \
      EC_NEEDS_L_F, 2, 1, 1, 1, 1,                                            \
      "gradient descent, uncompressed")                                       \
    X(EC_ALGO_SGD, "sgd", SGD, 0, 1, 0,                                       \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 1, 1, 1, 0,                               \
      "minibatch SGD, uncompressed")                                          \
    X(EC_ALGO_EC_LSVRG_QIAN, "ec-lsvrg-qian", LSVRG, 1, 1, 1,                 \
      EC_NEEDS_L_F | EC_NEEDS_L, 3, 1, 2, 0, 0,                               \
      "Qian et al.'s loopless SVRG with error feedback: ECLK without the "    \
      "momentum")                                                             \
    X(EC_ALGO_EC_LSVRG_DIANA, "ec-lsvrg-diana", DIANA, 1, 1, 0,               \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 4, 2, 0, 0,                               \
      "loopless SVRG with error feedback and DIANA's shifts")                 \
    X(EC_ALGO_ADIANA, "adiana", ADIANA, 2, 0, 0,                              \
      EC_NEEDS_L | EC_NEEDS_MU, 6, 2, 2, 0, 0,                                \
      "ADIANA: accelerated DIANA, unbiased compressed gradient differences")  \
    X(EC_ALGO_ECONTROL, "econtrol", ECONTROL, 1, 1, 1,                        \
      EC_NEEDS_L_F | EC_NEEDS_L, 2, 2, 1, 0, 0,                               \
      "EControl: error feedback controlled by eta, compressed shifts")        \
    X(EC_ALGO_ADEF, "adef", ADEF, 1, 1, 0,                                    \
      EC_NEEDS_L_F | EC_NEEDS_L, 4, 2, 1, 0, 0,                               \
      "ADEF: Nesterov acceleration, error feedback and compressed gradient "  \
      "differences")

typedef enum ec_algo_id {
#define EC_ALGO_ENUM(id, ...) id,
    EC_ALGORITHMS(EC_ALGO_ENUM)
#undef EC_ALGO_ENUM
} ec_algo_id;

/* The number of rows; outside the enum, so that a switch over the
 * algorithms that misses one (a new row's step) is warned about. */
#define EC_ALGO_PLUS_ONE(...) +1
enum { EC_ALGO_COUNT = 0 EC_ALGORITHMS(EC_ALGO_PLUS_ONE) };
#undef EC_ALGO_PLUS_ONE

/* An algorithm's row. */
typedef struct ec_algo_info {
    const char *name;
    ec_algo_family family;
    int compresses, stochastic, has_init;
    unsigned needs;
    unsigned model_vectors, worker_vectors, gradients;
    int partial;
    int down;
    const char *summary;
} ec_algo_info;

/*
 * ECLK's rules for its compressor, one row each (docs/algorithms.md,
 * "ECLK's rules"): the job field eclk_rule, the resolved parameters and the
 * service's menus read them here. Rows are append-only (the names are
 * what is stored).
 *
 * X(ID, NAME, SUMMARY)
 */
#define EC_ECLK_RULES(X)                                                      \
    X(EC_ECLK_PLAIN, "plain",                                                 \
      "the reconstruction's L-Katyusha constants; the compressor ignored")    \
    X(EC_ECLK_NOMINAL, "nominal",                                             \
      "constants inflated for the compressor's nominal delta")                \
    X(EC_ECLK_ONLINE, "online",                                               \
      "constants inflated for the measured contraction, from nominal up")     \
    X(EC_ECLK_ADAPTIVE, "adaptive",                                           \
      "the plain constants; the guard watches the objective and backs off, "  \
      "to the online rule's at the second excursion")

typedef enum ec_eclk_rule {
#define EC_ECLK_RULE_ENUM(id, ...) id,
    EC_ECLK_RULES(EC_ECLK_RULE_ENUM)
#undef EC_ECLK_RULE_ENUM
} ec_eclk_rule;

#define EC_ECLK_RULE_PLUS_ONE(...) +1
enum { EC_ECLK_RULE_COUNT = 0 EC_ECLK_RULES(EC_ECLK_RULE_PLUS_ONE) };
#undef EC_ECLK_RULE_PLUS_ONE

/* "plain", "nominal", "online"; NULL if out of range. */
const char *ec_eclk_rule_name(ec_eclk_rule r);
const char *ec_eclk_rule_summary(ec_eclk_rule r);
int ec_eclk_rule_from_name(const char *name, ec_eclk_rule *out); /* < 0: unknown */

/* The row of a; NULL if out of range. */
const ec_algo_info *ec_algo_info_of(ec_algo_id a);
/* Whether a's family is f (0 for an unknown a). */
int ec_algo_is(ec_algo_id a, ec_algo_family f);
/* "sgd", "katyusha", ...: the family's name, for the service's menus. */
const char *ec_algo_family_name(ec_algo_family f);

/* "eclk", "lkatyusha", "ec-sgd", ...; NULL if out of range. */
const char *ec_algo_name(ec_algo_id a);
int ec_algo_from_name(const char *name, ec_algo_id *out);   /* < 0: unknown */
const char *ec_loss_name(ec_loss l);
int ec_loss_from_name(const char *name, ec_loss *out);

/*
 * How the rows are split into the workers' shards (docs/algorithms.md,
 * "Splitting the rows"); every list of them comes from here. Rows are
 * append-only (the names are what is stored).
 *
 * X(ID, NAME, SUMMARY)
 */
#define EC_SPLITS(X)                                                          \
    X(EC_SPLIT_CONTIGUOUS, "contiguous",                                      \
      "equal blocks of rows in file order")                                   \
    X(EC_SPLIT_SHUFFLED, "shuffled",                                          \
      "equal blocks of rows in a seeded random order")                        \
    X(EC_SPLIT_LABEL_SKEW, "label_skew",                                      \
      "equal blocks of rows sorted by label, each label in random order")     \
    X(EC_SPLIT_DIRICHLET, "dirichlet",                                        \
      "each label's rows dealt to the workers in Dirichlet(alpha) shares")

typedef enum ec_split {
#define EC_SPLIT_ENUM(id, ...) id,
    EC_SPLITS(EC_SPLIT_ENUM)
#undef EC_SPLIT_ENUM
} ec_split;

#define EC_SPLIT_PLUS_ONE(...) +1
enum { EC_SPLIT_COUNT = 0 EC_SPLITS(EC_SPLIT_PLUS_ONE) };
#undef EC_SPLIT_PLUS_ONE

/* "contiguous", "shuffled", ...; NULL if out of range. */
const char *ec_split_name(ec_split s);
const char *ec_split_summary(ec_split s);
int ec_split_from_name(const char *name, ec_split *out);  /* < 0: unknown */

/* The Dirichlet concentration a dirichlet split takes when none is given. */
#define EC_SPLIT_DEFAULT_ALPHA 0.5

/* Limits on what a job may ask for, independent of the data. */
#define EC_JOB_MAX_WORKERS 4096
#define EC_JOB_MAX_ROUNDS 100000000ULL
#define EC_JOB_MAX_DITHER_LEVELS 65535
/* batch "full": resolved to the smallest shard's rows (ec_params_resolve). */
#define EC_JOB_BATCH_FULL 0u

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
    /* (0, 1]: the fraction of the workers sampled each round, for the
     * algorithms whose row admits it; NaN: 1, every worker */
    double participation;
    /* The broadcast's compressor under EF21-P, for the algorithms whose
     * row admits it; type none (the default): the broadcast uncompressed,
     * as before. k_frac_down as k_frac, for compressor_down. */
    ec_comp_spec compressor_down;
    double k_frac_down;
    uint32_t batch;          /* >= 1, default 1; EC_JOB_BATCH_FULL: the
                                smallest shard's rows, so that every worker
                                takes its whole shard's gradient */
    double p;                /* (0, 1]; NaN: the algorithm's default */
    double step_size;        /* > 0; NaN: theory step times step_multiplier */
    double step_multiplier;  /* > 0, default 1 */
    /* > 0; NaN: 1. The constants are computed from the smoothness divided
     * by it (docs/algorithms.md, "The smoothness multiplier"). */
    double smoothness_multiplier;
    /* eclk only (docs/algorithms.md, "ECLK's rules" and "ECLK's guard"):
     * the rule, an ec_eclk_rule or -1 for the default; the guard, 1 on,
     * 0 off, -1 the default; its threshold (> 1), NaN for the default. */
    int eclk_rule;
    int eclk_guard;
    double eclk_guard_threshold;
    /* econtrol only (docs/algorithms.md, "EControl"): the weight eta of
     * the error memory in what is compressed, [0, 1]; NaN: the default. */
    double econtrol_eta;
    uint64_t max_rounds;     /* 1..EC_JOB_MAX_ROUNDS, default 10000 */
    double target;           /* relative gap to stop at, [0, 1); default 1e-9 */
    uint32_t eval_every;     /* >= 1, default 10 */
    uint64_t seed;           /* default 1 */
    ec_split split;          /* default contiguous (file order) */
    double split_alpha;      /* dirichlet: > 0; NaN: EC_SPLIT_DEFAULT_ALPHA */
    double max_seconds;      /* > 0, default 3600 (wall clock) */
} ec_job;

/* Fills every field with its default (dataset empty). */
void ec_job_defaults(ec_job *job);

#endif
