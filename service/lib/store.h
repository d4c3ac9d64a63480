/*
 * The service's storage: jobs, their metric rows, experiments, datasets and
 * the P* cache in one SQLite file, behind a typed API. No SQL leaves
 * service/lib/store/ (its statements are one table, in store_int.h); the
 * schema is migrations/NNNN_slug.sql, embedded at build time.
 *
 * Errors, as everywhere on service/lib (docs/architecture.md, "Errors"):
 * 0 on success, negative on failure (NULL for a constructor), and a
 * sentence in a caller-owned error passed last: char *err, size_t errlen,
 * or here struct store_err, which also carries a STORE_E* code because
 * callers branch on it.
 */
#ifndef ECOPT_STORE_H
#define ECOPT_STORE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ecopt/run.h"

/*
 * 0 is success and negative is failure; codes are append-only. A few calls
 * say more with a positive value on success: STORE_EXISTING, the count of
 * store_recover, the 1 ("found") of store_metrics_last.
 */
#define STORE_ERRORS(X)                                                     \
    X(STORE_EINVAL, -1, "invalid argument")                                 \
    X(STORE_ENOMEM, -2, "out of memory")                                    \
    X(STORE_ENOTFOUND, -3, "not found")                                     \
    X(STORE_ECONFLICT, -4, "idempotency key reused with another request")   \
    X(STORE_ESTATE, -5, "not allowed in the job's current state")           \
    X(STORE_EBUSY, -6, "database busy")                                     \
    X(STORE_EFULL, -7, "database or disk full")                             \
    X(STORE_EIO, -8, "database input/output error")                         \
    X(STORE_ECORRUPT, -9, "database file corrupt or not a database")        \
    X(STORE_EVERSION, -10, "database schema version not this program's")    \
    X(STORE_EREADONLY, -11, "write through a read-only connection")         \
    X(STORE_ESQL, -12, "unexpected SQLite failure")

enum {
#define STORE_ERR_ENUM(name, value, text) name = value,
    STORE_ERRORS(STORE_ERR_ENUM)
#undef STORE_ERR_ENUM
};

#define STORE_EXISTING 1 /* store_job_create: the idempotent replay */

/* The name ("STORE_ENOTFOUND") and sentence of a code; "unknown error". */
const char *store_err_name(int code);
const char *store_strerror(int code);

/*
 * What went wrong, as a sentence naming the call, the object and SQLite's
 * own message ("append metrics to j_0123456789abcdef: database or disk is
 * full"). sqlite_code is SQLite's extended result code, 0 when the failure
 * is not SQLite's. Callers own it, usually on the stack; may be NULL.
 */
struct store_err {
    int code;
    int sqlite_code;
    char msg[384];
};

/*
 * Connections. A struct store is one SQLite connection opened without
 * SQLite's per-connection mutex, so each is used by one thread at a time.
 * The service opens one writer with store_open (its writer thread makes
 * every change) and one reader per request thread with store_open_reader;
 * WAL lets readers run while the writer commits, each on a snapshot.
 *
 * store_open creates the file if needed, sets WAL mode, synchronous=NORMAL,
 * foreign keys and a 5 s busy timeout, and applies the embedded migrations
 * newer than the file's PRAGMA user_version, each in its own transaction.
 * A file whose version is newer than the newest migration is refused with
 * STORE_EVERSION and a message naming both versions.
 *
 * store_open_reader needs a database store_open has brought up to date
 * (STORE_EVERSION otherwise) and refuses every write (STORE_EREADONLY).
 *
 * Both return NULL with err filled on failure. Never carry a store across
 * fork(): open another in the child.
 */
struct store;

struct store *store_open(const char *path, struct store_err *err);
struct store *store_open_reader(const char *path, struct store_err *err);
/*
 * A generation: a number that grows after every commit of the writers it
 * is given to (never before the commit is visible). What was read from
 * their database under generation g still holds while the counter reads
 * g. The caller owns it (e.g. one per database, beside its connections),
 * initializes it with STORE_GEN_INIT or store_gen_init (it starts at 1),
 * and keeps it alive as long as a store it was given to.
 */
struct store_gen {
    _Atomic uint64_t value;     /* read it with store_gen_read */
};
#define STORE_GEN_INIT {1}
void store_gen_init(struct store_gen *gen);
uint64_t store_gen_read(const struct store_gen *gen);
/*
 * Counts st's commits in gen from now on; NULL counts them in the
 * process's own generation again, which every store counts in until it
 * is given one. Call it before st is shared with another thread. On a
 * reader it has no effect: readers do not commit.
 */
