/*
 * The job list's filters on parameters and results (docs/api.md,
 * "Filters"): the parser of one filter against hostile keys and values,
 * the store's list on a real SQLite file (each field and comparison, all
 * holding at once, a bounded look per page with a cursor to go on), and
 * the real server's 400s naming the parameter.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include "serverutil.h"
#include "store.h"
#include "testutil.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- The parser ------------------------------------------------------ */

struct parse_case {
    const char *key, *value;
    int rc;                     /* 0, 1 (not a filter) or -1 */
    enum store_job_field field;
    enum store_filter_op op;
    double number;
    const char *why;            /* a part of the sentence, for -1 */
};

static const struct parse_case parse_cases[] = {
    {"k", "5", 0, STORE_F_K, STORE_OP_EQ, 5, NULL},
    {"k_lt", "5", 0, STORE_F_K, STORE_OP_LT, 5, NULL},
    {"rel_gap_lt", "1e-6", 0, STORE_F_REL_GAP, STORE_OP_LT, 1e-6, NULL},
    {"rel_gap_ge", "-2.5E+3", 0, STORE_F_REL_GAP, STORE_OP_GE, -2.5e3, NULL},
    {"step_multiplier_ne", "1", 0, STORE_F_STEP_MULTIPLIER, STORE_OP_NE, 1, NULL},
    {"max_rounds_le", "100", 0, STORE_F_MAX_ROUNDS, STORE_OP_LE, 100, NULL},
    {"reached", "true", 0, STORE_F_REACHED, STORE_OP_EQ, 1, NULL},
    {"reached", "false", 0, STORE_F_REACHED, STORE_OP_EQ, 0, NULL},
    {"compressor", "topk", 0, STORE_F_COMPRESSOR, STORE_OP_EQ, 0, NULL},
    {"compressor_ne", "topk", 0, STORE_F_COMPRESSOR, STORE_OP_NE, 0, NULL},
    {"s_gt", "2", 0, STORE_F_S, STORE_OP_GT, 2, NULL},
    /* not filters at all */
    {"kk", "5", 1, 0, 0, 0, NULL},
    {"K", "5", 1, 0, 0, 0, NULL},
    {"_lt", "5", 1, 0, 0, 0, NULL},
    {"k_", "5", 1, 0, 0, 0, NULL},
    {"k_lt_lt", "5", 1, 0, 0, 0, NULL},
    {"rel_gap_lt ", "5", 1, 0, 0, 0, NULL},
    {"", "5", 1, 0, 0, 0, NULL},
    {"k\xff", "5", 1, 0, 0, 0, NULL},
    {"rel_gap_eq", "5", 1, 0, 0, 0, NULL},
    /* filters with a wrong value or comparison */
    {"k", "", -1, 0, 0, 0, "a value is required"},
    {"k", "five", -1, 0, 0, 0, "finite decimal number"},
    {"k", " 5", -1, 0, 0, 0, "finite decimal number"},
    {"k", "5 ", -1, 0, 0, 0, "finite decimal number"},
    {"k", "0x10", -1, 0, 0, 0, "finite decimal number"},
    {"k", "inf", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", "nan", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", "1e999", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", "1e-6e", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", "--1", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", ".", -1, 0, 0, 0, "finite decimal number"},
    {"rel_gap_lt", "+", -1, 0, 0, 0, "finite decimal number"},
    {"reached", "yes", -1, 0, 0, 0, "true or false"},
    {"reached", "TRUE", -1, 0, 0, 0, "true or false"},
    {"reached", "1", -1, 0, 0, 0, "true or false"},
    {"reached_ne", "true", -1, 0, 0, 0, "no comparison"},
    {"compressor_lt", "a", -1, 0, 0, 0, "text"},
    {"name_ge", "a", -1, 0, 0, 0, "text"},
};

START_TEST(test_parse_table)
{
    for (size_t i = 0; i < COUNT_OF(parse_cases); i++) {
        const struct parse_case *c = &parse_cases[i];
        struct store_job_cond cond = {.field = STORE_F_COUNT};
        char why[200] = "";
        int rc = store_job_cond_parse(c->key, c->value, &cond, why, sizeof why);

        ck_assert_msg(rc == c->rc, "%s=%s: %d, expected %d (%s)", c->key, c->value, rc, c->rc,
                      why);
        if (rc == 1)
            ck_assert_int_eq(cond.field, STORE_F_COUNT);    /* untouched */
        if (rc == -1) {
            ck_assert_msg(strstr(why, c->why), "%s=%s: \"%s\" lacks \"%s\"", c->key,
                          c->value, why, c->why);
            ck_assert_msg(strncmp(why, c->key, strlen(c->key)) == 0,
                          "%s=%s: \"%s\" does not name the parameter", c->key, c->value, why);
        }
        if (rc == 0) {
            ck_assert_int_eq(cond.field, c->field);
            ck_assert_int_eq(cond.op, c->op);
            if (store_job_field_kind(cond.field) == STORE_FIELD_TEXT)
                ck_assert_str_eq(cond.text, c->value);
            else
                ck_assert_msg(cond.number == c->number, "%s=%s: %g", c->key, c->value,
                              cond.number);
        }
    }
}
END_TEST

/* Overlong values, NULLs, and every byte as a one-character value. */
START_TEST(test_parse_hostile)
{
    struct store_job_cond cond;
    char why[200], big[STORE_COND_VALUE_MAX + 2], one[2] = "";

    memset(big, '1', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(store_job_cond_parse("k", big, &cond, why, sizeof why), -1);
    ck_assert_ptr_nonnull(strstr(why, "longer than 256"));
    big[STORE_COND_VALUE_MAX] = '\0';
    ck_assert_int_eq(store_job_cond_parse("name", big, &cond, why, sizeof why), 0);
    ck_assert_int_eq(store_job_cond_parse(NULL, "5", &cond, why, sizeof why), 1);
    ck_assert_int_eq(store_job_cond_parse("k", NULL, &cond, why, sizeof why), -1);
    ck_assert_int_eq(store_job_cond_parse("k", "5", &cond, why, 1), 0);
    ck_assert_int_eq(store_job_cond_parse("k", "x", &cond, why, 1), -1);   /* why cut */
    ck_assert_int_eq(why[0], '\0');
    for (int b = 1; b < 256; b++) {
        int rc;

        one[0] = (char)b;
        rc = store_job_cond_parse("workers", one, &cond, why, sizeof why);
        ck_assert_int_eq(rc, b >= '0' && b <= '9' ? 0 : -1);
    }
    for (int f = 0; f < STORE_F_COUNT; f++)
        for (int o = 0; o < STORE_OP_COUNT; o++) {
            char key[64];

            snprintf(key, sizeof key, "%s%s", store_job_field_name((enum store_job_field)f),
                     store_filter_op_suffix((enum store_filter_op)o));
            ck_assert_int_ne(store_job_cond_parse(key, "1", &cond, why, sizeof why), 1);
        }
}
END_TEST

/* ---- The store ------------------------------------------------------- */

static char dir[64], db_path[128];

static void make_store_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/ecopt-filters-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(db_path, sizeof db_path, "%s/filters.db", dir);
}

static void remove_store_dir(void)
{
    char cmd[128];

    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static void raw_exec(const char *sql)
{
    sqlite3 *db;
    char *msg = NULL;

    ck_assert_int_eq(sqlite3_open(db_path, &db), SQLITE_OK);
    ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", sql, msg);
    sqlite3_close(db);
}

/* A job of owner with spec and, when done, how it ended. */
static void add_job(struct store *st, const char *owner, const char *spec, const char *comp,
                    uint32_t workers, double rel_gap, const char *stop, char id[32])
{
    struct store_job_new in = {.owner = owner, .spec = spec, .algorithm = "eclk",
                               .compressor = comp, .dataset = "a9a", .backend = "process",
                               .workers = workers};
    struct store_job job = {0};
    struct store_err e = {0};

    ck_assert_int_eq(store_job_create(st, &in, &job, &e), 0);
    snprintf(id, 32, "%s", job.id);
    store_job_clear(&job);
    if (!isnan(rel_gap)) {
        ck_assert_int_eq(store_job_set_running(st, id, 42, NULL, NULL, &e), 0);
        ck_assert_int_eq(store_job_progress(st, id, 100, rel_gap, 1e3, &e), 0);
    }
    if (stop)
        ck_assert_int_eq(store_job_end(st, id, STORE_JOB_SUCCEEDED, stop, "done", &e), 0);
}

/* The ids the list gives for conds (one page, none left), as "a,b,c". */
static void list_ids(struct store *st, const char *owner, const struct store_job_cond *conds,
                     size_t n, char *out, size_t cap)
{
    struct store_job_filter f = {.owner = owner, .state = -1, .conds = conds, .nconds = n};
    struct store_job *jobs = NULL;
    struct store_err e = {0};
    char next[STORE_CURSOR_SIZE];
    size_t count = 0, len = 0;

    ck_assert_int_eq(store_job_list(st, &f, NULL, 100, &jobs, &count, next, &e), 0);
    ck_assert_str_eq(next, "");
    out[0] = '\0';
    for (size_t i = 0; i < count; i++)
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", jobs[i].id);
    store_jobs_free(jobs, count);
}

static struct store_job_cond cond_of(const char *key, const char *value)
{
    struct store_job_cond c;
    char why[200];

    ck_assert_msg(store_job_cond_parse(key, value, &c, why, sizeof why) == 0, "%s", why);
    return c;
}

START_TEST(test_store_filters)
{
    struct store_err e = {0};
    struct store *st = store_open(db_path, &e);
    char a[32], b[32], c[32], d[32], got[256], want[256];

    ck_assert_msg(st != NULL, "%s", e.msg);
    add_job(st, "alice",
            "{\"compressor\":{\"type\":\"topk\",\"k\":5},\"step_multiplier\":2.0,"
            "\"target\":1e-9}", "topk", 4, 1e-10, "target_reached", a);
    add_job(st, "alice",
            "{\"compressor\":{\"type\":\"topk\",\"k\":10},\"step_multiplier\":0.5}", "topk",
            20, 1e-3, "max_rounds", b);
    add_job(st, "alice", "{\"compressor\":{\"type\":\"scaled_sign\"},\"step_size\":0.1}",
            "scaled_sign", 4, NAN, NULL, c);
    add_job(st, "bob", "{\"compressor\":{\"type\":\"topk\",\"k\":5},\"step_multiplier\":4}",
            "topk", 4, 2e-7, "max_rounds", d);

    struct {
        const char *owner;
        const char *kv[3][2];
        const char *ids[4];
    } cases[] = {
        {NULL, {{"k", "5"}}, {d, a}},
        {"alice", {{"k", "5"}}, {a}},
        {NULL, {{"k_ne", "5"}}, {b}},            /* no k: no match */
        {NULL, {{"k_ge", "5"}, {"k_le", "10"}}, {d, b, a}},
        {NULL, {{"step_multiplier", "2"}}, {a}},
        {NULL, {{"step_multiplier_gt", "1"}}, {d, a}},
        {NULL, {{"workers", "20"}}, {b}},
        {NULL, {{"reached", "true"}}, {a}},
        {NULL, {{"reached", "false"}}, {d, c, b}},
        {NULL, {{"rel_gap_lt", "1e-6"}}, {d, a}},
        {NULL, {{"rel_gap_lt", "1e-6"}, {"reached", "false"}}, {d}},
        {NULL, {{"compressor", "scaled_sign"}}, {c}},
        {NULL, {{"compressor_ne", "topk"}}, {c}},
        {NULL, {{"step_size", "0.1"}}, {c}},
        {NULL, {{"rounds_ge", "100"}, {"bits_up", "1000"}}, {d, b, a}},
        {NULL, {{"target", "1e-9"}}, {a}},
        {NULL, {{"k", "7"}}, {NULL}},
    };
    for (size_t i = 0; i < COUNT_OF(cases); i++) {
        struct store_job_cond conds[3];
        size_t n = 0, len = 0;

        while (n < 3 && cases[i].kv[n][0]) {
            conds[n] = cond_of(cases[i].kv[n][0], cases[i].kv[n][1]);
            n++;
        }
        want[0] = '\0';
        for (size_t j = 0; j < 4 && cases[i].ids[j]; j++)
            len += (size_t)snprintf(want + len, sizeof want - len, "%s%s", j ? "," : "",
                                    cases[i].ids[j]);
        list_ids(st, cases[i].owner, conds, n, got, sizeof got);
        ck_assert_msg(strcmp(got, want) == 0, "case %zu (%s...): [%s], expected [%s]", i,
                      cases[i].kv[0][0], got, want);
    }
    store_close(st);
}
END_TEST

/*
 * 10,000 non-matching jobs between two matching ones: the first page
 * stops after looking at STORE_JOB_SCAN jobs and gives the newest match
 * and a cursor; the pages after it find the older one, then end.
 */
START_TEST(test_store_scan_bounded)
{
    struct store_err e = {0};
    struct store *st = store_open(db_path, &e);
    struct store_job_cond k5 = cond_of("k", "5");
    struct store_job_filter f = {.state = -1, .conds = &k5, .nconds = 1};
    char old[32], young[32], cursor[STORE_CURSOR_SIZE] = "", next[STORE_CURSOR_SIZE];
    const char *topk5 = "{\"compressor\":{\"type\":\"topk\",\"k\":5}}";
    size_t pages = 0, found = 0;
    int saw_old = 0, saw_young = 0;

    ck_assert_msg(st != NULL, "%s", e.msg);
    add_job(st, "alice", topk5, "topk", 4, NAN, NULL, old);
    raw_exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10000)"
             " INSERT INTO jobs (id, owner, spec, algorithm, compressor, dataset, backend,"
             " workers, created_at) SELECT printf('j_%016x', i), 'alice',"
             " '{\"compressor\":{\"type\":\"topk\",\"k\":7}}', 'eclk', 'topk', 'a9a',"
             " 'process', 4, 1 FROM n");
    add_job(st, "alice", topk5, "topk", 4, NAN, NULL, young);
    for (;;) {
        struct store_job *jobs = NULL;
        size_t n = 0;

        ck_assert_int_eq(store_job_list(st, &f, cursor, 50, &jobs, &n, next, &e), 0);
        for (size_t i = 0; i < n; i++) {
            saw_old |= strcmp(jobs[i].id, old) == 0;
            saw_young |= strcmp(jobs[i].id, young) == 0;
        }
        if (pages == 0) {
            ck_assert_uint_eq(n, 1);            /* young, within the first look */
            ck_assert_str_ne(next, "");
        }
        found += n;
        store_jobs_free(jobs, n);
        pages++;
        ck_assert_uint_le(pages, 3);
        if (!next[0])
            break;
        snprintf(cursor, sizeof cursor, "%s", next);
    }
    ck_assert(saw_old && saw_young);
    ck_assert_uint_eq(found, 2);
    ck_assert_uint_eq(pages, 2);
    /* Owner's list alike, through its own statement. */
    f.owner = "alice";
    {
        struct store_job *jobs = NULL;
        size_t n = 0;

        ck_assert_int_eq(store_job_list(st, &f, NULL, 50, &jobs, &n, next, &e), 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_str_ne(next, "");
        store_jobs_free(jobs, n);
    }
    store_close(st);
}
END_TEST

/* ---- The server ------------------------------------------------------ */

static long get_status(const struct server *s, const char *path, char *detail, size_t cap,
                       char *parameter, size_t pcap)
{
    struct reply r = req(s, "GET", path, ALICE, NULL, NULL);
    json_t *doc = json_loads(r.body ? r.body : "", 0, NULL);
    long status = r.status;

    snprintf(detail, cap, "%s", doc ? json_string_value(json_object_get(doc, "detail")) ?: ""
                                    : "");
    snprintf(parameter, pcap, "%s",
             doc ? json_string_value(json_object_get(doc, "parameter")) ?: "" : "");
    json_decref(doc);
    free(r.body);
    return status;
}

/* `ecopt list ARGS` as alice against s: its exit status, its output in
 * out. */
static int ecopt_list(const struct server *s, const char *args, char *out, size_t cap)
{
    const char *bin = getenv("ECOPT_BIN");
    char cmd[1024];
    size_t n = 0, r;
    FILE *p;
    int st;

    snprintf(cmd, sizeof cmd, "ECOPT_URL=http://127.0.0.1:%u ECOPT_TOKEN=%s %s list %s 2>&1",
             s->port, ALICE, bin && *bin ? bin : "build/ecopt", args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    while (n + 1 < cap && (r = fread(out + n, 1, cap - 1 - n, p)) > 0)
        n += r;
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Two finished jobs of alice, then the filters through HTTP and `ecopt
 * list --filter`: matches, and 400 naming each bad parameter. */
START_TEST(test_server_filters)
{
    static const char job_k2[] =
        "{\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 20,"
        " \"step_multiplier\": 0.5}";
    static const char job_k3[] =
        "{\"dataset\": \"heart_scale\", \"workers\": 3, \"backend\": \"inproc\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 3}, \"max_rounds\": 20}";
    static const struct {
        const char *query, *parameter, *detail;
    } bad[] = {
        {"kay=2", "kay", "unknown query parameter"},
        {"k=two", "k", "finite decimal number"},
        {"rel_gap_lt=nan", "rel_gap_lt", "finite decimal number"},
        {"reached=yes", "reached", "true or false"},
        {"compressor_lt=topk", "compressor_lt", "text"},
        {"k=2&k=3", "k", "given twice"},
        {"k=", "k", "a value is required"},
        {"workers_gt=1%20", "workers_gt", "finite decimal number"},
    };
    struct server s;
    char k2[32], k3[32], path[256], detail[256], parameter[64];
    struct reply r;
    json_t *doc, *jobs;

    server_start(&s, 0);
    job_create(&s, ALICE, job_k2, k2);
    job_create(&s, ALICE, job_k3, k3);
    json_decref(job_wait(&s, ALICE, k2, "final", 60));
    json_decref(job_wait(&s, ALICE, k3, "final", 60));
    r = req(&s, "GET", "/v1/jobs?k_ge=2&k_lt=3&step_multiplier=0.5&workers=2&rounds_ge=1",
            ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    jobs = json_object_get(doc, "jobs");
    ck_assert_uint_eq(json_array_size(jobs), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "id")), k2);
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs?k=3&algorithm=eclk", ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_uint_eq(json_array_size(json_object_get(doc, "jobs")), 1);
    ck_assert(json_is_null(json_object_get(doc, "next_cursor")));
    json_decref(doc);
    free(r.body);
    {
        char out[8192];

        ck_assert_int_eq(ecopt_list(&s, "--filter k=2 --filter workers_ge=2", out, sizeof out),
                         0);
        ck_assert_msg(strstr(out, k2) && !strstr(out, k3), "%s", out);
        ck_assert_int_eq(ecopt_list(&s, "--filter step_multiplier_gt=0.7 --json", out,
                                    sizeof out), 0);
        ck_assert_msg(strstr(out, k3) && !strstr(out, k2), "%s", out);
        ck_assert_int_eq(ecopt_list(&s, "--filter k=two", out, sizeof out), 1);
        ck_assert_msg(strstr(out, "k must be a finite decimal number"), "%s", out);
        ck_assert_int_eq(ecopt_list(&s, "--filter k", out, sizeof out), 2);
        ck_assert_msg(strstr(out, "--filter takes FIELD=VALUE"), "%s", out);
    }
    for (size_t i = 0; i < COUNT_OF(bad); i++) {
        snprintf(path, sizeof path, "/v1/jobs?%s", bad[i].query);
        ck_assert_int_eq(get_status(&s, path, detail, sizeof detail, parameter,
                                    sizeof parameter), 400);
        ck_assert_msg(strcmp(parameter, bad[i].parameter) == 0, "%s: parameter %s",
                      bad[i].query, parameter);
        ck_assert_msg(strstr(detail, bad[i].detail), "%s: \"%s\"", bad[i].query, detail);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

static Suite *filters_suite(void)
{
    Suite *s = suite_create("filters");
    TCase *parse = tcase_create("parse");
    TCase *store = tcase_create("store");
    TCase *server = tcase_create("server");

    tcase_add_test(parse, test_parse_table);
    tcase_add_test(parse, test_parse_hostile);
    tcase_add_checked_fixture(store, make_store_dir, remove_store_dir);
    tcase_set_timeout(store, 120);
    tcase_add_test(store, test_store_filters);
    tcase_add_test(store, test_store_scan_bounded);
    tcase_set_timeout(server, 120);
    tcase_add_test(server, test_server_filters);
    suite_add_tcase(s, parse);
    suite_add_tcase(s, store);
    suite_add_tcase(s, server);
    return s;
}

int main(void)
{
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    rc = tu_run(filters_suite());
    curl_global_cleanup();
    return rc;
}
