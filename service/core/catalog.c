/*
 * The catalog of catalog.h over the data directory: listings with stats,
 * one dataset's stats, what a job needs of a dataset, and uploads.
 */
#define _GNU_SOURCE
#include "catalog.h"

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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "app.h"
#include "validation.h"
#include "validator.h"

#define WRITE_BUF ((size_t)1 << 18)     /* an upload is written in these */
#define TEMP_LETTERS 12
#define TEMP_ATTEMPTS 16

/*
 * The datasets table keeps uploaded_at NOT NULL, and a put of 0 means
 * "now"; a file found in the directory rather than uploaded is stored with
 * this instead, and shown as uploaded_at null.
 */
#define NOT_UPLOADED (-1)

size_t catalog_upload_limit(const struct app *a)
{
    return a->cfg.max_upload ? a->cfg.max_upload
                             : CATALOG_MAX_UPLOAD_DEFAULT;
}

/* ---- small helpers ------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int open_data_dir(const struct app *a)
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

/*
 * Keeps the open file fd, whose SHA-256 is sha, as that version: a hard
 * link .versions/SHA to the very inode that was hashed (through
 * /proc/self/fd, so a name replaced meanwhile does not matter). A version
 * already kept stays as it is. Where it cannot be kept (a read-only data
 * directory), the job still runs on exactly that version or fails.
 */
