/*
 * Tests for the compressors: top-k against a sorting reference, the
 * contraction and unbiasedness bounds measured empirically, exact bit counts,
 * rand-k's seed, dithering's exact values, and determinism.
 */
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ecopt/compress.h"
#include "testutil.h"

/* ---- helpers --------------------------------------------------------- */

static ec_compressor *make_comp(ec_comp_type type, uint32_t k, uint32_t s,
                                uint32_t d)
{
    ec_comp_spec spec = {.type = type, .k = k, .s = s};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, d, &e);

    ck_assert_msg(c != NULL, "ec_compressor_new: %s", e.msg);
    return c;
}

static void make_msg(ec_msg *m, uint32_t d)
{
    ck_assert_int_eq(ec_msg_init(m, d), 0);
}

static double sq_norm(const double *x, uint32_t d)
{
    double s = 0.0;

    for (uint32_t j = 0; j < d; j++)
        s += x[j] * x[j];
    return s;
}

/* ||Q(x) - x||^2 for a message Q(x); dense is scratch of d entries. */
static double sq_error(const ec_msg *m, const double *x, double *dense)
{
    double s = 0.0;

    ec_msg_to_dense(m, dense);
    for (uint32_t j = 0; j < m->d; j++)
        s += (dense[j] - x[j]) * (dense[j] - x[j]);
    return s;
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void assert_ascending(const ec_msg *m)
{
    for (uint32_t i = 0; i < m->nnz; i++) {
        ck_assert_uint_lt(m->idx[i], m->d);
        if (i > 0)
            ck_assert_uint_lt(m->idx[i - 1], m->idx[i]);
    }
}

/* Kinds of test vector, chosen to hit the selection's corner cases. */
enum vec_kind {
    VEC_GAUSS,        /* distinct magnitudes */
    VEC_TIES,         /* values in {-2,-1,0,1,2}: many exact ties */
    VEC_ZEROS,        /* all +0.0 */
    VEC_SIGNED_ZEROS, /* a mix of +0.0, -0.0 and a few ones */
    VEC_CLOSE,        /* 1 + a few ulps: keys differ only in the low byte */
    VEC_WIDE,         /* magnitudes over hundreds of binades */
    VEC_SPIKY,        /* one huge coordinate, the rest small */
    VEC_KINDS
};

static void fill(double *x, uint32_t d, enum vec_kind kind, ec_rng *r)
{
    for (uint32_t j = 0; j < d; j++) {
        switch (kind) {
        case VEC_GAUSS:
            x[j] = ec_rng_normal(r);
            break;
        case VEC_TIES:
            x[j] = (double)ec_rng_below(r, 5) - 2.0;
            break;
        case VEC_ZEROS:
            x[j] = 0.0;
            break;
        case VEC_SIGNED_ZEROS: {
            uint64_t u = ec_rng_below(r, 8);

            x[j] = u == 0 ? 1.0 : u == 1 ? -1.0 : u < 5 ? -0.0 : 0.0;
            break;
        }
        case VEC_CLOSE:
            x[j] = nextafter(1.0, 2.0) + (double)ec_rng_below(r, 4) * 0x1p-52;
            if (ec_rng_below(r, 2))
                x[j] = -x[j];
            break;
        case VEC_WIDE:
            x[j] = ldexp(ec_rng_uniform(r) + 0.5,
                         (int)ec_rng_below(r, 1200) - 600);
            break;
        case VEC_SPIKY:
            x[j] = j == d / 2 ? 1000.0 : 0.01 * ec_rng_normal(r);
            break;
        case VEC_KINDS:
            break;
        }
    }
}

/* The sorting reference for top-k: (|x_j| descending, j ascending). */
struct ranked {
    double mag;
    uint32_t j;
};

static int by_rank(const void *pa, const void *pb)
{
    const struct ranked *a = pa, *b = pb;

    if (a->mag != b->mag)
        return a->mag > b->mag ? -1 : 1;
    return a->j < b->j ? -1 : a->j > b->j;
}

static int by_index(const void *pa, const void *pb)
{
    uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

    return a < b ? -1 : a > b;
}

static void topk_reference(const double *x, uint32_t d, uint32_t k,
                           uint32_t *idx)
{
    struct ranked *r = malloc(d * sizeof *r);

    ck_assert_ptr_nonnull(r);
    for (uint32_t j = 0; j < d; j++) {
        r[j].mag = fabs(x[j]);
        r[j].j = j;
    }
    qsort(r, d, sizeof *r, by_rank);
    for (uint32_t i = 0; i < k; i++)
        idx[i] = r[i].j;
    qsort(idx, k, sizeof *idx, by_index);
    free(r);
}

/*
 * An rng whose next draw is v, built by inverting xoshiro256**'s output
 * function (result = rotl(s1 * 5, 7) * 9). It lets a test feed rand-k a
 * chosen seed through the public API alone.
 */
static uint64_t inverse_odd(uint64_t a)
{
    uint64_t x = a;   /* correct to 3 bits; Newton doubles them each step */

    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

static ec_rng rng_drawing(uint64_t v)
{
    ec_rng r = {{0x0123456789abcdefULL, 0, 0xfedcba9876543210ULL, 42}};
    ec_rng probe;
    uint64_t y = v * inverse_odd(9);

    y = (y >> 7) | (y << 57);
    r.s[1] = y * inverse_odd(5);
    probe = r;
    ck_assert_msg(ec_rng_next(&probe) == v,
                  "rng.c is no longer xoshiro256**; update rng_drawing()");
    return r;
}

/* ---- names, checks, delta and omega ---------------------------------- */

/*
 * Every row of the compressor table against what its compressor does:
 * the count it takes is the one its check insists on, a contraction has a
 * delta, the unbiased ones average to x (and the others do not), and a
 * shift is an unbiased compressor taking the same count.
 */
START_TEST(test_table_rows_hold)
{
    enum { D = 10, DRAWS = 4000 };
    double x[D], mean[D];
    ec_msg m;
    ec_rng rng;

    for (int i = 0; i < D; i++)
        x[i] = (i % 3 ? 1.0 : -2.0) * (1.0 + i);
    ck_assert_int_eq(ec_msg_init(&m, D), 0);
    ec_rng_seed(&rng, 7, 0);
    for (int t = 0; t < EC_COMP_COUNT; t++) {
        const ec_comp_info *ci = ec_comp_info_of((ec_comp_type)t);
        ec_comp_spec spec = {.type = (ec_comp_type)t};
        ec_comp_type back;
        char buf[256];
        const char *why;
        double worst = 0.0;
        ec_compressor *c;

        ck_assert_ptr_nonnull(ci);
        ck_assert_int_eq(ec_comp_from_name(ci->name, &back), 0);
        ck_assert_int_eq(back, t);
        /* The count: 0 is refused naming it, 1..d is taken. */
        why = ec_comp_check(&spec, D, buf, sizeof buf);
        if (ci->param == EC_COMP_PARAM_NONE)
            ck_assert_msg(!why, "%s: %s", ci->name, why);
        else
            ck_assert_msg(why && strstr(why, ci->param == EC_COMP_PARAM_K
                                                 ? "compressor.k must" : "compressor.s must"),
                          "%s: %s", ci->name, why ? why : "accepted");
        spec.k = ci->param == EC_COMP_PARAM_K ? 3 : 0;
        spec.s = ci->param == EC_COMP_PARAM_S ? 2 : 0;
        ck_assert_ptr_null(ec_comp_check(&spec, D, buf, sizeof buf));
        ck_assert_msg((ec_comp_delta(&spec, D) > 0) == ci->contraction, "%s: delta %g",
                      ci->name, ec_comp_delta(&spec, D));
        /* The shift: unbiased, same count, or none. */
        ck_assert_ptr_nonnull(ec_comp_info_of(ci->shift));
        ck_assert(ec_comp_info_of(ci->shift)->unbiased);
        ck_assert(ci->shift == EC_COMP_NONE ||
                  ec_comp_info_of(ci->shift)->param == ci->param);
        /* The mean of Q(x) over many draws. */
        c = make_comp((ec_comp_type)t, spec.k, spec.s, D);
        memset(mean, 0, sizeof mean);
        for (int n = 0; n < DRAWS; n++) {
            ec_compress(c, x, &rng, &m);
            ck_assert_int_eq(m.type, t);
            ec_msg_axpy(&m, 1.0 / DRAWS, mean);
        }
        for (int i = 0; i < D; i++)
            worst = fmax(worst, fabs(mean[i] - x[i]) / fabs(x[i]));
        if (ci->unbiased)
            ck_assert_msg(worst < 0.15, "%s: E Q(x) is off x by %g", ci->name, worst);
        else
            ck_assert_msg(worst > 0.3, "%s: E Q(x) = x though not marked unbiased",
                          ci->name);
        ec_compressor_free(c);
    }
    ck_assert_ptr_null(ec_comp_info_of((ec_comp_type)EC_COMP_COUNT));
    ec_msg_clear(&m);
}
END_TEST

START_TEST(test_names_round_trip)
{
    static const char *const names[] = {"none", "topk", "randk",
                                        "randk-unbiased", "dither",
                                        "dither-unbiased", "natural",
                                        "natural-dither",
                                        "natural-dither-unbiased"};
    ec_comp_type t = EC_COMP_TOPK;

    ck_assert_int_eq(EC_COMP_COUNT, sizeof names / sizeof names[0]);
    for (int i = 0; i < EC_COMP_COUNT; i++) {
        ck_assert_str_eq(ec_comp_name((ec_comp_type)i), names[i]);
        ck_assert_int_eq(ec_comp_from_name(names[i], &t), 0);
        ck_assert_int_eq(t, i);
    }
    ck_assert_ptr_null(ec_comp_name((ec_comp_type)EC_COMP_COUNT));
    ck_assert_ptr_null(ec_comp_name((ec_comp_type)-1));

    t = EC_COMP_DITHER;
    ck_assert_int_lt(ec_comp_from_name("top-k", &t), 0);
    ck_assert_int_lt(ec_comp_from_name("TOPK", &t), 0);
    ck_assert_int_lt(ec_comp_from_name("", &t), 0);
    ck_assert_int_lt(ec_comp_from_name("randk-unbiasedx", &t), 0);
    ck_assert_int_eq(t, EC_COMP_DITHER); /* untouched on failure */
}
END_TEST

static const struct check_case {
    ec_comp_type type;
    uint32_t k, s, d;
    const char *want; /* NULL: valid */
} check_cases[] = {
    {EC_COMP_TOPK, 0, 0, 123, "compressor.k must be in 1..123 (got 0)"},
    {EC_COMP_TOPK, 124, 0, 123, "compressor.k must be in 1..123 (got 124)"},
    {EC_COMP_TOPK, 1, 0, 123, NULL},
    {EC_COMP_TOPK, 123, 0, 123, NULL},
    {EC_COMP_TOPK, 1, 0, 1, NULL},
    {EC_COMP_RANDK, 0, 5, 10, "compressor.k must be in 1..10 (got 0)"},
    {EC_COMP_RANDK_UNBIASED, 11, 0, 10,
     "compressor.k must be in 1..10 (got 11)"},
    {EC_COMP_NONE, 0, 0, 10, NULL},        /* k and s are ignored */
    {EC_COMP_NONE, 99, 0, 10, NULL},
    {EC_COMP_DITHER, 0, 0, 10, "compressor.s must be in 1..65535 (got 0)"},
    {EC_COMP_DITHER_UNBIASED, 0, 65536, 10,
     "compressor.s must be in 1..65535 (got 65536)"},
    {EC_COMP_DITHER, 0, 1, 10, NULL},      /* k is ignored for dither */
    {EC_COMP_DITHER, 77, 65535, 10, NULL},
    {EC_COMP_TOPK, 5, 0, 10, NULL},        /* s is ignored for topk */
    {(ec_comp_type)9, 1, 1, 10,
     "compressor.type must be one of none, topk, randk, randk-unbiased, "
     "dither, dither-unbiased, natural, natural-dither, "
     "natural-dither-unbiased (got 9)"},
    {EC_COMP_NATDITHER, 0, 0, 10, "compressor.s must be in 1..65535 (got 0)"},
    {EC_COMP_NATDITHER_UNBIASED, 0, 65535, 10, NULL},
    {EC_COMP_NATURAL, 7, 7, 10, NULL},     /* natural takes no count */
    {EC_COMP_NONE, 0, 0, 0,
     "the vector dimension d must be at least 1 (got 0)"},
};

START_TEST(test_check_messages)
{
    const struct check_case *tc = &check_cases[_i];
    ec_comp_spec spec = {.type = tc->type, .k = tc->k, .s = tc->s};
    char buf[256];
    const char *got = ec_comp_check(&spec, tc->d, buf, sizeof buf);
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, tc->d, &e);

    if (!tc->want) {
        ck_assert_ptr_null(got);
        ck_assert_ptr_nonnull(c);
        ck_assert_mem_eq(ec_compressor_spec(c), &spec, sizeof spec);
    } else {
        ck_assert_ptr_nonnull(got);
        ck_assert_str_eq(got, tc->want);
        /* The constructor refuses with the same sentence. */
        ck_assert_ptr_null(c);
        ck_assert_int_eq(e.code, EC_EINVAL);
        ck_assert_str_eq(e.msg, tc->want);
    }
    ec_compressor_free(c);
}
END_TEST

START_TEST(test_check_small_buffer)
{
    ec_comp_spec spec = {.type = EC_COMP_TOPK, .k = 0};
    char buf[10];
    const char *got = ec_comp_check(&spec, 123, buf, sizeof buf);

    ck_assert_ptr_eq(got, buf);
    ck_assert_str_eq(got, "compresso"); /* truncated, still terminated */
    got = ec_comp_check(&spec, 123, NULL, 0);
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_nonnull(strstr(got, "compressor.k"));
    ck_assert_ptr_null(ec_compressor_new(&spec, 123, NULL)); /* e optional */
}
END_TEST

static const struct {
    ec_comp_type type;
    uint32_t k, s, d;
    double delta, omega;
} delta_cases[] = {
    {EC_COMP_NONE, 0, 0, 10, 1.0, 0.0},
    {EC_COMP_TOPK, 3, 0, 10, 0.3, -1.0},
    {EC_COMP_RANDK, 3, 0, 10, 0.3, 10.0 / 3.0 - 1.0},
    {EC_COMP_RANDK_UNBIASED, 3, 0, 10, 0.0, 10.0 / 3.0 - 1.0},
    {EC_COMP_RANDK, 10, 0, 10, 1.0, 0.0},
    {EC_COMP_DITHER, 0, 2, 100, 1.0 / 6.0, 5.0},  /* sqrt(d)/s wins */
    {EC_COMP_DITHER, 0, 10, 100, 0.5, 1.0},       /* the two agree */
    {EC_COMP_DITHER, 0, 20, 100, 0.8, 0.25},      /* d/s^2 wins */
    {EC_COMP_DITHER_UNBIASED, 0, 2, 100, 0.0, 5.0},
    {EC_COMP_NATURAL, 0, 0, 100, 0.875, 0.125},
    /* 1/8 + r min(1, r), r = sqrt(d)/2^(s-1). */
    {EC_COMP_NATDITHER, 0, 2, 100, 1.0 / 6.125, 5.125},        /* r = 5 */
    {EC_COMP_NATDITHER, 0, 5, 100, 1.0 / 1.515625, 0.515625},  /* r = 5/8 */
    {EC_COMP_NATDITHER_UNBIASED, 0, 4, 64, 0.0, 1.125},  /* r = 1 */
    {EC_COMP_NATDITHER_UNBIASED, 0, 65535, 100, 0.0, 0.125},
};

START_TEST(test_delta_omega)
{
    ec_comp_spec spec = {.type = delta_cases[_i].type,
                         .k = delta_cases[_i].k,
                         .s = delta_cases[_i].s};

    ck_assert_double_eq_tol(ec_comp_delta(&spec, delta_cases[_i].d),
                            delta_cases[_i].delta, 1e-15);
    ck_assert_double_eq_tol(ec_comp_omega(&spec, delta_cases[_i].d),
                            delta_cases[_i].omega, 1e-15);
}
END_TEST

/* ---- messages --------------------------------------------------------- */

START_TEST(test_msg_init_clear)
{
    ec_msg m, zero = {0};

    make_msg(&m, 17);
    ck_assert_uint_eq(m.d, 17);
    ck_assert_uint_eq(m.nnz, 0);
    ck_assert_ptr_nonnull(m.idx);
    ck_assert_ptr_nonnull(m.val);
    ec_msg_clear(&m);
    ck_assert_mem_eq(&m, &zero, sizeof m);
    ec_msg_clear(&m);    /* zeroed: no-op */
    ec_msg_clear(NULL);  /* NULL: no-op */
    ec_compressor_free(NULL);
}
END_TEST

START_TEST(test_msg_dense_and_axpy)
{
    /* A message built by hand, as a decoder would. */
    ec_msg m;
    double dense[6], y[6] = {1, 1, 1, 1, 1, 1};
    const double want_dense[6] = {0, 2, 0, 0, -3, 0};
    const double want_y[6] = {1, 0, 1, 1, 2.5, 1};

    make_msg(&m, 6);
    m.type = EC_COMP_TOPK;      /* indexed: a dense one lists 0..nnz-1 */
    m.nnz = 2;
    m.idx[0] = 1, m.val[0] = 2.0;
    m.idx[1] = 4, m.val[1] = -3.0;
    for (int j = 0; j < 6; j++)
        dense[j] = 7.0;  /* to_dense must overwrite every entry */
    ec_msg_to_dense(&m, dense);
    ck_assert_mem_eq(dense, want_dense, sizeof dense);
    ec_msg_axpy(&m, -0.5, y);
    ck_assert_mem_eq(y, want_y, sizeof y);
    ec_msg_clear(&m);
}
END_TEST

START_TEST(test_msg_dense_reads_no_indices)
{
    /* A dense message (type none) is entries 0..nnz-1: its idx, which the
     * engine's dense uplinks leave unwritten, is not read. Reversed here,
     * an index read would put each value at the mirror position. */
    ec_msg m;
    double dense[4], y[4] = {1, 1, 1, 1};
    const double want_dense[4] = {1, -2, 0.5, 8};
    const double want_y[4] = {2, -1, 1.5, 9};

    make_msg(&m, 4);
    m.type = EC_COMP_NONE;
    m.nnz = 4;
    for (uint32_t j = 0; j < 4; j++) {
        m.idx[j] = 3 - j;
        m.val[j] = want_dense[j];
    }
    ec_msg_to_dense(&m, dense);
    ck_assert_mem_eq(dense, want_dense, sizeof dense);
    ec_msg_axpy(&m, 1.0, y);
    ck_assert_mem_eq(y, want_y, sizeof y);
    ec_msg_clear(&m);
}
END_TEST

START_TEST(test_msg_axpy_matches_dense)
{
    enum { D = 200 };
    ec_rng r;
    ec_msg m;
    ec_compressor *c = make_comp(EC_COMP_TOPK, 37, 0, D);
    double x[D], dense[D], y[D], y0[D];

    ec_rng_seed(&r, 11, 0);
    fill(x, D, VEC_GAUSS, &r);
    fill(y0, D, VEC_GAUSS, &r);
    memcpy(y, y0, sizeof y);
    make_msg(&m, D);
    ec_compress(c, x, NULL, &m);
    ec_msg_to_dense(&m, dense);
    ec_msg_axpy(&m, 0.25, y);
    for (uint32_t j = 0; j < D; j++) {
        ck_assert(dense[j] == 0.0 || dense[j] == x[j]);
        ck_assert(same_bits(y[j], y0[j] + 0.25 * dense[j]));
    }
    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

/* ---- none ------------------------------------------------------------- */

START_TEST(test_none_identity)
{
    enum { D = 50 };
    ec_rng r;
    ec_msg m;
    ec_compressor *c = make_comp(EC_COMP_NONE, 0, 0, D);
    double x[D];

    ec_rng_seed(&r, 3, 0);
    fill(x, D, VEC_GAUSS, &r);
    x[7] = -0.0;
    make_msg(&m, D);
    ec_compress(c, x, NULL, &m);
    ck_assert_int_eq(m.type, EC_COMP_NONE);
    ck_assert_uint_eq(m.nnz, D);
    for (uint32_t j = 0; j < D; j++)
        ck_assert_uint_eq(m.idx[j], j);
    ck_assert_mem_eq(m.val, x, sizeof x);
    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

/* ---- top-k ------------------------------------------------------------ */

/* 9, 17 and 20 leave a partial block of 8, with fewer blocks than k for
 * some k; 1024 and 1025 sit either side of TOPK_BLOCKED_MAX. */
static const uint32_t topk_dims[] = {1, 2, 3, 7, 9, 17, 20, 64, 123, 255,
                                     256, 257, 1000, 1024, 1025, 4099};

START_TEST(test_topk_matches_sort)
{
    const uint32_t d = topk_dims[_i];
    /* 8 and 9 sit either side of the list's limit (TOPK_LIST_MAX), 64
     * and 65 either side of the heap's (TOPK_HEAP_MAX). */
    const uint32_t ks[] = {1, 2, 3, 8, 9, d / 20, 64, 65, d / 2, d - 1, d};
    ec_rng r;
    ec_msg m;
    double *x = malloc(d * sizeof *x);
    uint32_t *want = malloc(d * sizeof *want);

    ck_assert(x && want);
    make_msg(&m, d);
    ec_rng_seed(&r, 1000 + d, 0);
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const uint32_t k = ks[ki];
        ec_compressor *c;

        if (k < 1 || k > d)
            continue;
        c = make_comp(EC_COMP_TOPK, k, 0, d);
        for (int kind = 0; kind < VEC_KINDS; kind++) {
            for (int rep = 0; rep < 3; rep++) {
                fill(x, d, (enum vec_kind)kind, &r);
                ec_compress(c, x, NULL, &m);
                topk_reference(x, d, k, want);
                ck_assert_uint_eq(m.nnz, k);
                ck_assert_msg(memcmp(m.idx, want, k * sizeof *want) == 0,
                              "topk d=%u k=%u kind=%d rep=%d differs from "
                              "the sorted reference", d, k, kind, rep);
                for (uint32_t i = 0; i < k; i++)
                    ck_assert(same_bits(m.val[i], x[m.idx[i]]));
            }
        }
        ec_compressor_free(c);
    }
    ec_msg_clear(&m);
    free(x);
    free(want);
}
END_TEST

/*
 * Every top-k method (the automatic choice, and the heap, the radix select
 * and the filter forced) against the sorting reference: on long vectors
 * with k either side of TOPK_HEAP_MAX and of the filter's 4096, where the
 * filter compacts its buffer many times, as well as short ones; and on
 * the orders hardest for a heap and a filter: magnitudes ascending (every
 * entry enters; the heap gives up part way, the filter compacts every
 * span), descending, and all equal (-0.0, or one negative value), where
 * the tie rule alone decides.
 */
enum order_kind { ORDER_RANDOM, ORDER_ASCENDING, ORDER_DESCENDING,
                  ORDER_EQUAL, ORDER_NEG_ZERO, ORDER_KINDS };

static const uint32_t method_cases[][2] = {
    {100000, 1000}, {100000, 64},   {100000, 65},    {100000, 4096},
    {100000, 4097}, {100000, 1},    {100000, 9},     {100000, 50000},
    {100000, 99999}, {100000, 100000}, {30000, 5000}, {10000, 5000},
    {1025, 64},     {1025, 65},     {200, 100},      {17, 9},
    {2, 1},         {1, 1},
};

static void fill_order(double *x, uint32_t d, int kind, ec_rng *r)
{
    for (uint32_t j = 0; j < d; j++) {
        double sign = j % 3 ? 1.0 : -1.0;

        switch (kind) {
        case ORDER_ASCENDING:
            x[j] = sign * (double)(j / 2 + 1);  /* pairs tie */
            break;
        case ORDER_DESCENDING:
            x[j] = sign * (double)(d - j / 2);
            break;
        case ORDER_EQUAL:
            x[j] = -2.5;
            break;
        case ORDER_NEG_ZERO:
            x[j] = -0.0;
            break;
        default:
            break;
        }
    }
    (void)r;
}

/* The magnitude's bits, the order top-k ranks by: |x| for numbers, NaNs
 * above Inf. */
static uint64_t test_key(double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof bits);
    return bits & ~(UINT64_C(1) << 63);
}

/* The message fed with this hint equals want, entry for entry. */
static void fed_hinted_is(ec_compressor *c, const double *x, const ec_msg *want,
                          uint64_t *hint, uint64_t given)
{
    const uint32_t d = want->d;
    uint32_t wrong = 0;
    ec_msg m;

    make_msg(&m, d);
    ec_compress_feed_begin_hinted(c, hint);
    for (uint32_t j = 0; j < d; j += 2048)
        ec_compress_feed(c, x, j, d - j < 2048 ? d : j + 2048);
    ec_compress_feed_end(c, x, &m);
    ck_assert_uint_eq(m.nnz, want->nnz);
    ck_assert_uint_eq(m.paper_bits, want->paper_bits);
    for (uint32_t i = 0; i < m.nnz; i++)
        wrong += m.idx[i] != want->idx[i] || !same_bits(m.val[i], want->val[i]);
    ck_assert_msg(wrong == 0, "top-k fed with the hint %" PRIu64 " (d=%u k=%u) "
                  "differs from the whole in %u entries", given, d, want->nnz,
                  wrong);
    ec_msg_clear(&m);
}

/*
 * The same with a hint of the threshold (ec_compress_feed_begin_hinted):
 * none, far above every key (fewer than k reach it: the second pass),
 * T's own key, one above and one below it, half of it, a random key, and
 * the hint each call leaves for the next, twice over. Every one gives the
 * message of the whole, and the hint left depends on T alone.
 */
static void feed_hinted_matches(ec_compressor *c, const double *x,
                                const ec_msg *want, ec_rng *r)
{
    uint64_t t = UINT64_MAX, hint, left, givens[7];

    for (uint32_t i = 0; i < want->nnz; i++)
        t = test_key(want->val[i]) < t ? test_key(want->val[i]) : t;
    givens[0] = 0;
    givens[1] = test_key(INFINITY);
    givens[2] = t;
    givens[3] = t + 1;
    givens[4] = t > 0 ? t - 1 : 0;
    givens[5] = t / 2;
    givens[6] = ec_rng_next(r) >> 1;
    hint = 0;
    fed_hinted_is(c, x, want, &hint, 0);
    left = hint;
    for (size_t gi = 0; gi < sizeof givens / sizeof givens[0]; gi++) {
        hint = givens[gi];
        fed_hinted_is(c, x, want, &hint, givens[gi]);
        ck_assert_uint_eq(hint, left);
    }
    for (int again = 0; again < 2; again++) {
        uint64_t given = hint;

        fed_hinted_is(c, x, want, &hint, given);
        ck_assert_uint_eq(hint, left);
    }
}

/*
 * The message fed in pieces equals the one ec_compress made of the whole
 * (want): pieces of one entry, of three (across every group of four the
 * scan takes), of the 2048 a worker's pass uses, and of random lengths.
 */
static void feed_matches(ec_compressor *c, const double *x, const ec_msg *want,
                         ec_rng *r)
{
    const uint32_t d = want->d, sizes[] = {1, 3, 2048, 0};
    ec_msg m;

    make_msg(&m, d);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint32_t wrong = 0;

        ec_compress_feed_begin(c);
        for (uint32_t j = 0; j < d;) {
            uint32_t len = sizes[si] ? sizes[si]
                                     : 1 + (uint32_t)ec_rng_below(r, 5000);
            uint32_t end = d - j < len ? d : j + len;

            ec_compress_feed(c, x, j, end);
            j = end;
        }
        ec_compress_feed_end(c, x, &m);
        ck_assert_uint_eq(m.nnz, want->nnz);
        ck_assert_int_eq(m.type, want->type);
        ck_assert_uint_eq(m.value_bits, want->value_bits);
        ck_assert_uint_eq(m.index_bits, want->index_bits);
        ck_assert_uint_eq(m.paper_bits, want->paper_bits);
        for (uint32_t i = 0; i < m.nnz; i++)
            wrong += m.idx[i] != want->idx[i] ||
                     !same_bits(m.val[i], want->val[i]);
        ck_assert_msg(wrong == 0, "top-k fed in pieces of %u (d=%u k=%u) "
                      "differs from the whole in %u entries", sizes[si], d,
                      want->nnz, wrong);
    }
    ec_msg_clear(&m);
    feed_hinted_matches(c, x, want, r);
}

