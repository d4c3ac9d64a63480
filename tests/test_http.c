/*
 * Tests of the HTTP plumbing: the pure parsers table-driven and hostile,
 * then the real server on port 0 with demo routes, driven by libcurl (easy
 * and multi) and raw sockets: routing, the query, bodies and their limit,
 * problem+json, long-poll, SSE, 200 concurrent clients, slow clients and
 * stopping with clients connected. Every wait has a deadline.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

#include <curl/curl.h>
#include <jansson.h>

#include "ecopt/error.h"
#include "http.h"
#include "testutil.h"

#define MAX_BODY 65536
#define MAX_WAITERS 256

/* ------------------------------------------------------------------ */
/* The demo application                                                 */

/* Long-poll: parked replies the test (or POST /notify) finishes. */
struct waiters {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct http_deferred *d[MAX_WAITERS];
    int n;
};

/* SSE: events queued by the test, pulled by the producer. */
struct channel {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct http_stream *st;
    const char *events[8];
    int nevents, sent, end, opened, closed;
};

static struct app {
    struct waiters w;
    struct channel ch;
    atomic_int raw_calls;
    atomic_int header_rc[4];    /* what http_reply_header said in /retry */
    atomic_int sse_bad_rc;      /* what http_sse_event said to a bad name */
    atomic_int sink_begun;      /* streamed bodies taken ... */
    atomic_int sink_ended;      /* ... and how each went */
    atomic_int sink_aborted;
    atomic_int sink_writes;     /* write calls, all bodies */
} A;

static struct http_server *S;
static unsigned PORT;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int h_item(struct http_req *rq, struct http_resp *rs)
{
    json_t *q = json_object();

    for (size_t i = 0; i < rq->nquery; i++)
        if (!json_object_get(q, rq->query[i].key))
            json_object_set_new(q, rq->query[i].key,
                                json_string(rq->query[i].value));
    return http_reply_json(rs, 200,
                           json_pack("{s:s,s:s,s:o}", "id",
                                     http_param(rq, "id"), "route", rq->route,
                                     "query", q));
}

static int h_item_stats(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    return http_reply_json(rs, 200, json_pack("{s:b}", "stats", 1));
}

static int h_item_delete(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    return http_reply_text(rs, 204, NULL, NULL, 0);
}

static int h_run(struct http_req *rq, struct http_resp *rs)
{
    return http_reply_json(rs, 200,
                           json_pack("{s:s,s:s}", "job", http_param(rq, "job"),
                                     "run", http_param(rq, "run")));
}

/* decode -> check -> call -> encode, as the real handlers will. */
static int h_echo(struct http_req *rq, struct http_resp *rs)
{
    json_t *doc = http_body_json(rq, rs);   /* replies 400 itself */

    if (!doc)
        return EC_EPARSE;
    http_reply_header(rs, "Location", "/items/echoed");
    return http_reply_json(rs, 201, doc);
}

static int h_raw(struct http_req *rq, struct http_resp *rs)
{
    atomic_fetch_add(&A.raw_calls, 1);
    return http_reply_json(rs, 200, json_pack("{s:I}", "len",
                                              (json_int_t)rq->body_len));
}

static int h_nan(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    /* Jansson refuses NaN, so the document is NULL and the reply a 500. */
    return http_reply_json(rs, 200, json_pack("{s:f}", "x", NAN));
}

static int h_noreply(struct http_req *rq, struct http_resp *rs)
{
    (void)rq, (void)rs;
    return EC_EINVAL;
}

static int h_whoami(struct http_req *rq, struct http_resp *rs)
{
    const char *t = http_header(rq, "X-Test");

    return http_reply_json(
        rs, 200,
        json_pack("{s:s?,s:s?,s:s,s:s}", "token", rq->token, "x_test", t,
                  "client", rq->client, "request_id", rq->request_id));
}

static int h_retry(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    /* Header injection and the reply's own headers are refused. */
    A.header_rc[0] = http_reply_header(rs, "X-Evil", "a\r\nSet-Cookie: x");
    A.header_rc[1] = http_reply_header(rs, "Bad Name", "x");
    A.header_rc[2] = http_reply_header(rs, "content-length", "1");
    A.header_rc[3] = http_reply_header(rs, "Retry-After", "7");
    return http_reply_problem(
        rs, 429, NULL, "the limit of 2 queued jobs per token is reached",
        json_pack("{s:s,s:i,s:s}", "limit", "queued_jobs", "value", 2,
                  "status", "ignored"));
}

static void fill_event(struct http_resp *rs, void *arg)
{
    http_reply_json(rs, 200, json_pack("{s:s}", "event", (const char *)arg));
}

static void fill_timeout(struct http_resp *rs, void *arg)
{
    (void)arg;
    http_reply_json(rs, 200, json_pack("{s:b}", "timeout", 1));
}

static int h_wait(struct http_req *rq, struct http_resp *rs)
{
    const char *t = http_query(rq, "timeout_ms");
    int plain = http_query(rq, "default") != NULL;
    struct http_deferred *d;

    d = http_defer(rs, t ? (unsigned)atoi(t) : 10000,
                   plain ? NULL : fill_timeout, NULL);
    if (!d)
        return EC_ENOMEM;
    pthread_mutex_lock(&A.w.mu);
    if (A.w.n < MAX_WAITERS)
        A.w.d[A.w.n++] = d;
    else
        http_deferred_finish(d, NULL, NULL);
    pthread_cond_broadcast(&A.w.cv);
    pthread_mutex_unlock(&A.w.mu);
    return 0;
}

/* Finishes every parked reply from a server thread. */
static int h_notify(struct http_req *rq, struct http_resp *rs)
{
    const char *ev = http_query(rq, "event");
    struct http_deferred *taken[MAX_WAITERS];
    int n, woken = 0;

    pthread_mutex_lock(&A.w.mu);
    n = A.w.n;
    memcpy(taken, A.w.d, (size_t)n * sizeof taken[0]);
    A.w.n = 0;
    pthread_mutex_unlock(&A.w.mu);
    for (int i = 0; i < n; i++)
        woken += http_deferred_finish(taken[i], fill_event,
                                      (void *)(ev ? ev : "none")) == 0;
    return http_reply_json(rs, 200, json_pack("{s:i}", "woken", woken));
}

static int produce(void *arg, struct http_stream *st)
{
    struct channel *ch = arg;
    int end;

    A.sse_bad_rc = http_sse_event(st, "two\nlines", NULL, "x");
    pthread_mutex_lock(&ch->mu);
    while (ch->sent < ch->nevents) {
        char id[16];

        snprintf(id, sizeof id, "%d", ch->sent + 1);
        ck_assert_int_eq(http_sse_event(st, "tick", id,
                                        ch->events[ch->sent]), 0);
        ch->sent++;
    }
    end = ch->end;
    pthread_mutex_unlock(&ch->mu);
    return end ? HTTP_STREAM_END : HTTP_STREAM_MORE;
}

static void on_close(void *arg)
{
    struct channel *ch = arg;

    pthread_mutex_lock(&ch->mu);
    ch->closed++;
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

static int h_events(struct http_req *rq, struct http_resp *rs)
{
    const char *k = http_query(rq, "keepalive_ms");
    struct http_stream *st;

    st = http_reply_stream(rs, 200, "text/event-stream",
                           k ? (unsigned)atoi(k) : 0, produce, on_close,
                           &A.ch);
    if (!st)
        return EC_ENOMEM;
    pthread_mutex_lock(&A.ch.mu);
    if (A.ch.st)
        http_stream_release(st);    /* one stream per test is enough */
    else
        A.ch.st = st;
    A.ch.opened++;
    pthread_cond_broadcast(&A.ch.cv);
    pthread_mutex_unlock(&A.ch.mu);
    return 0;
}

/*
 * Streamed bodies: a sink that hashes (FNV-1a) and counts what it is given
 * and keeps none of it. ?limit=N is its limit, ?reject=1 answers on the
 * headers, ?fail_after=N makes write refuse past N bytes, ?defer=1 makes
 * end defer its reply to the timer.
 */
struct sink {
    size_t bytes, pieces, fail_after;
    uint64_t hash;
    int failed, defer;
};

static uint64_t fnv1a(uint64_t h, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#define FNV_SEED 0xcbf29ce484222325ull

static int sink_write(void *ctx, const char *data, size_t len)
{
    struct sink *k = ctx;

    atomic_fetch_add(&A.sink_writes, 1);
    if (k->fail_after && k->bytes + len > k->fail_after) {
        k->failed = 1;
        return EC_EIO;
    }
    k->hash = fnv1a(k->hash, (const unsigned char *)data, len);
    k->bytes += len;
    k->pieces++;
    return 0;
}

static void fill_sink(struct http_resp *rs, void *arg)
{
    struct sink *k = arg;
    char hash[32];

    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)k->hash);
    http_reply_json(rs, 201,
                    json_pack("{s:I,s:I,s:s,s:b}", "bytes",
                              (json_int_t)k->bytes, "pieces",
                              (json_int_t)k->pieces, "fnv", hash, "deferred",
                              k->defer));
    free(k);
}

static int sink_end(void *ctx, struct http_req *rq, struct http_resp *rs)
{
    struct sink *k = ctx;

    (void)rq;
    atomic_fetch_add(&A.sink_ended, 1);
    if (k->failed) {
        free(k);
        return http_reply_problem(rs, 503, NULL, "the sink refused a write",
                                  NULL);
    }
    if (k->defer) {
        /* The timer fills the reply; the handle goes straight back. */
        struct http_deferred *d = http_defer(rs, 0, fill_sink, k);

        if (!d) {
            free(k);
            return EC_ENOMEM;
        }
        http_deferred_finish(d, NULL, NULL);
        return 0;
    }
    fill_sink(rs, k);
    return 0;
}