static void keep_version(int dirfd, int fd, const char *sha)
{
    char proc[64];
    int vfd = datadir_versions_open(dirfd, 1);

    if (vfd < 0)
        return;
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (faccessat(vfd, sha, F_OK, AT_SYMLINK_NOFOLLOW) != 0 &&
        linkat(AT_FDCWD, proc, vfd, sha, AT_SYMLINK_FOLLOW) < 0 && errno != EEXIST &&
        errno != EROFS && errno != EACCES && errno != EPERM)
        fprintf(stderr, "datasets: version %.12s cannot be kept: %s\n", sha,
                strerror(errno));
    close(vfd);
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
static int validate_fd(struct app *a, int fd, const char *name, const atomic_int *cancel,
                       struct validator_result *v)
{
    struct validator_limits lim = limits_of(a);

    return validator_run(a->cfg.exe, fd, name, a->cfg.worker_user, &lim, cancel, v);
}

/* The stats of a validator's verdict into ds. */
static int stats_of(const struct validator_result *v, struct store_dataset *ds);

static json_t *label_json(double v)
{
    if (!isfinite(v))
        return json_null();     /* a file of one label has no other */
    if (v == floor(v) && fabs(v) < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
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

static int stats_of(const struct validator_result *v, struct store_dataset *ds)
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

/* ---- the memo: what each file was, while it stays the same file ---------- */

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
};

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

static void memo_put(struct catalog *memo, const char *name, const struct stat *st,
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
            int vr = validate_fd(a, fd, name, cancel, &v);

            vpool_slot_give(a->catalog->pool);
            /* A validator that could not run, or ran out of memory, says
               nothing about the file: not memoised. */
            memo = vr == 0 && !(v.limit && strcmp(v.limit, "upload_validator_mem") == 0);
            err = vr < 0 || v.status ? !(out->error = strdup(vr < 0 ? "the file could "
                                                             "not be validated now" : v.error))
                                     : stats_of(&v, &out->ds) < 0;
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
            memo_put(a->catalog, name, &st, gen, out);
    }
    if (keep && !out->error)
        keep_version(dirfd, fd, out->ds.sha256);
    close(fd);
    if (row_matches(row, &out->ds)) {
        out->ds.uploaded_at = row->uploaded_at;
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

int catalog_list(struct app *a, struct catalog_item **items, size_t *n,
                 int *store_failed, struct store_err *e)
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
    if ((dirfd = open_data_dir(a)) < 0)
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

int catalog_get(struct app *a, const char *name, struct catalog_item *it,
                int *store_failed, struct store_err *e)
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
    if ((dirfd = open_data_dir(a)) < 0)
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
    store_dataset_clear(&row);
    close(dirfd);
    errno = err;
    return rc;
}

int catalog_file(struct app *a, const char *name, struct catalog_file *out,
                 char *err, size_t errlen)
{
    struct store_dataset row = {0};
    struct store_err e = {0};
    struct catalog_item fs;
    struct store *st;
    int dirfd, rc, found;

    if ((dirfd = open_data_dir(a)) < 0) {
        snprintf(err, errlen, "the data directory cannot be read: %s", strerror(errno));
        return -1;
    }
    st = app_reader(a);
    rc = store_dataset_get(st, name, &row, &e);
    app_reader_done(a, st);
    found = rc == 0;
    rc = file_stats(a, dirfd, name, found ? &row : NULL, 0, &fs, &out->st, 1);
    store_dataset_clear(&row);
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

/* ---- uploads --------------------------------------------------------------- */

/*
 * One upload: the temporary file it goes to, its hash so far, and the
 * first write error. abort or end frees it and, unless it was renamed into
 * place, removes the temporary file.
 */
struct catalog_upload {
    struct app *app;
    int dirfd, fd;
    char tmp[sizeof CATALOG_TEMP_PREFIX + TEMP_LETTERS];  /* "" once renamed */
    char name[DATADIR_NAME_MAX + 1];
    char owner[64];             /* the uploader; "" with auth off */
    int replace, admin;
    int admitted;               /* counted by the validation pool */
    struct sha256 sha;
    uint64_t bytes;
    int werr;                   /* errno of the first failed write, or 0 */
    char *buf;
    size_t fill;
};

static void upload_free(struct catalog_upload *up)
{
    if (up->admitted)
        vpool_leave(up->app->catalog->pool, up->owner);
    if (up->fd >= 0)
        close(up->fd);
    if (up->tmp[0])
        unlinkat(up->dirfd, up->tmp, 0);
    if (up->dirfd >= 0)
        close(up->dirfd);
    free(up->buf);
    free(up);
}

/* Random letters for a temporary name; getrandom can only fail on kernels
   without it, where a clock and a counter are unique enough with O_EXCL. */
static void temp_letters(char *out, size_t n)
{
    static const char letters[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    static atomic_uint counter;
    unsigned char rnd[TEMP_LETTERS];

    if (getrandom(rnd, sizeof rnd, GRND_NONBLOCK) != (ssize_t)sizeof rnd) {
        struct timespec ts;
        uint64_t x;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^
            (uint64_t)atomic_fetch_add(&counter, 1) << 40 ^ (uint64_t)getpid();
        for (size_t i = 0; i < sizeof rnd; i++) {
            x = x * 6364136223846793005u + 1442695040888963407u;
            rnd[i] = (unsigned char)(x >> 56);
        }
    }
    for (size_t i = 0; i < n; i++)
        out[i] = letters[rnd[i % sizeof rnd] % (sizeof letters - 1)];
    out[n] = '\0';
}

/* The temporary file, created here and only here (O_EXCL), its mode the
   umask's. */
static int make_temp(struct catalog_upload *up)
{
    size_t pl = sizeof CATALOG_TEMP_PREFIX - 1;

    memcpy(up->tmp, CATALOG_TEMP_PREFIX, pl);
    for (int i = 0; i < TEMP_ATTEMPTS; i++) {
        temp_letters(up->tmp + pl, TEMP_LETTERS);
        up->fd = openat(up->dirfd, up->tmp,
                        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0666);
        if (up->fd >= 0)
            return 0;
        if (errno != EEXIST)
            break;
    }
    up->tmp[0] = '\0';
    return -1;
}

static int flush_buf(struct catalog_upload *up)
{
    for (size_t off = 0; off < up->fill;) {
        ssize_t n = write(up->fd, up->buf + off, up->fill - off);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            up->werr = n < 0 ? errno : EIO;
            /* Give the space back now: the upload has failed. */
            close(up->fd);
            up->fd = -1;
            unlinkat(up->dirfd, up->tmp, 0);
            up->tmp[0] = '\0';
            return -1;
        }
        off += (size_t)n;
    }
    up->fill = 0;
    return 0;
}

/*
 * The name, taken: atomically, and without replacing anything unless
 * asked. RENAME_NOREPLACE fails on an existing name; where the filesystem
 * lacks it, a hard link fails the same way.
 */
static int publish(struct catalog_upload *up)
{
    if (up->replace)
        return renameat(up->dirfd, up->tmp, up->dirfd, up->name);
    if (renameat2(up->dirfd, up->tmp, up->dirfd, up->name,
                  RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (linkat(up->dirfd, up->tmp, up->dirfd, up->name, 0) < 0)
        return -1;
    unlinkat(up->dirfd, up->tmp, 0);
    return 0;
}

static int fail(struct catalog_failure *f, enum catalog_fail kind, int err_no,
                const char *what)
{
    f->kind = kind;
    f->err_no = err_no;
    f->what = what;
    return -1;
}

/*
 * Whether the upload may move its name: a name no one has is free; one
 * taken belongs to the token that uploaded it (the store's row), and a
 * file with no uploader to the administrators. Admins may move any. st is
 * the store to read (the writer, under the move lock, when the move
 * follows); the row read is left in *row (the caller clears it).
 */
static int may_move(struct catalog_upload *up, struct store *st, struct store_dataset *row,
                    struct catalog_failure *f)
{
    struct store_err e = {0};
    int rc, ok;

    rc = store_dataset_get(st, up->name, row, &e);
    if (rc < 0 && rc != STORE_ENOTFOUND) {
        fail(f, CATALOG_EIO, EIO, "the dataset's owner cannot be read");
        return 0;
    }
    if (up->admin)
        return 1;
    ok = rc == 0 && row->owner && strcmp(row->owner, up->owner) == 0;
    if (!ok) {
        fail(f, CATALOG_EFORBIDDEN, EPERM, "the name is another's");
        snprintf(f->detail, sizeof f->detail, "%s", rc == 0 && row->owner ? row->owner : "");
    }
    return ok;
}

struct catalog_upload *catalog_upload_begin(struct app *a, const char *name,
                                            int replace, const char *owner,
                                            int admin, struct catalog_failure *f)
{
    struct catalog_upload *up;
    struct stat st;

    memset(f, 0, sizeof *f);
    if (!(up = calloc(1, sizeof *up))) {
        fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
        return NULL;
    }
    up->app = a;
    up->fd = -1;
    up->replace = replace;
    up->admin = admin || !owner;
    snprintf(up->name, sizeof up->name, "%s", name);
    snprintf(up->owner, sizeof up->owner, "%s", owner ? owner : "");
    sha256_init(&up->sha);
    if ((up->dirfd = open_data_dir(a)) < 0) {
        fail(f, CATALOG_EIO, errno, "the data directory cannot be opened");
        upload_free(up);
        return NULL;
    }
    /* Decided on the headers, so that a refused upload sends nothing. */
    if (fstatat(up->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(st.st_mode) || !up->replace)) {
        fail(f, S_ISREG(st.st_mode) ? CATALOG_EEXISTS : CATALOG_ENOTREG, EEXIST,
             "the name is taken");
        upload_free(up);
        return NULL;
    }
    if (fstatat(up->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        struct store_dataset row = {0};
        struct store *rd = app_reader(a);
        int ok = may_move(up, rd, &row, f);

        app_reader_done(a, rd);
        store_dataset_clear(&row);
        if (!ok) {
            upload_free(up);
            return NULL;
        }
    }
    /* Admitted last: a refusal above says what is wrong with the request. */
    {
        unsigned value = 0;
        int status = 0;
        const char *over = vpool_admit(a->catalog->pool, up->owner, &status, &value);

        if (over) {
            fail(f, CATALOG_ETHROTTLED, status, over);
            snprintf(f->detail, sizeof f->detail, status == 429
                     ? "%u uploads of this token are in progress, the most one token "
                       "may have (%s); try again when one has finished"
                     : "%u uploads are in progress, the most the server takes at once "
                       "(%s); try again later", value, over);
            f->value = value;
            upload_free(up);
            return NULL;
        }
        up->admitted = 1;
    }
    if (!(up->buf = malloc(WRITE_BUF))) {
        fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
        upload_free(up);
        return NULL;
    }
    if (make_temp(up) < 0) {
        fail(f, CATALOG_EIO, errno, "the upload's temporary file cannot be created");
        upload_free(up);
        return NULL;
    }
    return up;
}

int catalog_upload_write(struct catalog_upload *up, const char *data, size_t len)
{
    sha256_update(&up->sha, data, len);
    up->bytes += len;
    while (len) {
        size_t k = WRITE_BUF - up->fill < len ? WRITE_BUF - up->fill : len;

        memcpy(up->buf + up->fill, data, k);
        up->fill += k, data += k, len -= k;
        if (up->fill == WRITE_BUF && flush_buf(up) < 0)
            return -1;
    }
    return 0;
}

void catalog_upload_abort(struct catalog_upload *up)
{
    upload_free(up);
}

/*
 * The move, as one step under the catalog's move lock: the owner check on
 * the row as it is now, the new version kept, the row written, then the
 * name renamed to the new file (a failed rename puts the old row back).
 * Every upload's move, and every row a listing writes for a file it
 * found, holds the lock, so no other move comes between the check and
 * the rename, and the row and the file end in step. The row goes first:
 * a crash before the rename leaves a row for a version the name does not
 * hold, which the next look at the name puts right, keeping the owner.
 */
static int move_into_place(struct catalog_upload *up, struct catalog_item *it,
                           int *existed, struct catalog_failure *f)
{
    struct app *a = up->app;
    struct store_dataset old = {0};
    struct store_err e = {0};
    struct stat st;
    int rc = -1, had_row, vfd;

    pthread_mutex_lock(&a->catalog->move);
    *existed = fstatat(up->dirfd, up->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (*existed && !up->replace) {
        rc = fail(f, S_ISREG(st.st_mode) ? CATALOG_EEXISTS : CATALOG_ENOTREG, EEXIST,
                  "the name is taken");
        goto out;
    }
    pthread_mutex_lock(&a->wlock);
    if (*existed) {
        if (!may_move(up, a->writer, &old, f)) {
            pthread_mutex_unlock(&a->wlock);
            goto out;
        }
    } else if (store_dataset_get(a->writer, up->name, &old, &e) < 0) {
        store_dataset_clear(&old);
    }
    pthread_mutex_unlock(&a->wlock);
    had_row = old.name != NULL;
    /* The new version, kept by its hash, read-only (its umask's read bits),
       before the name moves. */
    if (fstat(up->fd, &st) == 0)
        fchmod(up->fd, st.st_mode & 0444);
    vfd = datadir_versions_open(up->dirfd, 1);
    if (vfd < 0 || (linkat(up->dirfd, up->tmp, vfd, it->ds.sha256, 0) < 0 &&
                    errno != EEXIST)) {
        rc = fail(f, CATALOG_EIO, errno, "the version could not be kept");
        if (vfd >= 0)
            close(vfd);
        goto out;
    }
    fsync(vfd);
    close(vfd);
    it->ds.uploaded_at = wall_ms();
    pthread_mutex_lock(&a->wlock);
    if (store_dataset_put(a->writer, &it->ds, &e) < 0) {
        pthread_mutex_unlock(&a->wlock);
        snprintf(f->detail, sizeof f->detail, "%s", e.msg);
        rc = fail(f, CATALOG_EIO, EIO, "the dataset's row could not be written");
        goto out;
    }
    pthread_mutex_unlock(&a->wlock);
    if (publish(up) < 0) {
        int err = errno;

        pthread_mutex_lock(&a->wlock);
        if (had_row ? store_dataset_put(a->writer, &old, &e)
                    : store_dataset_delete(a->writer, up->name, &e))
            fprintf(stderr, "datasets: the row of %s could not be put back: %s\n",
                    up->name, e.msg);
        pthread_mutex_unlock(&a->wlock);
        if (err == EEXIST)              /* it appeared meanwhile */
            rc = fail(f, CATALOG_EEXISTS, err, "the name is taken");
        else if (err == EISDIR || err == ENOTDIR || err == ENOTEMPTY)
            rc = fail(f, CATALOG_ENOTREG, err, "the name is taken");
        else
            rc = fail(f, CATALOG_EIO, err, "the upload could not be renamed");
        goto out;
    }
    up->tmp[0] = '\0';
    fsync(up->dirfd);           /* the rename itself survives a crash */
    if (fstat(up->fd, &st) == 0)
        memo_put(a->catalog, up->name, &st, 0, it);
    rc = 0;
out:
    pthread_mutex_unlock(&a->catalog->move);
    store_dataset_clear(&old);
    return rc;
}

/* Validates the upload's file (on a pool thread, holding a validator
   slot) and moves it into place. */
static int upload_finish(struct catalog_upload *up, const atomic_int *cancel,
                         struct catalog_item *it, int *replaced,
                         struct catalog_failure *f)
{
    struct validator_result v;
    int rc = -1, existed, rofd;

    memset(f, 0, sizeof *f);
    memset(it, 0, sizeof *it);
    *replaced = 0;
    if (!up->werr && flush_buf(up) == 0 && fsync(up->fd) < 0)
        up->werr = errno;
    if (up->werr) {
        fail(f, CATALOG_EIO, up->werr, "the upload could not be written");
        goto out;
    }
    if (atomic_load(cancel)) {
        rc = fail(f, CATALOG_EBUSY, 0, "the server is shutting down");
        snprintf(f->detail, sizeof f->detail, "the server is shutting down; the "
                 "upload was not kept");
        goto out;
    }
    sha256_final_hex(&up->sha, it->ds.sha256);
    /* Decompressed and parsed in a limited child, never in the server; the
       child gets the file read-only. */
    if ((rofd = openat(up->dirfd, up->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = fail(f, CATALOG_EIO, errno, "the upload could not be read back");
        goto out;
    }
    rc = validate_fd(up->app, rofd, up->name, cancel, &v);
    close(rofd);
    if (rc < 0) {
        snprintf(f->detail, sizeof f->detail, "%s", v.error);
        rc = fail(f, CATALOG_EBUSY, 0, "the upload could not be validated");
        goto out;
    }
    if (v.status) {
        snprintf(f->detail, sizeof f->detail, "%s", v.error);
        rc = fail(f, v.status == 413 ? CATALOG_ELIMIT : CATALOG_EINVALID, 0,
                  v.status != 413 ? "the file is not a dataset"
                  : v.limit ? v.limit : "upload_limit");
        goto out;
    }
    if (stats_of(&v, &it->ds) < 0 || !(it->ds.name = strdup(up->name)) ||
        (up->owner[0] && !(it->ds.owner = strdup(up->owner)))) {
        rc = fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
        goto out;
    }
    it->ds.bytes = (int64_t)up->bytes;
    if ((rc = move_into_place(up, it, &existed, f)) < 0)
        goto out;
    *replaced = existed;
out:
    if (rc < 0)
        catalog_item_clear(it);
    upload_free(up);
    return rc;
}

struct upload_work {
    struct catalog_upload *up;
    catalog_upload_done_fn done;
    void *arg;
};

static void upload_run(void *arg, const atomic_int *cancel)
{
    struct upload_work *w = arg;
    struct catalog_failure f;
    struct catalog_item it;
    int replaced, rc;

    rc = upload_finish(w->up, cancel, &it, &replaced, &f);
    w->done(w->arg, rc, &it, replaced, &f);
    if (rc == 0)
        catalog_item_clear(&it);
    free(w);
}

void catalog_upload_finish(struct catalog_upload *up, catalog_upload_done_fn done,
                           void *arg)
{
    struct upload_work *w = malloc(sizeof *w);
    struct catalog_failure f = {0};
    struct catalog_item it = {0};

    if (w) {
        *w = (struct upload_work){up, done, arg};
        if (vpool_submit(up->app->catalog->pool, upload_run, w) == 0)
            return;
        free(w);
        fail(&f, CATALOG_EBUSY, 0, "the server is shutting down");
        snprintf(f.detail, sizeof f.detail, "the server is shutting down; the upload "
                 "was not kept");
    } else {
        fail(&f, CATALOG_ENOMEM, ENOMEM, "out of memory");
    }
    upload_free(up);
    done(arg, -1, &it, 0, &f);
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
