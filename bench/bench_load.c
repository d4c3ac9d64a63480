/*
 * The service under load: S submitters each submit J small jobs (retrying
 * on 429/503 as Retry-After says) while P clients poll them (job status,
 * metric pages, long-polls, lists). Counts every answer; any 5xx but a 503
 * with Retry-After, any 429 without it, or a failed transfer is a
 * violation. Then every accepted job must reach a terminal state with all
 * its rows. Prints throughput and latency percentiles as a table.
 *
 *   bench_load [OUT.md] [--submitters S] [--jobs J] [--pollers P]
 *              [--max-running N]
 *
 * ECOPT_BIN is the ecopt binary (default build/ecopt); ECOPT_DATA_DIR the
 * datasets. tests/test_load.c includes this file (BENCH_LOAD_NO_MAIN) and
 * runs it at a smaller scale.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOAD_TOKENS 10                 /* submitters share these round-robin */
#define LOAD_MAX_ROUNDS 100
#define LOAD_EVAL_EVERY 10
/* Rows of a job that ran to max_rounds: rounds 0, 10, ..., 100. */
#define LOAD_ROWS (LOAD_MAX_ROUNDS / LOAD_EVAL_EVERY + 1)
#define LOAD_ADMIN "load-admin-secret-0123456789"

struct load_opts {
    unsigned submitters, jobs_each, pollers, max_running;
    double deadline;                 /* seconds for the whole run */
    const char *ecopt;               /* NULL: ECOPT_BIN or build/ecopt */
};

enum load_kind { K_SUBMIT, K_STATUS, K_METRICS, K_LONGPOLL, K_LIST, K_COUNT };
static const char *const load_kind_name[K_COUNT] = {
    "POST /v1/jobs", "GET /v1/jobs/{id}", "GET .../metrics", "GET .../metrics?wait=2",
    "GET /v1/jobs?limit=20",
};

struct load_result {
    unsigned long requests[K_COUNT];
    double p50[K_COUNT], p95[K_COUNT], p99[K_COUNT], max[K_COUNT];
    unsigned long s2xx, s204, s429, s503, s4xx_other, s5xx, transfer_errors;
    unsigned long violations;
    char first_violations[5][200];
    unsigned accepted, expected;     /* jobs */
    unsigned succeeded, failed_other, not_terminal, rows_wrong;
    double submit_seconds, total_seconds;
    char problem[300];               /* a setup failure, or "" */
};

/* ---- shared state ----------------------------------------------------------- */

struct lat {
    double *v;
    size_t n, cap;
};

struct load {
    const struct load_opts *o;
    struct load_result *r;
    char base[64];
    char secrets[LOAD_TOKENS][64];
    pthread_mutex_t lock;
    struct lat lat[K_COUNT];
    char (*ids)[32];                 /* accepted jobs */
    unsigned nids;
    atomic_int submitting;           /* submitters still at work */
    atomic_int stop;                 /* pollers end */
    double t0, until;
};

static double load_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void violation(struct load *L, const char *f, ...)
{
    va_list ap;

    pthread_mutex_lock(&L->lock);
    if (L->r->violations < 5) {
        va_start(ap, f);
        vsnprintf(L->r->first_violations[L->r->violations], 200, f, ap);
        va_end(ap);
    }
    L->r->violations++;
    pthread_mutex_unlock(&L->lock);
}

/* ---- one request ------------------------------------------------------------ */

struct resp {
    long status;
    int retry_after;                 /* seconds, -1 when absent */
    char *body;
    size_t len;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t len = sz * n;
    char *nb = realloc(r->body, r->len + len + 1);

