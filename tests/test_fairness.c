/*
 * Fair share of the job slots between tokens, against the real `ecopt
 * serve`: no token's queue, however long, hides another token's job from
 * the scheduler; the slots go round between the tokens that have a job
 * waiting; and at the defaults one token's jobs leave a slot open to the
 * others.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>

#include "serverutil.h"
#include "testutil.h"

/* Four tenants (the usual three tokens and two more), as fair_start
 * writes them. */
#define CAROL "carol-secret-0123456789ab"
#define DAVE "dave-secret-0123456789abc"

/* Runs until cancelled, cheaply: one process, few rows. */
static const char endless_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
    " \"max_rounds\": 40000000, \"target\": 0, \"eval_every\": 1000000}";
static const char short_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
    " \"max_rounds\": 10}";

/* Starts the server with four tenants and an admin, and the options of
 * extra (NULL-terminated, or NULL). */
static void fair_start(struct server *s, const char *const *extra)
{
    char path[128];
    FILE *f;

    snprintf(s->dir, sizeof s->dir, "/tmp/ecopt-fair-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(s->dir));
    snprintf(s->db, sizeof s->db, "%s/ecopt.db", s->dir);
    snprintf(path, sizeof path, "%s/tokens", s->dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs(tokens, f);
    fputs("carol:" CAROL "\ndave:" DAVE "\n", f);
    ck_assert_int_eq(fclose(f), 0);
    server_start_with(s, 1, extra);
}

/* How many of token's jobs are in state (at most 500 looked at). */
static size_t jobs_in_state(const struct server *s, const char *token, const char *state)
{
    char path[128];
    struct reply r;
    json_t *doc;
    size_t n;

    snprintf(path, sizeof path, "/v1/jobs?state=%s&limit=500", state);
    r = req(s, "GET", path, token, NULL, NULL);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    doc = json_of(&r);
    n = json_array_size(json_object_get(doc, "jobs"));
    json_decref(doc);
    free(r.body);
    return n;
}

/*
 * Three tenants each keep one job running (their limit) and 90 more
 * queued: 270 queued jobs, older than anything the fourth tenant submits.
 * The fourth tenant's short job still starts on the free slot and ends
 * while the others' jobs are still queued.
 */
START_TEST(test_fair_long_queues_hide_nothing)
{
    static const char *const opts[] = {"--max-running", "4", "--max-running-per-token", "1",
                                       NULL};
    static const char *const busy[] = {ALICE, BOB, CAROL};
    struct server s;
    char id[32];
    json_t *doc;

    fair_start(&s, opts);
    for (int t = 0; t < 3; t++) {
        job_create(&s, busy[t], endless_job, id);
        json_decref(job_wait(&s, busy[t], id, "running", 60));
    }
    for (int i = 0; i < 90; i++)
        for (int t = 0; t < 3; t++)
            job_create(&s, busy[t], endless_job, id);
    job_create(&s, DAVE, short_job, id);
    doc = job_wait(&s, DAVE, id, "succeeded", 60);
    json_decref(doc);
    for (int t = 0; t < 3; t++) {
        ck_assert_uint_eq(jobs_in_state(&s, busy[t], "queued"), 90);
        ck_assert_uint_eq(jobs_in_state(&s, busy[t], "running"), 1);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * One slot, two tenants: alice's first job holds it while she queues two
 * more and bob queues three. When it is cancelled the slot goes round:
 * bob, alice, bob, alice, bob (oldest first would run alice's two before
 * any of bob's).
 */
START_TEST(test_fair_round_robin)
{
    static const char *const opts[] = {"--max-running", "1", NULL};
    struct server s;
    char first[32], id[5][32];
    const char *owner[5] = {BOB, ALICE, BOB, ALICE, BOB};
    long long started[5];

    fair_start(&s, opts);
    job_create(&s, ALICE, endless_job, first);
    json_decref(job_wait(&s, ALICE, first, "running", 60));
    job_create(&s, ALICE, short_job, id[1]);
    job_create(&s, ALICE, short_job, id[3]);
    job_create(&s, BOB, short_job, id[0]);
    job_create(&s, BOB, short_job, id[2]);
    job_create(&s, BOB, short_job, id[4]);
    job_cancel(&s, ALICE, first, 30);
    for (int i = 0; i < 5; i++) {
        json_t *doc = job_wait(&s, owner[i], id[i], "succeeded", 60);
        json_t *at = json_object_get(doc, "started_at");

        ck_assert_msg(json_is_integer(at), "job %s: no started_at", id[i]);
        started[i] = json_integer_value(at);
        json_decref(doc);
    }
    for (int i = 1; i < 5; i++)
        ck_assert_msg(started[i - 1] < started[i],
                      "job %d of the turns (%s's) started at %lld, not before "
                      "job %d (%s's) at %lld", i - 1, i % 2 ? "bob" : "alice",
                      started[i - 1], i, i % 2 ? "alice" : "bob", started[i]);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * At the defaults (two slots), alice's three long jobs take one slot and
 * wait for it; bob's job, submitted after them, runs on the other.
 */
START_TEST(test_fair_slot_left_at_defaults)
{
    struct server s;
    char a[3][32], b[32];

    fair_start(&s, NULL);
    for (int i = 0; i < 3; i++)
        job_create(&s, ALICE, endless_job, a[i]);
    json_decref(job_wait(&s, ALICE, a[0], "running", 60));
    job_create(&s, BOB, short_job, b);
    json_decref(job_wait(&s, BOB, b, "succeeded", 60));
    ck_assert_uint_eq(jobs_in_state(&s, ALICE, "running"), 1);
    ck_assert_uint_eq(jobs_in_state(&s, ALICE, "queued"), 2);
    server_stop(&s, SIGTERM);
}
END_TEST

/* A queued job's position and reason from GET /v1/jobs/{id}, checked
 * against the list's, which must agree. */
static void check_place(const struct server *s, const char *token, const char *id,
                        long long position, const char *reason)
{
    json_t *doc = job_get(s, token, id), *list, *jobs;
    struct reply r;
    size_t i;

    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "queued");
    ck_assert_msg(json_integer_value(json_object_get(doc, "position")) == position,
                  "job %s: position %lld, expected %lld", id,
                  (long long)json_integer_value(json_object_get(doc, "position")), position);
    ck_assert_msg(json_is_string(json_object_get(doc, "reason")) &&
                  strcmp(json_string_value(json_object_get(doc, "reason")), reason) == 0,
                  "job %s at %lld: reason %s, expected %s", id, position,
                  json_string_value(json_object_get(doc, "reason")), reason);
    json_decref(doc);
    r = req(s, "GET", "/v1/jobs?state=queued", token, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    list = json_of(&r);
    jobs = json_object_get(list, "jobs");
    for (i = 0; i < json_array_size(jobs); i++) {
        json_t *j = json_array_get(jobs, i);

        if (strcmp(json_string_value(json_object_get(j, "id")), id) != 0)
            continue;
        ck_assert_int_eq(json_integer_value(json_object_get(j, "position")), position);
        ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), reason);
        break;
    }
    ck_assert_msg(i < json_array_size(jobs), "job %s not in the queued list", id);
    json_decref(list);
    free(r.body);
}

/*
 * Why a job waits (docs/api.md, "Why a job waits"): two slots, held by
 * alice and carol, and two tokens waiting. While alice's job runs, bob's later job is next
 * (resources) and alice's two queued ones come after it (fair_share);
 * once bob's runs, alice's come first (resources, then priority), and a
 * second of bob's goes between them (fair_share for alice's last). A
 * running job has no position.
 */
START_TEST(test_fair_queue_reason)
{
    static const char *const opts[] = {"--max-running", "2", "--max-running-per-token", "2",
                                       NULL};
    struct server s;
    char a1[32], a2[32], a3[32], b1[32], b2[32], c1[32];
    json_t *doc;

    fair_start(&s, opts);
    job_create(&s, ALICE, endless_job, a1);
    json_decref(job_wait(&s, ALICE, a1, "running", 60));
    job_create(&s, CAROL, endless_job, c1);
    json_decref(job_wait(&s, CAROL, c1, "running", 60));
    job_create(&s, ALICE, endless_job, a2);
    job_create(&s, ALICE, endless_job, a3);
    job_create(&s, BOB, endless_job, b1);
    check_place(&s, BOB, b1, 1, "resources");
    check_place(&s, ALICE, a2, 2, "fair_share");
    check_place(&s, ALICE, a3, 3, "fair_share");
    doc = job_get(&s, ALICE, a1);
    ck_assert(json_is_null(json_object_get(doc, "position")));
    ck_assert(json_is_null(json_object_get(doc, "reason")));
    json_decref(doc);

    job_cancel(&s, ALICE, a1, 30);
    json_decref(job_wait(&s, BOB, b1, "running", 60));
    check_place(&s, ALICE, a2, 1, "resources");
    check_place(&s, ALICE, a3, 2, "priority");
    job_create(&s, BOB, endless_job, b2);
    check_place(&s, ALICE, a2, 1, "resources");
    check_place(&s, BOB, b2, 2, "priority");
    check_place(&s, ALICE, a3, 3, "fair_share");
    check_place(&s, ROOT, a3, 3, "fair_share");
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * A token at its running cap waits for one of its own jobs
 * (token_limit), even first in line; another token's job goes before it.
 */
START_TEST(test_fair_queue_token_limit)
{
    static const char *const opts[] = {"--max-running", "2", "--max-running-per-token", "1",
                                       NULL};
    struct server s;
    char a1[32], a2[32], c1[32], b1[32];

    fair_start(&s, opts);
    job_create(&s, ALICE, endless_job, a1);
    json_decref(job_wait(&s, ALICE, a1, "running", 60));
    job_create(&s, ALICE, endless_job, a2);
    check_place(&s, ALICE, a2, 1, "token_limit");
    job_create(&s, CAROL, endless_job, c1);
    json_decref(job_wait(&s, CAROL, c1, "running", 60));
    job_create(&s, BOB, endless_job, b1);
    check_place(&s, BOB, b1, 1, "resources");
    check_place(&s, ALICE, a2, 2, "token_limit");
    server_stop(&s, SIGTERM);
}
END_TEST

static Suite *fairness_suite(void)
{
    Suite *s = suite_create("fairness");
    TCase *tc = tcase_create("slots");

    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_fair_long_queues_hide_nothing);
    tcase_add_test(tc, test_fair_round_robin);
    tcase_add_test(tc, test_fair_slot_left_at_defaults);
    tcase_add_test(tc, test_fair_queue_reason);
    tcase_add_test(tc, test_fair_queue_token_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = tu_run(fairness_suite());
    curl_global_cleanup();
    return rc;
}
