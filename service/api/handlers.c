/*
 * The REST handlers: decode -> check -> call -> encode, all alike. The
 * route table at the bottom is the service's whole surface; the test
 * checks it against api/openapi.yaml.
 */
#define _GNU_SOURCE
#include "app.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "datasets.h"
#include "describe.h"
#include "jobspec.h"
#include "pagecache.h"
#include "plots.h"
#include "ui.h"

extern const char openapi_yaml[];
extern const size_t openapi_yaml_len;

#define LIST_DEFAULT 50
#define LIST_MAX 500
#define METRICS_DEFAULT 1000
#define METRICS_MAX 10000
#define WAIT_MAX 60             /* seconds a long-poll may wait */
#define METRICS_EVERY_MAX 1000000000

/* Who is asking: the token, or a 401 (or 429) already replied. */
const struct token *app_authn(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t;
    double wait = auth_blocked(&a->auth, rq->client);
    char detail[160], retry[32];

    if (wait > 0) {
        /* Refused before any comparison, so guessing gains nothing. */
        snprintf(retry, sizeof retry, "%.0f", wait + 1);
        snprintf(detail, sizeof detail,
                 "too many failed authentications from %s: at most %d per %.0f s",
                 rq->client, AUTH_FAIL_MAX, AUTH_FAIL_WINDOW);
        http_reply_header(rs, "Retry-After", retry);
        http_reply_problem(rs, 429, NULL, detail,
                           json_pack("{s:s, s:i}", "limit", "failed_auth_per_minute",
                                     "value", AUTH_FAIL_MAX));
        return NULL;
    }
    t = auth_check(&a->auth, rq->token);
    if (!t) {
        auth_failed(&a->auth, rq->client);
        http_reply_header(rs, "WWW-Authenticate", "Bearer");
        http_reply_problem(rs, 401, NULL,
                           rq->token ? "the bearer token is not known"
                                     : "an Authorization: Bearer token is required",
                           NULL);
    }
    return t;
}

/* Jobs an admin may see are everyone's: owner NULL. */
static const char *owner_of(const struct token *t)
{
    return t->admin ? NULL : t->name;
}

static json_t *parsed_or_null(const char *text)
{
    json_t *v = text ? json_loads(text, 0, NULL) : NULL;
    return v ? v : json_null();
}

static json_t *ms_or_null(int64_t ms)
{
    return ms > 0 ? json_integer(ms) : json_null();
}

/* A job's fields but its stored documents (spec, problem, params). */
static json_t *job_json_base(const struct store_job *j)
{
    json_t *o = json_object();

    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "state", json_string(store_job_state_name(j->state)));
    json_object_set_new(o, "reason", j->reason ? json_string(j->reason) : json_null());
    json_object_set_new(o, "owner", json_string(j->owner));
    json_object_set_new(o, "name", json_string(j->name ? j->name : ""));
    json_object_set_new(o, "labels", parsed_or_null(j->labels));
    json_object_set_new(o, "algorithm", json_string(j->algorithm));
    json_object_set_new(o, "compressor", json_string(j->compressor));
    json_object_set_new(o, "dataset", json_string(j->dataset));
    json_object_set_new(o, "backend", json_string(j->backend));
    json_object_set_new(o, "workers", json_integer(j->workers));
    json_object_set_new(o, "created_at", ms_or_null(j->created_at));
    json_object_set_new(o, "started_at", ms_or_null(j->started_at));
    json_object_set_new(o, "finished_at", ms_or_null(j->finished_at));
    json_object_set_new(o, "progress",
                        json_pack("{s:o, s:o, s:o, s:o}", "round",
                                  j->round >= 0 ? json_integer(j->round) : json_null(),
                                  "rel_gap", describe_real(j->rel_gap), "bits_up",
                                  describe_real(j->bits_up), "updated_at",
                                  ms_or_null(j->updated_at)));
    return o;
}

static json_t *job_json(const struct store_job *j)
{
    json_t *o = job_json_base(j);

    json_object_set_new(o, "spec", parsed_or_null(j->spec));
    json_object_set_new(o, "problem", parsed_or_null(j->problem));
    json_object_set_new(o, "params", parsed_or_null(j->params));
    return o;
}

/* The service wrote these documents with json_dumps; NULL is null. */
static const char *stored_doc(const char *text)
{
    return text && text[0] == '{' ? text : "null";
}

