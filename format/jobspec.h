/*
 * The job spec: a strict parser from JSON into an ec_job plus the keys only
 * the service uses (name, labels, backend), and the canonical JSON form the
 * service stores and echoes. `ecopt run JOB.json` and POST /v1/jobs share it.
 *
 * Errors, as everywhere on the format floor (docs/architecture.md,
 * "Errors"): a parser returns 0 or -1 and lists every problem it found in
 * struct jobspec_errors, each a field path and a sentence; a writer
 * returns NULL only when memory runs out.
 */
#ifndef ECOPT_JOBSPEC_H
#define ECOPT_JOBSPEC_H

#include <stddef.h>

#include <jansson.h>

#include "ecopt/job.h"

/* Static limits of the service-only keys; lengths are in bytes of UTF-8. */
#define JOBSPEC_NAME_MAX 128
#define JOBSPEC_LABELS_MAX 32
#define JOBSPEC_LABEL_KEY_MAX 64
#define JOBSPEC_LABEL_VALUE_MAX 256

/* Policy limits the engine does not impose, and defaults the parser fills. */
#define JOBSPEC_MAX_SECONDS (30.0 * 24 * 3600)  /* 30 days */
#define JOBSPEC_MAX_SEED 9007199254740992ULL    /* 2^53, exact in a double */
#define JOBSPEC_DEFAULT_LAMBDA2_REL 1e-4
#define JOBSPEC_DEFAULT_DITHER_LEVELS 1

/*
 * Where the job's workers run, one row each: X(enum, name, launcher):
 * inproc in the coordinator process, process (the default) in forked
 * worker processes over sockets, mpi as the ranks of an mpirun. The
 * launcher is the `const struct launcher` of coord/launch_NAME.c that
 * starts them (coord/launch.h); this floor only names it.
 */
#define JOBSPEC_BACKENDS(X)                                                   \
    X(JOBSPEC_BACKEND_INPROC, "inproc", launch_inproc)                        \
    X(JOBSPEC_BACKEND_PROCESS, "process", launch_process)                     \
    X(JOBSPEC_BACKEND_MPI, "mpi", launch_mpi)

enum jobspec_backend {
#define JOBSPEC_BACKEND_ENUM(e, name, launcher) e,
    JOBSPEC_BACKENDS(JOBSPEC_BACKEND_ENUM)
#undef JOBSPEC_BACKEND_ENUM
    JOBSPEC_BACKEND_COUNT
};

/* "inproc", "process", "mpi"; NULL if out of range. */
const char *jobspec_backend_name(enum jobspec_backend b);
int jobspec_backend_from_name(const char *name, enum jobspec_backend *out);

struct jobspec_label {
    char key[JOBSPEC_LABEL_KEY_MAX + 1];       /* 1..64 of [A-Za-z0-9_.-] */
    char value[JOBSPEC_LABEL_VALUE_MAX + 1];   /* 0..256 bytes, no NUL */
};

/*
 * A parsed job spec. Plain data that owns no memory, so it may be copied.
 * After a successful parse every default is applied: lambda2_rel is 1e-4
 * when neither lambda2 nor lambda2_rel was given, a dither compressor
 * without s has s = 1, and exactly one of compressor.k and k_frac is set
 * for topk, randk and randk-unbiased.
 */
struct jobspec {
    ec_job job;
    char name[JOBSPEC_NAME_MAX + 1];           /* "" when not given */
    unsigned nlabels;
    struct jobspec_label labels[JOBSPEC_LABELS_MAX];   /* sorted by key */
    enum jobspec_backend backend;              /* default process */
    uint32_t procs;                            /* processes (MPI ranks)
                                                  hosting the workers,
                                                  1..workers; 0: unset */
};

/*
 * Every problem found, not just the first, so the REST API can answer 422
 * with one entry per bad field. field is a JSON path ("workers",
 * "compressor.k", "labels.team"); "" means the document as a whole (not
 * JSON, not an object). detail is a sentence naming the allowed range or
 * values. Both are valid UTF-8, so they can go into JSON as they are.
 */
#define JOBSPEC_MAX_ERRORS 32

struct jobspec_error {
    char field[96];
    char detail[384];               /* the unknown-key sentence lists every key */
};

struct jobspec_errors {
    unsigned count;                 /* entries in item[] */
    unsigned dropped;               /* problems found beyond the first 32 */
    struct jobspec_error item[JOBSPEC_MAX_ERRORS];
};

/* Resets spec to the defaults (dataset empty). Never fails. */
void jobspec_clear(struct jobspec *spec);

/*
 * Parses len bytes of JSON text (no terminating NUL needed) into *out.
 * Returns 0; EC_EPARSE when the text is not JSON (a syntax error, a
 * duplicate key, a number out of range, nesting too deep), with one error
 * under field "" giving Jansson's line and column; EC_EINVAL when it is JSON
 * but not a valid spec; EC_ENOMEM. On failure *out is reset to the defaults.
 * errs may be NULL.
 */
int jobspec_parse(const char *text, size_t len, struct jobspec *out,
                  struct jobspec_errors *errs);

/*
 * The same for a document already parsed (it should have been loaded with
 * JSON_REJECT_DUPLICATES; JSON_ALLOW_NUL is fine, NULs are checked here).
 * Returns 0 or EC_EINVAL. doc is borrowed and not modified.
 */
int jobspec_from_json(json_t *doc, struct jobspec *out,
                      struct jobspec_errors *errs);

/*
 * The canonical form of a spec produced by the parser: every key that is
 * set, in a fixed order; what is unset is absent (no name, lambda2 when
 * lambda2_rel is used, p and step_size left to the algorithm, ...), as the
 * JobSpec schema has no nulls; compressor is always an object {type, and
 * those of k, k_frac, s it has}. Parsing it gives back an equal spec. New
 * reference, or NULL when out of memory.
 */
json_t *jobspec_to_json(const struct jobspec *spec);

/*
 * All errors as one message for the command line, one "field: detail" per
 * line, into buf (always NUL-terminated when len > 0). Returns the length
 * the whole message needs, as snprintf does.
 */
size_t jobspec_errors_format(const struct jobspec_errors *errs, char *buf,
                             size_t len);

#endif
