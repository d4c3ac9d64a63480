/*
 * The Open MPI backend against the socket one: the same job gives the same
 * metric rows through `mpirun`; SIGTERM and a killed rank end every
 * process; as root, every rank runs as the job's uid under a worker's
 * limits, and a rank that cannot switch fails the job saying so. Runs the
 * real binaries; needs build/ecopt-mpi (built where mpicc exists).
 * Without it the suite is skipped, and counted so, unless ECOPT_REQUIRE_MPI
 * is set, as CI sets it. The service runs MPI jobs
 * where its admin enabled them (--mpi-hostfile), and refuses them (422
 * naming backend) where not.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "serverutil.h"

static char ecopt[1024];

/* Runs a command, returns its exit status and stdout (malloc'd). */
static int capture(const char *cmd, char **out)
{
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 16, len = 0, r;
    char *buf = malloc(cap);
    int st;

    ck_assert_ptr_nonnull(p);
    while ((r = fread(buf + len, 1, cap - 1 - len, p)) > 0) {
        len += r;
        if (len + 1 >= cap)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* CSV without its timing columns, seconds (the 9th) and time (the 12th),
 * and without wire_down (the 11th): the process backend's workers read
 * the coordinator's model from a shared segment, so its STEP carries no
 * broadcast, while MPI's ranks still receive it (docs/architecture.md,
 * "The shared model"). Those are the only columns allowed to differ. */
static void drop_seconds(char *csv)
{
    char *r = csv, *w = csv;
    int col = 1;

    for (; *r; r++) {
        if (*r == '\n') {
            col = 1;
            *w++ = *r;
            continue;
        }
        if (*r == ',')
            col++;
        if (col == 9 || (col == 10 && *r == ',') || col == 11 || col == 12)
            continue;
        *w++ = *r;
    }
    *w = '\0';
}

#define MPI_JOB "{\"dataset\": \"a1a\", \"workers\": 3, \"algorithm\": \"eclk\", \"p\": 0.2," \
    " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 100, \"eval_every\": 10"
#define MPI_JOB_SPEC MPI_JOB "}"

START_TEST(test_mpi_rows_equal_process)
{
    static const char *jobs[] = {
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"eclk\", \"p\": 0.2,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 2}, \"max_rounds\": 150, \"eval_every\": 10,"
        " \"split\": \"dirichlet\", \"split_alpha\": 0.3, \"seed\": 5}",
        "{\"dataset\": \"a1a\", \"workers\": 3, \"algorithm\": \"ec-sgd-diana\","
        " \"compressor\": {\"type\": \"randk\", \"k\": 5}, \"max_rounds\": 100, \"eval_every\": 10,"
        " \"split\": \"label_skew\"}",
        "{\"dataset\": \"heart_scale\", \"workers\": 5, \"algorithm\": \"ef21\","
        " \"compressor\": {\"type\": \"dither\", \"s\": 3}, \"max_rounds\": 100, \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 3, \"algorithm\": \"ec-gd-diana\","
        " \"compressor\": \"natural\", \"max_rounds\": 100, \"eval_every\": 10}",
        "{\"dataset\": \"heart_scale\", \"workers\": 4, \"algorithm\": \"eclk\", \"p\": 0.2,"
        " \"compressor\": {\"type\": \"natural-dither\", \"s\": 3}, \"max_rounds\": 100,"
        " \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ec-lsvrg-qian\", \"p\": 0.2,"
        " \"compressor\": {\"type\": \"randk\", \"k\": 3}, \"max_rounds\": 150, \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 3, \"algorithm\": \"ec-lsvrg-diana\", \"p\": 0.05,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 3}, \"max_rounds\": 100, \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"adiana\", \"p\": 0.2,"
        " \"compressor\": {\"type\": \"dither\", \"s\": 2}, \"max_rounds\": 150, \"eval_every\": 10}",
        "{\"dataset\": \"heart_scale\", \"workers\": 5, \"algorithm\": \"econtrol\", \"batch\": 3,"
        " \"econtrol_eta\": 0.25, \"compressor\": {\"type\": \"topk\", \"k\": 2},"
        " \"max_rounds\": 100, \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 5, \"algorithm\": \"adef\", \"batch\": 4,"
        " \"compressor\": {\"type\": \"dither\", \"s\": 3}, \"max_rounds\": 150, \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ef21\", \"participation\": 0.5,"
        " \"compressor\": {\"type\": \"topk\", \"k\": 3}, \"max_rounds\": 100, \"eval_every\": 10}",
        /* ECLK's adaptive rule: the workers' f_tau cross the wire, and
         * its guard restarts at rounds 29 and 81 on every backend. */
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"eclk\", \"eclk_rule\": \"adaptive\","
        " \"seed\": 2, \"compressor\": {\"type\": \"randk\", \"k\": 1}, \"max_rounds\": 100,"
        " \"eval_every\": 10}",
        "{\"dataset\": \"a1a\", \"workers\": 4, \"algorithm\": \"ec-gd-diana\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 3}, \"compressor_down\": {\"type\": \"randk\","
        " \"k\": 6}, \"max_rounds\": 100, \"eval_every\": 10}",
    };
    /* Their exit statuses, the same on both backends: each ends at its
     * round budget above its target (the second's gap climbs to 2.7 at
     * round 90 and is back to 0.96 at 100), so 5, budget_exhausted. */
    static const int status[] = {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5};

    ck_assert_uint_eq(sizeof status / sizeof status[0], sizeof jobs / sizeof jobs[0]);
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        char spec[64], cmd[2048], *a, *b;
        tu_write_temp_str(jobs[i], spec, sizeof spec);
        /* The same P both ways: the bytes that cross (wire_up) depend
         * on it, the rest of a row does not. */
        snprintf(cmd, sizeof cmd, "%s run %s --backend process --procs 2 "
                 "--format csv 2>/dev/null", ecopt, spec);
        ck_assert_int_eq(capture(cmd, &a), status[i]);
        snprintf(cmd, sizeof cmd, "%s run %s --backend mpi --procs 2 "
                 "--format csv 2>/dev/null", ecopt, spec);
        ck_assert_int_eq(capture(cmd, &b), status[i]);
        ck_assert_ptr_nonnull(strstr(a, "\n150,") ? a : strstr(a, "\n100,"));
        drop_seconds(a);
        drop_seconds(b);
        ck_assert_msg(strcmp(a, b) == 0, "job %zu: rows differ:\n%s\n---\n%s", i, a, b);
        free(a);
        free(b);
        unlink(spec);
    }
}
END_TEST

