/*
 * The SVG writer behind plot.h: axes with readable ticks (decades on log
 * axes, 1-2-5 steps on linear ones), a legend, and one path per series,
 * downsampled so that a curve of millions of rounds stays a small file.
 * Everything is computed from the input alone, so the bytes are too.
 */
#include "plot.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"
#include "utf8.h"

#define PLOT_DEFAULT_WIDTH 720
#define PLOT_DEFAULT_HEIGHT 450
#define PLOT_DEFAULT_POINTS 1000
#define PLOT_MIN_SIDE 160           /* smaller sizes are raised to this */
#define PLOT_MAX_SIDE 20000
#define PLOT_MAX_TICKS 40           /* a bound on every tick loop */
#define LEGEND_ROW 16

/* Distinct colours (Tableau 10) and dash patterns; series i takes colour
   i % 10 and dash i % 8 unless it says otherwise (plot_series), so the
   first 40 series differ in the pair. */
static const char *const colours[] = {
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
};
static const char *const dashes[] = {NULL,  "7 3", "2 2",     "9 3 2 3",
                                     "4 4", "12 4", "1 3 1 6", "6 2 2 2"};
#define NCOLOURS (sizeof colours / sizeof colours[0])
#define NDASHES (sizeof dashes / sizeof dashes[0])

/* Series i's colour and dash. */
static const char *colour_of(const plot_spec *sp, size_t i)
{
    return colours[(sp->colour ? sp->colour[i] : i) % NCOLOURS];
}

static const char *dash_of(const plot_spec *sp, size_t i)
{
    return dashes[(sp->dash ? sp->dash[i] : i) % NDASHES];
}

/* Text as XML character data or attribute value: the five markup
   characters as entities, and bytes XML cannot hold (control characters,
   invalid UTF-8) as U+FFFD, so any name gives a well-formed document. */
static void xml_escape(struct strbuf *b, const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t len = strlen(text);

    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t n = utf8_char(s + i, len - i, &cp);

        if (cp == 0xfffe || cp == 0xffff)
            n = 0;              /* UTF-8, but not characters XML holds */
        switch (n == 1 ? s[i] : 0) {
        case '&': strbuf_addstr(b, "&amp;"); break;
        case '<': strbuf_addstr(b, "&lt;"); break;
        case '>': strbuf_addstr(b, "&gt;"); break;
        case '"': strbuf_addstr(b, "&quot;"); break;
        case '\'': strbuf_addstr(b, "&apos;"); break;
        default:
            if (n == 0 || (n == 1 && s[i] < 0x20 && s[i] != '\t' && s[i] != '\n'))
                strbuf_addstr(b, "\xef\xbf\xbd");
            else
                strbuf_add(b, (const char *)s + i, n);
        }
        i += n ? n : 1;
    }
}

