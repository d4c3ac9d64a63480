/*
 * Private to service/lib/store/: the statement table, the connection, and
 * the helpers the module's files share (prefixed store__, or inline).
 * store.h is the contract; nothing outside this folder includes this.
 *
 * The storage layer over SQLite: connection setup and migrations, the one
 * table of statements every connection prepares once, and the typed calls
 * the service makes. Nothing else in the program speaks SQL.
 */
#ifndef ECOPT_STORE_INT_H
#define ECOPT_STORE_INT_H

#include "store.h"

#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "describe.h"
#include "outcome.h"
#include "store_migrations.h"

/* How long a connection waits for another's lock before STORE_EBUSY. */
#define BUSY_TIMEOUT_MS 5000

/* A fresh random id colliding is a 2^-64 event; a few retries cover it. */
#define ID_ATTEMPTS 4

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))


/* ---- The statements -------------------------------------------------- */

/* The columns job_from_row reads, in order. */
#define JOB_COLUMNS                                                         \
    "j.seq, j.id, j.owner, j.state, j.reason, j.spec, j.name, j.labels, "  \
    "j.algorithm, j.compressor, j.dataset, j.backend, j.workers, "         \
    "j.created_at, j.started_at, j.finished_at, j.pid, j.problem, "        \
    "j.params, j.round, j.rel_gap, j.bits_up, j.updated_at, j.idem_key, "  \
    "j.experiment_id, j.stop_reason, j.dataset_sha256, j.cpu_seconds, "    \
    "j.max_rss_bytes, j.rss_sum_bytes, j.outcome, j.retry_of, j.eclk"

enum job_column {
    JC_SEQ, JC_ID, JC_OWNER, JC_STATE, JC_REASON, JC_SPEC, JC_NAME,
    JC_LABELS, JC_ALGORITHM, JC_COMPRESSOR, JC_DATASET, JC_BACKEND,
    JC_WORKERS, JC_CREATED_AT, JC_STARTED_AT, JC_FINISHED_AT, JC_PID,
    JC_PROBLEM, JC_PARAMS, JC_ROUND, JC_REL_GAP, JC_BITS_UP, JC_UPDATED_AT,
    JC_IDEM_KEY, JC_EXPERIMENT_ID, JC_STOP_REASON, JC_DATASET_SHA256,
    JC_CPU_SECONDS, JC_MAX_RSS_BYTES, JC_RSS_SUM_BYTES, JC_OUTCOME,
    JC_RETRY_OF, JC_ECLK
};

/* The columns metric_from_row reads, in ec_metric's order, each with a
   comma after it (DESCRIBE_METRIC_FIELDS), and a parameter for each. */
#define METRIC_COLUMN_(name, kind, csv) #name ", "
#define METRIC_PARAM_(name, kind, csv) "?, "
#define METRIC_EXCLUDED_(name, kind, csv) "excluded." #name ", "
#define METRIC_COLUMNS_ DESCRIBE_METRIC_FIELDS(METRIC_COLUMN_)
#define METRIC_PARAMS_ DESCRIBE_METRIC_FIELDS(METRIC_PARAM_)
/*
 * A row stored again (the same job and round) replaces the one before, as
 * an upsert: INSERT OR REPLACE would delete the old row first, which with
 * foreign keys on costs a third more per row than a plain insert even
 * when there is no old row. The upsert runs only after a plain insert
 * found the round taken, so that the writer knows which rows are new
 * (jobs.metric_rows).
 */
#define METRIC_UPSERT_                                                      \
    " ON CONFLICT (job_seq, round) DO UPDATE SET (" METRIC_COLUMNS_ "doc)"  \
    " = (" DESCRIBE_METRIC_FIELDS(METRIC_EXCLUDED_) "excluded.doc)"

/* The filters of the job list, shared by its access paths. */
#define JOB_LIST_WHERE                                                      \
    " AND j.seq < ?1"                                                      \
    " AND (?3 IS NULL OR j.state = ?3)"                                    \
    " AND (?4 IS NULL OR j.algorithm = ?4)"                                \
    " AND (?5 IS NULL OR j.dataset = ?5)"                                  \
    " AND (?6 IS NULL OR EXISTS (SELECT 1 FROM job_labels l"               \
    "      WHERE l.job_seq = j.seq AND l.key = ?6"                         \
    "        AND (?7 IS NULL OR l.value = ?7)))"                           \
    " AND (?9 IS NULL OR j.stop_reason = ?9)"
