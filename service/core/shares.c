/* The shares of shares.h: a count per token and one in all, under a lock. */
#include "shares.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A token that holds some; the list is as long as the tokens that do. */
struct holder {
    struct holder *next;
    unsigned count;
    char name[64];
};

struct shares {
    pthread_mutex_t lock;
    unsigned per_token, total, open;
    struct holder *holders;
};

struct shares *shares_new(unsigned per_token, unsigned total)
{
    struct shares *s = calloc(1, sizeof *s);

    if (!s)
        return NULL;
    pthread_mutex_init(&s->lock, NULL);
    s->per_token = per_token;
    s->total = total;
    return s;
}

void shares_free(struct shares *s)
{
    if (!s)
        return;
    while (s->holders) {
        struct holder *h = s->holders;
        s->holders = h->next;
        free(h);
    }
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static struct holder **find(struct shares *s, const char *owner)
{
    struct holder **p = &s->holders;

    while (*p && strncmp((*p)->name, owner, sizeof (*p)->name - 1) != 0)
        p = &(*p)->next;
    return p;
}

enum shares_outcome shares_take(struct shares *s, const char *owner)
{
    enum shares_outcome out = SHARES_TAKEN;
    struct holder **p, *h;

    pthread_mutex_lock(&s->lock);
    p = find(s, owner);
    if ((h = *p) && h->count >= s->per_token) {
        out = SHARES_TOKEN_FULL;
    } else if (s->open >= s->total) {
        out = SHARES_SERVER_FULL;
    } else if (!h && !(h = calloc(1, sizeof *h))) {
        out = SHARES_SERVER_FULL;       /* out of memory: as good as full */
    } else {
        if (!*p) {
            snprintf(h->name, sizeof h->name, "%s", owner);
            *p = h;
        }
        h->count++;
        s->open++;
    }
    pthread_mutex_unlock(&s->lock);
    return out;
}

void shares_give(struct shares *s, const char *owner)
{
    struct holder **p, *h;

    pthread_mutex_lock(&s->lock);
    p = find(s, owner);
    if ((h = *p)) {
        s->open--;
        if (--h->count == 0) {
            *p = h->next;
            free(h);
        }
    }
    pthread_mutex_unlock(&s->lock);
}

unsigned shares_open(struct shares *s)
{
    unsigned n;

    pthread_mutex_lock(&s->lock);
    n = s->open;
    pthread_mutex_unlock(&s->lock);
    return n;
}

unsigned shares_per_token(const struct shares *s)
{
    return s->per_token;
}

unsigned shares_total(const struct shares *s)
{
    return s->total;
}
