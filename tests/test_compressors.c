/*
 * Property tests for every row of the compressor table (EC_COMPRESSORS):
 * over many seeded draws, an unbiased compressor's mean converges to x and
 * its variance stays within the omega the tool assumes; a contraction's
 * error stays within the (1 - delta) the tool assumes. The rows are read
 * from the table, so a new compressor is held to its own constants without
 * editing this file. Each bound, and the ratio measured against it, is
 * printed; docs/testing.md, "Compressor properties", lists the mutations
 * these tests were shown to catch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ecopt/compress.h"
#include "testutil.h"

enum { D = 16, DRAWS = 20000 };

/* Slack for sampling error: a measured mean may exceed its expectation by
 * this many standard errors, estimated from the same draws. */
#define SIGMAS 5.0

/*
 * The test vectors: a Gaussian draw; one spike over small entries; all
 * entries equal; natural compression's worst case (every |x_j| =
 * (4/3) 2^e, where its variance is exactly 1/8 ||x||^2); half zeros with
 * magnitudes across many octaves.
 */
enum { NVEC = 5 };
static const char *const vec_names[NVEC] = {"gaussian", "spike", "flat",
                                            "natural-worst", "sparse"};

static void make_vector(int which, double *x)
{
    ec_rng rng;

    ec_rng_seed(&rng, 1000 + (uint64_t)which, 0);
    for (int j = 0; j < D; j++) {
        switch (which) {
        case 0:
            x[j] = ec_rng_normal(&rng);
            break;
        case 1:
            x[j] = j == 3 ? -5.0 : 0.01 * (j + 1);
            break;
        case 2:
            x[j] = 1.0;
            break;
        case 3:
            x[j] = (j % 2 ? -1.0 : 1.0) * ldexp(4.0 / 3.0, j % 7 - 3);
            break;
        default:
            x[j] = j % 2 ? 0.0 : ldexp(1.0 + 0.37 * j, 3 * j - 20);
            break;
        }
    }
}

/* The counts each row is tested at: k in {1, 4, D}, s in {1, 2, 4}. */
static int spec_at(ec_comp_type t, int which, ec_comp_spec *spec)
{
    static const uint32_t ks[] = {1, 4, D}, ss[] = {1, 2, 4};

    memset(spec, 0, sizeof *spec);
    spec->type = t;
    switch (ec_comp_info_of(t)->param) {
    case EC_COMP_PARAM_NONE:
        return which == 0;
    case EC_COMP_PARAM_K:
        spec->k = ks[which % 3];
        return which < 3;
    case EC_COMP_PARAM_S:
        spec->s = ss[which % 3];
        return which < 3;
    }
    return 0;
}

struct measure {
    double sq_x;        /* ||x||^2 */
    double mse;         /* mean of ||Q(x) - x||^2 over the draws */
    double mse_se;      /* its standard error */
    double bias_sq;     /* ||mean of Q(x) - x||^2 */
};

static void measure(const ec_comp_spec *spec, const double *x, uint64_t seed,
                    struct measure *out)
{
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(spec, D, &e);
    double mean[D] = {0}, dense[D], sum = 0.0, sum2 = 0.0;
    ec_msg m;
    ec_rng rng;

    ck_assert_msg(c != NULL, "%s", e.msg);
    ck_assert_int_eq(ec_msg_init(&m, D), 0);
    ec_rng_seed(&rng, seed, 0);
    for (int n = 0; n < DRAWS; n++) {
        double err = 0.0;

        ec_compress(c, x, &rng, &m);
        ec_msg_to_dense(&m, dense);
        for (int j = 0; j < D; j++) {
            err += (dense[j] - x[j]) * (dense[j] - x[j]);
            mean[j] += dense[j];
        }
        sum += err;
        sum2 += err * err;
    }
    out->sq_x = 0.0;
    out->bias_sq = 0.0;
    for (int j = 0; j < D; j++) {
        double b = mean[j] / DRAWS - x[j];

        out->sq_x += x[j] * x[j];
        out->bias_sq += b * b;
    }
    out->mse = sum / DRAWS;
    out->mse_se = sqrt(fmax(sum2 / DRAWS - out->mse * out->mse, 0.0) / DRAWS);
    ec_msg_clear(&m);
    ec_compressor_free(c);
}

