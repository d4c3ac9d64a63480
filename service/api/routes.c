/*
 * The route table, the service's whole surface (the test checks it against
 * api/openapi.yaml), and the one dispatcher every route goes through: it
 * finds the route, authenticates when the route needs a token, and calls
 * the route's handler with who is asking.
 */
#define _GNU_SOURCE
#include "api.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

const struct api_route api_routes[] = {
    {"GET", "/livez", h_livez, 0, API_PUBLIC, NULL},
    {"GET", "/readyz", h_readyz, 0, API_PUBLIC, NULL},
    {"GET", "/metrics", h_prometheus, 0, API_METRICS, NULL},
    {"GET", "/openapi.yaml", h_openapi, 0, API_PUBLIC, NULL},
    {"GET", "/problems/{kind}", h_problem_type, 0, API_PUBLIC, NULL},
    {"GET", "/", h_ui_index, 0, API_PUBLIC, NULL},
    {"GET", "/ui/{file}", h_ui_file, 0, API_PUBLIC, NULL},
    {"POST", "/v1/jobs", h_jobs_create, HTTP_JSON_BODY, API_TOKEN, NULL},
    {"GET", "/v1/jobs", h_jobs_list, 0, API_TOKEN,
      "state,algorithm,dataset,label,stop_reason,cursor,limit,*"},
    {"GET", "/v1/jobs/{id}", h_job_get, 0, API_TOKEN, NULL},
    {"DELETE", "/v1/jobs/{id}", h_job_delete, 0, API_TOKEN, NULL},
    {"PATCH", "/v1/jobs/{id}", h_job_patch, HTTP_JSON_BODY, API_TOKEN, NULL},
    {"POST", "/v1/jobs/{id}/cancel", h_job_cancel, 0, API_TOKEN, NULL},
    {"POST", "/v1/jobs/{id}/retry", h_job_retry, 0, API_TOKEN, NULL},
    {"GET", "/v1/jobs/{id}/log", h_job_log, 0, API_TOKEN, NULL},
    {"GET", "/v1/jobs/{id}/metrics", h_job_metrics, 0, API_TOKEN,
      "after,limit,every,max_points,wait,format"},
    {"GET", "/v1/jobs/{id}/events", h_job_events, 0, API_TOKEN, "after"},
    {"GET", "/v1/jobs/{id}/plot.svg", h_job_plot, 0, API_TOKEN, "x,max_points"},
    {"POST", "/v1/experiments", h_experiments_create, HTTP_JSON_BODY, API_TOKEN, NULL},
    {"GET", "/v1/experiments", h_experiments_list, 0, API_TOKEN, "cursor,limit"},
    {"GET", "/v1/experiments/{id}", h_experiment_get, 0, API_TOKEN, NULL},
    {"GET", "/v1/experiments/{id}/plot.svg", h_experiment_plot, 0, API_TOKEN,
      "x,max_points"},
    {"GET", "/v1/compare", h_compare, 0, API_TOKEN, "jobs"},
    {"GET", "/v1/compare/plot.svg", h_compare_plot, 0, API_TOKEN, "jobs,x,max_points"},
    {"GET", "/v1/datasets", h_datasets_list, 0, API_TOKEN, NULL},
    {"GET", "/v1/vocabulary", h_vocabulary, 0, API_TOKEN, NULL},
    {"POST", "/v1/datasets", h_dataset_upload, HTTP_STREAM_BODY, API_TOKEN,
      "name,replace,shared"},
    {"GET", "/v1/datasets/{name}", h_dataset_get, 0, API_TOKEN, NULL},
    {"DELETE", "/v1/datasets/{name}", h_dataset_delete, 0, API_TOKEN, NULL},
    {"PATCH", "/v1/datasets/{name}", h_dataset_patch, HTTP_JSON_BODY, API_TOKEN, NULL},
};
const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];

/*
 * Who is asking: the token, or NULL with a 401 already replied (or a 429,
 * to an address whose wrong tokens are past their budget). A token
 * someone holds is taken whatever others sent from the same address.
 */
