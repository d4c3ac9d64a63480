/*
 * The client commands' table of contents: their usage, and the one that
 * runs for a command word. Above every cmd_*.c file, so that none of
 * them calls back up here.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

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

static const char client_usage[] =
    "client commands (ECOPT_URL, default http://127.0.0.1:8080; ECOPT_TOKEN):\n"
    "  submit [JOB.json] [flags] [--watch]   submit a job (and follow it)\n"
    "  list [filters] [--limit N] [--json]   list jobs (ecopt list --help)\n"
    "  show JOB_ID                 a job as JSON, its times in ISO 8601\n"
    "  watch JOB_ID                follow a job to its end; the exit status\n"
    "                              says its outcome (0 target reached)\n"
    "  logs JOB_ID [-f]            its coordinator's log, followed with -f\n"
    "  metrics JOB_ID [--format table|csv|json] [--follow]\n"
    "  plot ID... [--x rounds|bits] [-o FILE]\n"
    "                              a job's, an experiment's or jobs' curves as SVG\n"
    "  compare JOB_ID...           jobs side by side: rounds, bits, final gap\n"
    "  retry JOB_ID [--watch]      run an ended job again as a new job\n"
    "  cancel JOB_ID | delete JOB_ID\n"
    "  experiment submit FILE | show ID | list\n"
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
    else if (strcmp(cmd, "logs") == 0)
        rc = cmd_logs(&c, argc, argv);
    else if (strcmp(cmd, "retry") == 0 || strcmp(cmd, "rerun") == 0)
        rc = cmd_retry(&c, argc, argv);
    else if (strcmp(cmd, "compare") == 0)
        rc = cmd_compare(&c, argc, argv);
    else if (strcmp(cmd, "plot") == 0)
        rc = cmd_plot(&c, argc, argv);
    else
        rc = -1;
    curl_global_cleanup();
    return rc;
}
