/*
 * The ecopt client: what its commands share (client.h), and list, show,
 * metrics, cancel and delete, over libcurl against ECOPT_URL with
 * ECOPT_TOKEN; the other commands are in cmd_*.c, and commands.c picks
 * one. Errors from the service are shown as their problem+json
 * detail; connection errors say what was tried.
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "describe.h"

size_t client_to_buf(char *p, size_t sz, size_t n, void *ctx)
{
    struct client_buf *b = ctx;
    char *nd = realloc(b->data, b->len + sz * n + 1);

    if (!nd)
        return 0;
    b->data = nd;
    memcpy(b->data + b->len, p, sz * n);
    b->len += sz * n;
    b->data[b->len] = '\0';
    return sz * n;
}

/*
 * Text from the service as a terminal may show it: control characters
 * (C0, DEL and C1 as UTF-8) written as \xNN, so that a job's name cannot
 * move the cursor, ring, or write the clipboard (OSC 52). The result lives
 * until 16 more calls; long text is cut with "...".
 */
const char *client_term_text(const char *s)
{
    static char ring[16][1024];
    static unsigned next;
    char *out = ring[next++ % 16];
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0, cap = sizeof ring[0];

    for (size_t i = 0; u[i]; i++) {
        int c1 = u[i] == 0xc2 && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f;

        if (k + 8 >= cap) {
            memcpy(out + k, "...", 4);
            return out;
        }
        if (u[i] < 0x20 || u[i] == 0x7f || c1) {
            k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c1 ? u[++i] : u[i]);
        } else {
            out[k++] = (char)u[i];
        }
    }
    out[k] = '\0';
    return out;
}

/* A string member as a terminal may show it (term_text), "-" if none. */
const char *client_str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? client_term_text(s) : "-";
}

/* Prints a problem+json reply the way people read it. */
void client_problem(long status, const char *body)
{
    json_t *doc = json_loads(body ? body : "", 0, NULL);
    const char *detail = json_string_value(json_object_get(doc, "detail"));
    json_t *errors = json_object_get(doc, "errors");

    if (!detail || json_array_size(errors) > 1) {
        if (detail && !errors)
            fprintf(stderr, "ecopt: %s (HTTP %ld)\n", client_term_text(detail), status);
        else if (json_array_size(errors)) {
            fprintf(stderr, "ecopt: %s (HTTP %ld):\n", client_str(doc, "title"), status);
            for (size_t i = 0; i < json_array_size(errors); i++) {
                json_t *e = json_array_get(errors, i);
                fprintf(stderr, "  %s: %s\n", client_str(e, "field"), client_str(e, "detail"));
            }
        } else
            fprintf(stderr, "ecopt: HTTP %ld: %.300s\n", status, client_term_text(body ? body : ""));
    } else {
        fprintf(stderr, "ecopt: %s (HTTP %ld)\n", client_term_text(detail), status);
    }
    if (status == 401)
        fprintf(stderr, "ecopt: give a secret of the server's tokens file in ECOPT_TOKEN "
                "or --token (ECOPT_TOKEN is %s)\n",
                getenv("ECOPT_TOKEN") && *getenv("ECOPT_TOKEN") ? "set" : "not set");
    json_decref(doc);
}

/*
 * One request. Returns the HTTP status (the body in *out, malloc'd), or
 * -1 when the service could not be reached (already reported).
 */
long client_request(const struct client *c, const char *method, const char *path,
                    const char *body, size_t body_len, const char *accept,
                    struct client_buf *out)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = NULL;
    char url[1024], line[512];
    long status = -1;
    CURLcode rc;

    out->data = NULL;
    out->len = 0;
    snprintf(url, sizeof url, "%s%s", c->url, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, client_to_buf);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    if (c->token[0]) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->token);
        hdr = curl_slist_append(hdr, line);
    }
    if (body) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    if (accept) {
        snprintf(line, sizeof line, "Accept: %s", accept);
        hdr = curl_slist_append(hdr, line);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    rc = curl_easy_perform(h);
    if (rc != CURLE_OK)
        fprintf(stderr, "ecopt: cannot reach %s: %s (set ECOPT_URL or --url)\n", url,
                curl_easy_strerror(rc));
    else
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (!out->data)
        out->data = calloc(1, 1);
    return status;
}

/* Runs a request and turns its outcome into an exit code; on 2xx with
 * want_json, *doc receives the parsed body. */
