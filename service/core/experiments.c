/*
 * Experiments (see experiments.h): the variants merged into the base (at
 * each multiplier and seed asked for) and checked as jobs are, stored as
 * one experiment, and read back with each job's latest row for the
 * comparison, grouped over the seeds.
 */
#define _GNU_SOURCE
#include "experiments.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "jobspec.h"
#include "scheduler.h"

/* Keys an experiment document may have. */
static const char *const experiment_keys[] = {
    "name", "base", "variants", "tune", "seeds", "oracle", "max_excursion", NULL,
};

/* Keys a variant may set: how it runs, never what it solves. */
static const char *const variant_keys[] = {
    "algorithm", "compressor", "compressor_down", "batch", "participation",
    "p", "step_size",
    "step_multiplier", "smoothness_multiplier", "eclk_rule", "eclk_guard",
    "eclk_guard_threshold", "econtrol_eta", "name", "labels", "backend", NULL,
};

/* The job fields a tune grid may set: the first is the default axis
 * (docs/api.md, "Tuned experiments"). */
static const char *const tune_axes[] = {"smoothness_multiplier", "step_multiplier"};

/* The axis in a sentence: "smoothness" or "step" (multipliers). */
static const char *axis_word(const char *axis)
{
    return strcmp(axis, "step_multiplier") == 0 ? "step" : "smoothness";
}

static int variant_key_ok(const char *key)
{
    for (int i = 0; variant_keys[i]; i++)
        if (strcmp(key, variant_keys[i]) == 0)
            return 1;
    return 0;
}

/*
 * One more problem of the experiment: appended to errors unless its field
 * has one already (a problem of the base is every run's of a tuned
 * variant; a variant's unknown key is the shape's and the spec's), at
 * most EXPERIMENTS_MAX_ERRORS; the first also goes to sp, with its limit.
 */
static void note_problem(json_t *errors, struct spec_problem *sp, const struct spec_problem *p)
{
    size_t i;
    json_t *e;

    json_array_foreach(errors, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "field")), p->field) == 0)
            return;
    }
    if (json_array_size(errors) >= EXPERIMENTS_MAX_ERRORS)
        return;
    if (json_array_size(errors) == 0)
        *sp = *p;
    json_array_append_new(errors, json_pack("{s:s, s:s}", "field", p->field, "detail",
                                            p->detail));
}

static void note(json_t *errors, struct spec_problem *sp, const char *field,
                 const char *detail)
{
    struct spec_problem p;

    spec_problem_set(&p, field, NULL, 0, "%s", detail);
    note_problem(errors, sp, &p);
}

/* Which grid tune gives and the field it sets: 0, or -1 with sp set. */
static int tune_grid(const json_t *tune, const json_t **grid, const char **axis,
                     const char **grid_field, struct spec_problem *sp)
{
    const json_t *a = json_object_get(tune, "axis");
    const char *key;
    json_t *value;
    int grids = 0;

    json_object_foreach((json_t *)tune, key, value) {
        int known = strcmp(key, "grid") == 0 || strcmp(key, "axis") == 0;

        for (size_t k = 0; k < 2; k++)
            if (strcmp(key, tune_axes[k]) == 0) {
                known = 1;
                *axis = tune_axes[k];
                *grid = value;
                *grid_field = key;
            }
        if (!known) {
            char field[160];

            snprintf(field, sizeof field, "tune.%s", key);
            return spec_problem_set(sp, field, NULL, 0,
                                    "unknown key; tune takes grid (and axis), or "
                                    "smoothness_multiplier, or step_multiplier");
        }
        grids += strcmp(key, "axis") != 0;
    }
    if (grids != 1)
        return spec_problem_set(sp, "tune", NULL, 0,
                                "must give one grid: {\"grid\": [0.5, 1, 2, 4]} (the "
                                "smoothness multiplier unless axis says otherwise), or "
                                "smoothness_multiplier, or step_multiplier");
    if (json_object_get(tune, "grid")) {
        *grid = json_object_get(tune, "grid");
        *grid_field = "grid";
        *axis = tune_axes[0];
        if (a && !(json_is_string(a) && (strcmp(json_string_value(a), tune_axes[0]) == 0 ||
                                         strcmp(json_string_value(a), tune_axes[1]) == 0)))
            return spec_problem_set(sp, "tune.axis", NULL, 0,
                                    "must be smoothness_multiplier (the default) or "
                                    "step_multiplier");
        if (a)
            *axis = strcmp(json_string_value(a), tune_axes[0]) == 0 ? tune_axes[0]
                                                                    : tune_axes[1];
    } else if (a) {
        return spec_problem_set(sp, "tune.axis", NULL, 0,
                                "goes with grid; %s names its axis itself", *grid_field);
    }
    return 0;
}

