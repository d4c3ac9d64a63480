/*
 * The SVG writer: every document is parsed back by a small strict XML
 * checker (balanced tags, quoted attributes, only the five entities), and
 * the tests read what a user would see: tick labels, the points of each
 * curve, the legend, the "no data" note.
 */
#include <ctype.h>
#include <float.h>
#include <math.h>

#include "plot.h"
#include "testutil.h"

/* ---- a strict little XML checker ---- */

static int name_char(int c)
{
    return isalnum(c) || c == '-' || c == '_' || c == ':' || c == '.';
}

/* Checks an entity at s ("&amp;" ...); returns its length or 0. */
static size_t entity_len(const char *s)
{
    static const char *const ok[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};

    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (strncmp(s, ok[i], strlen(ok[i])) == 0)
            return strlen(ok[i]);
    return 0;
}

/* NULL when doc is one well-formed element (after an optional XML
   declaration), else what is wrong and where. */
static const char *xml_check(const char *doc, char *why, size_t whylen)
{
    char stack[64][32];
    int depth = 0, roots = 0;
    const char *p = doc;

    if (strncmp(p, "<?xml ", 6) == 0) {
        const char *e = strstr(p, "?>");
        if (!e)
            return "unterminated XML declaration";
        p = e + 2;
    }
    while (*p) {
        if (*p == '&') {
            if (!entity_len(p)) {
                snprintf(why, whylen, "bad entity at offset %td", p - doc);
                return why;
            }
            p += entity_len(p);
            continue;
        }
        if (*p == '>') {
            snprintf(why, whylen, "stray '>' at offset %td", p - doc);
            return why;
        }
        if (*p != '<') {
            if (depth == 0 && !isspace((unsigned char)*p)) {
                snprintf(why, whylen, "text outside the root at %td", p - doc);
                return why;
            }
            p++;
            continue;
        }
        p++;
        int closing = *p == '/';
        char name[32];
        size_t n = 0;
        if (closing)
            p++;
        while (name_char((unsigned char)*p) && n < sizeof name - 1)
            name[n++] = *p++;
        name[n] = '\0';
        if (n == 0) {
            snprintf(why, whylen, "bad tag name at offset %td", p - doc);
            return why;
        }
        if (closing) {
            if (*p != '>' || depth == 0 || strcmp(stack[depth - 1], name) != 0) {
                snprintf(why, whylen, "</%s> does not close <%s> (offset %td)", name,
                         depth ? stack[depth - 1] : "nothing", p - doc);
                return why;
            }
            depth--;
            p++;
            continue;
        }
        /* Attributes: name="value", value without '<' and with entities. */
        for (;;) {
            while (isspace((unsigned char)*p))
                p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>'))
                break;
            if (!name_char((unsigned char)*p)) {
                snprintf(why, whylen, "bad attribute in <%s> at %td", name, p - doc);
                return why;
            }
            while (name_char((unsigned char)*p))
                p++;
            if (p[0] != '=' || p[1] != '"') {
                snprintf(why, whylen, "unquoted attribute in <%s> at %td", name, p - doc);
                return why;
            }
            p += 2;
            while (*p && *p != '"') {
                if (*p == '<' || (*p == '&' && !entity_len(p))) {
                    snprintf(why, whylen, "bad character in an attribute at %td", p - doc);
                    return why;
                }
                p++;
            }
            if (!*p)
                return "unterminated attribute";
            p++;
        }
        if (depth == 0 && ++roots > 1)
            return "more than one root element";
        if (*p == '/') {
            p += 2;
            continue;
        }
        p++;
        if (depth == 64)
            return "nested too deep";
        strcpy(stack[depth++], name);
    }
    if (depth != 0) {
        snprintf(why, whylen, "<%s> is never closed", stack[depth - 1]);
        return why;
    }
    return roots == 1 ? NULL : "no root element";
}

static void tick_labels(const char *svg, const char *cls, char *out, size_t outlen);

