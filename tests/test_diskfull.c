/*
 * A full disk. The server's database and state directory sit on a small
 * tmpfs this test mounts; a filler file takes the rest of it. Writes then
 * fail: submissions get 503 with Retry-After, reads keep working, a running
 * job's metric rows are held rather than dropped, and once the filler is
 * gone everything carries on: new jobs are taken, queued ones run, and the
 * running job's rows have no hole.
 *
 * Mounting needs CAP_SYS_ADMIN; where the test may not mount it says so
 * and passes without running.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "serverutil.h"
#include "testutil.h"

/* Tiny jobs, so that what was queued while the disk was full ends fast. */
static const char tiny_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 1, \"max_rounds\": 1,"
    " \"backend\": \"inproc\"}";
/* A job that reports every round until cancelled. */
static const char every_round_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 2, \"max_rounds\": 40000000,"
    " \"target\": 0, \"eval_every\": 1}";

static json_t *get_json(const struct server *s, const char *path)
{
    struct reply r = req(s, "GET", path, ALICE, NULL, NULL);
    json_t *doc;

    ck_assert_msg(r.status == 200, "GET %s: %ld %s", path, r.status, r.body);
    doc = json_of(&r);
    free(r.body);
    return doc;
}

static const char *state_of(json_t *job)
{
    return json_string_value(json_object_get(job, "state"));
}

static long long job_round(const struct server *s, const char *id)
{
    char path[96];
    json_t *doc, *round;
    long long v;

    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    doc = get_json(s, path);
    round = json_object_get(json_object_get(doc, "progress"), "round");
    v = json_is_integer(round) ? json_integer_value(round) : -1;
    json_decref(doc);
    return v;
}

/* Fills the filesystem of dir with one file; returns its path's length. */
static void fill(const char *path)
{
    static char chunk[1 << 16];
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    size_t step = sizeof chunk;

    ck_assert_int_ge(fd, 0);
    memset(chunk, 0x5a, sizeof chunk);
    for (;;) {
        ssize_t w = write(fd, chunk, step);
        if (w < 0 && errno == ENOSPC) {
            if (step == 1)
                break;
            step /= 2;      /* take the last crumbs too */
            continue;
        }
        ck_assert_msg(w > 0, "filling: %s", strerror(errno));
    }
    close(fd);
}

/* Cancels job id and waits until it says so. */
static void cancel_and_wait(struct server *s, const char *id)
{
    char path[160];
    struct reply r;
    json_t *doc;
    double t0;

    snprintf(path, sizeof path, "/v1/jobs/%s/cancel", id);
    r = req(s, "POST", path, ALICE, "{}", NULL);
    ck_assert_int_eq(r.status, 202);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    for (t0 = tu_now();; usleep(50000)) {
        doc = get_json(s, path);
        if (strcmp(state_of(doc), "cancelled") == 0)
            break;
        ck_assert_msg(tu_now() - t0 < 30, "not cancelled: %s", state_of(doc));
        json_decref(doc);
    }
    json_decref(doc);
}

/* The rows of job id, page by page: each round follows the one before,
   from round 0. Returns how many there are. */
static long long rows_without_hole(struct server *s, const char *id)
{
    char path[160];
    long long seen = 0;

    for (long long after = -1, last = -1;;) {
        json_t *doc, *rows;
        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&limit=10000", id,
                 after);
        doc = get_json(s, path);
        rows = json_object_get(doc, "rows");
        for (size_t i = 0; i < json_array_size(rows); i++) {
            long long round = json_integer_value(json_object_get(json_array_get(rows, i), "round"));
            ck_assert_msg(round == last + 1, "rows jump from round %lld to %lld", last, round);
            last = round;
            seen++;
        }
        after = json_integer_value(json_object_get(doc, "next_after"));
        int more = json_is_true(json_object_get(doc, "more"));
        json_decref(doc);
        if (!more)
            break;
    }
    return seen;
}

