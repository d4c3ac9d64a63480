/*
 * Jobs as the application sees them: what the server's own rules refuse
 * in a parsed spec, a new job's row, submitting (with the queue quota and
 * idempotency keys), cancelling and deleting. The jobs routes (service/api)
 * decode requests into these calls and encode what they return.
 */
#ifndef ECOPT_JOBS_H
#define ECOPT_JOBS_H

#include "app.h"
#include "jobspec.h"
#include "queue.h"
#include "store.h"

/*
 * What a spec breaks: the field, a sentence, and for a server limit its
 * name and value. Every refusal of a spec, by any route, is one of these.
 */
struct spec_problem {
    char field[96];
    char detail[320];
    const char *limit;
    double value;
};

/* Fills sp and returns -1, for the caller to return. */
int spec_problem_set(struct spec_problem *sp, const char *field, const char *limit,
                     double value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* The server's rules beyond the spec's own: the dataset exists and fits
   the spec, and the server's limits. 0, or -1 with sp filled. version
   (may be NULL) gets the SHA-256 of the dataset's version now, which the
   job is to run on (catalog_file keeps it meanwhile). owner (admin: an
   administrator) must see the dataset (catalog_visible). */
int jobs_check_spec(struct app *a, const struct jobspec *spec, const char *owner,
                    int admin, struct spec_problem *sp, char version[65]);
/* The job's memory estimate (ecopt/memory.h) on this dataset against
   --max-job-memory: 0, or -1 with sp naming the estimate and the limit. */
struct catalog_file;
struct config;
int jobs_check_memory(const struct jobspec *spec, const struct catalog_file *df,
                      const struct config *cfg, struct spec_problem *sp);

/*
 * A new job's row from a parsed spec: its canonical text and labels are
 * malloc'd into *spec_text and *labels_text (the caller frees both, also
 * on failure), which in points into. -1 when out of memory.
 */
int jobs_row_new(const struct jobspec *spec, const char *owner, struct store_job_new *in,
                 char **spec_text, char **labels_text);

enum jobs_outcome {
    JOBS_CREATED,           /* a new job */
    JOBS_UPDATED,           /* jobs_relabel: the edit was made */
    JOBS_REPLAYED,          /* the job an earlier request with this key made */
    JOBS_QUEUE_FULL,        /* the owner has max_queued_per_token queued */
    JOBS_KEY_REUSED,        /* the key was used with another body */
    JOBS_STORE_FAILED,      /* e says why */
    JOBS_NO_MEMORY,
    JOBS_INVALID            /* jobs_retry: the spec no longer passes (sp) */
};

/*
 * Submits a checked spec for owner, with an Idempotency-Key or NULL, to
 * run on the dataset's version (jobs_check_spec's; NULL: unknown). On
 * JOBS_CREATED and JOBS_REPLAYED *job is the job (the caller clears it);
 * on JOBS_QUEUE_FULL *queued is how many the owner has queued.
 */
enum jobs_outcome jobs_submit(struct app *a, const struct jobspec *spec, const char *owner,
                              const char *version, const char *idempotency_key,
                              struct store_job *job,
                              long long *queued, struct store_err *e);

enum jobs_cancel_outcome {
    JOBS_CANCEL_REQUESTED,  /* running: its coordinator was told to stop */
    JOBS_CANCELLED,         /* queued: it ended now */
    JOBS_ALREADY_ENDED,     /* *job says how */
    JOBS_CANCEL_FAILED      /* e says why (STORE_ENOTFOUND: no such job) */
};

/* Cancels the job id that owner (NULL: anyone's) may see, for the token
   named who. *job is the job afterwards (the caller clears it). */
enum jobs_cancel_outcome jobs_cancel(struct app *a, const char *id, const char *owner,
                                     const char *who, struct store_job *job,
                                     struct store_err *e);

/* Deletes an ended job that owner (NULL: anyone's) may see, with its rows,
   cached pages, spec and log files. 0, or a STORE_* code with e filled. */
int jobs_delete(struct app *a, const char *id, const char *owner, struct store_err *e);

/*
 * The coordinator's log of the job id that owner (NULL: anyone's) may
 * see: its last max bytes into *text (malloc'd, the caller frees it),
 * *truncated set when the log was longer. 0; a STORE_* code with e filled
 * (STORE_ENOTFOUND: no such job, or it has no log yet).
 */
int jobs_log(struct app *a, const char *id, const char *owner, size_t max, char **text,
             size_t *len, int *truncated, struct store_err *e);

/*
 * Where every queued job stands and why it waits (queue.h; docs/api.md,
 * "Why a job waits"): *plan sorted by id for queue_find, *n of them
 * (free() it). 0, or < 0 with e filled (then *plan NULL).
 */
int jobs_queue(struct app *a, struct queue_place **plan, size_t *n, struct store_err *e);

/*
 * Submits an ended job (any final state, succeeded too: a rerun) again:
 * a new job of the same spec and owner, on its dataset's current version,
 * checked as any submission is, whose retry_of is the original's id.
 * Outcomes as for jobs_submit; JOBS_STORE_FAILED with STORE_ESTATE when
 * the job is queued or running, *job then the original.
 */
enum jobs_outcome jobs_retry(struct app *a, const char *id, const char *owner,
                             struct store_job *job, struct spec_problem *sp,
                             long long *queued, struct store_err *e);

/*
 * Applies a PATCH body to a job's spec document doc, in place: checks its
 * keys and shapes (0, or -1 with sp naming the field) and sets or deletes
 * the name and each label. What it sets is judged by jobspec_from_json
 * afterwards. No store, no server: the PATCH fuzz target calls it alone.
 */
int jobs_patch_doc(json_t *doc, json_t *patch, struct spec_problem *sp);

/*
 * Edits a job's name and labels after submit, in any state: patch is
 * {"name": string|null, "labels": {KEY: string|null}} (null deletes),
 * both optional, checked as a spec's are. On JOBS_UPDATED (the edit was
 * made) *job is the job after it; JOBS_INVALID with sp naming the field;
 * JOBS_STORE_FAILED with e (STORE_ENOTFOUND: no such job).
 */
enum jobs_outcome jobs_relabel(struct app *a, const char *id, const char *owner,
                               json_t *patch, struct store_job *job, struct spec_problem *sp,
                               struct store_err *e);

/* The job id that owner (NULL: anyone's) may see, from a reader. */
int jobs_get(struct app *a, const char *id, const char *owner, struct store_job *job,
             struct store_err *e);

#endif
