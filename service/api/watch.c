/*
 * The watchers of watch.h: a list of waiters under one lock; a change of a
 * job answers its long-polls and wakes its streams.
 */
#define _GNU_SOURCE
#include "watch.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "describe.h"
#include "ecopt/clock.h"
#include "shares.h"

#define EVENTS_PER_WAKE 2000     /* rows one produce call may queue */

struct waiter {
    struct waiter *next;
    struct app *app;
    struct watch *hub;
    char id[STORE_ID_LEN + 1];
    int stream;                  /* 0: a long-poll, 1: an SSE stream */
    char owner[64];              /* whose share it is; "" none */
    /* long-poll */
    struct http_deferred *d;
    double deadline;
    long long after;
    http_fill_fn fill;
    void *arg;
    void (*free_arg)(void *);
    /* stream; refs and closed are guarded by the hub's lock */
    struct http_stream *st;
    long long last_round;
    int last_state;
    int refs;
    int closed;
};

struct watch {
    struct app *app;
    pthread_mutex_t lock;
    struct waiter *head;
};

struct watch *watch_new(struct app *a)
{
    struct watch *h = calloc(1, sizeof *h);

    if (!h)
        return NULL;
    h->app = a;
    pthread_mutex_init(&h->lock, NULL);
    return h;
}

/*
 * One of owner's shares for a new waiter, or the refusal replied (429 for
 * the token's share, 503 for the server's) and -1.
 */
static int take_share(struct app *a, struct http_resp *rs, const char *owner)
{
    unsigned per = shares_per_token(a->shares), all = shares_total(a->shares);
    char detail[200];

    switch (shares_take(a->shares, owner)) {
    case SHARES_TAKEN:
        return 0;
    case SHARES_TOKEN_FULL:
        snprintf(detail, sizeof detail, "max_streams_per_token: at most %u event streams "
                 "and long-polls at once per token; close one first", per);
        http_reply_header(rs, "Retry-After", "5");
        http_reply_problem(rs, 429, NULL, detail,
                           json_pack("{s:s, s:i}", "limit", "max_streams_per_token",
                                     "value", (int)per));
        return -1;
    default:
        snprintf(detail, sizeof detail, "max_streams: the server holds %u event streams "
                 "and long-polls at once, its most", all);
        http_reply_header(rs, "Retry-After", "5");
        http_reply_problem(rs, 503, NULL, detail,
                           json_pack("{s:s, s:i}", "limit", "max_streams", "value",
                                     (int)all));
        return -1;
    }
}

static void give_share(struct waiter *w)
{
    if (w->owner[0]) {
        shares_give(w->app->shares, w->owner);
        w->owner[0] = '\0';
    }
}

/* A long-poll's waiter, done with. */
static void waiter_free(struct waiter *w)
{
    give_share(w);
    if (w->free_arg)
        w->free_arg(w->arg);
    free(w);
}

/* Removes w from the list; the caller holds the lock. 1 if it was there. */
static int unlink_waiter(struct watch *h, struct waiter *w)
{
    for (struct waiter **p = &h->head; *p; p = &(*p)->next) {
        if (*p == w) {
            *p = w->next;
            w->next = NULL;
            return 1;
        }
    }
    return 0;
}

static void stream_unref(struct watch *h, struct waiter *w)
{
    int last;

    pthread_mutex_lock(&h->lock);
    last = --w->refs == 0;
    pthread_mutex_unlock(&h->lock);
    if (last) {
        http_stream_release(w->st);
        free(w);
    }
}

/* Fills a long-poll's reply once rows (or the job's end) are there. */
static void longpoll_fill(struct http_resp *rs, void *arg)
{
    struct waiter *w = arg;

    w->fill(rs, w->arg);
}

/* Whether the job has rows after `after`, or has ended. */
static int ready_now(struct app *a, const char *id, long long after)
{
    struct store *st = app_reader(a);
    struct store_job job = {0};
    struct store_err e = {0};
    int64_t count = 0;
    int ready = 1;

    if (store_metrics_count(st, id, after, &count, &e) == 0 && count == 0 &&
        store_job_get(st, id, NULL, &job, &e) == 0 &&
        !store_job_state_is_final(job.state))
        ready = 0;
    store_job_clear(&job);
    app_reader_done(a, st);
    return ready;
}

/* Answers a detached long-poll if its rows are there; otherwise lists it
 * again, then looks once more, so a batch stored meanwhile is not missed. */
