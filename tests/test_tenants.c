/*
 * A shared server that one tenant cannot hurt: two tenants (alice, bob)
 * and an admin (root) against the real `ecopt serve` with auth on. Each
 * test is an attack a hostile tenant could make and what the server now
 * answers instead. Sections, each self-contained with its own adder:
 * HTTP framing, connections and authentication (add_http_cases); jobs
 * that always stop and memory bounded before a job starts
 * (add_job_cases); datasets: versions, owners, uploads (add_data_cases).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <zlib.h>

#include "serverutil.h"
#include "testutil.h"

/* ---- HTTP framing, connections and authentication ---- */

/* A job that runs until cancelled, cheaply: one process, few rows. */
static const char http_endless_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
    " \"max_rounds\": 40000000, \"target\": 0, \"eval_every\": 1000000}";
/* The same with forked workers, for the descriptors they inherit. */
static const char http_endless_process_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"process\","
    " \"max_rounds\": 40000000, \"target\": 0, \"eval_every\": 1000000}";
static const char http_small_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20}";

static void http_send(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        ck_assert_msg(w > 0, "send: %s", strerror(errno));
        p += w;
        len -= (size_t)w;
    }
}

/* What came back until the server closed the connection: 1, or 0 when it
 * was still open at the deadline (out holds what came by then). */
static int http_read_to_close(int fd, char *out, size_t cap, double timeout)
{
    double until = tu_now() + timeout;
    size_t n = 0;

    out[0] = '\0';
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int ms = (int)((until - tu_now()) * 1000);
        ssize_t r;

        if (ms <= 0)
            return 0;
        if (poll(&p, 1, ms) <= 0)
            continue;
        r = recv(fd, out + n, cap - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 1;
        n += (size_t)r;
        out[n] = '\0';
        if (n == cap - 1)
            return 0;
    }
}

/* Reads at least the status line of a reply; its status, or 0 at the
 * deadline or a close. */
static int http_read_status(int fd, double timeout)
{
    double until = tu_now() + timeout;
    char buf[4096];
    size_t n = 0;
    int status = 0;

    while (n < 12) {
        struct pollfd p = {fd, POLLIN, 0};
        int ms = (int)((until - tu_now()) * 1000);
        ssize_t r;

        if (ms <= 0)
            return 0;
        if (poll(&p, 1, ms) <= 0)
            continue;
        r = recv(fd, buf + n, sizeof buf - 1 - n, 0);
        if (r <= 0)
            return 0;
        n += (size_t)r;
    }
    buf[n] = '\0';
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return 0;
    return status;
}

