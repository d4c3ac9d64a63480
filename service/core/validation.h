/*
 * The validation pool: uploads are validated (and moved into place) on
 * threads of their own, never on the HTTP threads, with at most
 * `validators` validator processes at once, whoever asks. Uploads are
 * admitted on their headers: at most `queue` in progress at once (their
 * body arriving, waiting for a validator or being validated), and at most
 * `per_token` of one token; the excess is refused at once, naming the
 * limit, before a byte of the body is read. So the memory validation can
 * take is validators x the validator's address-space limit, and the disk
 * the temporary files can take is queue x the upload size limit.
 */
#ifndef ECOPT_VALIDATION_H
#define ECOPT_VALIDATION_H

#include <stdatomic.h>

/* Defaults (ecopt serve --upload-validators, --upload-queue,
   --upload-per-token). */
#define VALIDATION_VALIDATORS_DEFAULT 2u
#define VALIDATION_QUEUE_DEFAULT 8u
#define VALIDATION_PER_TOKEN_DEFAULT 2u

struct vpool;

/* 0 for a default. NULL when out of memory or threads cannot start. */
struct vpool *vpool_new(unsigned validators, unsigned queue, unsigned per_token);

/*
 * Stops: running validators are told to stop (cancel is set), queued work
 * still runs, with cancel set, so that each upload answers; returns when
 * every thread is done. Later submits fail. NULL is a no-op.
 */
void vpool_stop(struct vpool *p);
void vpool_free(struct vpool *p);   /* after vpool_stop; NULL is a no-op */

/*
 * Admits one upload of token ("" for none): NULL, or the name of the
 * limit it is over ("upload_per_token": *status 429; "upload_queue": 503)
 * with that limit's value in *value. An admitted upload leaves once.
 */
const char *vpool_admit(struct vpool *p, const char *token, int *status,
                        unsigned *value);
void vpool_leave(struct vpool *p, const char *token);

/*
 * Runs fn(arg, cancel) on a pool thread holding a validator slot; cancel
 * becomes nonzero when the server stops. -1 when the pool is stopping (fn
 * is then not called).
 */
typedef void (*vpool_fn)(void *arg, const atomic_int *cancel);
int vpool_submit(struct vpool *p, vpool_fn fn, void *arg);

/* A validator slot for work that runs on its caller's thread (a file found
   in the data directory): waits for one. */
const atomic_int *vpool_slot_take(struct vpool *p);
void vpool_slot_give(struct vpool *p);

#endif
