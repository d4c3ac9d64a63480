/*
 * Starting the real `ecopt serve` for a test: a temporary directory with
 * its database and a tokens file (alice, bob, and root as admin), port 0,
 * and the port read from what the server prints.
 */
#ifndef ECOPT_SERVERUTIL_H
#define ECOPT_SERVERUTIL_H

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <jansson.h>
#include <signal.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "testutil.h"

struct server {
    pid_t pid;
    unsigned port;
    char dir[64];
    char db[128];
    char said[512];     /* its start line */
};

static const char *const tokens =
    "alice:alice-secret-0123456789\n"
    "bob:bob-secret-0123456789abc\n"
    "root:root-secret-0123456789ab:admin\n";

/* Starts ecopt serve on port 0 with the options of extra (NULL, or a
 * NULL-terminated list) after the usual ones, and reads the port it
 * printed. */
static inline void server_start_with(struct server *s, int reuse_dir,
                                     const char *const *extra)
{
    const char *bin = getenv("ECOPT_BIN");
    int out[2];
    char line[512] = "", tok[128];
    FILE *f;

    if (!reuse_dir) {
        snprintf(s->dir, sizeof s->dir, "/tmp/ecopt-serve-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(s->dir));
        snprintf(s->db, sizeof s->db, "%s/ecopt.db", s->dir);
        snprintf(tok, sizeof tok, "%s/tokens", s->dir);
        f = fopen(tok, "w");
        fputs(tokens, f);
        fclose(f);
    }
    ck_assert_int_eq(pipe(out), 0);
    s->pid = fork();
    if (s->pid == 0) {
        char listen[] = "127.0.0.1:0";
        dup2(out[1], 1);
        close(out[0]);
        close(out[1]);
        char log[128];
        snprintf(log, sizeof log, "%s/server.log", s->dir);
        freopen(log, "a", stderr);
        snprintf(tok, sizeof tok, "%s/tokens", s->dir);
        const char *argv[64] = {"ecopt", "serve", "--listen", listen, "--db", s->db,
                                "--tokens-file", tok, "--max-rounds", "50000000",
                                "--quiet"};
        for (int i = 0, k = 11; extra && extra[i] && k < 63; i++)
            argv[k++] = extra[i];
        execv(bin && *bin ? bin : "build/ecopt", (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    if (!fgets(line, sizeof line, f)) {
        /* The server ended before it listened: show why. */
        char log[128], text[2048] = "";
        FILE *lf;
        snprintf(log, sizeof log, "%s/server.log", s->dir);
        if ((lf = fopen(log, "r"))) {
            size_t n = fread(text, 1, sizeof text - 1, lf);
            text[n] = '\0';
            fclose(lf);
        }
        ck_abort_msg("ecopt serve did not start: %s", text);
    }
    fclose(f);
    snprintf(s->said, sizeof s->said, "%s", line);
    ck_assert_msg(sscanf(line, "ecopt: listening on http://127.0.0.1:%u", &s->port) == 1,
                  "server said: %s", line);
}

static inline void server_start(struct server *s, int reuse_dir)
{
    server_start_with(s, reuse_dir, NULL);
}

static inline void server_stop(struct server *s, int sig)
{
    int st;

    kill(s->pid, sig);
    waitpid(s->pid, &st, 0);
}

/* One HTTP exchange with the server, as libcurl sees it. */
struct reply {
    long status;
    char *body;
    size_t len;
    char location[256];
    char allow[128];
    char content_type[128];
    char retry_after[32];
};

static inline size_t on_body(char *p, size_t sz, size_t n, void *ctx)
{
    struct reply *r = ctx;
    size_t len = sz * n;

    r->body = realloc(r->body, r->len + len + 1);
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static inline size_t on_header(char *p, size_t sz, size_t n, void *ctx)
{
    struct reply *r = ctx;
    size_t len = sz * n;
    char *dst = NULL;
    size_t cap = 0, skip = 0;

    if (len > 10 && strncasecmp(p, "Location: ", 10) == 0)
        dst = r->location, cap = sizeof r->location, skip = 10;
    else if (len > 7 && strncasecmp(p, "Allow: ", 7) == 0)
        dst = r->allow, cap = sizeof r->allow, skip = 7;
    else if (len > 14 && strncasecmp(p, "Content-Type: ", 14) == 0)
        dst = r->content_type, cap = sizeof r->content_type, skip = 14;
    else if (len > 13 && strncasecmp(p, "Retry-After: ", 13) == 0)
        dst = r->retry_after, cap = sizeof r->retry_after, skip = 13;
    if (dst) {
        size_t l = len - skip;
        while (l && (p[skip + l - 1] == '\r' || p[skip + l - 1] == '\n'))
            l--;
        if (l >= cap)
            l = cap - 1;
        memcpy(dst, p + skip, l);
        dst[l] = '\0';
    }
    return len;
}

/* One request; token NULL for none; body NULL for none. */
/* The same from a given source address on the loopback (NULL: the
   default one). */
static inline struct reply req_from(const struct server *s, const char *method,
                                    const char *path, const char *token,
                                    const char *body, const char *extra_header,
                                    const char *from)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    struct reply r = {0};
    char url[512], auth[256], iface[64];

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", s->port, path);
    if (from) {
        snprintf(iface, sizeof iface, "host!%s", from);
        curl_easy_setopt(c, CURLOPT_INTERFACE, iface);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    if (token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    if (body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    }
    if (extra_header)
        h = curl_slist_append(h, extra_header);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!r.body)
        r.body = calloc(1, 1);
    return r;
}

static inline struct reply req(const struct server *s, const char *method,
                               const char *path, const char *token, const char *body,
                               const char *extra_header)
{
    return req_from(s, method, path, token, body, extra_header, NULL);
}

static inline json_t *json_of(const struct reply *r)
{
    json_error_t e;
    json_t *doc = json_loads(r->body, 0, &e);

    ck_assert_msg(doc != NULL, "not JSON (%s): %s", e.text, r->body);
    return doc;
}


/* Creates a job as token: 201, a Location for it, queued. Fills id. */
static inline void job_create(const struct server *s, const char *token, const char *spec,
                              char id[32])
{
    struct reply r = req(s, "POST", "/v1/jobs", token, spec, NULL);
    char want[64];
    json_t *doc;

    ck_assert_msg(r.status == 201, "status %ld: %s", r.status, r.body);
    doc = json_of(&r);
    snprintf(id, 32, "%s", json_string_value(json_object_get(doc, "id")));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "queued");
    snprintf(want, sizeof want, "/v1/jobs/%s", id);
    ck_assert_str_eq(r.location, want);
    json_decref(doc);
    free(r.body);
}

/* The job's document as token sees it; it must exist. */
static inline json_t *job_get(const struct server *s, const char *token, const char *id)
{
    char path[352];   /* "/v1/jobs/" and any id a test holds */
    struct reply r;
    json_t *doc;

    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    r = req(s, "GET", path, token, NULL, NULL);
    ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
    doc = json_of(&r);
    free(r.body);
    return doc;
}

static inline int job_state_final(const char *state)
{
    return strcmp(state, "succeeded") == 0 || strcmp(state, "failed") == 0 ||
           strcmp(state, "cancelled") == 0 || strcmp(state, "interrupted") == 0;
}

/*
 * Polls the job until its state is `state` ("final" for any end) and
 * returns its document; fails after timeout seconds, or at once when the
 * job ends in another state (an end is for good).
 */
static inline json_t *job_wait(const struct server *s, const char *token, const char *id,
                               const char *state, double timeout)
{
    double until = tu_now() + timeout;

    for (;;) {
        json_t *doc = job_get(s, token, id);
        const char *now = json_string_value(json_object_get(doc, "state"));

        if (strcmp(now, state) == 0 || (strcmp(state, "final") == 0 && job_state_final(now)))
            return doc;
        ck_assert_msg(!job_state_final(now) || strcmp(state, "final") == 0,
                      "job %s ended %s (%s), not %s", id, now,
                      json_string_value(json_object_get(doc, "reason")), state);
        ck_assert_msg(tu_now() < until, "job %s still %s after %g s", id, now, timeout);
        json_decref(doc);
        usleep(50000);
    }
}

/*
 * Waits up to timeout seconds until the job has stored a metric row: its
 * coordinator has read the data and dropped privileges, and its workers
 * have said hello. The count in the `latest` row's round terms is not
 * enough, so this asks for the rows.
 */
static inline void job_wait_first_row(const struct server *s, const char *token,
                                      const char *id, double timeout)
{
    char path[128];

    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1", id);
    for (double until = tu_now() + timeout;; usleep(50000)) {
        struct reply r = req(s, "GET", path, token, NULL, NULL);
        json_t *doc;
        size_t n;

        ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
        doc = json_of(&r);
        n = json_array_size(json_object_get(doc, "rows"));
        json_decref(doc);
        free(r.body);
        if (n >= 1)
            return;
        ck_assert_msg(tu_now() < until, "job %s: no rows in %g s", id, timeout);
    }
}

/* Cancels a job (200, 202, or 409 when it has just ended) and waits up to
 * timeout seconds for it to be cancelled; any other end fails. */
static inline void job_cancel(const struct server *s, const char *token, const char *id,
                              double timeout)
{
    char path[128];
    struct reply r;

    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    r = req(s, "POST", path, token, "{}", NULL);
    ck_assert_msg(r.status == 200 || r.status == 202 || r.status == 409, "cancel %s: %ld", id,
                  r.status);
    free(r.body);
    json_decref(job_wait(s, token, id, "cancelled", timeout));
}

#define ALICE "alice-secret-0123456789"
#define BOB "bob-secret-0123456789abc"
#define ROOT "root-secret-0123456789ab"

/* Raw sockets, for what libcurl would not send. A connection to the
 * server from a loopback address of the test's choosing (NULL: the usual
 * one), so that tests can be many clients. */
static inline int raw_connect_from(const struct server *s, const char *from)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_ge(fd, 0);
    if (from) {
        a.sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, from, &a.sin_addr), 1);
        ck_assert_msg(bind(fd, (struct sockaddr *)&a, sizeof a) == 0, "bind %s: %s", from,
                      strerror(errno));
    }
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)s->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect: %s",
                  strerror(errno));
    return fd;
}

