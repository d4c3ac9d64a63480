/*
 * The data directory on disk, as the catalog (service/core/catalog.c)
 * writes it and the coordinator (coord/data.c) reads it: datasets are
 * files directly inside it under checked names, and the versions folder
 * keeps every version a name has pointed at since a job or an upload used
 * it, as a file named by its SHA-256 that is never written again. A name
 * is a hard link to its current version; a job is given the version
 * (ecopt run --dataset-sha256), which cannot change under it. Errors are
 * -1 with errno, or a sentence for a name.
 */
#ifndef ECOPT_DATADIR_H
#define ECOPT_DATADIR_H

#include "sha256.h"

/* The versions folder inside the data directory. */
#define DATADIR_VERSIONS ".versions"
/* The longest dataset name. */
#define DATADIR_NAME_MAX 128

/*
 * NULL when name may name a dataset: 1..128 bytes of [A-Za-z0-9._-], not
 * starting with '.' (so never "." or "..", never a temporary file, never a
 * path). Otherwise the rule it breaks, as a sentence.
 */
const char *datadir_name_check(const char *name);

/* The SHA-256 of everything fd holds, read with pread from offset 0, as
   64 lowercase hex digits. 0, or -1 with errno. */
int datadir_hash_fd(int fd, char hex[SHA256_HEX_SIZE]);

/*
 * The versions folder of the data directory open as dirfd (O_NOFOLLOW),
 * or -1 with errno. With create, a missing folder is made, except in a
 * directory whose mode has no write bit, which is read-only by intent
 * even to root (EROFS): jobs then read the name and check its hash.
 */
int datadir_versions_open(int dirfd, int create);

#endif
