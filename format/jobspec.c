/*
 * The job spec parser. It checks every key of the document and reports every
 * problem it finds, each with the JSON path of the field and a sentence
 * naming what is allowed, because the REST API answers 422 with the list.
 * Writing a spec out (its canonical form) is jobspec_write.c's.
 */
#include "jobspec.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/algo.h"
#include "ecopt/error.h"
#include "jobspec_int.h"
#include "utf8.h"

/* The top-level keys, in the order the canonical form writes them. */
static const char *const top_keys[] = {
    "dataset", "loss", "lambda1", "lambda2", "lambda2_rel", "workers",
    "algorithm", "compressor", "compressor_down", "batch", "participation",
    "p", "step_size",
    "step_multiplier",
    "smoothness_multiplier", "eclk_rule", "eclk_guard", "eclk_guard_threshold",
    "econtrol_eta", "max_rounds", "target", "eval_every", "seed", "split", "split_alpha", "shuffle",
    "max_seconds",
    "name", "labels", "backend", "procs",
};

static const char *const compressor_keys[] = {"type", "k", "k_frac", "s"};

static const char *const backend_names[JOBSPEC_BACKEND_COUNT] = {
#define BACKEND_NAME(e, name, launcher) [e] = name,
    JOBSPEC_BACKENDS(BACKEND_NAME)
#undef BACKEND_NAME
};

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* Enough for any list of names the engine offers. */
#define MAX_NAMES 32

const char *jobspec_backend_name(enum jobspec_backend b)
{
    return (unsigned)b < JOBSPEC_BACKEND_COUNT ? backend_names[b] : NULL;
}

int jobspec_backend_from_name(const char *name, enum jobspec_backend *out)
{
    for (int i = 0; i < JOBSPEC_BACKEND_COUNT; i++) {
        if (strcmp(name, backend_names[i]) == 0) {
            *out = (enum jobspec_backend)i;
            return 0;
        }
    }
    return EC_EINVAL;
}

void jobspec_clear(struct jobspec *spec)
{
    memset(spec, 0, sizeof *spec);
    ec_job_defaults(&spec->job);
    spec->backend = JOBSPEC_BACKEND_PROCESS;
}

/* ---- Collecting problems --------------------------------------------- */

struct check {
    struct jobspec_errors *errs;   /* NULL: only count */
    unsigned found;
};

/*
 * Records a problem with field (already a safe JSON path) and a detail
 * written by the caller into the returned text; NULL when there is no room
 * left, and then only the count grows.
 */
static struct text *problem(struct check *c, const char *field,
                            struct text *detail)
{
    struct jobspec_error *e;
    struct text path;

    c->found++;
    if (!c->errs)
        return NULL;
    if (c->errs->count == JOBSPEC_MAX_ERRORS) {
        c->errs->dropped++;
        return NULL;
    }
    e = &c->errs->item[c->errs->count++];
    jt_init(&path, e->field, sizeof e->field);
    jt_put(&path, field, strlen(field));
    jt_init(detail, e->detail, sizeof e->detail);
    return detail;
}