/* The pids of the job's ranks: ecopt-mpi processes (by argv[0]; mpirun's
 * own command line names ecopt-mpi too) whose command line mentions tag,
 * the job's spec path; up to max of them; returns how many. */
static int mpi_pids(const char *tag, pid_t *pids, int max)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int n = 0;

    while ((de = readdir(d)) && n < max) {
        char path[300], buf[4096];
        FILE *f;
        size_t len;

        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/cmdline", de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        len = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[len] = '\0';
        if (!strstr(buf, "ecopt-mpi"))      /* argv[0], up to its NUL */
            continue;
        for (size_t i = 0; i < len; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[len] = '\0';
        if (strstr(buf, tag))
            pids[n++] = (pid_t)atoi(de->d_name);
    }
    closedir(d);
    return n;
}

static int count_procs(const char *tag)
{
    pid_t pids[64];

    return mpi_pids(tag, pids, 64);
}

/* A job that runs until it is stopped: rank 0 and three worker ranks
 * (the rounds within the test server's --max-rounds). */
#define LONG_FIELDS "\"dataset\": \"a9a\", \"workers\": 3, \"procs\": 3," \
    " \"algorithm\": \"eclk\", \"compressor\": {\"type\": \"topk\", \"k\": 1}," \
    " \"max_rounds\": 40000000, \"target\": 0"
#define LONG_JOB "{" LONG_FIELDS "}"

