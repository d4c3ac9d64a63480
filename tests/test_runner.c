/*
 * The service's coordinator runner: real `ecopt run` processes spawned in
 * their own group, their report records read, cancel reaching every
 * process, and hostile report channels failing cleanly.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "runner.h"
#include "testutil.h"

struct seen {
    int start, metrics, final;
    char status[32], reason[512];
    char types[64][16];
    int n;
};

static void on_record(void *ctx, json_t *rec)
{
    struct seen *s = ctx;
    const char *type = json_string_value(json_object_get(rec, "type"));

    if (s->n < 64)
        snprintf(s->types[s->n++], sizeof s->types[0], "%s", type ? type : "?");
    if (!type)
        return;
    if (strcmp(type, "start") == 0)
        s->start++;
    else if (strcmp(type, "metric") == 0)
        s->metrics++;
    else if (strcmp(type, "final") == 0) {
        s->final++;
        snprintf(s->status, sizeof s->status, "%s",
                 json_string_value(json_object_get(rec, "status")));
        snprintf(s->reason, sizeof s->reason, "%s",
                 json_string_value(json_object_get(rec, "reason")));
    }
}

/* Reads until the channel ends (0) or breaks (< 0), or until stop_after
 * metric records have arrived (then returns 2). */
static int pump(struct runner_job *j, struct seen *s, int stop_after,
                double timeout, char *err, size_t errlen)
{
    double until = tu_now() + timeout;

    while (tu_now() < until) {
        struct pollfd p = {runner_fd(j), POLLIN, 0};
        int r;

        poll(&p, 1, 100);
        r = runner_read(j, NULL, on_record, s, err, errlen);
        if (r <= 0)
            return r;
        if (stop_after && s->metrics >= stop_after)
            return 2;
    }
    ck_abort_msg("report channel still open after %g s", timeout);
    return -1;
}

static const char *ecopt(void)
{
    const char *b = getenv("ECOPT_BIN");
    return b && *b ? b : "build/ecopt";
}

static struct runner_job *spawn_spec(const char *json, char *spec, size_t len)
{
    struct runner_opts o = {0};
    struct runner_job *j;
    char err[256];

    tu_write_temp_str(json, spec, len);
    o.exe = ecopt();
    o.spec_path = spec;
    o.data_dir = getenv("ECOPT_DATA_DIR");
    ck_assert_msg(runner_spawn(&o, &j, err, sizeof err) == 0, "%s", err);
    return j;
}

/* No live process left in the group. Zombies count as gone: once their
 * parent died they wait for init to reap them, which is not ours to do. */
static int group_gone(pid_t pgid)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int alive = 0;

    while ((de = readdir(d))) {
        char path[300], buf[1024], *rp, state;
        int pgrp;
        FILE *f;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof buf, f) && (rp = strrchr(buf, ')')) &&
            sscanf(rp + 1, " %c %*d %d", &state, &pgrp) == 2 &&
            pgrp == pgid && state != 'Z')
            alive++;
        fclose(f);
    }
    closedir(d);
    return alive == 0;
}

START_TEST(test_job_records)
{
    char spec[64], err[256];
    struct seen s = {0};
    int st;
    struct runner_job *j = spawn_spec(
        "{\"dataset\": \"heart_scale\", \"workers\": 3, \"compressor\": "
        "{\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 100}", spec, sizeof spec);

    ck_assert_int_eq(pump(j, &s, 0, 30, err, sizeof err), 0);
    ck_assert_int_eq(runner_reap(j, 5, &st), 0);
    /* 100 rounds end above the target: the budget ran out, exit 5 */
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 5);
    ck_assert_int_eq(s.start, 1);
    ck_assert_int_eq(s.metrics, 11);        /* rounds 0, 10, ..., 100 */
    ck_assert_int_eq(s.final, 1);
    ck_assert_str_eq(s.types[0], "start");
    ck_assert_str_eq(s.types[s.n - 1], "final");
    ck_assert_str_eq(s.status, "succeeded");
    runner_free(j);
    unlink(spec);
}
END_TEST

