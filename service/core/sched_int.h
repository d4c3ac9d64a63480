/*
 * What the scheduler's two files share (scheduler.c: the thread, reading
 * the report pipes, reaping and recording ends; sched_start.c: choosing
 * and starting queued jobs): the state of the scheduler and of each job
 * it runs, and a few small helpers. Not a contract: scheduler.h is.
 */
#ifndef ECOPT_SCHED_INT_H
#define ECOPT_SCHED_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdint.h>

#include "app.h"
#include "ecopt/clock.h"
#include "runner.h"
#include "scheduler.h"
#include "store.h"

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
    size_t *doc_at;                /* where each row's document begins in
                                      text (DOC_NONE: it has none) */
    char **docs;                   /* the same as pointers, at a store */
    size_t nbatch, capbatch;
    char *text;                    /* the documents of the rows held, one
                                      after the other, each with its NUL:
                                      one buffer for the batch, not an
                                      allocation per row */
    size_t text_len, text_cap;
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

static inline void wlock(struct app *a)
{
    pthread_mutex_lock(&a->wlock);
}

static inline void wunlock(struct app *a)
{
    pthread_mutex_unlock(&a->wlock);
}

/* Failures worth retrying: the disk or the database may come back. */
static inline int transient(const struct store_err *e)
{
    return e->code == STORE_EFULL || e->code == STORE_EBUSY ||
           e->code == STORE_EIO || e->code == STORE_ENOMEM;
}

/* SIGTERM to the job's processes, once; the escalation counts from it.
 * Called with s->lock held (or before the job is listed). */
static inline void stop_job(struct running *r)
{
    if (!r->term_at)
        r->term_at = ec_clock();
    runner_cancel(r->rj);
}

/* Starts queued jobs, fairly between owners, while the limits allow
   (sched_start.c). */
void sched__start_jobs(struct sched *s);

#endif