/*
 * GET /v1/jobs/{id}: the fields formatted, then the stored documents
 * (spec, problem, params and the latest row) joined in as they are, so
 * that their numbers are not parsed and formatted again on every poll.
 */
static int reply_job(struct http_resp *rs, const struct store_job *j,
                     const char *latest, uint64_t gen)
{
    json_t *o = job_json_base(j);
    char *head = o ? json_dumps(o, JSON_COMPACT) : NULL;
    const char *part[] = {",\"spec\":", stored_doc(j->spec), ",\"problem\":",
                          stored_doc(j->problem), ",\"params\":", stored_doc(j->params),
                          ",\"latest\":", latest ? latest : "null", "}"};
    size_t len, cap, n = sizeof part / sizeof part[0];
    char *text;
    int rc;

    json_decref(o);
    if (!head || (len = strlen(head)) < 2)
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    len--;                      /* the closing brace goes to the end */
    cap = len + 1;
    for (size_t i = 0; i < n; i++)
        cap += strlen(part[i]);
    if (!(text = realloc(head, cap))) {
        free(head);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(part[i]);
        memcpy(text + len, part[i], l);
        len += l;
    }
    jobcache_put(j->id, gen, j->owner, text, len);
    rc = http_reply_text(rs, 200, "application/json", text, len);
    free(text);
    return rc;
}

/* Store failures as problems: 404, 409, 503 for a full disk, else 500. */
int store_problem(struct http_resp *rs, const struct store_err *e,
                  const char *what)
{
    switch (e->code) {
    case STORE_ENOTFOUND:
        return http_reply_problem(rs, 404, NULL, what, NULL);
    case STORE_ESTATE:
        return http_reply_problem(rs, 409, NULL, e->msg, NULL);
    case STORE_EFULL:
    case STORE_EBUSY:
        http_reply_header(rs, "Retry-After", "5");
        return http_reply_problem(rs, 503, NULL, e->msg, NULL);
    default:
        return http_reply_problem(rs, 500, NULL, e->msg, NULL);
    }
}

/*
 * An integer query parameter within lo..hi (dflt when absent) into *out, or
 * -1 with the parameter, its range and a sentence in *qp. Pure: it only
 * reads rq's query.
 */
