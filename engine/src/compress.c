/*
 * The compression operators of compress.h (none, top-k, rand-k, random
 * dithering, natural compression and natural dithering) and the exact bit
 * counts of the messages they produce.
 */
#include "ecopt/compress.h"
#include "ecopt/clones.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Levels travel in at most 16 bits (job.h's EC_JOB_MAX_DITHER_LEVELS). */
#define COMP_MAX_LEVELS 65535u

/* The list below serves k up to this; the heap and the radix select beyond. */
#define TOPK_LIST_MAX 8

/*
 * Up to this k, top-k keeps the k best entries seen so far in a heap: one
 * comparison for most entries and a sift of log2(k) levels for the few
 * that enter (about k ln(d/k) on data in no order). On data in ascending
 * order every entry enters; after TOPK_HEAP_BUDGET(d, k) entries the heap
 * gives up and the radix select starts afresh, so no input costs more than
 * the two together.
 */
#define TOPK_HEAP_MAX 64
#define TOPK_HEAP_BUDGET(d, k) (2 * (k) * (ceil_log2((d) / (k)) + 1))

/*
 * Beyond TOPK_HEAP_MAX (and below d), top-k filters: one pass appends the
 * entries that may still be chosen to a buffer of topk_filter_span()
 * candidates and compacts it to the k best when it fills. Against the
 * radix select's three passes and more over x (count, keep, emit) that
 * measured 4.5 times faster at d = 1e6 and k = 1000, 2.3 at k = 1e4 and
 * alike at k = 1e5 (bench/results/floor.md); against a heap of k, which
 * mispredicts through log2(k) levels for each entry that joins, 1.3 to 3
 * times faster for k = 500 to 8000. The buffer holds k plus room for as
 * many again (at least 4096), and never more than d.
 */
/* The filter's scan looks at this many entries at a time, and the buffer
 * keeps room for as many beyond its span. */
#define TOPK_SCAN 8

static size_t topk_filter_span(uint32_t d, uint32_t k)
{
    size_t span = (size_t)k + (k > 4096 ? k : 4096);

    return (span < d ? span : d) + TOPK_SCAN;
}

struct topk_entry {
    uint64_t key;
    uint32_t idx;
};

/* The rand-k index set comes from a local generator seeded (seed, stream). */
#define RANDK_STREAM 0u

struct ec_compressor {
    ec_comp_spec spec;
    uint32_t d;
    double dither_scale;    /* 1/(1+omega), or 1 for the unbiased forms */
    double randk_factor;    /* 1 for randk, d/k for randk-unbiased */
    uint32_t *cand;         /* top-k: d candidate indices for the selection */
    uint64_t *fkeys;        /* top-k filter: 2 spans of keys (candidates, tmp) */
    uint32_t *fidx;         /* top-k filter: a span of candidate indices */
    ec_topk_select select;  /* top-k: which selection (tests and benches) */
    uint64_t *chosen;       /* rand-k: d bits, all zero between calls */
    /* The filter fed in pieces: candidates held, the bar, the next index. */
    uint32_t feed_n, feed_next;
    uint64_t feed_bar;
    int feed_guessed;       /* feed_bar is a hint's guess, not the first k's */
    uint64_t *hint;         /* the stream's guess (ec_compress_feed_begin_hinted) */
};

/* The bits needed to tell n values apart: 0 for n = 1, 64 above 2^63.
 * Every message counts its bits with it, twice a worker a round. */
static uint32_t ceil_log2(uint64_t n)
{
    return n <= 1 ? 0 : 64 - (uint32_t)__builtin_clzll(n - 1);
}

static const ec_comp_info comp_rows[EC_COMP_COUNT] = {
#define EC_COMP_ROW(id, name, param, unbiased, contraction, broadcast, layout, shift,  \
                    summary)                                                      \
    [id] = {name, EC_COMP_PARAM_##param, unbiased, contraction, broadcast,        \
            EC_COMP_LAYOUT_##layout, shift, summary},
    EC_COMPRESSORS(EC_COMP_ROW)
#undef EC_COMP_ROW
};

const ec_comp_info *ec_comp_info_of(ec_comp_type t)
{
    return (unsigned)t < EC_COMP_COUNT ? &comp_rows[t] : NULL;
}

const char *ec_comp_name(ec_comp_type t)
{
    return (unsigned)t < EC_COMP_COUNT ? comp_rows[t].name : NULL;
}

int ec_comp_from_name(const char *name, ec_comp_type *out)
{
    if (!name)
        return EC_EINVAL;
    for (int t = 0; t < EC_COMP_COUNT; t++) {
        if (strcmp(name, comp_rows[t].name) == 0) {
            *out = (ec_comp_type)t;
            return 0;
        }
    }
    return EC_EINVAL;
}

const char *ec_comp_names(int contraction_only, char *buf, unsigned buflen)
{
    size_t n = 0;

    if (buflen)
        buf[0] = '\0';
    for (int t = 0; t < EC_COMP_COUNT && n < buflen; t++) {
        if (contraction_only && !comp_rows[t].contraction)
            continue;
        n += (size_t)snprintf(buf + n, buflen - n, "%s%s", n ? ", " : "",
                              comp_rows[t].name);
    }
    return buf;
}

const char *ec_comp_broadcast_names(char *buf, unsigned buflen)
{
    size_t n = 0;

    if (buflen)
        buf[0] = '\0';
    for (int t = 0; t < EC_COMP_COUNT && n < buflen; t++)
        if (comp_rows[t].broadcast)
            n += (size_t)snprintf(buf + n, buflen - n, "%s%s", n ? ", " : "",
                                  comp_rows[t].name);
    return buf;
}

static int uses_k(ec_comp_type t)
{
    return comp_rows[t].param == EC_COMP_PARAM_K;
}

static int uses_s(ec_comp_type t)
{
    return comp_rows[t].param == EC_COMP_PARAM_S;
}

const char *ec_comp_check(const ec_comp_spec *spec, uint32_t d, char *buf,
                          unsigned buflen)
{
    assert(spec);
    /* Without room for a sentence the caller still learns that it failed. */
    if (!buf || buflen == 0)
        buf = NULL;

    if (!ec_comp_name(spec->type)) {
        if (!buf)
            return "compressor.type is unknown";
        char names[256];

        snprintf(buf, buflen, "compressor.type must be one of %s (got %d)",
                 ec_comp_names(0, names, sizeof names), (int)spec->type);
        return buf;
    }
    if (d == 0) {
        if (!buf)
            return "the vector dimension d must be at least 1";
        snprintf(buf, buflen, "the vector dimension d must be at least 1 "
                              "(got 0)");
        return buf;
    }
    if (uses_k(spec->type) && (spec->k < 1 || spec->k > d)) {
        if (!buf)
            return "compressor.k is out of range";
        snprintf(buf, buflen, "compressor.k must be in 1..%u (got %u)",
                 (unsigned)d, (unsigned)spec->k);
        return buf;
    }
    if (uses_s(spec->type) && (spec->s < 1 || spec->s > COMP_MAX_LEVELS)) {
        if (!buf)
            return "compressor.s is out of range";
        snprintf(buf, buflen, "compressor.s must be in 1..%u (got %u)",
                 COMP_MAX_LEVELS, (unsigned)spec->s);
        return buf;
    }
    return NULL;
}