/* Characters (code points) of a UTF-8 string, to size the legend. */
static size_t text_width(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* One axis: the drawable range in transformed units (log10 on log axes)
   and its ticks. */
struct axis {
    int log;
    double lo, hi;              /* transformed, lo < hi, both finite */
    double step;                /* between major ticks, transformed */
    double first;               /* the first major tick */
    int nticks;
    int minor;                  /* log axes: ticks at 2..9 in each decade */
};

static int drawable(int log, double v)
{
    return isfinite(v) && (!log || v > 0);
}

static double transform(int log, double v)
{
    return log ? log10(v) : v;
}

/* A step of 1, 2 or 5 times a power of ten, near raw (> 0). */
static double nice_step(double raw)
{
    double mag = pow(10, floor(log10(raw))), norm = raw / mag;

    if (!isfinite(mag) || mag == 0)
        return raw;
    if (norm < 1.5)
        return mag;
    if (norm < 3)
        return 2 * mag;
    if (norm < 7)
        return 5 * mag;
    return 10 * mag;
}

static double clampd(double v)
{
    return v > DBL_MAX ? DBL_MAX : v < -DBL_MAX ? -DBL_MAX : v;
}

/* Fits an axis around [lo, hi] (transformed data; have = 0 when there is
   none), extended to whole ticks. */
static void axis_fit(struct axis *ax, int have, double lo, double hi)
{
    if (ax->log) {
        /* Whole decades, at most about 8 labelled ones. */
        double a, b, ndec, step = 1;

        if (!have) {
            lo = 0;
            hi = 1;
        }
        a = floor(lo);
        b = ceil(hi);
        if (b <= a)
            b = a + 1;
        ndec = b - a;
        while (ndec / step > 8) {
            double next = nice_step(step * 1.5);   /* 1, 2, 5, 10, 20, ... */
            step = next > step ? next : step * 2;
        }
        ax->lo = floor(a / step) * step;
        ax->hi = ceil(b / step) * step;
        ax->step = step;
        ax->first = ax->lo;
        ax->nticks = (int)((ax->hi - ax->lo) / step + 0.5) + 1;
        ax->minor = step == 1 && ax->hi - ax->lo <= 4;
        return;
    }
    if (!have) {
        lo = 0;
        hi = 1;
    }
    /* A range too narrow to tick (one value, or a few ulps) is widened by
       10% of its magnitude either way. */
    {
        double mag = fmax(fabs(lo), fabs(hi));
        if (hi / 2 - lo / 2 <= mag * 1e-12) {
            double mid = lo / 2 + hi / 2, d = mid == 0 ? 1 : fabs(mid) * 0.1;
            lo = clampd(mid - d);
            hi = clampd(mid + d);
        }
    }
    if (!(hi / 2 - lo / 2 > 0)) {
        /* Subnormal values: even 10% of them is nothing. */
        double mid = lo / 2 + hi / 2;
        lo = mid - 1;
        hi = mid + 1;
    }
    /* Halves throughout, so that a range of +-DBL_MAX has a finite span. */
    double step = nice_step((hi / 2 - lo / 2) / 3);   /* about 6 ticks */
    double a = floor(lo / step), b = ceil(hi / step);
    ax->step = step;
    if (!isfinite(ax->step) || !isfinite(a) || !isfinite(b)) {
        ax->step = DBL_MAX;
        ax->lo = lo;
        ax->hi = hi;
        ax->first = lo < 0 && hi > 0 ? 0 : lo;
        ax->nticks = 1;
        return;
    }
    ax->lo = clampd(a * ax->step);
    ax->hi = clampd(b * ax->step);
    ax->first = ax->lo;
    ax->nticks = (int)(b - a) + 1;
    if (ax->nticks > PLOT_MAX_TICKS)
        ax->nticks = PLOT_MAX_TICKS;
    ax->minor = 0;
}

/* Position of transformed value t on [0, 1] of the axis. */
static double axis_frac(const struct axis *ax, double t)
{
    return (t / 2 - ax->lo / 2) / (ax->hi / 2 - ax->lo / 2);
}

static double tick_value(const struct axis *ax, int i)
{
    double t = ax->first + i * ax->step;

    if (fabs(t) < ax->step * 1e-9)
        t = 0;                  /* no "-0" or 1e-17 from rounding */
    return clampd(t);
}

/* "1e+300" with no trailing zeros in the mantissa. */
static void format_exp(char *out, size_t len, double v, int digits)
{
    char tmp[64], *e, *z;

    snprintf(tmp, sizeof tmp, "%.*e", digits, v);
    e = strchr(tmp, 'e');
    if (!e) {
        snprintf(out, len, "%s", tmp);
        return;
    }
    z = e;
    while (z > tmp && z[-1] == '0')
        z--;
    if (z > tmp && z[-1] == '.')
        z--;
    snprintf(out, len, "%.*s%s", (int)(z - tmp), tmp, e);
}

/* The label of a linear tick: fixed point with the decimals the step
   needs, thousands and up with a k, M, G or T suffix, and exponent form
   for very large or small numbers. */
static void format_linear(char *out, size_t len, const struct axis *ax, double v)
{
    double mag = fmax(fabs(ax->lo), fabs(ax->hi));
    int k = (int)floor(log10(ax->step) + 1e-9);

    if (v == 0) {
        snprintf(out, len, "0");
        return;
    }
    if (mag < 1e4 && ax->step >= 1e-4) {
        snprintf(out, len, "%.*f", k < 0 ? -k : 0, v);
        return;
    }
    if (mag >= 1e4 && mag < 1e15 && ax->step >= 1) {
        /* Thousands and up as k, M, G, T: "200k", "1.5M" (bits, rounds). */
        static const char suffix[] = "kMGT";
        int u = (int)floor(log10(mag) / 3 + 1e-9);
        double unit;
        if (u > 4)
            u = 4;
        unit = pow(1000, u);
        k = (int)floor(log10(ax->step / unit) + 1e-9);
        snprintf(out, len, "%.*f%c", k < 0 ? -k : 0, v / unit, suffix[u - 1]);
        return;
    }
    int e = (int)floor(log10(fabs(v)));
    int digits = e - k;
    format_exp(out, len, v, digits < 0 ? 0 : digits > 16 ? 16 : digits);
}

/* A drawable point of a series, in pixels, and whether the curve breaks
   before it. */
struct pt {
    double px, py;
    int brk;
};

/*
 * Keeps at most max (>= 2) of the m points: the first, the last, and in
 * between the lowest and highest point of each of (max - 2) / 2 buckets,
 * in their order. Buckets are equal widths of the plot's x (so uniform in
 * log x on a log axis) when x never goes back, else equal counts. A break
 * inside a bucket is kept as a break between its two points.
 */
static size_t downsample(struct pt *p, size_t m, size_t max)
{
    size_t nb = (max - 2) / 2, out = 1, j;
    int monotone = 1;
    double x0 = p[0].px, x1 = p[m - 1].px;

    if (m <= max)
        return m;
    for (j = 1; j < m; j++)
        if (p[j].px < p[j - 1].px)
            monotone = 0;
    if (!(x1 > x0))
        monotone = 0;
    j = 1;
    while (j < m - 1) {
        size_t key, k, lo = j, hi = j;
        int brk_first = p[j].brk, brk_inside = 0;

        if (nb == 0)
            break;
        key = monotone ? (size_t)((p[j].px - x0) / (x1 - x0) * (double)nb)
                       : (j - 1) * nb / (m - 2);
        if (key >= nb)
            key = nb - 1;
        for (k = j; k < m - 1; k++) {
            size_t kk = monotone ? (size_t)((p[k].px - x0) / (x1 - x0) * (double)nb)
                                 : (k - 1) * nb / (m - 2);
            if (kk >= nb)
                kk = nb - 1;
            if (kk != key)
                break;
            if (k > j && p[k].brk)
                brk_inside = 1;
            if (p[k].py < p[lo].py)     /* smaller py is higher on screen */
                lo = k;
            if (p[k].py > p[hi].py)
                hi = k;
        }
        struct pt a = p[lo < hi ? lo : hi], b = p[lo < hi ? hi : lo];
        a.brk = brk_first;
        p[out++] = a;
        if (lo != hi) {
            b.brk = brk_inside;
            p[out++] = b;
        }
        j = k;
    }
    /* The last point, with the break before it if there was one. */
    p[out++] = p[m - 1];
    return out;
}

/* The frame in pixels, and how data maps into it. */
struct frame {
    const struct axis *ax, *ay;
    double left, right, top, bottom, pw, ph;
};

/* A data point's place in pixels. */
static double frame_x(const struct frame *f, double x)
{
    return f->left + axis_frac(f->ax, transform(f->ax->log, x)) * f->pw;
}

static double frame_y(const struct frame *f, double y)
{
    return f->bottom - axis_frac(f->ay, transform(f->ay->log, y)) * f->ph;
}

/* How many drawable points of all series fall inside a box: the legend
   goes where it hides the fewest. */
static size_t points_in(const struct frame *f, const plot_series *s, size_t ns,
                        double bx, double by, double bw, double bh)
{
    size_t count = 0;

    for (size_t i = 0; i < ns; i++) {
        if (!s[i].x || !s[i].y)
            continue;
        for (size_t j = 0; j < s[i].n; j++) {
            double x = s[i].x[j], y = s[i].y[j], px, py;
            if (!drawable(f->ax->log, x) || !drawable(f->ay->log, y))
                continue;
            px = frame_x(f, x);
            py = frame_y(f, y);
            count += px >= bx && px <= bx + bw && py >= by && py <= by + bh;
        }
    }
    return count;
}

/* Coordinates as text with one decimal: enough on a screen, and the
   same bytes everywhere. */
static void put_coord(struct strbuf *b, double v)
{
    strbuf_addf(b, "%.1f", v);
}

static void draw_log_label(struct strbuf *b, const char *cls, double x, double y,
                           const char *anchor, double exponent)
{
    strbuf_addf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">"
                 "10<tspan dy=\"-6\" font-size=\"9\">%.0f</tspan></text>\n",
              cls, x, y, anchor, exponent);
}

