/*
 * The ecopt client against a real server, as a user types it: submit and
 * watch to the end, list, show, metrics as CSV, cancel, delete, an
 * experiment, and the exit codes of errors and unreachable servers.
 */
#include <sys/wait.h>

#include "serverutil.h"
#include "testutil.h"

struct out {
    int status;
    char text[65536];
};

/* Runs the client with ECOPT_URL and ECOPT_TOKEN set for this server. */
static struct out client(const struct server *s, const char *token, const char *args)
{
    const char *bin = getenv("ECOPT_BIN");
    char cmd[2048];
    struct out o = {0};
    FILE *p;
    size_t n = 0, r;
    int st;

    snprintf(cmd, sizeof cmd,
             "ECOPT_URL=http://127.0.0.1:%u ECOPT_TOKEN=%s %s %s 2>&1", s->port,
             token ? token : "", bin && *bin ? bin : "build/ecopt", args);
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while ((r = fread(o.text + n, 1, sizeof o.text - 1 - n, p)) > 0)
        n += r;
    o.text[n] = '\0';
    st = pclose(p);
    o.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    return o;
}

START_TEST(test_submit_watch_metrics)
{
    struct server s;
    struct out o;
    char id[32] = "", args[256];

    server_start(&s, 0);
    o = client(&s, ALICE, "submit --dataset heart_scale --workers 3 --compressor topk --k 2 "
                          "--max-rounds 400 --watch");
    /* 400 rounds end above the target 1e-9: the budget ran out, 5 */
    ck_assert_msg(o.status == 5, "%d: %s", o.status, o.text);
    ck_assert_int_eq(sscanf(o.text, "%31s queued", id), 1);
    ck_assert_msg(strstr(o.text, " succeeded, budget_exhausted: "), "%s", o.text);
    o = client(&s, ALICE, "list");
    ck_assert_int_eq(o.status, 0);
    ck_assert_ptr_nonnull(strstr(o.text, id));
    /* its stop reason, whichever of the two 400 rounds give */
    ck_assert_msg(strstr(o.text, " max_rounds ") || strstr(o.text, " target_reached "), "%s",
                  o.text);
    /* JSON output: every field, reals to 17 digits; --limit pages. */
    o = client(&s, ALICE, "list --limit 1 --json");
    ck_assert_msg(o.status == 0, "%d: %s", o.status, o.text);
    {
        json_error_t je;
        json_t *arr = json_loads(o.text, 0, &je), *gap;
        char *again;

        ck_assert_msg(json_is_array(arr), "%s: %s", je.text, o.text);
        ck_assert_int_eq(json_array_size(arr), 1);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(arr, 0), "id")), id);
        gap = json_object_get(json_object_get(json_array_get(arr, 0), "progress"), "rel_gap");
        ck_assert(json_is_real(gap));
        /* printed with 17 digits, so it reads back as the same double */
        again = json_dumps(gap, JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
        ck_assert_ptr_nonnull(strstr(o.text, again));
        free(again);
        json_decref(arr);
    }
    o = client(&s, ALICE, "list --limit 0");
    ck_assert_int_eq(o.status, 2);
    ck_assert_ptr_nonnull(strstr(o.text, "--limit must be an integer in 1..100000"));
    snprintf(args, sizeof args, "metrics %s --format csv", id);
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 0);
    ck_assert_ptr_eq(strstr(o.text, "round,bits_up,bits_down"), o.text);
    ck_assert_ptr_nonnull(strstr(o.text, "\n400,"));
    snprintf(args, sizeof args, "show %s", id);
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 0);
    ck_assert_ptr_nonnull(strstr(o.text, "\"state\": \"succeeded\""));
    snprintf(args, sizeof args, "show %s", id);
    o = client(&s, BOB, args);                  /* not Bob's job */
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.text, "(HTTP 404)"));
    snprintf(args, sizeof args, "delete %s", id);
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 0);
    ck_assert_ptr_nonnull(strstr(o.text, "deleted"));
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_cancel_and_failures)
{
    struct server s;
    struct out o;
    char id[32] = "", args[256], spec[64];

    server_start(&s, 0);
    tu_write_temp_str("{\"dataset\": \"a9a\", \"workers\": 3, \"max_rounds\": 40000000,"
                      " \"target\": 0}", spec, sizeof spec);
    snprintf(args, sizeof args, "submit %s", spec);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%s", o.text);
    sscanf(o.text, "%31s", id);
    snprintf(args, sizeof args, "cancel %s", id);
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 0);
    /* watch on a cancelled job ends with its state and exit status 3 */
    snprintf(args, sizeof args, "watch %s", id);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 3, "%d: %s", o.status, o.text);
    ck_assert_ptr_nonnull(strstr(o.text, "cancelled"));
    unlink(spec);

    o = client(&s, ALICE, "submit --dataset heart_scale --workers 0 --set bogus=1");
    ck_assert_int_eq(o.status, 1);
    ck_assert_msg(strstr(o.text, "workers: must be an integer in 1..4096"), "%s", o.text);
    ck_assert_ptr_nonnull(strstr(o.text, "bogus: unknown key"));
    o = client(&s, "wrong-token-0123456789", "list");
    ck_assert_int_eq(o.status, 1);
    ck_assert_ptr_nonnull(strstr(o.text, "not known"));
    ck_assert_msg(strstr(o.text, "ECOPT_TOKEN is set"), "a 401 says where the token goes: %s",
                  o.text);
    o = client(&s, ALICE, "frobnicate");
    ck_assert_int_eq(o.status, 2);
    o = client(&s, ALICE, "watch");
    ck_assert_int_eq(o.status, 2);
    o = client(&s, ALICE, "metrics --help");
    ck_assert_int_eq(o.status, 0);
    server_stop(&s, SIGTERM);
    /* the server is gone: the client says what it tried */
    o = client(&s, ALICE, "list");
    ck_assert_int_eq(o.status, 4);
    ck_assert_msg(strstr(o.text, "cannot reach http://127.0.0.1:"), "%s", o.text);
}
END_TEST

