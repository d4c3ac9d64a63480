/*
 * The plot routes, GET /v1/jobs/{id}/plot.svg and
 * /v1/experiments/{id}/plot.svg?x=rounds|bits|seconds&max_points=N (one
 * curve per job): decode the query, read the curves from the store,
 * draw them with plot_svg, reply image/svg+xml. A job another user owns
 * is a 404 here exactly as on GET /v1/jobs/{id}.
 */
#include "api.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "experiments.h"
#include "plot.h"

/* Rows read per curve at most (evenly thinned by the store), before the
   writer's own min/max downsampling to the plot's max_points. */
#define PLOTS_JOB_ROWS 10000
#define PLOTS_EXPERIMENT_ROWS 4000
#define PLOT_POINTS_DEFAULT 1000
#define PLOT_POINTS_MIN 10
#define PLOT_POINTS_MAX 5000

enum plot_x { PLOT_X_ROUNDS, PLOT_X_BITS, PLOT_X_SECONDS };

static const char *const x_names[] = {"rounds", "bits", "seconds"};
static const char *const x_labels[] = {
    "communication rounds",
    "bits sent up per worker",
    "seconds",
};

/* The most runs one median is taken over (a compare's 32 jobs). */
#define API_GROUP_MAX 256

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* One curve read from the store: x and the relative gap. */
struct curve {
    double *x, *y;
    size_t n;
};

static void curve_free(struct curve *c)
{
    free(c->x);
    free(c->y);
    c->x = c->y = NULL;
    c->n = 0;
}

static int bad_param(struct http_resp *rs, const char *param, const char *detail)
{
    return http_reply_problem(rs, 400, NULL, detail, json_pack("{s:s}", "parameter", param));
}

/* ?x= and ?max_points=, or a 400 naming the parameter (returns -1). */
static int plot_query(struct http_req *rq, struct http_resp *rs, enum plot_x *x,
                      size_t *max_points)
{
    const char *xs = http_query(rq, "x"), *mp = http_query(rq, "max_points");
    char detail[200];

    *x = PLOT_X_ROUNDS;
    if (xs) {
        size_t i;
        for (i = 0; i < sizeof x_names / sizeof x_names[0]; i++)
            if (strcmp(xs, x_names[i]) == 0)
                break;
        if (i == sizeof x_names / sizeof x_names[0]) {
            snprintf(detail, sizeof detail,
                     "x must be one of rounds, bits, seconds (got '%.40s')", xs);
            bad_param(rs, "x", detail);
            return -1;
        }
        *x = (enum plot_x)i;
    }
    *max_points = PLOT_POINTS_DEFAULT;
    if (mp) {
        char *end;
        long long v;
        errno = 0;
        v = strtoll(mp, &end, 10);
        if (!*mp || *end || errno || v < PLOT_POINTS_MIN || v > PLOT_POINTS_MAX) {
            snprintf(detail, sizeof detail,
                     "max_points must be an integer in %d..%d (got '%.40s')",
                     PLOT_POINTS_MIN, PLOT_POINTS_MAX, mp);
            bad_param(rs, "max_points", detail);
            return -1;
        }
        *max_points = (size_t)v;
    }
    return 0;
}

/* A job's rows, thinned by the store to at most about cap, as x and the
   relative gap. Non-finite values stay NAN: the writer breaks there. */
static int curve_load(struct store *st, const char *id, enum plot_x xaxis,
                      size_t cap, struct curve *c, struct store_err *e)
{
    struct store_metrics_page page = {0};
    int64_t count = 0;
    size_t every = 1;
    ec_metric *rows;
    int rc;

    c->x = c->y = NULL;
    c->n = 0;
    if ((rc = store_metrics_count(st, id, -1, &count, e)) < 0)
        return rc;
    if (count > (int64_t)cap)
        every = (size_t)((count - 1) / (int64_t)(cap - 1) +
                         ((count - 1) % (int64_t)(cap - 1) != 0));
    /* cap rows and the last one, which the store always adds. */
    rows = malloc((cap + 1) * sizeof *rows);
    c->x = malloc((cap + 1) * sizeof *c->x);
    c->y = malloc((cap + 1) * sizeof *c->y);
    if (!rows || !c->x || !c->y) {
        free(rows);
        curve_free(c);
        e->code = STORE_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return STORE_ENOMEM;
    }
    rc = store_metrics_query(st, id, -1, cap + 1, every, rows, &page, e);
    if (rc < 0) {
        free(rows);
        curve_free(c);
        return rc;
    }
    for (size_t i = 0; i < page.count; i++) {
        const ec_metric *r = &rows[i];
        c->x[i] = xaxis == PLOT_X_ROUNDS ? (double)r->round
                  : xaxis == PLOT_X_BITS ? r->bits_up
                                         : r->seconds;
        c->y[i] = r->rel_gap;
    }
    c->n = page.count;
    free(rows);
    return 0;
}

