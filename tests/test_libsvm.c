/*
 * Check suite for the LibSVM reader: every hostile input it must refuse
 * (with the file, line and reason a user would see), the valid spellings
 * it must accept, gzip input, and the real datasets against their texts.
 */
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <zlib.h>

#include "ecopt/data.h"
#include "ecopt/rng.h"
#include "testutil.h"

/* Whole-file checks on the real data take seconds under sanitizers. */
#define REAL_DATA_TIMEOUT 300

/* True if ds is all zero bytes, as a failed read must leave it. */
static int is_zeroed(const ec_dataset *ds)
{
    const unsigned char *b = (const unsigned char *)ds;

    for (size_t i = 0; i < sizeof *ds; i++)
        if (b[i])
            return 0;
    return 1;
}

/* Reads path, asserting success; the message says why it failed if not. */
static void read_ok(const char *path, const ec_libsvm_opts *opts,
                    ec_dataset *ds)
{
    ec_err e = {0};
    int rc = ec_libsvm_read(path, opts, ds, &e);

    ck_assert_msg(rc == 0, "reading %s failed (%s): %s", path,
                  ec_err_name(rc), e.msg);
}

/* Reads text through a temporary file, asserting success. */
static void read_text(const char *text, size_t len,
                      const ec_libsvm_opts *opts, ec_dataset *ds)
{
    char path[64];

    tu_write_temp(text, len, path, sizeof path);
    read_ok(path, opts, ds);
    unlink(path);
}

/* Reads a whole file into memory (tests only; the data files are small). */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *data;
    long size;

    ck_assert_msg(f != NULL, "cannot open %s", path);
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    size = ftell(f);
    ck_assert_int_ge(size, 0);
    rewind(f);
    data = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(data);
    ck_assert_uint_eq(fread(data, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    data[size] = '\0';
    *len = (size_t)size;
    return data;
}

/* Writes data gzip-compressed to a new temporary file; path gets its name. */
static void write_gz(const void *data, size_t len, char *path, size_t plen)
{
    gzFile gz;

    tu_write_temp("", 0, path, plen);
    gz = gzopen(path, "wb9");
    ck_assert_ptr_nonnull(gz);
    ck_assert_int_eq(gzwrite(gz, data, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(gz), Z_OK);
}

static void assert_same(const ec_dataset *a, const ec_dataset *b)
{
    ck_assert_uint_eq(a->n_rows, b->n_rows);
    ck_assert_uint_eq(a->d, b->d);
    ck_assert_uint_eq(a->nnz, b->nnz);
    ck_assert_int_eq(a->n_labels, b->n_labels);
    ck_assert(a->label_neg == b->label_neg ||
              (isnan(a->label_neg) && isnan(b->label_neg)));
    ck_assert(a->label_pos == b->label_pos ||
              (isnan(a->label_pos) && isnan(b->label_pos)));
    ck_assert(memcmp(a->row_ptr, b->row_ptr,
                     (a->n_rows + 1) * sizeof *a->row_ptr) == 0);
    ck_assert(memcmp(a->y, b->y, a->n_rows * sizeof *a->y) == 0);
    ck_assert(memcmp(a->col, b->col, a->nnz * sizeof *a->col) == 0);
    ck_assert(memcmp(a->val, b->val, a->nnz * sizeof *a->val) == 0);
}

/*
 * The CSR invariants data.h promises. Violations are counted, not asserted
 * one by one, because each Check assertion costs a write to a pipe.
 */
static void assert_csr_valid(const ec_dataset *ds)
{
    uint64_t bad = 0;
    uint32_t max_col = 0;

    ck_assert_ptr_nonnull(ds->row_ptr);
    ck_assert_ptr_nonnull(ds->col);
    ck_assert_ptr_nonnull(ds->val);
    ck_assert_ptr_nonnull(ds->y);
    ck_assert_uint_eq(ds->row_ptr[0], 0);
    ck_assert_uint_eq(ds->row_ptr[ds->n_rows], ds->nnz);
    for (uint32_t i = 0; i < ds->n_rows; i++) {
        bad += ds->row_ptr[i] > ds->row_ptr[i + 1];
        bad += ds->y[i] != -1.0 && ds->y[i] != 1.0;
        for (uint64_t k = ds->row_ptr[i]; k < ds->row_ptr[i + 1]; k++) {
            bad += k > ds->row_ptr[i] && ds->col[k] <= ds->col[k - 1];
            bad += ds->col[k] >= ds->d;
            bad += !isfinite(ds->val[k]);
            if (ds->col[k] > max_col)
                max_col = ds->col[k];
        }
    }
    ck_assert_msg(bad == 0, "%llu CSR invariant violations",
                  (unsigned long long)bad);
    ck_assert_uint_eq(ds->nnz ? max_col + 1 : 0, ds->d);
}

/*
 * Compares ds with the text of path, parsed line by line by a second,
 * obviously correct parser (strtok and sscanf).
 */
static void assert_matches_text(const ec_dataset *ds, const char *path)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, *save, *tok;
    size_t cap = 0;
    uint32_t row = 0;
    uint64_t k, bad = 0, first_bad_row = 0;

    ck_assert_ptr_nonnull(f);
    while (getline(&line, &cap, f) > 0 && row < ds->n_rows) {
        uint64_t before = bad;
        double label, raw;

        if (!(tok = strtok_r(line, " \t\r\n", &save)))
            continue;   /* a blank line is no sample */
        label = strtod(tok, NULL);
        raw = ds->y[row] < 0 ? ds->label_neg : ds->label_pos;
        bad += label != raw;
        k = ds->row_ptr[row];
        while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
            unsigned index;
            double value;

            if (sscanf(tok, "%u:%lf", &index, &value) != 2 ||
                k >= ds->row_ptr[row + 1] || ds->col[k] != index - 1 ||
                ds->val[k] != value)
                bad++;
            k++;
        }
        bad += k != ds->row_ptr[row + 1];
        if (bad > before && before == 0)
            first_bad_row = row + 1;
        row++;
    }
    free(line);
    fclose(f);
    ck_assert_msg(bad == 0, "%s: %llu mismatches, first on line %llu", path,
                  (unsigned long long)bad,
                  (unsigned long long)first_bad_row);
    ck_assert_uint_eq(row, ds->n_rows);
}

