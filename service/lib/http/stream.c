/*
 * HTTP replies that wait: deferred replies (long-poll), streams (SSE) and
 * request bodies streamed to a route's sink.
 */
#include "http_int.h"

/* ------------------------------------------------------------------ */
/* Deferred replies                                                     */

static void d_unref(struct http_deferred *d)
{
    int left;

    pthread_mutex_lock(&d->mu);
    left = --d->refs;
    pthread_mutex_unlock(&d->mu);
    if (left == 0) {
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->done);
        free(d);
    }
}

/* After a fill: the reply is ready, so a parked connection goes on. */
static void d_complete(struct http_deferred *d)
{
    pthread_mutex_lock(&d->mu);
    d->state = D_DONE;
    if (d->suspended) {
        d->suspended = 0;
        MHD_resume_connection(d->x->conn);
    }
    pthread_cond_broadcast(&d->done);
    pthread_mutex_unlock(&d->mu);
}

/* Claims a pending d for the timer or for stop (srv->lock held). */
int http__d_claim_locked(struct http_deferred *d)
{
    int ok;

    pthread_mutex_lock(&d->mu);
    ok = d->state == D_PENDING;
    if (ok) {
        d->state = D_FILLING;
        d->refs++;
    }
    pthread_mutex_unlock(&d->mu);
    return ok;
}

static void fill_no_content(struct http_resp *rs, void *arg)
{
    (void)arg;
    http_reply_text(rs, 204, NULL, NULL, 0);
}

static void fill_shutdown(struct http_resp *rs, void *arg)
{
    (void)arg;
    http__problem(rs, 503, NULL, "the server is shutting down");
}

/* Runs fill on a claimed batch, outside every lock, then releases it. */
void http__d_fill_batch(struct http_deferred *batch, int stopping)
{
    while (batch) {
        struct http_deferred *d = batch;
        struct http_resp *rs = &d->x->rs;

        batch = d->claimed_next;
        if (stopping)
            fill_shutdown(rs, NULL);
        else
            (d->on_timeout ? d->on_timeout : fill_no_content)(rs, d->arg);
        if (rs->kind == RESP_NONE)
            http__problem(rs, 500, NULL, "the timeout produced no response");
        d_complete(d);
        d_unref(d);
    }
}

struct http_deferred *http_defer(struct http_resp *rs, unsigned timeout_ms,
                                 http_fill_fn on_timeout, void *arg)
{
    struct http_exchange *x = rs->x;
    struct http_server *srv = x->srv;
    struct http_deferred *d;

    if (x->phase != PH_HANDLER || x->deferred || x->at_headers) {
        http__problem(rs, 500, NULL, "a reply was deferred outside its handler");
        return NULL;
    }
    if (!(d = calloc(1, sizeof *d))) {
        http__reply_oom(rs);
        return NULL;
    }
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->done, NULL);
    d->refs = 2;
    d->state = D_PENDING;
    d->x = x;
    d->deadline_ns = http__mono_ns() + (uint64_t)timeout_ms * 1000000u;
    d->on_timeout = on_timeout;
    d->arg = arg;
    /* rs is the filler's once d is in the list, maybe at once (a timeout
       of 0): everything the handler's thread does to it comes first. */
    http__resp_clear_body(rs);
    x->deferred = d;
    pthread_mutex_lock(&srv->lock);
    if (srv->stopping) {
        pthread_mutex_unlock(&srv->lock);
        x->deferred = NULL;
        pthread_mutex_destroy(&d->mu);
        pthread_cond_destroy(&d->done);
        free(d);
        fill_shutdown(rs, NULL);
        return NULL;
    }
    d->next = srv->deferreds;
    if (d->next)
        d->next->prev = d;
    srv->deferreds = d;
    if (d->deadline_ns < srv->timer_next_ns)
        pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
    return d;
}

int http_deferred_finish(struct http_deferred *d, http_fill_fn fill,
                         void *arg)
{
    int claimed = 0;

    if (!d)
        return EC_EINVAL;
    pthread_mutex_lock(&d->mu);
    if (fill && d->state == D_PENDING) {
        d->state = D_FILLING;
        claimed = 1;
    }
    pthread_mutex_unlock(&d->mu);
    if (claimed) {
        /* The request cannot end while FILLING: its connection is parked,
           or its handler has yet to look at the state. */
        struct http_resp *rs = &d->x->rs;

        fill(rs, arg);
        if (rs->kind == RESP_NONE)
            http__problem(rs, 500, NULL, "the deferred reply produced nothing");
        d_complete(d);
    }
    d_unref(d);
    return claimed || !fill ? 0 : EC_ETIMEOUT;
}