/*
 * A job's legend, "eclk, topk k=5" from its spec, and its variant, the
 * same less the multiplier of a tuned run: a run of a tuned experiment
 * (its name ends in " xM", M its multiplier on the tune's axis, step or
 * smoothness) is "eclk, topk k=5 x4",
 * with its variant's name when the variant has one of its own; any other
 * job has its name in brackets. A run of an experiment's seeds (its name
 * ends in "s=SEED", its seed) has " s=SEED" after the rest when with_seed,
 * and its variant never has it.
 */
static void job_label(const struct store_job *job, int with_seed, char *out, size_t len,
                      char *variant, size_t vlen)
{
    json_t *spec = job->spec ? json_loads(job->spec, 0, NULL) : NULL;
    json_t *comp = json_object_get(spec, "compressor"), *v;
    /* A tuned run sets the field its grid's axis names; the other keeps
       its default (a stored spec always has step_multiplier, 1 but for
       a step axis). The multiplier is the one the name ends in, before
       any seed. */
    static const char *const axes[] = {"smoothness_multiplier", "step_multiplier"};
    json_t *seed = json_object_get(spec, "seed");
    const char *key, *name = job->name ? job->name : "";
    char plain[200] = "", suffix[48] = "", seeded[48] = "";
    size_t o, nl = strlen(name), pl, sl = 0, ssl;

    if (job->experiment_id[0] && json_is_integer(seed)) {
        ssl = (size_t)snprintf(seeded, sizeof seeded, "s=%lld",
                               (long long)json_integer_value(seed));
        if (nl >= ssl && strcmp(name + nl - ssl, seeded) == 0 &&
            (nl == ssl || name[nl - ssl - 1] == ' '))
            nl = nl == ssl ? 0 : nl - ssl - 1;
        else
            seeded[0] = '\0';
    }

    o = (size_t)snprintf(out, len, "%s, %s", job->algorithm ? job->algorithm : "?",
                         job->compressor ? job->compressor : "?");
    json_object_foreach(comp, key, v) {
        if (strcmp(key, "type") == 0 || o >= len)
            continue;
        if (json_is_integer(v))
            o += (size_t)snprintf(out + o, len - o, " %s=%lld", key,
                                  (long long)json_integer_value(v));
        else if (json_is_real(v))
            o += (size_t)snprintf(out + o, len - o, " %s=%g", key, json_real_value(v));
    }
    /* What an unnamed variant's runs are named after (experiments.c):
       "eclk topk k=5", "gd" for no compressor. */
    pl = (size_t)snprintf(plain, sizeof plain, "%s", job->algorithm ? job->algorithm : "?");
    if (job->compressor && strcmp(job->compressor, "none") != 0 && pl < sizeof plain &&
        strstr(out, ", "))
        snprintf(plain + pl, sizeof plain - pl, " %s", strstr(out, ", ") + 2);
    for (size_t a = 0; job->experiment_id[0] && !sl && a < 2; a++) {
        json_t *m = json_object_get(spec, axes[a]);

        if (!json_is_number(m))
            continue;
        snprintf(suffix, sizeof suffix, "x%g", json_number_value(m));
        sl = strlen(suffix);
        if (nl < sl || strncmp(name + nl - sl, suffix, sl) != 0 ||
            (nl > sl && name[nl - sl - 1] != ' '))
            sl = 0;
    }
    if (sl) {
        size_t base = nl == sl ? 0 : nl - sl - 1;

        if (base && !(base == strlen(plain) && strncmp(name, plain, base) == 0) && o < len)
            o += (size_t)snprintf(out + o, len - o, " (%.*s)", (int)base, name);
        snprintf(variant, vlen, "%s", out);
        if (o < len)
            o += (size_t)snprintf(out + o, len - o, " %s", suffix);
    } else {
        if (nl && o < len)
            o += (size_t)snprintf(out + o, len - o, " (%.*s)", (int)nl, name);
        snprintf(variant, vlen, "%s", out);
    }
    if (with_seed && seeded[0] && o < len)
        snprintf(out + o, len - o, " %s", seeded);
    json_decref(spec);
}

