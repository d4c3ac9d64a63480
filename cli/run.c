/*
 * `ecopt run JOB.json`: loads the data, solves for P*, resolves the
 * parameters, runs the job and prints what it did, as text for people or as
 * CSV/JSON metric rows for programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "catalog.h"
#include "cmd.h"
#include "describe.h"
#include "ecopt/clock.h"
#include "ecopt/data.h"
#include "ecopt/memory.h"
#include "ecopt/proc.h"
#include "ecopt/run.h"
#include "jobspec.h"
#include "sha256.h"
#ifdef ECOPT_WITH_MPI
#include "ecopt/mpi.h"
#endif

enum format { FMT_TEXT, FMT_CSV, FMT_JSON };

struct run_ctx {
    enum format format;
    FILE *rows;           /* where CSV rows go */
    json_t *json_rows;    /* where JSON rows go */
    FILE *info;           /* people's text: stdout, or stderr with --format */
    int tty;              /* info is a terminal: draw a progress bar */
    int quiet;
    const ec_job *job;
    double last_line;     /* wall time of the last progress line */
    int report_fd;        /* progress records for the service; -1 none */
    int report_broken;    /* the reader went away: stop the job */
    char *rbuf;           /* metric records not yet written */
    size_t rlen, rcap;
    double rflushed;      /* wall time of the last write */
};

static const char run_usage[] =
    "usage: ecopt run JOB.json [options]\n"
    "\n"
    "Runs a job in this process and prints the resolved problem and\n"
    "parameters, progress, and a summary.\n"
    "\n"
    "  -f, --format text|csv|json  metric rows on stdout as CSV or JSON (the\n"
    "                              text then goes to stderr); default text\n"
    "  -o, --output FILE           write the rows to FILE instead of stdout\n"
    "  -d, --data-dir DIR          where dataset names are looked up\n"
    "                              (default $ECOPT_DATA_DIR)\n"
    "  -b, --backend NAME          inproc (workers simulated in this process),\n"
    "                              process (forked workers over sockets) or\n"
    "                              mpi (mpirun -np P+1; extra mpirun\n"
    "                              arguments from $ECOPT_MPIRUN_ARGS);\n"
    "                              default: the job's backend, else process\n"
    "      --procs P               processes (MPI ranks) hosting the n\n"
    "                              workers, 1..n; default: the job's procs,\n"
    "                              else min(n, online CPUs), or one CPU\n"
    "                              fewer for a light round (process backend)\n"
    "      --report-fd N           write progress records (JSON lines, see\n"
    "                              api/report-format.md) to descriptor N\n"
    "      --round-timeout SEC     fail the job if a worker takes longer to\n"
    "                              answer (process backend; default 60)\n"
    "      --worker-mem-limit MB   address-space limit of each worker process\n"
    "      --mem-limits auto|off   auto: address-space limits for this process\n"
    "                              and (unless --worker-mem-limit) each worker\n"
    "                              process from the memory estimate, 1.25x it\n"
    "                              plus 64 MiB (an MPI rank: plus what Open MPI\n"
    "                              maps at its start); default off (the\n"
    "                              service: auto)\n"
    "      --worker-cpu-limit SEC  CPU time limit of each worker process\n"
    "      --worker-user NAME      run the job (workers and, once the data\n"
    "                              is loaded, the coordinator) as this user;\n"
    "                              needs root\n"
    "      --worker-uid N          the same as a uid (and gid) of the job's\n"
    "                              own, which no account may use; anything\n"
    "                              left running as it is killed first\n"
    "      --dataset-sha256 HEX    the service's: the dataset is the catalog's\n"
    "                              version HEX of its name, in the data directory\n"
    "      --pstar-hint FILE       P* values found before for this dataset\n"
    "                              (written by the service; see\n"
    "                              api/report-format.md)\n"
    "      --hostfile FILE         mpirun's hostfile (backend mpi); the\n"
    "                              dataset must be at the same path on\n"
    "                              every host\n"
    "  -q, --quiet                 no progress lines\n"
    "  -h, --help                  this text\n"
    "\n"
    "JOB.json may be - for standard input. SIGTERM or SIGINT ends the job\n"
    "and its workers cleanly. Exit status: 0 target or round budget reached,\n"
    "2 bad arguments, spec or data, 3 the job failed (diverged, out of time,\n"
    "a worker died) or was cancelled, 1 internal failure.\n";

/* Records written at once, and the longest a metric record waits. */
#define REPORT_BATCH_BYTES 16384
#define REPORT_BATCH_SECONDS 0.02

/* Writes what is held, whole; a reader that went away stops the job,
 * since nobody would see its results. */
