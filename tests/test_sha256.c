/*
 * SHA-256 against the FIPS 180-4 / NIST examples ("", "abc", the 448- and
 * 896-bit messages, a million 'a'), whole, byte by byte and split at every
 * point, and at the lengths where padding needs one more block or not.
 */
#include "sha256.h"
#include "testutil.h"

static const struct {
    const char *message;
    size_t repeat;              /* the message this many times */
    const char *digest;
} vectors[] = {
    {"", 1, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
    {"abc", 1,
     "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1,
     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
    {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnop"
     "jklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu", 1,
     "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
    {"a", 1000000,
     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
};

static void digest_of(const char *msg, size_t repeat, size_t piece,
                      char hex[SHA256_HEX_SIZE])
{
    struct sha256 h;
    size_t len = strlen(msg);

    sha256_init(&h);
    for (size_t r = 0; r < repeat; r++)
        for (size_t off = 0; off < len; off += piece)
            sha256_update(&h, msg + off, len - off < piece ? len - off : piece);
    sha256_final_hex(&h, hex);
}

START_TEST(test_vectors)
{
    char hex[SHA256_HEX_SIZE];

    for (size_t i = 0; i < sizeof vectors / sizeof vectors[0]; i++) {
        digest_of(vectors[i].message, vectors[i].repeat, 1u << 20, hex);
        ck_assert_msg(strcmp(hex, vectors[i].digest) == 0, "vector %zu: %s",
                      i, hex);
        digest_of(vectors[i].message, vectors[i].repeat, 1, hex);
        ck_assert_msg(strcmp(hex, vectors[i].digest) == 0,
                      "vector %zu byte by byte: %s", i, hex);
    }
}
END_TEST

/* The 448-bit message (56 bytes: its padding needs a second block) fed in
   two pieces split at every point, and a 1000-byte message in pieces of
   every size from 1 to 130: all the same digest. */
START_TEST(test_every_split)
{
    const char *msg = vectors[2].message;
    size_t len = strlen(msg);
    char want[SHA256_HEX_SIZE], hex[SHA256_HEX_SIZE], big[1001];

    for (size_t cut = 0; cut <= len; cut++) {
        struct sha256 h;

        sha256_init(&h);
        sha256_update(&h, msg, cut);
        sha256_update(&h, msg + cut, len - cut);
        sha256_final_hex(&h, hex);
        ck_assert_msg(strcmp(hex, vectors[2].digest) == 0, "cut %zu", cut);
    }
    for (size_t i = 0; i < 1000; i++)
        big[i] = (char)('a' + (i * 7) % 26);
    big[1000] = '\0';
    digest_of(big, 1, 1000, want);
    for (size_t piece = 1; piece <= 130; piece++) {
        digest_of(big, 1, piece, hex);
        ck_assert_msg(strcmp(hex, want) == 0, "pieces of %zu", piece);
    }
}
END_TEST

/* 55 bytes leave room for the padding in the block, 56 do not; 63 and 64
   bytes end just before and at a block boundary (digests by sha256sum). */
START_TEST(test_padding_lengths)
{
    static const struct {
        size_t len;
        const char *digest;     /* of len bytes 'a' */
    } cases[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
    };
    char msg[200], hex[SHA256_HEX_SIZE];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(msg, 'a', cases[i].len);
        msg[cases[i].len] = '\0';
        digest_of(msg, 1, 7, hex);
        ck_assert_msg(strcmp(hex, cases[i].digest) == 0, "%zu bytes: %s",
                      cases[i].len, hex);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sha256");
    TCase *tc = tcase_create("fips180-4");

    tcase_add_test(tc, test_vectors);
    tcase_add_test(tc, test_every_split);
    tcase_add_test(tc, test_padding_lengths);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
