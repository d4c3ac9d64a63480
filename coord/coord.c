/*
 * coord_run: one job from its spec to its final record (coord.h). The
 * steps, each a function below: read the spec, launch (which may end this
 * process's part), read the data and the P* hint, drop to the job's user,
 * build the problem and solve for P*, run the rounds and report them.
 */
#include "coord_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ecopt/clock.h"
#include "outcome.h"
#include "report.h"

/* The largest job spec read. */
#define SPEC_MAX (1 << 20)

/* One job's state, in the order it is filled. */
struct coord {
    const struct coord_opts *o;
    const struct coord_view *v;
    FILE *info;
    struct report_writer rw;
    double started;
    char *text;                 /* the spec's bytes */
    struct jobspec spec;
    const struct launcher *ln;
    struct launch l;
    ec_libsvm_opts ropts;
    char shown[2048];
    ec_dataset ds;
    json_t *hint;
    ec_problem pb;
    ec_params prm;
    ec_summary sum;
    struct coord_job job;
};

struct coord_usage coord_usage_now(const ec_summary *sum)
{
    struct rusage self, kids;
    struct coord_usage u;

    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    u.cpu_seconds = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec +
                             kids.ru_utime.tv_sec + kids.ru_stime.tv_sec) +
                    1e-6 * (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec +
                                    kids.ru_utime.tv_usec + kids.ru_stime.tv_usec);
    u.cpu_seconds += sum->workers_cpu;
    u.own_rss = 1024.0 * (double)self.ru_maxrss;
    u.workers_rss = (double)sum->workers_maxrss;
    return u;
}

/* Says why the job cannot start, on stderr and as its final record;
   returns rc. */
static int fail(struct coord *c, int rc, const char *why)
{
    fprintf(stderr, "ecopt run: %s\n", why);
    report_failure(&c->rw, why);
    return rc;
}

/* The exit status of an engine error before the run. */
static int status_of_error(const ec_err *e)
{
    return e->code == EC_ENOMEM || e->code == EC_EIO ? COORD_INTERNAL : COORD_USAGE;
}

/* Reads a whole file (or stdin for "-") into a NUL-terminated buffer. */
static char *slurp(const char *path, size_t limit, size_t *len, char *err,
                   size_t errlen)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char *buf = NULL;
    size_t n = 0, cap = 0;

    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *nb;
            cap = cap ? cap * 2 : 8192;
            if (!(nb = realloc(buf, cap))) {
                snprintf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (n > limit) {
            snprintf(err, errlen, "%s: larger than the %zu-byte limit for a job spec",
                     path, limit);
            goto fail;
        }
        if (got < 4096) {
            if (ferror(f)) {
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                goto fail;
            }
            break;
        }
    }
    buf[n] = '\0';
    *len = n;
    if (f != stdin)
        fclose(f);
    return buf;
fail:
    free(buf);
    if (f != stdin)
        fclose(f);
    return NULL;
}

/* The spec, with --procs and --backend: 0, or an exit status. */
static int read_spec(struct coord *c)
{
    const struct coord_opts *o = c->o;
    struct jobspec_errors errs = {0};
    char err[4096];
    size_t len = 0;

    if (!(c->text = slurp(o->spec_path, SPEC_MAX, &len, err, sizeof err))) {
        fprintf(stderr, "ecopt run: %s\n", err);
        return COORD_USAGE;
    }
    if (jobspec_parse(c->text, len, &c->spec, &errs) < 0) {
        jobspec_errors_format(&errs, err, sizeof err);
        fprintf(stderr, "ecopt run: %s: invalid job spec:\n%s\n", o->spec_path, err);
        report_failure(&c->rw, err);
        return COORD_USAGE;
    }
    if (c->v->spec)
        c->v->spec(c->v->ctx, &c->spec);
    if (o->procs > 0)
        c->spec.procs = (uint32_t)o->procs;
    if (c->spec.procs > c->spec.job.workers) {
        snprintf(err, sizeof err, "--procs %u is more than the job's %u workers",
                 c->spec.procs, c->spec.job.workers);
        return fail(c, COORD_USAGE, err);
    }
    /* An MPI rank is the mpi launcher's, whatever the spec says. */
    c->ln = o->mpi_rank ? launch_find("mpi")
            : o->backend ? launch_find(o->backend)
                         : launch_at((size_t)c->spec.backend);
    c->l.o = o;
    c->l.spec = &c->spec;
    c->l.ropts = &c->ropts;
    c->l.popts.round_timeout = o->round_timeout;
    c->l.popts.worker_mem_limit = (uint64_t)(o->worker_mem_limit * 1048576.0);
    c->l.popts.worker_cpu_limit = o->worker_cpu_limit;
    c->l.popts.procs = ec_procs_resolve(c->spec.job.workers, c->spec.procs);
    c->l.popts.log = c->info;
    c->ropts.redact = o->dataset_sha256 != NULL;
    return 0;
}

