/*
 * Tests of the metrics cursor of GET /v1/jobs/{id}/metrics
 * (metrics_cursor_parse and metrics_cursor_fit in service/api/handlers.c), pure
 * functions the handler and the fuzzer (fuzz/fuzz_metrics_cursor.c) share:
 * every range and the first bad parameter named, and downsampling that
 * fits max_points for every count without overflowing.
 */
#include <stdint.h>

#include "api.h"
#include "http.h"
#include "testutil.h"

/* A request whose query is raw, parsed as the server parses it. */
static int cursor_of(const char *raw, struct http_query *q,
                     struct metrics_cursor *c, struct query_problem *qp)
{
    struct http_parse_error err;
    struct http_req rq;

    ck_assert_int_eq(http_query_parse(raw, strlen(raw), q, &err), 0);
    memset(&rq, 0, sizeof rq);
    rq.nquery = q->count;
    rq.query = q->item;
    memset(qp, 0, sizeof *qp);
    return metrics_cursor_parse(&rq, c, qp);
}

struct cursor_case {
    const char *raw;
    const char *bad;            /* the parameter named, or NULL if valid */
    long long after, limit, every, max_points, wait;
};

static const struct cursor_case cursor_cases[] = {
    {"", NULL, -1, 1000, 1, 0, 0},
    {"after=120&limit=50&every=2&max_points=10&wait=5", NULL, 120, 50, 2, 10, 5},
    {"after=-1&limit=10000&every=1000000000&max_points=2&wait=60", NULL,
     -1, 10000, 1000000000, 2, 60},
    {"after=9223372036854775807", NULL, INT64_MAX, 1000, 1, 0, 0},
    {"format=csv&label=x", NULL, -1, 1000, 1, 0, 0},
    {"after=-2", "after", 0, 0, 0, 0, 0},
    {"after=9223372036854775808", "after", 0, 0, 0, 0, 0},
    {"after=", "after", 0, 0, 0, 0, 0},
    {"limit=0", "limit", 0, 0, 0, 0, 0},
    {"limit=10001", "limit", 0, 0, 0, 0, 0},
    {"limit=12abc", "limit", 0, 0, 0, 0, 0},
    {"every=0", "every", 0, 0, 0, 0, 0},
    {"every=1000000001", "every", 0, 0, 0, 0, 0},
    {"max_points=1", "max_points", 0, 0, 0, 0, 0},
    {"max_points=10001", "max_points", 0, 0, 0, 0, 0},
    {"wait=61", "wait", 0, 0, 0, 0, 0},
    {"wait=-1", "wait", 0, 0, 0, 0, 0},
    {"wait=1e3", "wait", 0, 0, 0, 0, 0},
    /* Checked in a fixed order; the first bad one is named. */
    {"wait=99&after=x", "after", 0, 0, 0, 0, 0},
};

START_TEST(test_metrics_cursor_parse)
{
    for (size_t i = 0; i < sizeof cursor_cases / sizeof cursor_cases[0]; i++) {
        const struct cursor_case *k = &cursor_cases[i];
        struct http_query q;
        struct metrics_cursor c;
        struct query_problem qp;
        int rc = cursor_of(k->raw, &q, &c, &qp);

        if (!k->bad) {
            ck_assert_msg(rc == 0, "'%s': %s", k->raw, qp.detail);
            ck_assert_msg(c.after == k->after && c.limit == k->limit &&
                              c.every == k->every &&
                              c.max_points == k->max_points &&
                              c.wait == k->wait,
                          "'%s': %lld %lld %lld %lld %lld", k->raw, c.after,
                          c.limit, c.every, c.max_points, c.wait);
        } else {
            ck_assert_msg(rc == -1, "'%s' accepted", k->raw);
            ck_assert_str_eq(qp.param, k->bad);
            ck_assert_msg(strncmp(qp.detail, k->bad, strlen(k->bad)) == 0 &&
                              strstr(qp.detail, "must be an integer in"),
                          "'%s': %s", k->raw, qp.detail);
            ck_assert_int_le(qp.min, qp.max);
        }
        http_query_free(&q);
    }
}
END_TEST

/* Downsampling: rows 0, every, 2 every, ... of count fit in max_points,
   and no count overflows every. */
START_TEST(test_metrics_cursor_fit)
{
    static const struct {
        long long max_points, limit;
        int64_t count;
        long long every, limit_after;
    } cases[] = {
        {0, 1000, 1000000, 1, 1000},        /* no max_points: unchanged */
        {5, 1000, 5, 1, 5},                 /* fits already */
        {5, 3, 9, 3, 3},                    /* rows 0,3,6 */
        {5, 1000, 10, 3, 5},                /* rows 0,3,6,9 */
        {10000, 10000, 10001, 2, 10000},
        {2, 1000, INT64_MAX, INT64_MAX, 2},
        {3, 1000, INT64_MAX, INT64_MAX / 2 + 1, 3},
    };
    struct metrics_cursor c;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c = (struct metrics_cursor){-1, cases[i].limit, 1, cases[i].max_points, 0};
        metrics_cursor_fit(&c, cases[i].count);
        ck_assert_msg(c.every == cases[i].every && c.limit == cases[i].limit_after,
                      "case %zu: every %lld limit %lld", i, c.every, c.limit);
    }
    /* The formula the handler always used, where it cannot overflow, and
       the curve fits. */
    for (long long mp = 2; mp <= 60; mp++) {
        for (int64_t count = mp + 1; count <= 3000; count += 7) {
            c = (struct metrics_cursor){-1, 1000, 1, mp, 0};
            metrics_cursor_fit(&c, count);
            ck_assert_int_eq(c.every, (count + mp - 2) / (mp - 1));
            ck_assert_int_le((count - 1) / c.every + 1, mp);
        }
    }
}
END_TEST

static Suite *cursor_suite(void)
{
    Suite *s = suite_create("metrics cursor");
    TCase *tc = tcase_create("cursor");

    tcase_add_test(tc, test_metrics_cursor_parse);
    tcase_add_test(tc, test_metrics_cursor_fit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cursor_suite());
}
