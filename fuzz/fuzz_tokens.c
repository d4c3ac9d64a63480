/*
 * libFuzzer target for the tokens file (auth_load_stream): any bytes as
 * the file. Besides not crashing: a refusal is a sentence that names the
 * file and keeps the tokens loaded before; an accepted file gives tokens
 * whose secrets are AUTH_SECRET_MIN..127 bytes a bearer header can carry,
 * each different, and each secret authenticates as its own token and no
 * other.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "http.h"

static const char before[] = "before:before-secret-0123456789\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct auth a;
    FILE *f;
    char err[512] = "";
    size_t n = 0;
    const struct token *t;

    auth_init(&a, 0);
    if (!(f = fmemopen((void *)before, sizeof before - 1, "r")) ||
        auth_load_stream(&a, f, "before", NULL, err, sizeof err) < 0)
        abort();
    fclose(f);
    if (!size)
        goto out;                   /* fmemopen refuses a size of 0 */
    if (!(f = fmemopen((void *)data, size, "r")))
        abort();
    if (auth_load_stream(&a, f, "tokens", &n, err, sizeof err) < 0) {
        fclose(f);
        if (!strstr(err, "tokens") && strcmp(err, "out of memory") != 0)
            abort();                /* a refusal names the file */
        if (!(t = auth_check(&a, "before-secret-0123456789")) ||
            strcmp(t->name, "before") != 0)
            abort();                /* and keeps the tokens of before */
        goto out;
    }
    fclose(f);
    if (!n || auth_check(&a, "before-secret-0123456789") || auth_token_at(&a, n))
        abort();                    /* replaced, not merged, n of them */
    /* Every token, found by its own secret and by no one else's. */
    for (size_t i = 0; i < n; i++) {
        char secret[128];
        const struct token *mine;

        if (!(mine = auth_token_at(&a, i)))
            abort();
        memcpy(secret, mine->secret, sizeof secret);
        if (strlen(secret) < AUTH_SECRET_MIN || strlen(secret) > 127 ||
            !http_bearer_valid(secret, strlen(secret)) || !mine->name[0])
            abort();
        if (auth_check(&a, secret) != mine)
            abort();
    }
out:
    auth_free(&a);
    return 0;
}
