/*
 * The HTTP server's life: the configuration checked, the listener opened,
 * libmicrohttpd started with server.c's callbacks, the timer thread
 * (deadlines of deferred replies and streams, clients gone mid-upload,
 * connection deadlines), and the stop.
 */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT */
#include "http_int.h"

#include <sched.h>

/*
 * libmicrohttpd's strictest reading of requests. 0.9.75 (Debian 12) has
 * MHD_OPTION_STRICT_FOR_CLIENT, where 1 is its strictest level (-1 checks
 * only for whitespace before a header's colon, which framing_refused
 * checks at any level); 1.0 replaced it with
 * MHD_OPTION_CLIENT_DISCIPLINE_LVL, strictest at 3.
 */
#if MHD_VERSION >= 0x01000000
#define STRICTNESS_OPTION MHD_OPTION_CLIENT_DISCIPLINE_LVL
#define STRICTNESS_LEVEL 3
#else
#define STRICTNESS_OPTION MHD_OPTION_STRICT_FOR_CLIENT
#define STRICTNESS_LEVEL 1
#endif

/*
 * One HTTP thread a CPU this process may run on (its affinity mask, which
 * taskset and a container's cpuset set), at most DEFAULT_THREADS_MAX. Each
 * thread runs its own event loop over the connections it accepted, so a
 * thread beyond the CPUs only waits for one: while it is descheduled its
 * connections wait out the others' time slices (on one CPU, GET of a job at
 * 32 connections had p99 14.5 ms with 4 threads, 1.3 ms with 1;
 * bench/results/service.md).
 */
static unsigned default_threads(void)
{
    cpu_set_t set;
    int n;

    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return DEFAULT_THREADS_MAX;
    n = CPU_COUNT(&set);
    if (n < 1)
        return 1;
    return n < DEFAULT_THREADS_MAX ? (unsigned)n : DEFAULT_THREADS_MAX;
}

/* ------------------------------------------------------------------ */
/* The timer thread: timeouts, keep-alives, streaming clients gone     */