void store_set_generation(struct store *st, struct store_gen *gen);
/* The process's own generation: the commits of the stores given none. */
uint64_t store_generation(void);
void store_close(struct store *st); /* NULL is a no-op */

/* The schema version the program carries (the newest migration). */
int store_schema_version(void);

/* A cheap read of the database, for /readyz. 0 or < 0. */
int store_ping(struct store *st, struct store_err *err);

/* ---- Jobs ------------------------------------------------------------ */

/*
 * Job ids are "j_" followed by 16 lowercase hex digits from a generator
 * seeded from /dev/urandom, so they tell neither how many jobs exist nor
 * in which order they came. They are not secrets: every call that takes
 * an owner checks it. Experiment ids are "x_" and 16 hex digits.
 */
#define STORE_ID_LEN 18

enum store_job_state {
    STORE_JOB_QUEUED = 0,
    STORE_JOB_RUNNING,
    STORE_JOB_SUCCEEDED,
    STORE_JOB_FAILED,
    STORE_JOB_CANCELLED,
    STORE_JOB_INTERRUPTED, /* the service stopped while the job ran */
    STORE_JOB_STATE_COUNT
};

/* "queued", ...; NULL when out of range. from_name: 0 or STORE_EINVAL. */
const char *store_job_state_name(enum store_job_state s);
int store_job_state_from_name(const char *name, enum store_job_state *out);
/* Whether s is one a job never leaves (succeeded .. interrupted). */
int store_job_state_is_final(enum store_job_state s);

/*
 * Why a job ended, as the word of its stop_reason: the column, the API's
 * field and filter and the dashboard's menu all come from this table.
 * X(ID, NAME, STOP, MEANING)
 *   STOP     the coordinator's final "stop" (ec_stop_name) it stands for,
 *            or NULL when the service decides it
 *   MEANING  a sentence, for the API's vocabulary
 */
#define STORE_STOP_REASONS(X)                                                 \
    X(STORE_STOP_TARGET_REACHED, "target_reached", "target",                  \
      "succeeded: the relative gap reached the target")                       \
    X(STORE_STOP_MAX_ROUNDS, "max_rounds", "max_rounds",                      \
      "the round budget ran out (see the state)")                             \
    X(STORE_STOP_MAX_SECONDS, "max_seconds", "max_seconds",                   \
      "the time budget ran out (see the state)")                              \
    X(STORE_STOP_DIVERGED, "diverged", "diverged",                            \
      "the objective diverged")                                               \
    X(STORE_STOP_CANCELLED, "cancelled", "cancelled",                         \
      "cancelled by its owner or an admin")                                   \
    X(STORE_STOP_WORKER_FAILED, "worker_failed", "failed",                    \
      "a worker died, hung or broke the protocol")                            \
    X(STORE_STOP_START_FAILED, "start_failed", "start_failed",                \
      "the coordinator could not start the job: bad data, no memory")         \
    X(STORE_STOP_COORDINATOR_DIED, "coordinator_died", NULL,                  \
      "the coordinator ended without a final report")                         \
    X(STORE_STOP_INTERRUPTED, "interrupted", NULL,                            \
      "the service stopped under it")                                         \
    X(STORE_STOP_FAILED, "failed", NULL, "any other failure")                \
    X(STORE_STOP_QUOTA, "quota", NULL,                                        \
      "its token's metric rows reached their quota (quota_metric_rows)")

enum store_stop {
#define STORE_STOP_ENUM(id, name, stop, meaning) id,
    STORE_STOP_REASONS(STORE_STOP_ENUM)
#undef STORE_STOP_ENUM
    STORE_STOP_COUNT
};

/* "target_reached", ...; NULL when out of range. */
const char *store_stop_name(enum store_stop s);
const char *store_stop_meaning(enum store_stop s);
/* The reason a coordinator's final "stop" stands for: failed for one not
 * in the table (or NULL). */
enum store_stop store_stop_of_final(const char *stop);
/* 0 and *out, or STORE_EINVAL for a name not in the table. */
int store_stop_from_name(const char *name, enum store_stop *out);
/* "target_reached, max_rounds, ...": every name, joined by ", ". */
const char *store_stop_names(char *buf, size_t len);

