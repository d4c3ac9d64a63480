/*
 * Uploads into the catalog (catalog.h): the body written to a temporary
 * file of the data directory, validated in a child on the validation
 * pool's threads, then the owner check, the row and the rename as one
 * step under the catalog's move lock.
 */
#define _GNU_SOURCE
#include "catalog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "app.h"

#define WRITE_BUF ((size_t)1 << 18)     /* an upload is written in these */
#define TEMP_LETTERS 12
#define TEMP_ATTEMPTS 16

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
    int shared;                 /* 0, 1, or -1: a new name's 0, a
                                   replaced name's own */
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
        catalog__fail(f, CATALOG_EIO, EIO, "the dataset's owner cannot be read");
        return 0;
    }
    if (up->admin)
        return 1;
    ok = rc == 0 && row->owner && strcmp(row->owner, up->owner) == 0;
    if (!ok) {
        catalog__fail(f, CATALOG_EFORBIDDEN, EPERM, "the name is another's");
        snprintf(f->detail, sizeof f->detail, "%s", rc == 0 && row->owner ? row->owner : "");
    }
    return ok;
}

struct catalog_upload *catalog_upload_begin(struct app *a, const char *name,
                                            int replace, int shared, const char *owner,
                                            int admin, struct catalog_failure *f)
{
    struct catalog_upload *up;
    struct stat st;

    memset(f, 0, sizeof *f);
    if (!(up = calloc(1, sizeof *up))) {
        catalog__fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
        return NULL;
    }
    up->app = a;
    up->fd = -1;
    up->replace = replace;
    up->shared = shared;
    up->admin = admin || !owner;
    snprintf(up->name, sizeof up->name, "%s", name);
    snprintf(up->owner, sizeof up->owner, "%s", owner ? owner : "");
    sha256_init(&up->sha);
    if ((up->dirfd = catalog__open_data_dir(a)) < 0) {
        catalog__fail(f, CATALOG_EIO, errno, "the data directory cannot be opened");
        upload_free(up);
        return NULL;
    }
    /* Decided on the headers, so that a refused upload sends nothing. */
    if (fstatat(up->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(st.st_mode) || !up->replace)) {
        catalog__fail(f, S_ISREG(st.st_mode) ? CATALOG_EEXISTS : CATALOG_ENOTREG, EEXIST,
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
    /* The token's quotas as they are (a new name must fit in their count;
       the bytes are checked again at the move, when they are known), and
       the disk's floor. */
    {
        struct store *rd = app_reader(a);
        int own = 0, q;
        struct store_dataset row = {0};
        struct store_err e = {0};

        if (up->owner[0] && store_dataset_get(rd, name, &row, &e) == 0)
            own = row.owner && strcmp(row.owner, up->owner) == 0;
        q = catalog__quota_check(a, rd, up->owner, !own, 0, 0, f);
        app_reader_done(a, rd);
        store_dataset_clear(&row);
        if (q < 0 || catalog_disk_check(a, f) < 0) {
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
            catalog__fail(f, CATALOG_ETHROTTLED, status, over);
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
        catalog__fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
        upload_free(up);
        return NULL;
    }
    if (make_temp(up) < 0) {
        catalog__fail(f, CATALOG_EIO, errno, "the upload's temporary file cannot be created");
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
    int rc = -1, had_row, own, vfd;

    pthread_mutex_lock(&a->catalog->move);
    *existed = fstatat(up->dirfd, up->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (*existed && !up->replace) {
        rc = catalog__fail(f, S_ISREG(st.st_mode) ? CATALOG_EEXISTS : CATALOG_ENOTREG, EEXIST,
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
    /* The quotas again, as the token's datasets are now. */
    own = *existed && old.owner && strcmp(old.owner, up->owner) == 0;
    if (catalog__quota_check(a, a->writer, up->owner, !own, it->ds.bytes,
                             own ? old.bytes : 0, f) < 0) {
        pthread_mutex_unlock(&a->wlock);
        goto out;
    }
    pthread_mutex_unlock(&a->wlock);
    had_row = old.name != NULL;
    /* Private unless asked; a replace keeps the name's sharing. */
    it->ds.shared = up->shared >= 0 ? up->shared : had_row && *existed ? old.shared : 0;
    /* The new version, kept by its hash, read-only (its umask's read bits),
       before the name moves. */
    if (fstat(up->fd, &st) == 0)
        fchmod(up->fd, st.st_mode & 0444);
    vfd = datadir_versions_open(up->dirfd, 1);
    if (vfd < 0 || (linkat(up->dirfd, up->tmp, vfd, it->ds.sha256, 0) < 0 &&
                    errno != EEXIST)) {
        rc = catalog__fail(f, CATALOG_EIO, errno, "the version could not be kept");
        if (vfd >= 0)
            close(vfd);
        goto out;
    }
    fsync(vfd);
    close(vfd);
    it->ds.uploaded_at = catalog__wall_ms();
    pthread_mutex_lock(&a->wlock);
    if (store_dataset_put(a->writer, &it->ds, &e) < 0) {
        pthread_mutex_unlock(&a->wlock);
        snprintf(f->detail, sizeof f->detail, "%s", e.msg);
        rc = catalog__fail(f, CATALOG_EIO, EIO, "the dataset's row could not be written");
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
            rc = catalog__fail(f, CATALOG_EEXISTS, err, "the name is taken");
        else if (err == EISDIR || err == ENOTDIR || err == ENOTEMPTY)
            rc = catalog__fail(f, CATALOG_ENOTREG, err, "the name is taken");
        else
            rc = catalog__fail(f, CATALOG_EIO, err, "the upload could not be renamed");
        goto out;
    }
    up->tmp[0] = '\0';
    fsync(up->dirfd);           /* the rename itself survives a crash */
    if (fstat(up->fd, &st) == 0)
        catalog__memo_put(a->catalog, up->name, &st, 0, it);
    if (*existed)               /* the old version may be no one's now */
        catalog__gc_versions(a, up->dirfd);
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
        catalog__fail(f, CATALOG_EIO, up->werr, "the upload could not be written");
        goto out;
    }
    if (atomic_load(cancel)) {
        rc = catalog__fail(f, CATALOG_EBUSY, 0, "the server is shutting down");
        snprintf(f->detail, sizeof f->detail, "the server is shutting down; the "
                 "upload was not kept");
        goto out;
    }
    sha256_final_hex(&up->sha, it->ds.sha256);
    /* Decompressed and parsed in a limited child, never in the server; the
       child gets the file read-only. */
    if ((rofd = openat(up->dirfd, up->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        rc = catalog__fail(f, CATALOG_EIO, errno, "the upload could not be read back");
        goto out;
    }
    rc = catalog__validate_fd(up->app, rofd, up->name, cancel, &v);
    close(rofd);
    if (rc < 0) {
        snprintf(f->detail, sizeof f->detail, "%s", v.error);
        rc = catalog__fail(f, CATALOG_EBUSY, 0, "the upload could not be validated");
        goto out;
    }
    if (v.status) {
        snprintf(f->detail, sizeof f->detail, "%s", v.error);
        rc = catalog__fail(f, v.status == 413 ? CATALOG_ELIMIT : CATALOG_EINVALID, 0,
                  v.status != 413 ? "the file is not a dataset"
                  : v.limit ? v.limit : "upload_limit");
        goto out;
    }
    if (catalog__stats_of(&v, &it->ds) < 0 || !(it->ds.name = strdup(up->name)) ||
        (up->owner[0] && !(it->ds.owner = strdup(up->owner)))) {
        rc = catalog__fail(f, CATALOG_ENOMEM, ENOMEM, "out of memory");
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
        catalog__fail(&f, CATALOG_EBUSY, 0, "the server is shutting down");
        snprintf(f.detail, sizeof f.detail, "the server is shutting down; the upload "
                 "was not kept");
    } else {
        catalog__fail(&f, CATALOG_ENOMEM, ENOMEM, "out of memory");
    }
    upload_free(up);
    done(arg, -1, &it, 0, &f);
}

