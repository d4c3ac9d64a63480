/*
 * The synthetic data generator (gen.h): each row is a pure function of the
 * seed and its index, drawn from its own RNG stream, and printed with
 * integer arithmetic only, so the same options give the same bytes on any
 * machine.
 */
#include "ecopt/gen.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/rng.h"

/* Streams: rows use 1 + row, the planted model its own far range. */
#define MODEL_STREAM ((uint64_t)1 << 62)

const char *ec_gen_check(const ec_gen_opts *o)
{
    if (o->rows < 1)
        return "rows must be at least 1";
    if (o->d < 1 || o->d > EC_GEN_MAX_D)
        return "features (d) must be in 1..16777216 (2^24, the reader's limit)";
    if (o->nnz < 1)
        return "nnz (nonzeros per row) must be at least 1";
    if (o->nnz > o->d)
        return "nnz (nonzeros per row) must not exceed features (d)";
    if (o->rows > EC_GEN_MAX_NNZ / o->nnz)
        return "rows x nnz must not exceed 2147483648 (2^31, the reader's limit)";
    if (o->sources > o->rows || o->sources > o->d)
        return "sources must be in 1..min(rows, features)";
    if (o->labels != EC_GEN_LOGISTIC && o->labels != EC_GEN_RIDGE)
        return "labels must be logistic or ridge";
    return NULL;
}

/* The planted model's coordinate j: N(0, 1), from (seed, j) alone, so no
   d-sized array is needed. */
static double model_at(uint64_t seed, uint64_t j)
{
    ec_rng r;

    ec_rng_seed(&r, seed, MODEL_STREAM + j);
    return ec_rng_normal(&r);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return (x > y) - (x < y);
}

/* Sorts and removes repeats; returns how many distinct remain. */
static uint64_t sort_unique(uint32_t *c, uint64_t n)
{
    uint64_t w = 0;

    qsort(c, n, sizeof *c, cmp_u32);
    for (uint64_t i = 0; i < n; i++)
        if (w == 0 || c[i] != c[w - 1])
            c[w++] = c[i];
    return w;
}

/*
 * The k distinct, increasing columns of one row of a source owning
 * [lo, hi). Sparse rows draw with the source's preference and redraw
 * repeats; dense rows (4k > d), where redrawing would crawl, take a
 * uniform k-subset by selection sampling (Knuth's algorithm S).
 */
static void row_columns(ec_rng *r, uint64_t d, uint64_t k, uint64_t lo,
                        uint64_t hi, uint32_t *c)
{
    uint64_t have = 0;

    if (4 * k > d) {
        for (uint64_t j = 0; j < d && have < k; j++)
            if (ec_rng_below(r, d - j) < k - have)
                c[have++] = (uint32_t)j;
        return;
    }
    while (have < k) {
        for (uint64_t i = have; i < k; i++)
            c[i] = (uint32_t)(ec_rng_uniform(r) < EC_GEN_OWN_SHARE
                                  ? lo + ec_rng_below(r, hi - lo)
                                  : ec_rng_below(r, d));
        have = sort_unique(c, k);
    }
}

/* Appends v in decimal; returns the new end. */
static char *put_u64(char *p, uint64_t v)
{
    char tmp[24];
    int n = 0;

    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *p++ = tmp[--n];
    return p;
}

int ec_gen_write(FILE *f, const ec_gen_opts *o, ec_err *e)
{
    const char *why = ec_gen_check(o);
    uint64_t sources, k = 0, per;
    uint32_t *cols = NULL;
    int16_t *q = NULL;
    char *line = NULL;
    int rc = 0;

    if (why)
        return ec_err_set(e, EC_EINVAL, "%s", why);
    k = o->nnz;
    sources = o->sources ? o->sources : o->rows < 10 ? o->rows : 10;
    if (sources > o->d)
        sources = o->d;
    per = (o->rows + sources - 1) / sources;
    /* a label, then k of " index:-0.123" with index < 2^24 (8 digits) */
    cols = malloc(k * sizeof *cols);
    q = malloc(k * sizeof *q);
    line = malloc(8 + k * 16 + 2);
    if (!cols || !q || !line) {
        rc = ec_err_set(e, EC_ENOMEM, "generator: out of memory for a row of %llu",
                        (unsigned long long)k);
        goto out;
    }
    for (uint64_t i = 0; i < o->rows; i++) {
        uint64_t src = i / per;
        uint64_t lo = src * o->d / sources, hi = (src + 1) * o->d / sources;
        double t = 0, y;
        ec_rng r;
        char *p = line;

        ec_rng_seed(&r, o->seed, 1 + i);
        row_columns(&r, o->d, k, lo, hi, cols);
        /* Values of magnitude 0.1 .. 1 in steps of 1/1000 and either sign:
           printed exactly, and the margin is computed from what is printed. */
        for (uint64_t j = 0; j < k; j++) {
            int v = 100 + (int)ec_rng_below(&r, 901);
            q[j] = (int16_t)(ec_rng_below(&r, 2) ? v : -v);
            t += q[j] / 1000.0 * model_at(o->seed, cols[j]);
        }
        /* E v^2 = 0.37: the margin, standardised. */
        t /= sqrt(0.37 * (double)k);
        if (o->labels == EC_GEN_LOGISTIC)
            y = ec_rng_uniform(&r) < 1.0 / (1.0 + exp(-4.0 * t)) ? 1 : -1;
        else
            y = t + 0.3 * ec_rng_normal(&r) >= 0 ? 1 : -1;
        p = y > 0 ? memcpy(p, "+1", 2) : memcpy(p, "-1", 2);
        p += 2;
        for (uint64_t j = 0; j < k; j++) {
            int v = q[j] < 0 ? -q[j] : q[j];
            *p++ = ' ';
            p = put_u64(p, (uint64_t)cols[j] + 1);
            *p++ = ':';
            if (q[j] < 0)
                *p++ = '-';
            *p++ = (char)('0' + v / 1000);
            *p++ = '.';
            *p++ = (char)('0' + v / 100 % 10);
            *p++ = (char)('0' + v / 10 % 10);
            *p++ = (char)('0' + v % 10);
        }
        *p++ = '\n';
        if (fwrite(line, 1, (size_t)(p - line), f) != (size_t)(p - line)) {
            rc = ec_err_set(e, EC_EIO, "generator: write failed at row %llu",
                            (unsigned long long)i + 1);
            goto out;
        }
    }
out:
    free(cols);
    free(q);
    free(line);
    return rc;
}