int experiments_tune_parse(const json_t *tune, double *values, size_t *n,
                           const char **axis, struct spec_problem *sp)
{
    const json_t *grid = NULL, *v;
    const char *grid_field = "grid";
    char gfield[64];
    size_t i;

    *n = 0;
    if (!json_is_object(tune))
        return spec_problem_set(sp, "tune", NULL, 0,
                                "must be an object: {\"grid\": [0.25, 0.5, 1, 2]}");
    if (tune_grid(tune, &grid, axis, &grid_field, sp) < 0)
        return -1;
    snprintf(gfield, sizeof gfield, "tune.%s", grid_field);
    if (!json_is_array(grid) || json_array_size(grid) < 1 ||
        json_array_size(grid) > EXPERIMENTS_MAX_TUNE_VALUES)
        return spec_problem_set(sp, gfield, "max_tune_values",
                                EXPERIMENTS_MAX_TUNE_VALUES,
                                "must be an array of 1..%d distinct numbers above 0 "
                                "(max_tune_values = %d)", EXPERIMENTS_MAX_TUNE_VALUES,
                                EXPERIMENTS_MAX_TUNE_VALUES);
    json_array_foreach(grid, i, v) {
        double x = json_number_value(v);
        char field[96];

        snprintf(field, sizeof field, "%s[%zu]", gfield, i);
        if (!json_is_number(v) || !isfinite(x) || !(x > 0))
            return spec_problem_set(sp, field, NULL, 0,
                                    "must be a finite number above 0");
        for (size_t k = 0; k < i; k++)
            if (values[k] == x)
                return spec_problem_set(sp, field, NULL, 0,
                                        "%g is given twice (also at [%zu])", x, k);
        values[i] = x;
    }
    *n = json_array_size(grid);
    return 0;
}

static int seeds_count_problem(struct spec_problem *sp)
{
    return spec_problem_set(sp, "seeds", "max_seeds", EXPERIMENTS_MAX_SEEDS,
                            "must be a count in 1..%d or an array of 1..%d distinct "
                            "seeds (max_seeds = %d)", EXPERIMENTS_MAX_SEEDS,
                            EXPERIMENTS_MAX_SEEDS, EXPERIMENTS_MAX_SEEDS);
}

int experiments_seeds_parse(const json_t *doc, uint64_t *seeds, size_t *n,
                            struct spec_problem *sp)
{
    const json_t *v = json_object_get(doc, "seeds"), *x;
    const json_t *base_seed = json_object_get(json_object_get(doc, "base"), "seed");
    size_t i;

    *n = 0;
    if (!v || json_is_null(v))
        return 0;
    if (json_is_integer(v)) {
        json_int_t c = json_integer_value(v), first = 1;

        if (c < 1 || c > EXPERIMENTS_MAX_SEEDS)
            return seeds_count_problem(sp);
        if (base_seed && !json_is_null(base_seed)) {
            if (!json_is_integer(base_seed) || json_integer_value(base_seed) < 0 ||
                (uint64_t)json_integer_value(base_seed) + (uint64_t)c - 1 >
                    JOBSPEC_MAX_SEED)
                return spec_problem_set(sp, "base.seed", NULL, 0,
                                        "with seeds: %lld, must be an integer in "
                                        "0..%llu", (long long)c,
                                        (unsigned long long)(JOBSPEC_MAX_SEED - (uint64_t)c + 1));
            first = json_integer_value(base_seed);
        }
        for (i = 0; i < (size_t)c; i++)
            seeds[i] = (uint64_t)first + i;
        *n = (size_t)c;
        return 0;
    }
    if (!json_is_array(v) || json_array_size(v) < 1 ||
        json_array_size(v) > EXPERIMENTS_MAX_SEEDS)
        return seeds_count_problem(sp);
    if (base_seed && !json_is_null(base_seed))
        return spec_problem_set(sp, "base.seed", NULL, 0,
                                "a list of seeds gives every run its seed; leave "
                                "base.seed out");
    json_array_foreach(v, i, x) {
        char field[64];

        snprintf(field, sizeof field, "seeds[%zu]", i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            (uint64_t)json_integer_value(x) > JOBSPEC_MAX_SEED)
            return spec_problem_set(sp, field, NULL, 0, "must be an integer in 0..%llu",
                                    (unsigned long long)JOBSPEC_MAX_SEED);
        seeds[i] = (uint64_t)json_integer_value(x);
        for (size_t k = 0; k < i; k++)
            if (seeds[k] == seeds[i])
                return spec_problem_set(sp, field, NULL, 0,
                                        "%llu is given twice (also at [%zu])",
                                        (unsigned long long)seeds[i], k);
    }
    *n = json_array_size(v);
    return 0;
}

