/*
 * Private to service/lib/http/: the server's structures, limits and the
 * helpers its files lend each other (prefixed http__). http.h is the
 * contract; nothing outside this folder includes this header.
 *
 * HTTP plumbing over libmicrohttpd (MHD): routing, bounded bodies (or
 * bodies streamed to a route's sink), query parsing, problem+json errors,
 * long-poll and SSE, counters and the access log. MHD runs a pool of epoll
 * threads; waiting replies are parked with MHD_suspend_connection so that
 * they hold no thread, and a timer thread of ours wakes them for timeouts
 * and keep-alives, and notices streaming clients that left.
 */
#ifndef ECOPT_HTTP_INT_H
#define ECOPT_HTTP_INT_H
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "ecopt/error.h"

#define DEFAULT_HOST "127.0.0.1"
/* HTTP threads when none are asked for: one a CPU the server may run on,
   at most this many (start.c, default_threads). */
#define DEFAULT_THREADS_MAX 4
#define DEFAULT_MAX_CONNECTIONS 1000
/* Connections accepted beyond max_connections, so that a new one finds a
   slot while the served ones are full: each sheds the stalest connection
   still waiting for its headers (conns.c). */
#define CONN_RESERVE 64
#define DEFAULT_CONN_TIMEOUT_S 30
#define DEFAULT_HEADER_TIMEOUT_S 20
#define DEFAULT_BODY_TIMEOUT_S 60
#define DEFAULT_UPLOAD_TIMEOUT_S 3600
#define DEFAULT_MAX_BODY ((size_t)1 << 20)

#define REQUEST_ID_MAX 64
#define TOKEN_MAX 512
#define HEADER_VALUE_MAX 4096
/* Our own limits on the request line and headers, well inside MHD's
 * per-connection pool (MHD_POOL), so that what outgrows them gets an
 * answer of ours that names the limit; only what outgrows the pool too
 * gets MHD's own bare 414 or 431. URL_MAX leaves room for a path and a
 * query of HTTP_QUERY_MAX_LEN, whose own 400 says more. The pool is 32
 * KiB, the largest libmicrohttpd takes from malloc: above it each new
 * connection maps a fresh pool and unmaps it on close, which cost 1.3 ms
 * of the server's CPU a one-off request against 0.5 ms at 32 KiB
 * (bench/results/service.md), and a keep-alive connection's pool is
 * zeroed after every request, half as much at 32 KiB. */
#define URL_MAX 10240
#define HEADERS_MAX 12288
#define MHD_POOL ((size_t)32 << 10)
#define CONTENT_TYPE_MAX 128
#define PARAM_NAME_MAX 32
#define PATTERN_MAX 256
#define STREAM_BLOCK 4096
#define STOP_DRAIN_MS 2000          /* for last replies to go out at stop */
#define PEER_CHECK_MS 250           /* how often streamed bodies' clients
                                       are checked for having left */
/*
 * A body we will not use (its request already has its answer, often 413)
 * is read and dropped rather than left in the socket, up to this many
 * bytes; past them the connection is closed instead. See early_reply.
 */
#define DISCARD_MAX ((size_t)16 << 20)
#define KEEPALIVE_COMMENT ": keep-alive\n\n"

/*
 * Compact, and doubles printed with 17 significant digits so that they
 * read back exactly. ENCODE_ANY lets a handler answer a bare number.
 */
#define JSON_DUMP_FLAGS \
    (JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17))

/*
 * The statuses this service speaks: the reason phrase is a problem's
 * default title, and each has its own request counter.
 */
#define HTTP_STATUSES(X)                                               \
    X(200, "OK")                                                       \
    X(201, "Created")                                                  \
    X(202, "Accepted")                                                 \
    X(204, "No Content")                                               \
    X(301, "Moved Permanently")                                        \
    X(302, "Found")                                                    \
    X(303, "See Other")                                                \
    X(304, "Not Modified")                                             \
    X(307, "Temporary Redirect")                                       \
    X(400, "Bad Request")                                              \
    X(401, "Unauthorized")                                             \
    X(403, "Forbidden")                                                \
    X(404, "Not Found")                                                \
    X(405, "Method Not Allowed")                                       \
    X(406, "Not Acceptable")                                           \
    X(408, "Request Timeout")                                          \
    X(409, "Conflict")                                                 \
    X(410, "Gone")                                                     \
    X(412, "Precondition Failed")                                      \
    X(413, "Content Too Large")                                        \
    X(414, "URI Too Long")                                             \
    X(415, "Unsupported Media Type")                                   \
    X(422, "Unprocessable Content")                                    \
    X(428, "Precondition Required")                                    \
    X(429, "Too Many Requests")                                        \
    X(431, "Request Header Fields Too Large")                          \
    X(500, "Internal Server Error")                                    \
    X(501, "Not Implemented")                                          \
    X(502, "Bad Gateway")                                              \
    X(503, "Service Unavailable")                                      \
    X(504, "Gateway Timeout")                                          \
    X(507, "Insufficient Storage")