    if (!nb)
        return 0;
    r->body = nb;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

static size_t on_head(char *p, size_t sz, size_t n, void *ctx)
{
    struct resp *r = ctx;
    size_t len = sz * n;

    if (len > 13 && strncasecmp(p, "Retry-After: ", 13) == 0)
        r->retry_after = atoi(p + 13);
    return len;
}

/* Performs one request on the thread's handle (kept alive), records its
 * latency and status, and checks the status against the rules. */
static CURLcode request(struct load *L, CURL *c, enum load_kind kind,
                        const char *method, const char *path, const char *token,
                        const char *body, struct resp *r)
{
    struct curl_slist *h = NULL;
    char url[256], auth[128];
    double t0 = load_now(), ms;
    CURLcode rc;

    memset(r, 0, sizeof *r);
    r->retry_after = -1;
    snprintf(url, sizeof url, "%s%s", L->base, path);
    snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (!body)
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_head);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    rc = curl_easy_perform(c);
    curl_slist_free_all(h);
    ms = (load_now() - t0) * 1000;
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    pthread_mutex_lock(&L->lock);
    {
        struct lat *l = &L->lat[kind];
        if (l->n == l->cap) {
            size_t cap = l->cap ? 2 * l->cap : 1024;
            double *nv = realloc(l->v, cap * sizeof *nv);
            if (nv)
                l->v = nv, l->cap = cap;
        }
        if (l->n < l->cap)
            l->v[l->n++] = ms;
    }
    L->r->requests[kind]++;
    if (rc != CURLE_OK)
        L->r->transfer_errors++;
    else if (r->status == 204)
        L->r->s204++;
    else if (r->status / 100 == 2)
        L->r->s2xx++;
    else if (r->status == 429)
        L->r->s429++;
    else if (r->status == 503)
        L->r->s503++;
    else if (r->status / 100 == 5)
        L->r->s5xx++;
    else
        L->r->s4xx_other++;
    pthread_mutex_unlock(&L->lock);
    if (rc != CURLE_OK)
        violation(L, "%s %s: %s", method, path, curl_easy_strerror(rc));
    else if ((r->status == 429 || r->status == 503) && r->retry_after < 0)
        violation(L, "%s %s: %ld without Retry-After", method, path, r->status);
    else if (r->status / 100 == 5 && r->status != 503)
        violation(L, "%s %s: %ld %.100s", method, path, r->status,
                  r->body ? r->body : "");
    if (!r->body)
        r->body = calloc(1, 1);
    return rc;
}

/* ---- submitters and pollers ------------------------------------------------- */

struct worker {
    struct load *L;
    unsigned index;
    pthread_t thread;
};

static void *submitter(void *arg)
{
    struct worker *w = arg;
    struct load *L = w->L;
    const char *token = L->secrets[w->index % LOAD_TOKENS];
    CURL *c = curl_easy_init();
    char spec[512];

    for (unsigned j = 0; c && j < L->o->jobs_each; j++) {
        snprintf(spec, sizeof spec,
                 "{\"dataset\": \"heart_scale\", \"workers\": 2, \"algorithm\": \"eclk\","
                 " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": %d,"
                 " \"eval_every\": %d, \"target\": 0, \"name\": \"load-%u-%u\"}",
                 LOAD_MAX_ROUNDS, LOAD_EVAL_EVERY, w->index, j);
        for (;;) {
            struct resp r;
            CURLcode rc = request(L, c, K_SUBMIT, "POST", "/v1/jobs", token, spec, &r);

            if (rc == CURLE_OK && r.status == 201) {
                json_t *doc = json_loads(r.body, 0, NULL);
                const char *id = json_string_value(json_object_get(doc, "id"));
                pthread_mutex_lock(&L->lock);
                if (id)
                    snprintf(L->ids[L->nids++], 32, "%s", id);
                pthread_mutex_unlock(&L->lock);
                if (!id)
                    violation(L, "201 without an id: %.100s", r.body);
                json_decref(doc);
                free(r.body);
                break;
            }
            free(r.body);
            if (load_now() > L->until) {
                violation(L, "submitter %u: job %u not accepted before the deadline",
                          w->index, j);
                break;
            }
            if (rc == CURLE_OK && (r.status == 429 || r.status == 503) &&
                r.retry_after >= 0) {
                /* As asked, but never past the run's deadline. */
                double wait = r.retry_after > 0 ? r.retry_after : 0.1;
                if (wait > 2)
                    wait = 2;
                usleep((useconds_t)(wait * 1e6));
                continue;
            }
            if (rc == CURLE_OK)
                break;               /* a 4xx for a valid job: counted above */
            usleep(100000);
        }
    }
    curl_easy_cleanup(c);
    atomic_fetch_sub(&L->submitting, 1);
    return NULL;
}

