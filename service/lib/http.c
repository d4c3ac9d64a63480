/*
 * HTTP plumbing over libmicrohttpd (MHD): routing, bounded bodies (or
 * bodies streamed to a route's sink), query parsing, problem+json errors,
 * long-poll and SSE, counters and the access log. MHD runs a pool of epoll
 * threads; waiting replies are parked with MHD_suspend_connection so that
 * they hold no thread, and a timer thread of ours wakes them for timeouts
 * and keep-alives, and notices streaming clients that left.
 */
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
#define DEFAULT_THREADS 4
#define DEFAULT_MAX_CONNECTIONS 1000
#define DEFAULT_CONN_TIMEOUT_S 30
#define DEFAULT_MAX_BODY ((size_t)1 << 20)

#define REQUEST_ID_MAX 64
#define TOKEN_MAX 512
#define HEADER_VALUE_MAX 4096
/* Our own limits on the request line and headers, well inside MHD's
 * per-connection pool (MHD_POOL), so that what outgrows them gets an
 * answer of ours that names the limit; only what outgrows the pool too
 * gets MHD's own bare 414 or 431. URL_MAX leaves room for a path and a
 * query of HTTP_QUERY_MAX_LEN, whose own 400 says more. */
#define URL_MAX 16384
#define HEADERS_MAX 16384
#define MHD_POOL ((size_t)64 << 10)
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
    X(504, "Gateway Timeout")

static const struct {
    int code;
    const char *phrase;
} status_table[] = {
#define STATUS_ROW(code, phrase) {code, phrase},
    HTTP_STATUSES(STATUS_ROW)
#undef STATUS_ROW
};

#define NSTATUS (sizeof status_table / sizeof status_table[0])

/* Latency histogram bounds in seconds; one more bucket holds +Inf. */
static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                   0.1,   0.25,   0.5,   1,    2.5,   5,
                                   10};

#define NBUCKETS (sizeof bucket_le / sizeof bucket_le[0])

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

struct http_server {
    struct MHD_Daemon *daemon;
    int listen_fd;
    unsigned port;
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
/* Small helpers                                                        */

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct timespec ns_to_timespec(uint64_t ns)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

static void fmt(char *buf, size_t len, const char *f, ...)
    __attribute__((format(printf, 3, 4)));

static void fmt(char *buf, size_t len, const char *f, ...)
{
    va_list ap;

    va_start(ap, f);
    vsnprintf(buf, len, f, ap);
    va_end(ap);
}

/* Length of the valid UTF-8 sequence at s, or 0 (overlongs, surrogates
   and code points above U+10FFFF are invalid). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned c = s[0], cp, min;
    size_t len;

    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

static int utf8_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;

    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_seq(p + i, n - i)))
            return 0;
    return 1;
}

/* A JSON string of s with each invalid byte replaced by U+FFFD, because a
   detail may quote whatever a client sent. */
static json_t *json_text(const char *s)
{
    size_t n = strlen(s), o = 0;
    const unsigned char *p = (const unsigned char *)s;
    char *clean;
    json_t *j;

    if (utf8_valid(s, n))
        return json_string(s);
    if (!(clean = malloc(3 * n + 1)))
        return NULL;
    for (size_t i = 0, k; i < n; i += k) {
        if ((k = utf8_seq(p + i, n - i))) {
            memcpy(clean + o, s + i, k);
            o += k;
        } else {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            k = 1;
        }
    }
    clean[o] = '\0';
    j = json_string(clean);
    free(clean);
    return j;
}

/* Quotes up to max bytes of s for a message or a log line: printable ASCII
   as is, the rest (and '"', '\\') as \xHH, "..." when cut. */
static void quote(char *dst, size_t dstlen, const char *s, size_t n,
                  size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];

        if (o + 8 >= dstlen)
            break;
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            dst[o++] = (char)c;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    if (n > max && o + 4 < dstlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

static int is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *http_status_phrase(int status)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (status_table[i].code == status)
            return status_table[i].phrase;
    return "Unknown";
}

static size_t status_slot(int status)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (status_table[i].code == status)
            return i;
    return NSTATUS;
}

/* ------------------------------------------------------------------ */
/* Query strings and paths: pure parsers                                */

/*
 * Decodes n bytes of one name or value into dst. Returns the decoded
 * length, or -1 at a malformed escape (its offset in *bad), -2 past max.
 */
static long pct_decode(const char *src, size_t n, char *dst, size_t max,
                       size_t *bad)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];

        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 1 < n ? hexval((unsigned char)src[i + 1]) : -1;
            int lo = i + 2 < n ? hexval((unsigned char)src[i + 2]) : -1;

            if (hi < 0 || lo < 0) {
                *bad = i;
                return -1;
            }
            c = hi << 4 | lo;
            i += 2;
        }
        if (o == max)
            return -2;
        dst[o++] = (char)c;
    }
    return (long)o;
}

static int query_fail(struct http_parse_error *err, int code,
                      const char *param, const char *f, ...)
    __attribute__((format(printf, 4, 5)));

static int query_fail(struct http_parse_error *err, int code,
                      const char *param, const char *f, ...)
{
    va_list ap;

    if (err) {
        fmt(err->param, sizeof err->param, "%s", param ? param : "");
        va_start(ap, f);
        vsnprintf(err->detail, sizeof err->detail, f, ap);
        va_end(ap);
    }
    return code;
}

/* The escape at raw+at, quoted for a message: "%zz", "%4", "%". */
static void escape_text(char *buf, size_t len, const char *raw, size_t n,
                        size_t at)
{
    size_t k = n - at < 3 ? n - at : 3;

    quote(buf, len, raw + at, k, 3);
}

static int decode_part(const char *raw, size_t n, char **out, size_t max,
                       const char *key, struct http_parse_error *err)
{
    char esc[32];
    size_t bad = 0;
    long got = pct_decode(raw, n, *out, max, &bad);

    if (got == -1) {
        escape_text(esc, sizeof esc, raw, n, bad);
        if (key)
            return query_fail(err, EC_EPARSE, key,
                              "query parameter '%s' has a malformed "
                              "percent-escape \"%s\" (want %%XX, X a hex "
                              "digit)", key, esc);
        return query_fail(err, EC_EPARSE, NULL,
                          "a query parameter name has a malformed "
                          "percent-escape \"%s\" (want %%XX, X a hex digit)",
                          esc);
    }
    if (got == -2) {
        if (key)
            return query_fail(err, EC_ELIMIT, key,
                              "query parameter '%s' is longer than the limit "
                              "of %d bytes", key, HTTP_QUERY_MAX_VALUE);
        return query_fail(err, EC_ELIMIT, NULL,
                          "a query parameter name is longer than the limit "
                          "of %d bytes", HTTP_QUERY_MAX_KEY);
    }
    if (memchr(*out, '\0', (size_t)got))
        return key ? query_fail(err, EC_EPARSE, key,
                                "query parameter '%s' contains a NUL byte "
                                "(%%00)", key)
                   : query_fail(err, EC_EPARSE, NULL,
                                "a query parameter name contains a NUL byte "
                                "(%%00)");
    if (!utf8_valid(*out, (size_t)got))
        return key ? query_fail(err, EC_EPARSE, key,
                                "query parameter '%s' is not valid UTF-8",
                                key)
                   : query_fail(err, EC_EPARSE, NULL,
                                "a query parameter name is not valid UTF-8");
    (*out)[got] = '\0';
    *out += got + 1;
    return 0;
}

int http_query_parse(const char *raw, size_t len, struct http_query *q,
                     struct http_parse_error *err)
{
    char *out;
    int rc;

