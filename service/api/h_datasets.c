/*
 * The datasets routes over the catalog (service/core/catalog.h): the list,
 * one dataset's stats, and uploads streamed into the data directory.
 */
#define _GNU_SOURCE
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"

/* A disk that is full (or a file size limit) is the server's state, not
   the request's fault: 503, try later. Anything else is a 500. */
static int reply_io(struct http_resp *rs, int err, const char *what)
{
    char detail[300];

    snprintf(detail, sizeof detail, "%s: %s", what, strerror(err));
    if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
        http_reply_header(rs, "Retry-After", "60");
        return http_reply_problem(rs, 503, NULL, detail, NULL);
    }
    return http_reply_problem(rs, 500, NULL, detail, NULL);
}

/* A JSON string of s even if it is not UTF-8 (other bytes become '?'). */
static json_t *text_json(const char *s)
{
    json_t *j = json_string(s);
    char *copy;

    if (j || !s)
        return j;
    if (!(copy = strdup(s)))
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

static json_t *item_json(const struct catalog_item *it)
{
    const struct store_dataset *ds = &it->ds;
    json_t *labels;

    if (it->error && ds->bytes < 0)     /* the file could not be read */
        return json_pack("{s:s, s:o}", "name", ds->name, "error", text_json(it->error));
    if (it->error)
        return json_pack("{s:s, s:I, s:s, s:o}", "name", ds->name, "bytes",
                         (json_int_t)ds->bytes, "sha256", ds->sha256, "error",
                         text_json(it->error));
    labels = ds->labels ? json_loads(ds->labels, 0, NULL) : NULL;
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:s, s:o, s:o, s:b}", "name",
                     ds->name, "rows", (json_int_t)ds->rows, "d",
                     (json_int_t)ds->d, "nnz", (json_int_t)ds->nnz, "labels",
                     labels ? labels : json_null(), "bytes",
                     (json_int_t)ds->bytes, "sha256", ds->sha256,
                     "uploaded_at",
                     ds->uploaded_at > 0 ? json_integer(ds->uploaded_at)
                                         : json_null(),
                     "owner", ds->owner ? json_string(ds->owner) : json_null(),
                     "shared", !ds->owner || ds->shared);
}

int h_datasets_list(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct catalog_item *items;
    struct store_err e = {0};
    size_t n;
    int store_failed, rc;
    json_t *list;

    if (catalog_list(rq->app, who->name, who->admin, &items, &n, &store_failed, &e) < 0)
        return store_failed ? api_reply_store(rs, &e, "no datasets")
                            : reply_io(rs, errno, "the data directory cannot be read");
    list = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(list, item_json(&items[i]));
    catalog_items_free(items, n);
    rc = http_reply_json(rs, 200, json_pack("{s:o}", "datasets", list));
    return rc;
}

int h_dataset_get(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    const char *name = http_param(rq, "name");
    struct catalog_item it;
    struct store_err e = {0};
    char detail[300];
    const char *why;
    int store_failed, rc;

    if ((why = datadir_name_check(name))) {
        snprintf(detail, sizeof detail, "no dataset '%.60s': %s", name, why);
        return http_reply_problem(rs, 404, NULL, detail, NULL);
    }
    if (catalog_get(rq->app, name, who->name, who->admin, &it, &store_failed, &e) < 0) {
        if (store_failed)
            return api_reply_store(rs, &e, "no such dataset");
        if (errno == ENOENT) {
            snprintf(detail, sizeof detail, "no dataset '%s' in the data "
                     "directory (GET /v1/datasets lists them)", name);
            return http_reply_problem(rs, 404, NULL, detail, NULL);
        }
        return reply_io(rs, errno, "the dataset cannot be read");
    }
    rc = http_reply_json(rs, 200, item_json(&it));
    catalog_item_clear(&it);
    return rc;
}

/* ---- POST /v1/datasets?name=NAME: uploads -------------------------------- */

static int reply_conflict(struct http_resp *rs, const char *name, int not_regular)
{
    char detail[300];

    if (not_regular)
        snprintf(detail, sizeof detail, "'%s' exists in the data directory "
                 "and is not a regular file", name);
    else
        snprintf(detail, sizeof detail, "dataset '%s' exists; upload with "
                 "replace=true to replace it", name);
    return http_reply_problem(rs, 409, NULL, detail,
                              json_pack("{s:s}", "dataset", name));
}

