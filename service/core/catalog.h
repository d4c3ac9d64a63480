/*
 * The catalog: the LibSVM files directly inside the data directory, with
 * their stats (rows, d, nnz, labels, size, SHA-256), and uploads written
 * to a temporary file there, validated in a child process (validator.h,
 * on the threads of the validation pool, validation.h) and renamed into
 * place atomically. The service never parses a dataset itself: a file
 * found in the directory is validated by the same child. Every file is
 * reached through a descriptor of the directory (openat, O_NOFOLLOW) and a
 * name checked by datadir_name_check (format/datadir.h, which also has the
 * versions folder), so nothing it does reaches outside the data directory.
 * It knows nothing of HTTP: the datasets routes (service/api) encode what it returns.
 */
#ifndef ECOPT_CATALOG_H
#define ECOPT_CATALOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "datadir.h"
#include "store.h"

struct app;

/* The upload limit when the configuration gives none (max_upload). */
#define CATALOG_MAX_UPLOAD_DEFAULT ((size_t)256 << 20)
/* Uploads in progress are ".upload-" and 12 letters; never a valid name. */
#define CATALOG_TEMP_PREFIX ".upload-"
/*
 * What each file was while it stays the same file, so that a listing does
 * not hash the whole directory every time. Each server (struct app) has
 * its own.
 */
struct catalog;
/* With its validation pool (validation.h; 0: the defaults). NULL when out
   of memory. */
struct catalog *catalog_new(unsigned validators, unsigned queue, unsigned per_token);
/* Stops the validation pool: every upload waiting or being validated is
   answered (503, not kept). Before the HTTP server stops. */
void catalog_stop(struct catalog *c);
void catalog_free(struct catalog *c);       /* NULL is a no-op */

/*
 * Removes the temporary files of uploads that were cut short by the
 * service stopping (a crash, SIGKILL). Call it at start, before serving,
 * when no upload can be in progress. Returns how many it removed, or -1
 * with errno when the directory cannot be read.
 */
int catalog_cleanup(const char *data_dir);

/* A dataset as listed: its stats, or the reader's refusal in error. */
struct catalog_item {
    struct store_dataset ds;    /* name, sha256 and bytes always */
    char *error;                /* the reader's message; NULL: ds has stats */
};
void catalog_item_clear(struct catalog_item *it);
void catalog_items_free(struct catalog_item *items, size_t n);

/*
 * Who sees a dataset: its owner and the administrators; every token when
 * it is shared, or when it is a file found in the data directory (owner
 * NULL, the administrators'). viewer is the asking token's name, NULL
 * with auth off (who sees all). Another's private dataset is, to the
 * asker, no dataset at all (ENOENT, 404).
 */
int catalog_visible(const struct store_dataset *ds, const char *viewer, int admin);

/*
 * Every regular file with a valid name that viewer sees (catalog_visible),
 * by name, into *items (n of them;
 * the caller frees them with catalog_items_free). A file that cannot be
 * read at all is listed with that as its error. 0, or -1 with errno when
 * the directory cannot be read (ENOMEM too), or with *store_failed set and
 * e filled when the store could not be read.
 */
int catalog_list(struct app *a, const char *viewer, int admin,
                 struct catalog_item **items, size_t *n, int *store_failed,
                 struct store_err *e);

/*
 * One dataset as viewer sees it: 0 with *it filled (the caller clears
 * it), or -1 with errno (ENOENT: no such dataset, or another's private
 * one), or with *store_failed set and e filled.
 */
int catalog_get(struct app *a, const char *name, const char *viewer, int admin,
                struct catalog_item *it, int *store_failed, struct store_err *e);

/*
 * A dataset as a job needs it: its rows, dimension and SHA-256, and the
 * stat of the file those belong to, so that a later reader can tell
 * whether it reads the same file. -1 with a sentence in err when there is
 * no such dataset that viewer sees (NULL: a job already admitted) or the
 * reader refuses it. The version is kept in the versions folder, and
 * spared by the collector until catalog_unpin (or a grace of minutes):
 * call that once the job's row refers to it, or will not.
 */
struct catalog_file {
    int64_t rows, d, nnz;
    char sha256[65];
    struct stat st;
};

int catalog_file(struct app *a, const char *name, const char *viewer, int admin,
                 struct catalog_file *out, char *err, size_t errlen);
void catalog_unpin(struct app *a, const char *sha256);

