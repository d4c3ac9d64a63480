/*
 * Who may ask: bearer tokens from the tokens file, compared in constant
 * time, reloaded on demand (SIGHUP) without a pause, and budgets of failed
 * authentications that make guessing a token slow from anywhere.
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
 * without a token is no guess and is not counted) are budgeted per
 * window of AUTH_FAIL_WINDOW seconds, counted from a budget's first
 * failure: AUTH_FAIL_MAX per client address, AUTH_FAIL_NET_MAX per
 * network (an IPv4 /24, an IPv6 /64, and all of loopback as one, since
 * 127.0.0.0/8 is one host's), and AUTH_FAIL_GLOBAL_MAX from everywhere.
 * Past any of them the requests it covers are refused (429) before any
 * comparison, until its window has passed, so a right guess is not told
 * apart. However many addresses the guesses come from, at most
 * AUTH_FAIL_GLOBAL_MAX are checked a minute: rotating addresses gains
 * nothing. The price is that a guesser can, by spending a network's or
 * the whole budget, lock out that network's (or everyone's) tokens for
 * the rest of the window; that is what it costs to bound guessing at all
 * when addresses are free.
 *
 * The tables are fixed arrays, and a slot is taken over only once its
 * window has passed, never while it blocks: since no more than
 * AUTH_FAIL_GLOBAL_MAX failures are counted in a window, and two windows
 * overlap any 60 s, 2 * AUTH_FAIL_GLOBAL_MAX slots are never all live.
 */
#define AUTH_FAIL_MAX 20
#define AUTH_FAIL_NET_MAX 100
#define AUTH_FAIL_GLOBAL_MAX 500
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
    struct auth_bucket addrs[AUTH_FAIL_SLOTS], nets[AUTH_FAIL_SLOTS], global;
    size_t naddrs, nnets;   /* slots ever used, from the first */
};

/* Which budget refused a client, for the 429. */
enum auth_limit { AUTH_LIMIT_NONE, AUTH_LIMIT_ADDRESS, AUTH_LIMIT_NETWORK,
                  AUTH_LIMIT_GLOBAL };

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
/* Seconds until addr may try again (and which budget it spent), or 0 when
 * it is not blocked. */
double auth_blocked(struct auth *a, const char *addr, enum auth_limit *which);
void auth_failed(struct auth *a, const char *addr);

#endif