/* The request is over: d no longer refers to it. */
void http__d_detach(struct http_server *srv, struct http_deferred *d)
{
    pthread_mutex_lock(&srv->lock);
    if (d->prev)
        d->prev->next = d->next;
    else
        srv->deferreds = d->next;
    if (d->next)
        d->next->prev = d->prev;
    d->prev = d->next = NULL;
    pthread_cond_broadcast(&srv->drained);
    pthread_mutex_unlock(&srv->lock);
    pthread_mutex_lock(&d->mu);
    if (d->state == D_PENDING)
        d->state = D_DONE;  /* the client vanished: nothing more to fill */
    d->x = NULL;
    pthread_mutex_unlock(&d->mu);
    d_unref(d);
}

/* ------------------------------------------------------------------ */
/* Streams                                                              */

static void st_unref(struct http_stream *st)
{
    int left;

    pthread_mutex_lock(&st->mu);
    left = --st->refs;
    pthread_mutex_unlock(&st->mu);
    if (left == 0) {
        pthread_mutex_destroy(&st->mu);
        free(st->out);
        free(st);
    }
}

/* Ends a stream: on_close once, then the response's reference goes. */
static void st_over(struct http_stream *st)
{
    int first;

    pthread_mutex_lock(&st->mu);
    first = !st->over;
    st->over = 1;
    st->suspended = 0;
    st->conn = NULL;
    pthread_mutex_unlock(&st->mu);
    if (first && st->on_close)
        st->on_close(st->arg);
    st_unref(st);
}

/* A stream replied but never handed to MHD (replaced, or the handler's
   request failed): it is over before it began. */
void http__resp_drop_stream(struct http_resp *rs)
{
    if (rs->stream) {
        st_over(rs->stream);
        rs->stream = NULL;
    }
}

/* A stream's keep-alive is due at deadline: the timer need only hear of
   it when it would otherwise look later. A stream that sends rows keeps
   moving its deadline later, and so costs the timer no wake-up. */
static void st_signal_timer(struct http_server *srv, uint64_t deadline)
{
    pthread_mutex_lock(&srv->lock);
    if (deadline < srv->timer_next_ns)
        pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
}

static int st_append(struct http_stream *st, const void *data, size_t len)
{
    size_t queued = st->out_len - st->out_off;

    if (len > HTTP_STREAM_BUF_MAX - queued)
        return EC_ELIMIT;
    if (st->out_off && st->out_len + len > st->out_cap) {
        memmove(st->out, st->out + st->out_off, queued);
        st->out_off = 0;
        st->out_len = queued;
    }
    if (st->out_len + len > st->out_cap) {
        size_t cap = st->out_cap ? st->out_cap : 1024;
        char *p;

        while (cap < st->out_len + len)
            cap *= 2;
        if (!(p = realloc(st->out, cap)))
            return EC_ENOMEM;
        st->out = p;
        st->out_cap = cap;
    }
    memcpy(st->out + st->out_len, data, len);
    st->out_len += len;
    return 0;
}

int http_stream_write(struct http_stream *st, const void *data, size_t len)
{
    if (!st || !st->in_produce || (!data && len))
        return EC_EINVAL;
    return st_append(st, data, len);
}

/* "name: value\n" at o; past it. */
static char *sse_field(char *o, const char *name, const char *value, size_t n)
{
    size_t nl = strlen(name);

    memcpy(o, name, nl);
    memcpy(o + nl, value, n);
    o[nl + n] = '\n';
    return o + nl + n + 1;
}