/* Starts a long MPI job; returns the pid of ecopt, which runs mpirun. */
static pid_t start_long(char *spec, size_t len)
{
    pid_t pid;

    tu_write_temp_str(LONG_JOB, spec, len);
    pid = fork();
    if (pid == 0) {
        freopen("/dev/null", "w", stdout);
        freopen("/dev/null", "w", stderr);
        execl(ecopt, ecopt, "run", spec, "--backend", "mpi", "--quiet", (char *)NULL);
        _exit(127);
    }
    /* wait until the four ranks are up (mpirun is not counted) */
    double t0 = tu_now();
    while (count_procs(spec) < 4) {
        ck_assert_msg(tu_now() - t0 < 30, "MPI ranks did not start");
        usleep(20000);
    }
    usleep(300000);
    return pid;
}

/* Before failing on a job that did not end: what is left of it, so that
 * an intermittent hang leaves something to read in the test log. */
static void dump_job(pid_t mpirun, const char *tag)
{
    char cmd[512];

    snprintf(cmd, sizeof cmd,
             "ps -eo pid,ppid,pgid,stat,wchan:22,etimes,args | "
             "awk 'NR == 1 || $1 == %d || $2 == %d || /%s/' | grep -v awk >&2",
             (int)mpirun, (int)mpirun, strrchr(tag, '/') ? strrchr(tag, '/') + 1 : tag);
    fprintf(stderr, "test_mpi: the job's processes when the wait gave up:\n");
    if (system(cmd) != 0)
        fprintf(stderr, "test_mpi: (ps failed)\n");
}

/* Waits for ecopt and every rank of its job to be gone; ecopt's wait
 * status. */
static int wait_all_gone(pid_t pid, const char *spec, double limit)
{
    double t0 = tu_now();
    int st;

    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (tu_now() - t0 >= limit)
            dump_job(pid, spec);
        ck_assert_msg(tu_now() - t0 < limit, "ecopt (and mpirun) still running after %g s", limit);
        usleep(10000);
    }
    fprintf(stderr, "ecopt and mpirun ended %.2f s after the signal\n", tu_now() - t0);
    while (count_procs(spec) > 0) {
        if (tu_now() - t0 >= limit)
            dump_job(pid, spec);
        ck_assert_msg(tu_now() - t0 < limit, "ranks still running after %g s", limit);
        usleep(10000);
    }
    ck_assert_msg(!WIFEXITED(st) || WEXITSTATUS(st) != 0,
                  "an ended job must not look successful");
    return st;
}

START_TEST(test_mpi_sigterm)
{
    char spec[64];
    pid_t pid = start_long(spec, sizeof spec);

    kill(pid, SIGTERM);
    wait_all_gone(pid, spec, 20.0);
    unlink(spec);
}
END_TEST

START_TEST(test_mpi_rank_killed)
{
    char spec[64];
    pid_t pid = start_long(spec, sizeof spec), pids[64], victim = 0;
    int n = mpi_pids(spec, pids, 64);

    /* any rank but rank 0: the youngest ecopt-mpi process will do */
    for (int i = 0; i < n; i++)
        if (pids[i] > victim)
            victim = pids[i];
    ck_assert_int_gt(victim, 0);
    kill(victim, SIGKILL);
    wait_all_gone(pid, spec, 20.0);
    unlink(spec);
}
END_TEST

/*
 * An mpirun that stays behind after its ranks have ended, with no signal
 * sent (a rank killed or crashed, as above, when Open MPI's mpirun then
 * fails to exit): a stand-in on PATH that starts one short-lived child
 * and then sleeps. ecopt must kill it about 10 s after its last child
 * ended, say so, and exit with a failure, not wait for ever.
 */
