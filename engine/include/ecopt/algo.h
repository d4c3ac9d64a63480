/*
 * The algorithms, split the way they run: a replicated model that every
 * party updates identically from the broadcast, a worker step that turns the
 * model and the worker's private state into an uplink message, and a server
 * reduce that turns the uplinks into the broadcast. Nothing here allocates,
 * prints or reads a clock once made; randomness comes from seeded ec_rng
 * fields, so a run is a pure function of the job.
 *
 * One round:   up[tau] = worker_step(worker[tau], model)   for every tau
 *              down    = server_reduce(model, up)
 *              model_apply(model, down)                     on every replica
 */
#ifndef ECOPT_ALGO_H
#define ECOPT_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/compress.h"
#include "ecopt/job.h"
#include "ecopt/problem.h"
#include "ecopt/rng.h"

/*
 * How ECLK accounts for its compressor (see ec_params_resolve, and
 * docs/algorithms.md, "ECLK's rules"): the parameters are the
 * loopless-Katyusha theory values computed from an inflated smoothness
 * L_delta = inflation(delta) L_eff; the rules are EC_ECLK_RULES (job.h).
 */
/* EControl's eta when a job gives none, as a multiple of delta
 * (docs/algorithms.md, "EControl"). */
#define EC_ECONTROL_ETA_PER_DELTA 0.5

/* The rule a job gets when it names none, and the guard's defaults. */
#define EC_ECLK_RULE_DEFAULT EC_ECLK_ONLINE
#define EC_ECLK_GUARD_DEFAULT 1
#define EC_ECLK_GUARD_THRESHOLD 10.0
/* A threshold must be above 1 (at 1 any growth fires) and at most this
 * (past it the guard would never fire: turn it off instead). */
#define EC_ECLK_GUARD_THRESHOLD_MAX 1e6
/* The adaptive rule's guard: it restarts when P(w) rises above its best
 * by more than this fraction of P(x0) - best (docs/algorithms.md, "ECLK's
 * guard"). */
#define EC_ECLK_GUARD_OBJECTIVE 0.5
/* ... and it looks at least every this many rounds: on such a round that is
 * not a coin round the workers send f_tau(y) alone (docs/algorithms.md,
 * "ECLK's guard"). */
#define EC_ECLK_GUARD_VALUE_EVERY 20
/* The adaptive rule's restarts multiply its plain constants' inflation by
 * EC_ECLK_GUARD_BACKOFF, except that one from the EC_ECLK_GUARD_FALLBACK-th
 * on whose P rose above the best by more than EC_ECLK_GUARD_SEVERE of P(x0)
 * - best falls back to the online rule's constants, which later restarts
 * double (docs/algorithms.md, "ECLK's guard"). */
#define EC_ECLK_GUARD_BACKOFF 1.2
#define EC_ECLK_GUARD_FALLBACK 2
#define EC_ECLK_GUARD_SEVERE 2.0
/* The restart rounds an end record lists (the count goes on). */
#define EC_ECLK_RESTART_ROUNDS_MAX 32

/*
 * The inflation of L_eff that keeps error feedback's delayed gradients
 * stable in ECLK's y-sequence: max(1, (1/3) / (c a_max(delta))) with
 * a_max(delta) = 2 sin(pi delta / (2 (2 - delta))), the largest stable
 * gain of x' = x - a x_{k - tau} at the delay tau = (1 - delta)/delta.
 */
double ec_eclk_inflation(double delta, double c);

