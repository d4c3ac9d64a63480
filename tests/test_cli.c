/* `ecopt run` as a user runs it: the real binary, real files, exit codes
 * and what it prints. ECOPT_BIN names the binary (make check sets it). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

struct result {
    int status;
    char *out;
    char *err;
};

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n + 1);
    ck_assert_int_eq((long)fread(buf, 1, n, f), n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Runs "ecopt ARGS" through the shell, in the directory dir (NULL: this
 * one), capturing stdout and stderr. */
static struct result run_in(const char *dir, const char *args)
{
    const char *bin = getenv("ECOPT_BIN");
    char cmd[4096], out[] = "/tmp/ecopt-cli-out-XXXXXX", err[] = "/tmp/ecopt-cli-err-XXXXXX";
    char abs_bin[4096];
    struct result r;
    int st;

    close(mkstemp(out));
    close(mkstemp(err));
    /* Elsewhere, the default binary is build/ecopt of this directory. */
    ck_assert_ptr_nonnull(realpath(bin && *bin ? bin : "build/ecopt", abs_bin));
    ck_assert_int_lt(snprintf(cmd, sizeof cmd, "%s%s%s%s %s >%s 2>%s </dev/null",
                              dir ? "cd " : "", dir ? dir : "", dir ? " && " : "",
                              abs_bin, args, out, err),
                     (int)sizeof cmd);
    st = system(cmd);
    ck_assert(WIFEXITED(st));
    r.status = WEXITSTATUS(st);
    r.out = read_all(out);
    r.err = read_all(err);
    unlink(out);
    unlink(err);
    return r;
}

static struct result run(const char *args)
{
    return run_in(NULL, args);
}

static void result_free(struct result *r)
{
    free(r->out);
    free(r->err);
}

static const char *job_file(const char *json, char *buf, size_t len)
{
    return tu_write_temp_str(json, buf, len);
}

START_TEST(test_run_csv)
{
    double began = (double)time(NULL);
    struct result r = run("run examples/eclk-mushrooms.json --format csv");
    char *last, *p;
    double rel = 1, when;
    unsigned long long round;

    ck_assert_msg(r.status == 0, "status %d: %s", r.status, r.err);
    ck_assert_ptr_eq(strstr(r.out, "round,bits_up,bits_down,paper_bits,P,gap,rel_gap,grad_norm,seconds,wire_up,wire_down,time,grad_evals,restarts\n"),
                     r.out);
    /* the resolved problem and the summary go to stderr with --format */
    ck_assert_ptr_nonnull(strstr(r.err, "kappa = 1001"));
    ck_assert_ptr_nonnull(strstr(r.err, "stop       target"));
    /* the last row reaches the target */
    r.out[strlen(r.out) - 1] = '\0';
    last = strrchr(r.out, '\n') + 1;
    ck_assert_int_eq(sscanf(last, "%llu,", &round), 1);
    {
        int commas = 0;
        for (p = last; *p && commas < 6; p++)
            commas += *p == ',';
        rel = strtod(p, NULL);
    }
    ck_assert_uint_le(round, 5000);
    ck_assert_double_le(rel, 1e-9);
    /* time, the column before grad_evals and restarts: when the row was
     * measured, on the wall clock; no restart in this run */
    ck_assert_str_eq(strrchr(last, ','), ",0");
    *strrchr(last, ',') = '\0';
    *strrchr(last, ',') = '\0';
    when = strtod(strrchr(last, ',') + 1, NULL);
    ck_assert_double_ge(when, began - 1);
    ck_assert_double_le(when, (double)time(NULL) + 1);
    result_free(&r);
}
END_TEST

START_TEST(test_run_json)
{
    char path[64];
    const char *job = job_file(
        "{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"ec-sgd-diana\","
        " \"compressor\": {\"type\": \"randk\", \"k\": 2}, \"max_rounds\": 50}",
        path, sizeof path);
    char args[256];
    json_t *doc;
    json_error_t jerr;

    snprintf(args, sizeof args, "run %s --format json", job);
    struct result r = run(args);
    /* 50 rounds end above the target: the budget ran out (5) */
    ck_assert_msg(r.status == 5, "status %d: %s", r.status, r.err);
    doc = json_loads(r.out, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s", jerr.text);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "summary"), "stop")),
                     "max_rounds");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "summary"),
                                                       "outcome")),
                     "budget_exhausted");
    ck_assert_int_eq(json_array_size(json_object_get(doc, "rows")), 6);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "params"), "algorithm")),
                     "ec-sgd-diana");
    ck_assert(json_is_real(json_object_get(json_object_get(doc, "params"), "alpha")));
    json_decref(doc);
    unlink(job);
    result_free(&r);
}
END_TEST