START_TEST(test_mpi_mpirun_stays_behind)
{
    char dir[] = "/tmp/ecopt-mpirun-XXXXXX", fake[300], path[4400], spec[64], err[4096];
    const char *old = getenv("PATH");
    FILE *f;
    int ep[2], st;
    pid_t pid;
    double t0;
    ssize_t n;
    size_t len = 0;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(fake, sizeof fake, "%s/mpirun", dir);
    ck_assert_ptr_nonnull(f = fopen(fake, "w"));
    fputs("#!/bin/sh\nsleep 1 &\nwait\nexec sleep 90\n", f);
    fclose(f);
    ck_assert_int_eq(chmod(fake, 0755), 0);
    tu_write_temp_str(LONG_JOB, spec, sizeof spec);
    snprintf(path, sizeof path, "%s:%s", dir, old ? old : "/usr/bin:/bin");
    ck_assert_int_eq(pipe(ep), 0);
    t0 = tu_now();
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        setenv("PATH", path, 1);
        freopen("/dev/null", "w", stdout);
        dup2(ep[1], 2);
        close(ep[0]);
        execl(ecopt, ecopt, "run", spec, "--backend", "mpi", "--quiet", (char *)NULL);
        _exit(127);
    }
    close(ep[1]);
    while (len < sizeof err - 1 && (n = read(ep[0], err + len, sizeof err - 1 - len)) > 0)
        len += (size_t)n;
    err[len] = '\0';
    close(ep[0]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    fprintf(stderr, "a stayed-behind mpirun was killed %.2f s after the start\n",
            tu_now() - t0);
    ck_assert_msg(tu_now() - t0 < 60, "ecopt waited %.0f s", tu_now() - t0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) != 0, "status %d", st);
    ck_assert_msg(strstr(err, "mpirun did not end 10 s after its ranks had; killed"),
                  "stderr: %s", err);
    unlink(fake);
    rmdir(dir);
    unlink(spec);
}
END_TEST

/* ---- the worker ranks' uid and limits ---------------------------------- */

/* A uid of the job's own for these tests: no account may have it, and no
 * other test run may use it (tu_uid_block). */
#define JOB_UID ((int)tu_uid_block())

/* Starts `ecopt run ARGS...` with its report records (--report-fd 1) on
 * a pipe whose read end is *out, its text on /dev/null; ecopt's pid. */
static pid_t start_reporting(const char *const *args, int *out)
{
    int p[2];
    pid_t pid;

    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        const char *av[40];
        int n = 0;

        av[n++] = ecopt;
        av[n++] = "run";
        while (*args && n < 36)
            av[n++] = *args++;
        av[n++] = "--report-fd";
        av[n++] = "1";
        av[n++] = "--quiet";
        av[n] = NULL;
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        freopen("/dev/null", "w", stderr);
        execv(ecopt, (char *const *)av);
        _exit(127);
    }
    close(p[1]);
    *out = p[0];
    return pid;
}

/* The first record read from fd that contains needle (malloc'd), or NULL
 * at the end of the stream; fails if neither comes within limit seconds.
 * Without a needle it reads to the end. */
static char *read_record(int fd, const char *needle, double limit)
{
    static char buf[1 << 20];
    static size_t len;
    double t0 = tu_now();

    for (;;) {
        char *nl;
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t r;

        while (needle && (nl = memchr(buf, '\n', len))) {
            size_t n = (size_t)(nl - buf) + 1;
            char *rec = NULL;

            *nl = '\0';
            if (strstr(buf, needle))
                rec = strdup(buf);
            memmove(buf, buf + n, len - n);
            len -= n;
            if (rec)
                return rec;
        }
        ck_assert_msg(tu_now() - t0 < limit, "no record with %s within %g s",
                      needle ? needle : "the end", limit);
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        if (len == sizeof buf)
            len = 0;                /* only whole records are looked at */
        r = read(fd, buf + len, sizeof buf - len);
        if (r <= 0) {
            len = 0;
            return NULL;
        }
        len += (size_t)r;
    }
}

/* The value of the line of /proc/PID/FILE that starts with key. */
static void proc_line(pid_t pid, const char *file, const char *key, char *out,
                      size_t len)
{
    char path[96], buf[512];
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    while (fgets(buf, sizeof buf, f))
        if (strncmp(buf, key, strlen(key)) == 0) {
            snprintf(out, len, "%s", buf + strlen(key));
            out[strcspn(out, "\n")] = '\0';
            fclose(f);
            return;
        }
    fclose(f);
    ck_abort_msg("%s has no line %s", path, key);
}

/* A limit's soft and hard values from /proc/PID/limits; UINT64_MAX is
 * unlimited. */