/* The plot of the given series, checked to be well-formed. */
static char *plot_ok(const plot_spec *sp, const plot_series *s, size_t ns)
{
    size_t len = 0;
    char *svg = plot_svg(sp, s, ns, &len), why[160];
    const char *bad;

    ck_assert_ptr_nonnull(svg);
    ck_assert_uint_eq(len, strlen(svg));
    bad = xml_check(svg, why, sizeof why);
    ck_assert_msg(bad == NULL, "not well-formed: %s\n%s", bad, svg);
    ck_assert_msg(strncmp(svg, "<?xml", 5) == 0, "no XML declaration");
    /* No non-finite number in any attribute (coordinates) or tick label;
       names in text may say what they like. Checked per byte, so Check
       hears of it only on failure: an assertion per byte of a large
       document is a write to its pipe each, minutes on a loaded machine. */
    int in_tag = 0;
    for (const char *p = svg; *p; p++) {
        in_tag = *p == '<' ? 1 : *p == '>' ? 0 : in_tag;
        if (in_tag && (strncasecmp(p, "nan", 3) == 0 || strncasecmp(p, "inf", 3) == 0))
            ck_abort_msg("a non-finite number in the output at %td", p - svg);
    }
    for (int axis = 0; axis < 2; axis++) {
        char labels[2048];
        tick_labels(svg, axis ? "ytick" : "xtick", labels, sizeof labels);
        ck_assert_msg(!strstr(labels, "nan") && !strstr(labels, "inf"),
                      "tick labels %s", labels);
    }
    return svg;
}

/* The labels of class cls ("xtick", "ytick") in order, joined by '|',
   with a superscript written as '^': "10^-3". */
static void tick_labels(const char *svg, const char *cls, char *out, size_t outlen)
{
    char key[64];
    size_t o = 0;

    snprintf(key, sizeof key, "<text class=\"%s\"", cls);
    out[0] = '\0';
    for (const char *p = strstr(svg, key); p; p = strstr(p, key)) {
        const char *gt = strchr(p, '>'), *end = strstr(p, "</text>");
        ck_assert_ptr_nonnull(gt);
        ck_assert_ptr_nonnull(end);
        if (o && o + 1 < outlen)
            out[o++] = '|';
        for (const char *q = gt + 1; q < end && o + 1 < outlen;) {
            if (strncmp(q, "<tspan", 6) == 0) {
                out[o++] = '^';
                q = strchr(q, '>') + 1;
            } else if (strncmp(q, "</tspan>", 8) == 0) {
                q += 8;
            } else {
                out[o++] = *q++;
            }
        }
        out[o] = '\0';
        p = end;
    }
}

