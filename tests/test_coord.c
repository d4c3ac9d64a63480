/*
 * The coordinator's option table (coord/coord.h): every option the
 * service's argument builder writes reads back through the command line's
 * checks to the same value, every check refuses hostile text naming the
 * flag and its range, the launchers are the spec's backends, and the
 * report channel's reader reads what its writer writes; a P* hint's
 * lambda_max is used by `ecopt run` for the file it names, and only there.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coord.h"
#include "describe.h"
#include "launch.h"
#include "report.h"
#include "testutil.h"

/* The row of a flag. */
static size_t row_of(const char *flag)
{
    for (size_t i = 0; i < coord_option_count(); i++)
        if (strcmp(coord_option_flag(i), flag) == 0)
            return i;
    ck_abort_msg("no option --%s", flag);
    return 0;
}

/* Options as the builder gives them, read back as the parser reads them. */
static void read_back(const struct coord_opts *in, struct coord_opts *out)
{
    char *argv[64], buf[COORD_ARGV_BUF], err[256];
    int argc = 0;

    ck_assert_int_eq(coord_opts_argv(in, argv, &argc, buf, sizeof buf), 0);
    memset(out, 0, sizeof *out);
    out->report_fd = -1;
    for (int a = 0; a < argc; a++) {
        ck_assert_msg(strncmp(argv[a], "--", 2) == 0, "argument %d: %s", a, argv[a]);
        size_t i = row_of(argv[a] + 2);
        const char *text = coord_option_metavar(i) ? argv[++a] : NULL;
        ck_assert_msg(coord_option_set(out, i, text, err, sizeof err) == 0, "%s", err);
    }
}

START_TEST(every_option_round_trips)
{
    struct coord_opts in, out;

    memset(&in, 0, sizeof in);
    in.data_dir = "/srv/data";
    in.backend = "mpi";
    in.procs = 7;
    in.report_fd = 3;
    in.round_timeout = 12.5;
    in.worker_mem_limit = 1536;
    in.mem_limits = 1;
    in.worker_cpu_limit = 3600;
    in.worker_user = "nobody";
    in.worker_uid = 3999005;
    in.dataset_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    in.pstar_hint = "/state/j.pstar.json";
    in.nice = 13;
    in.hostfile = "/etc/hosts.mpi";
    in.mpi_rank = 1;
    read_back(&in, &out);
    /* Field by field, from the table, so that a new row is checked too. */
#define SAME_STRING(f) ck_assert_str_eq(out.f, in.f)
#define SAME_NUMBER(f) ck_assert_msg(out.f == in.f, "--%s", #f)
#define SAME(field, flag, sh, kind, meta, lo, hi, help) SAME_##kind(field);
#define SAME_USER SAME_STRING
#define SAME_SHA SAME_STRING
#define SAME_BACKEND SAME_STRING
#define SAME_FD SAME_NUMBER
#define SAME_COUNT SAME_NUMBER
#define SAME_REAL SAME_NUMBER
#define SAME_SWITCH SAME_NUMBER
#define SAME_FLAG SAME_NUMBER
    COORD_OPTIONS(SAME)
}
END_TEST

START_TEST(unset_options_are_left_out)
{
    struct coord_opts o;
    char *argv[64], buf[COORD_ARGV_BUF];
    int argc = 0;

    memset(&o, 0, sizeof o);
    o.report_fd = -1;
    o.worker_user = "";          /* the service's "no user" */
    ck_assert_int_eq(coord_opts_argv(&o, argv, &argc, buf, sizeof buf), 0);
    ck_assert_int_eq(argc, 0);
}
END_TEST