/*
 * Hostile inputs: each must fail with this code and a message that starts
 * "PATH:LINE: " and contains the phrase.
 */
struct bad_case {
    const char *text;
    size_t len;             /* bytes of text; 0 means strlen(text) */
    ec_libsvm_opts opts;
    int code;
    int line;
    const char *phrase;
};

static const struct bad_case bad_cases[] = {
    /* labels */
    {"-1 1:1\n1 2:1\n-1 3:1\n3 1:1\n", 0, {0}, EC_EPARSE, 4,
     "third label value 3 (labels so far: -1 and 1)"},
    {"2 1:1\n1 1:1\n0.5 1:1\n", 0, {0}, EC_EPARSE, 3,
     "third label value 0.5 (labels so far: 1 and 2)"},
    {"abc 1:1\n", 0, {0}, EC_EPARSE, 1, "label 'abc' is not a number"},
    {"1 1:1\n\n1.5x 2:1\n", 0, {0}, EC_EPARSE, 3,
     "label '1.5x' is not a number"},
    {"1 1:1\n3:1 4:1\n", 0, {0}, EC_EPARSE, 2,
     "label '3:1' is not a number"},
    {"-\n", 0, {0}, EC_EPARSE, 1, "label '-' is not a number"},
    {"# a comment\n", 0, {0}, EC_EPARSE, 1, "label '#' is not a number"},
    {"nan 1:1\n", 0, {0}, EC_EPARSE, 1, "label 'nan' is not a finite number"},
    {"1 1:1\n-inf 1:1\n", 0, {0}, EC_EPARSE, 2,
     "label '-inf' is not a finite number"},
    {"1e999 1:1\n", 0, {0}, EC_EPARSE, 1,
     "label '1e999' is not a finite number"},
    /* values */
    {"1 1:1 2:abc\n", 0, {0}, EC_EPARSE, 1,
     "feature 2: value 'abc' is not a number"},
    {"1 1:1.5x\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value '1.5x' is not a number"},
    {"1 1:2:3\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value '2:3' is not a number"},
    {"1 1:\v5\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value '\\x0b5' is not a number"},
    {"1 1:1\r2:1\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value '1\\x0d2:1' is not a number"},
    {"1 1: 2:1\n", 0, {0}, EC_EPARSE, 1, "feature 1: empty value after ':'"},
    {"1 1:1 2:\n", 0, {0}, EC_EPARSE, 1, "feature 2: empty value after ':'"},
    {"1 1:1\r\n-1 7:\r\n", 0, {0}, EC_EPARSE, 2,
     "feature 7: empty value after ':'"},
    {"1 1:NaN\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value 'NaN' is not a finite number"},
    {"1 1:1 5:infinity\n", 0, {0}, EC_EPARSE, 1,
     "feature 5: value 'infinity' is not a finite number"},
    {"1 1:-1e400\n", 0, {0}, EC_EPARSE, 1,
     "feature 1: value '-1e400' is not a finite number"},
    /* indices */
    {"1 0:1\n", 0, {0}, EC_EPARSE, 1, "feature index 0 is not positive"},
    {"1 00:1\n", 0, {0}, EC_EPARSE, 1, "feature index 00 is not positive"},
    {"1 1:1\n-1 -3:1\n", 0, {0}, EC_EPARSE, 2,
     "feature index -3 is not positive"},
    {"1 1.5:1\n", 0, {0}, EC_EPARSE, 1,
     "feature '1.5:1': index is not a plain integer"},
    {"1 +3:1\n", 0, {0}, EC_EPARSE, 1,
     "feature '+3:1': index is not a plain integer"},
    {"1 0x3:1\n", 0, {0}, EC_EPARSE, 1,
     "feature '0x3:1': index is not a plain integer"},
    {"1 a:1\n", 0, {0}, EC_EPARSE, 1,
     "feature 'a:1': index is not a plain integer"},
    {"1 3a:1\n", 0, {0}, EC_EPARSE, 1,
     "feature '3a:1': index is not a plain integer"},
    {"1 :5\n", 0, {0}, EC_EPARSE, 1,
     "feature ':5': index is not a plain integer"},
    {"1 -:5\n", 0, {0}, EC_EPARSE, 1,
     "feature '-:5': index is not a plain integer"},
    {"1 qid:3 1:1\n", 0, {0}, EC_EPARSE, 1,
     "feature 'qid:3': index is not a plain integer"},
    {"1 2:1 5:1 3:1\n", 0, {0}, EC_EPARSE, 1,
     "feature index 3 after 5 (indices must strictly increase)"},
    {"1 3:1 3:2\n", 0, {0}, EC_EPARSE, 1,
     "feature index 3 repeated (indices must strictly increase)"},
    {"1 3\n", 0, {0}, EC_EPARSE, 1,
     "feature '3' has no ':' (expected index:value)"},
    {"1 1:1 abc\n", 0, {0}, EC_EPARSE, 1, "feature 'abc' has no ':'"},
    /* limits */
    {"1 1:1\n-1 10:1 11:1\n", 0, {.max_index = 10}, EC_ELIMIT, 2,
     "feature index 11 exceeds the limit 10 (max_index)"},
    {"1 16777217:1\n", 0, {0}, EC_ELIMIT, 1,
     "feature index 16777217 exceeds the limit 16777216 (max_index)"},
    {"1 99999999999999999999999999:1\n", 0, {0}, EC_ELIMIT, 1,
     "feature index 99999999999999999999999999 exceeds the limit"},
    {"1 1:1\n1 2:1 3:1 4:1 5:1 6:1\n-1 1:1\n", 0, {.max_line = 16},
     EC_ELIMIT, 2, "line longer than the limit of 16 bytes (max_line)"},
    {"1 1:1\n1 2:1 3:1 10:1.55\r\n", 0, {.max_line = 16}, EC_ELIMIT, 2,
     "line longer than the limit of 16 bytes (max_line)"},
    {"1 1:1\n1 2:1 3:1 4:1 5:1 6:1", 0, {.max_line = 16}, EC_ELIMIT, 2,
     "line longer than the limit of 16 bytes (max_line)"},
    {"1 1:1 2:1\n-1 1:1 2:1\n", 0, {.max_nnz = 3}, EC_ELIMIT, 2,
     "more than 3 nonzeros in the file (max_nnz)"},
    /* no samples */
    {"", 0, {0}, EC_EPARSE, 1, "no samples in the file"},
    {"\n  \n\t\n", 0, {0}, EC_EPARSE, 3,
     "no samples in the file (only blank lines)"},
    {"\r\n\r\n", 0, {0}, EC_EPARSE, 2, "no samples in the file"},
    /* NUL bytes */
    {"1 1:1\n-1 2:\0 1\n", 15, {0}, EC_EPARSE, 2, "NUL byte at column 6"},
    {"1 1:1\n\0\n", 8, {0}, EC_EPARSE, 2, "NUL byte at column 1"},
    {"1 1:1\n-1 1:1\0", 13, {0}, EC_EPARSE, 2, "NUL byte at column 7"},
};

