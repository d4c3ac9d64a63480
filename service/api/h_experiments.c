/* The experiments routes: create one, and read its comparison. */
#define _GNU_SOURCE
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "experiments.h"

/* The comparison table and the jobs of a view, into *table and *list. */
static void view_json(const struct experiment_view *v, json_t **table_out,
                      json_t **list_out)
{
    const struct experiment_view vv = *v;
    json_t *table, *list;

    table = json_array();
    list = json_array();
    for (size_t i = 0; i < vv.n; i++) {
        const struct experiment_row *r = &vv.rows[i];
        const struct store_job *job = r->job;
        json_t *row = json_pack("{s:s, s:s, s:s, s:s, s:b}", "job", job->id, "algorithm",
                                job->algorithm, "compressor", job->compressor, "state",
                                store_job_state_name(job->state), "reached", r->reached);
        json_t *comp = json_object_get(r->spec, "compressor");
        char label[200], variant[200];

        api_job_label(job, label, sizeof label, variant, sizeof variant);
        json_object_set_new(row, "label", json_string(label));
        json_object_set_new(row, "variant", json_string(variant));

        json_t *mult = json_object_get(r->spec, "step_multiplier");
        json_t *smooth = json_object_get(r->spec, "smoothness_multiplier");

        json_object_set(row, "compressor_spec", comp ? comp : json_null());
        json_object_set(row, "step_multiplier", mult ? mult : json_null());
        /* absent from a spec: the default, 1 */
        json_object_set_new(row, "smoothness_multiplier",
                            smooth ? json_incref(smooth) : json_real(1.0));
        json_object_set_new(row, "dataset_sha256", job->dataset_sha256[0]
                                                       ? json_string(job->dataset_sha256)
                                                       : json_null());
        json_object_set_new(row, "target", describe_real(r->target));
        json_object_set_new(row, "rounds_to_target",
                            r->reached ? json_integer((json_int_t)r->last.round)
                                       : json_null());
        json_object_set_new(row, "bits_up_to_target",
                            r->reached ? describe_real(r->last.bits_up) : json_null());
        json_object_set_new(row, "seconds_to_target",
                            r->reached ? describe_real(r->last.seconds) : json_null());
        json_object_set_new(row, "grad_evals_to_target",
                            r->reached ? describe_real(r->last.grad_evals) : json_null());
        json_object_set_new(row, "rounds", r->have ? json_integer((json_int_t)r->last.round)
                                                   : json_null());
        json_object_set_new(row, "final_rel_gap", r->have ? describe_real(r->last.rel_gap)
                                                          : json_null());
        json_object_set_new(row, "eclk", api_eclk_summary(job));
        json_array_append_new(table, row);
        json_array_append_new(list, api_job_json(job));
    }
    *table_out = table;
    *list_out = list;
}

/* A measure's spread over the runs that reached the target, or null. */
static json_t *spread_json(const struct experiment_spread *s)
{
    if (s->n == 0)
        return json_null();
    return json_pack("{s:o, s:o, s:o, s:o, s:o}", "median", describe_real(s->median),
                     "q1", describe_real(s->q1), "q3", describe_real(s->q3), "min",
                     describe_real(s->min), "max", describe_real(s->max));
}

/* A group of runs that differ only in their seed: its jobs, seeds and
   the spread of each measure to target. */
static json_t *group_json(const struct experiment_view *v, const struct experiment_group *g)
{
    json_t *jobs = json_array(), *seeds = json_array(), *o;
    const struct experiment_row *r0 = g->n ? &v->rows[g->rows[0]] : NULL;
    json_t *mult = r0 ? json_object_get(r0->spec, "step_multiplier") : NULL;

    for (size_t k = 0; k < g->n && jobs && seeds; k++) {
        const struct experiment_row *r = &v->rows[g->rows[k]];
        json_t *seed = json_object_get(r->spec, "seed");

        json_array_append_new(jobs, json_string(r->job->id));
        json_array_append(seeds, seed ? seed : json_null());
    }
    o = json_pack("{s:o, s:o, s:I, s:I, s:I, s:o, s:o, s:o, s:o}", "jobs",
                  jobs ? jobs : json_null(), "seeds", seeds ? seeds : json_null(), "runs",
                  (json_int_t)g->n, "reached", (json_int_t)g->reached, "finished",
                  (json_int_t)g->finished, "rounds_to_target", spread_json(&g->rounds),
                  "bits_up_to_target", spread_json(&g->bits_up), "seconds_to_target",
                  spread_json(&g->seconds), "grad_evals_to_target",
                  spread_json(&g->grad_evals));
    if (o && r0) {
        json_object_set_new(o, "algorithm", json_string(r0->job->algorithm));
        json_object_set_new(o, "compressor", json_string(r0->job->compressor));
        json_object_set(o, "step_multiplier", mult ? mult : json_null());
    }
    return o;
}

