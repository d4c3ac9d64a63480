/*
 * The ecopt client: submit, list, show, watch, metrics, cancel, delete,
 * experiment and datasets, over libcurl against ECOPT_URL with
 * ECOPT_TOKEN. Errors from the service are shown as their problem+json
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
#include <unistd.h>

#include "cmd.h"
#include "describe.h"
#include "outcome.h"

/* Exit codes of the client, beside cmd.h's. */
enum { EXIT_SERVICE = 1, EXIT_CONNECT = 4 };

struct client {
    char url[512];
    char token[256];
};

struct buf {
    char *data;
    size_t len;
};

static size_t to_buf(char *p, size_t sz, size_t n, void *ctx)
{
    struct buf *b = ctx;
    char *nd = realloc(b->data, b->len + sz * n + 1);

    if (!nd)
        return 0;
    b->data = nd;
    memcpy(b->data + b->len, p, sz * n);
    b->len += sz * n;
    b->data[b->len] = '\0';
    return sz * n;
}

static void client_init(struct client *c, const char *url, const char *token)
{
    const char *u = url ? url : getenv("ECOPT_URL");
    const char *t = token ? token : getenv("ECOPT_TOKEN");

    snprintf(c->url, sizeof c->url, "%s", u && *u ? u : "http://127.0.0.1:8080");
    size_t l = strlen(c->url);
    while (l && c->url[l - 1] == '/')
        c->url[--l] = '\0';
    snprintf(c->token, sizeof c->token, "%s", t ? t : "");
}

/*
 * Text from the service as a terminal may show it: control characters
 * (C0, DEL and C1 as UTF-8) written as \xNN, so that a job's name cannot
 * move the cursor, ring, or write the clipboard (OSC 52). The result lives
 * until 16 more calls; long text is cut with "...".
 */
static const char *term_text(const char *s)
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
static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? term_text(s) : "-";
}