static size_t count_str(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The points series i draws: its path's vertices (moves in *moves) and
   its dots, with their pixel coordinates in px, py (up to cap). Returns
   -1 when the series draws nothing. */
static long series_points(const char *svg, size_t i, size_t *moves, size_t *dots,
                          double *px, double *py, size_t cap)
{
    char key[64];
    const char *g, *end, *d;
    size_t n = 0;

    snprintf(key, sizeof key, "<g class=\"series\" data-index=\"%zu\"", i);
    *moves = *dots = 0;
    if (!(g = strstr(svg, key)))
        return -1;
    end = strstr(g, "</g>");
    d = strstr(g, " d=\"");
    if (d && d < end) {
        const char *q = d + 4;
        while (*q != '"') {
            char cmd = *q++;
            double x, y;
            int used;
            ck_assert_msg(cmd == 'M' || cmd == 'L', "path command %c", cmd);
            ck_assert_int_eq(sscanf(q, "%lf %lf%n", &x, &y, &used), 2);
            q += used;
            if (*q == ' ')
                q++;
            *moves += cmd == 'M';
            if (n < cap) {
                px[n] = x;
                py[n] = y;
            }
            n++;
        }
    }
    for (const char *c = strstr(g, "<circle"); c && c < end; c = strstr(c + 1, "<circle")) {
        double x, y;
        ck_assert_int_eq(sscanf(c, "<circle class=\"dot\" cx=\"%lf\" cy=\"%lf\"", &x, &y), 2);
        if (n < cap) {
            px[n] = x;
            py[n] = y;
        }
        n++;
        (*dots)++;
    }
    return (long)n;
}

/* ---- the tests ---- */

START_TEST(test_hostile_text_is_escaped)
{
    static const double x[] = {1, 2, 3}, y[] = {1, 0.5, 0.25};
    plot_series s[] = {
        {"<script>alert(1)</script>&\"'", x, y, 3},
        {"bad \xff\xfe bytes \x01 and \xe2\x82 cut", x, y, 3},
        {"ok \xc3\xa9t\xc3\xa9", x, y, 3},
    };
    plot_spec sp = {.title = "a9a <b>&amp;</b>", .xlabel = "x \"quoted\"",
                    .ylabel = "it's", .ylog = 1};
    char *svg = plot_ok(&sp, s, 3);

    ck_assert_ptr_null(strstr(svg, "<script"));
    ck_assert_ptr_null(strstr(svg, "<b>"));
    ck_assert_ptr_nonnull(
        strstr(svg, ">&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&apos;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">a9a &lt;b&gt;&amp;amp;&lt;/b&gt;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">x &quot;quoted&quot;</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">it&apos;s</text>"));
    /* Invalid UTF-8 and control bytes become U+FFFD; valid UTF-8 stays. */
    ck_assert_ptr_nonnull(
        strstr(svg, ">bad \xef\xbf\xbd\xef\xbf\xbd bytes \xef\xbf\xbd and "
                    "\xef\xbf\xbd\xef\xbf\xbd cut</text>"));
    ck_assert_ptr_nonnull(strstr(svg, ">ok \xc3\xa9t\xc3\xa9</text>"));
    ck_assert_ptr_null(strchr(svg, '\x01'));
    free(svg);
}
END_TEST

/* The checker itself refuses what it must, so the tests above mean
   something. */
START_TEST(test_checker_refuses_bad_xml)
{
    static const char *const bad[] = {
        "<svg><g></svg>", "<svg>a < b</svg>", "<svg>&nbsp;</svg>",
        "<svg x=1/>", "<svg x=\"<\"/>", "<svg/><svg/>", "<svg>", "text",
        "<svg></g>", "<svg>x & y</svg>",
    };
    char why[160];

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(xml_check(bad[i], why, sizeof why) != NULL, "accepted %s", bad[i]);
    ck_assert_ptr_null(xml_check("<?xml version=\"1.0\"?>\n<svg a=\"&amp;\"><g/>t</svg>\n",
                                 why, sizeof why));
}
END_TEST

/* Tick labels for known ranges: decades on log axes, 1-2-5 steps on
   linear ones. */
static const struct {
    int log;
    double lo, hi;
    const char *labels;
} tick_cases[] = {
    {0, 0, 1000, "0|200|400|600|800|1000"},
    {0, 0, 1, "0|0.2|0.4|0.6|0.8|1.0"},
    {0, -3, 7, "-4|-2|0|2|4|6|8"},
    {0, 0, 0.0037, "0|0.0005|0.0010|0.0015|0.0020|0.0025|0.0030|0.0035|0.0040"},
    {0, 1e6, 5e7, "0|10M|20M|30M|40M|50M"},
    {0, 0, 960000, "0|0.2M|0.4M|0.6M|0.8M|1.0M"},
    {0, 0, 1e5, "0|20k|40k|60k|80k|100k"},
    {0, 5000, 12000, "5k|6k|7k|8k|9k|10k|11k|12k"},
    {0, 500, 1200, "500|600|700|800|900|1000|1100|1200"},
    {0, 0, 3e15, "0|5e+14|1e+15|1.5e+15|2e+15|2.5e+15|3e+15"},
    {0, -2e9, 2e9, "-2.0G|-1.5G|-1.0G|-0.5G|0|0.5G|1.0G|1.5G|2.0G"},
    {0, 0, 3e-9, "0|5e-10|1e-09|1.5e-09|2e-09|2.5e-09|3e-09"},
    {1, 1e-6, 1, "10^-6|10^-5|10^-4|10^-3|10^-2|10^-1|10^0"},
    {1, 0.02, 3, "10^-2|10^-1|10^0|10^1"},
    {1, 0.5, 0.6, "10^-1|10^0"},
    {1, 1, 1e12, "10^0|10^2|10^4|10^6|10^8|10^10|10^12"},
    {1, 1e-300, 1e300, "10^-300|10^-200|10^-100|10^0|10^100|10^200|10^300"},
};

START_TEST(test_tick_labels)
{
    double x[2], y[2] = {1, 2};
    char got[512];

    for (size_t i = 0; i < sizeof tick_cases / sizeof tick_cases[0]; i++) {
        plot_series s = {"s", x, y, 2};
        plot_spec sp = {.xlog = tick_cases[i].log};
        char *svg;

        x[0] = tick_cases[i].lo;
        x[1] = tick_cases[i].hi;
        svg = plot_ok(&sp, &s, 1);
        tick_labels(svg, "xtick", got, sizeof got);
        ck_assert_msg(strcmp(got, tick_cases[i].labels) == 0, "case %zu: [%g, %g] gave %s",
                      i, tick_cases[i].lo, tick_cases[i].hi, got);
        free(svg);
    }
}
END_TEST

/* A long curve keeps at most max_points, its first and last points, and
   its extremes (a single spike survives). */
START_TEST(test_downsampling)
{
    enum { N = 100001 };
    double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    static double px[2000], py[2000], fx[N], fy[N];
    size_t moves, dots;
    const size_t caps[] = {2, 3, 10, 200, 999};

    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = exp(-i / 20000.0) * (1 + 0.3 * sin(i / 50.0));
    }
    y[61234] = 50;              /* the spike */
    y[77777] = 1e-9;            /* and a dip */
    plot_series s = {"long", x, y, N};
    for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
        plot_spec sp = {.ylog = 1, .max_points = caps[c]};
        char *svg = plot_ok(&sp, &s, 1);
        long n = series_points(svg, 0, &moves, &dots, px, py, 2000);

        ck_assert_msg(n >= 2 && (size_t)n <= caps[c], "max_points %zu: %ld points",
                      caps[c], n);
        ck_assert_uint_eq(moves, 1);
        ck_assert_uint_eq(dots, 0);
        /* First and last: x = 0 and x = 100000 are the frame's edges. */
        ck_assert_double_eq_tol(px[0], 74.0, 1e-9);
        ck_assert_double_eq_tol(px[n - 1], 704.0, 1e-9);
        for (long i = 1; i < n; i++)
            ck_assert_msg(px[i] >= px[i - 1], "x goes back at %ld", i);
        if (caps[c] >= 10) {
            /* The extremes are the same pixels as in the full curve. */
            plot_spec full = {.ylog = 1, .max_points = N};
            char *all = plot_ok(&full, &s, 1);
            long m = series_points(all, 0, &moves, &dots, fx, fy, N);
            double top = 1e9, low = -1e9, ftop = 1e9, flow = -1e9;
            ck_assert_int_eq(m, N);
            for (long i = 0; i < n; i++) {
                top = fmin(top, py[i]);
                low = fmax(low, py[i]);
            }
            for (long i = 0; i < m; i++) {
                ftop = fmin(ftop, fy[i]);
                flow = fmax(flow, fy[i]);
            }
            ck_assert_double_eq(top, ftop);
            ck_assert_double_eq(low, flow);
            free(all);
        }
        free(svg);
    }
    /* The default bound is 1000, and x that goes back (a log-x axis and a
       zig-zag) still keeps the bound. */
    {
        plot_spec sp = {.xlog = 1, .ylog = 1};
        for (int i = 0; i < N; i++)
            x[i] = 1 + (i % 2 ? N - i : i);
        char *svg = plot_ok(&sp, &s, 1);
        long n = series_points(svg, 0, &moves, &dots, px, py, 2000);
        ck_assert_msg(n >= 2 && n <= 1000, "%ld points", n);
        free(svg);
    }
    free(x);
    free(y);
}
END_TEST

/* Points that cannot be drawn break the curve: NaN, Inf, and zero or
   negative values on a log axis. */
START_TEST(test_nonfinite_breaks)
{
    static const double x[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    static const double y[] = {1, 0.1, NAN, 0.01, INFINITY, 0.001, 0, 1e-4, -1};
    double px[16], py[16];
    size_t moves, dots;
    plot_series s = {"gaps", x, y, 9};

    {
        plot_spec sp = {.ylog = 1};
        char *svg = plot_ok(&sp, &s, 1);
        char got[256];
        /* [1, 0.1] a line; 0.01, 0.001 and 1e-4 each alone: dots. */
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 16), 5);
        ck_assert_uint_eq(moves, 1);
        ck_assert_uint_eq(dots, 3);
        tick_labels(svg, "ytick", got, sizeof got);
        ck_assert_str_eq(got, "10^-4|10^-3|10^-2|10^-1|10^0");
        free(svg);
    }
    {
        /* On a linear axis 0 and -1 are points: [1, .1], [.01], [.001, 0,
           1e-4, -1]. */
        plot_spec sp = {0};
        char *svg = plot_ok(&sp, &s, 1);
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 16), 7);
        ck_assert_uint_eq(moves, 2);
        ck_assert_uint_eq(dots, 1);
        free(svg);
    }
    {
        /* Non-finite x, and x <= 0 on a log x axis. */
        static const double bx[] = {NAN, 0, -5, 10, 100, -INFINITY, 1000};
        static const double by[] = {1, 2, 3, 4, 5, 6, 7};
        plot_series t = {"x gaps", bx, by, 7};
        plot_spec sp = {.xlog = 1};
        char *svg = plot_ok(&sp, &t, 1), got[128];
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 16), 3);
        ck_assert_uint_eq(moves, 1);
        ck_assert_uint_eq(dots, 1);
        tick_labels(svg, "xtick", got, sizeof got);
        ck_assert_str_eq(got, "10^1|10^2|10^3");
        free(svg);
    }
}
END_TEST

