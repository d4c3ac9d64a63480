/*
 * The job spec parser's text writer (jobspec.c's, in a file of its own):
 * details and fields end up in JSON replies, and json_string() refuses
 * invalid UTF-8, so everything is built through this small writer: it
 * never cuts a character in half, and user text goes in escaped. Internal
 * to format/.
 */
#ifndef ECOPT_JOBSPEC_INT_H
#define ECOPT_JOBSPEC_INT_H

#include <jansson.h>
#include <stddef.h>

/* User text quoted in a detail is cut to this many characters. */
#define QUOTE_MAX_CHARS 40

struct text {
    char *buf;
    size_t cap;
    size_t len;
    int full;
};

void jt_init(struct text *t, char *buf, size_t cap);
/* Appends n bytes of valid UTF-8; what does not fit is dropped and the
   tail cut back to a whole character. */
void jt_put(struct text *t, const char *s, size_t n);
/* For ASCII formats and numbers; user text goes through jt_escape. */
void jt_add(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void jt_escape(struct text *t, const char *s, size_t n, size_t max_chars, int quote);
void jt_quote(struct text *t, const char *s, size_t n);
void jt_double(char *buf, size_t len, double x, int keep_point);
void jt_value(struct text *t, const json_t *v);
void jt_names(struct text *t, const char *const *names, size_t n);

#endif
