/*
 * Jobs: the server's checks of a spec, submission within the queue quota
 * and with idempotency keys, cancel and delete (see jobs.h).
 */
#define _GNU_SOURCE
#include "jobs.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog.h"
#include "ecopt/memory.h"
#include "ecopt/proc.h"
#include "pagecache.h"
#include "scheduler.h"

int spec_problem_set(struct spec_problem *sp, const char *field, const char *limit,
                     double value, const char *fmt, ...)
{
    va_list ap;

    snprintf(sp->field, sizeof sp->field, "%s", field);
    va_start(ap, fmt);
    vsnprintf(sp->detail, sizeof sp->detail, fmt, ap);
    va_end(ap);
    sp->limit = limit;
    sp->value = value;
    return -1;
}

int jobs_row_new(const struct jobspec *spec, const char *owner, struct store_job_new *in,
                 char **spec_text, char **labels_text)
{
    json_t *canon = jobspec_to_json(spec), *labels;

    *spec_text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    labels = canon ? json_object_get(canon, "labels") : NULL;
    *labels_text = json_is_object(labels)
                       ? json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)
                       : strdup("{}");
    json_decref(canon);
    if (!*spec_text || !*labels_text)
        return -1;
    memset(in, 0, sizeof *in);
    in->owner = owner;
    in->spec = *spec_text;
    in->name = spec->name;
    in->labels = *labels_text;
    in->algorithm = ec_algo_name(spec->job.algorithm);
    in->compressor = ec_comp_name(spec->job.compressor.type);
    in->dataset = spec->job.dataset;
    in->backend = jobspec_backend_name(spec->backend);
    in->workers = spec->job.workers;
    return 0;
}

int jobs_check_spec(struct app *a, const struct jobspec *spec, const char *owner,
                    int admin, struct spec_problem *sp, char version[65])
{
    const ec_job *job = &spec->job;
    const struct config *cfg = &a->cfg;
    struct catalog_file df;
    const char *rule, *field;
    char why[320];
    int64_t rows, d;

    memset(sp, 0, sizeof *sp);
    if (spec->backend == JOBSPEC_BACKEND_MPI && !cfg->mpi_hostfile[0])
        return spec_problem_set(sp, "backend", NULL, 0,
                            "mpi is not enabled on this server (its admin "
                            "enables it with ecopt serve --mpi-hostfile, where "
                            "ecopt-mpi is built and mpirun found); use process "
                            "or inproc");
    /* What the engine would refuse when the job starts, refused now. */
    if ((field = ec_algo_comp_check(job->algorithm, job->compressor.type, why,
                                    sizeof why)))
        return spec_problem_set(sp, field, NULL, 0, "%s", why);
    if ((field = ec_algo_down_check(job->algorithm, job->compressor_down.type,
                                    why, sizeof why)))
        return spec_problem_set(sp, field, NULL, 0, "%s", why);
    if ((field = ec_algo_participation_check(job->algorithm, job->participation,
                                             why, sizeof why)))
        return spec_problem_set(sp, field, NULL, 0, "%s", why);
    if ((rule = datadir_name_check(job->dataset)))
        return spec_problem_set(sp, "dataset", NULL, 0, "%s", rule);
    if (catalog_file(a, job->dataset, owner, admin, &df, sp->detail,
                     sizeof sp->detail) < 0) {
        snprintf(sp->field, sizeof sp->field, "dataset");
        return -1;
    }
    rows = df.rows;
    d = df.d;
    if (version)
        memcpy(version, df.sha256, sizeof df.sha256);
    /* What depends on the data, checked now rather than when the job
     * starts: the ranges the engine would refuse. */
    if ((field = ec_job_general_convex_check(job, (uint64_t)d, why, sizeof why)))
        return spec_problem_set(sp, field, NULL, 0, "%s", why);
    if (job->workers > rows)
        return spec_problem_set(sp, "workers", NULL, 0,
                            "must be in 1..%lld (the rows of %.100s; got %u)",
                            (long long)rows, job->dataset, job->workers);
    if (ec_comp_info_of(job->compressor.type)->param == EC_COMP_PARAM_K &&
        isnan(job->k_frac) && (int64_t)job->compressor.k > d)
        return spec_problem_set(sp, "compressor.k", NULL, 0,
                            "must be in 1..%lld (the dimension d of %.100s; got %u)",
                            (long long)d, job->dataset, job->compressor.k);
    if (job->batch != EC_JOB_BATCH_FULL && (int64_t)job->batch > rows / job->workers)
        return spec_problem_set(sp, "batch", NULL, 0,
                            "must be in 1..%lld (the smallest shard's rows; got %u)",
                            (long long)(rows / job->workers), job->batch);
    /* The server's own limits. */
    if (job->workers > cfg->max_workers_per_job)
        return spec_problem_set(sp, "workers", "max_workers_per_job", cfg->max_workers_per_job,
                            "at most %u workers per job on this server (got %u)",
                            cfg->max_workers_per_job, job->workers);
    if (job->max_rounds > cfg->max_rounds)
        return spec_problem_set(sp, "max_rounds", "max_rounds", (double)cfg->max_rounds,
                            "at most %llu rounds per job on this server (got %llu)",
                            (unsigned long long)cfg->max_rounds,
                            (unsigned long long)job->max_rounds);
    if (job->max_seconds > cfg->max_seconds)
        return spec_problem_set(sp, "max_seconds", "max_seconds", cfg->max_seconds,
                            "at most %.0f seconds per job on this server (got %g)",
                            cfg->max_seconds, job->max_seconds);
    return jobs_check_memory(spec, &df, cfg, sp);
}

