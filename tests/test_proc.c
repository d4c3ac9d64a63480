/*
 * The process runtime: forked workers over sockets and shared-memory
 * mailboxes give bitwise the same rows as the in-process simulation; and
 * every way a job can break (a worker killed, hung, exiting, sending
 * garbage or half a frame; SIGTERM to the coordinator) ends it quickly,
 * with a reason, and with every process gone and reaped. The fault cases
 * run the real ecopt binary.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/mailbox.h"
#include "ecopt/memory.h"
#include "ecopt/proc.h"
#include "ecopt/run.h"
#include "ecopt/spin.h"
#include "testutil.h"

/* ---- equivalence ------------------------------------------------------- */

#define MAX_ROWS 256

struct rows {
    ec_metric r[MAX_ROWS];
    unsigned n;
};

static int keep(void *ctx, const ec_metric *row)
{
    struct rows *rs = ctx;

    if (rs->n < MAX_ROWS)
        rs->r[rs->n++] = *row;
    return 0;
}

static ec_dataset a1a;

/* a1a read once, the signal handlers in place, and pb and prm made for
 * job: the set-up of every run of this file. */
static void a1a_prepare(const ec_job *job, ec_problem *pb, ec_params *prm)
{
    char path[1024];
    ec_err e = {0};

    if (!a1a.n_rows)
        ck_assert_int_eq(ec_libsvm_read(tu_data_path("a1a", path, sizeof path),
                                        NULL, &a1a, &e), 0);
    ck_assert_int_eq(ec_signal_install(&e), 0);
    ck_assert_int_eq(ec_problem_init(pb, &a1a, job, &e), 0);
    ck_assert_int_eq(ec_problem_solve(pb, &e), 0);
    ck_assert_msg(ec_params_resolve(job, pb, prm, &e) == 0, "%s", e.msg);
}

/* Each algorithm with each compressor it takes (every contraction row of
 * the table, k = 3 or s = 4): process == inproc, bitwise. */
START_TEST(test_process_equals_inproc)
{
    ec_comp_spec comps[EC_COMP_COUNT];
    size_t ncomps = 0;
    static struct rows a, b;
    ec_algo_id algo = (ec_algo_id)_i;
    ec_err e = {0};
    int runs = 0;

    for (int t = 0; t < EC_COMP_COUNT; t++) {
        const ec_comp_info *ci = ec_comp_info_of((ec_comp_type)t);

        if (!ci->contraction)
            continue;
        comps[ncomps] = (ec_comp_spec){(ec_comp_type)t, 0, 0};
        if (ci->param == EC_COMP_PARAM_K)
            comps[ncomps].k = 3;
        if (ci->param == EC_COMP_PARAM_S)
            comps[ncomps].s = 4;
        ncomps++;
    }
    for (size_t c = 0; c < ncomps; c++) {
        ec_job job;
        ec_problem pb;
        ec_params prm;
        ec_summary sa, sb;

        char why[384];

        if (ec_algo_comp_check(algo, comps[c].type, why, sizeof why))
            continue;
        ec_job_defaults(&job);
        job.algorithm = algo;
        job.workers = 5;
        job.lambda2_rel = 1e-3;
        job.compressor = comps[c];
        job.batch = 2;
        job.max_rounds = 120;
        job.eval_every = 7;
        job.p = 0.2;       /* the coin fires often enough to be exercised */
        /* Every other compressor of the methods that admit it: 2 of the
         * 5 workers a round, so that some processes host no participant
         * and send an empty frame. */
        if (ec_algo_info_of(algo)->partial && c % 2 == 0)
            job.participation = 0.4;
        /* EF21-P for the methods that admit it: the broadcast c_t is the
         * coordinator's top-3 or rand-3, each replica's w its sum. */
        if (ec_algo_info_of(algo)->down)
            job.compressor_down = (ec_comp_spec){c % 2 ? EC_COMP_RANDK : EC_COMP_TOPK, 3, 0};
        /* The shards of every split but dirichlet's (whose smallest may
         * hold fewer rows than the batch) on the same footing. */
        job.split = (ec_split)((algo + c) % EC_SPLIT_DIRICHLET);
        a1a_prepare(&job, &pb, &prm);
        a.n = 0;
        ck_assert_int_eq(ec_run_inproc(&pb, &prm, &job, keep, &a, &sa, &e), 0);
        for (unsigned i = 0; i < a.n; i++)
            a.r[i].seconds = a.r[i].time = a.r[i].wire_up = a.r[i].wire_down = 0;
        /* One process per worker, one hosting all, and blocks of 3 and 2,
         * reading the coordinator's shared model; and blocks of 3 and 2
         * again with a replica in each process (procs 6 below). Then the
         * coordinator stepping workers itself: worker 0, the processes
         * 1-2 and 3-4 (7); workers 0-3, one process with a replica
         * hosting worker 4 (8). */
        for (uint32_t procs = 1; procs <= 8; procs += procs == 2 ? 3 : 1) {
            ec_proc_opts opts = {0};

            opts.procs = procs == 6 || procs == 7 ? 2 : procs == 8 ? 1 : procs;
            opts.model_copies = procs == 6 || procs == 8;
            opts.local = procs == 7 ? 1 : procs == 8 ? 4 : 0;
            b.n = 0;
            ck_assert_msg(ec_run_process(&pb, &prm, &job, &opts, keep, &b, &sb, &e) == 0,
                          "%s", e.msg);
            ck_assert_msg(sb.stop == sa.stop, "%s: %s", ec_algo_name(algo), sb.reason);
            if (opts.model_copies)
                ck_assert_uint_eq(sb.model_shared, 0);
            else
                ck_assert_uint_ge(sb.model_shared,
                                  ec_model_shared_bytes(&pb, &prm));
            ck_assert_uint_eq(a.n, b.n);
            for (unsigned i = 0; i < a.n; i++) {
                if (b.r[i].round > 0) {      /* frames crossed the sockets */
                    ck_assert_double_gt(b.r[i].wire_up, 0.0);
                    ck_assert_double_gt(b.r[i].wire_down, 0.0);
                }
                b.r[i].seconds = b.r[i].time = 0;
                b.r[i].wire_up = 0;
                b.r[i].wire_down = 0;
                ck_assert_msg(memcmp(&a.r[i], &b.r[i], sizeof a.r[i]) == 0,
                              "%s/%s (participation %g) on %u processes: row %u "
                              "differs: P %.17g vs %.17g",
                              ec_algo_name(algo), ec_comp_name(comps[c].type),
                              job.participation, procs, i, a.r[i].P, b.r[i].P);
            }
        }
        ec_problem_clear(&pb);
        runs++;
    }
    ck_assert_int_gt(runs, 0);
}
END_TEST

