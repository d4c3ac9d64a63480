/*
 * Experiments: several algorithm/compressor variants of one problem (same
 * data, split, seed and target), created together and compared in one
 * table of rounds and bits to the target.
 */
#define _GNU_SOURCE
#include "app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "jobspec.h"

#define MAX_VARIANTS 32

/* Keys a variant may set: how it runs, never what it solves. */
static const char *const variant_keys[] = {
    "algorithm", "compressor", "batch", "p", "step_size", "step_multiplier",
    "name", "labels", "backend", NULL,
};

static int variant_key_ok(const char *key)
{
    for (int i = 0; variant_keys[i]; i++)
        if (strcmp(key, variant_keys[i]) == 0)
            return 1;
    return 0;
}

static int reject(struct http_resp *rs, const char *field, const char *detail)
{
    char msg[512];

    snprintf(msg, sizeof msg, "%s: %s", field, detail);
    return http_reply_problem(rs, 422, "Invalid experiment", msg,
                              json_pack("{s:[{s:s, s:s}]}", "errors", "field", field,
                                        "detail", detail));
}

/*
 * POST /v1/experiments {"name": ..., "base": JOBSPEC, "variants": [{...}]}:
 * each variant's keys replace the base's; every resulting spec must pass
 * exactly what POST /v1/jobs checks, and errors name the variant.
 */
int h_experiments_create(struct http_req *rq, struct http_resp *rs,
                         const struct token *t)
{
    struct app *a = rq->app;
    json_t *doc = http_body_json(rq, rs), *base, *variants, *name;
    struct store_job_new in[MAX_VARIANTS];
    char *spec_text[MAX_VARIANTS] = {0}, *labels_text[MAX_VARIANTS] = {0};
    struct jobspec *specs = NULL;
    struct store_experiment x = {0};
    struct store_experiment_new xn = {0};
    struct store_err e = {0};
    char *xspec = NULL, field[160], location[64];
    size_t n = 0, key_len;
    const char *key;
    json_t *value;
    int rc = 0;

    if (!doc)
        return 0;
    base = json_object_get(doc, "base");
    variants = json_object_get(doc, "variants");
    name = json_object_get(doc, "name");
    json_object_foreach(doc, key, value) {
        if (strcmp(key, "base") && strcmp(key, "variants") && strcmp(key, "name")) {
            snprintf(field, sizeof field, "%s", key);
            rc = reject(rs, field, "unknown key; allowed keys are: name, base, variants");
            goto out;
        }
    }
    (void)key_len;
    if (!json_is_object(base)) {
        rc = reject(rs, "base", "must be a job spec object (as for POST /v1/jobs)");
        goto out;
    }
    if (!json_is_array(variants) || json_array_size(variants) < 1 ||
        json_array_size(variants) > MAX_VARIANTS) {
        rc = reject(rs, "variants", "must be an array of 1..32 objects");
        goto out;
    }
    if (name && !json_is_string(name)) {
        rc = reject(rs, "name", "must be a string");
        goto out;
    }
    n = json_array_size(variants);
    if (!(specs = calloc(n, sizeof *specs))) {
        rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(variants, i), *merged;
        struct jobspec_errors errs = {0};
        struct spec_problem sp;

        if (!json_is_object(v)) {
            snprintf(field, sizeof field, "variants[%zu]", i);
            rc = reject(rs, field, "must be an object");
            goto out;
        }
        json_object_foreach(v, key, value) {
            if (!variant_key_ok(key)) {
                snprintf(field, sizeof field, "variants[%zu].%s", i, key);
                rc = reject(rs, field, "a variant sets only how it runs: algorithm, "
                            "compressor, batch, p, step_size, step_multiplier, name, "
                            "labels, backend; the problem comes from base");
                goto out;
            }
        }
        merged = json_deep_copy(base);
        json_object_update(merged, v);
        if (jobspec_from_json(merged, &specs[i], &errs) < 0) {
            json_decref(merged);
            snprintf(field, sizeof field, "variants[%zu].%s", i,
                     errs.count ? errs.item[0].field : "");
            rc = reject(rs, field, errs.count ? errs.item[0].detail : "invalid");
            goto out;
        }
        json_decref(merged);
        if (app_check_spec(a, &specs[i], &sp) < 0) {
            snprintf(field, sizeof field, "variants[%zu].%s", i, sp.field);
            rc = reject(rs, field, sp.detail);
            goto out;
        }
        if (app_job_new(&specs[i], t->name, &in[i], &spec_text[i], &labels_text[i]) < 0) {
            rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
            goto out;
        }
    }
    xspec = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    xn.owner = t->name;
    xn.name = json_string_value(name);
    xn.spec = xspec;
    pthread_mutex_lock(&a->wlock);
    rc = store_experiment_create(a->writer, &xn, in, n, &x, NULL, &e);
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0) {
        rc = store_problem(rs, &e, "experiment not created");
        goto out;
    }
    sched_wake(a->sched);
    snprintf(location, sizeof location, "/v1/experiments/%s", x.id);
    http_reply_header(rs, "Location", location);
    rc = h_experiment_reply(rq, rs, a, x.id, NULL, 201);