int jobs_check_memory(const struct jobspec *spec, const struct catalog_file *df,
                      const struct config *cfg, struct spec_problem *sp)
{
    const ec_job *job = &spec->job;
    ec_mem_job mj;
    ec_mem_estimate est;
    double mib;

    /* The job as ecopt run will resolve it. */
    ec_mem_job_from(&mj, job, (uint64_t)df->rows, (uint64_t)df->nnz, (uint32_t)df->d,
                    spec->backend == JOBSPEC_BACKEND_INPROC
                        ? 0 : ec_procs_resolve(job->workers, spec->procs));
    mj.mpi = spec->backend == JOBSPEC_BACKEND_MPI;
    ec_estimate_memory(&mj, &est);
    mib = (double)est.total / 1048576.0;
    if (mib <= cfg->max_job_memory)
        return 0;
    if (est.procs)
        return spec_problem_set(sp, "workers", "max_job_memory", cfg->max_job_memory,
                                "the job would need about %.0f MiB (coordinator %.0f MiB "
                                "and %u worker %s of %.0f MiB, for d = %lld and "
                                "%u workers), over this server's limit of %u MiB per job",
                                mib, est.coordinator / 1048576.0, est.procs,
                                spec->backend == JOBSPEC_BACKEND_MPI ? "ranks" : "processes",
                                (spec->backend == JOBSPEC_BACKEND_MPI ? est.rank
                                                                      : est.process) / 1048576.0,
                                (long long)df->d, job->workers, cfg->max_job_memory);
    return spec_problem_set(sp, "workers", "max_job_memory", cfg->max_job_memory,
                            "the job would need about %.0f MiB in process (d = %lld, "
                            "%u workers), over this server's limit of %u MiB per job",
                            mib, (long long)df->d, job->workers, cfg->max_job_memory);
}

/* jobs_submit, of a retry when retry_of is not NULL. */
static enum jobs_outcome submit(struct app *a, const struct jobspec *spec, const char *owner,
                                const char *version, const char *idempotency_key,
                                const char *retry_of, struct store_job *job,
                                long long *queued, struct store_err *e)
{
    struct store_job_new in = {0};
    struct store_counts c = {0};
    char *spec_text = NULL, *labels_text = NULL;
    enum jobs_outcome out;
    int rc, replay = 0;

    if (jobs_row_new(spec, owner, &in, &spec_text, &labels_text) < 0) {
        out = JOBS_NO_MEMORY;
        goto done;
    }
    in.dataset_sha256 = version;
    in.retry_of = retry_of;
    in.idempotency_key = idempotency_key;
    in.request_hash = idempotency_key ? spec_text : NULL;

    pthread_mutex_lock(&a->wlock);
    rc = store_counts(a->writer, owner, &c, e);
    /* A replay creates nothing, and a conflicting key is refused below;
     * every new key counts against the limit like no key at all. */
    if (rc == 0 && idempotency_key)
        replay = store_job_idem_known(a->writer, &in, e) != 0;
    if (rc == 0 && !replay && c.owner_queued >= a->cfg.max_queued_per_token) {
        pthread_mutex_unlock(&a->wlock);
        *queued = (long long)c.owner_queued;
        out = JOBS_QUEUE_FULL;
        goto done;
    }
    if (rc == 0)
        rc = store_job_create(a->writer, &in, job, e);
    pthread_mutex_unlock(&a->wlock);
    if (rc == STORE_ECONFLICT) {
        out = JOBS_KEY_REUSED;
    } else if (rc < 0) {
        out = JOBS_STORE_FAILED;
    } else {
        sched_wake(a->sched);
        out = rc == STORE_EXISTING ? JOBS_REPLAYED : JOBS_CREATED;
    }
done:
    catalog_unpin(a, version);  /* its row refers to it now, or never will */
    free(spec_text);
    free(labels_text);
    return out;
}

