/*
 * A growing string buffer (git's strbuf is the model): bytes appended at
 * the end, always NUL-terminated, with the length kept. Running out of
 * memory does not stop the caller mid-sentence: the buffer remembers it,
 * every later append is a no-op, and strbuf_detach returns NULL, so a
 * writer checks once at the end.
 *
 *     struct strbuf sb = STRBUF_INIT;
 *     strbuf_addf(&sb, "%d rows", n);
 *     char *text = strbuf_detach(&sb, &len);   // NULL: out of memory
 */
#ifndef ECOPT_STRBUF_H
#define ECOPT_STRBUF_H

#include <stddef.h>

struct strbuf {
    char *buf;          /* NULL until the first append; then NUL-terminated */
    size_t len;         /* bytes in buf, not counting the NUL */
    size_t alloc;       /* bytes allocated */
    int failed;         /* an allocation failed: appends are no-ops */
};

#define STRBUF_INIT {NULL, 0, 0, 0}

/* Room for extra more bytes (and the NUL); 0, or -1 (failed is set). */
int strbuf_grow(struct strbuf *sb, size_t extra);
void strbuf_add(struct strbuf *sb, const void *data, size_t len);
void strbuf_addstr(struct strbuf *sb, const char *s);
void strbuf_addch(struct strbuf *sb, char c);
void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The text, never NULL: "" when nothing was appended or an append failed. */
const char *strbuf_str(const struct strbuf *sb);
/*
 * Hands the text to the caller (free() it) and empties sb; NULL when an
 * append failed (the text is then freed). *len, when given, gets its
 * length. An empty buffer detaches as an allocated "".
 */
char *strbuf_detach(struct strbuf *sb, size_t *len);
/* Frees the text and empties sb, which may be used again. */
void strbuf_release(struct strbuf *sb);

#endif
