/*
 * The upload validator of validator.h: a streaming first pass that counts
 * (decompressed bytes, rows, nonzeros, the largest feature index) and
 * checks the gzip framing, then the engine's reader under the same limits
 * for the stats; and the child process that runs both for the server.
 */
#define _GNU_SOURCE
#include "validator.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <jansson.h>

#include "ecopt/data.h"
#include "ecopt/priv.h"

extern char **environ;

#define IN_CHUNK ((size_t)1 << 16)
#define OUT_CHUNK ((size_t)1 << 18)
#define VERDICT_MAX ((size_t)1 << 14)   /* the child's one line */

void validator_limits_fill(struct validator_limits *l)
{
    if (!l->max_bytes)
        l->max_bytes = VALIDATOR_MAX_BYTES_DEFAULT;
    if (!l->max_rows)
        l->max_rows = VALIDATOR_MAX_ROWS_DEFAULT;
    if (!l->max_nnz)
        l->max_nnz = VALIDATOR_MAX_NNZ_DEFAULT;
    if (!l->max_d)
        l->max_d = VALIDATOR_MAX_D_DEFAULT;
    if (!l->mem_mb)
        l->mem_mb = VALIDATOR_MEM_MB_DEFAULT;
    if (!l->cpu_seconds)
        l->cpu_seconds = VALIDATOR_CPU_DEFAULT;
}

static int verdict(struct validator_result *out, int status, const char *limit,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int verdict(struct validator_result *out, int status, const char *limit,
                   const char *fmt, ...)
{
    va_list ap;

    out->status = status;
    out->limit = limit;
    va_start(ap, fmt);
    vsnprintf(out->error, sizeof out->error, fmt, ap);
    va_end(ap);
    return 1;
}

/* ---- the first pass: counting as the bytes stream by ---------------------- */

struct counter {
    const struct validator_limits *l;
    const char *name;
    uint64_t bytes, rows, nnz, line;
    uint64_t index;         /* the digits of the token so far */
    int content;            /* the line holds more than blanks */
    int digits_only;        /* the token so far is digits (an index) */
    int in_token;
};

/* 0 to go on, 1 with a verdict in out. */
static int count(struct counter *c, const unsigned char *p, size_t n,
                 struct validator_result *out)
{
    const struct validator_limits *l = c->l;

    c->bytes += n;
    if (c->bytes > l->max_bytes)
        return verdict(out, 413, "upload_max_bytes", "%s: more than %llu bytes once "
                       "decompressed (upload_max_bytes)", c->name,
                       (unsigned long long)l->max_bytes);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = p[i];

        if (ch == '\n') {
            c->line++;
            if (c->content && ++c->rows > l->max_rows)
                return verdict(out, 413, "upload_max_rows", "%s:%llu: more than %llu "
                               "rows (upload_max_rows)", c->name,
                               (unsigned long long)c->line,
                               (unsigned long long)l->max_rows);
            c->content = c->in_token = 0;
        } else if (ch == ' ' || ch == '\t' || ch == '\r') {
            c->in_token = 0;
        } else {
            if (!c->in_token) {
                c->in_token = c->content = 1;
                c->digits_only = 1;
                c->index = 0;
            }
            if (ch >= '0' && ch <= '9' && c->digits_only) {
                if (c->index <= l->max_d)
                    c->index = c->index * 10 + (uint64_t)(ch - '0');
            } else if (ch == ':' && c->digits_only) {
                c->digits_only = 0;
                if (++c->nnz > l->max_nnz)
                    return verdict(out, 413, "upload_max_nnz", "%s:%llu: more than %llu "
                                   "nonzeros (upload_max_nnz)", c->name,
                                   (unsigned long long)c->line + 1,
                                   (unsigned long long)l->max_nnz);
                if (c->index > l->max_d)
                    return verdict(out, 413, "upload_max_d", "%s:%llu: a feature index "
                                   "over %llu (upload_max_d, the dimension d)", c->name,
                                   (unsigned long long)c->line + 1,
                                   (unsigned long long)l->max_d);
            } else {
                c->digits_only = 0;
            }
        }
    }
    return 0;
}