int http_sse_event(struct http_stream *st, const char *event, const char *id,
                   const char *data)
{
    size_t need = 1, n;
    const char *p;
    char *buf, *o;
    int rc;

    if (!st || !st->in_produce || (event && strpbrk(event, "\r\n")) ||
        (id && strpbrk(id, "\r\n")))
        return EC_EINVAL;
    data = data ? data : "";
    need += event ? strlen(event) + 8 : 0;
    need += id ? strlen(id) + 5 : 0;
    /* Each line of data costs "data: " and a newline at most. */
    for (p = data;; p += n) {
        n = strcspn(p, "\r\n");
        need += n + 7;
        if (!p[n])
            break;
        n += (p[n] == '\r' && p[n + 1] == '\n') ? 2 : 1;
    }
    if (need > HTTP_STREAM_BUF_MAX)
        return EC_ELIMIT;
    if (!(o = buf = malloc(need + 1)))
        return EC_ENOMEM;
    /* One event per metric row: copied, not formatted. */
    if (event)
        o = sse_field(o, "event: ", event, strlen(event));
    if (id)
        o = sse_field(o, "id: ", id, strlen(id));
    for (p = data;; p += n) {
        n = strcspn(p, "\r\n");
        o = sse_field(o, "data: ", p, n);
        if (!p[n])
            break;
        n += (p[n] == '\r' && p[n + 1] == '\n') ? 2 : 1;
    }
    *o++ = '\n';
    rc = st_append(st, buf, (size_t)(o - buf));
    free(buf);
    return rc;
}