    memset(q, 0, sizeof *q);
    if (err)
        err->param[0] = err->detail[0] = '\0';
    if (len > HTTP_QUERY_MAX_LEN)
        return query_fail(err, EC_ELIMIT, NULL,
                          "the query string is %zu bytes, longer than the "
                          "limit of %d", len, HTTP_QUERY_MAX_LEN);
    if (len == 0)
        return 0;
    /* Decoding never lengthens, and each pair gains at most one NUL. */
    if (!(q->storage = malloc(len + 2)))
        return query_fail(err, EC_ENOMEM, NULL, "out of memory");
    out = q->storage;
    for (size_t i = 0, j; i < len; i = j + 1) {
        const char *eq;
        size_t kend;
        char *key;

        for (j = i; j < len && raw[j] != '&'; j++)
            ;
        if (j == i)
            continue;           /* "a=1&&b=2": an empty pair means nothing */
        eq = memchr(raw + i, '=', j - i);
        kend = eq ? (size_t)(eq - raw) : j;
        if (kend == i) {
            rc = query_fail(err, EC_EPARSE, NULL,
                            "a query parameter has an empty name (at byte "
                            "%zu of the query)", i);
            goto fail;
        }
        if (q->count == HTTP_QUERY_MAX_PARAMS) {
            rc = query_fail(err, EC_ELIMIT, NULL,
                            "the query has more than the limit of %d "
                            "parameters", HTTP_QUERY_MAX_PARAMS);
            goto fail;
        }
        key = out;
        if ((rc = decode_part(raw + i, kend - i, &out, HTTP_QUERY_MAX_KEY,
                              NULL, err)) < 0)
            goto fail;
        q->item[q->count].key = key;
        if (eq) {
            q->item[q->count].value = out;
            if ((rc = decode_part(eq + 1, j - kend - 1, &out,
                                  HTTP_QUERY_MAX_VALUE, key, err)) < 0)
                goto fail;
        } else {
            q->item[q->count].value = "";
        }
        q->count++;
    }
    return 0;
fail:
    http_query_free(q);
    return rc;
}

void http_query_free(struct http_query *q)
{
    free(q->storage);
    memset(q, 0, sizeof *q);
}

static int param_valid(const char *s, size_t n)
{
    if (n == 0 || n > HTTP_PARAM_MAX)
        return 0;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_id_char((unsigned char)s[i]))
            return 0;
    return 1;
}

static int segment_is_param(const char *p, size_t n)
{
    return n >= 3 && p[0] == '{' && p[n - 1] == '}';
}

int http_path_match(const char *pattern, const char *path,
                    struct http_kv params[HTTP_MAX_PATH_PARAMS],
                    size_t *nparams, char *buf, struct http_parse_error *err)
{
    const char *p = pattern, *s = path;
    char *b = buf;
    size_t n = 0;
    char bad_name[PARAM_NAME_MAX + 1] = "", bad_value[80] = "";
    int bad = 0;

    *nparams = 0;
    for (;;) {
        size_t plen, slen;

        if (*p != '/' || *s != '/')
            return 0;
        p++, s++;
        plen = strcspn(p, "/");
        slen = strcspn(s, "/");
        if (segment_is_param(p, plen)) {
            size_t nlen = plen - 2;

            if (n == HTTP_MAX_PATH_PARAMS || nlen > PARAM_NAME_MAX)
                return 0;
            if (!bad && !param_valid(s, slen)) {
                bad = 1;
                memcpy(bad_name, p + 1, nlen);
                bad_name[nlen] = '\0';
                quote(bad_value, sizeof bad_value, s, slen, 40);
            }
            params[n].key = b;
            memcpy(b, p + 1, nlen);
            b[nlen] = '\0';
            b += nlen + 1;
            params[n].value = b;
            memcpy(b, s, slen);
            b[slen] = '\0';
            b += slen + 1;
            n++;
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen, s += slen;
        if (!*p || !*s)
            break;
    }
    if (*p || *s)
        return 0;
    *nparams = n;
    if (bad) {
        if (err) {
            fmt(err->param, sizeof err->param, "%s", bad_name);
            fmt(err->detail, sizeof err->detail,
                "path parameter '%s' must be 1..%d characters of "
                "[A-Za-z0-9_.-], not \".\" or \"..\"; got \"%s\"",
                bad_name, HTTP_PARAM_MAX, bad_value);
        }
        return -1;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Replies                                                              */

static void resp_drop_stream(struct http_resp *rs);

/* Forgets the body (not the headers): a later reply replaces an earlier. */
static void resp_clear_body(struct http_resp *rs)
{
    if (!rs->body_static)
        free(rs->body);
    rs->body = NULL;
    rs->len = 0;
    rs->body_static = 0;
    resp_drop_stream(rs);
    rs->kind = RESP_NONE;
}

static void resp_free(struct http_resp *rs)
{
    resp_clear_body(rs);
    for (size_t i = 0; i < rs->nheaders; i++) {
        free(rs->headers[i].name);
        free(rs->headers[i].value);
    }
    rs->nheaders = 0;
}

/* The reply of last resort, which needs no memory. */
static const char oom_problem[] =
    "{\"type\":\"about:blank\",\"title\":\"Internal Server Error\","
    "\"status\":500,\"detail\":\"the server ran out of memory building "
    "the response\"}\n";

static void reply_oom(struct http_resp *rs)
{
    resp_clear_body(rs);
    rs->kind = RESP_BUFFER;
    rs->status = 500;
    rs->body = (char *)oom_problem;
    rs->len = sizeof oom_problem - 1;
    rs->body_static = 1;
    strcpy(rs->content_type, "application/problem+json");
}

/* Takes body (malloc'd). */
static void set_body(struct http_resp *rs, int status, const char *ctype,
                     char *body, size_t len)
{
    resp_clear_body(rs);
    rs->kind = RESP_BUFFER;
    rs->status = status;
    rs->body = body;
    rs->len = len;
    fmt(rs->content_type, sizeof rs->content_type, "%s", ctype);
}

/* Encodes doc (consumed) with a trailing newline. */
static int reply_doc(struct http_resp *rs, int status, json_t *doc,
                     const char *ctype)
{
    size_t n = json_dumpb(doc, NULL, 0, JSON_DUMP_FLAGS);
    char *buf = n ? malloc(n + 1) : NULL;

    if (!buf || json_dumpb(doc, buf, n, JSON_DUMP_FLAGS) != n) {
        free(buf);
        json_decref(doc);
        return EC_ENOMEM;
    }
    json_decref(doc);
    buf[n] = '\n';
    set_body(rs, status, ctype, buf, n + 1);
    return 0;
}

static int status_valid(int status)
{
    return status >= 200 && status <= 599;
}

int http_reply_problem(struct http_resp *rs, int status, const char *title,
                       const char *detail, json_t *extra)
{
    json_t *doc = json_object();
    const char *key;
    json_t *v;
    int bad = !doc;

    if (!status_valid(status))
        status = 500;
    if (doc) {
        bad |= json_object_set_new(doc, "type", json_string("about:blank"));
        bad |= json_object_set_new(
            doc, "title",
            json_text(title ? title : http_status_phrase(status)));
        bad |= json_object_set_new(doc, "status", json_integer(status));
        if (detail)
            bad |= json_object_set_new(doc, "detail", json_text(detail));
        if (json_is_object(extra))
            json_object_foreach(extra, key, v)
                if (strcmp(key, "title") && strcmp(key, "status") &&
                    strcmp(key, "detail"))
                    bad |= json_object_set(doc, key, v);
    }
    json_decref(extra);
    if (bad) {
        json_decref(doc);
        reply_oom(rs);
        return EC_ENOMEM;
    }
    if (reply_doc(rs, status, doc, "application/problem+json") < 0) {
        reply_oom(rs);
        return EC_ENOMEM;
    }
    return 0;
}

/* Every error http.c answers goes through here, then http_reply_problem. */
static int problem(struct http_resp *rs, int status, json_t *extra,
                   const char *f, ...) __attribute__((format(printf, 4, 5)));

static int problem(struct http_resp *rs, int status, json_t *extra,
                   const char *f, ...)
{
    char detail[512];
    va_list ap;

    va_start(ap, f);
    vsnprintf(detail, sizeof detail, f, ap);
    va_end(ap);
    return http_reply_problem(rs, status, NULL, detail, extra);
}

int http_reply_json(struct http_resp *rs, int status, json_t *doc)
{
    if (!doc) {
        problem(rs, 500, NULL,
                "the server could not build the response document (out of "
                "memory, or a number that is not finite)");
        return EC_ENOMEM;
    }
    if (!status_valid(status)) {
        json_decref(doc);
        problem(rs, 500, NULL, "a handler replied with status %d", status);
        return EC_EINVAL;
    }
    if (reply_doc(rs, status, doc, "application/json") < 0) {
        problem(rs, 500, NULL, "the server could not encode the response");
        return EC_ENOMEM;
    }
    return 0;
}

static int ctype_valid(const char *ctype)
{
    return strlen(ctype) < CONTENT_TYPE_MAX && !strpbrk(ctype, "\r\n");
}

int http_reply_text(struct http_resp *rs, int status,
                    const char *content_type, const char *text, size_t len)
{
    const char *ctype = content_type ? content_type
                                     : "text/plain; charset=utf-8";
    char *copy;

    if (!status_valid(status) || !ctype_valid(ctype) || (!text && len)) {
        problem(rs, 500, NULL, "a handler replied with status %d and an "
                "invalid content type or text", status);
        return EC_EINVAL;
    }
    if (!(copy = malloc(len ? len : 1))) {
        reply_oom(rs);
        return EC_ENOMEM;
    }
    if (len)
        memcpy(copy, text, len);
    set_body(rs, status, ctype, copy, len);
    return 0;
}

int http_reply_header(struct http_resp *rs, const char *name,
                      const char *value)
{
    static const char *const managed[] = {"Content-Length", "Content-Type",
                                          "Transfer-Encoding", "Connection"};
    size_t nlen = name ? strlen(name) : 0;
    struct resp_header *h;

    if (!nlen || !value || strlen(value) > HEADER_VALUE_MAX ||
        strpbrk(value, "\r\n"))
        return EC_EINVAL;
    for (size_t i = 0; i < nlen; i++)
        if (!is_token_char((unsigned char)name[i]))
            return EC_EINVAL;
    /* These are the reply's own business: a second one confuses clients. */
    for (size_t i = 0; i < sizeof managed / sizeof managed[0]; i++)
        if (strcasecmp(name, managed[i]) == 0)
            return EC_EINVAL;
    if (rs->nheaders == HTTP_MAX_RESP_HEADERS)
        return EC_ELIMIT;
    h = &rs->headers[rs->nheaders];
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        return EC_ENOMEM;
    }
    rs->nheaders++;
    return 0;
}

json_t *http_body_json(const struct http_req *rq, struct http_resp *rs)
{
    json_error_t e;
    json_t *doc;

    if (rq->body_len == 0) {
        problem(rs, 400, NULL, "the request needs a JSON body and has none");
        return NULL;
    }
    doc = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &e);
    if (!doc)
        problem(rs, 400,
                json_pack("{s:i,s:i,s:i}", "line", e.line, "column", e.column,
                          "position", e.position),
                "the body is not valid JSON: %s (line %d, column %d)", e.text,
                e.line, e.column);
    return doc;
}

/* ------------------------------------------------------------------ */
/* Requests                                                             */

const char *http_param(const struct http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->nparams; i++)
        if (strcmp(rq->params[i].key, name) == 0)
            return rq->params[i].value;
    return NULL;
}

