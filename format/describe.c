/* JSON and CSV views of engine results, shared by the CLI and the service. */
#include "describe.h"
#include "outcome.h"

#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *describe_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* ---- The metric row's fields (DESCRIBE_METRIC_FIELDS) -------------------- */

enum { KIND_COUNT, KIND_REAL };

struct field {
    const char *name;
    const char *key;        /* ,"name": */
    size_t keylen;
    size_t off;             /* in ec_metric: a uint64_t (COUNT) or a double */
    int kind;
};

#define FIELD_(name, kind, csv)                                             \
    {#name, ",\"" #name "\":", sizeof ",\"" #name "\":" - 1,                \
     offsetof(ec_metric, name), KIND_##kind},
static const struct field fields[] = {DESCRIBE_METRIC_FIELDS(FIELD_)};
#undef FIELD_
#define NFIELDS (sizeof fields / sizeof fields[0])

/* Every key and number of a record (a number at most 25 bytes), its
   marker and braces fit in DESCRIBE_RECORD_MAX. */
#define RECORD_ROOM_(name, kind, csv) +sizeof ",\"" #name "\":" - 1 + 25
_Static_assert(0 DESCRIBE_METRIC_FIELDS(RECORD_ROOM_) + sizeof DESCRIBE_MARKER + 2 <
                   DESCRIBE_RECORD_MAX,
               "a metric record may not fit in DESCRIBE_RECORD_MAX");
#undef RECORD_ROOM_

/* The fields in the order of their keys (strcmp), as the record has them,
   and where among them the record's marker ("type", then "v") goes: before
   by_key[by_key_marker], or at the end when that is NFIELDS. */
static const struct field *by_key[NFIELDS];
static size_t by_key_marker;
static pthread_once_t by_key_once = PTHREAD_ONCE_INIT;

static void sort_keys(void)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        size_t j = i;

        for (; j > 0 && strcmp(by_key[j - 1]->name, fields[i].name) > 0; j--)
            by_key[j] = by_key[j - 1];
        by_key[j] = &fields[i];
    }
    while (by_key_marker < NFIELDS && strcmp(by_key[by_key_marker]->name, "type") <= 0)
        by_key_marker++;
}

static const struct field *const *keys_sorted(void)
{
    pthread_once(&by_key_once, sort_keys);
    return by_key;
}

static uint64_t *count_of(ec_metric *m, const struct field *f)
{
    return (uint64_t *)((char *)m + f->off);
}

static uint64_t count_at(const ec_metric *m, const struct field *f)
{
    return *(const uint64_t *)((const char *)m + f->off);
}

static double real_of(const ec_metric *m, const struct field *f)
{
    return *(const double *)((const char *)m + f->off);
}

json_t *describe_dataset(const ec_dataset *ds)
{
    return json_pack("{s:I, s:I, s:I, s:[o, o]}", "rows", (json_int_t)ds->n_rows,
                     "d", (json_int_t)ds->d, "nnz", (json_int_t)ds->nnz,
                     "labels", describe_real(ds->label_neg),
                     describe_real(ds->label_pos));
}

/* The split: its rule, each shard's rows and positive rows, the range of
 * the shards' positive fractions, and the heterogeneity zeta*^2. */
static json_t *describe_split(const ec_problem *pb)
{
    json_t *rows = json_array(), *pos = json_array();
    double fmin = INFINITY, fmax = -INFINITY;

    for (uint32_t t = 0; rows && pos && t < pb->n; t++) {
        uint32_t m = pb->shards[t].end - pb->shards[t].begin;
        double f = (double)pb->shards[t].positives / m;

        json_array_append_new(rows, json_integer(m));
        json_array_append_new(pos, json_integer(pb->shards[t].positives));
        fmin = f < fmin ? f : fmin;
        fmax = f > fmax ? f : fmax;
    }
    return json_pack("{s:s, s:o, s:o, s:o, s:o, s:[o, o]}", "type",
                     ec_split_name(pb->split), "alpha",
                     describe_real(pb->split_alpha), "zeta_star",
                     describe_real(pb->zeta_star), "rows",
                     rows ? rows : json_null(), "positive_rows",
                     pos ? pos : json_null(), "positive_fraction",
                     describe_real(fmin), describe_real(fmax));
}