/* Prints a problem+json reply the way people read it. */
static void print_problem(long status, const char *body)
{
    json_t *doc = json_loads(body ? body : "", 0, NULL);
    const char *detail = json_string_value(json_object_get(doc, "detail"));
    json_t *errors = json_object_get(doc, "errors");

    if (!detail || json_array_size(errors) > 1) {
        if (detail && !errors)
            fprintf(stderr, "ecopt: %s (HTTP %ld)\n", term_text(detail), status);
        else if (json_array_size(errors)) {
            fprintf(stderr, "ecopt: %s (HTTP %ld):\n", str(doc, "title"), status);
            for (size_t i = 0; i < json_array_size(errors); i++) {
                json_t *e = json_array_get(errors, i);
                fprintf(stderr, "  %s: %s\n", str(e, "field"), str(e, "detail"));
            }
        } else
            fprintf(stderr, "ecopt: HTTP %ld: %.300s\n", status, term_text(body ? body : ""));
    } else {
        fprintf(stderr, "ecopt: %s (HTTP %ld)\n", term_text(detail), status);
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
static long request(const struct client *c, const char *method, const char *path,
                    const char *body, size_t body_len, const char *accept,
                    struct buf *out)
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
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
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
static int call(const struct client *c, const char *method, const char *path,
                const char *body, json_t **doc)
{
    struct buf b;
    long status = request(c, method, path, body, body ? strlen(body) : 0, NULL, &b);
    int rc = EXIT_OK;

    if (status < 0)
        rc = EXIT_CONNECT;
    else if (status >= 400) {
        print_problem(status, b.data);
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

static char *slurp_file(const char *path)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    struct buf b = {NULL, 0};
    char chunk[8192];
    size_t n;

    if (!f) {
        fprintf(stderr, "ecopt: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (!to_buf(chunk, 1, n, &b))
            break;
    if (f != stdin)
        fclose(f);
    if (!b.data)
        b.data = calloc(1, 1);
    return b.data;
}

static void print_json(json_t *doc)
{
    /* 17 significant digits: every double as it is, as the CSV has it. */
    json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    putchar('\n');
}


/* ---- subcommands ---------------------------------------------------------- */

static const char submit_usage[] =
    "usage: ecopt submit [JOB.json | -] [--set KEY=JSON]... [flags]\n"
    "\n"
    "Submits a job and prints its id. The spec comes from a file (or stdin),\n"
    "flags, or both (flags win):\n"
    "  --dataset NAME --algorithm A --compressor TYPE --k K --workers N\n"
    "  --lambda2-rel X --max-rounds R --target T --name NAME\n"
    "  --set KEY=VALUE   any spec key; VALUE is JSON (a bare word is a string)\n"
    "  --watch           then watch it to the end (exit status as watch)\n";

static int set_kv(json_t *spec, const char *key, const char *value)
{
    json_t *v = json_loads(value, JSON_DECODE_ANY, NULL);

    if (!v)
        v = json_string(value);
    return json_object_set_new(spec, key, v);
}

static int cmd_watch_id(const struct client *c, const char *id);

static int cmd_submit(const struct client *c, int argc, char **argv)
{
    static const struct option opts[] = {
        {"dataset", required_argument, NULL, 'd'},
        {"algorithm", required_argument, NULL, 'a'},
        {"compressor", required_argument, NULL, 'c'},
        {"k", required_argument, NULL, 'k'},
        {"workers", required_argument, NULL, 'w'},
        {"lambda2-rel", required_argument, NULL, 'l'},
        {"max-rounds", required_argument, NULL, 'r'},
        {"target", required_argument, NULL, 't'},
        {"name", required_argument, NULL, 'n'},
        {"set", required_argument, NULL, 's'},
        {"watch", no_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    json_t *spec = NULL, *doc = NULL, *comp = NULL;
    char *text = NULL;
    int ch, rc, watch = 0;

    optind = 1;
    /* A file first, if given, so that flags can override it. */
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
            if (i > 1 && argv[i - 1][0] == '-' && argv[i - 1][1] == '-' &&
                strcmp(argv[i - 1], "--watch") != 0 && !strchr(argv[i - 1], '='))
                continue;       /* the value of a flag */
            if (!(text = slurp_file(argv[i])))
                return EXIT_USAGE;
            json_error_t je;
            if (!(spec = json_loads(text, 0, &je)) || !json_is_object(spec)) {
                fprintf(stderr, "ecopt: %s: not a JSON object (%s, line %d)\n", argv[i],
                        je.text, je.line);
                free(text);
                json_decref(spec);
                return EXIT_USAGE;
            }
            free(text);
            break;
        }
    }
    if (!spec)
        spec = json_object();
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char key[64];
        switch (ch) {
        case 'd': json_object_set_new(spec, "dataset", json_string(optarg)); break;
        case 'a': json_object_set_new(spec, "algorithm", json_string(optarg)); break;
        case 'n': json_object_set_new(spec, "name", json_string(optarg)); break;
        case 'c':
        case 'k':
            comp = json_object_get(spec, "compressor");
            if (!json_is_object(comp)) {
                comp = json_object();
                json_object_set_new(spec, "compressor", comp);
            }
            if (ch == 'c')
                json_object_set_new(comp, "type", json_string(optarg));
            else
                set_kv(comp, "k", optarg);
            break;
        case 'w': set_kv(spec, "workers", optarg); break;
        case 'l': set_kv(spec, "lambda2_rel", optarg); break;
        case 'r': set_kv(spec, "max_rounds", optarg); break;
        case 't': set_kv(spec, "target", optarg); break;
        case 's': {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof key) {
                fprintf(stderr, "ecopt submit: --set needs KEY=VALUE (got '%s')\n", optarg);
                json_decref(spec);
                return EXIT_USAGE;
            }
            memcpy(key, optarg, (size_t)(eq - optarg));
            key[eq - optarg] = '\0';
            set_kv(spec, key, eq + 1);
            break;
        }
        case 'W': watch = 1; break;
        case 'h':
            fputs(submit_usage, stdout);
            json_decref(spec);
            return EXIT_OK;
        default:
            fputs(submit_usage, stderr);
            json_decref(spec);
            return EXIT_USAGE;
        }
    }
    text = json_dumps(spec, JSON_COMPACT);
    json_decref(spec);
    rc = call(c, "POST", "/v1/jobs", text, &doc);
    free(text);
    if (rc != EXIT_OK)
        return rc;
    printf("%s %s\n", str(doc, "id"), str(doc, "state"));
    fflush(stdout);
    if (watch) {
        char id[64];
        snprintf(id, sizeof id, "%s", str(doc, "id"));
        json_decref(doc);
        return cmd_watch_id(c, id);
    }
    json_decref(doc);
    return EXIT_OK;
}

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

static int cmd_list(const struct client *c, int argc, char **argv)
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
        if ((rc = call(c, "GET", path, NULL, &doc)) != EXIT_OK)
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
        print_json(all);
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
                     str(j, "reason"));
        else
            snprintf(why, sizeof why, "%s", str(j, "stop_reason"));
        /* A job with no row yet (queued, or starting) has neither. */
        if (json_is_integer(round))
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(round));
        if (json_is_number(gap))
            snprintf(gbuf, sizeof gbuf, "%.3e", json_number_value(gap));
        printf("%-20s %-11s %-16s %-15s %-13s %-8s %-12s %10s %12s  %s\n", str(j, "id"),
               str(j, "state"), str(j, "outcome"), why, str(j, "algorithm"),
               str(j, "compressor"), str(j, "dataset"), rbuf, gbuf,
               name && *name ? term_text(name) : "-");
    }
    json_decref(all);
    return EXIT_OK;
}

