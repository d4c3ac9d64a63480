/*
 * How a run ended, in a word nobody can misread: the stop and the final
 * relative gap together (docs/api.md, "Outcomes"). A run whose gap ended
 * above its start's, or not finite, is never a success, whatever budget
 * stopped it. `ecopt run`, the service's jobs and the client's exit
 * statuses all come from this table.
 */
#ifndef ECOPT_OUTCOME_H
#define ECOPT_OUTCOME_H

#include "ecopt/run.h"

/*
 * The relative gap a run starts from: rel_gap divides by the start's gap,
 * so row 0 has 1 (or 0 when the start is already optimal, which reaches
 * any target at round 0: docs/api.md, "Metric rows").
 */
#define OUTCOME_START_REL_GAP 1.0

/*
 * X(ID, NAME, EXIT, MEANING)
 *   EXIT     the exit status of `ecopt run`, `ecopt watch` and
 *            `ecopt submit --watch` for it (docs/cli.md)
 *   MEANING  a sentence, for the API's vocabulary
 */
#define OUTCOMES(X)                                                         \
    X(OUTCOME_TARGET_REACHED, "target_reached", 0,                          \
      "the relative gap reached the target")                                \
    X(OUTCOME_BUDGET_EXHAUSTED, "budget_exhausted", 5,                      \
      "max_rounds or max_seconds ran out with the relative gap above the "  \
      "target but not above its start's (1)")                               \
    X(OUTCOME_WORSE_THAN_START, "worse_than_start", 3,                      \
      "the relative gap ended above its start's (1): a budget ran out or "  \
      "the gap grew past 1e6")                                              \
    X(OUTCOME_NON_FINITE, "non_finite", 3,                                  \
      "the objective, the gradient norm or the relative gap was not "       \
      "finite")                                                             \
    X(OUTCOME_CANCELLED, "cancelled", 3, "cancelled before it ended")       \
    X(OUTCOME_FAILED, "failed", 3,                                          \
      "the run did not end by a stop rule: a worker or the coordinator "    \
      "died, the job could not start, or the service stopped under it")

enum outcome {
#define OUTCOME_ENUM(id, name, exit, meaning) id,
    OUTCOMES(OUTCOME_ENUM)
#undef OUTCOME_ENUM
    OUTCOME_COUNT
};

/*
 * The outcome of a job that ended for stop_reason (the service's words:
 * target_reached, max_rounds, max_seconds, diverged, cancelled; any other
 * is failed) with final_rel_gap, its last row's relative gap (NaN when
 * not finite or unknown).
 */
enum outcome outcome_of(const char *stop_reason, double final_rel_gap);
/* The same for an engine's stop (ec_stop_name's words). */
enum outcome outcome_of_stop(ec_stop stop, double final_rel_gap);

/* "target_reached", ...; NULL when out of range. */
const char *outcome_name(enum outcome o);
const char *outcome_meaning(enum outcome o);
/* The exit status the command line gives it; 3 when out of range. */
int outcome_exit_status(enum outcome o);
/* 0 and *out, or -1 for a name not in the table (NULL included). */
int outcome_from_name(const char *name, enum outcome *out);

#endif
