/* The store's jobs and experiments. */
#include "store_int.h"

/* ---- Jobs ------------------------------------------------------------ */

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
    free(job->stop_reason);
    free(job->outcome);
    free(job->eclk);
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
        return store__set_err(err, STORE_ECORRUPT, 0, "job %s has state \"%s\"",
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
    col_copy(s, JC_DATASET_SHA256, out->dataset_sha256, sizeof out->dataset_sha256);
    col_copy(s, JC_EXPERIMENT_ID, out->experiment_id,
             sizeof out->experiment_id);
    out->stop_reason = col_dup(s, JC_STOP_REASON, &nomem);
    out->usage.cpu_seconds = col_real(s, JC_CPU_SECONDS);
    out->usage.max_rss_bytes = col_int_or(s, JC_MAX_RSS_BYTES, -1);
    out->usage.rss_sum_bytes = col_int_or(s, JC_RSS_SUM_BYTES, -1);
    out->outcome = col_dup(s, JC_OUTCOME, &nomem);
    col_copy(s, JC_RETRY_OF, out->retry_of, sizeof out->retry_of);
    out->eclk = col_dup(s, JC_ECLK, &nomem);
    if (nomem) {
        store_job_clear(out);
        return store__set_err(err, STORE_ENOMEM, 0, "read job: out of memory");
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
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "no job with seq %" PRId64,
                            seq);
    else
        rc = store__sql_fail(st->db, err, rc, "read a job");
    done(&u);
    return rc;
}

/* The internal key of a job by its public id. */
int store__job_seq(struct store *st, const char *id, int64_t *seq,
                   struct store_err *err)
{
    struct use u = use(st, SQL_JOB_SEQ);
    int rc;

    if (!id)
        return store__set_err(err, STORE_EINVAL, 0, "no job id");
    bind_text(&u, 1, id);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *seq = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "no job %s", id);
    } else {
        rc = store__sql_fail(st->db, err, rc, "find a job");
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
        rc = store__set_err(err, STORE_ESTATE, 0, "%s %s: the job is %s", what, id,
                            (const char *)sqlite3_column_text(u.s, 0));
    else if (rc == SQLITE_DONE)
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "%s %s: no such job", what, id);
    else
        rc = store__sql_fail(st->db, err, rc, what);
    done(&u);
    return rc;
}

static int check_job_new(const struct store_job_new *in,
                         struct store_err *err)
{
    static const char *const what = "create a job";