#define JOB_LIST_FILTERS JOB_LIST_WHERE " ORDER BY j.seq DESC LIMIT ?8"

/*
 * The conditions of STORE_JOB_FIELDS, one per field and comparison, each
 * a named parameter (":k_lt") that is NULL when not asked for.
 */
#define JOB_COND_OP_(name, expr, suffix, op)                                \
    " AND (:" name suffix " IS NULL OR (" expr ") " op " :" name suffix ")"
#define JOB_COND_FIELD_(id, name, kind, expr, meaning)                      \
    JOB_COND_OP_(name, expr, "", "=") JOB_COND_OP_(name, expr, "_ne", "<>") \
    JOB_COND_OP_(name, expr, "_lt", "<") JOB_COND_OP_(name, expr, "_le", "<=") \
    JOB_COND_OP_(name, expr, "_gt", ">") JOB_COND_OP_(name, expr, "_ge", ">=")
#define JOB_CONDS STORE_JOB_FIELDS(JOB_COND_FIELD_)
/* A filtered list looks at the ?10 jobs below the cursor, no more. */
#define JOB_SEARCH_FROM(who)                                                \
    " FROM (SELECT * FROM jobs WHERE " who " AND seq < ?1"                 \
    " ORDER BY seq DESC LIMIT ?10) j WHERE 1"
#define JOB_SEARCH_TAIL JOB_LIST_WHERE JOB_CONDS " ORDER BY j.seq DESC LIMIT ?8"

/*
 * Every statement the store runs, prepared once per connection at open
 * and reset after each use. Only the connection's setup (pragmas and
 * migrations) runs before them, since these name tables that the
 * migrations create.
 */