/*
 * The data, read while this process may still read the service's files,
 * with the P* hint; then the caller's output, and the drop to the job's
 * user: from here on the job needs only what it holds. 0, or an exit
 * status.
 */
static int load_data(struct coord *c)
{
    const struct coord_opts *o = c->o;
    struct stat before, after;
    char err[4096];
    ec_err e = {0};
    int fd = -1;

    if (coord_data_open(c->spec.job.dataset, o->data_dir, o->dataset_sha256, &fd,
                        &before, c->shown, sizeof c->shown, err, sizeof err) < 0)
        return fail(c, COORD_USAGE, err);
    if (ec_signal_install(&e) < 0 || coord_data_read(fd, c->shown, &c->ropts, &c->ds, &e) < 0) {
        close(fd);
        return fail(c, status_of_error(&e), e.msg);
    }
    if (c->ln->sized)
        c->ln->sized(&c->l, &c->ds);
    if (o->pstar_hint && coord_data_unchanged(fd, &before, &after))
        c->hint = coord_hint_load(o->pstar_hint, &before, &after, o->dataset_sha256,
                                  c->info);
    close(fd);                  /* read: the job and its workers need it no more */
    if (c->v->opened && c->v->opened(c->v->ctx) < 0)
        return COORD_USAGE;
    if (coord_drop_privileges(o, &e) < 0)
        return fail(c, e.code == EC_EINVAL ? COORD_USAGE : COORD_INTERNAL, e.msg);
    if (c->ln->joined && c->ln->joined(&c->l, err, sizeof err) < 0)
        return fail(c, COORD_INTERNAL, err);
    return 0;
}

/*
 * A job cancelled, or out of time, before its run: a final record that
 * says so, as a run stopped the same way would.
 */
static int stopped(struct coord *c, const ec_err *e)
{
    char err[4096];

    if (e->code == EC_ETIMEOUT)
        snprintf(err, sizeof err, "max_seconds %g reached before the run: %s",
                 c->spec.job.max_seconds, e->msg);
    else
        snprintf(err, sizeof err, "%s", e->msg);
    report_stopped(&c->rw, e->code == EC_ECANCELLED ? "cancelled" : "failed",
                   e->code == EC_ECANCELLED ? EC_STOP_CANCELLED : EC_STOP_MAX_SECONDS,
                   err);
    return COORD_JOB_FAILED;
}

/* The problem, its constants and P*, and the parameters: 0, or an exit
   status. */
static int resolve(struct coord *c)
{
    char err[4096];
    ec_err e = {0};
    double lambda_max;
    uint32_t steps;
    int init;

    init = coord_hint_lmax(c->hint, &lambda_max, &steps)
               ? ec_problem_init_lmax(&c->pb, &c->ds, &c->spec.job, lambda_max,
                                      steps, &e)
               : ec_problem_init(&c->pb, &c->ds, &c->spec.job, &e);
    if (init < 0 ||
        ec_params_resolve(&c->spec.job, &c->pb, &c->prm, &e) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        if (e.code == EC_ECANCELLED)
            return stopped(c, &e);
        report_failure(&c->rw, e.msg);
        return status_of_error(&e);
    }
    if (c->o->mem_limits && coord_set_memory_limits(&c->ds, c->ln, &c->l, c->info) < 0) {
        snprintf(err, sizeof err, "cannot set the job's memory limit: %s",
                 strerror(errno));
        return fail(c, COORD_INTERNAL, err);
    }
    coord_hint_use(c->hint, c->o->pstar_hint, &c->pb, c->info);
    c->hint = NULL;
    /* The solve counts against the job's max_seconds, from this process's
     * start, and ends at once on SIGTERM: a cancel is never deaf. */
    if ((c->pb.solve_cached
             ? ec_problem_find_x_star(&c->pb, c->started + c->spec.job.max_seconds, &e)
             : ec_problem_solve_until(&c->pb, c->started + c->spec.job.max_seconds,
                                      &e)) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        if (e.code == EC_ECANCELLED || e.code == EC_ETIMEOUT)
            return stopped(c, &e);
        report_failure(&c->rw, e.msg);
        return COORD_INTERNAL;
    }
    return 0;
}