/* Every value a job runs with, resolved from the job and the problem. */
typedef struct ec_params {
    ec_algo_id algo;
    ec_comp_spec comp;        /* k resolved from k_frac */
    ec_comp_spec shift_comp;  /* DIANA's unbiased shift compressor */
    uint32_t batch;           /* samples per stochastic gradient */
    uint32_t m;               /* smallest shard size */
    double delta;             /* of comp */
    double omega;             /* of shift_comp (DIANA) */
    double p;                 /* eclk, lkatyusha, ec-lsvrg-qian: coin;
                                 ec-lsvrg, ec-lsvrg-diana: refresh */
    double theory_step;       /* the default step before the multiplier */
    double step_factor;       /* ef21: theory_step is this times its
                                 theorem's step; 1 for the others */
    double step_multiplier;
    double smoothness_multiplier;  /* the constants see L / this (eclk,
                                      lkatyusha: L_eff; the others: their
                                      default step times this) */
    /* The fraction of the workers sampled each round (1: all) and their
     * number, participants = ceil(participation n), 1..n
     * (docs/algorithms.md, "Partial participation"). */
    double participation;
    uint32_t participants;
    /* EF21-P (docs/algorithms.md, "Compressed broadcasts: EF21-P"): the
     * broadcast's compressor (type none: the broadcast uncompressed, as
     * before), its contraction alpha and the factor it puts on the
     * method's own step, down_step_factor = alpha_down. */
    ec_comp_spec comp_down;
    double delta_down;
    double down_step_factor;
    double step_divisor;      /* ec-lsvrg-qian: theory_step is
                                 1/(step_divisor L_eff), loopless SVRG's 6 */
    double gamma;             /* the step the run uses */
    double alpha;             /* DIANA shift step 1/(1+omega) */
    double L_eff, sigma, theta1, theta2, eta;   /* eclk, lkatyusha; adiana:
                                 L_eff = L, theta1, theta2 and eta (the
                                 step, = gamma) as its theorem names them */
    double econtrol_eta;      /* econtrol: the error memory's weight eta */
    double beta, gamma_z;     /* adiana: z' = beta z + (1 - beta) x +
                                 (gamma_z / eta)(y' - x); the paper's gamma */
    /* eclk: L_delta = inflation L_eff, the constant sigma, theta1, eta and
     * the theory step are computed from; delta_eff the contraction used
     * (these are the starting values under the online rule). */
    ec_eclk_rule eclk_rule;
    double eclk_c;            /* the margin c of the inflation rule */
    int eclk_guard;           /* the guard restarts from the best snapshot */
    double eclk_guard_threshold;   /* when ||grad f(w)|| passes this x best */
    double delta_eff;
    double inflation;
    double L_delta;
    double mu;
    int step_given;           /* step_size set: gamma does not follow L_delta */
    uint64_t seed;
    uint32_t n;
    uint32_t d;
} ec_params;

/* DIANA's unbiased shift compressor for a job's compressor (k resolved):
 * its row's SHIFT with the same k or s (randk-unbiased for topk and randk,
 * dither-unbiased for dither), none otherwise. */
ec_comp_spec ec_shift_comp(const ec_comp_spec *comp);

/* Checks the job against the problem (k in 1..d, batch in 1..m, ...) and
 * resolves every parameter; the sentence in e names the field and range. */
int ec_params_resolve(const ec_job *job, const ec_problem *pb, ec_params *out,
                      ec_err *e);
/* eclk, lkatyusha: recomputes L_delta, sigma, theta1, eta, the theory
 * step and gamma for the contraction delta_eff under the given rule. */
void ec_params_set_eclk(ec_params *p, ec_eclk_rule rule, double delta_eff);
/* Whether algorithm a may run with compressor t: NULL if so, else the
 * field at fault ("algorithm", "compressor" or "compressor.type") with
 * the sentence in buf. ec_params_resolve asks it, and so does the service
 * at submit. */
const char *ec_algo_comp_check(ec_algo_id a, ec_comp_type t, char *buf,
                               unsigned buflen);
/* "gd, ec-gd-diana": the algorithms whose row admits a compressed
 * broadcast, into buf. */
const char *ec_algo_down_names(char *buf, size_t len);
/* Whether algorithm a may run with the broadcast compressed by t (none:
 * always): NULL if so, else the field ("compressor_down" naming the
 * method, or "compressor_down.type" for a compressor EF21-P's theory does
 * not take) with the sentence in buf. ec_params_resolve asks it, and the
 * service at submit. */
const char *ec_algo_down_check(ec_algo_id a, ec_comp_type t, char *buf,
                               unsigned buflen);
/* "gd, sgd, ef21": the algorithms whose row admits partial
 * participation, into buf. */
const char *ec_algo_partial_names(char *buf, size_t len);
/* Whether algorithm a may run with this participation (NaN: unset): NULL
 * if so, else the field ("participation") with the sentence, naming the
 * method, in buf. ec_params_resolve asks it, and the service at submit. */
const char *ec_algo_participation_check(ec_algo_id a, double participation,
                                        char *buf, unsigned buflen);
/* lambda2 = 0, taken for the squared loss without l1 on at most this
 * many features, where P* is certified by dense Newton steps, and for the
 * methods whose step needs no mu
 * (docs/algorithms.md, "General convex problems: lambda2 = 0"). NULL if job may run on d features; else the field ("lambda2")
 * with the sentence in buf. The engine asks it, and the service at submit. */
