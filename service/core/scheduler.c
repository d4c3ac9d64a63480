/*
 * The scheduler: one thread that starts queued jobs as coordinator
 * processes within the limits (sched_start.c), reads their report records
 * into the store (one transaction per job per wake-up), and finishes them.
 * With sched_start.c it is the only code that starts or reaps
 * coordinators.
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
#include "describe.h"
#include "ecopt/clock.h"
#include "report.h"
#include "runner.h"
#include "sched_int.h"

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
/* A held row without a document (stored from its numbers). */
#define DOC_NONE SIZE_MAX

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
    for (size_t i = 0; i < r->nbatch; i++)
        r->docs[i] = r->doc_at[i] == DOC_NONE ? NULL : r->text + r->doc_at[i];
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
    r->nbatch = 0;
    r->text_len = 0;
    app_job_changed(r->app, r->id);
    return 0;
}

/* Room for one more row, without a document so far; NULL when memory
   runs out (the row is lost). */
static ec_metric *batch_slot(struct running *r)
{
    if (r->nbatch == r->capbatch) {
        size_t ncap = r->capbatch ? 2 * r->capbatch : MAX_BATCH;
        ec_metric *nb = realloc(r->batch, ncap * sizeof *nb);
        size_t *na;
        char **nd;

        if (!nb)
            return NULL;
        r->batch = nb;
        if (!(na = realloc(r->doc_at, ncap * sizeof *na)))
            return NULL;
        r->doc_at = na;
        if (!(nd = realloc(r->docs, ncap * sizeof *nd)))
            return NULL;
        r->docs = nd;
        r->capbatch = ncap;
    }
    r->doc_at[r->nbatch] = DOC_NONE;
    return &r->batch[r->nbatch];
}

/* Room for n more bytes of documents; -1 when memory runs out. */
static int text_room(struct running *r, size_t n)
{
    size_t ncap = r->text_cap ? r->text_cap : (size_t)64 << 10;
    char *nt;

    if (r->text_cap - r->text_len >= n)
        return 0;
    while (ncap - r->text_len < n)
        ncap *= 2;
    if (!(nt = realloc(r->text, ncap)))
        return -1;
    r->text = nt;
    r->text_cap = ncap;
    return 0;
}

/* The held row's document, copied after the others; without one when
   memory runs out (the row is then stored from its numbers). */
static void batch_doc(struct running *r, const char *doc)
{
    size_t len = doc ? strlen(doc) + 1 : 0;

    if (!doc || text_room(r, len) < 0)
        return;
    memcpy(r->text + r->text_len, doc, len);
    r->doc_at[r->nbatch] = r->text_len;
    r->text_len += len;
}

/*
 * A lambda_max the coordinator's Lanczos run found over the rows in the
 * file's order (the contiguous split) goes into the cache for the next
 * job on the version it read; other orders give other last bits.
 */
static void cache_lmax(struct running *r, json_t *dataset, json_t *problem)
{
    json_t *lm = json_object_get(problem, "lambda_max");
    json_t *split = json_object_get(problem, "split");
    const char *read = json_string_value(json_object_get(dataset, "sha256"));
    const char *method = json_string_value(json_object_get(lm, "method"));
    const char *type = json_string_value(json_object_get(split, "type"));
    struct store_lmax val = {0};
    struct store_err e = {0};

    if (!r->sha256[0] || !read || strcmp(read, r->sha256) != 0 || !method ||
        !type || strcmp(type, "contiguous") != 0 ||
        json_is_true(json_object_get(lm, "cached")) ||
        !json_is_number(json_object_get(lm, "value")) ||
        json_integer_value(json_object_get(lm, "steps")) < 1)
        return;                 /* (no steps: data with no nonzeros) */
    val.value = json_number_value(json_object_get(lm, "value"));
    val.steps = (uint32_t)json_integer_value(json_object_get(lm, "steps"));
    snprintf(val.method, sizeof val.method, "%s", method);
    if (store_lmax_put(r->app->writer, r->sha256, &val, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: lambda_max not cached: %s\n", r->id,
                e.msg);
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

/* The row (and its document) is in the batch; stored when the batch is
   full or due. */
static void batch_commit(struct running *r)
{
    if (r->nbatch == 0)
        r->batch_at = r->read_last;
    if (++r->nbatch % MAX_BATCH == 0)
        flush_batch(r);
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
    int doc_len;

    if (len >= DESCRIBE_RECORD_MAX || !(m = batch_slot(r)) || text_room(r, len + 1) < 0)
        return 0;
    if (!quota_take(r))
        return 1;               /* taken, and dropped: over the quota */
    /* Only the round is read: the store keeps the numbers in the doc,
       written straight into the batch's buffer. */
    doc_len = describe_metric_record_check(line, len, &m->round, r->text + r->text_len);
    if (doc_len < 0)
        return 0;
    r->doc_at[r->nbatch] = r->text_len;
    r->text_len += (size_t)doc_len + 1;
    batch_commit(r);
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

/* ECLK's end record of a final record, kept with the job as it came
 * (api/report-format.md, "final"). */
static void store_eclk(struct running *r, json_t *eclk)
{
    struct store_err e = {0};
    char *text;

    if (!json_is_object(eclk) || !(text = json_dumps(eclk, JSON_COMPACT)))
        return;
    wlock(r->app);
    if (store_job_set_eclk(r->app->writer, r->id, text, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    wunlock(r->app);
    free(text);
}

/* One report record of a running job (format/report.h parsed it). */
static void on_record(void *ctx, json_t *rec)
{
    struct running *r = ctx;
    struct report_record rr;
    struct store_err e = {0};
    const char *line;
    char *doc;
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
        cache_lmax(r, rr.dataset, rr.problem);
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
        doc = report_metric_doc(rec, line, len);
        batch_doc(r, doc);
        free(doc);
        batch_commit(r);
    } else if (rr.type == REPORT_FINAL) {
        r->have_final = 1;
        r->final_stop = stop_reason_of(rr.stop);
        if (rr.rss_sum_bytes >= 0)
            r->usage.rss_sum_bytes = (int64_t)rr.rss_sum_bytes;
        r->final_state = rr.status == REPORT_SUCCEEDED   ? STORE_JOB_SUCCEEDED
                         : rr.status == REPORT_CANCELLED ? STORE_JOB_CANCELLED
                                                         : STORE_JOB_FAILED;
        snprintf(r->reason, sizeof r->reason, "%s", rr.reason);
        store_eclk(r, rr.eclk);
    }
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
    free(s->run[i]->docs);
    free(s->run[i]->doc_at);
    free(s->run[i]->text);
    free(s->run[i]->batch);
    free(s->run[i]);
    s->run[i] = s->run[--s->nrun];
    pthread_mutex_unlock(&s->lock);
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
            sched__start_jobs(s);
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
