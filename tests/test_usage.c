/*
 * What a job used and when its rows were measured, through the real
 * server with real coordinator and worker processes: an ended job's usage
 * (CPU seconds, the largest and the summed peak resident sets) is there
 * and plausible, in the job and in the list; each metric row's time is
 * the wall clock of its measurement; a cancelled job has its usage, and a
 * coordinator killed without a final record still has what wait4 said.
 */
#include <dirent.h>
#include <signal.h>
#include <time.h>

#include "serverutil.h"
#include "testutil.h"

#define MB (1024.0 * 1024.0)

static double wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    ck_assert_msg(json_is_number(v), "%s is not a number", key);
    return json_number_value(v);
}

/* The job's usage, checked for what every ended job that ran has. */
static json_t *usage_of(json_t *job)
{
    json_t *u = json_object_get(job, "usage");

    ck_assert_msg(json_is_object(u), "usage: %s", json_dumps(job, JSON_COMPACT));
    ck_assert_double_gt(num(u, "cpu_seconds"), 0.0);
    ck_assert_double_gt(num(u, "max_rss_bytes"), 4 * MB);    /* a coordinator with data */
    ck_assert_double_lt(num(u, "max_rss_bytes"), 2048 * MB);
    return u;
}

START_TEST(test_ended_job_usage_and_row_times)
{
    static const char spec[] =
        "{\"dataset\": \"a9a\", \"workers\": 4, \"algorithm\": \"eclk\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 5}, \"max_rounds\": 3000,"
        " \"target\": 0, \"eval_every\": 10}";
    struct server s;
    struct reply r;
    char id[32], path[160];
    double began, ended, cpu, max_rss, sum_rss, base = 0, last = 0;
    json_t *job, *u, *page, *rows, *list;
    int found = 0;

    server_start(&s, 0);
    began = wall_now();
    job_create(&s, ALICE, spec, id);
    job = job_wait(&s, ALICE, id, "final", 120);
    ended = wall_now();
    ck_assert_str_eq(json_string_value(json_object_get(job, "state")), "succeeded");
    u = usage_of(job);
    cpu = num(u, "cpu_seconds");
    max_rss = num(u, "max_rss_bytes");
    sum_rss = num(u, "rss_sum_bytes");
    /* a9a loaded and 3000 rounds of 4 workers: some CPU, but no more than
     * five processes could burn in the time the job took. */
    ck_assert_double_gt(cpu, 0.05);
    ck_assert_double_le(cpu, 5 * (ended - began) + 0.5);
    /* The coordinator and four workers, each at most the largest. */
    ck_assert_double_gt(sum_rss, max_rss);
    ck_assert_double_le(sum_rss, 5 * max_rss);
    printf("a9a, 4 workers, 3000 rounds: %.2f CPU s in %.2f s, max RSS %.1f MB,"
           " sum of peak RSS %.1f MB\n",
           cpu, ended - began, max_rss / MB, sum_rss / MB);

    /* The list says the same. */
    r = req(&s, "GET", "/v1/jobs?limit=10", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    list = json_of(&r);
    free(r.body);
    for (size_t i = 0; i < json_array_size(json_object_get(list, "jobs")); i++) {
        json_t *j = json_array_get(json_object_get(list, "jobs"), i);
        if (strcmp(json_string_value(json_object_get(j, "id")), id) == 0) {
            ck_assert(json_equal(json_object_get(j, "usage"), u));
            found = 1;
        }
    }
    ck_assert_msg(found, "job %s not in the list", id);
    json_decref(list);

    /* Every row's time is the wall clock when it was measured: between the
     * submit and the end, never going back, and seconds after the loop's
     * start (time - seconds is the same instant for every row). */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1000", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    page = json_of(&r);
    free(r.body);
    rows = json_object_get(page, "rows");
    ck_assert_uint_eq(json_array_size(rows), 301);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *row = json_array_get(rows, i);
        double t = num(row, "time"), start = t - num(row, "seconds");

        ck_assert_double_ge(t, began - 1);
        ck_assert_double_le(t, ended + 1);
        ck_assert_double_ge(t, last);
        if (i == 0)
            base = start;
        ck_assert_msg(start > base - 0.05 && start < base + 0.05,
                      "row %zu: time - seconds %.6f against %.6f", i, start, base);
        last = t;
    }
    json_decref(page);
    ck_assert(num(json_object_get(job, "latest"), "time") == last);

    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=csv&limit=2", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, ",wire_down,time,grad_evals,restarts\n"));
    free(r.body);
    json_decref(job);
    server_stop(&s, SIGTERM);
}
END_TEST