out:
    for (size_t i = 0; i < n; i++) {
        free(spec_text[i]);
        free(labels_text[i]);
    }
    free(specs);
    free(xspec);
    store_experiment_clear(&x);
    json_decref(doc);
    return rc;
}

/*
 * The comparison: per job, whether it reached its target and, if so, the
 * rounds and bits it took (its last row, since a job stops at its
 * target), else its final relative gap.
 */
int h_experiment_reply(struct http_req *rq, struct http_resp *rs,
                       struct app *a, const char *id, const char *owner,
                       int status)
{
    struct store *st = app_reader(a);
    struct store_experiment x = {0};
    struct store_job *jobs = NULL;
    struct store_err e = {0};
    size_t n = 0;
    json_t *table, *list, *spec;
    int rc;

    (void)rq;
    rc = store_experiment_get(st, id, owner, &x, &e);
    if (rc == 0)
        rc = store_experiment_list_jobs(st, id, owner, &jobs, &n, &e);
    if (rc < 0) {
        app_reader_done(a, st);
        store_experiment_clear(&x);
        return store_problem(rs, &e, "no such experiment");
    }
    table = json_array();
    list = json_array();
    for (size_t i = 0; i < n; i++) {
        ec_metric last;
        int have = store_metrics_last(st, jobs[i].id, &last, &e) == 1;
        json_t *jspec = json_loads(jobs[i].spec, 0, NULL);
        double target = json_number_value(json_object_get(jspec, "target"));
        int reached = have && isfinite(last.rel_gap) && last.rel_gap <= target;
        json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:b}", "job", jobs[i].id,
                                "algorithm", jobs[i].algorithm, "compressor",
                                jobs[i].compressor, "state",
                                store_job_state_name(jobs[i].state), "reached", reached);
        json_t *comp = json_object_get(jspec, "compressor");
        json_object_set(row, "compressor_spec", comp ? comp : json_null());
        json_object_set_new(row, "target", describe_real(target));
        json_object_set_new(row, "rounds_to_target",
                            reached ? json_integer((json_int_t)last.round) : json_null());
        json_object_set_new(row, "bits_up_to_target",
                            reached ? describe_real(last.bits_up) : json_null());
        json_object_set_new(row, "seconds_to_target",
                            reached ? describe_real(last.seconds) : json_null());
        json_object_set_new(row, "rounds", have ? json_integer((json_int_t)last.round)
                                                : json_null());
        json_object_set_new(row, "final_rel_gap", have ? describe_real(last.rel_gap)
                                                       : json_null());
        json_array_append_new(table, row);
        json_array_append_new(list, app_job_json(&jobs[i]));
        json_decref(jspec);
    }
    app_reader_done(a, st);
    spec = json_loads(x.spec, 0, NULL);
    rc = http_reply_json(rs, status,
                         json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:o}", "id", x.id,
                                   "owner", x.owner, "name", x.name ? x.name : "",
                                   "created_at", (json_int_t)x.created_at, "spec",
                                   spec ? spec : json_null(), "comparison", table,
                                   "jobs", list));
    store_jobs_free(jobs, n);
    store_experiment_clear(&x);
    return rc;
}
