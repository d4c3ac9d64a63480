/*
 * UTF-8 as RFC 3629 defines it, the one validator of the code: a
 * character is 1 to 4 bytes; overlong forms, surrogates (U+D800..DFFF),
 * code points above U+10FFFF and sequences cut short are invalid. Rules of
 * a particular format on top (XML's noncharacters, JSON's control
 * characters) are its writer's business.
 */
#ifndef ECOPT_UTF8_H
#define ECOPT_UTF8_H

#include <stddef.h>
#include <stdint.h>

/*
 * The length (1..4) of the valid character at the start of s, of which n
 * (> 0) bytes may be read, or 0 when those bytes do not start one. With
 * cp, the code point goes there.
 */
size_t utf8_char(const void *s, size_t n, uint32_t *cp);
/* 1 when the n bytes at s are valid UTF-8 throughout, else 0. */
int utf8_valid(const void *s, size_t n);

#endif
