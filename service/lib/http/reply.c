/*
 * HTTP replies: bodies, problem+json, headers, the request body as JSON,
 * and the lookups of a request's parameters, query and headers.
 */
#include "http_int.h"

/* ------------------------------------------------------------------ */
/* Replies                                                              */

/* Forgets the body (not the headers): a later reply replaces an earlier. */
void http__resp_clear_body(struct http_resp *rs)
{
    if (!rs->body_static)
        free(rs->body);
    rs->body = NULL;
    rs->len = 0;
    rs->body_static = 0;
    http__resp_drop_stream(rs);
    rs->kind = RESP_NONE;
}

void http__resp_free(struct http_resp *rs)
{
    http__resp_clear_body(rs);
    for (size_t i = 0; i < rs->nheaders; i++) {
        free(rs->headers[i].name);
        free(rs->headers[i].value);
    }
    rs->nheaders = 0;
}

/* The reply of last resort, which needs no memory. */
static const char oom_problem[] =
    "{\"type\":\"about:blank\",\"title\":\"Internal Server Error\","
    "\"status\":500,\"detail\":\"the server ran out of memory building "
    "the response\"}\n";

void http__reply_oom(struct http_resp *rs)
{
    http__resp_clear_body(rs);
    rs->kind = RESP_BUFFER;
    rs->status = 500;
    rs->body = (char *)oom_problem;
    rs->len = sizeof oom_problem - 1;
    rs->body_static = 1;
    strcpy(rs->content_type, "application/problem+json");
}

/* Takes body (malloc'd). */
static void set_body(struct http_resp *rs, int status, const char *ctype,
                     char *body, size_t len)
{
    http__resp_clear_body(rs);
    rs->kind = RESP_BUFFER;
    rs->status = status;
    rs->body = body;
    rs->len = len;
    http__fmt(rs->content_type, sizeof rs->content_type, "%s", ctype);
}

/* Encodes doc (consumed) with a trailing newline. */
static int reply_doc(struct http_resp *rs, int status, json_t *doc,
                     const char *ctype)
{
    size_t n = json_dumpb(doc, NULL, 0, JSON_DUMP_FLAGS);
    char *buf = n ? malloc(n + 1) : NULL;

    if (!buf || json_dumpb(doc, buf, n, JSON_DUMP_FLAGS) != n) {
        free(buf);
        json_decref(doc);
        return EC_ENOMEM;
    }
    json_decref(doc);
    buf[n] = '\n';
    set_body(rs, status, ctype, buf, n + 1);
    return 0;
}

int http__status_valid(int status)
{
    return status >= 200 && status <= 599;
}

/* "/problems/invalid-job" for the title "Invalid job". */
static void problem_type(const char *title, char *out, size_t len)
{
    size_t o = (size_t)snprintf(out, len, "/problems/");

    for (const char *p = title; *p && o + 1 < len; p++) {
        unsigned char c = (unsigned char)*p;

        if (c >= 'A' && c <= 'Z')
            out[o++] = (char)(c - 'A' + 'a');
        else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))
            out[o++] = (char)c;
        else if (o > 0 && out[o - 1] != '-')
            out[o++] = '-';
    }
    out[o] = '\0';
}

int http_reply_problem(struct http_resp *rs, int status, const char *title,
                       const char *detail, json_t *extra)
{
    json_t *doc = json_object();
    const char *key;
    json_t *v;
    int bad = !doc;

    if (!http__status_valid(status))
        status = 500;
    if (doc) {
        char type[96];

        /* RFC 9457: a kind of its own has a type of its own, a reference
         * resolved against the request's URL (GET it for the kind's
         * documentation); without one the type is about:blank and the
         * title the status phrase. */
        if (title)
            problem_type(title, type, sizeof type);
        bad |= json_object_set_new(doc, "type", json_string(title ? type : "about:blank"));
        bad |= json_object_set_new(
            doc, "title",
            http__json_text(title ? title : http_status_phrase(status)));
        bad |= json_object_set_new(doc, "status", json_integer(status));
        if (detail)
            bad |= json_object_set_new(doc, "detail", http__json_text(detail));
        /* Which request it was: its path (the query may hold anything). */
        if (rs->x && rs->x->path)
            bad |= json_object_set_new(doc, "instance", http__json_text(rs->x->path));
        if (json_is_object(extra))
            json_object_foreach(extra, key, v)
                if (strcmp(key, "title") && strcmp(key, "status") &&
                    strcmp(key, "detail") && strcmp(key, "type") &&
                    strcmp(key, "instance"))
                    bad |= json_object_set(doc, key, v);
    }
    json_decref(extra);
    if (bad) {
        json_decref(doc);
        http__reply_oom(rs);
        return EC_ENOMEM;
    }
    if (reply_doc(rs, status, doc, "application/problem+json") < 0) {
        http__reply_oom(rs);
        return EC_ENOMEM;
    }
    return 0;
}