const char *http_query(const struct http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->nquery; i++)
        if (strcmp(rq->query[i].key, name) == 0)
            return rq->query[i].value;
    return NULL;
}

const char *http_header(const struct http_req *rq, const char *name)
{
    /* MHD compares header names without regard to case. */
    return MHD_lookup_connection_value(rq->x->conn, MHD_HEADER_KIND, name);
}

/* "Bearer T" (scheme in any case) with T a token68; anything else is no
   token, and the auth layer decides what that means. */
static void parse_bearer(const char *auth, char *out, size_t outlen)
{
    size_t n;

    out[0] = '\0';
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return;
    auth += 7;
    while (*auth == ' ')
        auth++;
    n = strcspn(auth, " ");
    if (n == 0 || n >= outlen || auth[n + strspn(auth + n, " ")] != '\0')
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)auth[i];

        if (!(is_id_char(c) || c == '~' || c == '+' || c == '/' ||
              c == '='))
            return;
    }
    memcpy(out, auth, n);
    out[n] = '\0';
}

static void client_address(struct MHD_Connection *conn, char *out,
                           size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    snprintf(out, len, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
                  (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
                  out, (socklen_t)len);
}

/* The client's X-Request-Id when it is a sane one, so that its logs and
   ours can be joined; otherwise ours. */
static void request_id(struct http_exchange *x)
{
    const char *given =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, "X-Request-Id");
    unsigned long long n;

    if (given && param_valid(given, strlen(given)) &&
        strlen(given) <= REQUEST_ID_MAX) {
        strcpy(x->request_id, given);
        return;
    }
    n = atomic_fetch_add_explicit(&x->srv->next_id, 1, memory_order_relaxed);
    fmt(x->request_id, sizeof x->request_id, "%08x%08llx", x->srv->id_salt,
        n);
}