int client_call(const struct client *c, const char *method, const char *path,
                const char *body, json_t **doc)
{
    struct client_buf b;
    long status = client_request(c, method, path, body, body ? strlen(body) : 0, NULL, &b);
    int rc = EXIT_OK;

    if (status < 0)
        rc = EXIT_CONNECT;
    else if (status >= 400) {
        client_problem(status, b.data);
        rc = EXIT_SERVICE;
    } else if (doc) {
        *doc = b.len ? json_loads(b.data, 0, NULL) : json_null();
        if (!*doc) {
            fprintf(stderr, "ecopt: the service sent something that is not JSON\n");
            rc = EXIT_SERVICE;
        }
    }
    free(b.data);
    return rc;
}

char *client_slurp(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    struct client_buf b = {NULL, 0};
    char chunk[8192];
    size_t n;

    if (!f) {
        fprintf(stderr, "ecopt: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!client_to_buf(chunk, 1, n, &b))
            break;
    if (f != stdin)
        fclose(f);
    if (!b.data)
        b.data = calloc(1, 1);
    return b.data;
}

void client_print_json(json_t *doc)
{
    /* 17 significant digits: every double as it is, as the CSV has it. */
    json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    putchar('\n');
}


/* ---- subcommands ---------------------------------------------------------- */

static const char list_usage[] =
    "usage: ecopt list [--state S] [--algorithm A] [--dataset D] [--label K[=V]]\n"
    "                  [--stop-reason R] [--filter F]... [--limit N] [--json]\n"
    "  --filter F  a filter on parameters or results, FIELD[_ne|_lt|_le|_gt|_ge]=VALUE:\n"
    "              k=5, step_multiplier_ge=2, reached=true, rel_gap_lt=1e-6\n"
    "              (GET /v1/vocabulary lists the job_fields); all must hold\n"
    "  --limit N   at most N jobs, newest first (1..100000, default 100)\n"
    "  --json      the jobs as a JSON array, every field, instead of a table\n";

#define LIST_PAGE_MAX 500
#define LIST_LIMIT_MAX 100000

/* Appends "&FIELD=VALUE" of a --filter FIELD=VALUE, both escaped; the
 * server judges the field and the value. -1 with a message when it is
 * not NAME=VALUE or does not fit. */
static int list_filter(const char *f, char *filters, size_t cap)
{
    const char *eq = strchr(f, '=');
    char *key, *k = NULL, *v = NULL;
    size_t l = strlen(filters);
    int rc = -1;

    if (!eq || eq == f) {
        fprintf(stderr, "ecopt list: --filter takes FIELD=VALUE (got '%s')\n", f);
        return -1;
    }
    key = strndup(f, (size_t)(eq - f));
    if (key && (k = curl_easy_escape(NULL, key, 0)) && (v = curl_easy_escape(NULL, eq + 1, 0)) &&
        (size_t)snprintf(filters + l, cap - l, "&%s=%s", k, v) < cap - l)
        rc = 0;
    else
        fprintf(stderr, "ecopt list: the filters are too long\n");
    if (rc < 0)
        filters[l] = '\0';
    curl_free(k);
    curl_free(v);
    free(key);
    return rc;
}

int cmd_list(const struct client *c, int argc, char **argv)
{
    char filters[2048] = "", path[2304], cursor[64] = "";
    json_t *all = json_array(), *doc = NULL;
    long long limit = 100;
    int as_json = 0, rc = EXIT_OK;

    for (int i = 1; i < argc; i++) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(opt, "--help") == 0) {
            fputs(list_usage, stdout);
            json_decref(all);
            return EXIT_OK;
        }
        if (strcmp(opt, "--json") == 0) {
            as_json = 1;
            continue;
        }
        if (!val || (strcmp(opt, "--state") && strcmp(opt, "--algorithm") &&
                     strcmp(opt, "--dataset") && strcmp(opt, "--label") &&
                     strcmp(opt, "--stop-reason") && strcmp(opt, "--limit") &&
                     strcmp(opt, "--filter"))) {
            fputs(list_usage, stderr);
            json_decref(all);
            return EXIT_USAGE;
        }
        i++;
        if (strcmp(opt, "--limit") == 0) {
            char *end;
            limit = strtoll(val, &end, 10);
            if (*end || end == val || limit < 1 || limit > LIST_LIMIT_MAX) {
                fprintf(stderr, "ecopt list: --limit must be an integer in 1..%d "
                        "(got '%s')\n", LIST_LIMIT_MAX, val);
                json_decref(all);
                return EXIT_USAGE;
            }
            continue;
        }
        if (strcmp(opt, "--filter") == 0 && list_filter(val, filters, sizeof filters) < 0) {
            json_decref(all);
            return EXIT_USAGE;
        }
        if (strcmp(opt, "--filter") == 0)
            continue;
        char *esc = curl_easy_escape(NULL, val, 0);
        size_t l = strlen(filters);
        snprintf(filters + l, sizeof filters - l, "&%s=%s",
                 strcmp(opt, "--stop-reason") == 0 ? "stop_reason" : opt + 2,
                 esc ? esc : "");
        curl_free(esc);
    }
    /* Pages of at most 500 (the server's cap), following next_cursor. */
    while ((long long)json_array_size(all) < limit) {
        long long want = limit - (long long)json_array_size(all);
        json_t *jobs, *next;

        snprintf(path, sizeof path, "/v1/jobs?limit=%lld%s%s%s",
                 want < LIST_PAGE_MAX ? want : LIST_PAGE_MAX, filters,
                 cursor[0] ? "&cursor=" : "", cursor);
        if ((rc = client_call(c, "GET", path, NULL, &doc)) != EXIT_OK)
            break;
        jobs = json_object_get(doc, "jobs");
        json_array_extend(all, jobs);
        /* A filtered page may hold no job and still have a cursor. */
        next = json_object_get(doc, "next_cursor");
        if (!json_is_string(next)) {
            json_decref(doc);
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
        json_decref(doc);
    }
    if (rc != EXIT_OK) {
        json_decref(all);
        return rc;
    }
    if (as_json) {
        client_print_json(all);
        json_decref(all);
        return EXIT_OK;
    }
    printf("%-20s %-11s %-16s %-15s %-13s %-8s %-12s %10s %12s  %s\n", "ID", "STATE",
           "OUTCOME", "STOP/WAIT", "ALGORITHM", "COMPR", "DATASET", "ROUND", "REL GAP",
           "NAME");
    for (size_t i = 0; i < json_array_size(all); i++) {
        json_t *j = json_array_get(all, i), *p = json_object_get(j, "progress");
        json_t *round = json_object_get(p, "round"), *gap = json_object_get(p, "rel_gap");
        json_t *pos = json_object_get(j, "position");
        const char *name = json_string_value(json_object_get(j, "name"));
        char why[64], rbuf[24] = "-", gbuf[24] = "-";

        /* An ended job: why it ended; a queued one: its place and why
           it waits (docs/api.md, "Why a job waits"). */
        if (json_is_integer(pos))
            snprintf(why, sizeof why, "#%lld %s", (long long)json_integer_value(pos),
                     client_str(j, "reason"));
        else
            snprintf(why, sizeof why, "%s", client_str(j, "stop_reason"));
        /* A job with no row yet (queued, or starting) has neither. */
        if (json_is_integer(round))
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(round));
        if (json_is_number(gap))
            snprintf(gbuf, sizeof gbuf, "%.3e", json_number_value(gap));
        printf("%-20s %-11s %-16s %-15s %-13s %-8s %-12s %10s %12s  %s\n",
               client_str(j, "id"), client_str(j, "state"), client_str(j, "outcome"), why,
               client_str(j, "algorithm"), client_str(j, "compressor"),
               client_str(j, "dataset"), rbuf, gbuf,
               name && *name ? client_term_text(name) : "-");
    }
    json_decref(all);
    return EXIT_OK;
}

