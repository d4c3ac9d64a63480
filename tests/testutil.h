/* Small helpers shared by the Check suites: data paths and temporary files. */
#ifndef ECOPT_TESTUTIL_H
#define ECOPT_TESTUTIL_H

#include <check.h>
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