/* Hostile values: refused, with the flag and what it must be. */
START_TEST(bad_values_are_refused)
{
    static const struct {
        const char *flag, *text, *says;
    } cases[] = {
        {"procs", "0", "--procs must be in 1..4096 (got '0')"},
        {"procs", "4097", "--procs must be in 1..4096"},
        {"procs", "2x", "--procs must be in 1..4096"},
        {"procs", "", "--procs must be in 1..4096"},
        {"procs", "99999999999999999999", "--procs must be in 1..4096"},
        {"worker-uid", "0", "--worker-uid must be in 1..2147483646"},
        {"worker-uid", "-5", "--worker-uid must be in 1.."},
        {"report-fd", "-1", "--report-fd must be a descriptor number"},
        {"report-fd", "3 ", "--report-fd must be a descriptor number"},
        {"round-timeout", "0", "--round-timeout must be in (0, 86400] seconds"},
        {"round-timeout", "nan", "--round-timeout must be in (0, 86400]"},
        {"round-timeout", "86401", "--round-timeout must be in (0, 86400]"},
        {"worker-cpu-limit", "0.5", "--worker-cpu-limit must be in [1, "},
        {"worker-cpu-limit", "inf", "--worker-cpu-limit must be in [1, "},
        {"worker-mem-limit", "15", "--worker-mem-limit must be in [16, "},
        {"nice", "0", "--nice must be in 1..19 (got '0')"},
        {"nice", "20", "--nice must be in 1..19"},
        {"nice", "-5", "--nice must be in 1..19"},
        {"mem-limits", "on", "--mem-limits must be auto or off (got 'on')"},
        {"backend", "threads", "--backend must be inproc, process or mpi (got 'threads')"},
        {"backend", "", "--backend must be inproc, process or mpi"},
        {"worker-user", "", "--worker-user must name a user"},
        {"dataset-sha256", "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
         "--dataset-sha256 must be 64 lowercase hex digits"},
        {"dataset-sha256", "abc", "--dataset-sha256 must be 64 lowercase hex digits"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct coord_opts o;
        char err[256] = "";

        coord_opts_init(&o);
        ck_assert_msg(coord_option_set(&o, row_of(cases[c].flag), cases[c].text, err,
                                       sizeof err) < 0,
                      "--%s '%s' taken", cases[c].flag, cases[c].text);
        ck_assert_msg(strstr(err, cases[c].says), "--%s '%s': %s", cases[c].flag,
                      cases[c].text, err);
    }
}
END_TEST

/* The launchers are the spec's backends, in its order, and the usage of
   --backend names each. */
START_TEST(launchers_are_the_backends)
{
    const char *help = coord_option_help(row_of("backend"));

    ck_assert_uint_eq(launch_count(), JOBSPEC_BACKEND_COUNT);
    for (size_t i = 0; i < launch_count(); i++) {
        ck_assert_str_eq(launch_at(i)->name, jobspec_backend_name((enum jobspec_backend)i));
        ck_assert_ptr_eq(launch_find(launch_at(i)->name), launch_at(i));
        ck_assert_ptr_nonnull(launch_at(i)->run);
        ck_assert_msg(strstr(help, launch_at(i)->help), "%s", help);
    }
    ck_assert_ptr_null(launch_find("srun"));
}
END_TEST

/* What the writer writes, the reader reads: start, metric and final. */
START_TEST(report_reader_reads_the_writer)
{
    struct report_writer w;
    struct report_record rr;
    ec_metric row = {.round = 7, .rel_gap = 0.25, .seconds = 1.5};
    ec_summary sum = {.stop = EC_STOP_CANCELLED, .rounds = 7};
    ec_params prm = {.algo = EC_ALGO_ECLK};
    char buf[8192];
    int p[2];
    ssize_t n;

    ck_assert_int_eq(pipe(p), 0);
    report_writer_init(&w, p[1]);
    report_metric(&w, &row);
    snprintf(sum.reason, sizeof sum.reason, "a signal");
    report_final(&w, &sum, &prm, 1.25, 4096);
    report_writer_close(&w);
    close(p[1]);
    n = read(p[0], buf, sizeof buf - 1);
    close(p[0]);
    ck_assert_int_gt(n, 0);
    buf[n] = '\0';

    char *second = strchr(buf, '\n');
    ck_assert_ptr_nonnull(second);
    json_t *rec = json_loadb(buf, (size_t)(second - buf), 0, NULL);
    report_parse(rec, &rr);
    ck_assert_int_eq(rr.type, REPORT_METRIC);
    ck_assert(rr.row_ok);
    ck_assert_uint_eq(rr.row.round, 7);
    char *doc = report_metric_doc(rec, buf, (size_t)(second - buf));
    ck_assert_ptr_nonnull(doc);
    ck_assert_ptr_null(strstr(doc, "\"type\""));
    ck_assert_ptr_null(strstr(doc, "\"v\""));
    free(doc);
    json_decref(rec);

    rec = json_loads(second + 1, JSON_DISABLE_EOF_CHECK, NULL);
    report_parse(rec, &rr);
    ck_assert_int_eq(rr.type, REPORT_FINAL);
    ck_assert_int_eq(rr.status, REPORT_CANCELLED);
    ck_assert_str_eq(rr.stop, "cancelled");
    ck_assert_str_eq(rr.reason, "a signal");
    ck_assert_int_eq(rr.rss_sum_bytes, 4096);
    json_decref(rec);
}
END_TEST

/* Records a reader does not know, and finals of odd shapes. */
START_TEST(report_reader_is_strict_about_little)
{
    static const struct {
        const char *line;
        enum report_type type;
        enum report_status status;
        long long rss;
    } cases[] = {
        {"{\"v\":1}", REPORT_OTHER, REPORT_FAILED, -1},
        {"{\"type\":7,\"v\":1}", REPORT_OTHER, REPORT_FAILED, -1},
        {"{\"type\":\"gossip\",\"v\":1}", REPORT_OTHER, REPORT_FAILED, -1},
        {"{\"type\":\"final\",\"status\":\"succeeded\",\"v\":1}", REPORT_FINAL,
         REPORT_SUCCEEDED, -1},
        {"{\"type\":\"final\",\"status\":\"weird\",\"usage\":{\"rss_sum_bytes\":-4}}",
         REPORT_FINAL, REPORT_FAILED, -1},
        {"{\"type\":\"final\",\"status\":3,\"usage\":{\"rss_sum_bytes\":\"9\"}}",
         REPORT_FINAL, REPORT_FAILED, -1},
        {"{\"type\":\"final\",\"usage\":{\"rss_sum_bytes\":9}}", REPORT_FINAL,
         REPORT_FAILED, 9},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct report_record rr;
        json_t *rec = json_loads(cases[c].line, 0, NULL);

        ck_assert_ptr_nonnull(rec);
        report_parse(rec, &rr);
        ck_assert_msg(rr.type == cases[c].type, "%s", cases[c].line);
        ck_assert_msg(rr.status == cases[c].status, "%s", cases[c].line);
        ck_assert_msg(rr.rss_sum_bytes == cases[c].rss, "%s", cases[c].line);
        ck_assert_ptr_nonnull(rr.reason);
        json_decref(rec);
    }
    {
        /* A metric record with a row that does not read is dropped. */
        struct report_record rr;
        json_t *rec = json_loads("{\"type\":\"metric\",\"round\":\"x\",\"v\":1}", 0, NULL);

        report_parse(rec, &rr);
        ck_assert_int_eq(rr.type, REPORT_METRIC);
        ck_assert(!rr.row_ok);
        ck_assert_ptr_null(report_metric_doc(rec, "{}", 2));
        json_decref(rec);
    }
}
END_TEST

/* `ecopt run` of spec_path with hint (NULL: none): its problem record. */
static json_t *run_problem(const char *spec_path, const char *hint)
{
    const char *bin = getenv("ECOPT_BIN");
    char cmd[2048];
    json_error_t je;
    json_t *doc, *pb;
    FILE *f;

    snprintf(cmd, sizeof cmd,
             "'%s' run %s --format json --quiet --backend inproc%s%s 2>/dev/null",
             bin && *bin ? bin : "build/ecopt", spec_path, hint ? " --pstar-hint " : "",
             hint ? hint : "");
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    doc = json_loadf(f, 0, &je);
    pclose(f);
    ck_assert_msg(doc != NULL, "%s: %s", cmd, je.text);
    pb = json_incref(json_object_get(doc, "problem"));
    json_decref(doc);
    ck_assert_ptr_nonnull(pb);
    return pb;
}

/* The text of `ecopt run` names where lambda_max came from: its constants
 * line holds want (NULL: the line has no lambda_max at all). */
static void text_lmax(const char *spec_path, const char *hint, const char *want)
{
    const char *bin = getenv("ECOPT_BIN");
    char cmd[2048], line[1024];
    int seen = 0;
    FILE *f;

    snprintf(cmd, sizeof cmd, "'%s' run %s --backend inproc%s%s 2>/dev/null",
             bin && *bin ? bin : "build/ecopt", spec_path, hint ? " --pstar-hint " : "",
             hint ? hint : "");
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "constants ", 10) == 0) {
            seen = 1;
            ck_assert_msg(want ? strstr(line, want) != NULL : !strstr(line, "lambda_max"),
                          "%s: %s", cmd, line);
        }
    pclose(f);
    ck_assert_msg(seen, "%s: no constants line", cmd);
}