static void sink_abort(void *ctx)
{
    atomic_fetch_add(&A.sink_aborted, 1);
    free(ctx);
}

static const struct http_body_ops sink_ops = {sink_write, sink_end,
                                              sink_abort};

static int h_upload(struct http_req *rq, struct http_resp *rs)
{
    const char *limit = http_query(rq, "limit");
    const char *fail_after = http_query(rq, "fail_after");
    struct sink *k;

    if (http_query(rq, "reject"))
        return http_reply_problem(rs, 422, NULL, "rejected on the headers",
                                  NULL);
    k = calloc(1, sizeof *k);
    ck_assert_ptr_nonnull(k);
    k->hash = FNV_SEED;
    k->fail_after = fail_after ? (size_t)atol(fail_after) : 0;
    k->defer = http_query(rq, "defer") != NULL;
    atomic_fetch_add(&A.sink_begun, 1);
    return http_body_stream(rs, limit ? (size_t)atol(limit) : 1 << 20,
                            "upload_limit", &sink_ops, k);
}

/* Literal routes first: the first match in table order wins. */
static const struct http_route routes[] = {
    {"GET", "/items/stats", h_item_stats, 0},
    {"GET", "/items/{id}", h_item, 0},
    {"DELETE", "/items/{id}", h_item_delete, 0},
    {"GET", "/jobs/{job}/runs/{run}", h_run, 0},
    {"POST", "/echo", h_echo, HTTP_JSON_BODY},
    {"POST", "/raw", h_raw, 0},
    {"GET", "/nan", h_nan, 0},
    {"GET", "/noreply", h_noreply, 0},
    {"GET", "/whoami", h_whoami, 0},
    {"GET", "/retry", h_retry, 0},
    {"GET", "/wait", h_wait, 0},
    {"POST", "/notify", h_notify, 0},
    {"GET", "/events", h_events, 0},
    {"POST", "/upload", h_upload, HTTP_STREAM_BODY},
    {"POST", "/not-streamed", h_upload, 0},
};

#define NROUTES (sizeof routes / sizeof routes[0])

static void start_server(unsigned timeout_s, int quiet)
{
    struct http_config cfg = {0};
    char err[256] = "";

    cfg.port = 0;
    cfg.threads = 4;
    cfg.conn_timeout_s = timeout_s;
    cfg.max_body = MAX_BODY;
    cfg.access_log_off = quiet;
    S = http_start(&cfg, routes, NROUTES, &A, err, sizeof err);
    ck_assert_msg(S != NULL, "http_start: %s", err);
    PORT = http_port(S);
    ck_assert_uint_gt(PORT, 0);
}

static void setup(void)
{
    memset(&A, 0, sizeof A);
    pthread_mutex_init(&A.w.mu, NULL);
    pthread_cond_init(&A.w.cv, NULL);
    pthread_mutex_init(&A.ch.mu, NULL);
    pthread_cond_init(&A.ch.cv, NULL);
    start_server(10, 1);
}

/* Stops the server, then gives back whatever the app still holds: both
   are legal after http_stop. */
static void teardown(void)
{
    http_stop(S);
    S = NULL;
    for (int i = 0; i < A.w.n; i++)
        http_deferred_finish(A.w.d[i], NULL, NULL);
    A.w.n = 0;
    http_stream_release(A.ch.st);
    A.ch.st = NULL;
}

/* ------------------------------------------------------------------ */
/* Client helpers                                                       */

struct reply {
    long status;
    CURLcode rc;
    char *body;
    size_t len;
    char headers[8192];
    size_t hlen;
    curl_off_t uploaded;
    int abort_after_event;      /* SSE: hang up after the first event */
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    struct reply *r = ud;
    char *b = realloc(r->body, r->len + sz * n + 1);

    ck_assert_ptr_nonnull(b);
    r->body = b;
    memcpy(r->body + r->len, p, sz * n);
    r->len += sz * n;
    r->body[r->len] = '\0';
    if (r->abort_after_event && strstr(r->body, "\n\n"))
        return 0;
    return sz * n;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct reply *r = ud;
    size_t k = sz * n;

    if (r->hlen + k < sizeof r->headers) {
        memcpy(r->headers + r->hlen, p, k);
        r->hlen += k;
        r->headers[r->hlen] = '\0';
    }
    return k;
}

static void reply_free(struct reply *r)
{
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* A header of the reply (the last one, case-insensitive), or NULL. */
static const char *reply_header(const struct reply *r, const char *name,
                                char *buf, size_t len)
{
    const char *found = NULL;
    size_t nl = strlen(name);

    for (const char *p = r->headers; *p; p = strchr(p, '\n') + 1) {
        if (strncasecmp(p, name, nl) == 0 && p[nl] == ':')
            found = p + nl + 1;
        if (!strchr(p, '\n'))
            break;
    }
    if (!found)
        return NULL;
    while (*found == ' ')
        found++;
    snprintf(buf, len, "%.*s", (int)strcspn(found, "\r\n"), found);
    return buf;
}

static CURL *make_easy(const char *method, const char *path,
                       struct curl_slist *hdrs, const char *body, size_t len,
                       struct reply *r)
{
    CURL *e = curl_easy_init();
    size_t len_url = strlen(path) + 64;
    char *url = malloc(len_url);

    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_nonnull(url);
    snprintf(url, len_url, "http://127.0.0.1:%u%s", PORT, path);
    curl_easy_setopt(e, CURLOPT_URL, url);     /* curl keeps a copy */
    free(url);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);    /* keep "/.." as sent */
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    else
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    if (hdrs)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
    return e;
}

static void finish_easy(CURL *e, struct reply *r)
{
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(e, CURLINFO_SIZE_UPLOAD_T, &r->uploaded);
    curl_easy_cleanup(e);
}

/* One request on a fresh connection; hdr is NULL or "Name: value". */
static void request(const char *method, const char *path, const char *hdr,
                    const char *body, size_t len, struct reply *r)
{
    struct curl_slist *h = hdr ? curl_slist_append(NULL, hdr) : NULL;
    CURL *e;

    memset(r, 0, sizeof *r);
    e = make_easy(method, path, h, body, len, r);
    r->rc = curl_easy_perform(e);
    finish_easy(e, r);
    curl_slist_free_all(h);
}

static json_t *parse_body(const struct reply *r)
{
    json_error_t je;
    json_t *doc = json_loadb(r->body ? r->body : "", r->len, 0, &je);

    ck_assert_msg(doc != NULL, "reply is not JSON (%s): %.300s", je.text,
                  r->body ? r->body : "");
    return doc;
}

static json_t *expect_json(const struct reply *r, long status)
{
    char ct[128];

    ck_assert_msg(r->rc == CURLE_OK, "curl: %s", curl_easy_strerror(r->rc));
    ck_assert_msg(r->status == status, "status %ld, want %ld; body %.300s",
                  r->status, status, r->body ? r->body : "");
    ck_assert_ptr_nonnull(reply_header(r, "Content-Type", ct, sizeof ct));
    ck_assert_str_eq(ct, "application/json");
    return parse_body(r);
}

/* A problem+json reply as RFC 9457 has it, whose detail holds phrase. */
static json_t *expect_problem(const struct reply *r, long status,
                              const char *phrase)
{
    char ct[128];
    json_t *doc;
    const char *detail;

    ck_assert_msg(r->rc == CURLE_OK, "curl: %s", curl_easy_strerror(r->rc));
    ck_assert_msg(r->status == status, "status %ld, want %ld; body %.300s",
                  r->status, status, r->body ? r->body : "");
    ck_assert_ptr_nonnull(reply_header(r, "Content-Type", ct, sizeof ct));
    ck_assert_str_eq(ct, "application/problem+json");
    doc = parse_body(r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "type")),
                     "about:blank");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "title")),
                     http_status_phrase((int)status));
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "status")),
                     status);
    detail = json_string_value(json_object_get(doc, "detail"));
    ck_assert_ptr_nonnull(detail);
    ck_assert_msg(strstr(detail, phrase) != NULL,
                  "detail \"%s\" lacks \"%s\"", detail, phrase);
    return doc;
}

static void get_problem(const char *path, long status, const char *phrase)
{
    struct reply r;

    request("GET", path, NULL, NULL, 0, &r);
    json_decref(expect_problem(&r, status, phrase));
    reply_free(&r);
}

/* curl multi: many transfers driven from this thread. */
struct transfer {
    CURL *e;
    struct reply r;
    int done;
};

/* Drives m for up to ms; marks finished transfers. */
static void pump(CURLM *m, struct transfer *t, int n, int ms)
{
    CURLMsg *msg;
    int running, left;

    curl_multi_perform(m, &running);
    curl_multi_poll(m, NULL, 0, ms, NULL);
    curl_multi_perform(m, &running);
    while ((msg = curl_multi_info_read(m, &left)))
        if (msg->msg == CURLMSG_DONE)
            for (int i = 0; i < n; i++)
                if (t[i].e == msg->easy_handle) {
                    t[i].r.rc = msg->data.result;
                    t[i].done = 1;
                }
}

static int all_done(const struct transfer *t, int n)
{
    for (int i = 0; i < n; i++)
        if (!t[i].done)
            return 0;
    return 1;
}

