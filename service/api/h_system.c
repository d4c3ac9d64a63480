/* Health, readiness, the API contract and the Prometheus exposition. */
#define _GNU_SOURCE
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "describe.h"
#include "jobspec.h"
#include "outcome.h"
#include "pagecache.h"
#include "shares.h"

extern const char openapi_yaml[];
extern const size_t openapi_yaml_len;

int h_livez(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    (void)rq;
    (void)who;
    return http_reply_json(rs, 200, json_pack("{s:s}", "status", "ok"));
}

int h_readyz(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    struct store *st = app_reader(a);
    struct store_err e = {0};
    int db_ok = store_ping(st, &e) == 0;
    int exe_ok = access(a->cfg.exe, X_OK) == 0;

    (void)who;
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

/* Every list of names the API takes or gives, from the tables they are
 * kept in, so that clients (the dashboard's menus) need no copy. */
int h_vocabulary(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    json_t *backends = json_array(), *stops = json_array(), *states = json_array();
    json_t *waits = json_array(), *fields = json_array(), *outcomes = json_array();

    (void)who;
    for (int b = 0; backends && b < JOBSPEC_BACKEND_COUNT; b++)
        json_array_append_new(
            backends, json_pack("{s:s, s:b}", "name", jobspec_backend_name((enum jobspec_backend)b),
                                "enabled", b != JOBSPEC_BACKEND_MPI || a->cfg.mpi_hostfile[0]));
    for (int s = 0; stops && s < STORE_STOP_COUNT; s++)
        json_array_append_new(stops, json_pack("{s:s, s:s}", "name",
                                               store_stop_name((enum store_stop)s), "meaning",
                                               store_stop_meaning((enum store_stop)s)));
    for (int r = 0; waits && r < QUEUE_REASON_COUNT; r++)
        json_array_append_new(waits, json_pack("{s:s, s:s}", "name",
                                               queue_reason_name((enum queue_reason)r),
                                               "meaning",
                                               queue_reason_meaning((enum queue_reason)r)));
    for (int f = 0; fields && f < STORE_F_COUNT; f++) {
        enum store_field_kind kind = store_job_field_kind((enum store_job_field)f);
        json_t *ops = json_array();

        for (int o = 0; ops && o < STORE_OP_COUNT; o++)
            if (o == STORE_OP_EQ || (o == STORE_OP_NE && kind == STORE_FIELD_TEXT) ||
                kind == STORE_FIELD_NUMBER)
                json_array_append_new(ops, json_string(store_filter_op_suffix(
                                               (enum store_filter_op)o)));
        json_array_append_new(
            fields, json_pack("{s:s, s:s, s:o*, s:s}", "name",
                              store_job_field_name((enum store_job_field)f), "kind",
                              kind == STORE_FIELD_NUMBER ? "number"
                              : kind == STORE_FIELD_BOOL ? "boolean"
                                                         : "text",
                              "suffixes", ops, "meaning",
                              store_job_field_meaning((enum store_job_field)f)));
    }
    for (int o = 0; outcomes && o < OUTCOME_COUNT; o++)
        json_array_append_new(outcomes, json_pack("{s:s, s:s, s:i}", "name",
                                                  outcome_name((enum outcome)o), "meaning",
                                                  outcome_meaning((enum outcome)o),
                                                  "exit_status",
                                                  outcome_exit_status((enum outcome)o)));
    for (int s = 0; states && s < STORE_JOB_STATE_COUNT; s++)
        json_array_append_new(states, json_pack("{s:s, s:b}", "name",
                                                store_job_state_name((enum store_job_state)s),
                                                "final",
                                                store_job_state_is_final((enum store_job_state)s)));
    return http_reply_json(rs, 200,
                           json_pack("{s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*, s:o*}",
                                     "algorithms", describe_algorithms(), "compressors",
                                     describe_compressors(), "losses", describe_losses(),
                                     "splits", describe_splits(), "eclk_rules",
                                     describe_eclk_rules(), "backends", backends,
                                     "stop_reasons", stops, "queue_reasons", waits,
                                     "job_fields", fields, "outcomes", outcomes,
                                     "states", states));
}

int h_openapi(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    (void)rq;
    (void)who;
    return http_reply_text(rs, 200, "application/yaml", openapi_yaml, openapi_yaml_len);
}

int h_prometheus(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    char *http_text = http_metrics_text(a->http);
    struct store *st = app_reader(a);
    struct store_counts c = {0};
    struct store_err e = {0};
    char *out = NULL, states[512] = "";
    int64_t by_state[STORE_JOB_STATE_COUNT];
    unsigned long long hits, misses;
    int rc;

    (void)who;
    store_counts(st, NULL, &c, &e);
    store_job_state_counts(st, by_state, &e);
    app_reader_done(a, st);
    pagecache_counts(a->pages, &hits, &misses);
    /* Every state, so that a job's move from one to another shows. */
    for (int i = 0, o = 0; i < STORE_JOB_STATE_COUNT; i++) {
        int n = snprintf(states + o, sizeof states - (size_t)o, "ecopt_jobs{state=\"%s\"} %lld\n",
                         store_job_state_name((enum store_job_state)i),
                         (long long)by_state[i]);
        if (n > 0 && (size_t)(o + n) < sizeof states)
            o += n;
    }
    if (asprintf(&out,
                 "# HELP ecopt_metric_page_cache_total Metric pages served from the cache, "
                 "or not.\n"
                 "# TYPE ecopt_metric_page_cache_total counter\n"
                 "ecopt_metric_page_cache_total{result=\"hit\"} %llu\n"
                 "ecopt_metric_page_cache_total{result=\"miss\"} %llu\n"
                 "# HELP ecopt_jobs Jobs by state.\n# TYPE ecopt_jobs gauge\n%s"
                 "# HELP ecopt_running_workers Workers of running jobs.\n"
                 "# TYPE ecopt_running_workers gauge\necopt_running_workers %lld\n"
                 "# HELP ecopt_streams_open Event streams and long-polls held open.\n"
                 "# TYPE ecopt_streams_open gauge\necopt_streams_open %u\n%s",
                 hits, misses, states, (long long)c.running_workers, shares_open(a->shares),
                 http_text ? http_text : "") < 0)
        out = NULL;
    free(http_text);
    if (!out)
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    rc = http_reply_text(rs, 200, "text/plain; version=0.0.4", out, strlen(out));
    free(out);
    return rc;
}

/* The problem kinds of their own (their titles give their types). */
static const struct {
    const char *kind, *text;
} problem_kinds[] = {
    {"invalid-job",
     "Invalid job (422): the job spec parsed, but a field breaks a rule of the spec or of\n"
     "this server. `errors` lists each {field, detail}; `detail` is the first of them.\n"
     "When a server limit was broken, `limit` names it and `value` is its value\n"
     "(max_workers_per_job, max_rounds, max_seconds, ...).\n"},
    {"invalid-experiment",
     "Invalid experiment (422): the experiment's name, base or a variant breaks a rule.\n"
     "`errors` lists {field, detail} with the variant named (variants[2].compressor.k).\n"},
    {"invalid-dataset",
     "Invalid dataset (422): the uploaded file is not a LibSVM file the engine reads, or\n"
     "breaks a limit of the upload validator. `detail` names the line and the rule;\n"
     "`dataset` is the name it was uploaded as.\n"},
};

int h_problem_type(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    const char *kind = http_param(rq, "kind");

    (void)who;
    for (size_t i = 0; i < sizeof problem_kinds / sizeof problem_kinds[0]; i++)
        if (strcmp(kind, problem_kinds[i].kind) == 0)
            return http_reply_text(rs, 200, "text/plain; charset=utf-8", problem_kinds[i].text,
                                   strlen(problem_kinds[i].text));
    return http_reply_problem(rs, 404, NULL, "no such problem type", NULL);
}
