/*
 * Input at its edges against the real `ecopt serve`: job names and labels
 * that carry terminal control sequences (refused at submit and at PATCH,
 * and escaped by `ecopt list` and `ecopt show` for rows stored before the
 * check), an empty Idempotency-Key, and regularizers at their bounds: a
 * lambda1 that makes the start optimal ends with a finite gap, a lambda2
 * too small to start with is refused at submit.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "serverutil.h"
#include "testutil.h"

static const char short_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
    " \"max_rounds\": 10}";

/* A 422 whose problem names field. */
static void expect_invalid(const struct server *s, const char *method, const char *path,
                           const char *body, const char *field)
{
    struct reply r = req(s, method, path, ALICE, body, NULL);
    char want[128];

    snprintf(want, sizeof want, "\"field\":\"%s\"", field);
    ck_assert_msg(r.status == 422, "%s %s %s: %ld %.300s", method, path, body, r.status,
                  r.body);
    ck_assert_msg(strstr(r.body, want), "%s: no %s in %.300s", body, want, r.body);
    ck_assert_msg(strstr(r.body, "control characters"), "%.300s", r.body);
    free(r.body);
}

/* What `ecopt ARGS...` printed on stdout, with alice's token. */
static char *run_cli(const struct server *s, const char *const *args, size_t *len)
{
    const char *bin = getenv("ECOPT_BIN");
    char url[64], *out = NULL;
    size_t cap = 0;
    int p[2], st;
    pid_t pid;

    snprintf(url, sizeof url, "http://127.0.0.1:%u", s->port);
    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        const char *argv[16] = {"ecopt"};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        setenv("ECOPT_URL", url, 1);
        setenv("ECOPT_TOKEN", ALICE, 1);
        execv(bin && *bin ? bin : "build/ecopt", (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    *len = 0;
    for (;;) {
        if (*len + 4096 > cap)
            ck_assert_ptr_nonnull(out = realloc(out, cap = 2 * cap + 8192));
        ssize_t n = read(p[0], out + *len, cap - *len - 1);
        if (n <= 0)
            break;
        *len += (size_t)n;
    }
    out[*len] = '\0';
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ecopt %s exited %#x: %s", args[0],
                  st, out);
    return out;
}

/* No byte of text is a C0 control character other than the line break,
 * nor DEL. */
static void expect_no_controls(const char *text, size_t len, const char *what)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        ck_assert_msg((c >= 0x20 && c != 0x7f) || c == '\n',
                      "%s printed the control byte %#x at %zu: %s", what, c, i, text);
    }
}

/*
 * A name or a label value with ESC, BEL or a C1 control is refused at
 * submit and at PATCH with a 422 naming the field. A row stored before
 * that check (written into the database here) prints escaped.
 */