static int query_int_parse(const struct http_req *rq, const char *name,
                           long long lo, long long hi, long long dflt,
                           long long *out, struct query_problem *qp)
{
    const char *v = http_query(rq, name);
    char *end;
    long long x;

    *out = dflt;
    if (!v)
        return 0;
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        qp->param = name;
        qp->min = lo;
        qp->max = hi;
        snprintf(qp->detail, sizeof qp->detail,
                 "%s must be an integer in %lld..%lld (got '%.40s')", name, lo,
                 hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* The 400 for a query parameter query_int_parse rejected. */
static int query_problem_reply(struct http_resp *rs,
                               const struct query_problem *qp)
{
    return http_reply_problem(rs, 400, NULL, qp->detail,
                              json_pack("{s:s, s:I, s:I}", "parameter", qp->param,
                                        "min", (json_int_t)qp->min, "max",
                                        (json_int_t)qp->max));
}

/* A non-negative integer query parameter within lo..hi, or a 400. */
static int query_uint(struct http_req *rq, struct http_resp *rs,
                      const char *name, long long lo, long long hi,
                      long long dflt, long long *out)
{
    struct query_problem qp;

    if (query_int_parse(rq, name, lo, hi, dflt, out, &qp) < 0) {
        query_problem_reply(rs, &qp);
        return -1;
    }
    return 0;
}

/* ---- health and operations ----------------------------------------------- */

static int h_livez(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    return http_reply_json(rs, 200, json_pack("{s:s}", "status", "ok"));
}

static int h_readyz(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    struct store *st = app_reader(a);
    struct store_err e = {0};
    int db_ok = store_ping(st, &e) == 0;
    int exe_ok = access(a->cfg.exe, X_OK) == 0;

    app_reader_done(a, st);
    if (!db_ok || !exe_ok) {
        http_reply_header(rs, "Retry-After", "5");
        return http_reply_problem(rs, 503, NULL,
                                  !db_ok ? e.msg : "the coordinator binary is not executable",
                                  json_pack("{s:b, s:b}", "database", db_ok, "spawn", exe_ok));
    }
    return http_reply_json(rs, 200, json_pack("{s:s, s:b, s:b}", "status", "ready",
                                              "database", 1, "spawn", 1));
}

static int h_openapi(struct http_req *rq, struct http_resp *rs)
{
    (void)rq;
    return http_reply_text(rs, 200, "application/yaml", openapi_yaml, openapi_yaml_len);
}

static int h_prometheus(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    char *http_text = http_metrics_text(a->http);
    struct store *st = app_reader(a);
    struct store_counts c = {0};
    struct store_err e = {0};
    char *out = NULL;
    unsigned long long hits, misses;
    int rc;

    store_counts(st, NULL, &c, &e);
    app_reader_done(a, st);
    pagecache_counts(&hits, &misses);
    if (asprintf(&out,
                 "# HELP ecopt_metric_page_cache Metric pages served from the cache, or not.\n"
                 "# TYPE ecopt_metric_page_cache counter\n"
                 "ecopt_metric_page_cache{result=\"hit\"} %llu\n"
                 "ecopt_metric_page_cache{result=\"miss\"} %llu\n"
                 "# HELP ecopt_jobs Jobs by state.\n# TYPE ecopt_jobs gauge\n"
                 "ecopt_jobs{state=\"queued\"} %lld\necopt_jobs{state=\"running\"} %lld\n"
                 "# HELP ecopt_running_workers Workers of running jobs.\n"
                 "# TYPE ecopt_running_workers gauge\necopt_running_workers %lld\n%s",
                 hits, misses, (long long)c.queued, (long long)c.running,
                 (long long)c.running_workers, http_text ? http_text : "") < 0)
        out = NULL;
    free(http_text);
    if (!out)
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    rc = http_reply_text(rs, 200, "text/plain; version=0.0.4", out, strlen(out));
    free(out);
    return rc;
}

/* ---- jobs ------------------------------------------------------------------ */

/* A dataset a job may name: a file directly inside the data directory. */
int app_job_new(const struct jobspec *spec, const char *owner,
                struct store_job_new *in, char **spec_text, char **labels_text)
{
    json_t *canon = jobspec_to_json(spec), *labels;

    *spec_text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    labels = canon ? json_object_get(canon, "labels") : NULL;
    *labels_text = json_is_object(labels)
                       ? json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)
                       : strdup("{}");
    json_decref(canon);
    if (!*spec_text || !*labels_text)
        return -1;
    memset(in, 0, sizeof *in);
    in->owner = owner;
    in->spec = *spec_text;
    in->name = spec->name;
    in->labels = *labels_text;
    in->algorithm = ec_algo_name(spec->job.algorithm);
    in->compressor = ec_comp_name(spec->job.compressor.type);
    in->dataset = spec->job.dataset;
    in->backend = jobspec_backend_name(spec->backend);
    in->workers = spec->job.workers;
    return 0;
}

/* A 422 naming one field and, for limits, the limit and its value. */
static int reject_field(struct http_resp *rs, const char *field,
                        const char *detail, const char *limit, double value)
{
    json_t *errors = json_pack("[{s:s, s:s}]", "field", field, "detail", detail);
    json_t *extra = json_pack("{s:o}", "errors", errors);

    if (limit) {
        json_object_set_new(extra, "limit", json_string(limit));
        json_object_set_new(extra, "value", json_real(value));
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s: %s", field, detail);
    return http_reply_problem(rs, 422, "Invalid job", msg, extra);
}

/* Names what is wrong with a spec (and, for a server limit, the limit
   and its value) in sp; -1, for the caller to return. */
static int spec_problem(struct spec_problem *sp, const char *field, const char *limit,
                        double value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int spec_problem(struct spec_problem *sp, const char *field, const char *limit,
                        double value, const char *fmt, ...)
{
    va_list ap;

    snprintf(sp->field, sizeof sp->field, "%s", field);
    va_start(ap, fmt);
    vsnprintf(sp->detail, sizeof sp->detail, fmt, ap);
    va_end(ap);
    sp->limit = limit;
    sp->value = value;
    return -1;
}

int app_check_spec(struct app *a, const struct jobspec *spec,
                   struct spec_problem *sp)
{
    const ec_job *job = &spec->job;
    const struct config *cfg = &a->cfg;
    struct datasets_file df;
    const char *rule;
    int64_t rows, d;

    memset(sp, 0, sizeof *sp);
    if (spec->backend == JOBSPEC_BACKEND_MPI)
        return spec_problem(sp, "backend", NULL, 0,
                            "mpi is not available through the service yet; "
                            "use process or inproc");
    if ((rule = datasets_name_check(job->dataset)))
        return spec_problem(sp, "dataset", NULL, 0, "%s", rule);
    if (datasets_file(a, job->dataset, &df, sp->detail, sizeof sp->detail) < 0) {
        snprintf(sp->field, sizeof sp->field, "dataset");
        return -1;
    }
    rows = df.rows;
    d = df.d;
    /* What depends on the data, checked now rather than when the job
     * starts: the ranges the engine would refuse. */
    if (job->workers > rows)
        return spec_problem(sp, "workers", NULL, 0,
                            "must be in 1..%lld (the rows of %.100s; got %u)",
                            (long long)rows, job->dataset, job->workers);
    if ((job->compressor.type == EC_COMP_TOPK || job->compressor.type == EC_COMP_RANDK) &&
        isnan(job->k_frac) && (int64_t)job->compressor.k > d)
        return spec_problem(sp, "compressor.k", NULL, 0,
                            "must be in 1..%lld (the dimension d of %.100s; got %u)",
                            (long long)d, job->dataset, job->compressor.k);
    if ((int64_t)job->batch > rows / job->workers)
        return spec_problem(sp, "batch", NULL, 0,
                            "must be in 1..%lld (the smallest shard's rows; got %u)",
                            (long long)(rows / job->workers), job->batch);
    /* The server's own limits. */
    if (job->workers > cfg->max_workers_per_job)
        return spec_problem(sp, "workers", "max_workers_per_job", cfg->max_workers_per_job,
                            "at most %u workers per job on this server (got %u)",
                            cfg->max_workers_per_job, job->workers);
    if (job->max_rounds > cfg->max_rounds)
        return spec_problem(sp, "max_rounds", "max_rounds", (double)cfg->max_rounds,
                            "at most %llu rounds per job on this server (got %llu)",
                            (unsigned long long)cfg->max_rounds,
                            (unsigned long long)job->max_rounds);
    if (job->max_seconds > cfg->max_seconds)
        return spec_problem(sp, "max_seconds", "max_seconds", cfg->max_seconds,
                            "at most %.0f seconds per job on this server (got %g)",
                            cfg->max_seconds, job->max_seconds);
    return 0;
}

static int h_jobs_create(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    struct store_job_new in = {0};
    struct store_job job = {0};
    struct store_counts c = {0};
    struct store_err e = {0};
    char detail[400], *spec_text = NULL, *labels_text = NULL, location[64];
    int rc, replay = 0;

    if (!t)
        return 0;
    rc = jobspec_parse(rq->body, rq->body_len, &spec, &errs);
    if (rc == EC_EPARSE || rc == EC_ENOMEM) {
        jobspec_errors_format(&errs, detail, sizeof detail);
        return http_reply_problem(rs, rc == EC_ENOMEM ? 500 : 400, NULL, detail, NULL);
    }
    if (rc < 0) {
        json_t *list = json_array();
        for (unsigned i = 0; i < errs.count; i++)
            json_array_append_new(list, json_pack("{s:s, s:s}", "field", errs.item[i].field,
                                                  "detail", errs.item[i].detail));
        jobspec_errors_format(&errs, detail, sizeof detail);
        return http_reply_problem(rs, 422, "Invalid job", detail,
                                  json_pack("{s:o}", "errors", list));
    }
    {
        struct spec_problem sp;
        if (app_check_spec(a, &spec, &sp) < 0)
            return reject_field(rs, sp.field, sp.detail, sp.limit, sp.value);
    }

    if (app_job_new(&spec, t->name, &in, &spec_text, &labels_text) < 0) {
        rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        goto out;
    }
    in.idempotency_key = http_header(rq, "Idempotency-Key");
    in.request_hash = in.idempotency_key ? spec_text : NULL;

    pthread_mutex_lock(&a->wlock);
    rc = store_counts(a->writer, t->name, &c, &e);
    /* A replay creates nothing, and a conflicting key is refused below;
     * every new key counts against the limit like no key at all. */
    if (rc == 0 && in.idempotency_key)
        replay = store_job_idem_known(a->writer, &in, &e) != 0;
    if (rc == 0 && !replay && c.owner_queued >= a->cfg.max_queued_per_token) {
        pthread_mutex_unlock(&a->wlock);
        snprintf(detail, sizeof detail,
                 "max_queued_per_token: at most %u queued jobs per token (you have %lld)",
                 a->cfg.max_queued_per_token, (long long)c.owner_queued);
        http_reply_header(rs, "Retry-After", "10");
        rc = http_reply_problem(rs, 429, NULL, detail,
                                json_pack("{s:s, s:I}", "limit", "max_queued_per_token",
                                          "value", (json_int_t)a->cfg.max_queued_per_token));
        goto out;
    }
    if (rc == 0)
        rc = store_job_create(a->writer, &in, &job, &e);
    pthread_mutex_unlock(&a->wlock);
    if (rc == STORE_ECONFLICT) {
        rc = http_reply_problem(rs, 422, NULL,
                                "Idempotency-Key was already used with a different request body",
                                json_pack("{s:s}", "field", "Idempotency-Key"));
        goto out;
    }
    if (rc < 0) {
        rc = store_problem(rs, &e, "job not created");
        goto out;
    }
    sched_wake(a->sched);
    snprintf(location, sizeof location, "/v1/jobs/%s", job.id);
    http_reply_header(rs, "Location", location);
    rc = http_reply_json(rs, rc == STORE_EXISTING ? 200 : 201, job_json(&job));
out:
    store_job_clear(&job);
    free(spec_text);
    free(labels_text);
    return rc;
}

static int h_jobs_list(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_job_filter f = {0};
    struct store_job *jobs = NULL;
    struct store_err e = {0};
    char next[STORE_CURSOR_SIZE] = "", key[80] = "";
    const char *state = http_query(rq, "state"), *label = http_query(rq, "label");
    long long limit;
    size_t n = 0;
    struct store *st;
    int rc;

    if (!t || query_uint(rq, rs, "limit", 1, LIST_MAX, LIST_DEFAULT, &limit) < 0)
        return 0;
    f.owner = owner_of(t);
    f.state = -1;
    if (state) {
        enum store_job_state s;
        if (store_job_state_from_name(state, &s) < 0)
            return http_reply_problem(rs, 400, NULL,
                                      "state must be one of queued, running, succeeded, "
                                      "failed, cancelled, interrupted",
                                      json_pack("{s:s}", "parameter", "state"));
        f.state = (int)s;
    }
    f.algorithm = http_query(rq, "algorithm");
    f.dataset = http_query(rq, "dataset");
    if (label) {
        const char *eq = strchr(label, '=');
        size_t kl = eq ? (size_t)(eq - label) : strlen(label);
        if (kl == 0 || kl >= sizeof key)
            return http_reply_problem(rs, 400, NULL, "label must be KEY or KEY=VALUE",
                                      json_pack("{s:s}", "parameter", "label"));
        memcpy(key, label, kl);
        key[kl] = '\0';
        f.label_key = key;
        f.label_value = eq ? eq + 1 : NULL;
    }
    st = app_reader(a);
    rc = store_job_list(st, &f, http_query(rq, "cursor"), (size_t)limit, &jobs, &n, next, &e);
    app_reader_done(a, st);
    if (rc == STORE_EINVAL)
        return http_reply_problem(rs, 400, NULL, "cursor is not one this server issued",
                                  json_pack("{s:s}", "parameter", "cursor"));
    if (rc < 0)
        return store_problem(rs, &e, "no jobs");
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, job_json(&jobs[i]));
    store_jobs_free(jobs, n);
    return http_reply_json(rs, 200, json_pack("{s:o, s:o}", "jobs", list, "next_cursor",
                                              next[0] ? json_string(next) : json_null()));
}

/* Loads the job of the {id} parameter the caller may see, or replies 404. */
static int load_job(struct http_req *rq, struct http_resp *rs,
                    const struct token *t, struct store_job *job)
{
    struct app *a = rq->app;
    struct store *st = app_reader(a);
    struct store_err e = {0};
    int rc = store_job_get(st, http_param(rq, "id"), owner_of(t), job, &e);

    app_reader_done(a, st);
    if (rc < 0) {
        store_problem(rs, &e, "no such job");
        return -1;
    }
    return 0;
}

/*
 * A cached document (NULL: none) sent as it is when the token may see it:
 * 1 with *rc set. 0 when the request goes the usual way; for another
 * owner's job that ends in the 404 any unknown id gets. Frees cached.
 */
static int reply_cached(struct http_resp *rs, const struct token *t, char *cached,
                        size_t len, const char *owner, int *rc)
{
    int mine = cached && (t->admin || strcmp(owner, t->name) == 0);

    if (mine)
        *rc = http_reply_text(rs, 200, "application/json", cached, len);
    free(cached);
    return mine;
}

static int h_job_get(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_job job = {0};
    struct store_err e = {0};
    ec_metric last;
    char *latest = NULL, *cached, owner[64];
    struct store *st;
    int rc, found;
    size_t len;
    /* Read before the store: a commit after it retires what we render. */
    uint64_t gen = store_generation();

    if (!t)
        return 0;
    cached = jobcache_get(http_param(rq, "id"), gen, owner, sizeof owner, &len);
    if (reply_cached(rs, t, cached, len, owner, &rc))
        return rc;
    if (load_job(rq, rs, t, &job) < 0)
        return 0;
    st = app_reader(a);
    found = store_metrics_last_doc(st, job.id, &last, &latest, &e) == 1;
    app_reader_done(a, st);
    if (found && !latest) {
        /* A row stored without its document: formatted from its numbers. */
        json_t *o = describe_metric(&last);
        latest = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
    }
    rc = reply_job(rs, &job, latest, gen);
    free(latest);
    store_job_clear(&job);
    return rc;
}

static int h_job_cancel(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_job job = {0};
    struct store_err e = {0};
    char reason[160];
    int rc;

    if (!t || load_job(rq, rs, t, &job) < 0)
        return 0;
    if (store_job_state_is_final(job.state)) {
        snprintf(reason, sizeof reason, "job %s already ended (%s)", job.id,
                 store_job_state_name(job.state));
        store_job_clear(&job);
        return http_reply_problem(rs, 409, NULL, reason, NULL);
    }
    if (sched_cancel(a->sched, job.id) == 0) {
        json_t *o = job_json(&job);
        json_object_set_new(o, "cancel_requested", json_true());
        store_job_clear(&job);
        return http_reply_json(rs, 202, o);
    }
    /* Not running here: still queued, so it ends now. */
    snprintf(reason, sizeof reason, "cancelled by %s before it started", t->name);
    pthread_mutex_lock(&a->wlock);
    rc = store_job_finish(a->writer, job.id, STORE_JOB_CANCELLED, reason, &e);
    if (rc == 0) {
        store_job_clear(&job);
        rc = store_job_get(a->writer, http_param(rq, "id"), NULL, &job, &e);
    }
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0 && e.code == STORE_ESTATE && sched_cancel(a->sched, job.id) == 0) {
        /* It started between our two looks. */
        json_t *o = job_json(&job);
        json_object_set_new(o, "cancel_requested", json_true());
        store_job_clear(&job);
        return http_reply_json(rs, 202, o);
    }
    if (rc < 0) {
        store_job_clear(&job);
        return store_problem(rs, &e, "no such job");
    }
    rc = http_reply_json(rs, 200, job_json(&job));
    store_job_clear(&job);
    return rc;
}

static int h_job_delete(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_err e = {0};
    const char *id = http_param(rq, "id");
    char path[PATH_MAX + 64];
    int rc;

    if (!t)
        return 0;
    pthread_mutex_lock(&a->wlock);
    rc = store_job_delete(a->writer, id, owner_of(t), &e);
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0)
        return store_problem(rs, &e, "no such job");
    pagecache_forget(id);
    snprintf(path, sizeof path, "%s/%s.json", a->cfg.state_dir, id);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s.log", a->cfg.state_dir, id);
    unlink(path);
    return http_reply_text(rs, 204, "text/plain", "", 0);
}