/* What an upload that failed gets. */
static int reply_failure(struct http_resp *rs, const char *name,
                         const struct catalog_failure *f)
{
    switch (f->kind) {
    case CATALOG_EEXISTS:
        return reply_conflict(rs, name, 0);
    case CATALOG_ENOTREG:
        return reply_conflict(rs, name, 1);
    case CATALOG_EFORBIDDEN: {
        char detail[400];

        snprintf(detail, sizeof detail, "dataset '%s' is %s%.64s%s; only its owner or an "
                 "administrator may replace, delete or share it", name,
                 f->detail[0] ? "owned by '" : "the administrators'",
                 f->detail, f->detail[0] ? "'" : "");
        return http_reply_problem(rs, 403, NULL, detail,
                                  json_pack("{s:s, s:o}", "dataset", name, "owner",
                                            f->detail[0] ? json_string(f->detail)
                                                         : json_null()));
    }
    case CATALOG_ELIMIT:
        return http_reply_problem(rs, 413, NULL, f->detail,
                                  json_pack("{s:s, s:s}", "dataset", name, "limit", f->what));
    case CATALOG_EINVALID:
        return api_reply_invalid(rs, "Invalid dataset", f->detail, NULL,
                                 json_pack("{s:s}", "dataset", name));
    case CATALOG_EBUSY:
        http_reply_header(rs, "Retry-After", "30");
        return http_reply_problem(rs, 503, NULL, f->detail, NULL);
    case CATALOG_ETHROTTLED:
        http_reply_header(rs, "Retry-After", f->err_no == 429 ? "5" : "30");
        return http_reply_problem(rs, f->err_no == 429 ? 429 : 503, NULL, f->detail,
                                  json_pack("{s:s, s:s, s:I}", "dataset", name, "limit",
                                            f->what, "value", (json_int_t)f->value));
    case CATALOG_ENOTFOUND:
        return http_reply_problem(rs, 404, NULL, f->detail,
                                  json_pack("{s:s}", "dataset", name));
    case CATALOG_EINUSE:
        return http_reply_problem(rs, 409, NULL, f->detail,
                                  json_pack("{s:s, s:I}", "dataset", name, "jobs",
                                            (json_int_t)f->value));
    case CATALOG_EQUOTA:
    case CATALOG_EDISK:
        return api_reply_limit(rs, f->kind == CATALOG_EQUOTA ? 413 : 507, f->detail,
                               f->what, f->value);
    case CATALOG_ENOMEM:
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    default:
        return reply_io(rs, f->err_no, f->what);
    }
}

/* The body's sink: the catalog's upload, and its name for the reply. */
struct upload_sink {
    struct catalog_upload *up;
    char name[DATADIR_NAME_MAX + 1];
};

static int upload_write(void *ctx, const char *data, size_t len)
{
    struct upload_sink *s = ctx;

    return catalog_upload_write(s->up, data, len);
}

static void upload_abort(void *ctx)
{
    struct upload_sink *s = ctx;

    catalog_upload_abort(s->up);
    free(s);
}

/*
 * The body is in: the upload waits for the validation pool, its reply
 * deferred, so that no HTTP thread waits on a validator. What the pool
 * found is kept here until the reply is filled.
 */
struct upload_done {
    struct http_deferred *d;
    char name[DATADIR_NAME_MAX + 1];
    int rc, replaced;
    json_t *item;               /* rc 0 */
    struct catalog_failure f;   /* rc -1 */
};

static void upload_fill(struct http_resp *rs, void *arg)
{
    struct upload_done *u = arg;
    char location[200];

    if (u->rc < 0) {
        reply_failure(rs, u->name, &u->f);
        return;
    }
    snprintf(location, sizeof location, "/v1/datasets/%s", u->name);
    http_reply_header(rs, "Location", location);
    http_reply_json(rs, u->replaced ? 200 : 201, u->item);
    u->item = NULL;
}

static void upload_validated(void *arg, int rc, const struct catalog_item *it,
                             int replaced, const struct catalog_failure *f)
{
    struct upload_done *u = arg;

    u->rc = rc;
    u->replaced = replaced;
    if (rc == 0)
        u->item = item_json(it);
    else
        u->f = *f;
    http_deferred_finish(u->d, upload_fill, u);
    json_decref(u->item);
    free(u);
}

/* The pool answers within the validator's wall-clock bound, far less. */
#define UPLOAD_REPLY_TIMEOUT_MS (7u * 24 * 3600 * 1000)

static void upload_timed_out(struct http_resp *rs, void *arg)
{
    (void)arg;
    http_reply_header(rs, "Retry-After", "30");
    http_reply_problem(rs, 503, NULL, "the upload was not validated in time", NULL);
}

