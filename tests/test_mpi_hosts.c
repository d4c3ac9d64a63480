/*
 * Open MPI across two hosts: two network namespaces joined by a veth
 * (tools/mpi-netns.sh), mpirun in the first, its rsh agent starting the
 * daemon of the second in the second; `ecopt run --backend mpi --hostfile`
 * across both, with one worker per rank and with two workers per rank
 * (--procs), gives the rows of the in-process run, and its ranks really
 * ran in both namespaces (each one records the namespace it ran in).
 * It runs as the service runs jobs, with a uid of the job's own and
 * memory limits, which every rank takes on whichever host it runs.
 * Needs root, `ip netns`, mpirun and build/ecopt-mpi; without them the
 * suite is skipped, and counted so, unless ECOPT_REQUIRE_MPI is set, as CI
 * sets it.
 * The pair is deleted whatever happens to the tests (they run in children
 * of this process; it deletes the pair after them, at exit and on SIGTERM).
 */
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "testutil.h"

static char ecopt[1024], tag[16], net[32], dir[256];
static pid_t parent;

/* The job's own uid for the runs: no account may have it, and no other
 * test run may use it (tu_uid_block). */
#define JOB_UID ((int)tu_uid_block())

/* The workers, and the processes (MPI ranks besides rank 0) that host
   them. */
enum { WORKERS = 4 };
static const unsigned procs_list[] = {WORKERS, 2};

static void pair_down(void)
{
    char cmd[512];

    if (getpid() != parent || !tag[0])
        return;
    snprintf(cmd, sizeof cmd, "sh tools/mpi-netns.sh down %s; rm -rf %s", tag, dir);
    if (system(cmd) != 0)
        fprintf(stderr, "test_mpi_hosts: could not delete namespaces %sa, %sb\n", tag, tag);
    tag[0] = '\0';
}