/* show, cancel, delete: one id, one request. */
static int cmd_simple(const struct client *c, const char *what, int argc, char **argv)
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
        rc = call(c, "GET", path, NULL, &doc);
    } else if (strcmp(what, "cancel") == 0) {
        snprintf(path, sizeof path, "/v1/jobs/%s/cancel", argv[1]);
        rc = call(c, "POST", path, "{}", &doc);
    } else {
        snprintf(path, sizeof path, "/v1/jobs/%s", argv[1]);
        rc = call(c, "DELETE", path, NULL, NULL);
    }
    if (rc == EXIT_OK && doc) {
        if (strcmp(what, "show") == 0)
            print_json(doc);
        else
            printf("%s %s\n", str(doc, "id"),
                   json_is_true(json_object_get(doc, "cancel_requested")) ? "cancelling"
                                                                          : str(doc, "state"));
    } else if (rc == EXIT_OK) {
        printf("%s deleted\n", argv[1]);
    }
    json_decref(doc);
    return rc;
}

static int cmd_metrics(const struct client *c, int argc, char **argv)
{
    const char *id = NULL, *format = "table";
    long long after = -1;
    struct buf b;
    int header = 1;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--format") == 0 && i + 1 < argc)
            format = argv[++i];
        else if (strcmp(argv[i], "--help") == 0) {
            printf("usage: ecopt metrics JOB_ID [--format table|csv|json]\n");
            return EXIT_OK;
        } else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else {
            fprintf(stderr, "usage: ecopt metrics JOB_ID [--format table|csv|json]\n");
            return EXIT_USAGE;
        }
    }
    if (!id || (strcmp(format, "table") && strcmp(format, "csv") && strcmp(format, "json"))) {
        fprintf(stderr, "usage: ecopt metrics JOB_ID [--format table|csv|json]\n");
        return EXIT_USAGE;
    }
    json_t *all = json_array();
    for (;;) {
        char path[256];
        json_t *doc, *rows;
        long status;

        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&limit=10000", id, after);
        status = request(c, "GET", path, NULL, 0, NULL, &b);
        if (status < 0 || status >= 400) {
            if (status >= 400)
                print_problem(status, b.data);
            free(b.data);
            json_decref(all);
            return status < 0 ? EXIT_CONNECT : EXIT_SERVICE;
        }
        doc = json_loads(b.data, 0, NULL);
        free(b.data);
        rows = json_object_get(doc, "rows");
        for (size_t i = 0; i < json_array_size(rows); i++)
            json_array_append(all, json_array_get(rows, i));
        after = json_integer_value(json_object_get(doc, "next_after"));
        int more = json_is_true(json_object_get(doc, "more"));
        json_decref(doc);
        if (!more)
            break;
    }
    if (strcmp(format, "json") == 0) {
        print_json(all);
    } else {
        static const char *cols[] = {DESCRIBE_METRIC_FIELDS(DESCRIBE_METRIC_NAME)};
        const size_t ncols = sizeof cols / sizeof cols[0];
        int csv = strcmp(format, "csv") == 0;
        for (size_t i = 0; i < json_array_size(all); i++) {
            json_t *r = json_array_get(all, i);
            if (header) {
                for (size_t k = 0; k < ncols; k++)
                    printf(csv ? "%s%s" : "%s%12s", k && csv ? "," : (k ? " " : ""), cols[k]);
                putchar('\n');
                header = 0;
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
    json_decref(all);
    return EXIT_OK;
}

/* ---- watch: the event stream, drawn ------------------------------------------ */

struct watch_ctx {
    struct buf line;       /* the unfinished part of the stream */
    char event[32];
    int tty;
    char state[32];
    char outcome[32];      /* "" until the job ends (or from an older server) */
    char reason[512];
    double rel_gap;
    long long round;
};

static void on_event(struct watch_ctx *w, const char *event, const char *data)
{
    json_t *doc = json_loads(data, 0, NULL);

    if (strcmp(event, "metric") == 0) {
        w->round = json_integer_value(json_object_get(doc, "round"));
        w->rel_gap = json_number_value(json_object_get(doc, "rel_gap"));
        if (w->tty) {
            double frac = w->rel_gap > 0 ? fmin(1.0, -log10(w->rel_gap) / 9.0) : 1.0;
            int fill = (int)(fmax(0.0, frac) * 30);
            fprintf(stderr, "\r[%.*s%*s] round %lld  rel gap %.3e ", fill,
                    "##############################", 30 - fill, "", w->round, w->rel_gap);
        }
    } else if (strcmp(event, "state") == 0) {
        snprintf(w->state, sizeof w->state, "%s", str(doc, "state"));
        json_t *o = json_object_get(doc, "outcome");
        snprintf(w->outcome, sizeof w->outcome, "%s",
                 json_is_string(o) ? term_text(json_string_value(o)) : "");
        json_t *r = json_object_get(doc, "reason");
        snprintf(w->reason, sizeof w->reason, "%s",
                 json_is_string(r) ? term_text(json_string_value(r)) : "");
        if (!w->tty)
            fprintf(stderr, "state %s%s%s\n", w->state, w->reason[0] ? ": " : "", w->reason);
    }
    json_decref(doc);
}

static size_t on_stream(char *p, size_t sz, size_t n, void *ctx)
{
    struct watch_ctx *w = ctx;
    char *nl;

    if (!to_buf(p, sz, n, &w->line))
        return 0;
    /* Events are lines; "event:" names the next "data:". */
    while ((nl = memchr(w->line.data, '\n', w->line.len))) {
        *nl = '\0';
        if (strncmp(w->line.data, "event: ", 7) == 0)
            snprintf(w->event, sizeof w->event, "%s", w->line.data + 7);
        else if (strncmp(w->line.data, "data: ", 6) == 0)
            on_event(w, w->event, w->line.data + 6);
        size_t used = (size_t)(nl + 1 - w->line.data);
        memmove(w->line.data, nl + 1, w->line.len - used + 1);
        w->line.len -= used;
    }
    return sz * n;
}

static int cmd_watch_id(const struct client *c, const char *id)
{
    struct watch_ctx w = {{NULL, 0}, "", isatty(2), "", "", "", NAN, -1};
    enum outcome outcome;
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = NULL;
    char url[1024], line[512];
    long status = 0;
    CURLcode rc;

    snprintf(url, sizeof url, "%s/v1/jobs/%s/events", c->url, id);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &w);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
    if (c->token[0]) {
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->token);
        hdr = curl_slist_append(hdr, line);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    if (rc != CURLE_OK && !(status == 200 && w.state[0])) {
        fprintf(stderr, "ecopt: cannot reach %s: %s\n", url, curl_easy_strerror(rc));
        free(w.line.data);
        return EXIT_CONNECT;
    }
    if (status >= 400) {
        print_problem(status, w.line.data);
        free(w.line.data);
        return EXIT_SERVICE;
    }
    free(w.line.data);
    if (w.tty)
        fputc('\n', stderr);
    printf("%s %s, %s: %s (round %lld, rel gap %.4g)\n", id, w.state,
           w.outcome[0] ? w.outcome : "no outcome", w.reason, w.round, w.rel_gap);
    /* Only the target reached is a success (format/outcome.h). */
    if (outcome_from_name(w.outcome, &outcome) == 0)
        return outcome_exit_status(outcome);
    return EXIT_JOB_FAILED;
}

static int cmd_watch(const struct client *c, int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ecopt watch JOB_ID\n\nFollows the job's progress to its end; "
                "the exit status says its outcome:\n"
                "  0 target_reached, 5 budget_exhausted (a budget ran out above the\n"
                "  target, the gap not above its start's), 3 worse_than_start,\n"
                "  non_finite, cancelled or failed.\n");
        return help ? EXIT_OK : EXIT_USAGE;
    }
    return cmd_watch_id(c, argv[1]);
}

