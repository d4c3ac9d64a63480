/*
 * `ecopt serve` as users meet it: the real server on a free port with a
 * temporary database, driven with libcurl. Jobs through their whole life,
 * validation, auth and ownership, idempotency, cancel, metrics as JSON and
 * CSV, restart recovery after SIGKILL, and the route table against
 * api/openapi.yaml.
 */
#define _GNU_SOURCE   /* sched_setaffinity, CPU_COUNT */
#include <curl/curl.h>
#include <sched.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "api.h"
#include "serverutil.h"
#include "testutil.h"

static const char small_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"eclk\","
    " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 300}";
static const char long_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 3, \"max_rounds\": 40000000, \"target\": 0}";

START_TEST(test_job_lifecycle)
{
    struct server s;
    char id[32], path[128];
    struct reply r;
    json_t *doc, *rows;

    server_start(&s, 0);
    job_create(&s, ALICE, small_job, id);
    doc = job_wait(&s, ALICE, id, "succeeded", 30);
    ck_assert(json_is_object(json_object_get(doc, "problem")));
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(doc, "params"), "algorithm")),
                     "eclk");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "latest"), "round")), 300);
    json_decref(doc);

    /* metrics: pages chained by next_after cover every row once */
    long long after = -1, seen = 0, last_round = -1;
    for (int page = 0; page < 100; page++) {
        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&limit=7", id, after);
        r = req(&s, "GET", path, ALICE, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        doc = json_of(&r);
        rows = json_object_get(doc, "rows");
        for (size_t i = 0; i < json_array_size(rows); i++) {
            long long round = json_integer_value(json_object_get(json_array_get(rows, i), "round"));
            ck_assert_int_gt(round, last_round);
            last_round = round;
            seen++;
        }
        long long next = json_integer_value(json_object_get(doc, "next_after"));
        int more = json_is_true(json_object_get(doc, "more"));
        json_decref(doc);
        free(r.body);
        if (!more)
            break;
        ck_assert_int_gt(next, after);
        after = next;
    }
    ck_assert_int_eq(seen, 31);         /* rounds 0, 10, ..., 300 */
    {
        /* A page of an ended job is kept: the second read is a cache hit
         * with the same bytes. */
        struct reply r1, r2, m;
        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=20&limit=5", id);
        r1 = req(&s, "GET", path, ALICE, NULL, NULL);
        r2 = req(&s, "GET", path, ALICE, NULL, NULL);
        ck_assert_int_eq(r2.status, 200);
        ck_assert_str_eq(r1.body, r2.body);
        m = req(&s, "GET", "/metrics", ALICE, NULL, NULL);
        ck_assert_msg(strstr(m.body, "ecopt_metric_page_cache_total{result=\"hit\"} ") &&
                          !strstr(m.body, "ecopt_metric_page_cache_total{result=\"hit\"} 0\n"),
                      "%s", m.body);
        /* Another token still gets 404, cache or not. */
        free(r2.body);
        r2 = req(&s, "GET", path, BOB, NULL, NULL);
        ck_assert_int_eq(r2.status, 404);
        free(r1.body);
        free(r2.body);
        free(m.body);
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics", id);
    r = req(&s, "GET", path, ALICE, NULL, "Accept: text/csv");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/csv");
    ck_assert_ptr_eq(strstr(r.body, "round,bits_up,"), r.body);
    {
        /* JSON rows (stored documents) and CSV rows (formatted from the
         * numbers) say the same, to the last bit. */
        struct reply rj;
        const char *line = strchr(r.body, '\n');
        size_t n = 0;

        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1000", id);
        rj = req(&s, "GET", path, ALICE, NULL, NULL);
        doc = json_of(&rj);
        rows = json_object_get(doc, "rows");
        for (; line && line[1]; line = strchr(line + 1, '\n'), n++) {
            unsigned long long round;
            double v[10];
            json_t *row = json_array_get(rows, n);
            ck_assert_int_eq(sscanf(line + 1, "%llu,%lf,%lf,%lf,%lf,%lf,%lf,%lf", &round,
                                    &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]), 8);
            ck_assert_int_eq(json_integer_value(json_object_get(row, "round")), round);
            ck_assert(json_real_value(json_object_get(row, "bits_up")) == v[0]);
            ck_assert(json_real_value(json_object_get(row, "P")) == v[3]);
            ck_assert(json_real_value(json_object_get(row, "rel_gap")) == v[5]);
            ck_assert(json_real_value(json_object_get(row, "grad_norm")) == v[6]);
        }
        ck_assert_uint_eq(n, json_array_size(rows));
        ck_assert_uint_eq(n, 31);
        json_decref(doc);
        free(rj.body);
    }
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?max_points=5", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_le(json_array_size(json_object_get(doc, "rows")), 5);
    json_decref(doc);
    free(r.body);

    /* A job's document read twice (the second from the cache) is the
     * same, and still not another token's to read. */
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    {
        struct reply r1 = req(&s, "GET", path, ALICE, NULL, NULL);
        struct reply r2 = req(&s, "GET", path, ALICE, NULL, NULL);
        struct reply r3 = req(&s, "GET", path, BOB, NULL, NULL);
        ck_assert_int_eq(r2.status, 200);
        ck_assert_str_eq(r1.body, r2.body);
        ck_assert_int_eq(r3.status, 404);
        free(r1.body);
        free(r2.body);
        free(r3.body);
    }

    /* delete a finished job: then it is gone */
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    r = req(&s, "DELETE", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 204);
    free(r.body);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    free(r.body);
    /* and so are its pages, cached ones too */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=20&limit=5", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_cancel_running)
{
    struct server s;
    char id[32], path[128];
    struct reply r;
    json_t *doc;

    server_start(&s, 0);
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "running", 30));
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    r = req(&s, "POST", path, ALICE, "{}", NULL);
    ck_assert_int_eq(r.status, 202);
    free(r.body);
    doc = job_wait(&s, ALICE, id, "cancelled", 5);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(doc, "reason")), "cancelled"));
    json_decref(doc);
    r = req(&s, "POST", path, ALICE, "{}", NULL);
    ck_assert_int_eq(r.status, 409);
    free(r.body);
    /* a running job cannot be deleted */
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "running", 30));
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    r = req(&s, "DELETE", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 409);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * With two slots and one per token, alice's second job waits while bob's,
 * submitted after it, starts; when alice's first ends, her second runs.
 */
START_TEST(test_running_per_token)
{
    struct server s;
    char a1[32], a2[32], b1[32], path[128];
    struct reply r;
    json_t *doc;

    setenv("ECOPT_MAX_RUNNING", "2", 1);
    setenv("ECOPT_MAX_RUNNING_PER_TOKEN", "1", 1);
    server_start(&s, 0);
    unsetenv("ECOPT_MAX_RUNNING");
    unsetenv("ECOPT_MAX_RUNNING_PER_TOKEN");
    job_create(&s, ALICE, long_job, a1);
    json_decref(job_wait(&s, ALICE, a1, "running", 30));
    job_create(&s, ALICE, long_job, a2);
    job_create(&s, BOB, long_job, b1);
    json_decref(job_wait(&s, BOB, b1, "running", 30));
    snprintf(path, sizeof path, "/v1/jobs/%s", a2);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "queued");
    json_decref(doc);
    free(r.body);
    job_cancel(&s, ALICE, a1, 10);
    json_decref(job_wait(&s, ALICE, a2, "running", 30));
    job_cancel(&s, ALICE, a2, 10);
    job_cancel(&s, BOB, b1, 10);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * The queued-jobs limit counts every new job, with or without an
 * Idempotency-Key; only a replay of a known key gets through at the limit.
 */
