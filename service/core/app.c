/*
 * The application's lifetime: the tokens, the database connections (one
 * writer, a pool of readers) and the caches, made and freed in order.
 */
#define _GNU_SOURCE
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "pagecache.h"
#include "shares.h"

int app_open(struct app *a, int *recovered, char *err, size_t errlen)
{
    struct store_err e = {0};

    *recovered = 0;
    pthread_mutex_init(&a->wlock, NULL);
    pthread_mutex_init(&a->rlock, NULL);
    pthread_cond_init(&a->rcond, NULL);
    auth_init(&a->auth, a->cfg.auth_off);
    if (!a->cfg.auth_off && auth_load(&a->auth, a->cfg.tokens_file, NULL, err, errlen) < 0)
        return -2;
    if (!(a->shares = shares_new(a->cfg.max_streams_per_token, a->cfg.max_streams))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (!(a->catalog = catalog_new(a->cfg.upload_validators, a->cfg.upload_queue,
                                          a->cfg.upload_per_token)) || !(a->pages = pagecache_new())) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    store_gen_init(&a->gen);
    if (!(a->writer = store_open(a->cfg.db, &e))) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    store_set_generation(a->writer, &a->gen);
    *recovered = store_recover(a->writer, "the service stopped while the job ran", &e);
    if (*recovered < 0) {
        snprintf(err, errlen, "%s", e.msg);
        return -1;
    }
    a->nreaders = a->cfg.threads + 1;
    a->readers = calloc(a->nreaders, sizeof *a->readers);
    a->reader_busy = calloc(a->nreaders, sizeof *a->reader_busy);
    if (!a->readers || !a->reader_busy) {
        a->nreaders = 0;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < a->nreaders; i++)
        if (!(a->readers[i] = store_open_reader(a->cfg.db, &e))) {
            snprintf(err, errlen, "%s", e.msg);
            a->nreaders = i;
            return -1;
        }
    return 0;
}

void app_close(struct app *a)
{
    for (size_t i = 0; i < a->nreaders; i++)
        store_close(a->readers[i]);
    free(a->readers);
    free(a->reader_busy);
    a->readers = NULL;
    a->nreaders = 0;
    store_close(a->writer);
    a->writer = NULL;
    pagecache_free(a->pages);
    catalog_free(a->catalog);
    a->pages = NULL;
    a->catalog = NULL;
    auth_free(&a->auth);
    shares_free(a->shares);
    a->shares = NULL;
}

int app_reload_tokens(struct app *a, char *msg, size_t len)
{
    char err[480];
    size_t n;

    if (a->cfg.auth_off) {
        snprintf(msg, len, "authentication is off: no tokens to reload");
        return 0;
    }
    if (auth_load(&a->auth, a->cfg.tokens_file, &n, err, sizeof err) < 0) {
        snprintf(msg, len, "%s; kept the tokens loaded before", err);
        return -1;
    }
    snprintf(msg, len, "%zu token%s loaded from %s", n, n == 1 ? "" : "s",
             a->cfg.tokens_file);
    return 0;
}
