/* The service's lifetime: open, serve until a signal, shut down cleanly. */
#define _GNU_SOURCE
#include "app.h"
#include "cmd.h"
#include "datasets.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct store *app_reader(struct app *a)
{
    struct store *st = NULL;

    pthread_mutex_lock(&a->rlock);
    for (;;) {
        for (size_t i = 0; i < a->nreaders; i++) {
            if (!a->reader_busy[i]) {
                a->reader_busy[i] = 1;
                st = a->readers[i];
                break;
            }
        }
        if (st)
            break;
        pthread_cond_wait(&a->rcond, &a->rlock);
    }
    pthread_mutex_unlock(&a->rlock);
    return st;
}

void app_reader_done(struct app *a, struct store *st)
{
    pthread_mutex_lock(&a->rlock);
    for (size_t i = 0; i < a->nreaders; i++)
        if (a->readers[i] == st)
            a->reader_busy[i] = 0;
    pthread_cond_signal(&a->rcond);
    pthread_mutex_unlock(&a->rlock);
}

static void app_close(struct app *a)
{
    http_stop(a->http);
    sched_stop(a->sched);
    watch_free(a);
    for (size_t i = 0; i < a->nreaders; i++)
        store_close(a->readers[i]);
    free(a->readers);
    free(a->reader_busy);
    store_close(a->writer);
    auth_free(&a->auth);
}

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
    "                              jobs at once, default --max-running\n"
    "  --max-queued-per-token N    ECOPT_MAX_QUEUED_PER_TOKEN, default 100\n"
    "  --max-rounds N              ECOPT_MAX_ROUNDS per job, default 10000000\n"
    "  --max-seconds N             ECOPT_MAX_SECONDS per job, default 86400\n"
    "  --max-body BYTES            ECOPT_MAX_BODY, default 1048576\n"
    "  --max-upload BYTES          ECOPT_MAX_UPLOAD, one dataset upload,\n"
    "                              default 268435456\n"
    "  --threads N                 ECOPT_THREADS, HTTP threads, default 4\n"
    "  --state-dir DIR             ECOPT_STATE_DIR, job specs and logs,\n"
    "                              default DB.jobs\n"
    "  --conn-timeout SEC          ECOPT_CONN_TIMEOUT, idle seconds before a\n"
    "                              client is dropped, default 30\n"
    "  --max-connections N         ECOPT_MAX_CONNECTIONS, default 1000\n"
    "  --worker-user NAME          ECOPT_WORKER_USER, jobs run as this user;\n"
    "                              default nobody when run as root\n"
    "  --worker-uids FIRST-LAST    ECOPT_WORKER_UIDS, a uid of its own for\n"
    "                              each running job (root; uids no account\n"
    "                              uses); instead of --worker-user\n"
    "  --worker-cpu-limit SEC      ECOPT_WORKER_CPU_LIMIT, CPU seconds per\n"
    "                              worker, default --max-seconds (0: none)\n"
    "  --worker-mem-limit MB       ECOPT_WORKER_MEM_LIMIT, address space per\n"
    "                              worker, default 0 (none)\n"
    "  --quiet                     no access log\n"
    "\n"
    "SIGTERM or SIGINT: stop accepting, end running jobs (they become\n"
    "interrupted), close the database.\n";

int cmd_serve(int argc, char **argv)
{
    struct app a;
    struct store_err e = {0};
    struct http_config hc = {0};
    char err[512];
    sigset_t sigs;
    int sig, recovered, removed;

    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(serve_usage, stdout);
            return 0;
        }
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.wlock, NULL);
    pthread_mutex_init(&a.rlock, NULL);
    pthread_mutex_init(&a.auth.fail_lock, NULL);
    pthread_cond_init(&a.rcond, NULL);
    if (config_load(&a.cfg, argc, argv, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        return 2;
    }
    a.auth.off = a.cfg.auth_off;
    if (!a.cfg.auth_off && auth_load(&a.auth, a.cfg.tokens_file, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        return 2;
    }
    /* Signals are taken by sigwait below, so every thread blocks them. */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* A file size limit (RLIMIT_FSIZE) makes writes fail with EFBIG, which
       is answered 503, instead of killing the service. */
    signal(SIGXFSZ, SIG_IGN);

    if (!(a.writer = store_open(a.cfg.db, &e))) {
        fprintf(stderr, "ecopt serve: %s\n", e.msg);
        app_close(&a);
        return 1;
    }
    recovered = store_recover(a.writer, "the service stopped while the job ran", &e);
    if (recovered < 0) {
        fprintf(stderr, "ecopt serve: %s\n", e.msg);
        app_close(&a);
        return 1;
    }
    a.nreaders = a.cfg.threads + 1;
    a.readers = calloc(a.nreaders, sizeof *a.readers);
    a.reader_busy = calloc(a.nreaders, sizeof *a.reader_busy);
    for (size_t i = 0; a.readers && i < a.nreaders; i++)
        if (!(a.readers[i] = store_open_reader(a.cfg.db, &e))) {
            fprintf(stderr, "ecopt serve: %s\n", e.msg);
            a.nreaders = i;
            app_close(&a);
            return 1;
        }
    if (watch_init(&a) < 0 || sched_start(&a, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        app_close(&a);
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
    if ((removed = datasets_cleanup(a.cfg.data_dir)) > 0)
        fprintf(stderr, "ecopt serve: removed %d unfinished upload%s from %s\n",
                removed, removed == 1 ? "" : "s", a.cfg.data_dir);
    if (!(a.http = http_start(&hc, app_routes, app_nroutes, &a, err, sizeof err))) {
        fprintf(stderr, "ecopt serve: %s\n", err);
        app_close(&a);
        return 1;
    }
    printf("ecopt: listening on http://%s:%u (database %s, data %s, auth %s",
           a.cfg.host, http_port(a.http), a.cfg.db, a.cfg.data_dir,
           a.cfg.auth_off ? "off" : "on");
    if (recovered)
        printf(", %d interrupted job%s recovered", recovered, recovered == 1 ? "" : "s");
    printf(")\n");
    fflush(stdout);
    while (sigwait(&sigs, &sig) != 0)
        ;
    fprintf(stderr, "ecopt serve: signal %d: shutting down\n", sig);
    app_close(&a);
    return 0;
}
