/*
 * What users of Ray Jobs, MLflow and EventSource expect of the API, against
 * the real server: every ended job says why in a word (stop_reason) and
 * the list filters on it; a CSV download without a limit has every row;
 * an SSE stream resumes after Last-Event-ID and says Cache-Control once;
 * experiments are listed; any jobs can be compared without an experiment.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <signal.h>

#include "serverutil.h"
#include "testutil.h"

/* Ends at its round budget, far from a target of 0. */
static const char budget_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"algorithm\": \"gd\","
    " \"max_rounds\": 40, \"target\": 0}";
/* Reaches its target quickly. */
static const char target_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"algorithm\": \"gd\","
    " \"max_rounds\": 100000, \"target\": 1e-2}";
/* A row every round, 4501 of them, with a step small enough that the gap
   never reaches 0 first. */
static const char rows_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 2, \"algorithm\": \"gd\","
    " \"max_rounds\": 4500, \"target\": 0, \"eval_every\": 1, \"step_multiplier\": 0.05}";
static const char endless_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 2, \"max_rounds\": 40000000, \"target\": 0}";

static const char *str_of(json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

START_TEST(test_stop_reason)
{
    struct server s;
    char budget[32], target[32], endless[32], path[256];
    json_t *doc, *list;
    struct reply r;

    server_start(&s, 0);
    job_create(&s, ALICE, budget_job, budget);
    job_create(&s, ALICE, target_job, target);
    job_create(&s, ALICE, endless_job, endless);
    doc = job_get(&s, ALICE, endless);
    ck_assert(json_is_null(json_object_get(doc, "stop_reason")));   /* not ended */
    json_decref(doc);

    doc = job_wait(&s, ALICE, budget, "succeeded", 60);
    ck_assert_str_eq(str_of(doc, "stop_reason"), "max_rounds");
    json_decref(doc);
    doc = job_wait(&s, ALICE, target, "succeeded", 60);
    ck_assert_str_eq(str_of(doc, "stop_reason"), "target_reached");
    json_decref(doc);
    job_cancel(&s, ALICE, endless, 30);
    doc = job_get(&s, ALICE, endless);
    ck_assert_str_eq(str_of(doc, "stop_reason"), "cancelled");
    json_decref(doc);

    /* The list filters on it. */
    r = req(&s, "GET", "/v1/jobs?stop_reason=target_reached", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    list = json_object_get(doc, "jobs");
    ck_assert_int_eq(json_array_size(list), 1);
    ck_assert_str_eq(str_of(json_array_get(list, 0), "id"), target);
    json_decref(doc);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs?stop_reason=max_rounds&state=succeeded");
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 1);
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs?stop_reason=finished", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, "stop_reason must be one of"), "%s", r.body);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Counts the lines of text and checks the rounds go 0, 1, 2, ... */
static size_t csv_rows(const char *text)
{
    size_t n = 0;
    const char *p = strchr(text, '\n');

    ck_assert_ptr_nonnull(p);
    for (p++; *p; n++) {
        const char *nl = strchr(p, '\n');
        ck_assert_msg(strtoll(p, NULL, 10) == (long long)n, "row %zu is round %lld", n,
                      strtoll(p, NULL, 10));
        ck_assert_ptr_nonnull(nl);
        p = nl + 1;
    }
    return n;
}

START_TEST(test_csv_every_row)
{
    struct server s;
    char id[32], path[256];
    struct reply r;

    server_start(&s, 0);
    job_create(&s, ALICE, rows_job, id);
    json_decref(job_wait(&s, ALICE, id, "succeeded", 120));
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics", id);
    r = req(&s, "GET", path, ALICE, NULL, "Accept: text/csv");
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "text/csv");
    ck_assert_ptr_eq(strstr(r.body, "round,bits_up,"), r.body);
    ck_assert_uint_eq(csv_rows(r.body), 4501);
    free(r.body);
    /* format=csv alike; a page when a limit is given. */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=csv", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_uint_eq(csv_rows(r.body), 4501);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=csv&limit=1000", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_uint_eq(csv_rows(r.body), 1000);
    free(r.body);
    /* Another token's download is still a 404. */
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=csv", id);
    r = req(&s, "GET", path, BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

struct headers {
    int cache_control;
};

static size_t count_headers(char *p, size_t sz, size_t n, void *ctx)
{
    struct headers *h = ctx;

    if (sz * n > 14 && strncasecmp(p, "Cache-Control:", 14) == 0)
        h->cache_control++;
    return sz * n;
}

START_TEST(test_sse_last_event_id)
{
    struct server s;
    char id[32], url[256], *body = NULL;
    struct reply r = {0};
    struct headers h = {0};
    struct curl_slist *hl = NULL;
    CURL *c;
    const char *first;

    server_start(&s, 0);
    job_create(&s, ALICE, rows_job, id);
    json_decref(job_wait(&s, ALICE, id, "succeeded", 120));
    snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/jobs/%s/events", s.port, id);
    c = curl_easy_init();
    hl = curl_slist_append(hl, "Authorization: Bearer " ALICE);
    hl = curl_slist_append(hl, "Last-Event-ID: 4400");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, count_headers);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all(hl);
    curl_easy_cleanup(c);
    body = r.body;
    ck_assert_int_eq(r.status, 200);
    ck_assert_int_eq(h.cache_control, 1);
    /* The first metric event is round 4401, and there are 100 of them. */
    first = strstr(body, "event: metric\nid: ");
    ck_assert_ptr_nonnull(first);
    ck_assert_int_eq(strtol(first + strlen("event: metric\nid: "), NULL, 10), 4401);
    {
        size_t n = 0;
        for (const char *p = body; (p = strstr(p, "event: metric\n")); p++)
            n++;
        ck_assert_uint_eq(n, 100);
    }
    free(body);
    /* A Last-Event-ID that no stream sent is a 400 naming it. */
    {
        char path[128];
        snprintf(path, sizeof path, "/v1/jobs/%s/events", id);
        r = req(&s, "GET", path, ALICE, NULL, "Last-Event-ID: round-7");
        ck_assert_int_eq(r.status, 400);
        ck_assert_msg(strstr(r.body, "Last-Event-ID"), "%s", r.body);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

static void experiment_create(const struct server *s, const char *token, const char *name,
                              char id[32], char jobs[2][32])
{
    char body[512];
    struct reply r;
    json_t *doc;

    snprintf(body, sizeof body,
             "{\"name\": \"%s\", \"base\": {\"dataset\": \"heart_scale\", \"workers\": 2,"
             " \"max_rounds\": 30, \"target\": 0}, \"variants\": [{\"algorithm\": \"gd\"},"
             " {\"algorithm\": \"ec-gd\", \"compressor\": {\"type\": \"topk\", \"k\": 2}}]}",
             name);
    r = req(s, "POST", "/v1/experiments", token, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    snprintf(id, 32, "%s", str_of(doc, "id"));
    for (int i = 0; i < 2; i++)
        snprintf(jobs[i], 32, "%s",
                 str_of(json_array_get(json_object_get(doc, "jobs"), (size_t)i), "id"));
    json_decref(doc);
    free(r.body);
}

START_TEST(test_experiments_list_and_compare)
{
    struct server s;
    char xa[32], xa2[32], xb[32], ja[2][32], ja2[2][32], jb[2][32], path[256], other[32];
    json_t *doc, *list, *cmp, *warnings;
    struct reply r;

    server_start(&s, 0);
    experiment_create(&s, ALICE, "first", xa, ja);
    experiment_create(&s, ALICE, "second", xa2, ja2);
    experiment_create(&s, BOB, "bobs", xb, jb);

    r = req(&s, "GET", "/v1/experiments", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    list = json_object_get(doc, "experiments");
    ck_assert_int_eq(json_array_size(list), 2);       /* hers only, newest first */
    ck_assert_str_eq(str_of(json_array_get(list, 0), "id"), xa2);
    ck_assert_str_eq(str_of(json_array_get(list, 1), "name"), "first");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(list, 1), "jobs")), 2);
    ck_assert(json_is_null(json_object_get(doc, "next_cursor")));
    json_decref(doc);
    free(r.body);
    /* Pages of one. */
    r = req(&s, "GET", "/v1/experiments?limit=1", ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "experiments")), 1);
    snprintf(path, sizeof path, "/v1/experiments?limit=1&cursor=%s",
             str_of(doc, "next_cursor"));
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(json_array_get(json_object_get(doc, "experiments"), 0), "id"), xa);
    json_decref(doc);
    free(r.body);
    /* The admin sees all three. */
    r = req(&s, "GET", "/v1/experiments", ROOT, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "experiments")), 3);
    json_decref(doc);
    free(r.body);

    /* Compare jobs of two experiments without declaring a third. */
    for (int i = 0; i < 2; i++) {
        json_decref(job_wait(&s, ALICE, ja[i], "final", 60));
        json_decref(job_wait(&s, ALICE, ja2[i], "final", 60));
    }
    snprintf(path, sizeof path, "/v1/compare?jobs=%s,%s,%s", ja[0], ja2[1], ja[1]);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    cmp = json_object_get(doc, "comparison");
    ck_assert_int_eq(json_array_size(cmp), 3);
    ck_assert_str_eq(str_of(json_array_get(cmp, 1), "job"), ja2[1]);
    ck_assert_str_eq(str_of(json_array_get(cmp, 1), "algorithm"), "ec-gd");
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(cmp, 0), "rounds")), 30);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 3);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "warnings")), 0);
    json_decref(doc);
    free(r.body);
    /* A job on another dataset is compared with a warning that names both. */
    job_create(&s, ALICE,
               "{\"dataset\": \"mushrooms\", \"workers\": 2, \"algorithm\": \"gd\","
               " \"max_rounds\": 5, \"target\": 0}", other);
    json_decref(job_wait(&s, ALICE, other, "final", 60));
    snprintf(path, sizeof path, "/v1/compare?jobs=%s,%s", ja[0], other);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    warnings = json_object_get(doc, "warnings");
    ck_assert_int_eq(json_array_size(warnings), 1);
    ck_assert_msg(strstr(json_string_value(json_array_get(warnings, 0)), "mushrooms") &&
                  strstr(json_string_value(json_array_get(warnings, 0)), "heart_scale"),
                  "%s", r.body);
    json_decref(doc);
    free(r.body);
    snprintf(path, sizeof path, "/v1/compare/plot.svg?jobs=%s,%s&x=bits", ja[0], ja[1]);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "image/svg+xml");
    ck_assert_ptr_nonnull(strstr(r.body, "<svg"));
    free(r.body);
    /* Another's job is a 404, as anywhere; bad lists are 400s. */
    snprintf(path, sizeof path, "/v1/compare?jobs=%s,%s", ja[0], jb[0]);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_msg(strstr(r.body, jb[0]), "the 404 names the job: %s", r.body);
    free(r.body);
    snprintf(path, sizeof path, "/v1/compare/plot.svg?jobs=%s,%s", ja[0], jb[0]);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_msg(strstr(r.body, jb[0]), "the 404 names the job: %s", r.body);
    free(r.body);
    r = req(&s, "GET", "/v1/compare", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, "jobs is required"), "%s", r.body);
    free(r.body);
    snprintf(path, sizeof path, "/v1/compare?jobs=%s,,%s", ja[0], ja[1]);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_unknown_query)
{
    struct server s;
    char id[32], path[256];
    struct reply r;
    static const struct {
        const char *path, *param;
    } cases[] = {
        {"/v1/jobs?stat=running", "stat"},          /* a misspelt filter */
        {"/v1/jobs?limit=5&page=2", "page"},
        {"/v1/experiments?state=running", "state"},
        {"/v1/datasets?verbose=1", "verbose"},
        {"/livez?x=1", "x"},
    };

    server_start(&s, 0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        r = req(&s, "GET", cases[i].path, ALICE, NULL, NULL);
        ck_assert_msg(r.status == 400, "%s: %ld %s", cases[i].path, r.status, r.body);
        ck_assert_str_eq(r.content_type, "application/problem+json");
        snprintf(path, sizeof path, "\"parameter\":\"%s\"", cases[i].param);
        ck_assert_msg(strstr(r.body, path), "%s: %s", cases[i].path, r.body);
        ck_assert_msg(strstr(r.body, "unknown query parameter"), "%s", r.body);
        free(r.body);
    }
    /* The parameters a route takes still work, and a format it does not
       know is refused rather than answered as JSON. */
    job_create(&s, ALICE, budget_job, id);
    json_decref(job_wait(&s, ALICE, id, "final", 60));
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=xml", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_msg(strstr(r.body, "format must be json or csv"), "%s", r.body);
    free(r.body);
    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?format=json&limit=5&every=2", id);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_problem_types)
{
    struct server s;
    struct reply r;
    json_t *doc;
    const char *detail;

    server_start(&s, 0);
    /* A kind of its own: its type, dereferenceable here; the instance. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"workers\": 0, \"batch\": 0,"
            " \"algorithm\": \"nope\"}", NULL);
    ck_assert_int_eq(r.status, 422);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(doc, "type"), "/problems/invalid-job");
    ck_assert_str_eq(str_of(doc, "title"), "Invalid job");
    ck_assert_str_eq(str_of(doc, "instance"), "/v1/jobs");
    /* Several problems: the detail is the first, whole, and says how many
       more there are; errors has every one. */
    detail = str_of(doc, "detail");
    ck_assert_msg(strstr(detail, "(and 2 more: see errors)"), "%s", detail);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "errors")), 3);
    json_decref(doc);
    free(r.body);
    /* What the engine would refuse at start is refused at submit. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"gd\","
            " \"compressor\": {\"type\": \"topk\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "gd sends uncompressed messages"), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"eclk\","
            " \"compressor\": {\"type\": \"randk-unbiased\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "compressor.type: randk-unbiased is not a contraction"), "%s",
                  r.body);
    free(r.body);
    /* ADIANA sends unbiased messages: top-k, which has no unbiased form,
     * is refused naming the field and the method. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"adiana\","
            " \"compressor\": {\"type\": \"topk\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "compressor.type: topk is contractive only: adiana"), "%s",
                  r.body);
    free(r.body);
    /* Partial participation for a method whose theory needs every worker:
     * refused, naming the method and the field. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"eclk\", \"participation\": 0.5,"
            " \"compressor\": {\"type\": \"topk\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "participation: eclk needs every worker in every round"),
                  "%s", r.body);
    free(r.body);
    /* A compressed broadcast for a method whose theory does not admit
     * EF21-P, and a broadcast compressor that is not a sparsifier. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"ef21\","
            " \"compressor\": {\"type\": \"topk\", \"k\": 2},"
            " \"compressor_down\": {\"type\": \"topk\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "compressor_down: ef21 broadcasts its model uncompressed"),
                  "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"gd\","
            " \"compressor_down\": {\"type\": \"dither\", \"s\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "compressor_down.type: must be one of topk, randk"),
                  "%s", r.body);
    free(r.body);
    /* lambda2 = 0: refused where P* or the method needs strong convexity. */
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"gd\", \"lambda2\": 0}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "lambda2: 0 is taken for the squared loss only"), "%s", r.body);
    free(r.body);
    r = req(&s, "POST", "/v1/jobs", ALICE,
            "{\"dataset\": \"heart_scale\", \"algorithm\": \"eclk\", \"lambda2\": 0,"
            " \"loss\": \"squared\", \"compressor\": {\"type\": \"topk\", \"k\": 2}}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "lambda2: 0 makes mu = 0, and eclk's constants"), "%s", r.body);
    free(r.body);
    r = req(&s, "GET", "/problems/invalid-job", NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "errors"));
    free(r.body);
    /* No kind of its own: about:blank, and the title is the status phrase. */
    r = req(&s, "GET", "/v1/jobs/j_0123456789abcdef", ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(doc, "type"), "about:blank");
    ck_assert_str_eq(str_of(doc, "title"), "Not Found");
    ck_assert_str_eq(str_of(doc, "instance"), "/v1/jobs/j_0123456789abcdef");
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/problems/no-such-kind", NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_retry_and_log)
{
    struct server s;
    char endless[32], done[32], path[128], again[32];
    struct reply r;
    json_t *doc, *old;

    server_start(&s, 0);
    job_create(&s, ALICE, endless_job, endless);
    job_create(&s, ALICE, budget_job, done);
    job_cancel(&s, ALICE, endless, 30);
    json_decref(job_wait(&s, ALICE, done, "succeeded", 60));
    /* A cancelled job again: a new job, the same spec and owner. */
    snprintf(path, sizeof path, "/v1/jobs/%s/retry", endless);
    r = req(&s, "POST", path, BOB, NULL, NULL);     /* not Bob's */
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    r = req(&s, "POST", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    snprintf(again, sizeof again, "%s", str_of(doc, "id"));
    ck_assert_str_ne(again, endless);
    old = job_get(&s, ALICE, endless);
    ck_assert(json_equal(json_object_get(doc, "spec"), json_object_get(old, "spec")));
    ck_assert_str_eq(str_of(doc, "owner"), "alice");
    ck_assert_str_eq(str_of(doc, "retry_of"), endless);    /* it says where it came from */
    ck_assert(json_is_null(json_object_get(old, "retry_of")));
    json_decref(old);
    json_decref(doc);
    free(r.body);
    /* A job not ended yet is not retried: 409, saying so. */
    snprintf(path, sizeof path, "/v1/jobs/%s/retry", again);
    r = req(&s, "POST", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 409, "%ld %s", r.status, r.body);
    ck_assert_msg(strstr(r.body, "a job is retried once it has ended"), "%s", r.body);
    free(r.body);
    job_cancel(&s, ALICE, again, 30);
    /* A succeeded job is rerun too, pointing back to its origin. */
    snprintf(path, sizeof path, "/v1/jobs/%s/retry", done);
    r = req(&s, "POST", path, ALICE, NULL, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(doc, "retry_of"), done);
    json_decref(job_wait(&s, ALICE, str_of(doc, "id"), "succeeded", 60));
    json_decref(doc);
    free(r.body);
    /* Labels and name edited after submit; the list's label filter sees it. */
    snprintf(path, sizeof path, "/v1/jobs/%s", done);
    r = req(&s, "PATCH", path, ALICE,
            "{\"name\": \"first try\", \"labels\": {\"lr\": \"0.1\", \"gone\": null}}",
            NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(doc, "name"), "first try");
    ck_assert_str_eq(str_of(json_object_get(doc, "labels"), "lr"), "0.1");
    ck_assert_str_eq(str_of(json_object_get(json_object_get(doc, "spec"), "labels"), "lr"),
                     "0.1");
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs?label=lr=0.1", ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 1);
    json_decref(doc);
    free(r.body);
    r = req(&s, "PATCH", path, ALICE, "{\"labels\": {\"lr\": null}}", NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs?label=lr", ALICE, NULL, NULL);
    doc = json_of(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "jobs")), 0);
    json_decref(doc);
    free(r.body);
    /* Every label of a PATCH is applied, each on its own (the loop once
     * replaced the object it walked with its value: one label of three kept,
     * a second label that is an object accepted, a nested one a crash). */
    r = req(&s, "PATCH", path, ALICE, "{\"labels\": {\"a\": \"1\", \"b\": \"2\", \"c\": \"3\"}}",
            NULL);
    ck_assert_msg(r.status == 200, "%ld %s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_str_eq(str_of(json_object_get(doc, "labels"), "a"), "1");
    ck_assert_str_eq(str_of(json_object_get(doc, "labels"), "b"), "2");
    ck_assert_str_eq(str_of(json_object_get(doc, "labels"), "c"), "3");
    json_decref(doc);
    free(r.body);
    r = req(&s, "PATCH", path, ALICE, "{\"labels\": {\"a\": \"1\", \"b\": {\"x\": \"y\"}}}",
            NULL);
    ck_assert_msg(r.status == 422 && strstr(r.body, "labels.b"), "%ld %s", r.status, r.body);
    free(r.body);
    r = req(&s, "PATCH", path, ALICE,
            "{\"labels\": {\"a\": {\"b\": {\"c\": null}}, \"d\": null}}", NULL);
    ck_assert_msg(r.status == 422 && strstr(r.body, "labels.a"), "%ld %s", r.status, r.body);
    free(r.body);
    r = req(&s, "GET", "/livez", NULL, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    free(r.body);
    r = req(&s, "PATCH", path, ALICE, "{\"labels\": {\"a\": null, \"b\": null, \"c\": null}}",
            NULL);
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    ck_assert_int_eq(json_object_size(json_object_get(doc, "labels")), 0);
    json_decref(doc);
    free(r.body);
    r = req(&s, "PATCH", path, ALICE, "{\"algorithm\": \"gd\"}", NULL);
    ck_assert_int_eq(r.status, 422);
    ck_assert_msg(strstr(r.body, "name and labels can be changed"), "%s", r.body);
    free(r.body);
    r = req(&s, "PATCH", path, BOB, "{\"name\": \"mine\"}", NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    /* The coordinator's log, for its owner only. */
    snprintf(path, sizeof path, "/v1/jobs/%s/log", done);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    ck_assert_msg(strstr(r.content_type, "text/plain") == r.content_type, "%s", r.content_type);
    ck_assert_msg(r.len > 0 && strstr(r.body, "heart_scale"), "%s", r.body);
    free(r.body);
    r = req(&s, "GET", path, BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("conventions");
    TCase *tc = tcase_create("server");

    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_stop_reason);
    tcase_add_test(tc, test_csv_every_row);
    tcase_add_test(tc, test_sse_last_event_id);
    tcase_add_test(tc, test_experiments_list_and_compare);
    tcase_add_test(tc, test_unknown_query);
    tcase_add_test(tc, test_problem_types);
    tcase_add_test(tc, test_retry_and_log);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