/* application/json or application/X+json; a charset, if any, is UTF-8. */
static int json_content_type(const char *ct)
{
    const char *semi, *cs;
    size_t n;

    while (*ct == ' ')
        ct++;
    n = strcspn(ct, "; ");
    if (!((n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
          (n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0)))
        return 0;
    for (semi = strchr(ct, ';'); semi; semi = strchr(semi + 1, ';')) {
        cs = semi + 1;
        while (*cs == ' ')
            cs++;
        if (strncasecmp(cs, "charset=", 8) == 0) {
            cs += 8;
            if (*cs == '"')
                cs++;
            if (strncasecmp(cs, "utf-8", 5) != 0 ||
                (cs[5] && !strchr("\"; ", cs[5])))
                return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* Deferred replies                                                     */

static void d_unref(struct http_deferred *d)
{
    int left;

    pthread_mutex_lock(&d->mu);
    left = --d->refs;
    pthread_mutex_unlock(&d->mu);
    if (left == 0) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->done);
        free(d);
    }
}

/* After a fill: the reply is ready, so a parked connection goes on. */
static void d_complete(struct http_deferred *d)
{
    pthread_mutex_lock(&d->mu);
    d->state = D_DONE;
    if (d->suspended) {
        d->suspended = 0;
        MHD_resume_connection(d->x->conn);
    }
    pthread_cond_broadcast(&d->done);
    pthread_mutex_unlock(&d->mu);
}

/* Claims a pending d for the timer or for stop (srv->lock held). */
static int d_claim_locked(struct http_deferred *d)
{
    int ok;

    pthread_mutex_lock(&d->mu);
    ok = d->state == D_PENDING;
    if (ok) {
        d->state = D_FILLING;
        d->refs++;
    }
    pthread_mutex_unlock(&d->mu);
    return ok;
}

static void fill_no_content(struct http_resp *rs, void *arg)
{
    (void)arg;
    http_reply_text(rs, 204, NULL, NULL, 0);
}

static void fill_shutdown(struct http_resp *rs, void *arg)
{
    (void)arg;
    problem(rs, 503, NULL, "the server is shutting down");
}

/* Runs fill on a claimed batch, outside every lock, then releases it. */
static void d_fill_batch(struct http_deferred *batch, int stopping)
{
    while (batch) {
        struct http_deferred *d = batch;
        struct http_resp *rs = &d->x->rs;

        batch = d->claimed_next;
        if (stopping)
            fill_shutdown(rs, NULL);
        else
            (d->on_timeout ? d->on_timeout : fill_no_content)(rs, d->arg);
        if (rs->kind == RESP_NONE)
            problem(rs, 500, NULL, "the timeout produced no response");
        d_complete(d);
        d_unref(d);
    }
}

struct http_deferred *http_defer(struct http_resp *rs, unsigned timeout_ms,
                                 http_fill_fn on_timeout, void *arg)
{
    struct http_exchange *x = rs->x;
    struct http_server *srv = x->srv;
    struct http_deferred *d;

    if (x->phase != PH_HANDLER || x->deferred || x->at_headers) {
        problem(rs, 500, NULL, "a reply was deferred outside its handler");
        return NULL;
    }
    if (!(d = calloc(1, sizeof *d))) {
        reply_oom(rs);
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->done, NULL);
    d->refs = 2;
    d->state = D_PENDING;
    d->x = x;
    d->deadline_ns = mono_ns() + (uint64_t)timeout_ms * 1000000u;
    d->on_timeout = on_timeout;
    d->arg = arg;
    /* rs is the filler's once d is in the list, maybe at once (a timeout
       of 0): everything the handler's thread does to it comes first. */
    resp_clear_body(rs);
    x->deferred = d;
    pthread_mutex_lock(&srv->lock);
    if (srv->stopping) {
        pthread_mutex_unlock(&srv->lock);
        x->deferred = NULL;
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->done);
        free(d);
        fill_shutdown(rs, NULL);
        return NULL;
    }
    d->next = srv->deferreds;
    if (d->next)
        d->next->prev = d;
    srv->deferreds = d;
    if (d->deadline_ns < srv->timer_next_ns)
        pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
    return d;
}

int http_deferred_finish(struct http_deferred *d, http_fill_fn fill,
                         void *arg)
{
    int claimed = 0;

    if (!d)
        return EC_EINVAL;
    pthread_mutex_lock(&d->mu);
    if (fill && d->state == D_PENDING) {
        d->state = D_FILLING;
        claimed = 1;
    }
    pthread_mutex_unlock(&d->mu);
    if (claimed) {
        /* The request cannot end while FILLING: its connection is parked,
           or its handler has yet to look at the state. */
        struct http_resp *rs = &d->x->rs;

        fill(rs, arg);
        if (rs->kind == RESP_NONE)
            problem(rs, 500, NULL, "the deferred reply produced nothing");
        d_complete(d);
    }
    d_unref(d);
    return claimed || !fill ? 0 : EC_ETIMEOUT;
}

/* The request is over: d no longer refers to it. */
static void d_detach(struct http_server *srv, struct http_deferred *d)
{
    pthread_mutex_lock(&srv->lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        srv->deferreds = d->next;
    if (d->next)
        d->next->prev = d->prev;
    d->prev = d->next = NULL;
    pthread_cond_broadcast(&srv->drained);
    pthread_mutex_unlock(&srv->lock);
    pthread_mutex_lock(&d->mu);
    if (d->state == D_PENDING)
        d->state = D_DONE;  /* the client vanished: nothing more to fill */
    d->x = NULL;
    pthread_mutex_unlock(&d->mu);
    d_unref(d);
}

/* ------------------------------------------------------------------ */
/* Streams                                                              */

static void st_unref(struct http_stream *st)
{
    int left;

    pthread_mutex_lock(&st->mu);
    left = --st->refs;
    pthread_mutex_unlock(&st->mu);
    if (left == 0) {
        pthread_mutex_destroy(&st->mu);
        free(st->out);
        free(st);
    }
}

/* Ends a stream: on_close once, then the response's reference goes. */
static void st_over(struct http_stream *st)
{
    int first;

    pthread_mutex_lock(&st->mu);
    first = !st->over;
    st->over = 1;
    st->suspended = 0;
    st->conn = NULL;
    pthread_mutex_unlock(&st->mu);
    if (first && st->on_close)
        st->on_close(st->arg);
    st_unref(st);
}

/* A stream replied but never handed to MHD (replaced, or the handler's
   request failed): it is over before it began. */
static void resp_drop_stream(struct http_resp *rs)
{
    if (rs->stream) {
        st_over(rs->stream);
        rs->stream = NULL;
    }
}

/* A stream's keep-alive is due at deadline: the timer need only hear of
   it when it would otherwise look later. A stream that sends rows keeps
   moving its deadline later, and so costs the timer no wake-up. */
static void st_signal_timer(struct http_server *srv, uint64_t deadline)
{
    pthread_mutex_lock(&srv->lock);
    if (deadline < srv->timer_next_ns)
        pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
}

static int st_append(struct http_stream *st, const void *data, size_t len)
{
    size_t queued = st->out_len - st->out_off;

    if (len > HTTP_STREAM_BUF_MAX - queued)
        return EC_ELIMIT;
    if (st->out_off && st->out_len + len > st->out_cap) {
        memmove(st->out, st->out + st->out_off, queued);
        st->out_off = 0;
        st->out_len = queued;
    }
    if (st->out_len + len > st->out_cap) {
        size_t cap = st->out_cap ? st->out_cap : 1024;
        char *p;

        while (cap < st->out_len + len)
            cap *= 2;
        if (!(p = realloc(st->out, cap)))
            return EC_ENOMEM;
        st->out = p;
        st->out_cap = cap;
    }
    memcpy(st->out + st->out_len, data, len);
    st->out_len += len;
    return 0;
}

int http_stream_write(struct http_stream *st, const void *data, size_t len)
{
    if (!st || !st->in_produce || (!data && len))
        return EC_EINVAL;
    return st_append(st, data, len);
}

/* "name: value\n" at o; past it. */
static char *sse_field(char *o, const char *name, const char *value, size_t n)
{
    size_t nl = strlen(name);

    memcpy(o, name, nl);
    memcpy(o + nl, value, n);
    o[nl + n] = '\n';
    return o + nl + n + 1;
}

int http_sse_event(struct http_stream *st, const char *event, const char *id,
                   const char *data)
{
    size_t need = 1, n;
    const char *p;
    char *buf, *o;
    int rc;

    if (!st || !st->in_produce || (event && strpbrk(event, "\r\n")) ||
        (id && strpbrk(id, "\r\n")))
        return EC_EINVAL;
    data = data ? data : "";
    need += event ? strlen(event) + 8 : 0;
    need += id ? strlen(id) + 5 : 0;
    /* Each line of data costs "data: " and a newline at most. */
    for (p = data;; p += n) {
        n = strcspn(p, "\r\n");
        need += n + 7;
        if (!p[n])
            break;
        n += (p[n] == '\r' && p[n + 1] == '\n') ? 2 : 1;
    }
    if (need > HTTP_STREAM_BUF_MAX)
        return EC_ELIMIT;
    if (!(o = buf = malloc(need + 1)))
        return EC_ENOMEM;
    /* One event per metric row: copied, not formatted. */
    if (event)
        o = sse_field(o, "event: ", event, strlen(event));
    if (id)
        o = sse_field(o, "id: ", id, strlen(id));
    for (p = data;; p += n) {
        n = strcspn(p, "\r\n");
        o = sse_field(o, "data: ", p, n);
        if (!p[n])
            break;
        n += (p[n] == '\r' && p[n + 1] == '\n') ? 2 : 1;
    }
    *o++ = '\n';
    rc = st_append(st, buf, (size_t)(o - buf));
    free(buf);
    return rc;
}

int http_stream_wake(struct http_stream *st)
{
    int rc = 0;

    if (!st)
        return EC_EINVAL;
    pthread_mutex_lock(&st->mu);
    if (st->over) {
        rc = EC_EPEER;
    } else {
        st->woken = 1;
        if (st->suspended) {
            st->suspended = 0;
            MHD_resume_connection(st->conn);
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void http_stream_release(struct http_stream *st)
{
    if (st)
        st_unref(st);
}

/*
 * MHD's content reader. Sends what is queued, asks the producer for more
 * when woken, sends a keep-alive when quiet; with nothing to send it parks
 * the connection and returns 0, as MHD's documentation prescribes (0
 * without suspending would make the polling thread spin).
 */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct http_stream *st = cls;

    (void)pos;
    for (;;) {
        uint64_t now, deadline;
        int woken, stopping;

        if (st->out_off < st->out_len) {
            size_t n = st->out_len - st->out_off;

            n = n < max ? n : max;
            memcpy(buf, st->out + st->out_off, n);
            st->out_off += n;
            if (st->out_off == st->out_len)
                st->out_off = st->out_len = 0;
            st->last_send_ns = mono_ns();
            st->x->bytes += n;
            return (ssize_t)n;
        }
        if (st->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&st->mu);
        woken = st->woken;
        stopping = st->stopping;
        st->woken = 0;
        pthread_mutex_unlock(&st->mu);
        if (stopping) {
            st->ended = 1;
            continue;
        }
        if (woken) {
            st->in_produce = 1;
            if (st->produce(st->arg, st) == HTTP_STREAM_END)
                st->ended = 1;
            st->in_produce = 0;
            continue;
        }
        now = mono_ns();
        if (st->keepalive_ms &&
            now - st->last_send_ns >= (uint64_t)st->keepalive_ms * 1000000u) {
            if (st_append(st, KEEPALIVE_COMMENT,
                          sizeof KEEPALIVE_COMMENT - 1) < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        pthread_mutex_lock(&st->mu);
        if (st->woken || st->stopping) {
            pthread_mutex_unlock(&st->mu);
            continue;
        }
        st->suspended = 1;
        st->deadline_ns = deadline =
            st->keepalive_ms
                ? st->last_send_ns + (uint64_t)st->keepalive_ms * 1000000u
                : UINT64_MAX;
        MHD_suspend_connection(st->conn);
        pthread_mutex_unlock(&st->mu);
        if (st->keepalive_ms)
            st_signal_timer(st->srv, deadline);
        return 0;
    }
}

/* MHD frees the response: the connection is gone or the stream ended. */
static void stream_free(void *cls)
{
    struct http_stream *st = cls;
    struct http_server *srv = st->srv;

    pthread_mutex_lock(&srv->lock);
    if (st->prev)
        st->prev->next = st->next;
    else if (srv->streams == st)
        srv->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    pthread_cond_broadcast(&srv->drained);
    pthread_mutex_unlock(&srv->lock);
    st_over(st);
}

struct http_stream *http_reply_stream(struct http_resp *rs, int status,
                                      const char *content_type,
                                      unsigned keepalive_ms,
                                      http_stream_fn produce,
                                      http_close_fn on_close, void *arg)
{
    struct http_stream *st;

    if (!status_valid(status) || !content_type ||
        !ctype_valid(content_type) || !produce || rs->x->deferred ||
        rs->x->at_headers) {
        problem(rs, 500, NULL, "a handler started an invalid stream");
        return NULL;
    }
    if (!(st = calloc(1, sizeof *st))) {
        reply_oom(rs);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->refs = 2;
    st->woken = 1;          /* the producer speaks first */
    st->keepalive_ms = keepalive_ms;
    st->produce = produce;
    st->on_close = on_close;
    st->arg = arg;
    st->srv = rs->x->srv;
    st->x = rs->x;
    st->last_send_ns = mono_ns();
    resp_clear_body(rs);
    rs->kind = RESP_STREAM;
    rs->status = status;
    fmt(rs->content_type, sizeof rs->content_type, "%s", content_type);
    rs->stream = st;
    return st;
}

/* ------------------------------------------------------------------ */
/* Streamed bodies: noticing a client that left                         */

/*
 * MHD (0.9.75, epoll) can miss a client's close that arrives while it is
 * still reading the body: its edge is spent, the last read was short, and
 * it waits for the connection timeout. An upload would then hold its
 * temporary file that long. So the timer looks at every connection whose
 * body streams: when the client has hung up and left nothing unread for
 * PEER_CHECK_MS, the body can never complete, and shutting the socket down
 * makes MHD see the end, close, and abort the sink. The fd stays valid
 * under srv->lock: MHD calls on_completed, which unlinks the exchange under
 * that lock, before it closes the socket.
 */
static void sink_link(struct http_exchange *x)
{
    struct http_server *srv = x->srv;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

    if (!ci)
        return;                 /* then only the connection timeout */
    x->sink_fd = ci->connect_fd;
    pthread_mutex_lock(&srv->lock);
    x->sink_prev = NULL;
    x->sink_next = srv->sinks;
    if (x->sink_next)
        x->sink_next->sink_prev = x;
    srv->sinks = x;
    x->sink_linked = 1;
    pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
}

static void sink_unlink(struct http_exchange *x)
{
    struct http_server *srv = x->srv;

    if (!x->sink_linked)
        return;
    pthread_mutex_lock(&srv->lock);
    if (x->sink_prev)
        x->sink_prev->sink_next = x->sink_next;
    else
        srv->sinks = x->sink_next;
    if (x->sink_next)
        x->sink_next->sink_prev = x->sink_prev;
    x->sink_prev = x->sink_next = NULL;
    x->sink_linked = 0;
    pthread_mutex_unlock(&srv->lock);
}

/* srv->lock held. */
static void sink_check_peer(struct http_exchange *x, uint64_t now)
{
    struct pollfd p;
    int unread = 0;

    p.fd = x->sink_fd;
    p.events = POLLIN;
    p.revents = 0;
    /* Readable with nothing to read: the end of the stream, or an error. */
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)) &&
        ioctl(p.fd, FIONREAD, &unread) == 0 && unread == 0) {
        if (!x->sink_hup_ns)
            x->sink_hup_ns = now;
        else if (now - x->sink_hup_ns >= PEER_CHECK_MS * 1000000ull)
            shutdown(p.fd, SHUT_RDWR);
    } else {
        x->sink_hup_ns = 0;
    }
}

/* ------------------------------------------------------------------ */
/* The timer thread: timeouts, keep-alives, streaming clients gone     */

static void *timer_main(void *arg)
{
    struct http_server *srv = arg;

    pthread_mutex_lock(&srv->lock);
    while (!srv->timer_quit) {
        uint64_t now = mono_ns(), next = now + 60 * 1000000000ull;
        struct http_deferred *expired = NULL;
        struct timespec until;

        for (struct http_deferred *d = srv->deferreds; d; d = d->next) {
            if (d->deadline_ns <= now) {
                if (d_claim_locked(d)) {
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
            sink_check_peer(x, now);
        if (srv->sinks && now + PEER_CHECK_MS * 1000000ull < next)
            next = now + PEER_CHECK_MS * 1000000ull;
        if (expired) {
            /* Fill functions are the app's code: call them unlocked. */
            pthread_mutex_unlock(&srv->lock);
            d_fill_batch(expired, 0);
            pthread_mutex_lock(&srv->lock);
            continue;
        }
        until = ns_to_timespec(next);
        srv->timer_next_ns = next;
        pthread_cond_timedwait(&srv->tick, &srv->lock, &until);
        srv->timer_next_ns = 0;     /* looking now: everyone signals */
    }
    pthread_mutex_unlock(&srv->lock);
    return NULL;
}

/* ------------------------------------------------------------------ */
/* MHD callbacks                                                        */

static void exchange_free(struct http_exchange *x)
{
    resp_free(&x->rs);
    http_query_free(&x->query);
    free(x->uri);
    free(x->path);
    free(x->param_buf);
    free(x->body);
    free(x);
}

/* Called by MHD once per request with the raw URI, before the headers:
   the object made here is the request's state until on_completed. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_exchange *x = calloc(1, sizeof *x);

    if (!x)
        return NULL;
    x->srv = cls;
    x->conn = conn;
    x->t0_ns = mono_ns();
    x->route = -1;
    x->rs.x = x;
    if (!(x->uri = strdup(uri))) {
        free(x);
        return NULL;
    }
    return x;
}

static enum MHD_Result queue_reply(struct http_exchange *x)
{
    struct http_resp *rs = &x->rs;
    struct MHD_Response *resp = NULL;
    enum MHD_Result ok;
    int bad = 0;

    if (rs->kind == RESP_NONE)
        problem(rs, 500, NULL, "the handler produced no response");
    if (rs->kind == RESP_STREAM) {
        struct http_stream *st = rs->stream;
        struct http_server *srv = x->srv;

        resp = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, st, stream_free);
        if (!resp) {
            reply_oom(rs);
        } else {
            /* From here MHD owns the stream; stream_free unlinks it. */
            rs->stream = NULL;
            st->conn = x->conn;
            pthread_mutex_lock(&srv->lock);
            pthread_mutex_lock(&st->mu);
            st->stopping = srv->stopping;
            pthread_mutex_unlock(&st->mu);
            st->next = srv->streams;
            if (st->next)
                st->next->prev = st;
            srv->streams = st;
            pthread_mutex_unlock(&srv->lock);
            bad |= MHD_add_response_header(resp, "Cache-Control",
                                           "no-cache") != MHD_YES;
        }
    }
    if (!resp) {
        resp = MHD_create_response_from_buffer(
            rs->len, rs->body,
            rs->body_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
        if (!resp)
            return MHD_NO;
        rs->body = NULL;    /* MHD frees it */
        rs->body_static = 0;
        x->bytes = rs->len;
    }
    if (rs->len || rs->kind == RESP_STREAM || rs->status != 204)
        bad |= MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       rs->content_type) != MHD_YES;
    bad |= MHD_add_response_header(resp, "X-Request-Id", x->request_id) !=
           MHD_YES;
    for (size_t i = 0; i < rs->nheaders; i++)
        bad |= MHD_add_response_header(resp, rs->headers[i].name,
                                       rs->headers[i].value) != MHD_YES;
    x->status = rs->status;
    ok = bad ? MHD_NO : MHD_queue_response(x->conn, (unsigned)rs->status,
                                           resp);
    MHD_destroy_response(resp);
    x->phase = PH_REPLIED;
    return ok;
}

/* Methods allowed on a path, for 405's Allow: table order, no repeats,
   HEAD beside GET. */
static void allowed_methods(struct http_server *srv, const char *path,
                            char *buf, size_t len, json_t *list)
{
    struct http_kv params[HTTP_MAX_PATH_PARAMS];
    size_t n, o = 0;
    char *tmp = malloc(strlen(path) + PATTERN_MAX + 2);

    buf[0] = '\0';
    if (!tmp)
        return;
    for (size_t i = 0; i < srv->nroutes; i++) {
        const char *m = srv->routes[i].method;
        const char *both[2] = {m, "HEAD"};

        if (http_path_match(srv->routes[i].pattern, path, params, &n, tmp,
                            NULL) <= 0)
            continue;
        for (int k = 0; k < (strcmp(m, "GET") == 0 ? 2 : 1); k++) {
            char word[24];

            fmt(word, sizeof word, "%s, ", both[k]);
            if (strstr(buf, word) || o + strlen(word) >= len)
                continue;
            strcpy(buf + o, word);
            o += strlen(word);
            json_array_append_new(list, json_string(both[k]));
        }
    }
    if (o >= 2)
        buf[o - 2] = '\0';
    free(tmp);
}

/*
 * Sends an answer made before the body was read. Closing a connection with
 * unread bytes in it makes TCP send a reset, which can destroy the answer
 * before the client reads it (RFC 9112, 9.6). So the answer goes at once
 * only when no body follows, when the client waits for 100 Continue (MHD
 * then never asks for the body), or when the announced body is beyond
 * DISCARD_MAX; otherwise the body is read and dropped first, and the
 * answer sent when it ends. Either way none of it is kept.
 */
static enum MHD_Result early_reply(struct http_exchange *x)
{
    const char *cl = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *expect = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;

    if ((!len && !te) || (expect && strcasecmp(expect, "100-continue") == 0) ||
        len > DISCARD_MAX)
        return queue_reply(x);
    x->discard = 1;
    x->phase = PH_BODY;
    return MHD_YES;
}

/*
 * An HTTP_STREAM_BODY route: its handler runs now, on the headers. It
 * either replies, and the answer goes as any early one, or takes the body
 * with http_body_stream, and the body comes next.
 */
static enum MHD_Result begin_stream(struct http_exchange *x)
{
    x->phase = PH_HANDLER;
    x->at_headers = 1;
    x->handler_rc = x->srv->routes[x->route].handler(&x->rq, &x->rs);
    x->at_headers = 0;
    if (x->sink_on) {
        x->phase = PH_BODY;
        return MHD_YES;
    }
    return early_reply(x);
}

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind,
                                        const char *key, const char *value)
{
    size_t *n = cls;

    (void)kind;
    *n += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": ", CRLF */
    return MHD_YES;
}

/* Routing, the query, the content type and the declared length: every
   check that needs no body, decided before the body is read. */
static enum MHD_Result begin(struct http_exchange *x, const char *method)
{
    struct http_server *srv = x->srv;
    struct http_resp *rs = &x->rs;
    struct http_parse_error perr = {"", ""};
    const char *q = strchr(x->uri, '?');
    size_t plen = q ? (size_t)(q - x->uri) : strlen(x->uri);
    int is_head = strcmp(method, "HEAD") == 0, found_path = 0;
    const char *cl, *te, *ct;
    char shown[160];
    size_t n;

    fmt(x->method, sizeof x->method, "%s", method);
    x->rq.app = srv->app;
    x->rq.method = is_head ? "GET" : method;
    x->rq.x = x;
    x->rq.body = "";
    client_address(x->conn, x->client, sizeof x->client);
    request_id(x);
    parse_bearer(MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                             "Authorization"),
                 x->token, sizeof x->token);
    x->rq.request_id = x->request_id;
    x->rq.client = x->client;
    x->rq.token = x->token[0] ? x->token : NULL;
    if ((n = strlen(x->uri)) > URL_MAX) {
        problem(rs, 414, json_pack("{s:s,s:i}", "limit", "max_url", "value", URL_MAX),
                "the URL is %zu bytes, more than the limit of %d bytes (max_url)",
                n, URL_MAX);
        return early_reply(x);
    }
    n = 0;
    MHD_get_connection_values(x->conn, MHD_HEADER_KIND, add_header_bytes, &n);
    if (n > HEADERS_MAX) {
        problem(rs, 431, json_pack("{s:s,s:i}", "limit", "max_headers", "value",
                                   HEADERS_MAX),
                "the request's headers are %zu bytes, more than the limit of %d "
                "bytes (max_headers)", n, HEADERS_MAX);
        return early_reply(x);
    }
    if (!(x->path = strndup(x->uri, plen)) ||
        !(x->param_buf = malloc(plen + PATTERN_MAX + 2)))
        return MHD_NO;
    x->rq.path = x->path;
    quote(shown, sizeof shown, x->path, plen, 100);

    for (size_t i = 0; i < srv->nroutes && x->route < 0; i++) {
        struct route *r = &srv->routes[i];
        struct http_parse_error e;
        int m = http_path_match(r->pattern, x->path, x->params, &n,
                                x->param_buf, &e);

        if (m < 0 && !perr.detail[0])
            perr = e;
        if (m <= 0)
            continue;
        found_path = 1;
        if (strcmp(r->method, x->rq.method) == 0) {
            x->route = (int)i;
            x->rq.nparams = n;
            x->rq.params = x->params;
            x->rq.route = r->pattern;
        }
    }
    if (x->route < 0 && found_path) {
        char allow[128];
        json_t *list = json_array();

        allowed_methods(srv, x->path, allow, sizeof allow, list);
        http_reply_header(rs, "Allow", allow);
        problem(rs, 405, json_pack("{s:o*}", "allow", list),
                "%s is not allowed on \"%s\"; allowed: %s", method, shown,
                allow);
        return early_reply(x);
    }
    if (x->route < 0 && perr.detail[0]) {
        problem(rs, 404, json_pack("{s:s}", "parameter", perr.param),
                "nothing at \"%s\": %s", shown, perr.detail);
        return early_reply(x);
    }
    if (x->route < 0) {
        problem(rs, 404, NULL, "nothing at \"%s\"", shown);
        return early_reply(x);
    }

    if (http_query_parse(q ? q + 1 : "", q ? strlen(q + 1) : 0, &x->query,
                         &perr) < 0) {
        problem(rs, 400,
                perr.param[0] ? json_pack("{s:s}", "parameter", perr.param)
                              : NULL,
                "%s", perr.detail);
        return early_reply(x);
    }
    x->rq.nquery = x->query.count;
    x->rq.query = x->query.item;

    cl = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    te = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_TRANSFER_ENCODING);
    ct = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_TYPE);
    if ((srv->routes[x->route].flags & HTTP_JSON_BODY) &&
        ((cl && strtoull(cl, NULL, 10) > 0) || te || ct) &&
        !(ct && json_content_type(ct))) {
        json_t *accept = json_pack("{s:[s]}", "accept", "application/json");
        char got[80];

        if (ct) {
            quote(got, sizeof got, ct, strlen(ct), 60);
            problem(rs, 415, accept, "this resource takes application/json, "
                    "not \"%s\"", got);
        } else {
            problem(rs, 415, accept, "this resource takes application/json; "
                    "the request has a body without a Content-Type");
        }
        return early_reply(x);
    }
    if (srv->routes[x->route].flags & HTTP_STREAM_BODY)
        return begin_stream(x);
    /* A declared length over the limit is refused before a byte of the
       body is read (and before MHD would send 100 Continue). */
    if (cl) {
        unsigned long long len;

        errno = 0;
        len = strtoull(cl, NULL, 10);
        if (len > srv->max_body || errno) {
            problem(rs, 413,
                    json_pack("{s:s,s:I}", "limit", "max_body", "value",
                              (json_int_t)srv->max_body),
                    "the request body is %llu bytes, more than the limit of "
                    "%zu bytes (max_body)", errno ? ULLONG_MAX : len,
                    srv->max_body);
            return early_reply(x);
        }
        if (len && !(x->body = malloc(len + 1)))
            return MHD_NO;
        x->body_cap = len + 1;
    }
    x->phase = PH_BODY;
    return MHD_YES;
}