START_TEST(test_empty_and_no_data)
{
    static const double x[] = {1, 2}, y[] = {0.5, 0.25}, nan2[] = {NAN, NAN};
    double px[4], py[4];
    size_t moves, dots;
    plot_spec sp = {.ylog = 1, .title = "empty"};

    {
        char *svg = plot_ok(&sp, NULL, 0);
        ck_assert_ptr_nonnull(strstr(svg, ">no data</text>"));
        ck_assert_ptr_null(strstr(svg, "class=\"legend\""));
        ck_assert_ptr_null(strstr(svg, "class=\"ytick\""));
        free(svg);
    }
    {
        /* Nothing drawable: still in the legend. */
        plot_series s[] = {{"none", NULL, NULL, 0}, {"all nan", x, nan2, 2}};
        char *svg = plot_ok(&sp, s, 2);
        ck_assert_ptr_nonnull(strstr(svg, ">no data</text>"));
        ck_assert_ptr_nonnull(strstr(svg, ">none</text>"));
        ck_assert_ptr_nonnull(strstr(svg, ">all nan</text>"));
        ck_assert_int_eq(series_points(svg, 1, &moves, &dots, px, py, 4), -1);
        free(svg);
    }
    {
        plot_series s[] = {{"none", x, y, 0}, {"two", x, y, 2}};
        char *svg = plot_ok(&sp, s, 2);
        ck_assert_ptr_null(strstr(svg, ">no data</text>"));
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 4), -1);
        ck_assert_int_eq(series_points(svg, 1, &moves, &dots, px, py, 4), 2);
        ck_assert_uint_eq(count_str(svg, "class=\"legend-name\""), 2);
        free(svg);
    }
}
END_TEST

