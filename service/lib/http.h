/*
 * The service's HTTP plumbing over libmicrohttpd: a route table with path
 * parameters, bounded bodies (or streamed ones, for uploads), a strict
 * query parser, RFC 9457 problem+json for every error, replies that come
 * later (long-poll) or in pieces (SSE), request counters for /metrics and
 * an access log. Handlers see only the types below; no libmicrohttpd type
 * leaks out of this header.
 */
#ifndef ECOPT_HTTP_H
#define ECOPT_HTTP_H

#include <stddef.h>

#include <jansson.h>

/* Static limits. Each rejection a client sees names the limit and value. */
#define HTTP_MAX_ROUTES 128
#define HTTP_MAX_PATH_PARAMS 4      /* "{name}" segments in one pattern */
#define HTTP_PARAM_MAX 128          /* a path parameter is 1..128 bytes */
#define HTTP_QUERY_MAX_LEN 8192     /* the raw query string, in bytes */
#define HTTP_QUERY_MAX_PARAMS 32
#define HTTP_QUERY_MAX_KEY 64       /* decoded bytes */
#define HTTP_QUERY_MAX_VALUE 2048   /* decoded bytes */
#define HTTP_MAX_RESP_HEADERS 16    /* set with http_reply_header */
#define HTTP_STREAM_BUF_MAX (1u << 20)  /* bytes a producer may queue */

struct http_server;                 /* opaque */
struct http_resp;                   /* opaque: what the handler answers */
struct http_deferred;               /* a reply that comes later */
struct http_stream;                 /* a reply that comes in pieces */
struct http_exchange;               /* private state of one request */

struct http_req;

/*
 * A handler decodes, checks, calls and encodes; it must reply (or defer,
 * or stream) before it returns. It returns 0 or a negative EC_* code,
 * which is only logged: the client sees the reply. A handler that replies
 * nothing gets a 500 problem. Handlers run on the server's threads and must
 * not block: whatever waits goes through http_defer or http_reply_stream.
 */
typedef int (*http_handler_fn)(struct http_req *rq, struct http_resp *rs);

/* Zero means the default for every field, so `{0}` is a usable config. */
struct http_config {
    const char *host;               /* numeric IPv4/IPv6; NULL: 127.0.0.1 */
    unsigned port;                  /* 0: any free port, see http_port */
    unsigned threads;               /* worker threads; 0: 4 */
    unsigned max_connections;       /* served at once, 0: 1000; 64 more are
                                       accepted, each shedding the stalest
                                       connection waiting for headers */
    unsigned conn_timeout_s;        /* idle seconds before a connection is
                                       dropped (slow clients); 0: 30 */
    unsigned header_timeout_s;      /* seconds from a connection's start,
                                       or its last reply, to the end of
                                       the next request's headers, however
                                       the bytes trickle; 0: 20 */
    unsigned body_timeout_s;        /* seconds from the headers to the
                                       body's last byte; 0: 60 */
    unsigned upload_timeout_s;      /* the same on HTTP_STREAM_BODY
                                       routes; 0: 3600 */
    unsigned max_per_address;       /* open connections of one client
                                       address; more are closed at once;
                                       0: no cap */
    size_t max_body;                /* request body bytes; 0: 1 MiB. A
                                       longer body gets 413 naming this
                                       limit, decided on the headers (or
                                       the first piece too many when it is
                                       chunked), and is never kept.
                                       HTTP_STREAM_BODY routes have their
                                       own limit instead */
    int access_log_off;             /* nonzero: no access log on stderr */
    /*
     * Called on the headers of every request a route matched, before any
     * byte of its body is read or a buffer made for it, and before the
     * header-time handler of an HTTP_STREAM_BODY route: it may reply (a
     * 401, say), and the request ends there as any early answer, its body
     * dropped unread; or it may set rq->principal for the handler and
     * reply nothing. NULL: none.
     */
    http_handler_fn admit;
};

struct http_kv {
    const char *key;
    const char *value;
};