json_t *describe_problem(const ec_problem *pb)
{
    uint32_t mmin = UINT32_MAX, mmax = 0;
    json_t *o;

    for (uint32_t t = 0; t < pb->n; t++) {
        uint32_t m = pb->shards[t].end - pb->shards[t].begin;
        mmin = m < mmin ? m : mmin;
        mmax = m > mmax ? m : mmax;
    }
    o = json_pack(
        "{s:s, s:o, s:o, s:I, s:I, s:[I, I], s:o, s:o, s:o, s:o, s:o, s:o, "
        "s:o, s:o, s:{s:s?, s:i, s:o, s:b}}",
        "loss", ec_loss_name(pb->loss), "lambda1", describe_real(pb->lambda1),
        "lambda2", describe_real(pb->lambda2), "workers", (json_int_t)pb->n,
        "d", (json_int_t)pb->d, "shard_rows", (json_int_t)mmin,
        (json_int_t)mmax, "L", describe_real(pb->L), "L_f",
        describe_real(pb->L_f), "L_tilde", describe_real(pb->L_tilde), "mu",
        describe_real(pb->mu), "kappa", describe_real(pb->kappa), "P0",
        describe_real(pb->P0), "P_star", describe_real(pb->P_star),
        "P_star_bound", describe_real(pb->solve_bound), "solver", "method",
        pb->solve_method, "iterations", pb->solve_iters, "bound",
        describe_real(pb->solve_bound), "cached", pb->solve_cached);
    if (o) {
        /* lambda_max(A^T A), which L_f and lambda2_rel are built on */
        json_object_set_new(o, "lambda_max",
                            json_pack("{s:o, s:s, s:I, s:b}", "value",
                                      describe_real(pb->lambda_max), "method",
                                      "lanczos", "steps", (json_int_t)pb->lmax_steps,
                                      "cached", pb->lmax_cached));
        json_object_set_new(o, "split", describe_split(pb));
    }
    return o;
}

