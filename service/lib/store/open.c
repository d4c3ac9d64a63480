/*
 * The store's errors, its one table of statements prepared, opening a
 * database (configure, migrate), transactions and small helpers.
 */
#include "store_int.h"

#include <pthread.h>

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

int store__set_err(struct store_err *err, int code, int sqlite_code,
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
int store__code_of_sqlite(int rc)
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
int store__sql_fail(sqlite3 *db, struct store_err *err, int rc,
                    const char *what)
{
    const char *msg = db ? sqlite3_errmsg(db) : NULL;

    if (!msg || sqlite3_errcode(db) == SQLITE_OK)
        msg = sqlite3_errstr(rc);
    return store__set_err(err, store__code_of_sqlite(rc), rc, "%s: %s", what, msg);
}

static const struct {
    enum statement_id id;
    const char *sql;
} statements[] = {
#define STORE_STMT_ROW(id, sql) {id, sql},
    STORE_STATEMENTS(STORE_STMT_ROW)
#undef STORE_STMT_ROW
};

/* ---- Transactions ---------------------------------------------------- */

/*
 * BEGIN IMMEDIATE takes the write lock at once, so a transaction never
 * fails half way for a lock another connection holds; the busy timeout
 * covers the wait.
 */
int store__tx_begin(struct store *st, const char *what, struct store_err *err)
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
int store__tx_end(struct store *st, int rc, const char *what,
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

int64_t store__now_ms(void)
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

void store__new_id(struct store *st, char prefix, char id[STORE_ID_LEN + 1])
{
    snprintf(id, STORE_ID_LEN + 1, "%c_%016" PRIx64, prefix, rng_next(st));
}

int store__is_sha256(const char *s)
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

    return rc == SQLITE_OK ? 0 : store__sql_fail(db, err, rc, what);
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
        rc = store__sql_fail(db, err, rc == SQLITE_DONE ? SQLITE_ERROR : rc, sql);
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
    return store__set_err(err, STORE_EVERSION, 0,
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
            return store__set_err(err, STORE_EINVAL, 0,
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

/* The generation of the writers given none; see store_set_generation(). */
static struct store_gen process_gen = STORE_GEN_INIT;

void store_gen_init(struct store_gen *gen)
{
    atomic_init(&gen->value, 1);
}

uint64_t store_gen_read(const struct store_gen *gen)
{
    return atomic_load(&gen->value);
}

void store_set_generation(struct store *st, struct store_gen *gen)
{
    st->gen = gen ? gen : &process_gen;
}

uint64_t store_generation(void)
{
    return store_gen_read(&process_gen);
}

/*
 * SQLite calls this after each commit in WAL mode, the write lock already
 * released, so a reader that sees the new generation sees the commit.
 * It stands in for the default hook, so it checkpoints as that does.
 */
static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int pages)
{
    struct store *st = arg;

    atomic_fetch_add(&st->gen->value, 1);
    if (pages >= 1000)
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    return SQLITE_OK;
}

/*
 * WAL lets the readers run beside the writer. synchronous=NORMAL syncs at
 * checkpoints, not at every commit: a commit is in the WAL file as soon as
 * it returns, which a killed process cannot undo; only an OS crash or a
 * power cut may take the last commits back, never the file's integrity.
 */
static int configure(struct store *st, const char *path, int reader,
                     struct store_err *err)
{
    char mode[16];
    int rc;

    sqlite3_extended_result_codes(st->db, 1);
    if (sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS) != SQLITE_OK)
        return store__sql_fail(st->db, err, sqlite3_errcode(st->db), path);
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
        return store__set_err(err, STORE_EIO, 0,
                              "database %s cannot use WAL (journal mode stays "
                              "\"%s\"): put it on a local file system", path, mode);
    sqlite3_wal_hook(st->db, on_wal_commit, st);
    return 0;
}

static int prepare_all(struct store *st, struct store_err *err)
{
    for (int i = 0; i < SQL_COUNT; i++) {
        int rc = sqlite3_prepare_v3(st->db, statements[i].sql, -1,
                                    SQLITE_PREPARE_PERSISTENT,
                                    &st->stmt[statements[i].id], NULL);

        if (rc != SQLITE_OK)
            return store__sql_fail(st->db, err, rc, statements[i].sql);
    }
    return 0;
}

/*
 * Once per process, before SQLite's first use: no memory statistics. With
 * them every allocation of SQLite's takes one global mutex, which all
 * threads' connections share; nothing here reads them. Where SQLite was
 * already in use (a program that opened a database itself first) this is
 * refused and changes nothing.
 */
static pthread_once_t sqlite_once = PTHREAD_ONCE_INIT;

static void sqlite_setup(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
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
        store__set_err(err, STORE_EINVAL, 0, "no database path");
        goto fail;
    }
    /* Threads each use their own connection, which needs this much. */
    if (!sqlite3_threadsafe()) {
        store__set_err(err, STORE_EINVAL, 0,
                       "SQLite was built without thread support");
        goto fail;
    }
    if (!(st = calloc(1, sizeof *st))) {
        store__set_err(err, STORE_ENOMEM, 0, "open %s: out of memory", path);
        goto fail;
    }
    rng_seed(st);
    st->gen = &process_gen;
    pthread_once(&sqlite_once, sqlite_setup);
    rc = sqlite3_open_v2(path, &st->db, flags, NULL);
    if (rc != SQLITE_OK) {
        char what[512];

        snprintf(what, sizeof what, "open %s", path);
        store__sql_fail(st->db, err, rc, what);
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
            store__set_err(err, STORE_EVERSION, 0,
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

    rc = rc == SQLITE_ROW ? 0 : store__sql_fail(st->db, err, rc, "ping database");
    done(&u);
    return rc;
}