START_TEST(test_disk_full)
{
    struct server s;
    char tok[128], filler[128], path[160], long_id[32], id[32];
    struct reply r;
    json_t *doc;
    int created_full = 0, refused = 0;
    long long before, seen;
    FILE *f;
    double t0;

    snprintf(s.dir, sizeof s.dir, "/tmp/ecopt-full-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s.dir));
    if (mount("tmpfs", s.dir, "tmpfs", 0, "size=4m,mode=0700") != 0) {
        tu_skip("TMPFS", "test_diskfull: cannot mount a tmpfs (%s)", strerror(errno));
        rmdir(s.dir);
        return;
    }
    snprintf(s.db, sizeof s.db, "%s/ecopt.db", s.dir);
    snprintf(tok, sizeof tok, "%s/tokens", s.dir);
    ck_assert_ptr_nonnull(f = fopen(tok, "w"));
    fputs(tokens, f);
    fclose(f);
    setenv("ECOPT_MAX_QUEUED_PER_TOKEN", "1000000", 1);
    /* The write path itself, with no floor to refuse work first (the
       floor has its own test, in test_quota). */
    setenv("ECOPT_MIN_FREE_DISK", "0", 1);
    server_start(&s, 1);
    unsetenv("ECOPT_MAX_QUEUED_PER_TOKEN");
    unsetenv("ECOPT_MIN_FREE_DISK");

    /* A job that writes a row every round runs through it all. */
    r = req(&s, "POST", "/v1/jobs", ALICE, every_round_job, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    snprintf(long_id, sizeof long_id, "%s", json_string_value(json_object_get(doc, "id")));
    json_decref(doc);
    free(r.body);
    for (t0 = tu_now(); job_round(&s, long_id) < 100; usleep(50000))
        ck_assert_msg(tu_now() - t0 < 60, "the job did not start");

    snprintf(filler, sizeof filler, "%s/filler", s.dir);
    fill(filler);
    before = job_round(&s, long_id);

    /* Submissions: taken while the database has room in its files, then
     * refused with 503 and Retry-After, and nothing else. */
    for (int i = 0; i < 5000 && !refused; i++) {
        r = req(&s, "POST", "/v1/jobs", ALICE, tiny_job, NULL);
        ck_assert_msg(r.status == 201 || r.status == 503, "disk full: %ld %s",
                      r.status, r.body);
        if (r.status == 503) {
            refused = 1;
            ck_assert_str_eq(r.content_type, "application/problem+json");
            ck_assert_str_ne(r.retry_after, "");
            ck_assert_msg(strstr(r.body, "full"), "503 body: %s", r.body);
        } else {
            created_full++;
        }
        free(r.body);
    }
    ck_assert_msg(refused, "no 503 after %d submissions on a full disk", created_full);

    /* Reads still work, and the job still runs (its rows held). */
    doc = get_json(&s, "/v1/jobs?limit=5");
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=10", long_id);
    doc = get_json(&s, path);
    ck_assert_int_gt(json_array_size(json_object_get(doc, "rows")), 0);
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/jobs/%s", long_id);
    doc = get_json(&s, path);
    ck_assert_str_eq(state_of(doc), "running");
    json_decref(doc);

    /* Space returns: submissions are taken again, and the held rows land. */
    ck_assert_int_eq(unlink(filler), 0);
    for (t0 = tu_now();; usleep(100000)) {
        r = req(&s, "POST", "/v1/jobs", ALICE, tiny_job, NULL);
        if (r.status == 201) {
            doc = json_of(&r);
            snprintf(id, sizeof id, "%s", json_string_value(json_object_get(doc, "id")));
            json_decref(doc);
            free(r.body);
            break;
        }
        ck_assert_msg(r.status == 503, "after the disk emptied: %ld %s", r.status, r.body);
        free(r.body);
        ck_assert_msg(tu_now() - t0 < 30, "still 503 30 s after space returned");
    }
    for (t0 = tu_now(); job_round(&s, long_id) <= before + 100; usleep(50000))
        ck_assert_msg(tu_now() - t0 < 60, "the job's progress did not move on");

    cancel_and_wait(&s, long_id);

    /* Every round's row is there, through the full disk: no hole. */
    seen = rows_without_hole(&s, long_id);
    ck_assert_int_gt(seen, before + 100);

    /* What was taken while the disk was full runs to its end. */
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    for (t0 = tu_now();; usleep(100000)) {
        doc = get_json(&s, "/v1/jobs?state=queued&limit=1");
        size_t queued = json_array_size(json_object_get(doc, "jobs"));
        json_decref(doc);
        doc = get_json(&s, "/v1/jobs?state=running&limit=1");
        size_t running = json_array_size(json_object_get(doc, "jobs"));
        json_decref(doc);
        if (!queued && !running)
            break;
        ck_assert_msg(tu_now() - t0 < 120, "jobs still queued or running 120 s on");
    }
    doc = get_json(&s, "/v1/jobs?state=failed&limit=5");
    ck_assert_msg(json_array_size(json_object_get(doc, "jobs")) == 0,
                  "a job failed: %s",
                  json_string_value(json_object_get(
                      json_array_get(json_object_get(doc, "jobs"), 0), "reason")));
    json_decref(doc);
    fprintf(stderr, "disk full: %d jobs taken before the first 503; %lld rows, "
            "none missing\n", created_full, seen);

    server_stop(&s, SIGTERM);
    umount2(s.dir, MNT_DETACH);
    rmdir(s.dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diskfull");
    TCase *tc = tcase_create("server");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_disk_full);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