int experiments_excursion_parse(const json_t *doc, double *out, struct spec_problem *sp)
{
    const json_t *x = json_object_get(doc, "max_excursion");

    *out = EXPERIMENTS_MAX_EXCURSION;
    if (!x || json_is_null(x))
        return 0;
    if (!json_is_number(x) || !(json_number_value(x) >= 1.0) ||
        !isfinite(json_number_value(x)))
        return spec_problem_set(sp, "max_excursion", NULL, 0,
                                "must be a finite number >= 1: the most a tuned run's "
                                "relative gap may rise to and still be the best");
    *out = json_number_value(x);
    return 0;
}

int experiments_oracle_parse(const json_t *doc, struct spec_problem *sp)
{
    const json_t *o = json_object_get(doc, "oracle");
    const json_t *batch = json_object_get(json_object_get(doc, "base"), "batch");

    if (!o || json_is_null(o) ||
        (json_is_string(o) && strcmp(json_string_value(o), "default") == 0))
        return 0;
    if (!json_is_string(o) || strcmp(json_string_value(o), "full") != 0)
        return spec_problem_set(sp, "oracle", NULL, 0,
                                "must be \"default\" (each method's own gradient: a "
                                "minibatch for the stochastic ones) or \"full\" (every "
                                "method its whole shard's)");
    if (batch && !json_is_null(batch))
        return spec_problem_set(sp, "base.batch", NULL, 0,
                                "oracle full gives every method its whole shard's "
                                "gradient (batch \"full\"); leave batch out");
    return 1;
}

/* The multipliers each variant runs at: the grid, and 1 (its default run)
   after them when the grid lacks it. */
static size_t tune_runs(double *values, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (values[i] == 1.0)
            return n;
    values[n] = 1.0;
    return n + 1;
}

/* The step comes from the grid: a base or variant that sets it is refused. */
static int tune_conflict(const json_t *spec, const char *where, struct spec_problem *sp)
{
    static const char *const keys[] = {"step_size", "step_multiplier",
                                       "smoothness_multiplier"};

    for (int k = 0; k < 3; k++)
        if (json_object_get(spec, keys[k]) && !json_is_null(json_object_get(spec, keys[k]))) {
            char field[160];

            snprintf(field, sizeof field, "%s.%s", where, keys[k]);
            return spec_problem_set(sp, field, NULL, 0,
                                    "a tuned experiment takes its steps from its "
                                    "tune grid; leave %s out", keys[k]);
        }
    return 0;
}

/*
 * "NAME x0.5", "NAME x0.5 s=3": the multiplier and the seed in the job's
 * name (its legend in the plots), the name shortened to leave room for
 * them. An unnamed variant's tuned runs are named after what it runs,
 * "eclk topk k=5 x0.5", so that no two variants' runs share a name
 * (docs/api.md, "Tuned experiments").
 */
static void name_with_suffix(char name[JOBSPEC_NAME_MAX + 1], const struct jobspec *spec,
                             double m, const uint64_t *seed)
{
    char suffix[64];
    const ec_comp_spec *c = &spec->job.compressor;
    int len = 0;
    size_t keep;

    if (!name[0] && m > 0) {
        int o = snprintf(name, JOBSPEC_NAME_MAX + 1, "%s%s%s",
                         ec_algo_name(spec->job.algorithm), c->type == EC_COMP_NONE ? "" : " ",
                         c->type == EC_COMP_NONE ? "" : ec_comp_name(c->type));

        if (o > 0 && o < JOBSPEC_NAME_MAX && !isnan(spec->job.k_frac))
            snprintf(name + o, (size_t)(JOBSPEC_NAME_MAX + 1 - o), " k_frac=%g",
                     spec->job.k_frac);
        else if (o > 0 && o < JOBSPEC_NAME_MAX && c->k)
            snprintf(name + o, (size_t)(JOBSPEC_NAME_MAX + 1 - o), " k=%u", (unsigned)c->k);
        else if (o > 0 && o < JOBSPEC_NAME_MAX && c->s)
            snprintf(name + o, (size_t)(JOBSPEC_NAME_MAX + 1 - o), " s=%u", (unsigned)c->s);
    }
    keep = strlen(name);
    if (m > 0)
        len += snprintf(suffix, sizeof suffix, "%sx%g", name[0] ? " " : "", m);
    if (seed)
        len += snprintf(suffix + len, sizeof suffix - (size_t)len, "%ss=%llu",
                        name[0] || len ? " " : "", (unsigned long long)*seed);
    if (keep + (size_t)len > JOBSPEC_NAME_MAX)
        keep = JOBSPEC_NAME_MAX - (size_t)len;
    memcpy(name + keep, suffix, (size_t)len + 1);
}

/* Everything experiments_create allocates for its n jobs. */
struct create_buf {
    struct store_job_new *in;
    char **spec_text, **labels_text;
    char (*versions)[65];
    struct jobspec *specs;
    size_t n;
};

