/*
 * A job's metric rows: pages (JSON or CSV) with a cursor, downsampling to
 * a number of points, long-polls for rows to come, and the SSE stream.
 */
#define _GNU_SOURCE
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"
#include "pagecache.h"
#include "watch.h"

#define METRICS_DEFAULT 1000
#define METRICS_MAX 10000
#define WAIT_MAX 60             /* seconds a long-poll may wait */
#define METRICS_EVERY_MAX 1000000000

static int wants_csv(struct http_req *rq)
{
    const char *accept = http_header(rq, "Accept");
    const char *format = http_query(rq, "format");

    return (format && strcmp(format, "csv") == 0) ||
           (accept && strstr(accept, "text/csv"));
}

/*
 * The JSON page from the rows' stored documents, joined as they are: no
 * number is formatted again. A row stored without one (before migration
 * 0002) is formatted from its numbers.
 */
static int reply_metrics_docs(struct http_resp *rs, struct pagecache *pages,
                              const char *id, const char *owner,
                              long long after, size_t limit, const ec_metric *rows,
                              char **docs, const struct store_metrics_page *page,
                              size_t every, int final)
{
    size_t cap = 128, len = 0;
    char *text, tail[128];
    int rc, n;

    for (size_t i = 0; i < page->count; i++) {
        if (!docs[i]) {
            json_t *o = describe_metric(&rows[i]);
            docs[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
            json_decref(o);
            if (!docs[i])
                return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        }
        cap += strlen(docs[i]) + 1;
    }
    if (!(text = malloc(cap)))
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    memcpy(text, "{\"rows\":[", 9);
    len = 9;
    for (size_t i = 0; i < page->count; i++) {
        size_t l = strlen(docs[i]);
        if (i)
            text[len++] = ',';
        memcpy(text + len, docs[i], l);
        len += l;
    }
    n = snprintf(tail, sizeof tail, "],\"next_after\":%lld,\"more\":%s,\"every\":%zu}",
                 (long long)page->next_after, page->more ? "true" : "false", every);
    memcpy(text + len, tail, (size_t)n);
    len += (size_t)n;
    /* A full window, or a job that has ended: no later row can change it. */
    if (page->more || final)
        pagecache_put(pages, id, owner, after, limit, every, text, len);
    rc = http_reply_text(rs, 200, "application/json", text, len);
    free(text);
    return rc;
}

/* Replies with the job's rows after `after` (JSON, or CSV). final: the
   job has ended, so every page of it is for keeps (pagecache.h); owner,
   when not NULL, lets such pages be kept. */
static int reply_metrics(struct app *a, struct http_resp *rs, const char *id,
                         long long after, size_t limit, size_t every, int csv,
                         int final, const char *owner)
{
    struct store_err e = {0};
    struct store_metrics_page page = {0};
    ec_metric *rows = malloc(limit * sizeof *rows);
    char **docs = csv ? NULL : calloc(limit, sizeof *docs);
    struct store *st;
    int rc;

    if (!rows || (!csv && !docs)) {
        free(rows);
        free(docs);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    st = app_reader(a);
    rc = store_metrics_query_docs(st, id, after, limit, every, rows, docs, &page, &e);
    app_reader_done(a, st);
    if (rc < 0) {
        free(rows);
        free(docs);
        return api_reply_store(rs, &e, "no such job");
    }
    if (!csv) {
        rc = reply_metrics_docs(rs, a->pages, id, owner, after < -1 ? -1 : after, limit, rows, docs,
                                &page, every, final);
        for (size_t i = 0; i < page.count; i++)
            free(docs[i]);
        free(docs);
        free(rows);
        return rc;
    }
    size_t cap = 128 + page.count * 400, len = 0;
    char *text = malloc(cap), line[512], next[32];
    if (!text) {
        free(rows);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    len = (size_t)snprintf(text, cap, "%s\n", describe_csv_header);
    for (size_t i = 0; i < page.count; i++) {
        int n = describe_csv_row(&rows[i], line, sizeof line);
        if (n > 0 && len + (size_t)n + 2 < cap) {
            memcpy(text + len, line, (size_t)n);
            len += (size_t)n;
            text[len++] = '\n';
        }
    }
    snprintf(next, sizeof next, "%lld", (long long)page.next_after);
    http_reply_header(rs, "X-Next-After", next);
    rc = http_reply_text(rs, 200, "text/csv", text, len);
    free(text);
    free(rows);
    return rc;
}

int metrics_cursor_parse(const struct http_req *rq, struct metrics_cursor *c,
                         struct query_problem *qp)
{
    if (api_query_int(rq, "after", -1, INT64_MAX, -1, &c->after, qp) < 0 ||
        api_query_int(rq, "limit", 1, METRICS_MAX, METRICS_DEFAULT, &c->limit,
                        qp) < 0 ||
        api_query_int(rq, "every", 1, METRICS_EVERY_MAX, 1, &c->every, qp) < 0 ||
        api_query_int(rq, "max_points", 2, METRICS_MAX, 0, &c->max_points,
                        qp) < 0 ||
        api_query_int(rq, "wait", 0, WAIT_MAX, 0, &c->wait, qp) < 0)
        return -1;
    return 0;
}

void metrics_cursor_fit(struct metrics_cursor *c, int64_t count)
{
    if (c->max_points <= 0)
        return;
    /*
     * Downsample so that the whole remaining curve fits in max_points:
     * every = (count + max_points - 2) / (max_points - 1), written so that
     * no count can overflow it.
     */
    if (count > c->max_points)
        c->every = (count - 1) / (c->max_points - 1) + 1;
    if (c->limit > c->max_points)
        c->limit = c->max_points;
}

/*
 * A CSV download without a limit: every row after `after`, streamed a page
 * at a time (the next page is read when the last one has gone out), so a
 * job of any length downloads whole in memory of one page.
 */
#define CSV_STREAM_PAGE 2000

struct csv_stream {
    struct app *app;
    char id[STORE_ID_LEN + 1];
    long long after;
    size_t every;
    int header_sent;
    ec_metric rows[CSV_STREAM_PAGE];
};

static int csv_produce(void *arg, struct http_stream *st)
{
    struct csv_stream *c = arg;
    struct store_metrics_page page = {0};
    struct store_err e = {0};
    struct store *db = app_reader(c->app);
    char line[512];
    int rc;

    rc = store_metrics_query(db, c->id, c->after, CSV_STREAM_PAGE, c->every, c->rows,
                             &page, &e);
    app_reader_done(c->app, db);
    if (!c->header_sent) {
        http_stream_write(st, describe_csv_header, strlen(describe_csv_header));
        http_stream_write(st, "\n", 1);
        c->header_sent = 1;
    }
    if (rc < 0)
        return HTTP_STREAM_END;         /* deleted meanwhile: what was sent is all */
    for (size_t i = 0; i < page.count; i++) {
        int n = describe_csv_row(&c->rows[i], line, sizeof line - 1);

        if (n > 0) {
            line[n] = '\n';
            http_stream_write(st, line, (size_t)n + 1);
        }
    }
    c->after = page.next_after;
    if (!page.more)
        return HTTP_STREAM_END;
    http_stream_wake(st);               /* the next page once this one is out */
    return HTTP_STREAM_MORE;
}

static int reply_csv_stream(struct app *a, struct http_resp *rs, const char *id,
                            long long after, size_t every)
{
    struct csv_stream *c = calloc(1, sizeof *c);
    struct http_stream *st;

    if (!c)
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    c->app = a;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->after = after < -1 ? -1 : after;
    c->every = every;
    if (!(st = http_reply_stream(rs, 200, "text/csv", 0, csv_produce, free, c))) {
        free(c);
        return 0;                       /* replied 500; on_close will not run */
    }
    http_stream_release(st);
    return 0;
}

/* A long-poll's page, once its rows are there. */
struct longpoll_page {
    struct app *app;
    char id[STORE_ID_LEN + 1];
    long long after;
    size_t limit, every;
    int csv;
};

static void longpoll_fill(struct http_resp *rs, void *arg)
{
    struct longpoll_page *p = arg;

    reply_metrics(p->app, rs, p->id, p->after, p->limit, p->every, p->csv, 0, NULL);
}

int h_job_metrics(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    const char *format;
    struct store_job job = {0};
    struct store_err e = {0};
    struct metrics_cursor c;
    struct query_problem qp;
    int finished, rc;

    if ((format = http_query(rq, "format")) && strcmp(format, "json") != 0 &&
        strcmp(format, "csv") != 0)
        return http_reply_problem(rs, 400, NULL, "format must be json or csv",
                                  json_pack("{s:s}", "parameter", "format"));
    if (metrics_cursor_parse(rq, &c, &qp) < 0) {
        api_reply_query(rs, &qp);
        return 0;
    }
    if (c.wait == 0 && c.max_points == 0 && !wants_csv(rq)) {
        /* A page that can no longer change, if it is cached and theirs. */
        char owner[64], *cached;
        size_t clen;

        cached = pagecache_get(a->pages, http_param(rq, "id"), c.after < -1 ? -1 : c.after,
                               (size_t)c.limit, (size_t)c.every, &clen, owner,
                               sizeof owner);
        if (api_reply_cached(rs, t, cached, clen, owner, &rc))
            return rc;
    }
    if (api_load_job(rq, rs, t, &job) < 0)
        return 0;
    finished = store_job_state_is_final(job.state);
    /* The version of the dataset the rows were computed on (a CSV has no
       place of its own for it). */
    if (job.dataset_sha256[0])
        http_reply_header(rs, "Ecopt-Dataset-Sha256", job.dataset_sha256);
    if (c.max_points > 0) {
        struct store *st = app_reader(a);
        int64_t count = 0;
        if (store_metrics_count(st, job.id, c.after, &count, &e) != 0)
            count = 0;
        app_reader_done(a, st);
        metrics_cursor_fit(&c, count);
    }
    if (c.wait > 0 && !finished) {
        /* Long-poll: answer when rows after `after` exist, or at the wait. */
        struct longpoll_page *p = calloc(1, sizeof *p);

        if (!p) {
            store_job_clear(&job);
            return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        }
        p->app = a;
        snprintf(p->id, sizeof p->id, "%s", job.id);
        p->after = c.after;
        p->limit = (size_t)c.limit;
        p->every = (size_t)c.every;
        p->csv = wants_csv(rq);
        rc = watch_longpoll(a->watch, rs, t->name, job.id, c.after, (unsigned)(c.wait * 1000),
                            longpoll_fill, p, free);
        store_job_clear(&job);
        return rc;
    }
    if (wants_csv(rq) && c.max_points == 0 && !http_query(rq, "limit"))
        rc = reply_csv_stream(a, rs, job.id, c.after, (size_t)c.every);
    else
        rc = reply_metrics(a, rs, job.id, c.after, (size_t)c.limit,
                           (size_t)c.every, wants_csv(rq), finished, job.owner);
    store_job_clear(&job);
    return rc;
}

int h_job_events(struct http_req *rq, struct http_resp *rs, const struct token *t)
{
    struct app *a = rq->app;
    const char *last_id;
    struct store_job job = {0};
    long long after;
    int rc;

    if (api_query_uint(rq, rs, "after", -1, INT64_MAX, -1, &after) < 0)
        return 0;
    /* A reconnecting EventSource names the last event it got: resume
     * after it (event ids are rounds). */
    if ((last_id = http_header(rq, "Last-Event-ID"))) {
        char *end;
        long long v;

        errno = 0;
        v = strtoll(last_id, &end, 10);
        if (errno || end == last_id || *end || v < -1)
            return http_reply_problem(rs, 400, NULL,
                                      "Last-Event-ID must be the id of an event this "
                                      "stream sent (a round number)",
                                      json_pack("{s:s}", "header", "Last-Event-ID"));
        if (v > after)
            after = v;
    }
    if (api_load_job(rq, rs, t, &job) < 0)
        return 0;
    rc = watch_events(a->watch, rs, t->name, job.id, after);
    store_job_clear(&job);
    return rc;
}

