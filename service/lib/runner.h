/*
 * Running one job's coordinator from the (multi-threaded) service: a
 * posix_spawn of `ecopt run SPEC --report-fd 3` (the coordinator of
 * coord/coord.h, with the options of its table) in its own process group,
 * the report pipe read as JSON-line records, cancel by signalling the
 * group, and reaping. No fork() in the threaded server: posix_spawn only.
 */
#ifndef ECOPT_RUNNER_H
#define ECOPT_RUNNER_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coord.h"

#define RUNNER_MAX_LINE (1u << 20)   /* a longer record is a broken channel */

struct runner_opts {
    const char *exe;          /* the ecopt binary */
    const char *spec_path;    /* the job spec file */
    const char *data_dir;     /* ECOPT_DATA_DIR for the coordinator, or NULL */
    const char *log_path;     /* the coordinator's stdout+stderr, or NULL */
    /* The coordinator's options (coord.h, COORD_OPTIONS), given to it as
       arguments built from the same table; its report_fd is always 3. */
    struct coord_opts coord;
    /* Tests may replace the whole command; argv[0] is the program. */
    char *const *argv;
};

struct runner_job;

/* Starts the coordinator. Returns 0, or < 0 with a sentence in err. */
int runner_spawn(const struct runner_opts *o, struct runner_job **out,
                 char *err, size_t errlen);
pid_t runner_pid(const struct runner_job *j);
/* The report pipe's read end (non-blocking), for poll(). */
int runner_fd(const struct runner_job *j);
/* How many bytes the pipe holds before its writer blocks. */
size_t runner_pipe_size(const struct runner_job *j);
/* How many bytes the last runner_read took from the pipe. */
size_t runner_got(const struct runner_job *j);
/*
 * When to read again, after a read `since` seconds after the one before:
 * in `most` seconds, or sooner if at the rate of the last read the pipe
 * would be more than half full by then (a full pipe blocks the writer).
 */
double runner_read_wait(const struct runner_job *j, double since, double most);

/* Offered each line (no newline, not terminated) before it is parsed:
   1 when it took the line, 0 to have it parsed and given to the record
   callback. A fast path for records of a known shape. */
typedef int runner_take_fn(void *ctx, const char *line, size_t len);
/* A parsed record; the callback does not own rec. */
typedef void runner_record_fn(void *ctx, json_t *rec);

/*
 * Reads what the pipe has and hands over each complete line in order: to
 * take (if not NULL), else parsed to cb. Returns 1 while the pipe is
 * open, 0 at its end (after delivering every complete line), < 0 if the
 * channel broke (a line over RUNNER_MAX_LINE or, where take passed, not a
 * JSON object), with err filled.
 */
int runner_read(struct runner_job *j, runner_take_fn *take, runner_record_fn *cb,
                void *ctx, char *err, size_t errlen);
/* Within cb: the record's line as it came (no newline, not terminated). */
const char *runner_line(const struct runner_job *j, size_t *len);

/* SIGTERM to the job's process group (the coordinator and its workers). */
void runner_cancel(struct runner_job *j);
/* SIGKILL to the job's process group: for a job that did not end after
 * runner_cancel (a stopped coordinator, say: SIGKILL reaches it). */
void runner_kill(struct runner_job *j);
/*
 * Waits up to grace seconds for the coordinator to exit, then SIGKILLs the
 * whole group and reaps it. *status is the wait status. Returns 0, or 1 if
 * it had to be killed.
 */
int runner_reap(struct runner_job *j, double grace, int *status);
/*
 * After runner_reap, what the job used (wait4): the CPU seconds, user and
 * system, of the coordinator and of every descendant it waited for (its
 * workers), and the largest peak resident set among them, in bytes (the
 * peak of one process, not a sum). Zeros when the wait failed.
 */
void runner_usage(const struct runner_job *j, double *cpu_seconds,
                  int64_t *max_rss_bytes);
/* Closes the pipe and frees; the process must have been reaped. */
void runner_free(struct runner_job *j);

#endif