static void proc_limit(pid_t pid, const char *name, uint64_t *soft, uint64_t *hard)
{
    char line[256], s[32], h[32];

    proc_line(pid, "limits", name, line, sizeof line);
    ck_assert_int_eq(sscanf(line, "%31s %31s", s, h), 2);
    *soft = strcmp(s, "unlimited") == 0 ? UINT64_MAX : strtoull(s, NULL, 10);
    *hard = strcmp(h, "unlimited") == 0 ? UINT64_MAX : strtoull(h, NULL, 10);
}

/*
 * As root, --worker-uid and --mem-limits auto hold for every rank, as for
 * a forked worker: each runs as the job's uid (group the same, no other
 * groups) under an address-space limit above what it holds, and each
 * worker rank under a worker's limits (CPU, no core files). Read from
 * /proc once the first metric row is out, which is after every rank's
 * handshake and so after every drop.
 */
START_TEST(test_mpi_ranks_take_job_uid)
{
    char spec[64], uid[16], want[64], line[256], *rec;
    const char *args[] = {spec, "--backend", "mpi", "--worker-uid", uid, "--mem-limits",
                          "auto", "--worker-cpu-limit", "3600", NULL};
    pid_t pid, pids[64], coordinator;
    int fd, n, seen_coordinator = 0;

    if (geteuid() != 0) {
        tu_skip("ROOT", "test_mpi: not root: the ranks' uid is not tested");
        return;
    }
    ck_assert_msg(!getpwuid(JOB_UID), "uid %d belongs to an account", JOB_UID);
    snprintf(uid, sizeof uid, "%d", JOB_UID);
    snprintf(want, sizeof want, "\t%d\t%d\t%d\t%d", JOB_UID, JOB_UID, JOB_UID, JOB_UID);
    tu_write_temp_str(LONG_JOB, spec, sizeof spec);
    pid = start_reporting(args, &fd);
    /* Rank 0 names itself in the start record. (A rank's environment,
     * which holds its rank, cannot be read once it runs as another uid
     * without CAP_SYS_PTRACE, which a container's root lacks.) */
    rec = read_record(fd, "\"type\":\"start\"", 60);
    ck_assert_msg(rec && strstr(rec, "\"pid\":"), "no start record with a pid");
    coordinator = (pid_t)atoi(strstr(rec, "\"pid\":") + 6);
    free(rec);
    rec = read_record(fd, "\"type\":\"metric\"", 60);
    ck_assert_msg(rec, "the job ended before its first row");
    free(rec);
    n = mpi_pids(spec, pids, 64);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++) {
        seen_coordinator += pids[i] == coordinator;
        proc_line(pids[i], "status", "Uid:", line, sizeof line);
        ck_assert_msg(strcmp(line, want) == 0, "pid %d: Uid:%s", (int)pids[i], line);
        proc_line(pids[i], "status", "Gid:", line, sizeof line);
        ck_assert_msg(strcmp(line, want) == 0, "pid %d: Gid:%s", (int)pids[i], line);
        proc_line(pids[i], "status", "Groups:", line, sizeof line);
        ck_assert_msg(atoi(line) == JOB_UID, "pid %d: Groups:%s", (int)pids[i], line);
    }
    ck_assert_msg(seen_coordinator == 1, "rank 0 (pid %d) seen %d times among the ranks",
                  (int)coordinator, seen_coordinator);
    for (int i = 0; i < n; i++) {
        int who = (int)pids[i];
        uint64_t soft, hard, vm;

        /* A limit, and one the rank can live under: above the address
         * space it holds (its MPI runtime's some 230 MiB included). */
        proc_limit(pids[i], "Max address space", &soft, &hard);
        proc_line(pids[i], "status", "VmSize:", line, sizeof line);
        vm = strtoull(line, NULL, 10) * 1024;
        ck_assert_msg(soft != UINT64_MAX && soft > vm,
                      "pid %d: address-space limit %llu, holds %llu", who,
                      (unsigned long long)soft, (unsigned long long)vm);
        if (pids[i] == coordinator)
            continue;           /* rank 0: no worker limits */
        ck_assert_msg(hard == soft, "pid %d: hard limit %llu", who,
                      (unsigned long long)hard);
        proc_limit(pids[i], "Max cpu time", &soft, &hard);
        ck_assert_msg(soft == 3600 && hard == 3605, "pid %d: cpu %llu %llu", who,
                      (unsigned long long)soft, (unsigned long long)hard);
        proc_limit(pids[i], "Max core file size", &soft, &hard);
        ck_assert_msg(soft == 0 && hard == 0, "pid %d: core %llu %llu", who,
                      (unsigned long long)soft, (unsigned long long)hard);
    }
    kill(pid, SIGTERM);
    free(read_record(fd, NULL, 20));
    close(fd);
    wait_all_gone(pid, spec, 20.0);
    unlink(spec);
}
END_TEST

