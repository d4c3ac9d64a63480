/*
 * The job spec parser's text writer (jobspec_int.h): text that stays valid
 * UTF-8 however it is cut.
 */
#include "jobspec_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "utf8.h"

void jt_init(struct text *t, char *buf, size_t cap)
{
    t->buf = buf;
    t->cap = cap;
    t->len = 0;
    t->full = 0;
    buf[0] = '\0';
}

/*
 * Appends n bytes of valid UTF-8. What does not fit is dropped, and then
 * the tail is cut back to a whole character, so the buffer stays valid.
 */
void jt_put(struct text *t, const char *s, size_t n)
{
    size_t room = t->cap - t->len - 1, start;

    if (t->full)
        return;
    if (n > room) {
        n = room;
        t->full = 1;
    }
    memcpy(t->buf + t->len, s, n);
    t->len += n;
    t->buf[t->len] = '\0';
    if (!t->full || t->len == 0)
        return;
    start = t->len - 1;
    while (start > 0 && t->len - start < 4 &&
           ((unsigned char)t->buf[start] & 0xc0) == 0x80)
        start--;
    if (utf8_char(t->buf + start, t->len - start, NULL) != t->len - start) {
        t->len = start;
        t->buf[t->len] = '\0';
    }
}

/* For ASCII formats and numbers; user text goes through jt_escape. */
void jt_add(struct text *t, const char *fmt, ...)
{
    char piece[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(piece, sizeof piece, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    jt_put(t, piece, (size_t)n < sizeof piece ? (size_t)n
                                                : sizeof piece - 1);
}

/*
 * Appends at most max_chars characters of s, escaping what a reader could
 * not see or a terminal would act on: control characters as \u00XX, bytes
 * that are not UTF-8 as \xXX, and with quote set, '"' and '\'. A cut is
 * marked with "...".
 */
void jt_escape(struct text *t, const char *s, size_t n,
                        size_t max_chars, int quote)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, chars = 0;

    while (i < n) {
        size_t len = utf8_char(p + i, n - i, NULL);

        if (chars++ == max_chars) {
            jt_put(t, "...", 3);
            return;
        }
        if (len == 0) {
            jt_add(t, "\\x%02x", p[i]);
            len = 1;
        } else if (p[i] < 0x20 || p[i] == 0x7f) {
            jt_add(t, "\\u%04x", p[i]);
        } else if (quote && (p[i] == '"' || p[i] == '\\')) {
            char pair[2] = {'\\', s[i]};

            jt_put(t, pair, 2);
        } else {
            jt_put(t, s + i, len);
        }
        i += len;
    }
}

void jt_quote(struct text *t, const char *s, size_t n)
{
    jt_put(t, "\"", 1);
    jt_escape(t, s, n, QUOTE_MAX_CHARS, 1);
    jt_put(t, "\"", 1);
}

/*
 * A double in the fewest digits that read back the same. A real that looks
 * like an integer keeps a ".0" when it is quoted back to the user, so that
 * "must be an integer (got 3.0)" makes sense.
 */
void jt_double(char *buf, size_t len, double x, int keep_point)
{
    snprintf(buf, len, "%.15g", x);
    if (strtod(buf, NULL) != x)
        snprintf(buf, len, "%.17g", x);
    if (keep_point && !strpbrk(buf, ".eEn") && strlen(buf) + 2 < len)
        strcat(buf, ".0");
}

/* What the user gave, for the "(got ...)" at the end of a detail. */
void jt_value(struct text *t, const json_t *v)
{
    char num[40];

    switch (json_typeof(v)) {
    case JSON_STRING:
        jt_quote(t, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        jt_add(t, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        jt_double(num, sizeof num, json_real_value(v), 1);
        jt_add(t, "%s", num);
        break;
    case JSON_TRUE:
        jt_add(t, "true");
        break;
    case JSON_FALSE:
        jt_add(t, "false");
        break;
    case JSON_NULL:
        jt_add(t, "null");
        break;
    case JSON_OBJECT:
        jt_add(t, "an object");
        break;
    case JSON_ARRAY:
        jt_add(t, "an array");
        break;
    }
}

void jt_names(struct text *t, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        jt_add(t, "%s%s", i ? ", " : "", names[i]);
}