/* Distinct labels in increasing order, with v inside their range. */
static void check_brackets(const char *labels, double v)
{
    char copy[512], *save = NULL;
    double prev = -INFINITY, first = NAN, last = NAN;
    int n = 0;

    snprintf(copy, sizeof copy, "%s", labels);
    for (char *t = strtok_r(copy, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
        char *end;
        double val = strncmp(t, "10^", 3) == 0 ? pow(10, atof(t + 3)) : strtod(t, &end);
        if (strncmp(t, "10^", 3) != 0 && *end) {
            const char *units = "kMGT", *u = strchr(units, *end);
            ck_assert_msg(u && end[1] == '\0', "label %s", t);
            val *= pow(1000, (double)(u - units + 1));
        }
        ck_assert_msg(val > prev, "labels not increasing: %s", labels);
        prev = val;
        if (n++ == 0)
            first = val;
        last = val;
    }
    ck_assert_msg(n >= 2, "fewer than two labels: %s", labels);
    ck_assert_msg(first <= v && v <= last, "%g not within %s", v, labels);
}

START_TEST(test_one_point_and_all_equal)
{
    static const double values[] = {3.0, 0.0, -2.5, 1e-3, 7e12, 5e-324, DBL_MAX};
    double x[100], y[100], px[128], py[128];
    size_t moves, dots;
    char got[512];

    for (size_t v = 0; v < sizeof values / sizeof values[0]; v++) {
        for (int log = 0; log <= 1; log++) {
            for (int i = 0; i < 100; i++) {
                x[i] = i + 1;
                y[i] = values[v];
            }
            if (log && values[v] <= 0)
                continue;
            plot_spec sp = {.ylog = log};
            /* One point: a dot, and axes around it. */
            plot_series one = {"one", x, y, 1};
            char *svg = plot_ok(&sp, &one, 1);
            ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 128), 1);
            ck_assert_uint_eq(dots, 1);
            tick_labels(svg, "ytick", got, sizeof got);
            check_brackets(got, values[v]);
            tick_labels(svg, "xtick", got, sizeof got);
            check_brackets(got, 1);
            free(svg);
            /* All equal: a flat line inside the frame. */
            plot_series flat = {"flat", x, y, 100};
            svg = plot_ok(&sp, &flat, 1);
            ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 128), 100);
            for (int i = 0; i < 100; i++) {
                ck_assert_double_eq(py[i], py[0]);
                ck_assert_msg(py[i] >= 16 && py[i] <= 450 - 30, "value %g at y %g",
                              values[v], py[i]);
            }
            tick_labels(svg, "ytick", got, sizeof got);
            check_brackets(got, values[v]);
            free(svg);
        }
    }
}
END_TEST

