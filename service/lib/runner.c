/*
 * Coordinator processes for the service: posix_spawn into a new process
 * group with the report pipe on descriptor 3, line-framed JSON records,
 * and a cancel that reaches every process of the job.
 */
#define _GNU_SOURCE
#include "runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/clock.h"

extern char **environ;

/* The report pipe's size asked for, so that a reader may come by only
 * every so often; and the read buffer's first size. */
#define PIPE_SIZE (1 << 20)
#define READ_BUF 65536

struct runner_job {
    pid_t pid;
    int fd;
    int reaped;
    struct rusage usage; /* the coordinator's and its waited-for
                            descendants', once reaped */
    size_t pipe_size;    /* what the kernel gave */
    size_t got;          /* bytes the last runner_read took */
    char *buf;           /* bytes of an incomplete line */
    size_t len, cap;
    const char *line;    /* the record being delivered, as it came */
    size_t line_len;
};

const char *runner_line(const struct runner_job *j, size_t *len)
{
    *len = j->line ? j->line_len : 0;
    return j->line;
}

/*
 * What of the server's environment a coordinator gets: what it and its
 * workers and mpirun read, and nothing else (no secret of the server's
 * reaches a job). ECOPT_DATA_DIR is the runner's own. A name ending in
 * '_' is a prefix.
 */
static const char *const child_env_keep[] = {
    "PATH", "HOME", "TMPDIR", "ECOPT_FAULT", "ECOPT_MPI_BIN", "ECOPT_MPIRUN_ARGS",
    "OMPI_MCA_", "PMIX_MCA_", "PRTE_MCA_",
    "ASAN_OPTIONS", "LSAN_OPTIONS", "UBSAN_OPTIONS",
};
/* PATH when the server has none. */
#define CHILD_PATH "/usr/local/bin:/usr/bin:/bin"

static int child_env_kept(const char *entry)
{
    for (size_t i = 0; i < sizeof child_env_keep / sizeof child_env_keep[0]; i++) {
        const char *k = child_env_keep[i];
        size_t len = strlen(k);

        if (strncmp(entry, k, len) == 0 && (k[len - 1] == '_' || entry[len] == '='))
            return 1;
    }
    return 0;
}

/* The environment of the child: child_env_keep of ours, PATH, and
 * ECOPT_DATA_DIR (in *owned, the caller's to free). */
static char **child_env(const char *data_dir, char **owned)
{
    size_t n = 0, k = 0;
    char **env;
    int path = 0;

    while (environ[n])
        n++;
    *owned = NULL;
    if (!(env = calloc(n + 3, sizeof *env)))
        return NULL;
    for (size_t i = 0; i < n; i++)
        if (child_env_kept(environ[i])) {
            env[k++] = environ[i];
            path |= strncmp(environ[i], "PATH=", 5) == 0;
        }
    if (!path)
        env[k++] = "PATH=" CHILD_PATH;
    if (data_dir && asprintf(owned, "ECOPT_DATA_DIR=%s", data_dir) >= 0)
        env[k++] = *owned;
    env[k] = NULL;
    return env;
}

int runner_spawn(const struct runner_opts *o, struct runner_job **out,
                 char *err, size_t errlen)
{
    struct runner_job *j = calloc(1, sizeof *j);
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    char *argv_buf[8 + 2 * 32], **env = NULL, *env_owned = NULL;
    char arg_text[COORD_ARGV_BUF];
    char *const *argv = o->argv;
    int p[2] = {-1, -1}, rc;

    *out = NULL;
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        free(j);
        return -1;
    }
    /* Past pipe-max-size or the user's pipe pages the kernel refuses, and
     * the pipe keeps its size: the reader then comes by more often. */
    rc = fcntl(p[0], F_SETPIPE_SZ, PIPE_SIZE);
    if (rc < 0)
        rc = fcntl(p[0], F_GETPIPE_SZ);
    j->pipe_size = rc > 0 ? (size_t)rc : 4096;
    if (!argv) {
        struct coord_opts co = o->coord;
        int a = 0;

        argv_buf[a++] = (char *)o->exe;
        argv_buf[a++] = "run";
        argv_buf[a++] = (char *)o->spec_path;
        argv_buf[a++] = "--quiet";
        co.report_fd = 3;
        if (a + 2 * coord_option_count() + 1 > sizeof argv_buf / sizeof argv_buf[0] ||
            coord_opts_argv(&co, argv_buf, &a, arg_text, sizeof arg_text) < 0) {
            snprintf(err, errlen, "the coordinator's arguments are too long");
            close(p[0]);
            close(p[1]);
            free(j);
            return -1;
        }
        argv_buf[a] = NULL;
        argv = argv_buf;
    }
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    /* The write end becomes fd 3 (dup2 clears close-on-exec on the copy). */
    posix_spawn_file_actions_adddup2(&fa, p[1], 3);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (o->log_path) {
        posix_spawn_file_actions_addopen(&fa, 1, o->log_path,
                                         O_WRONLY | O_CREAT | O_TRUNC, 0666);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Every descriptor of the server is close-on-exec; this also closes
     * what the server inherited without it, so the coordinator holds
     * stdio and its report pipe alone (it closes the rest itself too). */
    posix_spawn_file_actions_addclosefrom_np(&fa, 4);
#endif
    /* Its own process group, so one signal reaches every worker; default
     * signal handling and an empty mask, whatever the server set. */
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    env = child_env(o->data_dir, &env_owned);
    rc = env ? posix_spawn(&j->pid, argv[0], &fa, &attr, argv, env) : ENOMEM;
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(env);
    free(env_owned);
    close(p[1]);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start %s: %s", argv[0], strerror(rc));
        close(p[0]);
        free(j);
        return -1;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    j->fd = p[0];
    *out = j;
    return 0;
}