static json_t *groups_json(const struct experiment_view *v)
{
    json_t *list = json_array();

    for (size_t g = 0; list && g < v->ngroups; g++)
        json_array_append_new(list, group_json(v, &v->groups[g]));
    return list;
}

/* One run of a tuned variant: its multipliers (the one on the tune's
   axis as multiplier) and how far it got. */
static json_t *run_json(const struct experiment_row *r, const char *axis)
{
    json_t *m = json_object_get(r->spec, "step_multiplier");
    json_t *sm = json_object_get(r->spec, "smoothness_multiplier");
    json_t *am = json_object_get(r->spec, axis);

    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o}",
                     "job", r->job->id, "axis", axis, "multiplier",
                     am ? json_incref(am) : json_real(1.0), "step_multiplier",
                     m ? json_incref(m) : json_null(), "smoothness_multiplier",
                     sm ? json_incref(sm) : json_real(1.0), "state",
                     store_job_state_name(r->job->state), "reached", r->reached,
                     "rounds_to_target",
                     r->reached ? json_integer((json_int_t)r->last.round) : json_null(),
                     "bits_up_to_target",
                     r->reached ? describe_real(r->last.bits_up) : json_null(),
                     "seconds_to_target",
                     r->reached ? describe_real(r->last.seconds) : json_null(),
                     "grad_evals_to_target",
                     r->reached ? describe_real(r->last.grad_evals) : json_null(),
                     "final_rel_gap", r->have ? describe_real(r->last.rel_gap) : json_null(),
                     "eclk", api_eclk_summary(r->job));
}

/* A tuned variant's default or best multiplier: the run of its first
   seed, and the spread over all its seeds; null when there is none. */
static json_t *tuned_run_json(const struct experiment_view *v, long row,
                              const struct experiment_group *g)
{
    json_t *o;

    if (row < 0)
        return json_null();
    o = run_json(&v->rows[row], v->tune_axis);
    if (o) {
        json_object_set_new(o, "seeds", group_json(v, g));
        json_object_set_new(o, "peak_rel_gap", describe_real(g->peak));
    }
    return o;
}

/* What a reader of a tuned variant's best must know: a faster run the
   excursion rule set aside, and a best at the edge of the grid. */
static json_t *tuned_warnings(const struct experiment_view *v, const struct experiment_tuned *t)
{
    json_t *w = json_array();
    char line[300];

    if (!w)
        return NULL;
    if (t->excluded_row >= 0) {
        const struct experiment_row *r = &v->rows[t->excluded_row];
        json_t *m = json_object_get(r->spec, v->tune_axis);

        snprintf(line, sizeof line,
                 "multiplier %g took fewer rounds (median %.0f) but its relative gap "
                 "rose to %.3g, above %g times its start: not eligible as the best",
                 json_number_value(m), t->excluded_group.rounds.median,
                 t->excluded_group.peak, v->max_excursion);
        json_array_append_new(w, json_string(line));
    }
    if (t->best_edge != 0) {
        json_t *m = json_object_get(v->rows[t->best_row].spec, v->tune_axis);

        snprintf(line, sizeof line,
                 "the best multiplier %g is the %s of the grid: a %s one may be better; "
                 "widen the grid", json_number_value(m),
                 t->best_edge < 0 ? "smallest" : "largest",
                 t->best_edge < 0 ? "smaller" : "larger");
        json_array_append_new(w, json_string(line));
    }
    return w;
}

/* Per variant of a tuned experiment, its default run beside its best;
   null when the experiment is not tuned. */
