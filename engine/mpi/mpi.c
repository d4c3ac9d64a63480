/*
 * The MPI transport: the coordinator's exchange and the workers' channel
 * carried by MPI point-to-point messages, one frame per message, with the
 * same codec, checks and failure reasons as the socket runtime.
 */
#define _GNU_SOURCE
#include "ecopt/mpi.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecopt/clock.h"
#include "ecopt/wire.h"

#define FRAME_TAG 7

int ec_mpi_init(int *argc, char ***argv, int *rank, int *size, ec_err *e)
{
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return ec_err_set(e, EC_EIO, "MPI_Init failed");
    /* Errors come back as codes, so a failure gets a reason, not a crash. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
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

static int mpi_send(int dest, const uint8_t *buf, size_t len)
{
    return MPI_Send(buf, (int)len, MPI_BYTE, dest, FRAME_TAG, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

/* Receives the probed message from src into buf (grown to it when b is
 * given), checking its size and header before use. Returns 1 or < 0 with
 * e set. */
static int mpi_recv_from(int src, uint8_t *buf, ec_buf *b, size_t max_payload,
                         ec_wire_header *h, ec_err *e)
{
    MPI_Status st;
    int count;

    if (MPI_Probe(src, FRAME_TAG, MPI_COMM_WORLD, &st) != MPI_SUCCESS ||
        MPI_Get_count(&st, MPI_BYTE, &count) != MPI_SUCCESS)
        return ec_err_set(e, EC_EPEER, "MPI receive from rank %d failed", src);
    if (count < EC_WIRE_HEADER_SIZE ||
        (size_t)count > EC_WIRE_HEADER_SIZE + max_payload) {
        /* Drain it so the rank is not left blocked, then fail. */
        uint8_t *sink = malloc(count > 0 ? (size_t)count : 1);
        MPI_Recv(sink, count, MPI_BYTE, src, FRAME_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
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
    if (MPI_Recv(buf, count, MPI_BYTE, src, FRAME_TAG, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
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

static int chan_send(void *ctx, const uint8_t *buf, size_t len)
{
    (void)ctx;
    return mpi_send(0, buf, len);
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
    ec_chan ch = {NULL, chan_send, chan_recv};
    uint32_t first, count;

    ec_procs_block(pb->n, (uint32_t)(size - 1), (uint32_t)(rank - 1), &first,
                   &count);
    return ec_worker_serve(&ch, pb, prm, first, count);
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
        MPI_Probe(0, FRAME_TAG, MPI_COMM_WORLD, &st);
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

static int co_exchange(void *vctx, const ec_model *m, ec_down *down,
                       ec_traffic *acc, ec_summary *sum)
{
    struct mpi_co *co = vctx;
    long len = ec_wire_encode_step(co->sendbuf, co->bufcap, co->round,
                                   co->have_down ? co->last_down : NULL,
                                   co->pb->d);
    uint32_t left = co->np;
    uint8_t *done = calloc(co->np, 1);
    double deadline = ec_clock() + co->timeout;
    int rc = -1;

    if (len < 0 || !done) {
        fail(sum, EC_STOP_FAILED, "cannot encode the broadcast at round %llu",
             (unsigned long long)co->round);
        goto out;
    }
    for (uint32_t t = 0; t < co->np; t++) {
        if (mpi_send((int)t + 1, co->sendbuf, (size_t)len) < 0) {
            fail(sum, EC_STOP_FAILED, "rank %u cannot be sent to at round %llu",
                 t + 1, (unsigned long long)co->round);
            goto out;
        }
        acc->wire_down += (uint64_t)len;
    }
    /* Poll rather than block, so SIGTERM and the round timeout are seen. */
    while (left > 0) {
        MPI_Status st;
        int flag = 0;
        ec_wire_header h;

        MPI_Iprobe(MPI_ANY_SOURCE, FRAME_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            struct timespec ts = {0, 20000};
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
            nanosleep(&ts, NULL);
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

int ec_run_mpi(const ec_problem *pb, const ec_params *prm, const ec_job *job,
               const ec_proc_opts *opts, ec_metric_fn fn, void *ctx,
               ec_summary *sum, ec_err *e)
{
    struct mpi_co co = {0};
    ec_backend be = {&co, co_exchange};
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
    if (!co.sendbuf || !co.ranks || ec_up_init(&co.up, pb->d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", co.n);
        goto out;
    }
    for (uint32_t t = 0; t < co.np; t++) {
        struct rank *rk = &co.ranks[t];

        ec_procs_block(co.n, co.np, t, &rk->first, &rk->count);
        rk->max_payload = ec_wire_max_payload_ups(pb->d, rk->count);
    }
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
    if (clean) {
        long len = ec_wire_encode_stop(co.sendbuf, co.bufcap, co.round);
        for (uint32_t t = 0; t < co.np && len > 0; t++)
            mpi_send((int)t + 1, co.sendbuf, (size_t)len);
    }
    for (uint32_t t = 0; t < co.np && co.ranks; t++)
        ec_buf_free(&co.ranks[t].in);
    free(co.ranks);
    ec_up_clear(&co.up);
    free(co.sendbuf);
    /* A failed or cancelled job may leave ranks blocked in a receive:
     * the caller prints its summary, then aborts the world. */
    return rc;
}