static void start_transfer(CURLM *m, struct transfer *t, const char *path)
{
    memset(&t->r, 0, sizeof t->r);
    t->done = 0;
    t->e = make_easy("GET", path, NULL, NULL, 0, &t->r);
    curl_multi_add_handle(m, t->e);
}

static void end_transfer(CURLM *m, struct transfer *t)
{
    curl_multi_remove_handle(m, t->e);
    finish_easy(t->e, &t->r);
    t->e = NULL;
}

static int waiters_count(void)
{
    int n;

    pthread_mutex_lock(&A.w.mu);
    n = A.w.n;
    pthread_mutex_unlock(&A.w.mu);
    return n;
}

/* Drives m until cond(arg) holds; fails after ms. */
static void pump_until(CURLM *m, struct transfer *t, int n,
                       int (*cond)(int), int want, int ms, const char *what)
{
    uint64_t end = now_ms() + (uint64_t)ms;

    while (!cond(want)) {
        ck_assert_msg(now_ms() < end, "timed out waiting for %s", what);
        pump(m, t, n, 10);
    }
}

static int have_waiters(int want)
{
    return waiters_count() >= want;
}

static int channel_opened(int want)
{
    int v;

    pthread_mutex_lock(&A.ch.mu);
    v = A.ch.opened >= want;
    pthread_mutex_unlock(&A.ch.mu);
    return v;
}

/* Raw sockets, for what curl will not do: stall halfway, sit idle. */
static int raw_connect(void)
{
    struct sockaddr_in sa = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)PORT);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* Reads until EOF or error; returns ms waited, or -1 past the deadline. */
static long raw_wait_closed(int fd, int deadline_ms)
{
    uint64_t t0 = now_ms(), end = t0 + (uint64_t)deadline_ms;
    char buf[4096];

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        uint64_t now = now_ms();
        ssize_t n;

        if (now >= end)
            return -1;
        if (poll(&p, 1, (int)(end - now)) <= 0)
            continue;
        n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return (long)(now_ms() - t0);
    }
}

/* ------------------------------------------------------------------ */
/* Pure parsers                                                         */

struct query_case {
    const char *raw;
    int rc;
    const char *pairs;          /* "k=v|k=v" when rc == 0 */
    const char *phrase;         /* in the detail when rc < 0 */
    const char *param;          /* err.param when rc < 0 */
};

static const struct query_case query_cases[] = {
    {"", 0, "", NULL, NULL},
    {"a=1&b=two", 0, "a=1|b=two", NULL, NULL},
    {"a=%41%42+c%2b", 0, "a=AB c+", NULL, NULL},
    {"flag&x=", 0, "flag=|x=", NULL, NULL},
    {"&&a=1&&b=2&", 0, "a=1|b=2", NULL, NULL},
    {"a=1=2", 0, "a=1=2", NULL, NULL},
    {"a=1&a=2", 0, "a=1|a=2", NULL, NULL},
    {"e=%C3%A9", 0, "e=\xC3\xA9", NULL, NULL},
    {"%6Eame=v", 0, "name=v", NULL, NULL},
    {"a=%zz", EC_EPARSE, NULL, "malformed percent-escape \"%zz\"", "a"},
    {"a=%4", EC_EPARSE, NULL, "malformed percent-escape \"%4\"", "a"},
    {"a=x%", EC_EPARSE, NULL, "malformed percent-escape \"%\"", "a"},
    {"a=%%41", EC_EPARSE, NULL, "percent-escape", "a"},
    {"%g0=1", EC_EPARSE, NULL, "name has a malformed percent-escape", ""},
    {"=1", EC_EPARSE, NULL, "empty name", ""},
    {"a=1&=2", EC_EPARSE, NULL, "empty name (at byte 4", ""},
    {"a=%00", EC_EPARSE, NULL, "NUL byte", "a"},
    {"%00=1", EC_EPARSE, NULL, "NUL byte", ""},
    {"a=%ff", EC_EPARSE, NULL, "not valid UTF-8", "a"},
    {"a=%C0%AF", EC_EPARSE, NULL, "not valid UTF-8", "a"},     /* overlong */
    {"a=%ED%A0%80", EC_EPARSE, NULL, "not valid UTF-8", "a"},  /* surrogate */
    {"a=%F4%90%80%80", EC_EPARSE, NULL, "not valid UTF-8", "a"},
    {"a=\xC3", EC_EPARSE, NULL, "not valid UTF-8", "a"},
};

static void check_pairs(const struct http_query *q, const char *pairs)
{
    char want[256], got[256] = "";

    snprintf(want, sizeof want, "%s", pairs);
    for (size_t i = 0; i < q->count; i++) {
        size_t o = strlen(got);

        snprintf(got + o, sizeof got - o, "%s%s=%s", i ? "|" : "",
                 q->item[i].key, q->item[i].value);
    }
    ck_assert_str_eq(got, want);
}

START_TEST(test_query_parse_table)
{
    for (size_t i = 0; i < sizeof query_cases / sizeof query_cases[0]; i++) {
        const struct query_case *c = &query_cases[i];
        struct http_query q;
        struct http_parse_error err;
        int rc = http_query_parse(c->raw, strlen(c->raw), &q, &err);

        ck_assert_msg(rc == c->rc, "\"%s\": rc %d, want %d (%s)", c->raw, rc,
                      c->rc, err.detail);
        if (rc == 0) {
            check_pairs(&q, c->pairs);
        } else {
            ck_assert_msg(strstr(err.detail, c->phrase) != NULL,
                          "\"%s\": detail \"%s\" lacks \"%s\"", c->raw,
                          err.detail, c->phrase);
            ck_assert_str_eq(err.param, c->param);
            ck_assert_uint_eq(q.count, 0);
            ck_assert_ptr_null(q.storage);
        }
        http_query_free(&q);
    }
}
END_TEST

/* Each limit is inclusive; one past it fails naming the limit. */
START_TEST(test_query_parse_limits)
{
    static char raw[HTTP_QUERY_MAX_LEN + 64];
    struct http_query q;
    struct http_parse_error err;
    size_t n;

    /* 32 parameters pass, 33 fail. */
    n = 0;
    for (int i = 0; i < HTTP_QUERY_MAX_PARAMS; i++)
        n += (size_t)sprintf(raw + n, "%sp%d=%d", i ? "&" : "", i, i);
    ck_assert_int_eq(http_query_parse(raw, n, &q, &err), 0);
    ck_assert_uint_eq(q.count, HTTP_QUERY_MAX_PARAMS);
    http_query_free(&q);
    n += (size_t)sprintf(raw + n, "&one=more");
    ck_assert_int_eq(http_query_parse(raw, n, &q, &err), EC_ELIMIT);
    ck_assert_ptr_nonnull(strstr(err.detail, "limit of 32 parameters"));

    /* A value of 2048 decoded bytes passes, 2049 fails; %41 counts 1. */
    n = (size_t)sprintf(raw, "v=");
    for (int i = 0; i < HTTP_QUERY_MAX_VALUE; i++)
        n += (size_t)sprintf(raw + n, "%%41");
    ck_assert_int_eq(http_query_parse(raw, n, &q, &err), 0);
    ck_assert_uint_eq(strlen(q.item[0].value), HTTP_QUERY_MAX_VALUE);
    http_query_free(&q);
    n = (size_t)sprintf(raw, "v=");
    memset(raw + n, 'x', HTTP_QUERY_MAX_VALUE + 1);
    n += HTTP_QUERY_MAX_VALUE + 1;
    ck_assert_int_eq(http_query_parse(raw, n, &q, &err), EC_ELIMIT);
    ck_assert_ptr_nonnull(strstr(err.detail, "limit of 2048 bytes"));
    ck_assert_str_eq(err.param, "v");

    /* A name of 64 bytes passes, 65 fails. */
    memset(raw, 'k', HTTP_QUERY_MAX_KEY);
    strcpy(raw + HTTP_QUERY_MAX_KEY, "=1");
    ck_assert_int_eq(http_query_parse(raw, strlen(raw), &q, &err), 0);
    http_query_free(&q);
    memset(raw, 'k', HTTP_QUERY_MAX_KEY + 1);
    strcpy(raw + HTTP_QUERY_MAX_KEY + 1, "=1");
    ck_assert_int_eq(http_query_parse(raw, strlen(raw), &q, &err),
                     EC_ELIMIT);
    ck_assert_ptr_nonnull(strstr(err.detail, "limit of 64 bytes"));

    /* The whole string: 8192 bytes pass, 8193 fail before any decoding. */
    n = 0;
    for (int i = 0; i < 8; i++) {
        n += (size_t)sprintf(raw + n, "k%d=", i);
        memset(raw + n, 'x', 1000);
        n += 1000;
        raw[n++] = '&';
    }
    n += (size_t)sprintf(raw + n, "z=");
    memset(raw + n, 'y', HTTP_QUERY_MAX_LEN - n + 1);
    ck_assert_int_eq(http_query_parse(raw, HTTP_QUERY_MAX_LEN, &q, &err), 0);
    ck_assert_uint_eq(q.count, 9);
    http_query_free(&q);
    ck_assert_int_eq(http_query_parse(raw, HTTP_QUERY_MAX_LEN + 1, &q, &err),
                     EC_ELIMIT);
    ck_assert_ptr_nonnull(strstr(err.detail, "8193 bytes, longer than the "
                                             "limit of 8192"));
}
END_TEST

/* Every truncation of a rich query and random bytes: no crash, and what
   is accepted is valid UTF-8 without NULs (ASan checks the memory). */