START_TEST(test_topk_methods_match_sort)
{
    const uint32_t d = method_cases[_i][0], k = method_cases[_i][1];
    const ec_topk_select methods[] = {EC_TOPK_SELECT_AUTO,
                                      EC_TOPK_SELECT_HEAP,
                                      EC_TOPK_SELECT_RADIX,
                                      EC_TOPK_SELECT_FILTER};
    double *x = malloc(d * sizeof *x);
    uint32_t *want = malloc(d * sizeof *want);
    ec_compressor *c = make_comp(EC_COMP_TOPK, k, 0, d);
    ec_msg m;
    ec_rng r;
    uint32_t wrong = 0;

    ck_assert(x && want);
    make_msg(&m, d);
    ec_rng_seed(&r, 77 + d + k, 0);
    for (int kind = 0; kind < VEC_KINDS + ORDER_KINDS - 1; kind++) {
        if (kind < VEC_KINDS)
            fill(x, d, (enum vec_kind)kind, &r);
        else
            fill_order(x, d, kind - VEC_KINDS + 1, &r);
        topk_reference(x, d, k, want);
        for (size_t mi = 0; mi < sizeof methods / sizeof methods[0]; mi++) {
            int rc = ec_compressor_set_topk_select(c, methods[mi]);

            /* The heap serves k up to TOPK_HEAP_MAX, 64, alone. */
            if (methods[mi] == EC_TOPK_SELECT_HEAP && k > 64) {
                ck_assert_int_eq(rc, EC_EINVAL);
                continue;
            }
            ck_assert_int_eq(rc, 0);
            ec_compress(c, x, NULL, &m);
            ck_assert_uint_eq(m.nnz, k);
            ck_assert_msg(memcmp(m.idx, want, k * sizeof *want) == 0,
                          "topk d=%u k=%u kind=%d method=%d differs from "
                          "the sorted reference", d, k, kind, (int)methods[mi]);
            /* One assertion for all k values: Check reports each one. */
            for (uint32_t i = 0; i < k; i++)
                wrong += !same_bits(m.val[i], x[m.idx[i]]);
            ck_assert_uint_eq(wrong, 0);
            /* Fed in pieces: top-k by the filter, which AUTO picks
             * above the heap's k (64) and below d. */
            ck_assert_int_eq(ec_compress_feeds(c),
                             k < d && (methods[mi] == EC_TOPK_SELECT_FILTER ||
                                       (methods[mi] == EC_TOPK_SELECT_AUTO &&
                                        k > 64)));
            if (ec_compress_feeds(c))
                feed_matches(c, x, &m, &r);
        }
    }
    ck_assert_int_eq(ec_compressor_set_topk_select(c, (ec_topk_select)(EC_TOPK_SELECT_FILTER + 1)),
                     EC_EINVAL);
    ec_compressor_free(c);
    c = make_comp(EC_COMP_RANDK, 1, 0, 4);
    ck_assert_int_eq(ec_compressor_set_topk_select(c, EC_TOPK_SELECT_HEAP),
                     EC_EINVAL);
    ec_compressor_free(c);
    ec_msg_clear(&m);
    free(x);
    free(want);
}
END_TEST

