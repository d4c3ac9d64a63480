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
/* Inline: the per-round draws (rows, rand-k seeds and indices) sit on
 * the hottest path of a round, a few per worker. */
static inline uint64_t ec_rng_next(ec_rng *r)
{
    uint64_t *s = r->s;
    uint64_t m = s[1] * 5;
    uint64_t result = ((m << 7) | (m >> 57)) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}
/* Uniform in [0, 1) with 53 random bits. */
double ec_rng_uniform(ec_rng *r);
/*
 * Uniform integer in [0, n), n >= 1, without modulo bias: a draw at or
 * above limit = UINT64_MAX - UINT64_MAX % n is drawn again. Every limit
 * exceeds UINT64_MAX - n, so a draw at or below that is kept without
 * computing limit, which saves a 64-bit division on all but about n in
 * 2^64 draws; the draws kept are the same.
 */
static inline uint64_t ec_rng_below(ec_rng *r, uint64_t n)
{
    uint64_t v = ec_rng_next(r);

    if (v > UINT64_MAX - n) {
        uint64_t limit = UINT64_MAX - UINT64_MAX % n;

        while (v >= limit)
            v = ec_rng_next(r);
    }
    return v % n;
}
/* A standard normal draw (Box-Muller; used by tests and the generator). */
double ec_rng_normal(ec_rng *r);

#endif
