/*
 * The HTTP server's requests: MHD's callbacks, the checks made before a
 * body is read, routing and dispatch. Starting and stopping it, and its
 * timer thread, are start.c's.
 */
#include "http_int.h"

static void client_address(struct MHD_Connection *conn, char *out,
                           size_t len)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;

    snprintf(out, len, "?");
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out,
                  (socklen_t)len);
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr,
                  out, (socklen_t)len);
}

/* The client's X-Request-Id when it is a sane one, so that its logs and
   ours can be joined; otherwise ours. */
static void request_id(struct http_exchange *x)
{
    const char *given =
        MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND, "X-Request-Id");
    unsigned long long n;

    if (given && http__param_valid(given, strlen(given)) &&
        strlen(given) <= REQUEST_ID_MAX) {
        strcpy(x->request_id, given);
        return;
    }
    n = atomic_fetch_add_explicit(&x->srv->next_id, 1, memory_order_relaxed);
    http__fmt(x->request_id, sizeof x->request_id, "%08x%08llx", x->srv->id_salt,
              n);
}

/* ------------------------------------------------------------------ */
/* MHD callbacks                                                        */

static void exchange_free(struct http_exchange *x)
{
    http__resp_free(&x->rs);
    http_query_free(&x->query);
    free(x->uri);
    free(x->path);
    free(x->param_buf);
    free(x->body);
    free(x);
}

/* Called by MHD once per request with the raw URI, before the headers:
   the object made here is the request's state until on_completed. */
void *http__on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    struct http_exchange *x = calloc(1, sizeof *x);

    if (!x)
        return NULL;
    x->srv = cls;
    x->conn = conn;
    x->t0_ns = http__mono_ns();
    x->route = -1;
    x->rs.x = x;
    if (!(x->uri = strdup(uri))) {
        free(x);
        return NULL;
    }
    /*
     * The query is ours to parse (http_query_parse, whose limits are
     * answered 400 naming them). Left to itself MHD would first split it
     * into its per-connection pool, where a thousand parameters use the
     * pool up and the connection is dropped with no answer at all. The
     * URI given here points into MHD's read buffer, not yet split (so in
     * 0.9.75 and 1.0): ending it just after the '?' leaves MHD nothing to
     * parse, while x->uri keeps all of it.
     */
    {
        char *q = strchr((char *)uri, '?');

        if (q && q[1])
            q[1] = '\0';
    }
    return x;
}

static enum MHD_Result queue_reply(struct http_exchange *x)
{
    struct http_resp *rs = &x->rs;
    struct MHD_Response *resp = NULL;
    enum MHD_Result ok;
    int bad = 0;

    if (rs->kind == RESP_NONE)
        http__problem(rs, 500, NULL, "the handler produced no response");
    if (rs->kind == RESP_STREAM) {
        struct http_stream *st = rs->stream;
        struct http_server *srv = x->srv;

        resp = MHD_create_response_from_callback(
            MHD_SIZE_UNKNOWN, STREAM_BLOCK, http__stream_read, st, http__stream_free);
        if (!resp) {
            http__reply_oom(rs);
        } else {
            /* From here MHD owns the stream; stream_free unlinks it. */
            rs->stream = NULL;
            st->conn = x->conn;
            pthread_mutex_lock(&srv->lock);
            pthread_mutex_lock(&st->mu);
            st->stopping = srv->stopping;
            pthread_mutex_unlock(&st->mu);
            st->next = srv->streams;
            if (st->next)
                st->next->prev = st;
            srv->streams = st;
            pthread_mutex_unlock(&srv->lock);
            /* A stream is never cached, unless the handler said how. */
            int said = 0;
            for (size_t i = 0; i < rs->nheaders; i++)
                said |= strcasecmp(rs->headers[i].name, "Cache-Control") == 0;
            if (!said)
                bad |= MHD_add_response_header(resp, "Cache-Control",
                                               "no-cache") != MHD_YES;
        }
    }
    if (!resp) {
        resp = MHD_create_response_from_buffer(
            rs->len, rs->body,
            rs->body_static ? MHD_RESPMEM_PERSISTENT : MHD_RESPMEM_MUST_FREE);
        if (!resp)
            return MHD_NO;
        rs->body = NULL;    /* MHD frees it */
        rs->body_static = 0;
        x->bytes = rs->len;
    }
    if (rs->len || rs->kind == RESP_STREAM || rs->status != 204)
        bad |= MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                       rs->content_type) != MHD_YES;
    bad |= MHD_add_response_header(resp, "X-Request-Id", x->request_id) !=
           MHD_YES;
    for (size_t i = 0; i < rs->nheaders; i++)
        bad |= MHD_add_response_header(resp, rs->headers[i].name,
                                       rs->headers[i].value) != MHD_YES;
    x->status = rs->status;
    ok = bad ? MHD_NO : MHD_queue_response(x->conn, (unsigned)rs->status,
                                           resp);
    MHD_destroy_response(resp);
    x->phase = PH_REPLIED;
    return ok;
}

