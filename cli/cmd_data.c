/* ecopt experiment (submit, show, list) and ecopt datasets (list, upload). */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

void client_print_comparison(json_t *table)
{
    printf("%-20s %-13s %-8s %-11s %11s %14s %12s  %s\n", "JOB", "ALGORITHM", "COMPR",
           "STATE", "TO TARGET", "BITS UP", "FINAL GAP", "STEP");
    for (size_t i = 0; i < json_array_size(table); i++) {
        json_t *r = json_array_get(table, i);
        json_t *rounds = json_object_get(r, "rounds_to_target");
        json_t *bits = json_object_get(r, "bits_up_to_target");
        json_t *gap = json_object_get(r, "final_rel_gap");
        json_t *mult = json_object_get(r, "step_multiplier");
        json_t *smooth = json_object_get(r, "smoothness_multiplier");
        char rbuf[32] = "not reached", bbuf[32] = "-", gbuf[32] = "-", mbuf[64] = "-";

        if (json_is_integer(rounds)) {
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(rounds));
            snprintf(bbuf, sizeof bbuf, "%.4g", json_number_value(bits));
        }
        if (json_is_number(gap))
            snprintf(gbuf, sizeof gbuf, "%.3e", json_number_value(gap));
        if (json_is_number(mult) && json_is_number(smooth) && json_number_value(smooth) != 1)
            snprintf(mbuf, sizeof mbuf, "x%g (smoothness x%g)", json_number_value(mult),
                     json_number_value(smooth));
        else if (json_is_number(mult))
            snprintf(mbuf, sizeof mbuf, "x%g", json_number_value(mult));
        printf("%-20s %-13s %-8s %-11s %11s %14s %12s  %s\n", client_str(r, "job"),
               client_str(r, "algorithm"), client_str(r, "compressor"),
               client_str(r, "state"), rbuf, bbuf, gbuf, mbuf);
    }
}

/* A tuned experiment: per variant its default run beside its best, whose
   multiplier says its axis, x2 (smoothness) or x2 (step). */
static void print_tuned(json_t *table)
{
    if (json_array_size(table))
        printf("\n%-8s %-13s %16s %16s %16s %14s\n", "VARIANT", "ALGORITHM",
               "DEFAULT ROUNDS", "BEST", "BEST ROUNDS", "BEST BITS UP");
    for (size_t i = 0; i < json_array_size(table); i++) {
        json_t *t = json_array_get(table, i), *best = json_object_get(t, "best");
        json_t *def = json_object_get(t, "default");
        json_t *dr = json_object_get(def, "rounds_to_target");
        const char *axis = client_str(best, "axis");
        char dbuf[32] = "not reached", mbuf[64] = "-", rbuf[32] = "-", bbuf[32] = "-";

        if (json_is_integer(dr))
            snprintf(dbuf, sizeof dbuf, "%lld", (long long)json_integer_value(dr));
        if (json_is_object(best)) {
            snprintf(mbuf, sizeof mbuf, "x%g (%.*s)",
                     json_number_value(json_object_get(best, "multiplier")),
                     (int)strcspn(axis, "_"), axis);
            snprintf(rbuf, sizeof rbuf, "%lld", (long long)json_integer_value(
                                                    json_object_get(best, "rounds_to_target")));
            snprintf(bbuf, sizeof bbuf, "%.4g", json_number_value(
                                                    json_object_get(best, "bits_up_to_target")));
        }
        printf("%-8lld %-13s %16s %16s %16s %14s%s%s\n",
               (long long)json_integer_value(json_object_get(t, "variant")),
               client_str(t, "algorithm"), dbuf, mbuf, rbuf, bbuf,
               json_is_object(best) ? "" : "  ",
               json_is_object(best) ? "" : client_str(t, "detail"));
    }
}

/* The experiments, newest first, following the cursors. */
static int experiment_list(const struct client *c)
{
    char path[160], cursor[64] = "", when[40];
    int rc = EXIT_OK, header = 1;

    do {
        json_t *doc = NULL, *list, *next;

        snprintf(path, sizeof path, "/v1/experiments?limit=500%s%s",
                 cursor[0] ? "&cursor=" : "", cursor);
        if ((rc = client_call(c, "GET", path, NULL, &doc)) != EXIT_OK)
            return rc;
        list = json_object_get(doc, "experiments");
        if (header)
            printf("%-20s %-24s %5s  %s\n", "ID", "CREATED", "JOBS", "NAME");
        header = 0;
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *x = json_array_get(list, i);
            const char *name = json_string_value(json_object_get(x, "name"));

            client_iso_time(when, sizeof when,
                            (long long)json_integer_value(json_object_get(x, "created_at")));
            printf("%-20s %-24s %5lld  %s\n", client_str(x, "id"), when,
                   (long long)json_integer_value(json_object_get(x, "jobs")),
                   name && *name ? client_term_text(name) : "-");
        }
        next = json_object_get(doc, "next_cursor");
        cursor[0] = '\0';
        if (json_is_string(next) && json_array_size(list))
            snprintf(cursor, sizeof cursor, "%s", json_string_value(next));
        json_decref(doc);
    } while (cursor[0]);
    return rc;
}

