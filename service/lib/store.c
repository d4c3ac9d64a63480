/*
 * The storage layer over SQLite: connection setup and migrations, the one
 * table of statements every connection prepares once, and the typed calls
 * the service makes. Nothing else in the program speaks SQL.
 */
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
#include "store_migrations.h"

/* How long a connection waits for another's lock before STORE_EBUSY. */
#define BUSY_TIMEOUT_MS 5000

/* A fresh random id colliding is a 2^-64 event; a few retries cover it. */
#define ID_ATTEMPTS 4

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Errors ---------------------------------------------------------- */

static const struct {
    int code;
    const char *name;
    const char *text;
} error_table[] = {
#define STORE_ERR_ROW(name, value, text) {value, #name, text},
    STORE_ERRORS(STORE_ERR_ROW)
#undef STORE_ERR_ROW
};

const char *store_err_name(int code)
{
    for (size_t i = 0; i < COUNT_OF(error_table); i++)
        if (error_table[i].code == code)
            return error_table[i].name;
    return "unknown error";
}

const char *store_strerror(int code)
{
    for (size_t i = 0; i < COUNT_OF(error_table); i++)
        if (error_table[i].code == code)
            return error_table[i].text;
    return "unknown error";
}

static int set_err(struct store_err *err, int code, int sqlite_code,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int set_err(struct store_err *err, int code, int sqlite_code,
                   const char *fmt, ...)
{
    va_list ap;

    if (err) {
        err->code = code;
        err->sqlite_code = sqlite_code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/*
 * SQLite's result codes in the store's terms. FULL and IOERR stay apart
 * because the service answers the first with 503 (space may come back)
 * and logs the second as a fault of the disk.
 */
static int code_of_sqlite(int rc)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return STORE_EFULL;
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
        return STORE_EIO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return STORE_EBUSY;
    case SQLITE_NOMEM:
        return STORE_ENOMEM;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
        return STORE_ECORRUPT;
    case SQLITE_READONLY:
        return STORE_EREADONLY;
    case SQLITE_CONSTRAINT: /* a value the schema refuses */
    case SQLITE_TOOBIG:
    case SQLITE_RANGE:
        return STORE_EINVAL;
    default:
        return STORE_ESQL;
    }
}

/* Fills err from a failed SQLite call; call it before resetting. */
static int sql_fail(sqlite3 *db, struct store_err *err, int rc,
                    const char *what)
{
    const char *msg = db ? sqlite3_errmsg(db) : NULL;

    if (!msg || sqlite3_errcode(db) == SQLITE_OK)
        msg = sqlite3_errstr(rc);
    return set_err(err, code_of_sqlite(rc), rc, "%s: %s", what, msg);
}

/* ---- The statements -------------------------------------------------- */

/* The columns job_from_row reads, in order. */
#define JOB_COLUMNS                                                         \
    "j.seq, j.id, j.owner, j.state, j.reason, j.spec, j.name, j.labels, "  \
    "j.algorithm, j.compressor, j.dataset, j.backend, j.workers, "         \
    "j.created_at, j.started_at, j.finished_at, j.pid, j.problem, "        \
    "j.params, j.round, j.rel_gap, j.bits_up, j.updated_at, j.idem_key, "  \
    "j.experiment_id"

enum job_column {
    JC_SEQ, JC_ID, JC_OWNER, JC_STATE, JC_REASON, JC_SPEC, JC_NAME,
    JC_LABELS, JC_ALGORITHM, JC_COMPRESSOR, JC_DATASET, JC_BACKEND,
    JC_WORKERS, JC_CREATED_AT, JC_STARTED_AT, JC_FINISHED_AT, JC_PID,
    JC_PROBLEM, JC_PARAMS, JC_ROUND, JC_REL_GAP, JC_BITS_UP, JC_UPDATED_AT,
    JC_IDEM_KEY, JC_EXPERIMENT_ID
};

/* The columns metric_from_row reads, in ec_metric's order, each with a
   comma after it (DESCRIBE_METRIC_FIELDS), and a parameter for each. */
#define METRIC_COLUMN_(name, kind, csv) #name ", "
#define METRIC_PARAM_(name, kind, csv) "?, "
#define METRIC_COLUMNS_ DESCRIBE_METRIC_FIELDS(METRIC_COLUMN_)
#define METRIC_PARAMS_ DESCRIBE_METRIC_FIELDS(METRIC_PARAM_)

/* The filters of the job list, shared by its two access paths. */
#define JOB_LIST_FILTERS                                                    \
    " AND j.seq < ?1"                                                      \
    " AND (?3 IS NULL OR j.state = ?3)"                                    \
    " AND (?4 IS NULL OR j.algorithm = ?4)"                                \
    " AND (?5 IS NULL OR j.dataset = ?5)"                                  \
    " AND (?6 IS NULL OR EXISTS (SELECT 1 FROM job_labels l"               \
    "      WHERE l.job_seq = j.seq AND l.key = ?6"                         \
    "        AND (?7 IS NULL OR l.value = ?7)))"                           \
    " ORDER BY j.seq DESC LIMIT ?8"

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
      " idem_hash, experiment_id)"                                         \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"   \
      " ?14)")                                                             \
    X(SQL_LABELS_INSERT, "INSERT INTO job_labels (job_seq, key, value)"    \
                         " SELECT ?1, key, value FROM json_each(?2)")      \
    /* Two paths: a token's own list walks the (owner, seq) index. The    \
       admin's names ?2 (always NULL) so that both bind alike. */          \
    X(SQL_JOB_LIST, "SELECT " JOB_COLUMNS " FROM jobs j"                   \
                    " WHERE ?2 IS NULL" JOB_LIST_FILTERS)                  \
    X(SQL_JOB_LIST_OWNER, "SELECT " JOB_COLUMNS " FROM jobs j"             \
                          " WHERE j.owner = ?2" JOB_LIST_FILTERS)          \
    X(SQL_JOB_SET_RUNNING,                                                 \
      "UPDATE jobs SET state = 'running', pid = ?2,"                       \
      " started_at = coalesce(started_at, ?3),"                            \
      " problem = coalesce(?4, problem), params = coalesce(?5, params)"    \
      " WHERE id = ?1 AND state IN ('queued', 'running')")                 \
    X(SQL_JOB_PROGRESS,                                                    \
      "UPDATE jobs SET round = ?2, rel_gap = ?3, bits_up = ?4,"            \
      " updated_at = ?5 WHERE id = ?1 AND state = 'running'")              \
    X(SQL_JOB_FINISH,                                                      \
      "UPDATE jobs SET state = ?2, reason = ?3, finished_at = ?4"          \
      " WHERE id = ?1 AND state IN ('queued', 'running')")                 \
    X(SQL_JOB_DELETE,                                                      \
      "DELETE FROM jobs WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)"      \
      " AND state NOT IN ('queued', 'running')")                           \
    X(SQL_JOBS_QUEUED, "SELECT " JOB_COLUMNS " FROM jobs j"                \
                       " WHERE j.state = 'queued' ORDER BY j.seq LIMIT ?1")\
    X(SQL_COUNTS,                                                          \
      "SELECT"                                                             \
      " coalesce(sum(state = 'running'), 0),"                              \
      " coalesce(sum(CASE WHEN state = 'running' THEN workers END), 0),"   \
      " coalesce(sum(state = 'queued'), 0),"                               \
      " coalesce(sum(state = 'running' AND owner = ?1), 0),"               \
      " coalesce(sum(state = 'queued' AND owner = ?1), 0)"                 \
      " FROM jobs WHERE state IN ('queued', 'running')")                   \
    X(SQL_RECOVER,                                                         \
      "UPDATE jobs SET state = 'interrupted', reason = ?1,"                \
      " finished_at = ?2 WHERE state = 'running'")                         \
    X(SQL_METRIC_INSERT,                                                   \
      "INSERT OR REPLACE INTO metrics (job_seq, " METRIC_COLUMNS_ "doc)"   \
      " VALUES (?1, " METRIC_PARAMS_ "?)")                                 \
    X(SQL_METRIC_INSERT_DOC,                                               \
      "INSERT OR REPLACE INTO metrics (job_seq, round, doc)"               \
      " VALUES (?1, ?2, ?3)")                                              \
    X(SQL_METRIC_PROGRESS,                                                 \
      "UPDATE jobs SET round = ?2, rel_gap = ?3, bits_up = ?4,"            \
      " updated_at = ?5 WHERE seq = ?1 AND (round IS NULL OR round <= ?2)")\
    X(SQL_METRIC_PAGE, "SELECT " METRIC_COLUMNS_ "doc FROM metrics"        \
                       " WHERE job_seq = ?1 AND round > ?2"                \
                       " ORDER BY round LIMIT ?3")                         \
    X(SQL_METRIC_COUNT, "SELECT count(*) FROM metrics"                     \
                        " WHERE job_seq = ?1 AND round > ?2")              \
    X(SQL_METRIC_LAST, "SELECT " METRIC_COLUMNS_ "doc FROM metrics"        \
                       " WHERE job_seq = ?1 ORDER BY round DESC LIMIT 1")  \
    X(SQL_PSTAR_GET,                                                       \
      "SELECT p_star, method, bound, computed_at FROM pstar"               \
      " WHERE dataset_sha256 = ?1 AND loss = ?2 AND lambda1 = ?3"          \
      " AND lambda2 = ?4")                                                 \
    X(SQL_PSTAR_LIST,                                                      \
      "SELECT lambda1, lambda2, p_star, method, bound, computed_at"        \
      " FROM pstar WHERE dataset_sha256 = ?1 AND loss = ?2"                \
      " ORDER BY computed_at DESC LIMIT ?3")                               \
    X(SQL_PSTAR_PUT,                                                       \
      "INSERT OR REPLACE INTO pstar (dataset_sha256, loss, lambda1,"       \
      " lambda2, p_star, method, bound, computed_at)"                      \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")                          \
    X(SQL_EXP_INSERT,                                                      \
      "INSERT INTO experiments (id, owner, name, spec, created_at)"        \
      " VALUES (?1, ?2, ?3, ?4, ?5)")                                      \
    X(SQL_EXP_GET,                                                         \
      "SELECT id, owner, name, spec, created_at FROM experiments"          \
      " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2)")                     \
    X(SQL_EXP_JOBS, "SELECT " JOB_COLUMNS " FROM jobs j"                   \
                    " WHERE j.experiment_id = ?1 ORDER BY j.seq")          \
    X(SQL_DATASET_PUT,                                                     \
      "INSERT OR REPLACE INTO datasets (name, sha256, rows, d, nnz,"       \
      " labels, bytes, uploaded_at)"                                       \
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")                          \
    X(SQL_DATASET_GET,                                                     \
      "SELECT name, sha256, rows, d, nnz, labels, bytes, uploaded_at"      \
      " FROM datasets WHERE name = ?1")                                    \
    X(SQL_DATASET_LIST,                                                    \
      "SELECT name, sha256, rows, d, nnz, labels, bytes, uploaded_at"      \
      " FROM datasets ORDER BY name")                                      \
    X(SQL_DATASET_DELETE, "DELETE FROM datasets WHERE name = ?1")

enum statement_id {
#define STORE_STMT_ENUM(id, sql) id,
    STORE_STATEMENTS(STORE_STMT_ENUM)
#undef STORE_STMT_ENUM
    SQL_COUNT
};

static const struct {
    enum statement_id id;
    const char *sql;
} statements[] = {
#define STORE_STMT_ROW(id, sql) {id, sql},
    STORE_STATEMENTS(STORE_STMT_ROW)
#undef STORE_STMT_ROW
};

struct store {
    sqlite3 *db;
    uint64_t rng;                /* splitmix64 state for ids */
    sqlite3_stmt *stmt[SQL_COUNT];
};

/* ---- Using a statement ----------------------------------------------- */

/*
 * One use of a prepared statement. A bind that fails records its code and
 * later binds and the step do nothing, so a call checks once, at the step.
 */
struct use {
    sqlite3_stmt *s;
    int rc;
};

static struct use use(struct store *st, enum statement_id id)
{
    return (struct use){st->stmt[id], SQLITE_OK};
}

static void bind_text(struct use *u, int i, const char *v)
{
    /* SQLITE_STATIC: every caller's string outlives the reset. */
    if (u->rc == SQLITE_OK)
        u->rc = v ? sqlite3_bind_text(u->s, i, v, -1, SQLITE_STATIC)
                  : sqlite3_bind_null(u->s, i);
}

static void bind_int(struct use *u, int i, int64_t v)
{
    if (u->rc == SQLITE_OK)
        u->rc = sqlite3_bind_int64(u->s, i, v);
}

/* NaN and the infinities are stored as NULL: JSON has no word for them. */
static void bind_real(struct use *u, int i, double v)
{
    if (u->rc == SQLITE_OK)
        u->rc = isfinite(v) ? sqlite3_bind_double(u->s, i, v)
                            : sqlite3_bind_null(u->s, i);
}

static int step(struct use *u)
{
    return u->rc != SQLITE_OK ? u->rc : sqlite3_step(u->s);
}

static void done(struct use *u)
{
    sqlite3_reset(u->s);
    sqlite3_clear_bindings(u->s);
}

/* Runs a statement that returns no rows: 0 or < 0 with err filled. */
static int exec_use(struct store *st, struct use *u, const char *what,
                    struct store_err *err)
{
    int rc = step(u);

    rc = rc == SQLITE_DONE ? 0 : sql_fail(st->db, err, rc, what);
    done(u);
    return rc;
}

static double col_real(sqlite3_stmt *s, int i)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL
               ? NAN : sqlite3_column_double(s, i);
}