/* A frame longer than a mailbox goes on the socket, which the mailbox
 * announces: 40 workers in one process make an init UPS of 40 dense
 * gradients, over EC_MAILBOX_CAP, and the rows are the in-process rows
 * bit for bit on 1 and 3 processes. */
START_TEST(test_frames_over_the_mailbox)
{
    static struct rows a, b;
    ec_err e = {0};
    ec_job job;
    ec_problem pb;
    ec_params prm;
    ec_summary sa, sb;

    ec_job_defaults(&job);
    job.algorithm = EC_ALGO_ECLK;
    job.workers = 40;
    job.lambda2_rel = 1e-3;
    job.compressor = (ec_comp_spec){EC_COMP_TOPK, 1, 0};
    job.max_rounds = 40;
    job.eval_every = 10;
    a1a_prepare(&job, &pb, &prm);
    a.n = 0;
    ck_assert_int_eq(ec_run_inproc(&pb, &prm, &job, keep, &a, &sa, &e), 0);
    for (uint32_t procs = 1; procs <= 3; procs += 2) {
        ec_proc_opts opts = {0};

        opts.procs = procs;
        b.n = 0;
        ck_assert_msg(ec_run_process(&pb, &prm, &job, &opts, keep, &b, &sb, &e) == 0,
                      "%s", e.msg);
        ck_assert_msg(sb.stop == sa.stop, "%s", sb.reason);
        ck_assert_uint_eq(a.n, b.n);
        if (procs == 1)         /* the init exchange's one frame */
            ck_assert_double_gt(b.r[0].wire_up * job.workers, EC_MAILBOX_CAP);
        for (unsigned i = 0; i < a.n; i++)
            ck_assert_msg(a.r[i].P == b.r[i].P && a.r[i].bits_up == b.r[i].bits_up,
                          "on %u processes row %u differs: P %.17g vs %.17g",
                          procs, i, a.r[i].P, b.r[i].P);
    }
    ec_problem_clear(&pb);
}
END_TEST

/* The mailbox itself: a frame is taken as it was put, once published;
 * one over the cap is announced for the socket; a sleep with nothing
 * published ends at its time, and a frame another process publishes
 * wakes a sleeper. */
START_TEST(test_mailbox)
{
    void *map = ec_mailbox_map(2);
    ec_mailbox *mb;
    static uint8_t big[EC_MAILBOX_CAP + 1], out[EC_MAILBOX_CAP];
    const uint8_t frame[] = "a frame of 19 bytes";
    pid_t pid;
    int status;

    ck_assert_ptr_nonnull(map);
    mb = ec_mailbox_at(map, 1);
    ck_assert(!ec_mailbox_ready(mb, EC_MAILBOX_UP, 0));
    ck_assert(!ec_mailbox_sleep(mb, EC_MAILBOX_UP, 0, 0.01));
    ck_assert_int_eq(ec_mailbox_put(mb, EC_MAILBOX_UP, frame, 19), 1);
    ck_assert(ec_mailbox_ready(mb, EC_MAILBOX_UP, 0));
    ck_assert(!ec_mailbox_ready(mb, EC_MAILBOX_DOWN, 0));   /* one way only */
    ck_assert(!ec_mailbox_ready(ec_mailbox_at(map, 0), EC_MAILBOX_UP, 0));
    ck_assert_int_eq(ec_mailbox_take(mb, EC_MAILBOX_UP, out, sizeof out), 19);
    ck_assert_mem_eq(out, frame, 19);
    ck_assert_int_eq(ec_mailbox_take(mb, EC_MAILBOX_UP, out, 18), -2);
    ck_assert_int_eq(ec_mailbox_put(mb, EC_MAILBOX_UP, big, sizeof big), 0);
    ck_assert(ec_mailbox_ready(mb, EC_MAILBOX_UP, 1));
    ck_assert_int_eq(ec_mailbox_take(mb, EC_MAILBOX_UP, out, sizeof out), -1);
    /* Another process, once this one sleeps (or about to: either way the
     * frame must not be slept through). */
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct timespec ts = {0, 20000000};

        ec_mailbox_keep_only(map, 2, 1);
        nanosleep(&ts, NULL);
        ec_mailbox_put(mb, EC_MAILBOX_DOWN, frame, 5);
        _exit(0);
    }
    ck_assert(ec_mailbox_sleep(mb, EC_MAILBOX_DOWN, 0, 30.0));
    ck_assert_int_eq(ec_mailbox_take(mb, EC_MAILBOX_DOWN, out, sizeof out), 5);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ec_mailbox_unmap(map, 2);
}
END_TEST

/* Moves the calling process to CPU cpu (and only there). */
static void run_on(int cpu)
{
    cpu_set_t one;

    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    ck_assert_int_eq(sched_setaffinity(0, sizeof one, &one), 0);
    ck_assert_int_eq(sched_getcpu(), cpu);
}

/* A reader learns whether the writer it waits for last ran on its own
 * CPU (then the writer is not running, and a spin cannot pay): so when
 * the frame was put from this CPU, and not when from another, nor when
 * nothing was put; the reader's look tells the other side where it is. */
START_TEST(test_mailbox_peer_cpu)
{
    void *map = ec_mailbox_map(1);
    ec_mailbox *mb;
    cpu_set_t all;
    int here, other = -1;
    pid_t pid;
    int status;

    ck_assert_ptr_nonnull(map);
    mb = ec_mailbox_at(map, 0);
    ck_assert_int_eq(sched_getaffinity(0, sizeof all, &all), 0);
    here = sched_getcpu();
    ck_assert_int_ge(here, 0);
    for (int c = 0; c < CPU_SETSIZE && other < 0; c++)
        if (c != here && CPU_ISSET(c, &all))
            other = c;
    run_on(here);
    ck_assert(!ec_mailbox_peer_here(mb, EC_MAILBOX_UP));    /* not known */
    ec_mailbox_put(mb, EC_MAILBOX_UP, (const uint8_t *)"up", 2);
    ck_assert(ec_mailbox_peer_here(mb, EC_MAILBOX_UP));
    /* The look recorded this CPU as the DOWN writer's, where the
     * coordinator would wait for the UPS: the worker reading DOWN from
     * here sees it. */
    ck_assert(ec_mailbox_peer_here(mb, EC_MAILBOX_DOWN));
    if (other >= 0) {
        /* A writer on another CPU, as a worker process would be. */
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            cpu_set_t one;

            CPU_ZERO(&one);
            CPU_SET(other, &one);
            if (sched_setaffinity(0, sizeof one, &one) < 0 ||
                sched_getcpu() != other)
                _exit(2);
            ec_mailbox_put(mb, EC_MAILBOX_UP, (const uint8_t *)"up", 2);
            _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert(!ec_mailbox_peer_here(mb, EC_MAILBOX_UP));
    }
    ck_assert_int_eq(sched_setaffinity(0, sizeof all, &all), 0);
    ec_mailbox_unmap(map, 1);
}
END_TEST