static int http_count(const char *text, const char *needle)
{
    int n = 0;

    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/*
 * Smuggling: a request whose body can be framed two ways, followed by a
 * second request hidden where one framing puts the body. The server must
 * answer the first with one 400 and close, so that the second is never
 * served; a thousand query parameters get an answer too, not a dropped
 * connection.
 */
START_TEST(test_http_framing)
{
    static const struct {
        const char *what, *request, *phrase;
        int status;
    } cases[] = {
        {"two Content-Length",
         "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
         "Content-Length: 0\r\nContent-Length: 45\r\n\r\n"
         "GET /livez HTTP/1.1\r\nHost: t\r\nX-Smuggled: 1\r\n\r\n",
         "2 Content-Length headers", 400},
        {"Content-Length and Transfer-Encoding",
         "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
         "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
         "GET /livez HTTP/1.1\r\nHost: t\r\n\r\n",
         "both Content-Length and Transfer-Encoding", 400},
        {"an unknown transfer coding",
         "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
         "Transfer-Encoding: gzip\r\n\r\nabc",
         "\\\"gzip\\\" is not known", 400},
        {"chunked twice",
         "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
         "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         "2 Transfer-Encoding headers", 400},
        {"a space before the colon",
         "POST /livez HTTP/1.1\r\nHost: t\r\nContent-Length : 34\r\n\r\n"
         "GET /v1/nothing HTTP/1.1\r\nHost: t\r\n\r\n",
         "is not a token", 400},
        {"a thousand query parameters", NULL, "more than the limit of 32 parameters", 400},
    };
    struct server s;
    char *big = malloc(16384), *out = malloc(65536);

    {
        size_t o = (size_t)sprintf(big, "GET /v1/jobs?");
        for (int i = 0; i < 1000; i++)
            o += (size_t)sprintf(big + o, "%sp%d=1", i ? "&" : "", i);
        sprintf(big + o, " HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n", ALICE);
    }
    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *request = cases[i].request ? cases[i].request : big;
        int fd = raw_connect_from(&s, NULL), closed, status = 0;

        http_send(fd, request, strlen(request));
        closed = http_read_to_close(fd, out, 65536, 10);
        close(fd);
        sscanf(out, "HTTP/1.1 %d", &status);
        ck_assert_msg(status == cases[i].status, "%s: %d, not %d: %.300s", cases[i].what,
                      status, cases[i].status, out);
        ck_assert_msg(strstr(out, cases[i].phrase), "%s: %.600s", cases[i].what, out);
        ck_assert_msg(strstr(out, "application/problem+json"), "%s: %.300s", cases[i].what,
                      out);
        ck_assert_msg(http_count(out, "HTTP/1.1 ") == 1,
                      "%s: the hidden request was served too: %.900s", cases[i].what, out);
        if (cases[i].request)
            ck_assert_msg(closed, "%s: the connection was left open after the 400",
                          cases[i].what);
    }
    /* A well-framed request on a kept-alive connection is still served. */
    {
        struct reply r = req(&s, "GET", "/v1/jobs?limit=5", ALICE, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        free(r.body);
    }
    free(big);
    free(out);
    server_stop(&s, SIGTERM);
}
END_TEST

/* GET with curl from a given source address (NULL: the default). */
static struct reply http_get_from(const struct server *s, const char *path,
                                  const char *token, const char *from)
{
    return req_from(s, "GET", path, token, NULL, NULL, from);
}

/* Requests without a token are not guesses: many of them do not lock out
 * the next valid token from the same address. */
START_TEST(test_http_missing_token_is_not_a_failure)
{
    struct server s;
    struct reply r;

    server_start(&s, 0);
    for (int i = 0; i < 30; i++) {
        r = req(&s, "GET", "/v1/jobs", NULL, NULL, NULL);
        ck_assert_int_eq(r.status, 401);
        free(r.body);
    }
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * Wrong tokens from ever new loopback addresses: each address's own wrong
 * tokens are refused (429) after 20 a minute, other addresses' are not,
 * and no address's right token is refused, however many wrong ones came.
 */
START_TEST(test_http_rotating_addresses)
{
    struct server s;
    struct reply r;
    int unknown = 0, refused = 0;
    char from[32];

    server_start(&s, 0);
    for (int i = 0; i < 21; i++) {
        r = http_get_from(&s, "/v1/jobs", "guess-guess-guess-0123", "127.0.0.2");
        ck_assert_int_eq(r.status, i < 20 ? 401 : 429);
        free(r.body);
    }
    for (int i = 0; i < 400; i++) {
        snprintf(from, sizeof from, "127.0.%d.%d", 1 + i / 200, 1 + i % 200);
        r = http_get_from(&s, "/v1/jobs", "guess-guess-guess-0123", from);
        ck_assert_msg(r.status == 401, "%s, its first wrong token: %ld", from, r.status);
        unknown++;
        free(r.body);
    }
    r = http_get_from(&s, "/v1/jobs", "guess-guess-guess-0123", "127.0.0.2");
    ck_assert_msg(r.status == 429, "the first address is unblocked: %ld", r.status);
    refused++;
    free(r.body);
    r = http_get_from(&s, "/v1/jobs", ALICE, "127.0.0.2");
    ck_assert_msg(r.status == 200, "alice from the blocked address: %ld", r.status);
    free(r.body);
    fprintf(stderr, "test_tenants: 400 rotated addresses: %d answered 401, the first "
            "address's next %d 429, its right token 200\n", unknown, refused);
    server_stop(&s, SIGTERM);
}
END_TEST

/* An experiment's variants are jobs in the queue: they count against the
 * queue quota like jobs submitted one by one. */
START_TEST(test_http_experiment_quota)
{
    static const char *const opts[] = {"--max-queued-per-token", "5", NULL};
    struct server s;
    struct reply r;
    char body[2048];
    json_t *doc;
    size_t o;

    server_start_with(&s, 0, opts);
    o = (size_t)snprintf(body, sizeof body,
                         "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, "
                         "\"max_rounds\": 20}, \"variants\": [");
    for (int i = 0; i < 6; i++)
        o += (size_t)snprintf(body + o, sizeof body - o, "%s{\"name\": \"v%d\"}",
                              i ? ", " : "", i);
    snprintf(body + o, sizeof body - o, "]}");
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 429, "6 variants under a quota of 5: %ld %.300s", r.status,
                  r.body);
    doc = json_of(&r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")), "max_queued_per_token");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "value")), 5);
    ck_assert_msg(strstr(r.body, "6 variants"), "%.300s", r.body);
    ck_assert_str_ne(r.retry_after, "");
    json_decref(doc);
    free(r.body);
    /* Nothing of it was made. */
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(strstr(r.body, "\"jobs\":[]"), "%.300s", r.body);
    free(r.body);
    /* A tuned experiment counts variants x multipliers: 2 x 3 = 6 > 5,
     * though 2 variants alone would fit. */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20},"
            " \"variants\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
            " \"tune\": {\"step_multiplier\": [0.5, 1, 2]}}", NULL);
    ck_assert_msg(r.status == 429, "6 tuned jobs under a quota of 5: %ld %.300s", r.status,
                  r.body);
    ck_assert_msg(strstr(r.body, "6 jobs (2 variants x 3 step multipliers)"), "%.300s",
                  r.body);
    free(r.body);
    /* The default run added to a grid without 1 counts too: 2 x (2 + 1) */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20},"
            " \"variants\": [{\"name\": \"a\"}, {\"name\": \"b\"}],"
            " \"tune\": {\"step_multiplier\": [0.5, 2]}}", NULL);
    ck_assert_msg(r.status == 429, "%ld %.300s", r.status, r.body);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(strstr(r.body, "\"jobs\":[]"), "%.300s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20},"
            " \"variants\": [{\"name\": \"a\"}],"
            " \"tune\": {\"step_multiplier\": [0.5, 2]}}", NULL);
    ck_assert_msg(r.status == 201, "%ld %.300s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 3);
    json_decref(doc);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20},"
            " \"variants\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}", NULL);
    ck_assert_msg(r.status == 201, "%ld %.300s", r.status, r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Opens an SSE stream of job id as token; its socket once the status line
 * is in (*status set), or the socket of a refusal. */
static int http_open_stream(const struct server *s, const char *token, const char *path,
                            int *status)
{
    char text[512];
    int fd = raw_connect_from(s, NULL);

    snprintf(text, sizeof text,
             "GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n", path, token);
    http_send(fd, text, strlen(text));
    *status = http_read_status(fd, 10);
    return fd;
}

/* The value of a gauge line "name value" in the /metrics text, or -1. */
static long long http_gauge(const struct server *s, const char *name)
{
    struct reply r = req(s, "GET", "/metrics", ROOT, NULL, NULL);
    char key[128];
    const char *p;
    long long v = -1;

    snprintf(key, sizeof key, "\n%s ", name);
    if (r.status == 200 && (p = strstr(r.body, key)))
        v = strtoll(p + strlen(key), NULL, 10);
    free(r.body);
    return v;
}

/* A job of alice's that stays queued behind an endless one. */
static void http_queued_job(const struct server *s, char blocker[32], char queued[32])
{
    job_create(s, ALICE, http_endless_job, blocker);
    json_decref(job_wait(s, ALICE, blocker, "running", 30));
    job_create(s, ALICE, http_small_job, queued);
}

/*
 * One token cannot hold more than its share of streams and long-polls
 * (16 by default): the next is 429 naming the limit; another token is
 * not held up by it.
 */
START_TEST(test_http_streams_per_token)
{
    static const char *const opts[] = {"--max-running", "1", NULL};
    struct server s;
    char blocker[32], queued[32], path[128];
    int fds[40], n = 0, status;
    json_t *doc;

    server_start_with(&s, 0, opts);
    http_queued_job(&s, blocker, queued);
    snprintf(path, sizeof path, "/v1/jobs/%s/events", queued);
    for (int i = 0; i < 16; i++) {
        fds[n++] = http_open_stream(&s, ALICE, path, &status);
        ck_assert_msg(status == 200, "stream %d: %d", i, status);
    }
    {
        /* The 17th of alice's: 429 problem+json with the limit. */
        struct reply r = req(&s, "GET", path, ALICE, NULL, NULL);
        ck_assert_msg(r.status == 429, "a 17th stream: %ld", r.status);
        doc = json_of(&r);
        ck_assert_str_eq(json_string_value(json_object_get(doc, "limit")),
                         "max_streams_per_token");
        ck_assert_int_eq(json_integer_value(json_object_get(doc, "value")), 16);
        json_decref(doc);
        free(r.body);
        /* A long-poll is one of the same share. */
        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?wait=30", queued);
        r = req(&s, "GET", path, ALICE, NULL, NULL);
        ck_assert_msg(r.status == 429, "a long-poll past the share: %ld", r.status);
        free(r.body);
    }
    /* root (an admin, another token) still streams and long-polls. */
    snprintf(path, sizeof path, "/v1/jobs/%s/events", queued);
    fds[n++] = http_open_stream(&s, ROOT, path, &status);
    ck_assert_int_eq(status, 200);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?wait=30", queued);
    for (int i = 0; i < 3; i++) {
        char text[256];
        fds[n] = raw_connect_from(&s, NULL);
        snprintf(text, sizeof text,
                 "GET %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n\r\n", path, ROOT);
        http_send(fds[n++], text, strlen(text));
    }
    /* The server counts them (a gauge of /metrics): 16 + 1 + 3. */
    for (double until = tu_now() + 10; http_gauge(&s, "ecopt_streams_open") != 20;)
        ck_assert_msg(tu_now() < until, "ecopt_streams_open is %lld, not 20",
                      http_gauge(&s, "ecopt_streams_open"));
    for (int i = 0; i < n; i++)
        close(fds[i]);
    job_cancel(&s, ALICE, blocker, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * Every connection the server takes held by streams: streams and
 * long-polls of all tokens together stay below the connection limit
 * (half of it by default), so /livez and /readyz are still answered.
 */
START_TEST(test_http_livez_beside_streams)
{
    static const char *const opts[] = {"--max-running", "1", "--max-connections", "16",
                                       NULL};
    const char *tokens_[3] = {ALICE, BOB, ROOT};
    struct server s;
    char blocker[32], queued[32], path[128], text[4096];
    int fds[32], n = 0, refused = 0, status, fd;

    server_start_with(&s, 0, opts);
    http_queued_job(&s, blocker, queued);
    snprintf(path, sizeof path, "/v1/jobs/%s/events", queued);
    /* Streams until the server refuses them with an answer, or until they
     * hold all 16 connections (a connection libmicrohttpd closes at once,
     * its thread's share being full, is tried again). */
    for (int i = 0; i < 100 && n < 16 && refused < 3; i++) {
        fd = http_open_stream(&s, tokens_[i % 3], path, &status);
        if (status == 200) {
            fds[n++] = fd;
            continue;
        }
        close(fd);
        if (status == 503 || status == 429)
            refused++;
    }
    fprintf(stderr, "test_tenants: streams under 16 connections: %d open, then %d refused\n",
            n, refused);
    /* /livez and /readyz, with a deadline of 10 s each. */
    for (int k = 0; k < 2; k++) {
        const char *probe = k ? "/readyz" : "/livez";
        snprintf(text, sizeof text, "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                 probe);
        fd = raw_connect_from(&s, NULL);
        http_send(fd, text, strlen(text));
        status = 0;
        http_read_to_close(fd, text, sizeof text, 10);
        sscanf(text, "HTTP/1.1 %d", &status);
        close(fd);
        ck_assert_msg(status == 200, "%s with %d streams open: %d (%.100s)", probe, n, status,
                      text);
    }
    ck_assert_int_le(n, 8);
    ck_assert_int_ge(refused, 1);
    for (int i = 0; i < n; i++)
        close(fds[i]);
    job_cancel(&s, ALICE, blocker, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

static void http_write_tokens(const struct server *s, const char *text)
{
    char path[128], tmp[160];
    FILE *f;

    snprintf(path, sizeof path, "%s/tokens", s->dir);
    snprintf(tmp, sizeof tmp, "%s/tokens.new", s->dir);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static int http_log_has(const struct server *s, const char *phrase)
{
    char path[128], text[65536];
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "%s/server.log", s->dir);
    if (!(f = fopen(path, "r")))
        return 0;
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    return strstr(text, phrase) != NULL;
}

/*
 * SIGHUP reloads the tokens file (as nginx reloads on HUP): new tokens
 * work, removed ones stop, a running job goes on; a bad file keeps the
 * tokens loaded before and the log says why. The server never dies of it.
 */
START_TEST(test_http_sighup_reloads_tokens)
{
    static const char *const opts[] = {"--max-running", "1", NULL};
    struct server s;
    char blocker[32];
    struct reply r;
    json_t *doc;

    server_start_with(&s, 0, opts);
    job_create(&s, ALICE, http_endless_job, blocker);
    json_decref(job_wait(&s, ALICE, blocker, "running", 30));
    http_write_tokens(&s, "alice:alice-secret-0123456789\n"
                          "carol:carol-secret-0123456789\n"
                          "root:root-secret-0123456789ab:admin\n");
    ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
    /* Wait for the reload: carol's token comes to work. */
    for (double until = tu_now() + 10;;) {
        r = req(&s, "GET", "/v1/jobs", "carol-secret-0123456789", NULL, NULL);
        free(r.body);
        if (r.status == 200)
            break;
        ck_assert_msg(r.status == 401, "carol before the reload: %ld", r.status);
        ck_assert_msg(tu_now() < until, "carol's token did not come to work");
        usleep(50000);
    }
    r = req(&s, "GET", "/v1/jobs", BOB, NULL, NULL);
    ck_assert_msg(r.status == 401, "bob, removed: %ld", r.status);
    free(r.body);
    doc = job_get(&s, ALICE, blocker);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "running");
    json_decref(doc);

    /* A bad file: the tokens stay as they were, and the log says why. */
    http_write_tokens(&s, "alice:short\n");
    ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
    for (double until = tu_now() + 10; !http_log_has(&s, "kept the tokens loaded before");)
        ck_assert_msg(tu_now() < until, "no word of the bad tokens file in the log");
    ck_assert(http_log_has(&s, "tokens:1: expected NAME:SECRET"));
    r = req(&s, "GET", "/v1/jobs", "carol-secret-0123456789", NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    doc = job_get(&s, ALICE, blocker);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "running");
    json_decref(doc);
    job_cancel(&s, ALICE, blocker, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

/* /metrics tells how busy the server is and who is running: a token is
 * needed, unless --metrics-public says otherwise. */
START_TEST(test_http_metrics_needs_a_token)
{
    static const char *const opts[] = {"--metrics-public", NULL};
    struct server s;
    struct reply r;

    server_start(&s, 0);
    r = req(&s, "GET", "/metrics", NULL, NULL, NULL);
    ck_assert_msg(r.status == 401, "/metrics without a token: %ld", r.status);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    free(r.body);
    r = req(&s, "GET", "/metrics", BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "ecopt_jobs{state=\"queued\"}"));
    free(r.body);
    server_stop(&s, SIGTERM);
    server_start_with(&s, 0, opts);
    r = req(&s, "GET", "/metrics", NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* lambda2 must be 0 (least squares without lambda1 only) or not below
 * the least strong convexity a job can start with: a logistic 0, a 0
 * with lambda1, -1e-3 and 5e-324 are refused at submit, naming the
 * field and the bound, rather than failing later in the job. */
START_TEST(test_http_lambda2_positive)
{
    /* Each body and what its refusal says: 0 is a general convex problem,
     * taken for least squares without lambda1 alone. */
    static const char *const bodies[][2] = {
        {"{\"dataset\": \"heart_scale\", \"lambda2\": 0}", "for the squared loss only"},
        {"{\"dataset\": \"heart_scale\", \"lambda2\": -1e-3}", "[1e-12, 1000000]"},
        {"{\"dataset\": \"heart_scale\", \"lambda2\": 0.0, \"lambda1\": 1e-3,"
         " \"loss\": \"squared\", \"algorithm\": \"gd\"}", "needs lambda1 = 0"},
        {"{\"dataset\": \"heart_scale\", \"lambda2\": 5e-324}", "[1e-12, 1000000]"},
    };
    struct server s;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        struct reply r = req(&s, "POST", "/v1/jobs", ALICE, bodies[i][0], NULL);
        ck_assert_msg(r.status == 422, "%s: %ld %.300s", bodies[i][0], r.status, r.body);
        ck_assert_msg(strstr(r.body, "\"field\":\"lambda2\""), "%.300s", r.body);
        ck_assert_msg(strstr(r.body, bodies[i][1]), "%.300s", r.body);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/* Processes whose parent is pid, up to max of them. */
static int http_children(pid_t pid, pid_t *out, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)) && n < max) {
        char path[300], text[512], *p;
        long ppid;
        FILE *f;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        p = fgets(text, sizeof text, f);
        fclose(f);
        if (!p || !(p = strrchr(text, ')')))
            continue;
        if (sscanf(p + 2, "%*c %ld", &ppid) == 1 && ppid == pid)
            out[n++] = (pid_t)atol(de->d_name);
    }
    closedir(d);
    return n;
}

/* Whether pid has descriptor fd open (and its descriptors can be read). */
static int http_fd_open(pid_t pid, int fd)
{
    char link[64], target[256];

    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
    return readlink(link, target, sizeof target) > 0;
}

/* How many descriptors of pid lead to the file at path. */
static int http_fds_to(pid_t pid, const char *path)
{
    char dir[64], link[340], target[512];
    DIR *d;
    struct dirent *de;
    int n = 0;

    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    if (!(d = opendir(dir)))
        return 0;
    while ((de = readdir(d))) {
        ssize_t l;
        if (de->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "%s/%s", dir, de->d_name);
        if ((l = readlink(link, target, sizeof target - 1)) <= 0)
            continue;
        target[l] = '\0';
        n += strcmp(target, path) == 0;
    }
    closedir(d);
    return n;
}

/*
 * Whether this process may read where another user's descriptors lead
 * (/proc/PID/fd/N of a coordinator that dropped to nobody): that is ptrace
 * access, CAP_SYS_PTRACE, which root in a container lacks. Whether a
 * descriptor is open (lstat of its entry) needs no capability.
 */
static int http_fd_links_readable(void)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    unsigned long long eff = 0;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "CapEff: %llx", &eff) == 1)
            break;
    fclose(f);
    return (int)((eff >> CAP_SYS_PTRACE) & 1);
}

/* Whether pid has descriptor fd open, its link readable or not. */
static int http_fd_present(pid_t pid, int fd)
{
    char link[64];
    struct stat st;

    snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
    return lstat(link, &st) == 0;
}

/* Whether descriptor fd of pid lacks close-on-exec (0 when not open). */
static int http_fd_inheritable(pid_t pid, int fd)
{
    char path[128], line[128];
    unsigned long flags = 0;
    int found = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/fdinfo/%d", (int)pid, fd);
    if (!(f = fopen(path, "r")))
        return 0;
    while (!found && fgets(line, sizeof line, f))
        found = sscanf(line, "flags: %lo", &flags) == 1;
    fclose(f);
    return found && !(flags & O_CLOEXEC);
}

/* The descriptors of pid above 2 without close-on-exec, but for those the
 * test process itself would hand down (skip[fd] set). */
static int http_fds_without_cloexec(pid_t pid, const char *skip, char *which, size_t len)
{
    char dir[64];
    DIR *d;
    struct dirent *de;
    int n = 0;

    which[0] = '\0';
    snprintf(dir, sizeof dir, "/proc/%d/fdinfo", (int)pid);
    ck_assert_ptr_nonnull(d = opendir(dir));
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name);

        if (de->d_name[0] == '.' || fd <= 2 || (fd < 4096 && skip[fd]))
            continue;
        if (http_fd_inheritable(pid, fd)) {
            char link[300], target[256] = "?";
            ssize_t l;
            snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)pid, fd);
            if ((l = readlink(link, target, sizeof target - 1)) > 0)
                target[l] = '\0';
            snprintf(which + strlen(which), len - strlen(which), " %d (%s)", fd, target);
            n++;
        }
    }
    closedir(d);
    return n;
}