/* A problem whose detail is a sentence, plus "(got ...)" when v is set. */
static void fail(struct check *c, const char *field, const json_t *v,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static void fail(struct check *c, const char *field, const json_t *v,
                 const char *fmt, ...)
{
    struct text detail, *t = problem(c, field, &detail);
    char sentence[320];
    va_list ap;

    if (!t)
        return;
    va_start(ap, fmt);
    vsnprintf(sentence, sizeof sentence, fmt, ap);
    va_end(ap);
    jt_put(t, sentence, strlen(sentence));
    if (v) {
        jt_add(t, " (got ");
        jt_value(t, v);
        jt_add(t, ")");
    }
}

/* "prefix.key", with the key escaped because it may be anything. */
static void join_path(char *buf, size_t len, const char *prefix,
                      const char *key, size_t key_len)
{
    struct text t;

    jt_init(&t, buf, len);
    if (*prefix) {
        jt_add(&t, "%s", prefix);
        jt_put(&t, ".", 1);
    }
    jt_escape(&t, key, key_len, JOBSPEC_LABEL_KEY_MAX, 0);
}

/* ---- Reading one field ----------------------------------------------- */

/* The member, or NULL when it is absent or null: null asks for the default. */
static json_t *member(json_t *obj, const char *key)
{
    json_t *v = obj ? json_object_get(obj, key) : NULL;

    return json_is_null(v) ? NULL : v;
}

/* Every key of obj must be one of the allowed. */
static void check_keys(struct check *c, json_t *obj, const char *prefix,
                       const char *const *allowed, size_t nallowed)
{
    for (void *it = json_object_iter(obj); it;
         it = json_object_iter_next(obj, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it), i;
        char field[sizeof ((struct jobspec_error *)0)->field];
        struct text detail, *t;

        for (i = 0; i < nallowed; i++)
            if (strlen(allowed[i]) == key_len &&
                memcmp(allowed[i], key, key_len) == 0)
                break;
        if (i < nallowed)
            continue;
        join_path(field, sizeof field, prefix, key, key_len);
        if ((t = problem(c, field, &detail))) {
            jt_add(t, "unknown key; allowed keys are: ");
            jt_names(t, allowed, nallowed);
        }
    }
}

/*
 * The readers below take the member already looked up. Each returns 1 when
 * the value is set and valid (and stores it), 0 when it is absent (v is
 * NULL), and -1 after reporting a wrong value.
 */

static int read_int(struct check *c, const char *field, const json_t *v,
                    long long lo, long long hi, long long *out)
{
    if (!v)
        return 0;
    if (json_is_integer(v) && json_integer_value(v) >= lo &&
        json_integer_value(v) <= hi) {
        *out = json_integer_value(v);
        return 1;
    }
    fail(c, field, v, "must be an integer in %lld..%lld", lo, hi);
    return -1;
}

/* A range of doubles; an open end excludes its bound, INFINITY has none. */
struct range {
    double lo, hi;
    int lo_open, hi_open;
};

static int in_range(double x, const struct range *r)
{
    return (r->lo_open ? x > r->lo : x >= r->lo) &&
           (r->hi_open ? x < r->hi : x <= r->hi);
}

static int read_number(struct check *c, const char *field, const json_t *v,
                       struct range r, double *out)
{
    char lo[40], hi[40];
    double x;

    if (!v)
        return 0;
    /* Integers are numbers too: "lambda1": 0 is as good as 0.0. */
    if (json_is_number(v)) {
        x = json_number_value(v);
        if (isfinite(x) && in_range(x, &r)) {
            *out = x;
            return 1;
        }
    }
    jt_double(lo, sizeof lo, r.lo, 0);
    jt_double(hi, sizeof hi, r.hi, 0);
    if (isinf(r.hi))
        fail(c, field, v, "must be a number %s %s", r.lo_open ? ">" : ">=",
             lo);
    else
        fail(c, field, v, "must be a number in %c%s, %s%c",
             r.lo_open ? '(' : '[', lo, hi, r.hi_open ? ')' : ']');
    return -1;
}

static int read_bool(struct check *c, const char *field, const json_t *v,
                     int *out)
{
    if (!v)
        return 0;
    if (json_is_boolean(v)) {
        *out = json_is_true(v);
        return 1;
    }
    fail(c, field, v, "must be true or false");
    return -1;
}

/*
 * A string of min_len..max_len bytes without NUL, copied into out (which
 * has room for max_len + 1). The length is told, not the text, when it is
 * too long to quote usefully.
 */
static int read_string(struct check *c, const char *field, const json_t *v,
                       size_t min_len, size_t max_len, char *out)
{
    size_t len;

    if (!v)
        return 0;
    if (!json_is_string(v)) {
        fail(c, field, v, "must be a string of %zu..%zu bytes", min_len,
             max_len);
        return -1;
    }
    len = json_string_length(v);
    if (len < min_len || len > max_len) {
        fail(c, field, NULL, "must be a string of %zu..%zu bytes (got %zu)",
             min_len, max_len, len);
        return -1;
    }
    if (memchr(json_string_value(v), '\0', len)) {
        fail(c, field, NULL, "must not contain a NUL character (\\u0000)");
        return -1;
    }
    memcpy(out, json_string_value(v), len + 1);
    return 1;
}

/*
 * Where s holds a control character (C0, DEL or C1, as UTF-8), -1 if
 * none: text a person reads in a terminal or a page must not carry
 * escape sequences, bells or line breaks.
 */
static long control_at(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;

    for (size_t i = 0; i < len; i++)
        if (u[i] < 0x20 || u[i] == 0x7f ||
            (u[i] == 0xc2 && i + 1 < len && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f))
            return (long)i;
    return -1;
}

/* read_string for text shown to people: no control characters either. */
static int read_text(struct check *c, const char *field, const json_t *v,
                     size_t min_len, size_t max_len, char *out)
{
    int rc = read_string(c, field, v, min_len, max_len, out);
    long at;

    if (rc == 1 && (at = control_at(out, strlen(out))) >= 0) {
        unsigned code = (unsigned char)out[at] == 0xc2 ? (unsigned char)out[at + 1]
                                                       : (unsigned char)out[at];
        fail(c, field, NULL, "must not contain control characters (U+%04X at "
             "byte %ld)", code, at);
        out[0] = '\0';
        return -1;
    }
    return rc;
}

/* One of n names; *out is its index. A NUL inside never matches. */
static int read_choice(struct check *c, const char *field, const json_t *v,
                       const char *const *names, size_t n, size_t *out)
{
    struct text detail, *t;

    if (!v)
        return 0;
    if (json_is_string(v)) {
        for (size_t i = 0; i < n; i++) {
            if (strlen(names[i]) == json_string_length(v) &&
                memcmp(names[i], json_string_value(v),
                       json_string_length(v)) == 0) {
                *out = i;
                return 1;
            }
        }
    }
    if ((t = problem(c, field, &detail))) {
        jt_add(t, "must be one of: ");
        jt_names(t, names, n);
        jt_add(t, " (got ");
        jt_value(t, v);
        jt_add(t, ")");
    }
    return -1;
}

/* The names the engine knows, from its own tables, so lists stay current. */
static size_t algo_names(const char **names)
{
    size_t n = 0;

    for (int i = 0; i < EC_ALGO_COUNT && n < MAX_NAMES; i++)
        if (ec_algo_name((ec_algo_id)i))
            names[n++] = ec_algo_name((ec_algo_id)i);
    return n;
}

static size_t eclk_rule_names(const char **names)
{
    size_t n = 0;

    for (int i = 0; i < EC_ECLK_RULE_COUNT && n < MAX_NAMES; i++)
        names[n++] = ec_eclk_rule_name((ec_eclk_rule)i);
    return n;
}

/*
 * ECLK's rule and guard (docs/algorithms.md, "ECLK's rules"): eclk only; a
 * threshold needs the guard on.
 */
static void read_eclk(struct check *c, json_t *doc, ec_job *job)
{
    static const char *const keys[] = {"eclk_rule", "eclk_guard",
                                       "eclk_guard_threshold"};
    const char *names[MAX_NAMES];
    size_t n = eclk_rule_names(names), index;
    int on;

    if (job->algorithm != EC_ALGO_ECLK) {
        for (size_t i = 0; i < COUNT_OF(keys); i++)
            if (member(doc, keys[i]))
                fail(c, keys[i], NULL, "applies to algorithm eclk only (got %s)",
                     ec_algo_name(job->algorithm));
        return;
    }
    if (read_choice(c, "eclk_rule", member(doc, "eclk_rule"), names, n, &index) == 1)
        job->eclk_rule = (int)index;
    if (read_bool(c, "eclk_guard", member(doc, "eclk_guard"), &on) == 1)
        job->eclk_guard = on;
    if (read_number(c, "eclk_guard_threshold", member(doc, "eclk_guard_threshold"),
                    (struct range){1, EC_ECLK_GUARD_THRESHOLD_MAX, 1, 0},
                    &job->eclk_guard_threshold) == 1 &&
        job->eclk_guard == 0)
        fail(c, "eclk_guard_threshold", NULL,
             "cannot be given with eclk_guard false; a threshold needs the guard on");
}

static size_t loss_names(const char **names)
{
    size_t n = 0;

    while (n < MAX_NAMES && ec_loss_name((ec_loss)n))
        names[n] = ec_loss_name((ec_loss)n), n++;
    return n;
}

static size_t comp_names(const char **names)
{
    size_t n = 0;

    while (n < MAX_NAMES && ec_comp_name((ec_comp_type)n))
        names[n] = ec_comp_name((ec_comp_type)n), n++;
    return n;
}

static size_t split_names(const char **names)
{
    size_t n = 0;

    while (n < MAX_NAMES && ec_split_name((ec_split)n))
        names[n] = ec_split_name((ec_split)n), n++;
    return n;
}

/* ---- The compound fields --------------------------------------------- */

static int takes(ec_comp_type t, ec_comp_param param)
{
    return ec_comp_info_of(t)->param == param;
}

/* "topk, randk and randk-unbiased": the compressors taking param. */
static const char *takers(ec_comp_param param, char *buf, size_t len)
{
    size_t n = 0, count = 0, seen = 0;

    for (int t = 0; t < EC_COMP_COUNT; t++)
        count += takes((ec_comp_type)t, param);
    buf[0] = '\0';
    for (int t = 0; t < EC_COMP_COUNT && n < len; t++) {
        if (!takes((ec_comp_type)t, param))
            continue;
        seen++;
        n += (size_t)snprintf(buf + n, len - n, "%s%s",
                              seen == 1 ? "" : seen == count ? " and " : ", ",
                              ec_comp_name((ec_comp_type)t));
    }
    return buf;
}

/*
 * The type name and which of k, k_frac and s it takes: counts (k) and the
 * dither levels (s) only make sense for their own families, so anything
 * else is refused rather than silently ignored. A dither without s gets
 * one level, the coarsest quantiser, which is the usual default.
 */
static void read_compressor(struct check *c, json_t *doc, const char *key,
                            ec_comp_spec *spec, double *k_frac_out)
{
    const char *names[MAX_NAMES];
    size_t nnames = comp_names(names), index;
    char list[256];
    json_t *v = member(doc, key), *obj = NULL, *type;
    json_t *k, *k_frac, *s;
    long long count;
    int known;
    ec_comp_type t;
    struct text detail, *text;
    char f_type[48], f_k[48], f_k_frac[48], f_s[48];

    snprintf(f_type, sizeof f_type, "%s.type", key);
    snprintf(f_k, sizeof f_k, "%s.k", key);
    snprintf(f_k_frac, sizeof f_k_frac, "%s.k_frac", key);
    snprintf(f_s, sizeof f_s, "%s.s", key);
    if (!v)
        return;
    if (json_is_string(v)) {
        /* "topk" is short for {"type": "topk"}. */
        type = v;
        known = read_choice(c, key, type, names, nnames, &index);
    } else if (json_is_object(v)) {
        obj = v;
        check_keys(c, obj, key, compressor_keys,
                   COUNT_OF(compressor_keys));
        type = member(obj, "type");
        known = read_choice(c, f_type, type, names, nnames,
                            &index);
        if (known == 0 && (text = problem(c, f_type, &detail))) {
            jt_add(text, "is required; one of: ");
            jt_names(text, names, nnames);
        }
    } else {
        if ((text = problem(c, key, &detail))) {
            jt_add(text, "must be an object {type, k, k_frac, s} or a "
                           "compressor name, one of: ");
            jt_names(text, names, nnames);
            jt_add(text, " (got ");
            jt_value(text, v);
            jt_add(text, ")");
        }
        return;
    }
    k = member(obj, "k");
    k_frac = member(obj, "k_frac");
    s = member(obj, "s");
    if (known != 1) {
        /* Without a type only the values themselves can be checked. */
        read_int(c, f_k, k, 1, UINT32_MAX, &count);
        read_number(c, f_k_frac, k_frac,
                    (struct range){0, 1, 1, 0}, k_frac_out);
        read_int(c, f_s, s, 1, EC_JOB_MAX_DITHER_LEVELS, &count);
        return;
    }
    if (ec_comp_from_name(names[index], &t) < 0) {
        fail(c, obj ? f_type : key, NULL,
             "is not known to the engine");
        return;
    }
    spec->type = t;
    if (takes(t, EC_COMP_PARAM_K)) {
        if (k && k_frac)
            fail(c, f_k, NULL,
                 "cannot be given together with %s; give one of them",
                 f_k_frac);
        else if (!k && !k_frac)
            fail(c, f_k, NULL,
                 "is required for compressor type %s: give %s (an "
                 "integer >= 1) or %s (a number in (0, 1])", names[index],
                 f_k, f_k_frac);
        if (read_int(c, f_k, k, 1, UINT32_MAX, &count) == 1)
            spec->k = (uint32_t)count;
        read_number(c, f_k_frac, k_frac,
                    (struct range){0, 1, 1, 0}, k_frac_out);
    } else {
        if (k)
            fail(c, f_k, NULL,
                 "is not allowed for compressor type %s; only %s take k",
                 names[index], takers(EC_COMP_PARAM_K, list, sizeof list));
        if (k_frac)
            fail(c, f_k_frac, NULL,
                 "is not allowed for compressor type %s; only %s take "
                 "k_frac", names[index], takers(EC_COMP_PARAM_K, list, sizeof list));
    }
    if (takes(t, EC_COMP_PARAM_S)) {
        spec->s = JOBSPEC_DEFAULT_DITHER_LEVELS;
        if (read_int(c, f_s, s, 1, EC_JOB_MAX_DITHER_LEVELS,
                     &count) == 1)
            spec->s = (uint32_t)count;
    } else if (s) {
        fail(c, f_s, NULL,
             "is not allowed for compressor type %s; only %s take s",
             names[index], takers(EC_COMP_PARAM_S, list, sizeof list));
    }
}

static int label_key_ok(const char *key, size_t len)
{
    if (len < 1 || len > JOBSPEC_LABEL_KEY_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = key[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' ||
              ch == '-'))
            return 0;
    }
    return 1;
}