/* Methods allowed on a path, for 405's Allow: table order, no repeats,
   HEAD beside GET. */
static void allowed_methods(struct http_server *srv, const char *path,
                            char *buf, size_t len, json_t *list)
{
    struct http_kv params[HTTP_MAX_PATH_PARAMS];
    size_t n, o = 0;
    char *tmp = malloc(strlen(path) + PATTERN_MAX + 2);

    buf[0] = '\0';
    if (!tmp)
        return;
    for (size_t i = 0; i < srv->nroutes; i++) {
        const char *m = srv->routes[i].method;
        const char *both[2] = {m, "HEAD"};

        if (http_path_match(srv->routes[i].pattern, path, params, &n, tmp,
                            NULL) <= 0)
            continue;
        for (int k = 0; k < (strcmp(m, "GET") == 0 ? 2 : 1); k++) {
            char word[24];

            http__fmt(word, sizeof word, "%s, ", both[k]);
            if (strstr(buf, word) || o + strlen(word) >= len)
                continue;
            strcpy(buf + o, word);
            o += strlen(word);
            json_array_append_new(list, json_string(both[k]));
        }
    }
    if (o >= 2)
        buf[o - 2] = '\0';
    free(tmp);
}

/*
 * Sends an answer made before the body was read. Closing a connection with
 * unread bytes in it makes TCP send a reset, which can destroy the answer
 * before the client reads it (RFC 9112, 9.6). So the answer goes at once
 * only when no body follows, when the client waits for 100 Continue (MHD
 * then never asks for the body), or when the announced body is beyond
 * DISCARD_MAX; otherwise the body is read and dropped first, and the
 * answer sent when it ends. Either way none of it is kept.
 */