/*
 * Descriptors: whatever the service inherited or opened, a coordinator
 * holds only stdio and its report pipe, and every descriptor the service
 * itself opens is close-on-exec, while jobs run, streams stream and the
 * data directory is listed.
 */
START_TEST(test_http_descriptors)
{
    static const char *const opts[] = {"--max-running", "1", NULL};
    struct server s;
    char marker[] = "/tmp/ecopt-inherited-XXXXXX", blocker[32], queued[32], path[128];
    char which[1024];
    pid_t kids[8];
    int mfd, nkids = 0, sfd, status;
    struct reply r;

    static char inherited[4096];

    ck_assert_int_ge(mfd = mkstemp(marker), 0);     /* not close-on-exec */
    for (int fd = 3; fd < 4096; fd++)
        inherited[fd] = (char)http_fd_inheritable(getpid(), fd);
    server_start_with(&s, 0, opts);
    http_queued_job(&s, blocker, queued);
    snprintf(path, sizeof path, "/v1/jobs/%s/events", queued);
    sfd = http_open_stream(&s, ALICE, path, &status);
    ck_assert_int_eq(status, 200);
    r = req(&s, "GET", "/v1/datasets", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    for (double until = tu_now() + 10; (nkids = http_children(s.pid, kids, 8)) < 1;)
        ck_assert_msg(tu_now() < until, "no coordinator under the server");
    /* Without CAP_SYS_PTRACE the links of a coordinator that dropped to
     * nobody cannot be read: then only its report pipe is seen; that ecopt
     * run closes what it inherited, test_http_run_closes_inherited shows
     * (a coordinator of this user, readable). */
    if (!http_fd_links_readable())
        tu_skip("PTRACE", "test_tenants: no CAP_SYS_PTRACE (a container's root): "
                "the coordinators' links are not read");
    for (int i = 0; i < nkids; i++)
        if (http_fd_links_readable())
            ck_assert_msg(http_fd_open(kids[i], 3) && http_fds_to(kids[i], marker) == 0,
                          "coordinator %d holds the service's inherited descriptor (or "
                          "has no report pipe)", kids[i]);
        else
            ck_assert_msg(http_fd_present(kids[i], 3), "coordinator %d has no report pipe",
                          kids[i]);
    ck_assert_msg(http_fds_without_cloexec(s.pid, inherited, which, sizeof which) == 0,
                  "the service's own descriptors without close-on-exec:%s", which);
    close(sfd);
    job_cancel(&s, ALICE, blocker, 30);
    server_stop(&s, SIGTERM);
    close(mfd);
    unlink(marker);
}
END_TEST

/* `ecopt run`, started by anyone with descriptors open, closes all of them
 * but stdio and its report descriptor before it does anything else. */
START_TEST(test_http_run_closes_inherited)
{
    const char *bin = getenv("ECOPT_BIN");
    char marker[] = "/tmp/ecopt-inherited-XXXXXX", spec[64];
    int mfd, rep[2], st;
    pid_t pid;
    static char buf[65536];
    ssize_t n;

    ck_assert_int_ge(mfd = mkstemp(marker), 0);
    tu_write_temp_str(http_endless_process_job, spec, sizeof spec);
    ck_assert_int_eq(pipe(rep), 0);
    pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 1);
        dup2(devnull, 2);
        dup2(rep[1], 3);
        close(rep[0]);
        execl(bin && *bin ? bin : "build/ecopt", "ecopt", "run", spec, "--report-fd", "3",
              "--quiet", (char *)NULL);
        _exit(127);
    }
    close(rep[1]);
    /* Its first record, whole: it runs. */
    for (size_t got = 0; !memchr(buf, '\n', got);) {
        ck_assert_uint_lt(got, sizeof buf - 1);
        n = read(rep[0], buf + got, sizeof buf - 1 - got);
        ck_assert_int_gt(n, 0);
        got += (size_t)n;
        buf[got] = '\0';
    }
    ck_assert_msg(strstr(buf, "\"type\":\"start\""), "%.200s", buf);
    ck_assert_msg(http_fd_open(pid, 3), "the coordinator's descriptors cannot be read");
    ck_assert_msg(http_fds_to(pid, marker) == 0, "ecopt run kept an inherited descriptor");
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    close(rep[0]);
    close(mfd);
    unlink(marker);
    unlink(spec);
}
END_TEST

