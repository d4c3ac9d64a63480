/* The jobs routes: submit, list, get, cancel, delete. */
#define _GNU_SOURCE
#include "api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "jobspec.h"
#include "pagecache.h"

#define LIST_DEFAULT 50
#define LIST_MAX 500

static json_t *parsed_or_null(const char *text)
{
    json_t *v = text ? json_loads(text, 0, NULL) : NULL;
    return v ? v : json_null();
}

static json_t *ms_or_null(int64_t ms)
{
    return ms > 0 ? json_integer(ms) : json_null();
}

/* What an ended job used (null before it ends, or when nothing is known:
   a job that never ran, or one that ended before usage was recorded). */
static json_t *usage_json(const struct store_job *j)
{
    const struct store_job_usage *u = &j->usage;

    if (!store_job_state_is_final(j->state) ||
        (!isfinite(u->cpu_seconds) && u->max_rss_bytes < 0 && u->rss_sum_bytes < 0))
        return json_null();
    return json_pack("{s:o, s:o, s:o}", "cpu_seconds", describe_real(u->cpu_seconds),
                     "max_rss_bytes",
                     u->max_rss_bytes >= 0 ? json_integer(u->max_rss_bytes) : json_null(),
                     "rss_sum_bytes",
                     u->rss_sum_bytes >= 0 ? json_integer(u->rss_sum_bytes) : json_null());
}

/* A job's fields but its stored documents (spec, problem, params). */
static json_t *job_json_base(const struct store_job *j)
{
    json_t *o = json_object();

    json_object_set_new(o, "id", json_string(j->id));
    json_object_set_new(o, "state", json_string(store_job_state_name(j->state)));
    json_object_set_new(o, "reason", j->reason ? json_string(j->reason) : json_null());
    json_object_set_new(o, "stop_reason",
                        j->stop_reason ? json_string(j->stop_reason) : json_null());
    json_object_set_new(o, "outcome", j->outcome ? json_string(j->outcome) : json_null());
    json_object_set_new(o, "retry_of", j->retry_of[0] ? json_string(j->retry_of) : json_null());
    json_object_set_new(o, "owner", json_string(j->owner));
    json_object_set_new(o, "name", json_string(j->name ? j->name : ""));
    json_object_set_new(o, "labels", parsed_or_null(j->labels));
    json_object_set_new(o, "algorithm", json_string(j->algorithm));
    json_object_set_new(o, "compressor", json_string(j->compressor));
    json_object_set_new(o, "dataset", json_string(j->dataset));
    json_object_set_new(o, "dataset_sha256", j->dataset_sha256[0]
                                                 ? json_string(j->dataset_sha256)
                                                 : json_null());
    json_object_set_new(o, "backend", json_string(j->backend));
    json_object_set_new(o, "workers", json_integer(j->workers));
    json_object_set_new(o, "created_at", ms_or_null(j->created_at));
    json_object_set_new(o, "started_at", ms_or_null(j->started_at));
    json_object_set_new(o, "finished_at", ms_or_null(j->finished_at));
    json_object_set_new(o, "usage", usage_json(j));
    /* ECLK's end record: its rule's delta_eff range, the inflation and the
     * guard's restarts with their rounds (null for other algorithms and
     * before the job ends). */
    json_object_set_new(o, "eclk", parsed_or_null(j->eclk));
    json_object_set_new(o, "progress",
                        json_pack("{s:o, s:o, s:o, s:o}", "round",
                                  j->round >= 0 ? json_integer(j->round) : json_null(),
                                  "rel_gap", describe_real(j->rel_gap), "bits_up",
                                  describe_real(j->bits_up), "updated_at",
                                  ms_or_null(j->updated_at)));
    return o;
}

/*
 * A queued job's place in the queue: reason (why it waits) and position
 * (docs/api.md, "Why a job waits"); position is null for the others and
 * when the plan could not be made.
 */