/*
 * A new job. Strings are borrowed for the call. JSON documents are stored
 * as the caller's text: spec is the canonical form (jobspec_to_json),
 * labels an object of string values (NULL: {}). owner is the token's name.
 *
 * With idempotency_key, request_hash is required: any text that differs
 * when the request differs (e.g. hex SHA-256 of the body). The store keeps
 * both, unique per owner and key.
 */
struct store_job_new {
    const char *owner;
    const char *spec;
    const char *name;            /* NULL or "": none */
    const char *labels;          /* JSON object, NULL: {} */
    const char *algorithm;       /* "eclk", ...: the list filters by it */
    const char *compressor;      /* "topk", ... */
    const char *dataset;         /* as given in the spec */
    const char *dataset_sha256;  /* its version at submit; NULL: unknown */
    const char *backend;         /* "process", ... */
    uint32_t workers;            /* >= 1; counted against the limits */
    const char *idempotency_key; /* NULL: none */
    const char *request_hash;    /* required with idempotency_key */
    const char *retry_of;        /* the job it retries; NULL: none */
};

/*
 * What an ended job's processes used (migrations/0007): CPU seconds, user
 * and system, of the coordinator and the workers it reaped; the largest
 * peak resident set of one of them; the sum of each one's peak (an upper
 * bound: pages the workers share copy-on-write count in each). NaN or -1
 * when unknown.
 */
struct store_job_usage {
    double cpu_seconds;
    int64_t max_rss_bytes;
    int64_t rss_sum_bytes;
};

/*
 * A stored job. Strings are owned (store_job_clear frees them); those that
 * may be SQL NULL are NULL. Times are unix milliseconds, 0 when not yet.
 */
struct store_job {
    char id[STORE_ID_LEN + 1];
    char *owner;
    enum store_job_state state;
    char *reason;          /* why it ended; NULL while queued or running */
    char *spec;
    char *name;            /* "" when none */
    char *labels;          /* JSON object */
    char *algorithm;
    char *compressor;
    char *dataset;
    char *backend;
    uint32_t workers;
    int64_t created_at, started_at, finished_at;
    int64_t pid;           /* the coordinator's process id, 0 before */
    char *problem;         /* JSON of the start record, NULL before */
    char *params;          /* JSON of the start record, NULL before */
    int64_t round;         /* progress: last round reported, -1 before */
    double rel_gap;        /* NAN when unknown or not finite */
    double bits_up;        /* NAN when unknown */
    int64_t updated_at;    /* when the progress last moved, 0 before */
    char *idempotency_key; /* NULL when none */
    char experiment_id[STORE_ID_LEN + 1]; /* "" when none */
    char *stop_reason;     /* why it ended, a word; NULL while not ended */
    char dataset_sha256[65]; /* the version it runs on; "" when unknown */
    struct store_job_usage usage; /* once ended, what it used */
    char *outcome;         /* once ended, a word of format/outcome.h's
                              table; NULL while not ended */
    char retry_of[STORE_ID_LEN + 1]; /* the job it retries; "" when none */
    char *eclk;            /* JSON of ECLK's end record (api/report-format.md,
                              "final"); NULL when none */
};

void store_job_clear(struct store_job *job); /* frees strings, zeroes it */
void store_jobs_free(struct store_job *jobs, size_t n); /* NULL is a no-op */

/*
 * Whether in's idempotency key is known for its owner: 0 no (or no key),
 * 1 with this very request (a replay), STORE_ECONFLICT with another.
 */
int store_job_idem_known(struct store *st, const struct store_job_new *in,
                         struct store_err *err);
/*
 * Inserts a queued job and returns it in *out (which the caller clears).
 * Returns 0 for a new job; STORE_EXISTING with the stored job when the same
 * owner already used idempotency_key with the same request_hash;
 * STORE_ECONFLICT when the key was used with another hash.
 */
int store_job_create(struct store *st, const struct store_job_new *in,
                     struct store_job *out, struct store_err *err);

/*
 * owner NULL means an administrator who sees every job; otherwise another
 * owner's job is STORE_ENOTFOUND, exactly like a job that does not exist.
 */
int store_job_get(struct store *st, const char *id, const char *owner,
                  struct store_job *out, struct store_err *err);