START_TEST(test_query_parse_hostile)
{
    static const char rich[] =
        "after=10&limit=%32%30&name=caf%C3%A9+au+lait&flag&&x=%7e&y=a%2Bb";
    unsigned seed = 12345;
    char buf[256];

    for (size_t n = 0; n <= sizeof rich - 1; n++) {
        struct http_query q;
        struct http_parse_error err;
        int rc = http_query_parse(rich, n, &q, &err);

        ck_assert_msg(rc == 0 || rc == EC_EPARSE, "cut at %zu: %d", n, rc);
        http_query_free(&q);
    }
    for (int it = 0; it < 20000; it++) {
        static const char alphabet[] = "a=&%+0fF\xC3\xA9\xFF\x00z";
        size_t n = (size_t)(rand_r(&seed) % sizeof buf);
        struct http_query q;
        struct http_parse_error err;

        for (size_t i = 0; i < n; i++)
            buf[i] = (rand_r(&seed) & 1)
                         ? alphabet[rand_r(&seed) % (sizeof alphabet - 1)]
                         : (char)rand_r(&seed);
        if (http_query_parse(buf, n, &q, &err) == 0) {
            for (size_t i = 0; i < q.count; i++) {
                json_t *v = json_string(q.item[i].value);  /* UTF-8 only */

                ck_assert_uint_gt(strlen(q.item[i].key), 0);
                ck_assert_msg(v != NULL, "value %zu is not UTF-8", i);
                json_decref(v);
            }
        } else {
            ck_assert_uint_gt(strlen(err.detail), 0);
        }
        http_query_free(&q);
    }
}
END_TEST

struct path_case {
    const char *pattern, *path;
    int rc;
    const char *params;         /* "k=v|k=v" when rc == 1 */
};

static const struct path_case path_cases[] = {
    {"/", "/", 1, ""},
    {"/v1/jobs", "/v1/jobs", 1, ""},
    {"/v1/jobs", "/v1/jobs/", 0, NULL},
    {"/v1/jobs", "/v1/job", 0, NULL},
    {"/v1/jobs", "/v1//jobs", 0, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/j-1.2_x", 1, "id=j-1.2_x"},
    {"/v1/jobs/{id}/metrics", "/v1/jobs/42/metrics", 1, "id=42"},
    {"/v1/jobs/{id}/metrics", "/v1/jobs/42/metric", 0, NULL},
    {"/v1/jobs/{id}/metrics", "/v1/jobs/42", 0, NULL},
    {"/a/{x}/b/{y}", "/a/1/b/2", 1, "x=1|y=2"},
    {"/v1/jobs/{id}", "/v1/jobs/", -1, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/..", -1, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/.", -1, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/a%2Fb", -1, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/a b", -1, NULL},
    {"/v1/jobs/{id}", "/v1/jobs/a/b", 0, NULL},
    {"/v1/jobs/{id}/x", "/v1/jobs/a%20/y", 0, NULL},  /* literal decides */
};

START_TEST(test_path_match_table)
{
    char long_id[HTTP_PARAM_MAX + 20], path[HTTP_PARAM_MAX + 40];
    struct http_kv params[HTTP_MAX_PATH_PARAMS];
    struct http_parse_error err;
    char buf[512];
    size_t n;

    for (size_t i = 0; i < sizeof path_cases / sizeof path_cases[0]; i++) {
        const struct path_case *c = &path_cases[i];
        int rc = http_path_match(c->pattern, c->path, params, &n, buf, &err);

        ck_assert_msg(rc == c->rc, "%s ~ %s: %d, want %d", c->pattern,
                      c->path, rc, c->rc);
        if (rc == 1) {
            char got[256] = "";

            for (size_t k = 0; k < n; k++)
                snprintf(got + strlen(got), sizeof got - strlen(got),
                         "%s%s=%s", k ? "|" : "", params[k].key,
                         params[k].value);
            ck_assert_str_eq(got, c->params);
        }
        if (rc == -1) {
            ck_assert_str_eq(err.param, "id");
            ck_assert_ptr_nonnull(strstr(err.detail, "1..128 characters"));
        }
    }
    /* 128 characters pass, 129 fail. */
    memset(long_id, 'a', HTTP_PARAM_MAX);
    long_id[HTTP_PARAM_MAX] = '\0';
    snprintf(path, sizeof path, "/j/%s", long_id);
    ck_assert_int_eq(http_path_match("/j/{id}", path, params, &n, buf, &err),
                     1);
    snprintf(path, sizeof path, "/j/%sb", long_id);
    ck_assert_int_eq(http_path_match("/j/{id}", path, params, &n, buf, &err),
                     -1);
}
END_TEST

static int open_fds(void)
{
    int n = 0;

    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) != -1;
    return n;
}

START_TEST(test_start_errors)
{
    static const struct http_route dup[] = {{"GET", "/a", h_item_stats, 0},
                                            {"GET", "/a", h_item_stats, 0}};
    static const struct http_route bad[] = {{"GET", "/a/{Id}", h_item, 0}};
    static const struct http_route lit[] = {{"GET", "/a b", h_item, 0}};
    static const struct http_route low[] = {{"get", "/a", h_item, 0}};
    struct http_config cfg = {0};
    char err[256];

    ck_assert_ptr_null(http_start(&cfg, dup, 2, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "already route 0"));
    ck_assert_ptr_null(http_start(&cfg, bad, 1, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "[a-z_]"));
    ck_assert_ptr_null(http_start(&cfg, lit, 1, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "literal segment"));
    ck_assert_ptr_null(http_start(&cfg, low, 1, NULL, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "upper-case"));
    cfg.host = "example.org";
    ck_assert_ptr_null(http_start(&cfg, routes, NROUTES, NULL, err,
                                  sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "not a numeric IPv4 or IPv6"));
    /* The port the fixture's server holds is taken: the reason is given. */
    cfg.host = NULL;
    cfg.port = PORT;
    ck_assert_ptr_null(http_start(&cfg, routes, NROUTES, NULL, err,
                                  sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "Address already in use"));
    http_stop(NULL);    /* a no-op */

    /* Start and stop leave no descriptor behind (MHD's epoll and eventfd
       ones, our listening socket) and no thread (ASan/TSan would see). */
    {
        int before = open_fds();
        struct http_server *other;

        cfg.port = 0;
        for (int i = 0; i < 3; i++) {
            other = http_start(&cfg, routes, NROUTES, NULL, err, sizeof err);
            ck_assert_msg(other != NULL, "%s", err);
            ck_assert_uint_ne(http_port(other), PORT);
            http_stop(other);
        }
        ck_assert_int_eq(open_fds(), before);
    }
}
END_TEST

/* ------------------------------------------------------------------ */
/* Routing                                                              */

START_TEST(test_routes_ok)
{
    struct reply r;
    json_t *doc;
    char buf[128];

    request("GET", "/items/abc-1.2_Z", NULL, NULL, 0, &r);
    doc = expect_json(&r, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "id")),
                     "abc-1.2_Z");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "route")),
                     "/items/{id}");
    ck_assert_ptr_nonnull(reply_header(&r, "X-Request-Id", buf, sizeof buf));
    ck_assert_uint_eq(strlen(buf), 16);
    json_decref(doc);
    reply_free(&r);

    request("GET", "/items/stats", NULL, NULL, 0, &r);    /* literal wins */
    doc = expect_json(&r, 200);
    ck_assert(json_is_true(json_object_get(doc, "stats")));
    json_decref(doc);
    reply_free(&r);

    request("GET", "/jobs/j1/runs/r-2.x", NULL, NULL, 0, &r);
    doc = expect_json(&r, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "job")), "j1");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "run")), "r-2.x");
    json_decref(doc);
    reply_free(&r);

    /* HEAD answers like GET, without the body. */
    request("HEAD", "/items/abc", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_str_eq(reply_header(&r, "Content-Type", buf, sizeof buf),
                     "application/json");
    reply_free(&r);

    request("DELETE", "/items/abc", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.status, 204);
    ck_assert_uint_eq(r.len, 0);
    reply_free(&r);

    /* The client's request id is kept when it is a sane one. */
    request("GET", "/items/a", "X-Request-Id: trace-42", NULL, 0, &r);
    ck_assert_str_eq(reply_header(&r, "X-Request-Id", buf, sizeof buf),
                     "trace-42");
    reply_free(&r);
    request("GET", "/items/a", "X-Request-Id: bad id!", NULL, 0, &r);
    ck_assert_str_ne(reply_header(&r, "X-Request-Id", buf, sizeof buf),
                     "bad id!");
    reply_free(&r);
}
END_TEST