void api_job_label(const struct store_job *job, char *out, size_t len, char *variant,
                   size_t vlen)
{
    job_label(job, 1, out, len, variant, vlen);
}

/* "mushrooms: logistic, λ2 = 1.63e-04", from the resolved problem when
   the job has started, else from its spec. */
static void problem_title(const char *prefix, const struct store_job *job, char *out,
                          size_t len)
{
    json_t *pb = job->problem ? json_loads(job->problem, 0, NULL) : NULL;
    json_t *spec = job->spec ? json_loads(job->spec, 0, NULL) : NULL;
    json_t *src = pb ? pb : spec;
    const char *loss = json_string_value(json_object_get(src, "loss"));
    json_t *l2 = json_object_get(src, "lambda2");
    json_t *l1 = json_object_get(src, "lambda1");
    char lam[96] = "";

    if (json_is_number(l2))
        snprintf(lam, sizeof lam, ", \xce\xbb" "2 = %.3g", json_number_value(l2));
    else if (json_is_number(json_object_get(spec, "lambda2_rel")))
        snprintf(lam, sizeof lam, ", \xce\xbb" "2_rel = %.3g",
                 json_number_value(json_object_get(spec, "lambda2_rel")));
    if (json_is_number(l1) && json_number_value(l1) > 0) {
        size_t o = strlen(lam);
        snprintf(lam + o, sizeof lam - o, ", \xce\xbb" "1 = %.3g", json_number_value(l1));
    }
    snprintf(out, len, "%s%s%s: %s%s", prefix ? prefix : "", prefix && *prefix ? " \xe2\x80\x94 " : "",
             job->dataset ? job->dataset : "?", loss ? loss : "?", lam);
    json_decref(pb);
    json_decref(spec);
}

/* The SVG reply, with headers that keep a browser from running or
   sniffing anything in it. */
static int reply_svg(struct http_resp *rs, const plot_spec *sp, const plot_series *s,
                     const plot_band *bands, size_t ns)
{
    size_t len = 0;
    char *svg = plot_svg_bands(sp, s, bands, ns, &len);
    int rc;

    if (!svg)
        return http_reply_problem(rs, 500, NULL, "out of memory drawing the plot", NULL);
    http_reply_header(rs, "Cache-Control", "no-cache");
    http_reply_header(rs, "X-Content-Type-Options", "nosniff");
    http_reply_header(rs, "Content-Security-Policy",
                      "default-src 'none'; style-src 'unsafe-inline'");
    rc = http_reply_text(rs, 200, "image/svg+xml", svg, len);
    free(svg);
    return rc;
}

int h_job_plot(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    struct store_job job = {0};
    struct store_err e = {0};
    struct curve c = {0};
    struct store *st;
    enum plot_x xaxis;
    size_t max_points;
    char title[256], label[200], variant[200];
    int rc;

    if (plot_query(rq, rs, &xaxis, &max_points) < 0)
        return 0;
    st = app_reader(a);
    rc = store_job_get(st, http_param(rq, "id"), api_owner_of(t), &job, &e);
    if (rc == 0)
        rc = curve_load(st, job.id, xaxis, PLOTS_JOB_ROWS, &c, &e);
    app_reader_done(a, st);
    if (rc < 0) {
        store_job_clear(&job);
        return api_reply_store(rs, &e, "no such job");
    }
    problem_title(NULL, &job, title, sizeof title);
    api_job_label(&job, label, sizeof label, variant, sizeof variant);
    plot_series s = {label, c.x, c.y, c.n};
    plot_spec sp = {.title = title, .xlabel = x_labels[xaxis],
                    .ylabel = "relative gap (P \xe2\x88\x92 P*) / (P0 \xe2\x88\x92 P*)",
                    .ylog = 1, .max_points = max_points};
    rc = reply_svg(rs, &sp, &s, NULL, 1);
    curve_free(&c);
    store_job_clear(&job);
    return rc;
}

/* The curve at x: the last point at or before it (a run that stopped
   keeps its final gap); NAN before its first point. *at walks forward. */
static double curve_at(const struct curve *c, double x, size_t *at)
{
    while (*at < c->n && c->x[*at] <= x)
        (*at)++;
    return *at ? c->y[*at - 1] : NAN;
}

