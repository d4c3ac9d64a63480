/*
 * The one UTF-8 validator (format/utf8.h) against RFC 3629: every
 * sequence of one and two bytes, and every three-byte one, is compared
 * with an obviously correct
 * reference (a sequence is valid exactly when it is the encoding of a
 * scalar value), every code point is accepted and decoded, and the
 * hostile forms are named one by one: overlongs, surrogates, code points
 * past U+10FFFF, bytes that never start a character, and every
 * truncation of every length.
 */
#include <stdint.h>

#include "testutil.h"
#include "utf8.h"

/* The encoding of cp (a scalar value); its length. */
static size_t encode(uint32_t cp, unsigned char out[4])
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | cp >> 6);
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | cp >> 12);
        out[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | cp >> 18);
    out[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

static int scalar(uint32_t cp)
{
    return cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
}

/* Checks of the loops call ck_abort_msg only on failure: a ck_assert
   each would cost a write to Check's pipe per code point. */
START_TEST(test_every_code_point)
{
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        unsigned char s[4];
        size_t n;
        uint32_t got = 0xffffffff;

        if (!scalar(cp))
            continue;
        n = encode(cp, s);
        if (utf8_char(s, n, &got) != n || !utf8_valid(s, n))
            ck_abort_msg("U+%04X refused", (unsigned)cp);
        if (got != cp)
            ck_abort_msg("U+%04X decoded as U+%04X", (unsigned)cp, (unsigned)got);
        /* Cut anywhere, it is no character. */
        for (size_t k = 1; k < n; k++)
            if (utf8_char(s, k, NULL) != 0)
                ck_abort_msg("U+%04X cut to %zu bytes accepted", (unsigned)cp, k);
    }
}
END_TEST

/* Every sequence of one and two bytes, and of three that starts with
   E0..EF (the others are decided by their first two bytes): the reference
   marks the encodings of all scalar values below U+10000. */
START_TEST(test_every_short_sequence)
{
    static unsigned char valid2[1 << 16], valid3[16 << 16];
    unsigned char s[4];

    for (uint32_t cp = 0x80; cp < 0x10000; cp++) {
        if (!scalar(cp))
            continue;
        size_t n = encode(cp, s);
        if (n == 2)
            valid2[s[0] << 8 | s[1]] = 1;
        else
            valid3[(s[0] - 0xe0) << 16 | s[1] << 8 | s[2]] = 1;
    }
    for (uint32_t v = 0; v < (1u << 16); v++) {
        unsigned char b[2] = {(unsigned char)(v >> 8), (unsigned char)v};
        size_t want = b[0] < 0x80 ? 1 : valid2[v] ? 2 : 0;

        if (utf8_char(b, 2, NULL) != want)
            ck_abort_msg("%02x %02x: not %zu", b[0], b[1], want);
        if (utf8_char(b, 1, NULL) != (b[0] < 0x80))
            ck_abort_msg("%02x alone", b[0]);
    }
    for (uint32_t v = 0; v < (16u << 16); v++) {
        unsigned char b[3] = {(unsigned char)(0xe0 + (v >> 16)), (unsigned char)(v >> 8),
                              (unsigned char)v};
        size_t want = valid3[v] ? 3 : 0;

        if (utf8_char(b, 3, NULL) != want)
            ck_abort_msg("%02x %02x %02x: not %zu", b[0], b[1], b[2], want);
    }
}
END_TEST

START_TEST(test_hostile)
{
    static const struct {
        const char *bytes;
        const char *why;
    } bad[] = {
        {"\xc0\x80", "overlong NUL"},
        {"\xc1\xbf", "overlong U+007F"},
        {"\xe0\x80\x80", "overlong in three bytes"},
        {"\xe0\x9f\xbf", "overlong U+07FF"},
        {"\xf0\x80\x80\x80", "overlong in four bytes"},
        {"\xf0\x8f\xbf\xbf", "overlong U+FFFF"},
        {"\xed\xa0\x80", "high surrogate U+D800"},
        {"\xed\xbf\xbf", "low surrogate U+DFFF"},
        {"\xed\xa0\xbd\xed\xb8\x80", "a surrogate pair (CESU-8)"},
        {"\xf4\x90\x80\x80", "U+110000"},
        {"\xf5\x80\x80\x80", "lead byte F5"},
        {"\xf8\x88\x80\x80\x80", "five bytes"},
        {"\xfc\x84\x80\x80\x80\x80", "six bytes"},
        {"\xfe", "FE"},
        {"\xff", "FF"},
        {"\x80", "a lone continuation byte"},
        {"\xbf", "a lone continuation byte"},
        {"\xc3", "truncated two-byte"},
        {"\xe2\x82", "truncated three-byte"},
        {"\xf0\x9f\x98", "truncated four-byte"},
        {"\xc3\x28", "a bad continuation"},
        {"\xe2\x28\xa1", "a bad second byte"},
        {"\xe2\x82\x28", "a bad third byte"},
        {"\xf0\x9f\x98\x28", "a bad fourth byte"},
        {"ok\xc3", "valid text then a cut"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(!utf8_valid(bad[i].bytes, strlen(bad[i].bytes)), "%s accepted",
                      bad[i].why);
    /* The first character of each is refused too, except where valid
       text comes first. */
    ck_assert_uint_eq(utf8_char("\xc0\x80", 2, NULL), 0);
    ck_assert_uint_eq(utf8_char("ok\xc3", 3, NULL), 1);
    ck_assert_uint_eq(utf8_char("", 0, NULL), 0);
}
END_TEST

START_TEST(test_valid_text)
{
    static const char *const good[] = {
        "",
        "plain ASCII, tabs\tand\nnewlines",
        "caf\xc3\xa9",                      /* U+00E9 */
        "\xe2\x82\xac",                      /* U+20AC */
        "\xef\xbf\xbd",                      /* U+FFFD */
        "\xef\xbf\xbe",                      /* U+FFFE: UTF-8, if no character */
        "\xf0\x9f\x98\x80",                  /* U+1F600 */
        "\xf4\x8f\xbf\xbf",                  /* U+10FFFF */
        "\xed\x9f\xbf",                      /* U+D7FF, below the surrogates */
        "\xee\x80\x80",                      /* U+E000, above them */
    };
    uint32_t cp;

    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(utf8_valid(good[i], strlen(good[i])), "\"%s\" refused", good[i]);
    /* NUL is a character like any other: lengths are given. */
    ck_assert(utf8_valid("a\0b", 3));
    ck_assert_uint_eq(utf8_char("\xf4\x8f\xbf\xbf", 4, &cp), 4);
    ck_assert_uint_eq(cp, 0x10ffff);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = tcase_create("rfc3629");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_every_code_point);
    tcase_add_test(tc, test_every_short_sequence);
    tcase_add_test(tc, test_hostile);
    tcase_add_test(tc, test_valid_text);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