static int cmd_experiment(const struct client *c, int argc, char **argv)
{
    char path[256], *text;
    json_t *doc = NULL, *table;
    int rc;

    if (argc != 3 || (strcmp(argv[1], "submit") && strcmp(argv[1], "show"))) {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ecopt experiment submit EXPERIMENT.json | show EXPERIMENT_ID\n");
        return help ? EXIT_OK : EXIT_USAGE;
    }
    if (strcmp(argv[1], "submit") == 0) {
        if (!(text = slurp_file(argv[2])))
            return EXIT_USAGE;
        rc = call(c, "POST", "/v1/experiments", text, &doc);
        free(text);
    } else {
        snprintf(path, sizeof path, "/v1/experiments/%s", argv[2]);
        rc = call(c, "GET", path, NULL, &doc);
    }
    if (rc != EXIT_OK)
        return rc;
    printf("experiment %s\n", str(doc, "id"));
    printf("%-20s %-13s %-8s %-11s %11s %14s %12s\n", "JOB", "ALGORITHM", "COMPR", "STATE",
           "TO TARGET", "BITS UP", "FINAL GAP");
    table = json_object_get(doc, "comparison");
    for (size_t i = 0; i < json_array_size(table); i++) {
        json_t *r = json_array_get(table, i);
        json_t *rounds = json_object_get(r, "rounds_to_target");
        json_t *bits = json_object_get(r, "bits_up_to_target");
        json_t *gap = json_object_get(r, "final_rel_gap");
        char rbuf[32] = "not reached", bbuf[32] = "-";
        if (json_is_integer(rounds)) {
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(rounds));
            snprintf(bbuf, sizeof bbuf, "%.4g", json_number_value(bits));
        }
        printf("%-20s %-13s %-8s %-11s %11s %14s %12.3e\n", str(r, "job"),
               str(r, "algorithm"), str(r, "compressor"), str(r, "state"), rbuf, bbuf,
               json_is_number(gap) ? json_number_value(gap) : NAN);
    }
    /* A tuned experiment: per variant its default run beside its best. */
    table = json_object_get(doc, "tuned");
    if (json_array_size(table))
        printf("\n%-8s %-13s %16s %8s %16s %14s\n", "VARIANT", "ALGORITHM",
               "DEFAULT ROUNDS", "BEST", "BEST ROUNDS", "BEST BITS UP");
    for (size_t i = 0; i < json_array_size(table); i++) {
        json_t *t = json_array_get(table, i), *best = json_object_get(t, "best");
        json_t *def = json_object_get(t, "default");
        json_t *dr = json_object_get(def, "rounds_to_target");
        char dbuf[32] = "not reached", mbuf[32] = "-", rbuf[32] = "-", bbuf[32] = "-";

        if (json_is_integer(dr))
            snprintf(dbuf, sizeof dbuf, "%lld", (long long)json_integer_value(dr));
        if (json_is_object(best)) {
            snprintf(mbuf, sizeof mbuf, "x%g",
                     json_number_value(json_object_get(best, "step_multiplier")));
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(
                                                    json_object_get(best, "rounds_to_target")));
            snprintf(bbuf, sizeof bbuf, "%.4g", json_number_value(
                                                    json_object_get(best, "bits_up_to_target")));
        }
        printf("%-8lld %-13s %16s %8s %16s %14s%s%s\n",
               (long long)json_integer_value(json_object_get(t, "variant")),
               str(t, "algorithm"), dbuf, mbuf, rbuf, bbuf, json_is_object(best) ? "" : "  ",
               json_is_object(best) ? "" : str(t, "detail"));
    }
    json_decref(doc);
    return EXIT_OK;
}