START_TEST(test_bad_input)
{
    const struct bad_case *c = &bad_cases[_i];
    size_t len = c->len ? c->len : strlen(c->text);
    char path[64], prefix[96];
    ec_dataset ds;
    ec_err e = {0};
    int rc;

    memset(&ds, 0xa5, sizeof ds);   /* a failed read must zero it anyway */
    tu_write_temp(c->text, len, path, sizeof path);
    rc = ec_libsvm_read(path, &c->opts, &ds, &e);
    unlink(path);
    ck_assert_msg(rc == c->code, "case %d: got %s, want %s (%s)", _i,
                  ec_err_name(rc), ec_err_name(c->code), e.msg);
    snprintf(prefix, sizeof prefix, "%s:%d: ", path, c->line);
    ck_assert_msg(strncmp(e.msg, prefix, strlen(prefix)) == 0,
                  "case %d: message '%s' does not start with '%s'", _i,
                  e.msg, prefix);
    ck_assert_msg(strstr(e.msg, c->phrase) != NULL,
                  "case %d: message '%s' lacks '%s'", _i, e.msg, c->phrase);
    ck_assert(is_zeroed(&ds));
}
END_TEST

/* Counting only, every bad input is refused as by a full read, with the
   same code and message (nothing is allocated that could fail). */
START_TEST(test_bad_input_count_only)
{
    const struct bad_case *c = &bad_cases[_i];
    size_t len = c->len ? c->len : strlen(c->text);
    ec_libsvm_opts o = c->opts;
    char path[64], full[sizeof ((ec_err *)0)->msg];
    ec_dataset ds;
    ec_err e = {0};
    int rc, rc_full;

    tu_write_temp(c->text, len, path, sizeof path);
    rc_full = ec_libsvm_read(path, &o, &ds, &e);
    snprintf(full, sizeof full, "%s", e.msg);
    o.count_only = 1;
    memset(&ds, 0xa5, sizeof ds);
    rc = ec_libsvm_read(path, &o, &ds, &e);
    unlink(path);
    ck_assert_int_eq(rc, rc_full);
    ck_assert_str_eq(e.msg, full);
    ck_assert(is_zeroed(&ds));
}
END_TEST

/*
 * Valid spellings of one dataset: each must read exactly like the
 * canonical text below.
 */
static const char canonical[] = "1 1:0.5 3:2\n-1\n1 2:-1 4:1e-3\n";

static const char *const good_variants[] = {
    "1 1:0.5 3:2\r\n-1\r\n1 2:-1 4:1e-3\r\n",
    "1 1:0.5 3:2\r\n-1\r\n1 2:-1 4:1e-3",
    "1 1:0.5 3:2\n-1\n1 2:-1 4:1e-3",
    "1 1:0.5 3:2 \t \n-1 \n1 2:-1 4:1e-3\t\n",
    "1 1:0.5 3:2 \r\n-1 \r\n1 2:-1 4:1e-3 \r\n",
    "  1 1:0.5 3:2\n\t-1\n 1 2:-1 4:1e-3\n",
    "\n1 1:0.5 3:2\n\n   \n-1\n\t\n1 2:-1 4:1e-3\n\n\r\n",
    "1\t1:0.5  3:2\n-1\t\n1\t2:-1\t\t4:1e-3\n",
    "+1 1:0.5 3:2\n-1.0\n1e0 2:-1 4:1e-3\n",
    "1 1:.5 3:2.0\n-1\n1 2:-1e0 4:0.001\n",
    "1 01:0.5 003:2\n-1\n1 2:-1 4:1e-3\n",
    "1 1:+0.5 3:2\n-1\n1 2:-1 4:0.1e-2\n",
};

START_TEST(test_canonical)
{
    static const uint64_t row_ptr[] = {0, 2, 2, 4};
    static const uint32_t col[] = {0, 2, 1, 3};
    static const double val[] = {0.5, 2, -1, 1e-3};
    static const double y[] = {1, -1, 1};
    ec_dataset ds;

    read_text(canonical, strlen(canonical), NULL, &ds);
    ck_assert_uint_eq(ds.n_rows, 3);
    ck_assert_uint_eq(ds.d, 4);
    ck_assert_uint_eq(ds.nnz, 4);
    ck_assert_int_eq(ds.n_labels, 2);
    ck_assert(ds.label_neg == -1.0 && ds.label_pos == 1.0);
    ck_assert(memcmp(ds.row_ptr, row_ptr, sizeof row_ptr) == 0);
    ck_assert(memcmp(ds.col, col, sizeof col) == 0);
    ck_assert(memcmp(ds.val, val, sizeof val) == 0);
    ck_assert(memcmp(ds.y, y, sizeof y) == 0);
    ck_assert_uint_eq(ec_dataset_bytes(&ds), 4 * 8 + 4 * 4 + 4 * 8 + 3 * 8);
    ec_dataset_clear(&ds);
    ck_assert(is_zeroed(&ds));
}
END_TEST

