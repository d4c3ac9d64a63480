/* The data directory's layout of datadir.h: names, hashes, versions. */
#include "datadir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HASH_CHUNK ((size_t)1 << 18)    /* bytes read at a time to hash */

const char *datadir_name_check(const char *name)
{
    size_t n = name ? strlen(name) : 0;

    if (n == 0 || n > DATADIR_NAME_MAX)
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

int datadir_hash_fd(int fd, char hex[SHA256_HEX_SIZE])
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

int datadir_versions_open(int dirfd, int create)
{
    int fd = openat(dirfd, DATADIR_VERSIONS,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;

    if (fd >= 0 || errno != ENOENT || !create)
        return fd;
    if (fstat(dirfd, &st) == 0 && !(st.st_mode & 0222)) {
        errno = EROFS;
        return -1;
    }
    if (mkdirat(dirfd, DATADIR_VERSIONS, 0777) == 0 || errno == EEXIST)
        fd = openat(dirfd, DATADIR_VERSIONS,
                    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    return fd;
}
