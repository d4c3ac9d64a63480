/*
 * The scheduler's starts: which queued job runs next (fair between owners,
 * within the limits on jobs, workers and worker uids), its dataset version
 * and P* hint, its spec file, its coordinator spawned and listed, and the
 * store told; and, by the same fair order, where each queued job stands
 * (sched_queue). scheduler.c runs the thread that calls sched__start_jobs.
 */
#define _GNU_SOURCE
#include "sched_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "describe.h"
#include "ecopt/proc.h"
#include "jobspec.h"
#include "queue.h"

/* What the spawn needs from the job's spec, parsed once: its time budget
 * (else cap), the processes its workers may run on (its procs, else
 * min(workers, CPUs), the most ecopt run resolves it to; inproc runs them
 * in the coordinator), and the procs it asked for (0: none). */
static void spec_run(const char *spec, uint32_t workers, double cap,
                     double *max_seconds, uint32_t *procs, uint32_t *asked)
{
    struct jobspec js;
    struct jobspec_errors jerr = {0};

    *max_seconds = cap;
    *procs = workers;
    *asked = 0;
    if (!spec || jobspec_parse(spec, strlen(spec), &js, &jerr) < 0)
        return;
    if (js.job.max_seconds > 0)
        *max_seconds = js.job.max_seconds;
    *procs = js.backend == JOBSPEC_BACKEND_INPROC
                 ? 1 : ec_procs_resolve(js.job.workers, js.procs);
    *asked = js.procs;
}

/*
 * The version of its dataset the job runs on, in r->sha256, and its loss:
 * the one it recorded at submit, kept in the versions folder meanwhile
 * (catalog_pin); for a job that recorded none, the name's version now.
 * 0, or -1 with a sentence in err: the job cannot run.
 */
static int job_version(struct app *a, struct running *r, const struct store_job *job,
                       char *err, size_t errlen)
{
    struct jobspec js;
    struct jobspec_errors jerr = {0};
    struct catalog_file df;

    if (jobspec_parse(job->spec, strlen(job->spec), &js, &jerr) < 0) {
        snprintf(err, errlen, "the stored job spec no longer parses");
        return -1;
    }
    snprintf(r->loss, sizeof r->loss, "%s", ec_loss_name(js.job.loss));
    if (job->dataset_sha256[0]) {
        memcpy(r->sha256, job->dataset_sha256, sizeof r->sha256);
        return 0;
    }
    if (catalog_file(a, js.job.dataset, NULL, 1, &df, err, errlen) < 0)
        return -1;
    memcpy(r->sha256, df.sha256, sizeof r->sha256);
    return 0;
}

/*
 * The P* cache's entries for the job's dataset and loss (r->sha256 and
 * r->loss, set by job_version), and the version's lambda_max when it is
 * known, written to path where the coordinator reads them (ecopt run
 * --pstar-hint) with the version they were found for. 1 when written, 0
 * when the caches have nothing to offer, -1 when the file could not be
 * written; the coordinator then solves, so a failure here costs time,
 * never the job.
 */