/*
 * How a run ends decides its exit status (format/outcome.h): only the
 * target reached is 0; a budget that ran out with the gap at or below its
 * start's is 5; a gap that ended above its start's, whether a budget or
 * the divergence rule stopped it, or one that is not finite, is 3.
 */
START_TEST(test_run_outcomes)
{
    static const struct {
        const char *spec;
        int status;
        const char *outcome;
    } cases[] = {
        {"{\"dataset\": \"heart_scale\", \"workers\": 3, \"max_rounds\": 400,"
         " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"target\": 1e-2}", 0,
         "target_reached"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 3, \"max_rounds\": 5}", 5,
         "budget_exhausted"},
        /* the case: 1000 times gd's step, to the round budget */
        {"{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"gd\","
         " \"step_multiplier\": 1000, \"max_rounds\": 200}", 3, "worse_than_start"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"gd\","
         " \"step_multiplier\": 1e6, \"max_rounds\": 200}", 3, "worse_than_start"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"gd\","
         " \"step_multiplier\": 1e300, \"max_rounds\": 200}", 3, "non_finite"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], args[256], want[64];
        struct result r;

        job_file(cases[i].spec, path, sizeof path);
        snprintf(args, sizeof args, "run %s --backend inproc --format json", path);
        r = run(args);
        ck_assert_msg(r.status == cases[i].status, "case %zu: status %d: %s", i, r.status,
                      r.err);
        snprintf(want, sizeof want, "outcome    %s\n", cases[i].outcome);
        ck_assert_msg(strstr(r.err, want), "case %zu: no '%s' in %s", i, want, r.err);
        unlink(path);
        result_free(&r);
    }
}
END_TEST

/* Each bad input: the exit code and a phrase of the message. */
START_TEST(test_run_errors)
{
    static const struct {
        const char *spec;      /* job JSON, or NULL for a bare argument */
        const char *args;
        int status;
        const char *want;
    } cases[] = {
        {"{\"dataset\": \"mushrooms\", \"workers\": 0}", "", 2, "workers"},
        {"{\"dataset\": \"mushrooms\", \"bogus\": 1}", "", 2, "bogus"},
        {"{\"dataset\": \"no-such-set\"}", "", 2, "'no-such-set' not found"},
        {"{\"dataset\": \"mushrooms\", \"workers\": 9000}", "", 2,
         "workers: must be an integer in 1..4096 (got 9000)"},
        {"{\"dataset\": \"heart_scale\", \"workers\": 271}", "", 2,
         "workers must be in 1..270 (the dataset's rows; got 271)"},
        {"{\"dataset\": \"mushrooms\", \"compressor\": {\"type\": \"topk\", \"k\": 500}}", "", 2,
         "compressor.k must be in 1..112 (got 500)"},
        {"{\"dataset\": \"mushrooms\", \"algorithm\": \"gd\", \"lambda2_rel\": 1e-2,"
         " \"step_size\": 1000, \"max_rounds\": 500}", "", 3, "diverged at round"},
        {"{\"dataset\": \"mushrooms\"", "", 2, "invalid job spec"},
        {NULL, "run /no/such/job.json", 2, "No such file"},
        {NULL, "run", 2, "expected one job file"},
        {NULL, "run examples/eclk-mushrooms.json --format xml", 2,
         "--format must be text, csv or json"},
        {NULL, "frobnicate", 2, "unknown command 'frobnicate'"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], args[512];
        struct result r;

        if (cases[i].spec) {
            job_file(cases[i].spec, path, sizeof path);
            snprintf(args, sizeof args, "run %s --quiet%s", path, cases[i].args);
        } else {
            snprintf(args, sizeof args, "%s", cases[i].args);
        }
        r = run(args);
        ck_assert_msg(r.status == cases[i].status, "case %zu: status %d: %s", i,
                      r.status, r.err);
        /* errors go to stderr; a job's own ending is in its summary */
        ck_assert_msg(strstr(r.err, cases[i].want) || strstr(r.out, cases[i].want),
                      "case %zu: '%s'", i, r.err);
        if (cases[i].spec)
            unlink(path);
        result_free(&r);
    }
}
END_TEST

