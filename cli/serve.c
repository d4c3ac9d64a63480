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
    "\n"
    "  --listen HOST:PORT          ECOPT_LISTEN, default 127.0.0.1:8080\n"
    "  --db FILE                   ECOPT_DB, the SQLite file, default ecopt.db\n"
    "  --data-dir DIR              ECOPT_DATA_DIR, the datasets, default datasets\n"
    "  --tokens-file FILE          ECOPT_TOKENS_FILE: NAME:SECRET[:admin] lines\n"
    "  --auth on|off               ECOPT_AUTH; off must be asked for explicitly\n"
    "  --max-running N             ECOPT_MAX_RUNNING, jobs at once, default 2\n"
    "  --max-total-workers N       ECOPT_MAX_TOTAL_WORKERS, default 64\n"
    "  --max-workers-per-job N     ECOPT_MAX_WORKERS_PER_JOB, default 64\n"
    "  --max-running-per-token N   ECOPT_MAX_RUNNING_PER_TOKEN, one token's\n"
    "                              jobs at once, default --max-running less\n"
    "                              one with tokens (a slot open to others)\n"
    "  --max-queued-per-token N    ECOPT_MAX_QUEUED_PER_TOKEN, default 100\n"
    "  --max-rounds N              ECOPT_MAX_ROUNDS per job, default 10000000\n"
    "  --max-seconds N             ECOPT_MAX_SECONDS per job, default 86400\n"
    "  --max-body BYTES            ECOPT_MAX_BODY, default 1048576\n"
    "  --max-upload BYTES          ECOPT_MAX_UPLOAD, one dataset upload,\n"
    "                              default 268435456 (as sent: gzip counts\n"
    "                              compressed)\n"
    "  Uploads are checked by a child process (ecopt __validate-upload):\n"
    "  --upload-max-bytes BYTES    ECOPT_UPLOAD_MAX_BYTES, decompressed,\n"
    "                              default 17179869184 (16 GiB)\n"
    "  --upload-max-rows N         ECOPT_UPLOAD_MAX_ROWS, default 100000000\n"
    "  --upload-max-nnz N          ECOPT_UPLOAD_MAX_NNZ, default 500000000\n"
    "  --upload-max-d N            ECOPT_UPLOAD_MAX_D, default 16777216\n"
    "  --upload-validator-mem MB   ECOPT_UPLOAD_VALIDATOR_MEM, its address\n"
    "                              space, default 256\n"
    "  --upload-validator-cpu SEC  ECOPT_UPLOAD_VALIDATOR_CPU, default 900\n"
    "  --upload-validators N       ECOPT_UPLOAD_VALIDATORS, validator processes\n"
    "                              at once, default 2 (the rest wait)\n"
    "  --upload-queue N            ECOPT_UPLOAD_QUEUE, uploads in progress at\n"
    "                              once, default 8 (more: 503)\n"
    "  --upload-per-token N        ECOPT_UPLOAD_PER_TOKEN, of one token,\n"
    "                              default 2 (more: 429)\n"
    "  --threads N                 ECOPT_THREADS, HTTP threads, default 4\n"
    "  --state-dir DIR             ECOPT_STATE_DIR, job specs and logs,\n"
    "                              default DB.jobs\n"
    "  --conn-timeout SEC          ECOPT_CONN_TIMEOUT, idle seconds before a\n"
    "                              client is dropped, default 30\n"
    "  --max-connections N         ECOPT_MAX_CONNECTIONS, default 1000\n"
    "  --max-streams-per-token N   ECOPT_MAX_STREAMS_PER_TOKEN, event streams\n"
    "                              and long-polls of one token, default 16\n"
    "  --max-streams N             ECOPT_MAX_STREAMS, of all tokens, below\n"
    "                              --max-connections; default half of it\n"
    "  --metrics-public            ECOPT_METRICS_PUBLIC=on: /metrics without\n"
    "                              a token (default: a token is needed)\n"
    "  --worker-user NAME          ECOPT_WORKER_USER, jobs run as this user;\n"
    "                              default nobody when run as root\n"
    "  --worker-uids FIRST-LAST    ECOPT_WORKER_UIDS, a uid of its own for\n"
    "                              each running job (root; uids no account\n"
    "                              uses); instead of --worker-user\n"
    "  --worker-cpu-limit SEC      ECOPT_WORKER_CPU_LIMIT, CPU seconds per\n"
    "                              worker, default --max-seconds (0: none)\n"
    "  --worker-mem-limit MB       ECOPT_WORKER_MEM_LIMIT, address space per\n"
    "                              worker process, default 0 (from the job's\n"
    "                              memory estimate)\n"
    "  --max-job-memory MB         ECOPT_MAX_JOB_MEMORY, the largest memory\n"
    "                              estimate a job may have, default 8192\n"
    "  --mpi-hostfile FILE         ECOPT_MPI_HOSTFILE, jobs may ask for\n"
    "                              backend mpi, their ranks placed by this\n"
    "                              hostfile (needs ecopt-mpi and mpirun;\n"
    "                              mpirun's arguments: ECOPT_MPIRUN_ARGS)\n"
    "  --quiet                     no access log\n"
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
            return 0;
        }
    memset(&a, 0, sizeof a);
    if (config_load(&a.cfg, argc, argv, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        return 2;
    }
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
    printf("ecopt: listening on http://%s:%u (database %s, data %s, auth %s",
           a.cfg.host, http_port(a.http), a.cfg.db, a.cfg.data_dir,
           a.cfg.auth_off ? "off" : "on");
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