static int create_buf_init(struct create_buf *b, size_t n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->in = calloc(n, sizeof *b->in);
    b->spec_text = calloc(n, sizeof *b->spec_text);
    b->labels_text = calloc(n, sizeof *b->labels_text);
    b->versions = calloc(n, sizeof *b->versions);
    b->specs = calloc(n, sizeof *b->specs);
    return b->in && b->spec_text && b->labels_text && b->versions && b->specs ? 0 : -1;
}

/* The jobs' rows now refer to their versions, or never will. */
static void create_buf_clear(struct app *a, struct create_buf *b)
{
    for (size_t i = 0; b->versions && i < b->n; i++)
        catalog_unpin(a, b->versions[i]);
    for (size_t i = 0; b->spec_text && b->labels_text && i < b->n; i++) {
        free(b->spec_text[i]);
        free(b->labels_text[i]);
    }
    free(b->in);
    free(b->spec_text);
    free(b->labels_text);
    free(b->versions);
    free(b->specs);
}

/* Where a problem of a merged spec comes from: the variant's key
   (variants[i].FIELD), the grid's multiplier (tune.AXIS), or the base's
   (base.FIELD), so that the base's is told once. */
static void problem_field(char *out, size_t len, const char *field, json_t *v, size_t i,
                          double m, const char *axis)
{
    char top[96];
    size_t n = strcspn(field, ".[");

    snprintf(top, sizeof top, "%.*s", (int)(n < sizeof top ? n : sizeof top - 1), field);
    if (json_object_get(v, top))
        snprintf(out, len, "variants[%zu].%s", i, field);
    else if (m > 0 && strcmp(top, axis) == 0)
        snprintf(out, len, "tune.%s", field);
    else
        snprintf(out, len, "base%s%s", field[0] ? "." : "", field);
}

/* Job j of variant i: the variant merged into the base (with the tune
   axis at multiplier m when m > 0, with seed when not NULL), checked as a
   submission is, into b's slot j; every problem of its spec goes to errors.
   full_oracle: the experiment's oracle is full (batch "full" for every
   job). */
static enum experiments_outcome make_job(struct app *a, const char *owner, int admin,
                                         json_t *base, json_t *v, size_t i, double m,
                                         const char *axis, const uint64_t *seed,
                                         int full_oracle, struct create_buf *b, size_t j,
                                         json_t *errors, struct spec_problem *sp)
{
    json_t *merged = json_deep_copy(base);
    struct jobspec_errors errs = {0};
    struct spec_problem vp;
    char field[160];
    int rc;

    if (!merged)
        return EXPERIMENTS_NO_MEMORY;
    json_object_update(merged, v);
    if (m > 0)
        json_object_set_new(merged, axis, json_real(m));
    if (seed)
        json_object_set_new(merged, "seed", json_integer((json_int_t)*seed));
    if (full_oracle)
        json_object_set_new(merged, "batch", json_string("full"));
    rc = jobspec_from_json(merged, &b->specs[j], &errs);
    json_decref(merged);
    if (rc < 0) {
        for (unsigned k = 0; k < errs.count; k++) {
            problem_field(field, sizeof field, errs.item[k].field, v, i, m, axis);
            note(errors, sp, field, errs.item[k].detail);
        }
        if (!errs.count)
            note(errors, sp, "base", "invalid");
        return EXPERIMENTS_INVALID;
    }
    if (jobs_check_spec(a, &b->specs[j], owner, admin, &vp, b->versions[j]) < 0) {
        problem_field(field, sizeof field, vp.field, v, i, m, axis);
        note(errors, sp, field, vp.detail);
        return EXPERIMENTS_INVALID;
    }
    if (m > 0 || seed)
        name_with_suffix(b->specs[j].name, &b->specs[j], m, seed);
    if (jobs_row_new(&b->specs[j], owner, &b->in[j], &b->spec_text[j],
                     &b->labels_text[j]) < 0)
        return EXPERIMENTS_NO_MEMORY;
    b->in[j].dataset_sha256 = b->versions[j];
    return EXPERIMENTS_CREATED;
}

/*
 * The document's shape: its keys, base, variants, name, tune and seeds,
 * each problem into errors. *nvar, the seeds (*nseeds of them, 0 when not
 * given) and, when tuned, the grid of runs (*runs of them) and the job
 * field it sets (*axis) once it holds; returns whether jobs can be made of
 * it to check further (base an object and variants an array of objects).
 */
static int check_shape(json_t *doc, double *grid, uint64_t *seeds, size_t *nseeds,
                       size_t *nvar, size_t *runs, const char **axis, json_t *errors,
                       struct spec_problem *sp)
{
    json_t *base = json_object_get(doc, "base"), *variants = json_object_get(doc, "variants");
    json_t *name = json_object_get(doc, "name"), *tune = json_object_get(doc, "tune");
    json_t *value;
    struct spec_problem p;
    const char *key;
    char field[160];
    double excursion;
    size_t ngrid = 0, i, per;
    int shaped = 1, oracle;