START_TEST(test_topk_nan_and_inf_first)
{
    /* NaN's key lies above Inf's, so a NaN is always kept (documented). */
    double x[8] = {1, 2, INFINITY, 3, -4, NAN, -INFINITY, 0};
    ec_msg m;
    ec_compressor *c = make_comp(EC_COMP_TOPK, 3, 0, 8);

    make_msg(&m, 8);
    ec_compress(c, x, NULL, &m);
    ck_assert_uint_eq(m.nnz, 3);
    ck_assert_uint_eq(m.idx[0], 2);
    ck_assert_uint_eq(m.idx[1], 5);
    ck_assert_uint_eq(m.idx[2], 6);
    ck_assert(isnan(m.val[1]));
    ec_compressor_free(c);

    c = make_comp(EC_COMP_TOPK, 1, 0, 8);
    ec_compress(c, x, NULL, &m);
    ck_assert_uint_eq(m.idx[0], 5);
    ec_compressor_free(c);
    ec_msg_clear(&m);

    /* The same through the blocked list (short vectors), the list (long
     * ones), the heap and the radix select. */
    enum { DY = 2000 };
    static double y[DY];
    const uint32_t cases[][2] = {{200, 3}, {DY, 3}, {200, 20}, {200, 100}};

    for (uint32_t j = 0; j < DY; j++)
        y[j] = (double)(j % 17) - 8.0;
    y[10] = INFINITY;
    y[150] = NAN;
    y[190] = -INFINITY;
    make_msg(&m, DY);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint32_t d = cases[i][0], k = cases[i][1];
        int seen = 0;

        c = make_comp(EC_COMP_TOPK, k, 0, d);
        m.d = d;
        ec_compress(c, y, NULL, &m);
        ck_assert_uint_eq(m.nnz, k);
        for (uint32_t n = 0; n < m.nnz; n++)
            seen += m.idx[n] == 10 || m.idx[n] == 150 || m.idx[n] == 190;
        ck_assert_msg(seen == 3, "d = %u k = %u kept %d of NaN, Inf, -Inf",
                      d, k, seen);
        ec_compressor_free(c);
    }
    ec_msg_clear(&m);
}
END_TEST

