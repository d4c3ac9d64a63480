/*
 * The memory account (ecopt/memory.h) against what a job really holds: a
 * job runs through the real binary inside a fresh memory cgroup (v1, as
 * on the CI machines), whose max_usage_in_bytes is the peak of all its
 * processes with shared pages counted once. The estimate is of address
 * space, so it must be at least the peak, and close enough to it to be
 * worth refusing jobs by. Needs root and the memory controller; without
 * them the suite is skipped, and counted so, unless ECOPT_REQUIRE_ROOT or
 * ECOPT_REQUIRE_CGROUP is set, as CI sets them.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define CGROOT "/sys/fs/cgroup/memory"

static const char *ecopt;
static char data_path[64];

/* A deterministic sparse file: rows prefer a band of features of their
 * own, so the shards differ; d = 200000 makes the d-sized state count. */
static void write_data(void)
{
    FILE *f;
    uint64_t s = 12345;
    const unsigned rows = 20000, d = 200000, k = 10;
    int fd;

    snprintf(data_path, sizeof data_path, "/tmp/ecopt-mem-XXXXXX");
    fd = mkstemp(data_path);
    if (fd < 0 || !(f = fdopen(fd, "w"))) {
        perror("test_memory: the data file");
        exit(1);
    }
    for (unsigned i = 0; i < rows; i++) {
        unsigned base = (unsigned)((uint64_t)i * (d - 1000) / rows), last = base;

        fprintf(f, "%d", i % 3 ? 1 : -1);
        for (unsigned j = 0; j < k; j++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            last += 1 + (unsigned)(s >> 33) % 90;
            fprintf(f, " %u:%.3f", last, (double)((s >> 20) % 1000) / 1000.0);
        }
        if (i == 0)
            fprintf(f, " %u:1", d);        /* the largest index, once */
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        perror("test_memory: the data file");
        exit(1);
    }
}

/* Runs `ecopt run spec args` in a new cgroup; its peak, and the estimate
 * its setup printed, in bytes. */
static void run_measured(const char *spec_text, const char *args,
                         double *peak, double *estimate)
{
    char cg[128], path[256], spec[64], out[64], cmd[1024], line[512];
    FILE *f;
    pid_t pid;
    int st;
    unsigned long long usage = 0;
    double mib = -1;

    snprintf(cg, sizeof cg, CGROOT "/ecopt-test-%d", (int)getpid());
    ck_assert_msg(mkdir(cg, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", cg,
                  strerror(errno));
    tu_write_temp_str(spec_text, spec, sizeof spec);
    snprintf(out, sizeof out, "/tmp/ecopt-mem-out-%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "exec %s run %s %s > %s 2>&1", ecopt, spec, args, out);
    pid = fork();
    if (pid == 0) {
        snprintf(path, sizeof path, "%s/cgroup.procs", cg);
        f = fopen(path, "w");
        if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
            _exit(126);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    /* target 0: every run spends its round budget, exit 5 (docs/cli.md) */
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 5, "ecopt run %s: status %d",
                  args, st);
    snprintf(path, sizeof path, "%s/memory.max_usage_in_bytes", cg);
    f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%llu", &usage), 1);
    fclose(f);
    ck_assert_int_eq(rmdir(cg), 0);
    f = fopen(out, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "memory estimate %lf MiB", &mib) == 1 ||
            sscanf(line, "memory     estimate %lf MiB", &mib) == 1)
            break;
    fclose(f);
    unlink(out);
    unlink(spec);
    ck_assert_msg(mib > 0, "no memory estimate in the output of ecopt run %s", args);
    *peak = (double)usage;
    *estimate = mib * 1048576.0;
}

START_TEST(test_estimate_bounds_peak)
{
    static const struct {
        const char *algo, *comp, *args;
    } cases[] = {
        {"eclk", "{\"type\": \"topk\", \"k\": 100}", "--backend inproc"},
        {"eclk", "{\"type\": \"topk\", \"k\": 100}", "--backend process --procs 2"},
        {"eclk", "{\"type\": \"topk\", \"k\": 100}", "--backend process --procs 8"},
        {"ec-gd-diana", "{\"type\": \"randk\", \"k\": 50}", "--backend process --procs 2"},
        {"ef21", "\"none\"", "--backend process --procs 4"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char spec[512];
        double peak, est;

        snprintf(spec, sizeof spec,
                 "{\"dataset\": \"%s\", \"workers\": 8, \"algorithm\": \"%s\","
                 " \"compressor\": %s, \"max_rounds\": 30, \"eval_every\": 10,"
                 " \"lambda1\": 1e-6, \"target\": 0}",
                 data_path, cases[i].algo, cases[i].comp);
        run_measured(spec, cases[i].args, &peak, &est);
        fprintf(stderr, "test_memory: %s %s: peak %.1f MiB, estimate %.1f MiB (%.2fx)\n",
                cases[i].algo, cases[i].args, peak / 1048576, est / 1048576, est / peak);
        /* The estimate bounds the peak (shared pages are counted once in
         * the cgroup, once per process in address space) ... */
        ck_assert_msg(peak <= est * 1.05 + 8.0 * 1048576,
                      "%s %s: peak %.1f MiB above the estimate %.1f MiB",
                      cases[i].algo, cases[i].args, peak / 1048576, est / 1048576);
        /* ... and is not so far above it that refusing by it would turn
         * away jobs that fit. */
        ck_assert_msg(est <= 2.5 * peak,
                      "%s %s: estimate %.1f MiB over 2.5 times the peak %.1f MiB",
                      cases[i].algo, cases[i].args, est / 1048576, peak / 1048576);
    }
}
END_TEST

int main(void)
{
    Suite *s;
    TCase *tc;
    struct stat sb;
    int rc;

    ecopt = getenv("ECOPT_BIN") ? getenv("ECOPT_BIN") : "build/ecopt";
#ifdef __SANITIZE_ADDRESS__
    /* The sanitizer's shadow memory is no part of the account. */
    tu_skip_suite(NULL, "test_memory: not under AddressSanitizer");
#endif
    if (geteuid() != 0)
        tu_skip_suite("ROOT", "test_memory: not root: cgroups cannot be made");
    if (stat(CGROOT "/memory.max_usage_in_bytes", &sb) != 0)
        tu_skip_suite("CGROUP", "test_memory: no cgroup v1 memory controller at " CGROOT);
    {
        /* A container sees the hierarchy read-only: nothing to measure in. */
        char probe[96];

        snprintf(probe, sizeof probe, CGROOT "/ecopt-probe-%d", (int)getpid());
        if (mkdir(probe, 0755) != 0)
            tu_skip_suite("CGROUP", "test_memory: cannot make a cgroup under " CGROOT " (%s)",
                          strerror(errno));
        rmdir(probe);
    }
    write_data();
    s = suite_create("memory");
    tc = tcase_create("cgroup");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_estimate_bounds_peak);
    suite_add_tcase(s, tc);
    rc = tu_run(s);
    unlink(data_path);
    return rc;
}