/* A problem record's lambda_max and whether it came from the hint. */
static double record_lmax(const json_t *pb, int *cached, json_int_t *steps)
{
    json_t *lm = json_object_get(pb, "lambda_max");

    ck_assert_str_eq(json_string_value(json_object_get(lm, "method")), "lanczos");
    ck_assert(json_is_boolean(json_object_get(lm, "cached")));
    ck_assert(json_is_integer(json_object_get(lm, "steps")));
    ck_assert(json_is_real(json_object_get(lm, "value")));
    *cached = json_is_true(json_object_get(lm, "cached"));
    *steps = json_integer_value(json_object_get(lm, "steps"));
    return json_real_value(json_object_get(lm, "value"));
}

/* Writes a hint naming the file at named, with lambda_max when lmax is a
   number, and P* entries when pstar is. */
static void write_hint(const char *hint, const char *named, double lmax,
                       json_int_t steps, const json_t *pstar_of)
{
    struct stat st;
    json_t *root;

    ck_assert_int_eq(stat(named, &st), 0);
    root = json_pack("{s:o, s:s, s:[]}", "file", describe_file_identity(&st), "loss",
                     "logistic", "entries");
    ck_assert_ptr_nonnull(root);
    if (!isnan(lmax))
        json_object_set_new(root, "lambda_max",
                            json_pack("{s:f, s:s, s:I}", "value", lmax, "method",
                                      "lanczos", "steps", steps));
    if (pstar_of)
        json_array_append_new(
            json_object_get(root, "entries"),
            json_pack("{s:O, s:O, s:O, s:s}", "lambda1",
                      json_object_get(pstar_of, "lambda1"), "lambda2",
                      json_object_get(pstar_of, "lambda2"), "p_star",
                      json_object_get(pstar_of, "P_star"), "method", "newton"));
    ck_assert_int_eq(json_dump_file(root, hint, 0), 0);
    json_decref(root);
}