int client_state_final(const char *state)
{
    return state && strcmp(state, "queued") && strcmp(state, "running");
}

void client_iso_time(char *buf, size_t len, long long ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char day[32];

    gmtime_r(&t, &tm);
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, len, "%s.%03lldZ", day, ms % 1000);
}

/* A member holding Unix milliseconds, as ISO 8601 for people. */
static void iso_member(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    char text[40];

    if (json_is_integer(v) && json_integer_value(v) > 0) {
        client_iso_time(text, sizeof text, (long long)json_integer_value(v));
        json_object_set_new(o, key, json_string(text));
    }
}

/* show, cancel, delete: one id, one request. */
int cmd_simple(const struct client *c, const char *what, int argc, char **argv)
{
    char path[256];
    json_t *doc = NULL;
    int rc;

    if (argc != 2 || argv[1][0] == '-') {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr, "usage: ecopt %s JOB_ID\n", what);
        return help ? EXIT_OK : EXIT_USAGE;
    }
    if (strcmp(what, "show") == 0) {
        snprintf(path, sizeof path, "/v1/jobs/%s", argv[1]);
        rc = client_call(c, "GET", path, NULL, &doc);
    } else if (strcmp(what, "cancel") == 0) {
        snprintf(path, sizeof path, "/v1/jobs/%s/cancel", argv[1]);
        rc = client_call(c, "POST", path, "{}", &doc);
    } else {
        snprintf(path, sizeof path, "/v1/jobs/%s", argv[1]);
        rc = client_call(c, "DELETE", path, NULL, NULL);
    }
    if (rc == EXIT_OK && doc) {
        if (strcmp(what, "show") == 0) {
            /* The API's times are Unix milliseconds; people read dates. */
            iso_member(doc, "created_at");
            iso_member(doc, "started_at");
            iso_member(doc, "finished_at");
            iso_member(json_object_get(doc, "progress"), "updated_at");
            client_print_json(doc);
        }
        else
            printf("%s %s\n", client_str(doc, "id"),
                   json_is_true(json_object_get(doc, "cancel_requested")) ? "cancelling"
                                                                          : client_str(doc, "state"));
    } else if (rc == EXIT_OK) {
        printf("%s deleted\n", argv[1]);
    }
    json_decref(doc);
    return rc;
}

