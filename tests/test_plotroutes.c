/*
 * The plot routes against the real server: a finished job's curve has one
 * point per stored row with a positive gap, an experiment has one curve
 * per job, long runs stay within max_points, bad parameters are 400s
 * naming them, and another user's job or experiment is a 404. And the
 * dashboard's files: served from the binary with their types, a
 * Content-Security-Policy, an ETag that gives 304.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>

#include "serverutil.h"
#include "testutil.h"
#include "ui.h"

static const char small_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 3, \"algorithm\": \"eclk\","
    " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 300}";
/* Thousands of rows: every round evaluated, to a gap of nothing. */
static const char long_job[] =
    "{\"dataset\": \"heart_scale\", \"workers\": 3, \"max_rounds\": 20000,"
    " \"target\": 0, \"eval_every\": 1, \"backend\": \"inproc\"}";

/* Points drawn by series i of an SVG (path vertices and lone dots); -1
   when the series draws nothing. */
static long svg_points(const char *svg, int i)
{
    char key[64];
    const char *g, *end, *d;
    long n = 0;

    snprintf(key, sizeof key, "<g class=\"series\" data-index=\"%d\"", i);
    if (!(g = strstr(svg, key)))
        return -1;
    end = strstr(g, "</g>");
    ck_assert_ptr_nonnull(end);
    if ((d = strstr(g, " d=\"")) && d < end)
        for (d += 4; *d != '"'; d++)
            n += *d == 'M' || *d == 'L';
    for (const char *c = strstr(g, "<circle"); c && c < end; c = strstr(c + 1, "<circle"))
        n++;
    return n;
}

/* The text of the first <text class="cls"> element. */
static void svg_text(const char *svg, const char *cls, char *out, size_t len)
{
    char key[64];
    const char *p, *gt, *end;

    snprintf(key, sizeof key, "<text class=\"%s\"", cls);
    p = strstr(svg, key);
    ck_assert_msg(p != NULL, "no %s in the plot", cls);
    gt = strchr(p, '>');
    end = strstr(gt, "</text>");
    snprintf(out, len, "%.*s", (int)(end - gt - 1), gt + 1);
}

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* A GET that must be a plot. */
static char *get_svg(const struct server *s, const char *path, const char *token)
{
    struct reply r = req(s, "GET", path, token, NULL, NULL);

    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    ck_assert_str_eq(r.content_type, "image/svg+xml");
    ck_assert_ptr_eq(strstr(r.body, "<?xml"), r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "</svg>\n"));
    return r.body;
}

/* Rows of the job's metrics whose relative gap can be drawn on a log
   axis: what the plot must show when it is not downsampled. */
