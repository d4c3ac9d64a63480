/*
 * The REST surface: the only floor that sees an HTTP request. Every
 * handler has one signature and is listed in the route table (routes.c)
 * with whether it needs a token; the table authenticates before the
 * handler runs, so a handler is given who is asking and never checks
 * tokens itself. Handlers decode, call service/core, and encode; the
 * helpers below are what they share.
 *
 * Errors (docs/architecture.md, "Errors"): a handler returns what the
 * http_reply_* call that answered returned; every error is problem+json,
 * and the api_reply_* helpers map the floor below's errors to statuses.
 */
#ifndef ECOPT_API_H
#define ECOPT_API_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "app.h"
#include "http.h"
#include "jobs.h"
#include "store.h"

/* who is the token presented (never NULL on a route that needs one; a
   fixed admin identity with auth off; NULL on public routes). */
typedef int (*api_handler_fn)(struct http_req *rq, struct http_resp *rs,
                              const struct token *who);

#define API_PUBLIC 0
#define API_TOKEN 1
#define API_METRICS 2           /* a token, unless --metrics-public */

struct api_route {
    const char *method;
    const char *pattern;
    api_handler_fn handler;
    unsigned flags;             /* HTTP_JSON_BODY, HTTP_STREAM_BODY */
    int auth;                   /* API_TOKEN, API_PUBLIC or API_METRICS */
    const char *query;          /* the query parameters it takes, comma-
                                   separated; NULL: none. Others are 400,
                                   but after a last "*" the handler's to
                                   judge (the job list's filters) */
};

/* The route table: the service's whole surface (api/openapi.yaml). */
extern const struct api_route api_routes[];
extern const size_t api_nroutes;

/* The table in the form http_start takes: every route's handler is the
   dispatcher, which authenticates and calls the route's own. out needs
   api_nroutes entries. */
void api_http_routes(struct http_route *out);
/* http_config's admit: the token of a route that needs one, checked on
   the headers (401 or 429 before any byte of a body is read); the
   dispatcher then takes rq->principal as who is asking. */
int api_admit(struct http_req *rq, struct http_resp *rs);

/* Jobs an admin may see are everyone's: owner NULL. */
const char *api_owner_of(const struct token *t);

/* A limit met: status (413 a quota, 507 the disk floor), the sentence,
   and the limit's name and value as members "limit" and "value". */
int api_reply_limit(struct http_resp *rs, int status, const char *detail,
                    const char *limit, uint64_t value);

/* Whether new work (a job, an experiment, a retry) is refused now: 1
   with 507 replied while the disk is below its floor (min_free_disk), or
   413 when the token's jobs hold their quota of metric rows
   (quota_metric_rows); else 0. */
int api_work_refused(struct http_req *rq, struct http_resp *rs, const struct token *who);

/* Store failures as problems: 404, 409, 503 for a full disk, else 500. */
int api_reply_store(struct http_resp *rs, const struct store_err *e, const char *what);

/*
 * The one builder of a 422: title (NULL: the status phrase), a detail
 * sentence, errors (an array of {field, detail}, or NULL) and the other
 * members of extra (may be NULL); both are consumed.
 */
int api_reply_invalid(struct http_resp *rs, const char *title, const char *detail,
                      json_t *errors, json_t *extra);
/* A 422 for one spec problem: detail "field: sentence", errors [{field,
   detail}], and the limit and its value when a server limit was broken. */
int api_reply_spec_problem(struct http_resp *rs, const char *title,
                           const struct spec_problem *sp);

/* A query parameter that is not what it must be: the 400's content. */
struct query_problem {
    const char *param;            /* static: the parameter's name */
    long long min, max;
    char detail[160];
};
/* An integer query parameter within lo..hi (dflt when absent) into *out,
   or -1 with the parameter, its range and a sentence in *qp. Pure. */
int api_query_int(const struct http_req *rq, const char *name, long long lo,
                  long long hi, long long dflt, long long *out,
                  struct query_problem *qp);
int api_reply_query(struct http_resp *rs, const struct query_problem *qp);
/* api_query_int, or the 400 replied and -1. */
int api_query_uint(struct http_req *rq, struct http_resp *rs, const char *name,
                   long long lo, long long hi, long long dflt, long long *out);

/*
 * A cached document (NULL: none) sent as it is when the token may see it:
 * 1 with *rc set. 0 when the request goes the usual way; for another
 * owner's job that ends in the 404 any unknown id gets. Frees cached.
 */
int api_reply_cached(struct http_resp *rs, const struct token *t, char *cached,
                     size_t len, const char *owner, int *rc);

/* Loads the job of the {id} parameter the caller may see, or replies 404
   and returns -1. */
int api_load_job(struct http_req *rq, struct http_resp *rs, const struct token *t,
                 struct store_job *job);

/* The jobs=ID,ID,... query of the compare routes, 1..API_COMPARE_MAX
   ids; -1 with a 400 replied. */
#define API_COMPARE_MAX 32
int api_job_ids(struct http_req *rq, struct http_resp *rs,
                char ids[API_COMPARE_MAX][STORE_ID_LEN + 1], size_t *n);

/* A job as the API shows it (with its stored documents). New reference. */
json_t *api_job_json(const struct store_job *j);
/*
 * A job's name in a plot's legend ("eclk, topk k=5 x4" for a run of a
 * tuned experiment) and its variant's (the same less the multiplier),
 * which curves of one colour share (plots.c).
 */
void api_job_label(const struct store_job *job, char *out, size_t len, char *variant,
                   size_t vlen);
/* For eclk, what ran and how it ended, for tables: the rule, guard and
 * step source of its resolved parameters and its end record (delta_eff
 * range, inflation, restarts and their rounds; absent before it ends);
 * null for other algorithms. */
json_t *api_eclk_summary(const struct store_job *j);

/*
 * The metrics route's cursor, from its query: after (-1..2^63-1, default
 * -1), limit (1..10000, default 1000), every (1..10^9, default 1),
 * max_points (2..10000, or 0 when absent) and wait (0..60 s). Pure, for
 * the handler and the fuzzer: 0, or -1 with the first bad one in *qp.
 */
struct metrics_cursor {
    long long after, limit, every, max_points, wait;
};
int metrics_cursor_parse(const struct http_req *rq, struct metrics_cursor *c,
                         struct query_problem *qp);
/* With max_points, fits the count rows after the cursor into max_points:
 * sets every (count may be anything) and caps limit. */
void metrics_cursor_fit(struct metrics_cursor *c, int64_t count);

/* The handlers, by resource (h_*.c, plots.c, ui.c). */
int h_livez(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_readyz(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_prometheus(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_openapi(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_vocabulary(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_problem_type(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_jobs_create(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_jobs_list(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_get(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_cancel(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_delete(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_retry(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_patch(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_log(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_metrics(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_events(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_job_plot(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_experiments_create(struct http_req *rq, struct http_resp *rs,
                         const struct token *who);
int h_experiment_get(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_experiments_list(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_compare(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_compare_plot(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_experiment_plot(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_datasets_list(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_dataset_delete(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_dataset_patch(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_dataset_get(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_dataset_upload(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_ui_index(struct http_req *rq, struct http_resp *rs, const struct token *who);
int h_ui_file(struct http_req *rq, struct http_resp *rs, const struct token *who);

#endif
