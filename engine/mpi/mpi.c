/*
 * The MPI transport: the coordinator's exchange and the workers' channel
 * carried by MPI point-to-point messages, one frame per message, with the
 * same codec, checks and failure reasons as the socket runtime.
 */
#define _GNU_SOURCE
#include "ecopt/mpi.h"

#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/clock.h"
#include "ecopt/spin.h"
#include "ecopt/wire.h"

#define FRAME_TAG 7
/* A worker rank's usage at its end, to rank 0: {CPU seconds, peak
 * resident set in bytes} as two doubles. */
#define USAGE_TAG 8
/* Rank 0's problem constants, to every worker rank before the handshake:
 * {lmax_data, lmax_steps, L_bar of each of the n shards} as doubles. */
#define CONSTANTS_TAG 9

/*
 * Waits (docs/mpi.md, "How the ranks wait"). Open MPI has no blocking
 * receive over shared memory: MPI_Probe, MPI_Recv and MPI_Wait poll, so a
 * rank waiting for its next frame takes a CPU from the ranks that have
 * work. When every rank runs on this host, each rank has a doorbell, a
 * 32-bit counter in memory the ranks share (MPI_Win_allocate_shared).
 * A sender starts its message, then adds one to the receiver's counter
 * and, if the receiver sleeps, wakes it (FUTEX_WAKE); a receiver rings
 * the sender's doorbell once it has taken the message if the sender
 * waits for its sends to finish (a large one needs its receiver). A rank that finds nothing to do spins
 * a little while spinning pays (ecopt/spin.h, as the process backend
 * does), then sleeps on its counter (FUTEX_WAIT). Across hosts there is
 * no shared counter: a rank that finds nothing sleeps 20 us between
 * looks for its first millisecond, then 1 ms.
 */
struct bell {
    uint32_t count;          /* rung: one more for every ring */
    uint32_t sleeping;       /* 1 while the rank sleeps on count */
    uint32_t sends;          /* 1 while the rank waits for its sends */
    char pad[52];            /* one cache line a rank */
};

/* How long a wait spins before it sleeps, when the ranks fit the CPUs. */
#define SPIN_SECONDS 50e-6
/* A sleeping rank looks again at least this often (a missed ring costs
 * no more than this), and rank 0 sees signals and its deadline. */
#define SLEEP_SLICE_SECONDS 0.05

static struct bell *bells;   /* every rank's, or NULL across hosts */
static int my_rank;
static double spin_seconds;
static ec_spin spin_stat;

static void futex_wait(uint32_t *word, uint32_t seen, double seconds)
{
    struct timespec ts = {(time_t)seconds,
                          (long)((seconds - (double)(time_t)seconds) * 1e9)};

    syscall(SYS_futex, word, FUTEX_WAIT, seen, &ts, NULL, 0);
}

static uint32_t bell_count(void)
{
    return bells ? __atomic_load_n(&bells[my_rank].count, __ATOMIC_SEQ_CST) : 0;
}

