/*
 * The load benchmark (bench/bench_load.c) at a smaller scale, as a test:
 * submitters and pollers against a real server, no 5xx but a 503 with
 * Retry-After, every accepted job ends with all its rows. A small per-token
 * queue limit makes the 429 path (Retry-After, then a retry) part of it.
 */
#define BENCH_LOAD_NO_MAIN
#include "../bench/bench_load.c"

#include <check.h>

START_TEST(test_load_small)
{
    struct load_opts o = {20, 5, 80, 4, 150, NULL};
    struct load_result r;
    int rc;

    /* Each token (two submitters) may queue 3 jobs: most submitters meet
     * a 429 and must come back when Retry-After says. */
    setenv("ECOPT_MAX_QUEUED_PER_TOKEN", "3", 1);
    rc = load_run(&o, &r);
    ck_assert_msg(rc == 0, "load run: %s", r.problem);
    load_report(stderr, &o, &r);
    ck_assert_msg(r.violations == 0, "%lu violations, the first: %s", r.violations,
                  r.first_violations[0]);
    ck_assert_uint_eq(r.accepted, r.expected);
    ck_assert_uint_eq(r.succeeded, r.expected);
    ck_assert_uint_eq(r.rows_wrong, 0);
    ck_assert_uint_eq(r.not_terminal, 0);
    ck_assert_uint_eq(r.s5xx, 0);
    ck_assert_uint_eq(r.transfer_errors, 0);
    ck_assert_msg(r.s429 > 0, "the queue limit of 3 was never met");
    for (int k = 0; k < K_COUNT; k++)
        ck_assert_msg(r.requests[k] > 0, "no %s requests", load_kind_name[k]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("load");
    TCase *tc = tcase_create("load");
    SRunner *sr;
    int failed;

    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(tc, 200);
    tcase_add_test(tc, test_load_small);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    curl_global_cleanup();
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
