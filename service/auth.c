/* Bearer tokens: loaded from a file, compared in constant time. */
#include "app.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int auth_load(struct auth *a, const char *path, char *err, size_t errlen)
{
    FILE *f;
    char line[512];
    unsigned lineno = 0;

    memset(a, 0, sizeof *a);
    if (!(f = fopen(path, "r"))) {
        snprintf(err, errlen, "tokens file %s: %s", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f)) {
        char *name, *secret, *role, *save = NULL, *nl;
        struct token *t;

        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%s:%u: line longer than %zu bytes", path,
                     lineno, sizeof line - 2);
            goto fail;
        }
        if ((nl = strpbrk(line, "#\r\n")))
            *nl = '\0';
        name = strtok_r(line, ": \t", &save);
        if (!name)
            continue;
        secret = strtok_r(NULL, ": \t", &save);
        role = strtok_r(NULL, ": \t", &save);
        if (!secret || strlen(name) >= sizeof a->tokens->name ||
            strlen(secret) < 16 || strlen(secret) >= sizeof a->tokens->secret ||
            (role && strcmp(role, "admin") != 0)) {
            snprintf(err, errlen, "%s:%u: expected NAME:SECRET or NAME:SECRET:admin, "
                     "a name under 64 bytes and a secret of 16..127 bytes",
                     path, lineno);
            goto fail;
        }
        if (!(t = realloc(a->tokens, (a->n + 1) * sizeof *t))) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        a->tokens = t;
        t = &a->tokens[a->n++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, strlen(name));
        memcpy(t->secret, secret, strlen(secret));
        t->admin = role != NULL;
    }
    fclose(f);
    if (!a->n) {
        snprintf(err, errlen, "tokens file %s has no tokens", path);
        auth_free(a);
        return -1;
    }
    return 0;
fail:
    fclose(f);
    auth_free(a);
    return -1;
}

void auth_free(struct auth *a)
{
    free(a->tokens);
    memset(a, 0, sizeof *a);
}

/* Equal in time that depends only on the buffers' fixed size. */
static int equal_ct(const char *known, const char *presented)
{
    size_t plen = strlen(presented);
    unsigned char diff = (unsigned char)(plen >= sizeof ((struct token *)0)->secret);

    for (size_t i = 0; i < sizeof ((struct token *)0)->secret; i++) {
        unsigned char p = i < plen ? (unsigned char)presented[i] : 0;
        diff |= (unsigned char)known[i] ^ p;
    }
    return diff == 0;
}

const struct token *auth_check(const struct auth *a, const char *presented)
{
    static const struct token anonymous = {"anonymous", "", 1};
    const struct token *found = NULL;

    if (a->off)
        return &anonymous;
    if (!presented)
        return NULL;
    /* Every token is compared, so the time says nothing about which. */
    for (size_t i = 0; i < a->n; i++)
        if (equal_ct(a->tokens[i].secret, presented))
            found = &a->tokens[i];
    return found;
}