static json_t *tuned_json(const struct experiment_view *v)
{
    json_t *list;

    if (!v->tuned)
        return json_null();
    list = json_array();
    for (size_t i = 0; i < v->ntuned; i++) {
        const struct experiment_tuned *t = &v->tuned[i];
        const struct experiment_row *r0 = &v->rows[t->first];
        char detail[160];

        if (t->best_row >= 0 && v->seeds > 1)
            snprintf(detail, sizeof detail, "best median of %zu multipliers x %zu seeds "
                     "(%zu finished)", t->count / v->seeds, v->seeds, t->finished);
        else if (t->best_row >= 0)
            snprintf(detail, sizeof detail, "best of %zu runs (%zu finished)", t->count,
                     t->finished);
        else if (t->finished == t->count)
            snprintf(detail, sizeof detail, "none of its %zu runs reached the target",
                     t->count);
        else
            snprintf(detail, sizeof detail,
                     "no run has reached the target yet (%zu of %zu finished)",
                     t->finished, t->count);
        json_array_append_new(
            list, json_pack("{s:I, s:s, s:s, s:I, s:I, s:b, s:s, s:o, s:o}", "variant",
                            (json_int_t)i, "algorithm", r0->job->algorithm, "compressor",
                            r0->job->compressor, "runs", (json_int_t)t->count, "finished",
                            (json_int_t)t->finished, "reached", t->best_row >= 0,
                            "detail", detail, "default",
                            tuned_run_json(v, t->default_row, &t->default_group),
                            "best", tuned_run_json(v, t->best_row, &t->best_group)));
        json_t *entry = json_array_get(list, json_array_size(list) - 1);

        if (entry) {
            json_object_set_new(entry, "excluded",
                                tuned_run_json(v, t->excluded_row, &t->excluded_group));
            json_object_set_new(entry, "max_excursion", json_real(v->max_excursion));
            json_object_set_new(entry, "warnings", tuned_warnings(v, t));
        }
    }
    return list;
}

/* The experiment and its comparison table, with status. */
static int reply_experiment(struct http_resp *rs, struct app *a, const char *id,
                            const char *owner, int status)
{
    struct experiment_view v;
    struct store_err e = {0};
    json_t *table, *list, *spec;
    const char *oracle;
    int rc;

    if (experiments_view(a, id, owner, &v, &e) < 0) {
        experiment_view_clear(&v);
        return api_reply_store(rs, &e, "no such experiment");
    }
    view_json(&v, &table, &list);
    spec = json_loads(v.x.spec, 0, NULL);
    oracle = json_string_value(json_object_get(spec, "oracle"));
    rc = http_reply_json(rs, status,
                         json_pack("{s:s, s:s, s:s, s:I, s:o, s:o, s:o, s:o, s:I, s:o, s:s}",
                                   "id", v.x.id, "owner", v.x.owner, "name",
                                   v.x.name ? v.x.name : "", "created_at",
                                   (json_int_t)v.x.created_at, "spec",
                                   spec ? spec : json_null(), "comparison", table,
                                   "tuned", tuned_json(&v), "jobs", list, "seeds",
                                   (json_int_t)(v.seeds ? v.seeds : 1), "groups",
                                   groups_json(&v), "oracle",
                                   oracle && strcmp(oracle, "full") == 0 ? "full"
                                                                         : "default"));
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
    json_t *errors = json_array();
    char location[64], detail[512];
    size_t more;
    int rc;

    if (!doc || !errors) {
        json_decref(errors);
        return doc ? http_reply_problem(rs, 500, NULL, "out of memory", NULL) : 0;
    }
    if (api_work_refused(rq, rs, who)) {
        json_decref(errors);
        json_decref(doc);
        return 0;
    }
    switch (experiments_create(a, who->name, who->admin, doc, &x, errors, &sp, &e)) {
    case EXPERIMENTS_INVALID:
        /* All at once, as for a job: the detail is the first, whole. */
        more = json_array_size(errors) ? json_array_size(errors) - 1 : 0;
        if (more)
            snprintf(detail, sizeof detail, "%s: %s (and %zu more: see errors)", sp.field,
                     sp.detail, more);
        else
            snprintf(detail, sizeof detail, "%s: %s", sp.field, sp.detail);
        rc = api_reply_invalid(rs, "Invalid experiment", detail, json_incref(errors),
                               sp.limit ? json_pack("{s:s, s:f}", "limit", sp.limit,
                                                    "value", sp.value)
                                        : NULL);
        break;
    case EXPERIMENTS_QUEUE_FULL:
        http_reply_header(rs, "Retry-After", "10");
        rc = http_reply_problem(rs, 429, NULL, sp.detail,
                                json_pack("{s:s, s:I}", "limit", sp.limit, "value",
                                          (json_int_t)sp.value));
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
    json_decref(errors);
    json_decref(doc);
    return rc;
}

int h_experiment_get(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    return reply_experiment(rs, rq->app, http_param(rq, "id"), api_owner_of(who), 200);
}

#define EXPERIMENTS_LIST_DEFAULT 50
#define EXPERIMENTS_LIST_MAX 500

int h_experiments_list(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    struct store_experiment *xs = NULL;
    struct store_err e = {0};
    char next[STORE_CURSOR_SIZE];
    long long limit;
    size_t n = 0;
    struct store *st;
    json_t *list;
    int rc;

    if (api_query_uint(rq, rs, "limit", 1, EXPERIMENTS_LIST_MAX, EXPERIMENTS_LIST_DEFAULT,
                       &limit) < 0)
        return 0;
    st = app_reader(a);
    rc = store_experiment_list(st, api_owner_of(who), http_query(rq, "cursor"),
                               (size_t)limit, &xs, &n, next, &e);
    app_reader_done(a, st);
    if (rc == STORE_EINVAL)
        return http_reply_problem(rs, 400, NULL, "cursor is not one this server issued",
                                  json_pack("{s:s}", "parameter", "cursor"));
    if (rc < 0)
        return api_reply_store(rs, &e, "no experiments");
    list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:I, s:I}", "id", xs[i].id,
                                              "owner", xs[i].owner, "name",
                                              xs[i].name ? xs[i].name : "", "created_at",
                                              (json_int_t)xs[i].created_at, "jobs",
                                              (json_int_t)xs[i].jobs));
    store_experiments_free(xs, n);
    return http_reply_json(rs, 200, json_pack("{s:o, s:o}", "experiments", list,
                                              "next_cursor",
                                              next[0] ? json_string(next) : json_null()));
}

