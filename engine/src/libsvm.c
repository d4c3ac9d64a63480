/*
 * The LibSVM reader: one streaming pass over a plain or gzip file into CSR
 * arrays. The input is treated as hostile: anything malformed is an error
 * that names the file and line, never a silently skipped line.
 */
#include "ecopt/data.h"

#include <ctype.h>
#include <float.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

/* Lines are split out of chunks this big; a longer line doubles the buffer. */
#define READ_CHUNK ((size_t)256 << 10)
/*
 * zlib's own buffer (its default is 8 KiB, a syscall each). A read of at
 * least twice this size is read or inflated straight into ours, uncopied.
 */
#define GZ_BUFFER (64u << 10)
/* gzread takes an unsigned and returns an int, so ask for less than this. */
#define GZ_MAX_READ ((size_t)1 << 30)
#define INITIAL_ROWS 1024
#define INITIAL_NNZ 16384
/* An error message quotes at most this many bytes of the offending token. */
#define QUOTE_MAX 40
/* Decimal integers this short are exact in a double (10^15 < 2^53). */
#define FAST_DIGITS 15
_Static_assert(FAST_DIGITS <= 15, "10^FAST_DIGITS must stay below 2^53");

struct reader {
    const char *path;
    gzFile gz;
    ec_err *e;
    uint32_t max_index;
    size_t max_line;
    uint64_t max_nnz;
    uint64_t line;          /* 1-based number of the line being parsed */
    const char *line_start; /* where that line begins, for columns */
    int redact;             /* messages name columns, never quote bytes */
    int count_only;         /* counts and checks; no arrays */
    char *buf;              /* cap bytes, plus one for a terminating NUL */
    size_t cap;
    ec_dataset ds;          /* y holds the raw labels until the file ends */
    uint64_t row_cap;       /* entries y holds; row_ptr holds one more */
    uint64_t nnz_cap;
    double labels[2];       /* the distinct label values, in order seen */
};

