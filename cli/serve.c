/*
 * `ecopt serve`: the one place that wires the service together. It makes
 * the app (service/core), the watchers and the route table (service/api)
 * and the HTTP server (service/lib), connects the scheduler's hooks to the
 * watchers, serves until SIGTERM or SIGINT (SIGHUP reloads the tokens), and
 * takes it all down in order.
 */
#define _GNU_SOURCE
#include "cmd.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "app.h"
#include "catalog.h"
#include "http.h"
#include "scheduler.h"
#include "watch.h"

static const char serve_usage[] =
    "usage: ecopt serve [options]\n"
    "\n"
    "Serves the REST API (api/openapi.yaml). Every option can also be set\n"
    "by its environment variable; flags win.\n"
    "\n";

static const char serve_usage_end[] =
    "\n"
    "SIGTERM or SIGINT: stop accepting, end running jobs (they become\n"
    "interrupted), close the database. SIGHUP: read the tokens file again\n"
    "(a bad file keeps the tokens loaded before, and the log says why).\n";

/* In order: no request comes in, no job goes on, nothing waits. */
static void serve_close(struct app *a)
{
    /* Uploads being validated are answered while the server still can. */
    catalog_stop(a->catalog);
    http_stop(a->http);
    a->http = NULL;
    sched_stop(a->sched);
    a->sched = NULL;
    a->hooks = (struct app_hooks){0};
    watch_free(a->watch);
    a->watch = NULL;
    app_close(a);
}

int cmd_serve(int argc, char **argv)
{
    static struct http_route routes[HTTP_MAX_ROUTES];
    struct app a;
    struct http_config hc = {0};
    char err[512];
    sigset_t sigs;
    int sig, recovered, removed, rc;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(serve_usage, stdout);
            config_usage(stdout);
            fputs(serve_usage_end, stdout);
            return 0;
        }
    memset(&a, 0, sizeof a);
    if (config_load(&a.cfg, argc, argv, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        return 2;
    }
    /* Before any file is made: the database, its -wal and -shm, logs,
       uploads and directories are the service's alone unless the admin
       says otherwise. */
    umask((mode_t)a.cfg.umask);
    /* Signals are taken by sigwait below, so every thread blocks them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit (RLIMIT_FSIZE) makes writes fail with EFBIG, which
       is answered 503, instead of killing the service. */
    signal(SIGXFSZ, SIG_IGN);

    if ((rc = app_open(&a, &recovered, err, sizeof err)) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        serve_close(&a);
        return rc == -2 ? 2 : 1;
    }
    if (!(a.watch = watch_new(&a))) {
        fprintf(stderr, "ecopt serve: out of memory\n");
        serve_close(&a);
        return 1;
    }
    a.hooks = (struct app_hooks){a.watch, watch_job_changed, watch_tick};
    if (sched_start(&a, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        serve_close(&a);
        return 1;
    }
    hc.host = a.cfg.host;
    hc.port = a.cfg.port;
    hc.threads = a.cfg.threads;
    hc.max_body = a.cfg.max_body;
    hc.conn_timeout_s = a.cfg.conn_timeout;
    hc.header_timeout_s = a.cfg.header_timeout;
    hc.body_timeout_s = a.cfg.body_timeout;
    hc.upload_timeout_s = a.cfg.upload_timeout;
    hc.max_per_address = a.cfg.max_conn_per_addr;
    hc.admit = api_admit;
    hc.max_connections = a.cfg.max_connections;
    hc.access_log_off = a.cfg.access_log_off;
    /* No upload is in progress yet: what one left behind is garbage. */
    if ((removed = catalog_cleanup(a.cfg.data_dir)) > 0)
        fprintf(stderr, "ecopt serve: removed %d unfinished upload%s from %s\n",
                removed, removed == 1 ? "" : "s", a.cfg.data_dir);
    api_http_routes(routes);
    if (!(a.http = http_start(&hc, routes, api_nroutes, &a, err, sizeof err))) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        serve_close(&a);
        return 1;
    }
    printf("ecopt: listening on http://%s:%u (database %s, data %s, auth %s, "
           "%u HTTP thread%s",
           a.cfg.host, http_port(a.http), a.cfg.db, a.cfg.data_dir,
           a.cfg.auth_off ? "off" : "on", http_threads(a.http),
           http_threads(a.http) == 1 ? "" : "s");
    if (recovered)
        printf(", %d interrupted job%s recovered", recovered, recovered == 1 ? "" : "s");
    printf(")\n");
    fflush(stdout);
    /* SIGHUP reloads the tokens (as nginx reloads its configuration on
     * HUP): requests go on being served and jobs run meanwhile. */
    for (;;) {
        char msg[600];

        if (sigwait(&sigs, &sig) != 0)
            continue;
        if (sig != SIGHUP)
            break;
        rc = app_reload_tokens(&a, msg, sizeof msg);
        fprintf(stderr, "ecopt serve: SIGHUP: %s\n", msg);
    }
    fprintf(stderr, "ecopt serve: signal %d: shutting down\n", sig);
    serve_close(&a);
    return 0;
}
