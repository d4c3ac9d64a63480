/* The store's metric rows: append, pages, counts, the last row. */
#include "store_int.h"

/* ---- Metrics --------------------------------------------------------- */

/* A metric field's column, its NaN and its parameter, by its kind. */
#define METRIC_COL_COUNT(s, i) ((uint64_t)sqlite3_column_int64(s, i))
#define METRIC_COL_REAL(s, i) col_real(s, i)
#define METRIC_NAN_COUNT(v)
#define METRIC_NAN_REAL(v) (v) = NAN;
#define METRIC_BIND_COUNT(u, i, v) bind_int(u, i, (int64_t)(v))
#define METRIC_BIND_REAL(u, i, v) bind_real(u, i, v)

/*
 * The row at the statement (METRIC_COLUMNS_, then doc). A row stored with
 * its document has its numbers there alone. With want_doc, a document of
 * today's shape is left for the caller to serve as it is: the round is
 * read, the other numbers are NaN, and 1 is returned. Otherwise the
 * numbers are read, from the document or the columns, and 0 returned; a
 * document stored before a field existed (such as time) gives NaN for it,
 * and the caller formats the row from the numbers, with null there.
 */
static int metric_from_row(sqlite3_stmt *s, ec_metric *m, int want_doc)
{
    const int doc_col = DESCRIBE_METRIC_NFIELDS;
    const char *doc = (const char *)sqlite3_column_text(s, doc_col);
    size_t len = (size_t)sqlite3_column_bytes(s, doc_col);
    int col = 0;

    if (doc && want_doc && describe_metric_doc_check(doc, len)) {
#define NAN_(name, kind, csv) METRIC_NAN_##kind(m->name)
        DESCRIBE_METRIC_FIELDS(NAN_)
#undef NAN_
        m->round = (uint64_t)sqlite3_column_int64(s, 0);
        return 1;
    }
    if (doc && describe_metric_doc_read(doc, len, m) == 0) {
        m->round = (uint64_t)sqlite3_column_int64(s, 0);
        return 0;
    }
#define READ_(name, kind, csv) m->name = METRIC_COL_##kind(s, col), col++;
    DESCRIBE_METRIC_FIELDS(READ_)
#undef READ_
    return 0;
}

/* Stores one row: 1 when its round was new to the job, 0 when it replaced
   the row stored before for that round, < 0 with err filled. */
static int metric_insert(struct store *st, int64_t seq, const ec_metric *m,
                         const char *doc, const char *what,
                         struct store_err *err)
{
    for (int again = 0; again <= 1; again++) {
        struct use u = use(st, doc ? (again ? SQL_METRIC_UPSERT_DOC : SQL_METRIC_INSERT_DOC)
                                   : (again ? SQL_METRIC_UPSERT : SQL_METRIC_INSERT));
        int param = 2, rc;

        bind_int(&u, 1, seq);
        if (doc) {
            /* Its numbers are in the document: not stored twice. */
            bind_int(&u, 2, (int64_t)m->round);
            bind_text(&u, 3, doc);
        } else {
#define BIND_(name, kind, csv) METRIC_BIND_##kind(&u, param, m->name), param++;
            DESCRIBE_METRIC_FIELDS(BIND_)
#undef BIND_
            bind_text(&u, param, NULL);
        }
        rc = step(&u);
        if (rc == SQLITE_DONE) {
            done(&u);
            return !again;
        }
        if (!again && rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
            done(&u);           /* the round is taken: replace its row */
            continue;
        }
        rc = store__sql_fail(st->db, err, rc, what);
        done(&u);
        return rc;
    }
    return 0;
}

int store_metrics_append(struct store *st, const char *id,
                         const ec_metric *rows, size_t n,
                         struct store_err *err)
{
    return store_metrics_append_docs(st, id, rows, NULL, n, err);
}