/*
 * The fields a job list can be filtered on beyond the plain filters below,
 * parameters as submitted and results so far (docs/api.md, "Filters"): the
 * query parameter NAME (equal), NAME_ne, NAME_lt, NAME_le, NAME_gt,
 * NAME_ge (numbers only, and ne for text too). A job without the field
 * (a k on a compressor that takes none, a gap before the first row) never
 * matches.
 * X(ID, NAME, KIND, SQL, MEANING)
 *   KIND  NUMBER, TEXT or BOOL (true/false)
 *   SQL   its value in the row j of jobs
 */
#define STORE_JOB_FIELDS(X)                                                   \
    X(STORE_F_K, "k", NUMBER, "json_extract(j.spec, '$.compressor.k')",       \
      "the compressor's k, as submitted")                                     \
    X(STORE_F_K_FRAC, "k_frac", NUMBER,                                        \
      "json_extract(j.spec, '$.compressor.k_frac')", "the compressor's k_frac") \
    X(STORE_F_S, "s", NUMBER, "json_extract(j.spec, '$.compressor.s')",       \
      "the compressor's s")                                                   \
    X(STORE_F_STEP_MULTIPLIER, "step_multiplier", NUMBER,                     \
      "json_extract(j.spec, '$.step_multiplier')",                            \
      "the multiplier of the theory step")                                    \
    X(STORE_F_STEP_SIZE, "step_size", NUMBER,                                 \
      "json_extract(j.spec, '$.step_size')", "an explicit step size")         \
    X(STORE_F_WORKERS, "workers", NUMBER, "j.workers", "the workers n")       \
    X(STORE_F_PROCS, "procs", NUMBER, "json_extract(j.spec, '$.procs')",      \
      "the worker processes asked for")                                       \
    X(STORE_F_BATCH, "batch", NUMBER, "json_extract(j.spec, '$.batch')",      \
      "the minibatch")                                                        \
    X(STORE_F_LAMBDA1, "lambda1", NUMBER, "json_extract(j.spec, '$.lambda1')", \
      "the L1 weight")                                                        \
    X(STORE_F_LAMBDA2, "lambda2", NUMBER, "json_extract(j.spec, '$.lambda2')", \
      "the L2 weight, when given as such")                                    \
    X(STORE_F_LAMBDA2_REL, "lambda2_rel", NUMBER,                             \
      "json_extract(j.spec, '$.lambda2_rel')", "the L2 weight relative to L") \
    X(STORE_F_P, "p", NUMBER, "json_extract(j.spec, '$.p')",                  \
      "the refresh probability, when given")                                  \
    X(STORE_F_TARGET, "target", NUMBER, "json_extract(j.spec, '$.target')",   \
      "the target relative gap")                                              \
    X(STORE_F_MAX_ROUNDS, "max_rounds", NUMBER,                               \
      "json_extract(j.spec, '$.max_rounds')", "the round budget")             \
    X(STORE_F_SEED, "seed", NUMBER, "json_extract(j.spec, '$.seed')",         \
      "the random seed")                                                      \
    X(STORE_F_COMPRESSOR, "compressor", TEXT, "j.compressor",                 \
      "the compressor's type")                                                \
    X(STORE_F_LOSS, "loss", TEXT, "json_extract(j.spec, '$.loss')",           \
      "the loss")                                                             \
    X(STORE_F_BACKEND, "backend", TEXT, "j.backend", "the backend")           \
    X(STORE_F_NAME, "name", TEXT, "j.name", "the job's name")                 \
    X(STORE_F_EXPERIMENT, "experiment", TEXT, "j.experiment_id",              \
      "the experiment's id")                                                  \
    X(STORE_F_REACHED, "reached", BOOL,                                       \
      "coalesce(j.stop_reason = 'target_reached', 0)",                        \
      "whether it ended at its target")                                       \
    X(STORE_F_REL_GAP, "rel_gap", NUMBER, "j.rel_gap",                        \
      "the relative gap of its latest row")                                   \
    X(STORE_F_ROUNDS, "rounds", NUMBER, "j.round",                            \
      "the round of its latest row")                                          \
    X(STORE_F_BITS_UP, "bits_up", NUMBER, "j.bits_up",                        \
      "the bits up per worker of its latest row")                             \
    X(STORE_F_CPU_SECONDS, "cpu_seconds", NUMBER, "j.cpu_seconds",            \
      "the CPU seconds it used, once ended")                                  \
    X(STORE_F_MAX_RSS_BYTES, "max_rss_bytes", NUMBER, "j.max_rss_bytes",      \
      "the largest peak resident set of its processes, once ended")           \
    X(STORE_F_CREATED_AT, "created_at", NUMBER, "j.created_at",               \
      "when it was submitted, unix milliseconds")