static int label_cmp(const void *a, const void *b)
{
    return strcmp(((const struct jobspec_label *)a)->key,
                  ((const struct jobspec_label *)b)->key);
}

/*
 * Labels are kept sorted by key so that equal label sets give equal specs
 * and the same canonical JSON whatever order they were written in. Only
 * one level is looked at: a nested value is a type error, never a descent.
 */
static void read_labels(struct check *c, json_t *doc, struct jobspec *spec)
{
    json_t *v = member(doc, "labels");
    size_t n;

    if (!v)
        return;
    if (!json_is_object(v)) {
        fail(c, "labels", v,
             "must be an object mapping keys to strings, with at most %d "
             "entries", JOBSPEC_LABELS_MAX);
        return;
    }
    n = json_object_size(v);
    if (n > JOBSPEC_LABELS_MAX)
        fail(c, "labels", NULL, "must have at most %d entries (got %zu)",
             JOBSPEC_LABELS_MAX, n);
    for (void *it = json_object_iter(v); it;
         it = json_object_iter_next(v, it)) {
        const char *key = json_object_iter_key(it);
        size_t key_len = json_object_iter_key_len(it);
        char field[sizeof ((struct jobspec_error *)0)->field];
        struct jobspec_label *label;
        struct text detail, *t;

        if (!label_key_ok(key, key_len)) {
            if ((t = problem(c, "labels", &detail))) {
                jt_add(t, "key ");
                jt_quote(t, key, key_len);
                jt_add(t, " must be 1..%d characters of A-Z, a-z, 0-9, "
                            "'_', '.' and '-'", JOBSPEC_LABEL_KEY_MAX);
            }
            continue;
        }
        join_path(field, sizeof field, "labels", key, key_len);
        if (spec->nlabels == JOBSPEC_LABELS_MAX) {
            /* Already reported as too many; still check the rest. */
            char scratch[JOBSPEC_LABEL_VALUE_MAX + 1];

            read_text(c, field, json_object_iter_value(it), 0,
                      JOBSPEC_LABEL_VALUE_MAX, scratch);
            continue;
        }
        label = &spec->labels[spec->nlabels];
        if (read_text(c, field, json_object_iter_value(it), 0,
                      JOBSPEC_LABEL_VALUE_MAX, label->value) == 1) {
            memcpy(label->key, key, key_len);
            label->key[key_len] = '\0';
            spec->nlabels++;
        }
    }
    qsort(spec->labels, spec->nlabels, sizeof spec->labels[0], label_cmp);
}

