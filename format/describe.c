/* JSON and CSV views of engine results, shared by the CLI and the service. */
#include "describe.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *describe_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

json_t *describe_dataset(const ec_dataset *ds)
{
    return json_pack("{s:I, s:I, s:I, s:[o, o]}", "rows", (json_int_t)ds->n_rows,
                     "d", (json_int_t)ds->d, "nnz", (json_int_t)ds->nnz,
                     "labels", describe_real(ds->label_neg),
                     describe_real(ds->label_pos));
}

json_t *describe_problem(const ec_problem *pb)
{
    uint32_t mmin = UINT32_MAX, mmax = 0;

    for (uint32_t t = 0; t < pb->n; t++) {
        uint32_t m = pb->shards[t].end - pb->shards[t].begin;
        mmin = m < mmin ? m : mmin;
        mmax = m > mmax ? m : mmax;
    }
    return json_pack(
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
    if (prm->algo == EC_ALGO_ECLK || prm->algo == EC_ALGO_LKATYUSHA) {
        json_object_set_new(o, "theta1", describe_real(prm->theta1));
        json_object_set_new(o, "theta2", describe_real(prm->theta2));
        json_object_set_new(o, "eta", describe_real(prm->eta));
        json_object_set_new(o, "sigma", describe_real(prm->sigma));
        json_object_set_new(o, "L_eff", describe_real(prm->L_eff));
    }
    if (prm->algo == EC_ALGO_EC_SGD_DIANA || prm->algo == EC_ALGO_EC_GD_DIANA) {
        json_object_set_new(o, "shift_compressor",
                            json_string(ec_comp_name(prm->shift_comp.type)));
        json_object_set_new(o, "omega", describe_real(prm->omega));
        json_object_set_new(o, "alpha", describe_real(prm->alpha));
    }
    json_object_set_new(o, "seed", json_integer((json_int_t)prm->seed));
    return o;
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
    char *p = buf;

    /* 13 keys and 11 numbers of at most 25 bytes each: under 512. */
    if (len < DESCRIBE_RECORD_MAX)
        return -1;
    p = put_real(put_str(p, "{\"P\":"), r->P);
    p = put_real(put_str(p, ",\"bits_down\":"), r->bits_down);
    p = put_real(put_str(p, ",\"bits_up\":"), r->bits_up);
    p = put_real(put_str(p, ",\"gap\":"), r->gap);
    p = put_real(put_str(p, ",\"grad_norm\":"), r->grad_norm);
    p = put_real(put_str(p, ",\"paper_bits\":"), r->paper_bits);
    p = put_real(put_str(p, ",\"rel_gap\":"), r->rel_gap);
    p += snprintf(p, 40, ",\"round\":%llu", (unsigned long long)r->round);
    p = put_real(put_str(p, ",\"seconds\":"), r->seconds);
    p = put_str(p, DESCRIBE_MARKER);
    p = put_real(put_str(p, ",\"wire_down\":"), r->wire_down);
    p = put_real(put_str(p, ",\"wire_up\":"), r->wire_up);
    *p++ = '}';
    *p = '\0';
    return (int)(p - buf);
}

/*
 * The length of the number at p in JSON's grammar that has a fraction or
 * an exponent (as put_real writes every finite value), or 0. Integers are
 * left to the JSON parser: it has its own range for them.
 */
static size_t real_span(const char *p, const char *end)
{
    const char *q = p;
    int frac = 0;

    if (q < end && *q == '-')
        q++;
    if (q < end && *q == '0')
        q++;
    else if (q < end && *q >= '1' && *q <= '9')
        while (q < end && *q >= '0' && *q <= '9')
            q++;
    else
        return 0;
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
            q++;
        for (d = q; q < end && *q >= '0' && *q <= '9';)
            q++;
        if (q == d)
            return 0;
        frac = 1;
    }
    return frac ? (size_t)(q - p) : 0;
}

/* Past the text lit at p, or NULL when p does not start with it. */
static const char *skip(const char *p, const char *end, const char *lit)
{
    size_t n = strlen(lit);

    return p && (size_t)(end - p) >= n && memcmp(p, lit, n) == 0 ? p + n : NULL;
}

/*
 * Whether the real text p[0..n) (real_span's) could exceed DBL_MAX: its
 * integer digits plus its exponent say at most how many digits the value
 * has before the point. Up to 308 it is below 1e308 and finite; past that
 * only strtod can tell.
 */
static int may_overflow(const char *p, size_t n)
{
    const char *end = p + n, *q = p + (*p == '-');
    long digits = 0, exp = 0;
    int neg = 0;

    while (q < end && *q >= '0' && *q <= '9')
        q++, digits++;
    while (q < end && *q != 'e' && *q != 'E')
        q++;
    if (q < end && ++q < end && (*q == '+' || *q == '-'))
        neg = *q++ == '-';
    for (; q < end && exp < 100000; q++)
        exp = exp * 10 + (*q - '0');
    return digits + (neg ? -exp : exp) > 308;
}

/*
 * "key":value with the value null (NaN) or a finite real; NULL if not.
 * With out NULL the value is checked, not converted: strtod only runs
 * for the rare value that may not be finite.
 */