pid_t runner_pid(const struct runner_job *j)
{
    return j->pid;
}

int runner_fd(const struct runner_job *j)
{
    return j->fd;
}

size_t runner_pipe_size(const struct runner_job *j)
{
    return j->pipe_size;
}

size_t runner_got(const struct runner_job *j)
{
    return j->got;
}

double runner_read_wait(const struct runner_job *j, double since, double most)
{
    double half = (double)j->pipe_size / 2, got = (double)j->got;

    if (since > 0 && got / since * most > half)
        return half * since / got;
    return most;
}

/*
 * Delivers every complete line in the buffer, to take first and then, if
 * it did not take it, parsed to cb; keeps the incomplete tail.
 */
static int deliver(struct runner_job *j, runner_take_fn *take, runner_record_fn *cb,
                   void *ctx, char *err, size_t errlen)
{
    char *start = j->buf, *end = j->buf + j->len, *nl;

    for (; (nl = memchr(start, '\n', (size_t)(end - start))) != NULL; start = nl + 1) {
        size_t len = (size_t)(nl - start);
        json_t *rec;
        json_error_t jerr;

        if (take && take(ctx, start, len))
            continue;
        rec = json_loadb(start, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(rec)) {
            snprintf(err, errlen, "report channel: a record is not a JSON object (%s)",
                     rec ? "another JSON value" : jerr.text);
            json_decref(rec);
            return -1;
        }
        j->line = start;
        j->line_len = len;
        cb(ctx, rec);
        j->line = NULL;
        json_decref(rec);
    }
    j->len = (size_t)(end - start);
    memmove(j->buf, start, j->len);
    return 0;
}

int runner_read(struct runner_job *j, runner_take_fn *take, runner_record_fn *cb,
                void *ctx, char *err, size_t errlen)
{
    j->got = 0;
    for (;;) {
        ssize_t r;

        if (j->cap - j->len < 4096) {
            size_t ncap = j->cap ? j->cap * 2 : READ_BUF;
            char *nb;
            if (ncap > RUNNER_MAX_LINE + 8192)
                ncap = RUNNER_MAX_LINE + 8192;
            if (ncap - j->len < 1) {
                snprintf(err, errlen, "report channel: a record is longer than %u bytes",
                         RUNNER_MAX_LINE);
                return -1;
            }
            if (!(nb = realloc(j->buf, ncap))) {
                snprintf(err, errlen, "out of memory");
                return -1;
            }
            j->buf = nb;
            j->cap = ncap;
        }
        r = read(j->fd, j->buf + j->len, j->cap - j->len);
        if (r > 0) {
            j->len += (size_t)r;
            j->got += (size_t)r;
            if (deliver(j, take, cb, ctx, err, errlen) < 0)
                return -1;
            if (j->len > RUNNER_MAX_LINE) {
                snprintf(err, errlen, "report channel: a record is longer than %u bytes",
                         RUNNER_MAX_LINE);
                return -1;
            }
            continue;
        }
        if (r == 0)
            return 0;       /* a trailing partial line is dropped: no newline, no record */
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 1;
        snprintf(err, errlen, "report channel: %s", strerror(errno));
        return -1;
    }
}

void runner_cancel(struct runner_job *j)
{
    if (!j->reaped)
        kill(-j->pid, SIGTERM);
}

void runner_kill(struct runner_job *j)
{
    if (!j->reaped)
        kill(-j->pid, SIGKILL);
}

int runner_reap(struct runner_job *j, double grace, int *status)
{
    double until = ec_clock() + grace;
    int st = 0, killed = 0;

    if (j->reaped)
        return 0;
    /* Wait for the exit without reaping (WNOWAIT): while the coordinator
     * is a zombie its pid, and so its process group id, cannot be reused,
     * which makes the group kill below safe. */
    for (;;) {
        siginfo_t si;

        memset(&si, 0, sizeof si);
        if (waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 &&
            errno != EINTR)
            break;
        if (si.si_pid == j->pid)
            break;
        if (ec_clock() >= until) {
            kill(-j->pid, SIGKILL);
            killed = 1;
            waitid(P_PID, (id_t)j->pid, &si, WEXITED | WNOWAIT);
            break;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    /* Workers normally die with their coordinator (parent-death signal);
     * this reaches any that did not. */
    kill(-j->pid, SIGKILL);
    while (wait4(j->pid, &st, 0, &j->usage) < 0 && errno == EINTR)
        ;
    j->reaped = 1;
    if (status)
        *status = st;
    return killed;
}

void runner_usage(const struct runner_job *j, double *cpu_seconds,
                  int64_t *max_rss_bytes)
{
    const struct rusage *u = &j->usage;

    *cpu_seconds = (double)(u->ru_utime.tv_sec + u->ru_stime.tv_sec) +
                   1e-6 * (double)(u->ru_utime.tv_usec + u->ru_stime.tv_usec);
    *max_rss_bytes = (int64_t)u->ru_maxrss * 1024;      /* Linux: KiB */
}

void runner_free(struct runner_job *j)
{
    if (!j)
        return;
    if (j->fd >= 0)
        close(j->fd);
    free(j->buf);
    free(j);
}