/* ---- The document ---------------------------------------------------- */

#define ABOVE(x) ((struct range){(x), INFINITY, 1, 0})
#define AT_LEAST(x) ((struct range){(x), INFINITY, 0, 0})
#define LAMBDA_MAX 1e6
/*
 * The least strong convexity taken. Below it kappa = L_f / mu is past what
 * a double resolves against L_f (at 5e-324 the step size is infinite and
 * the job could never start): refused at submit, naming the bound.
 */
#define LAMBDA2_MIN 1e-12
#define LAMBDA1_RANGE ((struct range){0, LAMBDA_MAX, 0, 0})
#define LAMBDA2_RANGE ((struct range){LAMBDA2_MIN, LAMBDA_MAX, 0, 0})

/* The largest Dirichlet concentration taken; past it a split is iid. */
#define SPLIT_ALPHA_MAX 1e6

/* split, split_alpha and the older `shuffle: true` (= split shuffled). */
static void read_split(struct check *c, json_t *doc, ec_job *job)
{
    const char *names[MAX_NAMES];
    size_t n = split_names(names), index;
    int has_split, shuffle = 0;

    has_split = read_choice(c, "split", member(doc, "split"), names, n,
                            &index) == 1;
    if (has_split)
        job->split = (ec_split)index;
    if (read_bool(c, "shuffle", member(doc, "shuffle"), &shuffle) == 1 &&
        shuffle) {
        if (has_split && job->split != EC_SPLIT_SHUFFLED)
            fail(c, "shuffle", NULL, "true means split \"shuffled\" and "
                 "cannot be given with split \"%s\"; give split alone",
                 ec_split_name(job->split));
        job->split = EC_SPLIT_SHUFFLED;
    }
    if (read_number(c, "split_alpha", member(doc, "split_alpha"),
                    (struct range){0, SPLIT_ALPHA_MAX, 1, 0},
                    &job->split_alpha) == 1 &&
        job->split != EC_SPLIT_DIRICHLET)
        fail(c, "split_alpha", NULL, "applies to split \"dirichlet\" alone "
             "(split is \"%s\")", ec_split_name(job->split));
}