static void *poller(void *arg)
{
    struct worker *w = arg;
    struct load *L = w->L;
    CURL *c = curl_easy_init();
    unsigned seed = w->index * 2654435761u + 1;
    long long after = -1;
    char path[160], id[32];

    while (c && !atomic_load(&L->stop)) {
        struct resp r;
        unsigned nids, what = rand_r(&seed) % 8;

        pthread_mutex_lock(&L->lock);
        nids = L->nids;
        if (nids)
            memcpy(id, L->ids[rand_r(&seed) % nids], sizeof id);
        pthread_mutex_unlock(&L->lock);
        if (!nids || what == 0) {
            request(L, c, K_LIST, "GET", "/v1/jobs?limit=20", LOAD_ADMIN, NULL, &r);
        } else if (what <= 3) {
            snprintf(path, sizeof path, "/v1/jobs/%s", id);
            request(L, c, K_STATUS, "GET", path, LOAD_ADMIN, NULL, &r);
        } else if (what <= 5) {
            snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=-1", id);
            request(L, c, K_METRICS, "GET", path, LOAD_ADMIN, NULL, &r);
        } else {
            /* A long-poll for the next rows of one job. */
            after = rand_r(&seed) % 2 ? -1 : LOAD_MAX_ROUNDS / 2;
            snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&wait=2", id,
                     after);
            request(L, c, K_LONGPOLL, "GET", path, LOAD_ADMIN, NULL, &r);
        }
        free(r.body);
        if (!nids)
            usleep(20000);
    }
    curl_easy_cleanup(c);
    return NULL;
}

/* ---- the server ------------------------------------------------------------- */