static enum MHD_Result early_reply(struct http_exchange *x)
{
    const char *cl = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *expect = MHD_lookup_connection_value(
        x->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
    unsigned long long len = cl ? strtoull(cl, NULL, 10) : 0;

    if ((!len && !te) || (expect && strcasecmp(expect, "100-continue") == 0) ||
        len > DISCARD_MAX)
        return queue_reply(x);
    x->discard = 1;
    x->phase = PH_BODY;
    return MHD_YES;
}

/*
 * An HTTP_STREAM_BODY route: its handler runs now, on the headers. It
 * either replies, and the answer goes as any early one, or takes the body
 * with http_body_stream, and the body comes next.
 */
static enum MHD_Result begin_stream(struct http_exchange *x)
{
    x->phase = PH_HANDLER;
    x->at_headers = 1;
    x->handler_rc = x->srv->routes[x->route].handler(&x->rq, &x->rs);
    x->at_headers = 0;
    if (x->sink_on) {
        x->phase = PH_BODY;
        return MHD_YES;
    }
    return early_reply(x);
}

/* What the request's headers say about how its body is framed. */
struct framing {
    unsigned content_length;        /* how many Content-Length headers */
    unsigned transfer_encoding;     /* how many Transfer-Encoding headers */
    unsigned authorization;         /* how many Authorization headers */
    const char *coding;             /* the (last) Transfer-Encoding */
    const char *bad_name;           /* a header name that is not a token */
    const char *bad_value;          /* the name of a header whose value
                                       holds a CR or a NUL */
    const char *last_key;           /* the header seen last, and where */
    const char *last_end;           /* its value ends */
};

/*
 * Whether a NUL cut the value of the header before: MHD ends each value at
 * the first NUL (so "33\0" "99" reads as 33) and says nothing. Headers are
 * split in place in MHD's read buffer (so in 0.9.75 and 1.0): a value is
 * followed by its line's end, CR LF or LF, each byte overwritten with a
 * NUL, and then by the next header's name. More than those two bytes
 * between a value and the next name were hidden behind a NUL. A name that
 * is not just after (a folded header MHD copied elsewhere) tells nothing.
 */
static int cut_by_nul(const struct framing *f, const char *next_key)
{
    return f->last_end && next_key > f->last_end + 2 && next_key - f->last_end <= 64;
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind,
                                     const char *key, size_t key_size,
                                     const char *value, size_t value_size)
{
    struct framing *f = cls;

    (void)kind;
    for (size_t i = 0; i < key_size && !f->bad_name; i++)
        if (!http__is_token_char((unsigned char)key[i]))
            f->bad_name = key;
    if (!key_size && !f->bad_name)
        f->bad_name = key;
    if (!f->bad_value && cut_by_nul(f, key))
        f->bad_value = f->last_key;
    if (!f->bad_value && value && memchr(value, '\r', value_size))
        f->bad_value = key;
    f->last_key = key;
    f->last_end = value ? value + value_size : NULL;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        f->content_length++;
    if (strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        f->authorization++;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->transfer_encoding++;
        f->coding = value ? value : "";
    }
    return MHD_YES;
}

/*
 * A request whose body could be framed in two ways is how requests are
 * smuggled past a proxy that frames it the other way (RFC 9112, 6.3 and
 * 11.2): two Content-Length headers (MHD takes the first), Content-Length
 * beside Transfer-Encoding (MHD takes the coding), a coding other than
 * chunked (MHD would read to the end of the connection), a header name
 * with a space before its colon (MHD keeps "Content-Length " as a name of
 * its own), a CR alone inside a header (MHD keeps it in the value, where
 * a proxy may end the line) or a NUL (MHD ends the value there, a proxy
 * may not), two Authorization headers (which one is meant?). Each is
 * answered 400 naming the header, before a byte of the body is read, and
 * the connection is closed: what follows on it cannot be trusted to be a
 * request. 1 when it answered.
 */
static int framing_refused(struct http_exchange *x)
{
    struct framing f = {0};
    struct http_resp *rs = &x->rs;
    char shown[80];

    MHD_get_connection_values_n(x->conn, MHD_HEADER_KIND, count_framing, &f);
    /* The last value is followed by its line's end and the empty line's:
       a byte other than NUL just after its first was behind a NUL. */
    if (!f.bad_value && f.last_end && f.last_end[1] != '\0')
        f.bad_value = f.last_key;
    if (f.bad_name) {
        http__quote(shown, sizeof shown, f.bad_name, strlen(f.bad_name), 60);
        http__problem(rs, 400, json_pack("{s:s}", "header", f.bad_name),
                      "the header name \"%s\" is not a token (RFC 9110, 5.1): no "
                      "space or other separator may come before its colon", shown);
    } else if (f.bad_value) {
        http__quote(shown, sizeof shown, f.bad_value, strlen(f.bad_value), 60);
        http__problem(rs, 400, json_pack("{s:s}", "header", f.bad_value),
                      "the value of the header \"%s\" holds a CR or a NUL byte (RFC "
                      "9110, 5.5): a line ends with CR LF, and nowhere else", shown);
    } else if (f.authorization > 1) {
        http__problem(rs, 400, json_pack("{s:s}", "header", "Authorization"),
                      "the request has %u Authorization headers; one at most",
                      f.authorization);
    } else if (f.content_length > 1) {
        http__problem(rs, 400, json_pack("{s:s}", "header", "Content-Length"),
                      "the request has %u Content-Length headers; one at most",
                      f.content_length);
    } else if (f.transfer_encoding && f.content_length) {
        http__problem(rs, 400, json_pack("{s:s}", "header", "Transfer-Encoding"),
                      "the request has both Content-Length and Transfer-Encoding; "
                      "give one of them");
    } else if (f.transfer_encoding > 1) {
        http__problem(rs, 400, json_pack("{s:s}", "header", "Transfer-Encoding"),
                      "the request has %u Transfer-Encoding headers; one at most",
                      f.transfer_encoding);
    } else if (f.transfer_encoding && strcasecmp(f.coding, "chunked") != 0) {
        http__quote(shown, sizeof shown, f.coding, strlen(f.coding), 60);
        http__problem(rs, 400, json_pack("{s:s}", "header", "Transfer-Encoding"),
                      "the transfer coding \"%s\" is not known: only chunked is", shown);
    } else {
        return 0;
    }
    http_reply_header(rs, "Connection", "close");
    return 1;
}

static enum MHD_Result add_header_bytes(void *cls, enum MHD_ValueKind kind,
                                        const char *key, const char *value)
{
    size_t *n = cls;

    (void)kind;
    *n += strlen(key) + (value ? strlen(value) : 0) + 4; /* ": ", CRLF */
    return MHD_YES;
}

/* Finds x->path's route for method (x->rq.method, HEAD as GET): 0 with
   x->route set, or -1 with the 405 (with Allow) or 404 reply made. */
static int match_route(struct http_exchange *x, const char *method, size_t plen)
{
    struct http_server *srv = x->srv;
    struct http_resp *rs = &x->rs;
    struct http_parse_error perr = {"", ""};
    int found_path = 0;
    char shown[160];
    size_t n;

    http__quote(shown, sizeof shown, x->path, plen, 100);
    for (size_t i = 0; i < srv->nroutes && x->route < 0; i++) {
        struct route *r = &srv->routes[i];
        struct http_parse_error e;
        int m = http_path_match(r->pattern, x->path, x->params, &n,
                                x->param_buf, &e);

        if (m < 0 && !perr.detail[0])
            perr = e;
        if (m <= 0)
            continue;
        found_path = 1;
        if (strcmp(r->method, x->rq.method) == 0) {
            x->route = (int)i;
            x->rq.nparams = n;
            x->rq.params = x->params;
            x->rq.route = r->pattern;
        }
    }
    if (x->route >= 0)
        return 0;
    if (found_path) {
        char allow[128];
        json_t *list = json_array();

        allowed_methods(srv, x->path, allow, sizeof allow, list);
        http_reply_header(rs, "Allow", allow);
        http__problem(rs, 405, json_pack("{s:o*}", "allow", list),
                      "%s is not allowed on \"%s\"; allowed: %s", method, shown,
                      allow);
    } else if (perr.detail[0]) {
        http__problem(rs, 404, json_pack("{s:s}", "parameter", perr.param),
                      "nothing at \"%s\": %s", shown, perr.detail);
    } else {
        http__problem(rs, 404, NULL, "nothing at \"%s\"", shown);
    }
    return -1;
}

/* 1 with the 415 reply made when x's route takes JSON and the request
   has a body (by its Content-Length cl, a Transfer-Encoding or a
   Content-Type) that is not declared as JSON; else 0. */
static int content_type_refused(struct http_exchange *x, const char *cl)
{
    const char *te = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_TRANSFER_ENCODING);
    const char *ct = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_TYPE);
    json_t *accept;
    char got[80];

    if (!(x->srv->routes[x->route].flags & HTTP_JSON_BODY) ||
        !((cl && strtoull(cl, NULL, 10) > 0) || te || ct) ||
        (ct && http__json_content_type(ct)))
        return 0;
    accept = json_pack("{s:[s]}", "accept", "application/json");
    if (ct) {
        http__quote(got, sizeof got, ct, strlen(ct), 60);
        http__problem(&x->rs, 415, accept, "this resource takes application/json, "
                      "not \"%s\"", got);
    } else {
        http__problem(&x->rs, 415, accept, "this resource takes application/json; "
                      "the request has a body without a Content-Type");
    }
    return 1;
}