START_TEST(test_edges_control_characters)
{
    static const char *const bad[][2] = {
        {"{\"dataset\": \"heart_scale\", \"name\": \"\\u001b]52;c;aGk=\\u0007\"}", "name"},
        {"{\"dataset\": \"heart_scale\", \"name\": \"bell\\u0007\"}", "name"},
        {"{\"dataset\": \"heart_scale\", \"name\": \"csi\\u009b2J\"}", "name"},
        {"{\"dataset\": \"heart_scale\", \"labels\": {\"team\": \"\\u001b[2J\"}}",
         "labels.team"},
    };
    static const char *const bad_patch[][2] = {
        {"{\"name\": \"\\u001b]0;owned\\u0007\"}", "name"},
        {"{\"labels\": {\"team\": \"a\\u0007\"}}", "labels.team"},
    };
    struct server s;
    char id[32], path[64];
    sqlite3 *db;
    char *out, *sql;
    size_t len;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_invalid(&s, "POST", "/v1/jobs", bad[i][0], bad[i][1]);
    job_create(&s, ALICE, short_job, id);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    for (size_t i = 0; i < sizeof bad_patch / sizeof bad_patch[0]; i++)
        expect_invalid(&s, "PATCH", path, bad_patch[i][0], bad_patch[i][1]);
    json_decref(job_wait(&s, ALICE, id, "final", 60));

    /* Stored by an older server: the printers escape it. */
    server_stop(&s, SIGTERM);
    ck_assert_int_eq(sqlite3_open(s.db, &db), SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    sql = sqlite3_mprintf("UPDATE jobs SET name = char(27) || ']52;c;aGk=' || char(7), "
                          "labels = json_object('team', char(27) || '[2J') WHERE id = %Q;"
                          "UPDATE jobs SET spec = json_set(spec, '$.name', name, "
                          "'$.labels', json(labels)) WHERE id = %Q",
                          id, id);
    ck_assert_int_eq(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
    sqlite3_free(sql);
    sqlite3_close(db);
    server_start(&s, 1);

    out = run_cli(&s, (const char *const[]){"list", NULL}, &len);
    expect_no_controls(out, len, "ecopt list");
    ck_assert_msg(strstr(out, "\\x1b]52;c;aGk=\\x07"), "ecopt list: %s", out);
    free(out);
    out = run_cli(&s, (const char *const[]){"show", id, NULL}, &len);
    expect_no_controls(out, len, "ecopt show");
    ck_assert_msg(strcasestr(out, "\\u001b]52;c;aGk=\\u0007"), "ecopt show: %s", out);
    free(out);
    server_stop(&s, SIGTERM);
}
END_TEST

/* An empty Idempotency-Key is the client's mistake: 400 naming the
 * header, as is one with spaces; nothing is created. */
START_TEST(test_edges_idempotency_key)
{
    static const char *const keys[] = {"Idempotency-Key;", "Idempotency-Key: a b",
                                       "Idempotency-Key: \x01x"};
    struct server s;
    struct reply r;

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        r = req(&s, "POST", "/v1/jobs", ALICE, short_job, keys[i]);
        ck_assert_msg(r.status == 400, "%s: %ld %.300s", keys[i], r.status, r.body);
        ck_assert_msg(strstr(r.body, "\"field\":\"Idempotency-Key\""), "%.300s", r.body);
        free(r.body);
    }
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200 && strstr(r.body, "\"jobs\":[]"), "%ld %.300s", r.status,
                  r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", ALICE, short_job, "Idempotency-Key: k-1");
    ck_assert_msg(r.status == 201, "%ld %.300s", r.status, r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/*
 * lambda1 = 1e6 makes 0 the minimizer: P(x0) = P*. The job's relative
 * gap stays a number (0 at the start: the target is reached there), and
 * neither its state nor its reason pretends otherwise.
 */
START_TEST(test_edges_start_is_optimal)
{
    static const char spec[] =
        "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
        " \"lambda1\": 1e6, \"max_rounds\": 50}";
    struct server s;
    char id[32];
    json_t *doc, *gap;
    const char *state, *reason;

    server_start(&s, 0);
    job_create(&s, ALICE, spec, id);
    doc = job_wait(&s, ALICE, id, "final", 60);
    state = json_string_value(json_object_get(doc, "state"));
    reason = json_string_value(json_object_get(doc, "reason"));
    gap = json_object_get(json_object_get(doc, "progress"), "rel_gap");
    ck_assert_msg(json_is_number(gap) && isfinite(json_number_value(gap)),
                  "job %s ended %s with the relative gap %s (%s)", id, state,
                  json_is_number(gap) ? "not finite" : "missing", reason);
    ck_assert_msg(!reason || !strcasestr(reason, "nan"), "reason: %s", reason);
    ck_assert_str_eq(state, "succeeded");
    ck_assert_str_eq(json_string_value(json_object_get(doc, "stop_reason")), "target_reached");
    ck_assert(json_number_value(gap) == 0);
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

static Suite *edges_suite(void)
{
    Suite *s = suite_create("input_edges");
    TCase *tc = tcase_create("edges");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_edges_control_characters);
    tcase_add_test(tc, test_edges_idempotency_key);
    tcase_add_test(tc, test_edges_start_is_optimal);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = tu_run(edges_suite());
    curl_global_cleanup();
    return rc;
}