enum store_job_field {
#define STORE_FIELD_ENUM(id, name, kind, sql, meaning) id,
    STORE_JOB_FIELDS(STORE_FIELD_ENUM)
#undef STORE_FIELD_ENUM
    STORE_F_COUNT
};

enum store_field_kind { STORE_FIELD_NUMBER, STORE_FIELD_TEXT, STORE_FIELD_BOOL };

/* The comparisons, by the suffix of the query parameter's name. */
#define STORE_FILTER_OPS(X)                                                   \
    X(STORE_OP_EQ, "", "=")                                                   \
    X(STORE_OP_NE, "_ne", "<>")                                               \
    X(STORE_OP_LT, "_lt", "<")                                                \
    X(STORE_OP_LE, "_le", "<=")                                               \
    X(STORE_OP_GT, "_gt", ">")                                                \
    X(STORE_OP_GE, "_ge", ">=")

enum store_filter_op {
#define STORE_OP_ENUM(id, suffix, sql) id,
    STORE_FILTER_OPS(STORE_OP_ENUM)
#undef STORE_OP_ENUM
    STORE_OP_COUNT
};

/* One condition: field op value. text is borrowed (TEXT fields). */
struct store_job_cond {
    enum store_job_field field;
    enum store_filter_op op;
    double number;              /* NUMBER; BOOL: 0 or 1 */
    const char *text;
};

const char *store_job_field_name(enum store_job_field f);   /* NULL out of range */
const char *store_job_field_meaning(enum store_job_field f);
enum store_field_kind store_job_field_kind(enum store_job_field f);
const char *store_filter_op_suffix(enum store_filter_op op);

/* Longest value a condition takes, in bytes. */
#define STORE_COND_VALUE_MAX 256

/*
 * Reads one query parameter key=value as a condition: 0 and *out (its
 * text borrows value); 1 when key names no field (nor field and suffix),
 * *out untouched; -1 with a sentence in why naming key when the value or
 * the comparison does not suit the field (a number that is not one, a
 * comparison of text or of a boolean, an empty or overlong value).
 */
int store_job_cond_parse(const char *key, const char *value, struct store_job_cond *out,
                         char *why, size_t whylen);

/* At most how many jobs a filtered page looks at (see store_job_list). */
#define STORE_JOB_SCAN 10000

/* Filters of store_job_list; NULL (or -1 for state) matches everything. */
struct store_job_filter {
    const char *owner;       /* NULL: every owner (admin) */
    int state;               /* an enum store_job_state, or -1 */
    const char *algorithm;
    const char *dataset;
    const char *label_key;   /* jobs with this label ... */
    const char *label_value; /* ... with this value; NULL: any value */
    const char *stop_reason; /* ended for this reason; NULL: any */
    const struct store_job_cond *conds; /* all of them hold, each field */
    size_t nconds;                      /* and op at most once */
};

#define STORE_CURSOR_SIZE 24

/*
 * One page of jobs, newest first. cursor is NULL or "" for the first page,
 * then the next_cursor of the previous page: it is opaque text and a
 * position in the list, not an offset, so jobs created between pages never
 * shift it and every job that existed at the first page is seen once.
 * next_cursor is "" after the last page. With conds, a page looks at no
 * more than STORE_JOB_SCAN jobs (the cost of a page is bounded however
 * few jobs match): it may hold fewer than limit jobs, even none, with a
 * next_cursor to go on from. Returns 0 with *out an array of
 * *n <= limit jobs (store_jobs_free), STORE_EINVAL for a cursor the store
 * did not issue or limit 0. The caller caps limit.
 */
int store_job_list(struct store *st, const struct store_job_filter *filter,
                   const char *cursor, size_t limit, struct store_job **out,
                   size_t *n, char next_cursor[STORE_CURSOR_SIZE],
                   struct store_err *err);

/*
 * queued -> running, when the scheduler has spawned the coordinator: pid,
 * started_at now. problem and params (the start record's JSON) may be NULL
 * then and given by a second call when the record arrives; a running job
 * accepts that call again, keeping what is not given. STORE_ESTATE when the
 * job has finished (e.g. it was cancelled meanwhile).
 */
int store_job_set_running(struct store *st, const char *id, int64_t pid,
                          const char *problem_json, const char *params_json,
                          struct store_err *err);

