/*
 * The application as one object: its configuration, the tokens, the
 * database connections, the caches and the scheduler of coordinator
 * processes. It never sees an HTTP request: service/api reads and answers
 * those, and cli/serve.c makes one app, wires it to the HTTP server and
 * the watchers, and frees it.
 *
 * Errors, as everywhere on service/core (docs/architecture.md, "Errors"):
 * 0 or -1 with a sentence in the caller's char *err, size_t errlen; a
 * refusal the API turns into a status is typed (struct spec_problem,
 * enum jobs_outcome, struct catalog_failure).
 */
#ifndef ECOPT_APP_H
#define ECOPT_APP_H

#include <pthread.h>
#include <stddef.h>

#include "auth.h"
#include "config.h"
#include "store.h"

struct sched;
struct shares;
struct catalog;
struct pagecache;
struct http_server;
struct watch;

/*
 * What the application tells the floor above it, through functions that
 * the wiring (cli/serve.c) sets: a job has new rows or a new state, and
 * time has passed (for waits with a deadline). Each may be NULL.
 */
struct app_hooks {
    void *ctx;
    void (*job_changed)(void *ctx, const char *job_id);
    void (*tick)(void *ctx);
};

struct app {
    struct config cfg;
    struct auth auth;
    struct store *writer;         /* every write goes through it ... */
    pthread_mutex_t wlock;        /* ... one at a time */
    struct store **readers;       /* a pool for the request threads */
    int *reader_busy;
    size_t nreaders;
    pthread_mutex_t rlock;
    pthread_cond_t rcond;
    struct store_gen gen;         /* counts the writer's commits */
    struct sched *sched;
    struct catalog *catalog;      /* what each data file was */
    struct pagecache *pages;      /* pages and job documents as sent */
    struct shares *shares;        /* streams and long-polls, per token */
    struct app_hooks hooks;
    /* Set by the wiring for the floors above, which alone use them. */
    struct http_server *http;
    struct watch *watch;
};

/*
 * Makes the app from its loaded configuration: tokens, the database (the
 * jobs a stopped service left running become interrupted: *recovered of
 * them), the reader pool and the caches. 0, or < 0 with a sentence in err
 * (-2: the tokens file is bad); app_close is then still to be called.
 */
int app_open(struct app *a, int *recovered, char *err, size_t errlen);
/* Everything app_open made; the scheduler must have been stopped. */
void app_close(struct app *a);

/*
 * Reads the tokens file again (SIGHUP), while requests are served and
 * jobs run. 0 with what was loaded in msg; -1 when the file is bad, with
 * why in msg: the tokens loaded before are kept.
 */
int app_reload_tokens(struct app *a, char *msg, size_t len);

/* Borrow a reader connection; give it back. Never NULL once started. */
struct store *app_reader(struct app *app);
void app_reader_done(struct app *app, struct store *st);

/* The hooks, for the scheduler and the jobs. */
void app_job_changed(struct app *a, const char *job_id);
void app_tick(struct app *a);

#endif