START_TEST(test_queue_limit_with_keys)
{
    struct server s;
    char running[32], queued[32];
    struct reply r;
    json_t *doc;

    setenv("ECOPT_MAX_RUNNING", "1", 1);
    setenv("ECOPT_MAX_QUEUED_PER_TOKEN", "1", 1);
    server_start(&s, 0);
    unsetenv("ECOPT_MAX_RUNNING");
    unsetenv("ECOPT_MAX_QUEUED_PER_TOKEN");
    job_create(&s, ALICE, long_job, running);
    json_decref(job_wait(&s, ALICE, running, "running", 30));
    r = req(&s, "POST", "/v1/jobs", ALICE, long_job, "Idempotency-Key: q-1");
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    snprintf(queued, sizeof queued, "%s", json_string_value(json_object_get(doc, "id")));
    json_decref(doc);
    free(r.body);
    for (int i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "Idempotency-Key: fresh-%d", i);
        r = req(&s, "POST", "/v1/jobs", ALICE, long_job, key);
        ck_assert_msg(r.status == 429, "a new key at the limit: %ld %s", r.status, r.body);
        ck_assert_str_ne(r.retry_after, "");
        free(r.body);
    }
    r = req(&s, "POST", "/v1/jobs", ALICE, long_job, "Idempotency-Key: q-1");
    ck_assert_msg(r.status == 200, "a replay at the limit: %ld %s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "id")), queued);
    json_decref(doc);
    free(r.body);
    job_cancel(&s, ALICE, queued, 10);
    job_cancel(&s, ALICE, running, 10);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_validation_and_routes)
{
    static const struct {
        const char *method, *path, *body, *token;
        long status;
        const char *phrase;
    } cases[] = {
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\", \"workers\": 0, \"bogus\": 1}", ALICE,
         422, "\"field\":\"workers\""},
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\", \"workers\": 0, \"bogus\": 1}", ALICE,
         422, "\"field\":\"bogus\""},
        {"POST", "/v1/jobs", "{\"dataset\": \"../etc/passwd\"}", ALICE, 422, "\"field\":\"dataset\""},
        {"POST", "/v1/jobs", "{\"dataset\": \"no-such\"}", ALICE, 422, "no dataset 'no-such'"},
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\", \"workers\": 65}", ALICE, 422,
         "\"limit\":\"max_workers_per_job\""},
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\"", ALICE, 400, "line 1"},
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\", \"backend\": \"mpi\"}", ALICE, 422,
         "\"field\":\"backend\""},
        {"POST", "/v1/jobs", "{\"dataset\": \"mushrooms\", \"compressor\": "
         "{\"type\": \"topk\", \"k\": 113}}", ALICE, 422,
         "compressor.k: must be in 1..112 (the dimension d of mushrooms; got 113)"},
        {"GET", "/v1/jobs?limit=501", NULL, ALICE, 400, "limit must be an integer in 1..500"},
        {"GET", "/v1/jobs?state=odd", NULL, ALICE, 400, "state must be one of"},
        {"GET", "/v1/jobs?cursor=zzz", NULL, ALICE, 400, "cursor"},
        {"GET", "/v1/jobs", NULL, NULL, 401, "Authorization: Bearer"},
        {"GET", "/v1/jobs", NULL, "wrong-token-0123456789", 401, "not known"},
        {"GET", "/v1/nothing", NULL, ALICE, 404, "\"status\":404"},
        {"PUT", "/v1/jobs", NULL, ALICE, 405, "\"status\":405"},
        {"GET", "/livez", NULL, NULL, 200, "ok"},
        {"GET", "/readyz", NULL, NULL, 200, "ready"},
        {"GET", "/metrics", NULL, ALICE, 200, "ecopt_jobs{state=\"queued\"}"},
        {"GET", "/metrics", NULL, NULL, 401, "Authorization: Bearer"},
        {"GET", "/openapi.yaml", NULL, NULL, 200, "openapi: 3.0.3"},
    };
    struct server s;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reply r = req(&s, cases[i].method, cases[i].path, cases[i].token,
                             cases[i].body, NULL);
        ck_assert_msg(r.status == cases[i].status, "case %zu: %ld %s", i, r.status, r.body);
        ck_assert_msg(strstr(r.body, cases[i].phrase), "case %zu: %s", i, r.body);
        if (r.status >= 400)
            ck_assert_str_eq(r.content_type, "application/problem+json");
        if (r.status == 405)
            ck_assert_msg(strstr(r.allow, "GET") && strstr(r.allow, "POST"), "Allow: %s", r.allow);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_ownership_and_idempotency)
{
    struct server s;
    char id[32], path[128], id2[64];
    struct reply r;
    json_t *doc;

    server_start(&s, 0);
    job_create(&s, ALICE, small_job, id);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    r = req(&s, "GET", path, BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 404);            /* another user's job */
    free(r.body);
    r = req(&s, "GET", path, ROOT, NULL, NULL);
    ck_assert_int_eq(r.status, 200);            /* the admin sees all */
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", BOB, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 0);
    json_decref(doc);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    r = req(&s, "POST", path, BOB, "{}", NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);

    r = req(&s, "POST", "/v1/jobs", BOB, small_job, "Idempotency-Key: k-1");
    ck_assert_int_eq(r.status, 201);
    doc = json_of(&r);
    snprintf(id2, sizeof id2, "%s", json_string_value(json_object_get(doc, "id")));
    json_decref(doc);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", BOB, small_job, "Idempotency-Key: k-1");
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "id")), id2);
    json_decref(doc);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", BOB, long_job, "Idempotency-Key: k-1");
    ck_assert_int_eq(r.status, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "Idempotency-Key"));
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* SIGKILL the server while a job runs: after a restart the job is
 * interrupted with a reason and every row stored before the kill is there. */
START_TEST(test_restart_recovery)
{
    struct server s;
    char id[32], path[128];
    struct reply r;
    json_t *doc;
    long long rows_before = 0, rows_after = 0;

    server_start(&s, 0);
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "running", 30));
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=10000", id);
    for (double t0 = tu_now(); rows_before < 5 && tu_now() - t0 < 30;) {
        r = req(&s, "GET", path, ALICE, NULL, NULL);
        doc = json_of(&r);
        rows_before = (long long)json_array_size(json_object_get(doc, "rows"));
        json_decref(doc);
        free(r.body);
    }
    ck_assert_int_ge(rows_before, 5);
    server_stop(&s, SIGKILL);
    server_start(&s, 1);
    doc = job_wait(&s, ALICE, id, "interrupted", 5);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(doc, "reason")),
                                 "service stopped"));
    json_decref(doc);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    doc = json_of(&r);
    rows_after = (long long)json_array_size(json_object_get(doc, "rows"));
    json_decref(doc);
    free(r.body);
    ck_assert_int_ge(rows_after, rows_before);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Live progress: the event stream delivers the state, every row in order
 * and the final state, then ends; a long-poll waits for rows and gives
 * 204 when none come in time. */
