/*
 * Whether a waiting process spins before it sleeps, decided by whether
 * spinning has paid (docs/architecture.md, "How a job runs"). A spin
 * pays when the message comes before it ends; a receive whose data is
 * already there is no spin. Out of every EC_SPIN_WINDOW spins, if fewer
 * than half paid (on a busy machine the peer waits for a CPU, and the
 * spin only takes one from it), the next EC_SPIN_REST waits block at once;
 * then spinning is tried again. Each process keeps its own.
 */
#ifndef ECOPT_SPIN_H
#define ECOPT_SPIN_H

#include <stdint.h>

#define EC_SPIN_WINDOW 32
#define EC_SPIN_REST 512

typedef struct {
    uint32_t spins, paid;   /* in this window */
    uint32_t resting;       /* waits left without spinning */
    uint64_t windows, rests;
} ec_spin;

/* Whether this wait spins (1) or blocks at once (0); a wait that blocks
   while resting counts down the rest. */
int ec_spin_now(ec_spin *s);
/* A spin ended: paid when the message came before it was over. */
void ec_spin_done(ec_spin *s, int paid);

#endif