#define EC_GENERAL_CONVEX_MAX_D 4096u
const char *ec_job_general_convex_check(const ec_job *job, uint64_t d,
                                        char *buf, unsigned buflen);
/* Whether the algorithm compresses (gd, sgd and lkatyusha do not): 0 or
 * 1, whatever the compressor class its row names. */
int ec_algo_compresses(ec_algo_id a);
/* Whether it sends the unbiased form of its compressor (adiana: its row's
 * COMPRESSES is 2), so that topk, which has none, is refused. */
int ec_algo_unbiased_only(ec_algo_id a);
/* Whether its workers take their whole shard's gradient each round (gd,
 * ec-gd, ec-gd-diana, ef21) rather than a minibatch's. */
int ec_algo_full_local(ec_algo_id a);
/* Whether the first exchange is an initialisation (dense gradients). */
int ec_algo_has_init(ec_algo_id a);
/* Whether the workers sample a minibatch of rows each round (a stochastic
 * method with a batch below the smallest shard), else take the whole
 * shard's gradient. */
int ec_algo_samples_rows(const ec_params *p);

/* The replicated state. x is the current iterate; the rest depends on
 * the algorithm (y, z, w, u for L-Katyusha; w, u for ec-lsvrg-qian; u = h
 * for DIANA, = g for EF21; y, z, w and u = h for ADIANA; y, z = nu,
 * u = g~ for ADEF). */
typedef struct ec_model {
    const ec_problem *pb;
    const ec_params *prm;
    uint32_t d;
    uint64_t round;           /* rounds applied (the init exchange is not one) */
    int initialised;          /* the init exchange has been applied */
    int coin;                 /* eclk/lkatyusha/adiana: this round sets
                                 w = y; ec-lsvrg-qian: w = x */
    ec_rng rng;               /* the shared coin's generator */
    double *x, *y, *z, *w, *u;
    double *tmp;              /* scratch for the L-Katyusha update */
    /* ECLK and L-Katyusha with a minibatch: gamma lambda2 (x - w), the
     * dense part of every worker's gamma D, computed once with x (NULL
     * otherwise). */
    double *xw;
    /* The constants in use: prm's, except that ECLK's online rule moves
     * them as its estimate of the realised contraction moves. */
    double gamma, theta1, eta, sigma;
    double delta_eff, inflation;
    double est_in, est_out;   /* sums of ||e + gamma D||^2 and ||e'||^2 */
    uint64_t updates;         /* times the constants were recomputed */
    uint64_t restarts;        /* guard restarts from the best snapshot */
    double guard;             /* the restarts' further factor of inflation */
    /* The adaptive rule: the round at which it fell back to the online
     * rule's constants (0: it has not). */
    uint64_t fallback_round;
    double delta_min, delta_max;   /* range of delta_eff over the run */
    uint64_t restart_rounds[EC_ECLK_RESTART_ROUNDS_MAX];   /* the first ones */
    double best_gnorm;        /* smallest ||grad f(w)|| seen */
    double *w_best, *u_best;  /* that w and its gradient */
    /* The adaptive rule's guard: P(x0) and the smallest P(w) seen (whose w
     * is then the snapshot). */
    double value_start, value_best;
    /* ADEF: A_t, the sum of the weights so far, and a_{t+1}, the weight of
     * this round, from a_{t+1}^2 = gamma A_{t+1} (x = theta_t, z = nu_t,
     * y = y_t, u = the server's control variate). */
    double adef_A, adef_a;
    /* Partial participation (prm->participants < n): the workers of the
     * next round, one flag each, drawn from part_rng as the round before
     * was applied; NULL when every worker takes part. */
    uint8_t *part;
    uint32_t *perm;           /* scratch of the draw */
    ec_rng part_rng;
    /* EF21-P (prm->comp_down not none): the server's iterate x_t, which
     * only the coordinator's model follows; x is then the proxy w_t that
     * every party knows and the workers compute at. NULL otherwise. */
    double *x_server;
    /* ec_model_init_in: the caller's region holding this struct and the
     * replicated vectors (NULL: all on the heap). */
    void *region;
    size_t region_len;
} ec_model;

int ec_model_init(ec_model *m, const ec_problem *pb, const ec_params *prm,
                  ec_err *e);
