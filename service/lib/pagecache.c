/*
 * The two caches of pagecache.h, on one kind of table: entries searched
 * linearly (128 are a few hundred nanoseconds), under one mutex, the least
 * recently used evicted. A metric page never goes stale (its generation is
 * always 0); a job document is found only under the generation it was
 * read at.
 */
#include "pagecache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char key[192];          /* the page's "id after limit every", or the id */
    char job[128];
    char owner[64];
    unsigned long long gen;
    char *body;             /* NULL: the entry is free */
    size_t len;
    uint64_t used;          /* the clock when last looked up or stored */
};

struct table {
    pthread_mutex_t mu;
    struct entry *e;
    size_t n;
    uint64_t clock;
    unsigned long long hits, misses;    /* lookups, for /metrics */
};

/* A copy of the body under key and gen, and its owner; NULL if none. */
static char *table_get(struct table *t, const char *key, unsigned long long gen,
                       char *owner, size_t ownerlen, size_t *len)
{
    char *copy = NULL;

    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->n; i++) {
        struct entry *e = &t->e[i];
        if (e->body && e->gen == gen && strcmp(e->key, key) == 0) {
            if ((copy = malloc(e->len + 1))) {
                memcpy(copy, e->body, e->len + 1);
                *len = e->len;
                snprintf(owner, ownerlen, "%s", e->owner);
                e->used = ++t->clock;
            }
            break;
        }
    }
    if (copy)
        t->hits++;
    else
        t->misses++;
    pthread_mutex_unlock(&t->mu);
    return copy;
}

/* Keeps a copy of body under key (replacing one there), unless it is too
   large, a name too long, or memory short. mu is held by the caller. */
static void table_put_locked(struct table *t, const char *key, const char *job,
                             const char *owner, unsigned long long gen,
                             const char *body, size_t len)
{
    struct entry *victim = NULL;
    char *copy;

    if (!owner || strlen(key) >= sizeof t->e[0].key || strlen(job) >= sizeof t->e[0].job ||
        strlen(owner) >= sizeof t->e[0].owner || len > PAGECACHE_MAX_ENTRY ||
        !(copy = malloc(len + 1)))
        return;
    memcpy(copy, body, len);
    copy[len] = '\0';
    for (size_t i = 0; i < t->n; i++) {
        struct entry *e = &t->e[i];
        if (e->body && strcmp(e->key, key) == 0) {
            victim = e;         /* the same key again: replace it */
            break;
        }
        if (!victim || !e->body || (victim->body && e->used < victim->used))
            victim = e;
    }
    free(victim->body);
    snprintf(victim->key, sizeof victim->key, "%s", key);
    snprintf(victim->job, sizeof victim->job, "%s", job);
    snprintf(victim->owner, sizeof victim->owner, "%s", owner);
    victim->gen = gen;
    victim->body = copy;
    victim->len = len;
    victim->used = ++t->clock;
}

/* ---- the object --------------------------------------------------------- */

struct pagecache {
    struct entry page_entries[PAGECACHE_ENTRIES];
    struct table pages;
    /* Jobs deleted lately: a reply rendered before the delete must not put
     * their pages back (ids are never reused). Under pages.mu. */
    char gone[256][128];
    size_t ngone;
    struct entry job_entries[JOBCACHE_ENTRIES];
    struct table jobs;
};

static void table_init(struct table *t, struct entry *e, size_t n)
{
    pthread_mutex_init(&t->mu, NULL);
    t->e = e;
    t->n = n;
}

static void table_destroy(struct table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->e[i].body);
    pthread_mutex_destroy(&t->mu);
}

struct pagecache *pagecache_new(void)
{
    struct pagecache *pc = calloc(1, sizeof *pc);

    if (!pc)
        return NULL;
    table_init(&pc->pages, pc->page_entries, PAGECACHE_ENTRIES);
    table_init(&pc->jobs, pc->job_entries, JOBCACHE_ENTRIES);
    return pc;
}

void pagecache_free(struct pagecache *pc)
{
    if (!pc)
        return;
    table_destroy(&pc->pages);
    table_destroy(&pc->jobs);
    free(pc);
}

/* ---- metric pages ------------------------------------------------------- */

static int make_key(char key[192], const char *job_id, long long after,
                    size_t limit, size_t every)
{
    int n = snprintf(key, 192, "%s %lld %zu %zu", job_id, after, limit, every);
    return n > 0 && n < 192 ? 0 : -1;
}

char *pagecache_get(struct pagecache *pc, const char *job_id, long long after,
                    size_t limit, size_t every, size_t *len, char *owner,
                    size_t ownerlen)
{
    char key[192];

    if (make_key(key, job_id, after, limit, every) < 0)
        return NULL;
    return table_get(&pc->pages, key, 0, owner, ownerlen, len);
}

void pagecache_put(struct pagecache *pc, const char *job_id, const char *owner,
                   long long after, size_t limit, size_t every, const char *body,
                   size_t len)
{
    char key[192];

    if (make_key(key, job_id, after, limit, every) < 0)
        return;
    pthread_mutex_lock(&pc->pages.mu);
    for (size_t i = 0; i < 256 && i < pc->ngone; i++) {
        if (strcmp(pc->gone[i], job_id) == 0) {
            pthread_mutex_unlock(&pc->pages.mu);
            return;
        }
    }
    table_put_locked(&pc->pages, key, job_id, owner, 0, body, len);
    pthread_mutex_unlock(&pc->pages.mu);
}

void pagecache_forget(struct pagecache *pc, const char *job_id)
{
    pthread_mutex_lock(&pc->pages.mu);
    snprintf(pc->gone[pc->ngone++ % 256], sizeof pc->gone[0], "%s", job_id);
    for (size_t i = 0; i < pc->pages.n; i++) {
        struct entry *e = &pc->pages.e[i];
        if (e->body && strcmp(e->job, job_id) == 0) {
            free(e->body);
            e->body = NULL;
            e->key[0] = '\0';
        }
    }
    pthread_mutex_unlock(&pc->pages.mu);
}

void pagecache_counts(struct pagecache *pc, unsigned long long *h,
                      unsigned long long *m)
{
    pthread_mutex_lock(&pc->pages.mu);
    *h = pc->pages.hits;
    *m = pc->pages.misses;
    pthread_mutex_unlock(&pc->pages.mu);
}

/* ---- job documents ------------------------------------------------------ */

char *jobcache_get(struct pagecache *pc, const char *job_id, unsigned long long gen,
                   char *owner, size_t ownerlen, size_t *len)
{
    return table_get(&pc->jobs, job_id, gen, owner, ownerlen, len);
}

void jobcache_put(struct pagecache *pc, const char *job_id, unsigned long long gen,
                  const char *owner, const char *body, size_t len)
{
    pthread_mutex_lock(&pc->jobs.mu);
    table_put_locked(&pc->jobs, job_id, job_id, owner, gen, body, len);
    pthread_mutex_unlock(&pc->jobs.mu);
}
