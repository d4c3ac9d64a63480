/*
 * Metric ingestion of the real service: the scheduler stores a job's rows
 * in batches, one transaction each, bounded by count and by time
 * (docs/architecture.md, "Metric ingestion"). Rows a job reports seldom
 * are stored while it runs, long before a batch could fill; a server
 * killed with SIGKILL in the middle of a fast job leaves, after a restart,
 * an intact database, the job interrupted, its rows a gap-free prefix
 * from round 0 whose last row is the job's progress, and every row a
 * client had seen still there.
 */
#include <sqlite3.h>

#include "serverutil.h"


/* Reports every `every` rounds, in process, for far longer than a test. */
static void spec_of(char *buf, size_t len, unsigned every)
{
    snprintf(buf, len,
             "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ec-sgd\","
             " \"compressor\": {\"type\": \"topk\", \"k\": 5}, \"max_rounds\": 20000000,"
             " \"target\": 0, \"eval_every\": %u, \"lambda2_rel\": 1e-3,"
             " \"backend\": \"inproc\"}", every);
}

/* The rows of the job a client can read now (GET .../metrics). */
static size_t rows_seen(const struct server *s, const char *id)
{
    char path[128];
    struct reply r;
    json_t *doc;
    size_t n;

    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1000", id);
    r = req(s, "GET", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    doc = json_of(&r);
    n = json_array_size(json_object_get(doc, "rows"));
    json_decref(doc);
    free(r.body);
    return n;
}

/* The job's progress round (its last stored row's), -1 for none. */
static long long progress_round(json_t *job)
{
    json_t *round = json_object_get(json_object_get(job, "progress"), "round");

    return json_is_integer(round) ? (long long)json_integer_value(round) : -1;
}

/*
 * A job reporting a row every 100000 rounds (about one a second or less):
 * its rows are stored while it runs. A batch is stored when it is due by
 * time or holds MAX_BATCH (2048) rows, and the pipe is read every 0.25 s
 * or once it would be half full (512 KiB); in the two minutes allowed the
 * job writes far fewer rows and bytes than either, so only the time bound
 * can store these. (With FLUSH_SECONDS made huge this test fails; with
 * rows every 2000 rounds it did not, the pipe filling within a minute.)
 */
START_TEST(test_sparse_rows_stored_while_running)
{
    struct server s;
    char spec[512], id[32];
    size_t n = 0;

    server_start(&s, 0);
    spec_of(spec, sizeof spec, 100000);
    job_create(&s, ALICE, spec, id);
    for (double until = tu_now() + 120;; usleep(50000)) {
        json_t *job = job_get(&s, ALICE, id);
        const char *state = json_string_value(json_object_get(job, "state"));

        ck_assert_msg(!job_state_final(state), "job %s ended %s", id, state);
        n = rows_seen(&s, id);
        /* Still running after the rows were read: they came while it ran. */
        if (n >= 3) {
            json_decref(job);
            job = job_get(&s, ALICE, id);
            ck_assert_str_eq(json_string_value(json_object_get(job, "state")), "running");
            json_decref(job);
            break;
        }
        json_decref(job);
        ck_assert_msg(tu_now() < until, "job %s: %zu rows stored in 120 s while it ran", id,
                      n);
    }
    job_cancel(&s, ALICE, id, 60);
    server_stop(&s, SIGTERM);
}
END_TEST

/* What the database holds of the job: rows, first and last round, and the
   job's own round and state. */
struct stored {
    long long count, first, last, job_round;
    char state[32];
};

static struct stored stored_of(const char *db, const char *id)
{
    struct stored st = {0};
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;

    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT count(*), min(m.round), max(m.round),"
                                        " j.round, j.state FROM jobs j LEFT JOIN metrics m"
                                        " ON m.job_seq = j.seq WHERE j.id = ?1", -1, &q,
                                        NULL),
                     SQLITE_OK);
    sqlite3_bind_text(q, 1, id, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    st.count = sqlite3_column_int64(q, 0);
    st.first = sqlite3_column_int64(q, 1);
    st.last = sqlite3_column_int64(q, 2);
    st.job_round = sqlite3_column_type(q, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(q, 3);
    snprintf(st.state, sizeof st.state, "%s", (const char *)sqlite3_column_text(q, 4));
    sqlite3_finalize(q);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &q, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(q), SQLITE_ROW);
    ck_assert_msg(strcmp((const char *)sqlite3_column_text(q, 0), "ok") == 0,
                  "integrity_check of %s: %s", db, sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    sqlite3_close(h);
    return st;
}

/*
 * A job reporting every round (thousands of rows a second, so a batch is
 * always being filled): the server is killed with SIGKILL, then started
 * again on the same database.
 */
START_TEST(test_sigkill_mid_batch)
{
    struct server s;
    char spec[512], id[32];
    long long seen = -1;
    struct stored st;
    json_t *job;
    const char *state;

    server_start(&s, 0);
    spec_of(spec, sizeof spec, 1);
    job_create(&s, ALICE, spec, id);
    /* Well into the run: many batches stored, the next one filling. */
    for (double until = tu_now() + 120; seen < 5000; usleep(20000)) {
        job = job_get(&s, ALICE, id);
        seen = progress_round(job);
        state = json_string_value(json_object_get(job, "state"));
        ck_assert_msg(!job_state_final(state), "job %s ended %s", id, state);
        json_decref(job);
        ck_assert_msg(tu_now() < until, "job %s: at round %lld after 120 s", id, seen);
    }
    server_stop(&s, SIGKILL);

    st = stored_of(s.db, id);
    ck_assert_str_eq(st.state, "running");         /* nobody recorded an end */
    ck_assert_int_eq(st.first, 0);
    ck_assert_msg(st.count == st.last + 1, "rows %lld, last round %lld: a gap", st.count,
                  st.last);
    ck_assert_msg(st.job_round == st.last, "the job's round %lld, its last row's %lld",
                  st.job_round, st.last);
    ck_assert_msg(st.last >= seen, "a client saw round %lld, the store has up to %lld", seen,
                  st.last);

    /* Restarted: the job is interrupted, its rows as they were. */
    server_start(&s, 1);
    job = job_get(&s, ALICE, id);
    state = json_string_value(json_object_get(job, "state"));
    ck_assert_msg(strcmp(state, "interrupted") == 0, "job %s is %s after the restart", id,
                  state);
    ck_assert_str_eq(json_string_value(json_object_get(job, "stop_reason")), "interrupted");
    ck_assert_int_eq(progress_round(job), st.last);
    json_decref(job);
    {
        struct stored after = stored_of(s.db, id);

        ck_assert_int_eq(after.count, st.count);
        ck_assert_int_eq(after.last, st.last);
        ck_assert_str_eq(after.state, "interrupted");
    }
    server_stop(&s, SIGTERM);
}
END_TEST

static Suite *ingest_suite(void)
{
    Suite *s = suite_create("ingest");
    TCase *tc = tcase_create("ingest");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_sparse_rows_stored_while_running);
    tcase_add_test(tc, test_sigkill_mid_batch);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(ingest_suite());
}