static ssize_t read_at(int fd, void *buf, size_t len, off_t off)
{
    ssize_t n;

    while ((n = pread(fd, buf, len, off)) < 0 && errno == EINTR)
        ;
    return n;
}

static off_t file_size(int fd)
{
    struct stat st;

    return fstat(fd, &st) == 0 ? st.st_size : 0;
}

/* The whole file through count(), inflating gzip members. */
static int first_pass(int fd, struct counter *c, struct validator_result *out)
{
    unsigned char *in = malloc(IN_CHUNK), *buf = malloc(OUT_CHUNK);
    z_stream z = {0};
    off_t off = 0;
    ssize_t n;
    int gz = 0, zinit = 0, rc = -1, member_end = 0;

    if (!in || !buf) {
        errno = ENOMEM;
        goto out;
    }
    if ((n = read_at(fd, in, IN_CHUNK, 0)) < 0)
        goto out;
    gz = n >= 2 && in[0] == 0x1f && in[1] == 0x8b;
    if (!gz) {
        for (;;) {
            if (n == 0) {
                rc = 0;
                goto out;
            }
            if (count(c, in, (size_t)n, out)) {
                rc = 1;
                goto out;
            }
            off += n;
            if ((n = read_at(fd, in, IN_CHUNK, off)) < 0)
                goto out;
        }
    }
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        errno = ENOMEM;
        goto out;
    }
    zinit = 1;
    z.next_in = in;
    z.avail_in = (uInt)n;
    off = n;
    for (;;) {
        int zr;

        if (z.avail_in == 0) {
            if ((n = read_at(fd, in, IN_CHUNK, off)) < 0)
                goto out;
            if (n == 0) {
                rc = member_end ? 0
                                : verdict(out, 422, NULL, "%s: truncated gzip data (the "
                                          "stream ends before its end)", c->name);
                goto out;
            }
            off += n;
            z.next_in = in;
            z.avail_in = (uInt)n;
        }
        if (member_end) {
            /* Bytes after a member: another member, or refused. */
            if (z.avail_in < 2 && off < file_size(fd)) {
                /* The magic straddles a chunk: read it whole. */
                memmove(in, z.next_in, z.avail_in);
                n = read_at(fd, in + z.avail_in, IN_CHUNK - z.avail_in, off);
                if (n < 0)
                    goto out;
                off += n;
                z.next_in = in;
                z.avail_in += (uInt)n;
            }
            if (z.avail_in < 2 || z.next_in[0] != 0x1f || z.next_in[1] != 0x8b) {
                rc = verdict(out, 422, NULL, "%s: %llu bytes after the end of the gzip "
                             "data (trailing garbage)", c->name,
                             (unsigned long long)(z.avail_in +
                                                  (file_size(fd) - off)));
                goto out;
            }
            inflateReset(&z);
            member_end = 0;
        }
        z.next_out = buf;
        z.avail_out = (uInt)OUT_CHUNK;
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            rc = zr == Z_MEM_ERROR ? verdict(out, 413, "upload_validator_mem", "%s: out of "
                                             "memory in zlib", c->name)
                                   : verdict(out, 422, NULL, "%s: corrupt gzip data (%s)",
                                             c->name, z.msg ? z.msg : "no reason given");
            goto out;
        }
        if (count(c, buf, OUT_CHUNK - z.avail_out, out)) {
            rc = 1;
            goto out;
        }
        if (zr == Z_STREAM_END)
            member_end = 1;
    }
out:
    if (zinit)
        inflateEnd(&z);
    free(in);
    free(buf);
    return rc;
}

/* ---- the verdict -------------------------------------------------------- */

int validator_check_fd(int fd, const char *name, const struct validator_limits *lim,
                       struct validator_result *out)
{
    struct validator_limits l = *lim;
    struct counter c = {0};
    ec_libsvm_opts o = {0};
    ec_dataset ds = {0};
    ec_err e = {0};
    int rc;

