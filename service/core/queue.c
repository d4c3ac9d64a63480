/* The queue's order and the reasons of queue.h: pure functions over what
 * the scheduler knows. */
#include "queue.h"

#include <stdlib.h>
#include <string.h>

static const char *const reason_names[] = {
#define QUEUE_REASON_NAME(id, name, meaning) name,
    QUEUE_REASONS(QUEUE_REASON_NAME)
#undef QUEUE_REASON_NAME
};

static const char *const reason_meanings[] = {
#define QUEUE_REASON_MEANING(id, name, meaning) meaning,
    QUEUE_REASONS(QUEUE_REASON_MEANING)
#undef QUEUE_REASON_MEANING
};

const char *queue_reason_name(enum queue_reason r)
{
    return (unsigned)r < QUEUE_REASON_COUNT ? reason_names[r] : NULL;
}

const char *queue_reason_meaning(enum queue_reason r)
{
    return (unsigned)r < QUEUE_REASON_COUNT ? reason_meanings[r] : NULL;
}

int queue_before(unsigned run_a, uint64_t at_a, unsigned run_b, uint64_t at_b)
{
    return run_a < run_b || (run_a == run_b && at_a < at_b);
}

/* A token with jobs in the queue, as the plan plays it forward. */
struct token_queue {
    const char *owner;
    unsigned running, running_now;
    uint64_t served_at;
    size_t head;                /* its oldest job not yet placed; n: none */
};

static int by_id(const void *a, const void *b)
{
    return strcmp(((const struct queue_place *)a)->id, ((const struct queue_place *)b)->id);
}

/* The token of the job placed next, or ntok when none has a job left:
 * those under cap first, by queue_before, then the oldest head. */
static size_t pick(const struct token_queue *t, size_t ntok, size_t n, unsigned cap)
{
    size_t best = ntok;
    int best_open = 0;

    for (size_t i = 0; i < ntok; i++) {
        int open = t[i].running < cap;

        if (t[i].head == n)
            continue;
        if (best == ntok || (open && !best_open) ||
            (open == best_open &&
             (queue_before(t[i].running, t[i].served_at, t[best].running, t[best].served_at) ||
              (!queue_before(t[best].running, t[best].served_at, t[i].running,
                             t[i].served_at) &&
               t[i].head < t[best].head)))) {
            best = i;
            best_open = open;
        }
    }
    return best;
}

int queue_plan(const struct store_queued *q, size_t n, const struct queue_owner *owners,
               size_t nowners, unsigned cap, struct queue_place *out)
{
    struct token_queue *t = calloc(n ? n : 1, sizeof *t);
    size_t *next = calloc(n ? n : 1, sizeof *next);
    size_t ntok = 0, newest = 0;
    uint64_t serves = 0;

    if (!t || !next) {
        free(t);
        free(next);
        return -1;
    }
    for (size_t k = 0; k < nowners; k++)
        if (owners[k].served_at > serves)
            serves = owners[k].served_at;
    /* The tokens, each with its jobs chained oldest first. */
    for (size_t i = n; i-- > 0;) {
        size_t k = 0;

        while (k < ntok && strcmp(t[k].owner, q[i].owner) != 0)
            k++;
        if (k == ntok) {
            t[k].owner = q[i].owner;
            t[k].head = n;
            for (size_t o = 0; o < nowners; o++)
                if (strcmp(owners[o].owner, q[i].owner) == 0) {
                    t[k].running = owners[o].running;
                    t[k].served_at = owners[o].served_at;
                }
            t[k].running_now = t[k].running;
            ntok++;
        }
        next[i] = t[k].head;
        t[k].head = i;
    }
    for (unsigned pos = 1; pos <= n; pos++) {
        size_t k = pick(t, ntok, n, cap), i = t[k].head;
        struct queue_place *p = &out[pos - 1];

        memcpy(p->id, q[i].id, sizeof p->id);
        p->position = pos;
        if (t[k].running_now >= cap)
            p->reason = QUEUE_TOKEN_LIMIT;
        else if (pos == 1)
            p->reason = QUEUE_RESOURCES;
        else if (newest > i)
            p->reason = QUEUE_FAIR_SHARE;     /* a newer job goes first */
        else
            p->reason = QUEUE_PRIORITY;
        if (i > newest)
            newest = i;
        t[k].head = next[i];
        t[k].running++;
        t[k].served_at = ++serves;
    }
    free(t);
    free(next);
    if (n)
        qsort(out, n, sizeof *out, by_id);
    return 0;
}

const struct queue_place *queue_find(const struct queue_place *plan, size_t n, const char *id)
{
    struct queue_place key;

    if (!plan || !id || strlen(id) > STORE_ID_LEN)
        return NULL;
    memset(&key, 0, sizeof key);
    memcpy(key.id, id, strlen(id));
    return n ? bsearch(&key, plan, n, sizeof *plan, by_id) : NULL;
}
