/*
 * Fair shares of the server's connections: a stream (SSE) or a long-poll
 * holds its connection for as long as it lasts, so each token may hold
 * only so many at once, and all tokens together fewer than the server's
 * connections, so that the rest (/livez and /readyz among them) are
 * always answered.
 */
#ifndef ECOPT_SHARES_H
#define ECOPT_SHARES_H

struct shares;

enum shares_outcome {
    SHARES_TAKEN,
    SHARES_TOKEN_FULL,      /* the token holds per_token already */
    SHARES_SERVER_FULL      /* all tokens together hold total */
};

/* NULL when out of memory. */
struct shares *shares_new(unsigned per_token, unsigned total);
void shares_free(struct shares *s);     /* NULL is a no-op */

/* One more for the token named owner, unless a limit says no. Any thread. */
enum shares_outcome shares_take(struct shares *s, const char *owner);
/* Gives back one that shares_take took for owner. */
void shares_give(struct shares *s, const char *owner);

unsigned shares_open(struct shares *s);          /* held now, in all */
unsigned shares_per_token(const struct shares *s);
unsigned shares_total(const struct shares *s);

#endif
