/* How a run ended, from its stop and its final relative gap (outcome.h). */
#include "outcome.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name, *meaning;
    int exit_status;
} rows[OUTCOME_COUNT] = {
#define OUTCOME_ROW(id, name, exit, meaning) [id] = {name, meaning, exit},
    OUTCOMES(OUTCOME_ROW)
#undef OUTCOME_ROW
};

/* A budget ran out: what the gap says of the run. */
static enum outcome budget_end(double gap)
{
    if (!isfinite(gap))
        return OUTCOME_NON_FINITE;
    return gap > OUTCOME_START_REL_GAP ? OUTCOME_WORSE_THAN_START
                                       : OUTCOME_BUDGET_EXHAUSTED;
}

/* The engine stopped it as diverged: the gap over 1e6 times its start
 * (finite, so worse than the start), or a number not finite (the gap, or
 * the gradient norm while the gap stayed finite and below its start). */
static enum outcome diverged_end(double gap)
{
    return isfinite(gap) && gap > OUTCOME_START_REL_GAP ? OUTCOME_WORSE_THAN_START
                                                        : OUTCOME_NON_FINITE;
}

enum outcome outcome_of(const char *stop_reason, double final_rel_gap)
{
    if (!stop_reason)
        return OUTCOME_FAILED;
    if (strcmp(stop_reason, "target_reached") == 0)
        return OUTCOME_TARGET_REACHED;
    if (strcmp(stop_reason, "max_rounds") == 0 || strcmp(stop_reason, "max_seconds") == 0 ||
        strcmp(stop_reason, "quota") == 0)
        return budget_end(final_rel_gap);
    if (strcmp(stop_reason, "diverged") == 0)
        return diverged_end(final_rel_gap);
    if (strcmp(stop_reason, "cancelled") == 0)
        return OUTCOME_CANCELLED;
    return OUTCOME_FAILED;
}

enum outcome outcome_of_stop(ec_stop stop, double final_rel_gap)
{
    switch (stop) {
    case EC_STOP_TARGET:
        return OUTCOME_TARGET_REACHED;
    case EC_STOP_MAX_ROUNDS:
    case EC_STOP_MAX_SECONDS:
        return budget_end(final_rel_gap);
    case EC_STOP_DIVERGED:
        return diverged_end(final_rel_gap);
    case EC_STOP_CANCELLED:
        return OUTCOME_CANCELLED;
    case EC_STOP_FAILED:
        break;
    }
    return OUTCOME_FAILED;
}

const char *outcome_name(enum outcome o)
{
    return (unsigned)o < OUTCOME_COUNT ? rows[o].name : NULL;
}

const char *outcome_meaning(enum outcome o)
{
    return (unsigned)o < OUTCOME_COUNT ? rows[o].meaning : NULL;
}

int outcome_exit_status(enum outcome o)
{
    return (unsigned)o < OUTCOME_COUNT ? rows[o].exit_status : 3;
}

int outcome_from_name(const char *name, enum outcome *out)
{
    for (int i = 0; name && i < OUTCOME_COUNT; i++) {
        if (strcmp(name, rows[i].name) == 0) {
            *out = (enum outcome)i;
            return 0;
        }
    }
    return -1;
}
