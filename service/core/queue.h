/*
 * The queue's order and why each queued job waits: the scheduler's
 * fair-share rule (docs/api.md, "Why a job waits") as pure functions, so
 * that the scheduler picks by the same rule the API reports. No locks, no
 * store: the caller hands in what the scheduler knows.
 */
#ifndef ECOPT_QUEUE_H
#define ECOPT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/*
 * Why a queued job waits: the API's `reason` word of a queued job, and
 * the sentence the vocabulary gives for it.
 * X(ID, NAME, MEANING)
 */
#define QUEUE_REASONS(X)                                                      \
    X(QUEUE_RESOURCES, "resources",                                           \
      "it starts next, once a job slot (max_running) and its worker "        \
      "processes (max_total_workers) are free")                               \
    X(QUEUE_TOKEN_LIMIT, "token_limit",                                       \
      "its token already runs max_running_per_token jobs")                    \
    X(QUEUE_FAIR_SHARE, "fair_share",                                         \
      "a newer job of another token goes first: the slots go round "          \
      "between the tokens with jobs waiting")                                 \
    X(QUEUE_PRIORITY, "priority", "older jobs go first")

enum queue_reason {
#define QUEUE_REASON_ENUM(id, name, meaning) id,
    QUEUE_REASONS(QUEUE_REASON_ENUM)
#undef QUEUE_REASON_ENUM
    QUEUE_REASON_COUNT
};

const char *queue_reason_name(enum queue_reason r);    /* NULL out of range */
const char *queue_reason_meaning(enum queue_reason r);

/* What the rule needs of a token: its jobs running now, and when it last
 * had a job started, in slots given (0: never). */
struct queue_owner {
    char owner[64];
    unsigned running;
    uint64_t served_at;
};

/*
 * The fair-share rule between two tokens' oldest queued jobs: whether the
 * one whose token runs run_a jobs and was served at at_a starts before
 * the other's: fewer jobs running first, then served longer ago (never
 * first). Equal tokens keep their jobs' age order.
 */
int queue_before(unsigned run_a, uint64_t at_a, unsigned run_b, uint64_t at_b);

/* Where a queued job stands: 1-based position and why it waits. */
struct queue_place {
    char id[STORE_ID_LEN + 1];
    unsigned position;
    enum queue_reason reason;
};

/*
 * The order in which the scheduler will start the queued jobs q (oldest
 * first, n of them) when no running job ends first: queue_before applied
 * again and again, each start counting for its token, a token at cap
 * (max_running_per_token) passed over while another may start; when none
 * may, the rule alone (a job of theirs must end first). owners are the
 * tokens with jobs running or served (others count as none and never).
 * Fills out[n], sorted by id for queue_find. 0, or -1 out of memory.
 */
int queue_plan(const struct store_queued *q, size_t n, const struct queue_owner *owners,
               size_t nowners, unsigned cap, struct queue_place *out);
/* The place of job id in a plan, NULL when it is not queued. */
const struct queue_place *queue_find(const struct queue_place *plan, size_t n, const char *id);

#endif
