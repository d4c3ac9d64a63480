/*
 * What the catalog's files share and nothing else sees: the catalog's
 * memo and locks, and the helpers more than one of them calls. catalog.c
 * has the memo, a file's stats, listings and lookups; catalog_versions.c
 * the versions folder and its garbage collection; catalog_upload.c
 * uploads; catalog_manage.c deleting, sharing and the tenants' quotas.
 */
#ifndef ECOPT_CATALOG_INT_H
#define ECOPT_CATALOG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "catalog.h"
#include "sha256.h"
#include "validation.h"
#include "validator.h"

/*
 * The datasets table keeps uploaded_at NOT NULL, and a put of 0 means
 * "now"; a file found in the directory rather than uploaded is stored with
 * this instead, and shown as uploaded_at null.
 */
#define NOT_UPLOADED (-1)

/* A submit's version is spared by the collector this long before its
   job's row refers to it (the row is written milliseconds later). */
#define CATALOG_PIN_GRACE 120.0
#define CATALOG_PINS 256

/*
 * Hashing every file at every listing would read the whole directory each
 * time. While a file keeps its device, inode, size, mtime and ctime (which
 * no one can set back) it is the same file, and what was found last time
 * holds. The memo is the server's; the store keeps the stats across
 * restarts, checked against the file's SHA-256.
 */
struct memo_entry {
    char name[DATADIR_NAME_MAX + 1];
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
    char sha256[SHA256_HEX_SIZE];
    int64_t rows, d, nnz;
    char *labels;               /* when the reader took it */
    char *error;                /* when it did not */
    unsigned long gen;          /* the last listing that saw it */
};

struct catalog {
    pthread_mutex_t mu;
    struct memo_entry *e;
    size_t n, cap;
    unsigned long gen;
    /* Held from the owner check of a name to its row and file agreeing:
       an upload's move, and the stats of a file found in the directory. */
    pthread_mutex_t move;
    struct vpool *pool;         /* where uploads are validated */
    /* The versions submits took last (catalog_file), under mu: until a
       job's row refers to one, the collector spares it CATALOG_PIN_GRACE
       seconds. */
    struct catalog_pin {
        char sha256[SHA256_HEX_SIZE];
        double at;              /* CLOCK_MONOTONIC seconds */
    } pins[CATALOG_PINS];
    size_t pin_next;
};

/* ---- catalog.c ----------------------------------------------------------- */

int64_t catalog__wall_ms(void);
/* The data directory, O_DIRECTORY: -1 with errno. */
int catalog__open_data_dir(const struct app *a);
/* What the file open read-only as fd is, by the validator in a child. */
int catalog__validate_fd(struct app *a, int fd, const char *name,
                         const atomic_int *cancel, struct validator_result *v);
/* The stats of a validator's verdict into ds. */
int catalog__stats_of(const struct validator_result *v, struct store_dataset *ds);
void catalog__memo_put(struct catalog *memo, const char *name, const struct stat *st,
                       unsigned long gen, const struct catalog_item *fs);
/* Fills f; returns -1. */
int catalog__fail(struct catalog_failure *f, enum catalog_fail kind, int err_no,
                  const char *what);

/* ---- catalog_versions.c -------------------------------------------------- */

/* Marks sha as just taken by a submit. */
void catalog__pin(struct catalog *c, const char *sha);
void catalog__keep_version(int dirfd, int fd, const char *sha);
/* Removes the versions nothing refers to; the move lock held. How many. */
int catalog__gc_versions(struct app *a, int dirfd);

/* ---- catalog_manage.c ---------------------------------------------------- */

/*
 * Whether owner may hold one more name (new: the upload takes a name it
 * did not hold) of bytes, replacing old_bytes of its own: 0, or -1 with f
 * filled (CATALOG_EQUOTA). st is the store to read (the writer under
 * wlock, or a reader); owner "" (auth off) has no quota.
 */
int catalog__quota_check(struct app *a, struct store *st, const char *owner, int new_name,
                         int64_t bytes, int64_t old_bytes, struct catalog_failure *f);

#endif