static void *timer_main(void *arg)
{
    struct http_server *srv = arg;

    pthread_mutex_lock(&srv->lock);
    while (!srv->timer_quit) {
        uint64_t now = http__mono_ns(), next = now + 60 * 1000000000ull;
        struct http_deferred *expired = NULL;
        struct timespec until;

        for (struct http_deferred *d = srv->deferreds; d; d = d->next) {
            if (d->deadline_ns <= now) {
                if (http__d_claim_locked(d)) {
                    d->claimed_next = expired;
                    expired = d;
                }
            } else if (d->deadline_ns < next) {
                next = d->deadline_ns;
            }
        }
        for (struct http_stream *st = srv->streams; st; st = st->next) {
            pthread_mutex_lock(&st->mu);
            if (st->suspended && st->deadline_ns <= now) {
                st->suspended = 0;
                MHD_resume_connection(st->conn);
            } else if (st->suspended && st->deadline_ns < next) {
                next = st->deadline_ns;
            }
            pthread_mutex_unlock(&st->mu);
        }
        for (struct http_exchange *x = srv->sinks; x; x = x->sink_next)
            http__sink_check_peer(x, now);
        /* Connection deadlines are of whole seconds: a look each second
           keeps them within one, whenever they were set. */
        http__conns_expire(srv, now);
        if (now + 1000000000ull < next)
            next = now + 1000000000ull;
        if (srv->sinks && now + PEER_CHECK_MS * 1000000ull < next)
            next = now + PEER_CHECK_MS * 1000000ull;
        if (expired) {
            /* Fill functions are the app's code: call them unlocked. */
            pthread_mutex_unlock(&srv->lock);
            http__d_fill_batch(expired, 0);
            pthread_mutex_lock(&srv->lock);
            continue;
        }
        until = http__ns_to_timespec(next);
        srv->timer_next_ns = next;
        pthread_cond_timedwait(&srv->tick, &srv->lock, &until);
        srv->timer_next_ns = 0;     /* looking now: everyone signals */
    }
    pthread_mutex_unlock(&srv->lock);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                       */

static int check_routes(const struct http_route *routes, size_t n, char *err,
                        size_t errlen)
{
    if (n > HTTP_MAX_ROUTES) {
        http__fmt(err, errlen, "%zu routes, more than the limit of %d", n,
                  HTTP_MAX_ROUTES);
        return EC_ELIMIT;
    }
    for (size_t i = 0; i < n; i++) {
        const struct http_route *r = &routes[i];
        const char *p = r->pattern;
        char names[HTTP_MAX_PATH_PARAMS][PARAM_NAME_MAX + 1];
        size_t nparams = 0, mlen = r->method ? strlen(r->method) : 0;

        if (!mlen || mlen > 16 ||
            strspn(r->method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != mlen) {
            http__fmt(err, errlen, "route %zu: the method must be 1..16 upper-case "
                      "letters", i);
            return EC_EINVAL;
        }
        if (!r->handler) {
            http__fmt(err, errlen, "route %zu (%s): no handler", i, r->method);
            return EC_EINVAL;
        }
        if (!p || p[0] != '/' || strlen(p) > PATTERN_MAX) {
            http__fmt(err, errlen, "route %zu: the pattern must start with '/' and "
                      "be at most %d bytes", i, PATTERN_MAX);
            return EC_EINVAL;
        }
        for (p++;; p++) {
            size_t len = strcspn(p, "/");

            if (http__segment_is_param(p, len)) {
                size_t nl = len - 2;

                if (nl > PARAM_NAME_MAX ||
                    strspn(p + 1, "abcdefghijklmnopqrstuvwxyz_") < nl ||
                    nparams == HTTP_MAX_PATH_PARAMS) {
                    http__fmt(err, errlen, "route %zu (%s): parameters are {name} "
                              "with name [a-z_]{1,%d}, at most %d of them", i,
                              r->pattern, PARAM_NAME_MAX, HTTP_MAX_PATH_PARAMS);
                    return EC_EINVAL;
                }
                memcpy(names[nparams], p + 1, nl);
                names[nparams][nl] = '\0';
                for (size_t k = 0; k < nparams; k++)
                    if (strcmp(names[k], names[nparams]) == 0) {
                        http__fmt(err, errlen, "route %zu (%s): parameter {%s} "
                                  "appears twice", i, r->pattern, names[k]);
                        return EC_EINVAL;
                    }
                nparams++;
            } else {
                for (size_t k = 0; k < len; k++)
                    if (!http__is_id_char((unsigned char)p[k]) && p[k] != '~') {
                        http__fmt(err, errlen, "route %zu (%s): a literal segment "
                                  "may hold only [A-Za-z0-9_.~-]", i, r->pattern);
                        return EC_EINVAL;
                    }
            }
            p += len;
            if (!*p)
                break;
        }
        for (size_t k = 0; k < i; k++)
            if (strcmp(routes[k].method, r->method) == 0 &&
                strcmp(routes[k].pattern, r->pattern) == 0) {
                http__fmt(err, errlen, "route %zu: %s %s is already route %zu", i,
                          r->method, r->pattern, k);
                return EC_EINVAL;
            }
    }
    return 0;
}

/* Our own listening socket, so that a bind failure can say why (MHD only
   says that it failed) and port 0 can be read back at once. */
static int open_listener(const char *host, unsigned port, int *ipv6,
                         unsigned *bound, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    socklen_t sl;
    int fd, one = 1;

    memset(&ss, 0, sizeof ss);
    if (strcmp(host, "localhost") == 0)
        host = DEFAULT_HOST;
    if (port > 65535) {
        http__fmt(err, errlen, "port %u is not in 0..65535", port);
        return -1;
    }
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        sl = sizeof *in4;
        *ipv6 = 0;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        sl = sizeof *in6;
        *ipv6 = 1;
    } else {
        http__fmt(err, errlen, "host \"%s\" is not a numeric IPv4 or IPv6 address",
                  host);
        return -1;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
        http__fmt(err, errlen, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Accepted sockets inherit it: a reply written in two parts must not
     * wait for the client's delayed ACK (40 ms on Linux) before its body. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 512) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        http__fmt(err, errlen, "cannot listen on %s port %u: %s", host, port,
                  strerror(errno));
        close(fd);
        return -1;
    }
    sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    *bound = ntohs(ss.ss_family == AF_INET ? in4->sin_port : in6->sin6_port);
    return fd;
}

/*
 * Each connection is a descriptor, and the database, the coordinators'
 * pipes and MHD's own need some more: the soft open-file limit (often
 * 1024) is raised toward the hard one so that the connection limit, not
 * EMFILE on accept, is what turns clients away. 0, or -1 with err set.
 */
static int raise_nofile(unsigned maxconn, char *err, size_t errlen)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)maxconn + 256;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= want)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want) {
        http__fmt(err, errlen, "%u connections need %llu open files, and the hard "
                  "limit is %llu: lower the connection limit or raise ulimit -Hn",
                  maxconn, (unsigned long long)want, (unsigned long long)rl.rlim_max);
        return -1;
    }
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        http__fmt(err, errlen, "cannot raise the open-file limit to %llu: %s",
                  (unsigned long long)want, strerror(errno));
        return -1;
    }
    return 0;
}