/*
 * What a comparison of jobs must say beside its table: that they ran on
 * different datasets, or on different versions of one name (their gaps
 * are then relative to different P*). A JSON array of sentences.
 */
static json_t *compare_warnings(const struct experiment_view *v)
{
    json_t *w = json_array();
    char line[512];

    for (size_t i = 1; i < v->n && w; i++) {
        const struct store_job *a = &v->jobs[0], *b = &v->jobs[i];

        if (strcmp(a->dataset ? a->dataset : "", b->dataset ? b->dataset : "") != 0)
            snprintf(line, sizeof line,
                     "job %s runs on dataset %s and job %s on %s: their gaps are not "
                     "comparable", a->id, a->dataset ? a->dataset : "?", b->id,
                     b->dataset ? b->dataset : "?");
        else if (a->dataset_sha256[0] && b->dataset_sha256[0] &&
                 strcmp(a->dataset_sha256, b->dataset_sha256) != 0)
            snprintf(line, sizeof line,
                     "jobs %s and %s run on different versions of dataset %s (%.12s, "
                     "%.12s)", a->id, b->id, a->dataset ? a->dataset : "?",
                     a->dataset_sha256, b->dataset_sha256);
        else
            continue;
        json_array_append_new(w, json_string(line));
    }
    return w;
}

int h_compare(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    char ids[API_COMPARE_MAX][STORE_ID_LEN + 1], what[STORE_ID_LEN + 32];
    struct experiment_view v;
    struct store_err e = {0};
    json_t *table, *list;
    size_t n;
    int rc;

    if (api_job_ids(rq, rs, ids, &n) < 0)
        return 0;
    if (experiments_view_jobs(rq->app, (const char (*)[STORE_ID_LEN + 1])ids, n,
                              api_owner_of(who), &v, &e) < 0) {
        /* The view stops at the first job it cannot get: name it. */
        snprintf(what, sizeof what, "no such job: %s", v.n ? ids[v.n - 1] : "?");
        experiment_view_clear(&v);
        return api_reply_store(rs, &e, what);
    }
    view_json(&v, &table, &list);
    rc = http_reply_json(rs, 200, json_pack("{s:o, s:o, s:o, s:o}", "comparison", table,
                                            "jobs", list, "warnings", compare_warnings(&v),
                                            "groups", groups_json(&v)));
    experiment_view_clear(&v);
    return rc;
}
