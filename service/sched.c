/*
 * The scheduler: one thread that starts queued jobs as coordinator
 * processes within the limits, reads their report records into the store
 * (one transaction per job per wake-up), and finishes them. It is the only
 * code that starts or reaps coordinators.
 */
#define _GNU_SOURCE
#include "app.h"

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

#include "runner.h"

#define MAX_BATCH 512

struct running {
    char id[STORE_ID_LEN + 1];
    struct runner_job *rj;
    uint32_t workers;
    int cancel_requested;
    int have_final;
    enum store_job_state final_state;
    char reason[512];
    ec_metric batch[MAX_BATCH];
    size_t nbatch;
    struct app *app;
};

struct sched {
    struct app *app;
    pthread_t thread;
    pthread_mutex_t lock;          /* guards run[] and stopping */
    struct running **run;
    size_t nrun, caprun;
    int wake[2];
    int stopping;
    double stop_at;                /* when stopping began (monotonic s) */
};

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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
    ssize_t r = write(s->wake[1], &c, 1);   /* full pipe: already awake */
    (void)r;
}

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void flush_batch(struct running *r)
{
    struct store_err e = {0};

    if (!r->nbatch)
        return;
    wlock(r->app);
    if (store_metrics_append(r->app->writer, r->id, r->batch, r->nbatch, &e) < 0)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    wunlock(r->app);
    r->nbatch = 0;
    watch_notify(r->app, r->id);
}

/* One report record of a running job. */
static void on_record(void *ctx, json_t *rec)
{
    struct running *r = ctx;
    const char *type = json_string_value(json_object_get(rec, "type"));
    struct store_err e = {0};

    if (!type)
        return;
    if (strcmp(type, "start") == 0) {
        char *problem = json_dumps(json_object_get(rec, "problem"), JSON_COMPACT);
        char *params = json_dumps(json_object_get(rec, "params"), JSON_COMPACT);
        wlock(r->app);
        if (store_job_set_running(r->app->writer, r->id, runner_pid(r->rj), problem,
                                  params, &e) < 0)
            fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
        wunlock(r->app);
        free(problem);
        free(params);
    } else if (strcmp(type, "metric") == 0) {
        ec_metric *m = &r->batch[r->nbatch];
        json_t *round = json_object_get(rec, "round");

        if (!json_is_integer(round) || json_integer_value(round) < 0)
            return;
        m->round = (uint64_t)json_integer_value(round);
        m->bits_up = num(rec, "bits_up");
        m->bits_down = num(rec, "bits_down");
        m->paper_bits = num(rec, "paper_bits");
        m->P = num(rec, "P");
        m->gap = num(rec, "gap");
        m->rel_gap = num(rec, "rel_gap");
        m->grad_norm = num(rec, "grad_norm");
        m->seconds = num(rec, "seconds");
        m->wire_up = num(rec, "wire_up");
        m->wire_down = num(rec, "wire_down");
        if (++r->nbatch == MAX_BATCH)
            flush_batch(r);
    } else if (strcmp(type, "final") == 0) {
        const char *status = json_string_value(json_object_get(rec, "status"));
        const char *reason = json_string_value(json_object_get(rec, "reason"));

        r->have_final = 1;
        r->final_state = status && strcmp(status, "succeeded") == 0 ? STORE_JOB_SUCCEEDED
                         : status && strcmp(status, "cancelled") == 0 ? STORE_JOB_CANCELLED
                                                                      : STORE_JOB_FAILED;
        snprintf(r->reason, sizeof r->reason, "%s", reason ? reason : "");
    }
}

