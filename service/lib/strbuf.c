/* The string buffer of strbuf.h. */
#include "strbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int strbuf_grow(struct strbuf *sb, size_t extra)
{
    size_t want, alloc;
    char *p;

    if (sb->failed)
        return -1;
    if (extra > SIZE_MAX - sb->len - 1) {
        sb->failed = 1;
        return -1;
    }
    want = sb->len + extra + 1;
    if (want <= sb->alloc)
        return 0;
    alloc = sb->alloc ? sb->alloc : 64;
    while (alloc < want)
        alloc = alloc > SIZE_MAX / 2 ? want : 2 * alloc;
    if (!(p = realloc(sb->buf, alloc))) {
        sb->failed = 1;
        return -1;
    }
    if (!sb->buf)
        p[0] = '\0';
    sb->buf = p;
    sb->alloc = alloc;
    return 0;
}

void strbuf_add(struct strbuf *sb, const void *data, size_t len)
{
    if (strbuf_grow(sb, len) < 0)
        return;
    memcpy(sb->buf + sb->len, data, len);
    sb->len += len;
    sb->buf[sb->len] = '\0';
}

void strbuf_addstr(struct strbuf *sb, const char *s)
{
    strbuf_add(sb, s, strlen(s));
}

void strbuf_addch(struct strbuf *sb, char c)
{
    strbuf_add(sb, &c, 1);
}

void strbuf_addf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (strbuf_grow(sb, 64) < 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->buf[sb->len] = '\0';
        sb->failed = 1;
        return;
    }
    if ((size_t)n >= sb->alloc - sb->len) {
        if (strbuf_grow(sb, (size_t)n) < 0) {
            sb->buf[sb->len] = '\0';
            return;
        }
        va_start(ap, fmt);
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    sb->len += (size_t)n;
}

const char *strbuf_str(const struct strbuf *sb)
{
    return sb->buf && !sb->failed ? sb->buf : "";
}

char *strbuf_detach(struct strbuf *sb, size_t *len)
{
    char *p;

    if (!sb->failed && !sb->buf)
        strbuf_grow(sb, 0);
    if (sb->failed) {
        strbuf_release(sb);
        return NULL;
    }
    p = sb->buf;
    if (len)
        *len = sb->len;
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
    return p;
}

void strbuf_release(struct strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->alloc = 0;
    sb->failed = 0;
}
