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
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/clock.h"
#include "ecopt/wire.h"

/*
 * Fault injection for the runtime's own tests: ECOPT_FAULT=KIND:WORKER:ROUND
 * makes one worker misbehave at one exchange. KIND is garbage (a frame
 * with a bad magic), truncate (half a frame, then exit), hang (stop
 * answering) or exit (exit with status 3). Unset, it costs one getenv.
 */
struct fault {
    enum { FAULT_NONE, FAULT_GARBAGE, FAULT_TRUNCATE, FAULT_HANG, FAULT_EXIT } kind;
    uint32_t worker;
    uint64_t round;
};

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
    return f;
}

struct peer {
    int fd;
    pid_t pid;
    int reaped;
    int status;
    long maxrss_kb;     /* its peak resident set, from wait4 (Linux: KiB) */
};

struct proc {
    const ec_problem *pb;
    const ec_params *prm;
    struct peer *peers;
    uint32_t n;
    uint8_t *sendbuf, *recvbuf;
    size_t bufcap, max_payload;
    ec_up *ups;
    ec_down *last_down;   /* the broadcast the next STEP carries */
    int have_down;
    double timeout;
    double cpu_limit;     /* seconds of CPU per worker, for messages */
    uint64_t round;       /* exchanges done, for messages */
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

