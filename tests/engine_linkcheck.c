/* Links against the engine library alone: proves it needs no service library. */
#include <stdio.h>

#include "ecopt/error.h"
#include "ecopt/rng.h"

int main(void)
{
    ec_rng r;

    ec_rng_seed(&r, 1, 0);
    printf("engine links alone (%s, %llu)\n", ec_strerror(EC_EINVAL),
           (unsigned long long)(ec_rng_next(&r) & 0xff));
    return 0;
}
