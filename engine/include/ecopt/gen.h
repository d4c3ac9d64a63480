/*
 * A deterministic generator of heterogeneous sparse LibSVM data, for scale
 * tests and benchmarks where no real file is large enough. The rows come in
 * `sources` contiguous blocks; block j draws most of its features from its
 * own slice of the d columns, so contiguous shards differ, as real data
 * split by source does. Labels come from a planted model with noise, so the
 * problem is well posed. Same options => the same bytes.
 */
#ifndef ECOPT_GEN_H
#define ECOPT_GEN_H

#include <stdint.h>
#include <stdio.h>

#include "ecopt/error.h"

enum ec_gen_labels {
    EC_GEN_LOGISTIC = 0,   /* y = +1 with probability sigmoid(4 <a, w*>) */
    EC_GEN_RIDGE = 1       /* y = sign(<a, w*> + 0.3 noise) */
};

typedef struct ec_gen_opts {
    uint64_t rows;         /* 1 .. EC_GEN_MAX_NNZ / nnz */
    uint64_t d;            /* features, 1 .. EC_GEN_MAX_D */
    uint64_t nnz;          /* nonzeros per row, 1 .. d */
    uint64_t seed;
    uint64_t sources;      /* row blocks, 1 .. min(rows, d); 0: min(10, rows, d) */
    int labels;            /* enum ec_gen_labels */
} ec_gen_opts;

/* What `ecopt run` reads by default (ec_libsvm_opts), so every file made
   here loads. */
#define EC_GEN_MAX_D ((uint64_t)1 << 24)
#define EC_GEN_MAX_NNZ ((uint64_t)1 << 31)
/* Of each row's nonzeros, this share (in expectation) falls in the
   columns of its source; the rest anywhere. */
#define EC_GEN_OWN_SHARE 0.8

/* NULL when the options are usable, else a sentence naming the field. */
const char *ec_gen_check(const ec_gen_opts *o);

/* Writes the file to f; EC_EINVAL (o fails ec_gen_check), EC_ENOMEM or
   EC_EIO (a write failed). */
int ec_gen_write(FILE *f, const ec_gen_opts *o, ec_err *e);

#endif