static void add_http_cases(Suite *s)
{
    TCase *tc = tcase_create("http");

    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_http_framing);
    tcase_add_test(tc, test_http_missing_token_is_not_a_failure);
    tcase_add_test(tc, test_http_rotating_addresses);
    tcase_add_test(tc, test_http_experiment_quota);
    tcase_add_test(tc, test_http_streams_per_token);
    tcase_add_test(tc, test_http_livez_beside_streams);
    tcase_add_test(tc, test_http_sighup_reloads_tokens);
    tcase_add_test(tc, test_http_metrics_needs_a_token);
    tcase_add_test(tc, test_http_lambda2_positive);
    tcase_add_test(tc, test_http_descriptors);
    tcase_add_test(tc, test_http_run_closes_inherited);
    suite_add_tcase(s, tc);
}

/* ---- jobs: always stop, memory bounded ---- */

/*
 * A P* solve that takes minutes of CPU (restarted proximal gradient with
 * lambda1 > 0 and kappa = 1e10 on w8a) behind a load of a fraction of a
 * second: a job of it that has used 1.5 s of CPU is in its solve.
 */
#define JOB_SLOW_SOLVE                                                        \
    "{\"dataset\": \"w8a\", \"algorithm\": \"gd\", \"workers\": 2,"           \
    " \"max_rounds\": 10, \"lambda1\": 1e-5, \"lambda2_rel\": 1e-10"