/* The streamed body's sink is done with: abort, once. */
static void sink_abort(struct http_exchange *x)
{
    sink_unlink(x);
    if (x->sink_on) {
        x->sink_on = 0;
        x->sink.abort(x->sink_ctx);
    }
}

int http_body_stream(struct http_resp *rs, size_t limit,
                     const char *limit_name, const struct http_body_ops *ops,
                     void *ctx)
{
    struct http_exchange *x = rs->x;
    const char *cl, *name = limit_name && *limit_name ? limit_name : "limit";
    unsigned long long len;

    if (!ops || !ops->write || !ops->end || !ops->abort) {
        if (ops && ops->abort)
            ops->abort(ctx);
        problem(rs, 500, NULL, "a handler took a body without write, end "
                "and abort functions");
        return EC_EINVAL;
    }
    if (!x->at_headers || x->sink_on) {
        ops->abort(ctx);
        problem(rs, 500, NULL, "a body can only be streamed by the handler "
                "of an HTTP_STREAM_BODY route, once, on the headers");
        return EC_EINVAL;
    }
    /* A declared length over the limit is refused before a byte of the
       body is read (and before MHD would send 100 Continue). */
    cl = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        errno = 0;
        len = strtoull(cl, NULL, 10);
        if (len > limit || errno) {
            problem(rs, 413,
                    json_pack("{s:s,s:I}", "limit", name, "value",
                              (json_int_t)limit),
                    "the request body is %llu bytes, more than the limit of "
                    "%zu bytes (%s)", errno ? ULLONG_MAX : len, limit, name);
            ops->abort(ctx);
            return EC_ELIMIT;
        }
    }
    resp_clear_body(rs);
    x->sink = *ops;
    x->sink_ctx = ctx;
    x->sink_limit = limit;
    x->sink_len = 0;
    x->sink_failed = 0;
    fmt(x->sink_limit_name, sizeof x->sink_limit_name, "%s", name);
    x->sink_on = 1;
    sink_link(x);
    return 0;
}