/* Progress of a running job (store_metrics_append also moves it). */
int store_job_progress(struct store *st, const char *id, uint64_t round,
                       double rel_gap, double bits_up, struct store_err *err);

/*
 * queued or running -> a final state, with a sentence saying why. The
 * first finish wins: a finished job gives STORE_ESTATE, which is how a
 * cancel that races the job's own end learns it came second.
 */
int store_job_finish(struct store *st, const char *id,
                     enum store_job_state state, const char *reason,
                     struct store_err *err);
/* The same with why it ended as a word (stop_reason of store_job; NULL:
   what the state says: cancelled, interrupted, failed, or none). */
int store_job_end(struct store *st, const char *id, enum store_job_state state,
                  const char *stop_reason, const char *reason,
                  struct store_err *err);
/* Keeps ECLK's end record, a JSON object, with the job. */
int store_job_set_eclk(struct store *st, const char *id, const char *eclk,
                       struct store_err *err);
/* The same with what its processes used (usage NULL: nothing known).
   Each of these also records the job's outcome (format/outcome.h) from
   the stop reason and the relative gap of its last stored row. */
int store_job_end_usage(struct store *st, const char *id, enum store_job_state state,
                        const char *stop_reason, const char *reason,
                        const struct store_job_usage *usage, struct store_err *err);

/*
 * Deletes a finished job with its metrics and labels. STORE_ENOTFOUND as
 * for store_job_get (owner NULL: admin); STORE_ESTATE when not finished.
 */
int store_job_delete(struct store *st, const char *id, const char *owner,
                     struct store_err *err);

/*
 * For the scheduler: the oldest queued job of every owner that has one,
 * oldest first. One row per owner, so that no owner's queue, however
 * long, hides another owner's job.
 */
int store_jobs_queued_heads(struct store *st, struct store_job **out, size_t *n,
                            struct store_err *err);

/*
 * Every queued job, oldest first, as id and owner (what the queue's order
 * needs): *out an array of *n (free() it). Bounded by the limits on
 * queued jobs per token.
 */
struct store_queued {
    char id[STORE_ID_LEN + 1];
    char owner[64];
};

int store_jobs_queue(struct store *st, struct store_queued **out, size_t *n,
                     struct store_err *err);

/* What the limits count. The per-owner fields are 0 when owner is NULL. */
struct store_counts {
    int64_t running;          /* jobs running, all owners */
    int64_t running_workers;  /* their workers, summed */
    int64_t queued;           /* jobs queued, all owners */
    int64_t owner_running;
    int64_t owner_queued;
};

int store_counts(struct store *st, const char *owner,
                 struct store_counts *out, struct store_err *err);
/*
 * A job's name and labels (a JSON object) after submit, with its spec
 * text that holds them, for the job id that owner (NULL: anyone's) may
 * see, in any state. 0, or STORE_ENOTFOUND and the like.
 */
int store_job_set_labels(struct store *st, const char *id, const char *owner,
                         const char *name, const char *labels_json, const char *spec_json,
                         struct store_err *err);

/* How many jobs are in each state, all owners, by enum store_job_state. */
int store_job_state_counts(struct store *st, int64_t out[STORE_JOB_STATE_COUNT],
                           struct store_err *err);

/*
 * At startup, before the scheduler runs: every running job becomes
 * interrupted with reason (its coordinator died with the old service).
 * Queued jobs stay queued. Returns how many jobs changed, or < 0.
 */
int store_recover(struct store *st, const char *reason,
                  struct store_err *err);

/* ---- Metrics --------------------------------------------------------- */

/*
 * Appends n rows of a job in one transaction (BEGIN IMMEDIATE), so the
 * writer's batch costs one commit. A round already stored is replaced,
 * which makes a retried batch harmless. Non-finite numbers are stored as
 * NULL. The job's progress moves to the last row in the same transaction,
 * so readers never see progress ahead of or behind the rows.
 *
 * Durability: when this returns 0 the rows are in the WAL file. With
 * synchronous=NORMAL that survives the process being killed (SIGKILL,
 * a crash); only a power loss or OS crash may lose the last commits, and
 * even then the database stays consistent.
 */
int store_metrics_append(struct store *st, const char *id,
                         const ec_metric *rows, size_t n,
                         struct store_err *err);
