/*
 * The datasets API over the data directory: listings with stats, one
 * dataset's stats, and streamed uploads. Every file is reached through a
 * descriptor of the directory (openat, O_NOFOLLOW) and a name checked by
 * datasets_name_check, so no request can name anything outside it.
 */
#define _GNU_SOURCE
#include "datasets.h"

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

#include "app.h"
#include "ecopt/data.h"
#include "sha256.h"

#define HASH_CHUNK ((size_t)1 << 18)    /* bytes read at a time to hash */
#define WRITE_BUF ((size_t)1 << 18)     /* an upload is written in these */
#define TEMP_LETTERS 12
#define TEMP_ATTEMPTS 16

/*
 * The datasets table keeps uploaded_at NOT NULL, and a put of 0 means
 * "now"; a file found in the directory rather than uploaded is stored with
 * this instead, and shown as uploaded_at null.
 */
#define NOT_UPLOADED (-1)

/* The upload limit: --max-upload, ECOPT_MAX_UPLOAD. */
static size_t upload_limit(const struct app *a)
{
    return a->cfg.max_upload ? a->cfg.max_upload
                             : DATASETS_MAX_UPLOAD_DEFAULT;
}

const char *datasets_name_check(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > DATASETS_NAME_MAX)
        return "a dataset name is 1..128 bytes of [A-Za-z0-9._-], not "
               "starting with '.'";
    if (name[0] == '.')
        return "a dataset name must not start with '.' (so never \".\", "
               "\"..\" or a hidden file)";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return "a dataset name may hold only letters, digits, '.', '_' "
                   "and '-' (no '/', no spaces, nothing percent-encoded)";
    }
    return NULL;
}

/* ---- small helpers ------------------------------------------------------- */

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A disk that is full (or a file size limit) is the server's state, not
   the request's fault: 503, try later. Anything else is a 500. */
static int reply_io(struct http_resp *rs, int err, const char *what)
{
    char detail[300];

    snprintf(detail, sizeof detail, "%s: %s", what, strerror(err));
    if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
        http_reply_header(rs, "Retry-After", "60");
        return http_reply_problem(rs, 503, NULL, detail, NULL);
    }
    return http_reply_problem(rs, 500, NULL, detail, NULL);
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

static int hash_fd(int fd, char hex[SHA256_HEX_SIZE])
{
    struct sha256 h;
    char *buf = malloc(HASH_CHUNK);
    off_t off = 0;
    ssize_t n;

    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    sha256_init(&h);
    while ((n = pread(fd, buf, HASH_CHUNK, off)) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            free(buf);
            return -1;
        }
        sha256_update(&h, buf, (size_t)n);
        off += n;
    }
    free(buf);
    sha256_final_hex(&h, hex);
    return 0;
}

/* msg with every occurrence of from replaced by to, into out. */
static void replace_all(const char *msg, const char *from, const char *to,
                        char *out, size_t len)
{
    size_t o = 0, fl = strlen(from), tl = strlen(to);

    for (const char *p = msg; *p && o + 1 < len;) {
        if (fl && strncmp(p, from, fl) == 0) {
            size_t k = tl < len - 1 - o ? tl : len - 1 - o;

            memcpy(out + o, to, k);
            o += k;
            p += fl;
        } else {
            out[o++] = *p++;
        }
    }
    out[o] = '\0';
}

/*
 * The engine's reader on an open file. It takes a path, so it is given
 * /proc/self/fd/N, which is the file opened and no other (where /proc is
 * not mounted, the path in the data directory). Its message names the
 * file as `shown`, not by that path.
 */
static int read_fd(const struct app *a, int fd, const char *file,
                   const char *shown, ec_dataset *ds, char *msg, size_t len)
{
    char path[PATH_MAX + DATASETS_NAME_MAX + 32];
    ec_err e = {0};
    int rc;

    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (access(path, R_OK) != 0)
        snprintf(path, sizeof path, "%s/%s", a->cfg.data_dir, file);
    rc = ec_libsvm_read(path, NULL, ds, &e);
    if (rc < 0)
        replace_all(e.msg, path, shown, msg, len);
    return rc;
}