/* ---- datasets ------------------------------------------------------------ */

static int upload_progress(void *ctx, curl_off_t dltotal, curl_off_t dlnow,
                           curl_off_t ultotal, curl_off_t ulnow)
{
    (void)ctx;
    (void)dltotal;
    (void)dlnow;
    if (ultotal > 0) {
        int fill = (int)(30 * ulnow / ultotal);
        fprintf(stderr, "\r[%.*s%*s] %.1f / %.1f MB ", fill,
                "##############################", 30 - fill, "", ulnow / 1e6,
                ultotal / 1e6);
    }
    return 0;
}

static int cmd_datasets(const struct client *c, int argc, char **argv)
{
    static const char usage[] =
        "usage: ecopt datasets                      list the datasets with their stats\n"
        "       ecopt datasets upload FILE [--name NAME] [--replace]\n";
    json_t *doc = NULL, *list;
    int rc;

    if (argc == 1) {
        if ((rc = call(c, "GET", "/v1/datasets", NULL, &doc)) != EXIT_OK)
            return rc;
        list = json_object_get(doc, "datasets");
        printf("%-24s %9s %7s %10s %12s  %s\n", "NAME", "ROWS", "D", "NNZ", "BYTES", "SHA256");
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *d = json_array_get(list, i);
            if (json_object_get(d, "error"))
                printf("%-24s %s\n", str(d, "name"), str(d, "error"));
            else
                printf("%-24s %9lld %7lld %10lld %12lld  %.16s\n", str(d, "name"),
                       (long long)json_integer_value(json_object_get(d, "rows")),
                       (long long)json_integer_value(json_object_get(d, "d")),
                       (long long)json_integer_value(json_object_get(d, "nnz")),
                       (long long)json_integer_value(json_object_get(d, "bytes")),
                       str(d, "sha256"));
        }
        json_decref(doc);
        return EXIT_OK;
    }
    if (argc >= 3 && strcmp(argv[1], "upload") == 0) {
        const char *file = argv[2], *name = NULL;
        int replace = 0;
        for (int i = 3; i < argc; i++) {
            if (strcmp(argv[i], "--name") == 0 && i + 1 < argc)
                name = argv[++i];
            else if (strcmp(argv[i], "--replace") == 0)
                replace = 1;
            else {
                fputs(usage, stderr);
                return EXIT_USAGE;
            }
        }
        if (!name) {
            name = strrchr(file, '/');
            name = name ? name + 1 : file;
        }
        FILE *f = fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "ecopt: %s: %s\n", file, strerror(errno));
            return EXIT_USAGE;
        }
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        CURL *h = curl_easy_init();
        struct curl_slist *hdr = NULL;
        struct buf b = {NULL, 0};
        char url[1024], line[512], *esc = curl_easy_escape(h, name, 0);
        long status = 0;
        snprintf(url, sizeof url, "%s/v1/datasets?name=%s%s", c->url, esc ? esc : "",
                 replace ? "&replace=true" : "");
        curl_free(esc);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READDATA, f);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, to_buf);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        hdr = curl_slist_append(hdr, "Content-Type: application/octet-stream");
        hdr = curl_slist_append(hdr, "Expect:");
        if (c->token[0]) {
            snprintf(line, sizeof line, "Authorization: Bearer %s", c->token);
            hdr = curl_slist_append(hdr, line);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        if (isatty(2)) {
            curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, upload_progress);
        }
        CURLcode cr = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        curl_easy_cleanup(h);
        fclose(f);
        if (isatty(2))
            fputc('\n', stderr);
        if (cr != CURLE_OK && status == 0) {
            fprintf(stderr, "ecopt: cannot reach %s: %s\n", url, curl_easy_strerror(cr));
            free(b.data);
            return EXIT_CONNECT;
        }
        if (status >= 400) {
            print_problem(status, b.data);
            free(b.data);
            return EXIT_SERVICE;
        }
        doc = json_loads(b.data ? b.data : "", 0, NULL);
        printf("%s: %lld rows, d = %lld, nnz = %lld, sha256 %s\n", str(doc, "name"),
               (long long)json_integer_value(json_object_get(doc, "rows")),
               (long long)json_integer_value(json_object_get(doc, "d")),
               (long long)json_integer_value(json_object_get(doc, "nnz")), str(doc, "sha256"));
        json_decref(doc);
        free(b.data);
        return EXIT_OK;
    }
    int help = argc == 2 && strcmp(argv[1], "--help") == 0;
    fputs(usage, help ? stdout : stderr);
    return help ? EXIT_OK : EXIT_USAGE;
}