/*
 * A piece of a streamed body goes to the sink as it is. Past the limit
 * the 413 is decided on the first piece too many, the sink aborted at once
 * (an upload's temporary file goes now, not when the client stops), and
 * what follows dropped as after any early answer.
 */
static int sink_append(struct http_exchange *x, const char *data, size_t n)
{
    if (x->sink_failed) {
        x->discarded += n;
        return x->discarded > DISCARD_MAX ? -1 : 0;
    }
    if (n > x->sink_limit - x->sink_len) {
        problem(&x->rs, 413,
                json_pack("{s:s,s:I}", "limit", x->sink_limit_name, "value",
                          (json_int_t)x->sink_limit),
                "the request body is more than the limit of %zu bytes (%s)",
                x->sink_limit, x->sink_limit_name);
        sink_abort(x);
        x->discard = 1;
        x->discarded = 0;
        return 0;
    }
    x->sink_len += n;
    if (x->sink.write(x->sink_ctx, data, n) < 0)
        x->sink_failed = 1;
    return 0;
}

/*
 * Appends a piece of the body. When it outgrows max_body (a chunked body,
 * whose size was not announced), the 413 is decided here, on the first
 * piece too many, and the rest dropped: MHD 0.9.75 refuses to queue a
 * reply while a body is arriving, so it goes out when the body ends.
 * Returns 0, or -1 when so much was dropped that the connection goes.
 */