/* Fits both axes to the data's range over drawable points only; 1 when
   there is such a point. *maxn gets the longest series' length. */
static int fit_axes(const plot_series *s, const plot_band *bands, size_t ns,
                    struct axis *ax, struct axis *ay, size_t *maxn)
{
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    int have = 0;

    *maxn = 0;
    for (size_t i = 0; i < ns; i++) {
        if (!s[i].x || !s[i].y)
            continue;
        if (s[i].n > *maxn)
            *maxn = s[i].n;
        for (size_t j = 0; j < s[i].n; j++) {
            double x = s[i].x[j], y = s[i].y[j];
            if (!drawable(ax->log, x) || !drawable(ay->log, y))
                continue;
            x = transform(ax->log, x);
            y = transform(ay->log, y);
            xlo = fmin(xlo, x);
            xhi = fmax(xhi, x);
            ylo = fmin(ylo, y);
            yhi = fmax(yhi, y);
            have = 1;
            if (bands && bands[i].lo && bands[i].hi &&
                drawable(ay->log, bands[i].lo[j]) && drawable(ay->log, bands[i].hi[j])) {
                ylo = fmin(ylo, transform(ay->log, bands[i].lo[j]));
                yhi = fmax(yhi, transform(ay->log, bands[i].hi[j]));
            }
        }
    }
    axis_fit(ax, have, xlo, xhi);
    axis_fit(ay, have, ylo, yhi);
    return have;
}

