/*
 * A small, fast, seedable generator (xoshiro256**, seeded through splitmix64).
 * Every random choice in the engine draws from one of these, held in a state
 * struct, so that a run is a pure function of its seed.
 */
#ifndef ECOPT_RNG_H
#define ECOPT_RNG_H

#include <stdint.h>

typedef struct ec_rng {
    uint64_t s[4];
} ec_rng;

/* Seeds a stream: the same (seed, stream) pair always gives the same draws. */
void ec_rng_seed(ec_rng *r, uint64_t seed, uint64_t stream);
uint64_t ec_rng_next(ec_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double ec_rng_uniform(ec_rng *r);
/* Uniform integer in [0, n), n >= 1, without modulo bias. */
uint64_t ec_rng_below(ec_rng *r, uint64_t n);
/* A standard normal draw (Box-Muller; used by tests and the generator). */
double ec_rng_normal(ec_rng *r);

#endif