static json_t *label_json(double v)
{
    if (!isfinite(v))
        return json_null();     /* a file of one label has no other */
    if (v == floor(v) && fabs(v) < 1e15)
        return json_integer((json_int_t)v);
    return json_real(v);
}

/* A JSON string of s even if it is not UTF-8 (other bytes become '?'). */
static json_t *text_json(const char *s)
{
    json_t *j = json_string(s);
    char *copy;

    if (j || !s)
        return j;
    if (!(copy = strdup(s)))
        return NULL;
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    j = json_string(copy);
    free(copy);
    return j;
}

/* ---- what a file is: its stats or the reader's refusal ------------------- */

struct file_stats {
    struct store_dataset ds;    /* name, sha256 and bytes always */
    char *error;                /* the reader's message; NULL: ds has stats */
};

static void file_stats_clear(struct file_stats *fs)
{
    store_dataset_clear(&fs->ds);
    free(fs->error);
    fs->error = NULL;
}

static int stats_from(const ec_dataset *d, struct store_dataset *ds)
{
    json_t *labels = json_pack("[oo]", label_json(d->label_neg),
                               label_json(d->label_pos));

    ds->rows = d->n_rows;
    ds->d = d->d;
    ds->nnz = (int64_t)d->nnz;
    ds->labels = labels ? json_dumps(labels, JSON_COMPACT) : NULL;
    json_decref(labels);
    return ds->labels ? 0 : -1;
}

static json_t *stats_json(const struct file_stats *fs)
{
    const struct store_dataset *ds = &fs->ds;
    json_t *labels;

    if (fs->error)
        return json_pack("{s:s, s:I, s:s, s:o}", "name", ds->name, "bytes",
                         (json_int_t)ds->bytes, "sha256", ds->sha256, "error",
                         text_json(fs->error));
    labels = ds->labels ? json_loads(ds->labels, 0, NULL) : NULL;
    return json_pack("{s:s, s:I, s:I, s:I, s:o, s:I, s:s, s:o}", "name",
                     ds->name, "rows", (json_int_t)ds->rows, "d",
                     (json_int_t)ds->d, "nnz", (json_int_t)ds->nnz, "labels",
                     labels ? labels : json_null(), "bytes",
                     (json_int_t)ds->bytes, "sha256", ds->sha256,
                     "uploaded_at",
                     ds->uploaded_at > 0 ? json_integer(ds->uploaded_at)
                                         : json_null());
}

/* ---- the memo: what each file was, while it stays the same file ---------- */

/*
 * Hashing every file at every listing would read the whole directory each
 * time. While a file keeps its device, inode, size, mtime and ctime (which
 * no one can set back) it is the same file, and what was found last time
 * holds. The memo is the process's; the store keeps the stats across
 * restarts, checked against the file's SHA-256.
 */
struct memo_entry {
    char name[DATASETS_NAME_MAX + 1];
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

static struct {
    pthread_mutex_t mu;
    struct memo_entry *e;
    size_t n, cap;
    unsigned long gen;
} memo = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

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

/* memo.mu held. */
static struct memo_entry *memo_find(const char *name)
{
    for (size_t i = 0; i < memo.n; i++)
        if (strcmp(memo.e[i].name, name) == 0)
            return &memo.e[i];
    return NULL;
}

/* Fills out (name, sha256, bytes and stats or error) when st is the file
   the memo knows by that name. 0, or -1 when it does not. */
static int memo_get(const char *name, const struct stat *st,
                    unsigned long gen, struct file_stats *out)
{
    struct memo_entry *m;
    int rc = -1;

    pthread_mutex_lock(&memo.mu);
    if ((m = memo_find(name)) && same_file(m, st)) {
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
            file_stats_clear(out);
    }
    pthread_mutex_unlock(&memo.mu);
    return rc;
}

static void memo_put(const char *name, const struct stat *st,
                     unsigned long gen, const struct file_stats *fs)
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
    pthread_mutex_lock(&memo.mu);
    if ((m = memo_find(name))) {
        free(m->labels);
        free(m->error);
        *m = fresh;
    } else {
        if (memo.n == memo.cap) {
            size_t cap = memo.cap ? 2 * memo.cap : 32;
            struct memo_entry *e = realloc(memo.e, cap * sizeof *e);

            if (e) {
                memo.e = e;
                memo.cap = cap;
            }
        }
        if (memo.n < memo.cap) {
            memo.e[memo.n++] = fresh;
        } else {
            free(fresh.labels);
            free(fresh.error);
        }
    }
    pthread_mutex_unlock(&memo.mu);
}