/* Routing, the query, the content type and the declared length: every
   check that needs no body, decided before the body is read. */
static enum MHD_Result begin(struct http_exchange *x, const char *method)
{
    struct http_server *srv = x->srv;
    struct http_resp *rs = &x->rs;
    struct http_parse_error perr = {"", ""};
    const char *q = strchr(x->uri, '?');
    size_t plen = q ? (size_t)(q - x->uri) : strlen(x->uri);
    int is_head = strcmp(method, "HEAD") == 0;
    const char *cl;
    size_t n;

    http__fmt(x->method, sizeof x->method, "%s", method);
    x->rq.app = srv->app;
    x->rq.method = is_head ? "GET" : method;
    x->rq.x = x;
    x->rq.body = "";
    client_address(x->conn, x->client, sizeof x->client);
    request_id(x);
    http__parse_bearer(MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                                   "Authorization"),
                       x->token, sizeof x->token);
    x->rq.request_id = x->request_id;
    x->rq.client = x->client;
    x->rq.token = x->token[0] ? x->token : NULL;
    if (framing_refused(x))
        return queue_reply(x);      /* the body is never read */
    if ((n = strlen(x->uri)) > URL_MAX) {
        http__problem(rs, 414, json_pack("{s:s,s:i}", "limit", "max_url", "value", URL_MAX),
                      "the URL is %zu bytes, more than the limit of %d bytes (max_url)",
                      n, URL_MAX);
        return early_reply(x);
    }
    n = 0;
    MHD_get_connection_values(x->conn, MHD_HEADER_KIND, add_header_bytes, &n);
    if (n > HEADERS_MAX) {
        http__problem(rs, 431, json_pack("{s:s,s:i}", "limit", "max_headers", "value",
                                         HEADERS_MAX),
                      "the request's headers are %zu bytes, more than the limit of %d "
                      "bytes (max_headers)", n, HEADERS_MAX);
        return early_reply(x);
    }
    if (!(x->path = strndup(x->uri, plen)) ||
        !(x->param_buf = malloc(plen + PATTERN_MAX + 2)))
        return MHD_NO;
    x->rq.path = x->path;
    if (match_route(x, method, plen) < 0)
        return early_reply(x);
    if (http_query_parse(q ? q + 1 : "", q ? strlen(q + 1) : 0, &x->query,
                         &perr) < 0) {
        http__problem(rs, 400,
                      perr.param[0] ? json_pack("{s:s}", "parameter", perr.param)
                              : NULL,
                      "%s", perr.detail);
        return early_reply(x);
    }
    x->rq.nquery = x->query.count;
    x->rq.query = x->query.item;

    cl = MHD_lookup_connection_value(x->conn, MHD_HEADER_KIND,
                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (content_type_refused(x, cl))
        return early_reply(x);
    /* Who is asking, before any byte of a body is read or kept. */
    if (srv->admit) {
        x->phase = PH_HANDLER;
        x->handler_rc = srv->admit(&x->rq, rs);
        if (rs->kind != RESP_NONE)
            return early_reply(x);
        x->phase = PH_NEW;
    }
    if (srv->routes[x->route].flags & HTTP_STREAM_BODY)
        return begin_stream(x);
    /* A declared length over the limit is refused before a byte of the
       body is read (and before MHD would send 100 Continue). */
    if (cl) {
        unsigned long long len;

        errno = 0;
        len = strtoull(cl, NULL, 10);
        if (len > srv->max_body || errno) {
            http__problem(rs, 413,
                          json_pack("{s:s,s:I}", "limit", "max_body", "value",
                                    (json_int_t)srv->max_body),
                          "the request body is %llu bytes, more than the limit of "
                          "%zu bytes (max_body)", errno ? ULLONG_MAX : len,
                          srv->max_body);
            return early_reply(x);
        }
        if (len && !(x->body = malloc(len + 1)))
            return MHD_NO;
        x->body_cap = len + 1;
    }
    x->phase = PH_BODY;
    return MHD_YES;
}