START_TEST(test_not_found_and_method)
{
    struct reply r;
    json_t *doc;
    char allow[128];

    get_problem("/nowhere", 404, "nothing at \"/nowhere\"");
    get_problem("/items/abc/extra", 404, "nothing at");
    get_problem("/items/a%20b", 404, "path parameter 'id' must be 1..128");
    get_problem("/items/..", 404, "not \".\" or \"..\"");
    get_problem("/items/%C3%28", 404, "path parameter 'id'");
    {
        char path[200] = "/items/";

        memset(path + 7, 'x', 129);
        path[7 + 129] = '\0';
        get_problem(path, 404, "1..128 characters");
    }

    /* A known path with another method: 405 and the methods it takes. */
    request("POST", "/items/abc", NULL, "{}", 2, &r);
    doc = expect_problem(&r, 405, "POST is not allowed");
    ck_assert_str_eq(reply_header(&r, "Allow", allow, sizeof allow),
                     "GET, HEAD, DELETE");
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "allow")), 3);
    json_decref(doc);
    reply_free(&r);

    request("PATCH", "/echo", NULL, NULL, 0, &r);
    json_decref(expect_problem(&r, 405, "allowed: POST"));
    ck_assert_str_eq(reply_header(&r, "Allow", allow, sizeof allow), "POST");
    reply_free(&r);

    /* Extra headers reach the client; extra members join the problem but
       do not replace its own. */
    request("GET", "/retry", NULL, NULL, 0, &r);
    doc = expect_problem(&r, 429, "limit of 2 queued jobs");
    ck_assert_str_eq(reply_header(&r, "Retry-After", allow, sizeof allow),
                     "7");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")),
                     "queued_jobs");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "value")), 2);
    ck_assert_int_eq(A.header_rc[0], EC_EINVAL);
    ck_assert_int_eq(A.header_rc[1], EC_EINVAL);
    ck_assert_int_eq(A.header_rc[2], EC_EINVAL);
    ck_assert_int_eq(A.header_rc[3], 0);
    ck_assert_ptr_null(reply_header(&r, "Set-Cookie", allow, sizeof allow));
    json_decref(doc);
    reply_free(&r);

    get_problem("/nan", 500, "not finite");
    get_problem("/noreply", 500, "produced no response");
}
END_TEST

START_TEST(test_query_over_http)
{
    static char path[12000];
    struct reply r;
    json_t *doc, *q;
    size_t n;

    request("GET", "/items/x?after=10&name=caf%C3%A9+au+lait&flag&after=11",
            NULL, NULL, 0, &r);
    doc = expect_json(&r, 200);
    q = json_object_get(doc, "query");
    ck_assert_str_eq(json_string_value(json_object_get(q, "after")), "10");
    ck_assert_str_eq(json_string_value(json_object_get(q, "name")),
                     "caf\xC3\xA9 au lait");
    ck_assert_str_eq(json_string_value(json_object_get(q, "flag")), "");
    json_decref(doc);
    reply_free(&r);

    request("GET", "/items/x?limit=%zz", NULL, NULL, 0, &r);
    doc = expect_problem(&r, 400, "query parameter 'limit' has a malformed "
                                  "percent-escape \"%zz\"");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "parameter")),
                     "limit");
    json_decref(doc);
    reply_free(&r);

    get_problem("/items/x?a=%ff", 400, "not valid UTF-8");
    get_problem("/items/x?a=%00", 400, "NUL byte");
    get_problem("/items/x?=1", 400, "empty name");

    n = (size_t)sprintf(path, "/items/x?");
    for (int i = 0; i < 40; i++)
        n += (size_t)sprintf(path + n, "p%d=1&", i);
    get_problem(path, 400, "more than the limit of 32 parameters");

    n = (size_t)sprintf(path, "/items/x?big=");
    memset(path + n, 'v', 3000);
    path[n + 3000] = '\0';
    get_problem(path, 400, "query parameter 'big' is longer than the limit "
                           "of 2048 bytes");

    n = (size_t)sprintf(path, "/items/x?");
    for (int i = 0; i < 9; i++)
        n += (size_t)sprintf(path + n, "k%d=%01000d&", i, 0);
    get_problem(path, 400, "longer than the limit of 8192");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Bodies                                                               */

START_TEST(test_json_body)
{
    struct reply r;
    json_t *doc;
    char buf[64];
    const char *ctj = "Content-Type: application/json";

    request("POST", "/echo", ctj, "{\"a\":[1,2.5,null]}", 18, &r);
    doc = expect_json(&r, 201);
    ck_assert_str_eq(reply_header(&r, "Location", buf, sizeof buf),
                     "/items/echoed");
    ck_assert_int_eq(json_array_size(json_object_get(doc, "a")), 3);
    ck_assert(json_is_null(json_array_get(json_object_get(doc, "a"), 2)));
    json_decref(doc);
    reply_free(&r);

    request("POST", "/echo", ctj, "{\"a\":\n  [1,}", 12, &r);
    doc = expect_problem(&r, 400, "line 2, column");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "line")), 2);
    ck_assert_int_gt(json_integer_value(json_object_get(doc, "column")), 0);
    json_decref(doc);
    reply_free(&r);

    request("POST", "/echo", ctj, "{\"a\":1,\"a\":2}", 13, &r);
    json_decref(expect_problem(&r, 400, "duplicate"));
    reply_free(&r);

    request("POST", "/echo", ctj, "", 0, &r);
    json_decref(expect_problem(&r, 400, "has none"));
    reply_free(&r);

    /* Jansson's message quotes the input: invalid UTF-8 must not break
       the problem document. */
    request("POST", "/echo", ctj, "{\"a\":\xff\xfe}", 8, &r);
    json_decref(expect_problem(&r, 400, "not valid JSON"));
    reply_free(&r);

    request("POST", "/echo", "Content-Type: application/json; charset=UTF-8",
            "[]", 2, &r);
    json_decref(expect_json(&r, 201));
    reply_free(&r);

    request("POST", "/echo", "Content-Type: application/merge-patch+json",
            "{}", 2, &r);
    json_decref(expect_json(&r, 201));
    reply_free(&r);

    request("POST", "/echo", "Content-Type: text/plain", "{}", 2, &r);
    json_decref(expect_problem(&r, 415, "takes application/json, not "
                                        "\"text/plain\""));
    reply_free(&r);

    request("POST", "/echo", "Content-Type: application/json; charset=latin1",
            "{}", 2, &r);
    json_decref(expect_problem(&r, 415, "not \"application/json; "
                                        "charset=latin1\""));
    reply_free(&r);

    request("POST", "/echo", "Content-Type:", "{}", 2, &r);
    json_decref(expect_problem(&r, 415, "without a Content-Type"));
    reply_free(&r);
}
END_TEST

/* A read callback that makes up a large body without holding it. */
struct bigbody {
    size_t left;
};

static size_t read_big(char *p, size_t sz, size_t n, void *ud)
{
    struct bigbody *b = ud;
    size_t k = sz * n < b->left ? sz * n : b->left;

    memset(p, 'x', k);
    b->left -= k;
    return k;
}

static void post_big(const char *path, size_t total, int chunked,
                     int expect, struct reply *r)
{
    struct curl_slist *h = NULL;
    struct bigbody bb = {total};
    CURL *e;

    memset(r, 0, sizeof *r);
    e = make_easy("POST", path, NULL, NULL, 0, r);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_big);
    curl_easy_setopt(e, CURLOPT_READDATA, &bb);
    if (chunked)
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
    else
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)total);
    h = curl_slist_append(h, expect ? "Expect: 100-continue" : "Expect:");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    r->rc = curl_easy_perform(e);
    finish_easy(e, r);
    curl_slist_free_all(h);
}

START_TEST(test_body_limit)
{
    struct reply r;
    json_t *doc;
    static char body[MAX_BODY + 1];

    /* Exactly the limit passes. */
    memset(body, 'b', sizeof body);
    request("POST", "/raw", NULL, body, MAX_BODY, &r);
    doc = expect_json(&r, 200);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "len")),
                     MAX_BODY);
    json_decref(doc);
    reply_free(&r);
    ck_assert_int_eq(A.raw_calls, 1);

    /* One byte more is refused on the headers, naming the limit. */
    request("POST", "/raw", NULL, body, MAX_BODY + 1, &r);
    doc = expect_problem(&r, 413, "limit of 65536 bytes (max_body)");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")),
                     "max_body");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "value")),
                     MAX_BODY);
    json_decref(doc);
    reply_free(&r);

    /* With Expect: 100-continue the answer comes on the headers and the
       body is never sent. */
    post_big("/raw", (size_t)256 << 20, 0, 1, &r);
    json_decref(expect_problem(&r, 413, "268435456 bytes, more than the "
                                        "limit of 65536"));
    ck_assert_int_lt(r.uploaded, (curl_off_t)1 << 20);
    reply_free(&r);

    /* Without it the client sends at once: the answer is decided on the
       headers, the body read and dropped (not kept), then the answer sent,
       so that no reset can destroy it. */
    post_big("/raw", (size_t)8 << 20, 0, 0, &r);
    json_decref(expect_problem(&r, 413, "8388608 bytes, more than the "
                                        "limit of 65536 bytes (max_body)"));
    reply_free(&r);

    /* Chunked, so the size is only known as it arrives: 413 decided on the
       first piece too many, the rest dropped. */
    post_big("/raw", (size_t)MAX_BODY * 4, 1, 0, &r);
    json_decref(expect_problem(&r, 413, "more than the limit of 65536"));
    reply_free(&r);

    /* Past 16 MiB nothing more is read: an announced one is answered at
       once (the client may see a reset instead, as TCP goes), an endless
       chunked one cut off; both long before their end. */
    post_big("/raw", (size_t)256 << 20, 0, 0, &r);
    if (r.rc == CURLE_OK)
        json_decref(expect_problem(&r, 413, "limit of 65536"));
    ck_assert_int_lt(r.uploaded, (curl_off_t)64 << 20);
    reply_free(&r);
    post_big("/raw", (size_t)256 << 20, 1, 0, &r);
    ck_assert_int_ne(r.rc, CURLE_OK);
    ck_assert_int_lt(r.uploaded, (curl_off_t)64 << 20);
    reply_free(&r);

    /* Other early answers wait for the body the same way. */
    post_big("/nowhere", (size_t)4 << 20, 0, 0, &r);
    json_decref(expect_problem(&r, 404, "nothing at \"/nowhere\""));
    reply_free(&r);
    post_big("/items/x", (size_t)4 << 20, 1, 0, &r);
    json_decref(expect_problem(&r, 405, "POST is not allowed"));
    reply_free(&r);
    ck_assert_int_eq(A.raw_calls, 1);

    /* The server is fine afterwards. */
    request("POST", "/raw", NULL, "abc", 3, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
}
END_TEST

