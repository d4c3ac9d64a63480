/*
 * The versions folder of the data directory (catalog.h,
 * DATADIR_VERSIONS): each version a name or a job has used, kept as a
 * file named by its SHA-256.
 */
#define _GNU_SOURCE
#include "catalog_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app.h"

/*
 * Keeps the open file fd, whose SHA-256 is sha, as that version: a hard
 * link .versions/SHA to the very inode that was hashed (through
 * /proc/self/fd, so a name replaced meanwhile does not matter). A version
 * already kept stays as it is. Where it cannot be kept (a read-only data
 * directory), the job still runs on exactly that version or fails.
 */
void catalog__keep_version(int dirfd, int fd, const char *sha)
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

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void catalog__pin(struct catalog *c, const char *sha)
{
    pthread_mutex_lock(&c->mu);
    snprintf(c->pins[c->pin_next].sha256, sizeof c->pins[0].sha256, "%s", sha);
    c->pins[c->pin_next].at = mono_s();
    c->pin_next = (c->pin_next + 1) % CATALOG_PINS;
    pthread_mutex_unlock(&c->mu);
}

void catalog_unpin(struct app *a, const char *sha)
{
    struct catalog *c = a->catalog;

    if (!sha || !*sha)
        return;
    pthread_mutex_lock(&c->mu);
    for (size_t k = 1; k <= CATALOG_PINS; k++) {
        struct catalog_pin *p = &c->pins[(c->pin_next + CATALOG_PINS - k) % CATALOG_PINS];

        if (p->at > 0 && strcmp(p->sha256, sha) == 0) {
            p->at = 0;          /* one submit's: the newest */
            break;
        }
    }
    pthread_mutex_unlock(&c->mu);
}

/* Whether a submit took sha within the grace; c->mu held. */
static int pinned(const struct catalog *c, const char *sha, double now)
{
    for (size_t i = 0; i < CATALOG_PINS; i++)
        if (c->pins[i].at > 0 && now - c->pins[i].at < CATALOG_PIN_GRACE &&
            strcmp(c->pins[i].sha256, sha) == 0)
            return 1;
    return 0;
}

static int is_version_name(const char *s)
{
    size_t n = 0;

    for (; s[n]; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == SHA256_HEX_SIZE - 1;
}

static int in_list(char (*list)[65], size_t n, const char *sha)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], sha) == 0)
            return 1;
    return 0;
}

/*
 * Every version in the folder that no name's row and no queued or running
 * job refers to (store_versions_in_use) is removed: a name replaced fifty
 * times keeps one file, not fifty; an ended job's version goes with the
 * last name that held it. The caller holds the move lock, so no upload's
 * version appears between the list and the unlinks. A version a submit
 * has just taken (catalog__pin) is spared too: its job's row, which
 * refers to it, is not yet written.
 */
int catalog__gc_versions(struct app *a, int dirfd)
{
    char (*keep)[65] = NULL;
    struct store_err e = {0};
    struct dirent *de;
    size_t nkeep = 0;
    DIR *dir;
    double now;
    int vfd, rc, removed = 0;

    pthread_mutex_lock(&a->wlock);
    rc = store_versions_in_use(a->writer, &keep, &nkeep, &e);
    pthread_mutex_unlock(&a->wlock);
    if (rc < 0) {
        fprintf(stderr, "datasets: versions not collected: %s\n", e.msg);
        return -1;
    }
    vfd = openat(dirfd, DATADIR_VERSIONS, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (vfd < 0 || !(dir = fdopendir(vfd))) {
        if (vfd >= 0)
            close(vfd);
        free(keep);
        return 0;
    }
    now = mono_s();
    pthread_mutex_lock(&a->catalog->mu);
    while ((de = readdir(dir)))
        if (is_version_name(de->d_name) && !in_list(keep, nkeep, de->d_name) &&
            !pinned(a->catalog, de->d_name, now) && unlinkat(vfd, de->d_name, 0) == 0)
            removed++;
    pthread_mutex_unlock(&a->catalog->mu);
    closedir(dir);
    free(keep);
    return removed;
}