#define STORE_STATEMENTS(X)                                                 \
    X(SQL_BEGIN, "BEGIN IMMEDIATE")                                        \
    X(SQL_COMMIT, "COMMIT")                                                \
    X(SQL_ROLLBACK, "ROLLBACK")                                            \
    X(SQL_PING, "SELECT count(*) FROM sqlite_master")                      \
    X(SQL_JOB_SEQ, "SELECT seq FROM jobs WHERE id = ?1")                   \
    X(SQL_JOB_GET, "SELECT " JOB_COLUMNS " FROM jobs j"                    \
                   " WHERE j.id = ?1 AND (?2 IS NULL OR j.owner = ?2)")    \
    X(SQL_JOB_GET_SEQ, "SELECT " JOB_COLUMNS " FROM jobs j"                \
                       " WHERE j.seq = ?1")                                \
    X(SQL_JOB_STATE, "SELECT state FROM jobs"                              \
                     " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)")      \
    X(SQL_JOB_IDEM, "SELECT seq, idem_hash FROM jobs"                      \
                    " WHERE owner = ?1 AND idem_key = ?2")                 \
    X(SQL_JOB_INSERT,                                                      \
      "INSERT INTO jobs (id, owner, spec, name, labels, algorithm,"        \
      " compressor, dataset, backend, workers, created_at, idem_key,"      \
      " idem_hash, experiment_id, dataset_sha256, retry_of)"               \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"   \
      " ?14, ?15, ?16)")                                                   \
    X(SQL_LABELS_INSERT, "INSERT INTO job_labels (job_seq, key, value)"    \
                         " SELECT ?1, key, value FROM json_each(?2)")      \
    /* Two paths: a token's own list walks the (owner, seq) index. The    \
       admin's names ?2 (always NULL) so that both bind alike. */          \
    X(SQL_JOB_LIST, "SELECT " JOB_COLUMNS " FROM jobs j"                   \
                    " WHERE ?2 IS NULL" JOB_LIST_FILTERS)                  \
    X(SQL_JOB_LIST_OWNER, "SELECT " JOB_COLUMNS " FROM jobs j"             \
                          " WHERE j.owner = ?2" JOB_LIST_FILTERS)          \
    X(SQL_JOB_SEARCH, "SELECT " JOB_COLUMNS JOB_SEARCH_FROM("?2 IS NULL")  \
                      JOB_SEARCH_TAIL)                                     \
    X(SQL_JOB_SEARCH_OWNER, "SELECT " JOB_COLUMNS                          \
                            JOB_SEARCH_FROM("owner = ?2") JOB_SEARCH_TAIL) \
    /* How many jobs a filtered page looked at, and the oldest of them. */ \
    X(SQL_JOB_SCANNED, "SELECT count(*), min(seq) FROM (SELECT seq"        \
                       " FROM jobs WHERE ?2 IS NULL AND seq < ?1"          \
                       " ORDER BY seq DESC LIMIT ?3)")                     \
    X(SQL_JOB_SCANNED_OWNER, "SELECT count(*), min(seq) FROM (SELECT seq"  \
                             " FROM jobs WHERE owner = ?2 AND seq < ?1"    \
                             " ORDER BY seq DESC LIMIT ?3)")               \
    X(SQL_JOB_SET_RUNNING,                                                 \
      "UPDATE jobs SET state = 'running', pid = ?2,"                       \
      " started_at = coalesce(started_at, ?3),"                            \
      " problem = coalesce(?4, problem), params = coalesce(?5, params)"    \
      " WHERE id = ?1 AND state IN ('queued', 'running')")                 \
    X(SQL_JOB_PROGRESS,                                                    \
      "UPDATE jobs SET round = ?2, rel_gap = ?3, bits_up = ?4,"            \
      " updated_at = ?5 WHERE id = ?1 AND state = 'running'")              \
    X(SQL_JOB_FINISH,                                                      \
      "UPDATE jobs SET state = ?2, reason = ?3, finished_at = ?4,"         \
      " stop_reason = ?5, cpu_seconds = ?6, max_rss_bytes = ?7,"           \
      " rss_sum_bytes = ?8, outcome = ?9"                                  \
      " WHERE id = ?1 AND state IN ('queued', 'running')")                 \
    X(SQL_JOB_REL_GAP, "SELECT rel_gap FROM jobs WHERE id = ?1")           \
    X(SQL_JOB_SET_ECLK,                                                    \
      "UPDATE jobs SET eclk = ?2 WHERE id = ?1")                           \
    X(SQL_JOB_DELETE,                                                      \
      "DELETE FROM jobs WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)"      \
      " AND state NOT IN ('queued', 'running')")                           \
    X(SQL_JOBS_QUEUED, "SELECT " JOB_COLUMNS " FROM jobs j"                \
                       " WHERE j.seq IN (SELECT min(seq) FROM jobs"        \
                       " WHERE state = 'queued' GROUP BY owner)"           \
                       " ORDER BY j.seq")                                  \
    X(SQL_JOBS_QUEUE, "SELECT id, owner FROM jobs WHERE state = 'queued'"  \
                      " ORDER BY seq")                                     \
    X(SQL_COUNTS,                                                          \
      "SELECT"                                                             \
      " coalesce(sum(state = 'running'), 0),"                              \
      " coalesce(sum(CASE WHEN state = 'running' THEN workers END), 0),"   \
      " coalesce(sum(state = 'queued'), 0),"                               \
      " coalesce(sum(state = 'running' AND owner = ?1), 0),"               \
      " coalesce(sum(state = 'queued' AND owner = ?1), 0)"                 \
      " FROM jobs WHERE state IN ('queued', 'running')")                   \
    X(SQL_JOB_SET_LABELS,                                                  \
      "UPDATE jobs SET name = ?3, labels = ?4, spec = ?5"                  \
      " WHERE seq = ?1 AND (?2 IS NULL OR owner = ?2)")                    \
    X(SQL_LABELS_CLEAR, "DELETE FROM job_labels WHERE job_seq = ?1")       \
    X(SQL_STATE_COUNTS, "SELECT state, count(*) FROM jobs GROUP BY state")  \
    X(SQL_RECOVER,                                                         \
      "UPDATE jobs SET state = 'interrupted', reason = ?1,"                \
      " finished_at = ?2, stop_reason = 'interrupted', outcome = 'failed'"  \
      " WHERE state = 'running'")                                          \
    X(SQL_METRIC_INSERT,                                                   \
      "INSERT INTO metrics (job_seq, " METRIC_COLUMNS_ "doc)"              \
      " VALUES (?1, " METRIC_PARAMS_ "?)")                                 \
    X(SQL_METRIC_INSERT_DOC,                                               \
      "INSERT INTO metrics (job_seq, round, doc) VALUES (?1, ?2, ?3)")     \
    X(SQL_METRIC_UPSERT,                                                   \
      "INSERT INTO metrics (job_seq, " METRIC_COLUMNS_ "doc)"              \
      " VALUES (?1, " METRIC_PARAMS_ "?)" METRIC_UPSERT_)                  \
    X(SQL_METRIC_UPSERT_DOC,                                               \
      "INSERT INTO metrics (job_seq, round, doc)"                          \
      " VALUES (?1, ?2, ?3)" METRIC_UPSERT_)                               \
    X(SQL_METRIC_ROWS_ADD,                                                 \
      "UPDATE jobs SET metric_rows = metric_rows + ?2 WHERE seq = ?1")     \
    X(SQL_METRIC_PROGRESS,                                                 \
      "UPDATE jobs SET round = ?2, rel_gap = ?3, bits_up = ?4,"            \
      " updated_at = ?5 WHERE seq = ?1 AND (round IS NULL OR round <= ?2)")\
    X(SQL_METRIC_PAGE, "SELECT " METRIC_COLUMNS_ "doc FROM metrics"        \
                       " WHERE job_seq = ?1 AND round > ?2"                \
                       " ORDER BY round LIMIT ?3")                         \
    X(SQL_METRIC_COUNT, "SELECT count(*) FROM metrics"                     \
                        " WHERE job_seq = ?1 AND round > ?2")              \
    X(SQL_METRIC_COUNT_OWNER,                                              \
      "SELECT coalesce(sum(metric_rows), 0) FROM jobs WHERE owner = ?1")   \
    X(SQL_METRIC_LAST, "SELECT " METRIC_COLUMNS_ "doc FROM metrics"        \
                       " WHERE job_seq = ?1 ORDER BY round DESC LIMIT 1")  \
    X(SQL_METRIC_PEAK, "SELECT max(rel_gap) FROM metric_numbers"           \
                       " WHERE job_seq = ?1")                              \
    X(SQL_PSTAR_GET,                                                       \
      "SELECT p_star, method, bound, computed_at FROM pstar"               \
      " WHERE dataset_sha256 = ?1 AND loss = ?2 AND lambda1 = ?3"          \
      " AND lambda2 = ?4")                                                 \
    X(SQL_PSTAR_LIST,                                                      \
      "SELECT lambda1, lambda2, p_star, method, bound, computed_at"        \
      " FROM pstar WHERE dataset_sha256 = ?1 AND loss = ?2"                \
      " ORDER BY computed_at DESC LIMIT ?3")                               \
    X(SQL_PSTAR_PUT,                                                       \
      "INSERT INTO pstar (dataset_sha256, loss, lambda1,"                  \
      " lambda2, p_star, method, bound, computed_at)"                      \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING")   \
    X(SQL_LMAX_GET,                                                        \
      "SELECT value, method, steps, computed_at FROM lambda_max"           \
      " WHERE dataset_sha256 = ?1")                                        \
    X(SQL_LMAX_PUT,                                                        \
      "INSERT INTO lambda_max (dataset_sha256, value, method, steps,"      \
      " computed_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING")  \
    X(SQL_EXP_INSERT,                                                      \
      "INSERT INTO experiments (id, owner, name, spec, created_at)"        \
      " VALUES (?1, ?2, ?3, ?4, ?5)")                                      \
    X(SQL_EXP_GET,                                                         \
      "SELECT id, owner, name, spec, created_at FROM experiments"          \
      " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)")                     \
    X(SQL_EXP_JOBS, "SELECT " JOB_COLUMNS " FROM jobs j"                   \
                    " WHERE j.experiment_id = ?1 ORDER BY j.seq")          \
    X(SQL_EXP_LIST,                                                        \
      "SELECT x.seq, x.id, x.owner, x.name, x.spec, x.created_at,"         \
      " (SELECT count(*) FROM jobs j WHERE j.experiment_id = x.id)"        \
      " FROM experiments x WHERE (?1 IS NULL OR x.owner = ?1)"             \
      " AND x.seq < ?2 ORDER BY x.seq DESC LIMIT ?3")                      \
    X(SQL_DATASET_PUT,                                                     \
      "INSERT OR REPLACE INTO datasets (name, sha256, rows, d, nnz,"       \
      " labels, bytes, uploaded_at, owner, shared)"                        \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)")                 \
    X(SQL_DATASET_GET,                                                     \
      "SELECT name, sha256, rows, d, nnz, labels, bytes, uploaded_at,"     \
      " owner, shared FROM datasets WHERE name = ?1")                      \
    X(SQL_DATASET_LIST,                                                    \
      "SELECT name, sha256, rows, d, nnz, labels, bytes, uploaded_at,"     \
      " owner, shared FROM datasets ORDER BY name")                        \
    X(SQL_DATASET_DELETE, "DELETE FROM datasets WHERE name = ?1")          \
    X(SQL_DATASET_USAGE,                                                   \
      "SELECT count(*), coalesce(sum(bytes), 0) FROM datasets"             \
      " WHERE owner = ?1")                                                 \
    X(SQL_DATASET_JOBS,                                                    \
      "SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')"     \
      " AND dataset = ?1")                                                 \
    X(SQL_VERSIONS_IN_USE,                                                 \
      "SELECT sha256 FROM datasets UNION SELECT dataset_sha256 FROM jobs"  \
      " WHERE state IN ('queued', 'running')"                              \
      " AND dataset_sha256 IS NOT NULL")