START_TEST(test_good_variant)
{
    const char *text = good_variants[_i];
    ec_dataset want, got;

    read_text(canonical, strlen(canonical), NULL, &want);
    read_text(text, strlen(text), NULL, &got);
    assert_same(&want, &got);
    ec_dataset_clear(&want);
    ec_dataset_clear(&got);
}
END_TEST

/* Label sets and their -1/+1 mapping; y is the mapped first three rows. */
struct label_case {
    const char *text;
    int n_labels;
    double label_neg, label_pos;    /* NaN where the file has no such label */
    double y[3];
};

static const struct label_case label_cases[] = {
    {"2 1:1\n1 2:1\n2 3:1\n", 2, 1, 2, {1, -1, 1}},
    {"0 1:1\n1 1:1\n0 1:1\n", 2, 0, 1, {-1, 1, -1}},
    {"1 1:1\n-1 1:1\n+1 1:1\n", 2, -1, 1, {1, -1, 1}},
    {"5 1:1\n-7.5 1:1\n5.0 1:1\n", 2, -7.5, 5, {1, -1, 1}},
    /* one label in the whole file: positive -> +1, else -1 */
    {"2 1:1\n2 2:1\n2 3:1\n", 1, NAN, 2, {1, 1, 1}},
    {"-1 1:1\n-1 2:1\n-1\n", 1, -1, NAN, {-1, -1, -1}},
    {"0 1:1\n-0 2:1\n0.0\n", 1, 0, NAN, {-1, -1, -1}},
};

START_TEST(test_labels)
{
    const struct label_case *c = &label_cases[_i];
    ec_dataset ds;

    read_text(c->text, strlen(c->text), NULL, &ds);
    ck_assert_int_eq(ds.n_labels, c->n_labels);
    ck_assert(ds.label_neg == c->label_neg ||
              (isnan(ds.label_neg) && isnan(c->label_neg)));
    ck_assert(ds.label_pos == c->label_pos ||
              (isnan(ds.label_pos) && isnan(c->label_pos)));
    for (int i = 0; i < 3; i++)
        ck_assert_msg(ds.y[i] == c->y[i], "case %d row %d: y %g, want %g",
                      _i, i, ds.y[i], c->y[i]);
    ec_dataset_clear(&ds);
}
END_TEST

START_TEST(test_explicit_zeros_kept)
{
    const char *text = "1 1:0 2:0.0 3:-0 9:0e5\n";
    ec_dataset ds;

    read_text(text, strlen(text), NULL, &ds);
    ck_assert_uint_eq(ds.nnz, 4);
    ck_assert_uint_eq(ds.d, 9);
    for (int k = 0; k < 4; k++)
        ck_assert(ds.val[k] == 0.0);
    ck_assert(signbit(ds.val[2]));
    ec_dataset_clear(&ds);
}
END_TEST

/*
 * Decimal values of every shape the reader's short-decimal path takes or
 * hands to strtod (signs, a point with no digits on one side, leading
 * zeros, 1 to 19 digits, exponents), random and chosen: each must be the
 * double strtod gives, to the bit.
 */
START_TEST(test_decimals_match_strtod)
{
    static const char *const chosen[] = {
        "-0.0", "0.", ".5", "+.5", "-.5", "5.", "+0.25", "0.1", "0.7",
        "0.30000000000000004", "123456789012345.", "123456789012345.6",
        "12345678901234.5", "0.000000000000001", "0.0000000000000001",
        "999999999999999.", "9.99999999999999", "1.7976931348623157",
        "2.2250738585072014e-308", "4.9e-324", "1e-5", "-2.5E3", "7.0e0"};
    const size_t n_chosen = sizeof chosen / sizeof chosen[0];
    const size_t n_random = 20000;
    size_t cap = (n_chosen + n_random) * 48 + 64, len = 0, k = 0;
    char *text = malloc(cap), (*tok)[40] = malloc((n_chosen + n_random) * sizeof *tok);
    uint64_t bad = 0, first_bad = 0;
    ec_dataset ds;
    ec_rng r;

    ck_assert(text && tok);
    ec_rng_seed(&r, 20261207, 0);
    for (size_t t = 0; t < n_chosen + n_random; t++) {
        char *w = tok[t];

        if (t < n_chosen) {
            snprintf(w, sizeof tok[t], "%s", chosen[t]);
        } else {
            unsigned whole = (unsigned)ec_rng_below(&r, 10);
            unsigned frac = (unsigned)ec_rng_below(&r, 12);
            size_t m = 0;

            if (ec_rng_below(&r, 3) == 0)
                w[m++] = ec_rng_below(&r, 2) ? '-' : '+';
            for (unsigned i = 0; i < whole; i++)
                w[m++] = (char)('0' + ec_rng_below(&r, i || whole == 1 ? 10 : 3));
            w[m++] = '.';
            for (unsigned i = 0; i < frac; i++)
                w[m++] = (char)('0' + ec_rng_below(&r, 10));
            if (whole + frac == 0)
                w[m++] = '7';
            if (ec_rng_below(&r, 10) == 0)
                m += (size_t)snprintf(w + m, 8, "e%d", (int)ec_rng_below(&r, 21) - 10);
            w[m] = '\0';
        }
        /* A line each: "1 1:value". */
        len += (size_t)snprintf(text + len, cap - len, "1 1:%s\n", w);
    }
    read_text(text, len, NULL, &ds);
    ck_assert_uint_eq(ds.nnz, n_chosen + n_random);
    for (k = 0; k < ds.nnz; k++) {
        double want = strtod(tok[k], NULL);

        if (memcmp(&want, &ds.val[k], sizeof want) != 0 && bad++ == 0)
            first_bad = k;
    }
    ck_assert_msg(bad == 0, "%llu values differ from strtod, the first "
                  "'%s': %.17g against %.17g", (unsigned long long)bad,
                  tok[first_bad], ds.val[first_bad], strtod(tok[first_bad], NULL));
    ec_dataset_clear(&ds);
    free(text);
    free(tok);
}
END_TEST

