/*
 * SHA-256, streaming: a dataset's identity is the digest of its bytes,
 * computed as an upload arrives or as a file is read. The hashing is
 * nettle's (GnuTLS's own library, which libmicrohttpd already loads);
 * this header keeps ecopt's names and the hex form.
 */
#ifndef ECOPT_SHA256_H
#define ECOPT_SHA256_H

#include <stddef.h>

#include <nettle/sha2.h>

/* nettle spells its functions sha256_init and sha256_update as macros
   for nettle_sha256_init and nettle_sha256_update; ecopt's functions of
   those names follow, so the short macros go (sha256.c calls nettle by
   its real names). SHA256_DIGEST_SIZE (32) is nettle's. */
#undef sha256_init
#undef sha256_update

#define SHA256_HEX_SIZE 65          /* 64 lowercase hex digits and a NUL */

/* Plain data (nettle's context); sha256_init makes it ready. */
struct sha256 {
    struct sha256_ctx ctx;
};

void sha256_init(struct sha256 *h);
void sha256_update(struct sha256 *h, const void *data, size_t len);
/* The digest; h must be initialised again before it is reused. */
void sha256_final(struct sha256 *h, unsigned char out[SHA256_DIGEST_SIZE]);
/* The same, as 64 lowercase hex digits and a NUL. */
void sha256_final_hex(struct sha256 *h, char out[SHA256_HEX_SIZE]);

#endif
