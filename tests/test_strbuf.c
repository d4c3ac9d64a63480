/*
 * The string buffer (service/lib/strbuf.h): appends of every kind keep
 * the text NUL-terminated and the length right, across many growths;
 * formatted text longer than any first guess; bytes with NULs inside;
 * detach and release; and a buffer whose allocation fails stays failed,
 * appends nothing more, and detaches as NULL.
 */
#include <stdint.h>

#include "strbuf.h"
#include "testutil.h"

START_TEST(test_appends)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len;
    char *text;

    ck_assert_str_eq(strbuf_str(&sb), "");
    strbuf_addstr(&sb, "rows ");
    strbuf_addf(&sb, "%d of %s", 42, "100");
    strbuf_addch(&sb, '.');
    strbuf_add(&sb, "", 0);
    ck_assert_str_eq(strbuf_str(&sb), "rows 42 of 100.");
    ck_assert_uint_eq(sb.len, strlen("rows 42 of 100."));
    text = strbuf_detach(&sb, &len);
    ck_assert_str_eq(text, "rows 42 of 100.");
    ck_assert_uint_eq(len, 15);
    ck_assert_ptr_null(sb.buf);
    ck_assert_uint_eq(sb.len, 0);
    free(text);
}
END_TEST

/* Long formatted pieces (past the first guess and past every doubling),
   and many small ones, against the same text built by hand. */
START_TEST(test_growth)
{
    struct strbuf sb = STRBUF_INIT;
    static char want[200000], piece[70000];
    size_t at = 0;

    memset(piece, 'x', sizeof piece - 1);
    piece[sizeof piece - 1] = '\0';
    for (int i = 0; i < 2; i++) {
        strbuf_addf(&sb, "[%s]", piece);
        at += (size_t)snprintf(want + at, sizeof want - at, "[%s]", piece);
    }
    for (int i = 0; i < 5000; i++) {
        strbuf_addf(&sb, "%d,", i);
        at += (size_t)snprintf(want + at, sizeof want - at, "%d,", i);
    }
    ck_assert_uint_eq(sb.len, at);
    ck_assert_uint_eq(strlen(sb.buf), at);
    ck_assert(memcmp(sb.buf, want, at) == 0);
    ck_assert_uint_gt(sb.alloc, sb.len);
    strbuf_release(&sb);
}
END_TEST

START_TEST(test_binary)
{
    struct strbuf sb = STRBUF_INIT;

    strbuf_add(&sb, "a\0b", 3);
    strbuf_addch(&sb, '\0');
    ck_assert_uint_eq(sb.len, 4);
    ck_assert(memcmp(sb.buf, "a\0b\0", 5) == 0);  /* and the terminator */
    strbuf_release(&sb);
    /* Released, it is empty and usable again. */
    ck_assert_str_eq(strbuf_str(&sb), "");
    strbuf_addstr(&sb, "again");
    ck_assert_str_eq(strbuf_str(&sb), "again");
    strbuf_release(&sb);
}
END_TEST

START_TEST(test_empty_detach)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len = 99;
    char *text = strbuf_detach(&sb, &len);

    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, "");
    ck_assert_uint_eq(len, 0);
    free(text);
}
END_TEST

/* A growth no allocator can give fails the buffer for good. */
START_TEST(test_failure_sticks)
{
    struct strbuf sb = STRBUF_INIT;
    size_t len = 99;

    strbuf_addstr(&sb, "kept until the end");
    ck_assert_int_eq(strbuf_grow(&sb, SIZE_MAX), -1);
    ck_assert(sb.failed);
    strbuf_addstr(&sb, "more");
    strbuf_addf(&sb, "%d", 1);
    strbuf_addch(&sb, 'c');
    ck_assert_str_eq(strbuf_str(&sb), "");
    ck_assert_ptr_null(strbuf_detach(&sb, &len));
    ck_assert_uint_eq(len, 99);            /* untouched on failure */
    ck_assert_ptr_null(sb.buf);
    /* Nearly as large, from a non-empty buffer: the sum would wrap. */
    strbuf_addstr(&sb, "abc");
    ck_assert_int_eq(strbuf_grow(&sb, SIZE_MAX - 2), -1);
    ck_assert_ptr_null(strbuf_detach(&sb, NULL));
    /* A released buffer is whole again. */
    strbuf_addstr(&sb, "fine");
    ck_assert_str_eq(strbuf_str(&sb), "fine");
    strbuf_release(&sb);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("strbuf");
    TCase *tc = tcase_create("strbuf");

    tcase_add_test(tc, test_appends);
    tcase_add_test(tc, test_growth);
    tcase_add_test(tc, test_binary);
    tcase_add_test(tc, test_empty_detach);
    tcase_add_test(tc, test_failure_sticks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