    if (!in)
        return store__set_err(err, STORE_EINVAL, 0, "%s: no job", what);
    if (!in->owner || !*in->owner)
        return store__set_err(err, STORE_EINVAL, 0, "%s: no owner", what);
    if (!in->spec || !in->algorithm || !in->compressor || !in->dataset ||
        !in->backend)
        return store__set_err(err, STORE_EINVAL, 0,
                              "%s: spec, algorithm, compressor, dataset and "
                              "backend are all required", what);
    if (in->workers < 1)
        return store__set_err(err, STORE_EINVAL, 0, "%s: workers must be >= 1",
                              what);
    if (in->idempotency_key &&
        (!*in->idempotency_key || !in->request_hash || !*in->request_hash))
        return store__set_err(err, STORE_EINVAL, 0,
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

        store__new_id(st, 'j', id);
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
        bind_int(&u, 11, store__now_ms());
        bind_text(&u, 12, in->idempotency_key);
        bind_text(&u, 13, in->idempotency_key ? in->request_hash : NULL);
        bind_text(&u, 14, experiment_id);
        bind_text(&u, 15, in->dataset_sha256 && *in->dataset_sha256 ? in->dataset_sha256
                                                                   : NULL);
        bind_text(&u, 16, in->retry_of);
        rc = step(&u);
        if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT_UNIQUE)
            store__sql_fail(st->db, err, rc, "create a job");
        done(&u);
    }
    if (rc != SQLITE_DONE)
        return rc == SQLITE_CONSTRAINT_UNIQUE
                   ? store__set_err(err, STORE_ESQL, rc, "create a job: no free id")
                   : store__code_of_sqlite(rc);
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
                 : store__set_err(err, STORE_ECONFLICT, 0,
                                  "idempotency key \"%.64s\" was used for another "
                                  "request", in->idempotency_key);
    } else if (rc == SQLITE_DONE) {
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "look up an idempotency key");
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
    if ((rc = store__tx_begin(st, "create a job", err)) < 0)
        return rc;
    if (in->idempotency_key)
        rc = found = idem_lookup(st, in, &seq, err);
    if (rc >= 0 && !found)
        rc = job_insert(st, in, in->owner, NULL, &seq, err);
    if (rc >= 0)
        rc = job_get_seq(st, seq, out, err);
    rc = store__tx_end(st, rc, "create a job", err);
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
        return store__set_err(err, STORE_EINVAL, 0, "no job id");
    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = job_from_row(u.s, out, err);
    else if (rc == SQLITE_DONE)
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "no job %s", id);
    else
        rc = store__sql_fail(st->db, err, rc, "read a job");
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
                rc = store__set_err(err, STORE_ENOMEM, 0, "%s: out of memory", what);
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
             ? 0 : store__sql_fail(st->db, err, rc, what);
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
        return store__set_err(err, STORE_EINVAL, 0, "list jobs: limit must be >= 1");
    if (f->state < -1 || f->state >= STORE_JOB_STATE_COUNT)
        return store__set_err(err, STORE_EINVAL, 0, "list jobs: no state %d",
                              f->state);
    if (f->label_value && !f->label_key)
        return store__set_err(err, STORE_EINVAL, 0,
                              "list jobs: a label value needs a label key");
    if (cursor && *cursor && parse_cursor(cursor, &before) < 0)
        return store__set_err(err, STORE_EINVAL, 0,
                              "list jobs: \"%.32s\" is not a cursor this service "
                              "gave", cursor);
    if (f->nconds)
        u = use(st, f->owner ? SQL_JOB_SEARCH_OWNER : SQL_JOB_SEARCH);
    else
        u = use(st, f->owner ? SQL_JOB_LIST_OWNER : SQL_JOB_LIST);
    if (f->nconds) {
        bind_int(&u, 10, STORE_JOB_SCAN);
        if ((rc = store__bind_conds(&u, f, err)) < 0) {
            done(&u);
            return rc;
        }
    }
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
    bind_text(&u, 9, f->stop_reason);
    rc = read_jobs(st, &u, limit, out, n, &more, &last_seq, "list jobs", err);
    if (rc >= 0 && more)
        snprintf(next_cursor, STORE_CURSOR_SIZE, "%" PRId64, last_seq);
    else if (rc >= 0 && f->nconds &&
             (rc = store__scan_cursor(st, f, before, next_cursor, err)) < 0) {
        store_jobs_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int store_job_set_running(struct store *st, const char *id, int64_t pid,
                          const char *problem_json, const char *params_json,
                          struct store_err *err)
{
    struct use u = use(st, SQL_JOB_SET_RUNNING);
    int rc;

    if (!id || pid <= 0)
        return store__set_err(err, STORE_EINVAL, 0,
                              "start a job: an id and a pid > 0 are required");
    bind_text(&u, 1, id);
    bind_int(&u, 2, pid);
    bind_int(&u, 3, store__now_ms());
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
        return store__set_err(err, STORE_EINVAL, 0,
                              "record progress: no id, or round out of range");
    bind_text(&u, 1, id);
    bind_int(&u, 2, (int64_t)round);
    bind_real(&u, 3, rel_gap);
    bind_real(&u, 4, bits_up);
    bind_int(&u, 5, store__now_ms());
    if ((rc = exec_use(st, &u, "record progress", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0
               : job_missing_or_state(st, id, NULL,
                                      "record progress of job", err);
}

/* What a state says of why, when nothing more is known. */
static const char *stop_reason_of(enum store_job_state state)
{
    switch (state) {
    case STORE_JOB_CANCELLED:
        return store_stop_name(STORE_STOP_CANCELLED);
    case STORE_JOB_INTERRUPTED:
        return store_stop_name(STORE_STOP_INTERRUPTED);
    case STORE_JOB_FAILED:
        return store_stop_name(STORE_STOP_FAILED);
    default:
        return NULL;
    }
}

int store_job_finish(struct store *st, const char *id,
                     enum store_job_state state, const char *reason,
                     struct store_err *err)
{
    return store_job_end(st, id, state, stop_reason_of(state), reason, err);
}

int store_job_end(struct store *st, const char *id, enum store_job_state state,
                  const char *stop_reason, const char *reason,
                  struct store_err *err)
{
    return store_job_end_usage(st, id, state, stop_reason, reason, NULL, err);
}

/* The relative gap of the job's last stored row: NaN when it was not
 * finite, when it has none, or when the job is not there. */
static double last_rel_gap(struct store *st, const char *id)
{
    struct use u = use(st, SQL_JOB_REL_GAP);
    double gap = NAN;

    bind_text(&u, 1, id);
    if (step(&u) == SQLITE_ROW)
        gap = col_real(u.s, 0);
    done(&u);
    return gap;
}

int store_job_end_usage(struct store *st, const char *id, enum store_job_state state,
                        const char *stop_reason, const char *reason,
                        const struct store_job_usage *usage, struct store_err *err)
{
    struct use u;
    const char *stop;
    int rc;

    if (!id || !store_job_state_is_final(state))
        return store__set_err(err, STORE_EINVAL, 0,
                              "finish a job: an id and a final state are required");
    stop = stop_reason ? stop_reason : stop_reason_of(state);
    /* The outcome reads the last row the writer stored, which comes before
     * the end (the scheduler flushes a job's rows first). */
    const char *outcome = outcome_name(outcome_of(stop, last_rel_gap(st, id)));
    u = use(st, SQL_JOB_FINISH);
    bind_text(&u, 1, id);
    bind_text(&u, 2, store_job_state_name(state));
    bind_text(&u, 3, reason);
    bind_int(&u, 4, store__now_ms());
    bind_text(&u, 5, stop);
    bind_text(&u, 9, outcome);
    if (usage) {
        /* What is unknown stays NULL (unbound). */
        bind_real(&u, 6, usage->cpu_seconds);
        if (usage->max_rss_bytes >= 0)
            bind_int(&u, 7, usage->max_rss_bytes);
        if (usage->rss_sum_bytes >= 0)
            bind_int(&u, 8, usage->rss_sum_bytes);
    }
    if ((rc = exec_use(st, &u, "finish a job", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, NULL, "finish job", err);
}

int store_job_set_eclk(struct store *st, const char *id, const char *eclk,
                       struct store_err *err)
{
    struct use u = use(st, SQL_JOB_SET_ECLK);
    int rc;

    if (!id || !eclk)
        return store__set_err(err, STORE_EINVAL, 0,
                              "store an end record: an id and a record are required");
    bind_text(&u, 1, id);
    bind_text(&u, 2, eclk);
    if ((rc = exec_use(st, &u, "store an end record", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, NULL, "store an end record", err);
}

/* Metrics and labels go with the job (ON DELETE CASCADE). */
int store_job_delete(struct store *st, const char *id, const char *owner,
                     struct store_err *err)
{
    struct use u = use(st, SQL_JOB_DELETE);
    int rc;

    if (!id)
        return store__set_err(err, STORE_EINVAL, 0, "delete a job: no id");
    bind_text(&u, 1, id);
    bind_text(&u, 2, owner);
    if ((rc = exec_use(st, &u, "delete a job", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0 : job_missing_or_state(st, id, owner, "delete job", err);
}

int store_jobs_queued_heads(struct store *st, struct store_job **out, size_t *n,
                            struct store_err *err)
{
    struct use u = use(st, SQL_JOBS_QUEUED);
    int more;

    *out = NULL;
    *n = 0;
    return read_jobs(st, &u, SIZE_MAX, out, n, &more, NULL, "queued jobs", err);
}

int store_jobs_queue(struct store *st, struct store_queued **out, size_t *n,
                     struct store_err *err)
{
    struct use u = use(st, SQL_JOBS_QUEUE);
    struct store_queued *q = NULL;
    size_t cap = 0, k = 0;
    int rc;

    while ((rc = step(&u)) == SQLITE_ROW) {
        const unsigned char *id = sqlite3_column_text(u.s, 0);
        const unsigned char *owner = sqlite3_column_text(u.s, 1);

        if (k == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            struct store_queued *nq = realloc(q, ncap * sizeof *nq);

            if (!nq) {
                done(&u);
                free(q);
                return store__set_err(err, STORE_ENOMEM, 0, "queued jobs: out of memory");
            }
            q = nq;
            cap = ncap;
        }
        snprintf(q[k].id, sizeof q[k].id, "%s", id ? (const char *)id : "");
        snprintf(q[k].owner, sizeof q[k].owner, "%s", owner ? (const char *)owner : "");
        k++;
    }
    if (rc != SQLITE_DONE) {
        rc = store__sql_fail(st->db, err, rc, "queued jobs");
        done(&u);
        free(q);
        return rc;
    }
    done(&u);
    *out = q;
    *n = k;
    return 0;
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
        rc = store__sql_fail(st->db, err, rc, "count jobs");
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
    bind_int(&u, 2, store__now_ms());
    if ((rc = exec_use(st, &u, "recover interrupted jobs", err)) < 0)
        return rc;
    return sqlite3_changes(st->db);
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
        rc = nomem ? store__set_err(err, STORE_ENOMEM, 0,
                                    "read an experiment: out of memory")
                   : 0;
    } else if (rc == SQLITE_DONE) {
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "no experiment %s", id);
    } else {
        rc = store__sql_fail(st->db, err, rc, "read an experiment");
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

        store__new_id(st, 'x', id);
        bind_text(&u, 1, id);
        bind_text(&u, 2, in->owner);
        bind_text(&u, 3, in->name ? in->name : "");
        bind_text(&u, 4, in->spec);
        bind_int(&u, 5, store__now_ms());
        rc = step(&u);
        if (rc != SQLITE_DONE && rc != SQLITE_CONSTRAINT_UNIQUE)
            store__sql_fail(st->db, err, rc, "create an experiment");
        done(&u);
    }
    if (rc == SQLITE_DONE)
        return 0;
    return rc == SQLITE_CONSTRAINT_UNIQUE
               ? store__set_err(err, STORE_ESQL, rc,
                                "create an experiment: no free id")
               : store__code_of_sqlite(rc);
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
        return store__set_err(err, STORE_EINVAL, 0,
                              "%s: an owner and a spec are required", what);
    for (size_t i = 0; i < njobs; i++) {
        struct store_job_new jn = jobs[i];

        jn.owner = in->owner;
        if ((rc = check_job_new(&jn, err)) < 0)
            return rc;
        if (jn.idempotency_key)
            return store__set_err(err, STORE_EINVAL, 0,
                                  "%s: its jobs take no idempotency key", what);
    }
    if ((rc = store__tx_begin(st, what, err)) < 0)
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
    rc = store__tx_end(st, rc, what, err);
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
        return store__set_err(err, STORE_EINVAL, 0, "no experiment id");
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

void store_experiments_free(struct store_experiment *xs, size_t n)
{
    if (!xs)
        return;
    for (size_t i = 0; i < n; i++)
        store_experiment_clear(&xs[i]);
    free(xs);
}

int store_experiment_list(struct store *st, const char *owner, const char *cursor,
                          size_t limit, struct store_experiment **out, size_t *n,
                          char next_cursor[STORE_CURSOR_SIZE], struct store_err *err)
{
    struct store_experiment *xs;
    int64_t before = INT64_MAX, last_seq = 0;
    size_t count = 0;
    struct use u;
    int rc, nomem = 0;

    *out = NULL;
    *n = 0;
    next_cursor[0] = '\0';
    if (limit < 1 || limit > 10000)
        return store__set_err(err, STORE_EINVAL, 0,
                              "list experiments: limit must be in 1..10000");
    if (cursor && *cursor && parse_cursor(cursor, &before) < 0)
        return store__set_err(err, STORE_EINVAL, 0,
                              "list experiments: \"%.32s\" is not a cursor this "
                              "service gave", cursor);
    if (!(xs = calloc(limit + 1, sizeof *xs)))
        return store__set_err(err, STORE_ENOMEM, 0, "list experiments: out of memory");
    u = use(st, SQL_EXP_LIST);
    bind_text(&u, 1, owner);
    bind_int(&u, 2, before);
    bind_int(&u, 3, (int64_t)limit + 1);
    while ((rc = step(&u)) == SQLITE_ROW) {
        struct store_experiment *x = &xs[count];

        if (count == limit) {
            snprintf(next_cursor, STORE_CURSOR_SIZE, "%" PRId64, last_seq);
            break;
        }
        last_seq = sqlite3_column_int64(u.s, 0);
        col_copy(u.s, 1, x->id, sizeof x->id);
        x->owner = col_dup(u.s, 2, &nomem);
        x->name = col_dup(u.s, 3, &nomem);
        x->spec = col_dup(u.s, 4, &nomem);
        x->created_at = sqlite3_column_int64(u.s, 5);
        x->jobs = sqlite3_column_int64(u.s, 6);
        count++;
    }
    if (rc == SQLITE_ROW || rc == SQLITE_DONE)
        rc = nomem ? store__set_err(err, STORE_ENOMEM, 0, "list experiments: out of memory")
                   : 0;
    else
        rc = store__sql_fail(st->db, err, rc, "list experiments");
    done(&u);
    if (rc < 0) {
        store_experiments_free(xs, count);
        return rc;
    }
    *out = xs;
    *n = count;
    return 0;
}

int store_job_state_counts(struct store *st, int64_t out[STORE_JOB_STATE_COUNT],
                           struct store_err *err)
{
    struct use u = use(st, SQL_STATE_COUNTS);
    int rc;

    for (int i = 0; i < STORE_JOB_STATE_COUNT; i++)
        out[i] = 0;
    while ((rc = step(&u)) == SQLITE_ROW) {
        enum store_job_state s;

        if (store_job_state_from_name((const char *)sqlite3_column_text(u.s, 0), &s) == 0)
            out[s] = sqlite3_column_int64(u.s, 1);
    }
    rc = rc == SQLITE_DONE ? 0 : store__sql_fail(st->db, err, rc, "count jobs by state");
    done(&u);
    return rc;
}

int store_job_set_labels(struct store *st, const char *id, const char *owner,
                         const char *name, const char *labels_json, const char *spec_json,
                         struct store_err *err)
{
    int64_t seq = 0;
    struct use u;
    int rc;

    if ((rc = store__tx_begin(st, "label a job", err)) < 0)
        return rc;
    rc = store__job_seq(st, id, &seq, err);
    if (rc == 0) {
        u = use(st, SQL_JOB_SET_LABELS);
        bind_int(&u, 1, seq);
        bind_text(&u, 2, owner);
        bind_text(&u, 3, name ? name : "");
        bind_text(&u, 4, labels_json);
        bind_text(&u, 5, spec_json);
        rc = exec_use(st, &u, "label a job", err);
        if (rc == 0 && sqlite3_changes(st->db) != 1)
            rc = store__set_err(err, STORE_ENOTFOUND, 0, "no job %s", id);
    }
    if (rc == 0) {
        u = use(st, SQL_LABELS_CLEAR);
        bind_int(&u, 1, seq);
        rc = exec_use(st, &u, "label a job", err);
    }
    if (rc == 0) {
        u = use(st, SQL_LABELS_INSERT);
        bind_int(&u, 1, seq);
        bind_text(&u, 2, labels_json);
        rc = exec_use(st, &u, "label a job", err);
    }
    return store__tx_end(st, rc, "label a job", err);
}