/*
 * The same model, made in a region of len bytes the caller owns (memory
 * the worker processes of one host map read-only): the struct itself at
 * its start, then what every replica holds identically and the workers
 * read (x, u, y, z, w, the minibatch term xw, the round's sample). The
 * model's own scratch and what only the coordinator follows (the update's
 * tmp, ECLK's best snapshot, EF21-P's x_t) stay on the heap. Returns the
 * model, or NULL with e set; ec_model_clear frees its heap part only.
 */
ec_model *ec_model_init_in(void *region, size_t len, const ec_problem *pb,
                           const ec_params *prm, ec_err *e);
/* The bytes ec_model_init_in needs. */
size_t ec_model_shared_bytes(const ec_problem *pb, const ec_params *prm);

/* What ECLK's rule and guard did over a run, for the job's end record. */
typedef struct ec_eclk_report {
    double delta_eff;         /* the contraction in use at the end */
    double inflation;         /* L_delta / L_eff at the end, the guard's
                                 back-offs included */
    double delta_min, delta_max;
    uint64_t updates, restarts;
    /* the rounds of the first min(restarts, EC_ECLK_RESTART_ROUNDS_MAX) */
    uint64_t restart_rounds[EC_ECLK_RESTART_ROUNDS_MAX];
} ec_eclk_report;

void ec_model_eclk_report(const ec_model *m, ec_eclk_report *out);
void ec_model_clear(ec_model *m);
/* The point whose objective is reported: y for eclk/lkatyusha/adiana,
 * the server's x_t under EF21-P, else x. */
const double *ec_model_point(const ec_model *m);
/* Whether worker tau takes part in the exchange the model is about to
 * run: every worker in the init exchange and without partial
 * participation; otherwise the round's sample. A worker that does not
 * neither steps nor sends. */
int ec_model_participates(const ec_model *m, uint32_t tau);

/* One worker's uplink: its main message and, on some rounds, a second one
 * (a dense gradient for the shared coin and init; DIANA's shift). */
typedef struct ec_up {
    ec_msg q;
    ec_msg extra;
    int has_extra;
    /* ECLK online rule, on coin rounds: the worker's sums of
     * ||e + gamma D||^2 and ||e'||^2 since its last report. */
    int has_stats;
    double ef_in, ef_out;
    /* ECLK adaptive rule, on the init exchange and coin rounds: the
     * worker's f_tau at the point its dense gradient is taken at. */
    int has_value;
    double value;
    /* ec-lsvrg, ec-lsvrg-diana: the worker refreshed its reference
     * point this round, a full local gradient more (a flag on the wire,
     * no payload). */
    int refreshed;
} ec_up;

int ec_up_init(ec_up *up, uint32_t d);
void ec_up_clear(ec_up *up);
/* Bits of an uplink as sent: value + index bits of both messages. */
uint64_t ec_up_bits(const ec_up *up);
uint64_t ec_up_paper_bits(const ec_up *up);

/* The broadcast: the mean of the q's and, when has_a, of the extras. */
typedef struct ec_down {
    double *v;
    double *a;
    int has_a;                /* when 0, a holds zeros */
    int init;                 /* this is the init exchange's broadcast */
    int has_stats;            /* the sums of the uplinks' ef_in, ef_out */
    double ef_in, ef_out;
    int has_value;            /* the sum of the uplinks' values */
    double value;
    uint64_t bits;            /* as sent: sparse or dense, whichever smaller */
    uint64_t paper_bits;
    /* The coordinator's count, not broadcast: rows of the shards whose
     * workers refreshed (ec_up.refreshed), and the next uplink's worker;
     * the round's sample (ec_model.part, NULL: every worker). */
    const ec_problem *pb;
    uint64_t refresh_rows;
    uint32_t next_tau;
    const uint8_t *part;
    uint32_t participants;    /* the uplinks this exchange has */
    int mean_over_participants;   /* gd, sgd: v is their mean, not the n's */
    /* EF21-P, the coordinator's alone (ec_down_primal_init): the
     * broadcast's compressor and its generator, the message c_t, and the
     * server's next iterate x_{t+1}, which ec_model_apply copies into
     * ec_model.x_server. v then holds c_t, not the uplinks' mean. */
    ec_compressor *down_comp;
    ec_rng down_rng;
    ec_msg down_msg;
    double *x_next;
    int primal;               /* this broadcast is c_t, x_next is set */
} ec_down;

int ec_down_init(ec_down *down, uint32_t d);
/* The coordinator's broadcast under EF21-P: makes the compressor of
 * prm->comp_down (a no-op when it is none). */