json_t *describe_params(const ec_params *prm)
{
    json_t *o = json_pack(
        "{s:s, s:{s:s, s:I, s:I}, s:I, s:o, s:o, s:o, s:o, s:o}",
        "algorithm", ec_algo_name(prm->algo), "compressor", "type",
        ec_comp_name(prm->comp.type), "k", (json_int_t)prm->comp.k, "s",
        (json_int_t)prm->comp.s, "batch", (json_int_t)prm->batch, "delta",
        describe_real(prm->delta), "p", describe_real(prm->p), "step",
        describe_real(prm->gamma), "theory_step",
        describe_real(prm->theory_step), "step_multiplier",
        describe_real(prm->step_multiplier));

    if (!o)
        return NULL;
    json_object_set_new(o, "smoothness_multiplier",
                        describe_real(prm->smoothness_multiplier));
    /* The fraction asked and the workers it makes a round (all n at 1). */
    json_object_set_new(o, "participation", describe_real(prm->participation));
    json_object_set_new(o, "participants", json_integer((json_int_t)prm->participants));
    /* EF21-P: the broadcast's compressor, its alpha and the factor it
     * puts on the method's step (docs/algorithms.md, "Defaults"). */
    if (prm->comp_down.type != EC_COMP_NONE) {
        json_object_set_new(o, "compressor_down",
                            json_pack("{s:s, s:I}", "type",
                                      ec_comp_name(prm->comp_down.type), "k",
                                      (json_int_t)prm->comp_down.k));
        json_object_set_new(o, "alpha_down", describe_real(prm->delta_down));
        json_object_set_new(o, "down_step_factor",
                            describe_real(prm->down_step_factor));
    }
    if (ec_algo_is(prm->algo, EC_FAMILY_KATYUSHA)) {
        json_object_set_new(o, "theta1", describe_real(prm->theta1));
        json_object_set_new(o, "theta2", describe_real(prm->theta2));
        json_object_set_new(o, "eta", describe_real(prm->eta));
        json_object_set_new(o, "sigma", describe_real(prm->sigma));
        json_object_set_new(o, "L_eff", describe_real(prm->L_eff));
    }
    if (prm->algo == EC_ALGO_ECLK) {
        /* What ran (docs/algorithms.md, "ECLK's rules"): delta_rule is
         * eclk_rule's older name. */
        json_object_set_new(o, "eclk_rule",
                            json_string(ec_eclk_rule_name(prm->eclk_rule)));
        json_object_set_new(o, "delta_rule",
                            json_string(ec_eclk_rule_name(prm->eclk_rule)));
        json_object_set_new(o, "eclk_guard", json_boolean(prm->eclk_guard));
        json_object_set_new(o, "eclk_guard_threshold",
                            prm->eclk_guard ? describe_real(prm->eclk_guard_threshold)
                                            : json_null());
        json_object_set_new(o, "step_source",
                            json_string(prm->step_given ? "step_size" : "rule"));
        json_object_set_new(o, "delta_eff", describe_real(prm->delta_eff));
        json_object_set_new(o, "inflation", describe_real(prm->inflation));
        json_object_set_new(o, "inflation_c", describe_real(prm->eclk_c));
        json_object_set_new(o, "L_delta", describe_real(prm->L_delta));
    }
    if (prm->algo == EC_ALGO_ADIANA) {
        /* Named as Li et al.'s theorem names them (docs/algorithms.md,
         * "ADIANA's constants"): eta is the step. */
        json_object_set_new(o, "L_eff", describe_real(prm->L_eff));
        json_object_set_new(o, "eta", describe_real(prm->eta));
        json_object_set_new(o, "theta1", describe_real(prm->theta1));
        json_object_set_new(o, "theta2", describe_real(prm->theta2));
        json_object_set_new(o, "gamma", describe_real(prm->gamma_z));
        json_object_set_new(o, "beta", describe_real(prm->beta));
        json_object_set_new(o, "shift_compressor",
                            json_string(ec_comp_name(prm->shift_comp.type)));
        json_object_set_new(o, "omega", describe_real(prm->omega));
        json_object_set_new(o, "alpha", describe_real(prm->alpha));
    }
    if (prm->algo == EC_ALGO_ECONTROL)
        json_object_set_new(o, "econtrol_eta", describe_real(prm->econtrol_eta));
    if (prm->algo == EC_ALGO_EC_LSVRG_QIAN || prm->algo == EC_ALGO_ADEF) {
        json_object_set_new(o, "L_eff", describe_real(prm->L_eff));
        json_object_set_new(o, "step_divisor", describe_real(prm->step_divisor));
    }
    if (ec_algo_is(prm->algo, EC_FAMILY_DIANA)) {
        json_object_set_new(o, "shift_compressor",
                            json_string(ec_comp_name(prm->shift_comp.type)));
        json_object_set_new(o, "omega", describe_real(prm->omega));
        json_object_set_new(o, "alpha", describe_real(prm->alpha));
    }
    json_object_set_new(o, "seed", json_integer((json_int_t)prm->seed));
    return o;
}