static void on_signal(int sig)
{
    pair_down();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Runs cmd; returns its exit status and its stdout (malloc'd). */
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

/* CSV rows cut to their first 8 columns (round .. grad_norm): seconds and
   the socket bytes (0 in process) are the only ones that may differ. */
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

static void dump(const char *path)
{
    char cmd[600];

    snprintf(cmd, sizeof cmd, "cat %s >&2", path);
    if (system(cmd) != 0)
        fprintf(stderr, "(cannot show %s)\n", path);
}

/* How many ranks the log says ran in namespace ns; every rank 0..np-1 must
   appear once. */
static void check_ranks(int np, int *in_a, int *in_b)
{
    char path[300], line[256], ns[64];
    int seen[64] = {0}, rank;
    FILE *f;

    snprintf(path, sizeof path, "%s/ranks.log", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    *in_a = *in_b = 0;
    while (fgets(line, sizeof line, f)) {
        ns[0] = '\0';
        ck_assert_int_eq(sscanf(line, "rank %d %63s", &rank, ns), 2);
        ck_assert(rank >= 0 && rank < np && rank < 64);
        seen[rank]++;
        if (strlen(ns) == strlen(tag) + 1 && strncmp(ns, tag, strlen(tag)) == 0) {
            *in_a += ns[strlen(tag)] == 'a';
            *in_b += ns[strlen(tag)] == 'b';
        }
    }
    fclose(f);
    for (int i = 0; i < np; i++)
        ck_assert_msg(seen[i] == 1, "rank %d started %d times", i, seen[i]);
    ck_assert_int_eq(*in_a + *in_b, np);
    unlink(path);
}

START_TEST(test_hosts_rows_equal_inproc)
{
    static const char *const jobs[] = {
        "\"algorithm\": \"eclk\", \"p\": 0.2, \"compressor\": {\"type\": \"topk\", \"k\": 20},"
        " \"max_rounds\": 150",
        "\"algorithm\": \"ec-sgd-diana\", \"compressor\": {\"type\": \"randk\", \"k\": 30},"
        " \"max_rounds\": 100",
    };
    char data[300], cmd[4096], args[1024], path[300];
    char *a, *b;
    FILE *f;

    snprintf(data, sizeof data, "%s/data.svm", dir);
    snprintf(cmd, sizeof cmd, "%s gen --rows 2000 --features 500 --nnz 12 --seed 5 -o %s",
             ecopt, data);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 0);
    ck_assert_msg(!getpwuid(JOB_UID), "uid %d belongs to an account", JOB_UID);
    snprintf(path, sizeof path, "%s/mpirun-args", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    ck_assert_ptr_nonnull(fgets(args, sizeof args, f));
    fclose(f);
    args[strcspn(args, "\n")] = '\0';
    setenv("ECOPT_MPIRUN_ARGS", args, 1);
    /* Each rank writes down its rank and network namespace, then is ecopt-mpi. */
    snprintf(path, sizeof path, "%s/rank", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fprintf(f, "#!/bin/sh\necho \"rank $OMPI_COMM_WORLD_RANK $(ip netns identify $$)\" >> %s/ranks.log\n"
               "exec %s-mpi \"$@\"\n", dir, ecopt);
    fclose(f);
    chmod(path, 0755);
    setenv("ECOPT_MPI_BIN", path, 1);

    for (size_t t = 0; t < 2 * sizeof jobs / sizeof jobs[0]; t++) {
        size_t i = t / 2;
        unsigned procs = procs_list[t % 2], np = procs + 1;
        char spec[300], job[1024];
        int in_a, in_b, status;

        snprintf(spec, sizeof spec, "%s/job%zu.json", dir, i);
        snprintf(job, sizeof job, "{\"dataset\": \"%s\", \"workers\": %d, %s,"
                 " \"eval_every\": 10}", data, WORKERS, jobs[i]);
        ck_assert_ptr_nonnull(f = fopen(spec, "w"));
        fputs(job, f);
        fclose(f);
        snprintf(cmd, sizeof cmd, "%s run %s --backend inproc --format csv 2>/dev/null",
                 ecopt, spec);
        /* each ends at its round budget above the target: exit 5, or 3
         * when its gap ended above its start's; mpi must say the same */
        status = capture(cmd, &a);
        ck_assert_msg(status == 5 || status == 3, "job %zu: exit %d", i, status);
        snprintf(cmd, sizeof cmd,
                 "ip netns exec %sa %s run %s --backend mpi --hostfile %s/hosts --procs %u"
                 " --worker-uid %d --mem-limits auto --format csv 2>%s/err",
                 tag, ecopt, spec, dir, procs, JOB_UID, dir);
        snprintf(path, sizeof path, "%s/err", dir);
        if (capture(cmd, &b) != status) {
            dump(path);
            ck_abort_msg("job %zu, procs %u: ecopt run --backend mpi across the pair "
                         "failed", i, procs);
        }
        ck_assert_ptr_nonnull(strstr(a, "\n100,"));
        keep_eight(a);
        keep_eight(b);
        ck_assert_msg(strcmp(a, b) == 0, "job %zu, procs %u: rows differ:\n%s\n---\n%s",
                      i, procs, a, b);
        /* --map-by node: ranks alternate, 0 in a (mpirun's host), 1 in b */
        check_ranks((int)np, &in_a, &in_b);
        ck_assert_msg(in_a == (int)(np + 1) / 2 && in_b == (int)np / 2,
                      "job %zu, procs %u: %d ranks in %sa, %d in %sb", i, procs, in_a,
                      tag, in_b, tag);
        free(a);
        free(b);
    }
}
END_TEST

/* NULL when this machine can make the pair, else why not. */
static const char *why_not(const char *mpi)
{
    char cmd[600];

    if (access(mpi, X_OK) != 0)
        return "build/ecopt-mpi was not built (no mpicc)";
    if (system("command -v mpirun >/dev/null 2>&1") != 0)
        return "mpirun not found (apt-get install openmpi-bin)";
    if (geteuid() != 0)
        return "not root (ip netns needs it)";
    if (system("command -v ip >/dev/null 2>&1 && command -v unshare >/dev/null 2>&1") != 0)
        return "no ip or unshare (apt-get install iproute2 util-linux)";
    snprintf(cmd, sizeof cmd, "sh tools/mpi-netns.sh up %s %s %s >&2", tag, net, dir);
    if (system(cmd) != 0)
        return "ip netns could not make the namespace pair";
    return NULL;
}

int main(void)
{
    const char *bin = getenv("ECOPT_BIN"), *why;
    char mpi[1100];
    Suite *s;
    TCase *tc;
    int rc;

    parent = getpid();
    snprintf(ecopt, sizeof ecopt, "%s", bin && *bin ? bin : "build/ecopt");
    snprintf(mpi, sizeof mpi, "%s-mpi", ecopt);
    /* Names of this run's own: another run may be using its pair. */
    snprintf(tag, sizeof tag, "ecmh%ld", (long)parent % 10000000);
    snprintf(net, sizeof net, "10.%d.%d", 100 + (int)(parent >> 8) % 100, (int)parent & 255);
    snprintf(dir, sizeof dir, "/tmp/ecopt-mpi-hosts-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("test_mpi_hosts: mkdtemp");
        return EXIT_FAILURE;
    }
    atexit(pair_down);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);
    if ((why = why_not(mpi))) {
        pair_down();
        tu_skip_suite("MPI", "test_mpi_hosts: %s", why);
    }
    s = suite_create("mpi_hosts");
    tc = tcase_create("two namespaces");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_hosts_rows_equal_inproc);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    pair_down();
    return rc;
}
