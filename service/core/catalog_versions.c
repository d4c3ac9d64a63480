/*
 * The versions folder of the data directory (catalog.h,
 * DATADIR_VERSIONS): each version a name or a job has used, kept as a
 * file named by its SHA-256.
 */
#define _GNU_SOURCE
#include "catalog_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


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