static const char client_usage[] =
    "client commands (ECOPT_URL, default http://127.0.0.1:8080; ECOPT_TOKEN):\n"
    "  submit [JOB.json] [flags]   submit a job\n"
    "  list [filters] [--limit N] [--json]\n"
    "                              list jobs (ecopt list --help)\n"
    "  show JOB_ID                 a job as JSON\n"
    "  watch JOB_ID                follow a job to its end\n"
    "  metrics JOB_ID [--format table|csv|json]\n"
    "  cancel JOB_ID | delete JOB_ID\n"
    "  experiment submit FILE | experiment show ID\n"
    "  datasets | datasets upload FILE [--name NAME] [--replace]\n"
    "Options before the command: --url URL, --token TOKEN.\n";

const char *cmd_client_usage(void)
{
    return client_usage;
}

int cmd_client(const char *cmd, int argc, char **argv, const char *url,
               const char *token)
{
    struct client c;
    int rc;

    client_init(&c, url, token);
    curl_global_init(CURL_GLOBAL_ALL);
    if (strcmp(cmd, "submit") == 0)
        rc = cmd_submit(&c, argc, argv);
    else if (strcmp(cmd, "list") == 0)
        rc = cmd_list(&c, argc, argv);
    else if (strcmp(cmd, "show") == 0 || strcmp(cmd, "cancel") == 0 ||
             strcmp(cmd, "delete") == 0)
        rc = cmd_simple(&c, cmd, argc, argv);
    else if (strcmp(cmd, "watch") == 0)
        rc = cmd_watch(&c, argc, argv);
    else if (strcmp(cmd, "metrics") == 0)
        rc = cmd_metrics(&c, argc, argv);
    else if (strcmp(cmd, "experiment") == 0)
        rc = cmd_experiment(&c, argc, argv);
    else if (strcmp(cmd, "datasets") == 0)
        rc = cmd_datasets(&c, argc, argv);
    else
        rc = -1;
    curl_global_cleanup();
    return rc;
}