/* The job's coordinator is gone: reap it and record how the job ended. */
static void finish(struct sched *s, struct running *r)
{
    struct store_err e = {0};
    enum store_job_state state;
    char reason[600];
    int st = 0;

    flush_batch(r);
    runner_reap(r->rj, 2.0, &st);
    if (r->have_final) {
        state = r->final_state;
        snprintf(reason, sizeof reason, "%s", r->reason);
    } else if (r->cancel_requested) {
        state = STORE_JOB_CANCELLED;
        snprintf(reason, sizeof reason, "cancelled");
    } else {
        state = STORE_JOB_FAILED;
        if (WIFSIGNALED(st))
            snprintf(reason, sizeof reason,
                     "coordinator died (signal %d) without a final report",
                     WTERMSIG(st));
        else
            snprintf(reason, sizeof reason,
                     "coordinator exited with status %d without a final report",
                     WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    }
    if (s->stopping && !r->have_final) {
        state = STORE_JOB_INTERRUPTED;
        snprintf(reason, sizeof reason, "the service stopped while the job ran");
    } else if (s->stopping && r->final_state == STORE_JOB_CANCELLED &&
               !r->cancel_requested) {
        state = STORE_JOB_INTERRUPTED;
        snprintf(reason, sizeof reason, "the service stopped while the job ran");
    }
    wlock(s->app);
    if (store_job_finish(s->app->writer, r->id, state, reason, &e) < 0 &&
        e.code != STORE_ESTATE)
        fprintf(stderr, "ecopt serve: job %s: %s\n", r->id, e.msg);
    wunlock(s->app);
    watch_notify(s->app, r->id);
    runner_free(r->rj);
}

static void remove_running(struct sched *s, size_t i)
{
    pthread_mutex_lock(&s->lock);
    free(s->run[i]);
    s->run[i] = s->run[--s->nrun];
    pthread_mutex_unlock(&s->lock);
}

/* Starts queued jobs, oldest first, while the limits allow. */
static void start_jobs(struct sched *s)
{
    struct app *a = s->app;

    for (;;) {
        struct store_job *q = NULL;
        struct store_counts c;
        struct store_err e = {0};
        size_t n = 0;
        unsigned workers_now = 0;

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->nrun; i++)
            workers_now += s->run[i]->workers;
        size_t nrun = s->nrun;
        pthread_mutex_unlock(&s->lock);
        if (s->stopping || nrun >= a->cfg.max_running)
            return;
        wlock(a);
        int rc = store_jobs_next_queued(a->writer, 1, &q, &n, &e);
        wunlock(a);
        (void)c;
        if (rc < 0 || n == 0) {
            store_jobs_free(q, n);
            return;
        }
        if (nrun > 0 && workers_now + q[0].workers > a->cfg.max_total_workers) {
            store_jobs_free(q, n);
            return;             /* wait for workers to free up */
        }

        struct running *r = calloc(1, sizeof *r);
        char spec_path[PATH_MAX + 64], log_path[PATH_MAX + 64], err[256];
        struct runner_opts o = {0};
        FILE *f;

        snprintf(spec_path, sizeof spec_path, "%s/%s.json", a->cfg.state_dir, q[0].id);
        snprintf(log_path, sizeof log_path, "%s/%s.log", a->cfg.state_dir, q[0].id);
        o.exe = a->cfg.exe;
        o.spec_path = spec_path;
        o.data_dir = a->cfg.data_dir;
        o.log_path = log_path;
        err[0] = '\0';
        if (!r)
            snprintf(err, sizeof err, "out of memory");
        else if (!(f = fopen(spec_path, "w")))
            snprintf(err, sizeof err, "%.180s: %.60s", spec_path, strerror(errno));
        else if ((fputs(q[0].spec, f) < 0) | (fclose(f) != 0))
            snprintf(err, sizeof err, "writing %.180s: %.50s", spec_path, strerror(errno));
        else
            runner_spawn(&o, &r->rj, err, sizeof err);   /* fills err on failure */
        if (err[0]) {
            char reason[300];
            snprintf(reason, sizeof reason, "could not start the coordinator: %s", err);
            wlock(a);
            store_job_finish(a->writer, q[0].id, STORE_JOB_FAILED, reason, &e);
            wunlock(a);
            free(r);
            store_jobs_free(q, n);
            continue;
        }
        memcpy(r->id, q[0].id, sizeof r->id);
        r->workers = q[0].workers;
        r->app = a;
        /* Listed before the store says running, so that a cancel which
         * sees the job running always finds its coordinator here. */
        pthread_mutex_lock(&s->lock);
        if (s->nrun == s->caprun) {
            size_t ncap = s->caprun ? s->caprun * 2 : 8;
            struct running **nr = realloc(s->run, ncap * sizeof *nr);
            if (nr) {
                s->run = nr;
                s->caprun = ncap;
            }
        }
        int listed = s->nrun < s->caprun;
        if (listed)
            s->run[s->nrun++] = r;
        pthread_mutex_unlock(&s->lock);
        if (!listed) {
            /* No memory to track it: end it now rather than lose it. */
            runner_cancel(r->rj);
            runner_reap(r->rj, 2.0, NULL);
            runner_free(r->rj);
            free(r);
            wlock(a);
            store_job_finish(a->writer, q[0].id, STORE_JOB_FAILED,
                             "out of memory tracking the coordinator", &e);
            wunlock(a);
            store_jobs_free(q, n);
            continue;
        }
        wlock(a);
        if (store_job_set_running(a->writer, r->id, runner_pid(r->rj), NULL, NULL, &e) < 0)
            r->cancel_requested = 1;    /* cancelled meanwhile: end it */
        wunlock(a);
        if (r->cancel_requested)
            runner_cancel(r->rj);
        store_jobs_free(q, n);
    }
}

