/*
 * The memory account of ecopt/memory.h. Each term names the allocation it
 * stands for; keep them in step with the code they count.
 */
#include "ecopt/memory.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "ecopt/algo.h"
#include "ecopt/compress.h"
#include "ecopt/problem.h"

/* libsvm.c: capacities double from INITIAL_ROWS and INITIAL_NNZ. */
static uint64_t doubled(uint64_t initial, uint64_t need)
{
    uint64_t cap = initial;

    while (cap < need)
        cap *= 2;
    return cap;
}

/* The methods with a second compressed message of DIANA's unbiased
 * compressor (DIANA's shift; ADIANA's gradient at w). */
static int diana(ec_algo_id a)
{
    return ec_algo_is(a, EC_FAMILY_DIANA) || a == EC_ALGO_ADIANA;
}

/* The algorithm's row; a job of an unknown one is counted as ec-sgd. */
static const ec_algo_info *algo_row(ec_algo_id a)
{
    const ec_algo_info *ai = ec_algo_info_of(a);

    return ai ? ai : ec_algo_info_of(EC_ALGO_EC_SGD);
}

/* A compressed message as wire.c lays it out (the largest for dither). */
static uint64_t msg_bytes(const ec_comp_spec *c, uint64_t d)
{
    uint64_t k = c->k ? c->k : 1;
    const ec_comp_info *ci = ec_comp_info_of(c->type);

    switch (ci ? ci->layout : EC_COMP_LAYOUT_DENSE) {
    case EC_COMP_LAYOUT_INDEXED:
        return 8 + 12 * k;
    case EC_COMP_LAYOUT_SEEDED:
        return 16 + 8 * k;
    case EC_COMP_LAYOUT_LEVELS:
        return 28 + 12 * d;
    case EC_COMP_LAYOUT_DENSE:
        break;
    }
    return 8 + 8 * d;
}

/* The largest UP payload of one worker for this job: q as compressed,
 * plus a dense extra (the init exchange, L-Katyusha's coin), DIANA's
 * compressed shift or ADEF's compressed gradient difference, and ECLK's
 * two sums. */
static uint64_t up_bytes(const ec_mem_job *j)
{
    uint64_t d = j->d, extra = 8 + 8 * d;
    ec_comp_spec sc = ec_shift_comp(&j->comp);
    uint64_t shift = msg_bytes(&sc, d);

    if (diana(j->algo) && shift > extra)
        extra = shift;
    /* ADEF's second message is the job's compressor's too. */
    if (ec_algo_is(j->algo, EC_FAMILY_ADEF) && msg_bytes(&j->comp, d) > extra)
        extra = msg_bytes(&j->comp, d);
    return 4 + msg_bytes(&j->comp, d) + extra + 16;
}

/* ec_wire_max_payload(d): the buffer every frame of the job fits. */
static uint64_t max_payload(uint64_t d)
{
    uint64_t up = 4 + 2 * (28 + 12 * d) + 16, step = 20 + 2 * (8 + 8 * d) + 16;

    return 24 + (up > step ? up : step);
}

/* ec_model_init: x, u; y, z, w, tmp for L-Katyusha; ECLK's best snapshot
 * (the row's MODEL_VECTORS). */
static uint64_t model_bytes(const ec_mem_job *j)
{
    /* EF21-P: every replica holds the server's x_t too. */
    uint64_t vectors = algo_row(j->algo)->model_vectors +
                       (j->comp_down.type != EC_COMP_NONE);

    return vectors * 8 * (uint64_t)j->d;
}

/* One worker's own state (ec_worker_init_sharing): error memory, shifts,
 * EC-LSVRG's reference point, the minibatch. */
static uint64_t worker_bytes(const ec_mem_job *j)
{
    uint64_t D = 8 * (uint64_t)j->d;

    return algo_row(j->algo)->worker_vectors * D + 4 * (uint64_t)j->batch;
}

/* What the first worker of a process owns and the others borrow: the two
 * scratch vectors and the compressors' scratch. */
static uint64_t owner_bytes(const ec_mem_job *j)
{
    uint64_t d = j->d, b = 16 * d;

    if (ec_comp_info_of(j->comp.type))
        b += ec_comp_scratch_bytes(&j->comp, (uint32_t)d);
    if (diana(j->algo))
        b += d / 8 + 8;            /* the shift compressor, randk at worst */
    return b;
}

