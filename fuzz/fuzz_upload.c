/*
 * libFuzzer target for the upload validator (service/core/validator.c):
 * the input is a whole upload, plain or gzip, checked through
 * validator_check_fd from a memfd, as the child `ecopt __validate-upload`
 * checks it. Small limits make every limit reachable. A verdict is 0, 413
 * naming a limit or 422; an accepted upload has rows, d >= 1 and counts
 * within the limits, and the engine's reader reads the same stats from it;
 * a refusal names the file and quotes nothing of it: every word of six
 * letters or more that it shares with the input is a word of the rules'
 * own sentences (the reader runs redacted: lines and columns, no bytes).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ecopt/data.h"
#include "validator.h"

static int memfd = -1;

/* The words of the validator's, the reader's and zlib's sentences. */
static const char *const vocabulary[] = {
    "before", "cannot", "closing", "column", "compression", "corrupt", "dataset",
    "decompressed", "dimension", "distance", "exceeds", "expected", "failed", "feature",
    "finite", "garbage", "header", "incorrect", "increase", "indices", "integer",
    "invalid", "labels", "lengths", "libsvm", "limits", "literal", "longer", "memory",
    "method", "negative", "nonzeros", "number", "positive", "reason", "repeat",
    "repeated", "samples", "signal", "started", "status", "stored", "stream", "strictly",
    "trailing", "truncated", "unknown", "upload", "validate", "validator", "verdict",
    "within", "length", "symbols", "distances", "window", "mismatch", "single",
    "blanks", "ecopt", "missing", "lengths",
};

static int in_vocabulary(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof vocabulary / sizeof vocabulary[0]; i++)
        if (strlen(vocabulary[i]) == n && memcmp(vocabulary[i], w, n) == 0)
            return 1;
    return 0;
}

static int is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* A word of the message of 6+ letters found in the input, not a rule's. */
static int quotes_input(const char *msg, const uint8_t *data, size_t size)
{
    for (const char *p = msg; *p;) {
        const char *w = p;

        while (is_letter(*p))
            p++;
        if ((size_t)(p - w) >= 6 && !in_vocabulary(w, (size_t)(p - w)) &&
            memmem(data, size, w, (size_t)(p - w)))
            return 1;
        if (p == w)
            p++;
    }
    return 0;
}

static void fail(const char *what, const struct validator_result *v)
{
    fprintf(stderr, "validator: %s (status %d, limit %s: %s)\n", what, v->status,
            v->limit ? v->limit : "-", v->error);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct validator_limits l = {.max_bytes = 1 << 20, .max_rows = 1000,
                                       .max_nnz = 1 << 14, .max_d = 1 << 16,
                                       .mem_mb = 1, .cpu_seconds = 1};
    struct validator_result v;
    ec_libsvm_opts o = {.max_index = 1 << 16, .max_nnz = 1 << 14};
    ec_dataset ds;
    ec_err e = {0};

    if (memfd < 0 && (memfd = memfd_create("fuzz-upload", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(memfd, 0) < 0 || pwrite(memfd, data, size, 0) != (ssize_t)size ||
        lseek(memfd, 0, SEEK_SET) != 0)
        abort();
    if (validator_check_fd(memfd, "fuzz.svm", &l, &v) < 0)
        abort();
    switch (v.status) {
    case 0:
        if (v.rows < 1 || v.d < 1 || v.rows > (int64_t)l.max_rows ||
            v.nnz > (int64_t)l.max_nnz || v.d > (int64_t)l.max_d)
            fail("accepted out of its limits", &v);
        if (lseek(memfd, 0, SEEK_SET) != 0 ||
            ec_libsvm_read_fd(memfd, "fuzz.svm", &o, &ds, &e) < 0)
            fail("accepted what the reader refuses", &v);
        if (ds.n_rows != v.rows || ds.d != v.d || (int64_t)ds.nnz != v.nnz)
            fail("stats not the reader's", &v);
        ec_dataset_clear(&ds);
        break;
    case 413:
        if (!v.limit || strncmp(v.limit, "upload_", 7) != 0)
            fail("a 413 that names no limit", &v);
        /* fall through */
    case 422:
        if (strncmp(v.error, "fuzz.svm", 8) != 0)
            fail("a refusal that does not name the file", &v);
        if (quotes_input(v.error, data, size))
            fail("a refusal that quotes the file", &v);
        break;
    default:
        fail("an unknown verdict", &v);
    }
    return 0;
}