double ec_comp_omega(const ec_comp_spec *spec, uint32_t d)
{
    switch (spec->type) {
    case EC_COMP_NONE:
        return 0.0;
    case EC_COMP_TOPK:
        return -1.0;
    case EC_COMP_RANDK:
    case EC_COMP_RANDK_UNBIASED:
        return (double)d / (double)spec->k - 1.0;
    case EC_COMP_DITHER:
    case EC_COMP_DITHER_UNBIASED: {
        double s = (double)spec->s;

        return fmin((double)d / (s * s), sqrt((double)d) / s);
    }
    case EC_COMP_NATURAL:
        return 0.125;
    case EC_COMP_NATDITHER:
    case EC_COMP_NATDITHER_UNBIASED: {
        /* sqrt(d) / 2^(s-1), without overflow for s up to 65535. */
        double r = ldexp(sqrt((double)d), 1 - (int)spec->s);

        return 0.125 + r * fmin(1.0, r);
    }
    }
    return -1.0;
}

double ec_comp_delta(const ec_comp_spec *spec, uint32_t d)
{
    switch (spec->type) {
    case EC_COMP_NONE:
        return 1.0;
    case EC_COMP_TOPK:
    case EC_COMP_RANDK:
        return (double)spec->k / (double)d;
    case EC_COMP_DITHER:
    case EC_COMP_NATDITHER:
        return 1.0 / (1.0 + ec_comp_omega(spec, d));
    case EC_COMP_NATURAL:
        /* Unbiased with omega < 1: E||Q(x) - x||^2 <= omega ||x||^2. */
        return 1.0 - ec_comp_omega(spec, d);
    case EC_COMP_RANDK_UNBIASED:
    case EC_COMP_DITHER_UNBIASED:
    case EC_COMP_NATDITHER_UNBIASED:
        return 0.0;
    }
    return 0.0;
}

int ec_msg_init(ec_msg *m, uint32_t d)
{
    /* One entry even for d = 0, so a NULL buffer always means failure. */
    size_t n = d ? d : 1;

    memset(m, 0, sizeof *m);
    m->idx = malloc(n * sizeof *m->idx);
    m->val = malloc(n * sizeof *m->val);
    if (!m->idx || !m->val) {
        ec_msg_clear(m);
        return EC_ENOMEM;
    }
    m->d = d;
    return 0;
}

void ec_msg_clear(ec_msg *m)
{
    if (!m)
        return;
    free(m->idx);
    free(m->val);
    memset(m, 0, sizeof *m);
}

void ec_msg_axpy(const ec_msg *m, double alpha, double *dense)
{
    if (m->type == EC_COMP_NONE) {      /* entries 0..nnz-1: idx unread */
        for (uint32_t i = 0; i < m->nnz; i++)
            dense[i] += alpha * m->val[i];
        return;
    }
    for (uint32_t i = 0; i < m->nnz; i++)
        dense[m->idx[i]] += alpha * m->val[i];
}

void ec_msg_to_dense(const ec_msg *m, double *out)
{
    memset(out, 0, (size_t)m->d * sizeof *out);
    for (uint32_t i = 0; i < m->nnz; i++)
        out[m->type == EC_COMP_NONE ? i : m->idx[i]] = m->val[i];
}

/*
 * The one formula for a message's size. It reads only what a wire decoder
 * also holds (type, d, nnz, s), so a decoded message counts exactly the
 * bits its sender counted. A type none message counts its nnz entries: d
 * for a dense vector, 0 for the empty q of an init exchange.
 */
void ec_msg_count_bits(ec_msg *m)
{
    const uint64_t d = m->d, nnz = m->nnz;

    m->value_bits = m->index_bits = m->paper_bits = 0;
    switch (comp_rows[m->type].layout) {
    case EC_COMP_LAYOUT_DENSE:
        m->value_bits = 64 * nnz;
        m->paper_bits = 64 * nnz;
        break;
    case EC_COMP_LAYOUT_INDEXED:
        m->value_bits = 64 * nnz;
        m->index_bits = nnz * ceil_log2(d);
        m->paper_bits = 64 * nnz;
        break;
    case EC_COMP_LAYOUT_SEEDED:
        m->value_bits = 64 * nnz;
        m->index_bits = 64;
        m->paper_bits = 64 * nnz;
        break;
    case EC_COMP_LAYOUT_LEVELS:
        m->value_bits = 64 + d * ceil_log2((uint64_t)m->s + 1) + nnz;
        /* MARINA's reference code: the norm, then a sign bit and
         * ceil(log2 s) level bits per entry (docs/algorithms.md,
         * "Counting bits"). */
        m->paper_bits = 64 + nnz * (1 + ceil_log2(m->s));
        break;
    }
    /* Natural compression's paper: a sign and an 8-bit exponent a value
     * (docs/algorithms.md, "Counting bits"). */
    if (m->type == EC_COMP_NATURAL)
        m->paper_bits = 9 * nnz;
}

double ec_dither_unit(double norm, uint32_t s, double scale)
{
    return norm * scale / (double)s;
}

uint32_t ec_msg_level(const ec_msg *m, uint32_t i)
{
    double a = fabs(m->val[i]);

    assert(comp_rows[m->type].layout == EC_COMP_LAYOUT_LEVELS && i < m->nnz);
    if (m->type == EC_COMP_NATDITHER || m->type == EC_COMP_NATDITHER_UNBIASED) {
        int e;

        /* a = 2^(level - s) * norm * scale exactly, so the quotient is a
         * power of two: 2^(e-1) with frexp's e. */
        (void)frexp(a / (m->norm * m->scale), &e);
        return (uint32_t)((int)m->s + e - 1);
    }
    return (uint32_t)nearbyint(a / ec_dither_unit(m->norm, m->s, m->scale));
}

/* The filter's buffers: a span of keys and one of indices, and a span
 * of keys for the selection's copy. */
static int topk_filter_alloc(ec_compressor *c)
{
    const size_t span = topk_filter_span(c->d, c->spec.k);

    c->fkeys = malloc(2 * span * sizeof *c->fkeys);
    c->fidx = malloc(span * sizeof *c->fidx);
    return c->fkeys && c->fidx ? 0 : -1;
}

