/*
 * The catalog of catalog.h over the data directory: what each file is
 * (memoised while it stays the same file), listings with stats, one
 * dataset's stats, and what a job needs of a dataset. Uploads are in
 * catalog_upload.c, the versions folder in catalog_versions.c.
 */
#define _GNU_SOURCE
#include "catalog_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "app.h"

size_t catalog_upload_limit(const struct app *a)
{
    return a->cfg.max_upload ? a->cfg.max_upload
                             : CATALOG_MAX_UPLOAD_DEFAULT;
}

/* ---- small helpers ------------------------------------------------------- */

int64_t catalog__wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int catalog__open_data_dir(const struct app *a)
{
    return open(a->cfg.data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

/*
 * Opens name inside the directory for reading: a regular file, and never
 * through a symbolic link (which could point anywhere). O_NONBLOCK keeps
 * a FIFO swapped in meanwhile from blocking the open. -1 with errno,
 * ENOENT for anything that is not a regular file.
 */
static int open_dataset(int dirfd, const char *name, struct stat *st)
{
    int fd = openat(dirfd, name,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

    if (fd < 0) {
        if (errno == ELOOP)
            errno = ENOENT;
        return -1;
    }
    if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        close(fd);
        errno = ENOENT;
        return -1;
    }
    return fd;
}

/* The validator's limits, as the configuration sets them. */
static struct validator_limits limits_of(const struct app *a)
{
    struct validator_limits lim = {a->cfg.upload_max_bytes, a->cfg.upload_max_rows,
                                   a->cfg.upload_max_nnz, a->cfg.upload_max_d,
                                   a->cfg.upload_validator_mem,
                                   a->cfg.upload_validator_cpu};

    return lim;
}

/*
 * What the file open read-only as fd is, by the validator in a child
 * process of its own with the upload limits: the server never parses a
 * dataset itself. cancel is the pool's (the caller holds a validator
 * slot). 0 with v filled, -1 with v->error when it could not be run.
 */
int catalog__validate_fd(struct app *a, int fd, const char *name, const atomic_int *cancel,
                       struct validator_result *v)
{
    struct validator_limits lim = limits_of(a);

    return validator_run(a->cfg.exe, fd, name, a->cfg.worker_user, &lim, cancel, v);
}

static json_t *label_json(double v)
{
    if (!isfinite(v))
        return json_null();     /* a file of one label has no other */
    if (v == floor(v) && fabs(v) < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

int catalog__fail(struct catalog_failure *f, enum catalog_fail kind, int err_no,
                  const char *what)
{
    f->kind = kind;
    f->err_no = err_no;
    f->what = what;
    return -1;
}

/* ---- what a file is: its stats or the reader's refusal ------------------- */

void catalog_item_clear(struct catalog_item *it)
{
    store_dataset_clear(&it->ds);
    free(it->error);
    it->error = NULL;
}

void catalog_items_free(struct catalog_item *items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        catalog_item_clear(&items[i]);
    free(items);
}

int catalog__stats_of(const struct validator_result *v, struct store_dataset *ds)
{
    json_t *labels = json_pack("[oo]", label_json(v->label_neg),
                               label_json(v->label_pos));

    ds->rows = v->rows;
    ds->d = v->d;
    ds->nnz = v->nnz;
    ds->labels = labels ? json_dumps(labels, JSON_COMPACT) : NULL;
    json_decref(labels);
    return ds->labels ? 0 : -1;
}


/* ---- the catalog and its memo ------------------------------------------- */

struct catalog *catalog_new(unsigned validators, unsigned queue, unsigned per_token)
{
    struct catalog *c = calloc(1, sizeof *c);

    if (!c)
        return NULL;
    if (!(c->pool = vpool_new(validators, queue, per_token))) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->move, NULL);
    return c;
}

void catalog_stop(struct catalog *c)
{
    if (c)
        vpool_stop(c->pool);
}

void catalog_free(struct catalog *c)
{
    if (!c)
        return;
    vpool_stop(c->pool);
    vpool_free(c->pool);
    pthread_mutex_destroy(&c->move);
    for (size_t i = 0; i < c->n; i++) {
        free(c->e[i].labels);
        free(c->e[i].error);
    }
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static int same_file(const struct memo_entry *m, const struct stat *st)
{
    return m->dev == st->st_dev && m->ino == st->st_ino &&
           m->size == st->st_size && same_time(&m->mtime, &st->st_mtim) &&
           same_time(&m->ctime, &st->st_ctim);
}

/* memo->mu held. */
static struct memo_entry *memo_find(struct catalog *memo, const char *name)
{
    for (size_t i = 0; i < memo->n; i++)
        if (strcmp(memo->e[i].name, name) == 0)
            return &memo->e[i];
    return NULL;
}

/* Fills out (name, sha256, bytes and stats or error) when st is the file
   the memo knows by that name. 0, or -1 when it does not. */
static int memo_get(struct catalog *memo, const char *name, const struct stat *st,
                    unsigned long gen, struct catalog_item *out)
{
    struct memo_entry *m;
    int rc = -1;

    pthread_mutex_lock(&memo->mu);
    if ((m = memo_find(memo, name)) && same_file(m, st)) {
        out->ds.name = strdup(name);
        memcpy(out->ds.sha256, m->sha256, sizeof m->sha256);
        out->ds.bytes = m->size;
        out->ds.rows = m->rows;
        out->ds.d = m->d;
        out->ds.nnz = m->nnz;
        out->ds.labels = m->labels ? strdup(m->labels) : NULL;
        out->error = m->error ? strdup(m->error) : NULL;
        if (gen > m->gen)
            m->gen = gen;
        rc = out->ds.name && (out->ds.labels || out->error) ? 0 : -1;
        if (rc < 0)
            catalog_item_clear(out);
    }
    pthread_mutex_unlock(&memo->mu);
    return rc;
}

void catalog__memo_put(struct catalog *memo, const char *name, const struct stat *st,
                     unsigned long gen, const struct catalog_item *fs)
{
    struct memo_entry *m, fresh = {0};

    snprintf(fresh.name, sizeof fresh.name, "%s", name);
    fresh.dev = st->st_dev;
    fresh.ino = st->st_ino;
    fresh.size = st->st_size;
    fresh.mtime = st->st_mtim;
    fresh.ctime = st->st_ctim;
    memcpy(fresh.sha256, fs->ds.sha256, sizeof fresh.sha256);
    fresh.rows = fs->ds.rows;
    fresh.d = fs->ds.d;
    fresh.nnz = fs->ds.nnz;
    fresh.labels = fs->ds.labels ? strdup(fs->ds.labels) : NULL;
    fresh.error = fs->error ? strdup(fs->error) : NULL;
    fresh.gen = gen;
    if (!fresh.labels && !fresh.error)
        return;                 /* out of memory: it is only a memo */
    pthread_mutex_lock(&memo->mu);
    if ((m = memo_find(memo, name))) {
        free(m->labels);
        free(m->error);
        *m = fresh;
    } else {
        if (memo->n == memo->cap) {
            size_t cap = memo->cap ? 2 * memo->cap : 32;
            struct memo_entry *e = realloc(memo->e, cap * sizeof *e);

            if (e) {
                memo->e = e;
                memo->cap = cap;
            }
        }
        if (memo->n < memo->cap) {
            memo->e[memo->n++] = fresh;
        } else {
            free(fresh.labels);
            free(fresh.error);
        }
    }
    pthread_mutex_unlock(&memo->mu);
}

static unsigned long memo_new_gen(struct catalog *memo)
{
    unsigned long gen;

    pthread_mutex_lock(&memo->mu);
    gen = ++memo->gen;
    pthread_mutex_unlock(&memo->mu);
    return gen;
}

/* After a listing: files it did not see are gone from the directory. */
static void memo_sweep(struct catalog *memo, unsigned long gen)
{
    pthread_mutex_lock(&memo->mu);
    for (size_t i = 0; i < memo->n;) {
        if (memo->e[i].gen < gen) {
            free(memo->e[i].labels);
            free(memo->e[i].error);
            memo->e[i] = memo->e[--memo->n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&memo->mu);
}

/* ---- one file's stats ---------------------------------------------------- */

static int row_matches(const struct store_dataset *row,
                       const struct store_dataset *ds)
{
    return row && row->name && row->bytes == ds->bytes &&
           strcmp(row->sha256, ds->sha256) == 0;
}

/*
 * Stores the stats of a file found in the directory (st: the file that was
 * read), unless the row has meanwhile become this very file (an upload
 * that just finished keeps its uploaded_at), or the name no longer is
 * that file (an upload moved it meanwhile: its row is the true one). A
 * name keeps its owner whatever version it holds: a row for another
 * version (a crash between an upload's row and its rename) lends the file
 * its owner. fs->ds.uploaded_at and owner are then the row's.
 */
static void store_found(struct app *a, int dirfd, const struct stat *st,
                        struct catalog_item *fs)
{
    struct store_dataset now = {0};
    struct store_err e = {0};
    struct stat cur;
    int found;

    pthread_mutex_lock(&a->catalog->move);
    pthread_mutex_lock(&a->wlock);
    found = store_dataset_get(a->writer, fs->ds.name, &now, &e) == 0;
    if (found && now.owner) {
        free(fs->ds.owner);
        fs->ds.owner = now.owner;
        now.owner = NULL;
    }
    /* A name keeps its sharing with its owner; a file found with no row is
       the administrators', seen by all. */
    fs->ds.shared = found ? now.shared : 1;
    if (found && row_matches(&now, &fs->ds)) {
        fs->ds.uploaded_at = now.uploaded_at;
    } else {
        fs->ds.uploaded_at = NOT_UPLOADED;
        if (fstatat(dirfd, fs->ds.name, &cur, AT_SYMLINK_NOFOLLOW) == 0 &&
            cur.st_dev == st->st_dev && cur.st_ino == st->st_ino &&
            store_dataset_put(a->writer, &fs->ds, &e) < 0)
            fprintf(stderr, "datasets: the stats of %s were not stored: %s\n",
                    fs->ds.name, e.msg);
    }
    pthread_mutex_unlock(&a->wlock);
    pthread_mutex_unlock(&a->catalog->move);
    store_dataset_clear(&now);
}

/*
 * What the file `name` is: from the memo when it is the same file as last
 * time, else hashed, and then taken from the store's row when that row has
 * the same size and SHA-256, else read by the engine's reader. The stats
 * are stored whenever the row does not describe the file. row is the
 * store's row for name, or NULL. 0, or -1 with errno (ENOENT: no such
 * dataset).
 */
static int file_stats(struct app *a, int dirfd, const char *name,
                      const struct store_dataset *row, unsigned long gen,
                      struct catalog_item *out, struct stat *st_out, int keep)
{
    struct stat st, after;
    struct validator_result v;
    int fd, err, memo = 1;

    memset(out, 0, sizeof *out);
    if ((fd = open_dataset(dirfd, name, &st)) < 0)
        return -1;
    if (st_out)
        *st_out = st;
    if (memo_get(a->catalog, name, &st, gen, out) < 0) {
        if (!(out->ds.name = strdup(name)) || datadir_hash_fd(fd, out->ds.sha256) < 0)
            goto fail;
        out->ds.bytes = st.st_size;
        if (row_matches(row, &out->ds)) {
            out->ds.rows = row->rows;
            out->ds.d = row->d;
            out->ds.nnz = row->nnz;
            if (!(out->ds.labels = strdup(row->labels)))
                goto fail;
        } else {
            const atomic_int *cancel = vpool_slot_take(a->catalog->pool);
            int vr = catalog__validate_fd(a, fd, name, cancel, &v);

            vpool_slot_give(a->catalog->pool);
            /* A validator that could not run, or ran out of memory, says
               nothing about the file: not memoised. */
            memo = vr == 0 && !(v.limit && strcmp(v.limit, "upload_validator_mem") == 0);
            err = vr < 0 || v.status ? !(out->error = strdup(vr < 0 ? "the file could "
                                                             "not be validated now" : v.error))
                                     : catalog__stats_of(&v, &out->ds) < 0;
            if (err) {
                errno = ENOMEM;
                goto fail;
            }
        }
        /* Only a file that did not change while it was read is memoised. */
        if (memo && fstat(fd, &after) == 0 &&
            after.st_size == st.st_size &&
            same_time(&after.st_mtim, &st.st_mtim) &&
            same_time(&after.st_ctim, &st.st_ctim))
            catalog__memo_put(a->catalog, name, &st, gen, out);
    }
    if (keep && !out->error) {
        catalog__pin(a->catalog, out->ds.sha256);
        catalog__keep_version(dirfd, fd, out->ds.sha256);
    }
    close(fd);
    if (row_matches(row, &out->ds)) {
        out->ds.uploaded_at = row->uploaded_at;
        out->ds.shared = row->shared;
        if (row->owner && !(out->ds.owner = strdup(row->owner))) {
            catalog_item_clear(out);
            errno = ENOMEM;
            return -1;
        }
    } else if (!out->error) {
        store_found(a, dirfd, &st, out);
    }
    return 0;
fail:
    err = errno;
    close(fd);
    catalog_item_clear(out);
    errno = err;
    return -1;
}

/* ---- listings and lookups ------------------------------------------------ */

int catalog_visible(const struct store_dataset *ds, const char *viewer, int admin)
{
    return !viewer || admin || !ds->owner || ds->shared ||
           strcmp(ds->owner, viewer) == 0;
}

static int by_name(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The valid names of the directory's entries, sorted. */
static int list_names(int dirfd, char ***out, size_t *n)
{
    int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);     /* dup() would drop it */
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *de;
    char **names = NULL;
    size_t count = 0, cap = 0;

    *out = NULL;
    *n = 0;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    while ((errno = 0, de = readdir(dir))) {
        if (datadir_name_check(de->d_name) ||
            (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
            continue;
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char **grown = realloc(names, ncap * sizeof *names);

            if (!grown)
                goto oom;
            names = grown;
            cap = ncap;
        }
        if (!(names[count] = strdup(de->d_name)))
            goto oom;
        count++;
    }
    if (errno) {
        int err = errno;

        closedir(dir);
        free_names(names, count);
        errno = err;
        return -1;
    }
    closedir(dir);
    qsort(names, count, sizeof *names, by_name);
    *out = names;
    *n = count;
    return 0;
oom:
    closedir(dir);
    free_names(names, count);
    errno = ENOMEM;
    return -1;
}

static const struct store_dataset *find_row(const struct store_dataset *rows,
                                            size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

int catalog_list(struct app *a, const char *viewer, int admin,
                 struct catalog_item **items, size_t *n, int *store_failed,
                 struct store_err *e)
{
    struct store_dataset *rows = NULL;
    struct catalog_item *out = NULL;
    struct store *st;
    char **names = NULL;
    size_t nrows = 0, nnames = 0, count = 0;
    unsigned long gen;
    int dirfd, rc = -1, err = 0;

    *items = NULL;
    *n = 0;
    *store_failed = 0;
    if ((dirfd = catalog__open_data_dir(a)) < 0)
        return -1;
    if (list_names(dirfd, &names, &nnames) < 0) {
        err = errno;
        goto out;
    }
    st = app_reader(a);
    rc = store_dataset_list(st, &rows, &nrows, e);
    app_reader_done(a, st);
    if (rc < 0) {
        *store_failed = 1;
        goto out;
    }
    rc = -1;
    if (nnames && !(out = calloc(nnames, sizeof *out))) {
        err = ENOMEM;
        goto out;
    }
    gen = memo_new_gen(a->catalog);
    for (size_t i = 0; i < nnames; i++) {
        struct catalog_item *it = &out[count];

        if (file_stats(a, dirfd, names[i], find_row(rows, nrows, names[i]),
                       gen, it, NULL, 0) < 0) {
            if (errno == ENOENT)
                continue;       /* gone since the directory was read */
            memset(it, 0, sizeof *it);
            if (asprintf(&it->error, "the file cannot be read: %s",
                         strerror(errno)) < 0)
                it->error = NULL;
            if (!(it->ds.name = strdup(names[i])) || !it->error) {
                catalog_item_clear(it);
                err = ENOMEM;
                catalog_items_free(out, count);
                out = NULL;
                count = 0;
                goto out;
            }
            it->ds.bytes = -1;      /* not known: the file was not read */
        }
        if (!catalog_visible(&it->ds, viewer, admin)) {
            catalog_item_clear(it);
            continue;
        }
        count++;
    }
    memo_sweep(a->catalog, gen);
    *items = out;
    *n = count;
    rc = 0;
out:
    store_datasets_free(rows, nrows);
    free_names(names, nnames);
    close(dirfd);
    if (rc < 0 && err)
        errno = err;
    return rc;
}

int catalog_get(struct app *a, const char *name, const char *viewer, int admin,
                struct catalog_item *it, int *store_failed, struct store_err *e)
{
    struct store_dataset row = {0};
    struct store *st;
    int dirfd, rc, found, err;

    *store_failed = 0;
    memset(it, 0, sizeof *it);
    if (datadir_name_check(name)) {
        errno = ENOENT;
        return -1;
    }
    if ((dirfd = catalog__open_data_dir(a)) < 0)
        return -1;
    st = app_reader(a);
    rc = store_dataset_get(st, name, &row, e);
    app_reader_done(a, st);
    if (rc < 0 && rc != STORE_ENOTFOUND) {
        *store_failed = 1;
        close(dirfd);
        return -1;
    }
    found = rc == 0;
    rc = file_stats(a, dirfd, name, found ? &row : NULL, 0, it, NULL, 0);
    err = errno;
    if (rc == 0 && !catalog_visible(&it->ds, viewer, admin)) {
        catalog_item_clear(it);     /* another's private dataset: none */
        rc = -1;
        err = ENOENT;
    }
    store_dataset_clear(&row);
    close(dirfd);
    errno = err;
    return rc;
}

/* The row of name and file_stats of its file as viewer sees it, keeping
   its version. 0, or -1 with errno (ENOENT: none viewer sees). */
static int file_kept(struct app *a, int dirfd, const char *name, const char *viewer,
                     int admin, struct catalog_item *fs, struct stat *st_out)
{
    struct store_dataset row = {0};
    struct store_err e = {0};
    struct store *st = app_reader(a);
    int rc, found, err;

    rc = store_dataset_get(st, name, &row, &e);
    app_reader_done(a, st);
    found = rc == 0;
    /* Another's private dataset is no dataset: not even its version is
       kept for the asker. */
    if (found && !catalog_visible(&row, viewer, admin)) {
        rc = -1;
        errno = ENOENT;
    } else {
        rc = file_stats(a, dirfd, name, found ? &row : NULL, 0, fs, st_out, 1);
    }
    err = errno;
    store_dataset_clear(&row);
    errno = err;
    return rc;
}

/* Whether the versions folder exists and lacks sha: a replace collected
   it between the read and the keeping (its inode had no name left). */
static int version_lost(int dirfd, const char *sha)
{
    int vfd = openat(dirfd, DATADIR_VERSIONS,
                     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int lost;

    if (vfd < 0)
        return 0;
    lost = faccessat(vfd, sha, F_OK, AT_SYMLINK_NOFOLLOW) != 0;
    close(vfd);
    return lost;
}

int catalog_file(struct app *a, const char *name, const char *viewer, int admin,
                 struct catalog_file *out, char *err, size_t errlen)
{
    struct catalog_item fs;
    int dirfd, rc = -1;

    if ((dirfd = catalog__open_data_dir(a)) < 0) {
        snprintf(err, errlen, "the data directory cannot be read: %s", strerror(errno));
        return -1;
    }
    /* A version lost to a replace is read again: the job then runs on the
       name's version now. */
    for (int attempt = 0; attempt < 3; attempt++) {
        if ((rc = file_kept(a, dirfd, name, viewer, admin, &fs, &out->st)) < 0 ||
            fs.error || !version_lost(dirfd, fs.ds.sha256))
            break;
        catalog_item_clear(&fs);
    }
    close(dirfd);
    if (rc < 0) {
        snprintf(err, errlen, errno == ENOENT ? "no dataset '%.100s' (GET /v1/datasets "
                 "lists them)" : "dataset '%.100s' cannot be read", name);
        return -1;
    }
    if (fs.error) {
        snprintf(err, errlen, "%s", fs.error);
        catalog_item_clear(&fs);
        return -1;
    }
    out->rows = fs.ds.rows;
    out->d = fs.ds.d;
    out->nnz = fs.ds.nnz;
    memcpy(out->sha256, fs.ds.sha256, sizeof out->sha256);
    catalog_item_clear(&fs);
    return 0;
}

int catalog_cleanup(const char *data_dir)
{
    DIR *dir = opendir(data_dir);
    struct dirent *de;
    int removed = 0;

    if (!dir)
        return -1;
    while ((de = readdir(dir)))
        if (strncmp(de->d_name, CATALOG_TEMP_PREFIX,
                    sizeof CATALOG_TEMP_PREFIX - 1) == 0 &&
            unlinkat(dirfd(dir), de->d_name, 0) == 0)
            removed++;
    closedir(dir);
    return removed;
}
