/*
 * The scheduler: one thread that starts queued jobs as coordinator
 * processes within the limits, reads their progress into the store, and
 * ends them. It tells the floor above about new rows and ended jobs
 * through the app's hooks (app_job_changed), never by calling it.
 */
#ifndef ECOPT_SCHEDULER_H
#define ECOPT_SCHEDULER_H

#include <stddef.h>

struct app;
struct sched;
struct store;
struct store_err;
struct queue_place;

/* Starts the thread and sets app->sched. 0, or -1 with a sentence. */
int sched_start(struct app *app, char *err, size_t errlen);
/* Look for queued jobs now (one was submitted). NULL is a no-op. */
void sched_wake(struct sched *s);
/* SIGTERM to a running job's coordinator group; 0, or < 0 if not running
 * here (the caller then finishes a queued job itself). */
int sched_cancel(struct sched *s, const char *id);
/* Stops starting jobs, ends the running ones (marked interrupted), joins.
 * NULL is a no-op. */
void sched_stop(struct sched *s);
/*
 * Where each queued job stands (queue.h), read through st (a reader):
 * *out sorted by id for queue_find, *n of them (free() it). s NULL: none.
 * 0, or < 0 with e filled.
 */
int sched_queue(struct sched *s, struct store *st, struct queue_place **out, size_t *n,
                struct store_err *e);

#endif