ec_compressor *ec_compressor_new(const ec_comp_spec *spec, uint32_t d,
                                 ec_err *e)
{
    char why[256];
    const char *bad = ec_comp_check(spec, d, why, sizeof why);
    ec_compressor *c;

    if (bad) {
        ec_err_set(e, EC_EINVAL, "%s", bad);
        return NULL;
    }
    if (!(c = calloc(1, sizeof *c)))
        goto nomem;
    c->spec = *spec;
    c->d = d;
    c->dither_scale = spec->type == EC_COMP_DITHER ||
                              spec->type == EC_COMP_NATDITHER
                          ? 1.0 / (1.0 + ec_comp_omega(spec, d))
                          : 1.0;
    c->randk_factor = spec->type == EC_COMP_RANDK_UNBIASED
                          ? (double)d / (double)spec->k
                          : 1.0;
    /* Scratch as ec_comp_scratch_bytes counts it. */
    if (spec->type == EC_COMP_TOPK &&
        !(c->cand = malloc((size_t)d * sizeof *c->cand)))
        goto nomem;
    if (spec->type == EC_COMP_TOPK && spec->k > TOPK_HEAP_MAX &&
        spec->k < d && topk_filter_alloc(c) < 0)
        goto nomem;
    if (comp_rows[spec->type].layout == EC_COMP_LAYOUT_SEEDED &&
        !(c->chosen = calloc(((size_t)d + 63) / 64, sizeof *c->chosen)))
        goto nomem;
    return c;
nomem:
    ec_compressor_free(c);
    ec_err_set(e, EC_ENOMEM, "out of memory making a %s compressor for d = %u",
               ec_comp_name(spec->type), (unsigned)d);
    return NULL;
}

uint64_t ec_comp_scratch_bytes(const ec_comp_spec *spec, uint32_t d)
{
    if (spec->type == EC_COMP_TOPK)     /* cand, the filter's buffers */
        return 4 * (uint64_t)d +
               (spec->k > TOPK_HEAP_MAX && spec->k < d
                    ? 20 * (uint64_t)topk_filter_span(d, spec->k)
                    : 0);
    if (comp_rows[spec->type].layout == EC_COMP_LAYOUT_SEEDED)
        return (uint64_t)d / 8 + 8;             /* chosen, d bits */
    return 0;
}

void ec_compressor_free(ec_compressor *c)
{
    if (!c)
        return;
    free(c->cand);
    free(c->fkeys);
    free(c->fidx);
    free(c->chosen);
    free(c);
}

const ec_comp_spec *ec_compressor_spec(const ec_compressor *c)
{
    return &c->spec;
}

int ec_compressor_set_topk_select(ec_compressor *c, ec_topk_select select)
{
    const uint32_t k = c->spec.k;

    if (c->spec.type != EC_COMP_TOPK || (unsigned)select > EC_TOPK_SELECT_FILTER)
        return EC_EINVAL;
    if (select == EC_TOPK_SELECT_HEAP && k > TOPK_HEAP_MAX)
        return EC_EINVAL;
    if (select == EC_TOPK_SELECT_FILTER && k < c->d && !c->fkeys &&
        topk_filter_alloc(c) < 0)
        return EC_ENOMEM;
    c->select = select;
    return 0;
}

static void compress_none(const ec_compressor *c, const double *x, ec_msg *out)
{
    for (uint32_t j = 0; j < c->d; j++) {
        out->idx[j] = j;
        out->val[j] = x[j];
    }
    out->nnz = c->d;
}

/*
 * With the sign bit cleared, the bits of an IEEE double order the same way
 * as its magnitude, so top-k can select on integers. -0.0 maps to the key of
 * 0.0. A NaN's key lies above +Inf, so NaNs are selected before everything
 * else: a diverged iterate stays visible in the message instead of vanishing.
 */
static uint64_t magnitude_key(double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof bits);
    return bits & ~(UINT64_C(1) << 63);
}

/* Whether a ranks below b in the strict order (key descending, index
 * ascending): the heap keeps the lowest-ranked at its root. */
static int topk_below(struct topk_entry a, struct topk_entry b)
{
    return a.key < b.key || (a.key == b.key && a.idx > b.idx);
}

static void topk_sift_down(struct topk_entry *heap, uint32_t k, uint32_t i)
{
    struct topk_entry v = heap[i];

    for (;;) {
        uint32_t child = 2 * i + 1;

        if (child >= k)
            break;
        if (child + 1 < k && topk_below(heap[child + 1], heap[child]))
            child++;
        if (!topk_below(heap[child], v))
            break;
        heap[i] = heap[child];
        i = child;
    }
    heap[i] = v;
}

/*
 * Top-k by the heap (TOPK_LIST_MAX < k <= TOPK_HEAP_MAX, k < d, or any
 * such k when a test or bench asks for it). Entries come in index order, so one whose key only
 * equals the root's ranks below it and stays out. The scan takes four
 * entries at a time and looks at them one by one only when one may enter:
 * |x| > the root's magnitude, or a NaN, for which the comparison is false
 * (its key lies above every number's). Returns 0, or -1 having written
 * nothing when more than `budget` entries entered.
 */
static int compress_topk_heap(const ec_compressor *c, const double *x,
                              ec_msg *out, uint32_t budget)
{
    const uint32_t d = c->d, k = c->spec.k;
    struct topk_entry heap[TOPK_HEAP_MAX];
    uint32_t entered = 0;
    double bar;
    uint32_t j;

    assert(k >= 1 && k <= TOPK_HEAP_MAX && k < d);
    for (j = 0; j < k; j++) {
        heap[j].key = magnitude_key(x[j]);
        heap[j].idx = j;
    }
    for (uint32_t i = k / 2; i-- > 0;)
        topk_sift_down(heap, k, i);
    memcpy(&bar, &heap[0].key, sizeof bar);
    while (j < d) {
        if (j + 4 <= d && fabs(x[j]) <= bar && fabs(x[j + 1]) <= bar &&
            fabs(x[j + 2]) <= bar && fabs(x[j + 3]) <= bar) {
            j += 4;
            continue;
        }
        for (uint32_t end = j + 4 < d ? j + 4 : d; j < end; j++) {
            uint64_t key = magnitude_key(x[j]);

            if (key > heap[0].key) {
                heap[0].key = key;
                heap[0].idx = j;
                topk_sift_down(heap, k, 0);
                memcpy(&bar, &heap[0].key, sizeof bar);
                entered++;
            }
        }
        if (entered > budget)
            return -1;
    }
    /* The message lists its entries in index order. */
    for (uint32_t i = 1; i < k; i++) {
        struct topk_entry v = heap[i];
        uint32_t at = i;

        while (at > 0 && heap[at - 1].idx > v.idx) {
            heap[at] = heap[at - 1];
            at--;
        }
        heap[at] = v;
    }
    for (uint32_t i = 0; i < k; i++) {
        out->idx[i] = heap[i].idx;
        out->val[i] = x[heap[i].idx];
    }
    out->nnz = k;
    return 0;
}

/*
 * The largest key t among keys[0..n) such that at least k keys are >= t
 * (the k-th largest), by an MSB-first radix select over tmp, a copy that
 * shrinks to the bucket holding it: at most 8 passes, each over what is
 * left. 1 <= k <= n.
 */