static const char *get_real(const char *p, const char *end, const char *key, double *out)
{
    const char *q;
    char tmp[64], *e;
    double v;
    size_t n;

    if (!(p = skip(p, end, key)))
        return NULL;
    if ((q = skip(p, end, "null"))) {
        if (out)
            *out = NAN;
        return q;
    }
    if ((n = real_span(p, end)) == 0 || n >= sizeof tmp)
        return NULL;
    if (!out && !may_overflow(p, n))
        return p + n;
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    v = strtod(tmp, &e);
    if (out)
        *out = v;
    return e == tmp + n && !isinf(v) ? p + n : NULL;
}

/* One field of the row, or NULL for a scan that only checks. */
static double *field_of(ec_metric *m, size_t off)
{
    return m ? (double *)((char *)m + off) : NULL;
}

/*
 * Scans the shape describe_metric_record writes, with the "type" and "v"
 * marker (a record) or without it (a document). The round goes to *round,
 * the reals into *m unless m is NULL; *cut is where the marker begins (or
 * would). 0, or -1 for any other text.
 */
static int scan_metric(const char *s, size_t len, int marker, uint64_t *round,
                       ec_metric *m, const char **cut)
{
    static const struct {
        const char *key;
        size_t off;
    } head[] = {{"{\"P\":", offsetof(ec_metric, P)},
                {",\"bits_down\":", offsetof(ec_metric, bits_down)},
                {",\"bits_up\":", offsetof(ec_metric, bits_up)},
                {",\"gap\":", offsetof(ec_metric, gap)},
                {",\"grad_norm\":", offsetof(ec_metric, grad_norm)},
                {",\"paper_bits\":", offsetof(ec_metric, paper_bits)},
                {",\"rel_gap\":", offsetof(ec_metric, rel_gap)}},
      tail[] = {{",\"wire_down\":", offsetof(ec_metric, wire_down)},
                {",\"wire_up\":", offsetof(ec_metric, wire_up)}};
    static const char round_key[] = ",\"round\":", seconds_key[] = ",\"seconds\":";
    const char *p = s, *end = s + len, *digits;
    uint64_t r = 0;

    for (size_t i = 0; p && i < sizeof head / sizeof head[0]; i++)
        p = get_real(p, end, head[i].key, field_of(m, head[i].off));
    if (!(p = skip(p, end, round_key)))
        return -1;
    /* The round: digits without a leading zero, at most INT64_MAX. */
    for (digits = p; p < end && *p >= '0' && *p <= '9'; p++) {
        if (r > (INT64_MAX - (uint64_t)(*p - '0')) / 10)
            return -1;
        r = r * 10 + (uint64_t)(*p - '0');
    }
    if (p == digits || (*digits == '0' && p - digits > 1))
        return -1;
    *round = r;
    if (!(p = get_real(p, end, seconds_key, field_of(m, offsetof(ec_metric, seconds)))))
        return -1;
    *cut = p;
    if (marker && !(p = skip(p, end, DESCRIBE_MARKER)))
        return -1;
    for (size_t i = 0; p && i < sizeof tail / sizeof tail[0]; i++)
        p = get_real(p, end, tail[i].key, field_of(m, tail[i].off));
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

int describe_metric_from_json(json_t *o, ec_metric *m)
{
    static const struct {
        const char *key;
        size_t off;
    } keys[] = {{"bits_up", offsetof(ec_metric, bits_up)},
                {"bits_down", offsetof(ec_metric, bits_down)},
                {"paper_bits", offsetof(ec_metric, paper_bits)},
                {"P", offsetof(ec_metric, P)},
                {"gap", offsetof(ec_metric, gap)},
                {"rel_gap", offsetof(ec_metric, rel_gap)},
                {"grad_norm", offsetof(ec_metric, grad_norm)},
                {"seconds", offsetof(ec_metric, seconds)},
                {"wire_up", offsetof(ec_metric, wire_up)},
                {"wire_down", offsetof(ec_metric, wire_down)}};
    json_t *round = json_object_get(o, "round");

    if (!json_is_integer(round) || json_integer_value(round) < 0)
        return -1;
    m->round = (uint64_t)json_integer_value(round);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(o, keys[i].key);
        *field_of(m, keys[i].off) = json_is_number(v) ? json_number_value(v) : NAN;
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
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "round",
                     (json_int_t)r->round, "bits_up", describe_real(r->bits_up),
                     "bits_down", describe_real(r->bits_down), "paper_bits",
                     describe_real(r->paper_bits), "P", describe_real(r->P),
                     "gap", describe_real(r->gap), "rel_gap",
                     describe_real(r->rel_gap), "grad_norm",
                     describe_real(r->grad_norm), "seconds",
                     describe_real(r->seconds), "wire_up",
                     describe_real(r->wire_up), "wire_down",
                     describe_real(r->wire_down));
}

json_t *describe_summary(const ec_summary *sum)
{
    return json_pack("{s:s, s:s, s:I, s:o}", "stop", ec_stop_name(sum->stop),
                     "reason", sum->reason, "rounds", (json_int_t)sum->rounds,
                     "last", describe_metric(&sum->last));
}

const char describe_csv_header[] =
    "round,bits_up,bits_down,paper_bits,P,gap,rel_gap,grad_norm,seconds,"
    "wire_up,wire_down";

/* %.17g keeps every bit of a double, so CSV output can be compared exactly. */
int describe_csv_row(const ec_metric *r, char *buf, size_t len)
{
    return snprintf(buf, len,
                    "%llu,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.17g,%.6f,%.17g,%.17g",
                    (unsigned long long)r->round, r->bits_up, r->bits_down,
                    r->paper_bits, r->P, r->gap, r->rel_gap, r->grad_norm,
                    r->seconds, r->wire_up, r->wire_down);
}