static void free_server(struct http_server *srv)
{
    for (size_t i = 0; i < srv->nroutes; i++) {
        free(srv->routes[i].method);
        free(srv->routes[i].pattern);
    }
    free(srv->routes);
    free(srv->stats);
    pthread_mutex_destroy(&srv->lock);
    pthread_mutex_destroy(&srv->conn_lock);
    pthread_cond_destroy(&srv->tick);
    pthread_cond_destroy(&srv->drained);
    free(srv);
}

struct http_server *http_start(const struct http_config *cfg,
                               const struct http_route *routes,
                               size_t nroutes, void *app, char *err,
                               size_t errlen)
{
    static const struct http_config defaults = {0};
    struct http_server *srv;
    pthread_condattr_t ca;
    unsigned threads, maxconn, timeout;
    int ipv6 = 0;
    char dummy[8];

    if (!err || !errlen)
        err = dummy, errlen = sizeof dummy;
    cfg = cfg ? cfg : &defaults;
    if (check_routes(routes, nroutes, err, errlen) < 0)
        return NULL;
    if (!(srv = calloc(1, sizeof *srv))) {
        http__fmt(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&srv->lock, NULL);
    pthread_mutex_init(&srv->conn_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->tick, &ca);
    pthread_cond_init(&srv->drained, &ca);
    pthread_condattr_destroy(&ca);
    srv->listen_fd = -1;
    srv->app = app;
    srv->quiet = cfg->access_log_off;
    srv->max_body = cfg->max_body ? cfg->max_body : DEFAULT_MAX_BODY;
    srv->header_timeout_ns = (cfg->header_timeout_s ? cfg->header_timeout_s
                                                    : DEFAULT_HEADER_TIMEOUT_S) * 1000000000ull;
    srv->body_timeout_ns = (cfg->body_timeout_s ? cfg->body_timeout_s
                                                : DEFAULT_BODY_TIMEOUT_S) * 1000000000ull;
    srv->upload_timeout_ns = (cfg->upload_timeout_s ? cfg->upload_timeout_s
                                                    : DEFAULT_UPLOAD_TIMEOUT_S) * 1000000000ull;
    srv->max_per_address = cfg->max_per_address;
    srv->admit = cfg->admit;
    srv->id_salt = (unsigned)(http__mono_ns() ^ ((uint64_t)getpid() << 16));
    srv->routes = calloc(nroutes ? nroutes : 1, sizeof *srv->routes);
    srv->stats = calloc(nroutes + 1, sizeof *srv->stats);
    if (!srv->routes || !srv->stats)
        goto oom;
    for (size_t i = 0; i < nroutes; i++, srv->nroutes++) {
        srv->routes[i].method = strdup(routes[i].method);
        srv->routes[i].pattern = strdup(routes[i].pattern);
        srv->routes[i].handler = routes[i].handler;
        srv->routes[i].flags = routes[i].flags;
        if (!srv->routes[i].method || !srv->routes[i].pattern) {
            srv->nroutes++;
            goto oom;
        }
    }
    srv->listen_fd = open_listener(cfg->host ? cfg->host : DEFAULT_HOST,
                                   cfg->port, &ipv6, &srv->port, err, errlen);
    if (srv->listen_fd < 0)
        goto fail;
    if (pthread_create(&srv->timer, NULL, timer_main, srv) != 0) {
        http__fmt(err, errlen, "cannot start the timer thread");
        goto fail;
    }
    srv->timer_running = 1;
    threads = cfg->threads ? cfg->threads : default_threads();
    srv->threads = threads;
    maxconn = cfg->max_connections ? cfg->max_connections
                                   : DEFAULT_MAX_CONNECTIONS;
    timeout = cfg->conn_timeout_s ? cfg->conn_timeout_s
                                  : DEFAULT_CONN_TIMEOUT_S;
    srv->max_connections = maxconn;
    if (raise_nofile(maxconn + CONN_RESERVE, err, errlen) < 0)
        goto fail;
    /*
     * A pool of epoll threads; suspend/resume needs MHD's wake-up pipe.
     * MHD answers a few errors itself, before any callback of ours and so
     * not as problem+json: 431 and 414 when the request line and headers
     * outgrow its per-connection pool (MHD_POOL; URL_MAX and HEADERS_MAX
     * answer long ones below that), 505 for an unknown HTTP version; a
     * request line it cannot parse just closes the connection. At its
     * strictest (STRICTNESS_LEVEL) it also answers 400 to an HTTP/1.1
     * request without Host and closes a connection whose request line has
     * a space in the URL; framing_refused does the rest.
     */
    srv->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, http__on_request, srv,
        MHD_OPTION_EXTERNAL_LOGGER, http__mhd_log, srv,
        MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, threads > 1 ? threads : 0,  /* 1: no pool */
        MHD_OPTION_CONNECTION_LIMIT, maxconn + CONN_RESERVE,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, MHD_POOL,
        MHD_OPTION_URI_LOG_CALLBACK, http__on_uri, srv,
        STRICTNESS_OPTION, STRICTNESS_LEVEL,
        MHD_OPTION_NOTIFY_COMPLETED, http__on_completed, srv,
        MHD_OPTION_NOTIFY_CONNECTION, http__conn_notify, srv,
        MHD_OPTION_END);
    if (!srv->daemon) {
        http__fmt(err, errlen, "libmicrohttpd did not start (%u threads, %u "
                  "connections)", threads, maxconn);
        goto fail;
    }
    return srv;
oom:
    http__fmt(err, errlen, "out of memory");
fail:
    if (srv->timer_running) {
        pthread_mutex_lock(&srv->lock);
        srv->timer_quit = 1;
        pthread_cond_signal(&srv->tick);
        pthread_mutex_unlock(&srv->lock);
        pthread_join(srv->timer, NULL);
    }
    if (srv->listen_fd >= 0)
        close(srv->listen_fd);
    free_server(srv);
    return NULL;
}

