/*
 * Convergence plots as SVG, written by a small writer with no plotting
 * dependency. The service serves them (plot.svg routes) and the paper
 * benchmarks write the same files, so what a user sees in the browser is
 * what bench/results/ holds.
 *
 * The output is a pure function of the input: the same series give the
 * same bytes, so committed plots can be regenerated and diffed.
 */
#ifndef ECOPT_PLOT_H
#define ECOPT_PLOT_H

#include <stddef.h>

/* One curve. Points whose x or y is not finite, or not positive on a log
   axis, are skipped; the curve is broken there rather than joined. */
typedef struct plot_series {
    const char *name;          /* the legend's text (escaped on output) */
    const double *x, *y;
    size_t n;
} plot_series;

/* A band drawn under a series from lo to hi at each of its x (e.g. the
   least and greatest of several seeds around their median); a point
   where either is not drawable is left out. NULL lo or hi: no band. */
typedef struct plot_band {
    const double *lo, *hi;
} plot_band;

typedef struct plot_spec {
    const char *title;         /* escaped on output; NULL for none */
    const char *xlabel, *ylabel;
    int xlog, ylog;            /* nonzero: log10 axis */
    int width, height;         /* pixels; 0 for 720 x 450 */
    size_t max_points;         /* per series after downsampling; 0: 1000 */
    /* Per series (NULL: none), its colour and dash pattern as indexes
       into the plot's lists (taken modulo their lengths), e.g. one colour
       per group and one dash per member. Without them series i takes
       colour i and dash i, so that the first 40 series differ in the
       pair. */
    const unsigned *colour, *dash;
} plot_spec;

/*
 * The plot as a NUL-terminated SVG document in malloc'd memory (the
 * caller frees it), its length in *len. Series with no drawable point
 * still appear in the legend; with none at all the axes say "no data".
 * NULL only when memory runs out.
 */
char *plot_svg(const plot_spec *sp, const plot_series *s, size_t ns,
               size_t *len);
/* The same with a band under each series: bands has ns entries, or is
   NULL for none. */
char *plot_svg_bands(const plot_spec *sp, const plot_series *s,
                     const plot_band *bands, size_t ns, size_t *len);

#endif
