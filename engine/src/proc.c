/*
 * The process runtime: fork n workers over socketpairs, run the exchange
 * loop through framed messages, and make sure every worker is gone and
 * reaped however the job ends (target, failure, timeout or SIGTERM).
 */
#define _GNU_SOURCE
#include "ecopt/proc.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/clock.h"
#include "ecopt/mailbox.h"
#include "ecopt/spin.h"
#include "ecopt/wire.h"

/*
 * Fault injection for the runtime's own tests, compiled only into the
 * test build (build/ecopt-test, -DECOPT_TEST_HOOKS; docs/testing.md,
 * "Test hooks"): ECOPT_FAULT=KIND:WORKER:ROUND makes one worker misbehave
 * at one exchange. KIND is garbage (a frame with a bad magic), truncate
 * (half a frame, then exit), hang (stop answering) or exit (exit with
 * status 3); memfd (WORKER and ROUND 0) makes the coordinator's shared
 * model fail as if memfd_create had, so the workers keep copies. The
 * shipped binary never reads it.
 */
struct fault {
    enum { FAULT_NONE, FAULT_GARBAGE, FAULT_TRUNCATE, FAULT_HANG, FAULT_EXIT,
           FAULT_MEMFD } kind;
    uint32_t worker;
    uint64_t round;
};

#ifdef ECOPT_TEST_HOOKS
static struct fault fault_from_env(void)
{
    struct fault f = {FAULT_NONE, 0, 0};
    const char *s = getenv("ECOPT_FAULT");
    char kind[16];
    unsigned worker;
    unsigned long long round;

    if (!s || sscanf(s, "%15[a-z]:%u:%llu", kind, &worker, &round) != 3)
        return f;
    f.worker = worker;
    f.round = round;
    if (strcmp(kind, "garbage") == 0)
        f.kind = FAULT_GARBAGE;
    else if (strcmp(kind, "truncate") == 0)
        f.kind = FAULT_TRUNCATE;
    else if (strcmp(kind, "hang") == 0)
        f.kind = FAULT_HANG;
    else if (strcmp(kind, "exit") == 0)
        f.kind = FAULT_EXIT;
    else if (strcmp(kind, "memfd") == 0)
        f.kind = FAULT_MEMFD;
    return f;
}
#else
static struct fault fault_from_env(void)
{
    return (struct fault){FAULT_NONE, 0, 0};
}
#endif

/*
 * How long a receive that finds nothing spins before it sleeps, when the
 * job's processes (P and the coordinator) are no more than the online
 * CPUs: on a virtual machine the wake-up of a sleeping CPU costs tens of
 * microseconds, most of a small round. With more processes than CPUs a spin only takes a CPU
 * from a process with work, so then nobody spins. Set once before the
 * fork; the workers inherit it.
 */
#define SPIN_SECONDS 50e-6
static double spin_seconds;

/* Whether spinning pays (ecopt/spin.h): each process keeps its own count;
   a fork starts from the parent's. */
static ec_spin spin_stat;

static int spin_now(void)
{
    return spin_seconds > 0 && ec_spin_now(&spin_stat);
}

static void spin_done(int paid)
{
    ec_spin_done(&spin_stat, paid);
}

/*
 * How long a wait on a mailbox sleeps before it looks whether its peer is
 * still there (a process that dies wakes no one: its socket shows the
 * end), and the longest a SIGTERM that comes just before the sleep waits.
 */
#define WAIT_SLICE 0.02

/* One process hosting workers first .. first + count - 1. */
struct peer {
    int fd;
    ec_mailbox *mb;       /* its mailbox (NULL: the socket carries all) */
    int live;             /* the handshake is done: frames go by mb */
    uint32_t up_seen;     /* frames taken from its mailbox */
    pid_t pid;
    int reaped;
    int status;
    long maxrss_kb;       /* its peak resident set, from wait4 (Linux: KiB) */
    uint32_t first, count;
    ec_buf in;            /* its frame of this exchange */
    size_t in_len;        /* and that frame's payload length */
    size_t max_payload;   /* the longest frame it may send */
};

struct proc {
    const ec_problem *pb;
    const ec_params *prm;
    struct peer *peers;
    uint32_t n, np;       /* workers, processes */
    uint8_t *sendbuf;
    size_t bufcap, max_payload;
    ec_up up;             /* each uplink, decoded in turn */
    ec_down *last_down;   /* the broadcast the next STEP carries */
    int have_down;
    double timeout;
    double cpu_limit;     /* seconds of CPU per worker, for messages */
    uint64_t round;       /* exchanges done, for messages */
    void *mailboxes;      /* np of them, shared (NULL: sockets only) */
    uint8_t *done;        /* np flags: whose UPS is in this exchange */
    /* The model in memory every process maps (NULL: each process keeps
     * its own replica, and STEP carries the broadcast): written here,
     * read-only in the workers. */
    ec_model *model;
    void *seg;
    size_t seg_len;
    /* Workers 0 .. local - 1 step here, in the coordinator, while the
     * processes step theirs (ec_proc_opts.local); the processes host
     * local .. n - 1. */
    uint32_t local;
    ec_worker *lw;
};