static int wants_csv(struct http_req *rq)
{
    const char *accept = http_header(rq, "Accept");
    const char *format = http_query(rq, "format");

    return (format && strcmp(format, "csv") == 0) ||
           (accept && strstr(accept, "text/csv"));
}

/*
 * The JSON page from the rows' stored documents, joined as they are: no
 * number is formatted again. A row stored without one (before migration
 * 0002) is formatted from its numbers.
 */
static int reply_metrics_docs(struct http_resp *rs, const char *id, const char *owner,
                              long long after, size_t limit, const ec_metric *rows,
                              char **docs, const struct store_metrics_page *page,
                              size_t every, int final)
{
    size_t cap = 128, len = 0;
    char *text, tail[128];
    int rc, n;

    for (size_t i = 0; i < page->count; i++) {
        if (!docs[i]) {
            json_t *o = describe_metric(&rows[i]);
            docs[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
            json_decref(o);
            if (!docs[i])
                return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        }
        cap += strlen(docs[i]) + 1;
    }
    if (!(text = malloc(cap)))
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    memcpy(text, "{\"rows\":[", 9);
    len = 9;
    for (size_t i = 0; i < page->count; i++) {
        size_t l = strlen(docs[i]);
        if (i)
            text[len++] = ',';
        memcpy(text + len, docs[i], l);
        len += l;
    }
    n = snprintf(tail, sizeof tail, "],\"next_after\":%lld,\"more\":%s,\"every\":%zu}",
                 (long long)page->next_after, page->more ? "true" : "false", every);
    memcpy(text + len, tail, (size_t)n);
    len += (size_t)n;
    /* A full window, or a job that has ended: no later row can change it. */
    if (page->more || final)
        pagecache_put(id, owner, after, limit, every, text, len);
    rc = http_reply_text(rs, 200, "application/json", text, len);
    free(text);
    return rc;
}

int app_reply_metrics(struct app *a, struct http_resp *rs, const char *id,
                      long long after, size_t limit, size_t every, int csv,
                      int final, const char *owner)
{
    struct store_err e = {0};
    struct store_metrics_page page = {0};
    ec_metric *rows = malloc(limit * sizeof *rows);
    char **docs = csv ? NULL : calloc(limit, sizeof *docs);
    struct store *st;
    int rc;

    if (!rows || (!csv && !docs)) {
        free(rows);
        free(docs);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    st = app_reader(a);
    rc = store_metrics_query_docs(st, id, after, limit, every, rows, docs, &page, &e);
    app_reader_done(a, st);
    if (rc < 0) {
        free(rows);
        free(docs);
        return store_problem(rs, &e, "no such job");
    }
    if (!csv) {
        rc = reply_metrics_docs(rs, id, owner, after < -1 ? -1 : after, limit, rows, docs,
                                &page, every, final);
        for (size_t i = 0; i < page.count; i++)
            free(docs[i]);
        free(docs);
        free(rows);
        return rc;
    }
    size_t cap = 128 + page.count * 400, len = 0;
    char *text = malloc(cap), line[512], next[32];
    if (!text) {
        free(rows);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    len = (size_t)snprintf(text, cap, "%s\n", describe_csv_header);
    for (size_t i = 0; i < page.count; i++) {
        int n = describe_csv_row(&rows[i], line, sizeof line);
        if (n > 0 && len + (size_t)n + 2 < cap) {
            memcpy(text + len, line, (size_t)n);
            len += (size_t)n;
            text[len++] = '\n';
        }
    }
    snprintf(next, sizeof next, "%lld", (long long)page.next_after);
    http_reply_header(rs, "X-Next-After", next);
    rc = http_reply_text(rs, 200, "text/csv", text, len);
    free(text);
    free(rows);
    return rc;
}

int metrics_cursor_parse(const struct http_req *rq, struct metrics_cursor *c,
                         struct query_problem *qp)
{
    if (query_int_parse(rq, "after", -1, INT64_MAX, -1, &c->after, qp) < 0 ||
        query_int_parse(rq, "limit", 1, METRICS_MAX, METRICS_DEFAULT, &c->limit,
                        qp) < 0 ||
        query_int_parse(rq, "every", 1, METRICS_EVERY_MAX, 1, &c->every, qp) < 0 ||
        query_int_parse(rq, "max_points", 2, METRICS_MAX, 0, &c->max_points,
                        qp) < 0 ||
        query_int_parse(rq, "wait", 0, WAIT_MAX, 0, &c->wait, qp) < 0)
        return -1;
    return 0;
}

void metrics_cursor_fit(struct metrics_cursor *c, int64_t count)
{
    if (c->max_points <= 0)
        return;
    /*
     * Downsample so that the whole remaining curve fits in max_points:
     * every = (count + max_points - 2) / (max_points - 1), written so that
     * no count can overflow it.
     */
    if (count > c->max_points)
        c->every = (count - 1) / (c->max_points - 1) + 1;
    if (c->limit > c->max_points)
        c->limit = c->max_points;
}

static int h_job_metrics(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_job job = {0};
    struct store_err e = {0};
    struct metrics_cursor c;
    struct query_problem qp;
    int finished, rc;

    if (!t)
        return 0;
    if (metrics_cursor_parse(rq, &c, &qp) < 0) {
        query_problem_reply(rs, &qp);
        return 0;
    }
    if (c.wait == 0 && c.max_points == 0 && !wants_csv(rq)) {
        /* A page that can no longer change, if it is cached and theirs. */
        char owner[64], *cached;
        size_t clen;

        cached = pagecache_get(http_param(rq, "id"), c.after < -1 ? -1 : c.after,
                               (size_t)c.limit, (size_t)c.every, &clen, owner,
                               sizeof owner);
        if (reply_cached(rs, t, cached, clen, owner, &rc))
            return rc;
    }
    if (load_job(rq, rs, t, &job) < 0)
        return 0;
    finished = store_job_state_is_final(job.state);
    if (c.max_points > 0) {
        struct store *st = app_reader(a);
        int64_t count = 0;
        if (store_metrics_count(st, job.id, c.after, &count, &e) != 0)
            count = 0;
        app_reader_done(a, st);
        metrics_cursor_fit(&c, count);
    }
    if (c.wait > 0 && !finished) {
        /* Long-poll: answer when rows after `after` exist, or at the wait. */
        rc = watch_longpoll(a, rs, job.id, c.after, (size_t)c.limit,
                            (size_t)c.every, wants_csv(rq),
                            (unsigned)(c.wait * 1000));
        store_job_clear(&job);
        return rc;
    }
    rc = app_reply_metrics(a, rs, job.id, c.after, (size_t)c.limit,
                           (size_t)c.every, wants_csv(rq), finished, job.owner);
    store_job_clear(&job);
    return rc;
}

static int h_job_events(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = app_authn(rq, rs);
    struct store_job job = {0};
    long long after;
    int rc;

    if (!t || query_uint(rq, rs, "after", -1, INT64_MAX, -1, &after) < 0)
        return 0;
    if (load_job(rq, rs, t, &job) < 0)
        return 0;
    rc = watch_events(a, rs, job.id, after);
    store_job_clear(&job);
    return rc;
}

static int h_experiments_post(struct http_req *rq, struct http_resp *rs)
{
    const struct token *t = app_authn(rq, rs);

    return t ? h_experiments_create(rq, rs, t) : 0;
}

static int h_experiment_get(struct http_req *rq, struct http_resp *rs)
{
    const struct token *t = app_authn(rq, rs);

    return t ? h_experiment_reply(rq, rs, rq->app, http_param(rq, "id"),
                                  owner_of(t), 200)
             : 0;
}

json_t *app_job_json(const struct store_job *j)
{
    return job_json(j);
}

const struct http_route app_routes[] = {
    {"GET", "/livez", h_livez, 0},
    {"GET", "/readyz", h_readyz, 0},
    {"GET", "/metrics", h_prometheus, 0},
    {"GET", "/openapi.yaml", h_openapi, 0},
    {"GET", "/", ui_index, 0},
    {"GET", "/ui/{file}", ui_file, 0},
    {"POST", "/v1/jobs", h_jobs_create, HTTP_JSON_BODY},
    {"GET", "/v1/jobs", h_jobs_list, 0},
    {"GET", "/v1/jobs/{id}", h_job_get, 0},
    {"DELETE", "/v1/jobs/{id}", h_job_delete, 0},
    {"POST", "/v1/jobs/{id}/cancel", h_job_cancel, 0},
    {"GET", "/v1/jobs/{id}/metrics", h_job_metrics, 0},
    {"GET", "/v1/jobs/{id}/events", h_job_events, 0},
    {"GET", "/v1/jobs/{id}/plot.svg", plots_job, 0},
    {"POST", "/v1/experiments", h_experiments_post, HTTP_JSON_BODY},
    {"GET", "/v1/experiments/{id}", h_experiment_get, 0},
    {"GET", "/v1/experiments/{id}/plot.svg", plots_experiment, 0},
    {"GET", "/v1/datasets", datasets_list, 0},
    {"POST", "/v1/datasets", datasets_upload, HTTP_STREAM_BODY},
    {"GET", "/v1/datasets/{name}", datasets_get, 0},
};
const size_t app_nroutes = sizeof app_routes / sizeof app_routes[0];
