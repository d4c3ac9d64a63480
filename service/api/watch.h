/*
 * Waiting on jobs without busy polling: long-polls (deferred replies) and
 * Server-Sent Event streams register here. The wiring (cli/serve.c) makes
 * the app's hooks call watch_job_changed after each batch of rows the
 * scheduler stores and when a job ends, and watch_tick often, for the
 * long-polls whose time is up.
 */
#ifndef ECOPT_WATCH_H
#define ECOPT_WATCH_H

#include "app.h"
#include "http.h"

struct watch;

struct watch *watch_new(struct app *a);    /* NULL when out of memory */
/* After http_stop: gives back what long-polls are left. NULL: no-op. */
void watch_free(struct watch *w);

/* The hooks; ctx is the struct watch. */
void watch_job_changed(void *ctx, const char *job_id);
void watch_tick(void *ctx);

/*
 * Both of these hold the request's connection, so each is one of owner's
 * shares (shares.h) for as long as it lasts: over owner's share the reply
 * is 429, over the server's 503, both naming the limit and its value.
 *
 * Parks the request until the job has rows after `after` or has ended,
 * then fill(rs, arg) replies; after wait_ms the server answers 204. arg
 * is given to free_arg once it is no longer needed, whatever happens
 * (also when this fails). Replies itself on failure; returns 0.
 */
int watch_longpoll(struct watch *w, struct http_resp *rs, const char *owner,
                   const char *id, long long after, unsigned wait_ms, http_fill_fn fill,
                   void *arg, void (*free_arg)(void *));

/* An SSE stream of the job's rows after `after`, and its state changes,
   until it ends. Replies itself; returns 0. */
int watch_events(struct watch *w, struct http_resp *rs, const char *owner,
                 const char *id, long long after);

#endif