START_TEST(test_events_and_longpoll)
{
    struct server s;
    char id[32], path[160];
    struct reply r;
    double t0;

    server_start(&s, 0);
    job_create(&s, ALICE, small_job, id);
    snprintf(path, sizeof path, "/v1/jobs/%s/events", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);      /* returns when it ends */
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/event-stream");
    ck_assert_ptr_eq(strstr(r.body, "event: state\n"), r.body);
    ck_assert_msg(strstr(r.body, "\"state\":\"succeeded\""), "%s", r.body);
    {
        long last = -1;
        int metrics = 0;
        for (char *p = r.body; (p = strstr(p, "event: metric\nid: ")); p++) {
            long round = strtol(p + strlen("event: metric\nid: "), NULL, 10);
            ck_assert_int_gt(round, last);
            last = round;
            metrics++;
        }
        ck_assert_int_eq(metrics, 31);
        ck_assert_int_eq(last, 300);
    }
    free(r.body);

    job_create(&s, ALICE, long_job, id);
    /* rows come: the wait ends as soon as the first batch is stored */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=-1&wait=20", id);
    t0 = tu_now();
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "\"round\":0"));
    ck_assert_double_lt(tu_now() - t0, 15.0);
    free(r.body);
    /* no rows that far ahead: 204 after the wait */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=999999999&wait=1", id);
    t0 = tu_now();
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 204);
    ck_assert_double_ge(tu_now() - t0, 0.9);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?wait=61", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    free(req(&s, "POST", path, ALICE, "{}", NULL).body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* An experiment: variants of one problem, compared in one table. */
START_TEST(test_experiment)
{
    static const char body[] =
        "{\"name\": \"cmp\", \"base\": {\"dataset\": \"heart_scale\", \"workers\": 3,"
        " \"lambda2_rel\": 1e-2, \"max_rounds\": 3000, \"target\": 1e-6,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}},"
        " \"variants\": [{\"algorithm\": \"eclk\"}, {\"algorithm\": \"ec-gd\"}]}";
    struct server s;
    struct reply r;
    json_t *doc = NULL, *table;
    char path[256];
    double t0;

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    ck_assert_ptr_eq(strstr(r.location, "/v1/experiments/x_"), r.location);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    for (t0 = tu_now();; usleep(100000)) {
        int done = 1;
        json_decref(doc);
        r = req(&s, "GET", path, ALICE, NULL, NULL);
        ck_assert_int_eq(r.status, 200);
        doc = json_of(&r);
        free(r.body);
        table = json_object_get(doc, "comparison");
        ck_assert_int_eq(json_array_size(table), 2);
        for (size_t i = 0; i < 2; i++) {
            const char *st = json_string_value(json_object_get(json_array_get(table, i), "state"));
            done &= strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
        }
        if (done)
            break;
        ck_assert_msg(tu_now() - t0 < 60, "experiment still running");
    }
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(table, 0), "algorithm")),
                     "eclk");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(table, 1), "algorithm")),
                     "ec-gd");
    /* ECLK reaches the target; the table gives its rounds and bits */
    json_t *eclk = json_array_get(table, 0);
    ck_assert(json_is_true(json_object_get(eclk, "reached")));
    ck_assert_int_gt(json_integer_value(json_object_get(eclk, "rounds_to_target")), 0);
    ck_assert(json_is_real(json_object_get(eclk, "bits_up_to_target")));
    json_decref(doc);
    r = req(&s, "GET", path, BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": "
            "[{\"algorithm\": \"eclk\"}, {\"dataset\": \"a9a\"}]}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "variants[1].dataset"));
    /* The sentence lists what a variant may set, from the same table. */
    ck_assert_msg(strstr(r.body, "a variant sets only how it runs: algorithm, compressor, ")
                  && strstr(r.body, ", econtrol_eta, name, labels, backend; the problem "
                                    "comes from base"), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": "
            "[{\"algorithm\": \"eclk\", \"econtrol_eta\": 0.5}]}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "variants[0].econtrol_eta"), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": "
            "[{\"compressor\": {\"type\": \"topk\", \"k\": 99}}]}", NULL);
    ck_assert_int_eq(r.status, 422);     /* k is checked against d at submit */
    ck_assert_msg(strstr(r.body, "variants[0].compressor.k: must be in 1..13 "
                                 "(the dimension d of heart_scale; got 99)"), "%s", r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* GETs the experiment at path until none of its jobs is queued or running;
 * its document. */
static json_t *experiment_wait(const struct server *s, const char *path, double secs)
{
    json_t *doc = NULL;
    double t0 = tu_now();

    for (;; usleep(100000)) {
        struct reply r = req(s, "GET", path, ALICE, NULL, NULL);
        json_t *table;
        int done = 1;

        ck_assert_int_eq(r.status, 200);
        json_decref(doc);
        doc = json_of(&r);
        free(r.body);
        table = json_object_get(doc, "comparison");
        for (size_t i = 0; i < json_array_size(table); i++) {
            const char *st =
                json_string_value(json_object_get(json_array_get(table, i), "state"));
            done &= strcmp(st, "queued") != 0 && strcmp(st, "running") != 0;
        }
        if (done)
            return doc;
        ck_assert_msg(tu_now() - t0 < secs, "experiment still running");
    }
}

/* A tuned experiment: every variant at every multiplier of the grid, and
 * per variant its default run beside its best, which the test finds again
 * from the comparison table itself. */
START_TEST(test_experiment_tuned)
{
    static const char body[] =
        "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3,"
        " \"lambda2_rel\": 1e-2, \"max_rounds\": 3000, \"target\": 1e-6,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}},"
        " \"variants\": [{\"algorithm\": \"eclk\", \"name\": \"acc\"},"
        " {\"algorithm\": \"ec-gd-diana\"}],"
        " \"tune\": {\"step_multiplier\": [0.5, 2, 1]}}";
    /* Here the largest multiplier is the fastest: in the middle of the
     * grid, neither the first nor the last run is the best. */
    static const double grid[3] = {0.5, 2, 1};
    struct server s;
    struct reply r;
    json_t *doc, *table, *tuned;
    char path[256];

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    doc = json_of(&r);
    free(r.body);
    /* 2 variants x 3 multipliers, 1 among them: 6 jobs, variant-major */
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 6);
    json_decref(doc);
    doc = experiment_wait(&s, path, 100);
    table = json_object_get(doc, "comparison");
    tuned = json_object_get(doc, "tuned");
    ck_assert_int_eq(json_array_size(table), 6);
    ck_assert_int_eq(json_array_size(tuned), 2);
    for (size_t v = 0; v < 2; v++) {
        json_t *t = json_array_get(tuned, v), *def = json_object_get(t, "default");
        json_t *best = json_object_get(t, "best");
        long long want_rounds = -1;
        double want_bits = 0, want_m = 0;
        const char *want_job = NULL;

        ck_assert_int_eq(json_integer_value(json_object_get(t, "runs")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(t, "finished")), 3);
        ck_assert_str_eq(json_string_value(json_object_get(t, "algorithm")),
                         v ? "ec-gd-diana" : "eclk");
        for (size_t k = 0; k < 3; k++) {
            json_t *row = json_array_get(table, 3 * v + k);
            long long rounds;
            double bits;

            ck_assert_double_eq(json_number_value(json_object_get(row, "step_multiplier")),
                                grid[k]);
            if (!json_is_true(json_object_get(row, "reached")))
                continue;
            rounds = json_integer_value(json_object_get(row, "rounds_to_target"));
            bits = json_number_value(json_object_get(row, "bits_up_to_target"));
            if (want_rounds < 0 || rounds < want_rounds ||
                (rounds == want_rounds && bits < want_bits)) {
                want_rounds = rounds;
                want_bits = bits;
                want_m = grid[k];
                want_job = json_string_value(json_object_get(row, "job"));
            }
        }
        ck_assert_double_eq(json_number_value(json_object_get(def, "step_multiplier")), 1);
        ck_assert_str_eq(json_string_value(json_object_get(def, "job")),
                         json_string_value(json_object_get(json_array_get(table, 3 * v + 2),
                                                           "job")));
        /* ECLK reaches the target here; the best is the fewest rounds */
        ck_assert_msg(want_job, "variant %zu: no run reached the target", v);
        ck_assert_double_eq(want_m, 2);     /* the middle of the grid */
        ck_assert(json_is_true(json_object_get(t, "reached")));
        ck_assert_str_eq(json_string_value(json_object_get(best, "job")), want_job);
        ck_assert_double_eq(json_number_value(json_object_get(best, "step_multiplier")),
                            want_m);
        ck_assert_int_eq(json_integer_value(json_object_get(best, "rounds_to_target")),
                         want_rounds);
        ck_assert(json_is_real(json_object_get(best, "seconds_to_target")));
        /* 2 is the largest multiplier: the grid's edge, said so */
        ck_assert_msg(strstr(json_string_value(json_array_get(json_object_get(t, "warnings"),
                                                              json_array_size(json_object_get(
                                                                  t, "warnings")) - 1)),
                             "is the largest of the grid"), "variant %zu", v);
    }
    /* the multiplier is in the job's name: the plot's legend */
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(json_object_get(doc, "jobs"), 1),
                                         "spec"), "name")), "acc x2");
    json_decref(doc);

    /* A grid without 1 gets the default run added; a variant none of whose
     * runs reaches the target says so. */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 30,"
            " \"target\": 1e-9, \"algorithm\": \"gd\", \"lambda2_rel\": 1e-3},"
            " \"variants\": [{}], \"tune\": {\"step_multiplier\": [0.001]}}", NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    doc = experiment_wait(&s, path, 60);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "comparison")), 2);
    /* an unnamed variant's runs are named after what they run */
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(json_object_get(doc, "jobs"), 0),
                                         "spec"), "name")), "gd x0.001");
    {
        json_t *t = json_array_get(json_object_get(doc, "tuned"), 0);

        ck_assert(json_is_false(json_object_get(t, "reached")));
        ck_assert(json_is_null(json_object_get(t, "best")));
        ck_assert_double_eq(json_number_value(json_object_get(
                                json_object_get(t, "default"), "step_multiplier")), 1);
        ck_assert_str_eq(json_string_value(json_object_get(t, "detail")),
                         "none of its 2 runs reached the target");
    }
    json_decref(doc);
    /* An experiment without tune has none */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"max_rounds\": 10},"
            " \"variants\": [{}]}", NULL);
    ck_assert_int_eq(r.status, 201);
    doc = json_of(&r);
    ck_assert(json_is_null(json_object_get(doc, "tuned")));
    json_decref(doc);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The p-quantile of the n sorted values, linear between order statistics:
   the test's own, to check the server's. */