/*
 * What a handler is asked. Every string is NUL-terminated, valid until the
 * reply is sent, and must only be read by the handler (and by a deferred
 * reply's fill function).
 */
struct http_req {
    void *app;                      /* http_start's app argument */
    const char *method;             /* "GET", "POST", ... ("GET" for HEAD) */
    const char *path;               /* raw path, still percent-encoded */
    const char *route;              /* the matched pattern */
    const char *request_id;         /* client's X-Request-Id or generated */
    const char *client;             /* peer address, "127.0.0.1" */
    const char *token;              /* "Authorization: Bearer T": T; or NULL */
    const char *body;               /* "" when there is none (and always
                                       on HTTP_STREAM_BODY routes); may
                                       hold NULs */
    size_t body_len;
    size_t nparams;                 /* path parameters, in pattern order */
    const struct http_kv *params;
    size_t nquery;                  /* decoded query, in request order */
    const struct http_kv *query;
    const void *principal;          /* what http_config's admit found
                                       (who is asking), or NULL */
    struct http_exchange *x;        /* private */
};

/* Route flags. */
#define HTTP_JSON_BODY 1u   /* a body, or any Content-Type, must be
                               application/json or application/X+json
                               (charset UTF-8 if given), else 415 */
#define HTTP_STREAM_BODY 2u /* the handler runs on the headers, before any
                               byte of the body, and takes the body piece
                               by piece with http_body_stream; max_body
                               does not apply (see below) */

/*
 * Patterns are literal segments and "{name}" segments (name: [a-z_]{1,32}).
 * A parameter matches a segment of 1..128 bytes of [A-Za-z0-9_.-], and
 * never "." or "..". The first route in table order whose pattern and
 * method match wins, so list literal routes before parametrised ones. A
 * path no pattern matches is 404; a path some pattern matches with another
 * method is 405 with Allow. GET routes answer HEAD too.
 */
struct http_route {
    const char *method;
    const char *pattern;
    http_handler_fn handler;
    unsigned flags;
};

/*
 * Binds host:port and serves routes (copied) until http_stop. app is given
 * to every handler as rq->app. Returns NULL with a sentence in err (a bad
 * route, a bad host, the bind error) when it cannot start.
 */
struct http_server *http_start(const struct http_config *cfg,
                               const struct http_route *routes,
                               size_t nroutes, void *app, char *err,
                               size_t errlen);

/* The port actually bound (useful with port 0). */
unsigned http_port(const struct http_server *srv);
/* The HTTP threads it runs (--threads, or one a CPU it may use, at most 4). */
unsigned http_threads(const struct http_server *srv);

/*
 * Answers pending deferred replies with 503 and ends open streams, gives
 * those last bytes up to 2 s to go out, then closes every connection and
 * frees the server. Returns only when no server thread runs. NULL is a
 * no-op.
 */
void http_stop(struct http_server *srv);

/* Lookups. NULL when absent. Header names are case-insensitive. */
const char *http_param(const struct http_req *rq, const char *name);
const char *http_query(const struct http_req *rq, const char *name);
const char *http_header(const struct http_req *rq, const char *name);

/*
 * Replies. Each returns 0, or a negative EC_* code when it could not build
 * the reply, in which case it has replied 500 itself. A later reply
 * replaces an earlier one; headers accumulate.
 *
 * http_reply_json takes the reference to doc (NULL, as from a failed
 * json_pack, gives 500). Jansson cannot hold NaN or Inf (json_real refuses
 * them), so a handler must put null where a number is not finite.
 */
int http_reply_json(struct http_resp *rs, int status, json_t *doc);
int http_reply_text(struct http_resp *rs, int status,
                    const char *content_type, const char *text, size_t len);

/*
 * The one function that builds errors: application/problem+json with
 * type "about:blank", title (NULL: the status's reason phrase), status and
 * detail (a sentence naming what is wrong), plus the members of extra
 * (consumed; may be NULL) such as {"field": ...} or {"limit": ...,
 * "value": ...}. extra cannot replace title, status or detail. Invalid
 * UTF-8 in title or detail is replaced, so any bytes may be quoted.
 */
