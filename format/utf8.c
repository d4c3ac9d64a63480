/* The UTF-8 validator of utf8.h (RFC 3629, "UTF-8 definition"). */
#include "utf8.h"

size_t utf8_char(const void *s, size_t n, uint32_t *cp)
{
    const unsigned char *p = s;
    unsigned char lo = 0x80, hi = 0xbf;
    uint32_t c;
    size_t len;

    if (n == 0)
        return 0;
    if (p[0] < 0x80) {
        if (cp)
            *cp = p[0];
        return 1;
    }
    /* The second byte's range rules out overlongs (E0, F0), surrogates
       (ED) and everything above U+10FFFF (F4); C0, C1 and F5..FF never
       start a character. */
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        len = 2;
        c = p[0] & 0x1f;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        len = 3;
        c = p[0] & 0x0f;
        lo = p[0] == 0xe0 ? 0xa0 : 0x80;
        hi = p[0] == 0xed ? 0x9f : 0xbf;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        len = 4;
        c = p[0] & 0x07;
        lo = p[0] == 0xf0 ? 0x90 : 0x80;
        hi = p[0] == 0xf4 ? 0x8f : 0xbf;
    } else {
        return 0;
    }
    if (n < len || p[1] < lo || p[1] > hi)
        return 0;
    c = c << 6 | (p[1] & 0x3f);
    for (size_t i = 2; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    if (cp)
        *cp = c;
    return len;
}

int utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;

    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_char(p + i, n - i, NULL)))
            return 0;
    return 1;
}