static uint64_t kth_largest_key(const uint64_t *keys, uint64_t *tmp,
                                uint32_t n, uint32_t k)
{
    static const unsigned char shift[] = {52, 44, 36, 28, 20, 12, 4, 0};
    static const unsigned char width[] = {11, 8, 8, 8, 8, 8, 8, 4};
    uint32_t count[2048];
    uint64_t prefix = 0;

    memcpy(tmp, keys, (size_t)n * sizeof *tmp);
    for (size_t p = 0; p < sizeof shift && n > 1; p++) {
        const uint64_t mask = (UINT64_C(1) << width[p]) - 1;
        uint32_t above = 0, b = (uint32_t)mask, kept = 0;

        memset(count, 0, (size_t)(mask + 1) * sizeof count[0]);
        for (uint32_t i = 0; i < n; i++)
            count[(tmp[i] >> shift[p]) & mask]++;
        while (above + count[b] < k)
            above += count[b--];
        k -= above;
        prefix |= (uint64_t)b << shift[p];
        for (uint32_t i = 0; i < n; i++) {
            tmp[kept] = tmp[i];
            kept += ((tmp[i] >> shift[p]) & mask) == b;
        }
        n = kept;
        if (n == k)                 /* all that is left is chosen */
            break;
    }
    /* The smallest of the keys left: every one of them is chosen. */
    for (uint32_t i = 0; i < n; i++)
        prefix = i == 0 || tmp[i] < prefix ? tmp[i] : prefix;
    return prefix;
}

/*
 * Keeps the k best of the n candidates (keys, idx) in index order, where
 * they already are: those above the k-th largest key t and the first of
 * those equal to it. Returns t.
 */
static uint64_t topk_compact(uint64_t *keys, uint32_t *idx, uint64_t *tmp,
                             uint32_t n, uint32_t k)
{
    const uint64_t t = kth_largest_key(keys, tmp, n, k);
    uint32_t above = 0, m = 0, eq = 0;

    for (uint32_t i = 0; i < n; i++)
        above += keys[i] > t;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t equal = keys[i] == t;

        keys[m] = keys[i];
        idx[m] = idx[i];
        m += (keys[i] > t) | (equal & (eq < k - above));
        eq += equal;
    }
    assert(m == k);
    return t;
}

/*
 * Top-k by filtering (TOPK_HEAP_MAX < k < d, or any k < d when asked
 * for): one pass over x appends every entry that may still be chosen, key
 * above bar, to a buffer of topk_filter_span(d, k) candidates, without a
 * branch on the key; when the buffer fills, topk_compact keeps its k best
 * and bar rises to the k-th. An entry whose key only equals bar comes
 * after the k kept (entries come in index order), so it ranks below them
 * and stays out. The candidates stay in index order throughout, so the k
 * left at the end are the message as they stand. Each compaction costs
 * O(span) and follows at least span - k entries, so the whole is O(d)
 * whatever the data. The pass takes x in pieces (ec_compress_feed), so a
 * caller that makes x can select as it goes; the k best of all d entries
 * under the tie rule are one set, so the pieces change nothing.
 */
/*
 * Whether none of x[0..TOPK_SCAN) may enter: every |x_j| <= bar, a NaN
 * failing the comparison. The scan is straight-line code with one branch
 * a group, not one an entry: GCC's and Clang's vector types give packed
 * compares (two doubles at a time on the baseline x86-64), and elsewhere
 * the comparisons are combined with & rather than &&.
 */
#if defined(__GNUC__)
typedef double topk_vec __attribute__((vector_size(32)));
typedef int64_t topk_mask __attribute__((vector_size(32)));

static inline int topk_all_below(const double *x, double bar)
{
    const topk_mask magnitude = {INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX};
    const topk_vec b = {bar, bar, bar, bar};
    topk_mask below = {-1, -1, -1, -1};

    for (int i = 0; i < TOPK_SCAN; i += 4) {
        topk_vec v;

        memcpy(&v, x + i, sizeof v);
        v = (topk_vec)((topk_mask)v & magnitude);
        below &= v <= b;
    }
    return (below[0] & below[1] & below[2] & below[3]) != 0;
}
#else
static int topk_all_below(const double *x, double bar)
{
    int below = 1;

    for (int i = 0; i < TOPK_SCAN; i++)
        below &= fabs(x[i]) <= bar;
    return below;
}
#endif

static void topk_filter_begin(ec_compressor *c)
{
    c->feed_n = 0;
    c->feed_next = 0;
    c->feed_bar = UINT64_MAX;
    c->feed_guessed = 0;
    c->hint = NULL;
}

/*
 * A stream's guess of its next threshold: TOPK_FEED_GUESS times this call's
 * T, the k-th largest magnitude. An error memory changes little from one
 * round to the next: in ECLK with top-1000 at d = 1e6 (20 workers, its
 * first 100 rounds) each worker's T was 1.016 to 2.9 times its last. A
 * guess above the next T costs a second pass over x (topk_filter_end); one
 * below it only the candidates between the two. 0, no guess, for a T of 0
 * or a NaN's key.
 */
#define TOPK_FEED_GUESS 0.9

static uint64_t topk_feed_guess(uint64_t t)
{
    double v;

    memcpy(&v, &t, sizeof v);
    if (!(v > 0.0) || !isfinite(v))
        return 0;
    v *= TOPK_FEED_GUESS;
    memcpy(&t, &v, sizeof t);
    return t;
}

/* Entries [j, end) of x, the next ones in index order. Its scan gets an
 * AVX2 clone (ecopt/clones.h), four doubles a compare instead of two;
 * which entries become candidates is the same either way. */
EC_AVX2_CLONES
static void topk_filter_feed(ec_compressor *c, const double *x, uint32_t j,
                             uint32_t end)
{
    const uint32_t k = c->spec.k;
    const size_t span = topk_filter_span(c->d, k);
    uint64_t *keys = c->fkeys, *tmp = c->fkeys + span;
    uint32_t *idx = c->fidx, n = c->feed_n;
    uint64_t bar = c->feed_bar;
    double bar_mag;

    assert(j == c->feed_next && end <= c->d && keys && idx);
    /* The first k are all candidates; bar is the smallest of them. With a
     * guess g, bar is g - 1 from the start: every key >= g is a candidate,
     * T's ties among them when T = g. */
    for (; !c->feed_guessed && j < k && j < end; j++) {
        keys[n] = magnitude_key(x[j]);
        idx[n] = j;
        bar = keys[n] < bar ? keys[n] : bar;
        n++;
    }
    memcpy(&bar_mag, &bar, sizeof bar_mag);
    while (j < end) {
        if (j + TOPK_SCAN <= end && topk_all_below(x + j, bar_mag)) {
            j += TOPK_SCAN;
            continue;
        }
        for (uint32_t stop = j + TOPK_SCAN < end ? j + TOPK_SCAN : end;
             j < stop; j++) {
            uint64_t key = magnitude_key(x[j]);

            keys[n] = key;
            idx[n] = j;
            n += key > bar;
        }
        if (n + TOPK_SCAN > span) {
            bar = topk_compact(keys, idx, tmp, n, k);
            n = k;
            memcpy(&bar_mag, &bar, sizeof bar_mag);
        }
    }
    c->feed_n = n;
    c->feed_bar = bar;
    c->feed_next = end;
}