/* A job that never stops on its own. */
static const char endless[] =
    "{\"dataset\": \"a9a\", \"workers\": 2, \"max_rounds\": 40000000, \"target\": 0,"
    " \"eval_every\": 100}";

/* Waits until the job has a row, so that its workers have run. */
static void wait_rows(const struct server *s, const char *id)
{
    double until = tu_now() + 60;

    for (;;) {
        json_t *job = job_get(s, ALICE, id);
        json_t *round = json_object_get(json_object_get(job, "progress"), "round");
        int ran = json_is_integer(round) && json_integer_value(round) >= 200;

        json_decref(job);
        if (ran)
            return;
        ck_assert_msg(tu_now() < until, "job %s has no rows after 60 s", id);
        usleep(50000);
    }
}

START_TEST(test_cancelled_job_usage)
{
    struct server s;
    char id[32];
    json_t *job, *u;

    server_start(&s, 0);
    job_create(&s, ALICE, endless, id);
    wait_rows(&s, id);
    job_cancel(&s, ALICE, id, 30);
    job = job_get(&s, ALICE, id);
    u = usage_of(job);
    /* It ended with a final record: the coordinator's sum is there. */
    ck_assert_double_gt(num(u, "rss_sum_bytes"), num(u, "max_rss_bytes"));
    json_decref(job);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The pid of the job's coordinator: the server's child whose command line
 * names the job's spec file. */
static pid_t coordinator_of(const struct server *s, const char *id)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    pid_t found = 0;

    ck_assert_ptr_nonnull(d);
    while (!found && (de = readdir(d))) {
        char path[300], buf[4096], stat[512], *p;
        long ppid = 0;
        size_t n;
        FILE *f;

        if (de->d_name[0] < '1' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        n = fread(stat, 1, sizeof stat - 1, f);
        fclose(f);
        stat[n] = '\0';
        if (!(p = strrchr(stat, ')')) || sscanf(p + 1, " %*c %ld", &ppid) != 1 ||
            ppid != s->pid)
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)
            buf[i] = buf[i] ? buf[i] : ' ';
        buf[n] = '\0';
        if (strstr(buf, id))
            found = (pid_t)atol(de->d_name);
    }
    closedir(d);
    return found;
}

START_TEST(test_killed_coordinator_usage)
{
    struct server s;
    char id[32];
    pid_t pid;
    json_t *job, *u;

    server_start(&s, 0);
    job_create(&s, ALICE, endless, id);
    wait_rows(&s, id);
    ck_assert_int_gt(pid = coordinator_of(&s, id), 0);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    job = job_wait(&s, ALICE, id, "final", 30);
    ck_assert_str_eq(json_string_value(json_object_get(job, "stop_reason")),
                     "coordinator_died");
    /* No final record: no sum; wait4 still gave the rest. */
    u = usage_of(job);
    ck_assert(json_is_null(json_object_get(u, "rss_sum_bytes")));
    json_decref(job);
    server_stop(&s, SIGTERM);
}
END_TEST

/* A job cancelled while queued never ran: no usage. */
START_TEST(test_queued_cancel_has_no_usage)
{
    const char *extra[] = {"--max-running", "1", NULL};
    struct server s;
    char busy[32], waiting[32];
    json_t *job;

    server_start_with(&s, 0, extra);
    job_create(&s, ALICE, endless, busy);
    job_create(&s, ALICE, endless, waiting);
    job_cancel(&s, ALICE, waiting, 30);
    job = job_get(&s, ALICE, waiting);
    ck_assert(json_is_null(json_object_get(job, "usage")));
    json_decref(job);
    job = job_get(&s, ALICE, busy);
    ck_assert(json_is_null(json_object_get(job, "usage")));    /* still running */
    json_decref(job);
    job_cancel(&s, ALICE, busy, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("usage");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_ended_job_usage_and_row_times);
    tcase_add_test(tc, test_cancelled_job_usage);
    tcase_add_test(tc, test_killed_coordinator_usage);
    tcase_add_test(tc, test_queued_cancel_has_no_usage);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