static long drawable_rows(const struct server *s, const char *id)
{
    char path[128];
    struct reply r;
    json_t *doc, *rows;
    long n = 0;

    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=10000", id);
    r = req(s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    doc = json_of(&r);
    rows = json_object_get(doc, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *g = json_object_get(json_array_get(rows, i), "rel_gap");
        n += json_is_number(g) && json_number_value(g) > 0;
    }
    json_decref(doc);
    free(r.body);
    return n;
}

START_TEST(test_job_plot)
{
    struct server s;
    char id[32], path[160], text[256];
    char *svg;
    long rows;

    server_start(&s, 0);
    job_create(&s, ALICE, small_job, id);
    json_decref(job_wait(&s, ALICE, id, "succeeded", 60));
    rows = drawable_rows(&s, id);
    ck_assert_int_ge(rows, 20);

    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg", id);
    svg = get_svg(&s, path, ALICE);
    ck_assert_int_eq(svg_points(svg, 0), rows);
    svg_text(svg, "title", text, sizeof text);
    ck_assert_msg(starts_with(text, "heart_scale: logistic, \xce\xbb" "2 = "), "title %s", text);
    svg_text(svg, "legend-name", text, sizeof text);
    ck_assert_str_eq(text, "eclk, topk k=2");
    svg_text(svg, "xlabel", text, sizeof text);
    ck_assert_str_eq(text, "communication rounds");
    /* Rounds 0..300 on the x axis, decades of the gap on y. */
    ck_assert_ptr_nonnull(strstr(svg, "text-anchor=\"middle\">300</text>"));
    ck_assert_ptr_nonnull(strstr(svg, "<text class=\"ytick\""));
    ck_assert_ptr_nonnull(strstr(svg, ">10<tspan dy=\"-6\" font-size=\"9\">0</tspan>"));
    free(svg);

    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg?x=bits", id);
    svg = get_svg(&s, path, ALICE);
    svg_text(svg, "xlabel", text, sizeof text);
    ck_assert_str_eq(text, "bits sent up per worker");
    ck_assert_int_eq(svg_points(svg, 0), rows);
    free(svg);
    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg?x=seconds&max_points=10", id);
    svg = get_svg(&s, path, ROOT);          /* the admin sees every job */
    svg_text(svg, "xlabel", text, sizeof text);
    ck_assert_str_eq(text, "seconds");
    ck_assert_int_le(svg_points(svg, 0), 10);
    ck_assert_int_ge(svg_points(svg, 0), 2);
    free(svg);

    /* What is refused, and how. */
    {
        static const struct {
            const char *query, *token;
            long status;
            const char *phrase;
        } bad[] = {
            {"?x=iterations", ALICE, 400, "\"parameter\":\"x\""},
            {"?x=", ALICE, 400, "x must be one of rounds, bits, seconds"},
            {"?max_points=9", ALICE, 400, "\"parameter\":\"max_points\""},
            {"?max_points=1e3", ALICE, 400, "max_points must be an integer in 10..5000"},
            {"?max_points=5001", ALICE, 400, "\"parameter\":\"max_points\""},
            {"", BOB, 404, "\"status\":404"},        /* not bob's job */
            {"", NULL, 401, "Authorization: Bearer"},
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            struct reply r;
            snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg%s", id, bad[i].query);
            r = req(&s, "GET", path, bad[i].token, NULL, NULL);
            ck_assert_msg(r.status == bad[i].status, "case %zu: %ld %s", i, r.status, r.body);
            ck_assert_str_eq(r.content_type, "application/problem+json");
            ck_assert_msg(strstr(r.body, bad[i].phrase), "case %zu: %s", i, r.body);
            free(r.body);
        }
    }
    {
        struct reply r = req(&s, "GET", "/v1/jobs/j_0000000000000000/plot.svg", ALICE, NULL,
                             NULL);
        ck_assert_int_eq(r.status, 404);
        free(r.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

/* Thousands of rows make a plot of at most max_points per curve, with
   both ends. */
START_TEST(test_long_run_is_bounded)
{
    struct server s;
    char id[32], path[160];
    char *svg;
    long rows;

    server_start(&s, 0);
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "succeeded", 120));
    rows = drawable_rows(&s, id);
    ck_assert_msg(rows > 2000, "only %ld rows", rows);

    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg", id);
    svg = get_svg(&s, path, ALICE);
    ck_assert_int_le(svg_points(svg, 0), 1000);
    ck_assert_int_ge(svg_points(svg, 0), 500);
    free(svg);
    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg?max_points=50", id);
    svg = get_svg(&s, path, ALICE);
    ck_assert_int_le(svg_points(svg, 0), 50);
    ck_assert_int_ge(svg_points(svg, 0), 20);
    free(svg);
    snprintf(path, sizeof path, "/v1/jobs/%s/plot.svg?max_points=5000", id);
    svg = get_svg(&s, path, ALICE);
    ck_assert_int_eq(svg_points(svg, 0), rows);
    free(svg);
    server_stop(&s, SIGTERM);
}
END_TEST

START_TEST(test_experiment_plot)
{
    static const char body[] =
        "{\"name\": \"cmp <&>\", \"base\": {\"dataset\": \"heart_scale\", \"workers\": 3,"
        " \"lambda2_rel\": 1e-2, \"max_rounds\": 3000, \"target\": 1e-6,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}},"
        " \"variants\": [{\"algorithm\": \"eclk\"}, {\"algorithm\": \"ec-gd\", \"name\": \"base\"}]}";
    struct server s;
    struct reply r;
    json_t *doc, *jobs;
    char path[400], xpath[300], text[256];
    char *svg;

    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(xpath, sizeof xpath, "%s/plot.svg", r.location);
    doc = json_of(&r);
    free(r.body);
    jobs = json_object_get(doc, "jobs");
    ck_assert_int_eq(json_array_size(jobs), 2);
    for (size_t i = 0; i < 2; i++)
        json_decref(job_wait(&s, ALICE,
                             json_string_value(json_object_get(json_array_get(jobs, i), "id")),
                             "final", 60));

    svg = get_svg(&s, xpath, ALICE);
    for (int i = 0; i < 2; i++) {
        const char *jid = json_string_value(json_object_get(json_array_get(jobs, i), "id"));
        ck_assert_int_eq(svg_points(svg, i), drawable_rows(&s, jid));
    }
    ck_assert_int_eq(svg_points(svg, 2), -1);
    svg_text(svg, "title", text, sizeof text);
    ck_assert_msg(starts_with(text, "cmp &lt;&amp;&gt; \xe2\x80\x94 heart_scale: logistic, "),
                  "title %s", text);
    ck_assert_ptr_nonnull(strstr(svg, ">eclk, topk k=2</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">ec-gd, topk k=2 (base)</text>"));
    free(svg);
    snprintf(path, sizeof path, "%s?x=bits&max_points=20", xpath);
    svg = get_svg(&s, path, ALICE);
    ck_assert_int_le(svg_points(svg, 0), 20);
    ck_assert_int_le(svg_points(svg, 1), 20);
    free(svg);

    r = req(&s, "GET", xpath, BOB, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    ck_assert_str_eq(r.content_type, "application/problem+json");
    free(r.body);
    snprintf(path, sizeof path, "%s?x=log", xpath);
    r = req(&s, "GET", path, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 400);
    ck_assert_ptr_nonnull(strstr(r.body, "\"parameter\":\"x\""));
    free(r.body);
    r = req(&s, "GET", "/v1/experiments/x_0000000000000000/plot.svg", ROOT, NULL, NULL);
    ck_assert_int_eq(r.status, 404);
    free(r.body);
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The stroke colour of series i of svg, "" when there is none. */
static void series_colour(const char *svg, int i, char *out, size_t len)
{
    char pat[64];
    const char *p;

    snprintf(pat, sizeof pat, "class=\"series\" data-index=\"%d\" stroke=\"", i);
    out[0] = '\0';
    if ((p = strstr(svg, pat)))
        snprintf(out, len, "%.7s", p + strlen(pat));
}

/*
 * A tuned experiment's plot: the runs of one variant share a colour and
 * differ in dash, and each legend says the variant and the multiplier,
 * on either axis: the default, the smoothness multiplier (a stored spec
 * then still has step_multiplier 1), and the step multiplier; the jobs
 * of an unnamed variant are named after what it runs.
 */
START_TEST(test_tuned_plot)
{
    static const char *const tunes[] = {"{\"grid\": [0.5, 2]}",
                                        "{\"step_multiplier\": [0.5, 2]}"};
    static const char *const axes[] = {"smoothness_multiplier", "step_multiplier"};
    char body[600];
    static const char *const legends[] = {
        ">eclk, topk k=2 x0.5</text>", ">eclk, topk k=2 x2</text>", ">eclk, topk k=2 x1</text>",
        ">ec-gd, topk k=2 (base) x0.5</text>", ">ec-gd, topk k=2 (base) x2</text>",
        ">ec-gd, topk k=2 (base) x1</text>",
    };
    struct server s;
    struct reply r;
    json_t *doc, *jobs;
    char xpath[300], xurl[300], colour[6][8];
    char *svg;

    snprintf(body, sizeof body,
             "{\"base\": {\"dataset\": \"heart_scale\", \"workers\": 2, \"backend\": \"inproc\","
             " \"lambda2_rel\": 1e-2, \"max_rounds\": 30, \"compressor\": {\"type\": \"topk\","
             " \"k\": 2}}, \"variants\": [{\"algorithm\": \"eclk\"},"
             " {\"algorithm\": \"ec-gd\", \"name\": \"base\"}], \"tune\": %s}", tunes[_i]);
    server_start(&s, 0);
    r = req(&s, "POST", "/v1/experiments", ALICE, body, NULL);
    ck_assert_msg(r.status == 201, "%ld %s", r.status, r.body);
    snprintf(xpath, sizeof xpath, "%s/plot.svg", r.location);
    snprintf(xurl, sizeof xurl, "%s", r.location);
    doc = json_of(&r);
    free(r.body);
    jobs = json_object_get(doc, "jobs");
    ck_assert_int_eq(json_array_size(jobs), 6);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 0), "name")),
                     "eclk topk k=2 x0.5");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(jobs, 4), "name")),
                     "base x2");
    for (size_t i = 0; i < 6; i++)
        json_decref(job_wait(&s, ALICE,
                             json_string_value(json_object_get(json_array_get(jobs, i), "id")),
                             "final", 60));
    /* the experiment's table names its runs as the legends do, and its
       tuned runs say their axis */
    r = req(&s, "GET", xurl, ALICE, NULL, NULL);
    ck_assert_int_eq(r.status, 200);
    {
        json_t *x = json_of(&r), *rows = json_object_get(x, "comparison");
        json_t *tuned = json_object_get(x, "tuned");

        for (size_t i = 0; i < 6; i++) {
            const char *label =
                json_string_value(json_object_get(json_array_get(rows, i), "label"));
            size_t n = strlen(legends[i]) - strlen("></text>");

            ck_assert_msg(label && strlen(label) == n && strncmp(label, legends[i] + 1, n) == 0,
                          "row %zu is labelled %s", i, label ? label : "(none)");
        }
        ck_assert_int_eq(json_array_size(tuned), 2);
        for (size_t i = 0; i < 2; i++) {
            json_t *d = json_object_get(json_array_get(tuned, i), "default");

            ck_assert_str_eq(json_string_value(json_object_get(d, "axis")), axes[_i]);
            ck_assert_double_eq(json_number_value(json_object_get(d, "multiplier")), 1.0);
        }
        json_decref(x);
    }
    free(r.body);
    svg = get_svg(&s, xpath, ALICE);
    for (int i = 0; i < 6; i++) {
        ck_assert_msg(strstr(svg, legends[i]), "no legend %s", legends[i]);
        series_colour(svg, i, colour[i], sizeof colour[i]);
        ck_assert_msg(colour[i][0] == '#', "series %d has no colour", i);
    }
    ck_assert_str_eq(colour[0], colour[1]);
    ck_assert_str_eq(colour[0], colour[2]);
    ck_assert_str_eq(colour[3], colour[5]);
    ck_assert_str_ne(colour[0], colour[3]);
    /* the second run of each variant has the second dash, in its curve
       and its legend line: four in all */
    {
        int dashes = 0;

        for (const char *p = svg; (p = strstr(p, "stroke-dasharray=\"7 3\"")); p++)
            dashes++;
        ck_assert_int_eq(dashes, 4);
    }
    free(svg);
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/* strcasestr is a GNU extension; this is the plain version. */
static const char *strcasestr_portable(const char *hay, const char *needle)
{
    size_t n = strlen(needle);

    for (; *hay; hay++)
        if (strncasecmp(hay, needle, n) == 0)
            return hay;
    return NULL;
}