/*
 * The blocked top-k (k <= 8, d <= 1024) compares magnitudes as packed
 * doubles and sends a block holding a NaN to the integer keys: NaNs in
 * whole blocks, in the short last block, one or several, each give the
 * selection the keys give (NaN above Inf above every number, ties to the
 * lower index).
 */
START_TEST(test_topk_blocked_nan_placements)
{
    enum { D = 100 };   /* twelve whole blocks of 8 and one of 4 */
    const uint32_t nans[][3] = {{98, D, D}, {40, D, D}, {0, 57, 99},
                                {8, 9, 10}, {D, D, D}};
    double x[D];
    ec_msg m;
    ec_rng r;

    make_msg(&m, D);
    ec_rng_seed(&r, 4242, 0);
    for (size_t ni = 0; ni < sizeof nans / sizeof nans[0]; ni++) {
        for (uint32_t k = 1; k <= 8; k++) {
            ec_compressor *c = make_comp(EC_COMP_TOPK, k, 0, D);
            uint32_t want[8], n = 0;
            int taken[D] = {0};

            for (uint32_t j = 0; j < D; j++)
                x[j] = ec_rng_normal(&r);
            x[3] = INFINITY;
            for (int i = 0; i < 3; i++)
                if (nans[ni][i] < D)
                    x[nans[ni][i]] = NAN;
            /* k rounds of "the largest key not yet taken, lowest index
             * first", then index order. */
            for (uint32_t i = 0; i < k; i++) {
                uint32_t best = D;

                for (uint32_t j = 0; j < D; j++)
                    if (!taken[j] &&
                        (best == D || test_key(x[j]) > test_key(x[best])))
                        best = j;
                taken[best] = 1;
            }
            for (uint32_t j = 0; j < D; j++)
                if (taken[j])
                    want[n++] = j;
            ec_compress(c, x, NULL, &m);
            ck_assert_uint_eq(m.nnz, k);
            ck_assert_msg(memcmp(m.idx, want, k * sizeof *want) == 0,
                          "blocked topk k=%u, NaN case %zu: not the keys' "
                          "selection", k, ni);
            ec_compressor_free(c);
        }
    }
    ec_msg_clear(&m);
}
END_TEST

