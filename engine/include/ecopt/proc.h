/*
 * The process backend: one single-threaded coordinator (this process) and
 * P forked processes hosting the n workers in contiguous blocks. A process
 * reads the model from memory the coordinator shares with it read-only
 * (or, where that cannot be made, holds a replica of its own) and holds,
 * for each of its workers, the worker's own state (shard, error memory,
 * shifts, generator), and steps them one after the other; it is connected
 * to the coordinator by a
 * socketpair and a mailbox in shared memory (ecopt/mailbox.h) that carry
 * only the frames of ecopt/wire.h, one UPS frame per round. Results equal the in-process run's, bit for bit, for every P.
 */
#ifndef ECOPT_PROC_H
#define ECOPT_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ecopt/priv.h"
#include "ecopt/run.h"
#include "ecopt/wire.h"

typedef struct ec_proc_opts {
    double round_timeout;        /* seconds a worker may take per exchange;
                                    0 means the default, 60 */
    uint64_t worker_mem_limit;   /* RLIMIT_AS per worker in bytes; 0 none */
    uint64_t worker_mem_above;   /* or RLIMIT_AS per worker process: what it
                                    holds at the fork (the coordinator's
                                    data, shared copy-on-write) plus this
                                    many bytes; 0 none. Ignored when
                                    worker_mem_limit is set */
    double worker_cpu_limit;     /* RLIMIT_CPU per worker in seconds (rounded
                                    up); 0 none. Past it a worker gets SIGXCPU
                                    and the job fails saying so */
    unsigned worker_max_files;   /* RLIMIT_NOFILE per worker; 0 means
                                    EC_WORKER_MAX_FILES, EC_WORKER_FILES_KEEP
                                    leaves it as it is */
    uint32_t procs;              /* processes hosting the workers, 1..n;
                                    0 means ec_procs_default(n); ecopt run
                                    gives ec_procs_default_for()'s */
    uint32_t local;              /* workers 0 .. local - 1 step in the
                                    coordinator itself, while the processes
                                    step theirs; the procs processes host
                                    the other n - local (local < n). 0: none;
                                    ecopt run gives ec_procs_local_for()'s */
    int model_copies;            /* each process keeps its own replica of
                                    the model, decoded from STEP, instead
                                    of reading the coordinator's shared
                                    one (which is also the fallback when
                                    the shared segment cannot be made) */
    FILE *log;                   /* where a line says why the model is
                                    copied, when it is; NULL nowhere */
} ec_proc_opts;

/* The address space this process holds now (/proc/self/statm), what
 * RLIMIT_AS counts; 0 when it cannot be read. */
uint64_t ec_address_space(void);

/* The limits above are per process (a worker process hosts count workers). */

/* min(n, online CPUs): more processes than cores only add switches. */
uint32_t ec_procs_default(uint32_t n);
/*
 * The default for a job whose round touches round_bytes (ec_round_bytes):
 * below EC_PROCS_LIGHT_ROUND, min(n, CPUs - 1) and at least 1, so that
 * the processes and the coordinator each have a CPU and receive without
 * sleeping (on a virtual machine a wake-up costs tens of microseconds,
 * more than such a round gains from another process); from it on,
 * ec_procs_default(n). Never more than ec_procs_default(n), so a count
 * made with that stays an upper bound.
 */
#define EC_PROCS_LIGHT_ROUND (256u << 10)
uint32_t ec_procs_default_for(uint32_t n, uint64_t round_bytes);
uint32_t ec_procs_resolve(uint32_t n, uint32_t procs);
/*
 * The workers the coordinator steps itself at the default procs: for a
 * light round, n / (procs + 1), so that it and each process step about as
 * many, and the coordinator works instead of waiting through the
 * exchange (on a busy machine the wait is a sleep and a wake-up each
 * round); 0 from EC_PROCS_LIGHT_ROUND on, where the coordinator's reduce
 * and model step already fill its CPU.
 */
uint32_t ec_procs_local_for(uint32_t n, uint32_t procs, uint64_t round_bytes);
/* Process p of procs hosts workers first .. first + count - 1: blocks of
 * n / procs, the first n % procs processes one more. */
void ec_procs_block(uint32_t n, uint32_t procs, uint32_t p, uint32_t *first,
                    uint32_t *count);
/* "worker 3" for a process of one worker, else "process 1 (workers 5-9)". */
void ec_procs_name(uint32_t first, uint32_t count, uint32_t p, char *buf,
                   size_t len);

/* A byte buffer that grows to the frames it receives. */
typedef struct ec_buf {
    uint8_t *p;
    size_t cap;
} ec_buf;

int ec_buf_reserve(ec_buf *b, size_t n);    /* 0 or EC_ENOMEM */
void ec_buf_free(ec_buf *b);

/*
 * The coordinator's part of one exchange for process p's UPS payload:
 * decodes each uplink into scratch, checks it is the next of workers
 * first .. first + count - 1, counts its bits into acc and adds it to
 * down (between ec_server_reduce_begin and _end, called in process order,
 * so the sum is in worker order). 0, or -1 with a sentence in why.
 */
int ec_ups_reduce(const ec_model *m, uint32_t p, uint32_t first,
                  uint32_t count, const uint8_t *payload, size_t len,
                  ec_up *scratch, ec_down *down, ec_traffic *acc, char *why,
                  size_t whylen);

/* Open files a worker may hold: it needs its socket and stdio only. */
#define EC_WORKER_MAX_FILES 16
/* No open-file limit of its own: an MPI rank, whose runtime holds
 * descriptors of its own (its daemon, shared memory, events) and opens a
 * connection to each peer when it first talks to it. */
#define EC_WORKER_FILES_KEEP 0xffffffffu

/*
 * Sets the limits above on the calling process, as a worker process does
 * before it serves (and an MPI worker rank): address space, CPU seconds
 * (soft; the hard limit a few seconds later kills a worker that ignores
 * SIGXCPU), open files, and no core files (a core of a worker is a copy
 * of the user's data). NULL, or what failed, with errno saying why.
 */
const char *ec_worker_limits(const ec_proc_opts *opts);

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
 * A worker process's whole life over a channel, hosting workers first ..
 * first + count - 1: HELLO, then WELCOME, then STEP -> UPS until STOP.
 * Returns the process exit code (0 after STOP or when the coordinator is
 * gone). The test build honours ECOPT_FAULT (see proc.c): the fault of a
 * hosted worker is its process's.
 */
int ec_worker_serve(ec_chan *ch, const ec_problem *pb, const ec_params *prm,
                    uint32_t first, uint32_t count);
/*
 * The same for a forked process that reads the coordinator's model from
 * shared memory (mapped read-only) instead of keeping a replica: STEP
 * then carries no broadcast. shared NULL is ec_worker_serve.
 */
int ec_worker_serve_model(ec_chan *ch, const ec_problem *pb,
                          const ec_params *prm, uint32_t first, uint32_t count,
                          const ec_model *shared);

#endif