/*
 * A worker rank that cannot take the job's uid (here: rank 2, started
 * without CAP_SETUID and CAP_SETGID, as a rank an unprivileged mpirun
 * daemon starts on another host would be) fails the job at once, and the
 * final record says which rank and why; no rank is left behind.
 */
START_TEST(test_mpi_rank_cannot_drop)
{
    char spec[64], uid[16], wrapper[80], want[64], *rec;
    const char *args[] = {spec, "--backend", "mpi", "--worker-uid", uid, NULL};
    json_t *doc;
    const char *reason;
    pid_t pid;
    FILE *f;
    int fd, st;

    if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1") != 0) {
        tu_skip("ROOT", "test_mpi: not root or no setpriv: a rank that cannot "
                "drop is not tested");
        return;
    }
    snprintf(uid, sizeof uid, "%d", JOB_UID);
    tu_write_temp_str(MPI_JOB_SPEC, spec, sizeof spec);
    snprintf(wrapper, sizeof wrapper, "%s.sh", spec);
    ck_assert_ptr_nonnull(f = fopen(wrapper, "w"));
    fprintf(f, "#!/bin/sh\nif [ \"$OMPI_COMM_WORLD_RANK\" = 2 ]; then\n"
               "    exec setpriv --bounding-set -setuid,-setgid %s-mpi \"$@\"\nfi\n"
               "exec %s-mpi \"$@\"\n", ecopt, ecopt);
    fclose(f);
    chmod(wrapper, 0755);
    setenv("ECOPT_MPI_BIN", wrapper, 1);
    pid = start_reporting(args, &fd);
    unsetenv("ECOPT_MPI_BIN");
    rec = read_record(fd, "\"type\":\"final\"", 60);
    ck_assert_msg(rec, "the job ended without a final record");
    ck_assert_ptr_nonnull(doc = json_loads(rec, 0, NULL));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "status")), "failed");
    reason = json_string_value(json_object_get(doc, "reason"));
    snprintf(want, sizeof want, "setgroups for uid %d", JOB_UID);
    ck_assert_msg(reason && strstr(reason, ": rank 2 on ") && strstr(reason, want),
                  "reason: %s", reason ? reason : "(none)");
    json_decref(doc);
    free(rec);
    free(read_record(fd, NULL, 20));
    close(fd);
    st = wait_all_gone(pid, spec, 20.0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 3, "ecopt run: status %#x", st);
    unlink(wrapper);
    unlink(spec);
}
END_TEST

/* The metric rows of a service job, as CSV. */
static char *job_csv(const struct server *s, const char *id)
{
    char path[96];
    struct reply r;

    snprintf(path, sizeof path, "/v1/jobs/%s/metrics?limit=1000", id);
    r = req(s, "GET", path, ALICE, NULL, "Accept: text/csv");
    ck_assert_msg(r.status == 200, "%s: %ld %s", path, r.status, r.body);
    return r.body;
}

/* CSV rows cut to their first 8 columns (round .. grad_norm): the
   in-process run sends no frame, so its socket bytes are 0. */
static void keep_eight(char *csv)
{
    char *r = csv, *w = csv;
    int col = 1;

    for (; *r; r++) {
        if (*r == '\n') {
            col = 1;
            *w++ = *r;
            continue;
        }
        if (*r == ',')
            col++;
        if (col <= 8)
            *w++ = *r;
    }
    *w = '\0';
}