static void put_place(json_t *o, const struct store_job *j, const struct queue_place *plan,
                      size_t n)
{
    const struct queue_place *p =
        j->state == STORE_JOB_QUEUED ? queue_find(plan, n, j->id) : NULL;

    if (p)
        json_object_set_new(o, "reason", json_string(queue_reason_name(p->reason)));
    json_object_set_new(o, "position", p ? json_integer(p->position) : json_null());
}

/* The queue's plan, when one of the jobs is queued: NULL otherwise or
 * when it cannot be made (then no job shows a position). */
static struct queue_place *plan_for(struct app *a, const struct store_job *jobs, size_t n,
                                    size_t *nplan)
{
    struct queue_place *plan = NULL;
    struct store_err e = {0};
    size_t i = 0;

    *nplan = 0;
    while (i < n && jobs[i].state != STORE_JOB_QUEUED)
        i++;
    if (i == n || jobs_queue(a, &plan, nplan, &e) < 0)
        return NULL;
    return plan;
}

/* A job with its place in the queue, for a reply of one job. */
static json_t *job_json_placed(struct app *a, const struct store_job *j);

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
static int reply_job(struct http_resp *rs, struct app *a, const struct store_job *j,
                     const char *latest, uint64_t gen)
{
    size_t nplan;
    struct queue_place *plan = plan_for(a, j, 1, &nplan);
    json_t *o = job_json_base(j);
    char *head;
    const char *part[] = {",\"spec\":", stored_doc(j->spec), ",\"problem\":",
                          stored_doc(j->problem), ",\"params\":", stored_doc(j->params),
                          ",\"latest\":", latest ? latest : "null", "}"};
    size_t len, cap, n = sizeof part / sizeof part[0];
    char *text;
    int rc;

    put_place(o, j, plan, nplan);
    free(plan);
    head = o ? json_dumps(o, JSON_COMPACT) : NULL;
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
    /* A queued job's place moves with the scheduler's state, which no
     * generation counts: it is never cached. */
    if (j->state != STORE_JOB_QUEUED)
        jobcache_put(a->pages, j->id, gen, j->owner, text, len);
    rc = http_reply_text(rs, 200, "application/json", text, len);
    free(text);
    return rc;
}

json_t *api_eclk_summary(const struct store_job *j)
{
    static const char *const from_params[] = {"eclk_rule", "eclk_guard",
                                              "eclk_guard_threshold", "step_source"};
    json_t *params, *end, *o;

    if (!j->algorithm || strcmp(j->algorithm, "eclk") != 0)
        return json_null();
    params = j->params ? json_loads(j->params, 0, NULL) : NULL;
    end = j->eclk ? json_loads(j->eclk, 0, NULL) : NULL;
    o = json_is_object(end) ? json_incref(end) : json_object();
    for (size_t i = 0; o && i < sizeof from_params / sizeof from_params[0]; i++) {
        json_t *v = json_object_get(params, from_params[i]);

        json_object_set(o, from_params[i], v ? v : json_null());
    }
    json_decref(params);
    json_decref(end);
    return o ? o : json_null();
}

json_t *api_job_json(const struct store_job *j)
{
    return job_json(j);
}

static json_t *job_json_placed(struct app *a, const struct store_job *j)
{
    size_t n;
    struct queue_place *plan = plan_for(a, j, 1, &n);
    json_t *o = job_json(j);

    put_place(o, j, plan, n);
    free(plan);
    return o;
}

