/*
 * The baseline of the service's metric ingestion: a plain SQLite insert of
 * the same rows, with SQLite's defaults but for the journal. The rows of one job
 * (its JSON documents, as the service stored them) are read from the
 * service's database into memory first; then, timed in CPU seconds of
 * this process, they go into a fresh
 * database in WAL mode with synchronous = NORMAL (the service's settings),
 * into a table of the metrics table's shape (migrations/, with job_seq
 * and round as its key, without rowid), through one prepared statement,
 * in one transaction per BATCH rows. No foreign keys, no progress
 * columns, no parsing: the round of each row is read before the clock
 * starts.
 *
 *   build/bench/bench_ingest SERVICE_DB JOB_ID BATCH DB
 *
 * prints "rows batches cpu_seconds us_per_row"; DB must not exist (it is
 * created, and left for the caller to remove with its -wal and -shm).
 * SERVICE_DB is opened read-only and may be in use by the service.
 * bench/bench_service.sh runs it beside the service in the same run.
 */
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(sqlite3 *db, const char *what)
{
    fprintf(stderr, "bench_ingest: %s: %s\n", what, db ? sqlite3_errmsg(db) : "failed");
    exit(1);
}

static void exec(sqlite3 *db, const char *sql)
{
    if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
        die(db, sql);
}

/* The metrics table as the migrations leave it (0001, 0002, 0006, 0011,
   0012), without the foreign key. */
static const char schema[] =
    "CREATE TABLE metrics (job_seq INTEGER NOT NULL, round INTEGER NOT NULL"
    " CHECK (round >= 0), bits_up REAL, bits_down REAL, paper_bits REAL, P REAL,"
    " gap REAL, rel_gap REAL, grad_norm REAL, seconds REAL, wire_up REAL,"
    " wire_down REAL, doc TEXT, time REAL, restarts INTEGER, grad_evals REAL,"
    " PRIMARY KEY (job_seq, round)) WITHOUT ROWID";

/* The job's rows as the service stored them, in round order. */
static size_t read_rows(const char *path, const char *job, int64_t **rounds, char ***docs)
{
    sqlite3 *src = NULL;
    sqlite3_stmt *q;
    size_t n = 0, cap = 0;
    int rc;

    if (sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        die(src, path);
    sqlite3_busy_timeout(src, 5000);
    if (sqlite3_prepare_v2(src, "SELECT m.round, m.doc FROM metrics m JOIN jobs j"
                           " ON j.seq = m.job_seq WHERE j.id = ?1 AND m.doc IS NOT NULL"
                           " ORDER BY m.round", -1, &q, NULL) != SQLITE_OK)
        die(src, "read the rows");
    sqlite3_bind_text(q, 1, job, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
        if (n == cap) {
            cap = cap ? 2 * cap : 4096;
            *docs = realloc(*docs, cap * sizeof **docs);
            *rounds = realloc(*rounds, cap * sizeof **rounds);
            if (!*docs || !*rounds)
                die(NULL, "out of memory");
        }
        (*rounds)[n] = sqlite3_column_int64(q, 0);
        if (!((*docs)[n++] = strdup((const char *)sqlite3_column_text(q, 1))))
            die(NULL, "out of memory");
    }
    if (rc != SQLITE_DONE)
        die(src, "read the rows");
    sqlite3_finalize(q);
    sqlite3_close(src);
    return n;
}

int main(int argc, char **argv)
{
    char **docs = NULL;
    int64_t *rounds = NULL;
    size_t n, batch, batches = 0;
    sqlite3 *db = NULL;
    sqlite3_stmt *ins;
    double t0, t;

    if (argc != 5 || (batch = strtoul(argv[3], NULL, 10)) < 1) {
        fprintf(stderr, "usage: bench_ingest SERVICE_DB JOB_ID BATCH DB\n");
        return 2;
    }
    if ((n = read_rows(argv[1], argv[2], &rounds, &docs)) == 0) {
        fprintf(stderr, "bench_ingest: job %s has no rows in %s\n", argv[2], argv[1]);
        return 1;
    }
    if (sqlite3_open(argv[4], &db) != SQLITE_OK)
        die(db, argv[4]);
    exec(db, "PRAGMA journal_mode = WAL");
    exec(db, "PRAGMA synchronous = NORMAL");
    exec(db, schema);
    if (sqlite3_prepare_v3(db, "INSERT INTO metrics (job_seq, round, doc) VALUES (1, ?1, ?2)",
                           -1, SQLITE_PREPARE_PERSISTENT, &ins, NULL) != SQLITE_OK)
        die(db, "prepare");
    t0 = cpu();
    for (size_t i = 0; i < n; i += batch) {
        exec(db, "BEGIN");
        for (size_t k = i; k < n && k < i + batch; k++) {
            sqlite3_bind_int64(ins, 1, rounds[k]);
            sqlite3_bind_text(ins, 2, docs[k], -1, SQLITE_STATIC);
            if (sqlite3_step(ins) != SQLITE_DONE)
                die(db, "insert");
            sqlite3_reset(ins);
        }
        exec(db, "COMMIT");
        batches++;
    }
    t = cpu() - t0;
    sqlite3_finalize(ins);
    if (sqlite3_close(db) != SQLITE_OK)
        die(db, "close");
    printf("%zu %zu %.4f %.3f\n", n, batches, t, n ? t * 1e6 / (double)n : 0.0);
    for (size_t i = 0; i < n; i++)
        free(docs[i]);
    free(docs);
    free(rounds);
    return 0;
}