/* A job that runs until stopped, on forked workers, with few rows. */
#define JOB_ENDLESS                                                           \
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"process\"," \
    " \"max_rounds\": 40000000, \"target\": 0, \"eval_every\": 1000000"

/* The coordinator of job id (`ecopt run STATE/ID.json ...`), or 0. */
static pid_t job_coordinator(const char *id)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    char want[64];
    pid_t found = 0;

    ck_assert_ptr_nonnull(d);
    snprintf(want, sizeof want, "/%s.json", id);
    while (!found && (de = readdir(d))) {
        char path[300], buf[4096];
        ssize_t n;
        int fd;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
            continue;
        n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        /* argv[0] NUL "run" NUL SPEC NUL ... */
        char *a1 = buf + strlen(buf) + 1;
        if (a1 >= buf + n || strcmp(a1, "run") != 0)
            continue;
        char *a2 = a1 + strlen(a1) + 1;
        size_t l2 = a2 < buf + n ? strlen(a2) : 0;
        if (l2 > strlen(want) && strcmp(a2 + l2 - strlen(want), want) == 0)
            found = (pid_t)atoi(de->d_name);
    }
    closedir(d);
    return found;
}

/* Waits up to timeout seconds for job id's coordinator to exist. */
static pid_t job_coordinator_wait(const char *id, double timeout)
{
    double until = tu_now() + timeout;
    pid_t pid;

    while (!(pid = job_coordinator(id))) {
        ck_assert_msg(tu_now() < until, "job %s: no coordinator after %g s", id, timeout);
        usleep(20000);
    }
    return pid;
}

/* CPU seconds the process has used; -1 when it is gone. */
static double proc_cpu(pid_t pid)
{
    char path[64], buf[2048], *p;
    unsigned long ut = 0, st = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    p = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!p || !(p = strrchr(buf, ')')))
        return -1;
    /* After the name: state, then fields 4..13, then utime and stime. */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The process's real and effective uid; -1 when it is gone. */
static long proc_uid(pid_t pid, long *euid)
{
    char path[64], line[256];
    long ruid = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    *euid = -1;
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Uid: %ld %ld", &ruid, euid) == 2)
            break;
    fclose(f);
    return ruid;
}

/* Waits up to timeout seconds for pid to have used cpu seconds of CPU. */
static void proc_cpu_wait(pid_t pid, double cpu, double timeout)
{
    double until = tu_now() + timeout, used;

    while ((used = proc_cpu(pid)) < cpu) {
        ck_assert_msg(used >= 0, "process %d ended", (int)pid);
        ck_assert_msg(tu_now() < until, "process %d used %g s of CPU in %g s", (int)pid,
                      used, timeout);
        usleep(20000);
    }
}

/* Waits up to timeout seconds for the process group to be gone: every
 * process of the job ended and reaped. */
static void group_gone_wait(pid_t pgid, double timeout)
{
    double until = tu_now() + timeout;

    while (kill(-pgid, 0) == 0 || errno != ESRCH) {
        ck_assert_msg(tu_now() < until, "processes of group %d still there after %g s",
                      (int)pgid, timeout);
        usleep(20000);
    }
}

static const char *str_of(json_t *doc, const char *key)
{
    const char *v = json_string_value(json_object_get(doc, key));
    return v ? v : "";
}

/*
 * Attack: hold a slot with a job whose P* solve is deaf to cancel, and
 * runs as root. Today the solve runs as root before the privilege drop
 * and goes on long after the cancel. Now it runs as the worker user and
 * the cancel ends it at once, with a reason that says where.
 */
