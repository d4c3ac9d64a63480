/*
 * Bearer tokens: loaded from a file into a table, compared in constant
 * time, and replaced by a new table on reload (see auth.h).
 */
#define _GNU_SOURCE
#include "auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct auth_table {
    struct token *tokens;
    size_t n;
    struct auth_table *next;        /* in the retired list */
};

void auth_init(struct auth *a, int off)
{
    pthread_rwlockattr_t attr;

    memset(a, 0, sizeof *a);
    a->off = off;
    /* A reload waits for the checks in progress, not for every later one. */
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&a->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    pthread_mutex_init(&a->fail_lock, NULL);
}

static void table_free(struct auth_table *t)
{
    if (!t)
        return;
    if (t->tokens)              /* a table read from a bad file may have none */
        explicit_bzero(t->tokens, t->n * sizeof *t->tokens);
    free(t->tokens);
    free(t);
}

/* The file as a new table, or NULL with a sentence in err. */
static struct auth_table *table_read(const char *path, char *err, size_t errlen)
{
    struct auth_table *tab = calloc(1, sizeof *tab);
    FILE *f;
    char line[512];
    unsigned lineno = 0;

    if (!tab) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (!(f = fopen(path, "re"))) {
        snprintf(err, errlen, "tokens file %s: %s", path, strerror(errno));
        free(tab);
        return NULL;
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
        if (!secret || strlen(name) >= sizeof tab->tokens->name ||
            strlen(secret) < 16 || strlen(secret) >= sizeof tab->tokens->secret ||
            (role && strcmp(role, "admin") != 0)) {
            snprintf(err, errlen, "%s:%u: expected NAME:SECRET or NAME:SECRET:admin, "
                     "a name under 64 bytes and a secret of 16..127 bytes",
                     path, lineno);
            goto fail;
        }
        if (!(t = realloc(tab->tokens, (tab->n + 1) * sizeof *t))) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        tab->tokens = t;
        t = &tab->tokens[tab->n++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, name, strlen(name));
        memcpy(t->secret, secret, strlen(secret));
        t->admin = role != NULL;
    }
    explicit_bzero(line, sizeof line);
    fclose(f);
    if (!tab->n) {
        snprintf(err, errlen, "tokens file %s has no tokens", path);
        table_free(tab);
        return NULL;
    }
    return tab;
fail:
    explicit_bzero(line, sizeof line);
    fclose(f);
    table_free(tab);
    return NULL;
}

int auth_load(struct auth *a, const char *path, size_t *count, char *err, size_t errlen)
{
    struct auth_table *tab = table_read(path, err, errlen), *old;

    if (!tab)
        return -1;
    if (count)
        *count = tab->n;
    /*
     * The swap is the only write: checks in progress finish on the old
     * table (they hold the read lock), later ones see the new. Once the
     * write lock is ours no check reads the old secrets, so they are
     * wiped; the names stay, for the requests that hold one.
     */
    pthread_rwlock_wrlock(&a->lock);
    old = a->table;
    a->table = tab;
    if (old) {
        for (size_t i = 0; i < old->n; i++)
            explicit_bzero(old->tokens[i].secret, sizeof old->tokens[i].secret);
        old->next = a->retired;
        a->retired = old;
    }
    pthread_rwlock_unlock(&a->lock);
    return 0;
}

void auth_free(struct auth *a)
{
    table_free(a->table);
    a->table = NULL;
    while (a->retired) {
        struct auth_table *t = a->retired;
        a->retired = t->next;
        table_free(t);
    }
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

const struct token *auth_check(struct auth *a, const char *presented)
{
    static const struct token anonymous = {"anonymous", "", 1};
    const struct token *found = NULL;

    if (a->off)
        return &anonymous;
    if (!presented || !*presented)
        return NULL;
    pthread_rwlock_rdlock(&a->lock);
    /* Every token is compared, so the time says nothing about which. */
    for (size_t i = 0; a->table && i < a->table->n; i++)
        if (equal_ct(a->table->tokens[i].secret, presented))
            found = &a->table->tokens[i];
    pthread_rwlock_unlock(&a->lock);
    return found;
}