START_TEST(test_cancel_reaches_group)
{
    char spec[64], err[256];
    struct seen s = {0};
    int st;
    double t0;
    struct runner_job *j = spawn_spec(
        "{\"dataset\": \"a9a\", \"workers\": 4, \"max_rounds\": 100000000,"
        " \"target\": 0, \"compressor\": {\"type\": \"topk\", \"k\": 1}}",
        spec, sizeof spec);
    pid_t pgid = runner_pid(j);

    ck_assert_int_eq(pump(j, &s, 2, 30, err, sizeof err), 2);
    t0 = tu_now();
    runner_cancel(j);
    ck_assert_int_eq(pump(j, &s, 0, 10, err, sizeof err), 0);
    ck_assert_int_eq(runner_reap(j, 5, &st), 0);      /* no SIGKILL needed */
    ck_assert_double_lt(tu_now() - t0, 2.0);
    ck_assert_str_eq(s.status, "cancelled");
    ck_assert_msg(strstr(s.reason, "cancelled by signal 15"), "%s", s.reason);
    ck_assert(group_gone(pgid));
    runner_free(j);
    unlink(spec);
}
END_TEST

START_TEST(test_bad_spec_final_record)
{
    char spec[64], err[256];
    struct seen s = {0};
    int st;
    struct runner_job *j = spawn_spec("{\"dataset\": \"a9a\", \"workers\": -3}",
                                      spec, sizeof spec);

    ck_assert_int_eq(pump(j, &s, 0, 30, err, sizeof err), 0);
    runner_reap(j, 5, &st);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    ck_assert_int_eq(s.start, 0);
    ck_assert_int_eq(s.final, 1);
    ck_assert_str_eq(s.status, "failed");
    ck_assert_msg(strstr(s.reason, "workers"), "%s", s.reason);
    runner_free(j);
    unlink(spec);
}
END_TEST

/* The coordinator killed outright: the channel just ends, and the group
 * (its workers included) is gone after reaping. */
START_TEST(test_coordinator_killed)
{
    char spec[64], err[256];
    struct seen s = {0};
    int st;
    struct runner_job *j = spawn_spec(
        "{\"dataset\": \"a9a\", \"workers\": 4, \"max_rounds\": 100000000,"
        " \"target\": 0}", spec, sizeof spec);
    pid_t pgid = runner_pid(j);

    ck_assert_int_eq(pump(j, &s, 1, 30, err, sizeof err), 2);
    kill(pgid, SIGKILL);
    ck_assert_int_eq(pump(j, &s, 0, 10, err, sizeof err), 0);
    runner_reap(j, 5, &st);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    ck_assert_int_eq(s.final, 0);
    {
        double t0 = tu_now();      /* the workers' parent-death signal */
        while (!group_gone(pgid))
            ck_assert_msg(tu_now() - t0 < 2.0, "workers outlived the coordinator");
    }
    runner_free(j);
    unlink(spec);
}
END_TEST