static inline int raw_connect(const struct server *s)
{
    return raw_connect_from(s, NULL);
}

static inline int send_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Reads until EOF (or timeout); returns bytes read, -1 on timeout. */
static inline ssize_t read_until_eof(int fd, char *out, size_t cap, double timeout)
{
    double until = tu_now() + timeout;
    size_t n = 0;

    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        int ms = (int)((until - tu_now()) * 1000);
        ssize_t r;

        if (ms <= 0)
            return -1;
        if (poll(&p, 1, ms) <= 0)
            continue;
        r = recv(fd, out + n, cap - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0 || n + (size_t)r >= cap - 1) {
            if (r > 0)
                n += (size_t)r;
            out[n] = '\0';
            return (ssize_t)n;
        }
        n += (size_t)r;
    }
}


struct raw_reply {
    int status;              /* 0: the connection closed without one */
    char ctype[128];
    char allow[128];
    const char *body;        /* into text */
    char text[1 << 16];
};

/* Sends req (which should say Connection: close; len 0 for strlen) and
 * reads the answer. */
static inline void raw_request(const struct server *s, const char *req, size_t len,
                        struct raw_reply *r)
{
    int fd = raw_connect(s);

    if (!len)
        len = strlen(req);
    ssize_t n;
    const char *h;

    memset(r, 0, sizeof *r - sizeof r->text);
    r->text[0] = '\0';
    send_all(fd, req, len);         /* the server may close part way */
    n = read_until_eof(fd, r->text, sizeof r->text, 20);
    close(fd);
    ck_assert_msg(n >= 0, "no answer in 20 s to %.60s", req);
    sscanf(r->text, "HTTP/1.%*d %d", &r->status);
    for (h = strstr(r->text, "\r\n"); h && h[2] != '\r'; h = strstr(h + 2, "\r\n")) {
        if (strncasecmp(h + 2, "Content-Type: ", 14) == 0)
            sscanf(h + 16, "%127[^\r]", r->ctype);
        if (strncasecmp(h + 2, "Allow: ", 7) == 0)
            sscanf(h + 9, "%127[^\r]", r->allow);
    }
    r->body = (h = strstr(r->text, "\r\n\r\n")) ? h + 4 : "";
}

#endif