START_TEST(test_job_cancel_in_solve)
{
    struct server s;
    char id[32];
    pid_t pid;
    long ruid, euid;
    json_t *doc;

    server_start(&s, 0);
    job_create(&s, ALICE, JOB_SLOW_SOLVE "}", id);
    pid = job_coordinator_wait(id, 30);
    proc_cpu_wait(pid, 1.5, 90);      /* loaded (a fraction of that): solving */
    doc = job_get(&s, ALICE, id);
    ck_assert_msg(json_is_null(json_object_get(doc, "problem")) ||
                      !json_object_get(doc, "problem"),
                  "the job is past its solve already");
    json_decref(doc);
    ruid = proc_uid(pid, &euid);
    if (getuid() == 0)
        ck_assert_msg(ruid > 0 && euid > 0,
                      "the P* solve runs as uid %ld (effective %ld), not the worker user",
                      ruid, euid);
    job_cancel(&s, ALICE, id, 30);
    doc = job_get(&s, ALICE, id);
    ck_assert_msg(strstr(str_of(doc, "reason"), "while solving for P*"),
                  "reason: %s", str_of(doc, "reason"));
    json_decref(doc);
    group_gone_wait(pid, 10);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * Attack: a solve that outlives the job's time limit. Today max_seconds
 * counts only the run, so the job holds its slot for as long as the
 * solve takes. Now the solve is inside max_seconds: the job fails saying
 * so.
 */
START_TEST(test_job_time_limit_in_solve)
{
    struct server s;
    char id[32];
    json_t *doc;

    server_start(&s, 0);
    job_create(&s, BOB, JOB_SLOW_SOLVE ", \"max_seconds\": 2}", id);
    doc = job_wait(&s, BOB, id, "final", 40);
    ck_assert_str_eq(str_of(doc, "state"), "failed");
    ck_assert_msg(strstr(str_of(doc, "reason"), "max_seconds 2 reached before the run"),
                  "reason: %s", str_of(doc, "reason"));
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Waits for the job's start record (its problem), so its workers run. */
static void job_started_wait(const struct server *s, const char *token, const char *id)
{
    double until = tu_now() + 60;

    for (;;) {
        json_t *doc = job_get(s, token, id);
        json_t *pb = json_object_get(doc, "problem");
        int started = json_is_object(pb);

        json_decref(doc);
        if (started)
            return;
        ck_assert_msg(tu_now() < until, "job %s did not start in 60 s", id);
        usleep(50000);
    }
}

/*
 * Attack: stop the coordinator (SIGSTOP) so that cancel's SIGTERM never
 * lands, and keep the slot and the workers. Today the job stays running.
 * Now SIGKILL follows to the whole group, the job is cancelled with a
 * reason, every process is gone and the slot (the only one) runs the
 * next job.
 */
START_TEST(test_job_stopped_cancel)
{
    static const char *const opts[] = {"--max-running", "1", NULL};
    struct server s;
    char id[32], next[32];
    pid_t pid;
    json_t *doc;

    server_start_with(&s, 0, opts);
    job_create(&s, ALICE, JOB_ENDLESS "}", id);
    job_started_wait(&s, ALICE, id);
    pid = job_coordinator_wait(id, 30);
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    job_cancel(&s, ALICE, id, 30);
    doc = job_get(&s, ALICE, id);
    ck_assert_msg(strstr(str_of(doc, "reason"), "were killed"), "reason: %s",
                  str_of(doc, "reason"));
    json_decref(doc);
    group_gone_wait(pid, 10);
    job_create(&s, BOB, "{\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20}",
               next);
    json_decref(job_wait(&s, BOB, next, "succeeded", 60));
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * Attack: stop the coordinator and never cancel: the job would hold its
 * slot for good, its own max_seconds being its own business. Now the
 * service stops a job that outlives its time limit: failed, with why.
 */
START_TEST(test_job_stopped_time_limit)
{
    struct server s;
    char id[32];
    pid_t pid;
    json_t *doc;

    server_start(&s, 0);
    job_create(&s, BOB, JOB_ENDLESS ", \"max_seconds\": 1}", id);
    pid = job_coordinator_wait(id, 30);
    ck_assert_int_eq(kill(pid, SIGSTOP), 0);
    doc = job_wait(&s, BOB, id, "final", 60);
    ck_assert_str_eq(str_of(doc, "state"), "failed");
    ck_assert_msg(strstr(str_of(doc, "reason"), "past its time limit (max_seconds 1)"),
                  "reason: %s", str_of(doc, "reason"));
    json_decref(doc);
    group_gone_wait(pid, 10);
    server_stop(&s, SIGTERM);
}
END_TEST

static void add_job_cases(Suite *s)
{
    TCase *tc = tcase_create("jobs");

    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_job_cancel_in_solve);
    tcase_add_test(tc, test_job_time_limit_in_solve);
    tcase_add_test(tc, test_job_stopped_cancel);
    tcase_add_test(tc, test_job_stopped_time_limit);
    suite_add_tcase(s, tc);
}

/* ---- datasets: versions, owners, uploads ---- */

/* A server of its own data directory (a copy of heart_scale in it), its
   tokens file, and the current directory it runs in: its own folder. */
struct data_server {
    struct server s;
    char data[128];
};

static void data_copy(const char *from, const char *to)
{
    char cmd[1200];

    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static void data_start_with(struct data_server *d, const char *const *extra);

static void data_start(struct data_server *d)
{
    data_start_with(d, NULL);
}

static void data_start_with(struct data_server *d, const char *const *extra)
{
    char path[256], src[512], cwd[512];
    FILE *f;

    snprintf(d->s.dir, sizeof d->s.dir, "/tmp/ecopt-tenants-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->s.dir));
    snprintf(d->s.db, sizeof d->s.db, "%s/ecopt.db", d->s.dir);
    snprintf(path, sizeof path, "%s/tokens", d->s.dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(tokens, f);
    fclose(f);
    snprintf(d->data, sizeof d->data, "%s/data", d->s.dir);
    ck_assert_int_eq(mkdir(d->data, 0755), 0);
    snprintf(path, sizeof path, "%s/heart_scale", d->data);
    data_copy(tu_data_path("heart_scale", src, sizeof src), path);
    /* The server runs where its tokens file is, as a service often does. */
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    setenv("ECOPT_DATA_DIR", d->data, 1);
    ck_assert_int_eq(chdir(d->s.dir), 0);
    server_start_with(&d->s, 1, extra);
    ck_assert_int_eq(chdir(cwd), 0);
}

static void data_stop(struct data_server *d)
{
    char cmd[300];

    server_stop(&d->s, SIGTERM);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->s.dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* POST /v1/datasets?QUERY with bytes as the body. */
static struct reply data_upload(const struct server *s, const char *token, const char *query,
                                const void *body, size_t len)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    struct reply r = {0};
    char url[512], auth[256];

    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/datasets?%s", s->port, query);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Content-Type: application/octet-stream");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

/* An upload that must get status; returns its document. */
static json_t *data_upload_ok(const struct server *s, const char *token, const char *query,
                              const char *text, long status)
{
    struct reply r = data_upload(s, token, query, text, strlen(text));
    json_t *doc;

    ck_assert_msg(r.status == status, "upload %s: %ld %s", query, r.status, r.body);
    doc = json_of(&r);
    free(r.body);
    return doc;
}

/* A refused upload: its status and a phrase of its problem+json detail. */
static void data_refused(struct reply r, long status, const char *phrase)
{
    ck_assert_msg(r.status == status, "status %ld, not %ld: %s", r.status, status, r.body);
    ck_assert_msg(strstr(r.content_type, "application/problem+json"), "%s", r.content_type);
    ck_assert_msg(strstr(r.body, phrase), "'%s' not in %s", phrase, r.body);
    free(r.body);
}

/* The small dataset of n rows the tests upload (distinct per seed). */
static char *data_rows(int n, int seed)
{
    size_t cap = (size_t)n * 64 + 1, len = 0;
    char *t = malloc(cap);

    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(t + len, cap - len, "%s 1:%d 2:%g 3:%g\n",
                                (i + seed) % 3 ? "+1" : "-1", (i * 7 + seed) % 5 + 1,
                                0.25 * ((i * 13 + seed * 3) % 9), 1.0 / (i + seed + 1));
    return t;
}

/*
 * Memory is estimated at submit: a 50-byte file whose largest index is
 * 4e6 makes every d-sized vector 32 MB, and the job is refused with the
 * estimate and the limit, whatever the backend; a job that fits runs with
 * address-space limits derived from its estimate.
 */
START_TEST(test_data_memory_estimate)
{
    static const char *const opts[] = {"--max-job-memory", "512", NULL};
    static const char tiny[] = "+1 1:1 4000000:0.5\n-1 2:1\n+1 3:1\n-1 4:1\n";
    struct data_server d;
    struct reply r;
    json_t *doc;
    char id[32], path[96];

    data_start_with(&d, opts);
    json_decref(data_upload_ok(&d.s, BOB, "name=tiny", tiny, 201));
    for (int inproc = 0; inproc <= 1; inproc++) {
        char spec[256];

        snprintf(spec, sizeof spec,
                 "{\"dataset\": \"tiny\", \"workers\": 4, \"max_rounds\": 5,"
                 " \"compressor\": {\"type\": \"topk\", \"k\": 1}%s}",
                 inproc ? ", \"backend\": \"inproc\"" : "");
        r = req(&d.s, "POST", "/v1/jobs", BOB, spec, NULL);
        ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
        ck_assert_msg(strstr(r.body, "would need about") &&
                      strstr(r.body, "limit of 512 MiB") &&
                      strstr(r.body, "\"max_job_memory\""), "%s", r.body);
        ck_assert_msg(strstr(r.body, inproc ? "in process" : "worker processes of"),
                      "%s", r.body);
        free(r.body);
    }
    job_create(&d.s, BOB, "{\"dataset\": \"heart_scale\", \"workers\": 2,"
               " \"max_rounds\": 20}", id);
    doc = job_wait(&d.s, BOB, id, "succeeded", 60);
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/jobs/%s/log", id);
    r = req(&d.s, "GET", path, BOB, NULL, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
#ifndef __SANITIZE_ADDRESS__
    ck_assert_msg(strstr(r.body, "memory     limits: coordinator ") &&
                  strstr(r.body, ", each worker process "), "%s", r.body);
#endif
    free(r.body);
    data_stop(&d);
}
END_TEST

/* Replacing another tenant's dataset, or the shared reference data. */
START_TEST(test_data_replace_needs_owner)
{
    struct data_server d;
    char *v1 = data_rows(40, 1), *v2 = data_rows(40, 2);
    json_t *doc;

    data_start(&d);
    json_decref(data_upload_ok(&d.s, ALICE, "name=alices", v1, 201));
    /* bob may neither move alice's name nor the admins' heart_scale ... */
    data_refused(data_upload(&d.s, BOB, "name=alices&replace=true", v2, strlen(v2)), 403,
                 "owned by 'alice'");
    data_refused(data_upload(&d.s, BOB, "name=heart_scale&replace=true", v2, strlen(v2)),
                 403, "administrators'");
    /* ... and alice not the admins' either; she moves her own, root any. */
    data_refused(data_upload(&d.s, ALICE, "name=heart_scale&replace=true", v2, strlen(v2)),
                 403, "administrators'");
    doc = data_upload_ok(&d.s, ALICE, "name=alices&replace=true", v2, 200);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "owner")), "alice");
    json_decref(doc);
    json_decref(data_upload_ok(&d.s, ROOT, "name=alices&replace=true", v1, 200));
    doc = data_upload_ok(&d.s, ROOT, "name=heart_scale&replace=true", v1, 200);
    json_decref(doc);
    data_stop(&d);
    free(v1);
    free(v2);
}
END_TEST

/* A file next to the server (its tokens) read through a dataset name. */
START_TEST(test_data_no_working_directory)
{
    struct data_server d;
    char id[32];
    json_t *doc;
    const char *reason, *state;

    data_start(&d);
    /* A valid dataset named like the file beside the server. */
    json_decref(data_upload_ok(&d.s, BOB, "name=tokens", "+1 1:1\n-1 2:1\n+1 1:2\n-1 2:2\n",
                               201));
    job_create(&d.s, BOB, "{\"dataset\": \"tokens\", \"workers\": 2, \"max_rounds\": 20}",
               id);
    doc = job_wait(&d.s, BOB, id, "final", 120);
    state = json_string_value(json_object_get(doc, "state"));
    reason = json_string_value(json_object_get(doc, "reason"));
    ck_assert_msg(!reason || !strstr(reason, "secret"), "the reason leaks: %s", reason);
    ck_assert_msg(strcmp(state, "succeeded") == 0, "%s: %s", state, reason);
    /* It ran on the catalog's bytes (d = 2), not on the tokens file. */
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "problem"), "d")),
                     2);
    json_decref(doc);
    data_stop(&d);
}
END_TEST