START_TEST(test_huge_ranges)
{
    static const double x[] = {1, 2, 3, 4};
    static const double tiny_huge[] = {1e-300, 1e-100, 1e100, 1e300};
    static const double extremes[] = {-DBL_MAX, -1e-300, 1e-300, DBL_MAX};
    static const double subnormal[] = {5e-324, 1e-320, 2e-310, 1e-308};
    double px[8], py[8];
    size_t moves, dots;
    char got[512];

    {
        plot_series s = {"wide", x, tiny_huge, 4};
        plot_spec sp = {.ylog = 1};
        char *svg = plot_ok(&sp, &s, 1);
        tick_labels(svg, "ytick", got, sizeof got);
        ck_assert_str_eq(got, "10^-300|10^-200|10^-100|10^0|10^100|10^200|10^300");
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 8), 4);
        ck_assert_double_eq_tol(py[0], 450 - 30, 1e-9);   /* the bottom */
        ck_assert_double_eq_tol(py[3], 16, 1e-9);         /* the top */
        free(svg);
    }
    {
        plot_series s = {"extremes", x, extremes, 4};
        plot_spec sp = {0};
        char *svg = plot_ok(&sp, &s, 1);
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 8), 4);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(py[i] >= 16 && py[i] <= 420, "y %g", py[i]);
        ck_assert(py[0] > py[1] && py[2] > py[3]);
        free(svg);
    }
    for (int log = 0; log <= 1; log++) {
        plot_series s = {"subnormal", x, subnormal, 4};
        plot_spec sp = {.ylog = log};
        char *svg = plot_ok(&sp, &s, 1);
        ck_assert_int_eq(series_points(svg, 0, &moves, &dots, px, py, 8), 4);
        if (log) {
            tick_labels(svg, "ytick", got, sizeof got);
            check_brackets(got, 1e-320);
            ck_assert(py[0] > py[1] && py[1] > py[2] && py[2] > py[3]);
        }
        free(svg);
    }
}
END_TEST