/* The document's head, its white background and the title. */
static void draw_head(struct strbuf *b, const plot_spec *sp, int w, int h)
{
    strbuf_addf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" "
                  "height=\"%d\" viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" "
                  "font-size=\"12\">\n",
              w, h, w, h);
    strbuf_addf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", w, h);
    if (sp->title) {
        strbuf_addf(b, "<text class=\"title\" x=\"%.1f\" y=\"24\" text-anchor=\"middle\" "
                      "font-size=\"15\">",
                  w / 2.0);
        xml_escape(b, sp->title);
        strbuf_addstr(b, "</text>\n");
    }
}

/* The grid lines at the major ticks (none without data), and the frame. */
static void draw_grid(struct strbuf *b, const struct frame *f, int have)
{
    strbuf_addstr(b, "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n");
    if (have) {
        for (int i = 0; i < f->ax->nticks; i++) {
            double px = f->left + axis_frac(f->ax, tick_value(f->ax, i)) * f->pw;
            strbuf_addf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      px, f->top, px, f->bottom);
        }
        for (int i = 0; i < f->ay->nticks; i++) {
            double py = f->bottom - axis_frac(f->ay, tick_value(f->ay, i)) * f->ph;
            strbuf_addf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n",
                      f->left, py, f->right, py);
        }
    }
    strbuf_addstr(b, "</g>\n");
    strbuf_addf(b, "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
              f->left, f->top, f->pw, f->ph);
}

/* The tick marks of both axes: major ones, and the minor 2..9 of each
   decade on a log axis that has them. */