/*
 * The median of a group's curves, with the least and greatest of them as
 * its band, at the x of the curve reaching farthest: the group's first
 * curve's slot holds the result (its x kept or replaced, y the median).
 * 0, or -1 when memory runs out.
 */
static int group_median(struct curve *curves, const size_t *members, size_t m,
                        double **lo, double **hi)
{
    struct curve *far = &curves[members[0]], out = {0};
    size_t at[API_GROUP_MAX] = {0};
    double v[API_GROUP_MAX];

    for (size_t k = 1; k < m; k++) {
        struct curve *c = &curves[members[k]];

        if (c->n && (!far->n || c->x[c->n - 1] > far->x[far->n - 1]))
            far = c;
    }
    out.n = far->n;
    out.x = malloc((far->n ? far->n : 1) * sizeof *out.x);
    out.y = malloc((far->n ? far->n : 1) * sizeof *out.y);
    *lo = malloc((far->n ? far->n : 1) * sizeof **lo);
    *hi = malloc((far->n ? far->n : 1) * sizeof **hi);
    if (!out.x || !out.y || !*lo || !*hi) {
        curve_free(&out);
        return -1;
    }
    for (size_t j = 0; j < far->n; j++) {
        size_t got = 0;

        out.x[j] = far->x[j];
        for (size_t k = 0; k < m && k < API_GROUP_MAX; k++) {
            double y = curve_at(&curves[members[k]], far->x[j], &at[k]);

            if (isfinite(y))
                v[got++] = y;
        }
        qsort(v, got, sizeof *v, cmp_double);
        out.y[j] = !got ? NAN : got % 2 ? v[got / 2] : 0.5 * (v[got / 2 - 1] + v[got / 2]);
        (*lo)[j] = got ? v[0] : NAN;
        (*hi)[j] = got ? v[got - 1] : NAN;
    }
    curve_free(&curves[members[0]]);
    curves[members[0]] = out;
    return 0;
}

/* "eclk, topk k=5 x4: median of 5 seeds" (without any one's seed), and
   the group's variant. */
static void group_label(const struct store_job *job, size_t m, char *out, size_t len,
                        char *variant, size_t vlen)
{
    size_t o;

    job_label(job, 0, out, len, variant, vlen);
    o = strlen(out);
    if (o < len)
        snprintf(out + o, len - o, ": median of %zu seeds", m);
}

/*
 * One curve per group of jobs that differ only in their seed, in an SVG
 * titled after name (or the first job): a job alone is its own curve, a
 * group of several its median with the least and greatest as a band.
 */