    json_object_foreach(doc, key, value) {
        int known = 0;

        for (i = 0; experiment_keys[i]; i++)
            known |= strcmp(key, experiment_keys[i]) == 0;
        if (!known) {
            snprintf(field, sizeof field, "%s", key);
            note(errors, sp, field, "unknown key; allowed keys are: name, base, variants, "
                 "tune, seeds, oracle, max_excursion");
        }
    }
    if (experiments_excursion_parse(doc, &excursion, &p) < 0)
        note_problem(errors, sp, &p);
    if ((oracle = experiments_oracle_parse(doc, &p)) < 0)
        note_problem(errors, sp, &p);
    if (!json_is_object(base)) {
        note(errors, sp, "base", "must be a job spec object (as for POST /v1/jobs)");
        shaped = 0;
    }
    if (!json_is_array(variants) || json_array_size(variants) < 1 ||
        json_array_size(variants) > EXPERIMENTS_MAX_VARIANTS) {
        note(errors, sp, "variants", "must be an array of 1..32 objects");
        shaped = 0;
    }
    if (name && !json_is_string(name))
        note(errors, sp, "name", "must be a string");
    *nvar = json_array_size(variants);
    *runs = 1;
    if (tune) {
        if (experiments_tune_parse(tune, grid, &ngrid, axis, &p) < 0) {
            note_problem(errors, sp, &p);
            *axis = tune_axes[0];
            grid[0] = 1.0;          /* the variants are checked at their default */
        } else {
            *runs = tune_runs(grid, ngrid);
        }
        if (json_is_object(base) && tune_conflict(base, "base", &p) < 0)
            note_problem(errors, sp, &p);
    }
    *nseeds = 0;
    if (experiments_seeds_parse(doc, seeds, nseeds, &p) < 0)
        note_problem(errors, sp, &p);
    per = *runs * (*nseeds ? *nseeds : 1);
    if (*nvar * per > EXPERIMENTS_MAX_JOBS) {
        char by_seeds[48] = "";

        if (*nseeds)
            snprintf(by_seeds, sizeof by_seeds, " x %zu seeds", *nseeds);
        spec_problem_set(&p, *nseeds ? "seeds" : "tune", "max_experiment_jobs",
                         EXPERIMENTS_MAX_JOBS,
                         "%zu variants x %zu %s multipliers%s%s make %zu jobs; an "
                         "experiment has at most %d (max_experiment_jobs)", *nvar, *runs,
                         axis_word(*axis), tune && *runs > ngrid ? " (the default x1 added)" : "",
                         by_seeds, *nvar * per, EXPERIMENTS_MAX_JOBS);
        note_problem(errors, sp, &p);
        shaped = 0;
    }
    for (i = 0; shaped && i < *nvar; i++) {
        json_t *v = json_array_get(variants, i);

        snprintf(field, sizeof field, "variants[%zu]", i);
        if (!json_is_object(v)) {
            note(errors, sp, field, "must be an object");
            shaped = 0;
            continue;
        }
        if (tune && tune_conflict(v, field, &p) < 0)
            note_problem(errors, sp, &p);
        json_object_foreach(v, key, value) {
            if (!variant_key_ok(key)) {
                char detail[512];
                int o = snprintf(detail, sizeof detail, "a variant sets only how it runs:");

                for (int k = 0; variant_keys[k] && o > 0 && (size_t)o < sizeof detail; k++)
                    o += snprintf(detail + o, sizeof detail - (size_t)o, "%s %s",
                                  k ? "," : "", variant_keys[k]);
                if (o > 0 && (size_t)o < sizeof detail)
                    snprintf(detail + o, sizeof detail - (size_t)o,
                             "; the problem comes from base");
                snprintf(field, sizeof field, "variants[%zu].%s", i, key);
                note(errors, sp, field, detail);
            }
        }
        if (oracle == 1 && json_object_get(v, "batch")) {
            snprintf(field, sizeof field, "variants[%zu].batch", i);
            note(errors, sp, field, "oracle full gives every method its whole shard's "
                 "gradient (batch \"full\"); leave batch out");
        }
    }
    return shaped;
}

/* Stores the checked jobs as one experiment, if the owner's queue has
   room for all of them; what says how many they are, for the quota's
   problem. */