/* One GET with its response headers, as one string. */
struct got {
    long status;
    char headers[4096];
    size_t hlen;
    char *body;
    size_t len;
};

static size_t got_header(char *p, size_t sz, size_t n, void *ctx)
{
    struct got *g = ctx;
    size_t len = sz * n;

    if (g->hlen + len < sizeof g->headers) {
        memcpy(g->headers + g->hlen, p, len);
        g->hlen += len;
        g->headers[g->hlen] = '\0';
    }
    return len;
}

static size_t got_body(char *p, size_t sz, size_t n, void *ctx)
{
    struct got *g = ctx;
    size_t len = sz * n;

    g->body = realloc(g->body, g->len + len + 1);
    memcpy(g->body + g->len, p, len);
    g->len += len;
    g->body[g->len] = '\0';
    return len;
}

static struct got get(const struct server *s, const char *path, const char *header)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = header ? curl_slist_append(NULL, header) : NULL;
    struct got g = {0};
    char url[256];

    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", s->port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, got_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &g);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, got_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &g);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
    curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);    /* send "/ui/.." as it is */
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    ck_assert_int_eq(curl_easy_perform(c), CURLE_OK);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (!g.body)
        g.body = calloc(1, 1);
    return g;
}

/* The value of header name (with its ": "), up to the end of its line. */
static void header_value(const struct got *g, const char *name, char *out, size_t len)
{
    char key[64];
    const char *p, *e;

    snprintf(key, sizeof key, "\n%s: ", name);
    out[0] = '\0';
    if (!(p = strcasestr_portable(g->headers, key)))
        return;
    p += strlen(key);
    e = strpbrk(p, "\r\n");
    snprintf(out, len, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
}

START_TEST(test_dashboard_files)
{
    static const struct {
        const char *path, *type, *phrase;
    } files[] = {
        {"/", "text/html; charset=utf-8", "<script src=\"/ui/app.js\" defer></script>"},
        {"/ui/index.html", "text/html; charset=utf-8", "<title>ecopt</title>"},
        {"/ui/app.js", "text/javascript; charset=utf-8", "readEvents"},
        {"/ui/app.css", "text/css; charset=utf-8", ".badge"},
    };
    struct server s;
    char value[512], etag[64], inm[128];

    /* The test links the same service objects: web/ is in them. */
    ck_assert_uint_eq(ui_file_count(), 3);
    server_start(&s, 0);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        struct got g = get(&s, files[i].path, NULL);
        ck_assert_msg(g.status == 200, "%s: %ld", files[i].path, g.status);
        header_value(&g, "Content-Type", value, sizeof value);
        ck_assert_str_eq(value, files[i].type);
        ck_assert_msg(strstr(g.body, files[i].phrase), "%s lacks %s", files[i].path,
                      files[i].phrase);
        header_value(&g, "Cache-Control", value, sizeof value);
        ck_assert_str_eq(value, "no-cache");
        header_value(&g, "X-Content-Type-Options", value, sizeof value);
        ck_assert_str_eq(value, "nosniff");
        header_value(&g, "Content-Security-Policy", value, sizeof value);
        if (strstr(files[i].type, "html"))
            ck_assert_msg(strstr(value, "default-src 'none'") && strstr(value, "script-src 'self'") &&
                          !strstr(value, "unsafe"), "CSP: %s", value);
        /* Unchanged: 304 with no body. */
        header_value(&g, "ETag", etag, sizeof etag);
        ck_assert_int_eq(etag[0], '"');
        snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
        free(g.body);
        g = get(&s, files[i].path, inm);
        ck_assert_int_eq(g.status, 304);
        ck_assert_uint_eq(g.len, 0);
        free(g.body);
        g = get(&s, files[i].path, "If-None-Match: \"0000000000000000\"");
        ck_assert_int_eq(g.status, 200);
        free(g.body);
    }
    /* The page is public (it holds no data); what it calls is not. */
    {
        struct got g = get(&s, "/ui/missing.js", NULL);
        ck_assert_int_eq(g.status, 404);
        ck_assert_ptr_nonnull(strstr(g.body, "no dashboard file 'missing.js'"));
        free(g.body);
        g = get(&s, "/ui/..", NULL);
        ck_assert_msg(g.status == 400 || g.status == 404, "/ui/..: %ld", g.status);
        ck_assert_ptr_nonnull(strstr(g.body, "\"status\":"));
        free(g.body);
        g = get(&s, "/v1/jobs", NULL);
        ck_assert_int_eq(g.status, 401);
        free(g.body);
    }
    server_stop(&s, SIGTERM);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plotroutes");
    TCase *tc = tcase_create("server");
    int rc;

    curl_global_init(CURL_GLOBAL_ALL);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_dashboard_files);
    tcase_add_test(tc, test_job_plot);
    tcase_add_test(tc, test_long_run_is_bounded);
    tcase_add_test(tc, test_experiment_plot);
    tcase_add_loop_test(tc, test_tuned_plot, 0, 2);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