/* Something for rank dest has happened: its doorbell. */
static void ring(int dest)
{
    struct bell *b;

    if (!bells)
        return;
    b = &bells[dest];
    __atomic_fetch_add(&b->count, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&b->sleeping, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &b->count, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A message from src was taken: src's doorbell, if src waits for its
 * sends to finish (else the ring would only wake it for nothing). */
static void ring_back(int src)
{
    if (bells && __atomic_load_n(&bells[src].sends, __ATOMIC_SEQ_CST))
        ring(src);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* What a wait waits for: 1 once it is there, 0 not yet, -1 MPI failed. */
typedef int (*ready_fn)(void *arg);

struct probe_arg {
    int src, tag;
    MPI_Status *st;
};

/* MPI_Iprobe, twice when the first finds nothing: Open MPI's looks at
 * what has arrived before it polls the transport, so a message that the
 * poll brings in is seen only by the next call (without the second, a
 * rank went to sleep on a message already there). */
static int probe_ready(void *arg)
{
    struct probe_arg *a = arg;
    int flag = 0;

    for (int i = 0; i < 2 && !flag; i++)
        if (MPI_Iprobe(a->src, a->tag, MPI_COMM_WORLD, &flag, a->st) != MPI_SUCCESS)
            return -1;
    return flag;
}

/* Sends to ranks first .. first + count - 1, one request each. */
struct sends_arg {
    int count, first;
    MPI_Request *reqs;
};

/* Whether the sends are done. Open MPI may hold a message back until a
 * later call of its sender (and then needs its receiver to act before
 * the send is done), so a look that finds them not done rings their
 * receivers again: without it both sides slept until their slices ran
 * out (50 ms a round). */
static int sends_ready(void *arg)
{
    struct sends_arg *a = arg;
    int flag = 0;

    for (int i = 0; i < 2 && !flag; i++)
        if (MPI_Testall(a->count, a->reqs, &flag, MPI_STATUSES_IGNORE) !=
            MPI_SUCCESS)
            return -1;
    for (int i = 0; i < a->count && !flag; i++)
        if (a->reqs[i] != MPI_REQUEST_NULL)
            ring(a->first + i);
    return flag;
}

/*
 * Waits until ready(arg) says so (1), for at most slice seconds (0), or
 * until MPI fails (-1). The counter is read before each look, so a ring
 * between the look and the sleep makes FUTEX_WAIT return at once.
 */
static int wait_ready(ready_fn ready, void *arg, double slice)
{
    double start = ec_clock(), end = start + slice;
    int spun = 0, rc;

    for (;;) {
        uint32_t seen = bell_count();
        double now, left;

        if ((rc = ready(arg)) != 0)
            return rc;
        if (!spun++ && spin_seconds > 0 && ec_spin_now(&spin_stat)) {
            double until = ec_clock() + spin_seconds;

            /* With doorbells the spin watches this rank's counter: an MPI
             * call that finds nothing yields the CPU when Open MPI thinks
             * the host oversubscribed, which on a busy machine turns a
             * 50 us spin into a time slice of others' work. */
            if (bells) {
                while (bell_count() == seen && ec_clock() < until)
                    cpu_relax();
                ec_spin_done(&spin_stat, bell_count() != seen);
                continue;
            }
            while ((rc = ready(arg)) == 0 && ec_clock() < until)
                ;
            ec_spin_done(&spin_stat, rc != 0);
            if (rc != 0)
                return rc;
            continue;
        }
        now = ec_clock();
        left = end - now;
        if (left <= 0)
            return 0;
        if (!bells) {
            double nap = now - start < 1e-3 ? 20e-6 : 1e-3;
            struct timespec ts = {0, (long)((nap < left ? nap : left) * 1e9)};

            nanosleep(&ts, NULL);
            continue;
        }
        if (left > SLEEP_SLICE_SECONDS)
            left = SLEEP_SLICE_SECONDS;
        __atomic_store_n(&bells[my_rank].sleeping, 1, __ATOMIC_SEQ_CST);
        futex_wait(&bells[my_rank].count, seen, left);
        __atomic_store_n(&bells[my_rank].sleeping, 0, __ATOMIC_SEQ_CST);
    }
}

/* A message with tag from src (or MPI_ANY_SOURCE), as wait_ready. */
static int wait_message(int src, int tag, double slice, MPI_Status *st)
{
    struct probe_arg a = {src, tag, st};

    return wait_ready(probe_ready, &a, slice);
}

/* Sends started (and their receivers rung) until they are done: 0, or
 * -1 when MPI fails. The receivers ring back once they have taken them. */
static int wait_sends(MPI_Request *reqs, int count, int first)
{
    struct sends_arg a = {count, first, reqs};
    int rc;

    if (bells)
        __atomic_store_n(&bells[my_rank].sends, 1, __ATOMIC_SEQ_CST);
    while ((rc = wait_ready(sends_ready, &a, 3600.0)) == 0)
        ;
    if (bells)
        __atomic_store_n(&bells[my_rank].sends, 0, __ATOMIC_SEQ_CST);
    return rc > 0 ? 0 : -1;
}

/* The doorbells, when every rank is on this host; else NULL (and the
 * ranks poll). */
static void bells_init(int size)
{
    MPI_Comm node;
    MPI_Win win;
    MPI_Aint bytes;
    int node_size = 0, unit;
    void *base = NULL;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    /* As the process backend: spin only while the ranks fit the CPUs. */
    spin_seconds = cpus > 0 && size <= cpus ? SPIN_SECONDS : 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0,
                            MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return;
    MPI_Comm_size(node, &node_size);
    /* Every rank sees the same answer: the world is on one host or not. */
    if (node_size != size) {
        MPI_Comm_free(&node);
        return;
    }
    bytes = my_rank == 0 ? (MPI_Aint)size * (MPI_Aint)sizeof(struct bell) : 0;
    /* The window lives until MPI_Finalize. */
    if (MPI_Win_allocate_shared(bytes, 1, MPI_INFO_NULL, node, &base, &win) !=
            MPI_SUCCESS ||
        MPI_Win_shared_query(win, 0, &bytes, &unit, &base) != MPI_SUCCESS ||
        bytes < (MPI_Aint)size * (MPI_Aint)sizeof(struct bell))
        return;
    if (my_rank == 0)
        memset(base, 0, (size_t)bytes);
    /* No rank rings before every counter is zero. */
    MPI_Barrier(node);
    bells = base;
}

int ec_mpi_init(int *argc, char ***argv, int *rank, int *size, ec_err *e)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return ec_err_set(e, EC_EIO, "MPI_Init failed");
    /* Errors come back as codes, so a failure gets a reason, not a crash. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    my_rank = *rank;
    bells_init(*size);
    return 0;
}

void ec_mpi_finalize(void)
{
    MPI_Finalize();
}

void ec_mpi_abort(int code)
{
    MPI_Abort(MPI_COMM_WORLD, code);
}

int ec_mpi_barrier(void)
{
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* Sends one message and rings dest's doorbell. A large message waits
 * for its receiver to take it, so the ring comes before the wait; and
 * since Open MPI may hold a small one back until the sender's next
 * call, the doorbell rings again once the send is done. */
static int send_tagged(int dest, const void *buf, int count, MPI_Datatype type,
                       int tag)
{
    MPI_Request rq;
    int rc;

    struct sends_arg a = {1, dest, &rq};

    if (MPI_Isend(buf, count, type, dest, tag, MPI_COMM_WORLD, &rq) != MPI_SUCCESS ||
        sends_ready(&a) < 0)
        return -1;
    ring(dest);
    rc = wait_sends(&rq, 1, dest);
    ring(dest);
    return rc;
}

static int mpi_send(int dest, const uint8_t *buf, size_t len)
{
    return send_tagged(dest, buf, (int)len, MPI_BYTE, FRAME_TAG);
}

/* Blocks (spinning, then sleeping) until a message with tag from src is
 * there: as MPI_Probe. */
static int probe_blocking(int src, int tag, MPI_Status *st)
{
    int rc;

    while ((rc = wait_message(src, tag, 3600.0, st)) == 0)
        ;
    return rc > 0 ? MPI_SUCCESS : MPI_ERR_OTHER;
}

/* Receives the probed message from src into buf (grown to it when b is
 * given), checking its size and header before use. Returns 1 or < 0 with
 * e set. */
static int mpi_recv_from(int src, uint8_t *buf, ec_buf *b, size_t max_payload,
                         ec_wire_header *h, ec_err *e)
{
    MPI_Status st;
    int count, rc;

    if (probe_blocking(src, FRAME_TAG, &st) != MPI_SUCCESS ||
        MPI_Get_count(&st, MPI_BYTE, &count) != MPI_SUCCESS)
        return ec_err_set(e, EC_EPEER, "MPI receive from rank %d failed", src);
    if (count < EC_WIRE_HEADER_SIZE ||
        (size_t)count > EC_WIRE_HEADER_SIZE + max_payload) {
        /* Drain it so the rank is not left blocked, then fail. */
        uint8_t *sink = malloc(count > 0 ? (size_t)count : 1);
        MPI_Recv(sink, count, MPI_BYTE, src, FRAME_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
        ring_back(src);
        free(sink);
        return ec_err_set(e, EC_EPROTO, "message of %d bytes from rank %d is "
                          "not a frame within the limit", count, src);
    }
    if (b) {
        if (ec_buf_reserve(b, (size_t)count) < 0)
            return ec_err_set(e, EC_ENOMEM, "out of memory for a frame of "
                              "%d bytes", count);
        buf = b->p;
    }
    rc = MPI_Recv(buf, count, MPI_BYTE, src, FRAME_TAG, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    /* Its sender may wait for this receive (a large message). */
    ring_back(src);
    if (rc != MPI_SUCCESS)
        return ec_err_set(e, EC_EPEER, "MPI receive from rank %d failed", src);
    if (ec_wire_header_decode(buf, (size_t)count, max_payload, h, e) < 0)
        return EC_EPROTO;
    if ((size_t)count != EC_WIRE_HEADER_SIZE + h->length)
        return ec_err_set(e, EC_EPROTO, "frame from rank %d: %d bytes, header "
                          "says %u", src, count,
                          (unsigned)(EC_WIRE_HEADER_SIZE + h->length));
    return 1;
}

/* ---- workers -------------------------------------------------------------- */

/* A worker rank's channel to rank 0. Its uplink goes out from a copy, so
 * the worker goes on to its next receive at once; the send is finished
 * (by then long done) before the next one. */
struct chan {
    ec_buf out;
    MPI_Request rq;
    int pending;
};

static int chan_finish(struct chan *c)
{
    if (!c->pending)
        return 0;
    c->pending = 0;
    return wait_sends(&c->rq, 1, 0);
}

static int chan_send(void *ctx, const uint8_t *buf, size_t len)
{
    struct chan *c = ctx;
    struct sends_arg a = {1, 0, &c->rq};

    if (chan_finish(c) < 0 || ec_buf_reserve(&c->out, len ? len : 1) < 0)
        return -1;
    memcpy(c->out.p, buf, len);
    if (MPI_Isend(c->out.p, (int)len, MPI_BYTE, 0, FRAME_TAG, MPI_COMM_WORLD,
                  &c->rq) != MPI_SUCCESS)
        return -1;
    c->pending = 1;
    /* A first look, which rings rank 0 unless the send is done. */
    switch (sends_ready(&a)) {
    case -1:
        return -1;
    case 1:
        ring(0);
        break;
    }
    return 0;
}

static int chan_recv(void *ctx, uint8_t *buf, size_t max_payload,
                     ec_wire_header *h, ec_err *e)
{
    (void)ctx;
    return mpi_recv_from(0, buf, NULL, max_payload, h, e);
}

int ec_mpi_worker(const ec_problem *pb, const ec_params *prm, int rank,
                  int size)
{
    struct chan c = {0};
    ec_chan ch = {&c, chan_send, chan_recv};
    uint32_t first, count;
    int rc;

    ec_procs_block(pb->n, (uint32_t)(size - 1), (uint32_t)(rank - 1), &first,
                   &count);
    rc = ec_worker_serve(&ch, pb, prm, first, count);
    /* After STOP rank 0 has every uplink, and waits for this rank's usage
     * (an MPI rank is no child of rank 0's, so its CPU is counted only
     * so); a failed rank is aborted. */
    if (rc == 0 && chan_finish(&c) == 0) {
        struct rusage ru;
        double usage[2] = {0, 0};

        if (getrusage(RUSAGE_SELF, &ru) == 0) {
            usage[0] = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       1e-6 * (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
            usage[1] = 1024.0 * (double)ru.ru_maxrss;
        }
        send_tagged(0, usage, 2, MPI_DOUBLE, USAGE_TAG);
    }
    ec_buf_free(&c.out);
    return rc;
}

int ec_mpi_constants(uint32_t n, ec_problem_given *g, double **L_bar, ec_err *e)
{
    MPI_Status st;
    double *v;
    int count = 0, rc;

    *L_bar = NULL;
    /* Rank 0 may take minutes (P*): this rank sleeps meanwhile. */
    while ((rc = wait_message(0, CONSTANTS_TAG, 3600.0, &st)) == 0)
        ;
    if (rc < 0 || MPI_Get_count(&st, MPI_DOUBLE, &count) != MPI_SUCCESS)
        return ec_err_set(e, EC_EPEER, "the problem's constants did not come "
                          "from rank 0");
    if ((uint64_t)count != 2 + (uint64_t)n)
        return ec_err_set(e, EC_EPROTO, "rank 0 sent %d problem constants where "
                          "%llu were expected", count, 2 + (unsigned long long)n);
    if (!(v = malloc((size_t)count * sizeof *v)))
        return ec_err_set(e, EC_ENOMEM, "out of memory for %d constants", count);
    rc = MPI_Recv(v, count, MPI_DOUBLE, 0, CONSTANTS_TAG, MPI_COMM_WORLD,
                  MPI_STATUS_IGNORE);
    ring_back(0);
    if (rc != MPI_SUCCESS) {
        free(v);
        return ec_err_set(e, EC_EPEER, "receiving the problem's constants failed");
    }
    if (!isfinite(v[0]) || v[0] < 0 || !(v[1] >= 0 && v[1] <= UINT32_MAX)) {
        double lmax = v[0], steps = v[1];

        free(v);
        return ec_err_set(e, EC_EPROTO, "rank 0 sent problem constants out of "
                          "range (lmax_data %g, %g steps)", lmax, steps);
    }
    for (uint32_t t = 0; t < n; t++)
        if (!isnan(v[2 + t]) && !(isfinite(v[2 + t]) && v[2 + t] > 0)) {
            double bad = v[2 + t];

            free(v);
            return ec_err_set(e, EC_EPROTO, "rank 0 sent shard %u's smoothness "
                              "as %g", t, bad);
        }
    g->lmax_data = v[0];
    g->lmax_steps = (uint32_t)v[1];
    g->L_bar = v + 2;
    *L_bar = v;
    return 0;
}

int ec_mpi_worker_fail(int rank, const char *why)
{
    char host[MPI_MAX_PROCESSOR_NAME], text[600];
    uint8_t frame[EC_WIRE_HEADER_SIZE + sizeof text];
    int hostlen = 0;
    long len;
    MPI_Status st;

    if (MPI_Get_processor_name(host, &hostlen) != MPI_SUCCESS)
        snprintf(host, sizeof host, "?");
    snprintf(text, sizeof text, "rank %d on %s: %s", rank, host, why);
    len = ec_wire_encode_error(frame, sizeof frame, 0, text);
    /* Exiting now would race rank 0: mpirun ends the world when a rank
     * exits non-zero, maybe before rank 0 has read the reason. So wait
     * for rank 0, which reads the frame in its handshake and aborts. */
    if (len > 0 && mpi_send(0, frame, (size_t)len) == 0)
        probe_blocking(0, FRAME_TAG, &st);
    return 1;
}

/* ---- the coordinator ------------------------------------------------------ */

/* Rank p + 1 hosts workers first .. first + count - 1. */
struct rank {
    uint32_t first, count;
    ec_buf in;
    size_t in_len, max_payload;
};

struct mpi_co {
    const ec_problem *pb;
    uint32_t n, np;
    uint8_t *sendbuf;
    size_t bufcap;
    struct rank *ranks;
    MPI_Request *reqs;       /* one a rank: the broadcast's sends */
    int sending;             /* 1 while they may not be finished */
    double *constbuf;        /* the problem's constants, as sent */
    size_t constants_len;
    ec_up up;
    const ec_down *last_down;
    int have_down;
    double timeout;
    uint64_t round;
};

static void fail(ec_summary *sum, ec_stop stop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(ec_summary *sum, ec_stop stop, const char *fmt, ...)
{
    va_list ap;

    sum->stop = stop;
    va_start(ap, fmt);
    vsnprintf(sum->reason, sizeof sum->reason, fmt, ap);
    va_end(ap);
}

/* One frame from rank src that must be `type`; ERROR becomes the reason.
 * Returns 0 or -1 with sum filled. */
static int expect(struct mpi_co *co, int src, uint16_t type,
                  ec_wire_header *h, ec_summary *sum)
{
    struct rank *rk = &co->ranks[src - 1];
    ec_err e = {0};
    char text[1100], name[64];

    ec_procs_name(rk->first, rk->count, (uint32_t)(src - 1), name, sizeof name);
    if (mpi_recv_from(src, NULL, &rk->in, rk->max_payload, h, &e) != 1) {
        fail(sum, EC_STOP_FAILED, "%s sent a bad frame (%.200s) at round %llu",
             name, e.msg, (unsigned long long)co->round);
        return -1;
    }
    if (h->type == EC_WIRE_ERROR &&
        ec_wire_decode_error(rk->in.p + EC_WIRE_HEADER_SIZE, h->length, text,
                             sizeof text, &e) == 0) {
        fail(sum, EC_STOP_FAILED, "%s failed at round %llu: %.150s", name,
             (unsigned long long)co->round, text);
        return -1;
    }
    if (h->type != type) {
        fail(sum, EC_STOP_FAILED, "%s broke the protocol at round %llu: "
             "frame type %u where %u was expected", name,
             (unsigned long long)co->round, h->type, type);
        return -1;
    }
    rk->in_len = h->length;
    return 0;
}

/* Finishes the last broadcast's sends: 0, or -1 when MPI fails. */
static int co_finish(struct mpi_co *co)
{
    if (!co->sending)
        return 0;
    co->sending = 0;
    return wait_sends(co->reqs, (int)co->np, 1);
}

static int co_exchange(void *vctx, const ec_model *m, ec_down *down,
                       ec_traffic *acc, ec_summary *sum)
{
    struct mpi_co *co = vctx;
    long len = -1;
    uint32_t left = co->np;
    uint8_t *done = calloc(co->np, 1);
    double deadline = ec_clock() + co->timeout;
    int rc = -1;

    /* The last broadcast's buffer is written again. */
    if (co_finish(co) < 0) {
        fail(sum, EC_STOP_FAILED, "the broadcast of round %llu failed",
             (unsigned long long)co->round - 1);
        goto out;
    }
    len = ec_wire_encode_step(co->sendbuf, co->bufcap, co->round,
                              co->have_down ? co->last_down : NULL, co->pb->d);
    if (len < 0 || !done) {
        fail(sum, EC_STOP_FAILED, "cannot encode the broadcast at round %llu",
             (unsigned long long)co->round);
        goto out;
    }
    /* Every rank's send started and its doorbell rung, and the sends
     * finished only before the next broadcast: a large message needs its
     * receiver to take it, and the ranks' answers show they have. */
    for (uint32_t t = 0; t < co->np; t++) {
        if (MPI_Isend(co->sendbuf, (int)len, MPI_BYTE, (int)t + 1, FRAME_TAG,
                      MPI_COMM_WORLD, &co->reqs[t]) != MPI_SUCCESS) {
            for (uint32_t u = 0; u < t; u++)
                MPI_Cancel(&co->reqs[u]);
            fail(sum, EC_STOP_FAILED, "rank %u cannot be sent to at round %llu",
                 t + 1, (unsigned long long)co->round);
            goto out;
        }
        acc->wire_down += (uint64_t)len;
    }
    /* A first look (Open MPI may hold a send back until the sender's
     * next call), which rings the ranks unless the sends are done. */
    co->sending = 1;
    struct sends_arg started = {(int)co->np, 1, co->reqs};
    switch (sends_ready(&started)) {
    case -1:
        fail(sum, EC_STOP_FAILED, "the broadcast failed at round %llu",
             (unsigned long long)co->round);
        goto out;
    case 1:
        for (uint32_t t = 0; t < co->np; t++)
            ring((int)t + 1);
        break;
    }
    /* Wait in slices, so SIGTERM and the round timeout are seen. */
    while (left > 0) {
        MPI_Status st;
        int flag;
        ec_wire_header h;

        flag = wait_message(MPI_ANY_SOURCE, FRAME_TAG, SLEEP_SLICE_SECONDS, &st);
        if (flag < 0) {
            fail(sum, EC_STOP_FAILED, "MPI receive failed at round %llu",
                 (unsigned long long)co->round);
            goto out;
        }
        if (!flag) {
            if (ec_signal_caught()) {
                fail(sum, EC_STOP_CANCELLED, "cancelled by signal %d at round %llu",
                     ec_signal_caught(), (unsigned long long)co->round);
                goto out;
            }
            if (ec_clock() >= deadline) {
                for (uint32_t t = 0; t < co->np; t++)
                    if (!done[t]) {
                        char name[64];

                        ec_procs_name(co->ranks[t].first, co->ranks[t].count,
                                      t, name, sizeof name);
                        fail(sum, EC_STOP_FAILED,
                             "%s did not answer within the round "
                             "timeout of %g s at round %llu",
                             name, co->timeout, (unsigned long long)co->round);
                        break;
                    }
                goto out;
            }
            continue;
        }
        int src = st.MPI_SOURCE;
        if (src < 1 || (uint32_t)src > co->np || done[src - 1]) {
            fail(sum, EC_STOP_FAILED, "unexpected message from rank %d", src);
            goto out;
        }
        if (expect(co, src, EC_WIRE_UPS, &h, sum) < 0)
            goto out;
        acc->wire_up += EC_WIRE_HEADER_SIZE + h.length;
        done[src - 1] = 1;
        left--;
    }
    ec_server_reduce_begin(m, down);
    for (uint32_t t = 0; t < co->np; t++) {
        struct rank *rk = &co->ranks[t];
        char why[200];

        if (ec_ups_reduce(m, t, rk->first, rk->count,
                          rk->in.p + EC_WIRE_HEADER_SIZE, rk->in_len, &co->up,
                          down, acc, why, sizeof why) < 0) {
            fail(sum, EC_STOP_FAILED, "%s at round %llu", why,
                 (unsigned long long)co->round);
            goto out;
        }
    }
    ec_server_reduce_end(m, co->n, down);
    acc->bits_down += down->bits;
    co->last_down = down;
    co->have_down = 1;
    co->round++;
    rc = 0;
out:
    free(done);
    return rc;
}

/* After STOP: every worker rank's usage into sum. A rank that does not
 * answer within USAGE_WAIT_SECONDS of the first look is left out. */
#define USAGE_WAIT_SECONDS 10.0

static void collect_usage(struct mpi_co *co, ec_summary *sum)
{
    double deadline = ec_clock() + USAGE_WAIT_SECONDS;

    for (uint32_t t = 0; t < co->np; t++) {
        MPI_Status st;
        double usage[2];
        int count = 0, got = 0;

        while (!got && ec_clock() < deadline && !ec_signal_caught())
            got = wait_message((int)t + 1, USAGE_TAG, SLEEP_SLICE_SECONDS, &st);
        if (got != 1 || MPI_Get_count(&st, MPI_DOUBLE, &count) != MPI_SUCCESS ||
            count != 2) {
            if (got == 1) {     /* not two doubles: taken, and left out */
                uint8_t sink[64];
                MPI_Recv(sink, sizeof sink, MPI_BYTE, (int)t + 1, USAGE_TAG,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
            continue;
        }
        if (MPI_Recv(usage, 2, MPI_DOUBLE, (int)t + 1, USAGE_TAG, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE) != MPI_SUCCESS)
            continue;
        ring_back((int)t + 1);
        if (usage[0] >= 0 && usage[0] < 1e9)
            sum->workers_cpu += usage[0];
        if (usage[1] >= 0 && usage[1] < 1e15)
            sum->workers_maxrss += (uint64_t)usage[1];
    }
}

int ec_run_mpi(const ec_problem *pb, const ec_params *prm, const ec_job *job,
               const ec_proc_opts *opts, ec_metric_fn fn, void *ctx,
               ec_summary *sum, ec_err *e)
{
    struct mpi_co co = {0};
    ec_backend be = {&co, co_exchange, NULL};
    int size, rc = 0, clean = 1;

    memset(sum, 0, sizeof *sum);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 2 || (uint32_t)size - 1 > pb->n)
        return ec_err_set(e, EC_EINVAL, "backend mpi: the job has %u workers, "
                          "so it needs 2..%u ranks (got %d)", pb->n, pb->n + 1,
                          size);
    co.pb = pb;
    co.n = pb->n;
    co.np = (uint32_t)size - 1;
    co.timeout = opts && opts->round_timeout > 0 ? opts->round_timeout : 60.0;
    co.bufcap = EC_WIRE_HEADER_SIZE + ec_wire_max_payload(pb->d);
    co.sendbuf = malloc(co.bufcap);
    co.ranks = calloc(co.np, sizeof *co.ranks);
    co.reqs = calloc(co.np, sizeof *co.reqs);
    if (!co.sendbuf || !co.ranks || !co.reqs || ec_up_init(&co.up, pb->d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", co.n);
        goto out;
    }
    for (uint32_t t = 0; t < co.np; t++) {
        struct rank *rk = &co.ranks[t];

        ec_procs_block(co.n, co.np, t, &rk->first, &rk->count);
        rk->max_payload = ec_wire_max_payload_ups(pb->d, rk->count);
    }
    /* The constants the worker ranks would otherwise compute again: sent
     * to all at once and finished with the first broadcast (a rank that
     * failed before it reads them sends an ERROR in place of its HELLO). */
    co.constants_len = 2 + (size_t)pb->n;
    co.constbuf = malloc(co.constants_len * sizeof *co.constbuf);
    if (!co.constbuf) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", co.n);
        goto out;
    }
    co.constbuf[0] = pb->lmax_data;
    co.constbuf[1] = (double)pb->lmax_steps;
    for (uint32_t t = 0; t < pb->n; t++)
        co.constbuf[2 + t] = pb->shards[t].L_bar;
    for (uint32_t t = 0; t < co.np; t++) {
        if (MPI_Isend(co.constbuf, (int)co.constants_len, MPI_DOUBLE, (int)t + 1,
                      CONSTANTS_TAG, MPI_COMM_WORLD, &co.reqs[t]) != MPI_SUCCESS) {
            fail(sum, EC_STOP_FAILED, "rank %u cannot be sent to", t + 1);
            clean = 0;
            goto out;
        }
        co.sending = 1;
    }
    struct sends_arg started = {(int)co.np, 1, co.reqs};
    if (sends_ready(&started) == 1)
        for (uint32_t t = 0; t < co.np; t++)
            ring((int)t + 1);
    /* Handshake, rank by rank. */
    for (uint32_t t = 0; t < co.np; t++) {
        struct rank *rk = &co.ranks[t];
        ec_wire_header h;
        uint32_t worker, count, pid, d;
        long len;

        if (expect(&co, (int)t + 1, EC_WIRE_HELLO, &h, sum) < 0 ||
            ec_wire_decode_hello(rk->in.p + EC_WIRE_HEADER_SIZE, h.length,
                                 &worker, &count, &pid, &d, e) < 0 ||
            worker != rk->first || count != rk->count || d != pb->d) {
            if (!sum->reason[0])
                fail(sum, EC_STOP_FAILED, "rank %u: bad handshake", t + 1);
            clean = 0;
            goto out;
        }
        len = ec_wire_encode_welcome(co.sendbuf, co.bufcap, co.n, pb->d);
        if (len < 0 || mpi_send((int)t + 1, co.sendbuf, (size_t)len) < 0) {
            fail(sum, EC_STOP_FAILED, "rank %u cannot be sent to", t + 1);
            clean = 0;
            goto out;
        }
    }
    rc = ec_run_loop(pb, prm, job, &be, fn, ctx, sum, e);
    clean = rc == 0 && sum->stop != EC_STOP_FAILED;
out:
    if (clean && co_finish(&co) < 0)
        clean = 0;
    if (clean) {
        long len = ec_wire_encode_stop(co.sendbuf, co.bufcap, co.round);
        for (uint32_t t = 0; t < co.np && len > 0; t++)
            mpi_send((int)t + 1, co.sendbuf, (size_t)len);
        if (len > 0)
            collect_usage(&co, sum);
    }
    for (uint32_t t = 0; t < co.np && co.ranks; t++)
        ec_buf_free(&co.ranks[t].in);
    free(co.ranks);
    free(co.reqs);
    free(co.constbuf);
    ec_up_clear(&co.up);
    free(co.sendbuf);
    /* A failed or cancelled job may leave ranks blocked in a receive:
     * the caller prints its summary, then aborts the world. */
    return rc;
}