/* A copy of a text column, NULL for SQL NULL; sets *nomem on failure. */
static char *col_dup(sqlite3_stmt *s, int i, int *nomem)
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

static void col_copy(sqlite3_stmt *s, int i, char *buf, size_t size)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    snprintf(buf, size, "%s", t ? (const char *)t : "");
}

/* ---- Transactions ---------------------------------------------------- */

/*
 * BEGIN IMMEDIATE takes the write lock at once, so a transaction never
 * fails half way for a lock another connection holds; the busy timeout
 * covers the wait.
 */
static int tx_begin(struct store *st, const char *what, struct store_err *err)
{
    struct use u = use(st, SQL_BEGIN);

    return exec_use(st, &u, what, err);
}

/* After FULL or IOERR SQLite may have rolled back already. */
static void tx_rollback(struct store *st)
{
    struct use u = use(st, SQL_ROLLBACK);

    if (!sqlite3_get_autocommit(st->db))
        exec_use(st, &u, "rollback", NULL);
}

static int tx_commit(struct store *st, const char *what, struct store_err *err)
{
    struct use u = use(st, SQL_COMMIT);

    return exec_use(st, &u, what, err);
}

/* Commits when rc >= 0, else rolls back; returns rc or the commit's error. */
static int tx_end(struct store *st, int rc, const char *what,
                  struct store_err *err)
{
    if (rc >= 0) {
        int crc = tx_commit(st, what, err);

        if (crc < 0)
            rc = crc;
    }
    if (rc < 0)
        tx_rollback(st);
    return rc;
}

/* ---- Small helpers --------------------------------------------------- */

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng_next(struct store *st)
{
    uint64_t z = (st->rng += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/*
 * Ids need to be unique and to say nothing about other jobs, not to be
 * secret (ownership is checked on every call), so a generator seeded once
 * from /dev/urandom is enough. Should that fail, the clock and the process
 * id still make collisions between runs unlikely.
 */
static void rng_seed(struct store *st)
{
    struct timespec ts;
    uint64_t seed = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, &seed, sizeof seed) != (ssize_t)sizeof seed) {
        clock_gettime(CLOCK_REALTIME, &ts);
        seed = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        seed ^= (uint64_t)getpid() << 32;
    }
    if (fd >= 0)
        close(fd);
    st->rng = seed;
}