/* Each row to the caller and the report channel; a reader that went
   away stops the job. */
static int on_metric(void *vc, const ec_metric *row)
{
    struct coord *c = vc;
    int stop = c->v->metric ? c->v->metric(c->v->ctx, row) : 0;

    report_metric(&c->rw, row);
    return stop || report_broken(&c->rw);
}

/* The rounds, the final record and the caller's summary: the exit
   status. */
static int run_rounds(struct coord *c)
{
    ec_job run_job = c->spec.job;
    ec_err e = {0};
    double before_run;
    struct coord_usage u;

    c->job = (struct coord_job){&c->spec, &c->ds, &c->pb, &c->prm, c->shown, c->ln->name,
                                c->ln->workers == LAUNCH_IN_COORDINATOR ? 0
                                                                         : c->l.popts.procs,
                                c->ln->workers == LAUNCH_RANKS, c->l.popts.local};
    if (c->v->setup)
        c->v->setup(c->v->ctx, &c->job);
    report_start(&c->rw, c->ln->name, &c->ds, c->o->dataset_sha256, &c->pb, &c->prm);
    /* The run has what the data and the solve left of max_seconds. */
    before_run = ec_clock() - c->started;
    run_job.max_seconds = c->spec.job.max_seconds - before_run;
    if (!(run_job.max_seconds > 1e-3))
        run_job.max_seconds = 1e-3;
    if (c->ln->run(&c->l, &c->pb, &c->prm, &run_job, on_metric, c, &c->sum, &e) < 0)
        return fail(c, COORD_INTERNAL, e.msg);
    if (c->sum.stop == EC_STOP_MAX_SECONDS)
        snprintf(c->sum.reason, sizeof c->sum.reason,
                 "max_seconds %g reached at round %llu (relative gap %.3g; "
                 "%.3g s of it before the run: the data and P*)",
                 c->spec.job.max_seconds, (unsigned long long)c->sum.rounds,
                 c->sum.last.rel_gap, before_run);
    if (report_broken(&c->rw) && c->sum.stop == EC_STOP_CANCELLED)
        snprintf(c->sum.reason, sizeof c->sum.reason,
                 "the report channel closed at round %llu",
                 (unsigned long long)c->sum.rounds);
    u = coord_usage_now(&c->sum);
    report_final(&c->rw, &c->sum, &c->prm, u.cpu_seconds, u.own_rss + u.workers_rss);
    if (c->v->done && c->v->done(c->v->ctx, &c->job, &c->sum) < 0)
        return COORD_INTERNAL;
    return outcome_exit_status(outcome_of_stop(c->sum.stop, c->sum.last.rel_gap));
}

/* The steps of one job: the exit status. */
static int steps(struct coord *c)
{
    char why[256];
    int rc;

    /* First, so that all of the job's work, its data and P* too, yields
       to the server that started it (docs/configuration.md, --job-nice). */
    if (c->o->nice && coord_lower_priority(c->o->nice, why, sizeof why) < 0)
        return fail(c, COORD_INTERNAL, why);
    if ((rc = read_spec(c)) != 0)
        return rc;
    if (c->ln->start && (rc = c->ln->start(&c->l)) != LAUNCH_GO)
        return rc;
    if ((rc = load_data(c)) != 0 || (rc = resolve(c)) != 0)
        return rc;
    return run_rounds(c);
}

int coord_run(const struct coord_opts *o, const struct coord_view *view)
{
    static const struct coord_view none = {0};
    struct coord *c = calloc(1, sizeof *c);
    int rc;

    /* An MPI rank keeps what mpirun's daemon gave it. */
    if (!o->mpi_rank)
        coord_close_inherited(o->report_fd);
    if (!c) {
        fprintf(stderr, "ecopt run: out of memory\n");
        return COORD_INTERNAL;
    }
    c->o = o;
    c->v = view ? view : &none;
    c->info = c->v->info ? c->v->info : stderr;
    c->started = ec_clock();
    report_writer_init(&c->rw, o->report_fd);
    rc = steps(c);
    if (c->ln && c->ln->end)
        rc = c->ln->end(&c->l, rc, &c->sum);
    report_writer_close(&c->rw);
    json_decref(c->hint);
    ec_problem_clear(&c->pb);
    ec_dataset_clear(&c->ds);
    free(c->text);
    free(c);
    return rc;
}
