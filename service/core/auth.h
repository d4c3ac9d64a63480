/*
 * Who may ask: bearer tokens from the tokens file, compared in constant
 * time, and the count of failed authentications per client address.
 */
#ifndef ECOPT_AUTH_H
#define ECOPT_AUTH_H

#include <pthread.h>
#include <stddef.h>

struct token {
    char name[64];
    char secret[128];
    int admin;
};

/* Failed authentications are counted per client address; past
 * AUTH_FAIL_MAX within AUTH_FAIL_WINDOW seconds the address is refused
 * (429) until the window has passed, which makes guessing tokens slow. */
#define AUTH_FAIL_SLOTS 256
#define AUTH_FAIL_MAX 20
#define AUTH_FAIL_WINDOW 60.0

struct auth_fail {
    char addr[64];
    double first;            /* monotonic seconds of the window's start */
    unsigned count;
};

struct auth {
    struct token *tokens;
    size_t n;
    int off;
    pthread_mutex_t fail_lock;
    struct auth_fail fails[AUTH_FAIL_SLOTS];
};

/* Lines "name:secret" or "name:secret:admin"; '#' starts a comment. */
int auth_load(struct auth *a, const char *path, char *err, size_t errlen);
void auth_free(struct auth *a);
/*
 * The token presented, compared in constant time against every known one
 * (the time does not depend on which, or whether, one matches). NULL when
 * none matches. With auth off, a fixed admin identity.
 */
const struct token *auth_check(const struct auth *a, const char *presented);
/* Seconds until addr may try again, or 0 when it is not blocked. */
double auth_blocked(struct auth *a, const char *addr);
void auth_failed(struct auth *a, const char *addr);

#endif