/* Every error the module answers goes through here, then
   http_reply_problem. */
int http__problem(struct http_resp *rs, int status, json_t *extra,
                  const char *f, ...)
{
    char detail[512];
    va_list ap;

    va_start(ap, f);
    vsnprintf(detail, sizeof detail, f, ap);
    va_end(ap);
    return http_reply_problem(rs, status, NULL, detail, extra);
}

int http_reply_json(struct http_resp *rs, int status, json_t *doc)
{
    if (!doc) {
        http__problem(rs, 500, NULL,
                      "the server could not build the response document (out of "
                      "memory, or a number that is not finite)");
        return EC_ENOMEM;
    }
    if (!http__status_valid(status)) {
        json_decref(doc);
        http__problem(rs, 500, NULL, "a handler replied with status %d", status);
        return EC_EINVAL;
    }
    if (reply_doc(rs, status, doc, "application/json") < 0) {
        http__problem(rs, 500, NULL, "the server could not encode the response");
        return EC_ENOMEM;
    }
    return 0;
}

int http__ctype_valid(const char *ctype)
{
    return strlen(ctype) < CONTENT_TYPE_MAX && !strpbrk(ctype, "\r\n");
}

int http_reply_text(struct http_resp *rs, int status,
                    const char *content_type, const char *text, size_t len)
{
    const char *ctype = content_type ? content_type
                                     : "text/plain; charset=utf-8";
    char *copy;

    if (!http__status_valid(status) || !http__ctype_valid(ctype) || (!text && len)) {
        http__problem(rs, 500, NULL, "a handler replied with status %d and an "
                      "invalid content type or text", status);
        return EC_EINVAL;
    }
    if (!(copy = malloc(len ? len : 1))) {
        http__reply_oom(rs);
        return EC_ENOMEM;
    }
    if (len)
        memcpy(copy, text, len);
    set_body(rs, status, ctype, copy, len);
    return 0;
}

int http_reply_header(struct http_resp *rs, const char *name,
                      const char *value)
{
    static const char *const managed[] = {"Content-Length", "Content-Type",
                                          "Transfer-Encoding", "Connection"};
    size_t nlen = name ? strlen(name) : 0;
    struct resp_header *h;

    if (!nlen || !value || strlen(value) > HEADER_VALUE_MAX ||
        strpbrk(value, "\r\n"))
        return EC_EINVAL;
    for (size_t i = 0; i < nlen; i++)
        if (!http__is_token_char((unsigned char)name[i]))
            return EC_EINVAL;
    /* These are the reply's own business: a second one confuses clients. */
    for (size_t i = 0; i < sizeof managed / sizeof managed[0]; i++)
        if (strcasecmp(name, managed[i]) == 0)
            return EC_EINVAL;
    if (rs->nheaders == HTTP_MAX_RESP_HEADERS)
        return EC_ELIMIT;
    h = &rs->headers[rs->nheaders];
    h->name = strdup(name);
    h->value = strdup(value);
    if (!h->name || !h->value) {
        free(h->name);
        free(h->value);
        return EC_ENOMEM;
    }
    rs->nheaders++;
    return 0;
}

json_t *http_body_json(const struct http_req *rq, struct http_resp *rs)
{
    json_error_t e;
    json_t *doc;

    if (rq->body_len == 0) {
        http__problem(rs, 400, NULL, "the request needs a JSON body and has none");
        return NULL;
    }
    doc = json_loadb(rq->body, rq->body_len, JSON_REJECT_DUPLICATES, &e);
    if (!doc)
        http__problem(rs, 400,
                      json_pack("{s:i,s:i,s:i}", "line", e.line, "column", e.column,
                                "position", e.position),
                      "the body is not valid JSON: %s (line %d, column %d)", e.text,
                      e.line, e.column);
    return doc;
}

/* ------------------------------------------------------------------ */
/* Requests                                                             */

const char *http_param(const struct http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->nparams; i++)
        if (strcmp(rq->params[i].key, name) == 0)
            return rq->params[i].value;
    return NULL;
}

const char *http_query(const struct http_req *rq, const char *name)
{
    for (size_t i = 0; i < rq->nquery; i++)
        if (strcmp(rq->query[i].key, name) == 0)
            return rq->query[i].value;
    return NULL;
}

const char *http_header(const struct http_req *rq, const char *name)
{
    /* MHD compares header names without regard to case. */
    return MHD_lookup_connection_value(rq->x->conn, MHD_HEADER_KIND, name);
}