/* What a submission (or a retry) gets; clears *job. */
static int reply_submitted(struct http_resp *rs, struct app *a, enum jobs_outcome outcome,
                           struct store_job *job, long long queued,
                           const struct store_err *e, const struct spec_problem *sp)
{
    char detail[200], location[64];
    int rc;

    switch (outcome) {
    case JOBS_NO_MEMORY:
        store_job_clear(job);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    case JOBS_INVALID:
        store_job_clear(job);
        return api_reply_spec_problem(rs, "Invalid job", sp);
    case JOBS_QUEUE_FULL:
        store_job_clear(job);
        snprintf(detail, sizeof detail,
                 "max_queued_per_token: at most %u queued jobs per token (you have %lld)",
                 a->cfg.max_queued_per_token, queued);
        http_reply_header(rs, "Retry-After", "10");
        return http_reply_problem(rs, 429, NULL, detail,
                                  json_pack("{s:s, s:I}", "limit", "max_queued_per_token",
                                            "value", (json_int_t)a->cfg.max_queued_per_token));
    case JOBS_KEY_REUSED:
        store_job_clear(job);
        return api_reply_invalid(rs, NULL,
                                 "Idempotency-Key was already used with a different "
                                 "request body",
                                 NULL, json_pack("{s:s}", "field", "Idempotency-Key"));
    case JOBS_STORE_FAILED:
        store_job_clear(job);
        return api_reply_store(rs, e, "job not created");
    case JOBS_CREATED:
    case JOBS_REPLAYED:
    case JOBS_UPDATED:      /* not a submission's outcome */
        break;
    }
    snprintf(location, sizeof location, "/v1/jobs/%s", job->id);
    http_reply_header(rs, "Location", location);
    rc = http_reply_json(rs, outcome == JOBS_CREATED ? 201 : 200, job_json_placed(a, job));
    store_job_clear(job);
    return rc;
}

/* Longest Idempotency-Key taken (a UUID is 36 bytes). */
#define IDEMPOTENCY_KEY_MAX 255

/* What is wrong with an Idempotency-Key, NULL when nothing: 1..255
 * visible ASCII characters. */
static const char *idempotency_key_problem(const char *key)
{
    size_t len = strlen(key);

    if (len == 0)
        return "Idempotency-Key must not be empty";
    if (len > IDEMPOTENCY_KEY_MAX)
        return "Idempotency-Key must be at most 255 characters";
    for (size_t i = 0; i < len; i++)
        if (key[i] < 0x21 || key[i] > 0x7e)
            return "Idempotency-Key must be visible ASCII characters (no spaces or "
                   "control characters)";
    return NULL;
}

int h_jobs_create(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    struct spec_problem sp;
    struct store_job job = {0};
    struct store_err e = {0};
    char detail[640];
    long long queued = 0;
    enum jobs_outcome outcome;
    char version[65];
    const char *key = http_header(rq, "Idempotency-Key"), *why;
    int rc;

    if (key && (why = idempotency_key_problem(key)))
        return http_reply_problem(rs, 400, NULL, why,
                                  json_pack("{s:s}", "field", "Idempotency-Key"));
    if (api_work_refused(rq, rs, who))
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
        /* The detail is the first problem, whole; errors has them all
         * (joined, several could be cut off mid-sentence). */
        {
            unsigned more = errs.count - 1 + errs.dropped;
            const struct jobspec_error *first = &errs.item[0];

            if (more)
                snprintf(detail, sizeof detail, "%s%s%s (and %u more: see errors)",
                         first->field, first->field[0] ? ": " : "", first->detail, more);
            else
                snprintf(detail, sizeof detail, "%s%s%s", first->field,
                         first->field[0] ? ": " : "", first->detail);
        }
        return api_reply_invalid(rs, "Invalid job", detail, list, NULL);
    }
    if (jobs_check_spec(a, &spec, who->name, who->admin, &sp, version) < 0)
        return api_reply_spec_problem(rs, "Invalid job", &sp);

    outcome = jobs_submit(a, &spec, who->name, version, key, &job, &queued, &e);
    return reply_submitted(rs, a, outcome, &job, queued, &e, &sp);
}

/* The list's own parameters; every other one is a condition of
 * STORE_JOB_FIELDS (docs/api.md, "Filters"). */
static const char *const list_params[] = {"state", "stop_reason", "algorithm", "dataset",
                                          "label", "cursor", "limit"};

#define LIST_CONDS_MAX 32

