/*
 * Managing the catalog's names (catalog.h, "Managing a name"): deleting
 * one, sharing it or not, and the quotas of a token's datasets and of the
 * free disk.
 */
#define _GNU_SOURCE
#include "catalog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "app.h"

#define MB ((uint64_t)1 << 20)

/*
 * Whether viewer may manage the dataset whose row is row (NULL: a file
 * with no row yet, the administrators'): 0, or -1 with f filled, as no
 * dataset when viewer may not see it.
 */
static int may_manage(const struct store_dataset *row, const char *name,
                      const char *viewer, int admin, struct catalog_failure *f)
{
    if (row && !catalog_visible(row, viewer, admin)) {
        snprintf(f->detail, sizeof f->detail, "no dataset '%s'", name);
        return catalog__fail(f, CATALOG_ENOTFOUND, ENOENT, "no such dataset");
    }
    if (!viewer || admin || (row && row->owner && strcmp(row->owner, viewer) == 0))
        return 0;
    snprintf(f->detail, sizeof f->detail, "%s", row && row->owner ? row->owner : "");
    return catalog__fail(f, CATALOG_EFORBIDDEN, EPERM, "the name is another's");
}

int catalog_delete(struct app *a, const char *name, const char *viewer, int admin,
                   struct catalog_failure *f)
{
    struct store_dataset row = {0};
    struct store_err e = {0};
    struct stat st;
    int64_t jobs = 0;
    int dirfd, rc = -1, found, exists;

    memset(f, 0, sizeof *f);
    if (datadir_name_check(name)) {
        snprintf(f->detail, sizeof f->detail, "no dataset '%.60s'", name ? name : "");
        return catalog__fail(f, CATALOG_ENOTFOUND, ENOENT, "no such dataset");
    }
    if ((dirfd = catalog__open_data_dir(a)) < 0)
        return catalog__fail(f, CATALOG_EIO, errno, "the data directory cannot be opened");
    pthread_mutex_lock(&a->catalog->move);
    pthread_mutex_lock(&a->wlock);
    rc = store_dataset_get(a->writer, name, &row, &e);
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0 && rc != STORE_ENOTFOUND) {
        snprintf(f->detail, sizeof f->detail, "%s", e.msg);
        rc = catalog__fail(f, CATALOG_EIO, EIO, "the dataset's row cannot be read");
        goto out;
    }
    found = rc == 0;
    exists = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
    if (!found && !exists) {
        snprintf(f->detail, sizeof f->detail, "no dataset '%s'", name);
        rc = catalog__fail(f, CATALOG_ENOTFOUND, ENOENT, "no such dataset");
        goto out;
    }
    if ((rc = may_manage(found ? &row : NULL, name, viewer, admin, f)) < 0)
        goto out;
    pthread_mutex_lock(&a->wlock);
    rc = store_dataset_jobs(a->writer, name, &jobs, &e);
    if (rc == 0 && jobs == 0 && found &&
        (rc = store_dataset_delete(a->writer, name, &e)) == STORE_ENOTFOUND)
        rc = 0;
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0) {
        snprintf(f->detail, sizeof f->detail, "%s", e.msg);
        rc = catalog__fail(f, CATALOG_EIO, EIO, "the dataset's row cannot be removed");
        goto out;
    }
    if (jobs > 0) {
        snprintf(f->detail, sizeof f->detail, "dataset '%s' is used by %lld queued or "
                 "running job%s; delete it when they have ended", name, (long long)jobs,
                 jobs == 1 ? "" : "s");
        f->value = (uint64_t)jobs;
        rc = catalog__fail(f, CATALOG_EINUSE, EBUSY, "the dataset is in use");
        goto out;
    }
    if (exists && unlinkat(dirfd, name, 0) < 0 && errno != ENOENT) {
        rc = catalog__fail(f, CATALOG_EIO, errno, "the dataset's file cannot be removed");
        goto out;
    }
    fsync(dirfd);
    catalog__gc_versions(a, dirfd);
    rc = 0;
out:
    pthread_mutex_unlock(&a->catalog->move);
    store_dataset_clear(&row);
    close(dirfd);
    return rc;
}

