/*
 * SHA-256 (FIPS 180-4), streaming: a dataset's identity is the digest of
 * its bytes, computed as an upload arrives or as a file is read, with no
 * dependency beyond libc.
 */
#ifndef ECOPT_SHA256_H
#define ECOPT_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32
#define SHA256_HEX_SIZE 65          /* 64 lowercase hex digits and a NUL */

/* Plain data; sha256_init makes it ready. */
struct sha256 {
    uint32_t state[8];
    uint64_t length;                /* bytes hashed so far */
    unsigned char block[64];
    size_t fill;                    /* bytes waiting in block */
};

void sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *data, size_t len);
/* The digest; h must be initialised again before it is reused. */
void sha256_final(struct sha256 *h, unsigned char out[SHA256_DIGEST_SIZE]);
/* The same, as 64 lowercase hex digits and a NUL. */
void sha256_final_hex(struct sha256 *h, char out[SHA256_HEX_SIZE]);

#endif