int http_stream_wake(struct http_stream *st)
{
    int rc = 0;

    if (!st)
        return EC_EINVAL;
    pthread_mutex_lock(&st->mu);
    if (st->over) {
        rc = EC_EPEER;
    } else {
        st->woken = 1;
        if (st->suspended) {
            st->suspended = 0;
            MHD_resume_connection(st->conn);
        }
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

void http_stream_release(struct http_stream *st)
{
    if (st)
        st_unref(st);
}

/*
 * MHD's content reader. Sends what is queued, asks the producer for more
 * when woken, sends a keep-alive when quiet; with nothing to send it parks
 * the connection and returns 0, as MHD's documentation prescribes (0
 * without suspending would make the polling thread spin).
 */
ssize_t http__stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct http_stream *st = cls;

    (void)pos;
    for (;;) {
        uint64_t now, deadline;
        int woken, stopping;

        if (st->out_off < st->out_len) {
            size_t n = st->out_len - st->out_off;

            n = n < max ? n : max;
            memcpy(buf, st->out + st->out_off, n);
            st->out_off += n;
            if (st->out_off == st->out_len)
                st->out_off = st->out_len = 0;
            st->last_send_ns = http__mono_ns();
            st->x->bytes += n;
            return (ssize_t)n;
        }
        if (st->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&st->mu);
        woken = st->woken;
        stopping = st->stopping;
        st->woken = 0;
        pthread_mutex_unlock(&st->mu);
        if (stopping) {
            st->ended = 1;
            continue;
        }
        if (woken) {
            st->in_produce = 1;
            if (st->produce(st->arg, st) == HTTP_STREAM_END)
                st->ended = 1;
            st->in_produce = 0;
            continue;
        }
        now = http__mono_ns();
        if (st->keepalive_ms &&
            now - st->last_send_ns >= (uint64_t)st->keepalive_ms * 1000000u) {
            if (st_append(st, KEEPALIVE_COMMENT,
                          sizeof KEEPALIVE_COMMENT - 1) < 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            continue;
        }
        pthread_mutex_lock(&st->mu);
        if (st->woken || st->stopping) {
            pthread_mutex_unlock(&st->mu);
            continue;
        }
        st->suspended = 1;
        st->deadline_ns = deadline =
            st->keepalive_ms
                ? st->last_send_ns + (uint64_t)st->keepalive_ms * 1000000u
                : UINT64_MAX;
        MHD_suspend_connection(st->conn);
        pthread_mutex_unlock(&st->mu);
        if (st->keepalive_ms)
            st_signal_timer(st->srv, deadline);
        return 0;
    }
}

/* MHD frees the response: the connection is gone or the stream ended. */
void http__stream_free(void *cls)
{
    struct http_stream *st = cls;
    struct http_server *srv = st->srv;

    pthread_mutex_lock(&srv->lock);
    if (st->prev)
        st->prev->next = st->next;
    else if (srv->streams == st)
        srv->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    pthread_cond_broadcast(&srv->drained);
    pthread_mutex_unlock(&srv->lock);
    st_over(st);
}

struct http_stream *http_reply_stream(struct http_resp *rs, int status,
                                      const char *content_type,
                                      unsigned keepalive_ms,
                                      http_stream_fn produce,
                                      http_close_fn on_close, void *arg)
{
    struct http_stream *st;

    if (!http__status_valid(status) || !content_type ||
        !http__ctype_valid(content_type) || !produce || rs->x->deferred ||
        rs->x->at_headers) {
        http__problem(rs, 500, NULL, "a handler started an invalid stream");
        return NULL;
    }
    if (!(st = calloc(1, sizeof *st))) {
        http__reply_oom(rs);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    st->refs = 2;
    st->woken = 1;          /* the producer speaks first */
    st->keepalive_ms = keepalive_ms;
    st->produce = produce;
    st->on_close = on_close;
    st->arg = arg;
    st->srv = rs->x->srv;
    st->x = rs->x;
    st->last_send_ns = http__mono_ns();
    http__resp_clear_body(rs);
    rs->kind = RESP_STREAM;
    rs->status = status;
    http__fmt(rs->content_type, sizeof rs->content_type, "%s", content_type);
    rs->stream = st;
    return st;
}

/* ------------------------------------------------------------------ */
/* Streamed bodies: noticing a client that left                         */

/*
 * MHD (0.9.75, epoll) can miss a client's close that arrives while it is
 * still reading the body: its edge is spent, the last read was short, and
 * it waits for the connection timeout. An upload would then hold its
 * temporary file that long. So the timer looks at every connection whose
 * body streams: when the client has hung up and left nothing unread for
 * PEER_CHECK_MS, the body can never complete, and shutting the socket down
 * makes MHD see the end, close, and abort the sink. The fd stays valid
 * under srv->lock: MHD calls on_completed, which unlinks the exchange under
 * that lock, before it closes the socket.
 */
static void sink_link(struct http_exchange *x)
{
    struct http_server *srv = x->srv;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(x->conn, MHD_CONNECTION_INFO_CONNECTION_FD);

    if (!ci)
        return;                 /* then only the connection timeout */
    x->sink_fd = ci->connect_fd;
    pthread_mutex_lock(&srv->lock);
    x->sink_prev = NULL;
    x->sink_next = srv->sinks;
    if (x->sink_next)
        x->sink_next->sink_prev = x;
    srv->sinks = x;
    x->sink_linked = 1;
    pthread_cond_signal(&srv->tick);
    pthread_mutex_unlock(&srv->lock);
}

void http__sink_unlink(struct http_exchange *x)
{
    struct http_server *srv = x->srv;

    if (!x->sink_linked)
        return;
    pthread_mutex_lock(&srv->lock);
    if (x->sink_prev)
        x->sink_prev->sink_next = x->sink_next;
    else
        srv->sinks = x->sink_next;
    if (x->sink_next)
        x->sink_next->sink_prev = x->sink_prev;
    x->sink_prev = x->sink_next = NULL;
    x->sink_linked = 0;
    pthread_mutex_unlock(&srv->lock);
}

/* srv->lock held. */
void http__sink_check_peer(struct http_exchange *x, uint64_t now)
{
    struct pollfd p;
    int unread = 0;

    p.fd = x->sink_fd;
    p.events = POLLIN;
    p.revents = 0;
    /* Readable with nothing to read: the end of the stream, or an error. */
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)) &&
        ioctl(p.fd, FIONREAD, &unread) == 0 && unread == 0) {
        if (!x->sink_hup_ns)
            x->sink_hup_ns = now;
        else if (now - x->sink_hup_ns >= PEER_CHECK_MS * 1000000ull)
            shutdown(p.fd, SHUT_RDWR);
    } else {
        x->sink_hup_ns = 0;
    }
}

/* The streamed body's sink is done with: abort, once. */
void http__sink_abort(struct http_exchange *x)
{
    http__sink_unlink(x);
    if (x->sink_on) {
        x->sink_on = 0;
        x->sink.abort(x->sink_ctx);
    }
}