/* The same input gives the same bytes; series differ in colour and dash. */
START_TEST(test_deterministic_and_distinct)
{
    static const double x[] = {1, 10, 100, 1000}, y[] = {1, 1e-2, 1e-4, 1e-8};
    plot_series s[6];
    char names[6][16];
    plot_spec sp = {.title = "t", .xlabel = "rounds", .ylabel = "gap",
                    .xlog = 1, .ylog = 1, .width = 800, .height = 500};
    size_t la, lb;

    for (int i = 0; i < 6; i++) {
        snprintf(names[i], sizeof names[i], "job %d", i);
        s[i] = (plot_series){names[i], x, y, 4};
    }
    char *a = plot_svg(&sp, s, 6, &la), *b = plot_svg(&sp, s, 6, &lb);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(la, lb);
    ck_assert(memcmp(a, b, la) == 0);
    ck_assert_ptr_nonnull(strstr(a, "width=\"800\" height=\"500\""));
    free(b);

    /* Colour + dash pairs of the legend entries are all different. */
    char pairs[6][64];
    const char *p = strstr(a, "<g class=\"legend\">");
    ck_assert_ptr_nonnull(p);
    for (int i = 0; i < 6; i++) {
        const char *st = strstr(p, "stroke=\"#"), *tx;
        ck_assert_ptr_nonnull(st);
        tx = strstr(st, "/>");
        snprintf(pairs[i], sizeof pairs[i], "%.*s", (int)(tx - st), st);
        for (int j = 0; j < i; j++)
            ck_assert_msg(strcmp(pairs[i], pairs[j]) != 0, "series %d and %d look alike", i, j);
        p = tx;
    }
    ck_assert_uint_eq(count_str(a, "<g class=\"series\""), 6);
    ck_assert_ptr_nonnull(strstr(a, ">rounds</text>"));
    ck_assert_ptr_nonnull(strstr(a, ">gap</text>"));
    free(a);
}
END_TEST

/* Many series: the legend takes columns and stays inside the picture. */
START_TEST(test_many_series_legend)
{
    static const double x[] = {1, 2}, y[] = {1, 2};
    plot_series s[40];
    plot_spec sp = {.height = 200};
    char *svg;
    const char *p;

    for (int i = 0; i < 40; i++)
        s[i] = (plot_series){"variant", x, y, 2};
    svg = plot_ok(&sp, s, 40);
    ck_assert_uint_eq(count_str(svg, "class=\"legend-name\""), 40);
    for (p = strstr(svg, "class=\"legend-name\" x=\""); p;
         p = strstr(p + 1, "class=\"legend-name\" x=\"")) {
        double lx, ly;
        ck_assert_int_eq(sscanf(p, "class=\"legend-name\" x=\"%lf\" y=\"%lf\"", &lx, &ly), 2);
        ck_assert_msg(ly > 0 && ly < 200, "legend row at y %g", ly);
    }
    free(svg);
}
END_TEST

/* The legend goes to the corner where it hides no point: here curves fill
   the top right (a slow one) and the top left, so it goes below. */
