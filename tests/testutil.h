/* Small helpers shared by the Check suites: data paths and temporary files. */
#ifndef ECOPT_TESTUTIL_H
#define ECOPT_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The shared LibSVM datasets; ECOPT_DATA_DIR overrides (the Makefile sets it). */
static inline const char *tu_data_path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("ECOPT_DATA_DIR");

    snprintf(buf, len, "%s/%s", dir && *dir ? dir : "../shared/datasets", name);
    return buf;
}

/* Writes len bytes to a new temporary file; returns its path in buf. */
static inline const char *tu_write_temp(const void *data, size_t len,
                                        char *buf, size_t buflen)
{
    int fd;

    snprintf(buf, buflen, "/tmp/ecopt-test-XXXXXX");
    fd = mkstemp(buf);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((long)write(fd, data, len), (long)len);
    close(fd);
    return buf;
}

static inline const char *tu_write_temp_str(const char *s, char *buf,
                                            size_t buflen)
{
    return tu_write_temp(s, strlen(s), buf, buflen);
}

/* Monotonic seconds, for deadlines in tests that wait for an event. */
static inline double tu_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/*
 * A block of 16 uids no account has, for the tests that run jobs as uids
 * of their own. It differs from run to run (it follows the test's pid):
 * as a job's uid the engine's reaper kills every process of that uid, so
 * two test runs at once on one machine must not share one.
 */
static inline unsigned tu_uid_block(void)
{
    return 3000000u + (unsigned)(getpid() % 100000) * 16u;
}

/*
 * Skips (docs/testing.md, "Skips"). What cannot run here says so on a line
 * starting "SKIP ", which tests/run-suites.sh counts and repeats in its
 * summary: a whole suite by exiting TU_SKIP_EXIT (tu_skip_suite), a part
 * of a test by returning after tu_skip. Each names what it needs (MPI,
 * CGROUP, ROOT, TMPFS, PTRACE, or NULL for a build that cannot); with
 * ECOPT_REQUIRE_<NEED> set that skip is a failure instead, so CI, which
 * sets those its machines satisfy, cannot pass by skipping.
 */
#define TU_SKIP_EXIT 77

static inline int tu_required(const char *need)
{
    char name[64];
    const char *v;

    if (!need)
        return 0;
    snprintf(name, sizeof name, "ECOPT_REQUIRE_%s", need);
    v = getenv(name);
    return v && *v && strcmp(v, "0") != 0;
}

/* The whole suite cannot run (call it from main): exits. */
static inline void tu_skip_suite(const char *need, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), noreturn));

static inline void tu_skip_suite(const char *need, const char *fmt, ...)
{
    char why[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (tu_required(need)) {
        fprintf(stderr, "%s, but ECOPT_REQUIRE_%s is set\n", why, need);
        exit(EXIT_FAILURE);
    }
    printf("SKIP %s\n", why);
    fflush(stdout);
    exit(TU_SKIP_EXIT);
}

/* A part of the running test cannot run: says so (the caller then
   returns or goes on without it), or fails the test if need is required. */
static inline void tu_skip(const char *need, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline void tu_skip(const char *need, const char *fmt, ...)
{
    char why[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (tu_required(need))
        ck_abort_msg("%s, but ECOPT_REQUIRE_%s is set", why, need);
    fprintf(stderr, "SKIP %s\n", why);
}

/* Runs one suite; the exit status says whether every test passed. */
static inline int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