static unsigned long memo_new_gen(void)
{
    unsigned long gen;

    pthread_mutex_lock(&memo.mu);
    gen = ++memo.gen;
    pthread_mutex_unlock(&memo.mu);
    return gen;
}

/* After a listing: files it did not see are gone from the directory. */
static void memo_sweep(unsigned long gen)
{
    pthread_mutex_lock(&memo.mu);
    for (size_t i = 0; i < memo.n;) {
        if (memo.e[i].gen < gen) {
            free(memo.e[i].labels);
            free(memo.e[i].error);
            memo.e[i] = memo.e[--memo.n];
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&memo.mu);
}

/* ---- one file's stats ---------------------------------------------------- */

static int row_matches(const struct store_dataset *row,
                       const struct store_dataset *ds)
{
    return row && row->name && row->bytes == ds->bytes &&
           strcmp(row->sha256, ds->sha256) == 0;
}

/*
 * Stores the stats of a file found in the directory, unless the row has
 * meanwhile become this very file (an upload that just finished keeps its
 * uploaded_at). fs->ds.uploaded_at is then the row's.
 */
static void store_found(struct app *a, struct file_stats *fs)
{
    struct store_dataset now = {0};
    struct store_err e = {0};

    pthread_mutex_lock(&a->wlock);
    if (store_dataset_get(a->writer, fs->ds.name, &now, &e) == 0 &&
        row_matches(&now, &fs->ds)) {
        fs->ds.uploaded_at = now.uploaded_at;
    } else {
        fs->ds.uploaded_at = NOT_UPLOADED;
        if (store_dataset_put(a->writer, &fs->ds, &e) < 0)
            fprintf(stderr, "datasets: the stats of %s were not stored: %s\n",
                    fs->ds.name, e.msg);
    }
    pthread_mutex_unlock(&a->wlock);
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
                      struct file_stats *out, struct stat *st_out)
{
    struct stat st, after;
    ec_dataset d = {0};
    char msg[sizeof ((ec_err *)0)->msg + DATASETS_NAME_MAX];
    int fd, err, rc = 0;

    memset(out, 0, sizeof *out);
    if ((fd = open_dataset(dirfd, name, &st)) < 0)
        return -1;
    if (st_out)
        *st_out = st;
    if (memo_get(name, &st, gen, out) < 0) {
        if (!(out->ds.name = strdup(name)) || hash_fd(fd, out->ds.sha256) < 0)
            goto fail;
        out->ds.bytes = st.st_size;
        if (row_matches(row, &out->ds)) {
            out->ds.rows = row->rows;
            out->ds.d = row->d;
            out->ds.nnz = row->nnz;
            if (!(out->ds.labels = strdup(row->labels)))
                goto fail;
        } else {
            rc = read_fd(a, fd, name, name, &d, msg, sizeof msg);
            err = rc < 0 ? !(out->error = strdup(msg))
                         : stats_from(&d, &out->ds) < 0;
            ec_dataset_clear(&d);
            if (err) {
                errno = ENOMEM;
                goto fail;
            }
        }
        /* Only a file that did not change while it was read is memoised,
           and not a refusal that was only for want of memory. */
        if (rc != EC_ENOMEM && fstat(fd, &after) == 0 &&
            after.st_size == st.st_size &&
            same_time(&after.st_mtim, &st.st_mtim) &&
            same_time(&after.st_ctim, &st.st_ctim))
            memo_put(name, &st, gen, out);
    }
    close(fd);
    if (row_matches(row, &out->ds))
        out->ds.uploaded_at = row->uploaded_at;
    else if (!out->error)
        store_found(a, out);
    return 0;
fail:
    err = errno;
    close(fd);
    file_stats_clear(out);
    errno = err;
    return -1;
}

/* ---- GET /v1/datasets and /v1/datasets/{name} ---------------------------- */

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
    int fd = dup(dirfd);
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
        if (datasets_name_check(de->d_name) ||
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

int datasets_list(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    struct store_dataset *rows = NULL;
    struct store_err e = {0};
    struct store *st;
    char **names = NULL;
    size_t nrows = 0, nnames = 0;
    unsigned long gen;
    json_t *list = NULL;
    int dirfd = -1, rc;

    if (!app_authn(rq, rs))
        return 0;
    if ((dirfd = open_data_dir(a)) < 0 ||
        list_names(dirfd, &names, &nnames) < 0) {
        rc = reply_io(rs, errno, "the data directory cannot be read");
        goto out;
    }
    st = app_reader(a);
    rc = store_dataset_list(st, &rows, &nrows, &e);
    app_reader_done(a, st);
    if (rc < 0) {
        rc = store_problem(rs, &e, "no datasets");
        goto out;
    }
    gen = memo_new_gen();
    list = json_array();
    for (size_t i = 0; i < nnames; i++) {
        struct file_stats fs;
        json_t *item;

        if (file_stats(a, dirfd, names[i], find_row(rows, nrows, names[i]),
                       gen, &fs, NULL) < 0) {
            if (errno == ENOENT)
                continue;       /* gone since the directory was read */
            item = json_pack("{s:s, s:s+}", "name", names[i], "error",
                             "the file cannot be read: ", strerror(errno));
        } else {
            item = stats_json(&fs);
            file_stats_clear(&fs);
        }
        json_array_append_new(list, item);
    }
    memo_sweep(gen);
    rc = http_reply_json(rs, 200, json_pack("{s:o}", "datasets", list));
out:
    store_datasets_free(rows, nrows);
    free_names(names, nnames);
    if (dirfd >= 0)
        close(dirfd);
    return rc;
}

int datasets_get(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const char *name = http_param(rq, "name");
    struct store_dataset row = {0};
    struct store_err e = {0};
    struct file_stats fs;
    struct store *st;
    char detail[300];
    const char *why;
    int dirfd = -1, rc, found;

    if (!app_authn(rq, rs))
        return 0;
    if ((why = datasets_name_check(name))) {
        snprintf(detail, sizeof detail, "no dataset '%.60s': %s", name, why);
        return http_reply_problem(rs, 404, NULL, detail, NULL);
    }
    if ((dirfd = open_data_dir(a)) < 0)
        return reply_io(rs, errno, "the data directory cannot be read");
    st = app_reader(a);
    rc = store_dataset_get(st, name, &row, &e);
    app_reader_done(a, st);
    if (rc < 0 && rc != STORE_ENOTFOUND) {
        rc = store_problem(rs, &e, "no such dataset");
        goto out;
    }
    found = rc == 0;
    if (file_stats(a, dirfd, name, found ? &row : NULL, 0, &fs, NULL) < 0) {
        if (errno == ENOENT) {
            snprintf(detail, sizeof detail, "no dataset '%s' in the data "
                     "directory (GET /v1/datasets lists them)", name);
            rc = http_reply_problem(rs, 404, NULL, detail, NULL);
        } else {
            rc = reply_io(rs, errno, "the dataset cannot be read");
        }
        goto out;
    }
    rc = http_reply_json(rs, 200, stats_json(&fs));
    file_stats_clear(&fs);
out:
    store_dataset_clear(&row);
    close(dirfd);
    return rc;
}

int datasets_file(struct app *a, const char *name, struct datasets_file *out,
                  char *err, size_t errlen)
{
    struct store_dataset row = {0};
    struct store_err e = {0};
    struct file_stats fs;
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
    rc = file_stats(a, dirfd, name, found ? &row : NULL, 0, &fs, &out->st);
    store_dataset_clear(&row);
    close(dirfd);
    if (rc < 0) {
        snprintf(err, errlen, errno == ENOENT ? "no dataset '%.100s' (GET /v1/datasets "
                 "lists them)" : "dataset '%.100s' cannot be read", name);
        return -1;
    }
    if (fs.error) {
        snprintf(err, errlen, "%s", fs.error);
        file_stats_clear(&fs);
        return -1;
    }
    out->rows = fs.ds.rows;
    out->d = fs.ds.d;
    memcpy(out->sha256, fs.ds.sha256, sizeof out->sha256);
    file_stats_clear(&fs);
    return 0;
}

/* ---- POST /v1/datasets?name=NAME: uploads -------------------------------- */

/*
 * One upload: the temporary file it goes to, its hash so far, and the
 * first write error. abort or end frees it and, unless it was renamed into
 * place, removes the temporary file.
 */
struct upload {
    struct app *app;
    int dirfd, fd;
    char tmp[sizeof DATASETS_TEMP_PREFIX + TEMP_LETTERS];  /* "" once renamed */
    char name[DATASETS_NAME_MAX + 1];
    int replace;
    struct sha256 sha;
    uint64_t bytes;
    int werr;                   /* errno of the first failed write, or 0 */
    char *buf;
    size_t fill;
};

static void upload_free(struct upload *up)
{
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

/* The temporary file, created here and only here (O_EXCL), mode 0640. */
static int make_temp(struct upload *up)
{
    size_t pl = sizeof DATASETS_TEMP_PREFIX - 1;

    memcpy(up->tmp, DATASETS_TEMP_PREFIX, pl);
    for (int i = 0; i < TEMP_ATTEMPTS; i++) {
        temp_letters(up->tmp + pl, TEMP_LETTERS);
        up->fd = openat(up->dirfd, up->tmp,
                        O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        0640);
        if (up->fd >= 0) {
            fchmod(up->fd, 0640);      /* whatever the umask */
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    up->tmp[0] = '\0';
    return -1;
}

static int flush_buf(struct upload *up)
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

static int upload_write(void *ctx, const char *data, size_t len)
{
    struct upload *up = ctx;

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

static void upload_abort(void *ctx)
{
    upload_free(ctx);
}

/*
 * The name, taken: atomically, and without replacing anything unless
 * asked. RENAME_NOREPLACE fails on an existing name; where the filesystem
 * lacks it, a hard link fails the same way.
 */
static int publish(struct upload *up)
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

static int conflict(struct http_resp *rs, const char *name, int not_regular)
{
    char detail[300];

    if (not_regular)
        snprintf(detail, sizeof detail, "'%s' exists in the data directory "
                 "and is not a regular file", name);
    else
        snprintf(detail, sizeof detail, "dataset '%s' exists; upload with "
                 "replace=true to replace it", name);
    return http_reply_problem(rs, 409, NULL, detail,
                              json_pack("{s:s}", "dataset", name));
}

static int upload_end(void *ctx, struct http_req *rq, struct http_resp *rs)
{
    struct upload *up = ctx;
    struct app *a = up->app;
    struct file_stats fs = {0};
    struct store_err e = {0};
    struct stat st;
    ec_dataset d = {0};
    char msg[sizeof ((ec_err *)0)->msg + DATASETS_NAME_MAX], location[200];
    int rc, existed;

    (void)rq;
    if (!up->werr && flush_buf(up) == 0 && fsync(up->fd) < 0)
        up->werr = errno;
    if (up->werr) {
        rc = reply_io(rs, up->werr, "the upload could not be written");
        goto out;
    }
    sha256_final_hex(&up->sha, fs.ds.sha256);
    rc = read_fd(a, up->fd, up->tmp, up->name, &d, msg, sizeof msg);
    if (rc == EC_ENOMEM) {
        rc = http_reply_problem(rs, 503, NULL, msg, NULL);
        goto out;
    }
    if (rc < 0) {
        rc = http_reply_problem(rs, 422, "Invalid dataset", msg,
                                json_pack("{s:s}", "dataset", up->name));
        goto out;
    }
    rc = stats_from(&d, &fs.ds);
    ec_dataset_clear(&d);
    if (rc < 0 || !(fs.ds.name = strdup(up->name))) {
        rc = http_reply_problem(rs, 500, NULL, "out of memory", NULL);
        goto out;
    }
    fs.ds.bytes = (int64_t)up->bytes;
    existed = fstatat(up->dirfd, up->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (publish(up) < 0) {
        if (errno == EEXIST)
            rc = conflict(rs, up->name, 0);     /* it appeared meanwhile */
        else if (errno == EISDIR || errno == ENOTDIR || errno == ENOTEMPTY)
            rc = conflict(rs, up->name, 1);
        else
            rc = reply_io(rs, errno, "the upload could not be renamed");
        goto out;
    }
    up->tmp[0] = '\0';
    fsync(up->dirfd);           /* the rename itself survives a crash */

    fs.ds.uploaded_at = wall_ms();
    pthread_mutex_lock(&a->wlock);
    if (store_dataset_put(a->writer, &fs.ds, &e) < 0)
        fprintf(stderr, "datasets: the stats of %s were not stored: %s\n",
                up->name, e.msg);
    pthread_mutex_unlock(&a->wlock);
    if (fstat(up->fd, &st) == 0)
        memo_put(up->name, &st, 0, &fs);

    snprintf(location, sizeof location, "/v1/datasets/%s", up->name);
    http_reply_header(rs, "Location", location);
    rc = http_reply_json(rs, existed ? 200 : 201, stats_json(&fs));
out:
    file_stats_clear(&fs);
    upload_free(up);
    return rc;
}

static const struct http_body_ops upload_ops = {upload_write, upload_end,
                                                upload_abort};

static int reject_name(struct http_resp *rs, const char *name,
                       const char *why)
{
    char detail[400];

    snprintf(detail, sizeof detail, "name: %s (got \"%.60s\")", why, name);
    return http_reply_problem(rs, 422, NULL, detail,
                              json_pack("{s:s, s:s}", "parameter", "name",
                                        "rule", "1..128 bytes of "
                                        "[A-Za-z0-9._-], not starting "
                                        "with '.'"));
}

int datasets_upload(struct http_req *rq, struct http_resp *rs)
{
    struct app *a = rq->app;
    const char *name = http_query(rq, "name");
    const char *replace = http_query(rq, "replace");
    struct upload *up;
    struct stat st;
    const char *why;

    if (!app_authn(rq, rs))
        return 0;
    if (!name)
        return reject_name(rs, "", "the query parameter is required "
                                   "(POST /v1/datasets?name=NAME)");
    if ((why = datasets_name_check(name)))
        return reject_name(rs, name, why);
    if (replace && strcmp(replace, "true") != 0 &&
        strcmp(replace, "false") != 0)
        return http_reply_problem(rs, 422, NULL,
                                  "replace must be true or false",
                                  json_pack("{s:s}", "parameter", "replace"));
    if (!(up = calloc(1, sizeof *up)))
        return http_reply_problem(rs, 500, NULL, "out of memory", NULL);
    up->app = a;
    up->fd = -1;
    up->replace = replace && strcmp(replace, "true") == 0;
    snprintf(up->name, sizeof up->name, "%s", name);
    sha256_init(&up->sha);
    if ((up->dirfd = open_data_dir(a)) < 0) {
        int rc = reply_io(rs, errno, "the data directory cannot be opened");

        upload_free(up);
        return rc;
    }
    /* Decided on the headers, so that a refused upload sends nothing. */
    if (fstatat(up->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        (!S_ISREG(st.st_mode) || !up->replace)) {
        upload_free(up);
        return conflict(rs, name, !S_ISREG(st.st_mode));
    }
    if (!(up->buf = malloc(WRITE_BUF)) || make_temp(up) < 0) {
        int rc = up->buf ? reply_io(rs, errno, "the upload's temporary file "
                                               "cannot be created")
                         : http_reply_problem(rs, 500, NULL, "out of memory",
                                              NULL);

        upload_free(up);
        return rc;
    }
    return http_body_stream(rs, upload_limit(a), "max_upload", &upload_ops,
                            up);
}

int datasets_cleanup(const char *data_dir)
{
    DIR *dir = opendir(data_dir);
    struct dirent *de;
    int removed = 0;

    if (!dir)
        return -1;
    while ((de = readdir(dir)))
        if (strncmp(de->d_name, DATASETS_TEMP_PREFIX,
                    sizeof DATASETS_TEMP_PREFIX - 1) == 0 &&
            unlinkat(dirfd(dir), de->d_name, 0) == 0)
            removed++;
    closedir(dir);
    return removed;
}
