/*
 * Running a job to its end: the round loop, evaluation, stop rules and the
 * metric rows. This is runtime code: it reads the clock; the steps it calls
 * do not.
 */
#ifndef ECOPT_RUN_H
#define ECOPT_RUN_H

#include <stdint.h>

#include "ecopt/algo.h"
#include "ecopt/job.h"
#include "ecopt/problem.h"

/* One evaluation point. Bits are cumulative since the start of the job. */
typedef struct ec_metric {
    uint64_t round;
    double bits_up;          /* uplink bits, mean per worker */
    double bits_down;        /* broadcast bits (each worker receives them) */
    double paper_bits;       /* uplink, 64 per value sent, mean per worker */
    double P;                /* P at the reported point */
    double gap;              /* P - P* */
    double rel_gap;          /* (P - P*) / (P(x0) - P*) */
    double grad_norm;        /* norm of the proximal gradient mapping */
    double seconds;          /* wall time since the first round */
    double wire_up;          /* bytes of frames sent up, mean per worker
                                (0 in process: nothing crosses a wire) */
    double wire_down;        /* bytes of frames each worker received */
    double time;             /* when the row was measured: Unix seconds
                                (CLOCK_REALTIME), with a fraction */
    double grad_evals;       /* gradient evaluations of one row's loss,
                                mean per worker (the oracle calls) */
    uint64_t restarts;       /* eclk: the guard's restarts so far (a row
                                where it grows marks one); 0 otherwise */
} ec_metric;

typedef enum ec_stop {
    EC_STOP_TARGET = 0,      /* relative gap <= target */
    EC_STOP_MAX_ROUNDS,
    EC_STOP_MAX_SECONDS,
    EC_STOP_DIVERGED,        /* NaN/Inf, or a gap 1e6 times the start */
    EC_STOP_CANCELLED,       /* the metric callback asked to stop */
    EC_STOP_FAILED           /* the runtime failed (see reason) */
} ec_stop;

const char *ec_stop_name(ec_stop s);  /* "target", "max_rounds", ... */

typedef struct ec_summary {
    ec_stop stop;
    char reason[256];        /* a sentence for people */
    uint64_t rounds;
    ec_metric last;          /* the final evaluation */
    uint64_t evals;
    ec_eclk_report eclk;     /* ECLK's constants at the end (see algo.h) */
    uint64_t workers_maxrss; /* bytes: the sum of the worker processes'
                                peak resident sets, as each was reaped
                                (0 when no worker process ran) */
    uint64_t model_shared;   /* bytes of the segment holding the model
                                that the worker processes read (0: no
                                worker process, or each kept a copy) */
    double workers_cpu;      /* CPU seconds (user + system) of workers
                                that are not this process's children
                                (MPI ranks, as each reported at its end);
                                0 otherwise */
} ec_summary;

/* Called at every evaluation point; a nonzero return cancels the job. */
typedef int (*ec_metric_fn)(void *ctx, const ec_metric *row);

/* Cumulative traffic of a run, summed over workers. */
typedef struct ec_traffic {
    uint64_t bits_up, paper_up, bits_down;
    uint64_t wire_up, wire_down;
    uint64_t grads;          /* gradient evaluations, all workers */
} ec_traffic;

/*
 * How a runtime moves one exchange: the workers' uplinks for the model as
 * it stands, reduced into down (and counted in acc). The shared loop then
 * applies down, evaluates and applies the stop rules. A failed exchange
 * returns < 0 with sum->stop and sum->reason filled in.
 */
typedef struct ec_backend {
    void *ctx;
    int (*exchange)(void *ctx, const ec_model *m, ec_down *down,
                    ec_traffic *acc, ec_summary *sum);
    /* The model the loop runs on, made by the backend (ec_model_init_in:
     * in memory its worker processes read) and cleared by it; NULL: the
     * loop makes its own. */
    ec_model *model;
} ec_backend;

/*
 * Steps the workers w[0 .. count - 1] that take part this round, in order,
 * each into up, counting its bits in acc and adding it to down (after
 * ec_server_reduce_begin): what the in-process backend does for every
 * worker and a light round's coordinator for its own share.
 */
void ec_workers_step_into(ec_worker *w, uint32_t count, const ec_model *m,
                          ec_up *up, ec_down *down, ec_traffic *acc);

/*
 * The loop every backend shares: init exchange, then rounds until a stop
 * rule; evaluation every eval_every rounds on this process's model.
 * Also stops, as cancelled, once ec_signal_caught() says so.
 */
int ec_run_loop(const ec_problem *pb, const ec_params *prm, const ec_job *job,
                ec_backend *be, ec_metric_fn fn, void *ctx, ec_summary *sum,
                ec_err *e);

/*
 * SIGTERM, SIGINT and SIGHUP: after ec_signal_install(), each sets a flag
 * that the runtimes poll (ec_signal_caught() returns the signal number,
 * or 0) and makes ec_signal_fd() readable, so a poll() wakes up.
 */
int ec_signal_install(ec_err *e);
int ec_signal_caught(void);
int ec_signal_fd(void);

/*
 * Runs the job with the n workers simulated in this process, one after the
 * other, exchanging the same messages the process backend sends. pb must be
 * solved (P* known). Returns 0 when the job ran to a stop rule (the summary
 * says which, divergence included), < 0 on a failure to start.
 */
int ec_run_inproc(const ec_problem *pb, const ec_params *prm,
                  const ec_job *job, ec_metric_fn fn, void *ctx,
                  ec_summary *sum, ec_err *e);

/* Shared by every backend: evaluates the point and fills row. */
void ec_eval(const ec_problem *pb, const double *point, double *tmp,
             double *tmp2, ec_metric *row);
/* Applies the stop rules to an evaluated row; returns 1 to stop. */
int ec_should_stop(const ec_problem *pb, const ec_job *job,
                   const ec_metric *row, ec_summary *sum);

#endif