START_TEST(test_topk_contraction)
{
    /* ||topk(x) - x||^2 <= (1 - k/d)||x||^2 holds for every x. */
    const uint32_t dims[] = {1, 5, 40, 123, 1000};
    ec_rng r;

    ec_rng_seed(&r, 21, 0);
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const uint32_t d = dims[di];
        double *x = malloc(d * sizeof *x), *dense = malloc(d * sizeof *dense);
        ec_msg m;

        ck_assert(x && dense);
        make_msg(&m, d);
        for (uint32_t k = 1; k <= d; k += (d + 6) / 7) {
            ec_comp_spec spec = {.type = EC_COMP_TOPK, .k = k};
            ec_compressor *c = make_comp(EC_COMP_TOPK, k, 0, d);
            double delta = ec_comp_delta(&spec, d);

            for (int kind = 0; kind < VEC_KINDS; kind++) {
                if (kind == VEC_WIDE)
                    continue; /* squares under- and overflow */
                fill(x, d, (enum vec_kind)kind, &r);
                ec_compress(c, x, NULL, &m);
                ck_assert_double_le(sq_error(&m, x, dense),
                                    (1 - delta) * sq_norm(x, d) *
                                        (1 + 1e-12));
            }
            ec_compressor_free(c);
        }
        ec_msg_clear(&m);
        free(x);
        free(dense);
    }
}
END_TEST

/* ---- bit counts ------------------------------------------------------- */