int store_metrics_append_docs(struct store *st, const char *id,
                              const ec_metric *rows, char *const *docs,
                              size_t n, struct store_err *err)
{
    char what[64];
    const ec_metric *latest = NULL;
    ec_metric numbers;
    int64_t seq, added = 0;
    int rc;

    if (!id || (n && !rows))
        return store__set_err(err, STORE_EINVAL, 0, "append metrics: no job or rows");
    snprintf(what, sizeof what, "append metrics to %.24s", id);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].round > INT64_MAX)
            return store__set_err(err, STORE_EINVAL, 0, "%s: round %" PRIu64
                                  " out of range", what, rows[i].round);
        if (!latest || rows[i].round >= latest->round)
            latest = &rows[i];
    }
    if (n == 0)
        return 0;
    if (docs && docs[latest - rows]) {
        /* The progress columns want two of its numbers, from its document. */
        const char *doc = docs[latest - rows];

        if (describe_metric_doc_read(doc, strlen(doc), &numbers) < 0)
            numbers.rel_gap = numbers.bits_up = NAN;
        numbers.round = latest->round;
        latest = &numbers;
    }
    if ((rc = store__tx_begin(st, what, err)) < 0)
        return rc;
    rc = store__job_seq(st, id, &seq, err);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        if ((rc = metric_insert(st, seq, &rows[i], docs ? docs[i] : NULL, what, err)) > 0)
            added++;
    if (rc >= 0 && added) {
        struct use u = use(st, SQL_METRIC_ROWS_ADD);

        bind_int(&u, 1, seq);
        bind_int(&u, 2, added);
        rc = exec_use(st, &u, what, err);
    }
    if (rc >= 0) {
        struct use u = use(st, SQL_METRIC_PROGRESS);

        bind_int(&u, 1, seq);
        bind_int(&u, 2, (int64_t)latest->round);
        bind_real(&u, 3, latest->rel_gap);
        bind_real(&u, 4, latest->bits_up);
        bind_int(&u, 5, store__now_ms());
        rc = exec_use(st, &u, what, err);
    }
    return store__tx_end(st, rc, what, err);
}

/*
 * Reads limit * every candidate rows after `after` (and one more, to know
 * whether the page ended before the data did) and keeps candidates 0,
 * every, 2 * every, ... A page thus always covers exactly limit * every
 * candidates unless the data ends first, which keeps the stride aligned
 * across pages. At the end of the data the last row is kept too; when the
 * page is already full it is left as the next page's first row.
 */
int store_metrics_query(struct store *st, const char *id, int64_t after,
                        size_t limit, size_t every, ec_metric *rows,
                        struct store_metrics_page *page,
                        struct store_err *err)
{
    return store_metrics_query_docs(st, id, after, limit, every, rows, NULL,
                                    page, err);
}

/* The doc column of the current row, copied; NULL when it is NULL. */
static char *doc_of_row(sqlite3_stmt *s, int *nomem)
{
    const char *t = (const char *)sqlite3_column_text(s, DESCRIBE_METRIC_NFIELDS);
    char *copy;

    if (!t)
        return NULL;
    if (!(copy = strdup(t)))
        *nomem = 1;
    return copy;
}

int store_metrics_query_docs(struct store *st, const char *id, int64_t after,
                             size_t limit, size_t every, ec_metric *rows,
                             char **docs, struct store_metrics_page *page,
                             struct store_err *err)
{
    char *last_doc = NULL;
    int nomem = 0, served;
    ec_metric last = {0};
    int64_t seq, window, position = 0, before_last = after;
    struct use u;
    int rc;