/* A body made up as it is sent: byte i is (7i + 3) mod 256. It fails
   (the client gives up) after abort_at bytes when that is not 0. */
struct patterned {
    size_t sent, total, abort_at;
};

static size_t read_patterned(char *p, size_t sz, size_t n, void *ud)
{
    struct patterned *b = ud;
    size_t k = sz * n < b->total - b->sent ? sz * n : b->total - b->sent;

    if (b->abort_at && b->sent >= b->abort_at)
        return CURL_READFUNC_ABORT;
    for (size_t i = 0; i < k; i++)
        p[i] = (char)((7 * (b->sent + i) + 3) & 0xff);
    b->sent += k;
    return k;
}

static uint64_t patterned_fnv(size_t total)
{
    uint64_t h = FNV_SEED;

    for (size_t i = 0; i < total; i++) {
        unsigned char c = (unsigned char)((7 * i + 3) & 0xff);
        h = fnv1a(h, &c, 1);
    }
    return h;
}

static void post_patterned(const char *path, size_t total, int chunked,
                           int expect, size_t abort_at, struct reply *r)
{
    struct curl_slist *h = NULL;
    struct patterned b = {0, total, abort_at};
    CURL *e;

    memset(r, 0, sizeof *r);
    e = make_easy("POST", path, NULL, NULL, 0, r);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, read_patterned);
    curl_easy_setopt(e, CURLOPT_READDATA, &b);
    if (chunked)
        h = curl_slist_append(h, "Transfer-Encoding: chunked");
    else
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)total);
    h = curl_slist_append(h, expect ? "Expect: 100-continue" : "Expect:");
    h = curl_slist_append(h, "Content-Type: application/octet-stream");
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    r->rc = curl_easy_perform(e);
    finish_easy(e, r);
    curl_slist_free_all(h);
}

/* A streamed body arrived whole: its size and hash, in several pieces. */
static void expect_sunk(const struct reply *r, size_t total, int deferred)
{
    json_t *doc = expect_json(r, 201);
    char want[32];

    snprintf(want, sizeof want, "%016llx",
             (unsigned long long)patterned_fnv(total));
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "bytes")),
                     (json_int_t)total);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "fnv")), want);
    if (total > 2 * 65536)  /* never held whole: it came in pieces */
        ck_assert_int_gt(json_integer_value(json_object_get(doc, "pieces")),
                         1);
    ck_assert_int_eq(json_is_true(json_object_get(doc, "deferred")),
                     deferred);
    json_decref(doc);
}

static int sinks_settled(int want_aborted)
{
    return atomic_load(&A.sink_aborted) >= want_aborted &&
           atomic_load(&A.sink_begun) ==
               atomic_load(&A.sink_ended) + atomic_load(&A.sink_aborted);
}

static void wait_sinks_settled(int want_aborted)
{
    uint64_t end = now_ms() + 5000;

    while (!sinks_settled(want_aborted)) {
        ck_assert_msg(now_ms() < end, "sinks: %d begun, %d ended, %d "
                      "aborted (want %d aborted)", atomic_load(&A.sink_begun),
                      atomic_load(&A.sink_ended),
                      atomic_load(&A.sink_aborted), want_aborted);
        usleep(2000);
    }
}

START_TEST(test_stream_body)
{
    struct reply r;
    json_t *doc;
    int writes;

    /* Far beyond max_body (64 KiB): the route has its own limit (1 MiB),
       and the body reaches the sink in pieces, announced or chunked. */
    post_patterned("/upload", 600000, 0, 0, 0, &r);
    expect_sunk(&r, 600000, 0);
    reply_free(&r);
    post_patterned("/upload", 700001, 1, 1, 0, &r);
    expect_sunk(&r, 700001, 0);
    reply_free(&r);
    post_patterned("/upload", 0, 0, 0, 0, &r);
    expect_sunk(&r, 0, 0);
    reply_free(&r);
    post_patterned("/upload?defer=1", 200000, 0, 0, 0, &r);
    expect_sunk(&r, 200000, 1);     /* end may defer like any handler */
    reply_free(&r);

    /* Exactly the limit passes; one byte more is refused on the headers
       with the route's own limit named, before a byte is written. */
    post_patterned("/upload?limit=100000", 100000, 0, 0, 0, &r);
    expect_sunk(&r, 100000, 0);
    reply_free(&r);
    writes = atomic_load(&A.sink_writes);
    post_patterned("/upload?limit=100000", 100001, 0, 0, 0, &r);
    doc = expect_problem(&r, 413, "100001 bytes, more than the limit of "
                                  "100000 bytes (upload_limit)");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")),
                     "upload_limit");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "value")),
                     100000);
    json_decref(doc);
    reply_free(&r);
    post_patterned("/upload?limit=100000", (size_t)256 << 20, 0, 1, 0, &r);
    json_decref(expect_problem(&r, 413, "268435456 bytes"));
    ck_assert_int_lt(r.uploaded, (curl_off_t)1 << 20);
    reply_free(&r);
    ck_assert_int_eq(atomic_load(&A.sink_writes), writes);

    /* Chunked, the size is learnt as it comes: 413 on the first piece too
       many, the sink aborted, the rest dropped. */
    post_patterned("/upload?limit=100000", 400000, 1, 0, 0, &r);
    json_decref(expect_problem(&r, 413, "more than the limit of 100000 "
                                        "bytes (upload_limit)"));
    reply_free(&r);
    wait_sinks_settled(3);

    /* The handler answers on the headers: the sink never starts, and with
       100-continue the body is never sent. */
    writes = atomic_load(&A.sink_writes);
    post_patterned("/upload?reject=1", 200000, 0, 0, 0, &r);
    json_decref(expect_problem(&r, 422, "rejected on the headers"));
    reply_free(&r);
    post_patterned("/upload?reject=1", (size_t)256 << 20, 0, 1, 0, &r);
    json_decref(expect_problem(&r, 422, "rejected on the headers"));
    ck_assert_int_lt(r.uploaded, (curl_off_t)1 << 20);
    reply_free(&r);
    ck_assert_int_eq(atomic_load(&A.sink_writes), writes);

    /* write refuses: the rest is dropped and end says why. */
    post_patterned("/upload?fail_after=1000", 300000, 0, 0, 0, &r);
    json_decref(expect_problem(&r, 503, "the sink refused a write"));
    reply_free(&r);

    /* Not a streaming route: http_body_stream refuses, aborts, 500. */
    post_patterned("/not-streamed", 1000, 0, 0, 0, &r);
    json_decref(expect_problem(&r, 500, "HTTP_STREAM_BODY"));
    reply_free(&r);
    wait_sinks_settled(4);

    /* The client gives up halfway: the sink is aborted, not ended. */
    post_patterned("/upload", 900000, 0, 0, 300000, &r);
    ck_assert_int_ne(r.rc, CURLE_OK);
    reply_free(&r);
    post_patterned("/upload", 900000, 1, 0, 300000, &r);
    ck_assert_int_ne(r.rc, CURLE_OK);
    reply_free(&r);
    wait_sinks_settled(6);
    ck_assert_int_eq(atomic_load(&A.sink_ended), 6);

    /* Buffered routes are as before. */
    request("POST", "/raw", NULL, "abc", 3, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
}
END_TEST

/* http_stop while a body streams: the sink is aborted, exactly once. */
START_TEST(test_stream_body_stop)
{
    int fd = raw_connect();
    char head[256];
    int n = snprintf(head, sizeof head,
                     "POST /upload HTTP/1.1\r\nHost: x\r\n"
                     "Content-Length: 500000\r\n\r\n");
    static char part[100000];

    memset(part, 'a', sizeof part);
    ck_assert_int_eq(send(fd, head, (size_t)n, 0), n);
    ck_assert_int_eq(send(fd, part, sizeof part, 0), (ssize_t)sizeof part);
    for (uint64_t end = now_ms() + 5000; atomic_load(&A.sink_writes) == 0;) {
        ck_assert_msg(now_ms() < end, "the body never reached the sink");
        usleep(2000);
    }
    http_stop(S);
    S = NULL;
    ck_assert_int_eq(atomic_load(&A.sink_begun), 1);
    ck_assert_int_eq(atomic_load(&A.sink_aborted), 1);
    ck_assert_int_eq(atomic_load(&A.sink_ended), 0);
    close(fd);
}
END_TEST

START_TEST(test_headers_and_token)
{
    struct curl_slist *h = NULL;
    struct reply r;
    json_t *doc;
    CURL *e;

    h = curl_slist_append(h, "Authorization: bearer tok.EN-1_~+/=");
    h = curl_slist_append(h, "x-TeSt: some value");
    memset(&r, 0, sizeof r);
    e = make_easy("GET", "/whoami", h, NULL, 0, &r);
    r.rc = curl_easy_perform(e);
    finish_easy(e, &r);
    curl_slist_free_all(h);
    doc = expect_json(&r, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "token")),
                     "tok.EN-1_~+/=");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "x_test")),
                     "some value");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "client")),
                     "127.0.0.1");
    json_decref(doc);
    reply_free(&r);

    request("GET", "/whoami", "Authorization: Basic dXNlcjpwdw==", NULL, 0,
            &r);
    doc = expect_json(&r, 200);
    ck_assert(json_is_null(json_object_get(doc, "token")));
    json_decref(doc);
    reply_free(&r);

    request("GET", "/whoami", "Authorization: Bearer two words", NULL, 0,
            &r);
    doc = expect_json(&r, 200);
    ck_assert(json_is_null(json_object_get(doc, "token")));
    json_decref(doc);
    reply_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Long-poll                                                            */