static void draw_ticks(struct strbuf *b, const struct frame *f)
{
    strbuf_addstr(b, "<g class=\"ticks\" stroke=\"#333\">\n");
    for (int axis = 0; axis < 2; axis++) {
        const struct axis *a = axis ? f->ay : f->ax;
        for (int i = 0; i < a->nticks; i++) {
            double t = axis_frac(a, tick_value(a, i));
            for (int minor = 0; minor <= (a->minor ? 8 : 0); minor++) {
                double g = t, len = 5;
                if (minor) {
                    if (i == a->nticks - 1)
                        break;
                    g = axis_frac(a, tick_value(a, i) + log10(minor + 1.0));
                    len = 3;
                }
                if (axis == 0)
                    strbuf_addf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                                  "y2=\"%.1f\"/>\n",
                              f->left + g * f->pw, f->bottom, f->left + g * f->pw,
                              f->bottom + len);
                else
                    strbuf_addf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                                  "y2=\"%.1f\"/>\n",
                              f->left - len, f->bottom - g * f->ph, f->left,
                              f->bottom - g * f->ph);
            }
        }
    }
    strbuf_addstr(b, "</g>\n");
}

/* The labels of the major ticks: powers of ten on log axes. */
static void draw_tick_labels(struct strbuf *b, const struct frame *f)
{
    strbuf_addstr(b, "<g class=\"labels\" fill=\"#222\">\n");
    for (int axis = 0; axis < 2; axis++) {
        const struct axis *a = axis ? f->ay : f->ax;
        const char *cls = axis ? "ytick" : "xtick";
        for (int i = 0; i < a->nticks; i++) {
            double t = tick_value(a, i), at = axis_frac(a, t);
            double x = axis ? f->left - 8 : f->left + at * f->pw;
            double y = axis ? f->bottom - at * f->ph + 4 : f->bottom + 18;
            const char *anchor = axis ? "end" : "middle";
            if (a->log) {
                draw_log_label(b, cls, x, y, anchor, t);
            } else {
                char label[64];
                format_linear(label, sizeof label, a, t);
                strbuf_addf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" "
                              "text-anchor=\"%s\">%s</text>\n",
                          cls, x, y, anchor, label);
            }
        }
    }
    strbuf_addstr(b, "</g>\n");
}

/* The axes' titles, below the x axis and turned beside the y axis. */
static void draw_axis_titles(struct strbuf *b, const plot_spec *sp,
                             const struct frame *f, int h)
{
    if (sp->xlabel) {
        strbuf_addf(b, "<text class=\"xlabel\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">",
                  f->left + f->pw / 2, (double)h - 10);
        xml_escape(b, sp->xlabel);
        strbuf_addstr(b, "</text>\n");
    }
    if (sp->ylabel) {
        strbuf_addf(b, "<text class=\"ylabel\" x=\"0\" y=\"0\" text-anchor=\"middle\" "
                      "transform=\"translate(18 %.1f) rotate(-90)\">",
                  f->top + f->ph / 2);
        xml_escape(b, sp->ylabel);
        strbuf_addstr(b, "</text>\n");
    }
}

/* The m points as one path of runs, points alone between breaks left
   out (draw_series draws them as dots). */
static void draw_path(struct strbuf *b, const struct pt *pts, size_t m,
                      const char *dash)
{
    int runs = 1;

    strbuf_addstr(b, "<path fill=\"none\" stroke-width=\"1.6\" stroke-linejoin=\"round\"");
    if (dash)
        strbuf_addf(b, " stroke-dasharray=\"%s\"", dash);
    strbuf_addstr(b, " d=\"");
    for (size_t j = 0; j < m; j++) {
        int starts = j == 0 || pts[j].brk;
        int alone = starts && (j + 1 == m || pts[j + 1].brk);
        if (alone)
            continue;
        if (runs++ > 1)
            strbuf_addstr(b, " ");
        strbuf_addstr(b, starts ? "M" : "L");
        put_coord(b, pts[j].px);
        strbuf_addstr(b, " ");
        put_coord(b, pts[j].py);
    }
    strbuf_addstr(b, "\"/>\n");
}

/* Series i (s) as a path and dots in its colour and dash (sp),
   downsampled to maxp points; pts has room for all of its points. */
/* A series' band: one closed path along hi forward and lo back, at most
   max points each way (every k-th of the drawable ones), filled lightly
   in the series' colour. */
