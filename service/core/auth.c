/* Bearer tokens: loaded from a file, compared in constant time. */
#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecopt/clock.h"

int auth_load(struct auth *a, const char *path, char *err, size_t errlen)
{
    FILE *f;
    char line[512];
    unsigned lineno = 0;

    free(a->tokens);
    a->tokens = NULL;
    a->n = 0;
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
    a->tokens = NULL;
    a->n = 0;
}

/* The slot of addr, or NULL; the caller holds fail_lock. */
static struct auth_fail *find_slot(struct auth *a, const char *addr)
{
    for (size_t i = 0; i < AUTH_FAIL_SLOTS; i++)
        if (a->fails[i].count && strcmp(a->fails[i].addr, addr) == 0)
            return &a->fails[i];
    return NULL;
}

double auth_blocked(struct auth *a, const char *addr)
{
    double wait = 0, now = ec_clock();
    struct auth_fail *f;

    if (a->off || !addr)
        return 0;
    pthread_mutex_lock(&a->fail_lock);
    if ((f = find_slot(a, addr)) && now - f->first < AUTH_FAIL_WINDOW &&
        f->count >= AUTH_FAIL_MAX)
        wait = AUTH_FAIL_WINDOW - (now - f->first);
    pthread_mutex_unlock(&a->fail_lock);
    return wait;
}

void auth_failed(struct auth *a, const char *addr)
{
    double now = ec_clock();
    struct auth_fail *f;

    if (!addr)
        return;
    pthread_mutex_lock(&a->fail_lock);
    if (!(f = find_slot(a, addr))) {
        /* A free slot, or the one whose window started longest ago. */
        f = &a->fails[0];
        for (size_t i = 0; i < AUTH_FAIL_SLOTS; i++) {
            if (!a->fails[i].count) {
                f = &a->fails[i];
                break;
            }
            if (a->fails[i].first < f->first)
                f = &a->fails[i];
        }
        snprintf(f->addr, sizeof f->addr, "%s", addr);
        f->count = 0;
        f->first = now;
    }
    if (now - f->first >= AUTH_FAIL_WINDOW) {
        f->first = now;
        f->count = 0;
    }
    f->count++;
    pthread_mutex_unlock(&a->fail_lock);
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