/*
 * The same, each row with its JSON document (docs[i] NULL: none), which
 * the _docs query gives back so that pages need no formatting. A row with
 * a document is stored as its round and the document alone: its numbers
 * (rows[i] but the round is not read) are read back from the document
 * (describe_metric_doc_read), so each is stored once.
 */
int store_metrics_append_docs(struct store *st, const char *id,
                              const ec_metric *rows, char *const *docs,
                              size_t n, struct store_err *err);

/* Where a page of metric rows ended. */
struct store_metrics_page {
    size_t count;       /* rows written to the caller's array */
    int64_t next_after; /* the after of the next page */
    int more;           /* rows after next_after existed when read */
};

/*
 * Rows with round > after (-1: from the first), in round order, at most
 * limit of them into rows[limit]. every >= 1 keeps one row in every: the
 * 1st, (every+1)th, ... counted from the first row of the job's rows after
 * `after`, plus the job's last row, so a downsampled curve has its both
 * ends. Pages chained by next_after give the same rows as one long page.
 * next_after is greater than after whenever a row was found; with no row
 * it is after itself (poll again later). STORE_ENOTFOUND for an unknown
 * job, STORE_EINVAL for limit or every 0. Stored NULLs read back as NAN.
 */
int store_metrics_query(struct store *st, const char *id, int64_t after,
                        size_t limit, size_t every, ec_metric *rows,
                        struct store_metrics_page *page,
                        struct store_err *err);
/* The same, and docs[i] each row's stored document (malloc'd, the caller
   frees them) or NULL where the row has none. Where there is a document,
   rows[i] has its round and NaN for the numbers: they are in the document,
   and are read from it only by the query without docs. */
int store_metrics_query_docs(struct store *st, const char *id, int64_t after,
                             size_t limit, size_t every, ec_metric *rows,
                             char **docs, struct store_metrics_page *page,
                             struct store_err *err);

/* How many rows have round > after, to choose every for a max_points. */
int store_metrics_count(struct store *st, const char *id, int64_t after,
                        int64_t *count, struct store_err *err);
/* How many rows the jobs of owner have together (its quota's measure). */
int store_metrics_count_owner(struct store *st, const char *owner, int64_t *count,
                              struct store_err *err);

/* The largest relative gap of the job's rows (its worst excursion; NaN
   when it has none): 0 or < 0. */
int store_metrics_peak(struct store *st, const char *id, double *peak,
                       struct store_err *err);

/* The job's latest row: 1 when found, 0 when it has none yet, or < 0. */
int store_metrics_last(struct store *st, const char *id, ec_metric *row,
                       struct store_err *err);
/* The same, with the row's stored document (*doc malloc'd, or NULL);
   as with the _docs query, a row given with its document has NaN for its
   numbers. */
int store_metrics_last_doc(struct store *st, const char *id, ec_metric *row,
                           char **doc, struct store_err *err);

/* ---- The P* cache ---------------------------------------------------- */

/*
 * P* depends on the data and the objective only, so it is keyed by the
 * dataset's SHA-256 and the loss and the lambdas. The lambdas are stored as
 * their "%.17g" text, which is exact: equal doubles give equal keys (0 and
 * -0 alike) and different doubles different keys.
 */
struct store_pstar_key {
    const char *dataset_sha256; /* 64 hex digits */
    const char *loss;           /* "logistic", ... */
    double lambda1, lambda2;    /* finite */
};

#define STORE_METHOD_SIZE 64

struct store_pstar {
    double lambda1, lambda2;        /* the key's, set by list only */
    double p_star;                  /* finite */
    char method[STORE_METHOD_SIZE]; /* how it was found, e.g. "fista" */
    double bound;                   /* a bound on P* - p_star; NAN: none */
    int64_t computed_at;            /* set by put */
};

int store_pstar_get(struct store *st, const struct store_pstar_key *key,
                    struct store_pstar *out, struct store_err *err);
/* Every entry for one dataset and loss, newest first, at most max: an
   array the caller frees, possibly empty. */
int store_pstar_list(struct store *st, const char *dataset_sha256,
                     const char *loss, size_t max, struct store_pstar **out,
                     size_t *n, struct store_err *err);
/* Inserts, never replaces: an entry already there with the same P*
   (within either bound) is 0, with another P* STORE_ECONFLICT and a
   message naming both; the entry is kept. */
int store_pstar_put(struct store *st, const struct store_pstar_key *key,
                    const struct store_pstar *val, struct store_err *err);

