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

    /* s NULL: no server (a command that needs none) */
    snprintf(cmd, sizeof cmd,
             "ECOPT_URL=http://127.0.0.1:%u ECOPT_TOKEN=%s %s %s 2>&1", s ? s->port : 1,
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
        /* A gap that is not finite is said so, never printed as 0. */
        ck_assert_msg(strcmp(cases[i].outcome, "non_finite") != 0 ||
                          strstr(o.text, "rel gap not finite)"), "case %zu: %s", i, o.text);
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

/* A job's id from "ID state" or "ID state (retry of ...)". */
static void first_word(const char *text, char *id, size_t len)
{
    snprintf(id, len, "%.*s", (int)strcspn(text, " \n"), text);
}

/*
 * What Ray and Slurm users type first, against the real server: logs
 * (and -f until the job ends), retry of a succeeded job pointing back to
 * it, compare, experiment list, plot into a file, metrics --follow, show
 * with ISO 8601 times, and bare ecopt listing every command.
 */
START_TEST(test_more_commands)
{
    static const char *const commands[] = {"submit", "list", "show", "watch", "logs",
                                           "metrics", "plot", "compare", "retry",
                                           "cancel", "experiment", "datasets"};
    struct server s;
    struct out o;
    char id[32], again[32], args[512], svg[96], xp[64], *p;
    FILE *f;

    o = client(NULL, ALICE, "");
    ck_assert_int_eq(o.status, 2);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        snprintf(args, sizeof args, "\n  %s ", commands[i]);
        ck_assert_msg(strstr(o.text, args), "bare ecopt does not list %s: %s", commands[i],
                      o.text);
    }
    server_start(&s, 0);
    o = client(&s, ALICE, "submit --dataset heart_scale --workers 3 --max-rounds 300 --watch");
    ck_assert_msg(o.status == 5, "%d: %s", o.status, o.text);
    first_word(o.text, id, sizeof id);

    snprintf(args, sizeof args, "logs %s", id);         /* the coordinator's log */
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0 && strstr(o.text, "outcome    budget_exhausted"), "%d: %s",
                  o.status, o.text);
    o = client(&s, ALICE, "logs j_0000000000000000");
    ck_assert_msg(o.status == 1 && strstr(o.text, "(HTTP 404)"), "%d: %s", o.status, o.text);

    snprintf(args, sizeof args, "show %s", id);         /* times people read */
    o = client(&s, ALICE, args);
    ck_assert_int_eq(o.status, 0);
    p = strstr(o.text, "\"created_at\": \"");
    ck_assert_msg(p && p[15 + 4] == '-' && p[15 + 10] == 'T' && strstr(p, "Z\""), "%s", o.text);

    snprintf(args, sizeof args, "retry %s", id);        /* a succeeded job, rerun */
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%d: %s", o.status, o.text);
    snprintf(args, sizeof args, "(retry of %s)", id);
    ck_assert_msg(strstr(o.text, args), "%s", o.text);
    first_word(o.text, again, sizeof again);
    ck_assert_str_ne(again, id);
    /* its rows as they come, to its end: the last is round 300 */
    snprintf(args, sizeof args, "metrics %s --follow --format csv", again);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0 && strstr(o.text, "\n300,"), "%d: %s", o.status, o.text);
    snprintf(args, sizeof args, "show %s", again);
    o = client(&s, ALICE, args);
    snprintf(args, sizeof args, "\"retry_of\": \"%s\"", id);
    ck_assert_msg(strstr(o.text, args), "%s", o.text);

    snprintf(args, sizeof args, "compare %s %s", id, again);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0 && strstr(o.text, id) && strstr(o.text, again) &&
                  strstr(o.text, "FINAL GAP"), "%d: %s", o.status, o.text);
    o = client(&s, ALICE, "compare j_0000000000000000");
    ck_assert_msg(o.status == 1 && strstr(o.text, "j_0000000000000000"), "%s", o.text);

    snprintf(svg, sizeof svg, "%s/plot.svg", s.dir);     /* plot ID > x.svg, or -o */
    snprintf(args, sizeof args, "plot %s > %s", id, svg);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%d: %s", o.status, o.text);
    f = fopen(svg, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(fread(o.text, 1, sizeof o.text - 1, f), 0);
    fclose(f);
    ck_assert_msg(strstr(o.text, "<svg"), "%.200s", o.text);
    snprintf(args, sizeof args, "plot %s %s --x bits -o %s", id, again, svg);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%d: %s", o.status, o.text);

    /* experiment list, and logs -f of a job still running: it returns at
       the job's end with the summary */
    tu_write_temp_str("{\"name\": \"listed\", \"base\": {\"dataset\": \"heart_scale\","
                      " \"workers\": 2, \"max_rounds\": 20000, \"target\": 0,"
                      " \"eval_every\": 1000}, \"variants\": [{}]}", xp, sizeof xp);
    snprintf(args, sizeof args, "experiment submit %s", xp);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0, "%d: %s", o.status, o.text);
    o = client(&s, ALICE, "experiment list");
    ck_assert_msg(o.status == 0 && strstr(o.text, "listed") && strstr(o.text, "x_"), "%s",
                  o.text);
    o = client(&s, ALICE, "list --limit 1");
    p = strstr(o.text, "\nj_");
    ck_assert_ptr_nonnull(p);
    first_word(p + 1, again, sizeof again);
    snprintf(args, sizeof args, "logs %s -f", again);
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 0 && strstr(o.text, "dataset    heart_scale") &&
                  strstr(o.text, "\noutcome    "), "%d: %s", o.status, o.text);
    unlink(xp);
    server_stop(&s, SIGTERM);
}
END_TEST

