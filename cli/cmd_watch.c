/*
 * ecopt watch (a job's event stream drawn as a progress bar, its exit
 * status the outcome's) and ecopt logs (a job's log, followed with -f).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "outcome.h"

/* ---- watch: the event stream, drawn ------------------------------------------ */

struct watch_ctx {
    struct client_buf line;       /* the unfinished part of the stream */
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
        /* null: not finite (docs/api.md, "Metric rows"), never 0 */
        json_t *g = json_object_get(doc, "rel_gap");
        w->rel_gap = json_is_number(g) ? json_number_value(g) : NAN;
        if (w->tty) {
            double frac = isnan(w->rel_gap) ? 0.0
                          : w->rel_gap > 0 ? fmin(1.0, -log10(w->rel_gap) / 9.0) : 1.0;
            int fill = (int)(fmax(0.0, frac) * 30);
            fprintf(stderr, "\r[%.*s%*s] round %lld  rel gap %.3e ", fill,
                    "##############################", 30 - fill, "", w->round, w->rel_gap);
        }
    } else if (strcmp(event, "state") == 0) {
        snprintf(w->state, sizeof w->state, "%s", client_str(doc, "state"));
        json_t *o = json_object_get(doc, "outcome");
        snprintf(w->outcome, sizeof w->outcome, "%s",
                 json_is_string(o) ? client_term_text(json_string_value(o)) : "");
        json_t *r = json_object_get(doc, "reason");
        snprintf(w->reason, sizeof w->reason, "%s",
                 json_is_string(r) ? client_term_text(json_string_value(r)) : "");
        if (!w->tty)
            fprintf(stderr, "state %s%s%s\n", w->state, w->reason[0] ? ": " : "", w->reason);
    }
    json_decref(doc);
}

static size_t on_stream(char *p, size_t sz, size_t n, void *ctx)
{
    struct watch_ctx *w = ctx;
    char *nl;

    if (!client_to_buf(p, sz, n, &w->line))
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

int client_watch(const struct client *c, const char *id)
{
    struct watch_ctx w = {{NULL, 0}, "", isatty(2), "", "", "", NAN, -1};
    enum outcome outcome;
    CURL *h = curl_easy_init();
    struct curl_slist *hdr = NULL;
    char url[1024], line[512], gap[32];
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
        client_problem(status, w.line.data);
        free(w.line.data);
        return EXIT_SERVICE;
    }
    free(w.line.data);
    if (w.tty)
        fputc('\n', stderr);
    if (w.round < 0)
        snprintf(gap, sizeof gap, "-");           /* no row came */
    else if (isnan(w.rel_gap))
        snprintf(gap, sizeof gap, "not finite");
    else
        snprintf(gap, sizeof gap, "%.4g", w.rel_gap);
    printf("%s %s, %s: %s (round %lld, rel gap %s)\n", id, w.state,
           w.outcome[0] ? w.outcome : "no outcome", w.reason, w.round, gap);
    /* Only the target reached is a success (format/outcome.h). */
    if (outcome_from_name(w.outcome, &outcome) == 0)
        return outcome_exit_status(outcome);
    return EXIT_JOB_FAILED;
}

int cmd_watch(const struct client *c, int argc, char **argv)
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
    return client_watch(c, argv[1]);
}


/* The job's state ("" when it could not be read: already reported). */
static int job_state(const struct client *c, const char *id, char *state, size_t len)
{
    char path[256];
    json_t *doc = NULL;
    int rc;

    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    if ((rc = client_call(c, "GET", path, NULL, &doc)) == EXIT_OK)
        snprintf(state, len, "%s", client_str(doc, "state"));
    json_decref(doc);
    return rc;
}

static const char logs_usage[] =
    "usage: ecopt logs JOB_ID [-f]\n\n"
    "The job's coordinator log (its last 4 MiB). -f, --follow: print what it\n"
    "adds, once a second, until the job ends (a queued job's log is waited for).\n";

/*
 * The log, and with follow what it adds: the route gives the whole log
 * (up to 4 MiB), so what was printed is skipped. A queued job has no log
 * yet (404 while the job itself is there).
 */
int cmd_logs(const struct client *c, int argc, char **argv)
{
    const char *id = NULL;
    char path[256], state[32] = "";
    size_t printed = 0;
    int follow = 0, last = 0, rc;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-f") == 0 || strcmp(argv[i], "--follow") == 0)
            follow = 1;
        else if (argv[i][0] != '-' && !id)
            id = argv[i];
        else {
            int help = strcmp(argv[i], "--help") == 0;
            fputs(logs_usage, help ? stdout : stderr);
            return help ? EXIT_OK : EXIT_USAGE;
        }
    }
    if (!id) {
        fputs(logs_usage, stderr);
        return EXIT_USAGE;
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/log", id);
    for (;;) {
        struct client_buf b;
        long status = client_request(c, "GET", path, NULL, 0, "text/plain", &b);

        if (status < 0) {
            free(b.data);
            return EXIT_CONNECT;
        }
        if (status == 200) {
            /* Past 4 MiB the route gives the last 4 MiB: from there on the
             * skip is approximate, and a shorter log is a new one. */
            if (b.len < printed)
                printed = 0;
            fwrite(b.data + printed, 1, b.len - printed, stdout);
            fflush(stdout);
            printed = b.len;
        } else if (status != 404 || !follow) {
            client_problem(status, b.data);
            free(b.data);
            return EXIT_SERVICE;
        }
        free(b.data);
        if (!follow || last)
            return EXIT_OK;
        if ((rc = job_state(c, id, state, sizeof state)) != EXIT_OK)
            return rc;          /* no such job: said so */
        if (client_state_final(state))
            last = 1;           /* once more, for what it wrote at the end */
        else
            sleep(1);
    }
}