static void read_spec(struct check *c, json_t *doc, struct jobspec *spec)
{
    ec_job *job = &spec->job;
    const char *names[MAX_NAMES];
    size_t n, index;
    long long x;
    int has_lambda2, has_lambda2_rel, has_step, has_multiplier;

    check_keys(c, doc, "", top_keys, COUNT_OF(top_keys));

    if (read_string(c, "dataset", member(doc, "dataset"), 1,
                    sizeof job->dataset - 1, job->dataset) == 0)
        fail(c, "dataset", NULL,
             "is required: a path or a dataset name of 1..%zu bytes",
             sizeof job->dataset - 1);

    n = loss_names(names);
    if (read_choice(c, "loss", member(doc, "loss"), names, n, &index) == 1)
        job->loss = (ec_loss)index;

    /* Regularizers past 1e6 leave nothing of the data in the problem, and
     * near DBL_MAX they overflow the constants: refused, not run. */
    read_number(c, "lambda1", member(doc, "lambda1"), LAMBDA1_RANGE, &job->lambda1);
    /* lambda2 is the strong convexity mu (kappa = L_f / mu): what is near
     * 0 is refused here, not in the job. Exactly 0, the general convex
     * problem, is taken; the engine says for which problems and methods
     * (docs/algorithms.md, "General convex problems: lambda2 = 0"). */
    {
        const json_t *v = member(doc, "lambda2");
        double x = json_is_number(v) ? json_number_value(v) : NAN;
        struct range r = LAMBDA2_RANGE;

        has_lambda2 = v != NULL;
        if (v && x == 0.0)
            job->lambda2 = 0.0;         /* -0 too */
        else if (v && isfinite(x) && in_range(x, &r))
            job->lambda2 = x;
        else if (v)
            fail(c, "lambda2", v, "must be 0 (a general convex problem) or a "
                                  "number in [1e-12, 1000000]");
    }
    has_lambda2_rel = read_number(c, "lambda2_rel", member(doc, "lambda2_rel"),
                                  LAMBDA2_RANGE, &job->lambda2_rel) != 0;
    if (has_lambda2 && has_lambda2_rel)
        fail(c, "lambda2", NULL, "cannot be given together with "
                                 "lambda2_rel; give one of them");
    else if (!has_lambda2 && !has_lambda2_rel)
        job->lambda2_rel = JOBSPEC_DEFAULT_LAMBDA2_REL;

    if (read_int(c, "workers", member(doc, "workers"), 1,
                 EC_JOB_MAX_WORKERS, &x) == 1)
        job->workers = (uint32_t)x;

    n = algo_names(names);
    if (read_choice(c, "algorithm", member(doc, "algorithm"), names, n,
                    &index) == 1 &&
        ec_algo_from_name(names[index], &job->algorithm) < 0)
        fail(c, "algorithm", NULL, "is not known to the engine");

    read_compressor(c, doc, "compressor", &job->compressor, &job->k_frac);
    /* EF21-P's broadcast compressor; which methods and types admit it is
     * the engine's (ec_algo_down_check, asked at submit). */
    read_compressor(c, doc, "compressor_down", &job->compressor_down,
                    &job->k_frac_down);

    if (json_is_string(member(doc, "batch")) &&
        strcmp(json_string_value(member(doc, "batch")), "full") == 0)
        job->batch = EC_JOB_BATCH_FULL;
    else if (json_is_string(member(doc, "batch")))
        fail(c, "batch", member(doc, "batch"),
             "must be an integer >= 1 or \"full\" (the whole shard)");
    else if (read_int(c, "batch", member(doc, "batch"), 1, UINT32_MAX, &x) == 1)
        job->batch = (uint32_t)x;
    read_number(c, "p", member(doc, "p"), (struct range){0, 1, 1, 0},
                &job->p);
    /* A fraction of the workers each round; which methods admit it is the
     * engine's (ec_algo_participation_check, asked at submit). */
    read_number(c, "participation", member(doc, "participation"),
                (struct range){0, 1, 1, 0}, &job->participation);

    has_step = read_number(c, "step_size", member(doc, "step_size"),
                           ABOVE(0), &job->step_size) != 0;
    has_multiplier = read_number(c, "step_multiplier",
                                 member(doc, "step_multiplier"), ABOVE(0),
                                 &job->step_multiplier) != 0;
    if (has_step && has_multiplier)
        fail(c, "step_size", NULL, "cannot be given together with "
                                   "step_multiplier; give one of them");
    read_number(c, "smoothness_multiplier", member(doc, "smoothness_multiplier"),
                ABOVE(0), &job->smoothness_multiplier);

    read_eclk(c, doc, job);
    /* EControl's eta (docs/algorithms.md, "EControl"): econtrol only. */
    if (read_number(c, "econtrol_eta", member(doc, "econtrol_eta"),
                    (struct range){0, 1, 0, 0}, &job->econtrol_eta) == 1 &&
        job->algorithm != EC_ALGO_ECONTROL)
        fail(c, "econtrol_eta", NULL, "applies to algorithm econtrol only (got %s)",
             ec_algo_name(job->algorithm));

    if (read_int(c, "max_rounds", member(doc, "max_rounds"), 1,
                 (long long)EC_JOB_MAX_ROUNDS, &x) == 1)
        job->max_rounds = (uint64_t)x;
    read_number(c, "target", member(doc, "target"),
                (struct range){0, 1, 0, 1}, &job->target);
    if (read_int(c, "eval_every", member(doc, "eval_every"), 1, UINT32_MAX,
                 &x) == 1)
        job->eval_every = (uint32_t)x;
    if (read_int(c, "seed", member(doc, "seed"), 0,
                 (long long)JOBSPEC_MAX_SEED, &x) == 1)
        job->seed = (uint64_t)x;
    read_split(c, doc, job);
    read_number(c, "max_seconds", member(doc, "max_seconds"),
                (struct range){0, JOBSPEC_MAX_SECONDS, 1, 0},
                &job->max_seconds);

    read_text(c, "name", member(doc, "name"), 1, JOBSPEC_NAME_MAX, spec->name);
    read_labels(c, doc, spec);
    if (read_choice(c, "backend", member(doc, "backend"), backend_names,
                    JOBSPEC_BACKEND_COUNT, &index) == 1)
        spec->backend = (enum jobspec_backend)index;
    if (read_int(c, "procs", member(doc, "procs"), 1, EC_JOB_MAX_WORKERS,
                 &x) == 1) {
        if ((uint32_t)x > job->workers)
            fail(c, "procs", member(doc, "procs"),
                 "must be at most workers; a process hosts one or more "
                 "workers");
        else
            spec->procs = (uint32_t)x;
    }
}

