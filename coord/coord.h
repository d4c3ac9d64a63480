/*
 * The coordinator: one job, from its spec to its final record. It reads
 * and checks the data (by version when the service names one), resolves
 * the problem and the parameters, launches the workers (launch.h), runs
 * the rounds and reports them on the report channel (format/report.h) and
 * to its caller's view. `ecopt run` is this library with a parser and a
 * printer (cli/run.c); the service runs it as that command, with the
 * arguments built from the same option table (COORD_OPTIONS), so the two
 * cannot drift. It stands on a floor of its own below the service
 * (docs/architecture.md, "Floors"): nothing here calls the service or the
 * command line. Errors: an exit status (enum coord_exit) and a sentence
 * on stderr and, when there is one, on the report channel.
 */
#ifndef ECOPT_COORD_H
#define ECOPT_COORD_H

#include <stdint.h>
#include <stdio.h>

#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"
#include "jobspec.h"

/* The exit status of a coordinator (and of every ecopt command). A job
   that ran gives its outcome's (format/outcome.h): COORD_OK, COORD_BUDGET
   or COORD_JOB_FAILED. */
enum coord_exit {
    COORD_OK = 0,          /* the job reached its target */
    COORD_INTERNAL = 1,    /* an internal failure (out of memory, I/O) */
    COORD_USAGE = 2,       /* bad arguments, a bad job spec or bad data */
    COORD_JOB_FAILED = 3,  /* worse than its start, not finite, failed or
                              cancelled */
    COORD_BUDGET = 5       /* a budget ran out before the target, the gap
                              not above its start's */
};

/*
 * The coordinator's options, one row each: X(field, flag, short, kind,
 * metavar, lo, hi, help). The command line's parser (cli/run.c) and its
 * usage text, and the service's argument builder (service/lib/runner.c,
 * through coord_opts_argv) all come from this table. kind says the
 * field's type and its check (opts.c):
 *   STRING  const char *, any text; USER the same, not empty
 *   SHA     const char *, 64 lowercase hex digits
 *   BACKEND const char *, a launcher's name (launch.h)
 *   FD      int, a descriptor number; -1 none
 *   COUNT   long long in lo..hi; 0 none
 *   REAL    double in (lo, hi] when lo is 0, else [lo, hi]; 0 none
 *   SWITCH  int, 1 for "auto", 0 for "off"
 *   FLAG    int, no argument
 * help NULL: private to the coordinator's own processes, not in the
 * usage. A line break in help starts a new line of the usage; a BACKEND's
 * help follows the launchers' own (launch.h).
 */
#define COORD_OPTIONS(X)                                                      \
    X(data_dir, "data-dir", 'd', STRING, "DIR", 0, 0,                         \
      "where dataset names are looked up\n(default $ECOPT_DATA_DIR)")        \
    X(backend, "backend", 'b', BACKEND, "NAME", 0, 0,                         \
      "default: the job's backend, else process")                             \
    X(procs, "procs", 0, COUNT, "P", 1, EC_JOB_MAX_WORKERS,                   \
      "processes (MPI ranks) hosting the n\nworkers, 1..n; default: the "    \
      "job's procs,\nelse min(n, online CPUs), or one CPU\nfewer for a "      \
      "light round (process backend)")                                        \
    X(report_fd, "report-fd", 0, FD, "N", 0, 0,                               \
      "write progress records (JSON lines, see\napi/report-format.md) to "    \
      "descriptor N")                                                         \
    X(round_timeout, "round-timeout", 0, REAL, "SEC", 0, 86400,               \
      "fail the job if a worker takes longer to\nanswer (process backend; "   \
      "default 60)")                                                          \
    X(worker_mem_limit, "worker-mem-limit", 0, REAL, "MB", 16, 1e9,           \
      "address-space limit of each worker process")                           \
    X(mem_limits, "mem-limits", 0, SWITCH, "auto|off", 0, 0,                  \
      "auto: address-space limits for this process\nand (unless "             \
      "--worker-mem-limit) each worker\nprocess from the memory estimate, "   \
      "1.25x it\nplus 64 MiB (an MPI rank: plus what Open MPI\nmaps at its "  \
      "start); default off (the\nservice: auto)")                             \
    X(worker_cpu_limit, "worker-cpu-limit", 0, REAL, "SEC", 1, 1e8,           \
      "CPU time limit of each worker process")                                \
    X(worker_user, "worker-user", 0, USER, "NAME", 0, 0,                      \
      "run the job (workers and, once the data\nis loaded, the coordinator) " \
      "as this user;\nneeds root")                                            \
    X(worker_uid, "worker-uid", 0, COUNT, "N", 1, EC_JOB_UID_MAX,             \
      "the same as a uid (and gid) of the job's\nown, which no account may "  \
      "use; anything\nleft running as it is killed first")                    \
    X(dataset_sha256, "dataset-sha256", 0, SHA, "HEX", 0, 0,                  \
      "the service's: the dataset is the catalog's\nversion HEX of its "      \
      "name, in the data directory")                                          \
    X(pstar_hint, "pstar-hint", 0, STRING, "FILE", 0, 0,                      \
      "P* values found before for this dataset\n(written by the service; "    \
      "see\napi/report-format.md)")                                           \
    X(nice, "nice", 0, COUNT, "N", 1, 19,                                     \
      "run the job (this process, its workers,\nmpirun) at nice N, or at the "  \
      "nice value\nit was started with if higher; the\nservice: --job-nice")   \
    X(hostfile, "hostfile", 0, STRING, "FILE", 0, 0,                          \
      "mpirun's hostfile (backend mpi); the\ndataset must be at the same "    \
      "path on\nevery host")                                                  \
    X(mpi_rank, "mpi-rank", 0, FLAG, NULL, 0, 0, NULL)

