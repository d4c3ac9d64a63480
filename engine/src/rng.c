/* xoshiro256** (Blackman and Vigna), seeded from splitmix64. */
#include "ecopt/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void ec_rng_seed(ec_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);

    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

double ec_rng_uniform(ec_rng *r)
{
    return (double)(ec_rng_next(r) >> 11) * 0x1.0p-53;
}

double ec_rng_normal(ec_rng *r)
{
    double u1 = ec_rng_uniform(r), u2 = ec_rng_uniform(r);

    if (u1 < 0x1.0p-60)
        u1 = 0x1.0p-60;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
