/*
 * Bearer tokens: loaded from a file into a table, compared in constant
 * time, and replaced by a new table on reload (see auth.h).
 */
#define _GNU_SOURCE
#include "auth.h"

#include "http.h"

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

/* Line of the token in tab whose secret is secret, or 0. */
static unsigned secret_line(const struct auth_table *tab, const unsigned *lines,
                            const char *secret)
{
    for (size_t i = 0; i < tab->n; i++)
        if (strcmp(tab->tokens[i].secret, secret) == 0)
            return lines[i];
    return 0;
}

/*
 * The text of a tokens file (name says where it is from, in messages) as
 * a new table, or NULL with a sentence in err. Every secret is one a
 * request can present (the bearer parser's characters) and no secret is
 * there twice: a second entry would make its holder whoever comes last.
 * No message quotes a secret.
 */
static struct auth_table *table_read(FILE *f, const char *name, char *err, size_t errlen)
{
    struct auth_table *tab = calloc(1, sizeof *tab);
    unsigned *lines = NULL;         /* the line of each token, for messages */
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    unsigned lineno = 0;

    if (!tab) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        char *tname, *secret, *role, *save = NULL, *nl;
        struct token *t;
        unsigned *l, dup;

        lineno++;
        if (len > AUTH_LINE_MAX) {
            snprintf(err, errlen, "%s:%u: line longer than %d bytes", name, lineno,
                     AUTH_LINE_MAX);
            goto fail;
        }
        if (memchr(line, '\0', (size_t)len)) {
            snprintf(err, errlen, "%s:%u: the line holds a NUL byte", name, lineno);
            goto fail;
        }
        if ((nl = strpbrk(line, "#\r\n")))
            *nl = '\0';
        tname = strtok_r(line, ": \t", &save);
        if (!tname)
            continue;
        secret = strtok_r(NULL, ": \t", &save);
        role = strtok_r(NULL, ": \t", &save);
        if (!secret || strlen(tname) >= sizeof tab->tokens->name ||
            strlen(secret) < AUTH_SECRET_MIN || strlen(secret) >= sizeof tab->tokens->secret ||
            (role && strcmp(role, "admin") != 0) || strtok_r(NULL, ": \t", &save)) {
            snprintf(err, errlen, "%s:%u: expected NAME:SECRET or NAME:SECRET:admin, "
                     "a name under 64 bytes and a secret of %d..127 bytes",
                     name, lineno, AUTH_SECRET_MIN);
            goto fail;
        }
        if (!http_bearer_valid(secret, strlen(secret))) {
            snprintf(err, errlen, "%s:%u: the secret of '%s' holds a character a bearer "
                     "token cannot carry: only A-Z a-z 0-9 and - . _ ~ + / = are allowed",
                     name, lineno, tname);
            goto fail;
        }
        if ((dup = secret_line(tab, lines, secret))) {
            snprintf(err, errlen, "%s:%u: the secret of '%s' is also the secret on line "
                     "%u: each token needs a secret of its own", name, lineno, tname, dup);
            goto fail;
        }
        if ((t = realloc(tab->tokens, (tab->n + 1) * sizeof *t)))
            tab->tokens = t;
        if ((l = realloc(lines, (tab->n + 1) * sizeof *l)))
            lines = l;
        if (!t || !l) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        lines[tab->n] = lineno;
        t = &tab->tokens[tab->n++];
        memset(t, 0, sizeof *t);
        memcpy(t->name, tname, strlen(tname));
        memcpy(t->secret, secret, strlen(secret));
        t->admin = role != NULL;
    }
    if (line)
        explicit_bzero(line, cap);
    free(line);
    free(lines);
    if (!tab->n) {
        snprintf(err, errlen, "tokens file %s has no tokens", name);
        table_free(tab);
        return NULL;
    }
    return tab;
fail:
    if (line)
        explicit_bzero(line, cap);
    free(line);
    free(lines);
    table_free(tab);
    return NULL;
}

int auth_load(struct auth *a, const char *path, size_t *count, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    int rc;

    if (!f) {
        snprintf(err, errlen, "tokens file %s: %s", path, strerror(errno));
        return -1;
    }
    rc = auth_load_stream(a, f, path, count, err, errlen);
    fclose(f);
    return rc;
}

int auth_load_stream(struct auth *a, FILE *f, const char *name, size_t *count, char *err,
                     size_t errlen)
{
    struct auth_table *tab = table_read(f, name, err, errlen), *old;

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

const struct token *auth_token_at(struct auth *a, size_t i)
{
    const struct token *t;

    pthread_rwlock_rdlock(&a->lock);
    t = a->table && i < a->table->n ? &a->table->tokens[i] : NULL;
    pthread_rwlock_unlock(&a->lock);
    return t;
}
