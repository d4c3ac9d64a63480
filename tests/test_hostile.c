/*
 * Hostile HTTP against the real `ecopt serve`: oversized headers and
 * bodies, clients that stall half way, a thousand connections at once,
 * every truncation of a valid job, deep nesting, huge numbers, duplicate
 * keys, wrong content types, path traversal and unknown methods. Each gets
 * its 4xx with a problem+json body (where the service, not libmicrohttpd,
 * answers), the server never crashes and other clients are never held up.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "serverutil.h"
#include "testutil.h"

static const char valid_spec[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"algorithm\": \"eclk\","
    " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 50,"
    " \"name\": \"ok\"}";

/* ---- raw sockets, for what libcurl would not send --------------------------- */

/* A problem+json body with the status it was sent with. */
static void assert_problem(long status, const char *ctype, const char *body,
                           const char *what)
{
    json_t *doc;

    ck_assert_msg(strcmp(ctype, "application/problem+json") == 0,
                  "%s: %ld with Content-Type '%s': %.200s", what, status, ctype, body);
    doc = json_loads(body, 0, NULL);
    ck_assert_msg(json_is_object(doc), "%s: not JSON: %.200s", what, body);
    ck_assert_msg(json_integer_value(json_object_get(doc, "status")) == status,
                  "%s: status %ld, body says %.200s", what, status, body);
    ck_assert_msg(json_string_value(json_object_get(doc, "detail")), "%s: no detail", what);
    json_decref(doc);
}

/* The server answers an ordinary request promptly: GET /livez in < limit s. */
static void assert_responsive(const struct server *s, double limit, const char *when)
{
    double t0 = tu_now();
    struct reply r = req(s, "GET", "/livez", NULL, NULL, NULL);

    ck_assert_msg(r.status == 200, "%s: /livez %ld", when, r.status);
    ck_assert_msg(tu_now() - t0 < limit, "%s: /livez took %.2f s", when, tu_now() - t0);
    free(r.body);
    ck_assert_msg(kill(s->pid, 0) == 0, "%s: the server is gone", when);
}

/* A POST of body with the given Content-Type (NULL: none), as libcurl. */
static struct reply post(const struct server *s, const char *path, const char *ctype,
                         const char *body, size_t len)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    struct reply r = {0};
    char url[512], ct[256];

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", s->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    h = curl_slist_append(h, "Authorization: Bearer " ALICE);
    snprintf(ct, sizeof ct, "Content-Type:%s%s", ctype ? " " : "", ctype ? ctype : "");
    h = curl_slist_append(h, ct);      /* "Content-Type:" alone removes it */
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

static size_t jobs_count(const struct server *s)
{
    struct reply r = req(s, "GET", "/v1/jobs?limit=500", ROOT, NULL, NULL);
    json_t *doc;
    size_t n;

    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    n = json_array_size(json_object_get(doc, "jobs"));
    json_decref(doc);
    free(r.body);
    return n;
}

/* ---- headers ---------------------------------------------------------------- */