/* Hostile channels, through a shell standing in for the coordinator. */
START_TEST(test_hostile_channels)
{
    static const struct {
        const char *script;
        int want;              /* pump's result */
        int records;
        const char *phrase;
    } cases[] = {
        {"printf '{\"type\":\"start\"}\\nnot json\\n' >&3", -1, 1, "not a JSON object"},
        {"printf '[1,2]\\n' >&3", -1, 0, "not a JSON object"},
        {"head -c 1200000 /dev/zero | tr '\\\\0' a >&3", -1, 0, "longer than 1048576 bytes"},
        {"printf '{\"type\":\"a\"}\\n{\"type\":\"b\"}\\n{\"type\":\"c\"' >&3", 0, 2, NULL},
        {"printf '{\"type\":\"a\",\"type\":\"b\"}\\n' >&3", -1, 0, "not a JSON object"},
        {"exit 0", 0, 0, NULL},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"/bin/sh", "-c", (char *)cases[i].script, NULL};
        struct runner_opts o = {0};
        struct runner_job *j;
        struct seen s = {0};
        char err[256] = "";
        int st, r;

        o.argv = argv;
        ck_assert_int_eq(runner_spawn(&o, &j, err, sizeof err), 0);
        r = pump(j, &s, 0, 10, err, sizeof err);
        ck_assert_msg(r == cases[i].want, "case %zu: %d (%s)", i, r, err);
        ck_assert_int_eq(s.n, cases[i].records);
        if (cases[i].phrase)
            ck_assert_msg(strstr(err, cases[i].phrase), "case %zu: '%s'", i, err);
        runner_reap(j, 5, &st);
        runner_free(j);
    }
}
END_TEST

static int take_any(void *ctx, const char *line, size_t len)
{
    (void)line;
    (void)len;
    ++*(int *)ctx;
    return 1;
}

/*
 * The report pipe holds a megabyte, so the reader may come by only every
 * so often: a writer of 520000 bytes finishes and exits before anything
 * is read. With the default 64 KiB pipe it would block until killed.
 */
START_TEST(test_roomy_pipe)
{
    char *argv[] = {"/bin/sh", "-c", "yes '{\"type\":\"x\"}' | head -n 40000 >&3", NULL};
    struct runner_opts o = {0};
    struct runner_job *j;
    char err[256] = "";
    int st, lines = 0;
    FILE *f = fopen("/proc/sys/fs/pipe-max-size", "r");
    long max = 0;

    ck_assert(f && fscanf(f, "%ld", &max) == 1);
    fclose(f);
    if (max < (1 << 20) && geteuid() != 0) {
        tu_skip("ROOT", "test_runner: pipe-max-size %ld and not root: the pipe test "
                "is not run", max);
        return;
    }
    o.argv = argv;
    ck_assert_int_eq(runner_spawn(&o, &j, err, sizeof err), 0);
    ck_assert_int_eq(runner_pipe_size(j), 1 << 20);
    ck_assert_int_eq(runner_reap(j, 5, &st), 0);      /* exited, not killed */
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ck_assert_int_eq(runner_read(j, take_any, on_record, &lines, err, sizeof err), 0);
    ck_assert_int_eq(lines, 40000);
    ck_assert_int_eq(runner_got(j), 40000 * 13);
    /* 520000 bytes in 0.1 s fill half the pipe (524288) in 0.1008 s: the
     * next read may wait the 0.1 s; in 0.05 s they would fill it in
     * 0.0504 s, so the next read comes sooner. */
    ck_assert_double_eq_tol(runner_read_wait(j, 0.1, 0.1), 0.1, 1e-12);
    ck_assert_double_eq_tol(runner_read_wait(j, 0.05, 0.1), 0.05 * 524288 / 520000, 1e-12);
    ck_assert_double_eq_tol(runner_read_wait(j, 0, 0.1), 0.1, 1e-12);
    runner_free(j);
}
END_TEST

START_TEST(test_spawn_failure)
{
    char *argv[] = {"/no/such/program", NULL};
    struct runner_opts o = {0};
    struct runner_job *j;
    char err[256];

    o.argv = argv;
    ck_assert_int_lt(runner_spawn(&o, &j, err, sizeof err), 0);
    ck_assert_msg(strstr(err, "cannot start /no/such/program"), "%s", err);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("runner");
    TCase *tc = tcase_create("spawn");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_job_records);
    tcase_add_test(tc, test_cancel_reaches_group);
    tcase_add_test(tc, test_bad_spec_final_record);
    tcase_add_test(tc, test_coordinator_killed);
    tcase_add_test(tc, test_hostile_channels);
    tcase_add_test(tc, test_spawn_failure);
    tcase_add_test(tc, test_roomy_pipe);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