static void topk_filter_end(ec_compressor *c, const double *x, ec_msg *out)
{
    const uint32_t k = c->spec.k;
    uint64_t *keys = c->fkeys, *tmp = c->fkeys + topk_filter_span(c->d, k);
    uint32_t *idx = c->fidx;
    uint64_t *hint = c->hint, t = UINT64_MAX;

    assert(c->feed_next == c->d);
    if (c->feed_n < k) {
        /* Fewer than k keys reached the guess: T lies below it. The whole
         * of x again, from the first k. */
        assert(c->feed_guessed);
        topk_filter_begin(c);
        topk_filter_feed(c, x, 0, c->d);
    }
    assert(c->feed_n >= k);
    if (c->feed_n > k)
        t = topk_compact(keys, idx, tmp, c->feed_n, k);
    else
        for (uint32_t i = 0; i < k; i++)
            t = keys[i] < t ? keys[i] : t;
    for (uint32_t i = 0; i < k; i++) {
        out->idx[i] = idx[i];
        out->val[i] = x[idx[i]];
    }
    out->nnz = k;
    if (hint)
        *hint = topk_feed_guess(t);
}

static void compress_topk_filter(ec_compressor *c, const double *x,
                                 ec_msg *out)
{
    assert(c->spec.k >= 1 && c->spec.k < c->d);
    topk_filter_begin(c);
    topk_filter_feed(c, x, 0, c->d);
    topk_filter_end(c, x, out);
}

/*
 * Top-k for k <= TOPK_LIST_MAX (and k < d): the k best so far in a list
 * in rank order, which an entry joins by insertion. For the smallest k
 * (top-1 and top-5 are the papers' settings) that is cheaper than the
 * heap's sift, and the scan is one comparison an entry: |x| > the last
 * one's magnitude, or a NaN, for which the comparison is false. Entries
 * come in index order, so one whose key only equals the last one's ranks
 * below it and stays out.
 */
static void compress_topk_list(const ec_compressor *c, const double *x,
                               ec_msg *out)
{
    const uint32_t d = c->d, k = c->spec.k;
    uint64_t key[TOPK_LIST_MAX];
    uint32_t idx[TOPK_LIST_MAX], j;
    double bar;

    assert(k >= 1 && k <= TOPK_LIST_MAX && k < d);
    for (j = 0; j < k; j++) {
        uint64_t kj = magnitude_key(x[j]);
        uint32_t at = j;

        for (; at > 0 && key[at - 1] < kj; at--) {
            key[at] = key[at - 1];
            idx[at] = idx[at - 1];
        }
        key[at] = kj;
        idx[at] = j;
    }
    memcpy(&bar, &key[k - 1], sizeof bar);
    for (; j < d; j++) {
        uint64_t kj;
        uint32_t at = k - 1;

        if (fabs(x[j]) <= bar)
            continue;
        kj = magnitude_key(x[j]);
        if (kj <= key[k - 1])
            continue;           /* a NaN end: nothing lies above it */
        for (; at > 0 && key[at - 1] < kj; at--) {
            key[at] = key[at - 1];
            idx[at] = idx[at - 1];
        }
        key[at] = kj;
        idx[at] = j;
        memcpy(&bar, &key[k - 1], sizeof bar);
    }
    /* The message lists its entries in index order. */
    for (uint32_t i = 1; i < k; i++) {
        uint32_t v = idx[i], at = i;

        while (at > 0 && idx[at - 1] > v) {
            idx[at] = idx[at - 1];
            at--;
        }
        idx[at] = v;
    }
    for (uint32_t i = 0; i < k; i++) {
        out->idx[i] = idx[i];
        out->val[i] = x[idx[i]];
    }
    out->nnz = k;
}

/*
 * Top-k for k <= TOPK_LIST_MAX on short vectors, with no branch that
 * depends on the data. On a vector of a hundred entries the list above
 * mispredicts its way through: each of the k ln(d/k) entries that join it
 * costs a wrong guess to enter and another to find its place, and together
 * they are most of its time. Here, instead:
 *   1. the largest key of each block of TOPK_BLOCK entries;
 *   2. bar = the k-th largest of those maxima: k distinct entries reach it,
 *      so bar <= T, the k-th largest key, and no entry below bar is chosen;
 *   3. the entries with key >= bar, in index order (usually k to 2k);
 *   4. T = the k-th largest of their keys, and how many of them lie above T;
 *   5. one pass over them emits every key above T and the first keys equal
 *      to T until there are k: the tie rule (index ascending).
 * The k-th largest of a stream is kept branch-free in a descending list:
 * top[i] = max(top[i], min(top[i-1], v)). In whole runs (error memories
 * of 112 to 300 entries, 20 workers) this made a round 1.5x faster with
 * top-5. Beyond TOPK_BLOCKED_MAX the two measured alike (the list's entries
 * grow only as ln d), so long vectors keep the list's single pass.
 */
#define TOPK_BLOCK 8
#define TOPK_BLOCKED_MAX 1024