#define HTTP__STATUS_ONE(code, phrase) +1
#define NSTATUS (0 HTTP_STATUSES(HTTP__STATUS_ONE))

/* The statuses and their phrases, in HTTP_STATUSES's order (parse.c). */
struct http__status {
    int code;
    const char *phrase;
};
extern const struct http__status http__status_table[NSTATUS];

/* How many latency histogram bounds there are (counters.c's bucket_le). */
#define NBUCKETS 13

/* ------------------------------------------------------------------ */
/* Types                                                                */

struct route {
    char *method;
    char *pattern;
    http_handler_fn handler;
    unsigned flags;
};

/* Relaxed atomics: counters only need to add up, not to order anything. */
struct route_stats {
    atomic_ullong by_status[NSTATUS + 1];   /* last: any other status */
    atomic_ullong bucket[NBUCKETS + 1];     /* last: +Inf */
    atomic_ullong sum_us;
};

struct http__conn;                      /* conns.c */

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd;
    unsigned port;
    unsigned threads;                       /* MHD's pool, as started */
    size_t max_body;
    int quiet;
    void *app;
    struct route *routes;
    size_t nroutes;
    struct route_stats *stats;              /* nroutes + 1: last unmatched */
    atomic_ullong next_id;
    unsigned id_salt;

    /*
     * lock guards the lists of parked replies and streams, stopping and
     * the timer thread's wake-ups. Lock order: srv->lock, then an object's
     * mu, then MHD's own locks (inside MHD_suspend/resume_connection).
     */
    pthread_mutex_t lock;
    pthread_cond_t tick;                    /* the timer has work */
    uint64_t timer_next_ns;                 /* when the timer will look
                                               again of its own accord */
    pthread_cond_t drained;                 /* a list got shorter */
    pthread_t timer;
    int timer_running;
    int timer_quit;
    int stopping;
    struct http_deferred *deferreds;
    struct http_stream *streams;
    struct http_exchange *sinks;            /* bodies being streamed */

    /* Every open connection (conns.c), under conn_lock, which is taken
       after lock and never before it. */
    pthread_mutex_t conn_lock;
    struct http__conn *conns;
    uint64_t header_timeout_ns, body_timeout_ns, upload_timeout_ns;
    unsigned max_per_address;               /* 0: no cap */
    unsigned max_connections;               /* served at once; past it a
                                               new one sheds the stalest
                                               waiting for headers */
    size_t nconns_live;                     /* tracked, not yet shut down */
    atomic_ullong dropped_slow;             /* shut down past a deadline */
    atomic_ullong refused_per_address;      /* over the per-address cap */
    atomic_ullong shed_for_room;            /* shut for a newer connection */
    http_handler_fn admit;                  /* http_config's, or NULL */
};

enum resp_kind { RESP_NONE, RESP_BUFFER, RESP_STREAM };

struct resp_header {
    char *name;
    char *value;
};

struct http_resp {
    struct http_exchange *x;
    enum resp_kind kind;
    int status;
    char *body;
    size_t len;
    int body_static;                        /* body is a string literal */
    char content_type[CONTENT_TYPE_MAX];
    size_t nheaders;
    struct resp_header headers[HTTP_MAX_RESP_HEADERS];
    struct http_stream *stream;             /* not yet handed to MHD */
};

enum phase {
    PH_NEW,         /* headers not yet seen by us */
    PH_BODY,        /* receiving the body */
    PH_HANDLER,     /* the handler runs */
    PH_DEFERRED,    /* parked until a fill or the timeout */
    PH_REPLIED      /* a response is queued */
};

