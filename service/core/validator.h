/*
 * The upload validator: whether an uploaded file is a LibSVM dataset the
 * service accepts, and its stats. It runs in a child process of its own
 * (`ecopt __validate-upload`, spawned with posix_spawn; the server is
 * multi-threaded), limited in address space and CPU time, so that the
 * server's memory never grows with an upload: decompressing and parsing
 * happen there. Limits on decompressed bytes, rows, nonzeros and the
 * dimension d are checked while the file streams by, and the reader's
 * checks run over it without building the matrix; gzip data with bytes
 * after its end, and a file whose rows have no feature at all (d = 0),
 * are refused.
 */
#ifndef ECOPT_VALIDATOR_H
#define ECOPT_VALIDATOR_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Defaults (ecopt serve --help lists the flags). The validator counts and
 * checks as the file streams by and keeps no matrix, so its memory is that
 * of one line and zlib's window whatever the file's size: 64 MB of address
 * space is enough for the binary, its libraries and a 1 MiB line; the
 * default gives it four times that. The counts bound the file, not the
 * memory: a job needs about 12 bytes per nonzero (500 M: 6 GB).
 */
#define VALIDATOR_MAX_BYTES_DEFAULT ((uint64_t)16 << 30)   /* decompressed */
#define VALIDATOR_MAX_ROWS_DEFAULT ((uint64_t)100000000)
#define VALIDATOR_MAX_NNZ_DEFAULT ((uint64_t)500000000)
#define VALIDATOR_MAX_D_DEFAULT ((uint64_t)1 << 24)
#define VALIDATOR_MEM_MB_DEFAULT 256u
#define VALIDATOR_CPU_DEFAULT 900u

struct validator_limits {
    uint64_t max_bytes;     /* decompressed bytes */
    uint64_t max_rows, max_nnz, max_d;
    unsigned mem_mb;        /* the child's RLIMIT_AS */
    unsigned cpu_seconds;   /* the child's RLIMIT_CPU */
};

/* The limits above where l's fields are 0. */
void validator_limits_fill(struct validator_limits *l);

struct validator_result {
    int status;             /* 0: a dataset; 413: over `limit`; 422: not one */
    const char *limit;      /* static: the limit's name ("upload_max_rows") */
    char error[512];        /* what is wrong: names the line and the rule */
    int64_t rows, d, nnz;
    double label_neg, label_pos;    /* NaN where the file has one label */
};

/*
 * Checks the file fd holds (read from offset 0; fd is left open), named
 * `name` in messages. Runs in the calling process: the child uses it, as
 * does the fuzz target. 0 with out filled (out->status says the verdict),
 * -1 when fd cannot be read.
 */
int validator_check_fd(int fd, const char *name, const struct validator_limits *l,
                       struct validator_result *out);

/*
 * The server's side: spawns `exe __validate-upload` on fd and reads its
 * verdict. fd must be open read-only (the child gets it as its stdin, and
 * no other descriptor of the server but its verdict pipe and /dev/null).
 * user, when not NULL or "", is whom the child runs as. The child is
 * killed when *cancel (may be NULL) becomes nonzero, or after twice its
 * CPU limit and 30 s of wall-clock time. 0 with out filled (a child that
 * broke a limit of its own by dying is a 413 naming it), -1 with
 * out->error when it could not be run or was cancelled.
 */
int validator_run(const char *exe, int fd, const char *name, const char *user,
                  const struct validator_limits *l, const atomic_int *cancel,
                  struct validator_result *out);

/* The child's side: main of `ecopt __validate-upload`. */
int validator_main(int argc, char **argv);

#endif