static enum MHD_Result dispatch(struct http_exchange *x)
{
    struct http_server *srv = x->srv;
    struct http_resp *rs = &x->rs;
    struct http_deferred *d;

    http__conn_deadline(x, HTTP__DL_NONE);     /* the body is in */
    if (x->discard)
        return queue_reply(x);  /* answered already, body dropped */
    if (x->body) {
        x->rq.body = x->body;
        x->rq.body_len = x->body_len;
    }
    x->phase = PH_HANDLER;
    if (x->sink_on) {
        /* A streamed body is complete: its end replies. */
        http__sink_unlink(x);
        x->sink_on = 0;
        x->handler_rc = x->sink.end(x->sink_ctx, &x->rq, rs);
    } else {
        x->handler_rc = srv->routes[x->route].handler(&x->rq, rs);
    }
    if (!(d = x->deferred))
        return queue_reply(x);
    pthread_mutex_lock(&d->mu);
    if (d->state == D_DONE) {
        pthread_mutex_unlock(&d->mu);
        return queue_reply(x);
    }
    /* Parked until d_complete resumes it; holds no thread meanwhile. */
    d->suspended = 1;
    x->phase = PH_DEFERRED;
    MHD_suspend_connection(x->conn);
    pthread_mutex_unlock(&d->mu);
    return MHD_YES;
}