static void spec_label(const ec_comp_spec *spec, char *buf, size_t len)
{
    const ec_comp_info *ci = ec_comp_info_of(spec->type);

    if (ci->param == EC_COMP_PARAM_K)
        snprintf(buf, len, "%s k=%u", ci->name, (unsigned)spec->k);
    else if (ci->param == EC_COMP_PARAM_S)
        snprintf(buf, len, "%s s=%u", ci->name, (unsigned)spec->s);
    else
        snprintf(buf, len, "%s", ci->name);
}

/*
 * Row _i of the table at each of its counts and on each vector:
 *   unbiased:    ||mean - x||^2 <= 16 omega ||x||^2 / DRAWS (the mean of
 *                DRAWS draws has E||mean - x||^2 = E||Q(x) - x||^2 / DRAWS
 *                <= omega ||x||^2 / DRAWS; 16 is four standard deviations
 *                for a single dominant coordinate), plus 1e-20 ||x||^2 for
 *                the rounding of the sum; and
 *                mean ||Q(x) - x||^2 <= omega ||x||^2 + SIGMAS se;
 *   contraction: mean ||Q(x) - x||^2 <= (1 - delta) ||x||^2 + SIGMAS se.
 * The largest ratio measured / assumed over the vectors is printed, and
 * must be at least 1/20: a constant that far above what any test vector
 * reaches is not what the tool should assume.
 */
START_TEST(test_row_properties)
{
    const ec_comp_type t = (ec_comp_type)_i;
    const ec_comp_info *ci = ec_comp_info_of(t);
    ec_comp_spec spec;

    ck_assert_ptr_nonnull(ci);
    for (int which = 0; spec_at(t, which, &spec); which++) {
        double omega = ec_comp_omega(&spec, D), delta = ec_comp_delta(&spec, D);
        double worst_var = 0.0, worst_con = 0.0;
        char label[64];

        spec_label(&spec, label, sizeof label);
        if (ci->unbiased)
            ck_assert_msg(omega >= 0.0, "%s: unbiased but omega %g", label, omega);
        if (ci->contraction)
            ck_assert_msg(delta > 0.0 && delta <= 1.0, "%s: delta %g", label, delta);
        for (int v = 0; v < NVEC; v++) {
            double x[D];
            struct measure ms;

            make_vector(v, x);
            measure(&spec, x, 77 + 131 * (uint64_t)t + 7 * (uint64_t)which, &ms);
            if (ci->unbiased) {
                double bound = 16.0 * omega * ms.sq_x / DRAWS + 1e-20 * ms.sq_x;

                ck_assert_msg(ms.bias_sq <= bound,
                              "%s on %s: ||mean - x||^2 = %.3g over %.3g: "
                              "biased", label, vec_names[v], ms.bias_sq, bound);
                ck_assert_msg(ms.mse <= omega * ms.sq_x + SIGMAS * ms.mse_se,
                              "%s on %s: E||Q(x) - x||^2 = %.6g ||x||^2 "
                              "(+- %.2g) over omega = %.6g", label,
                              vec_names[v], ms.mse / ms.sq_x,
                              ms.mse_se / ms.sq_x, omega);
                if (omega > 0)
                    worst_var = fmax(worst_var, ms.mse / (omega * ms.sq_x));
            }
            if (ci->contraction) {
                ck_assert_msg(ms.mse <= (1.0 - delta) * ms.sq_x + SIGMAS * ms.mse_se,
                              "%s on %s: E||Q(x) - x||^2 = %.6g ||x||^2 "
                              "(+- %.2g) over 1 - delta = %.6g", label,
                              vec_names[v], ms.mse / ms.sq_x,
                              ms.mse_se / ms.sq_x, 1.0 - delta);
                if (delta < 1.0)
                    worst_con = fmax(worst_con, ms.mse / ((1.0 - delta) * ms.sq_x));
            }
        }
        printf("%-28s", label);
        if (ci->unbiased)
            printf("  omega %-8.4g measured/omega %.3f", omega, worst_var);
        if (ci->contraction)
            printf("  1-delta %-8.4g measured/(1-delta) %.3f", 1.0 - delta,
                   worst_con);
        printf("\n");
        if (ci->unbiased && omega > 0)
            ck_assert_msg(worst_var >= 0.05, "%s: omega %g is %g times the "
                          "worst variance measured", label, omega,
                          1.0 / worst_var);
        if (ci->contraction && delta < 1.0)
            ck_assert_msg(worst_con >= 0.05, "%s: 1 - delta = %g is %g times "
                          "the worst error measured", label, 1.0 - delta,
                          1.0 / worst_con);
    }
}
END_TEST