/* No failure reason quotes a data file's bytes. */
START_TEST(test_data_reasons_quote_nothing)
{
    struct data_server d;
    struct reply r;

    data_start(&d);
    static const char leak[] = "+1 1:1\nalice:alice-secret-0123456789 1:1\n";

    r = data_upload(&d.s, BOB, "name=leak", leak, sizeof leak - 1);
    ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
    ck_assert_msg(!strstr(r.body, "secret"), "quotes the file: %s", r.body);
    ck_assert_msg(strstr(r.body, "leak:2:"), "names no line: %s", r.body);
    free(r.body);
    data_stop(&d);
}
END_TEST

/* Job specs for the P* checks: heart_scale-like, a few rounds. */
static const char race_spec[] =
    "{\"dataset\": \"%s\", \"workers\": 2, \"max_rounds\": 30, \"lambda2\": 0.01}";

/* P* of `ecopt run` on a file's bytes. */
static double data_pstar_of(const char *path)
{
    char spec_path[] = "/tmp/ecopt-pstar-XXXXXX", cmd[1200], spec[600];
    const char *bin = getenv("ECOPT_BIN");
    json_error_t je;
    json_t *doc;
    double p;
    FILE *f;
    int fd = mkstemp(spec_path);

    ck_assert_int_ge(fd, 0);
    snprintf(spec, sizeof spec, race_spec, path);
    ck_assert_int_eq(write(fd, spec, strlen(spec)), (ssize_t)strlen(spec));
    close(fd);
    snprintf(cmd, sizeof cmd, "'%s' run %s --format json --quiet --backend inproc 2>/dev/null",
             bin && *bin ? bin : "build/ecopt", spec_path);
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    doc = json_loadf(f, 0, &je);
    pclose(f);
    unlink(spec_path);
    ck_assert_msg(doc != NULL, "ecopt run on %s: %s", path, je.text);
    p = json_number_value(json_object_get(json_object_get(doc, "problem"), "P_star"));
    json_decref(doc);
    return p;
}

static int data_same(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(a));
}

/*
 * The P* race: bob replaces his dataset in a loop while alice's jobs on
 * it start. Every job's P* is the P* of the version it recorded, and the
 * cache is not poisoned: a job afterwards on each version gets its P*.
 */
START_TEST(test_data_pstar_race)
{
    enum { JOBS = 10 };
    struct data_server d;
    char *v[2] = {data_rows(400, 3), data_rows(300, 11)};
    char sha[2][65], path[2][256], spec[300], ids[JOBS][32];
    double pstar[2];
    pid_t flipper;

    data_start(&d);
    for (int i = 0; i < 2; i++) {
        json_t *doc;
        FILE *f;

        snprintf(path[i], sizeof path[i], "%s/v%d.txt", d.s.dir, i);
        ck_assert_ptr_nonnull(f = fopen(path[i], "w"));
        fputs(v[i], f);
        fclose(f);
        pstar[i] = data_pstar_of(path[i]);
        doc = data_upload_ok(&d.s, BOB, i ? "name=flip&replace=true"
                                          : "name=flip&shared=true", v[i], i ? 200 : 201);
        snprintf(sha[i], sizeof sha[i], "%s",
                 json_string_value(json_object_get(doc, "sha256")));
        json_decref(doc);
    }
    ck_assert(!data_same(pstar[0], pstar[1]));
    flipper = fork();
    if (flipper == 0) {
        for (int i = 0;; i++) {
            struct reply r = data_upload(&d.s, BOB, "name=flip&replace=true", v[i % 2],
                                         strlen(v[i % 2]));
            free(r.body);
        }
    }
    snprintf(spec, sizeof spec, race_spec, "flip");
    for (int j = 0; j < JOBS; j++)
        job_create(&d.s, ALICE, spec, ids[j]);
    for (int j = 0; j < JOBS; j++)
        json_decref(job_wait(&d.s, ALICE, ids[j], "final", 300));
    kill(flipper, SIGKILL);
    waitpid(flipper, NULL, 0);
    for (int round = 0; round < 2; round++) {
        for (int j = 0; j < JOBS; j++) {
            json_t *doc = job_get(&d.s, ALICE, ids[j]);
            const char *ver = json_string_value(json_object_get(doc, "dataset_sha256"));
            json_t *pb = json_object_get(doc, "problem");
            double p = json_number_value(json_object_get(pb, "P_star"));
            int k;

            ck_assert_msg(ver, "job %s records no version", ids[j]);
            k = strcmp(ver, sha[0]) == 0 ? 0 : strcmp(ver, sha[1]) == 0 ? 1 : -1;
            ck_assert_msg(k >= 0, "job %s: version %s is neither", ids[j], ver);
            ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "succeeded");
            ck_assert_msg(data_same(p, pstar[k]), "job %s on version %d: P* %.17g, not %.17g",
                          ids[j], k, p, pstar[k]);
            json_decref(doc);
        }
        if (round == 1)
            break;
        /* After the race, one job on each version, from the cache. */
        for (int i = 0; i < 2; i++) {
            struct reply r = data_upload(&d.s, BOB, "name=flip&replace=true", v[i],
                                         strlen(v[i]));
            free(r.body);
            job_create(&d.s, ALICE, spec, ids[i]);
            json_decref(job_wait(&d.s, ALICE, ids[i], "final", 120));
        }
        for (int j = 2; j < JOBS; j++)
            snprintf(ids[j], sizeof ids[j], "%s", ids[j % 2]);
    }
    data_stop(&d);
    free(v[0]);
    free(v[1]);
}
END_TEST