static void new_id(struct store *st, char prefix, char id[STORE_ID_LEN + 1])
{
    snprintf(id, STORE_ID_LEN + 1, "%c_%016" PRIx64, prefix, rng_next(st));
}

static int is_sha256(const char *s)
{
    size_t i;

    if (!s)
        return 0;
    for (i = 0; s[i]; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return i == 64;
}

/* ---- Open and close -------------------------------------------------- */

/* Runs setup SQL that has no parameters (pragmas, migrations). */
static int setup_exec(sqlite3 *db, const char *sql, const char *what,
                      struct store_err *err)
{
    int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

    return rc == SQLITE_OK ? 0 : sql_fail(db, err, rc, what);
}

/* The first column of a one-row setup query, as text into buf. */
static int setup_query(sqlite3 *db, const char *sql, char *buf, size_t size,
                       struct store_err *err)
{
    sqlite3_stmt *s = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);

    if (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
        col_copy(s, 0, buf, size);
        rc = 0;
    } else {
        rc = sql_fail(db, err, rc == SQLITE_DONE ? SQLITE_ERROR : rc, sql);
    }
    sqlite3_finalize(s);
    return rc;
}

static int user_version(sqlite3 *db, int *version, struct store_err *err)
{
    char buf[32];
    int rc = setup_query(db, "PRAGMA user_version", buf, sizeof buf, err);

    *version = rc < 0 ? 0 : atoi(buf);
    return rc;
}

int store_schema_version(void)
{
    return store_migration_count > 0
               ? store_migrations[store_migration_count - 1].version : 0;
}

static int version_newer(const char *path, int have, struct store_err *err)
{
    return set_err(err, STORE_EVERSION, 0,
                   "database %s has schema version %d, newer than the %d "
                   "this program knows: run a newer ecopt, or use another "
                   "file", path, have, store_schema_version());
}

/*
 * Applies the migrations newer than the file, each with its version bump
 * in one transaction, so a crash leaves the file at a version it fully
 * has. The version is read again under the write lock because another
 * process may have migrated the file meanwhile.
 */
static int migrate(sqlite3 *db, const char *path, struct store_err *err)
{
    int have, rc, previous = 0;
    char sql[64], what[96];

    if ((rc = user_version(db, &have, err)) < 0)
        return rc;
    if (have > store_schema_version())
        return version_newer(path, have, err);
    for (int i = 0; i < store_migration_count; i++) {
        const struct store_migration *m = &store_migrations[i];

        if (m->version <= previous)
            return set_err(err, STORE_EINVAL, 0,
                           "migration %s is out of order", m->name);
        previous = m->version;
        if (m->version <= have)
            continue;
        snprintf(what, sizeof what, "apply migration %s", m->name);
        if ((rc = setup_exec(db, "BEGIN IMMEDIATE", what, err)) < 0)
            return rc;
        if ((rc = user_version(db, &have, err)) >= 0 && have < m->version) {
            /* PRAGMA takes no parameters; the version is our own integer. */
            snprintf(sql, sizeof sql, "PRAGMA user_version = %d", m->version);
            if ((rc = setup_exec(db, m->sql, what, err)) >= 0)
                rc = setup_exec(db, sql, what, err);
        }
        if (rc >= 0)
            rc = setup_exec(db, "COMMIT", what, err);
        if (rc < 0) {
            if (!sqlite3_get_autocommit(db))
                sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return rc;
        }
        if (have < m->version)
            have = m->version;
    }
    return 0;
}

/*
 * WAL lets the readers run beside the writer. synchronous=NORMAL syncs at
 * checkpoints, not at every commit: a commit is in the WAL file as soon as
 * it returns, which a killed process cannot undo; only an OS crash or a
 * power cut may take the last commits back, never the file's integrity.
 */
/* Bumped after every commit of a writer; see store_generation(). */
static _Atomic uint64_t generation = 1;

uint64_t store_generation(void)
{
    return atomic_load(&generation);
}

/*
 * SQLite calls this after each commit in WAL mode, the write lock already
 * released, so a reader that sees the new generation sees the commit.
 * It stands in for the default hook, so it checkpoints as that does.
 */
static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int pages)
{
    (void)arg;
    atomic_fetch_add(&generation, 1);
    if (pages >= 1000)
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

static int configure(struct store *st, const char *path, int reader,
                     struct store_err *err)
{
    char mode[16];
    int rc;

    sqlite3_extended_result_codes(st->db, 1);
    if (sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS) != SQLITE_OK)
        return sql_fail(st->db, err, sqlite3_errcode(st->db), path);
    if ((rc = setup_exec(st->db, "PRAGMA foreign_keys = ON", path, err)) < 0 ||
        (rc = setup_exec(st->db, "PRAGMA synchronous = NORMAL", path,
                         err)) < 0)
        return rc;
    if (reader)
        return setup_exec(st->db, "PRAGMA query_only = ON", path, err);
    if ((rc = setup_query(st->db, "PRAGMA journal_mode = WAL", mode,
                          sizeof mode, err)) < 0)
        return rc;
    if (strcmp(mode, "wal") != 0)
        return set_err(err, STORE_EIO, 0,
                       "database %s cannot use WAL (journal mode stays "
                       "\"%s\"): put it on a local file system", path, mode);
    sqlite3_wal_hook(st->db, on_wal_commit, NULL);
    return 0;
}

static int prepare_all(struct store *st, struct store_err *err)
{
    for (int i = 0; i < SQL_COUNT; i++) {
        int rc = sqlite3_prepare_v3(st->db, statements[i].sql, -1,
                                    SQLITE_PREPARE_PERSISTENT,
                                    &st->stmt[statements[i].id], NULL);

        if (rc != SQLITE_OK)
            return sql_fail(st->db, err, rc, statements[i].sql);
    }
    return 0;
}

static struct store *open_common(const char *path, int reader,
                                 struct store_err *err)
{
    /* NOMUTEX: a connection belongs to one thread at a time. */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                (reader ? 0 : SQLITE_OPEN_CREATE);
    struct store *st = NULL;
    int have, rc;

    if (!path || !*path) {
        set_err(err, STORE_EINVAL, 0, "no database path");
        goto fail;
    }
    /* Threads each use their own connection, which needs this much. */
    if (!sqlite3_threadsafe()) {
        set_err(err, STORE_EINVAL, 0,
                "SQLite was built without thread support");
        goto fail;
    }
    if (!(st = calloc(1, sizeof *st))) {
        set_err(err, STORE_ENOMEM, 0, "open %s: out of memory", path);
        goto fail;
    }
    rng_seed(st);
    rc = sqlite3_open_v2(path, &st->db, flags, NULL);
    if (rc != SQLITE_OK) {
        char what[512];

        snprintf(what, sizeof what, "open %s", path);
        sql_fail(st->db, err, rc, what);
        goto fail;
    }
    if (configure(st, path, reader, err) < 0)
        goto fail;
    if (!reader) {
        if (migrate(st->db, path, err) < 0)
            goto fail;
    } else {
        if (user_version(st->db, &have, err) < 0)
            goto fail;
        if (have > store_schema_version()) {
            version_newer(path, have, err);
            goto fail;
        }
        if (have < store_schema_version()) {
            set_err(err, STORE_EVERSION, 0,
                    "database %s has schema version %d, older than the %d "
                    "this program needs: open it for writing first",
                    path, have, store_schema_version());
            goto fail;
        }
    }
    if (prepare_all(st, err) < 0)
        goto fail;
    return st;
fail:
    store_close(st);
    return NULL;
}

struct store *store_open(const char *path, struct store_err *err)
{
    return open_common(path, 0, err);
}