static const struct token *authenticate(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const struct token *t = auth_check(&a->auth, rq->token);
    char detail[200], retry[32];
    double wait;

    if (t)
        return t;
    /* A wrong token is a failure; a missing one is not. */
    if (rq->token && (wait = auth_failed(&a->auth, rq->client)) > 0) {
        snprintf(retry, sizeof retry, "%.0f", wait + 1);
        snprintf(detail, sizeof detail,
                 "the bearer token is not known, and too many unknown tokens came from "
                 "%s: at most %d per %.0f s (a token someone holds is always taken)",
                 rq->client, AUTH_FAIL_MAX, AUTH_FAIL_WINDOW);
        http_reply_header(rs, "Retry-After", retry);
        http_reply_problem(rs, 429, NULL, detail,
                           json_pack("{s:s, s:i}", "limit", "failed_auth_per_minute",
                                     "value", AUTH_FAIL_MAX));
        return NULL;
    }
    http_reply_header(rs, "WWW-Authenticate", "Bearer");
    http_reply_problem(rs, 401, NULL,
                       rq->token ? "the bearer token is not known"
                                 : "an Authorization: Bearer token is required",
                       NULL);
    return NULL;
}

/* The route the server matched: its method and pattern are the table's. */
static const struct api_route *route_of(const struct http_req *rq)
{
    for (size_t i = 0; i < api_nroutes; i++)
        if (strcmp(api_routes[i].pattern, rq->route) == 0 &&
            strcasecmp(api_routes[i].method, rq->method) == 0)
            return &api_routes[i];
    return NULL;
}

/* 1 when name is one of the comma-separated list (NULL: none), or the
 * list ends in "*" (the handler judges the others). */
static int query_allowed(const char *list, const char *name)
{
    size_t n = strlen(name);

    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);

        if ((len == n && strncmp(p, name, n) == 0) || (len == 1 && *p == '*'))
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* A query parameter the route does not take is a 400 naming it, not a
   silent no-op (a misspelt filter would otherwise list everything). */
static int reply_unknown_query(struct http_resp *rs, const struct api_route *r,
                               const char *name)
{
    char detail[400];

    if (r->query)
        snprintf(detail, sizeof detail,
                 "unknown query parameter '%.64s': %s %s takes %s", name, r->method,
                 r->pattern, r->query);
    else
        snprintf(detail, sizeof detail,
                 "unknown query parameter '%.64s': %s %s takes none", name, r->method,
                 r->pattern);
    return http_reply_problem(rs, 400, NULL, detail,
                              json_pack("{s:s}", "parameter", name));
}

/* /metrics says how busy the server is and whose jobs run: behind the
 * same tokens as the API, unless the operator made it public. */
static int needs_token(const struct api_route *r, const struct http_req *rq)
{
    return r->auth == API_TOKEN ||
           (r->auth == API_METRICS && !((struct app *)rq->app)->cfg.metrics_public);
}

int api_admit(struct http_req *rq, struct http_resp *rs)
{
    const struct api_route *r = route_of(rq);

    if (r && needs_token(r, rq))
        rq->principal = authenticate(rq, rs);
    return 0;
}

static int dispatch(struct http_req *rq, struct http_resp *rs)
{
    const struct api_route *r = route_of(rq);
    const struct token *who = NULL;

    if (!r)
        return http_reply_problem(rs, 500, NULL, "no handler for this route", NULL);
    /* api_admit found who it is on the headers; without it, here. */
    if (needs_token(r, rq) &&
        !(who = rq->principal ? rq->principal : authenticate(rq, rs)))
        return 0;
    for (size_t i = 0; i < rq->nquery; i++)
        if (!query_allowed(r->query, rq->query[i].key))
            return reply_unknown_query(rs, r, rq->query[i].key);
    return r->handler(rq, rs, who);
}

void api_http_routes(struct http_route *out)
{
    for (size_t i = 0; i < api_nroutes; i++) {
        out[i].method = api_routes[i].method;
        out[i].pattern = api_routes[i].pattern;
        out[i].handler = dispatch;
        out[i].flags = api_routes[i].flags;
    }
}