static enum experiments_outcome store_all(struct app *a, const char *owner, json_t *doc,
                                          struct create_buf *b, const char *what,
                                          struct store_experiment *x,
                                          struct spec_problem *sp, struct store_err *e)
{
    struct store_experiment_new xn = {0};
    struct store_counts c = {0};
    enum experiments_outcome out = EXPERIMENTS_CREATED;
    char *xspec = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);

    if (!xspec)
        return EXPERIMENTS_NO_MEMORY;
    xn.owner = owner;
    xn.name = json_string_value(json_object_get(doc, "name"));
    xn.spec = xspec;
    /* Its jobs are queued jobs like any other: all of them count
     * against the owner's queue quota, or none is made. */
    pthread_mutex_lock(&a->wlock);
    if (store_counts(a->writer, owner, &c, e) < 0)
        out = EXPERIMENTS_STORE_FAILED;
    else if (c.owner_queued + b->n > a->cfg.max_queued_per_token) {
        spec_problem_set(sp, "variants", "max_queued_per_token",
                         a->cfg.max_queued_per_token,
                         "max_queued_per_token: at most %u queued jobs per token; "
                         "you have %lld and the experiment's %s would make %lld",
                         a->cfg.max_queued_per_token, (long long)c.owner_queued,
                         what, (long long)c.owner_queued + (long long)b->n);
        out = EXPERIMENTS_QUEUE_FULL;
    } else if (store_experiment_create(a->writer, &xn, b->in, b->n, x, NULL, e) < 0)
        out = EXPERIMENTS_STORE_FAILED;
    pthread_mutex_unlock(&a->wlock);
    if (out == EXPERIMENTS_CREATED)
        sched_wake(a->sched);
    free(xspec);
    return out;
}

enum experiments_outcome experiments_create(struct app *a, const char *owner,
                                            int admin, json_t *doc, struct store_experiment *x,
                                            json_t *errors, struct spec_problem *sp,
                                            struct store_err *e)
{
    json_t *base = json_object_get(doc, "base"), *variants = json_object_get(doc, "variants");
    int tuned = json_object_get(doc, "tune") != NULL;
    double grid[EXPERIMENTS_MAX_TUNE_VALUES + 1];
    uint64_t seeds[EXPERIMENTS_MAX_SEEDS];
    struct create_buf b = {0};
    enum experiments_outcome out = EXPERIMENTS_CREATED, one;
    size_t nvar, runs, nseeds, per;
    struct spec_problem op;
    char what[160];
    int full;
    const char *axis = tune_axes[0];

    memset(sp, 0, sizeof *sp);
    if (!check_shape(doc, grid, seeds, &nseeds, &nvar, &runs, &axis, errors, sp))
        return EXPERIMENTS_INVALID;
    full = experiments_oracle_parse(doc, &op) == 1;
    per = runs * (nseeds ? nseeds : 1);
    if (create_buf_init(&b, nvar * per) < 0) {
        create_buf_clear(a, &b);
        return EXPERIMENTS_NO_MEMORY;
    }
    /* Variant-major, then the grid's order, then the seeds: variant i's
     * runs at multiplier k are jobs (i*runs + k)*seeds .. + seeds - 1 (the
     * comparison reads them back so). Every job is checked, so that all
     * problems are told at once. */
    for (size_t j = 0; j < b.n && out != EXPERIMENTS_NO_MEMORY; j++) {
        one = make_job(a, owner, admin, base, json_array_get(variants, j / per), j / per,
                       tuned ? grid[j % per / (nseeds ? nseeds : 1)] : 0, axis,
                       nseeds ? &seeds[j % nseeds] : NULL, full, &b, j, errors, sp);
        if (one != EXPERIMENTS_CREATED)
            out = one == EXPERIMENTS_NO_MEMORY ? one : EXPERIMENTS_INVALID;
    }
    if (out == EXPERIMENTS_CREATED && json_array_size(errors))
        out = EXPERIMENTS_INVALID;
    if (out == EXPERIMENTS_CREATED) {
        if (nseeds)
            snprintf(what, sizeof what, "%zu jobs (%zu variants x %zu %s multipliers x "
                     "%zu seeds)", b.n, nvar, runs, axis_word(axis), nseeds);
        else if (tuned)
            snprintf(what, sizeof what, "%zu jobs (%zu variants x %zu %s multipliers)",
                     b.n, nvar, runs, axis_word(axis));
        else
            snprintf(what, sizeof what, "%zu variants", b.n);
        out = store_all(a, owner, doc, &b, what, x, sp, e);
    }
    create_buf_clear(a, &b);
    return out;
}

void experiment_view_clear(struct experiment_view *v)
{
    free(v->tuned);
    free(v->groups);
    free(v->group_rows);
    free(v->identity);
    for (size_t i = 0; v->rows && i < v->n; i++)
        json_decref(v->rows[i].spec);
    free(v->rows);
    store_jobs_free(v->jobs, v->n);
    store_experiment_clear(&v->x);
    memset(v, 0, sizeof *v);
}

static int view_enomem(struct store_err *e)
{
    e->code = STORE_ENOMEM;
    snprintf(e->msg, sizeof e->msg, "out of memory");
    return STORE_ENOMEM;
}

/*
 * The rows of v's jobs, read through st: per job, whether it reached its
 * target and, if so, the rounds and bits it took (its last row, since a
 * job stops at its target), else its final relative gap. 0 or a STORE_*
 * code.
 */
