/*
 * The validation pool of validation.h: a queue of work, `validators`
 * threads that run it, a counting slot for every validator process (the
 * threads' and their callers'), and the admission counts per token.
 */
#include "validation.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct work {
    vpool_fn fn;
    void *arg;
    struct work *next;
};

struct admitted {
    char token[64];
    unsigned n;
};

struct vpool {
    pthread_mutex_t mu;
    pthread_cond_t more;            /* work queued, or stopping */
    pthread_cond_t slot;            /* a validator slot came free */
    struct work *head, *tail;
    unsigned validators, busy;      /* slots, and those taken */
    unsigned queue, in_progress;    /* admitted uploads, all tokens */
    unsigned per_token;
    struct admitted *tok;           /* tokens with uploads in progress */
    size_t ntok, captok;
    int stopping;
    atomic_int cancel;
    pthread_t *threads;
    unsigned nthreads;
};

static void take_locked(struct vpool *p)
{
    while (p->busy >= p->validators)
        pthread_cond_wait(&p->slot, &p->mu);
    p->busy++;
}

static void give_locked(struct vpool *p)
{
    p->busy--;
    pthread_cond_signal(&p->slot);
}

static void *worker(void *arg)
{
    struct vpool *p = arg;

    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct work *w;

        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->more, &p->mu);
        if (!(w = p->head))
            break;              /* stopping, and nothing left to answer */
        if (!(p->head = w->next))
            p->tail = NULL;
        take_locked(p);
        pthread_mutex_unlock(&p->mu);
        w->fn(w->arg, &p->cancel);
        free(w);
        pthread_mutex_lock(&p->mu);
        give_locked(p);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct vpool *vpool_new(unsigned validators, unsigned queue, unsigned per_token)
{
    struct vpool *p = calloc(1, sizeof *p);

    if (!p)
        return NULL;
    p->validators = validators ? validators : VALIDATION_VALIDATORS_DEFAULT;
    p->queue = queue ? queue : VALIDATION_QUEUE_DEFAULT;
    p->per_token = per_token ? per_token : VALIDATION_PER_TOKEN_DEFAULT;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->more, NULL);
    pthread_cond_init(&p->slot, NULL);
    atomic_init(&p->cancel, 0);
    if (!(p->threads = calloc(p->validators, sizeof *p->threads))) {
        vpool_free(p);
        return NULL;
    }
    for (; p->nthreads < p->validators; p->nthreads++)
        if (pthread_create(&p->threads[p->nthreads], NULL, worker, p) != 0) {
            vpool_stop(p);
            vpool_free(p);
            return NULL;
        }
    return p;
}

void vpool_stop(struct vpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    atomic_store(&p->cancel, 1);
    pthread_cond_broadcast(&p->more);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    p->nthreads = 0;
}

void vpool_free(struct vpool *p)
{
    if (!p)
        return;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->more);
    pthread_cond_destroy(&p->slot);
    free(p->threads);
    free(p->tok);
    free(p);
}

static struct admitted *find_token(struct vpool *p, const char *token)
{
    for (size_t i = 0; i < p->ntok; i++)
        if (strcmp(p->tok[i].token, token) == 0)
            return &p->tok[i];
    return NULL;
}

const char *vpool_admit(struct vpool *p, const char *token, int *status,
                        unsigned *value)
{
    struct admitted *t;
    const char *over = NULL;

    token = token ? token : "";
    pthread_mutex_lock(&p->mu);
    t = find_token(p, token);
    if (p->stopping) {
        over = "upload_queue";
        *status = 503;
        *value = p->queue;
    } else if (t && t->n >= p->per_token) {
        over = "upload_per_token";
        *status = 429;
        *value = p->per_token;
    } else if (p->in_progress >= p->queue) {
        over = "upload_queue";
        *status = 503;
        *value = p->queue;
    } else if (!t && p->ntok == p->captok) {
        size_t cap = p->captok ? 2 * p->captok : 8;
        struct admitted *grown = realloc(p->tok, cap * sizeof *grown);

        if (grown) {
            p->tok = grown;
            p->captok = cap;
        } else {
            over = "upload_queue";      /* out of memory: as if full */
            *status = 503;
            *value = p->queue;
        }
    }
    if (!over) {
        if (!t) {
            t = &p->tok[p->ntok++];
            snprintf(t->token, sizeof t->token, "%s", token);
            t->n = 0;
        }
        t->n++;
        p->in_progress++;
    }
    pthread_mutex_unlock(&p->mu);
    return over;
}

void vpool_leave(struct vpool *p, const char *token)
{
    struct admitted *t;

    pthread_mutex_lock(&p->mu);
    if ((t = find_token(p, token ? token : "")) && --t->n == 0)
        *t = p->tok[--p->ntok];
    if (p->in_progress)
        p->in_progress--;
    pthread_mutex_unlock(&p->mu);
}

int vpool_submit(struct vpool *p, vpool_fn fn, void *arg)
{
    struct work *w = malloc(sizeof *w);

    if (!w)
        return -1;
    w->fn = fn;
    w->arg = arg;
    w->next = NULL;
    pthread_mutex_lock(&p->mu);
    if (p->stopping) {
        pthread_mutex_unlock(&p->mu);
        free(w);
        return -1;
    }
    if (p->tail)
        p->tail->next = w;
    else
        p->head = w;
    p->tail = w;
    pthread_cond_signal(&p->more);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

const atomic_int *vpool_slot_take(struct vpool *p)
{
    pthread_mutex_lock(&p->mu);
    take_locked(p);
    pthread_mutex_unlock(&p->mu);
    return &p->cancel;
}

void vpool_slot_give(struct vpool *p)
{
    pthread_mutex_lock(&p->mu);
    give_locked(p);
    pthread_mutex_unlock(&p->mu);
}
