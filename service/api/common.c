/* What the handlers share: owners, store failures, 422s, query integers. */
#define _GNU_SOURCE
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

const char *api_owner_of(const struct token *t)
{
    return t->admin ? NULL : t->name;
}

int api_reply_store(struct http_resp *rs, const struct store_err *e, const char *what)
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

int api_reply_invalid(struct http_resp *rs, const char *title, const char *detail,
                      json_t *errors, json_t *extra)
{
    json_t *members = NULL;

    if (errors) {
        members = json_object();
        json_object_set_new(members, "errors", errors);
        if (extra) {
            json_object_update(members, extra);
            json_decref(extra);
        }
    } else {
        members = extra;
    }
    return http_reply_problem(rs, 422, title, detail, members);
}

int api_reply_spec_problem(struct http_resp *rs, const char *title,
                           const struct spec_problem *sp)
{
    json_t *errors = json_pack("[{s:s, s:s}]", "field", sp->field, "detail", sp->detail);
    json_t *extra = NULL;
    char msg[512];

    if (sp->limit)
        extra = json_pack("{s:s, s:f}", "limit", sp->limit, "value", sp->value);
    snprintf(msg, sizeof msg, "%s: %s", sp->field, sp->detail);
    return api_reply_invalid(rs, title, msg, errors, extra);
}

int api_query_int(const struct http_req *rq, const char *name, long long lo,
                  long long hi, long long dflt, long long *out,
                  struct query_problem *qp)
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

int api_reply_query(struct http_resp *rs, const struct query_problem *qp)
{
    return http_reply_problem(rs, 400, NULL, qp->detail,
                              json_pack("{s:s, s:I, s:I}", "parameter", qp->param,
                                        "min", (json_int_t)qp->min, "max",
                                        (json_int_t)qp->max));
}

int api_query_uint(struct http_req *rq, struct http_resp *rs, const char *name,
                   long long lo, long long hi, long long dflt, long long *out)
{
    struct query_problem qp;

    if (api_query_int(rq, name, lo, hi, dflt, out, &qp) < 0) {
        api_reply_query(rs, &qp);
        return -1;
    }
    return 0;
}

/*
 * A cached document (NULL: none) sent as it is when the token may see it:
 * 1 with *rc set. 0 when the request goes the usual way; for another
 * owner's job that ends in the 404 any unknown id gets. Frees cached.
 */
int api_reply_cached(struct http_resp *rs, const struct token *t, char *cached,
                        size_t len, const char *owner, int *rc)
{
    int mine = cached && (t->admin || strcmp(owner, t->name) == 0);

    if (mine)
        *rc = http_reply_text(rs, 200, "application/json", cached, len);
    free(cached);
    return mine;
}

/* Loads the job of the {id} parameter the caller may see, or replies 404. */
int api_load_job(struct http_req *rq, struct http_resp *rs,
                 const struct token *t, struct store_job *job)
{
    struct store_err e = {0};

    if (jobs_get(rq->app, http_param(rq, "id"), api_owner_of(t), job, &e) < 0) {
        api_reply_store(rs, &e, "no such job");
        return -1;
    }
    return 0;
}


int api_job_ids(struct http_req *rq, struct http_resp *rs,
                char ids[API_COMPARE_MAX][STORE_ID_LEN + 1], size_t *n)
{
    const char *q = http_query(rq, "jobs");
    const char *p = q;

    *n = 0;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if (*n == API_COMPARE_MAX)
            return http_reply_problem(rs, 400, NULL,
                                      "jobs: at most 32 job ids may be compared",
                                      json_pack("{s:s, s:i}", "parameter", "jobs", "max",
                                                API_COMPARE_MAX)), -1;
        if (len == 0 || len > STORE_ID_LEN)
            return http_reply_problem(rs, 400, NULL,
                                      "jobs: a comma-separated list of job ids "
                                      "(GET /v1/jobs lists them)",
                                      json_pack("{s:s}", "parameter", "jobs")), -1;
        memcpy(ids[*n], p, len);
        ids[*n][len] = '\0';
        (*n)++;
        p = end ? end + 1 : NULL;
    }
    if (*n < 1)
        return http_reply_problem(rs, 400, NULL,
                                  "jobs is required: the ids of 1..32 jobs, "
                                  "comma-separated",
                                  json_pack("{s:s}", "parameter", "jobs")), -1;
    return 0;
}

int api_reply_limit(struct http_resp *rs, int status, const char *detail,
                    const char *limit, uint64_t value)
{
    return http_reply_problem(rs, status, NULL, detail,
                              json_pack("{s:s, s:I}", "limit", limit, "value",
                                        (json_int_t)value));
}

int api_work_refused(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    struct catalog_failure f;
    struct store_err e = {0};
    struct store *st;
    int64_t rows = 0;
    char detail[300];
    int rc;

    if (catalog_disk_check(a, &f) < 0) {
        http_reply_header(rs, "Retry-After", "60");
        api_reply_limit(rs, 507, f.detail, f.what, f.value);
        return 1;
    }
    st = app_reader(a);
    rc = store_metrics_count_owner(st, who->name, &rows, &e);
    app_reader_done(a, st);
    if (rc == 0 && (uint64_t)rows >= a->cfg.quota_metric_rows) {
        snprintf(detail, sizeof detail, "the token's jobs hold %lld metric rows, its quota "
                 "(quota_metric_rows %llu); delete ended jobs (DELETE /v1/jobs/ID) to "
                 "free some", (long long)rows, (unsigned long long)a->cfg.quota_metric_rows);
        api_reply_limit(rs, 413, detail, "quota_metric_rows", a->cfg.quota_metric_rows);
        return 1;
    }
    return 0;
}