struct store *store_open_reader(const char *path, struct store_err *err)
{
    return open_common(path, 1, err);
}

void store_close(struct store *st)
{
    if (!st)
        return;
    for (int i = 0; i < SQL_COUNT; i++)
        sqlite3_finalize(st->stmt[i]);
    /* The last connection to close checkpoints and removes the WAL. */
    sqlite3_close(st->db);
    free(st);
}

int store_ping(struct store *st, struct store_err *err)
{
    struct use u = use(st, SQL_PING);
    int rc = step(&u);

    rc = rc == SQLITE_ROW ? 0 : sql_fail(st->db, err, rc, "ping database");
    done(&u);
    return rc;
}

/* ---- Jobs ------------------------------------------------------------ */

static const char *const state_names[STORE_JOB_STATE_COUNT] = {
    [STORE_JOB_QUEUED] = "queued",
    [STORE_JOB_RUNNING] = "running",
    [STORE_JOB_SUCCEEDED] = "succeeded",
    [STORE_JOB_FAILED] = "failed",
    [STORE_JOB_CANCELLED] = "cancelled",
    [STORE_JOB_INTERRUPTED] = "interrupted",
};

const char *store_job_state_name(enum store_job_state s)
{
    return (unsigned)s < STORE_JOB_STATE_COUNT ? state_names[s] : NULL;
}

int store_job_state_from_name(const char *name, enum store_job_state *out)
{
    for (int i = 0; name && i < STORE_JOB_STATE_COUNT; i++) {
        if (strcmp(name, state_names[i]) == 0) {
            *out = (enum store_job_state)i;
            return 0;
        }
    }
    return STORE_EINVAL;
}

int store_job_state_is_final(enum store_job_state s)
{
    return s >= STORE_JOB_SUCCEEDED && s < STORE_JOB_STATE_COUNT;
}

void store_job_clear(struct store_job *job)
{
    if (!job)
        return;
    free(job->owner);
    free(job->reason);
    free(job->spec);
    free(job->name);
    free(job->labels);
    free(job->algorithm);
    free(job->compressor);
    free(job->dataset);
    free(job->backend);
    free(job->problem);
    free(job->params);
    free(job->idempotency_key);
    memset(job, 0, sizeof *job);
}

void store_jobs_free(struct store_job *jobs, size_t n)
{
    if (!jobs)
        return;
    for (size_t i = 0; i < n; i++)
        store_job_clear(&jobs[i]);
    free(jobs);
}

static int64_t col_int_or(sqlite3_stmt *s, int i, int64_t none)
{
    return sqlite3_column_type(s, i) == SQLITE_NULL
               ? none : sqlite3_column_int64(s, i);
}

/* Fills *out from a row of JOB_COLUMNS; out is cleared on failure. */
static int job_from_row(sqlite3_stmt *s, struct store_job *out,
                        struct store_err *err)
{
    const char *state = (const char *)sqlite3_column_text(s, JC_STATE);
    int nomem = 0;

    memset(out, 0, sizeof *out);
    col_copy(s, JC_ID, out->id, sizeof out->id);
    if (store_job_state_from_name(state, &out->state) < 0)
        return set_err(err, STORE_ECORRUPT, 0, "job %s has state \"%s\"",
                       out->id, state ? state : "(null)");
    out->owner = col_dup(s, JC_OWNER, &nomem);
    out->reason = col_dup(s, JC_REASON, &nomem);
    out->spec = col_dup(s, JC_SPEC, &nomem);
    out->name = col_dup(s, JC_NAME, &nomem);
    out->labels = col_dup(s, JC_LABELS, &nomem);
    out->algorithm = col_dup(s, JC_ALGORITHM, &nomem);
    out->compressor = col_dup(s, JC_COMPRESSOR, &nomem);
    out->dataset = col_dup(s, JC_DATASET, &nomem);
    out->backend = col_dup(s, JC_BACKEND, &nomem);
    out->workers = (uint32_t)sqlite3_column_int64(s, JC_WORKERS);
    out->created_at = col_int_or(s, JC_CREATED_AT, 0);
    out->started_at = col_int_or(s, JC_STARTED_AT, 0);
    out->finished_at = col_int_or(s, JC_FINISHED_AT, 0);
    out->pid = col_int_or(s, JC_PID, 0);
    out->problem = col_dup(s, JC_PROBLEM, &nomem);
    out->params = col_dup(s, JC_PARAMS, &nomem);
    out->round = col_int_or(s, JC_ROUND, -1);
    out->rel_gap = col_real(s, JC_REL_GAP);
    out->bits_up = col_real(s, JC_BITS_UP);
    out->updated_at = col_int_or(s, JC_UPDATED_AT, 0);
    out->idempotency_key = col_dup(s, JC_IDEM_KEY, &nomem);
    col_copy(s, JC_EXPERIMENT_ID, out->experiment_id,
             sizeof out->experiment_id);
    if (nomem) {
        store_job_clear(out);
        return set_err(err, STORE_ENOMEM, 0, "read job: out of memory");
    }
    return 0;
}

/* Reads the job with this seq into *out (within the caller's transaction). */
static int job_get_seq(struct store *st, int64_t seq, struct store_job *out,
                       struct store_err *err)
{
    struct use u = use(st, SQL_JOB_GET_SEQ);
    int rc;

    bind_int(&u, 1, seq);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = job_from_row(u.s, out, err);
    else if (rc == SQLITE_DONE)
        rc = set_err(err, STORE_ENOTFOUND, 0, "no job with seq %" PRId64,
                     seq);
    else
        rc = sql_fail(st->db, err, rc, "read a job");
    done(&u);
    return rc;
}

/* The internal key of a job by its public id. */
static int job_seq(struct store *st, const char *id, int64_t *seq,
                   struct store_err *err)
{
    struct use u = use(st, SQL_JOB_SEQ);
    int rc;

    if (!id)
        return set_err(err, STORE_EINVAL, 0, "no job id");
    bind_text(&u, 1, id);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *seq = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        rc = set_err(err, STORE_ENOTFOUND, 0, "no job %s", id);
    } else {
        rc = sql_fail(st->db, err, rc, "find a job");
    }
    done(&u);
    return rc;
}

/*
 * Why a conditional change of a job changed nothing: it does not exist
 * (for this owner), or it is in a state the change does not allow.
 */
static int job_missing_or_state(struct store *st, const char *id,
                                const char *owner, const char *what,
                                struct store_err *err)
{
    struct use u = use(st, SQL_JOB_STATE);
    int rc;

    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = set_err(err, STORE_ESTATE, 0, "%s %s: the job is %s", what, id,
                     (const char *)sqlite3_column_text(u.s, 0));
    else if (rc == SQLITE_DONE)
        rc = set_err(err, STORE_ENOTFOUND, 0, "%s %s: no such job", what, id);
    else
        rc = sql_fail(st->db, err, rc, what);
    done(&u);
    return rc;
}

static int check_job_new(const struct store_job_new *in,
                         struct store_err *err)
{
    static const char *const what = "create a job";

    if (!in)
        return set_err(err, STORE_EINVAL, 0, "%s: no job", what);
    if (!in->owner || !*in->owner)
        return set_err(err, STORE_EINVAL, 0, "%s: no owner", what);
    if (!in->spec || !in->algorithm || !in->compressor || !in->dataset ||
        !in->backend)
        return set_err(err, STORE_EINVAL, 0,
                       "%s: spec, algorithm, compressor, dataset and "
                       "backend are all required", what);
    if (in->workers < 1)
        return set_err(err, STORE_EINVAL, 0, "%s: workers must be >= 1",
                       what);
    if (in->idempotency_key &&
        (!*in->idempotency_key || !in->request_hash || !*in->request_hash))
        return set_err(err, STORE_EINVAL, 0,
                       "%s: an idempotency key must be non-empty and come "
                       "with a request hash", what);
    return 0;
}