struct http_exchange {
    struct http_server *srv;
    struct MHD_Connection *conn;
    enum phase phase;
    uint64_t t0_ns;
    char method[17];                        /* as received, for the log */
    char *uri;                              /* raw, as received */
    char *path;                             /* uri before '?' */
    char *param_buf;
    struct http_kv params[HTTP_MAX_PATH_PARAMS];
    struct http_query query;
    int route;                              /* -1: none matched */
    char *body;
    size_t body_len;
    size_t body_cap;
    int discard;                            /* rs is final; drop the body */
    size_t discarded;
    char request_id[REQUEST_ID_MAX + 1];
    char client[INET6_ADDRSTRLEN];
    char token[TOKEN_MAX + 1];
    struct http_req rq;
    struct http_resp rs;
    struct http_deferred *deferred;
    /* A streamed body (HTTP_STREAM_BODY): what the handler accepted it with. */
    int at_headers;                         /* the handler runs on headers */
    int sink_on;                            /* end or abort is still owed */
    int sink_failed;                        /* write refused: drop the rest */
    struct http_body_ops sink;
    void *sink_ctx;
    size_t sink_limit, sink_len;
    char sink_limit_name[48];
    struct http_exchange *sink_prev, *sink_next;    /* srv->sinks */
    int sink_linked;
    int sink_fd;                            /* the connection's socket */
    uint64_t sink_hup_ns;                   /* when the timer saw the client
                                               gone; srv->lock */
    int status;                             /* 0 until a response is queued */
    size_t bytes;
    int handler_rc;
};

enum dstate { D_PENDING, D_FILLING, D_DONE };

struct http_deferred {
    pthread_mutex_t mu;
    pthread_cond_t done;                    /* state left D_FILLING */
    int refs;                               /* the app's and the request's */
    enum dstate state;
    int suspended;                          /* we parked the connection */
    struct http_exchange *x;                /* NULL once the request ended */
    uint64_t deadline_ns;
    http_fill_fn on_timeout;
    void *arg;
    struct http_deferred *prev, *next;      /* srv->deferreds, srv->lock */
    struct http_deferred *claimed_next;     /* a timer or stop batch */
};

struct http_stream {
    pthread_mutex_t mu;
    int refs;                               /* the app's and the response's */
    int suspended;
    int woken;
    int stopping;
    int over;                               /* on_close has been called */
    struct MHD_Connection *conn;
    struct http_server *srv;
    uint64_t deadline_ns;                   /* keep-alive, while suspended */
    unsigned keepalive_ms;
    http_stream_fn produce;
    http_close_fn on_close;
    void *arg;
    struct http_stream *prev, *next;        /* srv->streams, srv->lock */

    /* Only the thread running the content reader touches these. */
    struct http_exchange *x;
    char *out;
    size_t out_off, out_len, out_cap;
    int ended;
    int in_produce;
    uint64_t last_send_ns;
};

/* ------------------------------------------------------------------ */
/* Helpers shared by the files of the module                            */

/* parse.c */
uint64_t http__mono_ns(void);
struct timespec http__ns_to_timespec(uint64_t ns);
void http__fmt(char *buf, size_t len, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
json_t *http__json_text(const char *s);
void http__quote(char *dst, size_t dstlen, const char *s, size_t n,
                 size_t max);
int http__is_token_char(unsigned char c);
int http__is_id_char(unsigned char c);
size_t http__status_slot(int status);
int http__param_valid(const char *s, size_t n);
int http__segment_is_param(const char *p, size_t n);
void http__parse_bearer(const char *auth, char *out, size_t outlen);
int http__json_content_type(const char *ct);

/* reply.c */
void http__resp_clear_body(struct http_resp *rs);
void http__resp_free(struct http_resp *rs);
void http__reply_oom(struct http_resp *rs);
int http__status_valid(int status);
int http__problem(struct http_resp *rs, int status, json_t *extra,
                  const char *f, ...) __attribute__((format(printf, 4, 5)));
int http__ctype_valid(const char *ctype);

/* stream.c */
int http__d_claim_locked(struct http_deferred *d);
void http__d_fill_batch(struct http_deferred *batch, int stopping);
void http__d_detach(struct http_server *srv, struct http_deferred *d);
void http__resp_drop_stream(struct http_resp *rs);
ssize_t http__stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void http__stream_free(void *cls);
void http__sink_unlink(struct http_exchange *x);
void http__sink_check_peer(struct http_exchange *x, uint64_t now);
void http__sink_abort(struct http_exchange *x);
int http__body_append(struct http_exchange *x, const char *data, size_t n);

/* server.c: libmicrohttpd's callbacks, which start.c gives it. */
void *http__on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
enum MHD_Result http__on_request(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls);
void http__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                        enum MHD_RequestTerminationCode toe);
void http__mhd_log(void *cls, const char *f, va_list ap);

/* conns.c: which deadline a connection is under from now on. */
enum { HTTP__DL_NONE, HTTP__DL_HEADERS, HTTP__DL_BODY, HTTP__DL_UPLOAD };
void http__conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);
void http__conn_deadline(struct http_exchange *x, unsigned which);
/* Shuts down the connections past their deadline; the next deadline of
   those left, or UINT64_MAX. */
uint64_t http__conns_expire(struct http_server *srv, uint64_t now);

/* counters.c */
void http__record(struct http_server *srv, struct http_exchange *x,
                  uint64_t ns);

#endif