unsigned http_port(const struct http_server *srv)
{
    return srv ? srv->port : 0;
}

unsigned http_threads(const struct http_server *srv)
{
    return srv ? srv->threads : 0;
}

void http_stop(struct http_server *srv)
{
    struct http_deferred *batch = NULL;
    struct timespec until;

    if (!srv)
        return;
    /*
     * MHD_quiesce_daemon is not used to stop accepting first: with a pool
     * of epoll threads (0.9.75) it races the workers removing the listening
     * socket from their epoll sets, and the loser's MHD_PANIC aborts the
     * process. Connections accepted during the short drain below are
     * served, except that nothing can park or stream any more.
     *
     * MHD must not be stopped with a connection suspended, so every parked
     * reply is answered (503) and every stream ended first; stopping
     * keeps new ones from parking meanwhile.
     */
    pthread_mutex_lock(&srv->lock);
    srv->stopping = 1;
    for (struct http_deferred *d = srv->deferreds; d; d = d->next)
        if (http__d_claim_locked(d)) {
            d->claimed_next = batch;
            batch = d;
        }
    for (struct http_stream *st = srv->streams; st; st = st->next) {
        pthread_mutex_lock(&st->mu);
        st->stopping = 1;
        if (st->suspended) {
            st->suspended = 0;
            MHD_resume_connection(st->conn);
        }
        pthread_mutex_unlock(&st->mu);
    }
    pthread_mutex_unlock(&srv->lock);
    http__d_fill_batch(batch, 1);
    /* A fill the app started before we came must finish and resume. */
    pthread_mutex_lock(&srv->lock);
    for (struct http_deferred *d = srv->deferreds; d; d = d->next) {
        pthread_mutex_lock(&d->mu);
        while (d->state == D_FILLING)
            pthread_cond_wait(&d->done, &d->mu);
        pthread_mutex_unlock(&d->mu);
    }
    /*
     * MHD_stop_daemon closes connections at once, even one just resumed
     * whose last reply is not yet written; give those replies a moment to
     * go out. Each request leaves its list when it is over.
     */
    until = http__ns_to_timespec(http__mono_ns() + STOP_DRAIN_MS * 1000000ull);
    while ((srv->deferreds || srv->streams) &&
           pthread_cond_timedwait(&srv->drained, &srv->lock, &until) == 0)
        ;
    pthread_mutex_unlock(&srv->lock);

    MHD_stop_daemon(srv->daemon);   /* closes the listening socket too */

    pthread_mutex_lock(&srv->lock);
    srv->timer_quit = 1;
    pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
    pthread_join(srv->timer, NULL);
    free_server(srv);
}