static uint64_t key_max(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static void kth_insert(uint64_t *top, uint32_t k, uint64_t v)
{
    for (uint32_t i = k; i-- > 1;)
        top[i] = key_max(top[i], top[i - 1] < v ? top[i - 1] : v);
    top[0] = key_max(top[0], v);
}

/*
 * Two steps of topk_blocked on one whole block of TOPK_BLOCK entries, with
 * packed operations where the baseline has them (SSE2 on x86-64). For
 * numbers, |a| < |b| exactly when key(a) < key(b), and the largest |x_j|
 * has the bits of the largest key, so these give what the keys give; a
 * NaN (whose key lies above every number) makes block_max_simd return 0,
 * and the caller then takes the keys' path for that block and every scan
 * after it.
 */
#if defined(__SSE2__) && TOPK_BLOCK == 8
static inline __m128d abs_pd(const double *p)
{
    const __m128d magnitude =
        _mm_castsi128_pd(_mm_set1_epi64x(INT64_MAX));

    return _mm_and_pd(_mm_loadu_pd(p), magnitude);
}

static int block_max_simd(const double *p, uint64_t *hi)
{
    __m128d a = abs_pd(p), b = abs_pd(p + 2), c = abs_pd(p + 4),
            e = abs_pd(p + 6);
    __m128d nan = _mm_or_pd(_mm_cmpunord_pd(a, b), _mm_cmpunord_pd(c, e));
    __m128d m = _mm_max_pd(_mm_max_pd(a, b), _mm_max_pd(c, e));
    double top;

    if (_mm_movemask_pd(nan))
        return 0;
    m = _mm_max_sd(m, _mm_unpackhi_pd(m, m));
    top = _mm_cvtsd_f64(m);
    memcpy(hi, &top, sizeof *hi);
    return 1;
}

/* Appends to cand, in index order, the entries of the block (which starts
 * at index j) whose key is at least bar; none of them is a NaN. */
static uint32_t block_at_least_simd(const double *p, uint32_t j, uint64_t bar,
                                    uint32_t *cand, uint32_t n)
{
    double barv;
    __m128d b;
    unsigned mask;

    memcpy(&barv, &bar, sizeof barv);
    b = _mm_set1_pd(barv);
    mask = (unsigned)_mm_movemask_pd(_mm_cmpge_pd(abs_pd(p), b)) |
           (unsigned)_mm_movemask_pd(_mm_cmpge_pd(abs_pd(p + 2), b)) << 2 |
           (unsigned)_mm_movemask_pd(_mm_cmpge_pd(abs_pd(p + 4), b)) << 4 |
           (unsigned)_mm_movemask_pd(_mm_cmpge_pd(abs_pd(p + 6), b)) << 6;
    while (mask) {
        cand[n++] = j + (uint32_t)__builtin_ctz(mask);
        mask &= mask - 1;
    }
    return n;
}
#else
static int block_max_simd(const double *p, uint64_t *hi)
{
    (void)p;
    (void)hi;
    return 0;
}

static uint32_t block_at_least_simd(const double *p, uint32_t j, uint64_t bar,
                                    uint32_t *cand, uint32_t n)
{
    for (uint32_t i = 0; i < TOPK_BLOCK; i++) {
        cand[n] = j + i;
        n += magnitude_key(p[i]) >= bar;
    }
    return n;
}
#endif

static inline void topk_blocked(const ec_compressor *c, const double *x,
                                ec_msg *out, const uint32_t k)
{
    const uint32_t d = c->d;
    const uint32_t nb = (d + TOPK_BLOCK - 1) / TOPK_BLOCK;
    uint64_t top[TOPK_LIST_MAX] = {0}, hi[TOPK_BLOCKED_MAX / TOPK_BLOCK];
    uint64_t bar, t;
    uint32_t *cand = c->cand, n = 0, above = 0, eq = 0, m = 0, nsel = 0;
    uint32_t sel[TOPK_BLOCKED_MAX / TOPK_BLOCK];
    uint32_t pick[TOPK_LIST_MAX + 1];
    int nan_block = 0;      /* a whole block held a NaN */

    assert(k >= 1 && k <= TOPK_LIST_MAX && k < d && d <= TOPK_BLOCKED_MAX);
    for (uint32_t b = 0; b < nb; b++) {
        const double *p = x + (size_t)b * TOPK_BLOCK;

        if (d - b * TOPK_BLOCK >= TOPK_BLOCK && block_max_simd(p, &hi[b])) {
            /* The packed maximum: no NaN in the block. */
        } else if (d - b * TOPK_BLOCK >= TOPK_BLOCK) {
            /* A tree, not a chain: the eight keys compare in parallel. */
            nan_block = 1;
            hi[b] = key_max(key_max(key_max(magnitude_key(p[0]),
                                            magnitude_key(p[1])),
                                    key_max(magnitude_key(p[2]),
                                            magnitude_key(p[3]))),
                            key_max(key_max(magnitude_key(p[4]),
                                            magnitude_key(p[5])),
                                    key_max(magnitude_key(p[6]),
                                            magnitude_key(p[7]))));
        } else {
            hi[b] = 0;
            for (uint32_t j = 0; j < d - b * TOPK_BLOCK; j++)
                hi[b] = key_max(hi[b], magnitude_key(p[j]));
        }
        kth_insert(top, k, hi[b]);
    }
    bar = top[k - 1];   /* 0, all of x, when there are fewer than k blocks */
    for (uint32_t b = 0; b < nb; b++) {
        sel[nsel] = b;
        nsel += hi[b] >= bar;
    }
    for (uint32_t s = 0; s < nsel; s++) {
        uint32_t j = sel[s] * TOPK_BLOCK;
        uint32_t end = d - j < TOPK_BLOCK ? d : j + TOPK_BLOCK;

        if (!nan_block && end - j == TOPK_BLOCK) {
            n = block_at_least_simd(x + j, j, bar, cand, n);
            continue;
        }
        for (; j < end; j++) {
            cand[n] = j;
            n += magnitude_key(x[j]) >= bar;
        }
    }
    assert(n >= k);
    memset(top, 0, sizeof top);
    for (uint32_t i = 0; i < n; i++)
        kth_insert(top, k, magnitude_key(x[cand[i]]));
    t = top[k - 1];
    for (uint32_t i = 0; i < n; i++)
        above += magnitude_key(x[cand[i]]) > t;
    /* Exactly k are taken (above, and k - above of the ties), so m stays
     * <= k; pick's slot past k holds the writes after the k-th. */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t key = magnitude_key(x[cand[i]]);
        uint32_t equal = key == t;

        pick[m] = cand[i];
        m += (key > t) | (equal & (eq < k - above));
        eq += equal;
    }
    assert(m == k);
    for (uint32_t i = 0; i < k; i++) {
        out->idx[i] = pick[i];
        out->val[i] = x[pick[i]];
    }
    out->nnz = k;
}

/* With k a constant in each call, the compiler keeps the list in registers. */
static void compress_topk_blocked(const ec_compressor *c, const double *x,
                                  ec_msg *out)
{
    switch (c->spec.k) {
    case 1: topk_blocked(c, x, out, 1); break;
    case 2: topk_blocked(c, x, out, 2); break;
    case 3: topk_blocked(c, x, out, 3); break;
    case 4: topk_blocked(c, x, out, 4); break;
    case 5: topk_blocked(c, x, out, 5); break;
    case 6: topk_blocked(c, x, out, 6); break;
    case 7: topk_blocked(c, x, out, 7); break;
    default: topk_blocked(c, x, out, TOPK_LIST_MAX); break;
    }
}

/*
 * The k largest keys in the strict order (key descending, index ascending).
 * Up to TOPK_LIST_MAX, the blocked passes on vectors up to TOPK_BLOCKED_MAX
 * and the list on longer ones; up to TOPK_HEAP_MAX the heap while it stays
 * within its budget; below d the filter. With k = d, after a heap over
 * budget, or when asked for, an
 * MSB-first radix select finds the k-th largest key T one digit at a time
 * over a shrinking candidate list (8 passes at most, each O(candidates), so
 * O(d) in all whatever the data); then one scan emits, in index order,
 * every key above T and the first `take_equal` keys equal to T, which is
 * exactly the tie rule.
 */