/* ---- faults, through the real binary -------------------------------------- */

struct job_proc {
    pid_t pid;
    int report;            /* read end of the report pipe */
    char out[8192];        /* what stdout and stderr said */
    char reason[512];      /* the final record's reason */
    char status[32];
    int exit_status;
};

/* The shipped binary (ECOPT_BIN), or with test set the test build with
   its hooks (ECOPT_TEST_BIN; docs/testing.md, "Test hooks"). */
static const char *ecopt_bin(int test)
{
    const char *bin = getenv(test ? "ECOPT_TEST_BIN" : "ECOPT_BIN");

    return bin && *bin ? bin : test ? "build/ecopt-test" : "build/ecopt";
}

/* Starts bin's ecopt run on a job with its report channel on a pipe. */
static void start_job_with(struct job_proc *jp, const char *bin, const char *extra_env,
                           const char *extra_args, const char *spec)
{
    int rp[2], op[2];
    char specpath[64];

    memset(jp, 0, sizeof *jp);
    tu_write_temp_str(spec, specpath, sizeof specpath);
    ck_assert_int_eq(pipe(rp), 0);
    ck_assert_int_eq(pipe(op), 0);
    jp->pid = fork();
    ck_assert_int_ge(jp->pid, 0);
    if (jp->pid == 0) {
        char cmd[1024];

        dup2(rp[1], 3);
        dup2(op[1], 1);
        dup2(op[1], 2);
        if (extra_env)
            putenv((char *)extra_env);
        snprintf(cmd, sizeof cmd, "exec %s run %s --quiet --report-fd 3 %s", bin,
                 specpath, extra_args);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(rp[1]);
    close(op[1]);
    jp->report = rp[0];
    /* stdout/stderr: collected after exit through a non-blocking read */
    fcntl(op[0], F_SETFL, O_NONBLOCK);
    jp->exit_status = op[0];   /* stash the fd until wait_job */
}

/* The same with the shipped binary. */
static void start_job(struct job_proc *jp, const char *extra_env,
                      const char *extra_args, const char *spec)
{
    start_job_with(jp, ecopt_bin(0), extra_env, extra_args, spec);
}

/* Reads report lines until one of the given type arrives (or EOF). */
static int wait_record(struct job_proc *jp, const char *type, double timeout)
{
    static char buf[1 << 16];
    static size_t have;
    double until = tu_now() + timeout;

    have = 0;
    while (tu_now() < until) {
        struct pollfd p = {jp->report, POLLIN, 0};
        char *nl;

        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t r = read(jp->report, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            return 0;
        have += (size_t)r;
        buf[have] = '\0';
        while ((nl = strchr(buf, '\n'))) {
            json_t *rec;
            *nl = '\0';
            rec = json_loads(buf, 0, NULL);
            ck_assert_msg(rec != NULL, "bad report line: %s", buf);
            ck_assert_int_eq(json_integer_value(json_object_get(rec, "v")), 1);
            const char *t = json_string_value(json_object_get(rec, "type"));
            int match = t && strcmp(t, type) == 0;
            if (t && strcmp(t, "final") == 0) {
                snprintf(jp->reason, sizeof jp->reason, "%s",
                         json_string_value(json_object_get(rec, "reason")));
                snprintf(jp->status, sizeof jp->status, "%s",
                         json_string_value(json_object_get(rec, "status")));
            }
            json_decref(rec);
            memmove(buf, nl + 1, have - (size_t)(nl + 1 - buf) + 1);
            have -= (size_t)(nl + 1 - buf);
            if (match)
                return 1;
        }
    }
    return 0;
}

/* The coordinator's children, from /proc. */
static int children(pid_t pid, pid_t *out, int max)
{
    char path[64], buf[4096];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    if (!(f = fopen(path, "r")))
        return 0;
    if (fgets(buf, sizeof buf, f)) {
        char *s = buf, *end;
        for (;;) {
            long v = strtol(s, &end, 10);
            if (end == s || n >= max)
                break;
            out[n++] = (pid_t)v;
            s = end;
        }
    }
    fclose(f);
    return n;
}

/* A process that is gone: no /proc entry, or nothing but... nothing. */
static int gone(pid_t pid)
{
    char path[64];

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    return access(path, F_OK) != 0;
}

/* Waits for the coordinator to exit; returns seconds taken. */
static double wait_job(struct job_proc *jp, double timeout)
{
    double t0 = tu_now();
    int st = 0, fd = jp->exit_status;
    ssize_t r;
    size_t have = 0;

    for (;;) {
        pid_t w = waitpid(jp->pid, &st, WNOHANG);
        if (w == jp->pid)
            break;
        ck_assert_msg(tu_now() - t0 < timeout, "coordinator still running after %g s", timeout);
        usleep(5000);
    }
    wait_record(jp, "final", 1.0);
    while ((r = read(fd, jp->out + have, sizeof jp->out - 1 - have)) > 0)
        have += (size_t)r;
    jp->out[have] = '\0';
    close(fd);
    close(jp->report);
    jp->exit_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return tu_now() - t0;
}

/* One worker per process, so each worker is a process to signal. */
static const char long_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 6, \"procs\": 6, \"algorithm\": \"eclk\","
    " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"max_rounds\": 10000000,"
    " \"target\": 0, \"eval_every\": 50}";
/* The same six workers on two processes of three. */
static const char hosted_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 6, \"procs\": 2, \"algorithm\": \"eclk\","
    " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"max_rounds\": 10000000,"
    " \"target\": 0, \"eval_every\": 50}";

static void all_gone(const pid_t *pids, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(gone(pids[i]), "worker pid %d still exists", pids[i]);
}

/*
 * A running job, a signal to one of its processes (worker `target`, or the
 * coordinator when target < 0): the job ends within 2 s with status 3, the
 * given state and reason, and every worker is gone.
 */
static void signal_case_of(const char *job, int procs, int target, int sig,
                           const char *state, const char *reason)
{
    struct job_proc jp;
    pid_t kids[16];
    int n;
    double took;

    start_job(&jp, NULL, "", job);
    ck_assert(wait_record(&jp, "metric", 30));
    n = children(jp.pid, kids, 16);
    ck_assert_int_eq(n, procs);
    kill(target < 0 ? jp.pid : kids[target], sig);
    took = wait_job(&jp, 10);
    ck_assert_double_lt(took, 2.0);
    ck_assert_int_eq(jp.exit_status, 3);
    ck_assert_str_eq(jp.status, state);
    ck_assert_msg(strstr(jp.reason, reason), "%s", jp.reason);
    all_gone(kids, n);
}

static void signal_case(int target, int sig, const char *state, const char *reason)
{
    signal_case_of(long_job, 6, target, sig, state, reason);
}

/*
 * Gradient evaluations, counted where the count is a closed form: 5
 * workers of 321 rows (a1a), batch 2, every coin and refresh firing
 * (p = 1), 12 rounds, over sockets. Per worker: the gradient at x0 for
 * the methods with an init exchange (and ec-lsvrg's first reference
 * point), then per round what each method's step takes.
 */
START_TEST(test_grad_evals_counted)
{
    static const struct {
        ec_algo_id algo;
        double first, per_round;
    } cases[] = {
        {EC_ALGO_ECLK, 321, 2 * 2 + 321},        /* x and w; y on the coin */
        {EC_ALGO_LKATYUSHA, 321, 2 * 2 + 321},
        {EC_ALGO_EC_LSVRG, 321, 2 * 2 + 321},    /* x and w; the refresh */
        {EC_ALGO_EC_SGD, 0, 2},
        {EC_ALGO_SGD, 0, 2},
        {EC_ALGO_EC_SGD_DIANA, 0, 2},
        {EC_ALGO_EC_GD, 0, 321},
        {EC_ALGO_GD, 0, 321},
        {EC_ALGO_EC_GD_DIANA, 0, 321},
        {EC_ALGO_EF21, 321, 321},
        {EC_ALGO_ADIANA, 0, 2 * 321},            /* the shard at x and at w */
        {EC_ALGO_ECONTROL, 321, 2},              /* h_tau at x0; the minibatch */
        {EC_ALGO_ADEF, 0, 2},                    /* at y */
    };
    ec_err e = {0};

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        static struct rows a;
        ec_job job;
        ec_problem pb;
        ec_params prm;
        ec_summary sum;
        ec_proc_opts opts = {0};

        ec_job_defaults(&job);
        job.algorithm = cases[c].algo;
        job.workers = 5;
        job.lambda2_rel = 1e-3;
        job.compressor.type = ec_algo_unbiased_only(cases[c].algo) ? EC_COMP_RANDK
                              : ec_algo_compresses(cases[c].algo) ? EC_COMP_TOPK
                                                                  : EC_COMP_NONE;
        job.compressor.k = 3;
        job.batch = 2;
        job.max_rounds = 12;
        job.eval_every = 4;
        job.target = 0;
        if (cases[c].algo == EC_ALGO_ECLK || cases[c].algo == EC_ALGO_LKATYUSHA ||
            cases[c].algo == EC_ALGO_EC_LSVRG)
            job.p = 1;
        a1a_prepare(&job, &pb, &prm);
        opts.procs = 2;
        a.n = 0;
        ck_assert_msg(ec_run_process(&pb, &prm, &job, &opts, keep, &a, &sum, &e) == 0,
                      "%s", e.msg);
        ck_assert_uint_eq(a.n, 4);
        for (unsigned i = 0; i < a.n; i++)
            ck_assert_msg(a.r[i].grad_evals ==
                              cases[c].first + cases[c].per_round * (double)a.r[i].round,
                          "%s round %llu: %g gradient evaluations, expected %g",
                          ec_algo_name(cases[c].algo), (unsigned long long)a.r[i].round,
                          a.r[i].grad_evals,
                          cases[c].first + cases[c].per_round * (double)a.r[i].round);
        ec_problem_clear(&pb);
    }
}
END_TEST

/* ---- the shared model ------------------------------------------------------ */

/* The permissions of pid's mapping of the shared model ("r--s"), into
 * perms; 0 when it maps none. */
static int model_mapping(pid_t pid, char perms[8])
{
    char path[64], line[512];
    FILE *f;
    int found = 0;

    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    if (!(f = fopen(path, "re")))
        return 0;
    while (!found && fgets(line, sizeof line, f))
        if (strstr(line, "/memfd:ecopt-model"))
            found = sscanf(line, "%*s %7s", perms) == 1;
    fclose(f);
    return found;
}

struct watch_model {
    unsigned rows;
    unsigned writable;      /* mappings in the coordinator: rw-s */
    unsigned readonly;      /* in its children: r--s */
    unsigned others;        /* children mapping it otherwise */
    unsigned workers;       /* children seen */
    int kill_at;            /* > 0: SIGKILL one worker at this row */
};

/* At each row: who maps the model, and how. */
static int watch_model(void *ctx, const ec_metric *row)
{
    struct watch_model *w = ctx;
    pid_t pids[64];
    int n = children(getpid(), pids, 64);
    char perms[8];

    (void)row;
    w->rows++;
    w->workers = (unsigned)n;
    if (model_mapping(getpid(), perms) && strcmp(perms, "rw-s") == 0)
        w->writable++;
    for (int i = 0; i < n; i++) {
        if (!model_mapping(pids[i], perms))
            continue;
        if (strcmp(perms, "r--s") == 0)
            w->readonly++;
        else
            w->others++;
    }
    if (w->kill_at && (int)w->rows == w->kill_at && n)
        kill(pids[n - 1], SIGKILL);
    return 0;
}

/* The model is one segment, written by the coordinator and mapped
 * read-only in every worker process; it is gone from this process when
 * the job ends, and no worker is left to hold it: after a clean end,
 * and after a worker was killed mid-run. */
START_TEST(test_model_shared_read_only)
{
    char perms[8];
    ec_err e = {0};
    ec_job job;
    ec_problem pb;
    ec_params prm;
    ec_summary sum;
    pid_t pids[64];

    ec_job_defaults(&job);
    job.algorithm = EC_ALGO_ECLK;
    job.workers = 5;
    job.lambda2_rel = 1e-3;
    job.compressor = (ec_comp_spec){EC_COMP_TOPK, 3, 0};
    job.max_rounds = 40;
    job.eval_every = 4;
    job.target = 0;
    a1a_prepare(&job, &pb, &prm);
    for (int killed = 0; killed <= 1; killed++) {
        struct watch_model w = {0};
        ec_proc_opts opts = {0};

        opts.procs = 3;
        w.kill_at = killed ? 3 : 0;
        ck_assert_int_eq(ec_run_process(&pb, &prm, &job, &opts, watch_model, &w,
                                        &sum, &e), 0);
        ck_assert_uint_gt(sum.model_shared, 0);
        ck_assert_uint_ge(w.rows, killed ? 3 : 11);
        ck_assert_uint_eq(w.workers, 3);
        ck_assert_uint_eq(w.writable, w.rows);
        ck_assert_uint_eq(w.readonly, 3 * w.rows);
        ck_assert_uint_eq(w.others, 0);
        if (killed)
            ck_assert_msg(sum.stop == EC_STOP_FAILED && strstr(sum.reason, "died"),
                          "%s", sum.reason);
        else
            ck_assert_int_eq(sum.stop, EC_STOP_MAX_ROUNDS);
        ck_assert_msg(!model_mapping(getpid(), perms),
                      "the coordinator still maps the model");
        ck_assert_int_eq(children(getpid(), pids, 64), 0);
    }
    ec_problem_clear(&pb);
}
END_TEST

/* Where the shared segment cannot be made each process keeps its copy
 * and the run says why; the rows are the same. */
START_TEST(test_model_copies_fallback)
{
    static struct rows a, b;
    char buf[512];
    ec_err e = {0};
    ec_job job;
    ec_problem pb;
    ec_params prm;
    ec_summary sa, sb;
    ec_proc_opts opts = {0};
    FILE *log = tmpfile();

    ck_assert_ptr_nonnull(log);
    ec_job_defaults(&job);
    job.algorithm = EC_ALGO_ECLK;
    job.workers = 4;
    job.lambda2_rel = 1e-3;
    job.compressor = (ec_comp_spec){EC_COMP_TOPK, 3, 0};
    job.max_rounds = 30;
    job.eval_every = 5;
    a1a_prepare(&job, &pb, &prm);
    opts.procs = 2;
    ck_assert_int_eq(ec_run_process(&pb, &prm, &job, &opts, keep, &a, &sa, &e), 0);
    ck_assert_uint_gt(sa.model_shared, 0);
    opts.model_copies = 1;
    opts.log = log;
    ck_assert_int_eq(ec_run_process(&pb, &prm, &job, &opts, keep, &b, &sb, &e), 0);
    ck_assert_uint_eq(sb.model_shared, 0);
    rewind(log);
    ck_assert_ptr_nonnull(fgets(buf, sizeof buf, log));
    ck_assert_msg(strstr(buf, "a copy in each worker process (the shared model: "
                              "asked for)"), "%s", buf);
    ck_assert_uint_eq(a.n, b.n);
    for (unsigned i = 0; i < a.n; i++) {
        ck_assert_double_eq(a.r[i].P, b.r[i].P);
        /* a replica's STEP carries the broadcast; the shared model's none */
        if (a.r[i].round > 0)
            ck_assert_double_lt(a.r[i].wire_down, b.r[i].wire_down);
    }
    fclose(log);
    ec_problem_clear(&pb);
}
END_TEST

/* The rows of ecopt run (bin, with env) on spec as CSV text without the
 * columns that differ from run to run or by how the broadcast travels
 * (seconds, time, wire_down), into rows; what it said on its info
 * stream, into info. */
static void run_rows(const char *bin, const char *env, const char *spec, char *rows,
                     size_t rowslen, char *info, size_t infolen)
{
    char specpath[64], csv[64], cmd[1024], line[2048];
    int skip[64] = {0}, ncol = 0;
    size_t at = 0, got;
    FILE *f;

    tu_write_temp_str(spec, specpath, sizeof specpath);
    tu_write_temp_str("", csv, sizeof csv);
    snprintf(cmd, sizeof cmd, "%s %s run %s --procs 2 --format csv -o %s 2>&1", env,
             bin, specpath, csv);
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    got = fread(info, 1, infolen - 1, f);
    info[got] = 0;
    /* 5: the budget ran out, as target 0 has it (docs/cli.md) */
    ck_assert_int_eq(WEXITSTATUS(pclose(f)), 5);
    ck_assert_ptr_nonnull(f = fopen(csv, "r"));
    for (int first = 1; fgets(line, sizeof line, f); first = 0) {
        char *save = NULL, *cell = strtok_r(line, ",\n", &save);

        for (int c = 0; cell; c++, cell = strtok_r(NULL, ",\n", &save)) {
            if (first && c < 64) {
                skip[c] = !strcmp(cell, "seconds") || !strcmp(cell, "time") ||
                          !strcmp(cell, "wire_down");
                ncol = c + 1;
            }
            if (c < ncol && skip[c])
                continue;
            at += (size_t)snprintf(rows + at, rowslen - at, "%s,", cell);
            ck_assert_uint_lt(at, rowslen);
        }
        at += (size_t)snprintf(rows + at, rowslen - at, "\n");
    }
    fclose(f);
    unlink(csv);
    unlink(specpath);
}

/* Through the binary: where memfd_create fails (the test build's memfd
 * fault) the coordinator says so and runs with copies, and its rows are
 * the shared model's. */
START_TEST(test_model_fallback_binary)
{
    static char shared[1 << 16], copies[1 << 16];
    char info[8192], spec[256], env[64];

    snprintf(spec, sizeof spec, "{\"dataset\": \"a1a\", \"workers\": 5, "
             "\"compressor\": {\"type\": \"topk\", \"k\": 2}, "
             "\"max_rounds\": 60, \"eval_every\": 5, \"target\": 0}");
    run_rows(ecopt_bin(1), "", spec, shared, sizeof shared, info, sizeof info);
    ck_assert_msg(!strstr(info, "a copy in each worker"), "%s", info);
    snprintf(env, sizeof env, "ECOPT_FAULT=memfd:0:0");
    run_rows(ecopt_bin(1), env, spec, copies, sizeof copies, info, sizeof info);
    ck_assert_msg(strstr(info, "model      a copy in each worker process (the shared "
                               "model: memfd_create: Function not implemented)"),
                  "%s", info);
    ck_assert_uint_gt(strlen(shared), 200);
    ck_assert_str_eq(shared, copies);
}
END_TEST

START_TEST(test_sigkill_worker)
{
    signal_case(4, SIGKILL, "failed", "worker 4 died (signal 9) at round ");
}
END_TEST

/* A process hosting several workers is named with its block. */
START_TEST(test_sigkill_host)
{
    signal_case_of(hosted_job, 2, 1, SIGKILL, "failed",
                   "process 1 (workers 3-5) died (signal 9) at round ");
}
END_TEST

START_TEST(test_sigterm_coordinator)
{
    signal_case(-1, SIGTERM, "cancelled", "cancelled by signal 15");
}
END_TEST

/* SIGKILL to the coordinator: nothing can run in it, so the workers must
 * die by themselves (their parent-death signal). */
START_TEST(test_sigkill_coordinator)
{
    struct job_proc jp;
    pid_t kids[16];
    int n;
    double t0;

    start_job(&jp, NULL, "", long_job);
    ck_assert(wait_record(&jp, "metric", 30));
    n = children(jp.pid, kids, 16);
    ck_assert_int_eq(n, 6);
    kill(jp.pid, SIGKILL);
    wait_job(&jp, 10);
    t0 = tu_now();
    for (int i = 0; i < n; i++)
        while (!gone(kids[i])) {
            ck_assert_msg(tu_now() - t0 < 2.0, "worker %d outlived its coordinator", kids[i]);
            usleep(5000);
        }
}
END_TEST

/* Misbehaving workers, injected through ECOPT_FAULT into the test build. */
START_TEST(test_worker_faults)
{
    static const struct {
        const char *env, *args, *want;
    } cases[] = {
        {"ECOPT_FAULT=exit:2:30", "", "worker 2 exited with status 3 at round 30"},
        {"ECOPT_FAULT=garbage:1:40", "", "worker 1 sent a bad frame (bad magic"},
        {"ECOPT_FAULT=truncate:0:25", "", "worker 0 closed its connection mid-frame at round 25"},
        {"ECOPT_FAULT=hang:3:20", "--round-timeout 0.5",
         "worker 3 did not answer within the round timeout of 0.5 s at round 20"},
        /* A hosted worker's fault is its process's. */
        {"ECOPT_FAULT=exit:4:30", "--procs 2",
         "process 1 (workers 3-5) exited with status 3 at round 30"},
        {"ECOPT_FAULT=garbage:2:40", "--procs 2",
         "process 0 (workers 0-2) sent a bad frame (bad magic"},
        {"ECOPT_FAULT=hang:5:20", "--procs 3 --round-timeout 0.5",
         "process 2 (workers 4-5) did not answer within the round timeout of 0.5 s at round 20"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct job_proc jp;
        pid_t kids[16];
        int n;
        double took;

        start_job_with(&jp, ecopt_bin(1), cases[i].env, cases[i].args, long_job);
        ck_assert(wait_record(&jp, "start", 30));
        n = children(jp.pid, kids, 16);
        took = wait_job(&jp, 20);
        ck_assert_msg(jp.exit_status == 3, "case %zu: exit %d: %s", i, jp.exit_status, jp.out);
        ck_assert_str_eq(jp.status, "failed");
        ck_assert_msg(strstr(jp.reason, cases[i].want), "case %zu: '%s'", i, jp.reason);
        ck_assert_double_lt(took, 10.0);
        all_gone(kids, n);
    }
}
END_TEST

/* The shipped binary has no test hook: a fault that stops the test
 * build's job at round 30 changes nothing in build/ecopt's, which runs
 * its 200 rounds and ends at its budget. */
START_TEST(test_shipped_ignores_faults)
{
    static const char short_job[] =
        "{\"dataset\": \"a9a\", \"workers\": 3, \"procs\": 3, \"algorithm\": \"eclk\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"max_rounds\": 200,"
        " \"target\": 0, \"eval_every\": 50}";
    struct job_proc jp;

    start_job_with(&jp, ecopt_bin(1), "ECOPT_FAULT=exit:1:30", "", short_job);
    wait_job(&jp, 120);
    ck_assert_msg(jp.exit_status == 3, "the test build: exit %d: %s", jp.exit_status, jp.out);
    ck_assert_msg(strstr(jp.reason, "worker 1 exited with status 3 at round 30"), "'%s'",
                  jp.reason);
    start_job_with(&jp, ecopt_bin(0), "ECOPT_FAULT=exit:1:30", "", short_job);
    wait_job(&jp, 120);
    /* Its 200 rounds run out above the target 0: budget_exhausted, exit 5
       (docs/api.md, "Outcomes"), not the fault's 3. */
    ck_assert_msg(jp.exit_status == 5, "the shipped build: exit %d: %s (%s)", jp.exit_status,
                  jp.out, jp.reason);
    ck_assert_str_eq(jp.status, "succeeded");
}
END_TEST

/* A worker memory limit far below what a worker needs: the job fails with
 * a reason that says so, instead of the machine swapping. */
#ifndef __SANITIZE_ADDRESS__   /* see main() */
START_TEST(test_worker_memory_limit)
{
    struct job_proc jp;
    char data[64], spec[512];

    /* d = 400000: each of a worker's vectors is 3.2 MB, mapped on its own,
     * far over a 16 MB address-space limit on top of what it inherits. */
    tu_write_temp_str("1 1:1 400000:1\n-1 2:1 399999:0.5\n1 3:1\n-1 4:1 400000:-1\n",
                      data, sizeof data);
    snprintf(spec, sizeof spec,
             "{\"dataset\": \"%s\", \"workers\": 2, \"lambda2_rel\": 1e-2,"
             " \"algorithm\": \"ec-gd\", \"compressor\": {\"type\": \"topk\", \"k\": 1},"
             " \"max_rounds\": 1000000}", data);
    start_job(&jp, NULL, "--worker-mem-limit 16", spec);
    wait_job(&jp, 60);
    ck_assert_msg(jp.exit_status == 3, "exit %d: %s", jp.exit_status, jp.out);
    ck_assert_msg(strstr(jp.reason, "worker ") && strstr(jp.reason, "out of memory"),
                  "'%s'", jp.reason);
    unlink(data);
}
END_TEST
#endif

/*
 * A limit from --mem-limits auto goes on top of what a forked worker
 * inherits: with 256 MiB mapped before the fork (as a coordinator's data
 * would be), a worker allowed 32 MiB above it can still allocate 8 MiB,
 * where the same allowance as a whole address space cannot.
 */
#ifndef __SANITIZE_ADDRESS__   /* see main() */
START_TEST(test_worker_mem_above_inherited)
{
    size_t big = 256u << 20;
    char *held = mmap(NULL, big, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    ck_assert(held != MAP_FAILED);
    for (int absolute = 0; absolute < 2; absolute++) {
        ec_proc_opts o = {0};
        pid_t pid;
        int status;

        o.worker_max_files = EC_WORKER_FILES_KEEP;
        if (absolute)
            o.worker_mem_limit = ec_address_space() + (32u << 20) - big;
        else
            o.worker_mem_above = 32u << 20;
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            void *p;

            if (ec_worker_limits(&o))
                _exit(2);
            p = mmap(NULL, 8u << 20, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            _exit(p == MAP_FAILED ? 1 : 0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_msg(WEXITSTATUS(status) == (absolute ? 1 : 0),
                      "%s limit: child exit %d", absolute ? "absolute" : "inherited +",
                      WEXITSTATUS(status));
    }
    munmap(held, big);
}
END_TEST
#endif

/* ---- the default procs ---------------------------------------------------- */

/* The processes `ecopt run SPEC` puts the workers on, from its setup line. */
static unsigned run_procs_local(const char *spec_text, unsigned *local)
{
    const char *bin = getenv("ECOPT_BIN");
    char specpath[64], cmd[512], line[512];
    unsigned workers, procs = 0, hosted;
    FILE *f;

    tu_write_temp_str(spec_text, specpath, sizeof specpath);
    snprintf(cmd, sizeof cmd, "%s run %s 2>&1", bin && *bin ? bin : "build/ecopt",
             specpath);
    f = popen(cmd, "r");
    ck_assert(f != NULL);
    *local = 0;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "backend process (");
        if (at && sscanf(at, "backend process (%u workers: %u in the coordinator, "
                         "%u on %u process", &workers, local, &hosted, &procs) == 4)
            ck_assert_uint_eq(*local + hosted, workers);
        else if (at)
            sscanf(at, "backend process (%u workers on %u process", &workers, &procs);
    }
    pclose(f);
    unlink(specpath);
    return procs;
}

/*
 * Without procs, a light round (a1a, batch 1) keeps a CPU for the
 * coordinator, which steps n / (procs + 1) of the workers itself, and a
 * heavy one (d = 20000) takes every CPU and steps none: what
 * ec_procs_default_for and ec_procs_local_for say, and what ecopt run
 * does. A procs given is the processes hosting every worker.
 */
START_TEST(test_default_procs)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t all = cpus > 0 ? (uint32_t)cpus : 1, light = all > 1 ? all - 1 : 1;
    uint32_t lp = light < 6 ? light : 6;
    ec_mem_job mj = {.rows = 1605, .nnz = 22249, .d = 123, .workers = 6,
                     .algo = EC_ALGO_ECLK, .batch = 1};
    char data[64], spec[512];
    unsigned local;

    ck_assert_uint_lt(ec_round_bytes(&mj), EC_PROCS_LIGHT_ROUND);
    ck_assert_uint_eq(ec_procs_default_for(6, ec_round_bytes(&mj)), lp);
    ck_assert_uint_eq(ec_procs_default_for(1, 0), 1);
    ck_assert_uint_eq(ec_procs_local_for(6, 1, ec_round_bytes(&mj)), 3);
    ck_assert_uint_eq(ec_procs_local_for(20, 1, ec_round_bytes(&mj)), 10);
    ck_assert_uint_eq(ec_procs_local_for(6, 5, ec_round_bytes(&mj)), 1);
    ck_assert_uint_eq(ec_procs_local_for(2, 1, ec_round_bytes(&mj)), 1);
    ck_assert_uint_eq(ec_procs_local_for(1, 1, ec_round_bytes(&mj)), 0);
    ck_assert_uint_eq(ec_procs_local_for(6, 6, ec_round_bytes(&mj)), 0);
    {
        /* The memory account: 600 workers of which the coordinator steps
         * 300 is 300 on the process, as alone, and 300 more in the
         * coordinator (so many that the run, not the P* solve, sets the
         * coordinator's peak). */
        ec_mem_estimate alone, shared;

        mj.procs = 1;
        mj.workers = 300;
        ec_estimate_memory(&mj, &alone);
        mj.workers = 600;
        mj.local = 300;
        ec_estimate_memory(&mj, &shared);
        ck_assert_uint_gt(shared.coordinator, alone.coordinator);
        ck_assert_uint_eq(shared.process, alone.process);
        ck_assert_uint_eq(shared.procs, 1);
        mj.local = 0;
        mj.procs = 0;
        mj.workers = 6;
    }
    mj.d = 20000;
    ck_assert_uint_ge(ec_round_bytes(&mj), EC_PROCS_LIGHT_ROUND);
    ck_assert_uint_eq(ec_procs_default_for(6, ec_round_bytes(&mj)), ec_procs_default(6));
    ck_assert_uint_eq(ec_procs_default(6), all < 6 ? all : 6);
    ck_assert_uint_eq(ec_procs_local_for(6, 1, ec_round_bytes(&mj)), 0);

    ck_assert_uint_eq(run_procs_local("{\"dataset\": \"a1a\", \"workers\": 6, "
                                      "\"compressor\": {\"type\": \"topk\", \"k\": 1}, "
                                      "\"max_rounds\": 2}", &local), lp);
    ck_assert_uint_eq(local, 6 / (lp + 1));
    ck_assert_uint_eq(run_procs_local("{\"dataset\": \"a1a\", \"workers\": 6, \"procs\": 3, "
                                      "\"compressor\": {\"type\": \"topk\", \"k\": 1}, "
                                      "\"max_rounds\": 2}", &local), 3);
    ck_assert_uint_eq(local, 0);
    /* 8 rows of d = 20000 */
    tu_write_temp_str("1 1:1 20000:1\n-1 2:1 19999:0.5\n1 3:1\n-1 4:1 20000:-1\n"
                      "1 5:1 17:2\n-1 6:1 9000:1\n1 7:-1\n-1 8:1 12000:1\n",
                      data, sizeof data);
    snprintf(spec, sizeof spec,
             "{\"dataset\": \"%s\", \"workers\": 6, \"lambda2_rel\": 1e-2,"
             " \"compressor\": {\"type\": \"topk\", \"k\": 1}, \"max_rounds\": 2}",
             data);
    ck_assert_uint_eq(run_procs_local(spec, &local), all < 6 ? all : 6);
    ck_assert_uint_eq(local, 0);
    unlink(data);
}
END_TEST

/* Runs one window of EC_SPIN_WINDOW spins of which paid pay. */
static void spin_window(ec_spin *sp, uint32_t paid)
{
    for (uint32_t i = 0; i < EC_SPIN_WINDOW; i++) {
        ck_assert_msg(ec_spin_now(sp), "a wait outside a rest blocked at once");
        ec_spin_done(sp, i < paid);
    }
}

/*
 * The spin policy (ecopt/spin.h): a window where at least half the spins
 * paid keeps spinning; one where fewer did makes the next EC_SPIN_REST
 * waits block at once, and then spinning is tried again. Waits during the
 * rest are no spins: they do not count toward the next window.
 */
START_TEST(test_spin_policy)
{
    ec_spin sp = {0};

    for (int w = 0; w < 10; w++)
        spin_window(&sp, EC_SPIN_WINDOW);
    ck_assert_uint_eq(sp.windows, 10);
    ck_assert_uint_eq(sp.rests, 0);
    spin_window(&sp, EC_SPIN_WINDOW / 2);       /* exactly half: still pays */
    ck_assert_uint_eq(sp.rests, 0);
    ck_assert(ec_spin_now(&sp));
    ec_spin_done(&sp, 1);                       /* 1 of the next window */
    for (uint32_t i = 1; i < EC_SPIN_WINDOW; i++) {
        ck_assert(ec_spin_now(&sp));
        ec_spin_done(&sp, i < EC_SPIN_WINDOW / 2 - 1);  /* 15 of 32 paid */
    }
    ck_assert_uint_eq(sp.rests, 1);
    for (uint32_t i = 0; i < EC_SPIN_REST; i++)
        ck_assert_msg(!ec_spin_now(&sp), "wait %u of the rest spun", i);
    ck_assert_uint_eq(sp.spins, 0);             /* the rest counted no spin */
    ck_assert(ec_spin_now(&sp));                /* tried again */
    ec_spin_done(&sp, 0);
    for (uint32_t i = 1; i < EC_SPIN_WINDOW; i++) {
        ck_assert(ec_spin_now(&sp));
        ec_spin_done(&sp, 0);                   /* nothing paid */
    }
    ck_assert_uint_eq(sp.rests, 2);
    ck_assert_uint_eq(sp.windows, 13);
    ck_assert(!ec_spin_now(&sp));
}
END_TEST

/* bin's CSV rows of the job in spec (in process) without the two clock
 * columns, seconds and time, into out; the number of rows, and bin's
 * exit status in *status. */
static int clock_free_rows(const char *bin, const char *spec, char *out, size_t cap,
                           int *status)
{
    char cmd[1024], line[4096];
    int secs = -1, clock = -1, n = 0;
    size_t len = 0;
    FILE *f;

    snprintf(cmd, sizeof cmd, "%s run %s --format csv --backend inproc --quiet 2>/dev/null",
             bin, spec);
    ck_assert_ptr_nonnull(f = popen(cmd, "r"));
    out[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        char *save = NULL, *tok = strtok_r(line, ",\n", &save);

        for (int col = 0; tok; col++, tok = strtok_r(NULL, ",\n", &save)) {
            if (n == 0 && strcmp(tok, "seconds") == 0)
                secs = col;
            if (n == 0 && strcmp(tok, "time") == 0)
                clock = col;
            if (col == secs || col == clock)
                continue;
            len += (size_t)snprintf(out + len, cap - len, "%s,", tok);
            ck_assert_uint_lt(len, cap);
        }
        len += (size_t)snprintf(out + len, cap - len, "\n");
        n++;
    }
    *status = pclose(f);
    ck_assert_int_ge(secs, 0);
    ck_assert_int_ge(clock, 0);
    return n - 1;
}

/*
 * The worker step's AVX2 clone (chosen when the shipped build loads on a
 * machine that has AVX2) and its baseline code (the test build has that
 * alone: Makefile, "The test build") give the same rows to the bit, for
 * every algorithm, on a dataset whose d (112) is not a multiple of four,
 * so the vector loops' tails run too.
 */
START_TEST(test_step_clones_agree)
{
    static char ra[1 << 16], rb[1 << 16];
    ec_algo_id algo = (ec_algo_id)_i;
    char text[512], spec[64];
    int ran = 0;

    /* topk first, then randk, then whatever the method takes */
    for (int t = -2; t < EC_COMP_COUNT && !ran; t++) {
        ec_comp_type c = t == -2 ? EC_COMP_TOPK : t == -1 ? EC_COMP_RANDK : (ec_comp_type)t;
        int param = ec_comp_info_of(c)->param;
        char why[384];
        int na, nb, sa, sb;

        if (ec_algo_comp_check(algo, c, why, sizeof why))
            continue;
        snprintf(text, sizeof text,
                 "{\"dataset\": \"mushrooms\", \"workers\": 5, \"algorithm\": \"%s\","
                 " \"compressor\": {\"type\": \"%s\"%s}, \"lambda2_rel\": 1e-3,"
                 " \"p\": 0.2, \"batch\": 2, \"max_rounds\": 200, \"eval_every\": 1,"
                 " \"target\": 0}",
                 ec_algo_name(algo), ec_comp_name(c),
                 param == EC_COMP_PARAM_K ? ", \"k\": 5" : param == EC_COMP_PARAM_S ? ", \"s\": 4" : "");
        tu_write_temp_str(text, spec, sizeof spec);
        na = clock_free_rows(ecopt_bin(0), spec, ra, sizeof ra, &sa);
        nb = clock_free_rows(ecopt_bin(1), spec, rb, sizeof rb, &sb);
        unlink(spec);
        ck_assert_msg(na > 100, "%s: %d rows (exit status %d)", text, na, sa);
        ck_assert_int_eq(na, nb);
        ck_assert_int_eq(sa, sb);
        ck_assert_msg(strcmp(ra, rb) == 0, "%s: the two builds' rows differ", text);
        ran = 1;
    }
    ck_assert_msg(ran, "%s takes no compressor", ec_algo_name(algo));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("proc");
    TCase *eq = tcase_create("equivalence"), *faults = tcase_create("faults");
    int rc;

    tcase_set_timeout(eq, 120);
    tcase_add_loop_test(eq, test_process_equals_inproc, 0, EC_ALGO_COUNT);
    tcase_add_test(eq, test_grad_evals_counted);
    tcase_add_loop_test(eq, test_step_clones_agree, 0, EC_ALGO_COUNT);
    tcase_set_timeout(faults, 120);
    tcase_add_test(eq, test_model_copies_fallback);
    tcase_add_test(eq, test_frames_over_the_mailbox);
    tcase_add_test(eq, test_mailbox);
    tcase_add_test(eq, test_mailbox_peer_cpu);
    tcase_add_test(faults, test_model_shared_read_only);
    tcase_add_test(faults, test_model_fallback_binary);
    tcase_add_test(faults, test_sigkill_worker);
    tcase_add_test(faults, test_sigkill_host);
    tcase_add_test(faults, test_sigterm_coordinator);
    tcase_add_test(faults, test_sigkill_coordinator);
    tcase_add_test(faults, test_worker_faults);
    tcase_add_test(faults, test_shipped_ignores_faults);
    tcase_add_test(faults, test_default_procs);
#ifndef __SANITIZE_ADDRESS__
    /* AddressSanitizer reserves terabytes of shadow address space, so an
     * address-space limit stops an ASan-built worker before it can say
     * why; the plain build runs this case. */
    tcase_add_test(faults, test_worker_memory_limit);
    tcase_add_test(faults, test_worker_mem_above_inherited);
#endif
    tcase_add_test(eq, test_spin_policy);
    suite_add_tcase(s, eq);
    suite_add_tcase(s, faults);
    rc = tu_run(s);
    ec_dataset_clear(&a1a);
    return rc;
}