/* Rows as a table or CSV, the header before the first row of all. */
static void print_rows(json_t *rows, int csv, int *header)
{
    static const char *cols[] = {DESCRIBE_METRIC_FIELDS(DESCRIBE_METRIC_NAME)};
    const size_t ncols = sizeof cols / sizeof cols[0];

    for (size_t i = 0; i < json_array_size(rows); i++) {
        json_t *r = json_array_get(rows, i);
        if (*header) {
            for (size_t k = 0; k < ncols; k++)
                printf(csv ? "%s%s" : "%s%12s", k && csv ? "," : (k ? " " : ""), cols[k]);
            putchar('\n');
            *header = 0;
        }
        for (size_t k = 0; k < ncols; k++) {
            json_t *v = json_object_get(r, cols[k]);
            const char *sep = k ? (csv ? "," : " ") : "";
            if (json_is_integer(v))
                printf(csv ? "%s%lld" : "%s%12lld", sep, (long long)json_integer_value(v));
            else if (json_is_number(v) && csv) {
                char num[32];
                describe_shortest(num, sizeof num, json_number_value(v));
                printf("%s%s", sep, num);
            } else if (json_is_number(v))
                printf("%s%12.5g", sep, json_number_value(v));
            else
                printf(csv ? "%s" : "%s%12s", sep, csv ? "" : "-");
        }
        putchar('\n');
    }
}

static const char metrics_usage[] =
    "usage: ecopt metrics JOB_ID [--format table|csv|json] [--follow]\n"
    "  --follow, -f   print rows as the job makes them, until it ends\n"
    "                 (with --format json, one row a line)\n";

/*
 * The job's rows, page by page; with follow, long-polls for more until a
 * page of a job that has ended is empty (a running job's long-poll answers
 * only with rows, or 204 at its wait).
 */
int cmd_metrics(const struct client *c, int argc, char **argv)
{
    const char *id = NULL, *format = "table";
    long long after = -1;
    struct client_buf b;
    int header = 1, follow = 0, csv, json;
    json_t *all = NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(argv[i], "--follow") == 0 || strcmp(argv[i], "-f") == 0)
            follow = 1;
        else if (strcmp(argv[i], "--help") == 0) {
            fputs(metrics_usage, stdout);
            return EXIT_OK;
        } else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else {
            fputs(metrics_usage, stderr);
            return EXIT_USAGE;
        }
    }
    if (!id || (strcmp(format, "table") && strcmp(format, "csv") && strcmp(format, "json"))) {
        fputs(metrics_usage, stderr);
        return EXIT_USAGE;
    }
    csv = strcmp(format, "csv") == 0;
    json = strcmp(format, "json") == 0;
    if (json && !follow)
        all = json_array();
    for (;;) {
        char path[256];
        json_t *doc, *rows;
        long status;
        int more;

        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&limit=10000%s", id, after,
                 follow ? "&wait=30" : "");
        status = client_request(c, "GET", path, NULL, 0, NULL, &b);
        if (status < 0 || status >= 400) {
            if (status >= 400)
                client_problem(status, b.data);
            free(b.data);
            json_decref(all);
            return status < 0 ? EXIT_CONNECT : EXIT_SERVICE;
        }
        doc = status == 204 ? NULL : json_loads(b.data, 0, NULL);
        free(b.data);
        if (status == 204)
            continue;           /* the wait ended without rows: ask again */
        rows = json_object_get(doc, "rows");
        if (all)
            json_array_extend(all, rows);
        else if (json)
            for (size_t i = 0; i < json_array_size(rows); i++) {
                json_dumpf(json_array_get(rows, i), stdout,
                           JSON_COMPACT | JSON_REAL_PRECISION(17));
                putchar('\n');
            }
        else
            print_rows(rows, csv, &header);
        fflush(stdout);
        if (json_is_integer(json_object_get(doc, "next_after")))
            after = json_integer_value(json_object_get(doc, "next_after"));
        more = json_is_true(json_object_get(doc, "more"));
        int empty = json_array_size(rows) == 0;
        json_decref(doc);
        if (!more && (!follow || empty))
            break;
    }
    if (all)
        client_print_json(all);
    json_decref(all);
    return EXIT_OK;
}