static void compress_topk(ec_compressor *c, const double *x, ec_msg *out)
{
    /*
     * The digits, most significant first. For long vectors the first digit
     * is the whole exponent (the sign bit is clear), so for typical data one
     * pass over x already leaves few candidates; clearing its 2048 counters
     * costs more than it saves on short vectors, which go a byte at a time.
     */
    typedef struct {
        unsigned char shift, width;
    } digit;
    static const digit by_exponent[] = {{52, 11}, {44, 8}, {36, 8}, {28, 8},
                                        {20, 8},  {12, 8}, {4, 8},  {0, 4}};
    static const digit by_byte[] = {{56, 8}, {48, 8}, {40, 8}, {32, 8},
                                    {24, 8}, {16, 8}, {8, 8},  {0, 8}};
    const uint32_t d = c->d, k = c->spec.k;
    const digit *digits = d >= 4096 ? by_exponent : by_byte;
    uint32_t *cand = c->cand;
    uint32_t hist[2048];
    uint32_t ncand = d, take_equal = k, n = 0;
    uint64_t threshold = 0;

    if (c->select == EC_TOPK_SELECT_AUTO && k < d && k <= TOPK_LIST_MAX &&
        d <= TOPK_BLOCKED_MAX) {
        compress_topk_blocked(c, x, out);
        return;
    }
    if (c->select == EC_TOPK_SELECT_AUTO && k < d && k <= TOPK_LIST_MAX) {
        compress_topk_list(c, x, out);
        return;
    }
    if (c->select == EC_TOPK_SELECT_HEAP && k < d &&
        compress_topk_heap(c, x, out, UINT32_MAX) == 0)
        return;
    if (c->select == EC_TOPK_SELECT_FILTER && k < d) {
        compress_topk_filter(c, x, out);
        return;
    }
    if (c->select == EC_TOPK_SELECT_AUTO && k < d && k <= TOPK_HEAP_MAX &&
        compress_topk_heap(c, x, out, TOPK_HEAP_BUDGET(d, k)) == 0)
        return;
    if (c->select == EC_TOPK_SELECT_AUTO && k < d) {
        compress_topk_filter(c, x, out);
        return;
    }
    /* With k = d everything is selected and no order needs to be found. */
    for (size_t p = 0; p < 8 && k < d; p++) {
        const unsigned shift = digits[p].shift;
        const uint64_t mask = (UINT64_C(1) << digits[p].width) - 1;
        uint32_t above = 0, kept = 0, b = (uint32_t)mask;

        memset(hist, 0, (size_t)(mask + 1) * sizeof hist[0]);
        /* The first pass reads x directly: the candidates are all of it. */
        if (p == 0) {
            for (uint32_t j = 0; j < d; j++)
                hist[magnitude_key(x[j]) >> shift]++;
        } else {
            for (uint32_t i = 0; i < ncand; i++)
                hist[(magnitude_key(x[cand[i]]) >> shift) & mask]++;
        }
        /* The bucket that holds the take_equal-th largest candidate. */
        while (above + hist[b] < take_equal)
            above += hist[b--];
        take_equal -= above;
        threshold |= (uint64_t)b << shift;

        /* Keep the candidates in that bucket; in place, since kept <= i. */
        if (p == 0) {
            for (uint32_t j = 0; j < d; j++)
                if ((magnitude_key(x[j]) >> shift) == b)
                    cand[kept++] = j;
        } else {
            for (uint32_t i = 0; i < ncand; i++)
                if (((magnitude_key(x[cand[i]]) >> shift) & mask) == b)
                    cand[kept++] = cand[i];
        }
        ncand = kept;

        if (ncand == take_equal) {
            /*
             * Every candidate left is selected. Every key above the smallest
             * of them is selected too (it is a candidate or lies in a higher
             * bucket), so that smallest key is T and all its copies are taken.
             */
            threshold = UINT64_MAX;
            for (uint32_t i = 0; i < ncand; i++) {
                uint64_t key = magnitude_key(x[cand[i]]);

                if (key < threshold) {
                    threshold = key;
                    take_equal = 0;
                }
                if (key == threshold)
                    take_equal++;
            }
            break;
        }
    }
    /* After the last digit every candidate equals threshold exactly. */

    for (uint32_t j = 0; j < d && n < k; j++) {
        uint64_t key = magnitude_key(x[j]);

        if (key > threshold || (key == threshold && take_equal > 0)) {
            if (key == threshold)
                take_equal--;
            out->idx[n] = j;
            out->val[n] = x[j];
            n++;
        }
    }
    assert(n == k);
    out->nnz = n;
}

/*
 * Floyd's algorithm draws k distinct indices with k draws, marking them in a
 * bitmap; reading the bitmap word by word yields them in ascending order in
 * O(d/64 + k) and leaves it zero for the next call. Every draw comes from a
 * local generator seeded with seed alone, so the compressor and a receiver
 * holding msg->seed (the wire decoder) run this same function and get the
 * same index set.
 */
void ec_randk_indices(uint64_t seed, uint32_t d, uint32_t k, uint64_t *bitmap,
                      uint32_t *idx)
{
    const size_t words = ((size_t)d + 63) / 64;
    ec_rng local;
    uint32_t n = 0;

    assert(k <= d);
    ec_rng_seed(&local, seed, RANDK_STREAM);
    for (uint32_t j = d - k; j < d; j++) {
        uint32_t t = (uint32_t)ec_rng_below(&local, (uint64_t)j + 1);

        if (bitmap[t / 64] >> (t % 64) & 1)
            t = j;
        bitmap[t / 64] |= UINT64_C(1) << (t % 64);
    }
    for (size_t w = 0; w < words; w++) {
        uint64_t bits = bitmap[w];

        while (bits) {
            idx[n++] = (uint32_t)(w * 64 + (size_t)__builtin_ctzll(bits));
            bits &= bits - 1;
        }
        bitmap[w] = 0;
    }
    assert(n == k);
}

/* The seed is one draw from the caller's rng; the indices follow from it. */
static void compress_randk(ec_compressor *c, const double *x, ec_rng *rng,
                           ec_msg *out)
{
    const uint32_t k = c->spec.k;

    assert(rng);
    out->seed = ec_rng_next(rng);
    ec_randk_indices(out->seed, c->d, k, c->chosen, out->idx);
    for (uint32_t i = 0; i < k; i++)
        out->val[i] = c->randk_factor * x[out->idx[i]];
    out->nnz = k;
}

/*
 * ||x||_2 without spurious overflow or underflow: the plain sum of squares
 * is exact enough whenever it is a normal number, and only otherwise do we
 * pay a second pass scaled by max|x_j|. Inf and NaN come back as they are.
 */
static double vector_norm(const double *x, uint32_t d)
{
    double sum = 0.0, amax = 0.0;

    for (uint32_t j = 0; j < d; j++)
        sum += x[j] * x[j];
    if (sum >= DBL_MIN && sum <= DBL_MAX)
        return sqrt(sum);

    for (uint32_t j = 0; j < d; j++) {
        double a = fabs(x[j]);

        if (isnan(a))
            return a;
        if (a > amax)
            amax = a;
    }
    if (amax == 0.0 || isinf(amax))
        return amax;
    sum = 0.0;
    for (uint32_t j = 0; j < d; j++) {
        double t = x[j] / amax;

        sum += t * t;
    }
    return amax * sqrt(sum);
}

/*
 * QSGD-style random dithering: r = s|x_j|/||x|| is rounded to floor(r) + 1
 * with probability r - floor(r), else down, so the level is unbiased for r.
 * A uniform is drawn only when r is not an integer (zeros draw nothing); the
 * draws are still a pure function of x and the rng state.
 */