/* A queued job has no round and no gap yet: the list says "-", not -1
 * and nan. One job runs at a time here, so the second waits. */
START_TEST(test_list_queued)
{
    static const char *const one[] = {"--max-running", "1", NULL};
    struct server s;
    struct out o;
    char first[32], second[32], args[256], *line;

    server_start_with(&s, 0, one);
    o = client(&s, ALICE, "submit --dataset a9a --workers 2 --max-rounds 40000000 --target 0");
    first_word(o.text, first, sizeof first);
    o = client(&s, ALICE, "submit --dataset a9a --workers 2 --max-rounds 40000000 --target 0");
    first_word(o.text, second, sizeof second);
    o = client(&s, ALICE, "list --state queued");
    ck_assert_msg(o.status == 0 && (line = strstr(o.text, second)), "%s", o.text);
    ck_assert_msg(strstr(line, " queued ") && strstr(line, "  -            -  -") &&
                  !strstr(line, "nan") && !strstr(line, " -1 "), "%s", o.text);
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "cancel %s", i ? first : second);
        o = client(&s, ALICE, args);
        ck_assert_msg(o.status == 0, "%s", o.text);
    }
    snprintf(args, sizeof args, "watch %s", first);      /* cancelled: 3 */
    o = client(&s, ALICE, args);
    ck_assert_msg(o.status == 3 && strstr(o.text, ", cancelled: "), "%d: %s", o.status,
                  o.text);
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
                      " \"tune\": {\"grid\": [2]}}",
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
    /* tuned at x2 (and the default x1) on the default axis: the best of
       each variant says its axis, and the run's step multiplier is 1 */
    ck_assert_msg(strstr(o.text, "BEST ROUNDS"), "%s", o.text);
    ck_assert_msg(strstr(o.text, " x2 (smoothness) "), "%s", o.text);
    ck_assert_msg(strstr(o.text, "  x1 (smoothness x2)\n"), "%s", o.text);
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
    tcase_add_test(tc, test_more_commands);
    tcase_add_test(tc, test_list_queued);
    tcase_add_test(tc, test_experiment_table);
    tcase_add_test(tc, test_datasets_upload);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