int catalog_set_shared(struct app *a, const char *name, const char *viewer, int admin,
                       int shared, struct catalog_item *it, struct catalog_failure *f)
{
    struct store_dataset row = {0};
    struct store_err e = {0};
    int store_failed = 0, rc;

    memset(f, 0, sizeof *f);
    /* Read as its viewer sees it: that also stores the row of a file
       found in the directory. */
    if (catalog_get(a, name, viewer, admin, it, &store_failed, &e) < 0) {
        if (store_failed || errno != ENOENT) {
            snprintf(f->detail, sizeof f->detail, "%s", store_failed ? e.msg : "");
            return catalog__fail(f, CATALOG_EIO, store_failed ? EIO : errno,
                                 "the dataset cannot be read");
        }
        snprintf(f->detail, sizeof f->detail, "no dataset '%s'", name);
        return catalog__fail(f, CATALOG_ENOTFOUND, ENOENT, "no such dataset");
    }
    if (it->error) {
        catalog_item_clear(it);
        snprintf(f->detail, sizeof f->detail, "'%s' is not a dataset the reader takes",
                 name);
        return catalog__fail(f, CATALOG_EINVALID, 0, "the file is not a dataset");
    }
    pthread_mutex_lock(&a->catalog->move);
    pthread_mutex_lock(&a->wlock);
    if ((rc = store_dataset_get(a->writer, name, &row, &e)) < 0) {
        /* Gone since it was read. */
        snprintf(f->detail, sizeof f->detail, "no dataset '%s'", name);
        catalog__fail(f, CATALOG_ENOTFOUND, ENOENT, "no such dataset");
    } else if ((rc = may_manage(&row, name, viewer, admin, f)) == 0) {
        row.shared = shared != 0;
        if ((rc = store_dataset_put(a->writer, &row, &e)) < 0) {
            snprintf(f->detail, sizeof f->detail, "%s", e.msg);
            catalog__fail(f, CATALOG_EIO, EIO, "the dataset's row cannot be written");
        }
    }
    pthread_mutex_unlock(&a->wlock);
    pthread_mutex_unlock(&a->catalog->move);
    store_dataset_clear(&row);
    if (rc < 0) {
        catalog_item_clear(it);
        return -1;
    }
    it->ds.shared = shared != 0;
    return 0;
}

int catalog__quota_check(struct app *a, struct store *st, const char *owner, int new_name,
                         int64_t bytes, int64_t old_bytes, struct catalog_failure *f)
{
    struct store_err e = {0};
    int64_t names, held;

    if (!owner || !*owner)
        return 0;
    if (store_dataset_usage(st, owner, &names, &held, &e) < 0) {
        snprintf(f->detail, sizeof f->detail, "%s", e.msg);
        return catalog__fail(f, CATALOG_EIO, EIO, "the token's datasets cannot be counted");
    }
    if (new_name && names >= (int64_t)a->cfg.quota_dataset_names) {
        snprintf(f->detail, sizeof f->detail, "the token holds %lld dataset names, its "
                 "quota (quota_dataset_names %u); delete one (DELETE /v1/datasets/NAME) "
                 "or replace one", (long long)names, a->cfg.quota_dataset_names);
        f->value = a->cfg.quota_dataset_names;
        return catalog__fail(f, CATALOG_EQUOTA, EDQUOT, "quota_dataset_names");
    }
    if ((uint64_t)(held - old_bytes + bytes) > a->cfg.quota_dataset_bytes) {
        snprintf(f->detail, sizeof f->detail, "the token's datasets would take %lld bytes, "
                 "over its quota (quota_dataset_bytes %llu); it holds %lld", (long long)
                 (held - old_bytes + bytes), (unsigned long long)a->cfg.quota_dataset_bytes,
                 (long long)held);
        f->value = a->cfg.quota_dataset_bytes;
        return catalog__fail(f, CATALOG_EQUOTA, EDQUOT, "quota_dataset_bytes");
    }
    return 0;
}

/* Free bytes for an unprivileged writer on path's file system, or -1. */
static int64_t free_bytes(const char *path)
{
    struct statvfs vfs;

    if (statvfs(path, &vfs) < 0)
        return -1;
    return (int64_t)vfs.f_bavail * (int64_t)vfs.f_frsize;
}

int catalog_disk_check(struct app *a, struct catalog_failure *f)
{
    uint64_t floor_bytes = (uint64_t)a->cfg.min_free_disk * MB;
    char dbdir[sizeof a->cfg.db];
    const char *where = NULL;
    char *slash;
    int64_t fr;

    memset(f, 0, sizeof *f);
    if (!floor_bytes)
        return 0;
    snprintf(dbdir, sizeof dbdir, "%s", a->cfg.db);
    if ((slash = strrchr(dbdir, '/')))
        slash[slash == dbdir] = '\0';
    else
        snprintf(dbdir, sizeof dbdir, ".");
    if ((fr = free_bytes(a->cfg.data_dir)) >= 0 && (uint64_t)fr < floor_bytes)
        where = "the data directory";
    else if ((fr = free_bytes(dbdir)) >= 0 && (uint64_t)fr < floor_bytes)
        where = "the database";
    if (!where)
        return 0;
    snprintf(f->detail, sizeof f->detail, "%s has %lld MB free, below the floor of %u MB "
             "(min_free_disk): new jobs and uploads wait until space is freed",
             where, (long long)(fr / (int64_t)MB), a->cfg.min_free_disk);
    f->value = a->cfg.min_free_disk;
    return catalog__fail(f, CATALOG_EDISK, ENOSPC, "min_free_disk");
}