    validator_limits_fill(&l);
    memset(out, 0, sizeof *out);
    c.l = &l;
    c.name = name;
    if ((rc = first_pass(fd, &c, out)) != 0)
        return rc < 0 ? -1 : 0;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return -1;
    o.max_index = l.max_d > UINT32_MAX ? UINT32_MAX : (uint32_t)l.max_d;
    o.max_nnz = l.max_nnz;
    o.redact = 1;
    o.count_only = 1;       /* the counts and the checks, not the matrix */
    if ((rc = ec_libsvm_read_fd(fd, name, &o, &ds, &e)) < 0) {
        if (rc == EC_ENOMEM)
            verdict(out, 413, "upload_validator_mem", "%s: more memory than the "
                    "validator's limit (upload_validator_mem)", name);
        else
            verdict(out, rc == EC_ELIMIT ? 413 : 422, rc == EC_ELIMIT ? "upload_max_d" : NULL,
                    "%s", e.msg);
        return 0;
    }
    if (ds.d == 0)
        verdict(out, 422, NULL, "%s: d = 0: no row has a feature (a dataset needs at "
                "least one index:value)", name);
    else if (ds.n_rows > l.max_rows)
        verdict(out, 413, "upload_max_rows", "%s: more than %llu rows (upload_max_rows)",
                name, (unsigned long long)l.max_rows);
    out->rows = ds.n_rows;
    out->d = ds.d;
    out->nnz = (int64_t)ds.nnz;
    out->label_neg = ds.label_neg;
    out->label_pos = ds.label_pos;
    ec_dataset_clear(&ds);
    return 0;
}

/* ---- the child ---------------------------------------------------------- */

static json_t *real_or_null(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static int set_limit(int resource, rlim_t soft, rlim_t hard)
{
    struct rlimit r = {soft, hard};

    return setrlimit(resource, &r);
}

int validator_main(int argc, char **argv)
{
    struct validator_limits l = {0};
    struct validator_result out;
    const char *name = "(upload)", *user = NULL;
    json_t *doc;
    ec_err e = {0};
    int rc;

    for (int i = 1; i + 1 < argc; i += 2) {
        unsigned long long v = strtoull(argv[i + 1], NULL, 10);

        if (strcmp(argv[i], "--name") == 0)
            name = argv[i + 1];
        else if (strcmp(argv[i], "--user") == 0)
            user = argv[i + 1];
        else if (strcmp(argv[i], "--max-bytes") == 0)
            l.max_bytes = v;
        else if (strcmp(argv[i], "--max-rows") == 0)
            l.max_rows = v;
        else if (strcmp(argv[i], "--max-nnz") == 0)
            l.max_nnz = v;
        else if (strcmp(argv[i], "--max-d") == 0)
            l.max_d = v;
        else if (strcmp(argv[i], "--mem-mb") == 0)
            l.mem_mb = (unsigned)v;
        else if (strcmp(argv[i], "--cpu") == 0)
            l.cpu_seconds = (unsigned)v;
    }
    validator_limits_fill(&l);
    /* Limited before the first byte is read, and never writes a file. An
     * AddressSanitizer build (make asan-check) cannot live under an
     * address-space limit, its shadow memory being terabytes of it: there
     * the limit is left out, and the counts of bytes, rows, nnz and d
     * still bound the validator. */
    if (
#ifndef __SANITIZE_ADDRESS__
        set_limit(RLIMIT_AS, (rlim_t)l.mem_mb << 20, (rlim_t)l.mem_mb << 20) < 0 ||
#endif
        set_limit(RLIMIT_CPU, l.cpu_seconds, l.cpu_seconds + 5) < 0 ||
        set_limit(RLIMIT_CORE, 0, 0) < 0 || set_limit(RLIMIT_FSIZE, 0, 0) < 0) {
        fprintf(stderr, "ecopt __validate-upload: limits: %s\n", strerror(errno));
        return 1;
    }
    if (user && *user && ec_drop_privileges(user, &e) < 0) {
        fprintf(stderr, "ecopt __validate-upload: %s\n", e.msg);
        return 1;
    }
    if (validator_check_fd(0, name, &l, &out) < 0) {
        fprintf(stderr, "ecopt __validate-upload: the upload cannot be read: %s\n",
                strerror(errno));
        return 1;
    }
    doc = json_pack("{s:i, s:s?, s:s, s:I, s:I, s:I, s:[oo]}", "status", out.status,
                    "limit", out.limit, "error", out.error, "rows", (json_int_t)out.rows,
                    "d", (json_int_t)out.d, "nnz", (json_int_t)out.nnz, "labels",
                    real_or_null(out.label_neg), real_or_null(out.label_pos));
    rc = doc && json_dumpf(doc, stdout, JSON_COMPACT | JSON_ENSURE_ASCII) == 0 &&
                 fputc('\n', stdout) != EOF && fflush(stdout) == 0
             ? 0
             : 1;
    json_decref(doc);
    return rc;
}

/* ---- the server's side ---------------------------------------------------- */

/* The limit names the server knows, so that out->limit stays static. */
static const char *known_limit(const char *s)
{
    static const char *const names[] = {"upload_max_bytes", "upload_max_rows",
                                        "upload_max_nnz", "upload_max_d",
                                        "upload_validator_mem", "upload_validator_cpu"};

    for (size_t i = 0; s && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i]) == 0)
            return names[i];
    return s ? "upload_max_d" : NULL;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * The child's verdict line from p into buf (up to VERDICT_MAX bytes), until
 * it closes its end. 0; 1 when *cancel was set or the wall-clock deadline
 * passed (the child is then killed); the caller reaps it.
 */