int http_body_stream(struct http_resp *rs, size_t limit,
                     const char *limit_name, const struct http_body_ops *ops,
                     void *ctx)
{
    struct http_exchange *x = rs->x;
    const char *cl, *name = limit_name && *limit_name ? limit_name : "limit";
    unsigned long long len;

    if (!ops || !ops->write || !ops->end || !ops->abort) {
        if (ops && ops->abort)
            ops->abort(ctx);
        http__problem(rs, 500, NULL, "a handler took a body without write, end "
                      "and abort functions");
        return EC_EINVAL;
    }
    if (!x->at_headers || x->sink_on) {
        ops->abort(ctx);
        http__problem(rs, 500, NULL, "a body can only be streamed by the handler "
                      "of an HTTP_STREAM_BODY route, once, on the headers");
        return EC_EINVAL;
    }
    /* A declared length over the limit is refused before a byte of the
       body is read (and before MHD would send 100 Continue). */
    cl = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        errno = 0;
        len = strtoull(cl, NULL, 10);
        if (len > limit || errno) {
            http__problem(rs, 413,
                          json_pack("{s:s,s:I}", "limit", name, "value",
                                    (json_int_t)limit),
                          "the request body is %llu bytes, more than the limit of "
                          "%zu bytes (%s)", errno ? ULLONG_MAX : len, limit, name);
            ops->abort(ctx);
            return EC_ELIMIT;
        }
    }
    http__resp_clear_body(rs);
    x->sink = *ops;
    x->sink_ctx = ctx;
    x->sink_limit = limit;
    x->sink_len = 0;
    x->sink_failed = 0;
    http__fmt(x->sink_limit_name, sizeof x->sink_limit_name, "%s", name);
    x->sink_on = 1;
    sink_link(x);
    return 0;
}

/*
 * A piece of a streamed body goes to the sink as it is. Past the limit
 * the 413 is decided on the first piece too many, the sink aborted at once
 * (an upload's temporary file goes now, not when the client stops), and
 * what follows dropped as after any early answer.
 */
static int sink_append(struct http_exchange *x, const char *data, size_t n)
{
    if (x->sink_failed) {
        x->discarded += n;
        return x->discarded > DISCARD_MAX ? -1 : 0;
    }
    if (n > x->sink_limit - x->sink_len) {
        http__problem(&x->rs, 413,
                      json_pack("{s:s,s:I}", "limit", x->sink_limit_name, "value",
                                (json_int_t)x->sink_limit),
                      "the request body is more than the limit of %zu bytes (%s)",
                      x->sink_limit, x->sink_limit_name);
        http__sink_abort(x);
        x->discard = 1;
        x->discarded = 0;
        return 0;
    }
    x->sink_len += n;
    if (x->sink.write(x->sink_ctx, data, n) < 0)
        x->sink_failed = 1;
    return 0;
}

/*
 * Appends a piece of the body. When it outgrows max_body (a chunked body,
 * whose size was not announced), the 413 is decided here, on the first
 * piece too many, and the rest dropped: MHD 0.9.75 refuses to queue a
 * reply while a body is arriving, so it goes out when the body ends.
 * Returns 0, or -1 when so much was dropped that the connection goes.
 */
int http__body_append(struct http_exchange *x, const char *data, size_t n)
{
    size_t max = x->srv->max_body;

    if (x->discard) {
        x->discarded += n;
        return x->discarded > DISCARD_MAX ? -1 : 0;
    }
    if (x->sink_on)
        return sink_append(x, data, n);
    if (n > max - x->body_len) {
        http__problem(&x->rs, 413,
                      json_pack("{s:s,s:I}", "limit", "max_body", "value",
                                (json_int_t)max),
                      "the request body is more than the limit of %zu bytes "
                      "(max_body)", max);
        x->discard = 1;
        x->discarded = x->body_len + n;
        free(x->body);
        x->body = NULL;
        x->body_len = x->body_cap = 0;
        return 0;
    }
    if (x->body_len + n + 1 > x->body_cap) {
        size_t cap = x->body_cap ? x->body_cap : 4096;
        char *p;

        while (cap < x->body_len + n + 1)
            cap *= 2;
        if (cap > max + 1)
            cap = max + 1;
        if (!(p = realloc(x->body, cap))) {
            http__reply_oom(&x->rs);
            x->discard = 1;
            return 0;
        }
        x->body = p;
        x->body_cap = cap;
    }
    memcpy(x->body + x->body_len, data, n);
    x->body_len += n;
    x->body[x->body_len] = '\0';
    return 0;
}