static const struct {
    ec_comp_type type;
    uint32_t d, k, s;
    uint32_t log2_d, level_bits; /* ceil(log2 d), ceil(log2(s + 1)) */
    uint32_t paper_level_bits;   /* ceil(log2 s): MARINA's level bits */
} bit_cases[] = {
    {EC_COMP_NONE, 1, 0, 0, 0, 0, 0},
    {EC_COMP_NONE, 123, 0, 0, 7, 0, 0},
    {EC_COMP_TOPK, 1, 1, 0, 0, 0, 0},
    {EC_COMP_TOPK, 2, 1, 0, 1, 0, 0},
    {EC_COMP_TOPK, 3, 2, 0, 2, 0, 0},
    {EC_COMP_TOPK, 123, 7, 0, 7, 0, 0},
    {EC_COMP_TOPK, 1024, 50, 0, 10, 0, 0},
    {EC_COMP_TOPK, 1025, 1, 0, 11, 0, 0},
    {EC_COMP_RANDK, 5, 2, 0, 3, 0, 0},
    {EC_COMP_RANDK_UNBIASED, 1000, 10, 0, 10, 0, 0},
    {EC_COMP_DITHER, 123, 0, 1, 7, 1, 0},
    {EC_COMP_DITHER, 123, 0, 3, 7, 2, 2},
    {EC_COMP_DITHER, 123, 0, 4, 7, 3, 2},
    {EC_COMP_DITHER, 123, 0, 7, 7, 3, 3},
    {EC_COMP_DITHER, 123, 0, 8, 7, 4, 3},
    {EC_COMP_DITHER, 123, 0, 65535, 7, 16, 16},
    {EC_COMP_DITHER_UNBIASED, 1, 0, 2, 0, 2, 1},
    {EC_COMP_DITHER_UNBIASED, 500, 0, 15, 9, 4, 4},
    {EC_COMP_NATURAL, 123, 0, 0, 7, 0, 0},
    {EC_COMP_NATDITHER, 123, 0, 3, 7, 2, 2},
    {EC_COMP_NATDITHER_UNBIASED, 500, 0, 8, 9, 4, 3},
};

START_TEST(test_bit_counts)
{
    const uint32_t d = bit_cases[_i].d, k = bit_cases[_i].k;
    const ec_comp_type type = bit_cases[_i].type;
    ec_compressor *c = make_comp(type, k, bit_cases[_i].s, d);
    double *x = malloc(d * sizeof *x);
    uint64_t nnz, want_value, want_index, want_paper;
    ec_rng r;
    ec_msg m;

    ck_assert_ptr_nonnull(x);
    ec_rng_seed(&r, 31, 0);
    fill(x, d, VEC_GAUSS, &r);
    make_msg(&m, d);
    ec_compress(c, x, &r, &m);
    nnz = m.nnz;
    switch (type) {
    case EC_COMP_NONE:
        want_value = 64 * (uint64_t)d, want_index = 0;
        want_paper = 64 * (uint64_t)d;
        break;
    case EC_COMP_TOPK:
        want_value = 64 * (uint64_t)k;
        want_index = (uint64_t)k * bit_cases[_i].log2_d;
        want_paper = 64 * (uint64_t)k;
        break;
    case EC_COMP_RANDK:
    case EC_COMP_RANDK_UNBIASED:
        want_value = 64 * (uint64_t)k, want_index = 64;
        want_paper = 64 * (uint64_t)k;
        break;
    case EC_COMP_NATURAL:
        /* Every entry listed; the paper's 9 bits a value. */
        want_value = 64 * (uint64_t)d, want_index = 0;
        want_paper = 9 * (uint64_t)d;
        break;
    default:
        want_value = 64 + (uint64_t)d * bit_cases[_i].level_bits + nnz;
        /* MARINA's reference code: the norm, then a sign and ceil(log2 s)
         * level bits per entry sent. */
        want_index = 0;
        want_paper = 64 + nnz * (1 + bit_cases[_i].paper_level_bits);
        break;
    }
    ck_assert_uint_eq(m.value_bits, want_value);
    ck_assert_uint_eq(m.index_bits, want_index);
    ck_assert_uint_eq(m.paper_bits, want_paper);
    /* A receiver holding type, d, nnz and s derives the same counts over
     * whatever its message held before. */
    m.value_bits = m.index_bits = m.paper_bits = UINT64_MAX;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.value_bits, want_value);
    ck_assert_uint_eq(m.index_bits, want_index);
    ck_assert_uint_eq(m.paper_bits, want_paper);
    ec_msg_clear(&m);
    ec_compressor_free(c);
    free(x);
}
END_TEST

START_TEST(test_count_bits_hand_built)
{
    /* The messages algo.c builds without a compressor: a dense gradient
     * (type none, nnz = d) and the empty q of an init exchange (type none,
     * nnz = 0, as ec_up_init leaves it), which counts nothing. */
    ec_msg m;

    make_msg(&m, 123);
    m.type = EC_COMP_NONE;
    m.nnz = 123;
    m.value_bits = m.index_bits = m.paper_bits = 1;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.value_bits, 64 * 123);
    ck_assert_uint_eq(m.index_bits, 0);
    ck_assert_uint_eq(m.paper_bits, 64 * 123);
    m.nnz = 0;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.value_bits, 0);
    ck_assert_uint_eq(m.index_bits, 0);
    ck_assert_uint_eq(m.paper_bits, 0);
    /* Dither counts its levels whatever nnz is: a zero vector sends its
     * norm and d zero levels. */
    m.type = EC_COMP_DITHER;
    m.s = 4;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.value_bits, 64 + 123 * 3);
    ck_assert_uint_eq(m.paper_bits, 64);
    /* Paper bits as MARINA's reference code counts them: 64 for the norm,
     * and 1 + ceil(log2 s) per entry sent (no level bits when s = 1). */
    m.nnz = 10;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.paper_bits, 64 + 10 * (1 + 2));
    m.s = 1;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.paper_bits, 64 + 10);
    m.s = 5;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.paper_bits, 64 + 10 * (1 + 3));
    /* topk and randk: 64 per value, the indices and the seed free (the
     * EF21 and MARINA reference codes); none: 64 per value. */
    m.type = EC_COMP_TOPK;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.paper_bits, 64 * 10);
    m.type = EC_COMP_RANDK;
    ec_msg_count_bits(&m);
    ck_assert_uint_eq(m.paper_bits, 64 * 10);
    ec_msg_clear(&m);
}
END_TEST

/* ---- rand-k ----------------------------------------------------------- */

START_TEST(test_randk_seed_rebuilds_indices)
{
    /* The index set depends on msg->seed alone: feeding the same seed with
     * a different vector and a different generator state gives the same
     * indices. The seed is the caller's next draw, and the only one. */
    const ec_comp_type types[] = {EC_COMP_RANDK, EC_COMP_RANDK_UNBIASED};
    const uint32_t shapes[][2] = {{1, 1}, {10, 1}, {10, 10}, {1000, 37},
                                  {129, 64}, {64, 63}};

    for (int t = 0; t < 2; t++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const uint32_t d = shapes[si][0], k = shapes[si][1];
            ec_compressor *c = make_comp(types[t], k, 0, d);
            double *x = malloc(d * sizeof *x), *y = malloc(d * sizeof *y);
            ec_rng r, before, again;
            ec_msg m, m2;

            ck_assert(x && y);
            make_msg(&m, d);
            make_msg(&m2, d);
            ec_rng_seed(&r, 41 + si, t);
            fill(x, d, VEC_GAUSS, &r);
            fill(y, d, VEC_GAUSS, &r);
            for (int rep = 0; rep < 20; rep++) {
                before = r;
                ec_compress(c, x, &r, &m);
                ck_assert_uint_eq(m.seed, ec_rng_next(&before));
                ck_assert_mem_eq(&before, &r, sizeof r);
                ck_assert_uint_eq(m.nnz, k);
                assert_ascending(&m);

                again = rng_drawing(m.seed);
                ec_compress(c, y, &again, &m2);
                ck_assert_uint_eq(m2.seed, m.seed);
                ck_assert_mem_eq(m2.idx, m.idx, k * sizeof *m.idx);
            }
            ec_msg_clear(&m);
            ec_msg_clear(&m2);
            ec_compressor_free(c);
            free(x);
            free(y);
        }
    }
}
END_TEST