int http_reply_problem(struct http_resp *rs, int status, const char *title,
                       const char *detail, json_t *extra);

/*
 * Streaming request bodies (uploads), for HTTP_STREAM_BODY routes. The
 * handler is called as soon as the headers are in: it checks what it can
 * (auth, the query, whether the target exists) and either replies (the
 * body is then dropped unread, as for any early answer) or accepts the
 * body with http_body_stream. The body is never held in memory: each piece
 * goes to write(ctx, data, len) as it arrives. When the last piece is in,
 * end(ctx, rq, rs) replies as a handler does (it may also defer). abort(ctx)
 * is called instead when the client goes away (noticed within a fraction
 * of a second), the server stops, or the body outgrows limit, in which
 * case the reply is a 413 naming limit_name and the limit (a declared
 * Content-Length over it is refused on the headers, before a byte is read,
 * and before "100 Continue"); the sink is aborted at once, and the rest of
 * the body dropped as after any early answer.
 *
 * write runs on a server thread, like a handler: it may write to a file
 * but must not wait on anything slow. It returns 0, or < 0 to refuse the
 * rest (say, the disk is full): the rest of the body is then read and
 * dropped, and end is still called, to reply with what went wrong (ctx has
 * to remember it).
 *
 * From the call of http_body_stream on, exactly one of end and abort is
 * called, exactly once, on a server thread; each must free ctx. Even when
 * http_body_stream fails (it was not called from the header-time handler
 * of an HTTP_STREAM_BODY route, or the declared length is over the limit)
 * it calls abort(ctx) itself, and has replied with a problem; it returns
 * 0 or a negative EC_* code.
 */
struct http_body_ops {
    int (*write)(void *ctx, const char *data, size_t len);
    int (*end)(void *ctx, struct http_req *rq, struct http_resp *rs);
    void (*abort)(void *ctx);
};

int http_body_stream(struct http_resp *rs, size_t limit,
                     const char *limit_name, const struct http_body_ops *ops,
                     void *ctx);

/* An extra header (Location, Retry-After, ETag, ...): name is a token,
   value has no CR, LF or NUL. EC_EINVAL or EC_ELIMIT otherwise. */
int http_reply_header(struct http_resp *rs, const char *name,
                      const char *value);

/*
 * The body as JSON, parsed with JSON_REJECT_DUPLICATES. On failure replies
 * 400 itself, naming Jansson's line and column, and returns NULL. New
 * reference.
 */
json_t *http_body_json(const struct http_req *rq, struct http_resp *rs);

/* 1 when the n bytes of s are a token an "Authorization: Bearer" header
   can carry: 1..n of A-Z a-z 0-9 and - . _ ~ + / = (RFC 6750's b64token). */
int http_bearer_valid(const char *s, size_t n);

/* The reason phrase of a status ("Not Found"), "Unknown" if not listed. */
const char *http_status_phrase(int status);

/*
 * Long-poll. In a handler, http_defer parks the request instead of
 * replying: the connection waits, holding no thread, until some thread
 * calls http_deferred_finish or timeout_ms passes, when on_timeout(rs, arg)
 * fills the reply instead (NULL: 204 No Content). Fill functions run
 * without any lock of this module held, on any thread; they reply with the
 * http_reply_* functions and must not block.
 *
 * The caller owns one reference to the handle and must give it back with
 * exactly one http_deferred_finish, from any thread, even after the
 * timeout or http_stop. It returns 0 when fill made the reply, EC_ETIMEOUT
 * when the timeout or http_stop came first (fill was not called). With
 * fill NULL it only gives the handle back and returns 0: the timeout will
 * answer. http_defer returns NULL (with a 500 or 503 replied) on failure.
 * After http_defer the handler replies nothing more.
 */
typedef void (*http_fill_fn)(struct http_resp *rs, void *arg);