static void draw_band(struct strbuf *b, const struct frame *f, const plot_series *s,
                      const plot_band *band, const char *colour, size_t max)
{
    size_t m = 0, step, drawn = 0;

    for (size_t j = 0; j < s->n; j++)
        m += drawable(f->ax->log, s->x[j]) && drawable(f->ay->log, band->lo[j]) &&
             drawable(f->ay->log, band->hi[j]);
    if (m < 2)
        return;
    step = (m + max - 1) / max;
    strbuf_addf(b, "<path class=\"band\" fill=\"%s\" fill-opacity=\"0.18\" "
                   "stroke=\"none\" d=\"", colour);
    for (int back = 0; back < 2; back++) {
        for (size_t t = 0, k = 0; t < s->n; t++) {
            size_t j = back ? s->n - 1 - t : t;
            double v = back ? band->lo[j] : band->hi[j];

            if (!drawable(f->ax->log, s->x[j]) || !drawable(f->ay->log, band->lo[j]) ||
                !drawable(f->ay->log, band->hi[j]))
                continue;
            if (k++ % step && k != m)
                continue;
            strbuf_addstr(b, drawn++ ? " L" : "M");
            put_coord(b, frame_x(f, s->x[j]));
            strbuf_addstr(b, " ");
            put_coord(b, frame_y(f, v));
        }
    }
    strbuf_addstr(b, " Z\"/>\n");
}

static void draw_series(struct strbuf *b, const plot_spec *sp, const struct frame *f,
                        const plot_series *s, const plot_band *band, size_t i,
                        struct pt *pts, size_t maxp)
{
    size_t m = 0, j;
    int gap = 0, any_run = 0;

    if (!s->x || !s->y)
        return;
    for (j = 0; j < s->n; j++) {
        double x = s->x[j], y = s->y[j];
        if (!drawable(f->ax->log, x) || !drawable(f->ay->log, y)) {
            gap = 1;
            continue;
        }
        pts[m].px = frame_x(f, x);
        pts[m].py = frame_y(f, y);
        pts[m].brk = m > 0 && gap;
        gap = 0;
        m++;
    }
    if (m == 0)
        return;
    m = downsample(pts, m, maxp);
    strbuf_addf(b, "<g class=\"series\" data-index=\"%zu\" stroke=\"%s\" fill=\"%s\">\n",
              i, colour_of(sp, i), colour_of(sp, i));
    if (band && band->lo && band->hi)
        draw_band(b, f, s, band, colour_of(sp, i), maxp);
    /* Points alone between breaks are dots; runs are one path. */
    for (j = 0; j + 1 < m; j++)
        if (!pts[j + 1].brk)
            any_run = 1;
    if (any_run)
        draw_path(b, pts, m, dash_of(sp, i));
    for (j = 0; j < m; j++) {
        int starts = j == 0 || pts[j].brk;
        if (starts && (j + 1 == m || pts[j + 1].brk))
            strbuf_addf(b, "<circle class=\"dot\" cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" "
                          "stroke=\"none\"/>\n",
                      pts[j].px, pts[j].py);
    }
    strbuf_addstr(b, "</g>\n");
}

/* The legend (ns > 0), top right inside the frame, in as many columns as
   the height needs; moved to the corner that hides the fewest points. */