START_TEST(test_randk_values_and_uniformity)
{
    enum { D = 20, K = 3, DRAWS = 20000 };
    ec_compressor *c = make_comp(EC_COMP_RANDK, K, 0, D);
    ec_compressor *cu = make_comp(EC_COMP_RANDK_UNBIASED, K, 0, D);
    double x[D], chi2 = 0.0, expect = (double)DRAWS * K / D;
    unsigned count[D] = {0};
    ec_rng r;
    ec_msg m;

    ec_rng_seed(&r, 51, 0);
    fill(x, D, VEC_GAUSS, &r);
    make_msg(&m, D);
    for (int n = 0; n < DRAWS; n++) {
        ec_compress(n % 2 ? c : cu, x, &r, &m);
        for (uint32_t i = 0; i < K; i++) {
            double want = n % 2 ? x[m.idx[i]] : (double)D / K * x[m.idx[i]];

            ck_assert(same_bits(m.val[i], want));
            count[m.idx[i]]++;
        }
    }
    for (int j = 0; j < D; j++)
        chi2 += (count[j] - expect) * (count[j] - expect) / expect;
    /* 19 degrees of freedom: 60 is far out in the tail (p < 1e-5). */
    ck_assert_msg(chi2 < 60.0, "chi-square %.1f: indices are not uniform",
                  chi2);
    ec_msg_clear(&m);
    ec_compressor_free(c);
    ec_compressor_free(cu);
}
END_TEST

/* ---- random compressors in expectation -------------------------------- */

enum { STAT_D = 40, STAT_DRAWS = 20000 };

static void fixed_vector(double *x, int which)
{
    ec_rng r;

    ec_rng_seed(&r, 61 + which, 0);
    switch (which) {
    case 0:
        fill(x, STAT_D, VEC_GAUSS, &r);
        break;
    case 1:
        fill(x, STAT_D, VEC_SPIKY, &r);
        break;
    case 2:
        for (int j = 0; j < STAT_D; j++)
            x[j] = 1.0;
        break;
    default:
        fill(x, STAT_D, VEC_TIES, &r);
        x[0] = 2.0; /* never all zero */
        break;
    }
}

static const struct {
    ec_comp_type type;
    uint32_t k, s;
} stat_specs[] = {
    {EC_COMP_RANDK, 1, 0},          {EC_COMP_RANDK, 10, 0},
    {EC_COMP_DITHER, 0, 1},         {EC_COMP_DITHER, 0, 4},
    {EC_COMP_RANDK_UNBIASED, 1, 0}, {EC_COMP_RANDK_UNBIASED, 10, 0},
    {EC_COMP_DITHER_UNBIASED, 0, 1}, {EC_COMP_DITHER_UNBIASED, 0, 4},
};

/*
 * The exact variance of coordinate j of an unbiased Q(x), and the size of
 * the jump between its values.
 */
static void coordinate_law(const ec_comp_spec *spec, const double *x, int j,
                           double *var, double *jump)
{
    if (spec->type == EC_COMP_RANDK_UNBIASED) {
        double ratio = (double)STAT_D / spec->k;

        /* x_j d/k with probability k/d, else 0. */
        *var = x[j] * x[j] * (ratio - 1);
        *jump = ratio * fabs(x[j]);
    } else {
        double norm = sqrt(sq_norm(x, STAT_D)), unit = norm / spec->s;
        double r = spec->s * fabs(x[j]) / norm, p = r - floor(r);

        /* Level floor(r) or floor(r) + 1, one unit apart. */
        *var = unit * unit * p * (1 - p);
        *jump = unit;
    }
}

/*
 * For each fixed vector: the mean and spread of ||Q(x) - x||^2 and of each
 * coordinate of Q(x). Tolerances are in standard errors of the mean, so
 * they stay meaningful whatever the vector's scale.
 */
START_TEST(test_random_in_expectation)
{
    const ec_comp_type type = stat_specs[_i].type;
    const int unbiased = type == EC_COMP_RANDK_UNBIASED ||
                         type == EC_COMP_DITHER_UNBIASED;
    ec_comp_spec spec = {.type = type, .k = stat_specs[_i].k,
                         .s = stat_specs[_i].s};
    ec_compressor *c = make_comp(type, spec.k, spec.s, STAT_D);
    double x[STAT_D], dense[STAT_D], sum[STAT_D];
    ec_rng r;
    ec_msg m;

    make_msg(&m, STAT_D);
    ec_rng_seed(&r, 71 + _i, 0);
    for (int which = 0; which < 4; which++) {
        double err_sum = 0.0, err_sumsq = 0.0, nx2, err_mean, err_se;

        fixed_vector(x, which);
        nx2 = sq_norm(x, STAT_D);
        memset(sum, 0, sizeof sum);
        for (int n = 0; n < STAT_DRAWS; n++) {
            double e;

            ec_compress(c, x, &r, &m);
            e = sq_error(&m, x, dense);
            err_sum += e;
            err_sumsq += e * e;
            for (int j = 0; j < STAT_D; j++)
                sum[j] += dense[j];
        }
        err_mean = err_sum / STAT_DRAWS;
        err_se = sqrt(fmax(err_sumsq / STAT_DRAWS - err_mean * err_mean, 0) /
                      STAT_DRAWS);
        if (!unbiased) {
            /* E||Q(x) - x||^2 <= (1 - delta)||x||^2. */
            double bound = (1 - ec_comp_delta(&spec, STAT_D)) * nx2;

            ck_assert_msg(err_mean <= bound + 4 * err_se + 1e-12 * nx2,
                          "%s vector %d: E||Q(x)-x||^2 = %g > %g",
                          ec_comp_name(type), which, err_mean, bound);
            /* rand-k meets its bound with equality. */
            if (type == EC_COMP_RANDK)
                ck_assert_double_ge(err_mean, bound - 4 * err_se);
        } else {
            /* E Q(x) = x, and E||Q(x) - x||^2 <= omega ||x||^2. */
            double omega = ec_comp_omega(&spec, STAT_D);

            ck_assert_msg(err_mean <= omega * nx2 + 4 * err_se,
                          "%s vector %d: variance %g > omega||x||^2 = %g",
                          ec_comp_name(type), which, err_mean, omega * nx2);
            for (int j = 0; j < STAT_D; j++) {
                double mean = sum[j] / STAT_DRAWS, var, jump;

                coordinate_law(&spec, x, j, &var, &jump);
                /* Five standard errors, plus five jumps for coordinates
                 * hit so rarely that the normal approximation fails. */
                ck_assert_msg(fabs(mean - x[j]) <=
                                  5 * sqrt(var / STAT_DRAWS) +
                                      5 * jump / STAT_DRAWS +
                                      1e-12 * sqrt(nx2),
                              "%s vector %d: E Q(x)[%d] = %g, x = %g",
                              ec_comp_name(type), which, j, mean, x[j]);
            }
        }
    }
    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

/* ---- dithering -------------------------------------------------------- */

static double reference_norm(const double *x, uint32_t d)
{
    long double s = 0;

    for (uint32_t j = 0; j < d; j++)
        s += (long double)x[j] * x[j];
    return (double)sqrtl(s);
}

/* Checks every listed value is +-level * unit bitwise with a level that is
 * floor(r) or floor(r) + 1, and every unlisted coordinate has floor(r) = 0. */
static void check_dither_msg(const ec_msg *m, const double *x, uint32_t d,
                             uint32_t s, double want_scale)
{
    double unit = ec_dither_unit(m->norm, s, m->scale);
    uint32_t i = 0;

    ck_assert_uint_eq(m->s, s);
    ck_assert(same_bits(m->scale, want_scale));
    assert_ascending(m);
    if (m->norm == 0.0) {
        ck_assert_uint_eq(m->nnz, 0);
        return;
    }
    for (uint32_t j = 0; j < d; j++) {
        double r = (double)s * fabs(x[j]) / m->norm;
        double lo = floor(r) < s ? floor(r) : s;

        if (i < m->nnz && m->idx[i] == j) {
            double level = round(fabs(m->val[i]) / unit);
            double v = level * unit;

            ck_assert(level >= 1 && level <= s);
            ck_assert(level == lo || level == lo + 1);
            ck_assert(same_bits(m->val[i], x[j] < 0 ? -v : v));
            i++;
        } else {
            ck_assert_msg(lo == 0, "coordinate %u with r = %g is missing",
                          j, r);
        }
    }
    ck_assert_uint_eq(i, m->nnz);
}

START_TEST(test_dither_exact_values)
{
    const uint32_t levels[] = {1, 2, 3, 7, 255, 65535};
    const uint32_t dims[] = {1, 2, 50, 1000};
    ec_rng r;

    ec_rng_seed(&r, 81, 0);
    for (int t = 0; t < 2; t++) {
        ec_comp_type type = t ? EC_COMP_DITHER_UNBIASED : EC_COMP_DITHER;

        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const uint32_t d = dims[di];
            double *x = malloc(d * sizeof *x);
            ec_msg m;

            ck_assert_ptr_nonnull(x);
            make_msg(&m, d);
            for (size_t si = 0; si < sizeof levels / sizeof levels[0]; si++) {
                ec_comp_spec spec = {.type = type, .s = levels[si]};
                ec_compressor *c = make_comp(type, 0, levels[si], d);
                double scale = t ? 1.0 : 1.0 / (1.0 + ec_comp_omega(&spec, d));

                for (int kind = 0; kind < VEC_KINDS; kind++) {
                    if (kind == VEC_ZEROS || kind == VEC_SIGNED_ZEROS)
                        continue;
                    fill(x, d, (enum vec_kind)kind, &r);
                    ec_compress(c, x, &r, &m);
                    ck_assert_int_eq(m.type, type);
                    if (kind != VEC_WIDE)
                        ck_assert_double_le(fabs(m.norm - reference_norm(x, d)),
                                            1e-12 * m.norm);
                    check_dither_msg(&m, x, d, levels[si], scale);
                }
                ec_compressor_free(c);
            }
            ec_msg_clear(&m);
            free(x);
        }
    }
}
END_TEST

