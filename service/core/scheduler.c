/*
 * The scheduler: one thread that starts queued jobs as coordinator
 * processes within the limits, reads their report records into the store
 * (one transaction per job per wake-up), and finishes them. It is the only
 * code that starts or reaps coordinators.
 */
#define _GNU_SOURCE
#include "scheduler.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app.h"
#include "catalog.h"
#include "describe.h"
#include "ecopt/clock.h"
#include "ecopt/proc.h"
#include "jobspec.h"
#include "queue.h"
#include "report.h"
#include "runner.h"

#define MAX_BATCH 2048
/*
 * A job's report pipe is read this often, and its rows are stored at most
 * this long after they could first have been read (or at MAX_BATCH rows):
 * one wake-up of this thread, one commit and one wake-up of the job's
 * watchers for many rows, which a job that reports every round needs.
 * The coordinator's writes then rarely wake anyone. Watchers see a row at
 * most this much later (and the coordinator's own 20 ms). A pipe that
 * would fill sooner (runner_read_wait) is read sooner.
 */
#define FLUSH_SECONDS 0.25
/* Queued jobs are looked for when a job is submitted or ends, and at
 * least this often. */
#define START_SECONDS 1.0
/*
 * Rows held while the store refuses writes (a full disk): past this many
 * the job's report pipe is no longer read, so its coordinator blocks on
 * it and the job pauses rather than lose a row.
 */
#define MAX_PENDING (1u << 20)
/* How long a stopping service keeps retrying what it could not write. */
#define STOP_RETRY_SECONDS 10.0
/*
 * Every job stops. A cancel (or the time limit) sends SIGTERM to the
 * job's process group; a job still there KILL_GRACE seconds later gets
 * SIGKILL (which a stopped coordinator cannot hold off either), and one
 * whose report pipe is still open REAP_GRACE seconds after that (some
 * process outside the group holds it) is reaped all the same. A running
 * job is stopped so once it has run DEADLINE_SLACK seconds past its
 * max_seconds, which the coordinator itself keeps (data, P* and run).
 */
#define KILL_GRACE 5.0
#define REAP_GRACE 2.0
#define DEADLINE_SLACK 10.0

struct running {
    char id[STORE_ID_LEN + 1];
    struct runner_job *rj;
    uint32_t workers;              /* its worker processes */
    int cancel_requested;
    int have_final;
    int write_failing;             /* the last write was refused */
    int requeued;                  /* started, but the store still says
                                      queued: its end is not recorded */
    enum store_job_state final_state;
    const char *final_stop;        /* static: its stop_reason */
    char reason[512];
    ec_metric *batch;              /* rows not yet in the store */
    char **docs;                   /* and their documents (NULL: none) */
    size_t nbatch, capbatch;
    double batch_at;               /* when the oldest of them could first
                                      have been read */
    double read_at;                /* the pipe is not read before */
    double read_last;              /* when it was last read */
    int reaped;                    /* the coordinator is gone; end_* say */
    enum store_job_state end_state;  /* how, until it is recorded */
    const char *end_stop;          /* static: why, as a word */
    char end_reason[600];
    struct store_job_usage usage;  /* rss_sum_bytes from the final record,
                                      the rest from the reaping */
    struct app *app;
    char owner[64];                /* token names are under 64 bytes */
    char sha256[65];               /* the dataset's, "" when unknown */
    char loss[32];
    uint32_t uid;                  /* its own worker uid; 0 none */
    double max_seconds;            /* the job's */
    double deadline;               /* stopped from then on (monotonic s) */
    double term_at;                /* when SIGTERM went to it; 0 not yet */
    double kill_at;                /* when SIGKILL went to it; 0 not yet */
    int timed_out;                 /* stopped for its time limit */
    int64_t rows_left;             /* its token's metric rows to its quota */
    int over_quota;                /* a row past it came: stopped */
};

/* When an owner last had a job started, in slots given (0: never). */
struct served {
    char owner[64];
    uint64_t at;
};

struct sched {
    struct app *app;
    pthread_t thread;
    pthread_mutex_t lock;          /* guards run[], stopping, served[] */
    struct running **run;
    size_t nrun, caprun;
    int wake[2];
    int stopping;
    double stop_at;                /* when stopping began (monotonic s) */
    double retry_at;               /* no starts before (a store refusal) */
    double start_at;               /* look for queued jobs from then on */
    struct served *served;         /* when each owner last got a slot */
    size_t nserved, capserved;
    uint64_t serves;               /* slots given so far */
};

