/*
 * Metric pages that can no longer change, kept as the bytes sent: a page
 * whose window was full (more rows came after it) or of a job that has
 * ended. Dashboards and scripts that page through a job fetch the same
 * pages again and again; those are then served without SQLite or any
 * formatting. Bounded in entries and bytes; least recently used goes.
 *
 * Each page keeps its job's owner, so a lookup needs no database read;
 * the caller checks that owner against the token and, when they differ,
 * goes the usual way (which answers 404).
 */
#ifndef ECOPT_PAGECACHE_H
#define ECOPT_PAGECACHE_H

#include <stddef.h>

/* One object holds both caches; each server (struct app) has its own, so
   two servers in one process never serve each other's pages. */
struct pagecache;
struct pagecache *pagecache_new(void);       /* NULL when out of memory */
void pagecache_free(struct pagecache *pc);   /* NULL is a no-op */

#define PAGECACHE_ENTRIES 128
#define PAGECACHE_MAX_ENTRY (512u << 10)    /* larger pages are not kept */

/* A copy of the page for this key (the caller frees it) and the job's
   owner, or NULL. */
char *pagecache_get(struct pagecache *pc, const char *job_id, long long after, size_t limit,
                    size_t every, size_t *len, char *owner, size_t ownerlen);
/* Keeps a copy; does nothing when the page is too large or memory short. */
void pagecache_put(struct pagecache *pc, const char *job_id, const char *owner, long long after,
                   size_t limit, size_t every, const char *body, size_t len);
/* Forgets every page of a job (it was deleted). */
void pagecache_forget(struct pagecache *pc, const char *job_id);
/* Hits and misses so far, for /metrics. */
void pagecache_counts(struct pagecache *pc, unsigned long long *hits, unsigned long long *misses);

/*
 * Job documents (GET /v1/jobs/{id}) as sent, each with the store
 * generation it was read under (store_gen_read) and its owner: valid
 * only while the generation has not moved, so any commit (progress, a
 * state change, a delete) retires them all at once. The caller still
 * checks the owner against the token.
 */
#define JOBCACHE_ENTRIES 64
char *jobcache_get(struct pagecache *pc, const char *job_id, unsigned long long gen, char *owner,
                   size_t ownerlen, size_t *len);
void jobcache_put(struct pagecache *pc, const char *job_id, unsigned long long gen, const char *owner,
                  const char *body, size_t len);

#endif
