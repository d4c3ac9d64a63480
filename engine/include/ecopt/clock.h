/* The monotonic clock, for intervals and deadlines (never for dates). */
#ifndef ECOPT_CLOCK_H
#define ECOPT_CLOCK_H

/* Seconds since an arbitrary start; never goes back. */
double ec_clock(void);

#endif