int ec_down_primal_init(ec_down *down, const ec_params *prm, ec_err *e);
void ec_down_clear(ec_down *down);

typedef struct ec_worker {
    const ec_problem *pb;
    const ec_params *prm;
    uint32_t tau;
    ec_rng rng;
    ec_compressor *comp, *shift_comp;
    double *e;                /* error memory */
    uint64_t topk_hint;       /* top-k's guess for Q(e) (ec_compress_feed_begin_hinted) */
    double *h;                /* DIANA's, ADIANA's and EControl's shift
                                 h_tau; EF21 g_tau; ADEF g~_tau */
    double *w_local, *mu_local;   /* ec-lsvrg, ec-lsvrg-diana: w_tau,
                                     grad f_tau(w_tau) */
    double *buf, *buf2;       /* scratch within one step */
    uint32_t *rows;
    int borrowed;             /* comp, shift_comp, buf, buf2 are another's */
    double ef_in, ef_out;     /* ECLK: sums since the last coin round */
    uint64_t restarts;        /* the model's restarts this worker has seen */
    int refreshed;            /* ec-lsvrg, ec-lsvrg-diana: this round's
                                 coin refreshed w_tau */
} ec_worker;

int ec_worker_init(ec_worker *w, const ec_problem *pb, const ec_params *prm,
                   uint32_t tau, ec_err *e);
/* The same, but borrowing the compressors and scratch vectors of owner
 * (a worker of the same process that outlives this one), so a process
 * hosting many workers holds one set. */
int ec_worker_init_sharing(ec_worker *w, const ec_problem *pb,
                           const ec_params *prm, uint32_t tau,
                           const ec_worker *owner, ec_err *e);
void ec_worker_clear(ec_worker *w);
/* Workers first .. first + count - 1 (count >= 1) as one process hosts
 * them: the first owns the compressors and scratch vectors, the others
 * borrow them. 0 with *out the array, which ec_workers_free ends, or < 0
 * (e says why) with *out NULL. */
int ec_workers_new(ec_worker **out, const ec_problem *pb,
                   const ec_params *prm, uint32_t first, uint32_t count,
                   ec_err *e);
void ec_workers_free(ec_worker *w, uint32_t count);
/* Fills up for this round (the init exchange while !m->initialised). */
void ec_worker_step(ec_worker *w, const ec_model *m, ec_up *up);

/* down = the aggregate of the n uplinks, summed in worker order; under
 * partial participation ups[tau] of the workers not sampled are not read. */
void ec_server_reduce(const ec_model *m, const ec_up *ups, uint32_t n,
                      ec_down *down);
/* The same one uplink at a time, for a coordinator that decodes each into
 * one buffer: begin, add for each tau = 0..n-1 that participates, in
 * order, end. Bit for bit the result of ec_server_reduce. The mean is over
 * the participants for gd and sgd (an unbiased estimate of the full
 * mean), over all n for ef21 (the server's g stays the mean of every
 * worker's g_tau, the absent ones' unchanged). */
void ec_server_reduce_begin(const ec_model *m, ec_down *down);
void ec_server_reduce_add(ec_down *down, const ec_up *up);
/* Under EF21-P (down made with ec_down_primal_init) the end also runs the
 * server's half: x_{t+1} = prox(x_t - v) (v the method's step, the mean of
 * the uplinks), c_t = C_down(x_{t+1} - w_t), and v = c_t, so that every
 * replica sets w_{t+1} = w_t + c_t. The bits are then c_t's (and the
 * shifts' mean, for DIANA). */
void ec_server_reduce_end(const ec_model *m, uint32_t n, ec_down *down);
/*
 * Gradient evaluations (of one row's loss, the unit of "oracle calls";
 * docs/algorithms.md, "Counting gradient evaluations") the n workers make
 * together in the exchange the model is about to run: the init exchange,
 * or a round with its coin; ec-lsvrg's refreshes are counted apart
 * (ec_down.refresh_rows). ec_setup_grads: those made before the first
 * exchange (ec-lsvrg's gradients at its first reference points).
 */
uint64_t ec_round_grads(const ec_model *m);
uint64_t ec_setup_grads(const ec_problem *pb, const ec_params *prm);

/* Applies a broadcast; every replica doing this stays bitwise equal. */
void ec_model_apply(ec_model *m, const ec_down *down);

#endif
