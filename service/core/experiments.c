/*
 * Experiments (see experiments.h): the variants merged into the base and
 * checked as jobs are, stored as one experiment, and read back with each
 * job's latest row for the comparison.
 */
#define _GNU_SOURCE
#include "experiments.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"
#include "scheduler.h"

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

static enum experiments_outcome invalid(struct spec_problem *sp, const char *field,
                                        const char *detail)
{
    spec_problem_set(sp, field, NULL, 0, "%s", detail);
    return EXPERIMENTS_INVALID;
}

enum experiments_outcome experiments_create(struct app *a, const char *owner,
                                            json_t *doc, struct store_experiment *x,
                                            struct spec_problem *sp,
                                            struct store_err *e)
{
    json_t *base = json_object_get(doc, "base"), *variants = json_object_get(doc, "variants");
    json_t *name = json_object_get(doc, "name"), *value;
    struct store_job_new in[EXPERIMENTS_MAX_VARIANTS];
    char *spec_text[EXPERIMENTS_MAX_VARIANTS] = {0};
    char *labels_text[EXPERIMENTS_MAX_VARIANTS] = {0};
    char versions[EXPERIMENTS_MAX_VARIANTS][65];
    struct jobspec *specs = NULL;
    struct store_experiment_new xn = {0};
    char *xspec = NULL, field[160];
    enum experiments_outcome out = EXPERIMENTS_CREATED;
    size_t n = 0;
    const char *key;

    memset(sp, 0, sizeof *sp);
    json_object_foreach(doc, key, value) {
        if (strcmp(key, "base") && strcmp(key, "variants") && strcmp(key, "name")) {
            snprintf(field, sizeof field, "%s", key);
            return invalid(sp, field, "unknown key; allowed keys are: name, base, variants");
        }
    }
    if (!json_is_object(base))
        return invalid(sp, "base", "must be a job spec object (as for POST /v1/jobs)");
    if (!json_is_array(variants) || json_array_size(variants) < 1 ||
        json_array_size(variants) > EXPERIMENTS_MAX_VARIANTS)
        return invalid(sp, "variants", "must be an array of 1..32 objects");
    if (name && !json_is_string(name))
        return invalid(sp, "name", "must be a string");
    n = json_array_size(variants);
    if (!(specs = calloc(n, sizeof *specs)))
        return EXPERIMENTS_NO_MEMORY;
    for (size_t i = 0; i < n && out == EXPERIMENTS_CREATED; i++) {
        json_t *v = json_array_get(variants, i), *merged;
        struct jobspec_errors errs = {0};
        struct spec_problem vp;

        if (!json_is_object(v)) {
            snprintf(field, sizeof field, "variants[%zu]", i);
            out = invalid(sp, field, "must be an object");
            break;
        }
        json_object_foreach(v, key, value) {
            if (!variant_key_ok(key)) {
                snprintf(field, sizeof field, "variants[%zu].%s", i, key);
                out = invalid(sp, field, "a variant sets only how it runs: algorithm, "
                              "compressor, batch, p, step_size, step_multiplier, name, "
                              "labels, backend; the problem comes from base");
                break;
            }
        }
        if (out != EXPERIMENTS_CREATED)
            break;
        merged = json_deep_copy(base);
        json_object_update(merged, v);
        if (jobspec_from_json(merged, &specs[i], &errs) < 0) {
            json_decref(merged);
            snprintf(field, sizeof field, "variants[%zu].%s", i,
                     errs.count ? errs.item[0].field : "");
            out = invalid(sp, field, errs.count ? errs.item[0].detail : "invalid");
            break;
        }
        json_decref(merged);
        if (jobs_check_spec(a, &specs[i], &vp, versions[i]) < 0) {
            snprintf(field, sizeof field, "variants[%zu].%s", i, vp.field);
            out = invalid(sp, field, vp.detail);
            break;
        }
        if (jobs_row_new(&specs[i], owner, &in[i], &spec_text[i], &labels_text[i]) < 0)
            out = EXPERIMENTS_NO_MEMORY;
        else
            in[i].dataset_sha256 = versions[i];
    }
    if (out == EXPERIMENTS_CREATED) {
        xspec = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
        xn.owner = owner;
        xn.name = json_string_value(name);
        xn.spec = xspec;
        struct store_counts c = {0};

        /* Its variants are queued jobs like any other: all of them count
         * against the owner's queue quota, or none is made. */
        pthread_mutex_lock(&a->wlock);
        if (store_counts(a->writer, owner, &c, e) < 0)
            out = EXPERIMENTS_STORE_FAILED;
        else if (c.owner_queued + n > a->cfg.max_queued_per_token) {
            spec_problem_set(sp, "variants", "max_queued_per_token",
                             a->cfg.max_queued_per_token,
                             "max_queued_per_token: at most %u queued jobs per token; "
                             "you have %lld and the experiment's %zu variants would "
                             "make %lld", a->cfg.max_queued_per_token,
                             (long long)c.owner_queued, n,
                             (long long)c.owner_queued + (long long)n);
            out = EXPERIMENTS_QUEUE_FULL;
        } else if (store_experiment_create(a->writer, &xn, in, n, x, NULL, e) < 0)
            out = EXPERIMENTS_STORE_FAILED;
        pthread_mutex_unlock(&a->wlock);
        if (out == EXPERIMENTS_CREATED)
            sched_wake(a->sched);
    }
    for (size_t i = 0; i < n; i++) {
        free(spec_text[i]);
        free(labels_text[i]);
    }
    free(specs);
    free(xspec);
    return out;
}

