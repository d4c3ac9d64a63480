/* The clocks: monotonic for intervals and deadlines, the wall clock for
   dates (when a metric row was measured). */
#ifndef ECOPT_CLOCK_H
#define ECOPT_CLOCK_H

/* Seconds since an arbitrary start; never goes back. */
double ec_clock(void);
/* Seconds since the Unix epoch (CLOCK_REALTIME), with a fraction; may
   jump when the system's clock is set. */
double ec_wall_clock(void);

#endif