static int view_rows(struct store *st, struct experiment_view *v, struct store_err *e)
{
    if (v->n && !(v->rows = calloc(v->n, sizeof *v->rows)))
        return view_enomem(e);
    for (size_t i = 0; i < v->n; i++) {
        struct experiment_row *r = &v->rows[i];

        r->job = &v->jobs[i];
        r->have = store_metrics_last(st, r->job->id, &r->last, e) == 1;
        r->spec = json_loads(r->job->spec, 0, NULL);
        r->target = json_number_value(json_object_get(r->spec, "target"));
        r->reached = r->have && isfinite(r->last.rel_gap) && r->last.rel_gap <= r->target;
        r->peak = NAN;
    }
    return 0;
}

/* Each row's peak relative gap, for a tuned experiment's excursion rule. */
static int view_peaks(struct store *st, struct experiment_view *v, struct store_err *e)
{
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < v->n; i++)
        rc = store_metrics_peak(st, v->rows[i].job->id, &v->rows[i].peak, e);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* The p-quantile of v[0..n) sorted, linear between order statistics. */
static double quantile(const double *v, size_t n, double p)
{
    double h = (double)(n - 1) * p;
    size_t lo = (size_t)h;

    return lo + 1 >= n ? v[n - 1] : v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

static void spread_of(double *v, size_t n, struct experiment_spread *s)
{
    s->n = n;
    if (n == 0) {
        s->median = s->q1 = s->q3 = s->min = s->max = NAN;
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    s->min = v[0];
    s->max = v[n - 1];
    s->median = quantile(v, n, 0.5);
    s->q1 = quantile(v, n, 0.25);
    s->q3 = quantile(v, n, 0.75);
}

void experiment_group_summarise(const struct experiment_row *rows,
                                struct experiment_group *g)
{
    double rounds[EXPERIMENTS_MAX_JOBS], bits[EXPERIMENTS_MAX_JOBS];
    double seconds[EXPERIMENTS_MAX_JOBS], grads[EXPERIMENTS_MAX_JOBS];
    size_t m = 0;

    g->finished = 0;
    g->peak = NAN;
    for (size_t k = 0; k < g->n && m < EXPERIMENTS_MAX_JOBS; k++) {
        const struct experiment_row *r = &rows[g->rows[k]];

        if (r->peak > g->peak || (isnan(g->peak) && !isnan(r->peak)))
            g->peak = r->peak;
        g->finished += r->job->state != STORE_JOB_QUEUED &&
                       r->job->state != STORE_JOB_RUNNING;
        if (!r->reached)
            continue;
        rounds[m] = (double)r->last.round;
        bits[m] = r->last.bits_up;
        seconds[m] = r->last.seconds;
        grads[m] = r->last.grad_evals;
        m++;
    }
    g->reached = m;
    spread_of(rounds, m, &g->rounds);
    spread_of(bits, m, &g->bits_up);
    spread_of(seconds, m, &g->seconds);
    spread_of(grads, m, &g->grad_evals);
}

/* A job's spec without what varies between the seeds of one run. */
static json_t *group_key(const json_t *spec)
{
    json_t *k = spec ? json_deep_copy(spec) : NULL;

    if (k) {
        json_object_del(k, "seed");
        json_object_del(k, "name");
    }
    return k;
}

size_t experiments_group_jobs(const struct store_job *jobs, size_t n, size_t *gid)
{
    json_t **keys = calloc(n ? n : 1, sizeof *keys);
    size_t ng = 0;

    for (size_t i = 0; i < n; i++) {
        json_t *spec = jobs[i].spec ? json_loads(jobs[i].spec, 0, NULL) : NULL;

        gid[i] = ng;
        if (keys) {
            keys[i] = group_key(spec);
            for (size_t k = 0; k < i && keys[i]; k++) {
                if (keys[k] && json_equal(keys[k], keys[i])) {
                    gid[i] = gid[k];
                    break;
                }
            }
        }
        ng += gid[i] == ng;
        json_decref(spec);
    }
    for (size_t i = 0; keys && i < n; i++)
        json_decref(keys[i]);
    free(keys);
    return ng;
}

/* The runs grouped by all but their seed, each group's spreads. */
static int view_groups(struct experiment_view *v, struct store_err *e)
{
    size_t *gid = malloc((v->n ? v->n : 1) * sizeof *gid), at = 0;

    v->group_rows = malloc((v->n ? v->n : 1) * sizeof *v->group_rows);
    v->identity = malloc((v->n ? v->n : 1) * sizeof *v->identity);
    if (!gid || !v->group_rows || !v->identity) {
        free(gid);
        return view_enomem(e);
    }
    for (size_t i = 0; i < v->n; i++)
        v->identity[i] = i;
    v->ngroups = experiments_group_jobs(v->jobs, v->n, gid);
    if (!(v->groups = calloc(v->ngroups ? v->ngroups : 1, sizeof *v->groups))) {
        free(gid);
        return view_enomem(e);
    }
    for (size_t g = 0; g < v->ngroups; g++) {
        v->groups[g].rows = v->group_rows + at;
        for (size_t i = 0; i < v->n; i++)
            if (gid[i] == g)
                v->group_rows[at++] = i;
        v->groups[g].n = (size_t)(v->group_rows + at - v->groups[g].rows);
        experiment_group_summarise(v->rows, &v->groups[g]);
    }
    free(gid);
    return 0;
}

/* Whether group a beats group b (NULL: none yet) as a tuned variant's
   best: every seed reached, fewer median rounds, ties by median bits.
   The excursion rule is applied apart (excursion_ok). */
static int tuned_better(const struct experiment_group *a, const struct experiment_group *b)
{
    if (a->reached == 0 || a->reached < a->n)
        return 0;
    return !b || a->rounds.median < b->rounds.median ||
           (a->rounds.median == b->rounds.median &&
            a->bits_up.median < b->bits_up.median);
}

/* The excursion rule: no run of the group's relative gap ever rose above
   max (a group without rows yet passes). */
static int excursion_ok(const struct experiment_group *g, double max)
{
    return !(g->peak > max);
}

/* For a tuned experiment, each variant's default and best multiplier.
   Its jobs are variant-major, then the grid, then the seeds
   (experiments_create). 0, or STORE_ENOMEM. */
static int view_tuned(struct experiment_view *v, struct store_err *e)
{
    json_t *spec = json_loads(v->x.spec, 0, NULL);
    json_t *tune = json_object_get(spec, "tune");
    double grid[EXPERIMENTS_MAX_TUNE_VALUES + 1];
    uint64_t seeds[EXPERIMENTS_MAX_SEEDS];
    size_t ngrid = 0, nseeds = 0, nvar = json_array_size(json_object_get(spec, "variants"));
    size_t runs, S;
    struct spec_problem sp;
    const char *axis;
    int rc = 0;

    v->seeds = experiments_seeds_parse(spec, seeds, &nseeds, &sp) == 0 && nseeds ? nseeds : 1;
    experiments_excursion_parse(spec, &v->max_excursion, &sp);
    S = v->seeds;
    if (!tune || experiments_tune_parse(tune, grid, &ngrid, &axis, &sp) < 0 || nvar == 0)
        goto out;
    runs = tune_runs(grid, ngrid);
    if (v->n != nvar * runs * S)
        goto out;               /* not as experiments_create made it */
    if (!(v->tuned = calloc(nvar, sizeof *v->tuned))) {
        rc = view_enomem(e);
        goto out;
    }
    v->ntuned = nvar;
    v->tune_axis = axis;
    for (size_t i = 0; i < nvar; i++) {
        struct experiment_tuned *t = &v->tuned[i];
        int have_best = 0, have_excluded = 0;
        size_t best_k = 0;

        t->first = i * runs * S;
        t->count = runs * S;
        t->default_row = t->best_row = t->excluded_row = -1;
        t->finished = 0;
        for (size_t k = 0; k < runs; k++) {
            struct experiment_group g = {v->identity + t->first + k * S, S, 0, 0, NAN,
                                         {0}, {0}, {0}, {0}};

            experiment_group_summarise(v->rows, &g);
            t->finished += g.finished;
            if (grid[k] == 1.0) {
                t->default_row = (long)(t->first + k * S);
                t->default_group = g;
            }
            if (!excursion_ok(&g, v->max_excursion)) {
                if (tuned_better(&g, have_excluded ? &t->excluded_group : NULL)) {
                    t->excluded_row = (long)(t->first + k * S);
                    t->excluded_group = g;
                    have_excluded = 1;
                }
            } else if (tuned_better(&g, have_best ? &t->best_group : NULL)) {
                t->best_row = (long)(t->first + k * S);
                t->best_group = g;
                best_k = k;
                have_best = 1;
            }
        }
        /* An excluded run is worth telling only if it beat the best. */
        if (have_excluded && have_best && !tuned_better(&t->excluded_group, &t->best_group))
            t->excluded_row = -1;
        t->best_edge = 0;
        if (have_best && runs > 1) {
            size_t below = 0, above = 0;

            for (size_t k = 0; k < runs; k++) {
                below += grid[k] < grid[best_k];
                above += grid[k] > grid[best_k];
            }
            t->best_edge = below == 0 ? -1 : above == 0 ? 1 : 0;
        }
    }
out:
    json_decref(spec);
    return rc;
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
    if (rc == 0 && strstr(v->x.spec ? v->x.spec : "", "\"tune\""))
        rc = view_peaks(st, v, e);
    app_reader_done(a, st);
    if (rc == 0)
        rc = view_groups(v, e);
    if (rc == 0)
        rc = view_tuned(v, e);
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
    if (rc == 0)
        rc = view_groups(v, e);
    return rc;
}