static pid_t start_server(struct load *L, const char *dir, char *err, size_t errlen)
{
    const char *bin = L->o->ecopt ? L->o->ecopt : getenv("ECOPT_BIN");
    char tokens[256], db[256], log[256], line[512] = "", running[16];
    unsigned port = 0;
    int out[2];
    pid_t pid;
    FILE *f;

    if (!bin || !*bin)
        bin = "build/ecopt";
    snprintf(tokens, sizeof tokens, "%s/tokens", dir);
    snprintf(db, sizeof db, "%s/ecopt.db", dir);
    snprintf(log, sizeof log, "%s/server.log", dir);
    snprintf(running, sizeof running, "%u", L->o->max_running);
    if (!(f = fopen(tokens, "w"))) {
        snprintf(err, errlen, "%s: %s", tokens, strerror(errno));
        return -1;
    }
    for (int t = 0; t < LOAD_TOKENS; t++) {
        snprintf(L->secrets[t], sizeof L->secrets[t], "load-secret-%02d-0123456789", t);
        fprintf(f, "load%d:%s\n", t, L->secrets[t]);
    }
    fprintf(f, "admin:%s:admin\n", LOAD_ADMIN);
    fclose(f);
    if (pipe(out) < 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        if (!freopen(log, "a", stderr))
            _exit(126);
        /* The pollers all ask as the admin: its share of long-polls is
         * raised to the server's, so that they wait as they did before
         * shares were counted (the load, not the limit, is measured). */
        execl(bin, "ecopt", "serve", "--listen", "127.0.0.1:0", "--db", db,
              "--tokens-file", tokens, "--max-running", running, "--quiet",
              "--max-streams-per-token", "500", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    if (!f || !fgets(line, sizeof line, f) ||
        sscanf(line, "ecopt: listening on http://127.0.0.1:%u", &port) != 1) {
        snprintf(err, errlen, "%s serve did not start (see %s)", bin, log);
        if (f)
            fclose(f);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    fclose(f);
    snprintf(L->base, sizeof L->base, "http://127.0.0.1:%u", port);
    return pid;
}

/* ---- the run ---------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double pct(const struct lat *l, double p)
{
    size_t i;

    if (!l->n)
        return 0;
    i = (size_t)(p * (double)(l->n - 1) + 0.5);
    return l->v[i < l->n ? i : l->n - 1];
}

/* Waits until no accepted job is queued or running (or the deadline). */
static void wait_all_terminal(struct load *L, CURL *c)
{
    while (load_now() < L->until) {
        int busy = 0;
        static const char *const states[] = {"queued", "running"};

        for (int s = 0; s < 2 && !busy; s++) {
            char path[96];
            struct resp r;
            json_t *doc;

            snprintf(path, sizeof path, "/v1/jobs?state=%s&limit=1", states[s]);
            if (request(L, c, K_LIST, "GET", path, LOAD_ADMIN, NULL, &r) != CURLE_OK ||
                r.status != 200) {
                busy = 1;
                free(r.body);
                break;
            }
            doc = json_loads(r.body, 0, NULL);
            busy = json_array_size(json_object_get(doc, "jobs")) > 0;
            json_decref(doc);
            free(r.body);
        }
        if (!busy)
            return;
        usleep(200000);
    }
}

/* Every accepted job: a terminal state, and when it succeeded, every row. */
static void check_jobs(struct load *L, CURL *c)
{
    struct load_result *r = L->r;

    for (unsigned i = 0; i < L->nids; i++) {
        char path[128];
        struct resp a, m;
        json_t *doc;
        const char *state;

        snprintf(path, sizeof path, "/v1/jobs/%s", L->ids[i]);
        request(L, c, K_STATUS, "GET", path, LOAD_ADMIN, NULL, &a);
        doc = json_loads(a.body, 0, NULL);
        state = json_string_value(json_object_get(doc, "state"));
        if (!state || strcmp(state, "queued") == 0 || strcmp(state, "running") == 0) {
            r->not_terminal++;
            violation(L, "job %s is %s at the end", L->ids[i], state ? state : "?");
        } else if (strcmp(state, "succeeded") == 0) {
            json_t *mdoc, *rows;
            size_t n;
            int ok;

            r->succeeded++;
            snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=-1&limit=500", L->ids[i]);
            request(L, c, K_METRICS, "GET", path, LOAD_ADMIN, NULL, &m);
            mdoc = json_loads(m.body, 0, NULL);
            rows = json_object_get(mdoc, "rows");
            n = json_array_size(rows);
            ok = n == LOAD_ROWS;
            for (size_t k = 0; ok && k < n; k++)
                ok = json_integer_value(json_object_get(json_array_get(rows, k), "round")) ==
                     (json_int_t)(k * LOAD_EVAL_EVERY);
            if (!ok) {
                r->rows_wrong++;
                violation(L, "job %s: %zu rows, not rounds 0..%d every %d", L->ids[i], n,
                          LOAD_MAX_ROUNDS, LOAD_EVAL_EVERY);
            }
            json_decref(mdoc);
            free(m.body);
        } else {
            r->failed_other++;
            violation(L, "job %s ended %s: %.120s", L->ids[i], state,
                      json_string_value(json_object_get(doc, "reason")));
        }
        json_decref(doc);
        free(a.body);
    }
}

/* Runs the whole load against a fresh server. 0, or -1 (r->problem says). */
static int load_run(const struct load_opts *o, struct load_result *r)
{
    struct load L;
    struct worker *subs, *polls;
    char dir[64] = "/tmp/ecopt-load-XXXXXX", cmd[128];
    pid_t server;
    int st, rc = 0;
    CURL *c;

    memset(r, 0, sizeof *r);
    memset(&L, 0, sizeof L);
    L.o = o;
    L.r = r;
    pthread_mutex_init(&L.lock, NULL);
    r->expected = o->submitters * o->jobs_each;
    L.ids = calloc(r->expected + 1, sizeof *L.ids);
    subs = calloc(o->submitters, sizeof *subs);
    polls = calloc(o->pollers, sizeof *polls);
    if (!L.ids || !subs || !polls || !mkdtemp(dir)) {
        snprintf(r->problem, sizeof r->problem, "out of memory or no temporary directory");
        return -1;
    }
    if ((server = start_server(&L, dir, r->problem, sizeof r->problem)) < 0)
        return -1;
    c = curl_easy_init();
    L.t0 = load_now();
    L.until = L.t0 + o->deadline;
    atomic_store(&L.submitting, (int)o->submitters);
    for (unsigned i = 0; i < o->pollers; i++) {
        polls[i] = (struct worker){&L, i, 0};
        pthread_create(&polls[i].thread, NULL, poller, &polls[i]);
    }
    for (unsigned i = 0; i < o->submitters; i++) {
        subs[i] = (struct worker){&L, i, 0};
        pthread_create(&subs[i].thread, NULL, submitter, &subs[i]);
    }
    for (unsigned i = 0; i < o->submitters; i++)
        pthread_join(subs[i].thread, NULL);
    r->submit_seconds = load_now() - L.t0;
    wait_all_terminal(&L, c);
    r->total_seconds = load_now() - L.t0;
    atomic_store(&L.stop, 1);
    for (unsigned i = 0; i < o->pollers; i++)
        pthread_join(polls[i].thread, NULL);
    r->accepted = L.nids;
    check_jobs(&L, c);
    curl_easy_cleanup(c);
    /* The server lived through it, and stops cleanly. */
    if (waitpid(server, &st, WNOHANG) != 0) {
        snprintf(r->problem, sizeof r->problem, "the server died during the run");
        rc = -1;
    } else {
        kill(server, SIGTERM);
        waitpid(server, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            snprintf(r->problem, sizeof r->problem, "the server ended with status 0x%x", st);
            rc = -1;
        }
    }
    for (int k = 0; k < K_COUNT; k++) {
        struct lat *l = &L.lat[k];
        qsort(l->v, l->n, sizeof *l->v, cmp_double);
        r->p50[k] = pct(l, 0.50);
        r->p95[k] = pct(l, 0.95);
        r->p99[k] = pct(l, 0.99);
        r->max[k] = l->n ? l->v[l->n - 1] : 0;
        free(l->v);
    }
    if (rc == 0) {
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_load: could not remove %s\n", dir);
    }
    free(L.ids);
    free(subs);
    free(polls);
    pthread_mutex_destroy(&L.lock);
    return rc;
}

static void load_report(FILE *f, const struct load_opts *o, const struct load_result *r)
{
    unsigned long total = 0;

    for (int k = 0; k < K_COUNT; k++)
        total += r->requests[k];
    fprintf(f, "# Service under load\n\n");
    fprintf(f, "%u submitters x %u jobs (heart_scale, 2 workers, %d rounds) while %u "
            "clients poll; --max-running %u.\n\n", o->submitters, o->jobs_each,
            LOAD_MAX_ROUNDS, o->pollers, o->max_running);
    fprintf(f, "| measure | value |\n|---|---|\n");
    fprintf(f, "| jobs accepted / submitted | %u / %u |\n", r->accepted, r->expected);
    fprintf(f, "| jobs succeeded with all %d rows | %u |\n", LOAD_ROWS,
                r->succeeded - r->rows_wrong);
    fprintf(f, "| jobs failed or cancelled / not terminal / rows wrong | %u / %u / %u |\n",
            r->failed_other, r->not_terminal, r->rows_wrong);
    fprintf(f, "| submission phase | %.1f s (%.1f jobs accepted/s) |\n", r->submit_seconds,
            r->submit_seconds > 0 ? r->accepted / r->submit_seconds : 0);
    fprintf(f, "| until every job ended | %.1f s (%.2f jobs completed/s) |\n",
            r->total_seconds, r->total_seconds > 0 ? r->accepted / r->total_seconds : 0);
    fprintf(f, "| requests | %lu (%.0f/s) |\n", total,
            r->total_seconds > 0 ? total / r->total_seconds : 0);
    fprintf(f, "| 2xx / 204 / 429 / 503 / other 4xx / other 5xx / failed transfers | "
            "%lu / %lu / %lu / %lu / %lu / %lu / %lu |\n", r->s2xx, r->s204, r->s429,
            r->s503, r->s4xx_other, r->s5xx, r->transfer_errors);
    fprintf(f, "| violations | %lu |\n\n", r->violations);
    fprintf(f, "| request | count | p50 ms | p95 ms | p99 ms | max ms |\n"
            "|---|---:|---:|---:|---:|---:|\n");
    for (int k = 0; k < K_COUNT; k++)
        fprintf(f, "| %s | %lu | %.1f | %.1f | %.1f | %.1f |\n", load_kind_name[k],
                r->requests[k], r->p50[k], r->p95[k], r->p99[k], r->max[k]);
    fprintf(f, "\nA long-poll's time includes its wait of up to 2 s by design. "
            "429s are the per-token queue limit (%d tokens shared by the "
            "submitters), answered with Retry-After and retried.\n", LOAD_TOKENS);
    for (unsigned long i = 0; i < r->violations && i < 5; i++)
        fprintf(f, "\nviolation: %s", r->first_violations[i]);
    if (r->violations)
        fputc('\n', f);
}

#ifndef BENCH_LOAD_NO_MAIN
int main(int argc, char **argv)
{
    struct load_opts o = {50, 20, 200, 4, 900, NULL};
    struct load_result r;
    const char *out = NULL;
    int rc;

    for (int i = 1; i < argc; i++) {
        unsigned *slot = NULL;

        if (strcmp(argv[i], "--submitters") == 0)
            slot = &o.submitters;
        else if (strcmp(argv[i], "--jobs") == 0)
            slot = &o.jobs_each;
        else if (strcmp(argv[i], "--pollers") == 0)
            slot = &o.pollers;
        else if (strcmp(argv[i], "--max-running") == 0)
            slot = &o.max_running;
        else if (argv[i][0] != '-' && !out) {
            out = argv[i];
            continue;
        }
        if (!slot || i + 1 >= argc || (*slot = (unsigned)atoi(argv[++i])) == 0) {
            fprintf(stderr, "usage: bench_load [OUT.md] [--submitters S] [--jobs J] "
                    "[--pollers P] [--max-running N]\n");
            return 2;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = load_run(&o, &r);
    curl_global_cleanup();
    if (rc < 0) {
        fprintf(stderr, "bench_load: %s\n", r.problem);
        return 1;
    }
    load_report(stdout, &o, &r);
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            fprintf(stderr, "bench_load: %s: %s\n", out, strerror(errno));
            return 1;
        }
        load_report(f, &o, &r);
        fclose(f);
    }
    return r.violations || r.accepted != r.expected ? 1 : 0;
}
#endif