/* The conditions of the query, into conds; -1 when it replied 400 naming
 * the parameter that is not one or whose value is wrong. */
static int list_conds(struct http_req *rq, struct http_resp *rs,
                      struct store_job_cond conds[LIST_CONDS_MAX], size_t *n)
{
    size_t nlist = sizeof list_params / sizeof list_params[0];

    *n = 0;
    for (size_t i = 0; i < rq->nquery; i++) {
        const char *key = rq->query[i].key, *value = rq->query[i].value;
        char why[300];
        size_t k = 0;
        int rc;

        while (k < nlist && strcmp(key, list_params[k]) != 0)
            k++;
        if (k < nlist)
            continue;
        if (*n == LIST_CONDS_MAX) {
            snprintf(why, sizeof why, "at most %d filters", LIST_CONDS_MAX);
            return http_reply_problem(rs, 400, NULL, why,
                                      json_pack("{s:s}", "parameter", key)), -1;
        }
        rc = store_job_cond_parse(key, value, &conds[*n], why, sizeof why);
        if (rc == 1)
            snprintf(why, sizeof why,
                     "unknown query parameter '%.60s': GET /v1/jobs takes state, "
                     "algorithm, dataset, label, stop_reason, cursor, limit and the "
                     "filters NAME[_ne|_lt|_le|_gt|_ge] of GET /v1/vocabulary's job_fields",
                     key);
        for (size_t j = 0; rc == 0 && j < *n; j++)
            if (conds[j].field == conds[*n].field && conds[j].op == conds[*n].op) {
                snprintf(why, sizeof why, "%.60s is given twice", key);
                rc = -1;
            }
        if (rc != 0)
            return http_reply_problem(rs, 400, NULL, why,
                                      json_pack("{s:s}", "parameter", key)), -1;
        (*n)++;
    }
    return 0;
}

int h_jobs_list(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct store_job_cond conds[LIST_CONDS_MAX];
    struct app *a = rq->app;
    struct store_job_filter f = {0};
    struct store_job *jobs = NULL;
    struct store_err e = {0};
    char next[STORE_CURSOR_SIZE] = "", key[80] = "";
    const char *state = http_query(rq, "state"), *label = http_query(rq, "label");
    long long limit;
    size_t n = 0;
    struct store *st;
    enum store_stop stop;
    int rc;

    if (api_query_uint(rq, rs, "limit", 1, LIST_MAX, LIST_DEFAULT, &limit) < 0)
        return 0;
    if (list_conds(rq, rs, conds, &f.nconds) < 0)
        return 0;
    f.conds = conds;
    f.owner = api_owner_of(t);
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
    f.stop_reason = http_query(rq, "stop_reason");
    if (f.stop_reason && store_stop_from_name(f.stop_reason, &stop) < 0) {
        char names[400], detail[440];

        snprintf(detail, sizeof detail, "stop_reason must be one of %s",
                 store_stop_names(names, sizeof names));
        return http_reply_problem(rs, 400, NULL, detail,
                                  json_pack("{s:s}", "parameter", "stop_reason"));
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
        return api_reply_store(rs, &e, "no jobs");
    size_t nplan;
    struct queue_place *plan = plan_for(a, jobs, n, &nplan);
    json_t *list = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = job_json(&jobs[i]);

        put_place(o, &jobs[i], plan, nplan);
        json_array_append_new(list, o);
    }
    free(plan);
    store_jobs_free(jobs, n);
    return http_reply_json(rs, 200, json_pack("{s:o, s:o}", "jobs", list, "next_cursor",
                                              next[0] ? json_string(next) : json_null()));
}