/* w8a's empty samples: "-1 " alone on a line is a row of zeros. */
START_TEST(test_label_only_lines)
{
    const char *text = "-1 \n1\n-1 \r\n1 2:1\n-1 ";
    ec_dataset ds;

    read_text(text, strlen(text), NULL, &ds);
    ck_assert_uint_eq(ds.n_rows, 5);
    ck_assert_uint_eq(ds.nnz, 1);
    ck_assert_uint_eq(ds.d, 2);
    ck_assert_uint_eq(ds.row_ptr[3], 0);
    ck_assert_uint_eq(ds.row_ptr[4], 1);
    ck_assert_uint_eq(ds.row_ptr[5], 1);
    ec_dataset_clear(&ds);

    text = "1\n-1\n";
    read_text(text, strlen(text), NULL, &ds);
    ck_assert_uint_eq(ds.n_rows, 2);
    ck_assert_uint_eq(ds.nnz, 0);
    ck_assert_uint_eq(ds.d, 0);
    assert_csr_valid(&ds);
    ec_dataset_clear(&ds);
}
END_TEST

/* Exactly at each limit is still valid; one past it is tested above. */
START_TEST(test_limits_inclusive)
{
    ec_libsvm_opts opts = {.max_index = 10, .max_line = 16, .max_nnz = 7};
    /* "1 2:1 3:1 10:1.5" is 16 bytes, with and without its '\r'. */
    const char *text = "1 2:1 3:1 10:1.5\n-1 1:1\r\n1 2:1 3:1 10:1.5\r\n";
    ec_dataset ds;

    read_text(text, strlen(text), &opts, &ds);
    ck_assert_uint_eq(ds.nnz, 7);
    ck_assert_uint_eq(ds.d, 10);
    ec_dataset_clear(&ds);
}
END_TEST

/* Builds "LABEL 1:1 2:1 ... n:1" (n features) in a malloc'd string. */
static char *long_line(int label, unsigned n, size_t *len)
{
    size_t cap = 16 + (size_t)n * 12, used;
    char *s = malloc(cap);

    ck_assert_ptr_nonnull(s);
    used = (size_t)snprintf(s, cap, "%d", label);
    for (unsigned i = 1; i <= n; i++)
        used += (size_t)snprintf(s + used, cap - used, " %u:1", i);
    *len = used;
    return s;
}

/* Lines longer than a read chunk grow the buffer up to max_line, no more. */
START_TEST(test_long_lines)
{
    size_t len, total;
    char *line = long_line(1, 60000, &len);   /* about 470 KB */
    char *text = malloc(len + 64), path[64];
    ec_libsvm_opts opts = {0};
    ec_dataset ds;
    ec_err e = {0};
    int rc;

    ck_assert_ptr_nonnull(text);
    total = (size_t)sprintf(text, "-1 3:1\n");
    memcpy(text + total, line, len);
    total += len;
    total += (size_t)sprintf(text + total, "\n-1 2:1");
    read_text(text, total, NULL, &ds);
    ck_assert_uint_eq(ds.n_rows, 3);
    ck_assert_uint_eq(ds.d, 60000);
    ck_assert_uint_eq(ds.nnz, 60002);
    ck_assert_uint_eq(ds.row_ptr[2], 60001);
    ec_dataset_clear(&ds);

    /* One byte short of the long line's length. */
    opts.max_line = len - 1;
    tu_write_temp(text, total, path, sizeof path);
    rc = ec_libsvm_read(path, &opts, &ds, &e);
    unlink(path);
    ck_assert_int_eq(rc, EC_ELIMIT);
    ck_assert_msg(strstr(e.msg, ":2: line longer than the limit") != NULL,
                  "message '%s'", e.msg);
    ck_assert(is_zeroed(&ds));
    free(line);
    free(text);

    /* Past the default 1 MiB limit. */
    line = long_line(1, 140000, &len);
    ck_assert_uint_gt(len, EC_LIBSVM_DEFAULT_MAX_LINE);
    tu_write_temp(line, len, path, sizeof path);
    rc = ec_libsvm_read(path, NULL, &ds, &e);
    unlink(path);
    ck_assert_int_eq(rc, EC_ELIMIT);
    ck_assert_msg(strstr(e.msg, ":1: line longer than the limit of 1048576 "
                                "bytes") != NULL, "message '%s'", e.msg);
    free(line);
}
END_TEST

/*
 * A "\r\n" split between two reads: the '\r' is the last byte of the first
 * read, and it must count neither toward max_line nor as content. The
 * reader's chunk size is its own business, so every power of two from
 * 64 KiB to 1 MiB is tried.
 */
START_TEST(test_crlf_at_chunk_edge)
{
    size_t content = ((size_t)64 << 10 << _i) - 1, total;
    char *text = malloc(content + 16), path[64], want[96];
    ec_libsvm_opts opts = {.max_line = content};
    ec_dataset ds;
    ec_err e = {0};
    int rc;

    ck_assert_ptr_nonnull(text);
    memset(text, ' ', content);
    memcpy(text, "1 1:1", 5);
    memcpy(text + content, "\r\n-1 2:1\n", 9);
    total = content + 9;
    read_text(text, total, &opts, &ds);
    ck_assert_uint_eq(ds.n_rows, 2);
    ck_assert_uint_eq(ds.nnz, 2);
    ec_dataset_clear(&ds);

    opts.max_line = content - 1;
    tu_write_temp(text, total, path, sizeof path);
    rc = ec_libsvm_read(path, &opts, &ds, &e);
    unlink(path);
    ck_assert_int_eq(rc, EC_ELIMIT);
    snprintf(want, sizeof want, ":1: line longer than the limit of %zu bytes",
             content - 1);
    ck_assert_msg(strstr(e.msg, want) != NULL, "message '%s'", e.msg);
    free(text);
}
END_TEST

/*
 * Builds a few thousand varied lines (CRLF on some, blank lines, empty
 * rows, decimals), large enough to span several read chunks.
 */
static char *generated_text(size_t *len)
{
    size_t cap = 4 << 20, used = 0;
    char *s = malloc(cap);

    ck_assert_ptr_nonnull(s);
    for (unsigned i = 0; i < 6000; i++) {
        used += (size_t)snprintf(s + used, cap - used, "%s",
                                 i % 3 ? "-1" : "+1");
        for (unsigned j = 1 + i % 7; j < 200 && i % 11; j += 1 + (i + j) % 13)
            used += (size_t)snprintf(s + used, cap - used, " %u:%.6g", j,
                                     (double)(i * j % 1000) / 64.0 - 3.0);
        used += (size_t)snprintf(s + used, cap - used, "%s",
                                 i % 5 == 0 ? " \r\n" : i % 17 ? "\n"
                                                               : "\n\n");
        ck_assert_uint_lt(used, cap - 4096);
    }
    *len = used;
    return s;
}