/*
 * A name that climbs out of the data directory is refused, even where it
 * would reach a file. Built in a directory of its own, so that the name is
 * a file from neither the data directory's side nor the working
 * directory's, wherever the checkout is (a checkout at /src has /etc/passwd
 * at ../etc/passwd): root/data is the data directory, root/outside the
 * file it would climb to, and ecopt runs in root/a/b.
 */
START_TEST(test_run_climb)
{
    char root[] = "/tmp/ecopt-climb-XXXXXX", path[128], spec[64], args[512];
    struct result r;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(path, sizeof path, "%s/data", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/a", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/a/b", root);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    snprintf(path, sizeof path, "%s/outside", root);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("1 1:1\n-1 2:1\n", f);
    fclose(f);
    job_file("{\"dataset\": \"../outside\", \"workers\": 1}", spec, sizeof spec);
    snprintf(args, sizeof args, "run %s --quiet --data-dir %s/data", spec, root);
    snprintf(path, sizeof path, "%s/a/b", root);
    r = run_in(path, args);
    ck_assert_msg(r.status == 2, "status %d: %s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "dataset: '../outside' is not a file"), "'%s'", r.err);
    result_free(&r);
    unlink(spec);
    snprintf(args, sizeof args, "rm -rf '%s'", root);
    ck_assert_int_eq(system(args), 0);
}
END_TEST

/* A dataset the reader rejects: the message names the file and line. */
START_TEST(test_run_bad_data)
{
    char data[64], job[256], spec[64], args[128];
    struct result r;

    tu_write_temp_str("1 1:1\n-1 2:1\n3 1:1\n", data, sizeof data);
    snprintf(job, sizeof job, "{\"dataset\": \"%s\", \"workers\": 1}", data);
    job_file(job, spec, sizeof spec);
    snprintf(args, sizeof args, "run %s", spec);
    r = run(args);
    ck_assert_int_eq(r.status, 2);
    {
        char want[128];
        snprintf(want, sizeof want, "%s:3:", data);
        ck_assert_msg(strstr(r.err, want), "'%s'", r.err);
    }
    unlink(data);
    unlink(spec);
    result_free(&r);
}
END_TEST

START_TEST(test_help_and_version)
{
    struct result r = run("run --help");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "usage: ecopt run JOB.json"));
    result_free(&r);
    r = run("--version");
    ck_assert_int_eq(r.status, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "ecopt "));
    result_free(&r);
}
END_TEST

/*
 * `--backend mpi` runs mpirun and waits for it. These put a stand-in
 * `mpirun` first in PATH (a shell script; ECOPT_MPI_BIN names any
 * program, since the stand-in runs none): its exit status comes back,
 * a signal reaches it, and one that outlives a signal by the grace time
 * (Open MPI's mpirun sometimes does) is killed. Each stand-in ends by
 * itself within a minute, so a failing test leaves nothing behind.
 */
struct fake_mpirun {
    char dir[64], spec[64], err[128];
    pid_t pid;                  /* ecopt run */
};