int h_job_get(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    struct store_job job = {0};
    struct store_err e = {0};
    ec_metric last;
    char *latest = NULL, *cached, owner[64];
    struct store *st;
    int rc, found;
    size_t len;
    /* Read before the store: a commit after it retires what we render. */
    uint64_t gen = store_gen_read(&a->gen);

    cached = jobcache_get(a->pages, http_param(rq, "id"), gen, owner, sizeof owner, &len);
    if (api_reply_cached(rs, t, cached, len, owner, &rc))
        return rc;
    if (api_load_job(rq, rs, t, &job) < 0)
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
    rc = reply_job(rs, a, &job, latest, gen);
    free(latest);
    store_job_clear(&job);
    return rc;
}

static int reply_cancel_requested(struct http_resp *rs, const struct store_job *job)
{
    json_t *o = job_json(job);

    json_object_set_new(o, "cancel_requested", json_true());
    return http_reply_json(rs, 202, o);
}

int h_job_cancel(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct store_job job = {0};
    struct store_err e = {0};
    char reason[160];
    int rc;

    switch (jobs_cancel(rq->app, http_param(rq, "id"), api_owner_of(who), who->name,
                        &job, &e)) {
    case JOBS_CANCEL_REQUESTED:
        rc = reply_cancel_requested(rs, &job);
        break;
    case JOBS_CANCELLED:
        rc = http_reply_json(rs, 200, job_json(&job));
        break;
    case JOBS_ALREADY_ENDED:
        snprintf(reason, sizeof reason, "job %s already ended (%s)", job.id,
                 store_job_state_name(job.state));
        rc = http_reply_problem(rs, 409, NULL, reason, NULL);
        break;
    default:
        rc = api_reply_store(rs, &e, "no such job");
        break;
    }
    store_job_clear(&job);
    return rc;
}

int h_job_delete(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct store_err e = {0};

    if (jobs_delete(rq->app, http_param(rq, "id"), api_owner_of(who), &e) < 0)
        return api_reply_store(rs, &e, "no such job");
    return http_reply_text(rs, 204, "text/plain", "", 0);
}

int h_job_retry(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct store_job job = {0};
    struct store_err e = {0};
    struct spec_problem sp = {0};
    long long queued = 0;
    enum jobs_outcome outcome;

    if (api_work_refused(rq, rs, who))
        return 0;
    outcome = jobs_retry(rq->app, http_param(rq, "id"), api_owner_of(who), &job, &sp, &queued,
                         &e);
    if (outcome == JOBS_STORE_FAILED && e.code == STORE_ENOTFOUND) {
        store_job_clear(&job);
        return api_reply_store(rs, &e, "no such job");
    }
    return reply_submitted(rs, rq->app, outcome, &job, queued, &e, &sp);
}

#define LOG_MAX ((size_t)4 << 20)       /* the log's last 4 MiB */

int h_job_log(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct store_err e = {0};
    char *text;
    size_t len;
    int truncated, rc;

    if (jobs_log(rq->app, http_param(rq, "id"), api_owner_of(who), LOG_MAX, &text, &len,
                 &truncated, &e) < 0)
        return api_reply_store(rs, &e, e.msg[0] ? e.msg : "no such job");
    if (truncated)
        http_reply_header(rs, "X-Log-Truncated", "the first bytes are left out: the last 4 MiB");
    rc = http_reply_text(rs, 200, "text/plain; charset=utf-8", text, len);
    free(text);
    return rc;
}

int h_job_patch(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    json_t *patch = http_body_json(rq, rs);
    struct store_job job = {0};
    struct store_err e = {0};
    struct spec_problem sp;
    int rc;

    if (!patch)
        return 0;
    switch (jobs_relabel(a, http_param(rq, "id"), api_owner_of(who), patch, &job, &sp, &e)) {
    case JOBS_UPDATED:
        rc = http_reply_json(rs, 200, job_json(&job));
        break;
    case JOBS_INVALID:
        rc = api_reply_spec_problem(rs, "Invalid job", &sp);
        break;
    case JOBS_STORE_FAILED:
        rc = api_reply_store(rs, &e, "no such job");
        break;
    default:
        rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        break;
    }
    store_job_clear(&job);
    json_decref(patch);
    return rc;
}