enum jobs_outcome jobs_submit(struct app *a, const struct jobspec *spec, const char *owner,
                              const char *version, const char *idempotency_key,
                              struct store_job *job,
                              long long *queued, struct store_err *e)
{
    return submit(a, spec, owner, version, idempotency_key, NULL, job, queued, e);
}

int jobs_get(struct app *a, const char *id, const char *owner, struct store_job *job,
             struct store_err *e)
{
    struct store *st = app_reader(a);
    int rc = store_job_get(st, id, owner, job, e);

    app_reader_done(a, st);
    return rc;
}

enum jobs_cancel_outcome jobs_cancel(struct app *a, const char *id, const char *owner,
                                     const char *who, struct store_job *job,
                                     struct store_err *e)
{
    char reason[160];
    int rc;

    if (jobs_get(a, id, owner, job, e) < 0)
        return JOBS_CANCEL_FAILED;
    if (store_job_state_is_final(job->state))
        return JOBS_ALREADY_ENDED;
    if (sched_cancel(a->sched, job->id) == 0)
        return JOBS_CANCEL_REQUESTED;
    /* Not running here: still queued, so it ends now. */
    snprintf(reason, sizeof reason, "cancelled by %s before it started", who);
    pthread_mutex_lock(&a->wlock);
    rc = store_job_finish(a->writer, job->id, STORE_JOB_CANCELLED, reason, e);
    if (rc == 0) {
        store_job_clear(job);
        rc = store_job_get(a->writer, id, NULL, job, e);
    }
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0 && e->code == STORE_ESTATE && sched_cancel(a->sched, job->id) == 0)
        return JOBS_CANCEL_REQUESTED;   /* it started between our two looks */
    return rc < 0 ? JOBS_CANCEL_FAILED : JOBS_CANCELLED;
}

int jobs_delete(struct app *a, const char *id, const char *owner, struct store_err *e)
{
    char path[PATH_MAX + 64];
    int rc;

    pthread_mutex_lock(&a->wlock);
    rc = store_job_delete(a->writer, id, owner, e);
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0)
        return rc;
    pagecache_forget(a->pages, id);
    snprintf(path, sizeof path, "%s/%s.json", a->cfg.state_dir, id);
    unlink(path);
    snprintf(path, sizeof path, "%s/%s.log", a->cfg.state_dir, id);
    unlink(path);
    return 0;
}

int jobs_log(struct app *a, const char *id, const char *owner, size_t max, char **text,
             size_t *len, int *truncated, struct store_err *e)
{
    struct store_job job = {0};
    char path[PATH_MAX + 64];
    struct stat st;
    off_t from;
    ssize_t n;
    int fd, rc;

    *text = NULL;
    *len = 0;
    *truncated = 0;
    if ((rc = jobs_get(a, id, owner, &job, e)) < 0)
        return rc;
    snprintf(path, sizeof path, "%s/%s.log", a->cfg.state_dir, job.id);
    store_job_clear(&job);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0 || fstat(fd, &st) < 0 ||
        !S_ISREG(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        e->code = STORE_ENOTFOUND;
        snprintf(e->msg, sizeof e->msg, "job %s has no log yet", id);
        return STORE_ENOTFOUND;
    }
    from = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
    *truncated = from > 0;
    if (!(*text = malloc((size_t)(st.st_size - from) + 1))) {
        close(fd);
        e->code = STORE_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "out of memory");
        return STORE_ENOMEM;
    }
    while ((size_t)(from + (off_t)*len) < (size_t)st.st_size &&
           (n = pread(fd, *text + *len, (size_t)(st.st_size - from) - *len,
                      from + (off_t)*len)) > 0)
        *len += (size_t)n;
    (*text)[*len] = '\0';
    close(fd);
    return 0;
}

int jobs_queue(struct app *a, struct queue_place **plan, size_t *n, struct store_err *e)
{
    struct store *st = app_reader(a);
    int rc = sched_queue(a->sched, st, plan, n, e);

    app_reader_done(a, st);
    return rc;
}

enum jobs_outcome jobs_retry(struct app *a, const char *id, const char *owner,
                             struct store_job *job, struct spec_problem *sp,
                             long long *queued, struct store_err *e)
{
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    struct store_job old = {0};
    enum jobs_outcome out;
    char version[65] = "";

    if (jobs_get(a, id, owner, &old, e) < 0)
        return JOBS_STORE_FAILED;
    if (!store_job_state_is_final(old.state)) {
        e->code = STORE_ESTATE;
        snprintf(e->msg, sizeof e->msg,
                 "job %s is %s: a job is retried once it has ended (cancel it first)",
                 old.id, store_job_state_name(old.state));
        *job = old;
        return JOBS_STORE_FAILED;
    }
    /* The server's rules may have changed since: check it again. */
    if (jobspec_parse(old.spec, strlen(old.spec), &spec, &errs) < 0) {
        spec_problem_set(sp, errs.count ? errs.item[0].field : "spec", NULL, 0, "%s",
                         errs.count ? errs.item[0].detail : "the stored spec is invalid");
        store_job_clear(&old);
        return JOBS_INVALID;
    }
    /* The job's owner must still see its dataset (an admin retrying: any). */
    if (jobs_check_spec(a, &spec, old.owner, owner == NULL, sp, version) < 0) {
        store_job_clear(&old);
        return JOBS_INVALID;
    }
    out = submit(a, &spec, old.owner, version, NULL, old.id, job, queued, e);
    store_job_clear(&old);
    return out;
}