START_TEST(test_legend_avoids_curves)
{
    enum { N = 200 };
    static double x[N], slow[N], fast[N], px[N], py[N];
    plot_series s[] = {{"fast", x, fast, N}, {"slow", x, slow, N}};
    plot_spec sp = {.ylog = 1};
    double lx, ly, lw, lh;
    size_t moves, dots;
    const char *p;
    char *svg;

    for (int i = 0; i < N; i++) {
        x[i] = i;
        slow[i] = 1 - 0.8 * i / N;          /* stays near the top */
        fast[i] = pow(10, -6.0 * i / N);    /* down to 1e-6 */
    }
    svg = plot_ok(&sp, s, 2);
    p = strstr(svg, "<g class=\"legend\">\n<rect ");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "<g class=\"legend\">\n<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" "
                               "height=\"%lf\"", &lx, &ly, &lw, &lh), 4);
    for (int i = 0; i < 2; i++) {
        long n = series_points(svg, (size_t)i, &moves, &dots, px, py, N);
        ck_assert_int_eq(n, N);
        for (long j = 0; j < n; j++)
            ck_assert_msg(!(px[j] >= lx && px[j] <= lx + lw && py[j] >= ly && py[j] <= ly + lh),
                          "series %d point %ld (%g, %g) under the legend", i, j, px[j], py[j]);
    }
    ck_assert_msg(ly > 200, "the legend is not at the bottom (y %g)", ly);
    free(svg);
}
END_TEST

/* A band: one closed, lightly filled path per banded series, the axis
 * stretched to hold it, points where lo or hi is not drawable left out;
 * without bands the bytes of plot_svg. */
START_TEST(test_bands)
{
    static const double x[] = {1, 2, 3, 4}, y[] = {1, 0.1, 0.01, 0.001};
    static const double lo[] = {0.5, 0.05, NAN, 1e-6}, hi[] = {2, 0.2, 0.02, 0.002};
    plot_series s[] = {{"median of 3", x, y, 4}, {"alone", x, y, 4}};
    plot_band bands[] = {{lo, hi}, {NULL, NULL}};
    plot_spec sp = {.title = "bands", .ylog = 1};
    size_t len = 0, count = 0;
    char *plain = plot_ok(&sp, s, 2), *svg = plot_svg_bands(&sp, s, bands, 2, &len);
    char *none = plot_svg_bands(&sp, s, NULL, 2, &len), why[160];
    const char *p, *bad = xml_check(svg, why, sizeof why);

    ck_assert_msg(bad == NULL, "not well-formed: %s", bad);
    ck_assert_str_eq(none, plain);
    for (p = svg; (p = strstr(p, "class=\"band\"")); p++)
        count++;
    ck_assert_uint_eq(count, 1);
    ck_assert_ptr_nonnull(strstr(svg, "fill-opacity=\"0.18\""));
    /* 3 drawable points each way, then closed */
    p = strstr(svg, "class=\"band\"");
    p = strstr(p, " d=\"");
    count = 0;
    for (const char *q = p + 4; *q != '"'; q++)
        count += *q == 'M' || *q == 'L';
    ck_assert_uint_eq(count, 6);
    ck_assert_ptr_nonnull(strstr(p, " Z\""));
    /* the lower end of the y axis reaches 1e-6 with the band, not without */
    ck_assert_ptr_nonnull(strstr(svg, "10<tspan dy=\"-6\" font-size=\"9\">-6</tspan>"));
    ck_assert_ptr_null(strstr(plain, "10<tspan dy=\"-6\" font-size=\"9\">-6</tspan>"));
    free(svg);
    free(none);
    free(plain);
}
END_TEST

static Suite *plot_suite(void)
{
    Suite *s = suite_create("plot");
    TCase *tc = tcase_create("svg");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_checker_refuses_bad_xml);
    tcase_add_test(tc, test_hostile_text_is_escaped);
    tcase_add_test(tc, test_tick_labels);
    tcase_add_test(tc, test_downsampling);
    tcase_add_test(tc, test_nonfinite_breaks);
    tcase_add_test(tc, test_empty_and_no_data);
    tcase_add_test(tc, test_one_point_and_all_equal);
    tcase_add_test(tc, test_huge_ranges);
    tcase_add_test(tc, test_deterministic_and_distinct);
    tcase_add_test(tc, test_many_series_legend);
    tcase_add_test(tc, test_legend_avoids_curves);
    tcase_add_test(tc, test_bands);
    suite_add_tcase(s, tc);
    return s;
}



int main(void)
{
    return tu_run(plot_suite());
}
