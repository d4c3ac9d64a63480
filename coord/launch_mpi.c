/*
 * The mpi launcher: from the plain binary, the job runs again under
 * `mpirun -np P+1 ecopt-mpi run ... --mpi-rank` and this process waits for
 * mpirun; in ecopt-mpi with --mpi-rank, rank 0 is the coordinator and
 * every other rank hosts a block of workers (engine/mpi/). The code that
 * needs MPI is built only into ecopt-mpi (ECOPT_WITH_MPI).
 */
#include "coord_int.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/clock.h"
#ifdef ECOPT_WITH_MPI
#include "ecopt/mpi.h"
#include "ecopt/priv.h"
#endif

extern char **environ;

/* How long mpirun may take to end after a signal, or after the last of
   its children (the ranks, or on other hosts the remote launchers) has
   ended, before it is killed. */
#define MPIRUN_GRACE_SECONDS 10.0

/*
 * How many child processes pid has now, over all its threads (Open MPI's
 * mpirun starts the ranks from its main thread, but another version
 * need not), from /proc/PID/task/TID/children; -1 when that cannot be
 * read (no /proc, or a kernel without the file), and the watch is off.
 */
static int child_count(pid_t pid)
{
    char path[64];
    DIR *d;
    struct dirent *de;
    int n = 0, read_any = 0;

    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    if (!(d = opendir(path)))
        return -1;
    while ((de = readdir(d))) {
        char file[340];
        FILE *f;
        long v;

        if (de->d_name[0] == '.')
            continue;
        snprintf(file, sizeof file, "%s/%s/children", path, de->d_name);
        if (!(f = fopen(file, "r")))
            continue;
        read_any = 1;
        while (fscanf(f, "%ld", &v) == 1)
            n++;
        fclose(f);
    }
    closedir(d);
    return read_any ? n : -1;
}

/*
 * A job that ends by a stop rule short of its target exits 5 or 3 (its
 * outcome's status), but mpirun kills the other ranks as soon as one
 * exits with a status other than 0, often before they have left
 * MPI_Finalize. So rank 0 exits 0 and leaves the status in the file this
 * variable names, which the process that started mpirun reads (rank 0
 * runs on that host when it is in the hostfile first or alone; where the
 * file cannot be written the status is 0, and the summary's outcome line
 * says it).
 */
#define MPI_STATUS_ENV "ECOPT_MPI_STATUS_FILE"

/*
 * Runs mpirun and waits for it, passing on SIGTERM, SIGINT and SIGHUP.
 * mpirun passes them to the ranks, which end within a round, and then
 * exits; but Open MPI's mpirun sometimes stays behind after its ranks
 * have gone (6 of 154 signals here), so it is killed if it is
 * still there MPIRUN_GRACE_SECONDS after the first signal. A rank can
 * also end with no signal here (killed, or crashed): mpirun then ends
 * the others and should exit, and the same staying behind would leave
 * this process waiting for ever, so mpirun is also killed when it has
 * had no child process for MPIRUN_GRACE_SECONDS after having had one.
 * mpirun's exit status, or COORD_JOB_FAILED when it died of a signal.
 */