static void wlock(struct app *a)
{
    pthread_mutex_lock(&a->wlock);
}

static void wunlock(struct app *a)
{
    pthread_mutex_unlock(&a->wlock);
}

void sched_wake(struct sched *s)
{
    char c = 1;
    ssize_t r;

    if (!s)
        return;
    r = write(s->wake[1], &c, 1);   /* full pipe: already awake */
    (void)r;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Failures worth retrying: the disk or the database may come back. */
static int transient(const struct store_err *e)
{
    return e->code == STORE_EFULL || e->code == STORE_EBUSY ||
           e->code == STORE_EIO || e->code == STORE_ENOMEM;
}

/* One line per job while its writes fail, not one per retry. */
static void write_failed(struct running *r, const char *what,
                         const struct store_err *e)
{
    if (!r->write_failing)
        fprintf(stderr, "ecopt serve: job %s: %s: %s (retrying)\n", r->id, what,
                e->msg);
    r->write_failing = 1;
}

/*
 * Writes the held rows. 0 when none are left; -1 when the store refused
 * them for now (they stay held, to be retried); a failure that retrying
 * cannot mend drops them, said in the log.
 */
static int flush_batch(struct running *r)
{
    struct store_err e = {0};
    int rc;

    if (!r->nbatch)
        return 0;
    wlock(r->app);
    rc = store_metrics_append_docs(r->app->writer, r->id, r->batch, r->docs,
                                   r->nbatch, &e);
    wunlock(r->app);
    if (rc < 0 && transient(&e)) {
        write_failed(r, "metric rows held", &e);
        return -1;
    }
    if (rc < 0)
        fprintf(stderr, "ecopt serve: job %s: %zu metric rows lost: %s\n", r->id,
                r->nbatch, e.msg);
    else if (r->write_failing)
        fprintf(stderr, "ecopt serve: job %s: writes work again\n", r->id);
    r->write_failing = 0;
    for (size_t i = 0; i < r->nbatch; i++)
        free(r->docs[i]);
    r->nbatch = 0;
    app_job_changed(r->app, r->id);
    return 0;
}

/* Room for one more row; NULL when memory runs out (the row is lost). */
static ec_metric *batch_slot(struct running *r)
{
    if (r->nbatch == r->capbatch) {
        size_t ncap = r->capbatch ? 2 * r->capbatch : MAX_BATCH;
        ec_metric *nb = realloc(r->batch, ncap * sizeof *nb);
        char **nd;

        if (!nb)
            return NULL;
        r->batch = nb;
        if (!(nd = realloc(r->docs, ncap * sizeof *nd)))
            return NULL;
        r->docs = nd;
        r->capbatch = ncap;
    }
    r->docs[r->nbatch] = NULL;
    return &r->batch[r->nbatch];
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
 * r->loss, set by job_version), written to path where the coordinator
 * reads them (ecopt run --pstar-hint) with the identity of the file they
 * were found for. 1 when written, 0 when the cache has nothing to offer,
 * -1 when the file could not be written; the coordinator then solves, so
 * a failure here costs time, never the job.
 */
static int write_pstar_hint(struct app *a, struct running *r, const char *path)
{
    struct store_pstar *v = NULL;
    struct store_err e = {0};
    struct store *st;
    size_t n = 0;
    json_t *entries, *root;
    int rc = -1;

    st = app_reader(a);
    if (store_pstar_list(st, r->sha256, r->loss, 256, &v, &n, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    app_reader_done(a, st);
    if (n == 0) {
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

/*
 * A P* the coordinator solved for goes into the cache for the next job,
 * when the coordinator read the version the job recorded (it hashed the
 * bytes it parsed, and says so in its start record's dataset).
 */
static void cache_pstar(struct running *r, json_t *dataset, json_t *problem)
{
    json_t *solver = json_object_get(problem, "solver");
    struct store_pstar_key key = {r->sha256, r->loss,
                                  num(problem, "lambda1"), num(problem, "lambda2")};
    struct store_pstar val = {0};
    struct store_err e = {0};
    const char *method = json_string_value(json_object_get(solver, "method"));

    const char *read = json_string_value(json_object_get(dataset, "sha256"));

    if (!r->sha256[0] || json_is_true(json_object_get(solver, "cached")) || !method)
        return;
    if (!read || strcmp(read, r->sha256) != 0) {
        fprintf(stderr, "ecopt serve: job %s: error: its coordinator read version "
                "%.64s of the dataset, not %s: P* not cached\n", r->id,
                read ? read : "(none)", r->sha256);
        return;
    }
    val.p_star = num(problem, "P_star");
    val.bound = num(solver, "bound");
    snprintf(val.method, sizeof val.method, "%s", method);
    if (!isfinite(val.p_star) || !isfinite(key.lambda1) || !isfinite(key.lambda2))
        return;
    if (store_pstar_put(r->app->writer, &key, &val, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: %sP* not cached: %s\n", r->id,
                e.code == STORE_ECONFLICT ? "error: " : "", e.msg);
}

/* The row is in the batch; stored when the batch is full or due. */
static void batch_commit(struct running *r, char *doc)
{
    if (r->nbatch == 0)
        r->batch_at = r->read_last;
    r->docs[r->nbatch] = doc;
    if (++r->nbatch % MAX_BATCH == 0)
        flush_batch(r);
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

/* 1 when r may store one more row (counted), 0 when it is over quota. */
static int quota_take(struct running *r)
{
    struct sched *s = r->app->sched;

    if (r->over_quota || r->rows_left <= 0) {
        r->over_quota = 1;
        return 0;
    }
    /* Only this thread changes run[] and the counts. */
    for (size_t i = 0; i < s->nrun; i++)
        if (strcmp(s->run[i]->owner, r->owner) == 0 && s->run[i]->rows_left > 0)
            s->run[i]->rows_left--;
    return 1;
}

/*
 * A metric record as the coordinator writes it, read without a JSON
 * parser: one per round with eval_every 1. Any other line (or a metric
 * record of another shape) goes to on_record.
 */
static int take_metric(void *ctx, const char *line, size_t len)
{
    struct running *r = ctx;
    ec_metric *m;
    char *doc;

    if (len >= DESCRIBE_RECORD_MAX || !(m = batch_slot(r)) || !(doc = malloc(len + 1)))
        return 0;
    if (!quota_take(r)) {
        free(doc);
        return 1;               /* taken, and dropped: over the quota */
    }
    /* Only the round is read: the store keeps the numbers in the doc. */
    if (describe_metric_record_check(line, len, &m->round, doc) < 0) {
        free(doc);
        return 0;
    }
    batch_commit(r, doc);
    return 1;
}

/*
 * The stop_reason of a final record's "stop" (ec_stop_name, or
 * "start_failed" from a coordinator that could not start the job): the
 * store's table says which stands for which.
 */
static const char *stop_reason_of(const char *stop)
{
    return store_stop_name(store_stop_of_final(stop));
}

/* One report record of a running job (format/report.h parsed it). */
static void on_record(void *ctx, json_t *rec)
{
    struct running *r = ctx;
    struct report_record rr;
    struct store_err e = {0};
    const char *line;
    size_t len;

    report_parse(rec, &rr);
    if (rr.type == REPORT_START) {
        char *problem = json_dumps(rr.problem, JSON_COMPACT);
        char *params = json_dumps(rr.params, JSON_COMPACT);
        wlock(r->app);
        if (store_job_set_running(r->app->writer, r->id, runner_pid(r->rj), problem,
                                  params, &e) < 0)
            fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
        cache_pstar(r, rr.dataset, rr.problem);
        wunlock(r->app);
        free(problem);
        free(params);
    } else if (rr.type == REPORT_METRIC) {
        ec_metric *m = quota_take(r) ? batch_slot(r) : NULL;

        if (!m && r->over_quota)
            return;             /* dropped: over the quota */
        if (!m) {
            fprintf(stderr, "ecopt serve: job %s: out of memory: a metric row lost\n",
                    r->id);
            return;
        }
        if (!rr.row_ok)
            return;
        *m = rr.row;
        line = runner_line(r->rj, &len);
        batch_commit(r, report_metric_doc(rec, line, len));
    } else if (rr.type == REPORT_FINAL) {
        r->have_final = 1;
        r->final_stop = stop_reason_of(rr.stop);
        if (rr.rss_sum_bytes >= 0)
            r->usage.rss_sum_bytes = (int64_t)rr.rss_sum_bytes;
        r->final_state = rr.status == REPORT_SUCCEEDED   ? STORE_JOB_SUCCEEDED
                         : rr.status == REPORT_CANCELLED ? STORE_JOB_CANCELLED
                                                         : STORE_JOB_FAILED;
        snprintf(r->reason, sizeof r->reason, "%s", rr.reason);
    }
}

static int ms_until(double t, double now);

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

/* SIGTERM to the job's processes, once; the escalation counts from it.
 * Called with s->lock held (or before the job is listed). */
static void stop_job(struct running *r)
{
    if (!r->term_at)
        r->term_at = ec_clock();
    runner_cancel(r->rj);
}

/*
 * The job's escalation at now: SIGTERM at its deadline, SIGKILL
 * KILL_GRACE after the SIGTERM. 1 when it must be reaped now although its
 * pipe is open (REAP_GRACE after the SIGKILL).
 */
static int escalate(struct sched *s, struct running *r, double now)
{
    int force = 0;

    pthread_mutex_lock(&s->lock);
    if (!r->reaped && r->rj) {
        if (!r->term_at && r->deadline > 0 && now >= r->deadline) {
            r->timed_out = !r->have_final;
            stop_job(r);
        }
        if (!r->term_at && r->over_quota)
            stop_job(r);
        if (r->term_at && !r->kill_at && now >= r->term_at + KILL_GRACE) {
            r->kill_at = now;
            runner_kill(r->rj);
        }
        force = r->kill_at && now >= r->kill_at + REAP_GRACE;
    }
    pthread_mutex_unlock(&s->lock);
    return force;
}

/* The job's coordinator is gone: reap it and decide how the job ended. */
static void reap(struct sched *s, struct running *r)
{
    enum store_job_state state;
    char *reason = r->end_reason, hint[PATH_MAX + 64];
    size_t rlen = sizeof r->end_reason;
    int st = 0;

    runner_reap(r->rj, 2.0, &st);
    runner_usage(r->rj, &r->usage.cpu_seconds, &r->usage.max_rss_bytes);
    r->reaped = 1;
    s->start_at = 0;            /* its place may go to a queued job */
    snprintf(hint, sizeof hint, "%s/%s.pstar.json", s->app->cfg.state_dir, r->id);
    unlink(hint);               /* the P* hint, if there was one */
    if (r->timed_out && !r->cancel_requested) {
        /* Whatever it said after the SIGTERM: it ran out of time. */
        state = STORE_JOB_FAILED;
        r->end_stop = store_stop_name(STORE_STOP_MAX_SECONDS);
        snprintf(reason, rlen,
                 "the job ran %.0f s past its time limit (max_seconds %g) and "
                 "was stopped%s",
                 DEADLINE_SLACK, r->max_seconds,
                 r->kill_at ? ": it did not end on SIGTERM, so its processes "
                              "were killed" : "");
    } else if (r->over_quota && !r->cancel_requested &&
               (!r->have_final || r->final_state == STORE_JOB_CANCELLED)) {
        state = STORE_JOB_FAILED;
        r->end_stop = store_stop_name(STORE_STOP_QUOTA);
        snprintf(reason, rlen, "stopped: the metric rows of its token's jobs reached their "
                 "quota (quota_metric_rows %llu); its rows so far are kept",
                 (unsigned long long)s->app->cfg.quota_metric_rows);
    } else if (r->have_final) {
        state = r->final_state;
        r->end_stop = r->final_stop;
        snprintf(reason, rlen, "%s", r->reason);
    } else if (r->cancel_requested) {
        state = STORE_JOB_CANCELLED;
        r->end_stop = store_stop_name(STORE_STOP_CANCELLED);
        if (r->kill_at)
            snprintf(reason, rlen,
                     "cancelled: the coordinator did not end within %.0f s of "
                     "SIGTERM, so its processes were killed",
                     KILL_GRACE);
        else
            snprintf(reason, rlen, "cancelled");
    } else {
        state = STORE_JOB_FAILED;
        r->end_stop = store_stop_name(STORE_STOP_COORDINATOR_DIED);
        if (WIFSIGNALED(st))
            snprintf(reason, rlen,
                     "coordinator died (signal %d) without a final report",
                     WTERMSIG(st));
        else
            snprintf(reason, rlen,
                     "coordinator exited with status %d without a final report",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    if (s->stopping && !r->have_final) {
        state = STORE_JOB_INTERRUPTED;
        r->end_stop = store_stop_name(STORE_STOP_INTERRUPTED);
        snprintf(reason, rlen, "the service stopped while the job ran");
    } else if (s->stopping && r->final_state == STORE_JOB_CANCELLED &&
               !r->cancel_requested) {
        state = STORE_JOB_INTERRUPTED;
        r->end_stop = store_stop_name(STORE_STOP_INTERRUPTED);
        snprintf(reason, rlen, "the service stopped while the job ran");
    }
    r->end_state = state;
}

/*
 * Records a reaped job's last rows and its end. 0 when done (or past
 * mending); -1 when the store refused for now: the job stays listed and
 * this is tried again, so a full disk delays the record but loses nothing.
 */
static int record_end(struct sched *s, struct running *r)
{
    struct store_err e = {0};
    int rc;

    if (r->requeued) {
        runner_free(r->rj);
        r->rj = NULL;
        return 0;
    }
    if (flush_batch(r) < 0)
        return -1;
    wlock(s->app);
    rc = store_job_end_usage(s->app->writer, r->id, r->end_state, r->end_stop,
                             r->end_reason, &r->usage, &e);
    wunlock(s->app);
    if (rc < 0 && transient(&e)) {
        write_failed(r, "the job's end is held", &e);
        return -1;
    }
    if (rc < 0 && e.code != STORE_ESTATE)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    app_job_changed(s->app, r->id);
    runner_free(r->rj);
    r->rj = NULL;
    return 0;
}

static void remove_running(struct sched *s, size_t i)
{
    pthread_mutex_lock(&s->lock);
    for (size_t k = 0; k < s->run[i]->nbatch; k++)
        free(s->run[i]->docs[k]);
    free(s->run[i]->docs);
    free(s->run[i]->batch);
    free(s->run[i]);
    s->run[i] = s->run[--s->nrun];
    pthread_mutex_unlock(&s->lock);
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
static void start_jobs(struct sched *s)
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

/* Milliseconds from now until t, rounded up; 0 once it has come. */
static int ms_until(double t, double now)
{
    return t <= now ? 0 : (int)((t - now) * 1000) + 1;
}

/* Milliseconds until the job's batch is due for the store: 0 when it is
   due now, -1 when there is nothing to store or the store refuses (the
   loop's own timeout paces the retries). */
static int batch_due_ms(const struct running *r, double now)
{
    if (!r->nbatch || r->write_failing)
        return -1;
    return r->nbatch >= MAX_BATCH ? 0 : ms_until(r->batch_at + FLUSH_SECONDS, now);
}

/* The job's pipe is read at all: its coordinator has not been reaped,
   and the rows taken from it and not yet stored are under MAX_PENDING. */
static int readable(const struct running *r)
{
    return !r->reaped && r->nbatch < MAX_PENDING;
}

/* After a read of the job's pipe: when to read it next. */
static void pace_reads(struct running *r, double now)
{
    r->read_at = now + runner_read_wait(r->rj, now - r->read_last, FLUSH_SECONDS);
    r->read_last = now;
}

static void *sched_main(void *arg)
{
    struct sched *s = arg;

    for (;;) {
        struct pollfd pfd[1 + 1024];
        size_t np = 0;
        char drain[64];
        int timeout = 250;
        double now;

        if (ec_clock() >= s->start_at) {
            start_jobs(s);
            s->start_at = ec_clock() + START_SECONDS;
        }
        app_tick(s->app);
        pthread_mutex_lock(&s->lock);
        pfd[np++] = (struct pollfd){s->wake[0], POLLIN, 0};
        /* Not the pipes of jobs that ended, nor of those holding all the
         * rows they may: their coordinators wait until the store takes
         * them (the 250 ms timeout retries); nor those read too recently. */
        now = ec_clock();
        if (ms_until(s->start_at, now) < timeout)
            timeout = ms_until(s->start_at, now);
        for (size_t i = 0; i < s->nrun && np < 1025; i++) {
            struct running *r = s->run[i];
            int due = batch_due_ms(r, now), next = ms_until(r->read_at, now);

            if (due >= 0 && due < timeout)
                timeout = due;
            if (!r->reaped && r->rj) {
                /* The next step of its escalation (escalate() locks). */
                double step = !r->term_at ? r->deadline
                            : !r->kill_at ? r->term_at + KILL_GRACE
                                          : r->kill_at + REAP_GRACE;
                if (step > 0 && ms_until(step, now) < timeout)
                    timeout = ms_until(step, now);
            }
            if (!readable(r))
                continue;
            if (next == 0)
                pfd[np++] = (struct pollfd){runner_fd(r->rj), POLLIN, 0};
            else if (next < timeout)
                timeout = next;
        }
        int stopping = s->stopping;
        size_t nrun = s->nrun;
        pthread_mutex_unlock(&s->lock);
        if (stopping && nrun == 0)
            break;
        if (stopping && ec_clock() - s->stop_at > 5.0) {
            /* A coordinator that ignores SIGTERM must not hold the
             * shutdown: kill its whole group. */
            pthread_mutex_lock(&s->lock);
            for (size_t i = 0; i < s->nrun; i++)
                if (!s->run[i]->reaped)
                    kill(-runner_pid(s->run[i]->rj), SIGKILL);
            pthread_mutex_unlock(&s->lock);
        }
        if (poll(pfd, np, timeout) < 0 && errno != EINTR)
            continue;
        while (read(s->wake[0], drain, sizeof drain) > 0)
            s->start_at = 0;    /* a submission, or the stop */
        /* Only this thread removes entries, so indices stay valid. */
        for (size_t i = 0; i < s->nrun;) {
            struct running *r = s->run[i];
            char err[256];
            int rc = 1, force = escalate(s, r, ec_clock());

            if (readable(r) && ec_clock() >= r->read_at) {
                rc = runner_read(r->rj, take_metric, on_record, r, err, sizeof err);
                pace_reads(r, ec_clock());
            }
            if (!r->reaped) {
                /* Stored when due; a refused batch is tried again each pass. */
                if (rc != 1 || r->write_failing || batch_due_ms(r, ec_clock()) == 0)
                    flush_batch(r);
                if (rc == 1 && !force) {
                    i++;
                    continue;
                }
                if (rc < 0) {
                    /* A broken channel: stop believing it, end the job. */
                    runner_cancel(r->rj);
                    if (!r->have_final) {
                        r->have_final = 1;
                        r->final_state = STORE_JOB_FAILED;
                        r->final_stop = store_stop_name(STORE_STOP_FAILED);
                        snprintf(r->reason, sizeof r->reason, "%s", err);
                    }
                }
                reap(s, r);
            }
            if (record_end(s, r) == 0 ||
                (stopping && ec_clock() - s->stop_at > STOP_RETRY_SECONDS)) {
                if (r->rj) {
                    fprintf(stderr, "ecopt serve: job %s: its end and %zu rows were not "
                            "recorded before the stop; it will show as interrupted\n",
                            r->id, r->nbatch);
                    runner_free(r->rj);
                }
                remove_running(s, i);
            } else {
                i++;
            }
        }
    }
    return NULL;
}

int sched_start(struct app *app, char *err, size_t errlen)
{
    struct sched *s = calloc(1, sizeof *s);

    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->app = app;
    pthread_mutex_init(&s->lock, NULL);
    if (mkdir(app->cfg.state_dir, 0777) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "state directory %s: %s", app->cfg.state_dir,
                 strerror(errno));
        free(s);
        return -1;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0 ||
        pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        snprintf(err, errlen, "cannot start the scheduler: %s", strerror(errno));
        free(s);
        return -1;
    }
    app->sched = s;
    return 0;
}

int sched_cancel(struct sched *s, const char *id)
{
    int rc = -1;

    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < s->nrun; i++) {
        if (strcmp(s->run[i]->id, id) == 0) {
            s->run[i]->cancel_requested = 1;
            if (!s->run[i]->reaped && s->run[i]->rj)
                stop_job(s->run[i]);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    s->stop_at = ec_clock();
    for (size_t i = 0; i < s->nrun; i++)
        runner_cancel(s->run[i]->rj);
    pthread_mutex_unlock(&s->lock);
    sched_wake(s);
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->run);
    free(s->served);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