void ec_estimate_memory(const ec_mem_job *j, ec_mem_estimate *out)
{
    uint64_t d = j->d, D = 8 * d, n = j->workers ? j->workers : 1;
    uint64_t rows = doubled(1024, j->rows), nnz = doubled(16384, j->nnz);
    uint64_t up_msgs = 24 * d;     /* ec_up_init: q and extra, d entries */
    uint64_t solve, run, procs, count;

    /* The reader's CSR arrays at their capacity, and a shuffled copy. */
    out->data = (rows + 1) * 8 + rows * 8 + nnz * 12;
    if (j->shuffle)
        out->data += (j->rows + 1) * 8 + j->rows * 8 + j->nnz * 12 + 4 * j->rows;
    /* The problem: x_star, the Lanczos method's four vectors and its
     * tridiagonal matrix, its support list and marks; then the P* solve:
     * Newton's Hessian and three vectors, Newton-CG's seven and the rows'
     * curvatures, or FISTA's three. */
    solve = 5 * D + 5 * d + (uint64_t)16 * EC_LANCZOS_MAX_STEPS;
    if (j->lambda1 == 0.0 && d <= 4096)
        solve += 8 * d * d;
    else if (j->lambda1 == 0.0)
        solve += 3 * D + 8 * (uint64_t)j->rows;  /* Newton-CG: 7 vectors, h */
    /* The run: the model, the broadcast, the evaluation's two vectors. */
    run = D + model_bytes(j) + 2 * D + 2 * D;
    /* EF21-P's broadcast (ec_down_primal_init): x_{t+1}, the message c_t
     * and the compressor's scratch. */
    if (ec_comp_info_of(j->comp_down.type) && j->comp_down.type != EC_COMP_NONE)
        run += D + 12 * d + ec_comp_scratch_bytes(&j->comp_down, (uint32_t)d);
    if (j->inproc) {
        /* Every worker here, one owner's scratch, one uplink at a time. */
        run += n * worker_bytes(j) + owner_bytes(j) + up_msgs;
        procs = 0;
        count = 0;
    } else {
        /* The coordinator's own share, as in process; the processes host
         * the others. */
        uint64_t local = j->local < n ? j->local : 0;

        if (local)
            run += local * worker_bytes(j) + owner_bytes(j);
        procs = j->procs ? j->procs : 1;
        if (procs > n - local)
            procs = n - local;
        count = (n - local + procs - 1) / procs;
        /* The STEP buffer, one decode buffer, each process's frame. */
        run += max_payload(d) + up_msgs + procs * (4 + count * (8 + up_bytes(j)));
    }
    out->coordinator = out->data + (solve > run ? solve : run);
    out->procs = (uint32_t)procs;
    out->process = 0;
    out->rank = 0;
    if (procs) {
        /* ec_worker_serve: one uplink, the UPS frame (grown by
         * doubling), the workers and their owner's scratch. */
        uint64_t frame = doubled(4096, 28 + count * (8 + up_bytes(j)));

        uint64_t own = up_msgs + frame + count * worker_bytes(j) + owner_bytes(j);
        /* A process that keeps its own replica (an MPI rank; a process
         * asked to copy): the frame buffer a dense STEP fits, the model
         * and the decoded broadcast. One that reads the coordinator's
         * shared model (counted once, in the coordinator's run) holds a
         * small frame buffer instead. */
        uint64_t replica = max_payload(d) + model_bytes(j) + 2 * D;

        out->process = own + (j->mpi || j->model_copies ? replica : 24 + 4096);
        /* ec_problem_init: the shards, x_star and the Lanczos method's
         * four vectors and tridiagonal matrix, support list and marks,
         * beside the rank's own copy of the data. */
        out->rank = out->data + n * sizeof(ec_shard) + 5 * D + 5 * d +
                    (uint64_t)16 * EC_LANCZOS_MAX_STEPS + own + replica;
    }
    out->total = out->coordinator + procs * (j->mpi ? out->rank : out->process);
}

uint64_t ec_round_bytes(const ec_mem_job *j)
{
    uint64_t n = j->workers ? j->workers : 1, d = j->d;
    uint64_t per_row = j->rows ? (j->nnz + j->rows - 1) / j->rows : 1;
    uint64_t rows = ec_algo_full_local(j->algo) ? (j->rows + n - 1) / n
                                        : (j->batch ? j->batch : 1);
    uint64_t grads = algo_row(j->algo)->gradients;

    /* About six passes over d-vectors (the gradient buffer, the error
     * memory read and written, the compressor's scan, the model), and
     * for each sampled entry its index, value and the two vector entries
     * at its column, once per gradient taken. */
    return n * (6 * 8 * d + grads * rows * per_row * 28);
}

void ec_mem_job_from(ec_mem_job *mj, const ec_job *job, uint64_t rows,
                     uint64_t nnz, uint32_t d, uint32_t procs)
{
    memset(mj, 0, sizeof *mj);
    mj->rows = rows;
    mj->nnz = nnz;
    mj->d = d;
    mj->workers = job->workers;
    mj->procs = procs;
    mj->inproc = procs == 0;
    mj->algo = job->algorithm;
    mj->comp = job->compressor;
    if (!isnan(job->k_frac))
        mj->comp.k = (uint32_t)ceil(job->k_frac * d);
    /* batch "full" takes the smallest shard; the largest bounds it. */
    mj->batch = job->batch != EC_JOB_BATCH_FULL
                    ? job->batch
                    : (uint32_t)((rows + job->workers - 1) / (job->workers ? job->workers : 1));
    mj->shuffle = job->split != EC_SPLIT_CONTIGUOUS;
    mj->lambda1 = job->lambda1;
    mj->comp_down = job->compressor_down;
    if (!isnan(job->k_frac_down))
        mj->comp_down.k = (uint32_t)ceil(job->k_frac_down * d);
}