static void settle(struct watch *h, struct waiter *w)
{
    int mine;

    if (!ready_now(w->app, w->id, w->after)) {
        pthread_mutex_lock(&h->lock);
        w->next = h->head;
        h->head = w;
        pthread_mutex_unlock(&h->lock);
        if (!ready_now(w->app, w->id, w->after))
            return;
        pthread_mutex_lock(&h->lock);
        mine = unlink_waiter(h, w);
        pthread_mutex_unlock(&h->lock);
        if (!mine)
            return;             /* someone else answered it */
    }
    http_deferred_finish(w->d, longpoll_fill, w);
    waiter_free(w);
}

void watch_job_changed(void *ctx, const char *id)
{
    struct watch *h = ctx;
    struct waiter *ready = NULL, **wake = NULL;
    size_t nwake = 0, cap = 0;

    pthread_mutex_lock(&h->lock);
    for (struct waiter **p = &h->head; *p;) {
        struct waiter *w = *p;
        if (strcmp(w->id, id) != 0) {
            p = &w->next;
        } else if (!w->stream) {
            *p = w->next;          /* ours now: finished below */
            w->next = ready;
            ready = w;
        } else {
            if (nwake == cap) {
                size_t ncap = cap ? cap * 2 : 8;
                struct waiter **nw = realloc(wake, ncap * sizeof *nw);
                if (nw) {
                    wake = nw;
                    cap = ncap;
                }
            }
            if (nwake < cap) {
                w->refs++;         /* kept alive while we wake it */
                wake[nwake++] = w;
            }
            p = &w->next;
        }
    }
    pthread_mutex_unlock(&h->lock);
    while (ready) {
        struct waiter *w = ready;
        ready = w->next;
        w->next = NULL;
        settle(h, w);
    }
    for (size_t i = 0; i < nwake; i++) {
        http_stream_wake(wake[i]->st);
        stream_unref(h, wake[i]);
    }
    free(wake);
}

void watch_tick(void *ctx)
{
    struct watch *h = ctx;
    struct waiter *done = NULL;
    double now = ec_clock();

    pthread_mutex_lock(&h->lock);
    for (struct waiter **p = &h->head; *p;) {
        struct waiter *w = *p;
        /* Past its deadline the server has answered it (204); only the
         * handle is left to give back. */
        if (!w->stream && w->deadline + 0.5 < now) {
            *p = w->next;
            w->next = done;
            done = w;
        } else {
            p = &w->next;
        }
    }
    pthread_mutex_unlock(&h->lock);
    while (done) {
        struct waiter *w = done;
        done = w->next;
        http_deferred_finish(w->d, NULL, NULL);
        waiter_free(w);
    }
}

void watch_free(struct watch *h)
{
    if (!h)
        return;
    /* The server has stopped: long-polls were answered 503 and streams
     * closed (their on_close ran), so only long-poll handles remain. */
    while (h->head) {
        struct waiter *w = h->head;
        h->head = w->next;
        if (!w->stream) {
            http_deferred_finish(w->d, NULL, NULL);
            waiter_free(w);
        }
    }
    pthread_mutex_destroy(&h->lock);
    free(h);
}