struct http_deferred *http_defer(struct http_resp *rs, unsigned timeout_ms,
                                 http_fill_fn on_timeout, void *arg);
int http_deferred_finish(struct http_deferred *d, http_fill_fn fill,
                         void *arg);

/*
 * Streaming (Server-Sent Events). produce(arg, st) is called on a server
 * thread whenever the stream may send: first at once, then after each
 * http_stream_wake. It appends with http_stream_write or http_sse_event
 * and returns HTTP_STREAM_MORE, or HTTP_STREAM_END to end the response
 * once what it wrote is sent. With keepalive_ms > 0 an SSE comment
 * (": keep-alive") goes out whenever the stream has been quiet that long;
 * it is also how a client that went away is noticed. on_close(arg) is
 * called exactly once, on a server thread, when the stream is over for any
 * reason (ended, client gone, http_stop); produce is not called after it.
 *
 * The caller owns one reference to the returned handle, to wake the stream
 * from any thread, and gives it back with http_stream_release. NULL (with
 * 500 replied) on failure; on_close is then not called.
 */
#define HTTP_STREAM_MORE 0
#define HTTP_STREAM_END 1

typedef int (*http_stream_fn)(void *arg, struct http_stream *st);
typedef void (*http_close_fn)(void *arg);

struct http_stream *http_reply_stream(struct http_resp *rs, int status,
                                      const char *content_type,
                                      unsigned keepalive_ms,
                                      http_stream_fn produce,
                                      http_close_fn on_close, void *arg);

/* Only inside produce. EC_ELIMIT beyond HTTP_STREAM_BUF_MAX queued bytes. */
int http_stream_write(struct http_stream *st, const void *data, size_t len);

/* One event; event and id may be NULL and must not hold CR or LF; data is
   split into one "data:" line per line. Only inside produce. */
int http_sse_event(struct http_stream *st, const char *event, const char *id,
                   const char *data);

/* Any thread. Returns 0, or EC_EPEER when the stream is already over. */
int http_stream_wake(struct http_stream *st);
void http_stream_release(struct http_stream *st);   /* NULL is a no-op */

/*
 * Request counters by route, method and status, and a latency histogram,
 * in Prometheus text format (ecopt_http_requests_total,
 * ecopt_http_request_duration_seconds). Requests no route matched count
 * under route="unmatched". Malloc'd; NULL when out of memory.
 */
char *http_metrics_text(const struct http_server *srv);

/*
 * The parsers, pure and exposed for tests and fuzzing; they treat their
 * input as hostile.
 *
 * http_query_parse decodes a raw query string (without '?') of
 * application/x-www-form-urlencoded pairs: '+' is a space, "%XX" a byte,
 * "k" alone has value "", empty pairs are skipped. Fails with EC_EPARSE
 * (a bad escape, an empty name, a NUL byte, invalid UTF-8) or EC_ELIMIT (a
 * limit above), with a sentence and the parameter's name, if known, in err.
 */
struct http_query {
    size_t count;
    struct http_kv item[HTTP_QUERY_MAX_PARAMS];
    char *storage;                  /* owns the strings */
};

struct http_parse_error {
    char param[HTTP_QUERY_MAX_KEY + 1];     /* "" when not known */
    char detail[200];
};

int http_query_parse(const char *raw, size_t len, struct http_query *q,
                     struct http_parse_error *err);
void http_query_free(struct http_query *q);     /* leaves it empty */

/*
 * Matches a raw path against one pattern. Returns 1 and fills params
 * (pointing into buf, which needs strlen(path) + strlen(pattern) + 2
 * bytes) on a match; 0 when the literal segments differ; -1 when they
 * match but a parameter is not valid, with a sentence in err when err is
 * not NULL.
 */
int http_path_match(const char *pattern, const char *path,
                    struct http_kv params[HTTP_MAX_PATH_PARAMS],
                    size_t *nparams, char *buf,
                    struct http_parse_error *err);

#endif
