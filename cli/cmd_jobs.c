/*
 * ecopt submit (a job from a file, flags or both, then watched), ecopt
 * retry (an ended job again, pointing back to it), ecopt compare (jobs
 * side by side) and ecopt plot (curves as SVG, for a file).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"

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

int cmd_submit(const struct client *c, int argc, char **argv)
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
            if (!(text = client_slurp(argv[i])))
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
    rc = client_call(c, "POST", "/v1/jobs", text, &doc);
    free(text);
    if (rc != EXIT_OK)
        return rc;
    printf("%s %s\n", client_str(doc, "id"), client_str(doc, "state"));
    fflush(stdout);
    if (watch) {
        char id[64];
        snprintf(id, sizeof id, "%s", client_str(doc, "id"));
        json_decref(doc);
        return client_watch(c, id);
    }
    json_decref(doc);
    return EXIT_OK;
}

int cmd_retry(const struct client *c, int argc, char **argv)
{
    const char *id = NULL;
    char path[256], new_id[64];
    json_t *doc = NULL;
    int watch = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--watch") == 0)
            watch = 1;
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else
            id = NULL, i = argc;        /* --help, or anything else */
    }
    if (!id) {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ecopt retry JOB_ID [--watch]\n\n"
                "Runs an ended job (failed, cancelled, interrupted or succeeded) again\n"
                "as a new job of the same spec, whose retry_of is JOB_ID; prints its id.\n"
                "--watch then follows it (exit status as ecopt watch).\n");
        return help ? EXIT_OK : EXIT_USAGE;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/retry", id);
    if ((rc = client_call(c, "POST", path, "{}", &doc)) != EXIT_OK)
        return rc;
    snprintf(new_id, sizeof new_id, "%s", client_str(doc, "id"));
    printf("%s %s (retry of %s)\n", new_id, client_str(doc, "state"),
           client_str(doc, "retry_of"));
    fflush(stdout);
    json_decref(doc);
    return watch ? client_watch(c, new_id) : EXIT_OK;
}

/* The ids as one query value, "a,b,c", escaped; 0 or -1 when too long. */
static int id_list(char *out, size_t len, int n, char **ids)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char *esc = curl_easy_escape(NULL, ids[i], 0);
        int w = snprintf(out + used, len - used, "%s%s", i ? "," : "", esc ? esc : "");

        curl_free(esc);
        if (w < 0 || (size_t)w >= len - used)
            return -1;
        used += (size_t)w;
    }
    return 0;
}

int cmd_compare(const struct client *c, int argc, char **argv)
{
    char ids[4096], path[4200];
    json_t *doc = NULL, *warnings;
    int rc;

    if (argc < 2 || argv[1][0] == '-' || id_list(ids, sizeof ids, argc - 1, argv + 1) < 0) {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ecopt compare JOB_ID...\n\n"
                "1..32 jobs side by side: rounds and bits up to the target, final gap;\n"
                "a warning for jobs on another dataset (their gaps are not comparable).\n");
        return help ? EXIT_OK : EXIT_USAGE;
    }
    snprintf(path, sizeof path, "/v1/compare?jobs=%s", ids);
    if ((rc = client_call(c, "GET", path, NULL, &doc)) != EXIT_OK)
        return rc;
    client_print_comparison(json_object_get(doc, "comparison"));
    warnings = json_object_get(doc, "warnings");
    for (size_t i = 0; i < json_array_size(warnings); i++)
        fprintf(stderr, "warning: %s\n",
                client_term_text(json_string_value(json_array_get(warnings, i))));
    json_decref(doc);
    return EXIT_OK;
}

static const char plot_usage[] =
    "usage: ecopt plot ID... [--x rounds|bits] [-o FILE]\n\n"
    "The curves as SVG: one job's (j_...), an experiment's (x_...), or several\n"
    "jobs' together; on stdout (redirect it: > plot.svg) or into FILE.\n";

/* The plot route of the ids: a job's, an experiment's, or a comparison. */
static int plot_path(char *path, size_t len, int n, char **ids, const char *x)
{
    char list[4096];

    if (n == 1 && strncmp(ids[0], "x_", 2) == 0)
        snprintf(path, len, "/v1/experiments/%s/plot.svg?x=%s", ids[0], x);
    else if (n == 1)
        snprintf(path, len, "/v1/jobs/%s/plot.svg?x=%s", ids[0], x);
    else if (id_list(list, sizeof list, n, ids) < 0)
        return -1;
    else
        snprintf(path, len, "/v1/compare/plot.svg?jobs=%s&x=%s", list, x);
    return 0;
}

int cmd_plot(const struct client *c, int argc, char **argv)
{
    const char *x = "rounds", *file = NULL;
    char *ids[64], path[4300];
    struct client_buf b;
    int n = 0;
    long status;
    FILE *out;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--x") == 0 && i + 1 < argc)
            x = argv[++i];
        else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
            file = argv[++i];
        else if (argv[i][0] != '-' && n < 64)
            ids[n++] = argv[i];
        else {
            int help = strcmp(argv[i], "--help") == 0;
            fputs(plot_usage, help ? stdout : stderr);
            return help ? EXIT_OK : EXIT_USAGE;
        }
    }
    if (!n || (strcmp(x, "rounds") && strcmp(x, "bits")) ||
        plot_path(path, sizeof path, n, ids, x) < 0) {
        fputs(plot_usage, stderr);
        return EXIT_USAGE;
    }
    if (!file && isatty(1)) {
        fprintf(stderr, "ecopt plot: not writing SVG to a terminal; redirect it "
                "(ecopt plot %s > plot.svg) or give -o FILE\n", ids[0]);
        return EXIT_USAGE;
    }
    status = client_request(c, "GET", path, NULL, 0, "image/svg+xml", &b);
    if (status < 0 || status >= 400) {
        if (status >= 400)
            client_problem(status, b.data);
        free(b.data);
        return status < 0 ? EXIT_CONNECT : EXIT_SERVICE;
    }
    out = file ? fopen(file, "wb") : stdout;
    if (!out || fwrite(b.data, 1, b.len, out) != b.len || (file && fclose(out) != 0) ||
        (!file && fflush(stdout) != 0)) {
        fprintf(stderr, "ecopt plot: %s: %s\n", file ? file : "stdout", strerror(errno));
        free(b.data);
        return EXIT_INTERNAL;
    }
    free(b.data);
    return EXIT_OK;
}