/*
 * Uploads. catalog_upload_begin checks what can be checked before a byte
 * of the body (the name, whether it exists and whose it is, the directory,
 * and the validation pool's admission: too many uploads in progress is
 * CATALOG_ETHROTTLED) and creates the temporary file; catalog_upload_write
 * takes the body piece by piece; catalog_upload_finish queues the file for
 * the validation pool, which validates it in a child process, then checks
 * the owner again, stores the row and renames the file into place as one
 * step; catalog_upload_abort drops it. finish and abort free the upload.
 */
enum catalog_fail {
    CATALOG_OK = 0,
    CATALOG_EIO,            /* err_no says what; ENOSPC, EDQUOT, EFBIG: full */
    CATALOG_ENOMEM,
    CATALOG_EEXISTS,        /* the name is taken and replace was not asked */
    CATALOG_ENOTREG,        /* the name is taken by something not a file */
    CATALOG_EINVALID,       /* the reader refused the file: detail says why */
    CATALOG_EBUSY,          /* the validator could not run, or the server
                               is stopping: try later */
    CATALOG_EFORBIDDEN,     /* the name is another's: detail is the owner
                               ("" for the administrators') */
    CATALOG_ELIMIT,         /* over a validator limit: detail says which */
    CATALOG_ETHROTTLED,     /* too many uploads in progress: err_no is the
                               status (429: the token's, 503: the server's),
                               what the limit's name, value its value */
    CATALOG_ENOTFOUND,      /* no such dataset the asker sees */
    CATALOG_EINUSE,         /* queued or running jobs use it: value many */
    CATALOG_EQUOTA,         /* over a token's quota: what names it, value
                               is its value, detail the sentence */
    CATALOG_EDISK           /* less free disk than min_free_disk: value is
                               the floor in MB, detail the sentence */
};

struct catalog_failure {
    enum catalog_fail kind;
    int err_no;
    const char *what;           /* static: what could not be done */
    uint64_t value;             /* the limit's value (CATALOG_ETHROTTLED,
                                   EQUOTA, EDISK), or jobs (EINUSE) */
    char detail[sizeof ((struct store_err *)0)->msg + DATADIR_NAME_MAX];
};

struct catalog_upload;

/* owner is the uploading token's name (NULL with auth off: as an admin);
   only the name's owner or an admin may replace it (CATALOG_EFORBIDDEN).
   shared is 1 or 0 as asked, -1 when not: a new name is then private, a
   replaced one keeps its sharing. */
struct catalog_upload *catalog_upload_begin(struct app *a, const char *name,
                                            int replace, int shared, const char *owner,
                                            int admin, struct catalog_failure *f);
int catalog_upload_write(struct catalog_upload *up, const char *data,
                         size_t len);
/*
 * Returns at once; done(arg, rc, it, replaced, f) is called exactly once,
 * on a pool thread (or on the caller's when the pool is stopping): rc 0
 * with *it filled (done may not keep it) and replaced set when it took an
 * existing name, or -1 with f filled.
 */
typedef void (*catalog_upload_done_fn)(void *arg, int rc, const struct catalog_item *it,
                                       int replaced, const struct catalog_failure *f);
void catalog_upload_finish(struct catalog_upload *up, catalog_upload_done_fn done,
                           void *arg);
void catalog_upload_abort(struct catalog_upload *up);
/* The upload limit: --max-upload, ECOPT_MAX_UPLOAD. */
size_t catalog_upload_limit(const struct app *a);

/*
 * Managing a name (catalog_manage.c). Only its owner or an administrator
 * may delete it or change its sharing; to others it is CATALOG_ENOTFOUND
 * when private, CATALOG_EFORBIDDEN when shared (viewer NULL: auth off).
 *
 * catalog_delete removes the name and its row, refused (CATALOG_EINUSE)
 * while queued or running jobs name it, then collects the versions
 * nothing refers to any more. 0, or -1 with f filled.
 */
int catalog_delete(struct app *a, const char *name, const char *viewer, int admin,
                   struct catalog_failure *f);
/* Sets the name's sharing; 0 with *it filled as catalog_get (the caller
   clears it), or -1 with f filled. */
int catalog_set_shared(struct app *a, const char *name, const char *viewer, int admin,
                       int shared, struct catalog_item *it, struct catalog_failure *f);
/*
 * Quotas: the names and bytes of a token's datasets (--quota-dataset-names,
 * --quota-dataset-bytes) are checked when an upload begins and again when
 * it moves into place (CATALOG_EQUOTA); the free disk (--min-free-disk)
 * when an upload or a job begins. catalog_disk_check is 0, or -1 with f
 * filled (CATALOG_EDISK) when the data directory's or the database's file
 * system has less free space than the floor.
 */
int catalog_disk_check(struct app *a, struct catalog_failure *f);

#endif