/*
 * A second run on the same file reads lambda_max from the hint, says so,
 * and builds the same constants bit for bit; a hint's value is taken as
 * it is (twice the value shows in L_f), but only for the file the hint
 * names: a hint for another file (the same bytes, another inode) is
 * ignored. A hint without lambda_max (an older one) still gives P*.
 */
START_TEST(hint_lambda_max)
{
    char dir[] = "/tmp/ecopt-hint-XXXXXX", a[128], b[128], spec[160], hint[160];
    char text[400], path[512], cmd[1400];
    json_t *first, *pb;
    double lmax, v;
    json_int_t steps, n;
    int cached;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(a, sizeof a, "%s/a.svm", dir);
    snprintf(b, sizeof b, "%s/b.svm", dir);
    snprintf(spec, sizeof spec, "%s/job.json", dir);
    snprintf(hint, sizeof hint, "%s/hint.json", dir);
    tu_data_path("heart_scale", path, sizeof path);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && cp '%s' '%s'", path, a, path, b);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(text, sizeof text,
             "{\"dataset\": \"%s\", \"workers\": 2, \"lambda2_rel\": 1e-3,"
             " \"max_rounds\": 5}", a);
    ck_assert_ptr_nonnull(f = fopen(spec, "w"));
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);

    first = run_problem(spec, NULL);
    lmax = record_lmax(first, &cached, &steps);
    ck_assert_int_eq(cached, 0);
    ck_assert(lmax > 0 && steps >= 1);

    write_hint(hint, a, lmax, steps, NULL);
    pb = run_problem(spec, hint);
    v = record_lmax(pb, &cached, &n);
    ck_assert_int_eq(cached, 1);
    ck_assert(memcmp(&v, &lmax, sizeof v) == 0);
    ck_assert_int_eq(n, steps);
    ck_assert(json_equal(json_object_get(pb, "L_f"), json_object_get(first, "L_f")));
    ck_assert(json_equal(json_object_get(pb, "lambda2"),
                         json_object_get(first, "lambda2")));
    ck_assert(json_equal(json_object_get(pb, "P_star"), json_object_get(first, "P_star")));
    json_decref(pb);
    snprintf(text, sizeof text, "lambda_max = %.15g (cached, Lanczos, %d steps)", lmax,
             (int)steps);
    text_lmax(spec, hint, text);
    snprintf(text, sizeof text, "lambda_max = %.15g (computed, Lanczos, %d steps)", lmax,
             (int)steps);
    text_lmax(spec, NULL, text);

    write_hint(hint, a, 2 * lmax, 3, NULL);
    pb = run_problem(spec, hint);
    v = record_lmax(pb, &cached, &n);
    ck_assert_int_eq(cached, 1);
    ck_assert(v == 2 * lmax && n == 3);
    ck_assert(json_real_value(json_object_get(pb, "L_f")) >
              1.5 * json_real_value(json_object_get(first, "L_f")));
    json_decref(pb);

    write_hint(hint, b, 2 * lmax, 3, NULL);
    pb = run_problem(spec, hint);
    v = record_lmax(pb, &cached, &n);
    ck_assert_int_eq(cached, 0);
    ck_assert(memcmp(&v, &lmax, sizeof v) == 0);
    ck_assert(json_equal(json_object_get(pb, "L_f"), json_object_get(first, "L_f")));
    json_decref(pb);

    write_hint(hint, a, NAN, 0, first);
    pb = run_problem(spec, hint);
    v = record_lmax(pb, &cached, &n);
    ck_assert_int_eq(cached, 0);
    ck_assert(memcmp(&v, &lmax, sizeof v) == 0);
    ck_assert(json_is_true(json_object_get(json_object_get(pb, "solver"), "cached")));
    json_decref(pb);

    json_decref(first);
    unlink(a);
    unlink(b);
    unlink(spec);
    unlink(hint);
    rmdir(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coord");
    TCase *tc = tcase_create("options");

    tcase_add_test(tc, every_option_round_trips);
    tcase_add_test(tc, unset_options_are_left_out);
    tcase_add_test(tc, bad_values_are_refused);
    tcase_add_test(tc, launchers_are_the_backends);
    suite_add_tcase(s, tc);
    tc = tcase_create("report");
    tcase_add_test(tc, report_reader_reads_the_writer);
    tcase_add_test(tc, report_reader_is_strict_about_little);
    suite_add_tcase(s, tc);
    tc = tcase_create("hint");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hint_lambda_max);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