int jobs_patch_doc(json_t *doc, json_t *patch, struct spec_problem *sp)
{
    json_t *labels, *value, *label;
    const char *key;

    memset(sp, 0, sizeof *sp);
    if (!json_is_object(doc) || !json_is_object(patch))
        return spec_problem_set(sp, "", NULL, 0,
                                "the body must be an object with name and/or labels");
    json_object_foreach(patch, key, value) {
        if (strcmp(key, "name") && strcmp(key, "labels"))
            return spec_problem_set(sp, key, NULL, 0, "unknown key; a job's name and labels "
                                    "can be changed, nothing else");
    }
    if ((value = json_object_get(patch, "name"))) {
        if (json_is_null(value) || (json_is_string(value) && !*json_string_value(value)))
            json_object_del(doc, "name");
        else if (json_object_set(doc, "name", value) < 0)   /* the spec's checks judge it */
            return spec_problem_set(sp, "name", NULL, 0, "out of memory");
    }
    if (!(value = json_object_get(patch, "labels")))
        return 0;
    if (!json_is_object(value))
        return spec_problem_set(sp, "labels", NULL, 0,
                                "must be an object of KEY: string (null deletes KEY)");
    if (!json_is_object(labels = json_object_get(doc, "labels"))) {
        if (json_object_set_new(doc, "labels", json_object()) < 0 ||
            !(labels = json_object_get(doc, "labels")))
            return spec_problem_set(sp, "labels", NULL, 0, "out of memory");
    }
    /* Each label in turn: the loop's value is the label, never the object it
     * walks. A value that is not a string or null is left for the spec's
     * checks, which name the label. */
    json_object_foreach(value, key, label) {
        if (json_is_null(label))
            json_object_del(labels, key);
        else if (json_object_set(labels, key, label) < 0)
            return spec_problem_set(sp, "labels", NULL, 0, "out of memory");
    }
    return 0;
}

enum jobs_outcome jobs_relabel(struct app *a, const char *id, const char *owner,
                               json_t *patch, struct store_job *job, struct spec_problem *sp,
                               struct store_err *e)
{
    json_t *doc = NULL, *labels, *canon = NULL;
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    struct store_job old = {0};
    char *spec_text = NULL, *labels_text = NULL;
    enum jobs_outcome out = JOBS_UPDATED;

    /* The body is judged before the job is looked up: 422 before 404. */
    if (!(doc = json_object()))
        return JOBS_NO_MEMORY;
    if (jobs_patch_doc(doc, patch, sp) < 0) {
        json_decref(doc);
        return JOBS_INVALID;
    }
    json_decref(doc);
    if (jobs_get(a, id, owner, &old, e) < 0)
        return JOBS_STORE_FAILED;
    if (!(doc = json_loads(old.spec, 0, NULL))) {
        out = JOBS_NO_MEMORY;
        goto done;
    }
    if (jobs_patch_doc(doc, patch, sp) < 0) {
        out = JOBS_INVALID;
        goto done;
    }
    if (jobspec_from_json(doc, &spec, &errs) < 0) {
        spec_problem_set(sp, errs.count ? errs.item[0].field : "", NULL, 0, "%s",
                         errs.count ? errs.item[0].detail : "invalid");
        out = JOBS_INVALID;
        goto done;
    }
    canon = jobspec_to_json(&spec);
    spec_text = canon ? json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    labels = canon ? json_object_get(canon, "labels") : NULL;
    labels_text = json_is_object(labels) ? json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS)
                                         : strdup("{}");
    if (!spec_text || !labels_text) {
        out = JOBS_NO_MEMORY;
        goto done;
    }
    pthread_mutex_lock(&a->wlock);
    if (store_job_set_labels(a->writer, old.id, owner, spec.name, labels_text, spec_text, e) < 0)
        out = JOBS_STORE_FAILED;
    else if (store_job_get(a->writer, old.id, NULL, job, e) < 0)
        out = JOBS_STORE_FAILED;
    pthread_mutex_unlock(&a->wlock);
done:
    json_decref(canon);
    json_decref(doc);
    free(spec_text);
    free(labels_text);
    store_job_clear(&old);
    return out;
}