    memset(page, 0, sizeof *page);
    if (after < -1)
        after = -1;
    page->next_after = after;
    if (limit < 1 || every < 1 || !rows)
        return store__set_err(err, STORE_EINVAL, 0,
                              "read metrics: limit and every must be >= 1");
    /* Beyond INT64_MAX candidates nobody waits for the page anyway. */
    window = limit > (size_t)(INT64_MAX / 2) / every
                 ? INT64_MAX / 2 : (int64_t)(limit * every);
    if ((rc = store__job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_PAGE);
    bind_int(&u, 1, seq);
    bind_int(&u, 2, after);
    bind_int(&u, 3, window + 1);
    while ((rc = step(&u)) == SQLITE_ROW) {
        if (position == window) {
            page->more = 1;
            break;
        }
        before_last = position ? (int64_t)last.round : after;
        served = metric_from_row(u.s, &last, docs != NULL);
        if (position % (int64_t)every == 0) {
            if (docs)
                docs[page->count] = served ? doc_of_row(u.s, &nomem) : NULL;
            rows[page->count++] = last;
        } else if (docs) {
            /* Perhaps the job's last row, kept below: its doc, now. */
            free(last_doc);
            last_doc = served ? doc_of_row(u.s, &nomem) : NULL;
        }
        position++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = store__sql_fail(st->db, err, rc, "read metrics");
        goto out;
    }
    rc = 0;
    if (position == 0)
        goto out; /* nothing after `after` yet */
    page->next_after = (int64_t)last.round;
    if (page->more || (position - 1) % (int64_t)every == 0)
        goto out; /* the window is full, or the last row was kept */
    if (page->count < limit) {
        if (docs) {
            docs[page->count] = last_doc;
            last_doc = NULL;
        }
        rows[page->count++] = last;
    } else {
        /* Full: the last row opens the next page, as its first. */
        page->next_after = before_last;
        page->more = 1;
    }
out:
    done(&u);
    free(last_doc);
    if (docs && (rc < 0 || nomem)) {
        for (size_t i = 0; i < page->count; i++) {
            free(docs[i]);
            docs[i] = NULL;
        }
        if (rc >= 0)
            rc = store__set_err(err, STORE_ENOMEM, 0, "read metrics: out of memory");
        page->count = 0;
    }
    return rc;
}

int store_metrics_count(struct store *st, const char *id, int64_t after,
                        int64_t *count, struct store_err *err)
{
    struct use u;
    int64_t seq;
    int rc;

    *count = 0;
    if ((rc = store__job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_COUNT);
    bind_int(&u, 1, seq);
    bind_int(&u, 2, after);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *count = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "count metrics");
    }
    done(&u);
    return rc;
}

int store_metrics_count_owner(struct store *st, const char *owner, int64_t *count,
                              struct store_err *err)
{
    struct use u = use(st, SQL_METRIC_COUNT_OWNER);
    int rc;

    *count = 0;
    if (!owner)
        return store__set_err(err, STORE_EINVAL, 0, "no owner");
    bind_text(&u, 1, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *count = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "count a token's metric rows");
    }
    done(&u);
    return rc;
}

int store_metrics_peak(struct store *st, const char *id, double *peak,
                       struct store_err *err)
{
    struct use u;
    int64_t seq;
    int rc;

    *peak = NAN;
    if ((rc = store__job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_PEAK);
    bind_int(&u, 1, seq);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_type(u.s, 0) != SQLITE_NULL)
            *peak = sqlite3_column_double(u.s, 0);
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "read the metrics' peak");
    }
    done(&u);
    return rc;
}

int store_metrics_last(struct store *st, const char *id, ec_metric *row,
                       struct store_err *err)
{
    return store_metrics_last_doc(st, id, row, NULL, err);
}

int store_metrics_last_doc(struct store *st, const char *id, ec_metric *row,
                           char **doc, struct store_err *err)
{
    struct use u;
    int64_t seq;
    int rc, nomem = 0;

    if (doc)
        *doc = NULL;
    if ((rc = store__job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_LAST);
    bind_int(&u, 1, seq);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        if (metric_from_row(u.s, row, doc != NULL) &&
            !(*doc = doc_of_row(u.s, &nomem)))
            metric_from_row(u.s, row, 0);     /* no memory: formatted */
        rc = 1;
    } else if (rc == SQLITE_DONE) {
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "read the last metrics");
    }
    done(&u);
    return rc;
}