#define COORD_TYPE_STRING const char *
#define COORD_TYPE_USER const char *
#define COORD_TYPE_SHA const char *
#define COORD_TYPE_BACKEND const char *
#define COORD_TYPE_FD int
#define COORD_TYPE_COUNT long long
#define COORD_TYPE_REAL double
#define COORD_TYPE_SWITCH int
#define COORD_TYPE_FLAG int

struct coord_opts {
#define COORD_FIELD(field, flag, sh, kind, meta, lo, hi, help) COORD_TYPE_##kind field;
    COORD_OPTIONS(COORD_FIELD)
#undef COORD_FIELD
    /* Not options: */
    const char *spec_path;      /* the job spec; "-" standard input */
    int argc;                   /* the command that started this process, */
    char **argv;                /* which the mpi launcher runs as each rank */
};

/* Every option unset: report_fd -1, data_dir from $ECOPT_DATA_DIR. */
void coord_opts_init(struct coord_opts *o);

/* How many options COORD_OPTIONS has. */
size_t coord_option_count(void);
/* Row i's flag ("data-dir"), short letter (0 none), metavar (NULL for a
   flag) and help (NULL: private; the text lives until the next call).
   i < coord_option_count(). */
const char *coord_option_flag(size_t i);
int coord_option_short(size_t i);
const char *coord_option_metavar(size_t i);
const char *coord_option_help(size_t i);

/*
 * Sets option i from its text (NULL for a FLAG), checked. 0, or -1 with
 * a sentence in err that names the flag and its range.
 */
int coord_option_set(struct coord_opts *o, size_t i, const char *text, char *err,
                     size_t errlen);

/*
 * The arguments that give o's options to `ecopt run` (each set option as
 * "--flag" and, unless a FLAG, its value), appended to argv at *argc;
 * argv must hold 2 * coord_option_count() more. The texts live in buf.
 * 0, or -1 when buf (COORD_ARGV_BUF) is too small.
 */
#define COORD_ARGV_BUF 1024
int coord_opts_argv(const struct coord_opts *o, char **argv, int *argc, char *buf,
                    size_t buflen);

/* What the coordinator resolved, for its caller to show. */
struct coord_job {
    const struct jobspec *spec;
    const ec_dataset *ds;
    const ec_problem *pb;
    const ec_params *prm;
    const char *shown;            /* the dataset as messages name it */
    const char *backend;          /* the launcher's name */
    uint32_t procs;               /* worker processes (ranks); 0 when the
                                     workers run in the coordinator */
    int ranks;                    /* the workers are MPI ranks */
    uint32_t local;               /* workers stepped in the coordinator
                                     beside the processes' (the first) */
};

/* The caller's view of the job; any hook may be NULL. */
struct coord_view {
    FILE *info;     /* the coordinator's lines for people (a P* hint
                       refused, the memory limits); NULL: stderr */
    /* The spec is read (spec.job is final). */
    void (*spec)(void *ctx, const struct jobspec *spec);
    /* The data is read: the caller opens what it writes to, before the
       job drops its privileges. < 0 (having said why): exit COORD_USAGE. */
    int (*opened)(void *ctx);
    /* P* is known: the run starts. */
    void (*setup)(void *ctx, const struct coord_job *job);
    /* A metric row; nonzero stops the job (cancelled). */
    int (*metric)(void *ctx, const ec_metric *row);
    /* The run ended; sum->reason is final. < 0 (having said why): exit
       COORD_INTERNAL. */
    int (*done)(void *ctx, const struct coord_job *job, const ec_summary *sum);
    void *ctx;
};

/*
 * What the job's processes used, so far: CPU seconds (user + system) of
 * this process and of the workers it reaped, and each one's peak resident
 * set. Their sum bounds the job's memory from above: pages the workers
 * share copy-on-write with this process (the data) count in each.
 */
struct coord_usage {
    double cpu_seconds;
    double own_rss, workers_rss;    /* bytes */
};
struct coord_usage coord_usage_now(const ec_summary *sum);

/* Runs the job of o to its end. Returns the exit status. */
int coord_run(const struct coord_opts *o, const struct coord_view *view);

#endif
