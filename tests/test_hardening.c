/*
 * The real server under a hostile client's hand: trickled headers and
 * bodies, anonymous bodies, many connections from one address, wrong
 * tokens from a shared address, header bytes a proxy reads otherwise,
 * the tokens file's traps and the modes of the files the service makes.
 * Every loop is bounded; figures (answer times, the server's memory) are
 * printed, and only generous bounds that prove "answered" are asserted.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "serverutil.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------- */

static void write_tokens(const struct server *s, const char *text)
{
    char path[128], tmp[160];
    FILE *f;

    snprintf(path, sizeof path, "%s/tokens", s->dir);
    snprintf(tmp, sizeof tmp, "%s/tokens.new", s->dir);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    ck_assert_int_eq(rename(tmp, path), 0);
}

static int log_has(const struct server *s, const char *phrase)
{
    char path[128], text[1 << 16];
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
 * Runs `ecopt serve` on a tokens file of text that it must refuse: it
 * exits 2 before it listens, and what it says holds phrase.
 */
static void assert_refused_at_start(const char *text, const char *phrase)
{
    const char *bin = getenv("ECOPT_BIN");
    char dir[] = "/tmp/ecopt-tokens-XXXXXX", tok[96], db[96], err[2048] = "";
    int p[2], st;
    ssize_t n = 0, got = 0;
    pid_t pid;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(tok, sizeof tok, "%s/tokens", dir);
    snprintf(db, sizeof db, "%s/ecopt.db", dir);
    f = fopen(tok, "w");
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 2);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execl(bin && *bin ? bin : "build/ecopt", "ecopt", "serve", "--listen",
              "127.0.0.1:0", "--tokens-file", tok, "--db", db, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* A server that took the file listens and goes on: 10 s at most. */
    for (double until = tu_now() + 10; tu_now() < until && got < (ssize_t)sizeof err - 1;) {
        struct pollfd pf = {p[0], POLLIN, 0};

        if (poll(&pf, 1, 100) == 1 &&
            (n = read(p[0], err + got, sizeof err - 1 - (size_t)got)) <= 0)
            break;
        if (pf.revents & POLLIN && n > 0)
            got += n;
    }
    err[got] = '\0';
    close(p[0]);
    kill(pid, SIGKILL);             /* gone already, unless it served */
    waitpid(pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 2, "served a tokens file with %s: %s",
                  phrase, err);
    ck_assert_msg(strstr(err, phrase), "the refusal does not say '%s': %s", phrase, err);
    ck_assert_msg(!strstr(err, "0123456789"), "the refusal quotes a secret: %s", err);
    unlink(tok);
    unlink(db);
    rmdir(dir);
}

/* The server's resident memory, in KiB, from /proc. */
static long vmrss_kb(pid_t pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* Seconds /livez took to answer 200 from 127.0.0.1, or -1 when it was not
 * answered within limit seconds. */
static double livez_seconds(const struct server *s, long limit)
{
    CURL *c = curl_easy_init();
    struct reply r = {0};
    char url[128];
    long status = 0;
    double t0 = tu_now();

    snprintf(url, sizeof url, "http://127.0.0.1:%u/livez", s->port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, limit);
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_cleanup(c);
    free(r.body);
    return status == 200 ? tu_now() - t0 : -1;
}

/* Enough descriptors for n connections of the test's own. */
static void raise_nofile(rlim_t n)
{
    struct rlimit rl;

    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < n) {
        rl.rlim_cur = rl.rlim_max < n ? rl.rlim_max : n;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    ck_assert_msg(rl.rlim_cur >= n, "RLIMIT_NOFILE %llu, the test needs %llu",
                  (unsigned long long)rl.rlim_cur, (unsigned long long)n);
}

/* 1 when the server has closed fd (EOF or reset, after what it said, if
 * anything), without waiting. */
static int closed_by_server(int fd)
{
    char buf[512];
    ssize_t n;

    while ((n = recv(fd, buf, sizeof buf, MSG_DONTWAIT)) > 0)
        ;
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- slow and anonymous clients --------------------------------------------- */

#define NSLOW 1000

/*
 * 1,000 connections that send part of a request and then a byte a second
 * (the header deadline is 3 s here, 20 s by default): from one address,
 * all but the per-address cap are closed at once; from 20 addresses, all
 * are closed by the deadline however the bytes trickle. /livez is
 * answered throughout; the bodies of requests (buffered ones and uploads)
 * have a deadline of their own.
 */
START_TEST(test_slow_clients_are_dropped)
{
    static const char partial[] = "GET /livez HTTP/1.1\r\nHost: t\r\nX-Pad: ";
    int *fds = malloc(NSLOW * sizeof *fds);
    struct server s;
    double t0, lz, last_close = 0;
    int closed, held;
    long rss0, rss1;
    char from[32];

    raise_nofile(NSLOW + 400);
    setenv("ECOPT_HEADER_TIMEOUT", "3", 1);
    setenv("ECOPT_BODY_TIMEOUT", "3", 1);
    setenv("ECOPT_UPLOAD_TIMEOUT", "3", 1);
    server_start(&s, 0);
    rss0 = vmrss_kb(s.pid);

    /* One address: the cap (256) holds, the rest are closed at once. */
    t0 = tu_now();
    for (int i = 0; i < NSLOW; i++) {
        fds[i] = raw_connect_from(&s, "127.0.0.2");
        send_all(fds[i], partial, sizeof partial - 1);
    }
    lz = livez_seconds(&s, 10);
    usleep(500000);
    closed = 0;
    for (int i = 0; i < NSLOW; i++)
        closed += closed_by_server(fds[i]);
    rss1 = vmrss_kb(s.pid);
    fprintf(stderr, "test_hardening: %d slow connections from one address: %d closed at "
            "once, %d held; /livez %.3f s; server %ld -> %ld KiB\n", NSLOW, closed,
            NSLOW - closed, lz, rss0, rss1);
    ck_assert_msg(lz >= 0 && lz < 5, "/livez beside %d slow clients of one address: %.2f",
                  NSLOW, lz);
    ck_assert_int_ge(closed, NSLOW - 256);
    {
        /* One more from there is told why. */
        char text[2048];
        int fd = raw_connect_from(&s, "127.0.0.2");
        ssize_t n = read_until_eof(fd, text, sizeof text, 5);

        close(fd);
        ck_assert_msg(n > 0 && strncmp(text, "HTTP/1.1 503", 12) == 0 &&
                      strstr(text, "\"limit\":\"max_connections_per_address\""),
                      "past the cap: %s", n > 0 ? text : "no answer");
    }
    for (int i = 0; i < NSLOW; i++)
        close(fds[i]);

    /* 20 addresses, 50 each: the connection limit (1000) is full until
     * the deadline closes them, bytes trickling or not. */
    usleep(300000);
    t0 = tu_now();
    for (int i = 0; i < NSLOW; i++) {
        snprintf(from, sizeof from, "127.0.2.%d", 1 + i % 20);
        fds[i] = raw_connect_from(&s, from);
        send_all(fds[i], partial, sizeof partial - 1);
    }
    lz = livez_seconds(&s, 15);
    held = 0;
    {
        char *open = calloc(NSLOW, 1);
        int left = NSLOW;

        memset(open, 1, NSLOW);
        for (int tick = 0; tick < 20 && left > 0; tick++) {      /* 10 s at most */
            for (int i = 0; i < NSLOW; i++) {
                if (!open[i])
                    continue;
                if (closed_by_server(fds[i])) {
                    open[i] = 0;
                    left--;
                    last_close = tu_now() - t0;
                } else if (tick % 2 == 0) {
                    send(fds[i], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
                }
            }
            usleep(500000);
        }
        held = left;
        free(open);
    }
    fprintf(stderr, "test_hardening: %d trickling connections from 20 addresses: /livez "
            "%.3f s; %d still open after %.1f s, the last closed at %.1f s "
            "(header deadline 3 s)\n", NSLOW, lz, held, tu_now() - t0, last_close);
    ck_assert_msg(lz >= 0 && lz < 10, "/livez beside %d trickling clients: %.2f", NSLOW, lz);
    ck_assert_msg(held == 0, "%d trickling connections outlived the header deadline", held);
    for (int i = 0; i < NSLOW; i++)
        close(fds[i]);

    /* Bodies: a JSON body and an upload, trickled after whole headers. */
    {
        static const char *const heads[] = {
            "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " ALICE "\r\n"
            "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{",
            "POST /v1/datasets?name=slow HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer "
            ALICE "\r\nContent-Length: 100000\r\n\r\n+1 1:1\n",
        };
        int bfd[20], left = 20;

        t0 = tu_now();
        for (int i = 0; i < 20; i++) {
            bfd[i] = raw_connect(&s);
            send_all(bfd[i], heads[i % 2], strlen(heads[i % 2]));
        }
        for (int tick = 0; tick < 20 && left > 0; tick++) {
            left = 0;
            for (int i = 0; i < 20; i++) {
                if (bfd[i] < 0)
                    continue;
                if (closed_by_server(bfd[i])) {
                    close(bfd[i]);
                    bfd[i] = -1;
                    last_close = tu_now() - t0;
                    continue;
                }
                left++;
                if (tick % 2 == 0)
                    send(bfd[i], " ", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            }
            usleep(500000);
        }
        fprintf(stderr, "test_hardening: 20 trickled bodies: %d still open, the last "
                "closed at %.1f s (body and upload deadlines 3 s)\n", left, last_close);
        ck_assert_msg(left == 0, "%d trickled bodies outlived their deadline", left);
    }
    ck_assert_msg(livez_seconds(&s, 10) >= 0, "/livez after the slow clients");
    free(fds);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * 1,000 connections from 20 addresses fill --max-connections (1000) with
 * partial headers and then trickle a byte every 2 s; the header deadline
 * is 60 s, so none of them is closed by it during the test. /livez and an
 * API request are answered anyway: a new connection when the served ones
 * are full sheds the stalest still waiting for its headers (the reserve
 * beyond --max-connections), and only as many as it needs.
 */
START_TEST(test_livez_beside_full_connections)
{
    static const char partial[] = "GET /livez HTTP/1.1\r\nHost: t\r\nX-Pad: ";
    int *fds = malloc(NSLOW * sizeof *fds);
    struct server s;
    struct reply r;
    double lz[3];
    int open_after;
    char from[32];

    raise_nofile(NSLOW + 400);
    setenv("ECOPT_HEADER_TIMEOUT", "60", 1);
    unsetenv("ECOPT_MAX_CONNECTIONS");
    server_start(&s, 0);
    for (int i = 0; i < NSLOW; i++) {
        snprintf(from, sizeof from, "127.0.3.%d", 1 + i % 20);
        fds[i] = raw_connect_from(&s, from);
        send_all(fds[i], partial, sizeof partial - 1);
    }
    for (int round = 0; round < 3; round++) {        /* 6 s of trickling */
        for (int i = 0; i < NSLOW; i++)
            send(fds[i], "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        lz[round] = livez_seconds(&s, 20);
        usleep(2000000);
    }
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    open_after = 0;
    for (int i = 0; i < NSLOW; i++)
        open_after += !closed_by_server(fds[i]);
    fprintf(stderr, "test_hardening: %d trickling connections fill max-connections: "
            "/livez %.4f %.4f %.4f s, GET /v1/jobs %ld; %d of them still open "
            "(header deadline 60 s)\n", NSLOW, lz[0], lz[1], lz[2], r.status, open_after);
    for (int round = 0; round < 3; round++)
        ck_assert_msg(lz[round] >= 0, "/livez unanswered beside %d trickling clients",
                      NSLOW);
    ck_assert_int_eq(r.status, 200);
    /* The four requests shed about four; the rest trickle on. */
    ck_assert_msg(open_after >= NSLOW - 64, "%d of %d trickling connections shed",
                  NSLOW - open_after, NSLOW);
    free(r.body);
    for (int i = 0; i < NSLOW; i++)
        close(fds[i]);
    free(fds);
    unsetenv("ECOPT_HEADER_TIMEOUT");
    server_stop(&s, SIGTERM);
}
END_TEST

#define NANON 300
#define ANON_BODY (1 << 20)

/*
 * 300 requests without a token, each announcing a 1 MiB body and sending
 * all of it but the last byte: the server keeps none of it (the token is
 * checked on the headers, the body is read and dropped), and each gets
 * its 401 when the body ends.
 */
START_TEST(test_anonymous_bodies_not_kept)
{
    static const char head[] = "POST /v1/jobs HTTP/1.1\r\nHost: t\r\n"
                               "Content-Type: application/json\r\n"
                               "Content-Length: 1048576\r\n\r\n";
    char *body = malloc(ANON_BODY);
    int *fds = malloc(NANON * sizeof *fds), n401 = 0;
    struct server s;
    long rss0, rss1, rss2;
    char from[32], buf[1024];
    double t0;

    raise_nofile(NANON + 200);
    memset(body, ' ', ANON_BODY);
    server_start(&s, 0);
    rss0 = vmrss_kb(s.pid);
    t0 = tu_now();
    for (int i = 0; i < NANON; i++) {
        snprintf(from, sizeof from, "127.0.4.%d", 1 + i % 10);
        fds[i] = raw_connect_from(&s, from);
        send_all(fds[i], head, sizeof head - 1);
        send_all(fds[i], body, ANON_BODY - 1);
    }
    usleep(500000);
    rss1 = vmrss_kb(s.pid);
    for (int i = 0; i < NANON; i++)
        send_all(fds[i], "}", 1);
    for (int i = 0; i < NANON; i++) {
        struct pollfd p = {fds[i], POLLIN, 0};
        ssize_t n;

        if (poll(&p, 1, 10000) == 1 && (n = recv(fds[i], buf, sizeof buf - 1, 0)) > 12) {
            buf[n] = '\0';
            n401 += strncmp(buf, "HTTP/1.1 401", 12) == 0;
        }
        close(fds[i]);
    }
    rss2 = vmrss_kb(s.pid);
    fprintf(stderr, "test_hardening: %d anonymous 1 MiB bodies in %.1f s: server %ld KiB "
            "before, %ld with all but a byte in, %ld after; %d answered 401\n", NANON,
            tu_now() - t0, rss0, rss1, rss2, n401);
    ck_assert_int_eq(n401, NANON);
    /* 300 MiB if they were kept; MHD's 32 KiB pools are 10 MiB of it. */
    ck_assert_msg(rss1 - rss0 < 64 * 1024, "the server grew by %ld KiB", rss1 - rss0);
    free(fds);
    free(body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- the tokens file -------------------------------------------------------- */

/* A secret on two lines (a tenant holding an admin's secret by mistake)
 * and a secret no bearer header can carry are refused at start, naming
 * the line, never the secret. */
START_TEST(test_tokens_refused_at_start)
{
    assert_refused_at_start("alice:shared-secret-0123456789\n"
                            "# the admin\n"
                            "root:shared-secret-0123456789:admin\n",
                            "tokens:3: the secret of 'root' is also the secret on line 1");
    assert_refused_at_start("alice:alice\\secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice\"secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice,secret-0123456789\n",
                            "tokens:1: the secret of 'alice' holds a character");
    assert_refused_at_start("alice:alice-secret-01234\001" "56789\n",
                            "tokens:1: the secret of 'alice' holds a character");
}
END_TEST

/* The same at reload (SIGHUP): the tokens loaded before are kept, and the
 * log says why. */
START_TEST(test_tokens_refused_at_reload)
{
    static const char *const bad[][2] = {
        {"alice:alice-secret-0123456789\nbob:alice-secret-0123456789:admin\n",
         "tokens:2: the secret of 'bob' is also the secret on line 1"},
        {"alice:alice-secret-0123456789\ncarol:carol%secret-0123456789\n",
         "tokens:2: the secret of 'carol' holds a character"},
    };
    struct server s;
    struct reply r;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_tokens(&s, bad[i][0]);
        ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
        for (double until = tu_now() + 10; !log_has(&s, bad[i][1]);) {
            ck_assert_msg(tu_now() < until, "no word of '%s' in the log", bad[i][1]);
            usleep(20000);
        }
        ck_assert(log_has(&s, "kept the tokens loaded before"));
        /* bob is still bob, and no admin. */
        r = req(&s, "GET", "/v1/jobs", BOB, NULL, NULL);
        ck_assert_msg(r.status == 200, "bob after a refused reload: %ld", r.status);
        free(r.body);
        r = req(&s, "GET", "/v1/jobs?limit=1", ROOT, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- wrong tokens from a shared address ------------------------------------ */

/*
 * Loopback (or a reverse proxy) is one address for every client behind
 * it. A flood of wrong tokens from it, then from 300 more addresses
 * (more than any per-network or global budget of old), refuses only the
 * wrong tokens: every tenant and the admin are served throughout.
 */
START_TEST(test_wrong_tokens_lock_no_one_out)
{
    static const char *const good[] = {ALICE, BOB, ROOT};
    struct server s;
    struct reply r;
    int n401 = 0, n429 = 0;
    char from[32];
    double t0;

    server_start(&s, 0);
    t0 = tu_now();
    for (int i = 0; i < 40; i++) {
        r = req(&s, "GET", "/v1/jobs", "wrong-wrong-wrong-0123", NULL, NULL);
        ck_assert_msg(r.status == (i < 20 ? 401 : 429), "wrong token %d: %ld", i, r.status);
        r.status == 401 ? n401++ : n429++;
        free(r.body);
    }
    fprintf(stderr, "test_hardening: 40 wrong tokens from 127.0.0.1 in %.2f s: %d 401, "
            "%d 429\n", tu_now() - t0, n401, n429);
    for (int i = 0; i < 300; i++) {
        snprintf(from, sizeof from, "127.0.%d.%d", 3 + i / 100, 1 + i % 100);
        for (int k = 0; k < 2; k++) {
            r = req_from(&s, "GET", "/v1/jobs", "wrong-wrong-wrong-0123", NULL, NULL, from);
            ck_assert_msg(r.status == 401, "%s: %ld", from, r.status);
            free(r.body);
        }
    }
    for (size_t i = 0; i < 3; i++) {
        r = req(&s, "GET", "/v1/jobs?limit=1", good[i], NULL, NULL);
        ck_assert_msg(r.status == 200, "token %zu after the flood: %ld %s", i, r.status,
                      r.body);
        free(r.body);
        r = req_from(&s, "GET", "/v1/jobs?limit=1", good[i], NULL, NULL, "127.0.3.1");
        ck_assert_msg(r.status == 200, "token %zu from another address: %ld", i, r.status);
        free(r.body);
    }
    /* The failing client is still refused, with the limit named. */
    r = req(&s, "GET", "/v1/jobs", "wrong-wrong-wrong-0123", NULL, NULL);
    ck_assert_int_eq(r.status, 429);
    ck_assert_msg(strstr(r.body, "failed_auth_per_minute"), "%s", r.body);
    ck_assert_msg(r.retry_after[0], "no Retry-After");
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- header bytes a proxy reads otherwise ---------------------------------- */

/*
 * A CR alone inside a header (where a proxy may end the line and read a
 * header of its own), a NUL inside a value (MHD ends the value there: a
 * Content-Length of "33\0" "99" would be 33, a token with a NUL and more
 * after it would pass), and two Authorization headers: each is a 400
 * problem naming the header, and the connection is closed. The same
 * requests without the odd byte are served.
 */
START_TEST(test_header_bytes)
{
#define REQ_HEAD "POST /v1/jobs HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
    static const struct {
        const char *text;
        size_t len;
        const char *header;
    } bad[] = {
#define BAD(lit, header) {lit, sizeof lit - 1, header}
        BAD(REQ_HEAD "X-Pad: 1\rContent-Length: 2\r\nAuthorization: Bearer " ALICE
            "\r\nContent-Length: 2\r\n\r\n{}", "X-Pad"),
        BAD(REQ_HEAD "Authorization: Bearer " ALICE "\r\nX-Pad: 1\r\r\n"
            "Content-Length: 2\r\n\r\n{}", "X-Pad"),
        BAD(REQ_HEAD "Content-Length: 2\00099\r\nAuthorization: Bearer " ALICE
            "\r\n\r\n{}", "Content-Length"),
        BAD(REQ_HEAD "Authorization: Bearer " ALICE "\000x\r\nContent-Length: 2\r\n\r\n{}",
            "Authorization"),
        BAD(REQ_HEAD "Content-Length: 2\r\nAuthorization: Bearer " ALICE "\000x\r\n\r\n{}",
            "Authorization"),
        BAD(REQ_HEAD "Authorization: Bearer " ALICE "\r\nAuthorization: Bearer " BOB
            "\r\nContent-Length: 2\r\n\r\n{}", "Authorization"),
        BAD("GET /v1/jobs HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " BOB
            "\r\nAuthorization: Bearer " ALICE "\r\n\r\n", "Authorization"),
#undef BAD
    };
    static const char good[] = REQ_HEAD "X-Pad: 1\r\nAuthorization: Bearer " ALICE
                               "\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
    struct raw_reply *r = malloc(sizeof *r);
    struct server s;
    char want[64];

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* raw_request reads to the end: the server has to close. */
        raw_request(&s, bad[i].text, bad[i].len, r);
        ck_assert_msg(r->status == 400, "request %zu: %d %.300s", i, r->status, r->text);
        ck_assert_str_eq(r->ctype, "application/problem+json");
        snprintf(want, sizeof want, "\"header\":\"%s\"", bad[i].header);
        ck_assert_msg(strstr(r->body, want), "request %zu: %.300s", i, r->body);
        ck_assert_msg(strstr(r->text, "\r\nConnection: close\r\n"), "request %zu: %.300s", i,
                      r->text);
        ck_assert_msg(!strstr(r->text + 12, "HTTP/1.1"), "request %zu: two answers: %s", i,
                      r->text);
    }
    raw_request(&s, good, sizeof good - 1, r);
    ck_assert_msg(r->status == 422, "the same without the odd bytes: %d %.300s", r->status,
                  r->text);
    ck_assert_int_eq(kill(s.pid, 0), 0);
    free(r);
    server_stop(&s, SIGTERM);
#undef REQ_HEAD
}
END_TEST

/* ---- the modes of the files the service makes ----------------------------- */

static const char *walk_root;
static unsigned walk_mask;
static int walk_seen, walk_bad;
static char walk_report[2048];
static ino_t walk_admins;               /* the inode of /data/heart_scale */

/* Each entry the server made under the test's directory: none has a bit
 * of walk_mask. The test's own (the directory, tokens, the data folder
 * and its first file, also kept among the versions by a link, the
 * server's stderr) are not looked at. */
static int walk_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    static const char *const mine[] = {"", "/tokens", "/data", "/data/heart_scale",
                                       "/server.log"};
    const char *rel = path + strlen(walk_root);
    size_t o = strlen(walk_report);

    (void)flag, (void)ftw;
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++)
        if (strcmp(rel, mine[i]) == 0)
            return 0;
    if (st->st_ino == walk_admins)
        return 0;
    walk_seen++;
    if (st->st_mode & walk_mask) {
        walk_bad++;
        snprintf(walk_report + o, sizeof walk_report - o, " %s %04o", rel,
                 (unsigned)(st->st_mode & 07777));
    }
    return 0;
}

/*
 * With the default umask, everything the server makes (the database and
 * its -wal and -shm, the jobs' folder, specs and logs, an upload and the
 * folder of versions) is 0600 or 0700; with --umask 027 it is at most
 * 0640 or 0750.
 */
START_TEST(test_file_modes)
{
    static const char *const masks[] = {NULL, "027"};
    const char *data_env = getenv("ECOPT_DATA_DIR");
    char saved_data[512], src[256], path[256], cmd[600], id[32];

    snprintf(saved_data, sizeof saved_data, "%s", data_env ? data_env : "");
    tu_data_path("heart_scale", src, sizeof src);
    for (size_t m = 0; m < 2; m++) {
        const char *const opts[] = {"--umask", masks[m], NULL};
        struct server s;
        struct reply r;
        FILE *f;

        snprintf(s.dir, sizeof s.dir, "/tmp/ecopt-modes-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(s.dir));
        snprintf(s.db, sizeof s.db, "%s/ecopt.db", s.dir);
        snprintf(path, sizeof path, "%s/tokens", s.dir);
        ck_assert_ptr_nonnull(f = fopen(path, "w"));
        fputs(tokens, f);
        fclose(f);
        snprintf(path, sizeof path, "%s/data", s.dir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(cmd, sizeof cmd, "cp '%s' '%s/heart_scale'", src, path);
        ck_assert_int_eq(system(cmd), 0);
        setenv("ECOPT_DATA_DIR", path, 1);
        server_start_with(&s, 1, masks[m] ? opts : NULL);
        r = req(&s, "POST", "/v1/jobs", ALICE,
                "{\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20}", NULL);
        ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
        {
            json_t *doc = json_of(&r);
            snprintf(id, sizeof id, "%s", json_string_value(json_object_get(doc, "id")));
            json_decref(doc);
        }
        free(r.body);
        json_decref(job_wait(&s, ALICE, id, "succeeded", 60));
        {
            static const char text[] = "+1 1:0.5 2:1\n-1 1:1 3:0.25\n+1 2:2\n-1 3:1\n";
            CURL *c = curl_easy_init();
            struct curl_slist *h = NULL;
            char url[256];
            long status = 0;

            snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/datasets?name=tiny", s.port);
            curl_easy_setopt(c, CURLOPT_URL, url);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
            r = (struct reply){0};
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
            h = curl_slist_append(h, "Authorization: Bearer " ALICE);
            h = curl_slist_append(h, "Content-Type: application/octet-stream");
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
            ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
            ck_assert_msg(status == 201, "upload: %ld %s", status, r.body);
            free(r.body);
            curl_slist_free_all(h);
            curl_easy_cleanup(c);
        }
        /* While it runs: -wal and -shm are there. */
        walk_root = s.dir;
        {
            struct stat st;

            snprintf(path, sizeof path, "%s/data/heart_scale", s.dir);
            ck_assert_int_eq(stat(path, &st), 0);
            walk_admins = st.st_ino;
        }
        walk_mask = masks[m] ? 027 : 077;
        walk_seen = walk_bad = 0;
        walk_report[0] = '\0';
        ck_assert_int_eq(nftw(s.dir, walk_one, 16, FTW_PHYS), 0);
        fprintf(stderr, "test_hardening: umask %s: %d entries made by the server, %d "
                "with a bit of %03o:%s\n", masks[m] ? masks[m] : "default", walk_seen,
                walk_bad, walk_mask, walk_report);
        snprintf(path, sizeof path, "%s/ecopt.db-wal", s.dir);
        ck_assert_msg(access(path, F_OK) == 0, "no -wal while the server runs");
        ck_assert_int_ge(walk_seen, 7);
        ck_assert_msg(walk_bad == 0, "made with more than the umask allows:%s", walk_report);
        {
            struct stat st;

            ck_assert_int_eq(stat(s.db, &st), 0);
            ck_assert_int_eq(st.st_mode & 0777, masks[m] ? 0640 : 0600);
        }
        server_stop(&s, SIGTERM);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", s.dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    setenv("ECOPT_DATA_DIR", saved_data, 1);
}
END_TEST

/* ---- main ------------------------------------------------------------------- */

int main(void)
{
    Suite *s = suite_create("hardening");
    TCase *tc = tcase_create("tokens");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_tokens_refused_at_start);
    tcase_add_test(tc, test_tokens_refused_at_reload);
    suite_add_tcase(s, tc);
    tc = tcase_create("slow");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_slow_clients_are_dropped);
    tcase_add_test(tc, test_livez_beside_full_connections);
    tcase_add_test(tc, test_anonymous_bodies_not_kept);
    suite_add_tcase(s, tc);
    tc = tcase_create("auth");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_wrong_tokens_lock_no_one_out);
    suite_add_tcase(s, tc);
    tc = tcase_create("headers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_header_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("files");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_file_modes);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
