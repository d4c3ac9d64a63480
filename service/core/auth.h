/*
 * Who may ask: bearer tokens from the tokens file, compared in constant
 * time, reloaded on demand (SIGHUP) without a pause, and a budget of
 * failed authentications per client address that answers its wrong
 * tokens 429 and never refuses a right one.
 */
#ifndef ECOPT_AUTH_H
#define ECOPT_AUTH_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#define AUTH_SECRET_MIN 16   /* bytes of a secret, at least */
#define AUTH_LINE_MAX 511    /* bytes of a line of the tokens file */

struct token {
    char name[64];
    char secret[128];
    int admin;
};

/*
 * Failed authentications (a token presented that no one holds; a request
 * without a token is no guess and is not counted) are budgeted per client
 * address: past AUTH_FAIL_MAX in a window of AUTH_FAIL_WINDOW seconds,
 * counted from the window's first failure, the address's wrong tokens are
 * answered 429 instead of 401 until the window has passed. The budget
 * refuses failing requests only: a token someone holds is always taken,
 * whatever others did from the same address (all of loopback, or a
 * reverse proxy, is one address). Secrets are long enough (auth_load) that
 * guessing one is no threat a budget would need to bound.
 *
 * The table is a fixed array, and a slot is taken over only once its
 * window has passed; when every slot is live, a new address is not
 * counted (it still gets 401).
 */
#define AUTH_FAIL_MAX 20
#define AUTH_FAIL_WINDOW 60.0
#define AUTH_FAIL_SLOTS 1024

struct auth_bucket {
    unsigned char key[16];  /* an IPv6 address, IPv4 ones mapped */
    double first;           /* monotonic seconds of the window's start */
    unsigned count;
};

struct auth_table;          /* one load of the tokens file */

struct auth {
    int off;
    /* The current table; its secrets are read under the read lock. */
    pthread_rwlock_t lock;
    struct auth_table *table;
    /* Tables a reload replaced: their names stay (a request in flight may
     * hold one), their secrets are wiped. Freed by auth_free. */
    struct auth_table *retired;
    pthread_mutex_t fail_lock;
    struct auth_bucket addrs[AUTH_FAIL_SLOTS];
    size_t naddrs;          /* slots ever used, from the first */
};

/* Before anything else: no tokens yet; off for a service without auth. */
void auth_init(struct auth *a, int off);
/*
 * Lines "name:secret" or "name:secret:admin"; '#' starts a comment. A
 * secret is AUTH_SECRET_MIN..127 bytes of what a bearer token can carry
 * (http_bearer_valid), and no two lines have the same secret. Loads the
 * file into a new table and, only when all of it is good, makes that the
 * current one: on failure (-1, a sentence in err naming the line, never
 * quoting a secret) the tokens stay as they were. Safe while requests are
 * checked; *count (may be NULL) is the number of tokens loaded.
 */
int auth_load(struct auth *a, const char *path, size_t *count, char *err, size_t errlen);
/* The same from an open stream; name stands for it in messages. */
int auth_load_stream(struct auth *a, FILE *f, const char *name, size_t *count, char *err,
                     size_t errlen);
void auth_free(struct auth *a);
/*
 * The token presented, compared in constant time against every known one
 * (the time does not depend on which, or whether, one matches). NULL when
 * none matches. With auth off, a fixed admin identity. The token stays
 * valid (its name and role) until auth_free, across reloads.
 */
const struct token *auth_check(struct auth *a, const char *presented);
/* The i-th token of the current table, or NULL past the last; for the
   tests (the table must not be reloaded meanwhile). */
const struct token *auth_token_at(struct auth *a, size_t i);
/* A wrong token from addr: counts it, and returns the seconds until addr's
 * wrong tokens are answered 401 again when its budget is spent, else 0. */
double auth_failed(struct auth *a, const char *addr);

#endif