/* Sets e to "PATH:LINE: what is wrong" and returns code. */
static int fail(struct reader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct reader *r, int code, const char *fmt, ...)
{
    char what[sizeof r->e->msg];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ec_err_set(r->e, code, "%s:%llu: %s", r->path,
                      (unsigned long long)r->line, what);
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Tokens end at a blank or at the NUL that replaced the line's newline. */
static int is_end(char c)
{
    return c == ' ' || c == '\t' || c == '\0';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char *skip_blanks(char *p)
{
    while (is_blank(*p))
        p++;
    return p;
}

/*
 * Copies the token at p (up to a blank, the line end or stop) into out for
 * an error message, escaping control bytes so that a hostile file cannot
 * write raw bytes into a log, and cutting long tokens short.
 */
static const char *quote(const struct reader *r, const char *p, char stop,
                         int quoted, char out[QUOTE_MAX + 40])
{
    size_t n = 0;

    if (r->redact) {
        snprintf(out, QUOTE_MAX + 40, "at column %zu",
                 (size_t)(p - r->line_start) + 1);
        return out;
    }
    if (quoted)
        out[n++] = '\'';
    for (; !is_end(*p) && *p != stop; p++) {
        unsigned char c = (unsigned char)*p;

        if (n >= QUOTE_MAX) {
            memcpy(out + n, "...", 3);
            n += 3;
            break;
        }
        if (c < 0x20 || c >= 0x7f) {
            snprintf(out + n, 5, "\\x%02x", c);
            n += 4;
        } else {
            out[n++] = (char)c;
        }
    }
    if (quoted)
        out[n++] = '\'';
    out[n] = '\0';
    return out;
}

/* The shortest of %.15g and %.17g that gives v back, so "1" not "1.000". */
static const char *format_label(double v, char out[32])
{
    snprintf(out, 32, "%.15g", v);
    if (strtod(out, NULL) != v)
        snprintf(out, 32, "%.17g", v);
    return out;
}

/*
 * Parses a finite number ending at a blank or the line end into *v.
 * Returns 0, or 1 if it is not a number, or 2 if it is NaN or infinite
 * (strtod accepts "nan", "inf" and overflows such as "1e999").
 */
static int parse_number(char **pp, double *v)
{
    char *p = *pp, *end;
    uint64_t n = 0;
    int sign = *p == '-' || *p == '+', i;

    /*
     * Most labels and values are small integers ("-1", madelon's "485"):
     * convert those directly, exactly as strtod would (-0 included), since
     * strtod is the slow part.
     */
    for (i = sign; i < FAST_DIGITS + sign && is_digit(p[i]); i++)
        n = n * 10 + (uint64_t)(p[i] - '0');
    if (i > sign && is_end(p[i])) {
        *v = *p == '-' ? -(double)n : (double)n;
        *pp = p + i;
        return 0;
    }
#if FLT_EVAL_METHOD == 0
    /*
     * Most other values are short decimals ("-0.724"): digits, a point,
     * digits, FAST_DIGITS of them or fewer, no exponent. Their digits as
     * an integer n and 10^f (f the digits after the point, f <=
     * FAST_DIGITS) are both exact in a double, so n / 10^f, one correctly
     * rounded division, is the nearest double to the decimal: what strtod
     * gives. (The loop above stopped within FAST_DIGITS digits.)
     */
    if (p[i] == '.') {
        static const double pow10[FAST_DIGITS + 1] = {
            1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
            1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
        int j = i + 1;

        for (; j - sign - 1 < FAST_DIGITS && is_digit(p[j]); j++)
            n = n * 10 + (uint64_t)(p[j] - '0');
        if (j - sign > 1 && is_end(p[j])) {
            double q = (double)n / pow10[j - i - 1];

            *v = *p == '-' ? -q : q;
            *pp = p + j;
            return 0;
        }
    }
#endif
    /* strtod skips leading white space such as '\v' or '\r': we do not. */
    if (isspace((unsigned char)*p))
        return 1;
    *v = strtod(p, &end);
    if (end == p || !is_end(*end))
        return 1;
    if (!isfinite(*v))
        return 2;
    *pp = end;
    return 0;
}

static int parse_label(struct reader *r, char **pp, double *label)
{
    char q[QUOTE_MAX + 40], a[32], b[32];
    double lo, hi;

    switch (parse_number(pp, label)) {
    case 1:
        return fail(r, EC_EPARSE, "label %s is not a number",
                    quote(r, *pp, '\0', 1, q));
    case 2:
        return fail(r, EC_EPARSE, "label %s is not a finite number",
                    quote(r, *pp, '\0', 1, q));
    }
    /* -0 == 0 and "+1" == "1.0", so values, not spellings, are counted. */
    if (r->ds.n_labels == 0) {
        r->labels[r->ds.n_labels++] = *label;
    } else if (*label != r->labels[0]) {
        if (r->ds.n_labels == 1) {
            r->labels[r->ds.n_labels++] = *label;
        } else if (*label != r->labels[1]) {
            lo = fmin(r->labels[0], r->labels[1]);
            hi = fmax(r->labels[0], r->labels[1]);
            if (r->redact)
                return fail(r, EC_EPARSE, "a third label value (a file "
                            "holds two at most)");
            return fail(r, EC_EPARSE,
                        "third label value %s (labels so far: %s and %s)",
                        format_label(*label, q), format_label(lo, a),
                        format_label(hi, b));
        }
    }
    return 0;
}

/*
 * Parses the index of an "index:value" token: a plain decimal integer from
 * 1 to max_index (no sign, no point, no hex), followed by ':'.
 */
static int parse_index(struct reader *r, char **pp, uint32_t *index)
{
    char *p = *pp, *t = p;
    char q[QUOTE_MAX + 40];
    uint64_t v = 0;

    if (*t == '-') {
        for (t++; is_digit(*t); t++)
            ;
        if (*t == ':' && t > p + 1)
            return fail(r, EC_EPARSE, "feature index %s is not positive "
                        "(indices start at 1)", quote(r, p, ':', 0, q));
        t = p;
    }
    /* Stops growing past the limit, so no digit string can overflow v. */
    for (; is_digit(*t); t++) {
        if (v <= r->max_index)
            v = v * 10 + (uint64_t)(*t - '0');
    }
    if (*t != ':' || t == p) {
        while (!is_end(*t) && *t != ':')
            t++;
        if (*t != ':')
            return fail(r, EC_EPARSE,
                        "feature %s has no ':' (expected index:value)",
                        quote(r, p, '\0', 1, q));
        return fail(r, EC_EPARSE,
                    "feature %s: index is not a plain integer",
                    quote(r, p, '\0', 1, q));
    }
    if (v == 0)
        return fail(r, EC_EPARSE,
                    "feature index %s is not positive (indices start at 1)",
                    quote(r, p, ':', 0, q));
    if (v > r->max_index)
        return fail(r, EC_ELIMIT,
                    "feature index %s exceeds the limit %lu (max_index)",
                    quote(r, p, ':', 0, q), (unsigned long)r->max_index);
    *index = (uint32_t)v;
    *pp = t + 1;
    return 0;
}

static int grow_rows(struct reader *r)
{
    uint64_t cap = r->row_cap * 2;
    uint64_t *row_ptr;
    double *y;

    /* n_rows is a uint32_t; the caller has checked that one more fits. */
    if (cap > UINT32_MAX)
        cap = UINT32_MAX;
    if (cap + 1 > SIZE_MAX / sizeof *row_ptr)
        return fail(r, EC_ENOMEM, "out of memory for %llu samples",
                    (unsigned long long)cap);
    /* Each pointer is kept as soon as it moves, so a failure leaks nothing. */
    if (!(row_ptr = realloc(r->ds.row_ptr, (cap + 1) * sizeof *row_ptr)))
        return fail(r, EC_ENOMEM, "out of memory for %llu samples",
                    (unsigned long long)cap);
    r->ds.row_ptr = row_ptr;
    if (!(y = realloc(r->ds.y, cap * sizeof *y)))
        return fail(r, EC_ENOMEM, "out of memory for %llu samples",
                    (unsigned long long)cap);
    r->ds.y = y;
    r->row_cap = cap;
    return 0;
}

static int grow_nnz(struct reader *r)
{
    uint64_t cap = r->nnz_cap * 2;
    uint32_t *col;
    double *val;

    /* The caller has checked nnz < max_nnz, so cap stays above nnz. */
    if (cap > r->max_nnz)
        cap = r->max_nnz;
    if (cap > SIZE_MAX / sizeof *val)
        return fail(r, EC_ENOMEM, "out of memory for %llu nonzeros",
                    (unsigned long long)cap);
    if (!(col = realloc(r->ds.col, cap * sizeof *col)))
        return fail(r, EC_ENOMEM, "out of memory for %llu nonzeros",
                    (unsigned long long)cap);
    r->ds.col = col;
    if (!(val = realloc(r->ds.val, cap * sizeof *val)))
        return fail(r, EC_ENOMEM, "out of memory for %llu nonzeros",
                    (unsigned long long)cap);
    r->ds.val = val;
    r->nnz_cap = cap;
    return 0;
}

/*
 * Parses one line of len bytes (its '\n' excluded) into a row. s[len] may
 * be overwritten: it is the '\n' or the spare byte after the buffer.
 */
static int parse_line(struct reader *r, char *s, size_t len)
{
    ec_dataset *ds = &r->ds;
    char q[QUOTE_MAX + 40];
    char *p, *nul;
    double label, value;
    uint32_t feature = 0, prev_feature = 0;
    int rc;

    /* "\r\n" is one line ending, so the '\r' counts toward neither limit. */
    if (len > 0 && s[len - 1] == '\r')
        len--;
    if (len > r->max_line)
        return fail(r, EC_ELIMIT,
                    "line longer than the limit of %zu bytes (max_line)",
                    r->max_line);
    /* A NUL would end every token early and hide the rest of the line. */
    if ((nul = memchr(s, '\0', len)))
        return fail(r, EC_EPARSE, "NUL byte at column %zu",
                    (size_t)(nul - s) + 1);
    s[len] = '\0';
    r->line_start = s;

    p = skip_blanks(s);
    if (*p == '\0')
        return 0;   /* blank lines hold no sample: skipped, not all-zero */
    if ((rc = parse_label(r, &p, &label)) < 0)
        return rc;

    for (p = skip_blanks(p); *p; p = skip_blanks(p)) {
        if ((rc = parse_index(r, &p, &feature)) < 0)
            return rc;
        if (feature == prev_feature)
            return fail(r, EC_EPARSE, "feature index %lu repeated "
                        "(indices must strictly increase)",
                        (unsigned long)feature);
        if (feature < prev_feature)
            return fail(r, EC_EPARSE, "feature index %lu after %lu "
                        "(indices must strictly increase)",
                        (unsigned long)feature, (unsigned long)prev_feature);
        if (is_end(*p))
            return fail(r, EC_EPARSE, "feature %lu: empty value after ':'",
                        (unsigned long)feature);
        switch (parse_number(&p, &value)) {
        case 1:
            return fail(r, EC_EPARSE, "feature %lu: value %s is not a "
                        "number", (unsigned long)feature, quote(r, p, '\0', 1, q));
        case 2:
            return fail(r, EC_EPARSE, "feature %lu: value %s is not a "
                        "finite number", (unsigned long)feature,
                        quote(r, p, '\0', 1, q));
        }
        if (ds->nnz == r->max_nnz)
            return fail(r, EC_ELIMIT,
                        "more than %llu nonzeros in the file (max_nnz)",
                        (unsigned long long)r->max_nnz);
        if (!r->count_only) {
            if (ds->nnz == r->nnz_cap && (rc = grow_nnz(r)) < 0)
                return rc;
            /* Explicit zeros ("106:0") are kept: the file said so. */
            ds->col[ds->nnz] = feature - 1;
            ds->val[ds->nnz] = value;
        }
        ds->nnz++;
        if (feature > ds->d)
            ds->d = feature;
        prev_feature = feature;
    }

    if (ds->n_rows == UINT32_MAX)
        return fail(r, EC_ELIMIT, "more than %lu samples",
                    (unsigned long)UINT32_MAX);
    if (!r->count_only) {
        if (ds->n_rows == r->row_cap && (rc = grow_rows(r)) < 0)
            return rc;
        ds->y[ds->n_rows] = label;
        ds->row_ptr[ds->n_rows + 1] = ds->nnz;
    }
    ds->n_rows++;
    return 0;
}

/* Turns the zlib error behind a short read into an EC_EIO message. */
static int read_error(struct reader *r)
{
    int zcode = Z_OK;
    const char *zmsg = gzerror(r->gz, &zcode);
    size_t plen = strlen(r->path);

    /* zlib writes "PATH: what"; our prefix names the path already. */
    if (strncmp(zmsg, r->path, plen) == 0 && zmsg[plen] == ':')
        zmsg += plen + 1 + (zmsg[plen + 1] == ' ');
    if (!*zmsg)
        zmsg = "no reason given";
    switch (zcode) {
    case Z_MEM_ERROR:
        return fail(r, EC_ENOMEM, "out of memory in zlib");
    case Z_BUF_ERROR:
        return fail(r, EC_EIO, "truncated gzip data (%s)", zmsg);
    case Z_DATA_ERROR:
        return fail(r, EC_EIO, "corrupt gzip data (%s)", zmsg);
    default:
        return fail(r, EC_EIO, "read failed (%s)", zmsg);
    }
}

/*
 * Reads more of the file behind the pending bytes [*begin, *end), moving
 * them to the front and doubling the buffer when a line fills it.
 */
static int refill(struct reader *r, size_t *begin, size_t *end, int *at_eof)
{
    size_t pending = *end - *begin, want, cap, limit;
    char *buf;
    int n, zcode = Z_OK;

    /* The pending bytes hold no '\n'; one '\r' may still be the ending. */
    if (pending > 1 && pending - 1 > r->max_line) {
        r->line++;
        return fail(r, EC_ELIMIT,
                    "line longer than the limit of %zu bytes (max_line)",
                    r->max_line);
    }
    memmove(r->buf, r->buf + *begin, pending);
    *begin = 0;
    *end = pending;
    if (pending == r->cap) {
        /* A line may need max_line bytes, its '\r' and one more to see. */
        limit = r->max_line > SIZE_MAX / 2 - 2 ? SIZE_MAX / 2
                                               : r->max_line + 2;
        cap = r->cap > limit / 2 ? limit : r->cap * 2;
        if (cap <= r->cap || !(buf = realloc(r->buf, cap + 1))) {
            r->line++;
            return fail(r, EC_ENOMEM, "out of memory for a line of %zu bytes",
                        cap);
        }
        r->buf = buf;
        r->cap = cap;
    }
    want = r->cap - *end;
    if (want > GZ_MAX_READ)
        want = GZ_MAX_READ;
    n = gzread(r->gz, r->buf + *end, (unsigned)want);
    if (n <= 0) {
        /* A truncated gzip file reads as a clean end: only gzerror tells. */
        gzerror(r->gz, &zcode);
        if (n < 0 || (zcode != Z_OK && zcode != Z_STREAM_END)) {
            r->line++;
            return read_error(r);
        }
        *at_eof = 1;
        return 0;
    }
    *end += (size_t)n;
    return 0;
}

/* Splits the stream into lines without copying them and parses each one. */
static int read_lines(struct reader *r)
{
    size_t begin = 0, end = 0, len;
    int at_eof = 0, rc;
    char *nl;

    for (;;) {
        nl = memchr(r->buf + begin, '\n', end - begin);
        if (nl) {
            len = (size_t)(nl - (r->buf + begin));
            r->line++;
            if ((rc = parse_line(r, r->buf + begin, len)) < 0)
                return rc;
            begin += len + 1;
        } else if (at_eof) {
            /* A last line without '\n' is still a line. */
            if (begin == end)
                return 0;
            r->line++;
            return parse_line(r, r->buf + begin, end - begin);
        } else if ((rc = refill(r, &begin, &end, &at_eof)) < 0) {
            return rc;
        }
    }
}

/*
 * Maps the raw labels to -1/+1 now that all of them are known, and gives
 * back the arrays' spare capacity.
 */
static int finish(struct reader *r)
{
    ec_dataset *ds = &r->ds;
    uint64_t nnz_kept;
    void *p;

    if (ds->n_rows == 0) {
        if (r->line == 0)
            r->line = 1;
        return fail(r, EC_EPARSE, "no samples in the file%s",
                    r->line > 1 ? " (only blank lines)" : "");
    }
    if (ds->n_labels == 2) {
        ds->label_neg = fmin(r->labels[0], r->labels[1]);
        ds->label_pos = fmax(r->labels[0], r->labels[1]);
    } else if (r->labels[0] > 0) {
        /*
         * One label in the whole file is valid (a shard of one class, a
         * test file): a positive value becomes +1, zero or a negative one
         * -1, and the label mapped to no file value is NaN.
         */
        ds->label_pos = r->labels[0];
        ds->label_neg = NAN;
    } else {
        ds->label_neg = r->labels[0];
        ds->label_pos = NAN;
    }
    if (r->count_only)
        return 0;
    for (uint32_t i = 0; i < ds->n_rows; i++)
        ds->y[i] = ds->y[i] == ds->label_neg ? -1.0 : 1.0;

    /*
     * Shrinking cannot fail in practice, and if it does the larger block
     * is still valid. A file of label-only lines keeps one spare entry so
     * that col and val are never NULL.
     */
    if ((p = realloc(ds->row_ptr, (ds->n_rows + 1) * sizeof *ds->row_ptr)))
        ds->row_ptr = p;
    if ((p = realloc(ds->y, ds->n_rows * sizeof *ds->y)))
        ds->y = p;
    nnz_kept = ds->nnz ? ds->nnz : 1;
    if ((p = realloc(ds->col, nnz_kept * sizeof *ds->col)))
        ds->col = p;
    if ((p = realloc(ds->val, nnz_kept * sizeof *ds->val)))
        ds->val = p;
    return 0;
}

/* Allocates the first, small arrays; they double as the file needs. */
static int start(struct reader *r)
{
    r->cap = READ_CHUNK;
    if (r->count_only) {
        if (!(r->buf = malloc(r->cap + 1)))
            return ec_err_set(r->e, EC_ENOMEM, "%s: out of memory", r->path);
        return 0;
    }
    r->row_cap = INITIAL_ROWS;
    r->nnz_cap = INITIAL_NNZ < r->max_nnz ? INITIAL_NNZ : r->max_nnz;
    r->buf = malloc(r->cap + 1);
    r->ds.row_ptr = malloc((r->row_cap + 1) * sizeof *r->ds.row_ptr);
    r->ds.y = malloc(r->row_cap * sizeof *r->ds.y);
    r->ds.col = malloc(r->nnz_cap * sizeof *r->ds.col);
    r->ds.val = malloc(r->nnz_cap * sizeof *r->ds.val);
    if (!r->buf || !r->ds.row_ptr || !r->ds.y || !r->ds.col || !r->ds.val)
        return ec_err_set(r->e, EC_ENOMEM, "%s: out of memory", r->path);
    r->ds.row_ptr[0] = 0;
    return 0;
}

/*
 * The body of both entry points: reads the file at path, or the descriptor
 * fd when it is not -1 (path then only names it in messages).
 */
static int read_file(const char *path, int fd, const ec_libsvm_opts *opts,
                     ec_dataset *out, ec_err *e)
{
    struct reader r = {0};
    locale_t c_numeric = (locale_t)0, caller_locale = (locale_t)0;
    int rc, own_fd = -1;

    if (!out)
        return ec_err_set(e, EC_EINVAL, "ec_libsvm_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path)
        return ec_err_set(e, EC_EINVAL, "ec_libsvm_read: path is NULL");
    r.path = path;
    r.e = e;
    r.max_index = opts && opts->max_index ? opts->max_index
                                          : EC_LIBSVM_DEFAULT_MAX_INDEX;
    r.max_line = opts && opts->max_line ? opts->max_line
                                        : EC_LIBSVM_DEFAULT_MAX_LINE;
    r.max_nnz = opts && opts->max_nnz ? opts->max_nnz
                                      : EC_LIBSVM_DEFAULT_MAX_NNZ;
    r.redact = opts && opts->redact;
    r.count_only = opts && opts->count_only;

    /*
     * strtod follows LC_NUMERIC, and a program that calls setlocale() with
     * a locale writing "0,5" would make every "0.5" a parse error. Parse
     * under "C" in this thread only, and put the caller's locale back.
     */
    if (!(c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0)))
        return ec_err_set(e, EC_ENOMEM, "%s: out of memory", path);
    caller_locale = uselocale(c_numeric);

    /* "e" is O_CLOEXEC: a worker forked meanwhile must not inherit it. */
    errno = 0;
    if (fd != -1) {
        /* gzclose closes what gzdopen got: give it a copy of the caller's. */
        if ((own_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            rc = ec_err_set(e, EC_EIO, "%s: cannot read (%s)", path,
                            strerror(errno));
            goto out;
        }
        r.gz = gzdopen(own_fd, "rb");
    } else {
        r.gz = gzopen(path, "rbe");
    }
    if (!r.gz) {
        rc = errno ? ec_err_set(e, EC_EIO, "%s: cannot open (%s)", path,
                                strerror(errno))
                   : ec_err_set(e, EC_ENOMEM, "%s: out of memory", path);
        if (own_fd >= 0)
            close(own_fd);
        goto out;
    }
    gzbuffer(r.gz, GZ_BUFFER);
    rc = start(&r);
    if (rc == 0)
        rc = read_lines(&r);
    if (rc == 0)
        rc = finish(&r);
out:
    if (r.gz && gzclose(r.gz) != Z_OK && rc == 0)
        rc = ec_err_set(e, EC_EIO, "%s: error closing the file", path);
    uselocale(caller_locale);
    freelocale(c_numeric);
    free(r.buf);
    if (rc < 0)
        ec_dataset_clear(&r.ds);
    else
        *out = r.ds;
    return rc;
}

int ec_libsvm_read(const char *path, const ec_libsvm_opts *opts,
                   ec_dataset *out, ec_err *e)
{
    return read_file(path, -1, opts, out, e);
}

int ec_libsvm_read_fd(int fd, const char *name, const ec_libsvm_opts *opts,
                      ec_dataset *out, ec_err *e)
{
    if (fd < 0) {
        if (out)
            memset(out, 0, sizeof *out);
        return ec_err_set(e, EC_EINVAL, "ec_libsvm_read_fd: fd is negative");
    }
    return read_file(name ? name : "(input)", fd, opts, out, e);
}

void ec_dataset_clear(ec_dataset *ds)
{
    if (!ds)
        return;
    free(ds->row_ptr);
    free(ds->col);
    free(ds->val);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

size_t ec_dataset_bytes(const ec_dataset *ds)
{
    size_t bytes;

    if (!ds)
        return 0;
    bytes = (size_t)ds->nnz * (sizeof *ds->col + sizeof *ds->val) +
            (size_t)ds->n_rows * sizeof *ds->y;
    if (ds->row_ptr)
        bytes += ((size_t)ds->n_rows + 1) * sizeof *ds->row_ptr;
    return bytes;
}