static void compress_dither(ec_compressor *c, const double *x, ec_rng *rng,
                            ec_msg *out)
{
    const uint32_t d = c->d, s = c->spec.s;
    const double norm = vector_norm(x, d);
    uint32_t n = 0;

    out->norm = norm;
    out->scale = c->dither_scale;
    out->s = s;
    /* A zero vector sends only its norm. So does a non-finite one: levels
     * are meaningless then, and the norm shows the caller what happened. */
    if (norm > 0.0 && isfinite(norm)) {
        const double unit = ec_dither_unit(norm, s, c->dither_scale);

        assert(rng);
        for (uint32_t j = 0; j < d; j++) {
            double r = (double)s * fabs(x[j]) / norm, v;
            uint32_t level;

            /* r <= s in exact arithmetic; rounding may nudge it above. */
            if (r >= (double)s) {
                level = s;
            } else {
                level = (uint32_t)r;
                if (r > (double)level &&
                    ec_rng_uniform(rng) < r - (double)level)
                    level++;
            }
            if (level == 0)
                continue;
            v = (double)level * unit;
            out->idx[n] = j;
            out->val[n] = x[j] < 0 ? -v : v;
            n++;
        }
    }
    out->nnz = n;
}

/*
 * One magnitude a > 0, finite, rounded at random to one of its two
 * neighbouring powers of two, unbiased: a = 2^(e-1) (1 + t) with t in
 * [0, 1) rounds up to 2^e with probability t, else down to 2^(e-1). A
 * power of two (t = 0) draws nothing, so the draws are a pure function of
 * the values and the rng state. Exact: frexp and ldexp only move the
 * exponent, and 2 m - 1 is exact for m in [1/2, 1).
 */
static double natural_round(double a, ec_rng *rng)
{
    int e;
    double m = frexp(a, &e), t = 2.0 * m - 1.0;

    if (t > 0.0 && ec_rng_uniform(rng) < t)
        return ldexp(1.0, e);
    return ldexp(1.0, e - 1);
}

/*
 * Natural compression C_nat (docs/algorithms.md, "Compressors"): every
 * value's magnitude rounded by natural_round, its sign kept. Zeros stay
 * (signed) zeros and a value that is not finite is sent as it is, so a
 * diverged iterate stays visible; every entry is listed, as for none.
 */
static void compress_natural(const ec_compressor *c, const double *x,
                             ec_rng *rng, ec_msg *out)
{
    assert(rng);
    for (uint32_t j = 0; j < c->d; j++) {
        double v = x[j];

        if (v != 0.0 && isfinite(v))
            v = copysign(natural_round(fabs(v), rng), v);
        out->idx[j] = j;
        out->val[j] = v;
    }
    out->nnz = c->d;
}

/*
 * Natural dithering (docs/algorithms.md, "Compressors"): y = |x_j|/||x||_2
 * in [0, 1] rounded at random, unbiased, to one of the levels 0, 2^(1-s),
 * 2^(2-s), ..., 1/2, 1: below 2^(1-s) between 0 and 2^(1-s), above it to a
 * neighbouring power of two as natural compression does. Level l in 1..s
 * stands for 2^(l-s); the value sent is +-2^(l-s) ||x|| scale, exact.
 * Draws are made only when y lies strictly between two levels.
 */
static void compress_natdither(ec_compressor *c, const double *x, ec_rng *rng,
                               ec_msg *out)
{
    const uint32_t d = c->d, s = c->spec.s;
    const double norm = vector_norm(x, d);
    /* 2^(1-s), the lowest nonzero level; 0 once it is below every double,
     * when no nonzero y lies under it. */
    const double lowest = ldexp(1.0, 1 - (int)s);
    uint32_t n = 0;

    out->norm = norm;
    out->scale = c->dither_scale;
    out->s = s;
    /* As for dither: a zero or non-finite vector sends only its norm. */
    if (norm > 0.0 && isfinite(norm)) {
        const double unit = norm * c->dither_scale;

        assert(rng);
        for (uint32_t j = 0; j < d; j++) {
            double y = fabs(x[j]) / norm, p;
            int level;

            if (y == 0.0)
                continue;
            if (y >= 1.0) {
                level = (int)s;     /* rounding may nudge y above 1 */
            } else if (y < lowest) {
                if (ec_rng_uniform(rng) >= y / lowest)
                    continue;       /* rounded down to level 0 */
                level = 1;
            } else {
                int e;

                p = natural_round(y, rng);
                (void)frexp(p, &e);
                level = (int)s + e - 1;     /* p = 2^(e-1) */
            }
            out->idx[n] = j;
            out->val[n] = copysign(ldexp(unit, level - (int)s), x[j]);
            n++;
        }
    }
    out->nnz = n;
}

/* The fields every message starts from. */
static void msg_start(const ec_compressor *c, ec_msg *out)
{
    assert(c && out && out->idx && out->val);
    assert(out->d == c->d);

    out->type = c->spec.type;
    out->nnz = 0;
    out->seed = 0;
    out->norm = 0.0;
    out->scale = 0.0;
    out->s = 0;
}

void ec_compress(ec_compressor *c, const double *x, ec_rng *rng, ec_msg *out)
{
    assert(x);
    msg_start(c, out);

    switch (c->spec.type) {
    case EC_COMP_NONE:
        compress_none(c, x, out);
        break;
    case EC_COMP_TOPK:
        compress_topk(c, x, out);
        break;
    case EC_COMP_RANDK:
    case EC_COMP_RANDK_UNBIASED:
        compress_randk(c, x, rng, out);
        break;
    case EC_COMP_DITHER:
    case EC_COMP_DITHER_UNBIASED:
        compress_dither(c, x, rng, out);
        break;
    case EC_COMP_NATURAL:
        compress_natural(c, x, rng, out);
        break;
    case EC_COMP_NATDITHER:
    case EC_COMP_NATDITHER_UNBIASED:
        compress_natdither(c, x, rng, out);
        break;
    }
    ec_msg_count_bits(out);
}

int ec_compress_feeds(const ec_compressor *c)
{
    const uint32_t k = c->spec.k;

    if (c->spec.type != EC_COMP_TOPK || k >= c->d || !c->fkeys)
        return 0;
    return c->select == EC_TOPK_SELECT_FILTER ||
           (c->select == EC_TOPK_SELECT_AUTO && k > TOPK_HEAP_MAX);
}

void ec_compress_feed_begin(ec_compressor *c)
{
    assert(ec_compress_feeds(c));
    topk_filter_begin(c);
}

void ec_compress_feed_begin_hinted(ec_compressor *c, uint64_t *hint)
{
    assert(ec_compress_feeds(c) && hint);
    topk_filter_begin(c);
    c->hint = hint;
    if (*hint > 0) {
        c->feed_bar = *hint - 1;
        c->feed_guessed = 1;
    }
}

void ec_compress_feed(ec_compressor *c, const double *x, uint32_t begin,
                      uint32_t end)
{
    topk_filter_feed(c, x, begin, end);
}

void ec_compress_feed_end(ec_compressor *c, const double *x, ec_msg *out)
{
    msg_start(c, out);
    topk_filter_end(c, x, out);
    ec_msg_count_bits(out);
}
