/*
 * The coordinator's data: the dataset, found as coord_data_open says and
 * read whole, and the P* hint the service gives for it.
 */
#include "coord_int.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datadir.h"
#include "describe.h"

/*
 * A dataset is a path when it names an existing file; otherwise a name
 * inside the data directory. Names may not climb out of that directory.
 */
static int resolve_dataset(const char *name, const char *dir, char *out,
                           size_t len, char *err, size_t errlen)
{
    struct stat st;

    if (stat(name, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(out, len, "%s", name);
        return 0;
    }
    if (!dir || !*dir) {
        snprintf(err, errlen,
                 "dataset: '%s' is not a file, and no data directory is set "
                 "(--data-dir or ECOPT_DATA_DIR)",
                 name);
        return -1;
    }
    if (strchr(name, '/') || strcmp(name, "..") == 0 || name[0] == '.') {
        snprintf(err, errlen, "dataset: '%s' is not a file", name);
        return -1;
    }
    if ((size_t)snprintf(out, len, "%s/%s", dir, name) >= len ||
        stat(out, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "dataset: '%s' not found (looked for a file of "
                 "that name and in %s)", name, dir);
        return -1;
    }
    return 0;
}

/*
 * The service's way to a dataset (--dataset-sha256): the spec's dataset
 * is a name in the catalog and nothing else, reached through the data
 * directory (openat, O_NOFOLLOW), never a path of the current directory.
 * The version the job recorded at submit is read from the versions folder
 * (a file that never changes) or, for a file placed in the directory by
 * hand and not yet kept there, by its name; either way the bytes are
 * hashed and must be that version, so the file parsed is the one whose
 * SHA-256 keys the P* cache. Returns the open descriptor, or -1 with a
 * sentence in err that quotes nothing of the file.
 */
static int open_version(const char *name, const char *dir, const char *sha,
                        struct stat *st, char *err, size_t errlen)
{
    int dirfd = -1, vfd = -1, fd = -1;
    const char *why;
    char got[SHA256_HEX_SIZE];

    if ((why = datadir_name_check(name))) {
        snprintf(err, errlen, "dataset: %s", why);
        return -1;
    }
    if (!dir || !*dir || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "dataset '%s': the data directory cannot be opened", name);
        return -1;
    }
    if ((vfd = datadir_versions_open(dirfd, 0)) >= 0) {
        fd = openat(vfd, sha, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        close(vfd);
    }
    if (fd < 0)
        fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    close(dirfd);
    if (fd < 0 || fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "dataset '%s' (version %.12s): not in the data directory",
                 name, sha);
        goto fail;
    }
    if (datadir_hash_fd(fd, got) < 0) {
        snprintf(err, errlen, "dataset '%s': cannot be read (%s)", name, strerror(errno));
        goto fail;
    }
    if (strcmp(got, sha) != 0) {
        snprintf(err, errlen, "dataset '%s': the file is no longer version %.12s "
                 "(it changed after the job was submitted)", name, sha);
        goto fail;
    }
    return fd;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

int coord_data_open(const char *name, const char *dir, const char *version,
                        int *fd, struct stat *st, char *shown, size_t shownlen,
                        char *err, size_t errlen)
{
    char path[2048];

    if (version) {
        snprintf(shown, shownlen, "%s", name);
        return (*fd = open_version(name, dir, version, st, err, errlen)) < 0 ? -1 : 0;
    }
    if (resolve_dataset(name, dir, path, sizeof path, err, errlen) < 0)
        return -1;
    snprintf(shown, shownlen, "%s", path);
    if ((*fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC)) < 0 || fstat(*fd, st) < 0) {
        snprintf(err, errlen, "dataset: %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

int coord_data_read(int fd, const char *shown, const ec_libsvm_opts *o,
                        ec_dataset *ds, ec_err *e)
{
    return lseek(fd, 0, SEEK_SET) < 0
               ? ec_err_set(e, EC_EIO, "%s: cannot read (%s)", shown, strerror(errno))
               : ec_libsvm_read_fd(fd, shown, o, ds, e);
}

int coord_data_unchanged(int fd, const struct stat *before, struct stat *after)
{
    return fstat(fd, after) == 0 && after->st_size == before->st_size &&
           after->st_mtim.tv_sec == before->st_mtim.tv_sec &&
           after->st_mtim.tv_nsec == before->st_mtim.tv_nsec;
}

/* Whether a P* hint's file identity is that of st (describe.h). */
static int hint_same_file(json_t *id, const struct stat *st)
{
    json_t *mine = describe_file_identity(st);
    int same = mine && json_equal(mine, id);

    json_decref(mine);
    return same;
}

/*
 * P* from a hint file when the hint is for the very file that was read
 * (stat before and after reading) and has this problem's loss and exact
 * lambdas. The cache only saves time: anything amiss with the hint means
 * P* is solved for as usual, with a line on info saying why. The hint is
 * read while the data is (the job may not read the service's files once
 * it runs unprivileged) and used once the problem is built.
 */
json_t *coord_hint_load(const char *hint, const struct stat *before,
                        const struct stat *after, const char *sha, FILE *info)
{
    json_error_t jerr;
    json_t *root = json_load_file(hint, 0, &jerr), *file;

    if (!root) {
        fprintf(info, "pstar hint %s: %s (line %d); solving\n", hint, jerr.text,
                jerr.line);
        return NULL;
    }
    file = json_object_get(root, "file");
    /* The service's hint names the version it is for, and the bytes read
       were hashed: only that version. Otherwise the very file read. */
    if (sha ? !json_is_string(json_object_get(root, "sha256")) ||
                  strcmp(json_string_value(json_object_get(root, "sha256")), sha) != 0
            : !hint_same_file(file, before) || !hint_same_file(file, after)) {
        json_decref(root);      /* another file now: solve */
        return NULL;
    }
    return root;
}

/* lambda_max(A^T A) from a hint coord_hint_load() kept, when it has one
   Lanczos found: 1 and the value and its steps, else 0. */
int coord_hint_lmax(json_t *root, double *lambda_max, uint32_t *steps)
{
    json_t *lm = json_object_get(root, "lambda_max");
    json_t *v = json_object_get(lm, "value"), *n = json_object_get(lm, "steps");
    const char *method = json_string_value(json_object_get(lm, "method"));

    if (!json_is_number(v) || !json_is_integer(n) || json_integer_value(n) < 1 ||
        json_integer_value(n) > EC_LANCZOS_MAX_STEPS || !method ||
        strcmp(method, "lanczos") != 0)
        return 0;
    *lambda_max = json_number_value(v);
    *steps = (uint32_t)json_integer_value(n);
    return 1;
}

/* Takes P* from a hint coord_hint_load() kept, and frees it. */
void coord_hint_use(json_t *root, const char *hint, ec_problem *pb, FILE *info)
{
    json_t *entries, *en;
    size_t i;

    if (!root)
        return;
    if (!json_is_string(json_object_get(root, "loss")) ||
        strcmp(json_string_value(json_object_get(root, "loss")),
               ec_loss_name(pb->loss)) != 0)
        goto out;
    entries = json_object_get(root, "entries");
    json_array_foreach(entries, i, en) {
        json_t *p = json_object_get(en, "p_star"), *b = json_object_get(en, "bound");
        ec_err e = {0};

        if (!json_is_number(json_object_get(en, "lambda1")) ||
            !json_is_number(json_object_get(en, "lambda2")) ||
            json_number_value(json_object_get(en, "lambda1")) != pb->lambda1 ||
            json_number_value(json_object_get(en, "lambda2")) != pb->lambda2 ||
            !json_is_number(p))
            continue;
        if (ec_problem_use_pstar(pb, json_number_value(p),
                                 json_is_number(b) ? json_number_value(b) : NAN,
                                 json_string_value(json_object_get(en, "method")),
                                 &e) < 0)
            fprintf(info, "pstar hint %s: %s; solving\n", hint, e.msg);
        break;
    }
out:
    json_decref(root);
}