static int reply_jobs_plot(struct http_resp *rs, struct app *a, const char *name,
                           const struct store_job *jobs, size_t n, enum plot_x xaxis,
                           size_t max_points)
{
    struct store_err e = {0};
    struct curve *curves = NULL;
    plot_series *series = NULL;
    char (*labels)[200] = NULL, (*variants)[200] = NULL, title[300];
    unsigned *colour = NULL, *dash = NULL, groups = 0;
    size_t *gid = NULL, *members = NULL, ng = 0;
    double **bands = NULL;
    plot_band *pb = NULL;
    struct store *st;
    int rc = 0;

    if (n > 0) {
        curves = calloc(n, sizeof *curves);
        series = calloc(n, sizeof *series);
        labels = calloc(n, sizeof *labels);
        variants = calloc(n, sizeof *variants);
        colour = calloc(n, sizeof *colour);
        dash = calloc(n, sizeof *dash);
        gid = calloc(n, sizeof *gid);
        members = calloc(n, sizeof *members);
        bands = calloc(2 * n, sizeof *bands);
        pb = calloc(n, sizeof *pb);
        if (!curves || !series || !labels || !variants || !colour || !dash || !gid ||
            !members || !bands || !pb) {
            e.code = rc = STORE_ENOMEM;
            snprintf(e.msg, sizeof e.msg, "out of memory");
        }
    }
    st = app_reader(a);
    for (size_t i = 0; rc == 0 && i < n; i++)
        rc = curve_load(st, jobs[i].id, xaxis, PLOTS_EXPERIMENT_ROWS, &curves[i], &e);
    app_reader_done(a, st);
    if (rc == 0)
        ng = experiments_group_jobs(jobs, n, gid);
    for (size_t g = 0; rc == 0 && g < ng; g++) {
        size_t m = 0;

        for (size_t i = 0; i < n; i++)
            if (gid[i] == g)
                members[m++] = i;
        if (m > 1 && group_median(curves, members, m, &bands[2 * g],
                                  &bands[2 * g + 1]) < 0) {
            e.code = rc = STORE_ENOMEM;
            snprintf(e.msg, sizeof e.msg, "out of memory");
            break;
        }
        if (m > 1)
            group_label(&jobs[members[0]], m, labels[g], sizeof labels[g], variants[g],
                        sizeof variants[g]);
        else
            api_job_label(&jobs[members[0]], labels[g], sizeof labels[g], variants[g],
                          sizeof variants[g]);
        series[g] = (plot_series){labels[g], curves[members[0]].x, curves[members[0]].y,
                                  curves[members[0]].n};
        pb[g] = (plot_band){bands[2 * g], bands[2 * g + 1]};
        /* One colour per variant, one dash per run (or group of seeds) of
           it (docs/api.md, "Plots"). */
        size_t k = 0;
        while (k < g && strcmp(variants[k], variants[g]) != 0)
            k++;
        colour[g] = k < g ? colour[k] : groups++;
        for (size_t j = 0; j < g; j++)
            dash[g] += strcmp(variants[j], variants[g]) == 0;
    }
    if (rc < 0) {
        rc = api_reply_store(rs, &e, "no such job");
    } else {
        if (n > 0)
            problem_title(name, &jobs[0], title, sizeof title);
        else
            snprintf(title, sizeof title, "%s", name && *name ? name : "no jobs");
        plot_spec sp = {.title = title, .xlabel = x_labels[xaxis],
                        .ylabel = "relative gap (P \xe2\x88\x92 P*) / (P0 \xe2\x88\x92 P*)",
                        .ylog = 1, .max_points = max_points, .colour = colour,
                        .dash = dash};
        rc = reply_svg(rs, &sp, series, pb, ng);
    }
    for (size_t i = 0; curves && i < n; i++)
        curve_free(&curves[i]);
    for (size_t i = 0; bands && i < 2 * n; i++)
        free(bands[i]);
    free(bands);
    free(pb);
    free(gid);
    free(members);
    free(curves);
    free(series);
    free(labels);
    free(variants);
    free(colour);
    free(dash);
    return rc;
}

int h_experiment_plot(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    struct store_experiment x = {0};
    struct store_job *jobs = NULL;
    struct store_err e = {0};
    struct store *st;
    enum plot_x xaxis;
    size_t max_points, n = 0;
    int rc;

    if (plot_query(rq, rs, &xaxis, &max_points) < 0)
        return 0;
    st = app_reader(a);
    rc = store_experiment_get(st, http_param(rq, "id"), api_owner_of(t), &x, &e);
    if (rc == 0)
        rc = store_experiment_list_jobs(st, x.id, api_owner_of(t), &jobs, &n, &e);
    app_reader_done(a, st);
    if (rc < 0)
        rc = api_reply_store(rs, &e, "no such experiment");
    else
        rc = reply_jobs_plot(rs, a, x.name, jobs, n, xaxis, max_points);
    store_jobs_free(jobs, n);
    store_experiment_clear(&x);
    return rc;
}

int h_compare_plot(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    char ids[API_COMPARE_MAX][STORE_ID_LEN + 1], what[STORE_ID_LEN + 32];
    struct store_job jobs[API_COMPARE_MAX];
    struct store_err e = {0};
    struct store *st;
    enum plot_x xaxis;
    size_t max_points, n, got = 0;
    int rc = 0;

    if (plot_query(rq, rs, &xaxis, &max_points) < 0 || api_job_ids(rq, rs, ids, &n) < 0)
        return 0;
    memset(jobs, 0, sizeof jobs);
    st = app_reader(a);
    for (; rc == 0 && got < n; got++)
        rc = store_job_get(st, ids[got], api_owner_of(t), &jobs[got], &e);
    app_reader_done(a, st);
    if (rc < 0) {
        /* got is one past the job it could not get: name it. */
        snprintf(what, sizeof what, "no such job: %s", ids[got - 1]);
        rc = api_reply_store(rs, &e, what);
    } else {
        rc = reply_jobs_plot(rs, a, "", jobs, n, xaxis, max_points);
    }
    for (size_t i = 0; i < got; i++)
        store_job_clear(&jobs[i]);
    return rc;
}