/*
 * Inserts a job and its labels inside the caller's transaction; owner and
 * experiment_id override in's. Retries a new id if one ever collides.
 */
static int job_insert(struct store *st, const struct store_job_new *in,
                      const char *owner, const char *experiment_id,
                      int64_t *seq, struct store_err *err)
{
    char id[STORE_ID_LEN + 1];
    int rc = SQLITE_CONSTRAINT_UNIQUE;

    for (int attempt = 0;
         attempt < ID_ATTEMPTS && rc == SQLITE_CONSTRAINT_UNIQUE; attempt++) {
        struct use u = use(st, SQL_JOB_INSERT);

        new_id(st, 'j', id);
        bind_text(&u, 1, id);
        bind_text(&u, 2, owner);
        bind_text(&u, 3, in->spec);
        bind_text(&u, 4, in->name ? in->name : "");
        bind_text(&u, 5, in->labels ? in->labels : "{}");
        bind_text(&u, 6, in->algorithm);
        bind_text(&u, 7, in->compressor);
        bind_text(&u, 8, in->dataset);
        bind_text(&u, 9, in->backend);
        bind_int(&u, 10, in->workers);
        bind_int(&u, 11, now_ms());
        bind_text(&u, 12, in->idempotency_key);
        bind_text(&u, 13, in->idempotency_key ? in->request_hash : NULL);
        bind_text(&u, 14, experiment_id);
        rc = step(&u);
        if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT_UNIQUE)
            sql_fail(st->db, err, rc, "create a job");
        done(&u);
    }
    if (rc != SQLITE_DONE)
        return rc == SQLITE_CONSTRAINT_UNIQUE
                   ? set_err(err, STORE_ESQL, rc, "create a job: no free id")
                   : code_of_sqlite(rc);
    *seq = sqlite3_last_insert_rowid(st->db);

    struct use u = use(st, SQL_LABELS_INSERT);

    bind_int(&u, 1, *seq);
    bind_text(&u, 2, in->labels ? in->labels : "{}");
    return exec_use(st, &u, "store a job's labels", err);
}

/* 0: no job under that key; 1: the same request, *seq set; or < 0. */
static int idem_lookup(struct store *st, const struct store_job_new *in,
                       int64_t *seq, struct store_err *err)
{
    struct use u = use(st, SQL_JOB_IDEM);
    int rc;

    bind_text(&u, 1, in->owner);
    bind_text(&u, 2, in->idempotency_key);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        const char *hash = (const char *)sqlite3_column_text(u.s, 1);

        *seq = sqlite3_column_int64(u.s, 0);
        rc = hash && strcmp(hash, in->request_hash) == 0
                 ? 1
                 : set_err(err, STORE_ECONFLICT, 0,
                           "idempotency key \"%.64s\" was used for another "
                           "request", in->idempotency_key);
    } else if (rc == SQLITE_DONE) {
        rc = 0;
    } else {
        rc = sql_fail(st->db, err, rc, "look up an idempotency key");
    }
    done(&u);
    return rc;
}

int store_job_idem_known(struct store *st, const struct store_job_new *in,
                         struct store_err *err)
{
    int64_t seq;

    if (!in->owner || !in->idempotency_key || !in->request_hash)
        return 0;
    return idem_lookup(st, in, &seq, err);
}

int store_job_create(struct store *st, const struct store_job_new *in,
                     struct store_job *out, struct store_err *err)
{
    int64_t seq = 0;
    int rc, found = 0;

    memset(out, 0, sizeof *out);
    if ((rc = check_job_new(in, err)) < 0)
        return rc;
    if ((rc = tx_begin(st, "create a job", err)) < 0)
        return rc;
    if (in->idempotency_key)
        rc = found = idem_lookup(st, in, &seq, err);
    if (rc >= 0 && !found)
        rc = job_insert(st, in, in->owner, NULL, &seq, err);
    if (rc >= 0)
        rc = job_get_seq(st, seq, out, err);
    rc = tx_end(st, rc, "create a job", err);
    if (rc < 0) {
        store_job_clear(out);
        return rc;
    }
    return found ? STORE_EXISTING : 0;
}

int store_job_get(struct store *st, const char *id, const char *owner,
                  struct store_job *out, struct store_err *err)
{
    struct use u = use(st, SQL_JOB_GET);
    int rc;

    memset(out, 0, sizeof *out);
    if (!id)
        return set_err(err, STORE_EINVAL, 0, "no job id");
    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = job_from_row(u.s, out, err);
    else if (rc == SQLITE_DONE)
        rc = set_err(err, STORE_ENOTFOUND, 0, "no job %s", id);
    else
        rc = sql_fail(st->db, err, rc, "read a job");
    done(&u);
    return rc;
}

/*
 * Reads up to limit jobs from a statement already bound, into a growing
 * array; *more tells whether a further row exists (the caller asked for
 * limit + 1). *last_seq is the seq of the last job kept.
 */
static int read_jobs(struct store *st, struct use *u, size_t limit,
                     struct store_job **out, size_t *n, int *more,
                     int64_t *last_seq, const char *what,
                     struct store_err *err)
{
    struct store_job *jobs = NULL;
    size_t count = 0, cap = 0;
    int rc;

    *more = 0;
    while ((rc = step(u)) == SQLITE_ROW) {
        if (count == limit) {
            *more = 1;
            break;
        }
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : (limit < 16 ? limit : 16);
            struct store_job *grown = realloc(jobs, ncap * sizeof *jobs);

            if (!grown) {
                rc = set_err(err, STORE_ENOMEM, 0, "%s: out of memory", what);
                goto out;
            }
            jobs = grown;
            cap = ncap;
        }
        if ((rc = job_from_row(u->s, &jobs[count], err)) < 0)
            goto out;
        if (last_seq)
            *last_seq = sqlite3_column_int64(u->s, JC_SEQ);
        count++;
    }
    rc = rc == SQLITE_ROW || rc == SQLITE_DONE
             ? 0 : sql_fail(st->db, err, rc, what);
out:
    done(u);
    if (rc < 0) {
        store_jobs_free(jobs, count);
        jobs = NULL;
        count = 0;
    }
    *out = jobs;
    *n = count;
    return rc;
}

/* Cursors are the decimal seq of the last job of the previous page. */
static int parse_cursor(const char *cursor, int64_t *seq)
{
    int64_t v = 0;

    if (!*cursor)
        return -1;
    for (const char *p = cursor; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p - '0');
    }
    *seq = v;
    return v > 0 ? 0 : -1;
}

int store_job_list(struct store *st, const struct store_job_filter *filter,
                   const char *cursor, size_t limit, struct store_job **out,
                   size_t *n, char next_cursor[STORE_CURSOR_SIZE],
                   struct store_err *err)
{
    static const struct store_job_filter everything = {.state = -1};
    const struct store_job_filter *f = filter ? filter : &everything;
    int64_t before = INT64_MAX, last_seq = 0;
    struct use u;
    int more, rc;

    *out = NULL;
    *n = 0;
    next_cursor[0] = '\0';
    if (limit < 1 || limit > INT64_MAX - 1)
        return set_err(err, STORE_EINVAL, 0, "list jobs: limit must be >= 1");
    if (f->state < -1 || f->state >= STORE_JOB_STATE_COUNT)
        return set_err(err, STORE_EINVAL, 0, "list jobs: no state %d",
                       f->state);
    if (f->label_value && !f->label_key)
        return set_err(err, STORE_EINVAL, 0,
                       "list jobs: a label value needs a label key");
    if (cursor && *cursor && parse_cursor(cursor, &before) < 0)
        return set_err(err, STORE_EINVAL, 0,
                       "list jobs: \"%.32s\" is not a cursor this service "
                       "gave", cursor);
    u = use(st, f->owner ? SQL_JOB_LIST_OWNER : SQL_JOB_LIST);
    bind_int(&u, 1, before);
    bind_text(&u, 2, f->owner);
    bind_text(&u, 3, f->state >= 0
                         ? store_job_state_name((enum store_job_state)f->state)
                         : NULL);
    bind_text(&u, 4, f->algorithm);
    bind_text(&u, 5, f->dataset);
    bind_text(&u, 6, f->label_key);
    bind_text(&u, 7, f->label_value);
    bind_int(&u, 8, (int64_t)limit + 1);
    rc = read_jobs(st, &u, limit, out, n, &more, &last_seq, "list jobs", err);
    if (rc >= 0 && more)
        snprintf(next_cursor, STORE_CURSOR_SIZE, "%" PRId64, last_seq);
    return rc;
}