static void draw_legend(struct strbuf *b, const plot_spec *sp, const struct frame *f,
                        const plot_series *s, size_t ns, int have)
{
    size_t rows_fit = (size_t)((f->ph - 12) / LEGEND_ROW), cols, rows;
    size_t widest = 0;

    if (rows_fit < 1)
        rows_fit = 1;
    cols = (ns + rows_fit - 1) / rows_fit;
    rows = (ns + cols - 1) / cols;
    for (size_t i = 0; i < ns; i++) {
        size_t tw = text_width(s[i].name ? s[i].name : "");
        widest = tw > widest ? tw : widest;
    }
    if (widest > 60)
        widest = 60;
    double colw = 34 + 7.0 * (double)widest;
    double lw = colw * (double)cols + 8, lh = (double)rows * LEGEND_ROW + 8;
    /* Top right, bottom right, bottom left or top left: the first
       of those that covers the fewest points. */
    double lx = f->right - lw - 6, ly = f->top + 6;
    if (lx < f->left + 4)
        lx = f->left + 4;
    if (have) {
        const double cx[4] = {lx, lx, f->left + 6, f->left + 6};
        const double cy[4] = {ly, f->bottom - lh - 6, f->bottom - lh - 6, ly};
        size_t best = (size_t)-1;
        for (int c = 0; c < 4; c++) {
            size_t n = points_in(f, s, ns, cx[c], cy[c], lw, lh);
            if (n < best) {
                best = n;
                lx = cx[c];
                ly = cy[c];
            }
            if (n == 0)
                break;
        }
    }
    strbuf_addf(b, "<g class=\"legend\">\n<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                  "height=\"%.1f\" fill=\"#fff\" fill-opacity=\"0.85\" "
                  "stroke=\"#bbb\"/>\n",
              lx, ly, lw, lh);
    for (size_t i = 0; i < ns; i++) {
        double cx = lx + 6 + colw * (double)(i / rows);
        double cy = ly + 4 + LEGEND_ROW * ((double)(i % rows) + 0.5);
        const char *dash = dash_of(sp, i);
        strbuf_addf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
                      "stroke=\"%s\" stroke-width=\"2\"",
                  cx, cy, cx + 24, cy, colour_of(sp, i));
        if (dash)
            strbuf_addf(b, " stroke-dasharray=\"%s\"", dash);
        strbuf_addf(b, "/>\n<text class=\"legend-name\" x=\"%.1f\" y=\"%.1f\">",
                  cx + 30, cy + 4);
        xml_escape(b, s[i].name ? s[i].name : "");
        strbuf_addstr(b, "</text>\n");
    }
    strbuf_addstr(b, "</g>\n");
}

char *plot_svg(const plot_spec *sp, const plot_series *s, size_t ns,
               size_t *len)
{
    return plot_svg_bands(sp, s, NULL, ns, len);
}

char *plot_svg_bands(const plot_spec *sp, const plot_series *s,
                     const plot_band *bands, size_t ns, size_t *len)
{
    struct strbuf b = STRBUF_INIT;
    struct axis ax = {0}, ay = {0};
    struct frame f = {&ax, &ay, 0, 0, 0, 0, 0, 0};
    int w = sp->width > 0 ? sp->width : PLOT_DEFAULT_WIDTH;
    int h = sp->height > 0 ? sp->height : PLOT_DEFAULT_HEIGHT;
    size_t maxp = sp->max_points ? sp->max_points : PLOT_DEFAULT_POINTS;
    struct pt *pts = NULL;
    size_t maxn;
    int have;

    if (maxp < 2)
        maxp = 2;
    w = w < PLOT_MIN_SIDE ? PLOT_MIN_SIDE : w > PLOT_MAX_SIDE ? PLOT_MAX_SIDE : w;
    h = h < PLOT_MIN_SIDE ? PLOT_MIN_SIDE : h > PLOT_MAX_SIDE ? PLOT_MAX_SIDE : h;
    ax.log = sp->xlog != 0;
    ay.log = sp->ylog != 0;
    have = fit_axes(s, bands, ns, &ax, &ay, &maxn);
    f.left = 74;
    f.right = w - 16;
    f.top = sp->title ? 38 : 16;
    f.bottom = h - (sp->xlabel ? 46 : 30);
    f.pw = f.right - f.left;
    f.ph = f.bottom - f.top;

    draw_head(&b, sp, w, h);
    draw_grid(&b, &f, have);
    if (have) {
        draw_ticks(&b, &f);
        draw_tick_labels(&b, &f);
    } else {
        strbuf_addf(&b, "<text class=\"nodata\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
                      "fill=\"#777\" font-size=\"16\">no data</text>\n",
                  f.left + f.pw / 2, f.top + f.ph / 2);
    }
    draw_axis_titles(&b, sp, &f, h);
    if (maxn && !(pts = malloc(maxn * sizeof *pts)))
        b.failed = 1;
    for (size_t i = 0; i < ns && have && !b.failed; i++)
        draw_series(&b, sp, &f, &s[i], bands ? &bands[i] : NULL, i, pts, maxp);
    free(pts);
    if (ns > 0)
        draw_legend(&b, sp, &f, s, ns, have);
    strbuf_addstr(&b, "</svg>\n");
    return strbuf_detach(&b, len);
}