static double test_quantile(const double *v, size_t n, double p)
{
    double h = (double)(n - 1) * p;
    size_t lo = (size_t)h;

    return lo + 1 >= n ? v[n - 1] : v[lo] + (h - (double)lo) * (v[lo + 1] - v[lo]);
}

static int test_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Seeds: every multiplier of a tuned grid runs at each seed, the groups
 * give the median and spread the test computes again from the rows, the
 * best multiplier is the one of fewest median rounds, compare groups the
 * same jobs alike, and the plot draws one median with a band per group. */
START_TEST(test_experiment_seeds)
{
    static const char body[] =
        "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3, \"seed\": 4,"
        " \"lambda2_rel\": 1e-2, \"max_rounds\": 3000, \"target\": 1e-4,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}},"
        " \"variants\": [{\"algorithm\": \"eclk\", \"name\": \"acc\"}],"
        " \"tune\": {\"step_multiplier\": [1, 2]}, \"seeds\": 3}";
    struct server s;
    struct reply r;
    json_t *doc, *table, *groups, *t, *best;
    char path[256], ids[512];
    double med[2], q[3];

    server_start(&s, 0);
    /* oracle full: every job takes its whole shard (batch "full"), and the
     * table counts gradient evaluations: 90 rows a shard, at x and w, and
     * at y on every coin (p = 1), the init's 90 before */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3,"
            " \"max_rounds\": 20, \"eval_every\": 20, \"p\": 1, \"target\": 0.9},"
            " \"variants\": [{\"algorithm\": \"lkatyusha\"}, {\"algorithm\": \"ec-gd\","
            " \"compressor\": {\"type\": \"topk\", \"k\": 3}}], \"oracle\": \"full\"}", NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    doc = experiment_wait(&s, path, 100);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "oracle")), "full");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(
                         json_array_get(json_object_get(doc, "jobs"), 0), "spec"), "batch")),
                     "full");
    table = json_object_get(doc, "comparison");
    {
        json_t *row = json_array_get(table, 0);

        ck_assert(json_is_true(json_object_get(row, "reached")));
        ck_assert_double_eq(json_number_value(json_object_get(row, "grad_evals_to_target")),
                            90 + 3 * 90 * json_integer_value(json_object_get(
                                                row, "rounds_to_target")));
    }
    json_decref(doc);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    doc = experiment_wait(&s, path, 200);
    table = json_object_get(doc, "comparison");
    groups = json_object_get(doc, "groups");
    ck_assert_int_eq(json_array_size(table), 6);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "seeds")), 3);
    ck_assert_int_eq(json_array_size(groups), 2);
    /* multiplier-major, then the seeds 4, 5, 6, named after both */
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(
                         json_array_get(json_object_get(doc, "jobs"), 4), "spec"), "name")),
                     "acc x2 s=5");
    /* its label has the seed, its variant neither seed nor multiplier */
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(table, 4), "label")),
                     "eclk, topk k=2 (acc) x2 s=5");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(table, 4), "variant")),
                     "eclk, topk k=2 (acc)");
    for (size_t g = 0; g < 2; g++) {
        json_t *grp = json_array_get(groups, g), *rounds;
        double v[3];

        ck_assert_int_eq(json_integer_value(json_object_get(grp, "runs")), 3);
        ck_assert_int_eq(json_integer_value(json_object_get(grp, "reached")), 3);
        for (size_t k = 0; k < 3; k++) {
            json_t *row = json_array_get(table, 3 * g + k);

            ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(grp, "seeds"), k)),
                             (json_int_t)(4 + k));
            ck_assert_str_eq(json_string_value(json_array_get(json_object_get(grp, "jobs"), k)),
                             json_string_value(json_object_get(row, "job")));
            v[k] = (double)json_integer_value(json_object_get(row, "rounds_to_target"));
        }
        qsort(v, 3, sizeof *v, test_cmp);
        rounds = json_object_get(grp, "rounds_to_target");
        med[g] = v[1];
        ck_assert_double_eq(json_number_value(json_object_get(rounds, "median")), v[1]);
        ck_assert_double_eq(json_number_value(json_object_get(rounds, "min")), v[0]);
        ck_assert_double_eq(json_number_value(json_object_get(rounds, "max")), v[2]);
        ck_assert_double_eq_tol(json_number_value(json_object_get(rounds, "q1")),
                                test_quantile(v, 3, 0.25), 1e-9);
        ck_assert_double_eq_tol(json_number_value(json_object_get(rounds, "q3")),
                                test_quantile(v, 3, 0.75), 1e-9);
        ck_assert(json_is_object(json_object_get(grp, "bits_up_to_target")));
        ck_assert(json_is_object(json_object_get(grp, "seconds_to_target")));
        ck_assert(json_is_object(json_object_get(grp, "grad_evals_to_target")));
    }
    t = json_array_get(json_object_get(doc, "tuned"), 0);
    best = json_object_get(t, "best");
    ck_assert_int_eq(json_integer_value(json_object_get(t, "runs")), 6);
    ck_assert_double_eq(json_number_value(json_object_get(best, "step_multiplier")),
                        med[1] < med[0] ? 2 : 1);
    ck_assert_double_eq(json_number_value(json_object_get(json_object_get(
                            json_object_get(best, "seeds"), "rounds_to_target"), "median")),
                        med[1] < med[0] ? med[1] : med[0]);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(best, "seeds"),
                                                        "runs")), 3);
    /* compare: the three seeds of x2 are one group, the same spread */
    snprintf(ids, sizeof ids, "/v1/compare?jobs=%s,%s,%s",
             json_string_value(json_object_get(json_array_get(table, 3), "job")),
             json_string_value(json_object_get(json_array_get(table, 4), "job")),
             json_string_value(json_object_get(json_array_get(table, 5), "job")));
    json_decref(doc);
    r = req(&s, "GET", ids, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    free(r.body);
    groups = json_object_get(doc, "groups");
    ck_assert_int_eq(json_array_size(groups), 1);
    ck_assert_double_eq(json_number_value(json_object_get(json_object_get(
                            json_array_get(groups, 0), "rounds_to_target"), "median")),
                        med[1]);
    json_decref(doc);
    /* the plot: two medians, each with its band */
    snprintf(ids, sizeof ids, "%s/plot.svg", path);
    r = req(&s, "GET", ids, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    q[0] = 0;
    for (const char *p = r.body; (p = strstr(p, "class=\"band\"")); p++)
        q[0]++;
    ck_assert_double_eq(q[0], 2);
    ck_assert_msg(strstr(r.body, "(acc) x2: median of 3 seeds"), "%.2000s", r.body);
    /* one variant: both medians in its colour, the second dashed */
    {
        const char *g0 = strstr(r.body, "data-index=\"0\" stroke=\"");
        const char *g1 = strstr(r.body, "data-index=\"1\" stroke=\"");
        const char *dash, *end;

        ck_assert(g0 && g1 && !strstr(r.body, "data-index=\"2\""));
        ck_assert(strncmp(g0 + 23, g1 + 23, 7) == 0);
        dash = strstr(g1, "stroke-dasharray");
        end = strstr(g1, "</g>");
        ck_assert(dash && end && dash < end);
    }
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The excursion rule: EF21 on heart_scale at k = 1 reaches 1e-4 in 81
 * rounds at x1.2, whose gap first rose to 1.37 times its start, and in 83
 * at x1, whose gap never rose. With max_excursion 1.1 x1.2 is set aside
 * and said so, and x1, the smallest of the grid, is the best, with a
 * warning; by default (2) x1.2 is the best, the largest of the grid. */
START_TEST(test_experiment_excursion)
{
    static const char fmt[] =
        "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"ef21\","
        " \"lambda2_rel\": 1e-2, \"max_rounds\": 3000, \"target\": 1e-4, \"eval_every\": 1,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 1}}, \"variants\": [{}],"
        " \"tune\": {\"step_multiplier\": [1, 1.2]}%s}";
    struct server s;
    struct reply r;
    char body[1024], path[256];

    server_start(&s, 0);
    for (int strict = 1; strict >= 0; strict--) {
        json_t *doc, *t, *best, *excluded, *warnings;

        snprintf(body, sizeof body, fmt, strict ? ", \"max_excursion\": 1.1" : "");
        r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
        ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
        snprintf(path, sizeof path, "%s", r.location);
        free(r.body);
        doc = experiment_wait(&s, path, 100);
        t = json_array_get(json_object_get(doc, "tuned"), 0);
        best = json_object_get(t, "best");
        excluded = json_object_get(t, "excluded");
        warnings = json_object_get(t, "warnings");
        ck_assert_double_eq(json_number_value(json_object_get(t, "max_excursion")),
                            strict ? 1.1 : 2.0);
        ck_assert_uint_eq(json_array_size(warnings), strict ? 2 : 1);
        if (strict) {
            ck_assert_double_eq(json_number_value(json_object_get(best, "step_multiplier")), 1);
            ck_assert_double_le(json_number_value(json_object_get(best, "peak_rel_gap")), 1.1);
            ck_assert_double_eq(json_number_value(json_object_get(excluded, "step_multiplier")),
                                1.2);
            ck_assert_double_gt(json_number_value(json_object_get(excluded, "peak_rel_gap")),
                                1.1);
            ck_assert_int_lt(json_integer_value(json_object_get(excluded, "rounds_to_target")),
                             json_integer_value(json_object_get(best, "rounds_to_target")));
            ck_assert_msg(strstr(json_string_value(json_array_get(warnings, 0)),
                                 "multiplier 1.2 took fewer rounds"), "%s",
                          json_string_value(json_array_get(warnings, 0)));
            ck_assert_msg(strstr(json_string_value(json_array_get(warnings, 1)),
                                 "the best multiplier 1 is the smallest of the grid"), "%s",
                          json_string_value(json_array_get(warnings, 1)));
        } else {
            ck_assert_double_eq(json_number_value(json_object_get(best, "step_multiplier")),
                                1.2);
            ck_assert(json_is_null(excluded));
            ck_assert_msg(strstr(json_string_value(json_array_get(warnings, 0)),
                                 "the best multiplier 1.2 is the largest of the grid"), "%s",
                          json_string_value(json_array_get(warnings, 0)));
        }
        json_decref(doc);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/* Hostile seeds: each a 422 naming the field, and no job made. */
START_TEST(test_experiment_seeds_invalid)
{
    static const struct { const char *base, *seeds, *field, *detail; } cases[] = {
        {"", "0", "seeds", "a count in 1..16 or an array of 1..16 distinct seeds"},
        {"", "17", "seeds", "max_seeds = 16"},
        {"", "-1", "seeds", "max_seeds"},
        {"", "2.5", "seeds", "max_seeds"},
        {"", "\"3\"", "seeds", "max_seeds"},
        {"", "[]", "seeds", "max_seeds"},
        {"", "[1, 2, 1]", "seeds[2]", "given twice (also at [0])"},
        {"", "[1, \"2\"]", "seeds[1]", "must be an integer in 0..9007199254740992"},
        {"", "[-3]", "seeds[0]", "0..9007199254740992"},
        {"", "[9007199254740993]", "seeds[0]", "0..9007199254740992"},
        {", \"seed\": 3", "[1, 2]", "base.seed", "leave base.seed out"},
        {", \"seed\": 9007199254740992", "2", "base.seed", "0..9007199254740991"},
        {", \"seed\": \"x\"", "2", "base.seed", "must be an integer"},
        {"", "1, \"oracle\": \"exact\"", "oracle", "must be \"default\""},
        {"", "1, \"oracle\": 1", "oracle", "or \"full\""},
        {", \"batch\": 4", "1, \"oracle\": \"full\"", "base.batch", "leave batch out"},
        {"", "1, \"max_excursion\": 0.5", "max_excursion", "a finite number >= 1"},
        {"", "1, \"max_excursion\": \"2\"", "max_excursion", "a finite number >= 1"},
    };
    struct server s;
    struct reply r;
    char body[1024];

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *doc, *err;

        snprintf(body, sizeof body,
                 "{\"base\": {\"dataset\": \"heart_scale\"%s}, \"variants\": [{}],"
                 " \"seeds\": %s}", cases[i].base, cases[i].seeds);
        r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
        ck_assert_msg(r.status == 422, "%s: %ld %s", body, r.status, r.body);
        doc = json_of(&r);
        err = json_array_get(json_object_get(doc, "errors"), 0);
        ck_assert_str_eq(json_string_value(json_object_get(err, "field")), cases[i].field);
        ck_assert_msg(strstr(json_string_value(json_object_get(err, "detail")),
                             cases[i].detail), "%s: %s", body, r.body);
        json_decref(doc);
        free(r.body);
    }
    /* 32 variants x 9 seeds = 288 > 256 */
    {
        size_t o = (size_t)snprintf(body, sizeof body,
                                    "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": [");
        for (int i = 0; i < 32; i++)
            o += (size_t)snprintf(body + o, sizeof body - o, "%s{}", i ? ", " : "");
        snprintf(body + o, sizeof body - o, "], \"seeds\": 9}");
    }
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "288 jobs") && strstr(r.body, "max_experiment_jobs") &&
                  strstr(r.body, "\"seeds\""), "%s", r.body);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(strstr(r.body, "\"jobs\":[]"), "%.300s", r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * ECLK's rule, guard and end record through the service: a job whose plain
 * constants at 4 times their step make the guard restart once (tests
 * test_eclk.c, test_guard_restarts, runs the same job in the engine). Its
 * resolved parameters say what ran; the end record (delta_eff range,
 * inflation, the restarts and their rounds) is stored and shown in the
 * job, the list, the metric rows' restarts column, compare, an
 * experiment's table and its tuned runs. The fields of another algorithm
 * are a 422 naming them.
 */
START_TEST(test_eclk_end_record)
{
    static const char base[] =
        "\"dataset\": \"heart_scale\", \"workers\": 4, \"lambda2_rel\": 1e-3,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"max_rounds\": 3000,"
        " \"target\": 1e-6, \"eclk_rule\": \"plain\"";
    struct server s;
    struct reply r;
    char spec[512], id[32], path[256];
    json_t *job, *prm, *end, *page, *rows, *row;
    long long first;

    server_start(&s, 0);
    snprintf(spec, sizeof spec, "{%s, \"step_multiplier\": 4}", base);
    job_create(&s, ALICE, spec, id);
    job = job_wait(&s, ALICE, id, "succeeded", 120);
    prm = json_object_get(job, "params");
    ck_assert_str_eq(json_string_value(json_object_get(prm, "eclk_rule")), "plain");
    ck_assert(json_is_true(json_object_get(prm, "eclk_guard")));
    ck_assert_double_eq(json_number_value(json_object_get(prm, "eclk_guard_threshold")), 10);
    ck_assert_str_eq(json_string_value(json_object_get(prm, "step_source")), "rule");
    ck_assert_double_eq(json_number_value(json_object_get(prm, "inflation")), 1);
    end = json_object_get(job, "eclk");
    ck_assert_msg(json_is_object(end), "%s", json_dumps(job, JSON_COMPACT));
    ck_assert_int_eq(json_integer_value(json_object_get(end, "restarts")), 1);
    ck_assert_int_eq(json_array_size(json_object_get(end, "restart_rounds")), 1);
    first = json_integer_value(json_array_get(json_object_get(end, "restart_rounds"), 0));
    ck_assert_int_gt(first, 0);
    ck_assert_double_eq(json_number_value(json_object_get(end, "inflation")), 2);
    ck_assert(json_is_number(json_object_get(end, "delta_min")));
    ck_assert(json_is_number(json_object_get(end, "delta_max")));
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(job, "latest"),
                                                        "restarts")), 1);

    /* The rows mark the restart: 0 before its round, 1 after. */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1000", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    page = json_of(&r);
    free(r.body);
    rows = json_object_get(page, "rows");
    ck_assert_int_gt(json_array_size(rows), 10);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        row = json_array_get(rows, i);
        ck_assert_int_eq(json_integer_value(json_object_get(row, "restarts")),
                         json_integer_value(json_object_get(row, "round")) >= first);
    }
    json_decref(page);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=csv&limit=2", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, ",time,grad_evals,restarts\n"));
    free(r.body);

    /* compare shows it per job */
    snprintf(path, sizeof path, "/v1/compare?jobs=%s", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    page = json_of(&r);
    free(r.body);
    row = json_object_get(json_array_get(json_object_get(page, "comparison"), 0), "eclk");
    ck_assert_str_eq(json_string_value(json_object_get(row, "eclk_rule")), "plain");
    ck_assert_int_eq(json_integer_value(json_object_get(row, "restarts")), 1);
    ck_assert(json_equal(json_object_get(row, "restart_rounds"),
                         json_object_get(end, "restart_rounds")));
    json_decref(page);
    json_decref(job);

    /* an experiment's table and its tuned runs: x4 restarts, x1 does not */
    snprintf(spec, sizeof spec,
             "{\"base\": {%s}, \"variants\": [{\"algorithm\": \"eclk\"}],"
             " \"tune\": {\"step_multiplier\": [1, 4]}}", base);
    r = req(&s, "POST", "/v1/experiments", ALICE, spec, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    page = experiment_wait(&s, path, 120);
    rows = json_object_get(page, "comparison");
    ck_assert_int_eq(json_array_size(rows), 2);
    for (size_t i = 0; i < 2; i++) {
        row = json_object_get(json_array_get(rows, i), "eclk");
        ck_assert_str_eq(json_string_value(json_object_get(row, "eclk_rule")), "plain");
        ck_assert_int_eq(json_integer_value(json_object_get(row, "restarts")), (int)i);
    }
    row = json_array_get(json_object_get(page, "tuned"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(row, "default"), "eclk"),
                         "restarts")), 0);
    ck_assert(json_is_object(json_object_get(json_object_get(row, "best"), "eclk")));
    json_decref(page);

    /* another algorithm's job may not name them */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"ec-gd\","
            " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"eclk_guard\": false}",
            NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_ptr_nonnull(strstr(r.body, "eclk_guard"));
    ck_assert_ptr_nonnull(strstr(r.body, "applies to algorithm eclk only"));
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* EControl's eta is how a variant runs: each variant's job gets its own,
 * and a variant without it the default, half the compressor's delta. */
START_TEST(test_experiment_econtrol_eta)
{
    struct server s;
    struct reply r;
    char path[256];
    json_t *doc, *jobs;

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"max_rounds\": 20,"
            " \"algorithm\": \"econtrol\", \"compressor\": {\"type\": \"topk\", \"k\": 2}},"
            " \"variants\": [{\"econtrol_eta\": 0.125}, {\"econtrol_eta\": 0}, {}]}", NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    doc = experiment_wait(&s, path, 120);
    jobs = json_object_get(doc, "jobs");
    ck_assert_int_eq(json_array_size(jobs), 3);
    for (size_t j = 0; j < 3; j++) {
        json_t *prm = json_object_get(json_array_get(jobs, j), "params");
        double eta = json_number_value(json_object_get(prm, "econtrol_eta"));
        double want = (double[]){0.125, 0, 1.0 / 13}[j];    /* k/d = 2/13, halved */

        ck_assert_msg(fabs(eta - want) <= 1e-15, "job %zu: econtrol_eta %.17g, not %.17g", j,
                      eta, want);
    }
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * tune's default axis is the smoothness multiplier (docs/api.md, "Tuned
 * experiments"): each run's job gets it, the tuned runs name the axis,
 * and for L-Katyusha on heart_scale the best is above 1 and beats the
 * default run. An eclk variant may set its rule.
 */
START_TEST(test_experiment_tuned_smoothness)
{
    static const char body[] =
        "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 3,"
        " \"lambda2_rel\": 1e-3, \"max_rounds\": 3000, \"target\": 1e-6},"
        " \"variants\": [{\"algorithm\": \"lkatyusha\"},"
        " {\"algorithm\": \"eclk\", \"compressor\": {\"type\": \"topk\", \"k\": 2},"
        " \"eclk_rule\": \"nominal\"}],"
        " \"tune\": {\"grid\": [0.5, 2, 4]}}";
    struct server s;
    struct reply r;
    json_t *doc, *jobs, *tuned;
    char path[256];

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(path, sizeof path, "%s", r.location);
    free(r.body);
    doc = experiment_wait(&s, path, 120);
    jobs = json_object_get(doc, "jobs");
    ck_assert_int_eq(json_array_size(jobs), 8);
    for (size_t j = 0; j < 8; j++) {
        json_t *spec = json_object_get(json_array_get(jobs, j), "spec");
        json_t *prm = json_object_get(json_array_get(jobs, j), "params");
        double m = (double[]){0.5, 2, 4, 1}[j % 4];

        ck_assert_double_eq(json_number_value(json_object_get(spec, "smoothness_multiplier")),
                            m);
        ck_assert_double_eq(json_number_value(json_object_get(spec, "step_multiplier")), 1);
        ck_assert_double_eq(json_number_value(json_object_get(prm, "smoothness_multiplier")),
                            m);
        if (j >= 4)
            ck_assert_str_eq(json_string_value(json_object_get(prm, "eclk_rule")), "nominal");
    }
    tuned = json_object_get(doc, "tuned");
    for (size_t v = 0; v < 2; v++) {
        json_t *t = json_array_get(tuned, v), *best = json_object_get(t, "best");
        json_t *def = json_object_get(t, "default");

        ck_assert_str_eq(json_string_value(json_object_get(best, "axis")),
                         "smoothness_multiplier");
        ck_assert_double_eq(json_number_value(json_object_get(def, "multiplier")), 1);
        ck_assert_double_eq(json_number_value(json_object_get(def, "smoothness_multiplier")), 1);
        ck_assert_double_eq(json_number_value(json_object_get(best, "multiplier")),
                            json_number_value(json_object_get(best, "smoothness_multiplier")));
        if (v == 0) {
            ck_assert_double_gt(json_number_value(json_object_get(best, "multiplier")), 1);
            ck_assert_int_lt(json_integer_value(json_object_get(best, "rounds_to_target")),
                             json_integer_value(json_object_get(def, "rounds_to_target")));
        }
        printf("heart_scale %s: default %lld rounds, best x%g %lld rounds\n",
               json_string_value(json_object_get(t, "algorithm")),
               (long long)json_integer_value(json_object_get(def, "rounds_to_target")),
               json_number_value(json_object_get(best, "multiplier")),
               (long long)json_integer_value(json_object_get(best, "rounds_to_target")));
    }
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Hostile tune grids: each a 422 naming the field, and no job made. */
START_TEST(test_experiment_tune_invalid)
{
    static const struct { const char *tune, *field, *detail; } cases[] = {
        {"[1, 2]", "tune", "must be an object"},
        {"{\"step_multiplier\": 2}", "tune.step_multiplier", "1..16 distinct"},
        {"{\"step_multiplier\": []}", "tune.step_multiplier", "max_tune_values = 16"},
        {"{\"step_multiplier\": [1, -1]}", "tune.step_multiplier[1]", "above 0"},
        {"{\"step_multiplier\": [0]}", "tune.step_multiplier[0]", "above 0"},
        {"{\"step_multiplier\": [\"2\"]}", "tune.step_multiplier[0]", "finite number"},
        {"{\"step_multiplier\": [null]}", "tune.step_multiplier[0]", "finite number"},
        {"{\"step_multiplier\": [1, 2, 1.0]}", "tune.step_multiplier[2]", "given twice"},
        {"{\"step_multiplier\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,"
         " 17]}", "tune.step_multiplier", "max_tune_values"},
        {"{\"step_multiplier\": [1], \"p\": [0.1]}", "tune.p", "tune takes grid (and axis)"},
        {"{}", "tune", "must give one grid"},
        {"{\"grid\": [1], \"step_multiplier\": [2]}", "tune", "must give one grid"},
        {"{\"axis\": \"step_multiplier\"}", "tune", "must give one grid"},
        {"{\"grid\": [1, 2], \"axis\": \"p\"}", "tune.axis", "smoothness_multiplier (the default)"},
        {"{\"grid\": [1, 2], \"axis\": 1}", "tune.axis", "or step_multiplier"},
        {"{\"smoothness_multiplier\": [1], \"axis\": \"step_multiplier\"}", "tune.axis",
         "goes with grid"},
        {"{\"grid\": [0.5, 0]}", "tune.grid[1]", "above 0"},
        {"{\"smoothness_multiplier\": [2, 2]}", "tune.smoothness_multiplier[1]", "given twice"},
    };
    struct server s;
    struct reply r;
    char body[4096];
    size_t o;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *doc, *err;

        snprintf(body, sizeof body,
                 "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": [{}],"
                 " \"tune\": %s}", cases[i].tune);
        r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
        ck_assert_msg(r.status == 422, "%s: %ld %s", cases[i].tune, r.status, r.body);
        doc = json_of(&r);
        err = json_array_get(json_object_get(doc, "errors"), 0);
        ck_assert_str_eq(json_string_value(json_object_get(err, "field")), cases[i].field);
        ck_assert_msg(strstr(json_string_value(json_object_get(err, "detail")),
                             cases[i].detail), "%s: %s", cases[i].tune, r.body);
        json_decref(doc);
        free(r.body);
    }
    /* The step comes from the grid */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"step_multiplier\": 2},"
            " \"variants\": [{}], \"tune\": {\"step_multiplier\": [1, 2]}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "\"base.step_multiplier\""), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\", \"smoothness_multiplier\": 2},"
            " \"variants\": [{}], \"tune\": {\"grid\": [1, 2]}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "\"base.smoothness_multiplier\""), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": [{},"
            " {\"step_size\": 0.1}], \"tune\": {\"step_multiplier\": [1, 2]}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "\"variants[1].step_size\""), "%s", r.body);
    free(r.body);
    /* 32 variants x 9 runs (8 and the default) = 288 > 256, on the
       default axis, which the message names */
    o = (size_t)snprintf(body, sizeof body,
                         "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": [");
    for (int i = 0; i < 32; i++)
        o += (size_t)snprintf(body + o, sizeof body - o, "%s{}", i ? ", " : "");
    snprintf(body + o, sizeof body - o,
             "], \"tune\": {\"grid\": [0.25, 0.5, 2, 4, 8, 16, 32, 64]}}");
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "32 variants x 9 smoothness multipliers (the default x1 "
                                 "added) make 288 jobs") &&
                      strstr(r.body, "max_experiment_jobs"),
                  "%s", r.body);
    free(r.body);
    /* A number JSON cannot hold is refused before any of this */
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"base\": {\"dataset\": \"heart_scale\"}, \"variants\": [{}],"
            " \"tune\": {\"step_multiplier\": [1e999]}}", NULL);
    ck_assert_msg(r.status == 400, "%ld %s", r.status, r.body);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(strstr(r.body, "\"jobs\":[]"), "%.300s", r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* An experiment's mistakes come all in one answer, as a job's do: here
 * three (an unknown key, a variant's key it may not set, a base field out
 * of range) give three errors, each naming its field, and no job. */
START_TEST(test_experiment_errors_at_once)
{
    static const char *const fields[] = {"nmae", "variants[1].dataset", "base.workers"};
    struct server s;
    struct reply r;
    json_t *doc, *errors;

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE,
            "{\"nmae\": \"typo\", \"base\": {\"dataset\": \"heart_scale\", \"workers\": 0},"
            " \"variants\": [{\"algorithm\": \"eclk\"}, {\"dataset\": \"a9a\"}],"
            " \"tune\": {\"step_multiplier\": [0.5, 2]}}", NULL);
    ck_assert_msg(r.status == 422, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    errors = json_object_get(doc, "errors");
    ck_assert_msg(json_array_size(errors) == 3, "%s", r.body);
    for (size_t i = 0; i < 3; i++) {
        int found = 0;

        for (size_t k = 0; k < json_array_size(errors); k++)
            found |= strcmp(json_string_value(json_object_get(json_array_get(errors, k),
                                                              "field")), fields[i]) == 0;
        ck_assert_msg(found, "no error for %s: %s", fields[i], r.body);
    }
    ck_assert_msg(strstr(json_string_value(json_object_get(doc, "detail")),
                         "(and 2 more: see errors)"), "%s", r.body);
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(strstr(r.body, "\"jobs\":[]"), "%.300s", r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Wrong tokens: past 20 failures a minute the address's wrong tokens get
 * 429 with Retry-After; a good token from it is still taken. */
START_TEST(test_failed_auth_rate_limit)
{
    struct server s;
    struct reply r;

    server_start(&s, 0);
    for (int i = 0; i < 20; i++) {
        r = req(&s, "GET", "/v1/jobs", "guess-guess-guess-0123", NULL, NULL);
        ck_assert_int_eq(r.status, 401);
        free(r.body);
    }
    r = req(&s, "GET", "/v1/jobs", "guess-guess-guess-0123", NULL, NULL);
    ck_assert_int_eq(r.status, 429);
    ck_assert_ptr_nonnull(strstr(r.body, "at most 20 per 60 s"));
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    r = req(&s, "GET", "/livez", NULL, NULL, NULL);   /* no auth: unaffected */
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The top-level README's curl walk-through (its quick start's first sh
 * block after "In another terminal"), run verbatim but for the port (the
 * server here has auth on, so the test's server is started with it off). */
START_TEST(test_readme_walkthrough)
{
    struct server s;
    char cmd[1024], out[] = "/tmp/ecopt-walk-XXXXXX";
    int st;
    FILE *f;
    char *text;
    long n;

    setenv("ECOPT_AUTH", "off", 1);
    server_start(&s, 0);
    unsetenv("ECOPT_AUTH");
    close(mkstemp(out));
    snprintf(cmd, sizeof cmd,
             "awk '/^In another terminal/{f=1} f&&/^```sh/{g=1;next} g&&/^```/{exit} g' "
             "README.md | sed 's/localhost:8080/localhost:%u/g' | sh > %s 2>&1",
             s.port, out);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    f = fopen(out, "r");
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = calloc(1, (size_t)n + 1);
    ck_assert_int_eq((long)fread(text, 1, (size_t)n, f), n);
    fclose(f);
    unlink(out);
    ck_assert_msg(strstr(text, "{\"id\":\"j_"), "%s", text);
    ck_assert_msg(strstr(text, "\"algorithm\":\"eclk\""), "%s", text);
    ck_assert_msg(strstr(text, "round,bits_up,bits_down"), "%s", text);
    free(text);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Every route in the code is in api/openapi.yaml and every path and
 * method there is in the code. */
/* The HTTP threads the server's start line gives. */
static unsigned threads_said(const struct server *s)
{
    const char *p = strstr(s->said, " HTTP thread");
    unsigned n = 0;

    ck_assert_msg(p, "no thread count in: %s", s->said);
    while (p > s->said && p[-1] >= '0' && p[-1] <= '9')
        p--;
    ck_assert_int_eq(sscanf(p, "%u", &n), 1);
    return n;
}

/*
 * With no --threads the server runs one HTTP thread a CPU it may run on
 * (its affinity mask, inherited here from this test's process), at most 4,
 * and its start line says how many; --threads (or ECOPT_THREADS) is taken
 * as given. Each thread serves its own connections, so more of them than
 * CPUs only lengthen the tail (bench/bench_p99.sh).
 */
START_TEST(test_default_threads)
{
    static const char *const three[] = {"--threads", "3", NULL};
    cpu_set_t all, one;
    struct server s;
    int first = -1, n;

    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    n = CPU_COUNT(&all);
    server_start(&s, 0);
    ck_assert_uint_eq(threads_said(&s), n < 4 ? (unsigned)n : 4);
    server_stop(&s, SIGTERM);

    for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
        if (CPU_ISSET(c, &all))
            first = c;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    server_start(&s, 1);
    ck_assert_uint_eq(threads_said(&s), 1);
    ck_assert_msg(strstr(s.said, "1 HTTP thread)"), "%s", s.said);
    /* One thread still serves. */
    {
        struct reply r = req(&s, "GET", "/livez", NULL, NULL, NULL);

        ck_assert_int_eq(r.status, 200);
        free(r.body);
    }
    server_stop(&s, SIGTERM);

    server_start_with(&s, 1, three);
    ck_assert_uint_eq(threads_said(&s), 3);
    server_stop(&s, SIGTERM);
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
}
END_TEST

START_TEST(test_openapi_matches_routes)
{
    FILE *f = fopen("api/openapi.yaml", "r");
    char line[512], path[256] = "";
    int in_paths = 0, documented = 0;

    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        char method[16];
        if (strncmp(line, "paths:", 6) == 0) {
            in_paths = 1;
            continue;
        }
        if (in_paths && line[0] != ' ' && line[0] != '\n')
            break;
        if (in_paths && strncmp(line, "  /", 3) == 0 &&
            sscanf(line + 2, "%255[^:]:", path) == 1)
            continue;
        if (in_paths && sscanf(line, "    %15[a-z]:", method) == 1 &&
            (strcmp(method, "get") == 0 || strcmp(method, "post") == 0 ||
             strcmp(method, "delete") == 0 || strcmp(method, "put") == 0 ||
             strcmp(method, "patch") == 0)) {
            int found = 0;
            for (size_t i = 0; i < api_nroutes; i++)
                if (strcasecmp(api_routes[i].method, method) == 0 &&
                    strcmp(api_routes[i].pattern, path) == 0)
                    found = 1;
            ck_assert_msg(found, "%s %s is documented but not routed", method, path);
            documented++;
        }
    }
    fclose(f);
    ck_assert_int_eq(documented, (int)api_nroutes);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("serve");
    TCase *tc = tcase_create("server");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_openapi_matches_routes);
    tcase_add_test(tc, test_validation_and_routes);
    tcase_add_test(tc, test_job_lifecycle);
    tcase_add_test(tc, test_cancel_running);
    tcase_add_test(tc, test_running_per_token);
    tcase_add_test(tc, test_queue_limit_with_keys);
    tcase_add_test(tc, test_ownership_and_idempotency);
    tcase_add_test(tc, test_restart_recovery);
    tcase_add_test(tc, test_readme_walkthrough);
    tcase_add_test(tc, test_events_and_longpoll);
    tcase_add_test(tc, test_experiment);
    tcase_add_test(tc, test_experiment_tuned);
    tcase_add_test(tc, test_experiment_tune_invalid);
    tcase_add_test(tc, test_experiment_errors_at_once);
    tcase_add_test(tc, test_experiment_seeds);
    tcase_add_test(tc, test_experiment_seeds_invalid);
    tcase_add_test(tc, test_experiment_excursion);
    tcase_add_test(tc, test_experiment_tuned_smoothness);
    tcase_add_test(tc, test_experiment_econtrol_eta);
    tcase_add_test(tc, test_eclk_end_record);
    tcase_add_test(tc, test_failed_auth_rate_limit);
    tcase_add_test(tc, test_default_threads);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