static void report_flush(struct run_ctx *ctx)
{
    size_t off = 0;

    while (off < ctx->rlen && !ctx->report_broken) {
        ssize_t w = write(ctx->report_fd, ctx->rbuf + off, ctx->rlen - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ctx->report_broken = 1;
        else
            off += (size_t)w;
    }
    ctx->rlen = 0;
    ctx->rflushed = ec_clock();
}

/*
 * One record and a newline. Metric records (soon = 1) are held and
 * written together, up to 16 KB or 20 ms: a job that reports every round
 * then costs its reader one wake-up per batch rather than per row. Every
 * other record goes out at once, with what was held before it.
 */
static void report_text(struct run_ctx *ctx, const char *text, size_t len, int soon)
{
    if (ctx->report_fd < 0 || ctx->report_broken)
        return;
    if (ctx->rlen + len + 1 > ctx->rcap) {
        size_t cap = ctx->rlen + len + 1 + REPORT_BATCH_BYTES;
        char *nb = realloc(ctx->rbuf, cap);
        if (!nb) {
            ctx->report_broken = 1;
            return;
        }
        ctx->rbuf = nb;
        ctx->rcap = cap;
    }
    memcpy(ctx->rbuf + ctx->rlen, text, len);
    ctx->rlen += len;
    ctx->rbuf[ctx->rlen++] = '\n';
    if (!soon || ctx->rlen >= REPORT_BATCH_BYTES ||
        ec_clock() - ctx->rflushed >= REPORT_BATCH_SECONDS)
        report_flush(ctx);
}

static void report_put(struct run_ctx *ctx, json_t *rec, int soon)
{
    char *text;

    if (ctx->report_fd < 0 || ctx->report_broken || !rec) {
        json_decref(rec);
        return;
    }
    json_object_set_new(rec, "v", json_integer(1));
    text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(rec);
    if (!text) {
        ctx->report_broken = 1;
        return;
    }
    report_text(ctx, text, strlen(text), soon);
    free(text);
}

static void report(struct run_ctx *ctx, json_t *rec)
{
    report_put(ctx, rec, 0);
}

/* The final record for a job that could not start. */
static void report_failure(struct run_ctx *ctx, const char *reason)
{
    report(ctx, json_pack("{s:s, s:s, s:s, s:s}", "type", "final", "status",
                          "failed", "stop", "start_failed", "reason", reason));
}

static const char *status_of(ec_stop stop)
{
    switch (stop) {
    case EC_STOP_TARGET:
    case EC_STOP_MAX_ROUNDS:
        return "succeeded";
    case EC_STOP_CANCELLED:
        return "cancelled";
    default:
        return "failed";
    }
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

/*
 * A dataset is a path when it names an existing file; otherwise a name
 * inside the data directory. Names may not climb out of that directory.
 */
static int resolve_dataset(const char *name, const char *dir, char *out,
                           size_t len, char *err, size_t errlen)
{
    struct stat st;

    if (stat(name, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(out, len, "%s", name);
        return 0;
    }
    if (!dir || !*dir) {
        snprintf(err, errlen,
                 "dataset: '%s' is not a file, and no data directory is set "
                 "(--data-dir or ECOPT_DATA_DIR)",
                 name);
        return -1;
    }
    if (strchr(name, '/') || strcmp(name, "..") == 0 || name[0] == '.') {
        snprintf(err, errlen, "dataset: '%s' is not a file", name);
        return -1;
    }
    if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len ||
        stat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "dataset: '%s' not found (looked for a file of "
                 "that name and in %s)", name, dir);
        return -1;
    }
    return 0;
}

/*
 * The service's way to a dataset (--dataset-sha256): the spec's dataset
 * is a name in the catalog and nothing else, reached through the data
 * directory (openat, O_NOFOLLOW), never a path of the current directory.
 * The version the job recorded at submit is read from the versions folder
 * (a file that never changes) or, for a file placed in the directory by
 * hand and not yet kept there, by its name; either way the bytes are
 * hashed and must be that version, so the file parsed is the one whose
 * SHA-256 keys the P* cache. Returns the open descriptor, or -1 with a
 * sentence in err that quotes nothing of the file.
 */
static int open_version(const char *name, const char *dir, const char *sha,
                        struct stat *st, char *err, size_t errlen)
{
    int dirfd = -1, vfd = -1, fd = -1;
    const char *why;
    char got[SHA256_HEX_SIZE];

    if ((why = catalog_name_check(name))) {
        snprintf(err, errlen, "dataset: %s", why);
        return -1;
    }
    if (!dir || !*dir || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "dataset '%s': the data directory cannot be opened", name);
        return -1;
    }
    if ((vfd = openat(dirfd, CATALOG_VERSIONS_DIR,
                      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0) {
        fd = openat(vfd, sha, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        close(vfd);
    }
    if (fd < 0)
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close(dirfd);
    if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "dataset '%s' (version %.12s): not in the data directory",
                 name, sha);
        goto fail;
    }
    if (catalog_hash_fd(fd, got) < 0) {
        snprintf(err, errlen, "dataset '%s': cannot be read (%s)", name, strerror(errno));
        goto fail;
    }
    if (strcmp(got, sha) != 0) {
        snprintf(err, errlen, "dataset '%s': the file is no longer version %.12s "
                 "(it changed after the job was submitted)", name, sha);
        goto fail;
    }
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

/*
 * The job's dataset, open: the version the service recorded (open_version)
 * or, run by hand, a path or a name in the data directory. *fd is the
 * descriptor read, *st its stat and shown the name messages give it.
 */
static int open_dataset(const char *name, const char *dir, const char *version,
                        int *fd, struct stat *st, char *shown, size_t shownlen,
                        char *err, size_t errlen)
{
    char path[2048];

    if (version) {
        snprintf(shown, shownlen, "%s", name);
        return (*fd = open_version(name, dir, version, st, err, errlen)) < 0 ? -1 : 0;
    }
    if (resolve_dataset(name, dir, path, sizeof path, err, errlen) < 0)
        return -1;
    snprintf(shown, shownlen, "%s", path);
    if ((*fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0 || fstat(*fd, st) < 0) {
        snprintf(err, errlen, "dataset: %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int read_dataset(int fd, const char *shown, const ec_libsvm_opts *o,
                        ec_dataset *ds, ec_err *e)
{
    return lseek(fd, 0, SEEK_SET) < 0
               ? ec_err_set(e, EC_EIO, "%s: cannot read (%s)", shown, strerror(errno))
               : ec_libsvm_read_fd(fd, shown, o, ds, e);
}

/* Whether the file read is still as it was before (its stat in *after). */
static int data_unchanged(int fd, const struct stat *before, struct stat *after)
{
    return fstat(fd, after) == 0 && after->st_size == before->st_size &&
           after->st_mtim.tv_sec == before->st_mtim.tv_sec &&
           after->st_mtim.tv_nsec == before->st_mtim.tv_nsec;
}

/* The start record's dataset: its stats, and the version when it has one. */
static json_t *dataset_json(const ec_dataset *ds, const char *version)
{
    json_t *j = describe_dataset(ds);

    if (j && version)
        json_object_set_new(j, "sha256", json_string(version));
    return j;
}

/* Whether a P* hint's file identity is that of st (describe.h). */
static int hint_same_file(json_t *id, const struct stat *st)
{
    json_t *mine = describe_file_identity(st);
    int same = mine && json_equal(mine, id);

    json_decref(mine);
    return same;
}

/*
 * P* from a hint file when the hint is for the very file that was read
 * (stat before and after reading) and has this problem's loss and exact
 * lambdas. The cache only saves time: anything amiss with the hint means
 * P* is solved for as usual, with a line on info saying why. The hint is
 * read while the data is (the job may not read the service's files once
 * it runs unprivileged) and used once the problem is built.
 */
static json_t *load_pstar_hint(const char *hint, const struct stat *before,
                               const struct stat *after, const char *sha, FILE *info)
{
    json_error_t jerr;
    json_t *root = json_load_file(hint, 0, &jerr), *file;

    if (!root) {
        fprintf(info, "pstar hint %s: %s (line %d); solving\n", hint, jerr.text,
                jerr.line);
        return NULL;
    }
    file = json_object_get(root, "file");
    /* The service's hint names the version it is for, and the bytes read
       were hashed: only that version. Otherwise the very file read. */
    if (sha ? !json_is_string(json_object_get(root, "sha256")) ||
                  strcmp(json_string_value(json_object_get(root, "sha256")), sha) != 0
            : !hint_same_file(file, before) || !hint_same_file(file, after)) {
        json_decref(root);      /* another file now: solve */
        return NULL;
    }
    return root;
}

/* Takes P* from a hint load_pstar_hint() kept, and frees it. */
static void use_pstar_hint(json_t *root, const char *hint, ec_problem *pb,
                           FILE *info)
{
    json_t *entries, *en;
    size_t i;

    if (!root)
        return;
    if (!json_is_string(json_object_get(root, "loss")) ||
        strcmp(json_string_value(json_object_get(root, "loss")),
               ec_loss_name(pb->loss)) != 0)
        goto out;
    entries = json_object_get(root, "entries");
    json_array_foreach(entries, i, en) {
        json_t *p = json_object_get(en, "p_star"), *b = json_object_get(en, "bound");
        ec_err e = {0};

        if (!json_is_number(json_object_get(en, "lambda1")) ||
            !json_is_number(json_object_get(en, "lambda2")) ||
            json_number_value(json_object_get(en, "lambda1")) != pb->lambda1 ||
            json_number_value(json_object_get(en, "lambda2")) != pb->lambda2 ||
            !json_is_number(p))
            continue;
        if (ec_problem_use_pstar(pb, json_number_value(p),
                                 json_is_number(b) ? json_number_value(b) : NAN,
                                 json_string_value(json_object_get(en, "method")),
                                 &e) < 0)
            fprintf(info, "pstar hint %s: %s; solving\n", hint, e.msg);
        break;
    }
out:
    json_decref(root);
}

/* The resolved parameters as the service stores them, with ECLK's rule
 * for its compressor's contraction. */
static json_t *params_json(const ec_params *prm)
{
    json_t *o = describe_params(prm);

    if (o && prm->algo == EC_ALGO_EF21)
        json_object_set_new(o, "step_factor", describe_real(prm->step_factor));
    if (o && prm->algo == EC_ALGO_ECLK) {
        json_object_set_new(o, "delta_rule",
                            json_string(ec_eclk_rule_name(prm->eclk_rule)));
        json_object_set_new(o, "delta_eff", describe_real(prm->delta_eff));
        json_object_set_new(o, "inflation", describe_real(prm->inflation));
        json_object_set_new(o, "inflation_c", describe_real(prm->eclk_c));
        json_object_set_new(o, "L_delta", describe_real(prm->L_delta));
    }
    return o;
}

/* What ECLK's online rule did over the run. */
static json_t *eclk_json(const ec_eclk_report *r)
{
    return json_pack("{s:f, s:f, s:f, s:f, s:I, s:I}", "delta_eff", r->delta_eff,
                     "inflation", r->inflation, "delta_min", r->delta_min,
                     "delta_max", r->delta_max, "updates", (json_int_t)r->updates,
                     "restarts", (json_int_t)r->restarts);
}

#ifndef __SANITIZE_ADDRESS__   /* no limits there: see set_memory_limits */
/*
 * The address-space limit of a process whose own allocations the account
 * puts at `own`: a quarter more, EC_MEM_PROCESS_BASE for code, libraries,
 * stacks and the allocator's arenas, and `held`, what the process had
 * mapped before the job began that the base does not cover (an MPI
 * rank's runtime; 0 for ecopt's own processes).
 */
static uint64_t mem_limit(uint64_t own, uint64_t held)
{
    return held + own + own / 4 + EC_MEM_PROCESS_BASE;
}

static void job_estimate(const ec_dataset *ds, const ec_job *job,
                         uint32_t procs, ec_mem_estimate *est)
{
    ec_mem_job mj;

    ec_mem_job_from(&mj, job, ds->n_rows, ds->nnz, ds->d, procs);
    ec_estimate_memory(&mj, est);
}
#endif

/*
 * --mem-limits auto: address-space limits from the memory account, with
 * room to spare (mem_limit): this process's own soft limit, and each
 * worker process's unless --worker-mem-limit gave one (an MPI worker rank
 * sets its own, worker_rank). `held` is what an MPI rank held at its
 * start, 0 otherwise. Set once the data is read (which the upload limits
 * bound) and before the P* solve and the run. Not in an AddressSanitizer
 * build, whose shadow memory is no part of it.
 */
static int set_memory_limits(const ec_dataset *ds, const ec_job *job,
                             enum jobspec_backend backend, ec_proc_opts *popts,
                             uint64_t held, FILE *info)
{
#ifdef __SANITIZE_ADDRESS__
    (void)ds, (void)job, (void)backend, (void)popts, (void)held;
    fprintf(info, "memory     no limits in an AddressSanitizer build\n");
    return 0;
#else
    ec_mem_estimate est;
    struct rlimit rl;

    job_estimate(ds, job, backend == JOBSPEC_BACKEND_INPROC ? 0 : popts->procs,
                 &est);
    if (getrlimit(RLIMIT_AS, &rl) < 0)
        return -1;
    rl.rlim_cur = mem_limit(est.coordinator, held);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
        rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_AS, &rl) < 0)
        return -1;
    fprintf(info, "memory     limits: coordinator %.0f MiB", rl.rlim_cur / 1048576.0);
    if (backend == JOBSPEC_BACKEND_MPI && popts->worker_mem_limit)
        fprintf(info, ", each worker rank %.0f MiB",
                popts->worker_mem_limit / 1048576.0);
    else if (backend == JOBSPEC_BACKEND_MPI)
        fprintf(info, ", each worker rank about %.0f MiB (both count the "
                "%.0f MiB the MPI runtime maps at a rank's start)",
                mem_limit(est.rank, held) / 1048576.0, held / 1048576.0);
    else if (est.procs && popts->worker_mem_limit)
        fprintf(info, ", each worker process %.0f MiB",
                popts->worker_mem_limit / 1048576.0);
    else if (est.procs) {
        popts->worker_mem_above = mem_limit(est.process, 0);
        fprintf(info, ", each worker process %.0f MiB above what it "
                "inherits from the coordinator",
                popts->worker_mem_above / 1048576.0);
    }
    fputc('\n', info);
    return 0;
#endif
}

static void print_setup(FILE *o, const char *path, const ec_dataset *ds,
                        const ec_job *job, const ec_problem *pb,
                        const ec_params *prm, enum jobspec_backend backend,
                        uint32_t procs)
{
    const ec_comp_spec *c = &prm->comp;
    char procs_text[64] = "";

    fprintf(o, "dataset    %s: %u rows, d = %u, nnz = %llu, labels %g -> -1, %g -> +1\n",
            path, ds->n_rows, ds->d, (unsigned long long)ds->nnz,
            ds->label_neg, ds->label_pos);
    fprintf(o, "problem    %s loss, lambda1 = %g, lambda2 = %.6g", ec_loss_name(pb->loss),
            pb->lambda1, pb->lambda2);
    if (!isnan(job->lambda2_rel) && isnan(job->lambda2))
        fprintf(o, " (lambda2_rel %g)", job->lambda2_rel);
    fprintf(o, ", %u workers, %s shards\n", pb->n,
            job->shuffle ? "shuffled" : "contiguous");
    fprintf(o, "constants  L = %.6g, L_f = %.6g, ", pb->L, pb->L_f);
    if (!isnan(pb->L_tilde))        /* computed for EF21 alone */
        fprintf(o, "L_tilde = %.6g, ", pb->L_tilde);
    fprintf(o, "mu = %.6g, kappa = %.6g\n", pb->mu, pb->kappa);
    if (pb->solve_cached)
        fprintf(o, "optimum    P* = %.15g, P(x0) = %.15g (cached, found by %s, bound %.2g)\n",
                pb->P_star, pb->P0, pb->solve_method, pb->solve_bound);
    else
        fprintf(o, "optimum    P* = %.15g, P(x0) = %.15g (%s, %d iterations, bound %.2g)\n",
                pb->P_star, pb->P0, pb->solve_method, pb->solve_iters,
                pb->solve_bound);
    fprintf(o, "algorithm  %s, compressor %s", ec_algo_name(prm->algo),
            ec_comp_name(c->type));
    if (ec_comp_info_of(c->type)->param == EC_COMP_PARAM_K)
        fprintf(o, " k = %u", c->k);
    if (ec_comp_info_of(c->type)->param == EC_COMP_PARAM_S)
        fprintf(o, " s = %u", c->s);
    fprintf(o, " (delta = %.4g), batch %u\n", prm->delta, prm->batch);
    fprintf(o, "parameters step = %.6g (default %.6g x %g)", prm->gamma,
            prm->theory_step, prm->step_multiplier);
    if (prm->algo == EC_ALGO_EF21)
        fprintf(o, ", default = %g x the theorem's step", prm->step_factor);
    if (!isnan(prm->p))
        fprintf(o, ", p = %.4g", prm->p);
    if (ec_algo_is(prm->algo, EC_FAMILY_KATYUSHA))
        fprintf(o, ", theta1 = %.4g, theta2 = %.4g, eta = %.4g, L_eff = %.6g",
                prm->theta1, prm->theta2, prm->eta, prm->L_eff);
    if (prm->algo == EC_ALGO_ECLK)
        fprintf(o, "\ncontraction %s rule: delta_eff = %.4g, inflation %.4g "
                   "(c = %g), L_delta = %.6g%s",
                ec_eclk_rule_name(prm->eclk_rule), prm->delta_eff,
                prm->inflation, prm->eclk_c, prm->L_delta,
                prm->eclk_rule == EC_ECLK_ONLINE
                    ? "; delta_eff follows the measured contraction" : "");
    if (ec_algo_is(prm->algo, EC_FAMILY_DIANA))
        fprintf(o, ", shifts %s (omega = %.4g, alpha = %.4g)",
                ec_comp_name(prm->shift_comp.type), prm->omega, prm->alpha);
    if (procs)
        snprintf(procs_text, sizeof procs_text, " (%u workers on %u process%s)",
                 job->workers, procs, procs == 1 ? "" : "es");
    fprintf(o, "\nrun        max_rounds %llu, target %g, eval_every %u, seed %llu, backend %s%s\n",
            (unsigned long long)job->max_rounds, job->target, job->eval_every,
            (unsigned long long)job->seed, jobspec_backend_name(backend), procs_text);
    {
        ec_mem_job mj;
        ec_mem_estimate est;

        ec_mem_job_from(&mj, job, ds->n_rows, ds->nnz, ds->d, procs);
        mj.mpi = backend == JOBSPEC_BACKEND_MPI;
        ec_estimate_memory(&mj, &est);
        fprintf(o, "memory     estimate %.0f MiB: coordinator %.0f MiB", est.total / 1048576.0,
                est.coordinator / 1048576.0);
        if (est.procs && backend == JOBSPEC_BACKEND_MPI)
            fprintf(o, ", %u worker rank%s of up to %.0f MiB", est.procs,
                    est.procs == 1 ? "" : "s", est.rank / 1048576.0);
        else if (est.procs)
            fprintf(o, ", %u worker process%s of up to %.0f MiB", est.procs,
                    est.procs == 1 ? "" : "es", est.process / 1048576.0);
        fputc('\n', o);
    }
}

static int on_metric(void *vctx, const ec_metric *row)
{
    struct run_ctx *ctx = vctx;
    char line[512];

    if (ctx->format == FMT_CSV) {
        describe_csv_row(row, line, sizeof line);
        fprintf(ctx->rows, "%s\n", line);
    } else if (ctx->format == FMT_JSON) {
        json_array_append_new(ctx->json_rows, describe_metric(row));
    }
    if (ctx->report_fd >= 0) {
        /* Every evaluation point: written directly, not through Jansson. */
        char rec[DESCRIBE_RECORD_MAX];
        int n = describe_metric_record(row, rec, sizeof rec);

        report_text(ctx, rec, (size_t)n, 1);
        if (ctx->report_broken)
            return 1;
    }
    if (ctx->quiet)
        return 0;
    if (ctx->tty) {
        /* A bar over the log of the gap: from 1 down to the target. */
        double goal = ctx->job->target > 0 ? -log10(ctx->job->target) : 12;
        double by_gap = row->rel_gap > 0 ? -log10(row->rel_gap) / goal : 1;
        double by_rounds = (double)row->round / ctx->job->max_rounds;
        double frac = fmin(1.0, fmax(0.0, fmax(by_gap, by_rounds)));
        int width = 30, fill = (int)(frac * width);

        fprintf(ctx->info, "\r[%.*s%*s] round %llu  rel gap %.3e  %.1f s ",
                fill, "##############################", width - fill, "",
                (unsigned long long)row->round, row->rel_gap, row->seconds);
        fflush(ctx->info);
    } else if (row->round == 0 || ec_clock() - ctx->last_line >= 1.0) {
        fprintf(ctx->info, "round %llu  rel gap %.3e  bits up %.4g  %.2f s\n",
                (unsigned long long)row->round, row->rel_gap, row->bits_up,
                row->seconds);
        ctx->last_line = ec_clock();
    }
    return 0;
}

/*
 * What the job's processes used, so far: CPU seconds (user + system) of
 * this process and of the workers it reaped, and each one's peak resident
 * set. Their sum bounds the job's memory from above: pages the workers
 * share copy-on-write with this process (the data) count in each.
 */
struct usage {
    double cpu_seconds;
    double own_rss, workers_rss;    /* bytes */
};

static struct usage usage_now(const ec_summary *sum)
{
    struct rusage self, kids;
    struct usage u;

    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    u.cpu_seconds = (double)(self.ru_utime.tv_sec + self.ru_stime.tv_sec + kids.ru_utime.tv_sec +
                             kids.ru_stime.tv_sec) +
                    1e-6 * (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec +
                                    kids.ru_utime.tv_usec + kids.ru_stime.tv_usec);
    u.own_rss = 1024.0 * (double)self.ru_maxrss;
    u.workers_rss = (double)sum->workers_maxrss;
    return u;
}

static void print_summary(FILE *o, const ec_summary *sum, const ec_params *prm)
{
    const ec_metric *r = &sum->last;

    fprintf(o, "stop       %s: %s\n", ec_stop_name(sum->stop), sum->reason);
    fprintf(o, "rounds     %llu\n", (unsigned long long)sum->rounds);
    fprintf(o, "rel gap    %.4g (P - P* = %.4g, ||grad|| = %.4g)\n",
            r->rel_gap, r->gap, r->grad_norm);
    fprintf(o, "bits up    %.6g per worker (paper bits %.6g); bits down %.6g\n",
            r->bits_up, r->paper_bits, r->bits_down);
    if (r->wire_up > 0 && sum->rounds > 0) {
        /* The least any encoding could send up: k indices and k values. */
        ec_comp_param param = ec_comp_info_of(prm->comp.type)->param;
        double minimum = param == EC_COMP_PARAM_NONE ? 8.0 * prm->d :
                         param == EC_COMP_PARAM_S ? 0.0 : 12.0 * prm->comp.k;
        fprintf(o, "wire       %.1f bytes up per worker per round", r->wire_up / sum->rounds);
        if (minimum > 0)
            fprintf(o, " (minimum %.0f: %s)", minimum,
                    param == EC_COMP_PARAM_NONE ? "d values" : "k indices + k values");
        fprintf(o, ", %.1f bytes down per worker per round\n", r->wire_down / sum->rounds);
    }
    if (prm->algo == EC_ALGO_ECLK && prm->eclk_rule == EC_ECLK_ONLINE)
        fprintf(o, "contraction delta_eff %.4g at the end (%.4g..%.4g over the "
                   "run), inflation %.4g, %llu updates, %llu restarts\n",
                sum->eclk.delta_eff, sum->eclk.delta_min, sum->eclk.delta_max,
                sum->eclk.inflation, (unsigned long long)sum->eclk.updates,
                (unsigned long long)sum->eclk.restarts);
    fprintf(o, "wall time  %.3f s\n", r->seconds);
    {
        struct usage u = usage_now(sum);
        fprintf(o, "usage      %.2f CPU s; peak resident sets %.1f MB here + %.1f MB "
                   "the workers' (shared pages count in each)\n",
                u.cpu_seconds, u.own_rss / 1e6, u.workers_rss / 1e6);
    }
}

extern char **environ;

/* How long mpirun may take to end after a signal before it is killed. */
#define MPIRUN_GRACE_SECONDS 10.0

/*
 * Runs mpirun and waits for it, passing on SIGTERM, SIGINT and SIGHUP.
 * mpirun passes them to the ranks, which end within a round, and then
 * exits; but Open MPI's mpirun sometimes stays behind after its ranks
 * have gone (6 of 154 signals here), so it is killed if it is
 * still there MPIRUN_GRACE_SECONDS after the first signal. mpirun's exit
 * status, or EXIT_JOB_FAILED when it died of a signal.
 */
static int supervise_mpirun(char **av, int stdout_fd)
{
    static const int passed[] = {SIGTERM, SIGINT, SIGHUP};
    sigset_t waited, old, dflt;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t fa;
    double since = 0;
    pid_t pid;
    int st = 0, rc, sent = 0;

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
        return EXIT_USAGE;
    }
    for (;;) {
        struct timespec tick = {0, 200 * 1000 * 1000};
        siginfo_t info;
        int sig;

        rc = (int)waitpid(pid, &st, WNOHANG);
        if (rc == pid || (rc < 0 && errno != EINTR))
            break;
        if (sent && ec_clock() - since >= MPIRUN_GRACE_SECONDS) {
            fprintf(stderr, "ecopt run: mpirun did not end %g s after the signal; "
                    "killed\n", MPIRUN_GRACE_SECONDS);
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
        return EXIT_INTERNAL;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_JOB_FAILED;
}

/*
 * --backend mpi from the plain binary: run `mpirun -np P+1 ecopt-mpi
 * run ... --mpi-rank`, which runs the same job with rank 0 coordinating.
 * ecopt-mpi is looked up beside this binary (or $ECOPT_MPI_BIN); extra
 * mpirun arguments come from $ECOPT_MPIRUN_ARGS, split at spaces.
 * With a report descriptor, mpirun's stdout is that descriptor and rank
 * 0 writes its records to its stdout (which mpirun forwards, from any
 * host), its rows to /dev/null and its text to stderr.
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
        return EXIT_INTERNAL;
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
        return EXIT_USAGE;
    }
    snprintf(np, sizeof np, "%u", procs + 1);
    av[ac++] = "mpirun";
    av[ac++] = "-np";
    av[ac++] = np;
    if (hostfile) {
        av[ac++] = "--hostfile";
        av[ac++] = (char *)hostfile;
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
    fflush(NULL);
    int rc = supervise_mpirun(av, report_fd);
    free(extra);
    free(av);
    return rc;
}

/* Closes the descriptors lo..hi: close_range(2) where the kernel has it
   (Linux 5.9), else one by one up to the open-file limit. */
static void close_span(unsigned lo, unsigned hi)
{
    long max = sysconf(_SC_OPEN_MAX);

    if (lo > hi)
        return;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
#endif
    for (long fd = lo; fd <= (long)hi && fd < (max > 0 ? max : 65536); fd++)
        close((int)fd);
}

/*
 * A coordinator holds stdio and its report descriptor, nothing else: what
 * the process that started it left open without close-on-exec is closed
 * before anything else is done, so that no job can read or write it.
 */
static void close_inherited(int keep)
{
    if (keep >= 3) {
        close_span(3, (unsigned)keep - 1);
        close_span((unsigned)keep + 1, ~0u);
    } else {
        close_span(3, ~0u);
    }
}

#ifdef ECOPT_WITH_MPI
/* What an MPI worker rank takes from its argv, which is rank 0's. */
struct rank_args {
    const char *data_dir, *version, *worker_user;
    const ec_libsvm_opts *ropts;
    long long worker_uid;       /* <= 0: none */
    int mem_auto;
    ec_proc_opts popts;         /* --worker-mem-limit, --worker-cpu-limit */
    uint64_t held;              /* address space at MPI_Init */
};

/*
 * An MPI worker rank (rank > 0) takes the steps of a forked worker
 * process: it reads the data as it was started (root, under the service),
 * runs as the job's user or uid under a worker's limits (ec_worker_limits;
 * --mem-limits auto: from the account of a rank, mem_limit) but for the
 * open-file limit, which would cut off the MPI runtime's own descriptors,
 * then builds rank 0's problem and hosts its block of workers. A rank
 * that cannot tells rank 0 why, so the job fails saying so rather than
 * hangs or goes on with a rank that runs as root. Returns an exit code.
 */
static int worker_rank(const struct rank_args *a, const ec_job *job, int rank,
                       int size)
{
    ec_dataset ds = {0};
    ec_problem pb = {0};
    ec_params prm;
    ec_proc_opts lim = a->popts;
    ec_err e = {0};
    struct stat st;
    char err[4096], path[2048];
    const char *why = NULL;
    int fd = -1, rc;

    if (open_dataset(job->dataset, a->data_dir, a->version, &fd, &st, path,
                     sizeof path, err, sizeof err) < 0)
        why = err;
    else if (read_dataset(fd, path, a->ropts, &ds, &e) < 0)
        why = e.msg;
    if (fd >= 0)
        close(fd);
    /* Rank 0 clears a job's uid as it takes it (ec_drop_to_job_uid), which
     * would kill a rank of its host already running as it: so every rank
     * waits for rank 0 here, even one that failed, or rank 0 would wait. */
    if ((a->worker_user || a->worker_uid > 0) && ec_mpi_barrier() < 0 && !why)
        why = "the ranks could not meet before taking the job's user";
    if (!why && ((a->worker_user && ec_drop_privileges(a->worker_user, &e) < 0) ||
                 (a->worker_uid > 0 &&
                  ec_join_job_uid((uint32_t)a->worker_uid, &e) < 0) ||
                 (!a->worker_user && a->worker_uid <= 0 && ec_confine(&e) < 0)))
        why = e.msg;
    lim.worker_max_files = EC_WORKER_FILES_KEEP;
#ifndef __SANITIZE_ADDRESS__
    if (a->mem_auto && !lim.worker_mem_limit) {
        ec_mem_estimate est;

        job_estimate(&ds, job, (uint32_t)size - 1, &est);
        lim.worker_mem_limit = mem_limit(est.rank, a->held);
    }
#endif
    if (!why && (why = ec_worker_limits(&lim))) {
        snprintf(err, sizeof err, "%s: %s", why, strerror(errno));
        why = err;
    }
    if (!why && (ec_problem_init(&pb, &ds, job, &e) < 0 ||
                 ec_params_resolve(job, &pb, &prm, &e) < 0))
        why = e.msg;
    rc = why ? ec_mpi_worker_fail(rank, why) : ec_mpi_worker(&pb, &prm, rank, size);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    return rc;
}
#endif

int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"data-dir", required_argument, NULL, 'd'},
        {"quiet", no_argument, NULL, 'q'},
        {"backend", required_argument, NULL, 'b'},
        {"report-fd", required_argument, NULL, 'R'},
        {"round-timeout", required_argument, NULL, 'T'},
        {"worker-mem-limit", required_argument, NULL, 'M'},
        {"worker-cpu-limit", required_argument, NULL, 'C'},
        {"worker-user", required_argument, NULL, 'U'},
        {"worker-uid", required_argument, NULL, 'u'},
        {"hostfile", required_argument, NULL, 'H'},
        {"pstar-hint", required_argument, NULL, 'P'},
        {"dataset-sha256", required_argument, NULL, 'S'},
        {"mpi-rank", no_argument, NULL, 'Z'},
        {"procs", required_argument, NULL, 'W'},
        {"mem-limits", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct run_ctx ctx = {.format = FMT_TEXT, .rows = stdout, .info = stdout,
                          .report_fd = -1};
    ec_proc_opts popts = {0};
    const char *backend_flag = NULL, *hostfile = NULL, *worker_user = NULL;
    const char *pstar_hint = NULL, *version = NULL;
    int data_fd = -1;
    ec_libsvm_opts ropts = {0};
    long long worker_uid = -1, procs_flag = 0;
    int mem_auto = 0;
    struct stat data_st, after_st;
    int mpi_rank_mode = 0;
    uint64_t held = 0;          /* an MPI rank's address space at start */
#ifdef ECOPT_WITH_MPI
    int rank = 0;
#endif
    enum jobspec_backend backend;
    char *end;
    const char *output = NULL, *data_dir = getenv("ECOPT_DATA_DIR");
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    ec_dataset ds = {0};
    ec_problem pb = {0};
    ec_params prm;
    ec_summary sum = {0};
    ec_err e = {0};
    char err[4096], path[2048], *text = NULL;
    size_t len = 0;
    int c, rc = EXIT_INTERNAL;
    double started = ec_clock(), before_run = 0;
    json_t *hint = NULL;
    ec_job run_job;

    optind = 1;
    while ((c = getopt_long(argc, argv, "f:o:d:qhb:", opts, NULL)) != -1) {
        switch (c) {
        case 'f':
            if (strcmp(optarg, "text") == 0)
                ctx.format = FMT_TEXT;
            else if (strcmp(optarg, "csv") == 0)
                ctx.format = FMT_CSV;
            else if (strcmp(optarg, "json") == 0)
                ctx.format = FMT_JSON;
            else {
                fprintf(stderr, "ecopt run: --format must be text, csv or json (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'o':
            output = optarg;
            break;
        case 'd':
            data_dir = optarg;
            break;
        case 'q':
            ctx.quiet = 1;
            break;
        case 'b':
            backend_flag = optarg;
            if (strcmp(optarg, "inproc") != 0 && strcmp(optarg, "process") != 0 &&
                strcmp(optarg, "mpi") != 0) {
                fprintf(stderr, "ecopt run: --backend must be inproc, process or mpi (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'R':
            errno = 0;
            ctx.report_fd = (int)strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || ctx.report_fd < 0) {
                fprintf(stderr, "ecopt run: --report-fd must be a descriptor number (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'T':
            popts.round_timeout = strtod(optarg, &end);
            if (*end || end == optarg || !(popts.round_timeout > 0) ||
                popts.round_timeout > 86400) {
                fprintf(stderr, "ecopt run: --round-timeout must be in (0, 86400] seconds (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'H':
            hostfile = optarg;
            break;
        case 'P':
            pstar_hint = optarg;
            break;
        case 'S':
            if (strlen(optarg) != 64 || strspn(optarg, "0123456789abcdef") != 64) {
                fprintf(stderr, "ecopt run: --dataset-sha256 must be 64 lowercase hex "
                        "digits\n");
                return EXIT_USAGE;
            }
            version = optarg;
            ropts.redact = 1;
            break;
        case 'Z':
            mpi_rank_mode = 1;
            break;
        case 'L':
            if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "off") != 0) {
                fprintf(stderr, "ecopt run: --mem-limits must be auto or off (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            mem_auto = strcmp(optarg, "auto") == 0;
            break;
        case 'W':
            errno = 0;
            procs_flag = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || procs_flag < 1 ||
                procs_flag > EC_JOB_MAX_WORKERS) {
                fprintf(stderr, "ecopt run: --procs must be in 1..%u (got '%s')\n",
                        (unsigned)EC_JOB_MAX_WORKERS, optarg);
                return EXIT_USAGE;
            }
            break;
        case 'M': {
            double mb = strtod(optarg, &end);
            if (*end || end == optarg || !(mb >= 16) || mb > 1e9) {
                fprintf(stderr, "ecopt run: --worker-mem-limit must be at least 16 MB (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            popts.worker_mem_limit = (uint64_t)(mb * 1048576.0);
            break;
        }
        case 'C':
            popts.worker_cpu_limit = strtod(optarg, &end);
            if (*end || end == optarg || !(popts.worker_cpu_limit >= 1) ||
                popts.worker_cpu_limit > 1e8) {
                fprintf(stderr, "ecopt run: --worker-cpu-limit must be in [1, 1e8] seconds (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'U':
            if (!*optarg) {
                fprintf(stderr, "ecopt run: --worker-user must name a user\n");
                return EXIT_USAGE;
            }
            worker_user = optarg;
            break;
        case 'u':
            errno = 0;
            worker_uid = strtoll(optarg, &end, 10);
            if (errno || *end || end == optarg || worker_uid < 1 ||
                worker_uid > (long long)EC_JOB_UID_MAX) {
                fprintf(stderr, "ecopt run: --worker-uid must be in 1..%u (got '%s')\n",
                        (unsigned)EC_JOB_UID_MAX, optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            fputs(run_usage, stdout);
            return EXIT_OK;
        default:
            fputs(run_usage, stderr);
            return EXIT_USAGE;
        }
    }
    /* An MPI rank keeps what mpirun's daemon gave it. */
    if (!mpi_rank_mode)
        close_inherited(ctx.report_fd);
    if (optind != argc - 1) {
        fprintf(stderr, "ecopt run: expected one job file\n%s", run_usage);
        return EXIT_USAGE;
    }
    if (worker_user && worker_uid > 0) {
        fprintf(stderr, "ecopt run: give --worker-user or --worker-uid, not both\n");
        return EXIT_USAGE;
    }
    if (ctx.format != FMT_TEXT)
        ctx.info = stderr;
    ctx.tty = isatty(fileno(ctx.info));

    if (!(text = slurp(argv[optind], 1 << 20, &len, err, sizeof err))) {
        fprintf(stderr, "ecopt run: %s\n", err);
        return EXIT_USAGE;
    }
    if (jobspec_parse(text, len, &spec, &errs) < 0) {
        jobspec_errors_format(&errs, err, sizeof err);
        fprintf(stderr, "ecopt run: %s: invalid job spec:\n%s\n", argv[optind], err);
        report_failure(&ctx, err);
        rc = EXIT_USAGE;
        goto out;
    }
    ctx.job = &spec.job;
    if (procs_flag > 0)
        spec.procs = (uint32_t)procs_flag;
    if (spec.procs > spec.job.workers) {
        snprintf(err, sizeof err, "--procs %u is more than the job's %u workers",
                 spec.procs, spec.job.workers);
        fprintf(stderr, "ecopt run: %s\n", err);
        report_failure(&ctx, err);
        rc = EXIT_USAGE;
        goto out;
    }
    popts.procs = ec_procs_resolve(spec.job.workers, spec.procs);
    backend = spec.backend;
    if (backend_flag)
        jobspec_backend_from_name(backend_flag, &backend);
    if (backend == JOBSPEC_BACKEND_MPI && !mpi_rank_mode) {
        rc = exec_mpirun(argc, argv, popts.procs, hostfile, ctx.report_fd);
        goto out;
    }
    if (mpi_rank_mode) {
#ifdef ECOPT_WITH_MPI
        int size;
        if (ec_mpi_init(&argc, &argv, &rank, &size, &e) < 0) {
            fprintf(stderr, "ecopt run: %s\n", e.msg);
            rc = EXIT_INTERNAL;
            goto out;
        }
        backend = JOBSPEC_BACKEND_MPI;
        /* Before the job's first allocation: Open MPI's libraries, shared
         * memory and threads come to some 230 MiB here, against 20 MiB
         * for all of a plain ecopt, so a limit from the account and
         * EC_MEM_PROCESS_BASE alone would fail the rank's next mmap. */
        held = ec_address_space();
        if (rank > 0) {
            struct rank_args ra = {data_dir, version, worker_user, &ropts,
                                   worker_uid, mem_auto, popts, held};

            rc = worker_rank(&ra, &spec.job, rank, size);
            ec_mpi_finalize();
            goto out;
        }
#else
        fprintf(stderr, "ecopt run: --mpi-rank: this binary was built without MPI\n");
        rc = EXIT_USAGE;
        goto out;
#endif
    }
    if (open_dataset(spec.job.dataset, data_dir, version, &data_fd, &data_st,
                     path, sizeof path, err, sizeof err) < 0) {
        fprintf(stderr, "ecopt run: %s\n", err);
        report_failure(&ctx, err);
        rc = EXIT_USAGE;
        goto out;
    }
    if (ec_signal_install(&e) < 0 || read_dataset(data_fd, path, &ropts, &ds, &e) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        report_failure(&ctx, e.msg);
        rc = e.code == EC_ENOMEM || e.code == EC_EIO ? EXIT_INTERNAL : EXIT_USAGE;
        goto out;
    }
    /* Without procs, the process backend sizes itself to the round, now
     * that the data's shape is known (mpirun needed its count before). */
    if (backend == JOBSPEC_BACKEND_PROCESS && !spec.procs) {
        ec_mem_job mj;

        ec_mem_job_from(&mj, &spec.job, ds.n_rows, ds.nnz, ds.d, 1);
        popts.procs = ec_procs_default_for(spec.job.workers, ec_round_bytes(&mj));
    }
    if (pstar_hint && data_unchanged(data_fd, &data_st, &after_st))
        hint = load_pstar_hint(pstar_hint, &data_st, &after_st, version, ctx.info);
    close(data_fd);             /* read: the job and its workers need it no more */
    data_fd = -1;
    if (output && !(ctx.rows = fopen(output, "w"))) {
        fprintf(stderr, "ecopt run: %s: %s\n", output, strerror(errno));
        ctx.rows = stdout;
        rc = EXIT_USAGE;
        goto out;
    }
    /* The data is loaded and the output open: from here on the job needs
     * only what it holds, so it runs unprivileged, and its workers with it:
     * the constants, the P* solve and the run. */
    if ((worker_user && ec_drop_privileges(worker_user, &e) < 0) ||
        (worker_uid > 0 && ec_drop_to_job_uid((uint32_t)worker_uid, &e) < 0) ||
        (!worker_user && worker_uid <= 0 && ec_confine(&e) < 0)) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        report_failure(&ctx, e.msg);
        rc = e.code == EC_EINVAL ? EXIT_USAGE : EXIT_INTERNAL;
        goto out;
    }
#ifdef ECOPT_WITH_MPI
    /* The worker ranks take the job's uid once this rank has (and has
     * cleared it): see worker_rank. */
    if (mpi_rank_mode && (worker_user || worker_uid > 0) && ec_mpi_barrier() < 0) {
        snprintf(err, sizeof err, "a worker rank ended before it took the "
                 "job's user");
        fprintf(stderr, "ecopt run: %s\n", err);
        report_failure(&ctx, err);
        rc = EXIT_INTERNAL;
        goto out;
    }
#endif
    if (ec_problem_init(&pb, &ds, &spec.job, &e) < 0 ||
        ec_params_resolve(&spec.job, &pb, &prm, &e) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        if (e.code == EC_ECANCELLED)
            goto stopped;
        report_failure(&ctx, e.msg);
        rc = e.code == EC_ENOMEM || e.code == EC_EIO ? EXIT_INTERNAL : EXIT_USAGE;
        goto out;
    }
    if (mem_auto && set_memory_limits(&ds, &spec.job, backend, &popts, held,
                                      ctx.info) < 0) {
        snprintf(err, sizeof err, "cannot set the job's memory limit: %s",
                 strerror(errno));
        fprintf(stderr, "ecopt run: %s\n", err);
        report_failure(&ctx, err);
        rc = EXIT_INTERNAL;
        goto out;
    }
    use_pstar_hint(hint, pstar_hint, &pb, ctx.info);
    hint = NULL;
    /* The solve counts against the job's max_seconds, from this process's
     * start, and ends at once on SIGTERM: a cancel is never deaf. */
    if (!pb.solve_cached &&
        ec_problem_solve_until(&pb, started + spec.job.max_seconds, &e) < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        if (e.code == EC_ECANCELLED || e.code == EC_ETIMEOUT)
            goto stopped;
        report_failure(&ctx, e.msg);
        rc = EXIT_INTERNAL;
        goto out;
    }
    print_setup(ctx.info, path, &ds, &spec.job, &pb, &prm, backend,
                backend == JOBSPEC_BACKEND_INPROC ? 0 : popts.procs);
    fflush(ctx.info);
    report(&ctx, json_pack("{s:s, s:i, s:s, s:o, s:o, s:o}", "type", "start",
                           "pid", (int)getpid(), "backend",
                           jobspec_backend_name(backend), "dataset",
                           dataset_json(&ds, version), "problem",
                           describe_problem(&pb), "params",
                           params_json(&prm)));
    if (ctx.format == FMT_CSV)
        fprintf(ctx.rows, "%s\n", describe_csv_header);
    if (ctx.format == FMT_JSON)
        ctx.json_rows = json_array();

    /* The run has what the data and the solve left of max_seconds. */
    run_job = spec.job;
    before_run = ec_clock() - started;
    run_job.max_seconds = spec.job.max_seconds - before_run;
    if (!(run_job.max_seconds > 1e-3))
        run_job.max_seconds = 1e-3;
    if (backend == JOBSPEC_BACKEND_INPROC)
        c = ec_run_inproc(&pb, &prm, &run_job, on_metric, &ctx, &sum, &e);
#ifdef ECOPT_WITH_MPI
    else if (backend == JOBSPEC_BACKEND_MPI)
        c = ec_run_mpi(&pb, &prm, &run_job, &popts, on_metric, &ctx, &sum, &e);
#endif
    else
        c = ec_run_process(&pb, &prm, &run_job, &popts, on_metric, &ctx,
                           &sum, &e);
    if (c < 0) {
        fprintf(stderr, "ecopt run: %s\n", e.msg);
        report_failure(&ctx, e.msg);
        rc = EXIT_INTERNAL;
        goto out;
    }
    if (c >= 0 && sum.stop == EC_STOP_MAX_SECONDS)
        snprintf(sum.reason, sizeof sum.reason,
                 "max_seconds %g reached at round %llu (relative gap %.3g; "
                 "%.3g s of it before the run: the data and P*)",
                 spec.job.max_seconds, (unsigned long long)sum.rounds,
                 sum.last.rel_gap, before_run);
    if (ctx.report_broken && sum.stop == EC_STOP_CANCELLED)
        snprintf(sum.reason, sizeof sum.reason,
                 "the report channel closed at round %llu",
                 (unsigned long long)sum.rounds);
    {
        json_t *fin = json_pack("{s:s, s:s, s:s, s:s, s:I, s:o}", "type", "final",
                                "status", status_of(sum.stop), "stop",
                                ec_stop_name(sum.stop), "reason", sum.reason,
                                "rounds", (json_int_t)sum.rounds, "last",
                                describe_metric(&sum.last));
        struct usage u = usage_now(&sum);

        if (fin && prm.algo == EC_ALGO_ECLK)
            json_object_set_new(fin, "eclk", eclk_json(&sum.eclk));
        if (fin)
            json_object_set_new(fin, "usage",
                                json_pack("{s:f, s:I}", "cpu_seconds", u.cpu_seconds,
                                          "rss_sum_bytes",
                                          (json_int_t)(u.own_rss + u.workers_rss)));
        report(&ctx, fin);
    }
    if (ctx.tty && !ctx.quiet)
        fputc('\n', ctx.info);
    if (ctx.format == FMT_JSON) {
        json_t *doc = json_pack("{s:o, s:o, s:o, s:o, s:O}", "spec",
                                jobspec_to_json(&spec), "problem",
                                describe_problem(&pb), "params",
                                params_json(&prm), "summary",
                                describe_summary(&sum), "rows", ctx.json_rows);
        if (doc && prm.algo == EC_ALGO_ECLK)
            json_object_set_new(json_object_get(doc, "summary"), "eclk",
                                eclk_json(&sum.eclk));
        if (!doc || json_dumpf(doc, ctx.rows, JSON_INDENT(1)) < 0) {
            fprintf(stderr, "ecopt run: cannot write JSON\n");
            json_decref(doc);
            goto out;
        }
        fputc('\n', ctx.rows);
        json_decref(doc);
    }
    print_summary(ctx.info, &sum, &prm);
    if (fflush(ctx.rows) != 0 || ferror(ctx.rows)) {
        fprintf(stderr, "ecopt run: writing rows: %s\n", strerror(errno));
        goto out;
    }
    rc = (sum.stop == EC_STOP_TARGET || sum.stop == EC_STOP_MAX_ROUNDS)
             ? EXIT_OK
             : EXIT_JOB_FAILED;
    goto out;
stopped:
    /* Cancelled, or out of time, before the run began: a final record
     * that says so, as a run stopped the same way would. */
    if (e.code == EC_ETIMEOUT)
        snprintf(err, sizeof err, "max_seconds %g reached before the run: %s",
                 spec.job.max_seconds, e.msg);
    else
        snprintf(err, sizeof err, "%s", e.msg);
    report(&ctx, json_pack("{s:s, s:s, s:s, s:s, s:i}", "type", "final", "status",
                           e.code == EC_ECANCELLED ? "cancelled" : "failed", "stop",
                           ec_stop_name(e.code == EC_ECANCELLED ? EC_STOP_CANCELLED
                                                                : EC_STOP_MAX_SECONDS),
                           "reason", err, "rounds", 0));
    rc = EXIT_JOB_FAILED;
out:
#ifdef ECOPT_WITH_MPI
    if (mpi_rank_mode && rank == 0) {
        fflush(NULL);
        /* Workers still inside a round cannot be stopped politely. */
        if (rc == EXIT_OK || (rc == EXIT_JOB_FAILED && sum.stop != EC_STOP_FAILED))
            ec_mpi_finalize();
        else
            ec_mpi_abort(rc);
    }
#endif
    if (ctx.rows && ctx.rows != stdout)
        fclose(ctx.rows);
    json_decref(ctx.json_rows);
    if (ctx.rlen && ctx.report_fd >= 0)
        report_flush(&ctx);     /* rows held when no final record came */
    free(ctx.rbuf);
    json_decref(hint);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    if (data_fd >= 0)
        close(data_fd);
    free(text);
    return rc;
}