json_t *describe_algorithms(void)
{
    static const struct {
        unsigned bit;
        const char *name;
    } needs[] = {{EC_NEEDS_L_F, "L_f"}, {EC_NEEDS_L, "L"}, {EC_NEEDS_MU, "mu"},
                 {EC_NEEDS_L_TILDE, "L_tilde"}};
    /* The table's COMPRESSES, as a name: which compressors a job of it
     * may choose. */
    static const char *const kinds[] = {"none", "contraction", "unbiased"};
    json_t *list = json_array();

    for (int a = 0; list && a < EC_ALGO_COUNT; a++) {
        const ec_algo_info *ai = ec_algo_info_of((ec_algo_id)a);
        json_t *constants = json_array();

        for (size_t i = 0; constants && i < sizeof needs / sizeof needs[0]; i++)
            if (ai->needs & needs[i].bit)
                json_array_append_new(constants, json_string(needs[i].name));
        if (json_array_append_new(
                list, json_pack("{s:s, s:s, s:b, s:s, s:b, s:b, s:b, s:b, s:o*, s:s}", "name",
                                ai->name, "family", ec_algo_family_name(ai->family),
                                "compresses", ai->compresses,
                                "compressor_kind", kinds[ai->compresses],
                                "stochastic", ai->stochastic,
                                "init_exchange", ai->has_init, "partial_participation",
                                ai->partial, "compressed_broadcast", ai->down,
                                "constants", constants, "summary",
                                ai->summary)) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

json_t *describe_compressors(void)
{
    static const char *const params[] = {
        [EC_COMP_PARAM_NONE] = NULL, [EC_COMP_PARAM_K] = "k", [EC_COMP_PARAM_S] = "s"};
    static const char *const layouts[] = {
        [EC_COMP_LAYOUT_DENSE] = "dense", [EC_COMP_LAYOUT_INDEXED] = "indexed",
        [EC_COMP_LAYOUT_SEEDED] = "seeded", [EC_COMP_LAYOUT_LEVELS] = "levels"};
    json_t *list = json_array();

    for (int t = 0; list && t < EC_COMP_COUNT; t++) {
        const ec_comp_info *ci = ec_comp_info_of((ec_comp_type)t);
        /* An unbiased form exists where omega is defined, whatever k or s
         * (every type but topk): what an algorithm of compressor_kind
         * "unbiased" sends. */
        ec_comp_spec one = {(ec_comp_type)t, 1, 1};

        if (json_array_append_new(
                list, json_pack("{s:s, s:s?, s:b, s:b, s:b, s:b, s:s, s:s, s:s}", "name", ci->name,
                                "takes", params[ci->param], "unbiased", ci->unbiased,
                                "unbiased_form", ec_comp_omega(&one, 1) >= 0.0,
                                "contraction", ci->contraction, "broadcast", ci->broadcast,
                                "layout",
                                layouts[ci->layout], "shift", ec_comp_name(ci->shift),
                                "summary", ci->summary)) < 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

json_t *describe_splits(void)
{
    json_t *list = json_array();

    for (int s = 0; list && s < EC_SPLIT_COUNT; s++)
        json_array_append_new(list,
                              json_pack("{s:s, s:s}", "name",
                                        ec_split_name((ec_split)s), "summary",
                                        ec_split_summary((ec_split)s)));
    return list;
}

json_t *describe_eclk_rules(void)
{
    json_t *list = json_array();

    for (int r = 0; list && r < EC_ECLK_RULE_COUNT; r++)
        json_array_append_new(
            list, json_pack("{s:s, s:s, s:b}", "name", ec_eclk_rule_name((ec_eclk_rule)r),
                            "summary", ec_eclk_rule_summary((ec_eclk_rule)r), "default",
                            r == EC_ECLK_RULE_DEFAULT));
    return list;
}

json_t *describe_losses(void)
{
    json_t *list = json_array();

    for (int l = 0; list && ec_loss_name((ec_loss)l); l++)
        json_array_append_new(list, json_string(ec_loss_name((ec_loss)l)));
    return list;
}

/*
 * A JSON number for v, exactly (it reads back as the same double), or
 * null. Whole numbers below 2^53 (bit and byte counts) are written as
 * integers with ".0", without printf's floating-point path.
 */
static char *put_real(char *p, double v)
{
    if (!isfinite(v))
        return memcpy(p, "null", 4), p + 4;
    if (v == floor(v) && fabs(v) < 9007199254740992.0) {
        char digits[24];
        uint64_t u = (uint64_t)fabs(v);
        int n = 0;

        if (v < 0 || (v == 0 && signbit(v)))
            *p++ = '-';
        do
            digits[n++] = (char)('0' + u % 10);
        while ((u /= 10) > 0);
        while (n > 0)
            *p++ = digits[--n];
        return memcpy(p, ".0", 2), p + 2;
    }
    int n = snprintf(p, 32, "%.17g", v);
    if (!memchr(p, '.', (size_t)n) && !memchr(p, 'e', (size_t)n))
        memcpy(p + n, ".0", 2), n += 2;
    return p + n;
}

static char *put_str(char *p, const char *s)
{
    size_t n = strlen(s);

    memcpy(p, s, n);
    return p + n;
}

int describe_metric_record(const ec_metric *r, char *buf, size_t len)
{
    const struct field *const *keys = keys_sorted();
    char *p = buf;
    int marked = 0;

    if (len < DESCRIBE_RECORD_MAX)
        return -1;
    for (size_t i = 0; i < NFIELDS; i++) {
        const struct field *f = keys[i];

        if (i == by_key_marker)
            p = put_str(p, DESCRIBE_MARKER), marked = 1;
        if (i == 0)
            *p++ = '{', memcpy(p, f->key + 1, f->keylen - 1), p += f->keylen - 1;
        else
            memcpy(p, f->key, f->keylen), p += f->keylen;
        if (f->kind == KIND_COUNT)
            p += snprintf(p, 24, "%llu",
                          (unsigned long long)count_at(r, f));
        else
            p = put_real(p, real_of(r, f));
    }
    if (!marked)
        p = put_str(p, DESCRIBE_MARKER);
    *p++ = '}';
    *p = '\0';
    return (int)(p - buf);
}

/*
 * The length of the number at p in JSON's grammar that has a fraction or
 * an exponent (as put_real writes every finite value), or 0. Integers are
 * left to the JSON parser: it has its own range for them. *big says
 * whether the value could exceed DBL_MAX: its integer digits plus its
 * exponent say at most how many digits it has before the point. Up to
 * 308 it is below 1e308 and finite; past that only strtod can tell.
 */
static size_t real_span(const char *p, const char *end, int *big)
{
    const char *q = p, *digits;
    long ndigits, exp = 0;
    int frac = 0, neg = 0;

    if (q < end && *q == '-')
        q++;
    digits = q;
    if (q < end && *q == '0')
        q++;
    else if (q < end && *q >= '1' && *q <= '9')
        while (q < end && *q >= '0' && *q <= '9')
            q++;
    else
        return 0;
    ndigits = q - digits;
    if (q < end && *q == '.') {
        const char *d = ++q;
        while (q < end && *q >= '0' && *q <= '9')
            q++;
        if (q == d)
            return 0;
        frac = 1;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        const char *d;
        if (++q < end && (*q == '+' || *q == '-'))
            neg = *q++ == '-';
        for (d = q; q < end && *q >= '0' && *q <= '9'; q++)
            if (exp < 100000)
                exp = exp * 10 + (*q - '0');
        if (q == d)
            return 0;
        frac = 1;
    }
    *big = ndigits + (neg ? -exp : exp) > 308;
    return frac ? (size_t)(q - p) : 0;
}

/* Past the text lit[0..n) at p, or NULL when p does not start with it. */
static const char *skip_n(const char *p, const char *end, const char *lit, size_t n)
{
    return p && (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

/* Past the string lit at p, or NULL when p does not start with it. */
static const char *skip(const char *p, const char *end, const char *lit)
{
    return skip_n(p, end, lit, strlen(lit));
}

/*
 * "key":value with the value null (NaN) or a finite real; NULL if not.
 * With out NULL the value is checked, not converted: strtod only runs
 * for the rare value that may not be finite.
 */
static const char *get_real(const char *p, const char *end, const char *key,
                            size_t keylen, double *out)
{
    const char *q;
    char tmp[64], *e;
    double v;
    size_t n;
    int big;

    if (!(p = skip_n(p, end, key, keylen)))
        return NULL;
    if ((q = skip(p, end, "null"))) {
        if (out)
            *out = NAN;
        return q;
    }
    if ((n = real_span(p, end, &big)) == 0 || n >= sizeof tmp)
        return NULL;
    if (!out && !big)
        return p + n;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    v = strtod(tmp, &e);
    if (out)
        *out = v;
    return e == tmp + n && !isinf(v) ? p + n : NULL;
}

/* One field of the row, or NULL for a scan that only checks. */
static double *field_of(ec_metric *m, const struct field *f)
{
    return m ? (double *)((char *)m + f->off) : NULL;
}

/* A count: digits without a leading zero, at most INT64_MAX; NULL if not. */
static const char *get_count(const char *p, const char *end, uint64_t *out)
{
    const char *digits = p;
    uint64_t r = 0;

    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (r > (INT64_MAX - (uint64_t)(*p - '0')) / 10)
            return NULL;
        r = r * 10 + (uint64_t)(*p - '0');
    }
    if (p == digits || (*digits == '0' && p - digits > 1))
        return NULL;
    *out = r;
    return p;
}

/*
 * Scans the shape describe_metric_record writes, with the "type" and "v"
 * marker (a record) or without it (a document). The round goes to *round,
 * the other fields into *m unless m is NULL; *cut is where the marker
 * begins (or would). 0, or -1 for any other text.
 */
static int scan_metric(const char *s, size_t len, int marker, uint64_t *round,
                       ec_metric *m, const char **cut)
{
    const struct field *const *keys = keys_sorted();
    const char *p = s, *end = s + len;
    int marked = 0;

    for (size_t i = 0; p && i < NFIELDS; i++) {
        const struct field *f = keys[i];
        /* The first key follows the brace, without its comma. */
        const char *key = f->key + (i == 0);
        size_t keylen = f->keylen - (i == 0);

        if (i == by_key_marker) {
            *cut = p, marked = 1;
            if (marker && !(p = skip(p, end, DESCRIBE_MARKER)))
                return -1;
        }
        if (i == 0 && !(p = skip(p, end, "{")))
            return -1;
        if (f->kind == KIND_COUNT) {
            uint64_t v;

            if (!(p = skip_n(p, end, key, keylen)) || !(p = get_count(p, end, &v)))
                return -1;
            if (f->off == offsetof(ec_metric, round))
                *round = v;
            else if (m)
                *count_of(m, f) = v;
        } else {
            p = get_real(p, end, key, keylen, field_of(m, f));
        }
    }
    if (p && !marked) {
        *cut = p;
        if (marker && !(p = skip(p, end, DESCRIBE_MARKER)))
            return -1;
    }
    return p && end - p == 1 && *p == '}' ? 0 : -1;
}

/* The record less its marker, into doc; the document's length. */
static int cut_marker(const char *s, size_t len, const char *cut, char *doc)
{
    size_t mlen = sizeof DESCRIBE_MARKER - 1;

    memcpy(doc, s, (size_t)(cut - s));
    memcpy(doc + (cut - s), cut + mlen, len - (size_t)(cut - s) - mlen);
    doc[len - mlen] = '\0';
    return (int)(len - mlen);
}

int describe_metric_record_read(const char *s, size_t len, ec_metric *m, char *doc)
{
    const char *cut;

    if (scan_metric(s, len, 1, &m->round, m, &cut) < 0)
        return -1;
    return cut_marker(s, len, cut, doc);
}

int describe_metric_record_check(const char *s, size_t len, uint64_t *round, char *doc)
{
    const char *cut;

    if (scan_metric(s, len, 1, round, NULL, &cut) < 0)
        return -1;
    return cut_marker(s, len, cut, doc);
}

int describe_metric_doc_check(const char *doc, size_t len)
{
    const char *cut;
    uint64_t round;

    json_t *o;
    int all;

    if (scan_metric(doc, len, 0, &round, NULL, &cut) == 0)
        return 1;
    o = json_loadb(doc, len, 0, NULL);
    all = json_is_object(o);
    for (size_t i = 0; all && i < NFIELDS; i++)
        all = json_object_get(o, fields[i].name) != NULL;
    json_decref(o);
    return all;
}

int describe_metric_from_json(json_t *o, ec_metric *m)
{
    /* The counts first: a row with a bad one, or without its round, is
     * not read at all; a count a row stored before it existed lacks (such
     * as restarts) is 0. */
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *v = json_object_get(o, fields[i].name);

        if (fields[i].kind != KIND_COUNT ||
            (!v && fields[i].off != offsetof(ec_metric, round)))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return -1;
    }
    for (size_t i = 0; i < NFIELDS; i++) {
        json_t *v = json_object_get(o, fields[i].name);

        if (fields[i].kind == KIND_COUNT)
            *count_of(m, &fields[i]) = v ? (uint64_t)json_integer_value(v) : 0;
        else
            *field_of(m, &fields[i]) = json_is_number(v) ? json_number_value(v) : NAN;
    }
    return 0;
}

int describe_metric_doc_read(const char *doc, size_t len, ec_metric *m)
{
    const char *cut;
    json_t *o;
    int rc;

    if (scan_metric(doc, len, 0, &m->round, m, &cut) == 0)
        return 0;
    /* Another spelling of a row: read by the JSON parser. */
    o = json_loadb(doc, len, 0, NULL);
    rc = describe_metric_from_json(o, m);
    json_decref(o);
    return rc;
}

json_t *describe_file_identity(const struct stat *st)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "dev", (json_int_t)st->st_dev, "ino",
                     (json_int_t)st->st_ino, "size", (json_int_t)st->st_size, "mtime_ns",
                     (json_int_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec,
                     "ctime_ns",
                     (json_int_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec);
}

json_t *describe_metric(const ec_metric *r)
{
    json_t *o = json_object();

    for (size_t i = 0; o && i < NFIELDS; i++) {
        const struct field *f = &fields[i];
        json_t *v = f->kind == KIND_COUNT
                        ? json_integer((json_int_t)count_at(r, f))
                        : describe_real(real_of(r, f));

        if (json_object_set_new(o, f->name, v) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

json_t *describe_eclk_report(const ec_eclk_report *r)
{
    json_t *rounds = json_array();
    uint64_t listed = r->restarts < EC_ECLK_RESTART_ROUNDS_MAX
                          ? r->restarts : EC_ECLK_RESTART_ROUNDS_MAX;

    for (uint64_t i = 0; rounds && i < listed; i++)
        json_array_append_new(rounds, json_integer((json_int_t)r->restart_rounds[i]));
    return json_pack("{s:o, s:o, s:o, s:o, s:I, s:I, s:o*}", "delta_eff",
                     describe_real(r->delta_eff), "inflation",
                     describe_real(r->inflation), "delta_min",
                     describe_real(r->delta_min), "delta_max",
                     describe_real(r->delta_max), "updates", (json_int_t)r->updates,
                     "restarts", (json_int_t)r->restarts, "restart_rounds", rounds);
}

json_t *describe_summary(const ec_summary *sum)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:o}", "stop", ec_stop_name(sum->stop),
                     "outcome", outcome_name(outcome_of_stop(sum->stop, sum->last.rel_gap)),
                     "reason", sum->reason, "rounds", (json_int_t)sum->rounds,
                     "last", describe_metric(&sum->last));
}

int describe_shortest(char *buf, size_t len, double v)
{
    int n = 0;

    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, len, "%.*g", prec, v);
        if (n < 0 || (size_t)n >= len || prec == 17 || strtod(buf, NULL) == v)
            break;
    }
    return n;
}

/* Each column with the comma before it; the first's is skipped. */
#define CSV_NAME_(name, kind, csv) "," #name

const char *const describe_csv_header = DESCRIBE_METRIC_FIELDS(CSV_NAME_) + 1;

/* A CSV row being written: n bytes of buf so far, -1 once one did not fit. */
struct csv_out {
    char *buf;
    size_t len;
    int n;
};

static void csv_put_COUNT(struct csv_out *o, const char *fmt, uint64_t v)
{
    int k;

    if (o->n < 0)
        return;
    k = snprintf(o->buf + o->n, o->len - (size_t)o->n, fmt, (unsigned long long)v);
    o->n = k >= 0 && (size_t)k < o->len - (size_t)o->n ? o->n + k : -1;
}

static void csv_put_REAL(struct csv_out *o, const char *fmt, double v)
{
    size_t room;
    int k;

    if (o->n < 0)
        return;
    room = o->len - (size_t)o->n;
    k = *fmt ? snprintf(o->buf + o->n, room, fmt, v)
             : describe_shortest(o->buf + o->n, room, v);
    o->n = k >= 0 && (size_t)k < room ? o->n + k : -1;
}

static void csv_comma(struct csv_out *o)
{
    if (o->n < 0 || (size_t)o->n + 2 > o->len) {
        o->n = -1;
        return;
    }
    o->buf[o->n++] = ',';
    o->buf[o->n] = '\0';
}

#define CSV_PUT_(name, kind, csv)                                           \
    if (o.n > 0)                                                            \
        csv_comma(&o);                                                      \
    csv_put_##kind(&o, csv, r->name);

/* The columns of describe_csv_header; the reals in their shortest exact
   text, so a CSV compares exactly and reads as written. A row that does
   not fit (a %.6f column of an absurd value) is -1. */
int describe_csv_row(const ec_metric *r, char *buf, size_t len)
{
    struct csv_out o = {buf, len, 0};

    if (!len)
        return -1;
    DESCRIBE_METRIC_FIELDS(CSV_PUT_)
    return o.n;
}
#undef CSV_PUT_