static int write_pstar_hint(struct app *a, struct running *r, const char *path)
{
    struct store_pstar *v = NULL;
    struct store_lmax lm;
    struct store_err e = {0};
    struct store *st;
    size_t n = 0;
    int have_lmax;
    json_t *entries, *root;
    int rc = -1;

    st = app_reader(a);
    if (store_pstar_list(st, r->sha256, r->loss, 256, &v, &n, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    have_lmax = store_lmax_get(st, r->sha256, &lm, &e) == 0;
    if (!have_lmax && e.code != STORE_ENOTFOUND)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    app_reader_done(a, st);
    if (n == 0 && !have_lmax) {
        free(v);
        return 0;               /* nothing cached yet: the start will add it */
    }
    entries = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(entries,
                              json_pack("{s:f, s:f, s:f, s:o, s:s}", "lambda1", v[i].lambda1,
                                        "lambda2", v[i].lambda2, "p_star", v[i].p_star,
                                        "bound", describe_real(v[i].bound), "method",
                                        v[i].method));
    free(v);
    root = json_pack("{s:s, s:s, s:o}", "sha256", r->sha256, "loss", r->loss,
                     "entries", entries);
    if (root && have_lmax)
        json_object_set_new(root, "lambda_max",
                            json_pack("{s:f, s:s, s:I}", "value", lm.value, "method",
                                      lm.method, "steps", (json_int_t)lm.steps));
    /* Close-on-exec, as every descriptor of the service: a coordinator
     * started meanwhile must not inherit it. */
    {
        FILE *f = root ? fopen(path, "we") : NULL;
        int ok = 0;

        if (f) {
            ok = json_dumpf(root, f, JSON_COMPACT) == 0;
            ok = fclose(f) == 0 && ok;
        }
        if (ok)
            rc = 1;
        else
            unlink(path);       /* a full disk: no half-written hint */
    }
    json_decref(root);
    return rc;
}

/* Writes text and closes f, whatever happens; 1 when both worked. */
static int write_close(FILE *f, const char *text)
{
    int put = fputs(text, f) >= 0;
    int closed = fclose(f) == 0;

    return put && closed;
}

/* How many of owner's jobs run now; the caller holds s->lock. */
static unsigned owner_running(struct sched *s, const char *owner)
{
    unsigned k = 0;

    for (size_t i = 0; i < s->nrun; i++)
        k += !s->run[i]->reaped && owner && strcmp(s->run[i]->owner, owner) == 0;
    return k;
}

/*
 * The lowest uid of --worker-uids no listed job holds, 0 if none is free.
 * A job keeps its uid until it is off the list, after its processes were
 * reaped; the next job on that uid kills anything left of them.
 */
static uint32_t free_uid(const struct sched *s)
{
    const struct config *c = &s->app->cfg;

    for (uint32_t k = 0; k < c->worker_uid_count; k++) {
        uint32_t uid = c->worker_uid_first + k;
        size_t i = 0;

        while (i < s->nrun && s->run[i]->uid != uid)
            i++;
        if (i == s->nrun)
            return uid;
    }
    return 0;
}

/* The served entry of owner, added if new; NULL when memory runs out.
 * The caller holds s->lock. */
static struct served *served_of(struct sched *s, const char *owner)
{
    for (size_t i = 0; i < s->nserved; i++)
        if (strcmp(s->served[i].owner, owner) == 0)
            return &s->served[i];
    if (s->nserved == s->capserved) {
        size_t ncap = s->capserved ? 2 * s->capserved : 16;
        struct served *ns = realloc(s->served, ncap * sizeof *ns);

        if (!ns)
            return NULL;
        s->served = ns;
        s->capserved = ncap;
    }
    struct served *v = &s->served[s->nserved++];
    snprintf(v->owner, sizeof v->owner, "%s", owner);
    v->at = 0;
    return v;
}

/* Owner's job leaves the queue now: its turn is taken. */
static void mark_served(struct sched *s, const char *owner)
{
    pthread_mutex_lock(&s->lock);
    struct served *v = served_of(s, owner ? owner : "");

    if (v)
        v->at = ++s->serves;
    pthread_mutex_unlock(&s->lock);
}

/*
 * Which of the owners' oldest queued jobs (q, one per owner) starts next,
 * n when none may: fair share between tokens. Among the owners under
 * max_running_per_token, the one queue_before puts first (the fewest jobs
 * running, then the one whose last start is the longest ago); then the
 * oldest job. An owner's turn is taken when its job leaves the queue
 * (mark_served).
 */
static size_t pick_job(struct sched *s, const struct store_job *q, size_t n)
{
    size_t best = n;
    unsigned best_running = 0;
    uint64_t best_at = 0;

    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < n; i++) {
        const char *owner = q[i].owner ? q[i].owner : "";
        unsigned running = owner_running(s, owner);
        const struct served *v;
        uint64_t at;

        if (running >= s->app->cfg.max_running_per_token)
            continue;
        v = served_of(s, owner);
        at = v ? v->at : 0;
        if (best == n || queue_before(running, at, best_running, best_at)) {
            best = i;
            best_running = running;
            best_at = at;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return best;
}

/* The tokens the queue's plan needs to know: those running or served. */
static int owners_of(struct sched *s, struct queue_owner **out, size_t *n)
{
    struct queue_owner *o;
    size_t k = 0;

    pthread_mutex_lock(&s->lock);
    o = calloc(s->nserved + s->nrun + 1, sizeof *o);
    if (o) {
        for (size_t i = 0; i < s->nserved; i++, k++) {
            snprintf(o[k].owner, sizeof o[k].owner, "%s", s->served[i].owner);
            o[k].served_at = s->served[i].at;
            o[k].running = owner_running(s, s->served[i].owner);
        }
        /* A job started before this service (none: recovered jobs end)
           or served entries lost to memory: its owner counts anyway. */
        for (size_t i = 0; i < s->nrun; i++) {
            size_t j = 0;

            while (j < k && strcmp(o[j].owner, s->run[i]->owner) != 0)
                j++;
            if (j == k) {
                snprintf(o[k].owner, sizeof o[k].owner, "%s", s->run[i]->owner);
                o[k++].running = owner_running(s, s->run[i]->owner);
            }
        }
    }
    pthread_mutex_unlock(&s->lock);
    *out = o;
    *n = k;
    return o ? 0 : -1;
}

int sched_queue(struct sched *s, struct store *st, struct queue_place **out, size_t *n,
                struct store_err *e)
{
    struct store_queued *q = NULL;
    struct queue_owner *owners = NULL;
    struct queue_place *plan = NULL;
    size_t nq = 0, nowners = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (!s)
        return 0;
    if ((rc = store_jobs_queue(st, &q, &nq, e)) < 0)
        return rc;
    rc = owners_of(s, &owners, &nowners);
    if (rc == 0 && nq && !(plan = calloc(nq, sizeof *plan)))
        rc = -1;
    if (rc == 0)
        rc = queue_plan(q, nq, owners, nowners, s->app->cfg.max_running_per_token, plan);
    free(q);
    free(owners);
    if (rc < 0) {
        free(plan);
        e->code = STORE_ENOMEM;
        snprintf(e->msg, sizeof e->msg, "the queue's order: out of memory");
        return STORE_ENOMEM;
    }
    *out = plan;
    *n = nq;
    return 0;
}

/* What starting the job at the head of the queue needs, from its spec
 * and the limits. */
struct start_plan {
    uint32_t procs;                /* processes its workers may run on */
    uint32_t asked;                /* the procs it asked for (0: none) */
    uint32_t uid;                  /* its worker uid; 0 none */
    double max_seconds;
};

/* How many listed jobs still run, and in *workers their processes. */
static size_t count_running(struct sched *s, unsigned *workers)
{
    size_t nrun = 0;

    *workers = 0;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nrun; i++)
        if (!s->run[i]->reaped) {
            *workers += s->run[i]->workers;
            nrun++;
        }
    pthread_mutex_unlock(&s->lock);
    return nrun;
}

/*
 * The queued job that starts next, moved to (*q)[0] with its plan, while
 * the limits allow one: 1, or 0 when none starts now (*q is then freed).
 */
static int next_job(struct sched *s, struct store_job **q, size_t *n,
                    struct start_plan *plan)
{
    struct app *a = s->app;
    struct store_err e = {0};
    unsigned workers_now;
    size_t nrun = count_running(s, &workers_now), pick;
    int rc;

    *q = NULL;
    *n = 0;
    if (s->stopping || nrun >= a->cfg.max_running)
        return 0;
    wlock(a);
    rc = store_jobs_queued_heads(a->writer, q, n, &e);
    wunlock(a);
    pick = rc == 0 ? pick_job(s, *q, *n) : *n;
    if (rc < 0 || pick == *n)
        goto none;
    if (pick) {
        struct store_job t = (*q)[0];
        (*q)[0] = (*q)[pick];
        (*q)[pick] = t;
    }
    spec_run((*q)[0].spec, (*q)[0].workers, a->cfg.max_seconds, &plan->max_seconds,
             &plan->procs, &plan->asked);
    if (nrun > 0 && workers_now + plan->procs > a->cfg.max_total_workers)
        goto none;              /* wait for workers to free up */
    plan->uid = 0;
    if (a->cfg.worker_uid_count && !(plan->uid = free_uid(s)))
        goto none;              /* every uid still held by a job that ended */
    return 1;
none:
    store_jobs_free(*q, *n);
    *q = NULL;
    *n = 0;
    return 0;
}

/*
 * Writes the job's spec file and spawns its coordinator into r->rj. 0, or
 * -1 with a sentence in err and, when a system call failed, its errno in
 * *werr; *no_data is set when the job's data cannot be had (err is then
 * the whole reason).
 */
static int spawn_job(struct app *a, struct running *r, const struct store_job *job,
                     const struct start_plan *plan, char *err, size_t errlen,
                     int *werr, int *no_data)
{
    char spec_path[PATH_MAX + 64], log_path[PATH_MAX + 64];
    char hint_path[PATH_MAX + 64];
    struct runner_opts o = {0};
    FILE *f;

    snprintf(spec_path, sizeof spec_path, "%s/%s.json", a->cfg.state_dir, job->id);
    snprintf(log_path, sizeof log_path, "%s/%s.log", a->cfg.state_dir, job->id);
    snprintf(hint_path, sizeof hint_path, "%s/%s.pstar.json", a->cfg.state_dir,
             job->id);
    o.exe = a->cfg.exe;
    o.spec_path = spec_path;
    o.data_dir = a->cfg.data_dir;
    o.log_path = log_path;
    o.coord.worker_user = a->cfg.worker_user;
    o.coord.worker_uid = plan->uid;
    o.coord.worker_cpu_limit = a->cfg.worker_cpu_limit;
    o.coord.nice = a->cfg.job_nice;
    o.coord.worker_mem_limit = a->cfg.worker_mem_limit;
    /* A job without procs counts min(workers, CPUs), the most ecopt
     * run takes for it, and lets ecopt run choose from the data's
     * shape (one CPU fewer for a light round). */
    o.coord.procs = plan->asked;
    o.coord.mem_limits = 1; /* from the job's estimate (--worker-mem-limit
                               fixes the workers' own) */
    if (job->backend && strcmp(job->backend, "mpi") == 0 && a->cfg.mpi_hostfile[0])
        o.coord.hostfile = a->cfg.mpi_hostfile;
    if (job_version(a, r, job, err, errlen) < 0) {
        *no_data = 1;
        return -1;
    }
    o.coord.dataset_sha256 = r->sha256;
    if (write_pstar_hint(a, r, hint_path) > 0)
        o.coord.pstar_hint = hint_path;
    if (!(f = fopen(spec_path, "we"))) {
        *werr = errno;
        snprintf(err, errlen, "%.180s: %.60s", spec_path, strerror(*werr));
        return -1;
    }
    if (!write_close(f, job->spec)) {
        *werr = errno;
        snprintf(err, errlen, "writing %.180s: %.50s", spec_path, strerror(*werr));
        if (*werr == ENOSPC || *werr == EDQUOT)
            unlink(spec_path);  /* the job waits: no half-written spec */
        return -1;
    }
    if (runner_spawn(&o, &r->rj, err, errlen) < 0)
        return -1;
    r->read_last = ec_clock();
    return 0;
}

/* Lists r as running; 0, or -1 when there is no memory to track it.
 * Listed before the store says running, so that a cancel which sees the
 * job running always finds its coordinator here. */
static int list_job(struct sched *s, struct running *r)
{
    int listed;

    pthread_mutex_lock(&s->lock);
    if (s->nrun == s->caprun) {
        size_t ncap = s->caprun ? s->caprun * 2 : 8;
        struct running **nr = realloc(s->run, ncap * sizeof *nr);
        if (nr) {
            s->run = nr;
            s->caprun = ncap;
        }
    }
    listed = s->nrun < s->caprun;
    if (listed)
        s->run[s->nrun++] = r;
    pthread_mutex_unlock(&s->lock);
    return listed ? 0 : -1;
}

/* The job could not start: it fails with reason. 1 when the store
 * refused for now (the queue is tried again later), else 0. */
static int fail_start(struct sched *s, const char *id, const char *reason)
{
    struct store_err e = {0};
    int rc;

    wlock(s->app);
    rc = store_job_end(s->app->writer, id, STORE_JOB_FAILED,
                       store_stop_name(STORE_STOP_START_FAILED), reason, &e);
    wunlock(s->app);
    if (rc < 0 && transient(&e)) {
        s->retry_at = ec_clock() + 1.0;     /* else it comes back at once */
        return 1;
    }
    return 0;
}

/*
 * The token's metric rows against --quota-metric-rows: at its start a job
 * may take what the token's stored rows leave, and every row any job of
 * the token takes counts against each of them. A row past the quota is
 * dropped and its job stopped (escalate), ending with stop reason quota.
 */
static void quota_init(struct running *r)
{
    struct store_err e = {0};
    struct store *st = app_reader(r->app);
    int64_t held = 0;

    if (store_metrics_count_owner(st, r->owner, &held, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: the token's metric rows are not known "
                "(%s): counted from 0\n", r->id, e.msg);
    app_reader_done(r->app, st);
    r->rows_left = (int64_t)r->app->cfg.quota_metric_rows - held;
    if (r->rows_left < 0)
        r->rows_left = 0;
}

/*
 * Starts job, which next_job chose. 0 when the next queued job may be
 * looked at, 1 when starting stops for now (a full disk, a store that
 * refuses writes).
 */
static int start_job(struct sched *s, const struct store_job *job,
                     const struct start_plan *plan)
{
    struct app *a = s->app;
    struct running *r = calloc(1, sizeof *r);
    struct store_err e = {0};
    char err[256] = "", reason[300];
    int werr = 0, no_data = 0, rc;

    mark_served(s, job->owner);
    if (!r)
        return fail_start(s, job->id, "could not start the coordinator: out of memory");
    r->uid = plan->uid;
    r->usage.rss_sum_bytes = -1;        /* until a final record says */
    memcpy(r->id, job->id, sizeof r->id);
    snprintf(r->owner, sizeof r->owner, "%s", job->owner ? job->owner : "");
    r->app = a;
    if (spawn_job(a, r, job, plan, err, sizeof err, &werr, &no_data) < 0) {
        free(r);
        if (werr == ENOSPC || werr == EDQUOT) {
            /* The disk is full: the job waits in the queue, not fails. */
            fprintf(stderr, "ecopt serve: job %s waits: %s\n", job->id, err);
            s->retry_at = ec_clock() + 1.0;
            return 1;
        }
        snprintf(reason, sizeof reason, "%s%s",
                 no_data ? "" : "could not start the coordinator: ", err);
        return fail_start(s, job->id, reason);
    }
    r->workers = plan->procs;     /* processes, as max_total_workers counts */
    r->max_seconds = plan->max_seconds;
    r->deadline = r->read_last + r->max_seconds + DEADLINE_SLACK;
    quota_init(r);
    if (list_job(s, r) < 0) {
        /* No memory to track it: end it now rather than lose it. */
        runner_cancel(r->rj);
        runner_reap(r->rj, 2.0, NULL);
        runner_free(r->rj);
        free(r);
        fail_start(s, job->id, "out of memory tracking the coordinator");
        return 0;
    }
    wlock(a);
    rc = store_job_set_running(a->writer, r->id, runner_pid(r->rj), NULL, NULL, &e);
    wunlock(a);
    if (rc < 0 && transient(&e)) {
        /* The store still says queued: stop this run, start it later. */
        fprintf(stderr, "ecopt serve: job %s waits: %s\n", r->id, e.msg);
        r->requeued = 1;
        s->retry_at = ec_clock() + 1.0;
        pthread_mutex_lock(&s->lock);
        stop_job(r);
        pthread_mutex_unlock(&s->lock);
        return 1;
    }
    if (rc < 0) {
        pthread_mutex_lock(&s->lock);
        r->cancel_requested = 1;    /* cancelled meanwhile: end it */
        stop_job(r);
        pthread_mutex_unlock(&s->lock);
    }
    return 0;
}

/* Starts queued jobs, fairly between owners (pick_job), while the limits
 * allow. */
void sched__start_jobs(struct sched *s)
{
    for (;;) {
        struct store_job *q;
        struct start_plan plan;
        size_t n;
        int stop;

        if (ec_clock() < s->retry_at || !next_job(s, &q, &n, &plan))
            return;
        stop = start_job(s, &q[0], &plan);
        store_jobs_free(q, n);
        if (stop)
            return;
    }
}