START_TEST(test_gzip_twin)
{
    size_t len;
    char *text = generated_text(&len), plain[64], gz[64];
    ec_dataset a, b;

    tu_write_temp(text, len, plain, sizeof plain);
    write_gz(text, len, gz, sizeof gz);
    read_ok(plain, NULL, &a);
    read_ok(gz, NULL, &b);
    ck_assert_uint_eq(a.n_rows, 6000);
    assert_csr_valid(&a);
    assert_matches_text(&a, plain);
    assert_same(&a, &b);
    ec_dataset_clear(&a);
    ec_dataset_clear(&b);
    unlink(plain);
    unlink(gz);
    free(text);
}
END_TEST

/*
 * A gzip file cut short anywhere must be an error, never a shorter
 * dataset: zlib reports a truncated stream as a clean end of file.
 */
START_TEST(test_gzip_every_truncation)
{
    char gz[64], cut[64];
    size_t len;
    char *data;
    ec_dataset ds;

    write_gz(canonical, strlen(canonical), gz, sizeof gz);
    data = slurp(gz, &len);
    unlink(gz);
    for (size_t n = 1; n < len; n++) {
        ec_err e = {0};
        int rc;

        tu_write_temp(data, n, cut, sizeof cut);
        rc = ec_libsvm_read(cut, NULL, &ds, &e);
        unlink(cut);
        /* One byte (0x1f) is no gzip header, so zlib passes it through. */
        ck_assert_msg(rc == (n == 1 ? EC_EPARSE : EC_EIO),
                      "cut at %zu of %zu: %s (%s)", n, len, ec_err_name(rc),
                      e.msg);
        ck_assert_msg(strncmp(e.msg, cut, strlen(cut)) == 0, "%s", e.msg);
        if (n > 1)
            ck_assert_msg(strstr(e.msg, "gzip data") != NULL, "%s", e.msg);
        ck_assert(is_zeroed(&ds));
    }
    free(data);
}
END_TEST

/* A flipped byte in the data or in the CRC/length trailer is caught. */
START_TEST(test_gzip_corrupt)
{
    size_t len, at[3];
    char *text = generated_text(&len), gz[64], bad[64];
    char *data;
    ec_dataset ds;

    write_gz(text, len, gz, sizeof gz);
    free(text);
    data = slurp(gz, &len);
    unlink(gz);
    at[0] = len / 2;    /* deflate data */
    at[1] = len - 6;    /* CRC-32 */
    at[2] = len - 2;    /* uncompressed length */
    for (int i = 0; i < 3; i++) {
        ec_err e = {0};
        int rc;

        data[at[i]] ^= 0x55;
        tu_write_temp(data, len, bad, sizeof bad);
        data[at[i]] ^= 0x55;
        rc = ec_libsvm_read(bad, NULL, &ds, &e);
        unlink(bad);
        /* A flip in the data may also yield text that fails to parse. */
        ck_assert_msg(rc == EC_EIO || (i == 0 && rc == EC_EPARSE),
                      "flip at %zu: %s (%s)", at[i], ec_err_name(rc), e.msg);
        ck_assert_msg(strncmp(e.msg, bad, strlen(bad)) == 0, "%s", e.msg);
        if (i > 0)
            ck_assert_msg(strstr(e.msg, "corrupt gzip data") != NULL, "%s",
                          e.msg);
        ck_assert(is_zeroed(&ds));
    }
    free(data);
}
END_TEST

START_TEST(test_cannot_open)
{
    const char *path = "/nonexistent-ecopt-dir/data.txt";
    ec_dataset ds;
    ec_err e = {0};

    memset(&ds, 0x5a, sizeof ds);
    ck_assert_int_eq(ec_libsvm_read(path, NULL, &ds, &e), EC_EIO);
    ck_assert_msg(strstr(e.msg, path) && strstr(e.msg, "cannot open"),
                  "message '%s'", e.msg);
    ck_assert(is_zeroed(&ds));

    /* A directory opens but cannot be read. */
    ck_assert_int_eq(ec_libsvm_read("/tmp", NULL, &ds, &e), EC_EIO);
    ck_assert_msg(strncmp(e.msg, "/tmp:1: read failed", 19) == 0,
                  "message '%s'", e.msg);
    ck_assert(is_zeroed(&ds));
}
END_TEST

START_TEST(test_invalid_arguments)
{
    ec_dataset ds;
    ec_err e = {0};
    char path[64];

    memset(&ds, 0x5a, sizeof ds);
    ck_assert_int_eq(ec_libsvm_read(NULL, NULL, &ds, &e), EC_EINVAL);
    ck_assert(is_zeroed(&ds));
    ck_assert_int_eq(ec_libsvm_read("x", NULL, NULL, &e), EC_EINVAL);
    /* e may be NULL: the code alone still comes back. */
    tu_write_temp_str("1 1:1\n2 1:1\n3 1:1\n", path, sizeof path);
    ck_assert_int_eq(ec_libsvm_read(path, NULL, &ds, NULL), EC_EPARSE);
    unlink(path);
    ck_assert(is_zeroed(&ds));

    ec_dataset_clear(&ds);      /* zeroed: a no-op */
    ec_dataset_clear(NULL);
    ck_assert_uint_eq(ec_dataset_bytes(&ds), 0);
}
END_TEST

/*
 * ec_libsvm_read_fd: from a pipe (no seeking), from the current offset of
 * a file, gzip from a descriptor; errors name the given name; the
 * descriptor stays the caller's.
 */