START_TEST(test_longpoll_event)
{
    CURLM *m = curl_multi_init();
    struct transfer t[2];
    struct http_deferred *d;
    json_t *doc;
    uint64_t t0 = now_ms();

    /* Finished from this thread, which is not a server thread. */
    start_transfer(m, &t[0], "/wait?timeout_ms=10000");
    pump_until(m, t, 1, have_waiters, 1, 5000, "the request to park");
    pthread_mutex_lock(&A.w.mu);
    d = A.w.d[--A.w.n];
    pthread_mutex_unlock(&A.w.mu);
    pump(m, t, 1, 50);
    ck_assert(!t[0].done);      /* still parked */
    ck_assert_int_eq(http_deferred_finish(d, fill_event, "hello"), 0);
    while (!t[0].done && now_ms() - t0 < 5000)
        pump(m, t, 1, 50);
    end_transfer(m, &t[0]);
    doc = expect_json(&t[0].r, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "event")),
                     "hello");
    json_decref(doc);
    reply_free(&t[0].r);

    /* Finished by another request, on a server thread. */
    start_transfer(m, &t[0], "/wait?timeout_ms=10000");
    pump_until(m, t, 1, have_waiters, 1, 5000, "the request to park");
    {
        struct reply n;

        request("POST", "/notify?event=job-7-done", NULL, "", 0, &n);
        doc = expect_json(&n, 200);
        ck_assert_int_eq(json_integer_value(json_object_get(doc, "woken")),
                         1);
        json_decref(doc);
        reply_free(&n);
    }
    while (!t[0].done && now_ms() - t0 < 10000)
        pump(m, t, 1, 50);
    end_transfer(m, &t[0]);
    doc = expect_json(&t[0].r, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "event")),
                     "job-7-done");
    json_decref(doc);
    reply_free(&t[0].r);
    ck_assert_uint_lt(now_ms() - t0, 5000);
    curl_multi_cleanup(m);
}
END_TEST

/* The client hangs up while parked: MHD cannot see it until the reply is
   written, which then fails quietly; the server goes on. */
START_TEST(test_longpoll_client_gone)
{
    CURLM *m = curl_multi_init();
    struct transfer t[1];
    struct reply r;

    start_transfer(m, &t[0], "/wait?timeout_ms=10000");
    pump_until(m, t, 1, have_waiters, 1, 5000, "the request to park");
    end_transfer(m, &t[0]);         /* closes the connection */
    reply_free(&t[0].r);
    curl_multi_cleanup(m);
    ck_assert_int_eq(http_deferred_finish(A.w.d[0], fill_event, "nobody"),
                     0);
    A.w.n = 0;
    request("GET", "/items/alive", NULL, NULL, 0, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
}
END_TEST

START_TEST(test_longpoll_timeout)
{
    struct reply r;
    json_t *doc;
    uint64_t t0 = now_ms(), ms;

    request("GET", "/wait?timeout_ms=300", NULL, NULL, 0, &r);
    ms = now_ms() - t0;
    doc = expect_json(&r, 200);
    ck_assert(json_is_true(json_object_get(doc, "timeout")));
    ck_assert_uint_ge(ms, 290);
    ck_assert_uint_lt(ms, 3000);
    json_decref(doc);
    reply_free(&r);

    /* The app still holds its handle: finishing it now says it was too
       late, and calls nothing. */
    ck_assert_int_eq(waiters_count(), 1);
    ck_assert_int_eq(http_deferred_finish(A.w.d[0], fill_event, "late"),
                     EC_ETIMEOUT);
    A.w.n = 0;

    /* A timeout of 0 answers at once, however fast the timer is. */
    request("GET", "/wait?timeout_ms=0", NULL, NULL, 0, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
    ck_assert_int_eq(http_deferred_finish(A.w.d[0], NULL, NULL), 0);
    A.w.n = 0;

    /* Without a timeout function: 204. */
    request("GET", "/wait?timeout_ms=50&default=1", NULL, NULL, 0, &r);
    ck_assert_int_eq(r.rc, CURLE_OK);
    ck_assert_int_eq(r.status, 204);
    ck_assert_uint_eq(r.len, 0);
    reply_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Server-Sent Events                                                   */

static void push_event(const char *data)
{
    pthread_mutex_lock(&A.ch.mu);
    A.ch.events[A.ch.nevents++] = data;
    pthread_mutex_unlock(&A.ch.mu);
    ck_assert_int_eq(http_stream_wake(A.ch.st), 0);
}

static int wait_closed(int ms)
{
    struct timespec until;
    int closed;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L)
        until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&A.ch.mu);
    while (!A.ch.closed &&
           pthread_cond_timedwait(&A.ch.cv, &A.ch.mu, &until) == 0)
        ;
    closed = A.ch.closed;
    pthread_mutex_unlock(&A.ch.mu);
    return closed;
}

START_TEST(test_sse_events)
{
    CURLM *m = curl_multi_init();
    struct transfer t[1];
    uint64_t t0;
    char ct[64];
    const char *e1, *e2, *e3;

    start_transfer(m, &t[0], "/events?keepalive_ms=50");
    pump_until(m, t, 1, channel_opened, 1, 5000, "the stream to open");
    push_event("one");
    pump(m, t, 1, 20);
    push_event("two\nlines");
    /* Quiet for a while: keep-alive comments go out meanwhile. */
    for (t0 = now_ms(); now_ms() - t0 < 200;)
        pump(m, t, 1, 20);
    push_event("three");
    pthread_mutex_lock(&A.ch.mu);
    A.ch.end = 1;
    pthread_mutex_unlock(&A.ch.mu);
    http_stream_wake(A.ch.st);
    for (t0 = now_ms(); !t[0].done && now_ms() - t0 < 5000;)
        pump(m, t, 1, 20);
    ck_assert(t[0].done);
    end_transfer(m, &t[0]);
    ck_assert_int_eq(t[0].r.rc, CURLE_OK);     /* a clean end */
    ck_assert_int_eq(t[0].r.status, 200);
    ck_assert_str_eq(reply_header(&t[0].r, "Content-Type", ct, sizeof ct),
                     "text/event-stream");
    ck_assert_str_eq(reply_header(&t[0].r, "Cache-Control", ct, sizeof ct),
                     "no-cache");
    ck_assert_ptr_nonnull(t[0].r.body);
    e1 = strstr(t[0].r.body, "event: tick\nid: 1\ndata: one\n\n");
    e2 = strstr(t[0].r.body, "event: tick\nid: 2\ndata: two\ndata: lines\n\n");
    e3 = strstr(t[0].r.body, "event: tick\nid: 3\ndata: three\n\n");
    ck_assert_msg(e1 && e2 && e3 && e1 < e2 && e2 < e3,
                  "events missing or out of order: %s", t[0].r.body);
    ck_assert_msg(strstr(e2, ": keep-alive\n\n") != NULL &&
                      strstr(e2, ": keep-alive\n\n") < e3,
                  "no keep-alive while quiet: %s", t[0].r.body);
    ck_assert_int_eq(wait_closed(2000), 1);
    ck_assert_int_eq(A.sse_bad_rc, EC_EINVAL);
    ck_assert_int_eq(http_stream_write(A.ch.st, "x", 1), EC_EINVAL);
    /* The stream is over: waking it says so. */
    ck_assert_int_eq(http_stream_wake(A.ch.st), EC_EPEER);
    reply_free(&t[0].r);
    curl_multi_cleanup(m);
}
END_TEST

START_TEST(test_sse_client_goes_away)
{
    CURLM *m = curl_multi_init();
    struct transfer t[1];
    struct reply r;
    uint64_t t0;

    start_transfer(m, &t[0], "/events?keepalive_ms=50");
    t[0].r.abort_after_event = 1;
    pump_until(m, t, 1, channel_opened, 1, 5000, "the stream to open");
    push_event("first");
    for (t0 = now_ms(); !t[0].done && now_ms() - t0 < 5000;)
        pump(m, t, 1, 20);
    ck_assert(t[0].done);
    ck_assert_int_eq(t[0].r.rc, CURLE_WRITE_ERROR);    /* we hung up */
    end_transfer(m, &t[0]);
    reply_free(&t[0].r);
    curl_multi_cleanup(m);

    /* The next keep-alive finds the client gone and the stream ends. */
    ck_assert_msg(wait_closed(5000), "on_close not called");
    request("GET", "/items/still-here", NULL, NULL, 0, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Load, slow clients, stopping                                         */

#define NCONC 200

START_TEST(test_concurrent_200)
{
    CURLM *m = curl_multi_init();
    static struct transfer t[NCONC];
    uint64_t t0 = now_ms();

    /* Every request parks, so all 200 connections are open at once. */
    for (int i = 0; i < NCONC; i++)
        start_transfer(m, &t[i], "/wait?timeout_ms=15000");
    pump_until(m, t, NCONC, have_waiters, NCONC, 10000,
               "200 requests to park");
    pthread_mutex_lock(&A.w.mu);
    for (int i = 0; i < A.w.n; i++)
        ck_assert_int_eq(http_deferred_finish(A.w.d[i], fill_event, "go"),
                         0);
    A.w.n = 0;
    pthread_mutex_unlock(&A.w.mu);
    while (!all_done(t, NCONC) && now_ms() - t0 < 15000)
        pump(m, t, NCONC, 20);
    for (int i = 0; i < NCONC; i++) {
        json_t *doc;

        ck_assert_msg(t[i].done, "transfer %d not answered", i);
        end_transfer(m, &t[i]);
        doc = expect_json(&t[i].r, 200);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "event")),
                         "go");
        json_decref(doc);
        reply_free(&t[i].r);
    }
    ck_assert_uint_lt(now_ms() - t0, 10000);
    curl_multi_cleanup(m);
}
END_TEST