/* ignore_sigchld: ecopt starts with SIGCHLD ignored, as some parents leave it. */
static void fake_mpirun_start(struct fake_mpirun *f, const char *body, int ignore_sigchld)
{
    char path[128], text[1024];
    const char *bin = getenv("ECOPT_BIN");
    FILE *o;

    snprintf(f->dir, sizeof f->dir, "/tmp/ecopt-fake-mpirun-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(path, sizeof path, "%s/mpirun", f->dir);
    ck_assert_ptr_nonnull(o = fopen(path, "w"));
    /* body says %s for the directory, once or twice */
    ck_assert_int_lt(snprintf(text, sizeof text, body, f->dir, f->dir), (int)sizeof text);
    fprintf(o, "#!/bin/sh\n%s\n", text);
    fclose(o);
    chmod(path, 0755);
    job_file("{\"dataset\": \"a1a\", \"workers\": 2, \"max_rounds\": 10}", f->spec,
             sizeof f->spec);
    snprintf(f->err, sizeof f->err, "%s/stderr", f->dir);
    f->pid = fork();
    ck_assert_int_ge(f->pid, 0);
    if (f->pid == 0) {
        char newpath[4200];
        int fd = open(f->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        snprintf(newpath, sizeof newpath, "%s:%s", f->dir, getenv("PATH"));
        setenv("PATH", newpath, 1);
        setenv("ECOPT_MPI_BIN", "/bin/true", 1);
        dup2(fd, 2);
        if (ignore_sigchld)
            signal(SIGCHLD, SIG_IGN);
        execl(bin && *bin ? bin : "build/ecopt", "ecopt", "run", f->spec, "--backend",
              "mpi", (char *)NULL);
        _exit(127);
    }
}

/* Waits up to limit seconds for the stand-in to have started. */
static pid_t fake_mpirun_started(const struct fake_mpirun *f, double limit)
{
    char path[128];
    double t0 = tu_now();
    long pid = 0;
    FILE *i;

    snprintf(path, sizeof path, "%s/started", f->dir);
    while (!(i = fopen(path, "r")) || fscanf(i, "%ld", &pid) != 1) {
        if (i)
            fclose(i);
        i = NULL;
        ck_assert_msg(tu_now() - t0 < limit, "the stand-in mpirun did not start");
        usleep(10000);
    }
    fclose(i);
    return (pid_t)pid;
}

/* ecopt's exit status, waiting up to limit seconds; -1 if it is still there. */
static int wait_status(pid_t pid, double limit)
{
    double t0 = tu_now();
    int st;

    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (tu_now() - t0 >= limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void fake_mpirun_clean(struct fake_mpirun *f)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
    ck_assert_int_eq(system(cmd), 0);
    unlink(f->spec);
}

START_TEST(test_mpirun_status_passed)
{
    struct fake_mpirun f;

    for (int ignore = 0; ignore <= 1; ignore++) {
        fake_mpirun_start(&f, "echo $$ > %s/started; exit 5", ignore);
        ck_assert_int_eq(wait_status(f.pid, 20), 5);
        fake_mpirun_clean(&f);
    }
}
END_TEST

START_TEST(test_mpirun_signal_passed)
{
    struct fake_mpirun f;
    char path[128], *got;

    fake_mpirun_start(&f, "trap 'echo TERM > %s/got; exit 7' TERM\n"
                          "echo $$ > %s/started\n"
                          "i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done",
                      0);
    fake_mpirun_started(&f, 20);
    kill(f.pid, SIGTERM);
    ck_assert_int_eq(wait_status(f.pid, 5), 7);
    snprintf(path, sizeof path, "%s/got", f.dir);
    got = read_all(path);
    ck_assert_str_eq(got, "TERM\n");
    free(got);
    fake_mpirun_clean(&f);
}
END_TEST

START_TEST(test_mpirun_killed_after_grace)
{
    struct fake_mpirun f;
    pid_t fake;
    double t0;
    char *err;

    fake_mpirun_start(&f, "trap '' TERM INT HUP\n"
                          "echo $$ > %s/started\n"
                          "exec sleep 45",
                      0);
    fake = fake_mpirun_started(&f, 20);
    t0 = tu_now();
    kill(f.pid, SIGTERM);
    ck_assert_int_eq(wait_status(f.pid, 30), 3);
    ck_assert_msg(tu_now() - t0 > 9.0, "killed %.2f s after the signal, not after 10 s",
                  tu_now() - t0);
    ck_assert_int_eq(kill(fake, 0), -1);
    ck_assert_int_eq(errno, ESRCH);
    err = read_all(f.err);
    ck_assert_msg(strstr(err, "mpirun did not end 10 s after the signal; killed"), "%s",
                  err);
    free(err);
    fake_mpirun_clean(&f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("run");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_run_csv);
    tcase_add_test(tc, test_run_json);
    tcase_add_test(tc, test_run_outcomes);
    tcase_add_test(tc, test_run_errors);
    tcase_add_test(tc, test_run_climb);
    tcase_add_test(tc, test_run_bad_data);
    tcase_add_test(tc, test_help_and_version);
    tcase_add_test(tc, test_mpirun_status_passed);
    tcase_add_test(tc, test_mpirun_signal_passed);
    tcase_add_test(tc, test_mpirun_killed_after_grace);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