static int read_verdict(int p, pid_t pid, char *buf, size_t *len, double deadline,
                        const atomic_int *cancel)
{
    for (;;) {
        struct pollfd pfd = {p, POLLIN, 0};
        ssize_t n;
        int r;

        if ((cancel && atomic_load(cancel)) || now_s() > deadline) {
            kill(pid, SIGKILL);
            return 1;
        }
        if ((r = poll(&pfd, 1, 200)) < 0 && errno != EINTR)
            return 0;
        if (r <= 0)
            continue;
        n = read(p, buf + *len, VERDICT_MAX - *len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        *len += (size_t)n;
        if (*len == VERDICT_MAX)
            return 0;
    }
}

int validator_run(const char *exe, int fd, const char *name, const char *user,
                  const struct validator_limits *lim, const atomic_int *cancel,
                  struct validator_result *out)
{
    struct validator_limits l = *lim;
    char a[6][32], *argv[20], *buf = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t none, all;
    size_t len = 0;
    pid_t pid;
    int p[2], k = 0, st = 0, rc, stopped = 0, flags;
    double wall;
    json_t *doc;

    memset(out, 0, sizeof *out);
    validator_limits_fill(&l);
    /* The child may read the file and nothing else: a read-only
       descriptor, or none. */
    if ((flags = fcntl(fd, F_GETFL)) < 0 || (flags & O_ACCMODE) != O_RDONLY) {
        snprintf(out->error, sizeof out->error, "the validator is given only "
                 "read-only descriptors");
        return -1;
    }
    if (pipe2(p, O_CLOEXEC) < 0) {
        snprintf(out->error, sizeof out->error, "a pipe: %s", strerror(errno));
        return -1;
    }
    snprintf(a[0], sizeof a[0], "%llu", (unsigned long long)l.max_bytes);
    snprintf(a[1], sizeof a[1], "%llu", (unsigned long long)l.max_rows);
    snprintf(a[2], sizeof a[2], "%llu", (unsigned long long)l.max_nnz);
    snprintf(a[3], sizeof a[3], "%llu", (unsigned long long)l.max_d);
    snprintf(a[4], sizeof a[4], "%u", l.mem_mb);
    snprintf(a[5], sizeof a[5], "%u", l.cpu_seconds);
    argv[k++] = (char *)exe;
    argv[k++] = "__validate-upload";
    argv[k++] = "--name", argv[k++] = (char *)name;
    argv[k++] = "--max-bytes", argv[k++] = a[0];
    argv[k++] = "--max-rows", argv[k++] = a[1];
    argv[k++] = "--max-nnz", argv[k++] = a[2];
    argv[k++] = "--max-d", argv[k++] = a[3];
    argv[k++] = "--mem-mb", argv[k++] = a[4];
    argv[k++] = "--cpu", argv[k++] = a[5];
    if (user && *user)
        argv[k++] = "--user", argv[k++] = (char *)user;
    argv[k] = NULL;
    lseek(fd, 0, SEEK_SET);
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_adddup2(&fa, fd, 0);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    /* Whatever the server holds open without close-on-exec (an inherited
       socket, a library's file) stays behind. */
    posix_spawn_file_actions_addclosefrom_np(&fa, 3);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&attr, &none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    rc = posix_spawn(&pid, exe, &fa, &attr, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(p[1]);
    if (rc != 0) {
        close(p[0]);
        snprintf(out->error, sizeof out->error, "the validator cannot be started: %s",
                 strerror(rc));
        return -1;
    }
    /* CPU time is the child's limit; a child that waits on something (a
       machine this busy) is bounded by the wall clock too. */
    wall = 2.0 * l.cpu_seconds + 30;
    if ((buf = malloc(VERDICT_MAX + 1))) {
        stopped = read_verdict(p[0], pid, buf, &len, now_s() + wall, cancel);
        buf[len] = '\0';
    } else {
        kill(pid, SIGKILL);
    }
    close(p[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (stopped && cancel && atomic_load(cancel)) {
        free(buf);
        snprintf(out->error, sizeof out->error, "the validation was stopped (the "
                 "server is shutting down)");
        return -1;
    }
    if (stopped) {
        free(buf);
        verdict(out, 413, "upload_validator_cpu", "%s: the validator took more than "
                "%.0f s of wall-clock time (upload_validator_cpu %u s, doubled, and "
                "30 s)", name, wall, l.cpu_seconds);
        return 0;
    }
    doc = buf && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? json_loads(buf, 0, NULL) : NULL;
    free(buf);
    if (!doc) {
        if (WIFSIGNALED(st) && (WTERMSIG(st) == SIGXCPU || WTERMSIG(st) == SIGKILL)) {
            verdict(out, 413, "upload_validator_cpu", "%s: more CPU time than the "
                    "validator's limit of %u s (upload_validator_cpu)", name,
                    l.cpu_seconds);
            return 0;
        }
        if (WIFSIGNALED(st)) {
            verdict(out, 413, "upload_validator_mem", "%s: the validator ended on signal "
                    "%d within its limits (%u MB, upload_validator_mem)", name,
                    WTERMSIG(st), l.mem_mb);
            return 0;
        }
        snprintf(out->error, sizeof out->error, "the validator gave no verdict (exit %d)",
                 WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return -1;
    }
    out->status = (int)json_integer_value(json_object_get(doc, "status"));
    out->limit = known_limit(json_string_value(json_object_get(doc, "limit")));
    snprintf(out->error, sizeof out->error, "%s",
             json_string_value(json_object_get(doc, "error")) ?: "");
    out->rows = json_integer_value(json_object_get(doc, "rows"));
    out->d = json_integer_value(json_object_get(doc, "d"));
    out->nnz = json_integer_value(json_object_get(doc, "nnz"));
    {
        json_t *lab = json_object_get(doc, "labels");
        json_t *ln = json_array_get(lab, 0), *lp = json_array_get(lab, 1);

        out->label_neg = json_is_number(ln) ? json_number_value(ln) : NAN;
        out->label_pos = json_is_number(lp) ? json_number_value(lp) : NAN;
    }
    json_decref(doc);
    if (out->status != 0 && out->status != 413 && out->status != 422)
        out->status = 422;
    return 0;
}
