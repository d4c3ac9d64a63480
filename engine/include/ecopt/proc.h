/*
 * The process backend: one single-threaded coordinator (this process) and
 * n forked worker processes, each holding its shard, its error memory and a
 * replica of the model, connected by socketpairs that carry only the frames
 * of ecopt/wire.h. Results equal the in-process run's, bit for bit.
 */
#ifndef ECOPT_PROC_H
#define ECOPT_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/priv.h"
#include "ecopt/run.h"
#include "ecopt/wire.h"

typedef struct ec_proc_opts {
    double round_timeout;        /* seconds a worker may take per exchange;
                                    0 means the default, 60 */
    uint64_t worker_mem_limit;   /* RLIMIT_AS per worker in bytes; 0 none */
    double worker_cpu_limit;     /* RLIMIT_CPU per worker in seconds (rounded
                                    up); 0 none. Past it a worker gets SIGXCPU
                                    and the job fails saying so */
    unsigned worker_max_files;   /* RLIMIT_NOFILE per worker; 0 means
                                    EC_WORKER_MAX_FILES */
} ec_proc_opts;

/* Open files a worker may hold: it needs its socket and stdio only. */
#define EC_WORKER_MAX_FILES 16

/*
 * Forks the workers, runs the job to a stop rule, stops and reaps every
 * worker. A worker that dies, hangs past the round timeout or breaks the
 * protocol ends the job with stop EC_STOP_FAILED and a reason such as
 * "worker 7 died (signal 9) at round 1234"; that is still a return of 0.
 * < 0 only when the job could not start (fork, sockets, memory).
 * Call ec_signal_install() first for SIGTERM to end the job cleanly.
 */
int ec_run_process(const ec_problem *pb, const ec_params *prm,
                   const ec_job *job, const ec_proc_opts *opts,
                   ec_metric_fn fn, void *ctx, ec_summary *sum, ec_err *e);

/*
 * How a worker moves whole frames: the socket of a forked worker, or MPI
 * messages to rank 0. recv reads one frame (header checked against
 * max_payload, then its payload) into buf: 1, 0 at a clean end, < 0 on
 * failure with e set. send writes a whole frame: 0 or < 0.
 */
typedef struct ec_chan {
    void *ctx;
    int (*send)(void *ctx, const uint8_t *buf, size_t len);
    int (*recv)(void *ctx, uint8_t *buf, size_t max_payload,
                ec_wire_header *h, ec_err *e);
} ec_chan;

/*
 * A worker's whole life over a channel: HELLO, then WELCOME, then STEP ->
 * UP until STOP. Returns the process exit code (0 after STOP or when the
 * coordinator is gone). Honours ECOPT_FAULT (see proc.c) for tests.
 */
int ec_worker_serve(ec_chan *ch, const ec_problem *pb, const ec_params *prm,
                    uint32_t tau);

#endif