/*
 * lambda_max(A^T A) of a dataset version in its file's row order, keyed
 * by the SHA-256 alone: it does not depend on the loss or the lambdas.
 */
struct store_lmax {
    double value;                   /* finite, >= 0 */
    char method[STORE_METHOD_SIZE]; /* how it was found: "lanczos" */
    uint32_t steps;                 /* its steps (matrix products), >= 1 */
    int64_t computed_at;            /* set by put */
};

/* STORE_ENOTFOUND when the version has none yet. */
int store_lmax_get(struct store *st, const char *dataset_sha256,
                   struct store_lmax *out, struct store_err *err);
/* Inserts, never replaces: a value already there is kept (the same data
   in the same order gives the same value, so either is right). */
int store_lmax_put(struct store *st, const char *dataset_sha256,
                   const struct store_lmax *val, struct store_err *err);

/* ---- Experiments ----------------------------------------------------- */

struct store_experiment_new {
    const char *owner;
    const char *name; /* NULL or "": none */
    const char *spec; /* the experiment's JSON as the caller stores it */
};

struct store_experiment {
    char id[STORE_ID_LEN + 1];
    char *owner;
    char *name;
    char *spec;
    int64_t created_at;
    int64_t jobs;          /* its jobs' count (store_experiment_list only) */
};

void store_experiment_clear(struct store_experiment *x);

/*
 * Creates an experiment and its njobs jobs in one transaction: all or
 * nothing. The jobs belong to the experiment's owner (their owner field is
 * ignored) and take no idempotency key (STORE_EINVAL). jobs_out, when not
 * NULL, receives the njobs jobs created (store_job_clear each).
 */
int store_experiment_create(struct store *st,
                            const struct store_experiment_new *in,
                            const struct store_job_new *jobs, size_t njobs,
                            struct store_experiment *out,
                            struct store_job *jobs_out,
                            struct store_err *err);

/* Ownership as for store_job_get. */
int store_experiment_get(struct store *st, const char *id, const char *owner,
                         struct store_experiment *out, struct store_err *err);

/*
 * One page of experiments that owner (NULL: anyone's) may see, newest
 * first, with cursors as for store_job_list. Free each with
 * store_experiment_clear and the array with free, or all with
 * store_experiments_free.
 */
int store_experiment_list(struct store *st, const char *owner, const char *cursor,
                          size_t limit, struct store_experiment **out, size_t *n,
                          char next_cursor[STORE_CURSOR_SIZE], struct store_err *err);
void store_experiments_free(struct store_experiment *xs, size_t n);

/* The experiment's jobs in creation order (store_jobs_free). */
int store_experiment_list_jobs(struct store *st, const char *id,
                               const char *owner, struct store_job **out,
                               size_t *n, struct store_err *err);

/* ---- Datasets -------------------------------------------------------- */

/* The stats of a dataset file in the data directory. */
struct store_dataset {
    char *name;
    char sha256[65];
    int64_t rows, d, nnz;
    char *labels;        /* JSON array [neg, pos] */
    int64_t bytes;       /* file size */
    int64_t uploaded_at; /* 0 on put: now */
    char *owner;         /* the token that uploaded it; NULL: the admins' */
    int shared;          /* 1: every token sees it; 0: its owner and the
                            admins (a NULL owner's is seen by all) */
};

void store_dataset_clear(struct store_dataset *ds);
void store_datasets_free(struct store_dataset *ds, size_t n);

/* Inserts or replaces by name. */
int store_dataset_put(struct store *st, const struct store_dataset *ds,
                      struct store_err *err);
int store_dataset_get(struct store *st, const char *name,
                      struct store_dataset *out, struct store_err *err);
/* Every dataset, by name. */
int store_dataset_list(struct store *st, struct store_dataset **out,
                       size_t *n, struct store_err *err);
int store_dataset_delete(struct store *st, const char *name,
                         struct store_err *err);
/* How many names owner holds and their bytes together. */
int store_dataset_usage(struct store *st, const char *owner, int64_t *names,
                        int64_t *bytes, struct store_err *err);
/* How many queued or running jobs name the dataset. */
int store_dataset_jobs(struct store *st, const char *name, int64_t *n,
                       struct store_err *err);
/*
 * The versions (SHA-256) something still refers to: a name's row, or a
 * queued or running job's recorded version; *out is an array of n (the
 * caller frees it).
 */
int store_versions_in_use(struct store *st, char (**out)[65], size_t *n,
                          struct store_err *err);

#endif