enum MHD_Result http__on_request(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    struct http_exchange *x = *con_cls;

    (void)cls, (void)url, (void)version;
    if (!x || x->conn != conn)
        return MHD_NO;  /* on_uri ran out of memory: drop the connection */
    switch (x->phase) {
    case PH_NEW: {
        enum MHD_Result r = begin(x, method);

        /* The headers are in: a body has its own deadline, the rest none. */
        http__conn_deadline(x, x->phase != PH_BODY ? HTTP__DL_NONE
                               : x->sink_on        ? HTTP__DL_UPLOAD
                                                   : HTTP__DL_BODY);
        return r;
    }
    case PH_BODY:
        if (*upload_data_size) {
            if (http__body_append(x, upload_data, *upload_data_size) < 0)
                return MHD_NO;
            *upload_data_size = 0;
            return MHD_YES;
        }
        return dispatch(x);
    case PH_DEFERRED:
        return queue_reply(x);      /* resumed: the fill is done */
    default:
        return MHD_NO;
    }
}

static const char *termination_name(enum MHD_RequestTerminationCode toe)
{
    switch (toe) {
    case MHD_REQUEST_TERMINATED_COMPLETED_OK:
        return "ok";
    case MHD_REQUEST_TERMINATED_WITH_ERROR:
        return "error";
    case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED:
        return "timeout";
    case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN:
        return "shutdown";
    case MHD_REQUEST_TERMINATED_READ_ERROR:
        return "read-error";
    case MHD_REQUEST_TERMINATED_CLIENT_ABORT:
        return "client-abort";
    default:
        return "other";
    }
}

void http__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                        enum MHD_RequestTerminationCode toe)
{
    struct http_server *srv = cls;
    struct http_exchange *x = *con_cls;
    uint64_t ns;

    (void)conn;
    if (!x)
        return;
    *con_cls = NULL;
    http__conn_deadline(x, HTTP__DL_HEADERS);  /* the next request's */
    ns = http__mono_ns() - x->t0_ns;
    if (x->status)
        http__record(srv, x, ns);
    if (!srv->quiet) {
        char path[300], rc[24] = "";
        const char *p = x->path ? x->path : x->uri;

        http__quote(path, sizeof path, p, strlen(p), 200);
        if (x->handler_rc)
            http__fmt(rc, sizeof rc, " rc=%d", x->handler_rc);
        /* One fprintf per line: stdio locks the stream, lines stay whole. */
        fprintf(stderr,
                "http method=%s path=\"%s\" status=%d bytes=%zu ms=%.3f "
                "rid=%s client=%s end=%s%s\n",
                x->method[0] ? x->method : "-", path, x->status, x->bytes,
                (double)ns / 1e6, x->request_id[0] ? x->request_id : "-",
                x->client[0] ? x->client : "-", termination_name(toe), rc);
    }
    http__sink_abort(x);              /* the client went away mid-body */
    if (x->deferred)
        http__d_detach(srv, x->deferred);
    exchange_free(x);
}

void http__mhd_log(void *cls, const char *f, va_list ap)
{
    struct http_server *srv = cls;
    char msg[512];

    if (srv->quiet)
        return;
    vsnprintf(msg, sizeof msg, f, ap);
    msg[strcspn(msg, "\n")] = '\0';
    fprintf(stderr, "http libmicrohttpd: %s\n", msg);
}