START_TEST(test_service_runs_mpi)
{
    struct server s;
    char hosts[128], id[32], spec[64], cmd[2048], *a, *b;
    const char *opts[] = {"--mpi-hostfile", hosts, NULL};
    json_t *doc;
    FILE *f;

    snprintf(hosts, sizeof hosts, "/tmp/ecopt-mpi-hosts-%ld", (long)getpid());
    ck_assert_ptr_nonnull(f = fopen(hosts, "w"));
    fputs("localhost slots=8\n", f);
    fclose(f);
    server_start_with(&s, 0, opts);
    job_create(&s, ALICE, MPI_JOB ", \"backend\": \"mpi\"}", id);
    doc = job_wait(&s, ALICE, id, "succeeded", 60);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "backend")), "mpi");
    json_decref(doc);
    b = job_csv(&s, id);
    server_stop(&s, SIGTERM);
    unlink(hosts);

    tu_write_temp_str(MPI_JOB "}", spec, sizeof spec);
    snprintf(cmd, sizeof cmd, "%s run %s --backend inproc --format csv 2>/dev/null",
             ecopt, spec);
    ck_assert_int_eq(capture(cmd, &a), 5);     /* to its round budget */
    unlink(spec);
    ck_assert_ptr_nonnull(strstr(a, "\n100,"));
    keep_eight(a);
    keep_eight(b);
    ck_assert_msg(strcmp(a, b) == 0, "rows differ:\n%s\n---\n%s", a, b);
    free(a);
    free(b);
}
END_TEST

/*
 * The service with a uid for each job (--worker-uids, as root): every
 * rank of a running MPI job runs as that job's uid, with no capability
 * to regain and no_new_privs, read from /proc once
 * the job has stored a row (after every rank's handshake). The job ends
 * by its own max_seconds rather than by a cancel: the service's SIGTERM
 * to the whole process group sometimes leaves Open MPI's shared-memory
 * files in /dev/shm (it did before the ranks switched users too).
 */
START_TEST(test_service_mpi_job_uid)
{
    const unsigned FIRST = tu_uid_block();
    struct server s;
    char hosts[128], id[32], want[64], line[256], range[64];
    const char *opts[] = {"--mpi-hostfile", hosts, NULL};
    pid_t pids[64];
    unsigned uid = 0;
    json_t *doc;
    const char *reason;
    int n;
    FILE *f;

    if (geteuid() != 0) {
        tu_skip("ROOT", "test_mpi: not root: the service's MPI job uids are "
                "not tested");
        return;
    }
    snprintf(hosts, sizeof hosts, "/tmp/ecopt-mpi-hosts3-%ld", (long)getpid());
    ck_assert_ptr_nonnull(f = fopen(hosts, "w"));
    fputs("localhost slots=8\n", f);
    fclose(f);
    snprintf(range, sizeof range, "%u-%u", FIRST, FIRST + 1);
    setenv("ECOPT_WORKER_UIDS", range, 1);
    server_start_with(&s, 0, opts);
    job_create(&s, ALICE, "{" LONG_FIELDS ", \"max_seconds\": 8, \"backend\": \"mpi\"}",
               id);
    /* mpirun and four ranks at nice 10: at a load of 10 to 20 the first
     * row was seen to take over 60 s. */
    job_wait_first_row(&s, ALICE, id, 180);
    /* The ranks' command lines name the job's spec file, <id>.json. */
    n = mpi_pids(id, pids, 64);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < n; i++) {
        proc_line(pids[i], "status", "Uid:", line, sizeof line);
        if (!uid)
            uid = (unsigned)atoi(line);
        ck_assert_msg(uid == FIRST || uid == FIRST + 1, "uid %u", uid);
        snprintf(want, sizeof want, "\t%u\t%u\t%u\t%u", uid, uid, uid, uid);
        ck_assert_msg(strcmp(line, want) == 0, "pid %d: Uid:%s", (int)pids[i], line);
        /* No way back to root for any rank: no bounding set, no_new_privs. */
        proc_line(pids[i], "status", "CapBnd:", line, sizeof line);
        ck_assert_msg(strcmp(line, "\t0000000000000000") == 0, "pid %d: CapBnd:%s",
                      (int)pids[i], line);
        proc_line(pids[i], "status", "NoNewPrivs:", line, sizeof line);
        ck_assert_msg(strcmp(line, "\t1") == 0, "pid %d: NoNewPrivs:%s", (int)pids[i], line);
    }
    doc = job_wait(&s, ALICE, id, "final", 60);
    reason = json_string_value(json_object_get(doc, "reason"));
    ck_assert_msg(reason && strstr(reason, "max_seconds 8 reached"), "reason: %s",
                  reason ? reason : "(none)");
    json_decref(doc);
    server_stop(&s, SIGTERM);
    unlink(hosts);
}
END_TEST