    while (got < len) {
        ssize_t r = recv(fd, buf + got, len - got, 0);
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
 * Reads one frame: header, checked, then exactly its payload into buf.
 * Returns 1, or 0 on a clean EOF before the header, or < 0 with e set.
 */
static int read_frame(int fd, uint8_t *buf, size_t max_payload,
                      ec_wire_header *h, ec_err *e)
{
    int r = recv_all(fd, buf, EC_WIRE_HEADER_SIZE);

    if (r == 0)
        return 0;
    if (r < 0)
        return ec_err_set(e, errno == EAGAIN ? EC_ETIMEOUT : EC_EPEER, "%s",
                          errno == EAGAIN ? "timed out" :
                          errno == EPROTO ? "closed its connection mid-frame" :
                          strerror(errno));
    if (ec_wire_header_decode(buf, EC_WIRE_HEADER_SIZE, max_payload, h, e) < 0)
        return EC_EPROTO;
    r = recv_all(fd, buf + EC_WIRE_HEADER_SIZE, h->length);
    if (r <= 0)
        return ec_err_set(e, r == 0 || errno == EPROTO ? EC_EPEER :
                             errno == EAGAIN ? EC_ETIMEOUT : EC_EPEER,
                          "%s", errno == EAGAIN ? "timed out mid-frame" :
                          "closed its connection mid-frame");
    return 1;
}

static void set_timeouts(int fd, double seconds)
{
    struct timeval tv;

    tv.tv_sec = (time_t)seconds;
    tv.tv_usec = (suseconds_t)((seconds - (double)tv.tv_sec) * 1e6);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
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
                    uint32_t tau)
{
    uint32_t d = pb->d, n, dd;
    size_t max_payload = ec_wire_max_payload(d);
    size_t cap = EC_WIRE_HEADER_SIZE + max_payload;
    uint8_t *buf = malloc(cap);
    struct fault fault = fault_from_env();
    ec_model model = {0};
    ec_worker worker = {0};
    ec_down down = {0};
    ec_up up = {0};
    ec_wire_header h;
    ec_err e = {0};
    long len;
    int r, has_down;
    /* Out of memory (a worker memory limit, most often) must still reach
     * the coordinator as a reason, so that frame has its own small buffer. */
    uint8_t small[EC_WIRE_HEADER_SIZE + 256];

    if (!buf)
        return worker_fail(ch, small, sizeof small, 0,
                           "out of memory for the frame buffers");
    if (ec_model_init(&model, pb, prm, &e) < 0 ||
        ec_worker_init(&worker, pb, prm, tau, &e) < 0 ||
        ec_down_init(&down, d) < 0 || ec_up_init(&up, d) < 0)
        return worker_fail(ch, small, sizeof small, 0,
                           e.msg[0] ? e.msg : "out of memory for messages");
    len = ec_wire_encode_hello(buf, cap, tau, (uint32_t)getpid(), d);
    if (len < 0 || ch->send(ch->ctx, buf, (size_t)len) < 0)
        return 1;
    if (ch->recv(ch->ctx, buf, max_payload, &h, &e) != 1 ||
        h.type != EC_WIRE_WELCOME ||
        ec_wire_decode_welcome(buf + EC_WIRE_HEADER_SIZE, h.length, &n, &dd, &e) < 0 ||
        dd != d)
        return 1;
    for (;;) {
        if ((r = ch->recv(ch->ctx, buf, max_payload, &h, &e)) != 1)
            return r == 0 ? 0 : 1;      /* coordinator gone: nothing to say */
        if (h.type == EC_WIRE_STOP)
            break;
        if (h.type != EC_WIRE_STEP)
            return worker_fail(ch, buf, cap, h.round, "unexpected frame type");
        if (ec_wire_decode_step(buf + EC_WIRE_HEADER_SIZE, h.length, h.flags,
                                d, &down, &has_down, &e) < 0)
            return worker_fail(ch, buf, cap, h.round, e.msg);
        if (has_down)
            ec_model_apply(&model, &down);
        ec_worker_step(&worker, &model, &up);
        len = ec_wire_encode_up(buf, cap, h.round, &up);
        if (len < 0)
            return 1;
        if (fault.kind != FAULT_NONE && fault.worker == tau && fault.round == h.round) {
            switch (fault.kind) {
            case FAULT_GARBAGE:
                memset(buf, 0xab, EC_WIRE_HEADER_SIZE);
                break;
            case FAULT_TRUNCATE:
                ch->send(ch->ctx, buf, (size_t)len / 2);
                return 0;
            case FAULT_HANG:
                for (;;)
                    pause();
            case FAULT_EXIT:
                return 3;
            default:
                break;
            }
        }
        if (ch->send(ch->ctx, buf, (size_t)len) < 0)
            return 1;
    }
    /* The caller leaves through _exit(); freeing keeps the sanitizers'
     * view of a clean exit honest all the same. */
    ec_up_clear(&up);
    ec_down_clear(&down);
    ec_worker_clear(&worker);
    ec_model_clear(&model);
    free(buf);
    return 0;
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

/* Says how a dead worker ended, for the job's reason. */
static void describe_death(struct proc *pc, uint32_t t, const char *what,
                           ec_summary *sum)
{
    struct peer *p = &pc->peers[t];

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
                 "worker %u exceeded its CPU time limit of %g s at round %llu",
                 t, pc->cpu_limit, (unsigned long long)pc->round);
    else if (p->reaped && WIFSIGNALED(p->status))
        snprintf(sum->reason, sizeof sum->reason,
                 "worker %u died (signal %d) at round %llu", t,
                 WTERMSIG(p->status), (unsigned long long)pc->round);
    else if (p->reaped && WIFEXITED(p->status) && WEXITSTATUS(p->status) != 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "worker %u exited with status %d at round %llu", t,
                 WEXITSTATUS(p->status), (unsigned long long)pc->round);
    else
        snprintf(sum->reason, sizeof sum->reason, "worker %u %s at round %llu",
                 t, what, (unsigned long long)pc->round);
}

/* Handles a frame from worker t that is not the UP we wait for. */
static void unexpected_frame(struct proc *pc, uint32_t t,
                             const ec_wire_header *h, ec_summary *sum)
{
    char text[1100];
    ec_err e = {0};

    sum->stop = EC_STOP_FAILED;
    if (h->type == EC_WIRE_ERROR &&
        ec_wire_decode_error(pc->recvbuf + EC_WIRE_HEADER_SIZE, h->length,
                             text, sizeof text, &e) == 0)
        snprintf(sum->reason, sizeof sum->reason,
                 "worker %u failed at round %llu: %.180s", t,
                 (unsigned long long)pc->round, text);
    else
        snprintf(sum->reason, sizeof sum->reason,
                 "worker %u broke the protocol at round %llu: frame type %u "
                 "where UP was expected",
                 t, (unsigned long long)pc->round, h->type);
}

/*
 * Waits until every worker in want[] has sent one frame, reading each with
 * read_fn as it becomes ready. Wakes for SIGTERM too. Returns 0, or < 0
 * with sum filled in.
 */
static int gather(struct proc *pc, ec_traffic *acc, ec_summary *sum)
{
    uint32_t n = pc->n, left = n;
    struct pollfd *pfd = calloc((size_t)n + 1, sizeof *pfd);
    uint8_t *done = calloc(n, 1);
    double deadline = ec_clock() + pc->timeout;
    int rc = -1;

    if (!pfd || !done) {
        sum->stop = EC_STOP_FAILED;
        snprintf(sum->reason, sizeof sum->reason, "out of memory");
        goto out;
    }
    while (left > 0) {
        uint32_t np = 0;
        int ready, wait_ms = (int)((deadline - ec_clock()) * 1000) + 1;

        for (uint32_t t = 0; t < n; t++) {
            if (!done[t]) {
                pfd[np].fd = pc->peers[t].fd;
                pfd[np].events = POLLIN;
                pfd[np].revents = 0;
                np++;
            }
        }
        pfd[np].fd = ec_signal_fd();
        pfd[np].events = POLLIN;
        pfd[np].revents = 0;
        ready = poll(pfd, np + 1, wait_ms > 0 ? wait_ms : 0);
        if (ready < 0 && errno != EINTR) {
            sum->stop = EC_STOP_FAILED;
            snprintf(sum->reason, sizeof sum->reason, "poll: %s", strerror(errno));
            goto out;
        }
        if (ec_signal_caught()) {
            sum->stop = EC_STOP_CANCELLED;
            snprintf(sum->reason, sizeof sum->reason,
                     "cancelled by signal %d at round %llu", ec_signal_caught(),
                     (unsigned long long)pc->round);
            goto out;
        }
        if (ready == 0 && ec_clock() >= deadline) {
            for (uint32_t t = 0; t < n; t++) {
                if (!done[t]) {
                    sum->stop = EC_STOP_FAILED;
                    snprintf(sum->reason, sizeof sum->reason,
                             "worker %u did not answer within the round "
                             "timeout of %g s at round %llu",
                             t, pc->timeout, (unsigned long long)pc->round);
                    goto out;
                }
            }
        }
        for (uint32_t t = 0, i = 0; t < n; t++) {
            ec_wire_header h;
            ec_err e = {0};
            int r;

            if (done[t])
                continue;
            if (!pfd[i++].revents)
                continue;
            r = read_frame(pc->peers[t].fd, pc->recvbuf, pc->max_payload, &h, &e);
            if (r == 0) {
                describe_death(pc, t, "closed its connection", sum);
                goto out;
            }
            if (r < 0) {
                char what[600];
                snprintf(what, sizeof what, "sent a bad frame (%.500s)", e.msg);
                if (r == EC_EPEER || r == EC_ETIMEOUT)
                    describe_death(pc, t, e.msg, sum);
                else
                    describe_death(pc, t, what, sum);
                goto out;
            }
            if (h.type != EC_WIRE_UP) {
                unexpected_frame(pc, t, &h, sum);
                goto out;
            }
            if (ec_wire_decode_up(pc->recvbuf + EC_WIRE_HEADER_SIZE, h.length,
                                  pc->pb->d, &pc->ups[t], &e) < 0) {
                sum->stop = EC_STOP_FAILED;
                snprintf(sum->reason, sizeof sum->reason,
                         "worker %u sent a malformed message at round %llu: %.150s",
                         t, (unsigned long long)pc->round, e.msg);
                goto out;
            }
            acc->wire_up += EC_WIRE_HEADER_SIZE + h.length;
            done[t] = 1;
            left--;
        }
    }
    rc = 0;
out:
    free(pfd);
    free(done);
    return rc;
}

/* STEP with the last broadcast to everyone, then gather and reduce. */
static int proc_exchange(void *vctx, const ec_model *m, ec_down *down,
                         ec_traffic *acc, ec_summary *sum)
{
    struct proc *pc = vctx;
    long len = ec_wire_encode_step(pc->sendbuf, pc->bufcap, pc->round,
                                   pc->have_down ? pc->last_down : NULL,
                                   pc->pb->d);

    if (len < 0) {
        sum->stop = EC_STOP_FAILED;
        snprintf(sum->reason, sizeof sum->reason,
                 "cannot encode the broadcast at round %llu",
                 (unsigned long long)pc->round);
        return -1;
    }
    for (uint32_t t = 0; t < pc->n; t++) {
        if (send_all(pc->peers[t].fd, pc->sendbuf, (size_t)len) < 0) {
            describe_death(pc, t, errno == EAGAIN ? "stopped reading" :
                           "cannot be written to", sum);
            return -1;
        }
        acc->wire_down += (uint64_t)len;
    }
    if (gather(pc, acc, sum) < 0)
        return -1;
    for (uint32_t t = 0; t < pc->n; t++) {
        acc->bits_up += ec_up_bits(&pc->ups[t]);
        acc->paper_up += ec_up_paper_bits(&pc->ups[t]);
    }
    ec_server_reduce(m, pc->ups, pc->n, down);
    acc->bits_down += down->bits;
    /* The workers apply this broadcast when the next STEP brings it; the
     * loop applies it here, so both replicas move together. */
    pc->last_down = down;
    pc->have_down = 1;
    pc->round++;
    return 0;
}

/*
 * A worker's resource limits, set in the child before it serves: address
 * space, CPU seconds (soft; the hard limit a few seconds later kills a
 * worker that ignores SIGXCPU), open files, and no core files (a core of
 * a worker is a copy of the user's data). NULL, or what failed.
 */
static const char *worker_limits(const ec_proc_opts *opts)
{
    struct rlimit rl;
    unsigned files = opts && opts->worker_max_files ? opts->worker_max_files
                                                    : EC_WORKER_MAX_FILES;

    if (opts && opts->worker_mem_limit) {
        rl.rlim_cur = rl.rlim_max = opts->worker_mem_limit;
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
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
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
        {
            int fd = 3;
            ec_chan ch = {&fd, sock_send, sock_recv};
            const char *why = worker_limits(opts);

            if (why) {
                uint8_t small[EC_WIRE_HEADER_SIZE + 256];
                char text[200];

                snprintf(text, sizeof text, "%s: %s", why, strerror(errno));
                _exit(worker_fail(&ch, small, sizeof small, 0, text));
            }
            code = ec_worker_serve(&ch, pc->pb, pc->prm, t);
        }
        _exit(code);
    }
    close(sv[1]);
    pc->peers[t].fd = sv[0];
    pc->peers[t].pid = pid;
    set_timeouts(sv[0], pc->timeout);
    return 0;
}

/* HELLO from every worker, in any order; WELCOME back. */
static int handshake(struct proc *pc, ec_summary *sum)
{
    for (uint32_t t = 0; t < pc->n; t++) {
        ec_wire_header h;
        ec_err e = {0};
        uint32_t worker, pid, d;
        long len;
        int r = read_frame(pc->peers[t].fd, pc->recvbuf, pc->max_payload, &h, &e);

        if (r == 0 || r == EC_EPEER || r == EC_ETIMEOUT) {
            describe_death(pc, t, r == EC_ETIMEOUT ? "did not say hello in time" :
                           "closed its connection", sum);
            return -1;
        }
        if (r < 0 || h.type != EC_WIRE_HELLO ||
            ec_wire_decode_hello(pc->recvbuf + EC_WIRE_HEADER_SIZE, h.length,
                                 &worker, &pid, &d, &e) < 0 ||
            worker != t || d != pc->pb->d) {
            if (r == 1 && h.type == EC_WIRE_ERROR)
                unexpected_frame(pc, t, &h, sum);
            else {
                sum->stop = EC_STOP_FAILED;
                snprintf(sum->reason, sizeof sum->reason,
                         "worker %u: bad handshake", t);
            }
            return -1;
        }
        len = ec_wire_encode_welcome(pc->sendbuf, pc->bufcap, pc->n, pc->pb->d);
        if (len < 0 || send_all(pc->peers[t].fd, pc->sendbuf, (size_t)len) < 0) {
            describe_death(pc, t, "cannot be written to", sum);
            return -1;
        }
    }
    return 0;
}

/* STOP to everyone still there, then make sure all are gone and reaped. */
static void shutdown_workers(struct proc *pc, int polite)
{
    long len = ec_wire_encode_stop(pc->sendbuf, pc->bufcap, pc->round);

    for (uint32_t t = 0; t < pc->n; t++) {
        struct peer *p = &pc->peers[t];
        if (p->pid <= 0)
            continue;
        if (polite && len > 0)
            send_all(p->fd, pc->sendbuf, (size_t)len);
        else
            kill(p->pid, SIGKILL);
    }
    for (uint32_t t = 0; t < pc->n; t++) {
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

int ec_run_process(const ec_problem *pb, const ec_params *prm,
                   const ec_job *job, const ec_proc_opts *opts,
                   ec_metric_fn fn, void *ctx, ec_summary *sum, ec_err *e)
{
    uint32_t n = pb->n, d = pb->d;
    struct proc pc = {0};
    ec_backend be = {&pc, proc_exchange};
    int rc = 0, started = 0;

    memset(sum, 0, sizeof *sum);
    pc.pb = pb;
    pc.prm = prm;
    pc.n = n;
    pc.timeout = opts && opts->round_timeout > 0 ? opts->round_timeout : 60.0;
    pc.cpu_limit = opts ? opts->worker_cpu_limit : 0;
    pc.max_payload = ec_wire_max_payload(d);
    pc.bufcap = EC_WIRE_HEADER_SIZE + pc.max_payload;
    pc.peers = calloc(n, sizeof *pc.peers);
    pc.ups = calloc(n, sizeof *pc.ups);
    pc.sendbuf = malloc(pc.bufcap);
    pc.recvbuf = malloc(pc.bufcap);
    if (!pc.peers || !pc.ups || !pc.sendbuf || !pc.recvbuf) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", n);
        goto out;
    }
    for (uint32_t t = 0; t < n; t++) {
        pc.peers[t].fd = -1;
        if (ec_up_init(&pc.ups[t], d) < 0) {
            rc = ec_err_set(e, EC_ENOMEM, "out of memory for messages");
            goto out;
        }
    }
    for (uint32_t t = 0; t < n; t++, started++) {
        if ((rc = spawn(&pc, t, opts, e)) < 0)
            goto out;
    }
    if (handshake(&pc, sum) < 0) {
        rc = 0;
        sum->rounds = 0;
        goto out;
    }
    rc = ec_run_loop(pb, prm, job, &be, fn, ctx, sum, e);
out:
    if (pc.peers)
        shutdown_workers(&pc, rc == 0 && sum->stop != EC_STOP_FAILED &&
                                  sum->stop != EC_STOP_CANCELLED);
    for (uint32_t t = 0; t < n && pc.peers; t++)
        sum->workers_maxrss += (uint64_t)pc.peers[t].maxrss_kb * 1024;
    for (uint32_t t = 0; t < n && pc.ups; t++)
        ec_up_clear(&pc.ups[t]);
    free(pc.ups);
    free(pc.peers);
    free(pc.sendbuf);
    free(pc.recvbuf);
    (void)started;
    return rc;
}