START_TEST(test_oversized_headers)
{
    struct server s;
    struct raw_reply *r = malloc(sizeof *r);
    size_t big = 200000;
    char *text = malloc(big + 256), *p;
    int fds[16];

    server_start(&s, 0);
    /* One header far over libmicrohttpd's per-connection pool. */
    p = text + sprintf(text, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\nX-Big: ");
    memset(p, 'a', big);
    strcpy(p + big, "\r\n\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 431 || r->status == 413,
                  "a 200 KB header: status %d: %.200s", r->status, r->text);
    fprintf(stderr, "test_hostile: a 200 KB header: %d (%s)\n", r->status,
            r->ctype[0] ? r->ctype : "no Content-Type");
    /* Thousands of small headers. */
    p = text + sprintf(text, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (int i = 0; i < 5000; i++)
        p += sprintf(p, "X-H%d: v\r\n", i);
    strcpy(p, "\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 431 || r->status == 413,
                  "5000 headers: status %d: %.200s", r->status, r->text);
    /* A long URL. */
    p = text + sprintf(text, "GET /v1/jobs/");
    memset(p, 'x', 100000);
    strcpy(p + 100000, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 414 || r->status == 431 || r->status == 413,
                  "a 100 KB URL: status %d: %.200s", r->status, r->text);
    fprintf(stderr, "test_hostile: a 100 KB URL: %d\n", r->status);
    /* Under MHD's pool, over the service's own limits: its problem+json,
       naming the limit. A 12000-byte URL, then 10240 bytes exactly, then
       10240 bytes of URL and 12288 of headers in one request: the two
       limits at once fit in the pool. */
    p = text + sprintf(text, "GET /v1/jobs/");
    memset(p, 'x', 12000 - 9);
    strcpy(p + 12000 - 9, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 414, "a 12000-byte URL: status %d: %.200s", r->status, r->text);
    assert_problem(414, r->ctype, r->body, "a 12000-byte URL");
    ck_assert_msg(strstr(r->body, "12000 bytes") && strstr(r->body, "\"max_url\"") &&
                      strstr(r->body, "10240"),
                  "the 414 names the size and the limit: %s", r->body);
    p = text + sprintf(text, "GET /v1/jobs/");
    memset(p, 'x', 10240 - 9);
    strcpy(p + 10240 - 9, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 404, "a 10240-byte URL: status %d: %.200s", r->status, r->text);
    p = text + sprintf(text, "GET /v1/jobs/");
    memset(p, 'x', 10240 - 9);
    p += 10240 - 9;
    /* Headers count as name, value and 4 bytes (": ", CRLF): "Host: t"
       9, "Connection: close" 19, and X-Pad0..3 the rest of 12288. */
    p += sprintf(p, " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (int i = 0, left = 12288 - 9 - 19; i < 4; i++) {
        int v = i < 3 ? left / 4 : left - 3 * (left / 4);

        p += sprintf(p, "X-Pad%d: ", i);
        memset(p, 'p', (size_t)v - 10);
        p += v - 10;
        p += sprintf(p, "\r\n");
    }
    strcpy(p, "\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 404, "URL and headers at their limits: status %d: %.200s",
                  r->status, r->text);
    /* A 20 KB bearer token, and 20 KB of headers in four. */
    p = text + sprintf(text, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                      "Authorization: Bearer ");
    memset(p, 't', 20000);
    strcpy(p + 20000, "\r\n\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 431, "a 20 KB token: %d", r->status);
    assert_problem(431, r->ctype, r->body, "20 KB token");
    ck_assert_msg(strstr(r->body, "\"max_headers\"") && strstr(r->body, "12288"),
                  "the 431 names the limit: %s", r->body);
    p = text + sprintf(text, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (int i = 0; i < 4; i++) {
        p += sprintf(p, "X-Pad%d: ", i);
        memset(p, 'p', 5000);
        p += 5000;
        p += sprintf(p, "\r\n");
    }
    strcpy(p, "\r\n");
    raw_request(&s, text, strlen(text), r);
    ck_assert_msg(r->status == 431, "20 KB of headers: %d", r->status);
    assert_problem(431, r->ctype, r->body, "20 KB of headers");
    /* Header senders that stall part way hold no one else up. */
    for (int i = 0; i < 16; i++) {
        fds[i] = raw_connect(&s);
        p = text + sprintf(text, "GET /v1/jobs HTTP/1.1\r\nHost: t\r\nX-Big: ");
        memset(p, 'b', 20000);
        p[20000] = '\0';
        send_all(fds[i], text, strlen(text));
    }
    assert_responsive(&s, 2.0, "16 stalled 20 KB headers");
    for (int i = 0; i < 16; i++)
        close(fds[i]);
    /* An ordinary large-ish header still works. */
    {
        char hdr[8100];
        struct reply ok;
        memcpy(hdr, "X-Fine: ", 8);
        memset(hdr + 8, 'c', 8000);
        hdr[8008] = '\0';
        ok = req(&s, "GET", "/v1/jobs", ALICE, NULL, hdr);
        ck_assert_int_eq(ok.status, 200);
        free(ok.body);
    }
    assert_responsive(&s, 2.0, "after the header cases");
    free(text);
    free(r);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- bodies ----------------------------------------------------------------- */

START_TEST(test_oversized_bodies)
{
    struct server s;
    size_t big = 3u << 20;
    char *body = malloc(big + 1);
    struct raw_reply *r = malloc(sizeof *r);
    struct reply c;
    double t0;

    server_start(&s, 0);
    memset(body, ' ', big);
    body[0] = '{';
    body[big - 1] = '}';
    body[big] = '\0';
    c = post(&s, "/v1/jobs", "application/json", body, big);
    ck_assert_int_eq(c.status, 413);
    assert_problem(413, c.content_type, c.body, "3 MB body");
    ck_assert_msg(strstr(c.body, "max_body"), "%s", c.body);
    free(c.body);
    /* Announced far over the limit: refused before a byte is read. */
    t0 = tu_now();
    raw_request(&s, "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                "Authorization: Bearer " ALICE "\r\nContent-Type: application/json\r\n"
                "Content-Length: 99999999999999\r\n\r\n{", 0, r);
    ck_assert(tu_now() - t0 < 5);
    ck_assert_int_eq(r->status, 413);
    assert_problem(413, r->ctype, r->body, "announced 99999999999999");
    /* Chunked, no length: 413 on the piece that goes over. */
    {
        int fd = raw_connect(&s);
        char chunk[70000];
        const char *head = "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                           "Authorization: Bearer " ALICE "\r\n"
                           "Content-Type: application/json\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        ssize_t n;

        send_all(fd, head, strlen(head));
        for (int i = 0; i < 40; i++) {      /* 2.6 MB in 64 KB chunks */
            int hl = sprintf(chunk, "10000\r\n");
            memset(chunk + hl, ' ', 65536);
            memcpy(chunk + hl + 65536, "\r\n", 2);
            if (send_all(fd, chunk, (size_t)hl + 65538) < 0)
                break;                      /* the server has answered */
        }
        send_all(fd, "0\r\n\r\n", 5);
        n = read_until_eof(fd, r->text, sizeof r->text, 20);
        close(fd);
        ck_assert_int_gt(n, 0);
        ck_assert_msg(strncmp(r->text, "HTTP/1.1 413", 12) == 0, "%.200s", r->text);
    }
    /* A length that is not a number. */
    raw_request(&s, "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                "Content-Type: application/json\r\nContent-Length: -5\r\n\r\n",
                0, r);
    ck_assert_msg(r->status == 400 || r->status == 413 || r->status == 0,
                  "Content-Length -5: %d", r->status);
    assert_responsive(&s, 2.0, "after the body cases");
    ck_assert_int_eq(jobs_count(&s), 0);
    free(body);
    free(r);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- slow clients ----------------------------------------------------------- */

/* Half a request, then silence: the server drops it after the connection
 * timeout (ECOPT_CONN_TIMEOUT) and answers everyone else meanwhile. */
START_TEST(test_slow_clients)
{
    struct server s;
    int fds[40];
    char buf[4096];
    double t0;
    static const char *halves[] = {
        "GET /livez HTTP/1.1\r\nHo",
        "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " ALICE "\r\n"
        "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"data",
        "POST /v1/datasets?name=slow HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
        ALICE "\r\nContent-Length: 100000\r\n\r\n1 1:1\n",
        "G",
    };

    setenv("ECOPT_CONN_TIMEOUT", "2", 1);
    server_start(&s, 0);
    for (int i = 0; i < 40; i++) {
        fds[i] = raw_connect(&s);
        ck_assert_int_eq(send_all(fds[i], halves[i % 4], strlen(halves[i % 4])), 0);
    }
    assert_responsive(&s, 1.0, "40 stalled clients");
    /* Each stalled connection is closed within the timeout and a margin. */
    t0 = tu_now();
    for (int i = 0; i < 40; i++) {
        ssize_t n = read_until_eof(fds[i], buf, sizeof buf, 2 + 10 - (tu_now() - t0));
        ck_assert_msg(n >= 0, "stalled client %d (%.20s) still open after %.1f s", i,
                      halves[i % 4], tu_now() - t0);
        close(fds[i]);
    }
    fprintf(stderr, "test_hostile: 40 stalled clients dropped %.1f s after the "
            "first check (timeout 2 s)\n", tu_now() - t0);
    assert_responsive(&s, 1.0, "after the stalled clients");
    server_stop(&s, SIGTERM);
}
END_TEST

/* The timeout is a setting: out of range it is refused by name. */
START_TEST(test_conn_timeout_setting)
{
    const char *bin = getenv("ECOPT_BIN");
    const char *bad[] = {"0", "-1", "abc", "100000"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int p[2], st;
        char err[1024] = "";
        ssize_t n;
        pid_t pid;

        ck_assert_int_eq(pipe(p), 0);
        pid = fork();
        if (pid == 0) {
            dup2(p[1], 2);
            close(p[0]);
            setenv("ECOPT_CONN_TIMEOUT", bad[i], 1);
            execl(bin && *bin ? bin : "build/ecopt", "ecopt", "serve", "--listen",
                  "127.0.0.1:0", "--auth", "off", "--db", "/tmp/ecopt-not-made.db",
                  (char *)NULL);
            _exit(127);
        }
        close(p[1]);
        n = read(p[0], err, sizeof err - 1);
        err[n > 0 ? n : 0] = '\0';
        close(p[0]);
        waitpid(pid, &st, 0);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: %s", bad[i], err);
        ck_assert_msg(strstr(err, "ECOPT_CONN_TIMEOUT"), "%s", err);
    }
    ck_assert_int_ne(access("/tmp/ecopt-not-made.db", F_OK), 0);
}
END_TEST

/* ---- many connections ------------------------------------------------------- */

#define NCONN 1000

/* 1000 keep-alive connections, each with a request answered; the server
 * keeps answering others; past its connection limit a new connection
 * closes the stalest idle one (the reserve of 64 beyond the limit) and is
 * answered, and once clients leave it is served again. */
START_TEST(test_many_connections)
{
    struct server s;
    struct rlimit rl;
    int *fds = malloc((NCONN + 64) * sizeof *fds);
    int answered = 0, refused = 0, extra_answered = 0;
    static const char get[] = "GET /livez HTTP/1.1\r\nHost: t\r\n\r\n";
    char buf[1024];
    double t0;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 4096) {
        rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    ck_assert_msg(rl.rlim_cur >= NCONN + 200, "RLIMIT_NOFILE %llu is too low",
                  (unsigned long long)rl.rlim_cur);
    setenv("ECOPT_MAX_CONNECTIONS", "1024", 1);
    setenv("ECOPT_MAX_CONNECTIONS_PER_ADDRESS", "0", 1);   /* all from one */
    /* The server starts with the common soft limit of 1024 files and must
     * raise it itself to hold 1024 connections beside its other files. */
    {
        struct rlimit low = {1024, rl.rlim_max};
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        server_start(&s, 0);
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    t0 = tu_now();
    for (int i = 0; i < NCONN; i++) {
        fds[i] = raw_connect(&s);
        ck_assert_int_eq(send_all(fds[i], get, sizeof get - 1), 0);
    }
    /* Every one answered, the connections kept open. */
    for (int i = 0; i < NCONN; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        ssize_t n;

        ck_assert_msg(poll(&p, 1, 30000) == 1, "connection %d: no answer in 30 s", i);
        n = recv(fds[i], buf, sizeof buf - 1, 0);
        ck_assert_msg(n > 12, "connection %d: %zd", i, n);
        buf[n] = '\0';
        ck_assert_msg(strncmp(buf, "HTTP/1.1 200", 12) == 0, "connection %d: %.40s", i, buf);
        answered++;
    }
    fprintf(stderr, "test_hostile: %d connections answered in %.2f s\n", answered,
            tu_now() - t0);
    ck_assert_msg(tu_now() - t0 < 20, "1000 connections took %.1f s", tu_now() - t0);
    /* The 1001st client is served like any other. */
    assert_responsive(&s, 3.0, "1000 open connections");
    {
        struct reply r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        free(r.body);
    }
    /* Past the limit (1024): each new connection is answered, and closes
     * the stalest of the idle keep-alive ones, which wait for headers;
     * none is left hanging. */
    for (int i = NCONN; i < NCONN + 64; i++) {
        fds[i] = raw_connect(&s);
        send_all(fds[i], get, sizeof get - 1);
    }
    {
        int state[64] = {0};          /* 0 waiting, 1 answered, 2 closed */
        int waiting = 64;

        for (int round = 0; round < 2; round++) {
            for (double until = tu_now() + (round ? 15 : 3); waiting > 0 && tu_now() < until;) {
                for (int i = 0; i < 64; i++) {
                    struct pollfd p = {fds[NCONN + i], POLLIN, 0};
                    ssize_t n;

                    if (state[i] || poll(&p, 1, 0) != 1)
                        continue;
                    n = recv(fds[NCONN + i], buf, sizeof buf - 1, 0);
                    state[i] = n > 12 && strncmp(buf, "HTTP/1.1 200", 12) == 0 ? 1 : 2;
                    waiting--;
                    if (round == 0)
                        state[i] == 1 ? extra_answered++ : refused++;
                }
                usleep(10000);
            }
            if (round == 0) {
                int shed = 0;

                for (int i = 0; i < NCONN; i++) {
                    struct pollfd p = {fds[i], POLLIN, 0};

                    shed += poll(&p, 1, 0) == 1 && recv(fds[i], buf, sizeof buf, 0) <= 0;
                }
                fprintf(stderr, "test_hostile: 64 past %d open (limit 1024): %d "
                        "answered, %d closed, %d waiting; %d idle ones shed\n", NCONN,
                        extra_answered, refused, waiting, shed);
                ck_assert_int_eq(refused, 0);
                ck_assert_int_ge(shed, NCONN + 64 - 1024 - waiting);
                ck_assert_int_le(shed, 64);
                for (int i = 0; i < 200; i++)
                    close(fds[i]);      /* room for every one still waiting */
            }
        }
        ck_assert_msg(waiting == 0, "%d connections still without an answer or a "
                      "close 15 s after room was made", waiting);
    }
    for (int i = 200; i < NCONN + 64; i++)
        close(fds[i]);
    /* Capacity comes back as they go. */
    for (double until = tu_now() + 10;;) {
        CURL *c = curl_easy_init();
        char url[128];
        long status = 0;
        snprintf(url, sizeof url, "http://127.0.0.1:%u/livez", s.port);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        struct reply r = {0};
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 5L);
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        free(r.body);
        if (status == 200)
            break;
        ck_assert_msg(tu_now() < until, "not served 10 s after the clients left");
        usleep(50000);
    }
    ck_assert_int_eq(kill(s.pid, 0), 0);
    free(fds);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- JSON ------------------------------------------------------------------- */

/* Every proper prefix of a valid job is a 400 (or 422) problem, on one
 * keep-alive connection; only the whole creates a job. */
START_TEST(test_truncated_json_every_byte)
{
    struct server s;
    size_t len = strlen(valid_spec);
    CURL *c;
    struct curl_slist *h = NULL;
    char url[128];
    int n400 = 0, n422 = 0;

    server_start(&s, 0);
    c = curl_easy_init();
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/jobs", s.port);
    h = curl_slist_append(h, "Authorization: Bearer " ALICE);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    for (size_t cut = 0; cut <= len; cut++) {
        struct reply r = {0};

        curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, valid_spec);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)cut);
        ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        if (!r.body)
            r.body = calloc(1, 1);
        if (cut == len) {
            ck_assert_msg(r.status == 201, "the whole spec: %ld %s", r.status, r.body);
        } else {
            char what[64];
            snprintf(what, sizeof what, "the first %zu bytes", cut);
            ck_assert_msg(r.status == 400 || r.status == 422, "%s: %ld %s", what,
                          r.status, r.body);
            assert_problem(r.status, r.content_type, r.body, what);
            n400 += r.status == 400;
            n422 += r.status == 422;
        }
        free(r.body);
    }
    fprintf(stderr, "test_hostile: %zu truncations: %d answered 400, %d 422\n", len,
            n400, n422);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    ck_assert_int_eq(jobs_count(&s), 1);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Nesting, numbers, duplicates and other odd documents. */
START_TEST(test_odd_documents)
{
    static const struct {
        const char *body;
        int status;           /* 400 or 422; 0 for either */
        const char *says;     /* in the detail or a field, or NULL */
    } cases[] = {
        {"{\"dataset\": \"heart_scale\", \"dataset\": \"a9a\"}", 400, "duplicate"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 1e999}", 0, NULL},
        {"{\"dataset\": \"heart_scale\", \"workers\": 99999999999999999999999999}", 0, NULL},
        {"{\"dataset\": \"heart_scale\", \"workers\": 1e20}", 422, "workers"},
        {"{\"dataset\": \"heart_scale\", \"workers\": -1}", 422, "workers"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 2.5}", 422, "workers"},
        {"{\"dataset\": \"heart_scale\", \"lambda2\": -1e-320, \"workers\": 2}", 0, NULL},
        {"{\"dataset\": \"heart_scale\", \"max_rounds\": 18446744073709551616}", 0, NULL},
        {"{\"dataset\": \"heart_scale\", \"max_rounds\": -9223372036854775808}", 422, "max_rounds"},
        {"{\"dataset\": \"heart_scale\", \"target\": NaN}", 400, NULL},
        {"{\"dataset\": \"heart_scale\", \"target\": Infinity}", 400, NULL},
        {"{\"dataset\": \"heart\\u0000scale\"}", 0, "dataset"},
        {"{\"dataset\": \"\\ud800\"}", 400, NULL},
        {"{\"dataset\": \"heart_scale\"} {\"x\": 1}", 400, NULL},
        {"[\"dataset\", \"heart_scale\"]", 0, NULL},
        {"\"heart_scale\"", 0, NULL},
        {"null", 0, NULL},
        {"{}", 422, "dataset"},
        {"\xef\xbb\xbf{\"dataset\": \"heart_scale\"}", 400, NULL},
        {"{\"dataset\": \"h\xff\xfe\"}", 400, NULL},
        {"{\"dataset\": \"heart_scale\", \"labels\": {\"a\": {\"b\": {\"c\": 1}}}}", 422, "labels"},
    };
    struct server s;
    char *deep;
    size_t depth = 200000;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reply r = post(&s, "/v1/jobs", "application/json", cases[i].body,
                              strlen(cases[i].body));
        char what[96];

        snprintf(what, sizeof what, "case %zu (%.60s)", i, cases[i].body);
        ck_assert_msg(cases[i].status ? r.status == cases[i].status
                                      : (r.status == 400 || r.status == 422),
                      "%s: %ld %s", what, r.status, r.body);
        assert_problem(r.status, r.content_type, r.body, what);
        if (cases[i].says)
            ck_assert_msg(strstr(r.body, cases[i].says), "%s: %s", what, r.body);
        free(r.body);
    }
    /* Deep nesting, in a value and at the top, within the body limit. */
    deep = malloc(2 * depth + 64);
    for (int top = 0; top < 2; top++) {
        size_t n = 0;
        struct reply r;

        if (!top)
            n += (size_t)sprintf(deep, "{\"dataset\": \"heart_scale\", \"labels\": ");
        for (size_t k = 0; k < depth; k++)
            deep[n++] = '[';
        for (size_t k = 0; k < depth; k++)
            deep[n++] = ']';
        if (!top)
            deep[n++] = '}';
        deep[n] = '\0';
        r = post(&s, "/v1/jobs", "application/json", deep, n);
        ck_assert_msg(r.status == 400 || r.status == 422, "depth %zu: %ld", depth, r.status);
        assert_problem(r.status, r.content_type, r.body, "deep nesting");
        free(r.body);
    }
    free(deep);
    assert_responsive(&s, 2.0, "after the odd documents");
    ck_assert_int_eq(jobs_count(&s), 0);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_content_types)
{
    static const struct {
        const char *ctype;    /* NULL: no Content-Type header */
        int status;
    } cases[] = {
        {"text/plain", 415},
        {"application/x-www-form-urlencoded", 415},
        {"multipart/form-data; boundary=x", 415},
        {"application/jsonx", 415},
        {"application/json; charset=latin1", 415},
        {"json", 415},
        {"", 415},
        {NULL, 415},
        {"application/json", 201},
        {"Application/JSON; charset=UTF-8", 201},
    };
    struct server s;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reply r = post(&s, "/v1/jobs", cases[i].ctype, valid_spec,
                              strlen(valid_spec));
        char what[96];

        snprintf(what, sizeof what, "Content-Type %s", cases[i].ctype ? cases[i].ctype
                                                                       : "(none)");
        ck_assert_msg(r.status == cases[i].status, "%s: %ld %s", what, r.status, r.body);
        if (r.status == 415) {
            assert_problem(415, r.content_type, r.body, what);
            ck_assert_msg(strstr(r.body, "application/json"), "%s: %s", what, r.body);
        }
        free(r.body);
    }
    ck_assert_int_eq(jobs_count(&s), 2);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- paths ------------------------------------------------------------------ */

static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;
    int n = 0;

    ck_assert_ptr_nonnull(d);
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Dataset names that try to leave the data directory, in the URL, the
 * upload's name and a job's dataset: all refused, nothing written. */
START_TEST(test_path_traversal)
{
    static const char *gets[] = {
        "/v1/datasets/..", "/v1/datasets/%2e%2e", "/v1/datasets/%2E%2E%2Fetc%2Fpasswd",
        "/v1/datasets/..%2f..%2fetc%2fpasswd", "/v1/datasets/heart_scale%00.txt",
        "/v1/datasets/%00", "/v1/datasets/..%5c..%5cx", "/v1/datasets/.hidden",
        "/v1/datasets/%252e%252e", "/v1/datasets/a%2fb",
    };
    static const char *names[] = {
        "..", "%2e%2e", "..%2fevil", "%2e%2e%2fevil", "a%2fb", "%2fetc%2fevil",
        "evil%00x", "%00", ".evil", "..%5cevil", "x%0d%0aSet-Cookie:a", "",
    };
    static const char *job_datasets[] = {
        "../evil", "..", "/etc/passwd", "%2e%2e/evil", "a/b", "heart_scale/../heart_scale",
        "./heart_scale", "heart_scale\\u0000x",
    };
    struct server s;
    char root[64], data[96], path[256], body[256];

    snprintf(root, sizeof root, "/tmp/ecopt-hostile-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(data, sizeof data, "%s/data", root);
    ck_assert_int_eq(mkdir(data, 0755), 0);
    {
        char src[512], dst[256], cmd[900];
        snprintf(dst, sizeof dst, "%s/heart_scale", data);
        snprintf(cmd, sizeof cmd, "cp %s %s", tu_data_path("heart_scale", src, sizeof src),
                 dst);
        ck_assert_int_eq(system(cmd), 0);
    }
    setenv("ECOPT_DATA_DIR", data, 1);
    server_start(&s, 0);
    for (size_t i = 0; i < sizeof gets / sizeof gets[0]; i++) {
        struct reply r = req(&s, "GET", gets[i], ALICE, NULL, NULL);
        ck_assert_msg(r.status == 404 || r.status == 400, "GET %s: %ld %s", gets[i],
                      r.status, r.body);
        assert_problem(r.status, r.content_type, r.body, gets[i]);
        free(r.body);
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        static const char file[] = "1 1:0.5 2:1\n-1 1:1\n1 2:0.25\n";
        struct reply r;

        snprintf(path, sizeof path, "/v1/datasets?name=%s", names[i]);
        r = post(&s, path, "application/octet-stream", file, sizeof file - 1);
        ck_assert_msg(r.status == 400 || r.status == 422, "upload as %s: %ld %s",
                      names[i], r.status, r.body);
        assert_problem(r.status, r.content_type, r.body, path);
        free(r.body);
    }
    for (size_t i = 0; i < sizeof job_datasets / sizeof job_datasets[0]; i++) {
        struct reply r;

        snprintf(body, sizeof body, "{\"dataset\": \"%s\", \"workers\": 2}", job_datasets[i]);
        r = post(&s, "/v1/jobs", "application/json", body, strlen(body));
        ck_assert_msg(r.status == 422 || r.status == 400, "job on %s: %ld %s",
                      job_datasets[i], r.status, r.body);
        assert_problem(r.status, r.content_type, r.body, body);
        free(r.body);
    }
    /* Nothing was written: the data directory holds heart_scale alone, and
     * beside it only what the test made. */
    ck_assert_int_eq(dir_entries(data), 1);
    ck_assert_int_eq(dir_entries(root), 1);
    ck_assert_int_eq(jobs_count(&s), 0);
    server_stop(&s, SIGTERM);
    snprintf(path, sizeof path, "rm -rf %s", root);
    ck_assert_int_eq(system(path), 0);
}
END_TEST

/* ---- methods ---------------------------------------------------------------- */

START_TEST(test_unknown_methods)
{
    static const struct {
        const char *method, *path;
        const char *allow;     /* expected in Allow */
    } cases[] = {
        {"BREW", "/v1/jobs", "GET"},
        {"PATCH", "/v1/jobs", "POST"},
        {"PUT", "/v1/jobs/abc", "DELETE"},
        {"TRACE", "/v1/jobs", "GET"},
        {"DELETE", "/livez", "GET"},
        {"POST", "/v1/datasets/heart_scale", "GET"},
        {"PROPFIND", "/v1/datasets", "POST"},
        {"CONNECT", "/v1/jobs", "GET"},
    };
    struct server s;
    struct raw_reply *r = malloc(sizeof *r);
    char text[512];

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(text, sizeof text, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n"
                 "Authorization: Bearer " ALICE "\r\n\r\n", cases[i].method, cases[i].path);
        raw_request(&s, text, strlen(text), r);
        if (strcmp(cases[i].method, "CONNECT") == 0 && r->status != 405) {
            /* CONNECT takes an authority, not a path: a 400 or a close. */
            ck_assert_msg(r->status == 400 || r->status == 0, "CONNECT: %d", r->status);
            continue;
        }
        ck_assert_msg(r->status == 405, "%s %s: %d %.200s", cases[i].method,
                      cases[i].path, r->status, r->text);
        ck_assert_msg(strstr(r->allow, cases[i].allow), "%s %s: Allow '%s'",
                      cases[i].method, cases[i].path, r->allow);
        assert_problem(405, r->ctype, r->body, cases[i].method);
    }
    /* Unknown paths are 404 problems; garbage request lines end the
     * connection (or get a 400) and nothing else. */
    raw_request(&s, "GET /v2/nothing HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", 0, r);
    ck_assert_int_eq(r->status, 404);
    assert_problem(404, r->ctype, r->body, "/v2/nothing");
    {
        static const char *garbage[] = {
            "GET\r\n\r\n", "GET / HTTP/9.9\r\n\r\n", "GET /livez FTP/1.0\r\n\r\n",
            "\x01\x02\x03\x04\r\n\r\n", "GET /li\0vez HTTP/1.1\r\nHost: t\r\n\r\n",
            "GET /livez HTTP/1.1\r\nHost: t\r\nBad Header\r\n\r\n",
        };
        size_t glen[] = {0, 0, 0, 0, 33, 0};
        for (size_t i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
            raw_request(&s, garbage[i], glen[i], r);
            ck_assert_msg(r->status == 0 || (r->status >= 400 && r->status < 500) ||
                              r->status == 505,
                          "garbage %zu: %d", i, r->status);
        }
    }
    assert_responsive(&s, 2.0, "after the methods");
    free(r);
    server_stop(&s, SIGTERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("http");
    int rc;

    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_oversized_headers);
    tcase_add_test(tc, test_oversized_bodies);
    tcase_add_test(tc, test_slow_clients);
    tcase_add_test(tc, test_conn_timeout_setting);
    tcase_add_test(tc, test_many_connections);
    tcase_add_test(tc, test_truncated_json_every_byte);
    tcase_add_test(tc, test_odd_documents);
    tcase_add_test(tc, test_content_types);
    tcase_add_test(tc, test_path_traversal);
    tcase_add_test(tc, test_unknown_methods);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