START_TEST(test_service_refuses_mpi)
{
    struct server s;
    struct reply r;
    json_t *doc;

    /* not enabled: 422 naming backend, and no job */
    server_start(&s, 0);
    r = req(&s, "POST", "/v1/jobs", ALICE, MPI_JOB ", \"backend\": \"mpi\"}", NULL);
    ck_assert_msg(r.status == 422, "status %ld: %s", r.status, r.body);
    doc = json_of(&r);
    ck_assert_ptr_nonnull(strstr(r.body, "\"backend\""));
    ck_assert_ptr_nonnull(strstr(r.body, "--mpi-hostfile"));
    json_decref(doc);
    free(r.body);
    r = req(&s, "GET", "/v1/jobs", ALICE, NULL, NULL);
    ck_assert_ptr_null(strstr(r.body, "\"id\""));
    free(r.body);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Enabled where MPI is missing: the server does not start, and says why. */
START_TEST(test_service_mpi_needs_binary)
{
    char cmd[2400], hosts[128], *out;

    snprintf(hosts, sizeof hosts, "/tmp/ecopt-mpi-hosts2-%ld", (long)getpid());
    ck_assert_int_eq(close(creat(hosts, 0600)), 0);
    snprintf(cmd, sizeof cmd,
             "ECOPT_MPI_BIN=/nonexistent/ecopt-mpi %s serve --listen 127.0.0.1:0 "
             "--auth off --mpi-hostfile %s 2>&1", ecopt, hosts);
    ck_assert_int_ne(capture(cmd, &out), 0);
    ck_assert_msg(strstr(out, "--mpi-hostfile: MPI jobs need /nonexistent/ecopt-mpi"),
                  "said: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s serve --listen 127.0.0.1:0 --auth off "
             "--mpi-hostfile /nonexistent/hosts 2>&1", ecopt);
    ck_assert_int_ne(capture(cmd, &out), 0);
    ck_assert_msg(strstr(out, "--mpi-hostfile (ECOPT_MPI_HOSTFILE) /nonexistent/hosts"),
                  "said: %s", out);
    free(out);
    unlink(hosts);
}
END_TEST

int main(void)
{
    const char *bin = getenv("ECOPT_BIN");
    char mpi[1100];
    Suite *s;
    TCase *tc;

    snprintf(ecopt, sizeof ecopt, "%s", bin && *bin ? bin : "build/ecopt");
    snprintf(mpi, sizeof mpi, "%s-mpi", ecopt);
    if (access(mpi, X_OK) != 0)
        tu_skip_suite("MPI", "test_mpi: %s was not built (no mpicc)", mpi);
    /* Root may run mpirun here only when it is told it may. */
    if (!getenv("ECOPT_MPIRUN_ARGS"))
        setenv("ECOPT_MPIRUN_ARGS", "--oversubscribe --allow-run-as-root", 1);
    s = suite_create("mpi");
    tc = tcase_create("mpirun");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mpi_rows_equal_process);
    tcase_add_test(tc, test_mpi_sigterm);
    tcase_add_test(tc, test_mpi_rank_killed);
    tcase_add_test(tc, test_mpi_mpirun_stays_behind);
    suite_add_tcase(s, tc);
    tc = tcase_create("worker ranks");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_mpi_ranks_take_job_uid);
    tcase_add_test(tc, test_mpi_rank_cannot_drop);
    suite_add_tcase(s, tc);
    tc = tcase_create("service");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_service_runs_mpi);
    tcase_add_test(tc, test_service_mpi_job_uid);
    tcase_add_test(tc, test_service_refuses_mpi);
    tcase_add_test(tc, test_service_mpi_needs_binary);
    suite_add_tcase(s, tc);
    curl_global_init(CURL_GLOBAL_ALL);
    int rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