static void *sched_main(void *arg)
{
    struct sched *s = arg;

    for (;;) {
        struct pollfd pfd[1 + 1024];
        size_t np = 0;
        char drain[64];

        start_jobs(s);
        watch_sweep(s->app);
        pthread_mutex_lock(&s->lock);
        pfd[np++] = (struct pollfd){s->wake[0], POLLIN, 0};
        for (size_t i = 0; i < s->nrun && np < 1025; i++)
            pfd[np++] = (struct pollfd){runner_fd(s->run[i]->rj), POLLIN, 0};
        int stopping = s->stopping;
        size_t nrun = s->nrun;
        pthread_mutex_unlock(&s->lock);
        if (stopping && nrun == 0)
            break;
        if (stopping && mono() - s->stop_at > 5.0) {
            /* A coordinator that ignores SIGTERM must not hold the
             * shutdown: kill its whole group. */
            pthread_mutex_lock(&s->lock);
            for (size_t i = 0; i < s->nrun; i++)
                kill(-runner_pid(s->run[i]->rj), SIGKILL);
            pthread_mutex_unlock(&s->lock);
        }
        if (poll(pfd, np, 250) < 0 && errno != EINTR)
            continue;
        while (read(s->wake[0], drain, sizeof drain) > 0)
            ;
        /* Only this thread removes entries, so indices stay valid. */
        for (size_t i = 0; i < s->nrun;) {
            struct running *r = s->run[i];
            char err[256];
            int rc = runner_read(r->rj, on_record, r, err, sizeof err);

            flush_batch(r);
            if (rc == 1) {
                i++;
                continue;
            }
            if (rc < 0) {
                /* A broken channel: stop believing it, end the job. */
                runner_cancel(r->rj);
                if (!r->have_final) {
                    r->have_final = 1;
                    r->final_state = STORE_JOB_FAILED;
                    snprintf(r->reason, sizeof r->reason, "%s", err);
                }
            }
            finish(s, r);
            remove_running(s, i);
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
    if (mkdir(app->cfg.state_dir, 0750) < 0 && errno != EEXIST) {
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
            runner_cancel(s->run[i]->rj);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

unsigned sched_running(struct sched *s)
{
    unsigned n;

    pthread_mutex_lock(&s->lock);
    n = (unsigned)s->nrun;
    pthread_mutex_unlock(&s->lock);
    return n;
}

void sched_stop(struct sched *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stopping = 1;
    s->stop_at = mono();
    for (size_t i = 0; i < s->nrun; i++)
        runner_cancel(s->run[i]->rj);
    pthread_mutex_unlock(&s->lock);
    sched_wake(s);
    pthread_join(s->thread, NULL);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s->run);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