static int body_append(struct http_exchange *x, const char *data, size_t n)
{
    size_t max = x->srv->max_body;

    if (x->discard) {
        x->discarded += n;
        return x->discarded > DISCARD_MAX ? -1 : 0;
    }
    if (x->sink_on)
        return sink_append(x, data, n);
    if (n > max - x->body_len) {
        problem(&x->rs, 413,
                json_pack("{s:s,s:I}", "limit", "max_body", "value",
                          (json_int_t)max),
                "the request body is more than the limit of %zu bytes "
                "(max_body)", max);
        x->discard = 1;
        x->discarded = x->body_len + n;
        free(x->body);
        x->body = NULL;
        x->body_len = x->body_cap = 0;
        return 0;
    }
    if (x->body_len + n + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        char *p;

        while (cap < x->body_len + n + 1)
            cap *= 2;
        if (cap > max + 1)
            cap = max + 1;
        if (!(p = realloc(x->body, cap))) {
            reply_oom(&x->rs);
            x->discard = 1;
            return 0;
        }
        x->body = p;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, data, n);
    x->body_len += n;
    x->body[x->body_len] = '\0';
    return 0;
}

static enum MHD_Result dispatch(struct http_exchange *x)
{
    struct http_server *srv = x->srv;
    struct http_resp *rs = &x->rs;
    struct http_deferred *d;

    if (x->discard)
        return queue_reply(x);  /* answered already, body dropped */
    if (x->body) {
        x->rq.body = x->body;
        x->rq.body_len = x->body_len;
    }
    x->phase = PH_HANDLER;
    if (x->sink_on) {
        /* A streamed body is complete: its end replies. */
        sink_unlink(x);
        x->sink_on = 0;
        x->handler_rc = x->sink.end(x->sink_ctx, &x->rq, rs);
    } else {
        x->handler_rc = srv->routes[x->route].handler(&x->rq, rs);
    }
    if (!(d = x->deferred))
        return queue_reply(x);
    pthread_mutex_lock(&d->mu);
    if (d->state == D_DONE) {
        pthread_mutex_unlock(&d->mu);
        return queue_reply(x);
    }
    /* Parked until d_complete resumes it; holds no thread meanwhile. */
    d->suspended = 1;
    x->phase = PH_DEFERRED;
    MHD_suspend_connection(x->conn);
    pthread_mutex_unlock(&d->mu);
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version,
                                  const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_exchange *x = *con_cls;

    (void)cls, (void)url, (void)version;
    if (!x || x->conn != conn)
        return MHD_NO;  /* on_uri ran out of memory: drop the connection */
    switch (x->phase) {
    case PH_NEW:
        return begin(x, method);
    case PH_BODY:
        if (*upload_data_size) {
            if (body_append(x, upload_data, *upload_data_size) < 0)
                return MHD_NO;
            *upload_data_size = 0;
            return MHD_YES;
        }
        return dispatch(x);
    case PH_DEFERRED:
        return queue_reply(x);      /* resumed: the fill is done */
    default:
        return MHD_NO;
    }
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
        return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "read-error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return "client-abort";
    default:
        return "other";
    }
}

static void record(struct http_server *srv, struct http_exchange *x,
                   uint64_t ns)
{
    struct route_stats *s =
        &srv->stats[x->route >= 0 ? (size_t)x->route : srv->nroutes];
    double secs = (double)ns / 1e9;
    size_t b = 0;

    while (b < NBUCKETS && secs > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&s->by_status[status_slot(x->status)], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&s->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->sum_us, ns / 1000, memory_order_relaxed);
}

/* The end of a request, however it ended: count, log, free. */
static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe)
{
    struct http_server *srv = cls;
    struct http_exchange *x = *con_cls;
    uint64_t ns;

    (void)conn;
    if (!x)
        return;
    *con_cls = NULL;
    ns = mono_ns() - x->t0_ns;
    if (x->status)
        record(srv, x, ns);
    if (!srv->quiet) {
        char path[300], rc[24] = "";
        const char *p = x->path ? x->path : x->uri;

        quote(path, sizeof path, p, strlen(p), 200);
        if (x->handler_rc)
            fmt(rc, sizeof rc, " rc=%d", x->handler_rc);
        /* One fprintf per line: stdio locks the stream, lines stay whole. */
        fprintf(stderr,
                "http method=%s path=\"%s\" status=%d bytes=%zu ms=%.3f "
                "rid=%s client=%s end=%s%s\n",
                x->method[0] ? x->method : "-", path, x->status, x->bytes,
                (double)ns / 1e6, x->request_id[0] ? x->request_id : "-",
                x->client[0] ? x->client : "-", termination_name(toe), rc);
    }
    sink_abort(x);              /* the client went away mid-body */
    if (x->deferred)
        d_detach(srv, x->deferred);
    exchange_free(x);
}

static void mhd_log(void *cls, const char *f, va_list ap)
{
    struct http_server *srv = cls;
    char msg[512];

    if (srv->quiet)
        return;
    vsnprintf(msg, sizeof msg, f, ap);
    msg[strcspn(msg, "\n")] = '\0';
    fprintf(stderr, "http libmicrohttpd: %s\n", msg);
}

/* ------------------------------------------------------------------ */
/* Start and stop                                                       */