void experiment_view_clear(struct experiment_view *v)
{
    for (size_t i = 0; v->rows && i < v->n; i++)
        json_decref(v->rows[i].spec);
    free(v->rows);
    store_jobs_free(v->jobs, v->n);
    store_experiment_clear(&v->x);
    memset(v, 0, sizeof *v);
}

/*
 * Per job, whether it reached its target and, if so, the rounds and bits
 * it took (its last row, since a job stops at its target), else its final
 * relative gap.
 */
/* The rows of v's jobs, read through st. 0 or a STORE_* code. */
static int view_rows(struct store *st, struct experiment_view *v, struct store_err *e)
{
    if (v->n && !(v->rows = calloc(v->n, sizeof *v->rows))) {
        e->code = STORE_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return STORE_ENOMEM;
    }
    for (size_t i = 0; i < v->n; i++) {
        struct experiment_row *r = &v->rows[i];

        r->job = &v->jobs[i];
        r->have = store_metrics_last(st, r->job->id, &r->last, e) == 1;
        r->spec = json_loads(r->job->spec, 0, NULL);
        r->target = json_number_value(json_object_get(r->spec, "target"));
        r->reached = r->have && isfinite(r->last.rel_gap) && r->last.rel_gap <= r->target;
    }
    return 0;
}

int experiments_view(struct app *a, const char *id, const char *owner,
                     struct experiment_view *v, struct store_err *e)
{
    struct store *st = app_reader(a);
    int rc;

    memset(v, 0, sizeof *v);
    rc = store_experiment_get(st, id, owner, &v->x, e);
    if (rc == 0)
        rc = store_experiment_list_jobs(st, id, owner, &v->jobs, &v->n, e);
    if (rc == 0)
        rc = view_rows(st, v, e);
    app_reader_done(a, st);
    return rc;
}

int experiments_view_jobs(struct app *a, const char (*ids)[STORE_ID_LEN + 1], size_t n,
                          const char *owner, struct experiment_view *v,
                          struct store_err *e)
{
    struct store *st;
    int rc = 0;

    memset(v, 0, sizeof *v);
    if (!(v->jobs = calloc(n ? n : 1, sizeof *v->jobs))) {
        e->code = STORE_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return STORE_ENOMEM;
    }
    st = app_reader(a);
    for (size_t i = 0; rc == 0 && i < n; i++, v->n++)
        rc = store_job_get(st, ids[i], owner, &v->jobs[i], e);
    if (rc == 0)
        rc = view_rows(st, v, e);
    app_reader_done(a, st);
    return rc;
}