static int upload_end(void *ctx, struct http_req *rq, struct http_resp *rs)
{
    struct upload_sink *s = ctx;
    struct upload_done *u = calloc(1, sizeof *u);

    (void)rq;
    if (!u) {
        catalog_upload_abort(s->up);
        free(s);
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    }
    snprintf(u->name, sizeof u->name, "%s", s->name);
    if (!(u->d = http_defer(rs, UPLOAD_REPLY_TIMEOUT_MS, upload_timed_out, NULL))) {
        catalog_upload_abort(s->up);
        free(u);
        free(s);
        return 0;               /* http_defer has replied */
    }
    catalog_upload_finish(s->up, upload_validated, u);
    free(s);
    return 0;
}

static const struct http_body_ops upload_ops = {upload_write, upload_end, upload_abort};

static int reject_name(struct http_resp *rs, const char *name, const char *why)
{
    char detail[400];

    snprintf(detail, sizeof detail, "name: %s (got \"%.60s\")", why, name);
    return api_reply_invalid(rs, NULL, detail, NULL,
                             json_pack("{s:s, s:s}", "parameter", "name", "rule",
                                       "1..128 bytes of [A-Za-z0-9._-], not starting "
                                       "with '.'"));
}

int h_dataset_upload(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    struct app *a = rq->app;
    const char *name = http_query(rq, "name");
    const char *replace = http_query(rq, "replace");
    const char *shared = http_query(rq, "shared");
    struct catalog_failure f;
    struct upload_sink *s;
    const char *why;

    if (!name)
        return reject_name(rs, "", "the query parameter is required "
                                   "(POST /v1/datasets?name=NAME)");
    if ((why = datadir_name_check(name)))
        return reject_name(rs, name, why);
    if (replace && strcmp(replace, "true") != 0 && strcmp(replace, "false") != 0)
        return api_reply_invalid(rs, NULL, "replace must be true or false", NULL,
                                 json_pack("{s:s}", "parameter", "replace"));
    if (shared && strcmp(shared, "true") != 0 && strcmp(shared, "false") != 0)
        return api_reply_invalid(rs, NULL, "shared must be true or false", NULL,
                                 json_pack("{s:s}", "parameter", "shared"));
    if (!(s = calloc(1, sizeof *s)))
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    snprintf(s->name, sizeof s->name, "%s", name);
    if (!(s->up = catalog_upload_begin(a, name, replace && strcmp(replace, "true") == 0,
                                       shared ? strcmp(shared, "true") == 0 : -1,
                                       who ? who->name : NULL, who ? who->admin : 1,
                                       &f))) {
        free(s);
        return reply_failure(rs, name, &f);
    }
    return http_body_stream(rs, catalog_upload_limit(a), "max_upload", &upload_ops, s);
}

/* ---- DELETE and PATCH /v1/datasets/{name} --------------------------------- */

int h_dataset_delete(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    const char *name = http_param(rq, "name");
    struct catalog_failure f;

    if (catalog_delete(rq->app, name, who->name, who->admin, &f) < 0)
        return reply_failure(rs, name, &f);
    return http_reply_text(rs, 204, "text/plain", "", 0);
}

int h_dataset_patch(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    const char *name = http_param(rq, "name");
    struct catalog_failure f;
    struct catalog_item it;
    json_t *doc, *shared;
    const char *key;
    json_t *value;
    int rc;

    if (!(doc = http_body_json(rq, rs)))
        return 0;                       /* replied 400 */
    json_object_foreach(doc, key, value)
        if (strcmp(key, "shared") != 0) {
            char detail[200];

            snprintf(detail, sizeof detail, "unknown field '%.60s': a dataset's PATCH "
                     "takes only shared", key);
            json_decref(doc);
            return api_reply_invalid(rs, NULL, detail, NULL,
                                     json_pack("{s:s}", "field", "shared"));
        }
    shared = json_object_get(doc, "shared");
    if (!json_is_boolean(shared)) {
        json_decref(doc);
        return api_reply_invalid(rs, NULL, "shared: required, true or false", NULL,
                                 json_pack("{s:s}", "field", "shared"));
    }
    rc = catalog_set_shared(rq->app, name, who->name, who->admin, json_is_true(shared),
                            &it, &f);
    json_decref(doc);
    if (rc < 0)
        return reply_failure(rs, name, &f);
    rc = http_reply_json(rs, 200, item_json(&it));
    catalog_item_clear(&it);
    return rc;
}