/*
 * watch's exit status is the outcome's: 0 only for a run that reached its
 * target, 5 for one whose budget ran out first, 3 for one that ended worse
 * than it started or blew up; the job and the list say the same word.
 */
START_TEST(test_watch_outcomes)
{
    static const struct {
        const char *flags;
        int status;
        const char *outcome;
    } cases[] = {
        {"--compressor topk --k 2 --max-rounds 400 --target 1e-2", 0, "target_reached"},
        {"--max-rounds 5", 5, "budget_exhausted"},
        {"--algorithm gd --set step_multiplier=1000 --max-rounds 200", 3, "worse_than_start"},
        {"--algorithm gd --set step_multiplier=1e300 --max-rounds 200", 3, "non_finite"},
    };
    struct server s;
    struct out o;
    char args[512], id[32], want[64];

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "submit --dataset heart_scale --workers 3 %s --watch",
                 cases[i].flags);
        o = client(&s, ALICE, args);
        ck_assert_msg(o.status == cases[i].status, "case %zu: %d: %s", i, o.status, o.text);
        snprintf(want, sizeof want, ", %s: ", cases[i].outcome);
        ck_assert_msg(strstr(o.text, want), "case %zu: %s", i, o.text);
        ck_assert_int_eq(sscanf(o.text, "%31s queued", id), 1);
        snprintf(args, sizeof args, "watch %s", id);        /* again, once ended */
        o = client(&s, ALICE, args);
        ck_assert_msg(o.status == cases[i].status, "case %zu: %d: %s", i, o.status, o.text);
        snprintf(args, sizeof args, "show %s", id);
        o = client(&s, ALICE, args);
        snprintf(want, sizeof want, "\"outcome\": \"%s\"", cases[i].outcome);
        ck_assert_msg(strstr(o.text, want), "case %zu: %s", i, o.text);
    }
    o = client(&s, ALICE, "list");
    ck_assert_msg(strstr(o.text, " worse_than_start ") && strstr(o.text, " non_finite "),
                  "%s", o.text);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_experiment_table)
{
    struct server s;
    struct out o;
    char file[64], xid[32] = "", args[128];
    double t0 = tu_now();

    server_start(&s, 0);
    tu_write_temp_str("{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3, "
                      "\"lambda2_rel\": 1e-2, \"target\": 1e-6, \"max_rounds\": 3000, "
                      "\"compressor\": {\"type\": \"topk\", \"k\": 2}}, \"variants\": "
                      "[{\"algorithm\": \"eclk\"}, {\"algorithm\": \"ec-gd-diana\"}],"
                      " \"tune\": {\"step_multiplier\": [2]}}",
                      file, sizeof file);
    snprintf(args, sizeof args, "experiment submit %s", file);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%s", o.text);
    ck_assert_int_eq(sscanf(o.text, "experiment %31s", xid), 1);
    snprintf(args, sizeof args, "experiment show %s", xid);
    for (;;) {
        o = client(&s, ALICE, args);
        ck_assert_int_eq(o.status, 0);
        if (!strstr(o.text, " queued ") && !strstr(o.text, " running "))
            break;
        ck_assert_msg(tu_now() - t0 < 60, "%s", o.text);
        usleep(200000);
    }
    ck_assert_ptr_nonnull(strstr(o.text, "eclk"));
    ck_assert_ptr_nonnull(strstr(o.text, "ec-gd-diana"));
    ck_assert_ptr_nonnull(strstr(o.text, "TO TARGET"));
    /* tuned at x2 (and the default x1): the best of each variant */
    ck_assert_msg(strstr(o.text, "BEST ROUNDS"), "%s", o.text);
    ck_assert_msg(strstr(o.text, "       x2 "), "%s", o.text);
    unlink(file);
    server_stop(&s, SIGTERM);
}
END_TEST