int watch_longpoll(struct watch *h, struct http_resp *rs, const char *owner,
                   const char *id, long long after, unsigned wait_ms, http_fill_fn fill,
                   void *arg, void (*free_arg)(void *))
{
    struct app *a = h->app;
    struct waiter *w = calloc(1, sizeof *w);
    int mine;

    if (!w) {
        if (free_arg)
            free_arg(arg);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    if (take_share(a, rs, owner) < 0) {
        if (free_arg)
            free_arg(arg);
        free(w);
        return 0;
    }
    snprintf(w->owner, sizeof w->owner, "%s", owner);
    w->app = a;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->after = after;
    w->fill = fill;
    w->arg = arg;
    w->free_arg = free_arg;
    w->deadline = ec_clock() + wait_ms / 1000.0;
    if (!(w->d = http_defer(rs, wait_ms, NULL, NULL))) {
        waiter_free(w);
        return 0;               /* http_defer has replied */
    }
    /* Register first, then look: a batch stored in between still finds
     * the waiter, so no wake-up is lost. */
    pthread_mutex_lock(&h->lock);
    w->next = h->head;
    h->head = w;
    pthread_mutex_unlock(&h->lock);
    if (!ready_now(a, id, after))
        return 0;
    pthread_mutex_lock(&h->lock);
    mine = unlink_waiter(h, w);
    pthread_mutex_unlock(&h->lock);
    if (mine) {
        http_deferred_finish(w->d, longpoll_fill, w);
        waiter_free(w);
    }
    return 0;
}

/* One "state" event, when the state moved since the last one sent. */
static void send_state(struct waiter *w, struct http_stream *st,
                       const struct store_job *job)
{
    json_t *o;
    char *text;

    if ((int)job->state == w->last_state)
        return;
    o = json_pack("{s:s, s:s, s:o, s:o}", "id", job->id, "state",
                  store_job_state_name(job->state), "reason",
                  job->reason ? json_string(job->reason) : json_null(), "outcome",
                  job->outcome ? json_string(job->outcome) : json_null());
    text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (text)
        http_sse_event(st, "state", NULL, text);
    free(text);
    json_decref(o);
    w->last_state = (int)job->state;
}

/* Metric events for the rows after last_round, up to EVENTS_PER_WAKE in
 * one call; returns whether rows remain. */
static int send_rows(struct waiter *w, struct http_stream *st, struct store *db,
                     size_t *sent)
{
    struct store_metrics_page page = {0};
    struct store_err e = {0};
    ec_metric rows[100];
    char *docs[100], idbuf[32];

    while (*sent < EVENTS_PER_WAKE &&
           store_metrics_query_docs(db, w->id, w->last_round, 100, 1, rows, docs, &page,
                                    &e) == 0 &&
           page.count > 0) {
        for (size_t i = 0; i < page.count; i++) {
            /* The stored document as it is; formatted only for old rows. */
            json_t *o = docs[i] ? NULL : describe_metric(&rows[i]);
            char *text = docs[i] ? docs[i] : o ? json_dumps(o, JSON_COMPACT) : NULL;
            snprintf(idbuf, sizeof idbuf, "%llu", (unsigned long long)rows[i].round);
            if (text)
                http_sse_event(st, "metric", idbuf, text);
            free(text);
            json_decref(o);
        }
        w->last_round = page.next_after;
        *sent += page.count;
        if (!page.more)
            return 0;
    }
    return *sent >= EVENTS_PER_WAKE;
}

/*
 * Sends what is new, in an order a reader can rely on: the current state
 * if it moved (while the job is not over), the rows after last_round, and
 * last the final state, once every row has gone out.
 */
static int events_produce(void *arg, struct http_stream *st)
{
    struct waiter *w = arg;
    struct app *a = w->app;
    struct store *db = app_reader(a);
    struct store_job job = {0};
    struct store_err e = {0};
    size_t sent = 0;
    int final = 0, more = 0;

    if (store_job_get(db, w->id, NULL, &job, &e) == 0 &&
        !store_job_state_is_final(job.state))
        send_state(w, st, &job);
    store_job_clear(&job);
    more = send_rows(w, st, db, &sent);
    if (!more) {
        if (store_job_get(db, w->id, NULL, &job, &e) == 0) {
            final = store_job_state_is_final(job.state);
            /* The job's last rows are stored before it is marked ended, so
             * one more pass now catches any that came after the first. */
            if (final && !(more = send_rows(w, st, db, &sent)))
                send_state(w, st, &job);
        } else {
            final = 1;            /* deleted meanwhile */
        }
        store_job_clear(&job);
    }
    app_reader_done(a, db);
    if (more) {
        http_stream_wake(st);     /* the rest on the next call */
        return HTTP_STREAM_MORE;
    }
    return final ? HTTP_STREAM_END : HTTP_STREAM_MORE;
}

static void events_close(void *arg)
{
    struct waiter *w = arg;
    struct watch *h = w->hub;

    pthread_mutex_lock(&h->lock);
    unlink_waiter(h, w);
    w->closed = 1;
    pthread_mutex_unlock(&h->lock);
    give_share(w);                /* the connection is free again */
    stream_unref(h, w);
}

int watch_events(struct watch *h, struct http_resp *rs, const char *owner,
                 const char *id, long long after)
{
    struct waiter *w = calloc(1, sizeof *w);
    struct http_stream *st;

    if (!w)
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    if (take_share(h->app, rs, owner) < 0) {
        free(w);
        return 0;
    }
    snprintf(w->owner, sizeof w->owner, "%s", owner);
    w->app = h->app;
    w->hub = h;
    w->stream = 1;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->last_round = after;
    w->last_state = -1;
    w->refs = 2;                  /* ours while setting up, and on_close's */
    http_reply_header(rs, "Cache-Control", "no-store");
    st = http_reply_stream(rs, 200, "text/event-stream", 15000, events_produce,
                           events_close, w);
    if (!st) {
        give_share(w);
        free(w);
        return 0;                 /* replied 500; on_close will not run */
    }
    pthread_mutex_lock(&h->lock);
    w->st = st;
    if (!w->closed) {
        w->next = h->head;
        h->head = w;
    }
    pthread_mutex_unlock(&h->lock);
    /* Anything stored before we were listed is sent now. */
    http_stream_wake(st);
    stream_unref(h, w);
    return 0;
}
