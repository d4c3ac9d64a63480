/*
 * Datasets as CSR matrices, and the LibSVM reader that fills them.
 * The structs are plain data: anyone may fill one (tests, the generator).
 */
#ifndef ECOPT_DATA_H
#define ECOPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/error.h"

/*
 * N samples of dimension d in compressed sparse rows. Row i holds the
 * entries row_ptr[i] .. row_ptr[i+1]-1 of col (0-based, strictly increasing
 * within a row) and val. y[i] is the label mapped to -1 or +1: the smaller
 * of the file's two label values becomes -1, the larger +1.
 */
typedef struct ec_dataset {
    uint32_t n_rows;
    uint32_t d;            /* largest index seen (1-based) = number of columns */
    uint64_t nnz;
    uint64_t *row_ptr;     /* n_rows + 1 entries */
    uint32_t *col;         /* nnz entries */
    double *val;           /* nnz entries */
    double *y;             /* n_rows entries, each -1.0 or +1.0 */
    double label_neg;      /* the file's label value mapped to -1 */
    double label_pos;      /* the file's label value mapped to +1 */
    int n_labels;          /* distinct labels seen: 1 or 2 */
} ec_dataset;

/* Limits the reader enforces; zero fields take the defaults below. */
typedef struct ec_libsvm_opts {
    uint32_t max_index;    /* largest feature index accepted; default 1<<24 */
    size_t max_line;       /* longest line in bytes (without newline); default 1 MiB */
    uint64_t max_nnz;      /* most nonzeros in the whole file; default 1<<31 */
    int redact;            /* 1: messages name the line, the column and the
                              rule, and quote no byte of the file (for
                              files whose reader may not see them) */
    int count_only;        /* 1: check every line as always and count rows,
                              nnz, d and labels, but keep no matrix: *out
                              gets the counts and labels, its arrays stay
                              NULL, and memory stays that of one line */
} ec_libsvm_opts;

#define EC_LIBSVM_DEFAULT_MAX_INDEX (1u << 24)
#define EC_LIBSVM_DEFAULT_MAX_LINE ((size_t)1 << 20)
#define EC_LIBSVM_DEFAULT_MAX_NNZ ((uint64_t)1 << 31)

/*
 * Reads a LibSVM file, plain or gzip (detected by content, not name), in
 * one streaming pass. On failure returns < 0, leaves *out empty, and puts a
 * sentence naming the file and line in e->msg, for example
 * "a9a.bad:17: third label value 3 (labels so far: -1, 1)".
 * opts may be NULL for the defaults.
 */
int ec_libsvm_read(const char *path, const ec_libsvm_opts *opts,
                   ec_dataset *out, ec_err *e);

/*
 * The same from an open descriptor, read from its current offset to its
 * end (a file, a pipe, a memfd); name stands for the file in messages
 * ("(input)" when NULL). fd stays open and the caller's.
 */
int ec_libsvm_read_fd(int fd, const char *name, const ec_libsvm_opts *opts,
                      ec_dataset *out, ec_err *e);

/* Frees the arrays and zeroes the struct; a zeroed struct is a no-op. */
void ec_dataset_clear(ec_dataset *ds);

/* Bytes held by the CSR arrays (row_ptr, col, val, y). */
size_t ec_dataset_bytes(const ec_dataset *ds);

#endif