int cmd_experiment(const struct client *c, int argc, char **argv)
{
    char path[256], *text;
    json_t *doc = NULL;
    int rc;

    if (argc == 2 && strcmp(argv[1], "list") == 0)
        return experiment_list(c);
    if (argc != 3 || (strcmp(argv[1], "submit") && strcmp(argv[1], "show"))) {
        int help = argc == 2 && strcmp(argv[1], "--help") == 0;
        fprintf(help ? stdout : stderr,
                "usage: ecopt experiment submit EXPERIMENT.json | show EXPERIMENT_ID | list\n");
        return help ? EXIT_OK : EXIT_USAGE;
    }
    if (strcmp(argv[1], "submit") == 0) {
        if (!(text = client_slurp(argv[2])))
            return EXIT_USAGE;
        rc = client_call(c, "POST", "/v1/experiments", text, &doc);
        free(text);
    } else {
        snprintf(path, sizeof path, "/v1/experiments/%s", argv[2]);
        rc = client_call(c, "GET", path, NULL, &doc);
    }
    if (rc != EXIT_OK)
        return rc;
    printf("experiment %s\n", client_str(doc, "id"));
    client_print_comparison(json_object_get(doc, "comparison"));
    print_tuned(json_object_get(doc, "tuned"));
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

int cmd_datasets(const struct client *c, int argc, char **argv)
{
    static const char usage[] =
        "usage: ecopt datasets                      list the datasets with their stats\n"
        "       ecopt datasets upload FILE [--name NAME] [--replace]\n";
    json_t *doc = NULL, *list;
    int rc;

    if (argc == 1) {
        if ((rc = client_call(c, "GET", "/v1/datasets", NULL, &doc)) != EXIT_OK)
            return rc;
        list = json_object_get(doc, "datasets");
        printf("%-24s %9s %7s %10s %12s  %s\n", "NAME", "ROWS", "D", "NNZ", "BYTES", "SHA256");
        for (size_t i = 0; i < json_array_size(list); i++) {
            json_t *d = json_array_get(list, i);
            if (json_object_get(d, "error"))
                printf("%-24s %s\n", client_str(d, "name"), client_str(d, "error"));
            else
                printf("%-24s %9lld %7lld %10lld %12lld  %.16s\n", client_str(d, "name"),
                       (long long)json_integer_value(json_object_get(d, "rows")),
                       (long long)json_integer_value(json_object_get(d, "d")),
                       (long long)json_integer_value(json_object_get(d, "nnz")),
                       (long long)json_integer_value(json_object_get(d, "bytes")),
                       client_str(d, "sha256"));
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
        struct client_buf b = {NULL, 0};
        char url[1024], line[512], *esc = curl_easy_escape(h, name, 0);
        long status = 0;
        snprintf(url, sizeof url, "%s/v1/datasets?name=%s%s", c->url, esc ? esc : "",
                 replace ? "&replace=true" : "");
        curl_free(esc);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        curl_easy_setopt(h, CURLOPT_READDATA, f);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)size);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, client_to_buf);
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
            client_problem(status, b.data);
            free(b.data);
            return EXIT_SERVICE;
        }
        doc = json_loads(b.data ? b.data : "", 0, NULL);
        printf("%s: %lld rows, d = %lld, nnz = %lld, sha256 %s\n", client_str(doc, "name"),
               (long long)json_integer_value(json_object_get(doc, "rows")),
               (long long)json_integer_value(json_object_get(doc, "d")),
               (long long)json_integer_value(json_object_get(doc, "nnz")), client_str(doc, "sha256"));
        json_decref(doc);
        free(b.data);
        return EXIT_OK;
    }
    int help = argc == 2 && strcmp(argv[1], "--help") == 0;
    fputs(usage, help ? stdout : stderr);
    return help ? EXIT_OK : EXIT_USAGE;
}