static int supervise_mpirun(char **av, int stdout_fd)
{
    static const int passed[] = {SIGTERM, SIGINT, SIGHUP};
    sigset_t waited, old, dflt;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    double since = 0, childless = 0;
    const char *stuck;
    pid_t pid;
    int st = 0, rc, sent = 0, had_child = 0;

    sigemptyset(&waited);
    sigemptyset(&dflt);
    for (size_t i = 0; i < sizeof passed / sizeof passed[0]; i++) {
        sigaddset(&waited, passed[i]);
        sigaddset(&dflt, passed[i]);
    }
    sigaddset(&waited, SIGCHLD);
    /* Inherited SIG_IGN would reap mpirun for us and lose its status. */
    signal(SIGCHLD, SIG_DFL);
    sigprocmask(SIG_BLOCK, &waited, &old);
    posix_spawnattr_init(&attr);
    posix_spawnattr_setsigmask(&attr, &old);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawn_file_actions_init(&fa);
    if (stdout_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, stdout_fd, 1);
    rc = posix_spawnp(&pid, "mpirun", &fa, &attr, av, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        fprintf(stderr, "ecopt run: cannot run mpirun: %s (apt-get install "
                "openmpi-bin)\n", strerror(rc));
        return COORD_USAGE;
    }
    for (;;) {
        struct timespec tick = {0, 200 * 1000 * 1000};
        siginfo_t info;
        int sig;

        rc = (int)waitpid(pid, &st, WNOHANG);
        if (rc == pid || (rc < 0 && errno != EINTR))
            break;
        stuck = sent && ec_clock() - since >= MPIRUN_GRACE_SECONDS ? "the signal" : NULL;
        switch (child_count(pid)) {
        case -1:
            break;
        case 0:
            if (!had_child)
                break;
            if (childless == 0)
                childless = ec_clock();
            else if (ec_clock() - childless >= MPIRUN_GRACE_SECONDS)
                stuck = "its ranks had";
            break;
        default:
            had_child = 1;
            childless = 0;
        }
        if (stuck) {
            fprintf(stderr, "ecopt run: mpirun did not end %g s after %s; killed\n",
                    MPIRUN_GRACE_SECONDS, stuck);
            kill(pid, SIGKILL);
            while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                ;
            break;
        }
        sig = sigtimedwait(&waited, &info, &tick);
        if (sig < 0 || sig == SIGCHLD)
            continue;
        /* A terminal's signal reached mpirun too; others are passed on. */
        if (info.si_code != SI_KERNEL)
            kill(pid, sig);
        if (!sent)
            since = ec_clock();
        sent = 1;
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (rc < 0 && errno != EINTR) {
        fprintf(stderr, "ecopt run: waiting for mpirun: %s\n", strerror(errno));
        return COORD_INTERNAL;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : COORD_JOB_FAILED;
}

/*
 * --backend mpi from the plain binary: run `mpirun -np P+1 ecopt-mpi
 * run ... --mpi-rank`, which runs the same job with rank 0 coordinating.
 * ecopt-mpi is looked up beside this binary (or $ECOPT_MPI_BIN); extra
 * mpirun arguments come from $ECOPT_MPIRUN_ARGS, split at spaces.
 * With a report descriptor, mpirun's stdout is that descriptor and rank
 * 0 writes its records to its stdout (which mpirun forwards, from any
 * host), its rows to /dev/null and its text to stderr. The job's exit
 * status: mpirun's, or the one rank 0 left in MPI_STATUS_ENV's file.
 */
static int exec_mpirun(int argc, char **argv, uint32_t procs,
                       const char *hostfile, int report_fd)
{
    char self[4096], bin[4200], np[16], *extra = NULL, *tok, *save = NULL;
    const char *env_bin = getenv("ECOPT_MPI_BIN");
    const char *env_args = getenv("ECOPT_MPIRUN_ARGS");
    char **av = calloc((size_t)argc + 64, sizeof *av);
    int ac = 0;
    ssize_t len;

    if (!av)
        return COORD_INTERNAL;
    if (env_bin && *env_bin) {
        snprintf(bin, sizeof bin, "%s", env_bin);
    } else {
        len = readlink("/proc/self/exe", self, sizeof self - 1);
        self[len > 0 ? len : 0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        snprintf(bin, sizeof bin, "%s/ecopt-mpi", slash ? self : ".");
    }
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "ecopt run: backend mpi needs %s, which is built when "
                "mpicc exists (apt-get install libopenmpi-dev openmpi-bin, "
                "then make)\n", bin);
        free(av);
        return COORD_USAGE;
    }
    snprintf(np, sizeof np, "%u", procs + 1);
    av[ac++] = "mpirun";
    av[ac++] = "-np";
    av[ac++] = np;
    if (hostfile) {
        av[ac++] = "--hostfile";
        av[ac++] = (char *)hostfile;
    }
    /* Open MPI binds each rank to a core when the ranks fit the cores
     * (np <= 2 here): a rank woken on a busy machine then waits for its
     * own core while the other is free (a9a, 20 workers, P = 1: 500-800
     * us a round bound, 34 unbound, at load 11). ECOPT_MPIRUN_ARGS may
     * bind all the same. */
    if (!env_args || !strstr(env_args, "--bind-to")) {
        av[ac++] = "--bind-to";
        av[ac++] = "none";
    }
    /* With more ranks than cores Open MPI makes every MPI call that finds
     * nothing yield the CPU, and on a busy machine a yield is a time
     * slice of others' work: the ranks wait on doorbells instead
     * (docs/mpi.md, "How the ranks wait"; a9a, P = 2, load 11: 150-1100
     * us a round yielding, 33-39 not). */
    if (!env_args || !strstr(env_args, "yield_when_idle")) {
        av[ac++] = "--mca";
        av[ac++] = "mpi_yield_when_idle";
        av[ac++] = "0";
    }
    if (env_args && (extra = strdup(env_args))) {
        for (tok = strtok_r(extra, " ", &save); tok && ac < 40;
             tok = strtok_r(NULL, " ", &save))
            av[ac++] = tok;
    }
    av[ac++] = bin;
    for (int i = 0; i < argc; i++)
        av[ac++] = argv[i];
    av[ac++] = "--mpi-rank";
    if (report_fd >= 0) {
        static char *report_args[] = {"--report-fd", "1", "--format", "csv",
                                      "-o", "/dev/null"};
        for (size_t i = 0; i < sizeof report_args / sizeof report_args[0]; i++)
            av[ac++] = report_args[i];
    }
    av[ac] = NULL;
    /* Rank 0 leaves the job's exit status here (end_rank). */
    char status_path[] = "/tmp/ecopt-mpi-status-XXXXXX";
    int status_fd = mkstemp(status_path);
    if (status_fd >= 0)
        setenv(MPI_STATUS_ENV, status_path, 1);
    fflush(NULL);
    int rc = supervise_mpirun(av, report_fd);
    if (status_fd >= 0) {
        char text[16] = "";
        ssize_t n = pread(status_fd, text, sizeof text - 1, 0);
        int passed = n > 0 ? atoi(text) : 0;

        if (rc == COORD_OK && (passed == COORD_BUDGET || passed == COORD_JOB_FAILED))
            rc = passed;
        close(status_fd);
        unlink(status_path);
        unsetenv(MPI_STATUS_ENV);
    }
    free(extra);
    free(av);
    return rc;
}

#ifdef ECOPT_WITH_MPI
/*
 * An MPI worker rank (rank > 0) takes the steps of a forked worker
 * process: it reads the data as it was started (root, under the service),
 * runs as the job's user or uid under a worker's limits (ec_worker_limits;
 * --mem-limits auto: from the account of a rank, coord_mem_limit) but for the
 * open-file limit, which would cut off the MPI runtime's own descriptors,
 * then builds rank 0's problem with the constants rank 0 sends (asleep
 * until they come) and hosts its block of workers. A rank
 * that cannot tells rank 0 why, so the job fails saying so rather than
 * hangs or goes on with a rank that runs as root. Returns an exit code.
 */
static int worker_rank(struct launch *l, int size)
{
    ec_dataset ds = {0};
    ec_problem pb = {0};
    ec_problem_given given;
    double *L_bar = NULL;
    ec_params prm;
    const struct coord_opts *o = l->o;
    const ec_job *job = &l->spec->job;
    ec_proc_opts lim = l->popts;
    ec_err e = {0};
    struct stat st;
    char err[4096], path[2048];
    const char *why = NULL;
    int fd = -1, rc;

    if (coord_data_open(job->dataset, o->data_dir, o->dataset_sha256, &fd, &st, path,
                        sizeof path, err, sizeof err) < 0)
        why = err;
    else if (coord_data_read(fd, path, l->ropts, &ds, &e) < 0)
        why = e.msg;
    if (fd >= 0)
        close(fd);
    /* Rank 0 clears a job's uid as it takes it (ec_drop_to_job_uid), which
     * would kill a rank of its host already running as it: so every rank
     * waits for rank 0 here, even one that failed, or rank 0 would wait. */
    if ((o->worker_user || o->worker_uid > 0) && ec_mpi_barrier() < 0 && !why)
        why = "the ranks could not meet before taking the job's user";
    if (!why && ((o->worker_user && ec_drop_privileges(o->worker_user, &e) < 0) ||
                 (o->worker_uid > 0 &&
                  ec_join_job_uid((uint32_t)o->worker_uid, &e) < 0) ||
                 (!o->worker_user && o->worker_uid <= 0 && ec_confine(&e) < 0)))
        why = e.msg;
    lim.worker_max_files = EC_WORKER_FILES_KEEP;
#ifndef __SANITIZE_ADDRESS__
    if (o->mem_limits && !lim.worker_mem_limit) {
        ec_mem_estimate est;

        coord_job_estimate(&ds, job, (uint32_t)size - 1, 0, &est);
        lim.worker_mem_limit = coord_mem_limit(est.rank, l->held);
    }
#endif
    if (!why && (why = ec_worker_limits(&lim))) {
        snprintf(err, sizeof err, "%s: %s", why, strerror(errno));
        why = err;
    }
    /* Rank 0's constants (its Lanczos runs), not computed again here. */
    if (!why && (ec_mpi_constants(job->workers, &given, &L_bar, &e) < 0 ||
                 ec_problem_init_given(&pb, &ds, job, &given, &e) < 0 ||
                 ec_params_resolve(job, &pb, &prm, &e) < 0))
        why = e.msg;
    rc = why ? ec_mpi_worker_fail(l->rank, why)
             : ec_mpi_worker(&pb, &prm, l->rank, size);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    free(L_bar);
    return rc;
}

/* An MPI rank: rank 0 goes on as the coordinator, the others host
 * workers. Before the job's first allocation the rank notes its address
 * space: Open MPI's libraries, shared memory and threads come to some
 * 230 MiB here, against 20 MiB for all of a plain ecopt, so a limit from
 * the account and EC_MEM_PROCESS_BASE alone would fail the rank's next
 * mmap. */
static int start_rank(struct launch *l)
{
    int argc = l->o->argc, size, rc;
    char **argv = l->o->argv;
    ec_err e = {0};

    if (ec_mpi_init(&argc, &argv, &l->rank, &size, &e) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        return COORD_INTERNAL;
    }
    l->held = ec_address_space();
    if (l->rank == 0) {
        const char *path = getenv(MPI_STATUS_ENV);

        /* Opened while this is still the user that started mpirun. */
        if (path && *path)
            l->status = fopen(path, "we");
        return LAUNCH_GO;
    }
    rc = worker_rank(l, size);
    ec_mpi_finalize();
    return rc;
}

/* The worker ranks take the job's uid once this rank has (and has
 * cleared it): see worker_rank. */
static int joined_rank(struct launch *l, char *err, size_t errlen)
{
    if ((l->o->worker_user || l->o->worker_uid > 0) && ec_mpi_barrier() < 0) {
        snprintf(err, errlen, "a worker rank ended before it took the job's user");
        return -1;
    }
    return 0;
}

static int run(struct launch *l, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, ec_metric_fn on_metric, void *ctx, ec_summary *sum,
               ec_err *e)
{
    return ec_run_mpi(pb, prm, job, &l->popts, on_metric, ctx, sum, e);
}

/* Rank 0's exit status after MPI_Finalize: 0, with the job's own in the
   launcher's file when there is one (MPI_STATUS_ENV). */
static int pass_status(struct launch *l, int rc)
{
    FILE *f = l->status;

    l->status = NULL;
    if (!f)
        return rc;
    if (rc != COORD_OK)
        fprintf(f, "%d\n", rc);
    return fclose(f) == 0 ? COORD_OK : rc;
}

static int end_rank(struct launch *l, int rc, const ec_summary *sum)
{
    if (!l->o->mpi_rank || l->rank != 0)
        return rc;
    fflush(NULL);
    /* Workers still inside a round cannot be stopped politely. */
    if (rc == COORD_OK || rc == COORD_BUDGET ||
        (rc == COORD_JOB_FAILED && sum->stop != EC_STOP_FAILED)) {
        ec_mpi_finalize();
        return pass_status(l, rc);
    }
    ec_mpi_abort(rc);
    return rc;
}
#else
static int start_rank(struct launch *l)
{
    (void)l;
    fprintf(stderr, "ecopt run: --mpi-rank: this binary was built without MPI\n");
    return COORD_USAGE;
}

static int run(struct launch *l, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, ec_metric_fn on_metric, void *ctx, ec_summary *sum,
               ec_err *e)
{
    (void)l, (void)pb, (void)prm, (void)job, (void)on_metric, (void)ctx, (void)sum;
    return ec_err_set(e, EC_EINVAL, "backend mpi: this binary was built without MPI");
}

#define joined_rank NULL
#define end_rank NULL
#endif

/* The plain binary runs mpirun; ecopt-mpi's ranks join the job. */
static int start(struct launch *l)
{
    if (l->o->mpi_rank)
        return start_rank(l);
    return exec_mpirun(l->o->argc, l->o->argv, l->popts.procs, l->o->hostfile,
                       l->o->report_fd);
}

const struct launcher launch_mpi = {
    .name = "mpi",
    .help = "mpi (mpirun -np P+1; extra mpirun\narguments from $ECOPT_MPIRUN_ARGS)",
    .workers = LAUNCH_RANKS,
    .start = start,
    .joined = joined_rank,
    .run = run,
    .end = end_rank,
};
