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

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

void ec_rng_seed(ec_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL + 0x632be59bd9b4e019ULL);

    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

uint64_t ec_rng_next(ec_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double ec_rng_uniform(ec_rng *r)
{
    return (double)(ec_rng_next(r) >> 11) * 0x1.0p-53;
}

uint64_t ec_rng_below(ec_rng *r, uint64_t n)
{
    /* Rejection on the top of the range keeps every value equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;

    do
        v = ec_rng_next(r);
    while (v >= limit);
    return v % n;
}

double ec_rng_normal(ec_rng *r)
{
    double u1 = ec_rng_uniform(r), u2 = ec_rng_uniform(r);

    if (u1 < 0x1.0p-60)
        u1 = 0x1.0p-60;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