/* datasets: upload a file into a private data directory, list it, and a
 * bad file is refused with the reader's line. */
START_TEST(test_datasets_upload)
{
    struct server s;
    struct out o;
    char dir[] = "/tmp/ecopt-data-XXXXXX", src[1024], bad[64], args[1200];
    const char *shared = getenv("ECOPT_DATA_DIR");
    char *saved = shared ? strdup(shared) : NULL;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    setenv("ECOPT_DATA_DIR", dir, 1);
    server_start(&s, 0);
    snprintf(src, sizeof src, "%s/heart_scale", saved ? saved : "../shared/datasets");
    snprintf(args, sizeof args, "datasets upload %s --name hs", src);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%s", o.text);
    ck_assert_ptr_nonnull(strstr(o.text, "hs: 270 rows, d = 13, nnz = 3378, sha256 "
                                         "5defa0a4c4c5bdaf3f55ae3828310252e8565c13ee37ce279e0b86d82e7f4ce9"));
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 1);                   /* exists: 409 */
    ck_assert_ptr_nonnull(strstr(o.text, "(HTTP 409)"));
    o = client(&s, ALICE, "datasets");
    ck_assert_int_eq(o.status, 0);
    ck_assert_ptr_nonnull(strstr(o.text, "hs  "));
    tu_write_temp_str("1 1:1\n-1 2:1\n3 1:1\n", bad, sizeof bad);
    snprintf(args, sizeof args, "datasets upload %s --name three", bad);
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 1);
    ck_assert_msg(strstr(o.text, "three:3: a third label value"), "%s", o.text);
    o = client(&s, ALICE, "submit --dataset hs --workers 2 --max-rounds 100 --target 0.5 "
                          "--watch");
    ck_assert_msg(o.status == 0, "%s", o.text);
    server_stop(&s, SIGTERM);
    if (saved)
        setenv("ECOPT_DATA_DIR", saved, 1);
    free(saved);
    unlink(bad);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("client");
    TCase *tc = tcase_create("client");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_submit_watch_metrics);
    tcase_add_test(tc, test_cancel_and_failures);
    tcase_add_test(tc, test_watch_outcomes);
    tcase_add_test(tc, test_experiment_table);
    tcase_add_test(tc, test_datasets_upload);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
