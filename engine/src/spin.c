/* The spin policy of ecopt/spin.h: counts over a window, then a rest. */
#include "ecopt/spin.h"

int ec_spin_now(ec_spin *s)
{
    if (s->resting > 0) {
        s->resting--;
        return 0;
    }
    return 1;
}

void ec_spin_done(ec_spin *s, int paid)
{
    s->spins++;
    s->paid += paid != 0;
    if (s->spins < EC_SPIN_WINDOW)
        return;
    s->windows++;
    if (2 * s->paid < s->spins) {
        s->resting = EC_SPIN_REST;
        s->rests++;
    }
    s->spins = 0;
    s->paid = 0;
}