/* gzip of text repeated `repeat` times; *out_len its size. */
static unsigned char *data_gzip(const char *text, size_t len, size_t repeat, size_t *out_len)
{
    z_stream z = {0};
    size_t cap = 1 << 16, n = 0;
    unsigned char *out = malloc(cap);
    int zr;

    ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY),
                     Z_OK);
    for (size_t r = 0; r < repeat; r++) {
        z.next_in = (unsigned char *)text;
        z.avail_in = (uInt)len;
        while (z.avail_in) {
            if (cap - n < 1 << 15)
                out = realloc(out, cap *= 2);
            z.next_out = out + n;
            z.avail_out = (uInt)(cap - n);
            ck_assert_int_eq(deflate(&z, Z_NO_FLUSH), Z_OK);
            n = cap - z.avail_out;
        }
    }
    do {
        if (cap - n < 1 << 15)
            out = realloc(out, cap *= 2);
        z.next_out = out + n;
        z.avail_out = (uInt)(cap - n);
        zr = deflate(&z, Z_FINISH);
        n = cap - z.avail_out;
    } while (zr != Z_STREAM_END);
    deflateEnd(&z);
    *out_len = n;
    return out;
}

/* The server's peak resident memory (VmHWM) in kB. */
static long data_hwm_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
            break;
    fclose(f);
    ck_assert_int_gt(kb, 0);
    return kb;
}

/*
 * The gzip bomb: about 1 MB that inflates to 1.2 GB of valid rows. The
 * server's peak memory stays within 100 MB of what it was, and the reply
 * is a 413 naming the limit the validator met.
 */
START_TEST(test_data_gzip_bomb)
{
    struct data_server d;
    char *chunk = malloc(1 << 20);
    unsigned char *gz;
    size_t gzlen, k = 0;
    long before, after;
    struct reply r;

    while (k + 6 <= 1 << 20) {
        memcpy(chunk + k, "1 1:1\n", 6);
        k += 6;
    }
    gz = data_gzip(chunk, k, 1200, &gzlen);    /* 1.2 GB once inflated */
    free(chunk);
    data_start(&d);
    before = data_hwm_kb(d.s.pid);
    r = data_upload(&d.s, BOB, "name=bomb", gz, gzlen);
    after = data_hwm_kb(d.s.pid);
    ck_assert_msg(after - before < 100 * 1024, "VmHWM %ld kB -> %ld kB for %zu bytes of gzip",
                  before, after, gzlen);
    ck_assert_msg(r.status == 413 || r.status == 422, "%ld %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "upload_max_"), "names no limit: %s", r.body);
    free(r.body);
    free(gz);
    data_stop(&d);
}
END_TEST

/* gzip with bytes after its end; a file of labels only (d = 0); limits. */
START_TEST(test_data_upload_refusals)
{
    static const char rows[] = "+1 1:1\n-1 2:1\n";
    struct data_server d;
    unsigned char *gz, *junk;
    size_t gzlen;
    char *many = data_rows(20, 5);

    gz = data_gzip(rows, sizeof rows - 1, 1, &gzlen);
    junk = malloc(gzlen + 16);
    memcpy(junk, gz, gzlen);
    memcpy(junk + gzlen, "trailing-garbage", 16);
    setenv("ECOPT_UPLOAD_MAX_ROWS", "10", 1);
    data_start(&d);
    unsetenv("ECOPT_UPLOAD_MAX_ROWS");
    {
        struct reply r = data_upload(&d.s, BOB, "name=ok.gz", gz, gzlen);

        ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
        free(r.body);
    }
    /* Each is tried, and every one that is not refused is named. */
    {
        struct {
            const char *query;
            const void *body;
            size_t len;
            long status;
            const char *phrase;
        } cases[] = {
            {"name=junk.gz", junk, gzlen + 16, 422, "trailing garbage"},
            {"name=nod", "+1\n-1\n+1\n", 9, 422, "d = 0"},
            {"name=many", many, strlen(many), 413, "upload_max_rows"},
        };
        char missed[1024] = "";

        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            struct reply r = data_upload(&d.s, BOB, cases[i].query, cases[i].body,
                                         cases[i].len);

            if (r.status != cases[i].status || !strstr(r.body, cases[i].phrase))
                snprintf(missed + strlen(missed), sizeof missed - strlen(missed),
                         " [%s: %ld, not %ld '%s']", cases[i].query, r.status,
                         cases[i].status, cases[i].phrase);
            free(r.body);
        }
        ck_assert_msg(!missed[0], "not refused:%s", missed);
    }
    data_stop(&d);
    free(gz);
    free(junk);
    free(many);
}
END_TEST

/*
 * A data directory without a write bit (shared reference data) is left as
 * it is, even by a server running as root: no versions folder is made in
 * it, and a job there still runs on the version it recorded, read by its
 * name and checked against its hash.
 */
START_TEST(test_data_readonly_directory)
{
    struct data_server d;
    char id[32], path[200];
    struct stat st;
    json_t *doc;

    data_start(&d);
    ck_assert_int_eq(chmod(d.data, 0555), 0);
    job_create(&d.s, ALICE, "{\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20}",
               id);
    doc = job_wait(&d.s, ALICE, id, "final", 120);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "succeeded");
    ck_assert_ptr_nonnull(json_string_value(json_object_get(doc, "dataset_sha256")));
    json_decref(doc);
    snprintf(path, sizeof path, "%s/.versions", d.data);
    ck_assert_msg(stat(path, &st) != 0 && errno == ENOENT, "%s was made", path);
    ck_assert_int_eq(chmod(d.data, 0755), 0);
    data_stop(&d);
}
END_TEST

static void add_data_cases(Suite *s)
{
    TCase *tc = tcase_create("data");

    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_data_replace_needs_owner);
    tcase_add_test(tc, test_data_no_working_directory);
    tcase_add_test(tc, test_data_reasons_quote_nothing);
    tcase_add_test(tc, test_data_pstar_race);
    tcase_add_test(tc, test_data_gzip_bomb);
    tcase_add_test(tc, test_data_upload_refusals);
    tcase_add_test(tc, test_data_memory_estimate);
    tcase_add_test(tc, test_data_readonly_directory);
    suite_add_tcase(s, tc);
}

/* ---- main ---- */

int main(void)
{
    Suite *s = suite_create("tenants");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    add_http_cases(s);
    add_job_cases(s);
    add_data_cases(s);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