/*
 * Natural compression's values are exact: every nonzero finite x_j is sent
 * as +-2^e with 2^e one of the two powers of two around |x_j| (x_j itself
 * when it is one), signs and zeros kept; infinities and NaN go as they are.
 * Natural dithering's are +-2^(l - s) ||x|| scale, l in 1..s, and the level
 * ec_msg_level reports is l.
 */
START_TEST(test_natural_exact_values)
{
    const double x[] = {0.75, -1.0, 0.0, -0.0, 3.0, 1e-310, -7e300, 0.5,
                        INFINITY, -2.5e-17};
    const uint32_t d = sizeof x / sizeof x[0];
    ec_comp_spec spec = {.type = EC_COMP_NATURAL};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, d, &e);
    ec_msg m;
    ec_rng rng;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ec_msg_init(&m, d), 0);
    ec_rng_seed(&rng, 5, 0);
    for (int rep = 0; rep < 200; rep++) {
        ec_compress(c, x, &rng, &m);
        ck_assert_uint_eq(m.nnz, d);
        ck_assert_uint_eq(m.paper_bits, 9 * (uint64_t)d);
        ck_assert_uint_eq(m.value_bits, 64 * (uint64_t)d);
        for (uint32_t j = 0; j < d; j++) {
            double v = m.val[j], a = fabs(x[j]), lo;
            int ex;

            ck_assert_uint_eq(m.idx[j], j);
            if (!isfinite(x[j]) || x[j] == 0.0) {
                ck_assert(memcmp(&v, &x[j], sizeof v) == 0);
                continue;
            }
            ck_assert(signbit(v) == signbit(x[j]));
            (void)frexp(a, &ex);
            lo = ldexp(1.0, ex - 1);
            ck_assert_msg(fabs(v) == lo || (a != lo && fabs(v) == 2 * lo),
                          "x %.17g sent as %.17g", x[j], v);
        }
    }
    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

START_TEST(test_natdither_exact_values)
{
    double x[D];
    ec_comp_spec spec = {.type = (ec_comp_type)_i, .s = 3};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, D, &e);
    ec_msg m;
    ec_rng rng;

    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(ec_msg_init(&m, D), 0);
    make_vector(0, x);
    ec_rng_seed(&rng, 9, 0);
    for (int rep = 0; rep < 200; rep++) {
        double unit;

        ec_compress(c, x, &rng, &m);
        unit = m.norm * m.scale;
        ck_assert_double_eq(m.scale, spec.type == EC_COMP_NATDITHER
                                         ? 1.0 / (1.0 + ec_comp_omega(&spec, D))
                                         : 1.0);
        for (uint32_t i = 0; i < m.nnz; i++) {
            uint32_t l = ec_msg_level(&m, i), j = m.idx[i];
            double y = fabs(x[j]) / m.norm;

            ck_assert_uint_ge(l, 1);
            ck_assert_uint_le(l, spec.s);
            ck_assert(m.val[i] == copysign(ldexp(unit, (int)l - 3), x[j]));
            /* The level is a neighbour of y: 2^(l-s) within a factor 2. */
            ck_assert_msg(ldexp(1.0, (int)l - 3) <= fmax(2 * y, 0.25) &&
                              ldexp(1.0, (int)l - 3) >= y / 2,
                          "y %.17g at level %u", y, (unsigned)l);
        }
    }
    ec_msg_clear(&m);
    ec_compressor_free(c);
}
END_TEST

static Suite *compressors_suite(void)
{
    Suite *s = suite_create("compressors");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, test_row_properties, 0, EC_COMP_COUNT);
    tcase_add_test(tc, test_natural_exact_values);
    tcase_add_loop_test(tc, test_natdither_exact_values, EC_COMP_NATDITHER,
                        EC_COMP_NATDITHER_UNBIASED + 1);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(compressors_suite());
}
