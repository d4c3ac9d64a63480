/* The experiments routes: create one, and read its comparison. */
#define _GNU_SOURCE
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "experiments.h"

/* The experiment and its comparison table, with status. */
static int reply_experiment(struct http_resp *rs, struct app *a, const char *id,
                            const char *owner, int status)
{
    struct experiment_view v;
    struct store_err e = {0};
    json_t *table, *list, *spec;
    int rc;

    if (experiments_view(a, id, owner, &v, &e) < 0) {
        experiment_view_clear(&v);
        return api_reply_store(rs, &e, "no such experiment");
    }
    table = json_array();
    list = json_array();
    for (size_t i = 0; i < v.n; i++) {
        const struct experiment_row *r = &v.rows[i];
        const struct store_job *job = r->job;
        json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:b}", "job", job->id, "algorithm",
                                job->algorithm, "compressor", job->compressor, "state",
                                store_job_state_name(job->state), "reached", r->reached);
        json_t *comp = json_object_get(r->spec, "compressor");

        json_object_set(row, "compressor_spec", comp ? comp : json_null());
        json_object_set_new(row, "target", describe_real(r->target));
        json_object_set_new(row, "rounds_to_target",
                            r->reached ? json_integer((json_int_t)r->last.round)
                                       : json_null());
        json_object_set_new(row, "bits_up_to_target",
                            r->reached ? describe_real(r->last.bits_up) : json_null());
        json_object_set_new(row, "seconds_to_target",
                            r->reached ? describe_real(r->last.seconds) : json_null());
        json_object_set_new(row, "rounds", r->have ? json_integer((json_int_t)r->last.round)
                                                   : json_null());
        json_object_set_new(row, "final_rel_gap", r->have ? describe_real(r->last.rel_gap)
                                                          : json_null());
        json_array_append_new(table, row);
        json_array_append_new(list, api_job_json(job));
    }
    spec = json_loads(v.x.spec, 0, NULL);
    rc = http_reply_json(rs, status,
                         json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:o}", "id", v.x.id,
                                   "owner", v.x.owner, "name", v.x.name ? v.x.name : "",
                                   "created_at", (json_int_t)v.x.created_at, "spec",
                                   spec ? spec : json_null(), "comparison", table,
                                   "jobs", list));
    experiment_view_clear(&v);
    return rc;
}

int h_experiments_create(struct http_req *rq, struct http_resp *rs,
                         const struct token *who)
{
    struct app *a = rq->app;
    json_t *doc = http_body_json(rq, rs);
    struct store_experiment x = {0};
    struct store_err e = {0};
    struct spec_problem sp;
    char location[64];
    int rc;

    if (!doc)
        return 0;
    switch (experiments_create(a, who->name, doc, &x, &sp, &e)) {
    case EXPERIMENTS_INVALID:
        rc = api_reply_spec_problem(rs, "Invalid experiment", &sp);
        break;
    case EXPERIMENTS_NO_MEMORY:
        rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        break;
    case EXPERIMENTS_STORE_FAILED:
        rc = api_reply_store(rs, &e, "experiment not created");
        break;
    default:
        snprintf(location, sizeof location, "/v1/experiments/%s", x.id);
        http_reply_header(rs, "Location", location);
        rc = reply_experiment(rs, a, x.id, NULL, 201);
        break;
    }
    store_experiment_clear(&x);
    json_decref(doc);
    return rc;
}

int h_experiment_get(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    return reply_experiment(rs, rq->app, http_param(rq, "id"), api_owner_of(who), 200);
}