enum statement_id {
#define STORE_STMT_ENUM(id, sql) id,
    STORE_STATEMENTS(STORE_STMT_ENUM)
#undef STORE_STMT_ENUM
    SQL_COUNT
};


struct store {
    sqlite3 *db;
    uint64_t rng;                /* splitmix64 state for ids */
    struct store_gen *gen;       /* bumped after each commit (a writer's) */
    sqlite3_stmt *stmt[SQL_COUNT];
};

/* ---- Helpers the files share ---------------------------------------- */

/* open.c */
int store__set_err(struct store_err *err, int code, int sqlite_code,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int store__code_of_sqlite(int rc);
int store__sql_fail(sqlite3 *db, struct store_err *err, int rc,
                    const char *what);
int store__tx_begin(struct store *st, const char *what, struct store_err *err);
int store__tx_end(struct store *st, int rc, const char *what,
                  struct store_err *err);
int64_t store__now_ms(void);
void store__new_id(struct store *st, char prefix, char id[STORE_ID_LEN + 1]);
int store__is_sha256(const char *s);

/* job_rows.c */
int store__job_seq(struct store *st, const char *id, int64_t *seq,
                   struct store_err *err);

/* ---- Using a statement ----------------------------------------------- */

/*
 * One use of a prepared statement. A bind that fails records its code and
 * later binds and the step do nothing, so a call checks once, at the step.
 */
struct use {
    sqlite3_stmt *s;
    int rc;
};

static inline struct use use(struct store *st, enum statement_id id)
{
    return (struct use){st->stmt[id], SQLITE_OK};
}

static inline void bind_text(struct use *u, int i, const char *v)
{
    /* SQLITE_STATIC: every caller's string outlives the reset. */
    if (u->rc == SQLITE_OK)
        u->rc = v ? sqlite3_bind_text(u->s, i, v, -1, SQLITE_STATIC)
                  : sqlite3_bind_null(u->s, i);
}

static inline void bind_int(struct use *u, int i, int64_t v)
{
    if (u->rc == SQLITE_OK)
        u->rc = sqlite3_bind_int64(u->s, i, v);
}

/* NaN and the infinities are stored as NULL: JSON has no word for them. */
static inline void bind_real(struct use *u, int i, double v)
{
    if (u->rc == SQLITE_OK)
        u->rc = isfinite(v) ? sqlite3_bind_double(u->s, i, v)
                            : sqlite3_bind_null(u->s, i);
}

static inline int step(struct use *u)
{
    return u->rc != SQLITE_OK ? u->rc : sqlite3_step(u->s);
}

static inline void done(struct use *u)
{
    sqlite3_reset(u->s);
    sqlite3_clear_bindings(u->s);
}

/* Runs a statement that returns no rows: 0 or < 0 with err filled. */
static inline int exec_use(struct store *st, struct use *u, const char *what,
                           struct store_err *err)
{
    int rc = step(u);

    rc = rc == SQLITE_DONE ? 0 : store__sql_fail(st->db, err, rc, what);
    done(u);
    return rc;
}

static inline double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL
               ? NAN : sqlite3_column_double(s, i);
}

/* A copy of a text column, NULL for SQL NULL; sets *nomem on failure. */
static inline char *col_dup(sqlite3_stmt *s, int i, int *nomem)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    char *copy;

    if (!t) {
        if (sqlite3_column_type(s, i) != SQLITE_NULL)
            *nomem = 1;
        return NULL;
    }
    if (!(copy = strdup((const char *)t)))
        *nomem = 1;
    return copy;
}

static inline void col_copy(sqlite3_stmt *s, int i, char *buf, size_t size)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    snprintf(buf, size, "%s", t ? (const char *)t : "");
}

/* job_filters.c: binds a filtered list's conditions to their named
 * parameters (STORE_EINVAL for one given twice); where the next page of
 * a filtered list starts when this one had no more rows (next_cursor ""
 * when the list has ended). */
int store__bind_conds(struct use *u, const struct store_job_filter *f, struct store_err *err);
int store__scan_cursor(struct store *st, const struct store_job_filter *f, int64_t before,
                       char next_cursor[STORE_CURSOR_SIZE], struct store_err *err);

#endif