static int check_routes(const struct http_route *routes, size_t n, char *err,
                        size_t errlen)
{
    if (n > HTTP_MAX_ROUTES) {
        fmt(err, errlen, "%zu routes, more than the limit of %d", n,
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
            fmt(err, errlen, "route %zu: the method must be 1..16 upper-case "
                "letters", i);
            return EC_EINVAL;
        }
        if (!r->handler) {
            fmt(err, errlen, "route %zu (%s): no handler", i, r->method);
            return EC_EINVAL;
        }
        if (!p || p[0] != '/' || strlen(p) > PATTERN_MAX) {
            fmt(err, errlen, "route %zu: the pattern must start with '/' and "
                "be at most %d bytes", i, PATTERN_MAX);
            return EC_EINVAL;
        }
        for (p++;; p++) {
            size_t len = strcspn(p, "/");

            if (segment_is_param(p, len)) {
                size_t nl = len - 2;

                if (nl > PARAM_NAME_MAX ||
                    strspn(p + 1, "abcdefghijklmnopqrstuvwxyz_") < nl ||
                    nparams == HTTP_MAX_PATH_PARAMS) {
                    fmt(err, errlen, "route %zu (%s): parameters are {name} "
                        "with name [a-z_]{1,%d}, at most %d of them", i,
                        r->pattern, PARAM_NAME_MAX, HTTP_MAX_PATH_PARAMS);
                    return EC_EINVAL;
                }
                memcpy(names[nparams], p + 1, nl);
                names[nparams][nl] = '\0';
                for (size_t k = 0; k < nparams; k++)
                    if (strcmp(names[k], names[nparams]) == 0) {
                        fmt(err, errlen, "route %zu (%s): parameter {%s} "
                            "appears twice", i, r->pattern, names[k]);
                        return EC_EINVAL;
                    }
                nparams++;
            } else {
                for (size_t k = 0; k < len; k++)
                    if (!is_id_char((unsigned char)p[k]) && p[k] != '~') {
                        fmt(err, errlen, "route %zu (%s): a literal segment "
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
                fmt(err, errlen, "route %zu: %s %s is already route %zu", i,
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
        fmt(err, errlen, "port %u is not in 0..65535", port);
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
        fmt(err, errlen, "host \"%s\" is not a numeric IPv4 or IPv6 address",
            host);
        return -1;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM, 0)) < 0) {
        fmt(err, errlen, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* Accepted sockets inherit it: a reply written in two parts must not
     * wait for the client's delayed ACK (40 ms on Linux) before its body. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 512) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        fmt(err, errlen, "cannot listen on %s port %u: %s", host, port,
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
        fmt(err, errlen, "%u connections need %llu open files, and the hard "
            "limit is %llu: lower the connection limit or raise ulimit -Hn",
            maxconn, (unsigned long long)want, (unsigned long long)rl.rlim_max);
        return -1;
    }
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        fmt(err, errlen, "cannot raise the open-file limit to %llu: %s",
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
        fmt(err, errlen, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&srv->lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&srv->tick, &ca);
    pthread_cond_init(&srv->drained, &ca);
    pthread_condattr_destroy(&ca);
    srv->listen_fd = -1;
    srv->app = app;
    srv->quiet = cfg->access_log_off;
    srv->max_body = cfg->max_body ? cfg->max_body : DEFAULT_MAX_BODY;
    srv->id_salt = (unsigned)(mono_ns() ^ ((uint64_t)getpid() << 16));
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
        fmt(err, errlen, "cannot start the timer thread");
        goto fail;
    }
    srv->timer_running = 1;
    threads = cfg->threads ? cfg->threads : DEFAULT_THREADS;
    maxconn = cfg->max_connections ? cfg->max_connections
                                   : DEFAULT_MAX_CONNECTIONS;
    timeout = cfg->conn_timeout_s ? cfg->conn_timeout_s
                                  : DEFAULT_CONN_TIMEOUT_S;
    if (raise_nofile(maxconn, err, errlen) < 0)
        goto fail;
    /*
     * A pool of epoll threads; suspend/resume needs MHD's wake-up pipe.
     * MHD answers a few errors itself, before any callback of ours and so
     * not as problem+json: 431 and 414 when the request line and headers
     * outgrow its per-connection pool (MHD_POOL; URL_MAX and HEADERS_MAX
     * answer long ones below that), 505 for an unknown HTTP version; a
     * request line it cannot parse just closes the connection.
     */
    srv->daemon = MHD_start_daemon(
        MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG | (ipv6 ? MHD_USE_IPv6 : 0),
        0, NULL, NULL, on_request, srv,
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, srv,
        MHD_OPTION_LISTEN_SOCKET, srv->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, maxconn,
        MHD_OPTION_CONNECTION_TIMEOUT, timeout,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, MHD_POOL,
        MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_END);
    if (!srv->daemon) {
        fmt(err, errlen, "libmicrohttpd did not start (%u threads, %u "
            "connections)", threads, maxconn);
        goto fail;
    }
    return srv;
oom:
    fmt(err, errlen, "out of memory");
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
        if (d_claim_locked(d)) {
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
    d_fill_batch(batch, 1);
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
    until = ns_to_timespec(mono_ns() + STOP_DRAIN_MS * 1000000ull);
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

/* ------------------------------------------------------------------ */
/* Metrics                                                              */

struct sbuf {
    char *p;
    size_t len, cap;
    int oom;
};

static void sb_printf(struct sbuf *b, const char *f, ...)
    __attribute__((format(printf, 2, 3)));

static void sb_printf(struct sbuf *b, const char *f, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, f);
        n = vsnprintf(b->p + b->len, b->cap - b->len, f, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        char *p = realloc(b->p, 2 * b->cap + (size_t)n);

        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = 2 * b->cap + (size_t)n;
    }
}

char *http_metrics_text(const struct http_server *srv)
{
    struct sbuf b = {malloc(4096), 0, 4096, 0};

    if (!b.p)
        return NULL;
    b.p[0] = '\0';
    /* Patterns and methods were checked at start: no label escaping. */
    sb_printf(&b, "# HELP ecopt_http_requests_total HTTP requests answered, "
              "by route, method and status code.\n"
              "# TYPE ecopt_http_requests_total counter\n");
    for (size_t r = 0; r <= srv->nroutes; r++) {
        const char *route = r < srv->nroutes ? srv->routes[r].pattern
                                             : "unmatched";
        const char *method = r < srv->nroutes ? srv->routes[r].method : "*";

        for (size_t k = 0; k <= NSTATUS; k++) {
            unsigned long long c = atomic_load_explicit(
                &srv->stats[r].by_status[k], memory_order_relaxed);
            char code[16];

            if (!c)
                continue;
            if (k < NSTATUS)
                fmt(code, sizeof code, "%d", status_table[k].code);
            else
                fmt(code, sizeof code, "other");
            sb_printf(&b, "ecopt_http_requests_total{route=\"%s\",method="
                      "\"%s\",code=\"%s\"} %llu\n", route, method, code, c);
        }
    }
    sb_printf(&b, "# HELP ecopt_http_request_duration_seconds Time from the "
              "request line to the end of the reply.\n"
              "# TYPE ecopt_http_request_duration_seconds histogram\n");
    for (size_t r = 0; r <= srv->nroutes; r++) {
        const char *route = r < srv->nroutes ? srv->routes[r].pattern
                                             : "unmatched";
        const char *method = r < srv->nroutes ? srv->routes[r].method : "*";
        unsigned long long cum = 0;

        for (size_t k = 0; k <= NBUCKETS; k++)
            cum += atomic_load_explicit(&srv->stats[r].bucket[k],
                                        memory_order_relaxed);
        if (!cum)
            continue;
        cum = 0;
        for (size_t k = 0; k <= NBUCKETS; k++) {
            char le[16];

            cum += atomic_load_explicit(&srv->stats[r].bucket[k],
                                        memory_order_relaxed);
            if (k < NBUCKETS)
                fmt(le, sizeof le, "%g", bucket_le[k]);
            else
                fmt(le, sizeof le, "+Inf");
            sb_printf(&b, "ecopt_http_request_duration_seconds_bucket{route="
                      "\"%s\",method=\"%s\",le=\"%s\"} %llu\n", route, method,
                      le, cum);
        }
        sb_printf(&b, "ecopt_http_request_duration_seconds_sum{route=\"%s\","
                  "method=\"%s\"} %.6f\n", route, method,
                  (double)atomic_load_explicit(&srv->stats[r].sum_us,
                                               memory_order_relaxed) / 1e6);
        sb_printf(&b, "ecopt_http_request_duration_seconds_count{route=\"%s\","
                  "method=\"%s\"} %llu\n", route, method, cum);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
