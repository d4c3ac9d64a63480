/*
 * The metric record written without Jansson (describe_metric_record) says
 * exactly what describe_metric says: every key, every number to the bit,
 * null for what is not finite, and keys in the order JSON_SORT_KEYS gives.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "describe.h"
#include "ecopt/rng.h"
#include "testutil.h"

/* The same JSON value, numbers compared bit for bit. */
static void same_value(const char *key, json_t *a, json_t *b)
{
    if (json_is_null(a) || json_is_null(b)) {
        ck_assert_msg(json_is_null(a) && json_is_null(b), "%s: null on one side only", key);
        return;
    }
    if (json_is_integer(a) || json_is_integer(b)) {
        ck_assert_msg(json_is_integer(a) && json_is_integer(b), "%s: integer on one side", key);
        ck_assert_int_eq(json_integer_value(a), json_integer_value(b));
        return;
    }
    if (json_is_string(a)) {
        ck_assert_str_eq(json_string_value(a), json_string_value(b));
        return;
    }
    ck_assert_msg(json_is_real(a) && json_is_real(b), "%s: not both reals", key);
    double x = json_real_value(a), y = json_real_value(b);
    ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "%s: %.17g against %.17g", key, x, y);
}

static void check_row(const ec_metric *row)
{
    char buf[DESCRIBE_RECORD_MAX];
    json_error_t err;
    int n = describe_metric_record(row, buf, sizeof buf);
    json_t *got, *want = describe_metric(row);
    const char *key;
    json_t *v;
    char *text;

    ck_assert_int_gt(n, 0);
    ck_assert_uint_eq(strlen(buf), (size_t)n);
    got = json_loads(buf, JSON_REJECT_DUPLICATES, &err);
    ck_assert_msg(got != NULL, "%s: %s", buf, err.text);
    json_object_set_new(want, "type", json_string("metric"));
    json_object_set_new(want, "v", json_integer(1));
    ck_assert_uint_eq(json_object_size(got), json_object_size(want));
    json_object_foreach(want, key, v)
        same_value(key, json_object_get(got, key), v);
    /* Keys in the order Jansson's JSON_SORT_KEYS writes them. */
    text = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    for (const char *p = buf, *q = text; (p = strchr(p, '"')) && (q = strchr(q, '"'));) {
        size_t lp = strcspn(p + 1, "\""), lq = strcspn(q + 1, "\"");
        ck_assert_msg(lp == lq && memcmp(p, q, lp) == 0, "key order: %s against %s", buf, text);
        p += lp + 2;
        q += lq + 2;
        if (*p == ':')
            p++;
        if (*q == ':')
            q++;
    }
    free(text);
    json_decref(got);
    json_decref(want);
}

START_TEST(test_special_values)
{
    const double specials[] = {0.0,      -0.0,        1.0,      -1.0,  7872.0,
                               1e15,     9007199254740991.0, 9007199254740992.0,
                               1e300,    -1e-300,     4.9e-324, 0.1,   1.0 / 3.0,
                               NAN,      INFINITY,    -INFINITY, 2.5e-16, 123456.75};
    size_t ns = sizeof specials / sizeof specials[0];

    for (size_t i = 0; i < ns; i++) {
        ec_metric m = {.round = i * 1000003u,
                       .bits_up = specials[i],
                       .bits_down = specials[(i + 1) % ns],
                       .paper_bits = specials[(i + 2) % ns],
                       .P = specials[(i + 3) % ns],
                       .gap = specials[(i + 4) % ns],
                       .rel_gap = specials[(i + 5) % ns],
                       .grad_norm = specials[(i + 6) % ns],
                       .seconds = specials[(i + 7) % ns],
                       .wire_up = specials[(i + 8) % ns],
                       .wire_down = specials[(i + 9) % ns]};
        check_row(&m);
    }
    /* The largest round JSON readers take (rounds stop at max_rounds). */
    ec_metric top = {.round = INT64_MAX, .P = 0.5};
    check_row(&top);
}
END_TEST

START_TEST(test_random_rows)
{
    ec_rng r;

    ec_rng_seed(&r, 20261129, 0);
    for (int i = 0; i < 20000; i++) {
        double v[10];
        for (int k = 0; k < 10; k++) {
            uint64_t bits = ec_rng_next(&r);
            double x;
            memcpy(&x, &bits, sizeof x);        /* any double, NaN included */
            if (k % 3 == 1)
                x = (double)(bits >> 12);       /* whole numbers, like bit counts */
            v[k] = x;
        }
        ec_metric m = {.round = ec_rng_next(&r) >> 1, .bits_up = v[0], .bits_down = v[1],
                       .paper_bits = v[2], .P = v[3], .gap = v[4], .rel_gap = v[5],
                       .grad_norm = v[6], .seconds = v[7], .wire_up = v[8], .wire_down = v[9]};
        check_row(&m);
    }
}
END_TEST

START_TEST(test_short_buffer)
{
    char buf[DESCRIBE_RECORD_MAX - 1];
    ec_metric m = {0};

    ck_assert_int_eq(describe_metric_record(&m, buf, sizeof buf), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("describe");
    TCase *tc = tcase_create("record");

    tcase_add_test(tc, test_special_values);
    tcase_add_test(tc, test_random_rows);
    tcase_add_test(tc, test_short_buffer);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