/* Writes all of buf; MSG_NOSIGNAL turns a dead peer into EPIPE. */
static int send_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = send(fd, buf, len, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Reads exactly len bytes. Returns 1 done, 0 EOF at the very start, -1 EOF
 * part way or an error (errno set; EAGAIN for a receive timeout). */
static int recv_all(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    int waited = spin_seconds <= 0; /* 1 once a receive found nothing yet */
    double spin_until = 0;

    while (got < len) {
        int spin = !waited || (spin_until > 0 && ec_clock() < spin_until);
        ssize_t r = recv(fd, buf + got, len - got, spin ? MSG_DONTWAIT : 0);

        if (r < 0 && spin && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (!waited++ && spin_now())
                spin_until = ec_clock() + spin_seconds;
            continue;           /* a blocking receive once the spin is over */
        }
        if (spin_until > 0) {   /* a spin that ended: did the data come? */
            spin_done(spin);
            spin_until = 0;
        }
        if (r == 0) {
            errno = got ? EPROTO : 0;
            return got ? -1 : 0;
        }
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 1;
}

/*
 * Reads one frame: header, checked, then exactly its payload, into buf
 * or, when b is given, into b grown to the frame's length. Returns 1, or
 * 0 on a clean EOF before the header, or < 0 with e set.
 */
static int read_frame_into(int fd, uint8_t *buf, ec_buf *b, size_t max_payload,
                           ec_wire_header *h, ec_err *e)
{
    int r;

    if (b && ec_buf_reserve(b, EC_WIRE_HEADER_SIZE) < 0)
        return ec_err_set(e, EC_ENOMEM, "out of memory for a frame");
    if (b)
        buf = b->p;
    r = recv_all(fd, buf, EC_WIRE_HEADER_SIZE);
    if (r == 0)
        return 0;
    if (r < 0)
        return ec_err_set(e, errno == EAGAIN ? EC_ETIMEOUT : EC_EPEER, "%s",
                          errno == EAGAIN ? "timed out" :
                          errno == EPROTO ? "closed its connection mid-frame" :
                          strerror(errno));
    if (ec_wire_header_decode(buf, EC_WIRE_HEADER_SIZE, max_payload, h, e) < 0)
        return EC_EPROTO;
    if (b) {
        if (ec_buf_reserve(b, EC_WIRE_HEADER_SIZE + (size_t)h->length) < 0)
            return ec_err_set(e, EC_ENOMEM, "out of memory for a frame of %u bytes",
                              (unsigned)h->length);
        buf = b->p;
    }
    r = recv_all(fd, buf + EC_WIRE_HEADER_SIZE, h->length);
    if (r <= 0)
        return ec_err_set(e, r == 0 || errno == EPROTO ? EC_EPEER :
                             errno == EAGAIN ? EC_ETIMEOUT : EC_EPEER,
                          "%s", errno == EAGAIN ? "timed out mid-frame" :
                          "closed its connection mid-frame");
    return 1;
}

static int read_frame(int fd, uint8_t *buf, size_t max_payload,
                      ec_wire_header *h, ec_err *e)
{
    return read_frame_into(fd, buf, NULL, max_payload, h, e);
}

static int read_frame_grow(int fd, ec_buf *b, size_t max_payload,
                           ec_wire_header *h, ec_err *e)
{
    return read_frame_into(fd, NULL, b, max_payload, h, e);
}

/*
 * Checks a frame taken from a mailbox (len from ec_mailbox_take, which
 * has copied it) as read_frame checks one from a socket: 1, or < 0 with
 * e set. A frame shorter than its header says is one whose writer
 * stopped part way, as a socket closed mid-frame.
 */
static int frame_check(const uint8_t *buf, long len, size_t max_payload,
                       ec_wire_header *h, ec_err *e)
{
    if (len == -2)
        return ec_err_set(e, EC_EPROTO, "a frame over the mailbox's %u bytes",
                          EC_MAILBOX_CAP);
    if (len < EC_WIRE_HEADER_SIZE)
        return ec_err_set(e, EC_EPEER, "closed its connection mid-frame");
    if (ec_wire_header_decode(buf, EC_WIRE_HEADER_SIZE, max_payload, h, e) < 0)
        return EC_EPROTO;
    if (EC_WIRE_HEADER_SIZE + (size_t)h->length > (size_t)len)
        return ec_err_set(e, EC_EPEER, "closed its connection mid-frame");
    if (EC_WIRE_HEADER_SIZE + (size_t)h->length < (size_t)len)
        return ec_err_set(e, EC_EPROTO, "%ld bytes where the header says %u",
                          len, EC_WIRE_HEADER_SIZE + h->length);
    return 1;
}

/* Whether the other end of a socket has closed it (or written to it). */
static int socket_stirs(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};

    return poll(&p, 1, 0) > 0;
}

/*
 * A worker process's channel: the socket for the handshake, its mailbox
 * for every frame after it (the first frame received is the WELCOME).
 */
struct box_chan {
    int fd;
    ec_mailbox *mb;
    uint32_t seen;        /* frames taken from the mailbox */
    int live;
};

/* Waits for the next STEP or STOP: spins first while spinning pays and
 * the coordinator runs on another CPU, then sleeps. 1 when it is there,
 * 0 when the coordinator is gone. */
static int box_wait(struct box_chan *c)
{
    if (ec_mailbox_ready(c->mb, EC_MAILBOX_DOWN, c->seen))
        return 1;
    if (spin_now()) {
        double until = ec_clock() + spin_seconds;
        int paid, here = 0;

        while (!(paid = ec_mailbox_ready(c->mb, EC_MAILBOX_DOWN, c->seen)) &&
               !(here = ec_mailbox_peer_here(c->mb, EC_MAILBOX_DOWN)) &&
               ec_clock() < until)
            ec_mailbox_relax();
        /* A wait cut short because the coordinator shares this CPU was
         * no spin: it says nothing of whether spinning pays. */
        if (paid || !here)
            spin_done(paid);
        if (paid)
            return 1;
    }
    for (;;) {
        if (ec_mailbox_sleep(c->mb, EC_MAILBOX_DOWN, c->seen, WAIT_SLICE))
            return 1;
        /* The coordinator writes the socket only after it has published,
         * so a socket that stirs with nothing published is its end. */
        if (socket_stirs(c->fd))
            return ec_mailbox_ready(c->mb, EC_MAILBOX_DOWN, c->seen);
    }
}

static int box_send(void *ctx, const uint8_t *buf, size_t len)
{
    struct box_chan *c = ctx;

    if (c->live && ec_mailbox_put(c->mb, EC_MAILBOX_UP, buf, len))
        return 0;
    return send_all(c->fd, buf, len);
}

static int box_recv(void *ctx, uint8_t *buf, size_t max_payload,
                    ec_wire_header *h, ec_err *e)
{
    struct box_chan *c = ctx;
    long len;
    int r;

    if (!c->live) {
        r = read_frame(c->fd, buf, max_payload, h, e);
        c->live = r == 1;
        return r;
    }
    if (!box_wait(c))
        return 0;
    len = ec_mailbox_take(c->mb, EC_MAILBOX_DOWN, buf,
                          EC_WIRE_HEADER_SIZE + max_payload);
    c->seen++;
    if (len == -1)
        return read_frame(c->fd, buf, max_payload, h, e);
    return frame_check(buf, len, max_payload, h, e);
}

static void set_timeouts(int fd, double seconds)
{
    struct timeval tv;

    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* ---- hosting: n workers on P processes ----------------------------------- */

int ec_buf_reserve(ec_buf *b, size_t n)
{
    uint8_t *p;
    size_t cap = b->cap ? b->cap : 4096;

    if (n <= b->cap)
        return 0;
    while (cap < n)
        cap = cap > SIZE_MAX / 2 ? n : cap * 2;
    if (!(p = realloc(b->p, cap)))
        return EC_ENOMEM;
    b->p = p;
    b->cap = cap;
    return 0;
}

void ec_buf_free(ec_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

void ec_procs_block(uint32_t n, uint32_t procs, uint32_t p, uint32_t *first,
                    uint32_t *count)
{
    uint32_t base = n / procs, extra = n % procs;

    *first = p * base + (p < extra ? p : extra);
    *count = base + (p < extra);
}

uint32_t ec_procs_default(uint32_t n)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t p = cpus > 0 ? (uint32_t)cpus : 1;

    return p < n ? p : n;
}

uint32_t ec_procs_default_for(uint32_t n, uint64_t round_bytes)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t p = cpus > 1 ? (uint32_t)cpus - 1 : 1;

    if (round_bytes >= EC_PROCS_LIGHT_ROUND)
        return ec_procs_default(n);
    return p < n ? p : n;
}

uint32_t ec_procs_local_for(uint32_t n, uint32_t procs, uint64_t round_bytes)
{
    /* n / (procs + 1) <= n - procs whenever procs < n: every process
     * keeps a worker. */
    if (round_bytes >= EC_PROCS_LIGHT_ROUND || procs < 1 || procs >= n)
        return 0;
    return n / (procs + 1);
}

uint32_t ec_procs_resolve(uint32_t n, uint32_t procs)
{
    return procs ? procs : ec_procs_default(n);
}

void ec_procs_name(uint32_t first, uint32_t count, uint32_t p, char *buf,
                   size_t len)
{
    if (count == 1)
        snprintf(buf, len, "worker %u", first);
    else
        snprintf(buf, len, "process %u (workers %u-%u)", p, first,
                 first + count - 1);
}

int ec_ups_reduce(const ec_model *m, uint32_t p, uint32_t first,
                  uint32_t count, const uint8_t *payload, size_t len,
                  ec_up *scratch, ec_down *down, ec_traffic *acc, char *why,
                  size_t whylen)
{
    ec_wire_ups_rd it;
    ec_err e = {0};
    char name[64];
    uint32_t i = 0, worker, want = 0, got = 0;
    const uint8_t *one;
    size_t onelen;
    int r;

    ec_procs_name(first, count, p, name, sizeof name);
    /* The uplinks expected: those of the process's workers that take part
     * in this exchange (all of them without partial participation). */
    for (uint32_t t = 0; t < count; t++)
        want += ec_model_participates(m, first + t) != 0;
    if (ec_wire_ups_open(&it, payload, len, &e) < 0)
        goto bad;
    while ((r = ec_wire_ups_next(&it, &worker, &one, &onelen, &e)) == 1) {
        while (i < count && !ec_model_participates(m, first + i))
            i++;
        if (i >= count || worker != first + i) {
            snprintf(why, whylen, "%s sent the uplink of worker %u where "
                     "%s was expected", name, worker,
                     i >= count ? "no more" : "the next of its own");
            return -1;
        }
        if (ec_wire_decode_up(one, onelen, m->d, scratch, &e) < 0) {
            snprintf(why, whylen, "worker %u sent a malformed message: %.150s",
                     worker, e.msg);
            return -1;
        }
        acc->bits_up += ec_up_bits(scratch);
        acc->paper_up += ec_up_paper_bits(scratch);
        ec_server_reduce_add(down, scratch);
        i++;
        got++;
    }
    if (r < 0)
        goto bad;
    if (got != want) {
        snprintf(why, whylen, "%s sent %u uplinks, not %u", name, got, want);
        return -1;
    }
    return 0;
bad:
    snprintf(why, whylen, "%s sent a malformed message: %.150s", name, e.msg);
    return -1;
}

/* ---- the worker side ------------------------------------------------------ */


static int worker_fail(ec_chan *ch, uint8_t *buf, size_t cap, uint64_t round,
                       const char *text)
{
    long len = ec_wire_encode_error(buf, cap, round, text);

    if (len > 0)
        ch->send(ch->ctx, buf, (size_t)len);
    return 1;
}

int ec_worker_serve(ec_chan *ch, const ec_problem *pb, const ec_params *prm,
                    uint32_t first, uint32_t count)
{
    return ec_worker_serve_model(ch, pb, prm, first, count, NULL);
}

/* The frames a process that reads the shared model receives: WELCOME,
 * STEP without a broadcast, STOP. */
#define SHARED_MAX_PAYLOAD 4096

int ec_worker_serve_model(ec_chan *ch, const ec_problem *pb,
                          const ec_params *prm, uint32_t first, uint32_t count,
                          const ec_model *shared)
{
    uint32_t d = pb->d, n, dd;
    size_t max_payload = shared ? SHARED_MAX_PAYLOAD : ec_wire_max_payload(d);
    size_t cap = EC_WIRE_HEADER_SIZE + max_payload;
    uint8_t *buf = malloc(cap);
    struct fault fault = fault_from_env();
    ec_model model = {0};
    const ec_model *m = shared ? shared : &model;
    ec_worker *workers = NULL;
    ec_down down = {0};
    ec_up up = {0};
    ec_buf out = {0};
    ec_wire_header h;
    ec_err e = {0};
    long len;
    int r, has_down, code = 1;
    /* Out of memory (a worker memory limit, most often) must still reach
     * the coordinator as a reason, so that frame has its own small buffer. */
    uint8_t small[EC_WIRE_HEADER_SIZE + 256];

    if (!buf || ec_buf_reserve(&out, 4096) < 0) {
        code = worker_fail(ch, small, sizeof small, 0,
                           "out of memory for the frame buffers");
        goto out;
    }
    if ((!shared && (ec_model_init(&model, pb, prm, &e) < 0 ||
                     ec_down_init(&down, d) < 0)) ||
        ec_up_init(&up, d) < 0 ||
        ec_workers_new(&workers, pb, prm, first, count, &e) < 0)
        goto nomem;
    len = ec_wire_encode_hello(buf, cap, first, count, (uint32_t)getpid(), d);
    if (len < 0 || ch->send(ch->ctx, buf, (size_t)len) < 0)
        goto out;
    if (ch->recv(ch->ctx, buf, max_payload, &h, &e) != 1 ||
        h.type != EC_WIRE_WELCOME ||
        ec_wire_decode_welcome(buf + EC_WIRE_HEADER_SIZE, h.length, &n, &dd, &e) < 0 ||
        dd != d)
        goto out;
    for (;;) {
        int faulty = 0;

        if ((r = ch->recv(ch->ctx, buf, max_payload, &h, &e)) != 1) {
            code = r == 0 ? 0 : 1;      /* coordinator gone: nothing to say */
            goto out;
        }
        if (h.type == EC_WIRE_STOP)
            break;
        if (h.type != EC_WIRE_STEP) {
            code = worker_fail(ch, buf, cap, h.round, "unexpected frame type");
            goto out;
        }
        if (shared) {
            /* The coordinator has applied the broadcast to the model
             * these workers read; STEP only says go. */
            if (h.flags & EC_WIRE_STEP_HAS_DOWN) {
                code = worker_fail(ch, buf, cap, h.round, "a STEP with a "
                                   "broadcast to a process that reads the "
                                   "shared model");
                goto out;
            }
        } else if (ec_wire_decode_step(buf + EC_WIRE_HEADER_SIZE, h.length,
                                       h.flags, d, &down, &has_down, &e) < 0) {
            code = worker_fail(ch, buf, cap, h.round, e.msg);
            goto out;
        } else if (has_down) {
            ec_model_apply(&model, &down);
        }
        len = ec_wire_ups_begin(out.p, out.cap, h.round);
        for (uint32_t i = 0; i < count && len > 0; i++) {
            if (!ec_model_participates(m, first + i))
                continue;       /* not sampled this round: sends nothing */
            ec_worker_step(&workers[i], m, &up);
            if (ec_buf_reserve(&out, (size_t)len + 8 + ec_wire_up_payload(&up)) < 0) {
                code = worker_fail(ch, small, sizeof small, h.round,
                                   "out of memory for the uplink frame");
                goto out;
            }
            len = ec_wire_ups_add(out.p, out.cap, (size_t)len, first + i, &up);
            faulty |= fault.kind != FAULT_NONE && fault.worker == first + i &&
                      fault.round == h.round;
        }
        if (len < 0) {
            code = worker_fail(ch, buf, cap, h.round,
                               "the uplinks are over the frame size limit");
            goto out;
        }
        if (faulty) {
            switch (fault.kind) {
            case FAULT_GARBAGE:
                memset(out.p, 0xab, EC_WIRE_HEADER_SIZE);
                break;
            case FAULT_TRUNCATE:
                ch->send(ch->ctx, out.p, (size_t)len / 2);
                code = 0;
                goto out;
            case FAULT_HANG:
                for (;;)
                    pause();
            case FAULT_EXIT:
                code = 3;
                goto out;
            default:
                break;
            }
        }
        if (ch->send(ch->ctx, out.p, (size_t)len) < 0)
            goto out;
    }
    code = 0;
    goto out;
nomem:
    code = worker_fail(ch, small, sizeof small, 0,
                       e.msg[0] ? e.msg : "out of memory for messages");
out:
    /* The caller leaves through _exit(); freeing keeps the sanitizers'
     * view of a clean exit honest all the same. */
    ec_workers_free(workers, count);
    ec_up_clear(&up);
    ec_down_clear(&down);
    ec_model_clear(&model);
    ec_buf_free(&out);
    free(buf);
    return code;
}

/* The socket channel of a forked worker. */
static int sock_send(void *ctx, const uint8_t *buf, size_t len)
{
    return send_all(*(int *)ctx, buf, len);
}

static int sock_recv(void *ctx, uint8_t *buf, size_t max_payload,
                     ec_wire_header *h, ec_err *e)
{
    return read_frame(*(int *)ctx, buf, max_payload, h, e);
}

/* ---- the coordinator side ------------------------------------------------- */

/* Reaps peer t if it has exited, waiting at most `wait` seconds. */
static int reap(struct peer *p, double wait)
{
    double until = ec_clock() + wait;

    while (!p->reaped) {
        struct rusage ru;
        pid_t r = wait4(p->pid, &p->status, WNOHANG, &ru);
        if (r == p->pid)
            p->maxrss_kb = ru.ru_maxrss;
        if (r == p->pid || (r < 0 && errno == ECHILD)) {
            p->reaped = 1;
            break;
        }
        if (ec_clock() >= until)
            return 0;
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return 1;
}

/* "worker 3", or "process 1 (workers 5-9)" for one hosting several. */
static const char *peer_name(const struct proc *pc, uint32_t t, char *buf,
                             size_t len)
{
    ec_procs_name(pc->peers[t].first, pc->peers[t].count, t, buf, len);
    return buf;
}

/* Says how a dead process ended, for the job's reason. */
static void describe_death(struct proc *pc, uint32_t t, const char *what,
                           ec_summary *sum)
{
    struct peer *p = &pc->peers[t];
    char name[64];

    peer_name(pc, t, name, sizeof name);
    if (ec_signal_caught()) {
        /* SIGTERM to the process group (a cancel) reaches the workers as
         * well: one may die before this process looks at its own flag. */
        sum->stop = EC_STOP_CANCELLED;
        snprintf(sum->reason, sizeof sum->reason,
                 "cancelled by signal %d at round %llu", ec_signal_caught(),
                 (unsigned long long)pc->round);
        return;
    }
    sum->stop = EC_STOP_FAILED;
    if (reap(p, 1.0) && WIFSIGNALED(p->status) &&
        WTERMSIG(p->status) == SIGXCPU)
        snprintf(sum->reason, sizeof sum->reason,
                 "%s exceeded its CPU time limit of %g s at round %llu",
                 name, pc->cpu_limit, (unsigned long long)pc->round);
    else if (p->reaped && WIFSIGNALED(p->status))
        snprintf(sum->reason, sizeof sum->reason,
                 "%s died (signal %d) at round %llu", name,
                 WTERMSIG(p->status), (unsigned long long)pc->round);
    else if (p->reaped && WIFEXITED(p->status) && WEXITSTATUS(p->status) != 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "%s exited with status %d at round %llu", name,
                 WEXITSTATUS(p->status), (unsigned long long)pc->round);
    else
        snprintf(sum->reason, sizeof sum->reason, "%s %s at round %llu",
                 name, what, (unsigned long long)pc->round);
}

/* Handles a frame from process t that is not the UPS we wait for. */
static void unexpected_frame(struct proc *pc, uint32_t t,
                             const ec_wire_header *h, ec_summary *sum)
{
    char text[1100], name[64];
    ec_err e = {0};

    peer_name(pc, t, name, sizeof name);
    sum->stop = EC_STOP_FAILED;
    if (h->type == EC_WIRE_ERROR &&
        ec_wire_decode_error(pc->peers[t].in.p + EC_WIRE_HEADER_SIZE, h->length,
                             text, sizeof text, &e) == 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "%s failed at round %llu: %.150s", name,
                 (unsigned long long)pc->round, text);
    else
        snprintf(sum->reason, sizeof sum->reason,
                 "%s broke the protocol at round %llu: frame type %u "
                 "where UPS was expected",
                 name, (unsigned long long)pc->round, h->type);
}

/* The job ends cancelled: SIGTERM reached this process. */
static void cancelled(struct proc *pc, ec_summary *sum)
{
    sum->stop = EC_STOP_CANCELLED;
    snprintf(sum->reason, sizeof sum->reason,
             "cancelled by signal %d at round %llu", ec_signal_caught(),
             (unsigned long long)pc->round);
}

/* The round timeout passed with the UPS of process t not in. */
static void timed_out(struct proc *pc, uint32_t t, ec_summary *sum)
{
    char name[64];

    sum->stop = EC_STOP_FAILED;
    snprintf(sum->reason, sizeof sum->reason,
             "%s did not answer within the round timeout of %g s at round %llu",
             peer_name(pc, t, name, sizeof name), pc->timeout,
             (unsigned long long)pc->round);
}

/*
 * What process t's frame of this exchange, read with result r (as
 * read_frame's) into its buffer, means: 0 when it is its UPS, else < 0
 * with sum filled in.
 */
static int take_ups(struct proc *pc, uint32_t t, int r, const ec_wire_header *h,
                    const ec_err *e, ec_traffic *acc, ec_summary *sum)
{
    struct peer *p = &pc->peers[t];

    if (r == 0) {
        describe_death(pc, t, "closed its connection", sum);
        return -1;
    }
    if (r < 0) {
        char what[600];
        snprintf(what, sizeof what, "sent a bad frame (%.500s)", e->msg);
        if (r == EC_EPEER || r == EC_ETIMEOUT)
            describe_death(pc, t, e->msg, sum);
        else
            describe_death(pc, t, what, sum);
        return -1;
    }
    if (h->type != EC_WIRE_UPS) {
        unexpected_frame(pc, t, h, sum);
        return -1;
    }
    p->in_len = h->length;
    acc->wire_up += EC_WIRE_HEADER_SIZE + h->length;
    return 0;
}

/*
 * Waits until every process has sent its UPS frame, reading each as it
 * becomes ready into its own buffer. Wakes for SIGTERM too. Returns 0, or
 * < 0 with sum filled in.
 */
static int gather(struct proc *pc, ec_traffic *acc, ec_summary *sum)
{
    uint32_t np = pc->np, left = np;
    struct pollfd *pfd = calloc((size_t)np + 1, sizeof *pfd);
    uint8_t *done = pc->done;
    double deadline = ec_clock() + pc->timeout;
    int rc = -1;

    if (!pfd) {
        sum->stop = EC_STOP_FAILED;
        snprintf(sum->reason, sizeof sum->reason, "out of memory");
        goto out;
    }
    memset(done, 0, np);
    while (left > 0) {
        uint32_t nfd = 0;
        int ready, wait_ms = (int)((deadline - ec_clock()) * 1000) + 1;

        for (uint32_t t = 0; t < np; t++) {
            if (!done[t]) {
                pfd[nfd].fd = pc->peers[t].fd;
                pfd[nfd].events = POLLIN;
                pfd[nfd].revents = 0;
                nfd++;
            }
        }
        pfd[nfd].fd = ec_signal_fd();
        pfd[nfd].events = POLLIN;
        pfd[nfd].revents = 0;
        /* A short spin before sleeping: on a virtual machine the wake-up
         * of a sleeping CPU costs tens of microseconds, most of a small
         * round. */
        ready = spin_seconds > 0 ? poll(pfd, nfd + 1, 0) : 0;
        if (ready == 0 && spin_now()) {
            for (double spin_until = ec_clock() + spin_seconds;
                 ready == 0 && ec_clock() < spin_until;)
                ready = poll(pfd, nfd + 1, 0);
            spin_done(ready != 0);
        }
        if (ready == 0)
            ready = poll(pfd, nfd + 1, wait_ms > 0 ? wait_ms : 0);
        if (ready < 0 && errno != EINTR) {
            sum->stop = EC_STOP_FAILED;
            snprintf(sum->reason, sizeof sum->reason, "poll: %s", strerror(errno));
            goto out;
        }
        if (ec_signal_caught()) {
            cancelled(pc, sum);
            goto out;
        }
        if (ready == 0 && ec_clock() >= deadline) {
            for (uint32_t t = 0; t < np; t++) {
                if (!done[t]) {
                    timed_out(pc, t, sum);
                    goto out;
                }
            }
        }
        for (uint32_t t = 0, i = 0; t < np; t++) {
            struct peer *p = &pc->peers[t];
            ec_wire_header h;
            ec_err e = {0};
            int r;

            if (done[t])
                continue;
            if (!pfd[i++].revents)
                continue;
            r = read_frame_grow(p->fd, &p->in, p->max_payload, &h, &e);
            if (take_ups(pc, t, r, &h, &e, acc, sum) < 0)
                goto out;
            done[t] = 1;
            left--;
        }
    }
    rc = 0;
out:
    free(pfd);
    return rc;
}

/* Takes process t's frame from its mailbox (or, when the mailbox says it
 * is there, from its socket) as its UPS: 0, or < 0 with sum filled in. */
static int take_box(struct proc *pc, uint32_t t, ec_traffic *acc,
                    ec_summary *sum)
{
    struct peer *p = &pc->peers[t];
    ec_wire_header h;
    ec_err e = {0};
    long len = ec_mailbox_take(p->mb, EC_MAILBOX_UP, p->in.p, p->in.cap);
    int r;

    p->up_seen++;
    if (len == -1)
        r = read_frame_grow(p->fd, &p->in, p->max_payload, &h, &e);
    else
        r = frame_check(p->in.p, len, p->max_payload, &h, &e);
    return take_ups(pc, t, r, &h, &e, acc, sum);
}

/*
 * gather() over the mailboxes: takes each UPS as it is published, spinning
 * first while spinning pays (a spin pays when every UPS is in before it
 * ends) and the process it waits for runs on another CPU, then asleep on
 * one process's mailbox at a time; between sleeps it looks at the
 * sockets, where a process that has died shows its end.
 * Returns 0, or < 0 with sum filled in.
 */
static int gather_box(struct proc *pc, ec_traffic *acc, ec_summary *sum)
{
    uint32_t np = pc->np, left = np;
    uint8_t *done = pc->done;
    double now = ec_clock(), deadline = now + pc->timeout;
    double spin_until = spin_now() ? now + spin_seconds : 0;

    memset(done, 0, np);
    for (;;) {
        uint32_t first = np;

        for (uint32_t t = 0; t < np; t++) {
            if (done[t])
                continue;
            if (!ec_mailbox_ready(pc->peers[t].mb, EC_MAILBOX_UP,
                                  pc->peers[t].up_seen)) {
                if (first == np)
                    first = t;
                continue;
            }
            if (take_box(pc, t, acc, sum) < 0)
                return -1;
            done[t] = 1;
            left--;
        }
        if (left == 0)
            break;
        if (ec_signal_caught()) {
            cancelled(pc, sum);
            return -1;
        }
        now = ec_clock();
        if (now < spin_until &&
            ec_mailbox_peer_here(pc->peers[first].mb, EC_MAILBOX_UP)) {
            /* The process it waits for last ran on this CPU: it cannot
             * run while this spins. Sleep at once, and leave the wait out
             * of the count of spins. */
            spin_until = 0;
        }
        if (now < spin_until) {
            ec_mailbox_relax();
            continue;
        }
        if (spin_until > 0) {
            spin_done(0);
            spin_until = 0;
        }
        if (now >= deadline) {
            timed_out(pc, first, sum);
            return -1;
        }
        if (ec_mailbox_sleep(pc->peers[first].mb, EC_MAILBOX_UP,
                             pc->peers[first].up_seen,
                             deadline - now < WAIT_SLICE ? deadline - now
                                                         : WAIT_SLICE))
            continue;
        /* Nothing from it yet: has any process that owes a UPS ended? A
         * process publishes before it writes its socket, so a socket
         * that stirs with nothing published is its end (or a frame
         * outside the protocol, which take_ups names). */
        for (uint32_t t = 0; t < np; t++) {
            struct peer *p = &pc->peers[t];
            ec_wire_header h;
            ec_err e = {0};
            int r;

            if (done[t] || !socket_stirs(p->fd) ||
                ec_mailbox_ready(p->mb, EC_MAILBOX_UP, p->up_seen))
                continue;
            r = read_frame_grow(p->fd, &p->in, p->max_payload, &h, &e);
            if (take_ups(pc, t, r, &h, &e, acc, sum) < 0)
                return -1;
            done[t] = 1;
            left--;
        }
    }
    if (spin_until > 0)
        spin_done(1);
    return 0;
}

/* Sends process t a frame: by its mailbox once the handshake is done. */
static int peer_send(struct proc *pc, uint32_t t, const uint8_t *buf,
                     size_t len)
{
    struct peer *p = &pc->peers[t];

    if (p->live && ec_mailbox_put(p->mb, EC_MAILBOX_DOWN, buf, len))
        return 0;
    return send_all(p->fd, buf, len);
}

/* STEP with the last broadcast to every process, then gather and reduce
 * the uplinks in worker order. */
static int proc_exchange(void *vctx, const ec_model *m, ec_down *down,
                         ec_traffic *acc, ec_summary *sum)
{
    struct proc *pc = vctx;
    /* With the shared model the workers read what the loop applied: STEP
     * says go and carries nothing. */
    long len = ec_wire_encode_step(pc->sendbuf, pc->bufcap, pc->round,
                                   pc->have_down && !pc->model ? pc->last_down
                                                               : NULL,
                                   pc->pb->d);

    if (len < 0) {
        sum->stop = EC_STOP_FAILED;
        snprintf(sum->reason, sizeof sum->reason,
                 "cannot encode the broadcast at round %llu",
                 (unsigned long long)pc->round);
        return -1;
    }
    for (uint32_t t = 0; t < pc->np; t++) {
        if (peer_send(pc, t, pc->sendbuf, (size_t)len) < 0) {
            describe_death(pc, t, errno == EAGAIN ? "stopped reading" :
                           "cannot be written to", sum);
            return -1;
        }
        acc->wire_down += (uint64_t)len;
    }
    /* STEP holds the broadcast now (in the mailboxes or the sockets), so
     * down can be reset; the coordinator's own workers come first in
     * worker order and step while the processes step theirs, as the
     * in-process backend steps them. */
    ec_server_reduce_begin(m, down);
    ec_workers_step_into(pc->lw, pc->local, m, &pc->up, down, acc);
    if ((pc->mailboxes ? gather_box(pc, acc, sum) : gather(pc, acc, sum)) < 0)
        return -1;
    for (uint32_t t = 0; t < pc->np; t++) {
        struct peer *p = &pc->peers[t];
        char why[200];

        if (ec_ups_reduce(m, t, p->first, p->count,
                          p->in.p + EC_WIRE_HEADER_SIZE, p->in_len, &pc->up,
                          down, acc, why, sizeof why) < 0) {
            sum->stop = EC_STOP_FAILED;
            snprintf(sum->reason, sizeof sum->reason, "%s at round %llu", why,
                     (unsigned long long)pc->round);
            return -1;
        }
    }
    ec_server_reduce_end(m, pc->n, down);
    acc->bits_down += down->bits;
    /* The workers apply this broadcast when the next STEP brings it; the
     * loop applies it here, so both replicas move together. */
    pc->last_down = down;
    pc->have_down = 1;
    pc->round++;
    return 0;
}

uint64_t ec_address_space(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long pages = 0;
    long page = sysconf(_SC_PAGESIZE);

    if (!f)
        return 0;
    if (fscanf(f, "%llu", &pages) != 1)
        pages = 0;
    fclose(f);
    return page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

/* A worker's resource limits (ecopt/proc.h), set in the child before it
   serves. */
const char *ec_worker_limits(const ec_proc_opts *opts)
{
    struct rlimit rl;
    unsigned files = opts && opts->worker_max_files ? opts->worker_max_files
                                                    : EC_WORKER_MAX_FILES;
    uint64_t mem = opts ? opts->worker_mem_limit : 0;

    /* A forked worker's address space starts as the coordinator's: the
     * data and the problem it shares copy-on-write count in RLIMIT_AS
     * too, so a limit from the account's own allocations goes on top. */
    if (opts && !mem && opts->worker_mem_above) {
        uint64_t held = ec_address_space();

        if (!held)
            return "cannot read its address space for its memory limit";
        mem = held + opts->worker_mem_above;
    }
    if (mem) {
        rl.rlim_cur = rl.rlim_max = mem;
        if (setrlimit(RLIMIT_AS, &rl) < 0)
            return "cannot set its memory limit";
    }
    if (opts && opts->worker_cpu_limit > 0) {
        rlim_t sec = (rlim_t)opts->worker_cpu_limit;

        if ((double)sec < opts->worker_cpu_limit)
            sec++;
        rl.rlim_cur = sec;
        rl.rlim_max = sec + 5;
        if (setrlimit(RLIMIT_CPU, &rl) < 0)
            return "cannot set its CPU time limit";
    }
    rl.rlim_cur = rl.rlim_max = files;
    if (files != EC_WORKER_FILES_KEEP && setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return "cannot set its open-file limit";
    rl.rlim_cur = rl.rlim_max = 0;
    if (setrlimit(RLIMIT_CORE, &rl) < 0)
        return "cannot turn off its core files";
    return NULL;
}

/* Forks worker t on its end of a fresh socketpair. */
static int spawn(struct proc *pc, uint32_t t, const ec_proc_opts *opts,
                 ec_err *e)
{
    int sv[2];
    pid_t parent = getpid(), pid;

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return ec_err_set(e, EC_EIO, "socketpair: %s", strerror(errno));
    fflush(NULL);           /* no buffered output duplicated into children */
    pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return ec_err_set(e, EC_EIO, "fork: %s", strerror(errno));
    }
    if (pid == 0) {
        struct sigaction sa;
        int code;

        /* Die with the coordinator, whatever kills it. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        /* Only our own socket, as descriptor 3, beside stdin, stdout and
         * stderr: no other worker's socket, no report pipe, nothing else
         * the coordinator holds. */
        if (dup2(sv[1], 3) < 0)
            _exit(1);
        close_range(4, ~0u, 0);
        /* Nor any other process's mailbox. */
        if (pc->mailboxes)
            ec_mailbox_keep_only(pc->mailboxes, pc->np, t);
        {
            int fd = 3;
            struct box_chan box = {3, pc->peers[t].mb, 0, 0};
            ec_chan ch = {&fd, sock_send, sock_recv};
            ec_chan boxed = {&box, box_send, box_recv};
            const char *why = ec_worker_limits(opts);

            if (why) {
                uint8_t small[EC_WIRE_HEADER_SIZE + 256];
                char text[200];

                snprintf(text, sizeof text, "%s: %s", why, strerror(errno));
                _exit(worker_fail(&ch, small, sizeof small, 0, text));
            }
            /* The shared model is the coordinator's to write. */
            if (pc->seg && mprotect(pc->seg, pc->seg_len, PROT_READ) < 0) {
                uint8_t small[EC_WIRE_HEADER_SIZE + 256];
                char text[200];

                snprintf(text, sizeof text, "cannot map the shared model "
                         "read-only: %s", strerror(errno));
                _exit(worker_fail(&ch, small, sizeof small, 0, text));
            }
            code = ec_worker_serve_model(pc->mailboxes ? &boxed : &ch,
                                         pc->pb, pc->prm,
                                         pc->peers[t].first,
                                         pc->peers[t].count, pc->model);
        }
        _exit(code);
    }
    close(sv[1]);
    pc->peers[t].fd = sv[0];
    pc->peers[t].pid = pid;
    set_timeouts(sv[0], pc->timeout);
    return 0;
}

/* HELLO from every process (its first worker and count); WELCOME back. */
static int handshake(struct proc *pc, ec_summary *sum)
{
    for (uint32_t t = 0; t < pc->np; t++) {
        struct peer *p = &pc->peers[t];
        ec_wire_header h;
        ec_err e = {0};
        uint32_t worker, count, pid, d;
        long len;
        int r = read_frame_grow(p->fd, &p->in, pc->max_payload, &h, &e);

        if (r == 0 || r == EC_EPEER || r == EC_ETIMEOUT) {
            describe_death(pc, t, r == EC_ETIMEOUT ? "did not say hello in time" :
                           "closed its connection", sum);
            return -1;
        }
        if (r < 0 || h.type != EC_WIRE_HELLO ||
            ec_wire_decode_hello(p->in.p + EC_WIRE_HEADER_SIZE, h.length,
                                 &worker, &count, &pid, &d, &e) < 0 ||
            worker != p->first || count != p->count || d != pc->pb->d) {
            if (r == 1 && h.type == EC_WIRE_ERROR)
                unexpected_frame(pc, t, &h, sum);
            else {
                char name[64];

                sum->stop = EC_STOP_FAILED;
                snprintf(sum->reason, sizeof sum->reason, "%s: bad handshake",
                         peer_name(pc, t, name, sizeof name));
            }
            return -1;
        }
        len = ec_wire_encode_welcome(pc->sendbuf, pc->bufcap, pc->n, pc->pb->d);
        if (len < 0 || send_all(p->fd, pc->sendbuf, (size_t)len) < 0) {
            describe_death(pc, t, "cannot be written to", sum);
            return -1;
        }
        p->live = p->mb != NULL;    /* the mailbox from the next frame on */
    }
    return 0;
}

/* STOP to everyone still there, then make sure all are gone and reaped. */
static void shutdown_workers(struct proc *pc, int polite)
{
    long len = ec_wire_encode_stop(pc->sendbuf, pc->bufcap, pc->round);

    for (uint32_t t = 0; t < pc->np; t++) {
        struct peer *p = &pc->peers[t];
        if (p->pid <= 0)
            continue;
        if (polite && len > 0)
            peer_send(pc, t, pc->sendbuf, (size_t)len);
        else
            kill(p->pid, SIGKILL);
    }
    for (uint32_t t = 0; t < pc->np; t++) {
        struct peer *p = &pc->peers[t];
        if (p->pid <= 0)
            continue;
        if (!reap(p, polite ? 2.0 : 1.0)) {
            kill(p->pid, SIGKILL);
            reap(p, 5.0);
        }
        if (p->fd >= 0)
            close(p->fd);
        p->fd = -1;
    }
}

/*
 * The model in a shared segment, made before the fork so that every
 * worker process inherits its mapping: an unnamed memfd (nothing in
 * /dev/shm to leave behind), mapped once and its descriptor closed at
 * once, so the pages go when the last process of the job that maps them
 * is gone, however it ends. 0, or -1 with why (the run then keeps a
 * replica in each process, as without it).
 */
static int share_model(struct proc *pc, char *why, size_t whylen)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = ec_model_shared_bytes(pc->pb, pc->prm);
    void *seg;
    ec_err e = {0};
    int fd;

    len = (len + page - 1) / page * page;
    if (fault_from_env().kind == FAULT_MEMFD) {
        errno = ENOSYS;
        fd = -1;
    } else {
        fd = memfd_create("ecopt-model", MFD_CLOEXEC);
    }
    if (fd < 0) {
        snprintf(why, whylen, "memfd_create: %s", strerror(errno));
        return -1;
    }
    if (ftruncate(fd, (off_t)len) < 0) {
        snprintf(why, whylen, "ftruncate to %zu bytes: %s", len, strerror(errno));
        close(fd);
        return -1;
    }
    seg = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (seg == MAP_FAILED) {
        snprintf(why, whylen, "mmap of %zu bytes: %s", len, strerror(errno));
        return -1;
    }
    if (!(pc->model = ec_model_init_in(seg, len, pc->pb, pc->prm, &e))) {
        snprintf(why, whylen, "%.150s", e.msg);
        munmap(seg, len);
        return -1;
    }
    pc->seg = seg;
    pc->seg_len = len;
    return 0;
}

/* What a process's own replica adds to it when the model is not shared:
 * the model's vectors, the decoded broadcast and a frame buffer a dense
 * STEP fits (docs/architecture.md, "How a job runs"). */
static uint64_t replica_bytes(const ec_problem *pb, const ec_params *prm)
{
    return ec_model_shared_bytes(pb, prm) + 2 * 8 * (uint64_t)pb->d +
           ec_wire_max_payload(pb->d);
}

int ec_run_process(const ec_problem *pb, const ec_params *prm,
                   const ec_job *job, const ec_proc_opts *opts,
                   ec_metric_fn fn, void *ctx, ec_summary *sum, ec_err *e)
{
    ec_proc_opts own;
    uint32_t n = pb->n, d = pb->d;
    uint32_t local = opts ? opts->local : 0;
    uint32_t np = local < n ? ec_procs_resolve(n - local, opts ? opts->procs : 0)
                            : 0;
    struct proc pc = {0};
    ec_backend be = {&pc, proc_exchange, NULL};
    int rc = 0;

    memset(sum, 0, sizeof *sum);
    if (local >= n)
        return ec_err_set(e, EC_EINVAL, "the coordinator may step at most %u "
                          "of the %u workers (got %u)", n - 1, n, local);
    if (np < 1 || np > n - local)
        return ec_err_set(e, EC_EINVAL, "procs must be in 1..%u, the number "
                          "of workers the processes host (got %u)", n - local,
                          np);
    pc.pb = pb;
    pc.prm = prm;
    pc.n = n;
    pc.np = np;
    pc.local = local;
    pc.timeout = opts && opts->round_timeout > 0 ? opts->round_timeout : 60.0;
    pc.cpu_limit = opts ? opts->worker_cpu_limit : 0;
    pc.max_payload = ec_wire_max_payload(d);
    pc.bufcap = EC_WIRE_HEADER_SIZE + pc.max_payload;
    pc.peers = calloc(np, sizeof *pc.peers);
    pc.done = calloc(np, 1);
    pc.sendbuf = malloc(pc.bufcap);
    if (!pc.peers || !pc.done || !pc.sendbuf || ec_up_init(&pc.up, d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", n);
        goto out;
    }
    if (local && (rc = ec_workers_new(&pc.lw, pb, prm, 0, local, e)) < 0)
        goto out;
    for (uint32_t t = 0; t < np; t++) {
        struct peer *p = &pc.peers[t];

        p->fd = -1;
        ec_procs_block(n - local, np, t, &p->first, &p->count);
        p->first += local;
        p->max_payload = ec_wire_max_payload_ups(d, p->count);
    }
    /* The mailboxes, made before the fork like the model; without them
     * (mmap failed) the sockets carry every frame, as they can. */
    if ((pc.mailboxes = ec_mailbox_map(np))) {
        for (uint32_t t = 0; t < np; t++) {
            struct peer *p = &pc.peers[t];
            size_t most = EC_WIRE_HEADER_SIZE + p->max_payload;

            p->mb = ec_mailbox_at(pc.mailboxes, t);
            if (ec_buf_reserve(&p->in, most < EC_MAILBOX_CAP ? most
                                                             : EC_MAILBOX_CAP) < 0) {
                rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", n);
                goto out;
            }
        }
    }
    {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);

        spin_seconds = cpus > 0 && (long)np + 1 <= cpus ? SPIN_SECONDS : 0;
        memset(&spin_stat, 0, sizeof spin_stat);
    }
    {
        char why[200];

        if (opts && opts->model_copies)
            snprintf(why, sizeof why, "asked for");
        if ((opts && opts->model_copies) || share_model(&pc, why, sizeof why) < 0) {
            if (opts && opts->log)
                fprintf(opts->log, "model      a copy in each worker process "
                        "(the shared model: %s)\n", why);
            /* The account's limit counts the shared model once, in the
             * coordinator; each copy is the process's own. */
            if (opts && !opts->worker_mem_limit && opts->worker_mem_above) {
                own = *opts;
                own.worker_mem_above += replica_bytes(pb, prm);
                opts = &own;
            }
        } else {
            be.model = pc.model;
        }
    }
    for (uint32_t t = 0; t < np; t++)
        if ((rc = spawn(&pc, t, opts, e)) < 0)
            goto out;
    if (handshake(&pc, sum) < 0) {
        rc = 0;
        sum->rounds = 0;
        goto out;
    }
    rc = ec_run_loop(pb, prm, job, &be, fn, ctx, sum, e);
    sum->model_shared = pc.seg_len;
out:
    if (pc.peers) {
        shutdown_workers(&pc, rc == 0 && sum->stop != EC_STOP_FAILED &&
                                  sum->stop != EC_STOP_CANCELLED);
        for (uint32_t t = 0; t < np; t++) {
            sum->workers_maxrss += (uint64_t)pc.peers[t].maxrss_kb * 1024;
            ec_buf_free(&pc.peers[t].in);
        }
    }
    ec_workers_free(pc.lw, local);
    ec_up_clear(&pc.up);
    ec_mailbox_unmap(pc.mailboxes, np);
    free(pc.done);
    free(pc.peers);
    free(pc.sendbuf);
    if (pc.seg) {
        ec_model_clear(pc.model);
        munmap(pc.seg, pc.seg_len);
    }
    return rc;
}
