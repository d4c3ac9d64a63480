/*
 * The page cache: a small table searched linearly (128 entries is a few
 * hundred nanoseconds), under one mutex, evicting the least recently used.
 */
#include "pagecache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct entry {
    char key[192];          /* "id after limit every"; "" when free */
    char job[128];
    char owner[64];
    char *body;
    size_t len;
    uint64_t used;          /* the clock when last looked up or stored */
};

static struct {
    pthread_mutex_t mu;
    struct entry e[PAGECACHE_ENTRIES];
    uint64_t clock;
    unsigned long long hits, misses;
    /* Jobs deleted lately: a reply rendered before the delete must not
     * put their pages back (ids are never reused). */
    char gone[256][128];
    size_t ngone;
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int make_key(char key[192], const char *job_id, long long after,
                    size_t limit, size_t every)
{
    int n = snprintf(key, 192, "%s %lld %zu %zu", job_id, after, limit, every);
    return n > 0 && n < 192 && strlen(job_id) < sizeof cache.e[0].job ? 0 : -1;
}

char *pagecache_get(const char *job_id, long long after, size_t limit,
                    size_t every, size_t *len, char *owner, size_t ownerlen)
{
    char key[192], *copy = NULL;

    if (make_key(key, job_id, after, limit, every) < 0)
        return NULL;
    pthread_mutex_lock(&cache.mu);
    for (size_t i = 0; i < PAGECACHE_ENTRIES; i++) {
        struct entry *e = &cache.e[i];
        if (e->body && strcmp(e->key, key) == 0) {
            if ((copy = malloc(e->len + 1))) {
                memcpy(copy, e->body, e->len + 1);
                *len = e->len;
                snprintf(owner, ownerlen, "%s", e->owner);
                e->used = ++cache.clock;
            }
            break;
        }
    }
    if (copy)
        cache.hits++;
    else
        cache.misses++;
    pthread_mutex_unlock(&cache.mu);
    return copy;
}

void pagecache_put(const char *job_id, const char *owner, long long after,
                   size_t limit, size_t every, const char *body, size_t len)
{
    char key[192], *copy;
    struct entry *victim = NULL;

    if (!owner || strlen(owner) >= sizeof cache.e[0].owner || len > PAGECACHE_MAX_ENTRY ||
        make_key(key, job_id, after, limit, every) < 0 || !(copy = malloc(len + 1)))
        return;
    memcpy(copy, body, len);
    copy[len] = '\0';
    pthread_mutex_lock(&cache.mu);
    for (size_t i = 0; i < 256 && i < cache.ngone; i++) {
        if (strcmp(cache.gone[i], job_id) == 0) {
            pthread_mutex_unlock(&cache.mu);
            free(copy);
            return;
        }
    }
    for (size_t i = 0; i < PAGECACHE_ENTRIES; i++) {
        struct entry *e = &cache.e[i];
        if (e->body && strcmp(e->key, key) == 0) {
            victim = e;             /* the same page again: replace it */
            break;
        }
        if (!victim || !e->body || (victim->body && e->used < victim->used))
            victim = e;
    }
    free(victim->body);
    snprintf(victim->key, sizeof victim->key, "%s", key);
    snprintf(victim->job, sizeof victim->job, "%s", job_id);
    snprintf(victim->owner, sizeof victim->owner, "%s", owner);
    victim->body = copy;
    victim->len = len;
    victim->used = ++cache.clock;
    pthread_mutex_unlock(&cache.mu);
}

void pagecache_forget(const char *job_id)
{
    pthread_mutex_lock(&cache.mu);
    snprintf(cache.gone[cache.ngone++ % 256], sizeof cache.gone[0], "%s", job_id);
    for (size_t i = 0; i < PAGECACHE_ENTRIES; i++) {
        struct entry *e = &cache.e[i];
        if (e->body && strcmp(e->job, job_id) == 0) {
            free(e->body);
            e->body = NULL;
            e->key[0] = '\0';
        }
    }
    pthread_mutex_unlock(&cache.mu);
}

void pagecache_counts(unsigned long long *hits, unsigned long long *misses)
{
    pthread_mutex_lock(&cache.mu);
    *hits = cache.hits;
    *misses = cache.misses;
    pthread_mutex_unlock(&cache.mu);
}

/* ---- job documents ------------------------------------------------------- */

struct job_entry {
    char id[128];
    char owner[64];
    unsigned long long gen;
    char *body;
    size_t len;
    uint64_t used;
};

static struct {
    pthread_mutex_t mu;
    struct job_entry e[JOBCACHE_ENTRIES];
    uint64_t clock;
} jobs = {.mu = PTHREAD_MUTEX_INITIALIZER};

char *jobcache_get(const char *job_id, unsigned long long gen, char *owner,
                   size_t ownerlen, size_t *len)
{
    char *copy = NULL;

    pthread_mutex_lock(&jobs.mu);
    for (size_t i = 0; i < JOBCACHE_ENTRIES; i++) {
        struct job_entry *e = &jobs.e[i];
        if (e->body && e->gen == gen && strcmp(e->id, job_id) == 0) {
            if ((copy = malloc(e->len + 1))) {
                memcpy(copy, e->body, e->len + 1);
                *len = e->len;
                snprintf(owner, ownerlen, "%s", e->owner);
                e->used = ++jobs.clock;
            }
            break;
        }
    }
    pthread_mutex_unlock(&jobs.mu);
    return copy;
}

void jobcache_put(const char *job_id, unsigned long long gen, const char *owner,
                  const char *body, size_t len)
{
    struct job_entry *victim = NULL;
    char *copy;

    if (strlen(job_id) >= sizeof jobs.e[0].id || strlen(owner) >= sizeof jobs.e[0].owner ||
        len > PAGECACHE_MAX_ENTRY || !(copy = malloc(len + 1)))
        return;
    memcpy(copy, body, len);
    copy[len] = '\0';
    pthread_mutex_lock(&jobs.mu);
    for (size_t i = 0; i < JOBCACHE_ENTRIES; i++) {
        struct job_entry *e = &jobs.e[i];
        if (e->body && strcmp(e->id, job_id) == 0) {
            victim = e;
            break;
        }
        if (!victim || !e->body || (victim->body && e->used < victim->used))
            victim = e;
    }
    free(victim->body);
    snprintf(victim->id, sizeof victim->id, "%s", job_id);
    snprintf(victim->owner, sizeof victim->owner, "%s", owner);
    victim->gen = gen;
    victim->body = copy;
    victim->len = len;
    victim->used = ++jobs.clock;
    pthread_mutex_unlock(&jobs.mu);
}
