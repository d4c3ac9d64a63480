/*
 * libFuzzer target for the LibSVM reader (engine/src/libsvm.c): the input
 * is a whole file, plain or gzip, read through ec_libsvm_read_fd from a
 * memfd, as the engine reads a dataset and the service validates an upload.
 * Small limits make the limit paths reachable. A dataset the reader
 * accepts must be a well-formed CSR matrix; a rejection names the file.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ecopt/data.h"

static int memfd = -1;

static void fail(const char *what)
{
    fprintf(stderr, "accepted dataset: %s\n", what);
    abort();
}

static void check_dataset(const ec_dataset *ds)
{
    if (ds->n_rows == 0 || !ds->row_ptr || !ds->y || !ds->col || !ds->val)
        fail("empty or missing arrays");
    if (ds->row_ptr[0] != 0 || ds->row_ptr[ds->n_rows] != ds->nnz)
        fail("row_ptr ends");
    if (ds->n_labels < 1 || ds->n_labels > 2)
        fail("n_labels");
    for (uint32_t i = 0; i < ds->n_rows; i++) {
        if (ds->y[i] != -1.0 && ds->y[i] != 1.0)
            fail("a label is not -1 or +1");
        if (ds->row_ptr[i] > ds->row_ptr[i + 1])
            fail("row_ptr decreases");
        for (uint64_t k = ds->row_ptr[i]; k < ds->row_ptr[i + 1]; k++) {
            if (ds->col[k] >= ds->d)
                fail("a column is not below d");
            if (k > ds->row_ptr[i] && ds->col[k] <= ds->col[k - 1])
                fail("columns do not increase within a row");
            if (ds->val[k] != ds->val[k] || ds->val[k] - ds->val[k] != 0)
                fail("a value is not finite");
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Limits small enough to hit, large enough for real lines. */
    ec_libsvm_opts opts = {.max_index = 1u << 16, .max_line = 4096,
                           .max_nnz = 1u << 16};
    ec_dataset ds;
    ec_err e = {0};
    int rc;

    if (memfd < 0 && (memfd = memfd_create("fuzz-libsvm", MFD_CLOEXEC)) < 0)
        abort();
    if (ftruncate(memfd, 0) < 0 ||
        pwrite(memfd, data, size, 0) != (ssize_t)size ||
        lseek(memfd, 0, SEEK_SET) != 0)
        abort();
    rc = ec_libsvm_read_fd(memfd, "fuzz.svm", &opts, &ds, &e);
    if (rc == 0) {
        check_dataset(&ds);
        ec_dataset_clear(&ds);
    } else if (strncmp(e.msg, "fuzz.svm:", 9) != 0) {
        fprintf(stderr, "a rejection that does not name the file: %s\n",
                e.msg);
        abort();
    }
    return 0;
}