START_TEST(test_read_fd)
{
    static const char text[] = "+1 3:1.5\n-1 1:2\n";
    static const char bad[] = "+1 1:1\n-1 1:x\n";
    ec_libsvm_opts opts = {0};
    ec_dataset ds, from_path;
    ec_err e = {0};
    char path[64], gz[80];
    int p[2], fd;
    gzFile g;

    /* A pipe: the reader must not need to seek. */
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq((long)write(p[1], text, sizeof text - 1),
                     (long)sizeof text - 1);
    close(p[1]);
    ck_assert_int_eq(ec_libsvm_read_fd(p[0], "pipe", NULL, &ds, &e), 0);
    ck_assert_uint_eq(ds.n_rows, 2);
    ck_assert_uint_eq(ds.d, 3);
    ck_assert_uint_eq(ds.nnz, 2);
    ck_assert(ds.val[0] == 1.5 && ds.y[0] == 1.0 && ds.y[1] == -1.0);
    ec_dataset_clear(&ds);
    /* Still open, and the caller's to close. */
    ck_assert_int_ne(fcntl(p[0], F_GETFD), -1);
    close(p[0]);

    /* From the current offset: the first line is skipped by the caller. */
    tu_write_temp_str("junk that is no sample\n+1 2:1\n", path, sizeof path);
    fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(lseek(fd, 23, SEEK_SET), 23);
    ck_assert_int_eq(ec_libsvm_read_fd(fd, path, NULL, &ds, &e), 0);
    ck_assert_uint_eq(ds.n_rows, 1);
    ck_assert_uint_eq(ds.d, 2);
    ec_dataset_clear(&ds);
    close(fd);
    unlink(path);

    /* gzip, detected by content as with a path. */
    tu_write_temp_str("", path, sizeof path);
    snprintf(gz, sizeof gz, "%s.gz", path);
    unlink(path);
    ck_assert_ptr_nonnull(g = gzopen(gz, "wb"));
    ck_assert_int_eq(gzputs(g, text), (int)sizeof text - 1);
    ck_assert_int_eq(gzclose(g), Z_OK);
    fd = open(gz, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(ec_libsvm_read_fd(fd, gz, NULL, &ds, &e), 0);
    read_ok(gz, NULL, &from_path);
    ck_assert_uint_eq(ds.n_rows, from_path.n_rows);
    ck_assert_uint_eq(ds.nnz, from_path.nnz);
    ck_assert_mem_eq(ds.val, from_path.val, ds.nnz * sizeof *ds.val);
    ec_dataset_clear(&ds);
    ec_dataset_clear(&from_path);
    close(fd);
    unlink(gz);

    /* Errors name the given name and line; a NULL name is "(input)". */
    ck_assert_int_eq(pipe(p), 0);
    ck_assert_int_eq((long)write(p[1], bad, sizeof bad - 1),
                     (long)sizeof bad - 1);
    close(p[1]);
    memset(&ds, 0x5a, sizeof ds);
    ck_assert_int_eq(ec_libsvm_read_fd(p[0], NULL, &opts, &ds, &e), EC_EPARSE);
    ck_assert_msg(strncmp(e.msg, "(input):2: feature 1: value 'x'", 31) == 0,
                  "message '%s'", e.msg);
    ck_assert(is_zeroed(&ds));
    close(p[0]);

    /* A bad descriptor is an error, not a crash. */
    memset(&ds, 0x5a, sizeof ds);
    ck_assert_int_eq(ec_libsvm_read_fd(-1, "x", NULL, &ds, &e), EC_EINVAL);
    ck_assert(is_zeroed(&ds));
    ck_assert_int_eq(ec_libsvm_read_fd(1 << 20, "closed", NULL, &ds, &e),
                     EC_EIO);
    ck_assert_msg(strncmp(e.msg, "closed: cannot read", 19) == 0,
                  "message '%s'", e.msg);
    ck_assert(is_zeroed(&ds));
}
END_TEST

/* The real datasets, with the facts SOURCES.md verified by other means. */
struct real_case {
    const char *name;
    uint32_t n_rows, d;
    uint64_t nnz;
    uint32_t n_neg;         /* rows mapped to -1 */
    double label_neg, label_pos;
    uint32_t empty_rows;
};

static const struct real_case real_cases[] = {
    {"a9a", 32561, 123, 451592, 24720, -1, 1, 0},
    {"a5a", 6414, 122, 88939, 4845, -1, 1, 0},
    {"a1a", 1605, 119, 22249, 1210, -1, 1, 0},
    {"mushrooms", 8124, 112, 170604, 3916, 1, 2, 0},
    {"w8a", 49749, 300, 579586, 48270, -1, 1, 4203},
    {"madelon.gz", 2000, 500, 1000000, 1000, -1, 1, 0},
    {"heart_scale", 270, 13, 3378, 150, -1, 1, 0},
};

START_TEST(test_real_data)
{
    const struct real_case *c = &real_cases[_i];
    char path[4096];
    ec_dataset ds;
    uint32_t n_neg = 0, empty = 0;

    read_ok(tu_data_path(c->name, path, sizeof path), NULL, &ds);
    ck_assert_uint_eq(ds.n_rows, c->n_rows);
    ck_assert_uint_eq(ds.d, c->d);
    ck_assert_uint_eq(ds.nnz, c->nnz);
    ck_assert_int_eq(ds.n_labels, 2);
    ck_assert(ds.label_neg == c->label_neg && ds.label_pos == c->label_pos);
    for (uint32_t i = 0; i < ds.n_rows; i++) {
        n_neg += ds.y[i] < 0;
        empty += ds.row_ptr[i] == ds.row_ptr[i + 1];
    }
    ck_assert_uint_eq(n_neg, c->n_neg);
    ck_assert_uint_eq(empty, c->empty_rows);
    assert_csr_valid(&ds);
    /* Shrunk to fit: (N+1)*8 + nnz*4 + nnz*8 + N*8. */
    ck_assert_uint_eq(ec_dataset_bytes(&ds),
                      ((size_t)c->n_rows + 1) * 8 + c->nnz * 4 + c->nnz * 8 +
                          (size_t)c->n_rows * 8);
    if (!strstr(c->name, ".gz"))
        assert_matches_text(&ds, path);
    ec_dataset_clear(&ds);
    /* Counting only: the same counts and labels, and no arrays. */
    {
        ec_libsvm_opts o = {.count_only = 1};

        read_ok(path, &o, &ds);
        ck_assert_uint_eq(ds.n_rows, c->n_rows);
        ck_assert_uint_eq(ds.d, c->d);
        ck_assert_uint_eq(ds.nnz, c->nnz);
        ck_assert_int_eq(ds.n_labels, 2);
        ck_assert(ds.label_neg == c->label_neg && ds.label_pos == c->label_pos);
        ck_assert(!ds.row_ptr && !ds.col && !ds.val && !ds.y);
        ec_dataset_clear(&ds);
    }
}
END_TEST

/* a9a's first line, spelled out, against its CSR row. */
START_TEST(test_a9a_first_row)
{
    static const uint32_t features[] = {3,  11, 14, 19, 39, 42, 55,
                                        64, 67, 73, 75, 76, 80, 83};
    char path[4096];
    ec_dataset ds;

    read_ok(tu_data_path("a9a", path, sizeof path), NULL, &ds);
    ck_assert(ds.y[0] == -1.0);
    ck_assert_uint_eq(ds.row_ptr[1], 14);
    for (int k = 0; k < 14; k++) {
        ck_assert_uint_eq(ds.col[k], features[k] - 1);
        ck_assert(ds.val[k] == 1.0);
    }
    ec_dataset_clear(&ds);
}
END_TEST

/*
 * madelon.gz against its own decompressed text, and its explicit zero:
 * row 578, feature 106 is written "106:0" and must be kept.
 */
START_TEST(test_madelon_gz_twin)
{
    char path[4096], plain[64], chunk[1 << 16];
    gzFile gz;
    FILE *f;
    ec_dataset a, b;
    int n;

    tu_data_path("madelon.gz", path, sizeof path);
    tu_write_temp("", 0, plain, sizeof plain);
    gz = gzopen(path, "rb");
    f = fopen(plain, "wb");
    ck_assert(gz && f);
    while ((n = gzread(gz, chunk, sizeof chunk)) > 0)
        ck_assert_uint_eq(fwrite(chunk, 1, (size_t)n, f), (size_t)n);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(gzclose(gz), Z_OK);
    ck_assert_int_eq(fclose(f), 0);

    read_ok(path, NULL, &a);
    read_ok(plain, NULL, &b);
    assert_same(&a, &b);
    assert_matches_text(&b, plain);
    unlink(plain);
    ck_assert_uint_eq(a.row_ptr[578] - a.row_ptr[577], 500);
    ck_assert_uint_eq(a.col[a.row_ptr[577] + 105], 105);
    ck_assert(a.val[a.row_ptr[577] + 105] == 0.0);
    ec_dataset_clear(&a);
    ec_dataset_clear(&b);
}
END_TEST

/* a9a compressed by the test reads identically; cut in half, it fails. */
START_TEST(test_a9a_gz_twin_and_truncated)
{
    char path[4096], gz[64], cut[64];
    size_t len, gz_len;
    char *text, *packed;
    ec_dataset a, b;
    ec_err e = {0};

    text = slurp(tu_data_path("a9a", path, sizeof path), &len);
    write_gz(text, len, gz, sizeof gz);
    free(text);
    read_ok(path, NULL, &a);
    read_ok(gz, NULL, &b);
    assert_same(&a, &b);
    ec_dataset_clear(&a);
    ec_dataset_clear(&b);

    packed = slurp(gz, &gz_len);
    unlink(gz);
    tu_write_temp(packed, gz_len / 2, cut, sizeof cut);
    free(packed);
    ck_assert_int_eq(ec_libsvm_read(cut, NULL, &a, &e), EC_EIO);
    unlink(cut);
    ck_assert_msg(strstr(e.msg, "truncated gzip data") != NULL, "%s", e.msg);
    ck_assert(is_zeroed(&a));
}
END_TEST

static Suite *libsvm_suite(void)
{
    Suite *s = suite_create("libsvm");
    TCase *hostile = tcase_create("hostile");
    TCase *valid = tcase_create("valid");
    TCase *gzip = tcase_create("gzip");
    TCase *real = tcase_create("real data");

    tcase_add_loop_test(hostile, test_bad_input, 0,
                        (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_loop_test(hostile, test_bad_input_count_only, 0,
                        (int)(sizeof bad_cases / sizeof bad_cases[0]));
    tcase_add_test(hostile, test_cannot_open);
    tcase_add_test(hostile, test_invalid_arguments);
    tcase_add_test(hostile, test_read_fd);
    suite_add_tcase(s, hostile);

    tcase_add_test(valid, test_canonical);
    tcase_add_loop_test(valid, test_good_variant, 0,
                        (int)(sizeof good_variants / sizeof good_variants[0]));
    tcase_add_loop_test(valid, test_labels, 0,
                        (int)(sizeof label_cases / sizeof label_cases[0]));
    tcase_add_test(valid, test_explicit_zeros_kept);
    tcase_add_test(valid, test_decimals_match_strtod);
    tcase_add_test(valid, test_label_only_lines);
    tcase_add_test(valid, test_limits_inclusive);
    tcase_add_test(valid, test_long_lines);
    tcase_add_loop_test(valid, test_crlf_at_chunk_edge, 0, 5);
    tcase_set_timeout(valid, REAL_DATA_TIMEOUT);
    suite_add_tcase(s, valid);

    tcase_add_test(gzip, test_gzip_twin);
    tcase_add_test(gzip, test_gzip_every_truncation);
    tcase_add_test(gzip, test_gzip_corrupt);
    tcase_set_timeout(gzip, REAL_DATA_TIMEOUT);
    suite_add_tcase(s, gzip);

    tcase_add_loop_test(real, test_real_data, 0,
                        (int)(sizeof real_cases / sizeof real_cases[0]));
    tcase_add_test(real, test_a9a_first_row);
    tcase_add_test(real, test_madelon_gz_twin);
    tcase_add_test(real, test_a9a_gz_twin_and_truncated);
    tcase_set_timeout(real, REAL_DATA_TIMEOUT);
    suite_add_tcase(s, real);
    return s;
}

int main(void)
{
    return tu_run(libsvm_suite());
}