START_TEST(test_slow_client_dropped)
{
    static const char half[] = "GET /items/x HTTP/1.1\r\nHost: a\r\nX-Ha";
    struct reply r;
    long waited;
    int fd;

    http_stop(S);
    start_server(1, 1);     /* a 1 s idle timeout */
    fd = raw_connect();
    ck_assert_int_eq(send(fd, half, sizeof half - 1, 0),
                     (ssize_t)(sizeof half - 1));
    /* Others are served while it stalls. */
    request("GET", "/items/fast", NULL, NULL, 0, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
    waited = raw_wait_closed(fd, 5000);
    close(fd);
    ck_assert_msg(waited >= 0, "the slow client was not dropped");
    ck_assert_int_ge(waited, 300);      /* by the timeout, not at once */
    request("GET", "/items/after", NULL, NULL, 0, &r);
    json_decref(expect_json(&r, 200));
    reply_free(&r);
}
END_TEST

START_TEST(test_stop_with_clients)
{
    CURLM *m = curl_multi_init();
    struct transfer t[2];
    int idle, halfway;
    uint64_t t0;

    idle = raw_connect();
    halfway = raw_connect();
    ck_assert_int_eq(send(halfway, "GET /items/x HTTP/1.1\r\n", 23, 0), 23);
    start_transfer(m, &t[0], "/wait?timeout_ms=60000");
    start_transfer(m, &t[1], "/events?keepalive_ms=10000");
    pump_until(m, t, 2, have_waiters, 1, 5000, "the request to park");
    pump_until(m, t, 2, channel_opened, 1, 5000, "the stream to open");
    push_event("before-stop");
    t0 = now_ms();
    while (!t[1].r.body || !strstr(t[1].r.body, "before-stop")) {
        ck_assert_msg(now_ms() - t0 < 5000, "the event did not arrive");
        pump(m, t, 2, 10);
    }

    t0 = now_ms();
    http_stop(S);
    S = NULL;
    ck_assert_uint_lt(now_ms() - t0, 3000);
    ck_assert_int_eq(wait_closed(1000), 1);

    /* Every client sees its connection end. */
    while (!all_done(t, 2) && now_ms() - t0 < 5000)
        pump(m, t, 2, 20);
    ck_assert(all_done(t, 2));
    ck_assert_int_ge(raw_wait_closed(idle, 2000), 0);
    ck_assert_int_ge(raw_wait_closed(halfway, 2000), 0);
    close(idle);
    close(halfway);
    for (int i = 0; i < 2; i++)
        end_transfer(m, &t[i]);
    /* The parked request got its 503 and the stream a proper end. */
    json_decref(expect_problem(&t[0].r, 503, "shutting down"));
    ck_assert_int_eq(t[1].r.rc, CURLE_OK);
    ck_assert_ptr_nonnull(t[1].r.body);
    ck_assert_ptr_nonnull(strstr(t[1].r.body, "data: before-stop"));
    reply_free(&t[0].r);
    reply_free(&t[1].r);
    curl_multi_cleanup(m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Metrics and the access log                                           */

START_TEST(test_metrics)
{
    struct reply r;
    char *text;

    for (int i = 0; i < 3; i++) {
        request("GET", "/items/m", NULL, NULL, 0, &r);
        reply_free(&r);
    }
    request("GET", "/nowhere", NULL, NULL, 0, &r);
    reply_free(&r);
    request("POST", "/items/m", NULL, "", 0, &r);
    reply_free(&r);
    /* Counting happens when the request is over, just after the reply,
       and each request may be counted by another thread, in any order:
       wait for all five rather than assume them. */
    for (uint64_t t0 = now_ms();; ) {
        struct timespec pause = {0, 2000000};

        text = http_metrics_text(S);
        ck_assert_ptr_nonnull(text);
        if ((strstr(text, "code=\"405\"} 1") && strstr(text, "code=\"404\"} 1") &&
             strstr(text, "code=\"200\"} 3")) || now_ms() - t0 > 3000)
            break;
        free(text);
        nanosleep(&pause, NULL);
    }
    ck_assert_msg(strstr(text, "ecopt_http_requests_total{route=\"/items/"
                               "{id}\",method=\"GET\",code=\"200\"} 3\n"),
                  "%s", text);
    ck_assert_msg(strstr(text, "ecopt_http_requests_total{route=\"unmatched"
                               "\",method=\"*\",code=\"404\"} 1\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "ecopt_http_requests_total{route=\"unmatched"
                               "\",method=\"*\",code=\"405\"} 1\n"), "%s",
                  text);
    ck_assert_msg(strstr(text, "ecopt_http_request_duration_seconds_bucket{"
                               "route=\"/items/{id}\",method=\"GET\",le=\""
                               "+Inf\"} 3\n"), "%s", text);
    ck_assert_msg(strstr(text, "ecopt_http_request_duration_seconds_count{"
                               "route=\"/items/{id}\",method=\"GET\"} 3\n"),
                  "%s", text);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE ecopt_http_request_duration_"
                                       "seconds histogram\n"));
    free(text);
}
END_TEST

START_TEST(test_access_log)
{
    char path[64], line[4096], *log;
    struct reply r;
    int saved, fd;
    FILE *f;
    size_t n;

    /* stderr into a file for the length of one server's life. */
    snprintf(path, sizeof path, "/tmp/ecopt-http-log-XXXXXX");
    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved = dup(2);
    dup2(fd, 2);
    http_stop(S);
    start_server(10, 0);
    request("GET", "/items/logged?x=secret", "X-Request-Id: rid-1", NULL, 0,
            &r);
    reply_free(&r);
    request("HEAD", "/items/head", NULL, NULL, 0, &r);
    reply_free(&r);
    {
        /* curl will not send control bytes in a path; a socket will. */
        static const char req[] = "GET /no\x7f\"where HTTP/1.1\r\nHost: a\r\n"
                                  "Connection: close\r\n\r\n";
        int sock = raw_connect();

        ck_assert_int_eq(send(sock, req, sizeof req - 1, 0),
                         (ssize_t)(sizeof req - 1));
        ck_assert_int_ge(raw_wait_closed(sock, 3000), 0);
        close(sock);
    }
    http_stop(S);       /* every request is over, and logged */
    S = NULL;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    f = fdopen(fd, "r");
    fseek(f, 0, SEEK_SET);
    n = fread(line, 1, sizeof line - 1, f);
    line[n] = '\0';
    fclose(f);
    unlink(path);
    log = line;
    ck_assert_msg(strstr(log, "http method=GET path=\"/items/logged\" "
                              "status=200 bytes=") != NULL, "%s", log);
    ck_assert_msg(strstr(log, "rid=rid-1 client=127.0.0.1 end=ok\n"), "%s",
                  log);
    ck_assert_msg(strstr(log, "path=\"/no\\x7f\\x22where\" status=404"),
                  "%s", log);
    ck_assert_msg(strstr(log, "http method=HEAD path=\"/items/head\" "
                              "status=200"), "%s", log);
    ck_assert_ptr_null(strstr(log, "secret"));  /* the query is not logged */
}
END_TEST

static Suite *http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *pure = tcase_create("parsers");
    TCase *live = tcase_create("server");

    tcase_add_test(pure, test_query_parse_table);
    tcase_add_test(pure, test_query_parse_limits);
    tcase_add_test(pure, test_query_parse_hostile);
    tcase_add_test(pure, test_path_match_table);
    suite_add_tcase(s, pure);

    tcase_add_checked_fixture(live, setup, teardown);
    tcase_set_timeout(live, 30);
    tcase_add_test(live, test_start_errors);
    tcase_add_test(live, test_routes_ok);
    tcase_add_test(live, test_not_found_and_method);
    tcase_add_test(live, test_query_over_http);
    tcase_add_test(live, test_json_body);
    tcase_add_test(live, test_body_limit);
    tcase_add_test(live, test_stream_body);
    tcase_add_test(live, test_stream_body_stop);
    tcase_add_test(live, test_headers_and_token);
    tcase_add_test(live, test_longpoll_event);
    tcase_add_test(live, test_longpoll_timeout);
    tcase_add_test(live, test_longpoll_client_gone);
    tcase_add_test(live, test_sse_events);
    tcase_add_test(live, test_sse_client_goes_away);
    tcase_add_test(live, test_concurrent_200);
    tcase_add_test(live, test_slow_client_dropped);
    tcase_add_test(live, test_stop_with_clients);
    tcase_add_test(live, test_metrics);
    tcase_add_test(live, test_access_log);
    suite_add_tcase(s, live);
    return s;
}

int main(void)
{
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = tu_run(http_suite());
    curl_global_cleanup();
    return rc;
}
