/* ecopt's SHA-256 calls, on nettle's implementation. */
#include "sha256.h"

void sha256_init(struct sha256 *h)
{
    nettle_sha256_init(&h->ctx);
}

void sha256_update(struct sha256 *h, const void *data, size_t len)
{
    nettle_sha256_update(&h->ctx, len, data);
}

void sha256_final(struct sha256 *h, unsigned char out[SHA256_DIGEST_SIZE])
{
    nettle_sha256_digest(&h->ctx, SHA256_DIGEST_SIZE, out);
}

void sha256_final_hex(struct sha256 *h, char out[SHA256_HEX_SIZE])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char d[SHA256_DIGEST_SIZE];

    sha256_final(h, d);
    for (int i = 0; i < SHA256_DIGEST_SIZE; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * SHA256_DIGEST_SIZE] = '\0';
}
