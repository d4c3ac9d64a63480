/*
 * What a job's processes allocate, from the same sizes the engine uses
 * when it allocates: the dataset as the reader holds it, the problem and
 * its P* solve, the model replicas, the messages and frames, and each
 * worker's own state. One function, so the service's check at submit, the
 * limits it sets and the test against measured peaks all use one account.
 * The figures are of address space (what RLIMIT_AS counts); resident
 * memory is at most that, less where a buffer sized for d holds k entries.
 */
#ifndef ECOPT_MEMORY_H
#define ECOPT_MEMORY_H

#include <stdint.h>

#include "ecopt/job.h"

typedef struct ec_mem_job {
    uint64_t rows, nnz;      /* of the dataset */
    uint32_t d;              /* its largest feature index */
    uint32_t workers;        /* n */
    uint32_t procs;          /* worker processes; ignored when inproc */
    uint32_t local;          /* workers the coordinator steps itself beside
                                the processes' (ec_proc_opts.local);
                                ignored when inproc */
    int inproc;              /* the workers are simulated in the coordinator */
    int mpi;                 /* the processes are MPI worker ranks, each with
                                its own copy of the data and the problem */
    int model_copies;        /* each worker process keeps a replica of the
                                model (ec_proc_opts.model_copies) instead
                                of reading the coordinator's shared one */
    ec_algo_id algo;
    ec_comp_spec comp;       /* k resolved */
    uint32_t batch;
    int shuffle;             /* the rows are copied in another order (a split
                                other than contiguous) */
    double lambda1;          /* > 0: P* by FISTA, else Newton for small d */
    ec_comp_spec comp_down;  /* EF21-P's broadcast compressor (none: off) */
} ec_mem_job;

typedef struct ec_mem_estimate {
    uint64_t data;           /* the dataset as read (the reader's capacity) */
    uint64_t coordinator;    /* the coordinator's peak, data included */
    uint64_t process;        /* the largest worker process's own allocations
                                (it shares the data with the coordinator,
                                copy-on-write, and reads the model the
                                coordinator holds, shared) */
    uint64_t rank;           /* an MPI worker rank's own allocations: it
                                reads the data and builds the problem
                                itself (no P* solve), then hosts a worker
                                process's block */
    uint32_t procs;          /* worker processes (0 inproc) */
    uint64_t total;          /* coordinator + procs x process (x rank
                                under MPI): what the job holds at once */
} ec_mem_estimate;

/* Bytes a process holds before it allocates anything of the job (code,
 * libraries, stacks, the allocator's arenas): added to a limit derived
 * from an estimate, never to the estimate itself. */
#define EC_MEM_PROCESS_BASE (64ull << 20)

void ec_estimate_memory(const ec_mem_job *job, ec_mem_estimate *out);
/*
 * About how many bytes the workers' steps of one round touch, all workers
 * together: what spreading them over processes divides. A model of the
 * kernels' passes, not a measurement; ec_procs_default_for() uses it to
 * tell a light round from a heavy one.
 */
uint64_t ec_round_bytes(const ec_mem_job *job);
/* The account's view of job on a dataset of rows x d with nnz entries,
 * on procs worker processes (0: in process), k resolved from k_frac as
 * ec_params_resolve does. */
void ec_mem_job_from(ec_mem_job *mj, const ec_job *job, uint64_t rows,
                     uint64_t nnz, uint32_t d, uint32_t procs);

#endif