int store_job_set_running(struct store *st, const char *id, int64_t pid,
                          const char *problem_json, const char *params_json,
                          struct store_err *err)
{
    struct use u = use(st, SQL_JOB_SET_RUNNING);
    int rc;

    if (!id || pid <= 0)
        return set_err(err, STORE_EINVAL, 0,
                       "start a job: an id and a pid > 0 are required");
    bind_text(&u, 1, id);
    bind_int(&u, 2, pid);
    bind_int(&u, 3, now_ms());
    bind_text(&u, 4, problem_json);
    bind_text(&u, 5, params_json);
    if ((rc = exec_use(st, &u, "start a job", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, NULL, "start job", err);
}

int store_job_progress(struct store *st, const char *id, uint64_t round,
                       double rel_gap, double bits_up, struct store_err *err)
{
    struct use u = use(st, SQL_JOB_PROGRESS);
    int rc;

    if (!id || round > INT64_MAX)
        return set_err(err, STORE_EINVAL, 0,
                       "record progress: no id, or round out of range");
    bind_text(&u, 1, id);
    bind_int(&u, 2, (int64_t)round);
    bind_real(&u, 3, rel_gap);
    bind_real(&u, 4, bits_up);
    bind_int(&u, 5, now_ms());
    if ((rc = exec_use(st, &u, "record progress", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0
               : job_missing_or_state(st, id, NULL,
                                      "record progress of job", err);
}

int store_job_finish(struct store *st, const char *id,
                     enum store_job_state state, const char *reason,
                     struct store_err *err)
{
    struct use u = use(st, SQL_JOB_FINISH);
    int rc;

    if (!id || !store_job_state_is_final(state))
        return set_err(err, STORE_EINVAL, 0,
                       "finish a job: an id and a final state are required");
    bind_text(&u, 1, id);
    bind_text(&u, 2, store_job_state_name(state));
    bind_text(&u, 3, reason);
    bind_int(&u, 4, now_ms());
    if ((rc = exec_use(st, &u, "finish a job", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, NULL, "finish job", err);
}

/* Metrics and labels go with the job (ON DELETE CASCADE). */
int store_job_delete(struct store *st, const char *id, const char *owner,
                     struct store_err *err)
{
    struct use u = use(st, SQL_JOB_DELETE);
    int rc;

    if (!id)
        return set_err(err, STORE_EINVAL, 0, "delete a job: no id");
    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    if ((rc = exec_use(st, &u, "delete a job", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, owner, "delete job", err);
}

int store_jobs_next_queued(struct store *st, size_t limit,
                           struct store_job **out, size_t *n,
                           struct store_err *err)
{
    struct use u = use(st, SQL_JOBS_QUEUED);
    int more;

    *out = NULL;
    *n = 0;
    if (limit < 1 || limit > INT64_MAX - 1)
        return set_err(err, STORE_EINVAL, 0,
                       "next queued jobs: limit must be >= 1");
    bind_int(&u, 1, (int64_t)limit);
    return read_jobs(st, &u, limit, out, n, &more, NULL, "next queued jobs",
                     err);
}

int store_counts(struct store *st, const char *owner,
                 struct store_counts *out, struct store_err *err)
{
    struct use u = use(st, SQL_COUNTS);
    int rc;

    memset(out, 0, sizeof *out);
    bind_text(&u, 1, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        out->running = sqlite3_column_int64(u.s, 0);
        out->running_workers = sqlite3_column_int64(u.s, 1);
        out->queued = sqlite3_column_int64(u.s, 2);
        out->owner_running = sqlite3_column_int64(u.s, 3);
        out->owner_queued = sqlite3_column_int64(u.s, 4);
        rc = 0;
    } else {
        rc = sql_fail(st->db, err, rc, "count jobs");
    }
    done(&u);
    return rc;
}

int store_recover(struct store *st, const char *reason,
                  struct store_err *err)
{
    struct use u = use(st, SQL_RECOVER);
    int rc;

    bind_text(&u, 1, reason);
    bind_int(&u, 2, now_ms());
    if ((rc = exec_use(st, &u, "recover interrupted jobs", err)) < 0)
        return rc;
    return sqlite3_changes(st->db);
}

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
 * its document has its numbers there alone: they are read from it when
 * `numbers` asks, and are NaN otherwise (the caller serves the document).
 */
static void metric_from_row(sqlite3_stmt *s, ec_metric *m, int numbers)
{
    const int doc_col = DESCRIBE_METRIC_NFIELDS;
    const char *doc = (const char *)sqlite3_column_text(s, doc_col);
    int col = 0;

    if (doc && numbers &&
        describe_metric_doc_read(doc, (size_t)sqlite3_column_bytes(s, doc_col), m) == 0) {
        m->round = (uint64_t)sqlite3_column_int64(s, 0);
        return;
    }
    if (doc && !numbers) {
#define NAN_(name, kind, csv) METRIC_NAN_##kind(m->name)
        DESCRIBE_METRIC_FIELDS(NAN_)
#undef NAN_
        m->round = (uint64_t)sqlite3_column_int64(s, 0);
        return;
    }
#define READ_(name, kind, csv) m->name = METRIC_COL_##kind(s, col), col++;
    DESCRIBE_METRIC_FIELDS(READ_)
#undef READ_
}

static int metric_insert(struct store *st, int64_t seq, const ec_metric *m,
                         const char *doc, const char *what,
                         struct store_err *err)
{
    struct use u = use(st, doc ? SQL_METRIC_INSERT_DOC : SQL_METRIC_INSERT);
    int param = 2;

    bind_int(&u, 1, seq);
    if (doc) {
        /* Its numbers are in the document: not stored twice. */
        bind_int(&u, 2, (int64_t)m->round);
        bind_text(&u, 3, doc);
        return exec_use(st, &u, what, err);
    }
#define BIND_(name, kind, csv) METRIC_BIND_##kind(&u, param, m->name), param++;
    DESCRIBE_METRIC_FIELDS(BIND_)
#undef BIND_
    bind_text(&u, param, NULL);
    return exec_use(st, &u, what, err);
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
    int64_t seq;
    int rc;

    if (!id || (n && !rows))
        return set_err(err, STORE_EINVAL, 0, "append metrics: no job or rows");
    snprintf(what, sizeof what, "append metrics to %.24s", id);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].round > INT64_MAX)
            return set_err(err, STORE_EINVAL, 0, "%s: round %" PRIu64
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
    if ((rc = tx_begin(st, what, err)) < 0)
        return rc;
    rc = job_seq(st, id, &seq, err);
    for (size_t i = 0; rc >= 0 && i < n; i++)
        rc = metric_insert(st, seq, &rows[i], docs ? docs[i] : NULL, what, err);
    if (rc >= 0) {
        struct use u = use(st, SQL_METRIC_PROGRESS);

        bind_int(&u, 1, seq);
        bind_int(&u, 2, (int64_t)latest->round);
        bind_real(&u, 3, latest->rel_gap);
        bind_real(&u, 4, latest->bits_up);
        bind_int(&u, 5, now_ms());
        rc = exec_use(st, &u, what, err);
    }
    return tx_end(st, rc, what, err);
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
    const char *t = (const char *)sqlite3_column_text(s, 11);
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
    int nomem = 0;
    ec_metric last = {0};
    int64_t seq, window, position = 0, before_last = after;
    struct use u;
    int rc;

    memset(page, 0, sizeof *page);
    if (after < -1)
        after = -1;
    page->next_after = after;
    if (limit < 1 || every < 1 || !rows)
        return set_err(err, STORE_EINVAL, 0,
                       "read metrics: limit and every must be >= 1");
    /* Beyond INT64_MAX candidates nobody waits for the page anyway. */
    window = limit > (size_t)(INT64_MAX / 2) / every
                 ? INT64_MAX / 2 : (int64_t)(limit * every);
    if ((rc = job_seq(st, id, &seq, err)) < 0)
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
        metric_from_row(u.s, &last, !docs);
        if (position % (int64_t)every == 0) {
            if (docs)
                docs[page->count] = doc_of_row(u.s, &nomem);
            rows[page->count++] = last;
        } else if (docs) {
            /* Perhaps the job's last row, kept below: its doc, now. */
            free(last_doc);
            last_doc = doc_of_row(u.s, &nomem);
        }
        position++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = sql_fail(st->db, err, rc, "read metrics");
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
            rc = set_err(err, STORE_ENOMEM, 0, "read metrics: out of memory");
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
    if ((rc = job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_COUNT);
    bind_int(&u, 1, seq);
    bind_int(&u, 2, after);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *count = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else {
        rc = sql_fail(st->db, err, rc, "count metrics");
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
    if ((rc = job_seq(st, id, &seq, err)) < 0)
        return rc;
    u = use(st, SQL_METRIC_LAST);
    bind_int(&u, 1, seq);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        if (doc)
            *doc = doc_of_row(u.s, &nomem);   /* NULL on no memory: formatted */
        metric_from_row(u.s, row, !doc || !*doc);
        rc = 1;
    } else if (rc == SQLITE_DONE) {
        rc = 0;
    } else {
        rc = sql_fail(st->db, err, rc, "read the last metrics");
    }
    done(&u);
    return rc;
}

/* ---- The P* cache ---------------------------------------------------- */

/* "%.17g" round-trips every double; -0 is written as 0 to equal it. */
static int pstar_key_text(const struct store_pstar_key *key,
                          char l1[32], char l2[32], struct store_err *err)
{
    if (!key || !is_sha256(key->dataset_sha256) || !key->loss ||
        !isfinite(key->lambda1) || !isfinite(key->lambda2))
        return set_err(err, STORE_EINVAL, 0,
                       "P* cache: the key needs a dataset SHA-256 (64 "
                       "lowercase hex digits), a loss and finite lambdas");
    snprintf(l1, 32, "%.17g", key->lambda1 == 0 ? 0.0 : key->lambda1);
    snprintf(l2, 32, "%.17g", key->lambda2 == 0 ? 0.0 : key->lambda2);
    return 0;
}

int store_pstar_get(struct store *st, const struct store_pstar_key *key,
                    struct store_pstar *out, struct store_err *err)
{
    char l1[32], l2[32];
    struct use u;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = pstar_key_text(key, l1, l2, err)) < 0)
        return rc;
    u = use(st, SQL_PSTAR_GET);
    bind_text(&u, 1, key->dataset_sha256);
    bind_text(&u, 2, key->loss);
    bind_text(&u, 3, l1);
    bind_text(&u, 4, l2);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        out->p_star = col_real(u.s, 0);
        col_copy(u.s, 1, out->method, sizeof out->method);
        out->bound = col_real(u.s, 2);
        out->computed_at = sqlite3_column_int64(u.s, 3);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        rc = set_err(err, STORE_ENOTFOUND, 0, "P* cache: no entry");
    } else {
        rc = sql_fail(st->db, err, rc, "read the P* cache");
    }
    done(&u);
    return rc;
}

int store_pstar_list(struct store *st, const char *dataset_sha256,
                     const char *loss, size_t max, struct store_pstar **out,
                     size_t *n, struct store_err *err)
{
    struct store_pstar *v = NULL;
    size_t cnt = 0;
    struct use u;
    int rc;

    *out = NULL;
    *n = 0;
    if (!is_sha256(dataset_sha256) || !loss || max == 0 || max > 100000)
        return set_err(err, STORE_EINVAL, 0,
                       "P* cache: a dataset SHA-256, a loss and 1..100000 "
                       "entries at most");
    if (!(v = calloc(max, sizeof *v)))
        return set_err(err, STORE_ENOMEM, 0, "P* cache: out of memory");
    u = use(st, SQL_PSTAR_LIST);
    bind_text(&u, 1, dataset_sha256);
    bind_text(&u, 2, loss);
    bind_int(&u, 3, (int64_t)max);
    while ((rc = step(&u)) == SQLITE_ROW && cnt < max) {
        const char *l1 = (const char *)sqlite3_column_text(u.s, 0);
        const char *l2 = (const char *)sqlite3_column_text(u.s, 1);
        struct store_pstar *e = &v[cnt];

        if (!l1 || !l2)
            continue;
        e->lambda1 = strtod(l1, NULL);
        e->lambda2 = strtod(l2, NULL);
        e->p_star = col_real(u.s, 2);
        col_copy(u.s, 3, e->method, sizeof e->method);
        e->bound = col_real(u.s, 4);
        e->computed_at = sqlite3_column_int64(u.s, 5);
        cnt++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = sql_fail(st->db, err, rc, "read the P* cache");
        free(v);
    } else {
        rc = 0;
        *out = v;
        *n = cnt;
    }
    done(&u);
    return rc;
}

int store_pstar_put(struct store *st, const struct store_pstar_key *key,
                    const struct store_pstar *val, struct store_err *err)
{
    char l1[32], l2[32];
    struct use u;
    int rc;

    if ((rc = pstar_key_text(key, l1, l2, err)) < 0)
        return rc;
    if (!val || !isfinite(val->p_star) ||
        !memchr(val->method, '\0', sizeof val->method))
        return set_err(err, STORE_EINVAL, 0,
                       "P* cache: P* must be finite and the method a "
                       "string");
    u = use(st, SQL_PSTAR_PUT);
    bind_text(&u, 1, key->dataset_sha256);
    bind_text(&u, 2, key->loss);
    bind_text(&u, 3, l1);
    bind_text(&u, 4, l2);
    bind_real(&u, 5, val->p_star);
    bind_text(&u, 6, val->method);
    bind_real(&u, 7, val->bound);
    bind_int(&u, 8, now_ms());
    return exec_use(st, &u, "write the P* cache", err);
}

/* ---- Experiments ----------------------------------------------------- */

void store_experiment_clear(struct store_experiment *x)
{
    if (!x)
        return;
    free(x->owner);
    free(x->name);
    free(x->spec);
    memset(x, 0, sizeof *x);
}

static int experiment_read(struct store *st, const char *id,
                           const char *owner, struct store_experiment *out,
                           struct store_err *err)
{
    struct use u = use(st, SQL_EXP_GET);
    int rc, nomem = 0;

    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        col_copy(u.s, 0, out->id, sizeof out->id);
        out->owner = col_dup(u.s, 1, &nomem);
        out->name = col_dup(u.s, 2, &nomem);
        out->spec = col_dup(u.s, 3, &nomem);
        out->created_at = sqlite3_column_int64(u.s, 4);
        rc = nomem ? set_err(err, STORE_ENOMEM, 0,
                             "read an experiment: out of memory")
                   : 0;
    } else if (rc == SQLITE_DONE) {
        rc = set_err(err, STORE_ENOTFOUND, 0, "no experiment %s", id);
    } else {
        rc = sql_fail(st->db, err, rc, "read an experiment");
    }
    done(&u);
    if (rc < 0)
        store_experiment_clear(out);
    return rc;
}

static int experiment_insert(struct store *st,
                             const struct store_experiment_new *in,
                             char id[STORE_ID_LEN + 1], struct store_err *err)
{
    int rc = SQLITE_CONSTRAINT_UNIQUE;

    for (int attempt = 0;
         attempt < ID_ATTEMPTS && rc == SQLITE_CONSTRAINT_UNIQUE; attempt++) {
        struct use u = use(st, SQL_EXP_INSERT);

        new_id(st, 'x', id);
        bind_text(&u, 1, id);
        bind_text(&u, 2, in->owner);
        bind_text(&u, 3, in->name ? in->name : "");
        bind_text(&u, 4, in->spec);
        bind_int(&u, 5, now_ms());
        rc = step(&u);
        if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT_UNIQUE)
            sql_fail(st->db, err, rc, "create an experiment");
        done(&u);
    }
    if (rc == SQLITE_DONE)
        return 0;
    return rc == SQLITE_CONSTRAINT_UNIQUE
               ? set_err(err, STORE_ESQL, rc,
                         "create an experiment: no free id")
               : code_of_sqlite(rc);
}

int store_experiment_create(struct store *st,
                            const struct store_experiment_new *in,
                            const struct store_job_new *jobs, size_t njobs,
                            struct store_experiment *out,
                            struct store_job *jobs_out,
                            struct store_err *err)
{
    static const char *const what = "create an experiment";
    char id[STORE_ID_LEN + 1];
    size_t filled = 0;
    int rc;

    memset(out, 0, sizeof *out);
    if (!in || !in->owner || !*in->owner || !in->spec || (njobs && !jobs))
        return set_err(err, STORE_EINVAL, 0,
                       "%s: an owner and a spec are required", what);
    for (size_t i = 0; i < njobs; i++) {
        struct store_job_new jn = jobs[i];

        jn.owner = in->owner;
        if ((rc = check_job_new(&jn, err)) < 0)
            return rc;
        if (jn.idempotency_key)
            return set_err(err, STORE_EINVAL, 0,
                           "%s: its jobs take no idempotency key", what);
    }
    if ((rc = tx_begin(st, what, err)) < 0)
        return rc;
    rc = experiment_insert(st, in, id, err);
    for (size_t i = 0; rc >= 0 && i < njobs; i++) {
        int64_t seq;

        rc = job_insert(st, &jobs[i], in->owner, id, &seq, err);
        if (rc >= 0 && jobs_out && (rc = job_get_seq(st, seq, &jobs_out[i],
                                                     err)) >= 0)
            filled++;
    }
    if (rc >= 0)
        rc = experiment_read(st, id, NULL, out, err);
    rc = tx_end(st, rc, what, err);
    if (rc < 0) {
        for (size_t i = 0; i < filled; i++)
            store_job_clear(&jobs_out[i]);
        store_experiment_clear(out);
    }
    return rc;
}

int store_experiment_get(struct store *st, const char *id, const char *owner,
                         struct store_experiment *out, struct store_err *err)
{
    memset(out, 0, sizeof *out);
    if (!id)
        return set_err(err, STORE_EINVAL, 0, "no experiment id");
    return experiment_read(st, id, owner, out, err);
}

/* Ownership is the experiment's; its jobs share its owner. */
int store_experiment_list_jobs(struct store *st, const char *id,
                               const char *owner, struct store_job **out,
                               size_t *n, struct store_err *err)
{
    struct store_experiment x;
    struct use u;
    int more, rc;

    *out = NULL;
    *n = 0;
    if ((rc = store_experiment_get(st, id, owner, &x, err)) < 0)
        return rc;
    store_experiment_clear(&x);
    u = use(st, SQL_EXP_JOBS);
    bind_text(&u, 1, id);
    return read_jobs(st, &u, SIZE_MAX, out, n, &more, NULL,
                     "list an experiment's jobs", err);
}

/* ---- Datasets -------------------------------------------------------- */

void store_dataset_clear(struct store_dataset *ds)
{
    if (!ds)
        return;
    free(ds->name);
    free(ds->labels);
    memset(ds, 0, sizeof *ds);
}

void store_datasets_free(struct store_dataset *ds, size_t n)
{
    if (!ds)
        return;
    for (size_t i = 0; i < n; i++)
        store_dataset_clear(&ds[i]);
    free(ds);
}

static int dataset_from_row(sqlite3_stmt *s, struct store_dataset *out,
                            struct store_err *err)
{
    int nomem = 0;

    memset(out, 0, sizeof *out);
    out->name = col_dup(s, 0, &nomem);
    col_copy(s, 1, out->sha256, sizeof out->sha256);
    out->rows = sqlite3_column_int64(s, 2);
    out->d = sqlite3_column_int64(s, 3);
    out->nnz = sqlite3_column_int64(s, 4);
    out->labels = col_dup(s, 5, &nomem);
    out->bytes = sqlite3_column_int64(s, 6);
    out->uploaded_at = sqlite3_column_int64(s, 7);
    if (nomem) {
        store_dataset_clear(out);
        return set_err(err, STORE_ENOMEM, 0, "read a dataset: out of memory");
    }
    return 0;
}

int store_dataset_put(struct store *st, const struct store_dataset *ds,
                      struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_PUT);

    if (!ds || !ds->name || !*ds->name || !is_sha256(ds->sha256) ||
        !ds->labels || ds->rows < 0 || ds->d < 0 || ds->nnz < 0 ||
        ds->bytes < 0)
        return set_err(err, STORE_EINVAL, 0,
                       "store a dataset: a name, a SHA-256 (64 lowercase "
                       "hex digits), labels and counts >= 0 are required");
    bind_text(&u, 1, ds->name);
    bind_text(&u, 2, ds->sha256);
    bind_int(&u, 3, ds->rows);
    bind_int(&u, 4, ds->d);
    bind_int(&u, 5, ds->nnz);
    bind_text(&u, 6, ds->labels);
    bind_int(&u, 7, ds->bytes);
    bind_int(&u, 8, ds->uploaded_at ? ds->uploaded_at : now_ms());
    return exec_use(st, &u, "store a dataset", err);
}

int store_dataset_get(struct store *st, const char *name,
                      struct store_dataset *out, struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_GET);
    int rc;

    memset(out, 0, sizeof *out);
    if (!name)
        return set_err(err, STORE_EINVAL, 0, "no dataset name");
    bind_text(&u, 1, name);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = dataset_from_row(u.s, out, err);
    else if (rc == SQLITE_DONE)
        rc = set_err(err, STORE_ENOTFOUND, 0, "no dataset %.200s", name);
    else
        rc = sql_fail(st->db, err, rc, "read a dataset");
    done(&u);
    return rc;
}

int store_dataset_list(struct store *st, struct store_dataset **out,
                       size_t *n, struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_LIST);
    struct store_dataset *list = NULL;
    size_t count = 0, cap = 0;
    int rc;

    while ((rc = step(&u)) == SQLITE_ROW) {
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct store_dataset *grown = realloc(list, ncap * sizeof *list);

            if (!grown) {
                rc = set_err(err, STORE_ENOMEM, 0,
                             "list datasets: out of memory");
                goto out;
            }
            list = grown;
            cap = ncap;
        }
        if ((rc = dataset_from_row(u.s, &list[count], err)) < 0)
            goto out;
        count++;
    }
    rc = rc == SQLITE_DONE ? 0 : sql_fail(st->db, err, rc, "list datasets");
out:
    done(&u);
    if (rc < 0) {
        store_datasets_free(list, count);
        list = NULL;
        count = 0;
    }
    *out = list;
    *n = count;
    return rc;
}

int store_dataset_delete(struct store *st, const char *name,
                         struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_DELETE);
    int rc;

    if (!name)
        return set_err(err, STORE_EINVAL, 0, "no dataset name");
    bind_text(&u, 1, name);
    if ((rc = exec_use(st, &u, "delete a dataset", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0
               : set_err(err, STORE_ENOTFOUND, 0, "no dataset %.200s", name);
}