START_TEST(test_dither_edge_vectors)
{
    /* Zero, -0.0, sums of squares that overflow or underflow, and NaN. */
    double zeros[3] = {0.0, -0.0, 0.0};
    double huge[3] = {1e300, -1e300, 3e299};
    double tiny[3] = {1e-300, -2e-300, 0.0};
    double bad[3] = {1.0, NAN, 2.0};
    ec_compressor *c = make_comp(EC_COMP_DITHER_UNBIASED, 0, 4, 3);
    ec_rng r;
    ec_msg m;

    ec_rng_seed(&r, 91, 0);
    make_msg(&m, 3);

    ec_compress(c, zeros, &r, &m);
    ck_assert_uint_eq(m.nnz, 0);
    ck_assert(m.norm == 0.0);
    ck_assert_uint_eq(m.value_bits, 64 + 3 * 3);
    ck_assert_uint_eq(m.paper_bits, 64);

    ec_compress(c, huge, &r, &m);
    ck_assert(isfinite(m.norm));
    ck_assert_double_eq_tol(m.norm, 1e300 * sqrt(2.09), 1e-12 * m.norm);
    check_dither_msg(&m, huge, 3, 4, 1.0);
    ck_assert_uint_ge(m.nnz, 2);

    ec_compress(c, tiny, &r, &m);
    ck_assert_double_eq_tol(m.norm, 1e-300 * sqrt(5.0), 1e-12 * m.norm);
    check_dither_msg(&m, tiny, 3, 4, 1.0);
    ck_assert_uint_ge(m.nnz, 1);

    /* A NaN leaves nothing to quantize; the norm shows why. */
    ec_compress(c, bad, &r, &m);
    ck_assert_uint_eq(m.nnz, 0);
    ck_assert(isnan(m.norm));

    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

/* ---- determinism ------------------------------------------------------ */

static void assert_same_msg(const ec_msg *a, const ec_msg *b)
{
    ck_assert_int_eq(a->type, b->type);
    ck_assert_uint_eq(a->d, b->d);
    ck_assert_uint_eq(a->nnz, b->nnz);
    ck_assert_mem_eq(a->idx, b->idx, a->nnz * sizeof *a->idx);
    ck_assert_mem_eq(a->val, b->val, a->nnz * sizeof *a->val);
    ck_assert_uint_eq(a->value_bits, b->value_bits);
    ck_assert_uint_eq(a->index_bits, b->index_bits);
    ck_assert_uint_eq(a->paper_bits, b->paper_bits);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert(same_bits(a->norm, b->norm));
    ck_assert(same_bits(a->scale, b->scale));
    ck_assert_uint_eq(a->s, b->s);
}

START_TEST(test_deterministic)
{
    /* Same seed, bitwise same message; also across reuse of one compressor,
     * which checks that scratch carries nothing from call to call. */
    enum { D = 300 };
    const ec_comp_type type = (ec_comp_type)_i;
    ec_compressor *c1 = make_comp(type, 17, 5, D);
    ec_compressor *c2 = make_comp(type, 17, 5, D);
    double x[D], other[D];
    ec_rng r1, r2, r3;
    ec_msg m1, m2, m3;

    ec_rng_seed(&r1, 101, 0);
    fill(x, D, VEC_GAUSS, &r1);
    fill(other, D, VEC_TIES, &r1);
    make_msg(&m1, D);
    make_msg(&m2, D);
    make_msg(&m3, D);
    for (int rep = 0; rep < 5; rep++) {
        ec_rng_seed(&r1, 202 + rep, 0);
        r2 = r3 = r1;
        ec_compress(c1, x, &r1, &m1);
        ec_compress(c2, x, &r2, &m2);
        assert_same_msg(&m1, &m2);
        ck_assert_mem_eq(&r1, &r2, sizeof r1);

        ec_compress(c1, other, &r1, &m1);  /* disturb c1's scratch */
        ec_compress(c1, x, &r3, &m3);
        assert_same_msg(&m3, &m2);
    }
    ec_msg_clear(&m1);
    ec_msg_clear(&m2);
    ec_msg_clear(&m3);
    ec_compressor_free(c1);
    ec_compressor_free(c2);
}
END_TEST

/* ---- suite ------------------------------------------------------------ */

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static Suite *compress_suite(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_names_round_trip);
    tcase_add_test(tc, test_table_rows_hold);
    tcase_add_loop_test(tc, test_check_messages, 0, COUNT(check_cases));
    tcase_add_test(tc, test_check_small_buffer);
    tcase_add_loop_test(tc, test_delta_omega, 0, COUNT(delta_cases));
    tcase_add_test(tc, test_msg_init_clear);
    tcase_add_test(tc, test_msg_dense_and_axpy);
    tcase_add_test(tc, test_msg_dense_reads_no_indices);
    tcase_add_test(tc, test_msg_axpy_matches_dense);
    tcase_add_test(tc, test_none_identity);
    tcase_add_loop_test(tc, test_topk_matches_sort, 0, COUNT(topk_dims));
    tcase_add_loop_test(tc, test_topk_methods_match_sort, 0,
                        COUNT(method_cases));
    tcase_add_test(tc, test_topk_nan_and_inf_first);
    tcase_add_test(tc, test_topk_blocked_nan_placements);
    tcase_add_test(tc, test_topk_contraction);
    tcase_add_loop_test(tc, test_bit_counts, 0, COUNT(bit_cases));
    tcase_add_test(tc, test_count_bits_hand_built);
    tcase_add_test(tc, test_randk_seed_rebuilds_indices);
    tcase_add_test(tc, test_randk_values_and_uniformity);
    tcase_add_loop_test(tc, test_random_in_expectation, 0, COUNT(stat_specs));
    tcase_add_test(tc, test_dither_exact_values);
    tcase_add_test(tc, test_dither_edge_vectors);
    tcase_add_loop_test(tc, test_deterministic, 0, EC_COMP_COUNT);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(compress_suite());
}