int jobspec_from_json(json_t *doc, struct jobspec *out,
                      struct jobspec_errors *errs)
{
    struct check c = {errs, 0};
    struct jobspec spec;

    if (errs)
        errs->count = errs->dropped = 0;
    jobspec_clear(&spec);
    if (!doc)
        fail(&c, "", NULL, "must be a JSON object (got nothing)");
    else if (!json_is_object(doc))
        fail(&c, "", doc, "must be a JSON object");
    else
        read_spec(&c, doc, &spec);
    if (c.found) {
        jobspec_clear(out);
        return EC_EINVAL;
    }
    *out = spec;
    return 0;
}

/* Jansson's message, with a first phrase saying what kind of problem. */
static void syntax_problem(struct check *c, const json_error_t *jerr,
                           int empty)
{
    struct text detail, *t = problem(c, "", &detail);
    const char *what, *hint = "", *end;

    if (!t)
        return;
    if (empty) {
        jt_add(t, "the document is empty; a job spec is a JSON object");
        return;
    }
    switch (json_error_code(jerr)) {
    case json_error_duplicate_key:
        what = "duplicate key";
        break;
    case json_error_numeric_overflow:
        what = "number out of range";
        hint = "; integers must fit in 64 bits and reals in a double";
        break;
    case json_error_stack_overflow:
        what = "nesting too deep";
        break;
    case json_error_out_of_memory:
        what = "out of memory";
        break;
    default:
        what = "invalid JSON";
        break;
    }
    /* Jansson keeps its error code in the last byte of text. */
    end = memchr(jerr->text, '\0', sizeof jerr->text - 1);
    jt_add(t, "%s at line %d, column %d: ", what, jerr->line,
             jerr->column);
    jt_escape(t, jerr->text,
                end ? (size_t)(end - jerr->text) : sizeof jerr->text - 1,
                sizeof jerr->text, 0);
    jt_add(t, "%s", hint);
}

/* Only JSON whitespace: an empty file deserves a plainer message. */
static int is_blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return 0;
    return 1;
}

int jobspec_parse(const char *text, size_t len, struct jobspec *out,
                  struct jobspec_errors *errs)
{
    /* Duplicates would let two readers of one body disagree; NULs inside
     * strings are let through so they are reported against their field. */
    const size_t flags =
        JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL | JSON_DECODE_ANY;
    struct check c = {errs, 0};
    json_error_t jerr;
    json_t *doc;
    int rc;

    if (!text)
        len = 0;
    doc = json_loadb(text ? text : "", len, flags, &jerr);
    if (!doc) {
        if (errs)
            errs->count = errs->dropped = 0;
        syntax_problem(&c, &jerr, is_blank(text, len));
        jobspec_clear(out);
        return json_error_code(&jerr) == json_error_out_of_memory
                   ? EC_ENOMEM
                   : EC_EPARSE;
    }
    rc = jobspec_from_json(doc, out, errs);
    json_decref(doc);
    return rc;
}
