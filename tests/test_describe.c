/*
 * The metric record written without Jansson (describe_metric_record) says
 * exactly what describe_metric says: every key, every number to the bit,
 * null for what is not finite, and keys in the order JSON_SORT_KEYS gives.
 * Its reader (describe_metric_record_read) gives back the row it wrote,
 * and whatever text it accepts, Jansson reads as the same numbers. The
 * checker the scheduler uses (describe_metric_record_check) accepts the
 * same texts and writes the same documents, and the store's reader of
 * documents (describe_metric_doc_read) gives back the same numbers.
 */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "describe.h"
#include "ecopt/algo.h"
#include "ecopt/rng.h"
#include "testutil.h"

/* The same JSON value, numbers compared bit for bit. */
static void same_value(const char *key, json_t *a, json_t *b)
{
    if (json_is_null(a) || json_is_null(b)) {
        ck_assert_msg(json_is_null(a) && json_is_null(b), "%s: null on one side only", key);
        return;
    }
    if (json_is_integer(a) || json_is_integer(b)) {
        ck_assert_msg(json_is_integer(a) && json_is_integer(b), "%s: integer on one side", key);
        ck_assert_int_eq(json_integer_value(a), json_integer_value(b));
        return;
    }
    if (json_is_string(a)) {
        ck_assert_str_eq(json_string_value(a), json_string_value(b));
        return;
    }
    ck_assert_msg(json_is_real(a) && json_is_real(b), "%s: not both reals", key);
    double x = json_real_value(a), y = json_real_value(b);
    ck_assert_msg(memcmp(&x, &y, sizeof x) == 0, "%s: %.17g against %.17g", key, x, y);
}

/* The same double to the bit; NaN for what was not finite. */
static void same_real(const char *key, double got, double want)
{
    if (!isfinite(want))
        want = NAN;
    ck_assert_msg(memcmp(&got, &want, sizeof got) == 0 || (isnan(got) && isnan(want)),
                  "%s: %.17g against %.17g", key, got, want);
}

static const struct {
    const char *key;
    size_t off;
} reals[] = {{"P", offsetof(ec_metric, P)},
             {"bits_down", offsetof(ec_metric, bits_down)},
             {"bits_up", offsetof(ec_metric, bits_up)},
             {"gap", offsetof(ec_metric, gap)},
             {"grad_norm", offsetof(ec_metric, grad_norm)},
             {"paper_bits", offsetof(ec_metric, paper_bits)},
             {"rel_gap", offsetof(ec_metric, rel_gap)},
             {"seconds", offsetof(ec_metric, seconds)},
             {"time", offsetof(ec_metric, time)},
             {"wire_down", offsetof(ec_metric, wire_down)},
             {"wire_up", offsetof(ec_metric, wire_up)}};

static double field(const ec_metric *m, size_t i)
{
    double v;
    memcpy(&v, (const char *)m + reals[i].off, sizeof v);
    return v;
}

/*
 * What the reader took from text, against what Jansson reads there: an
 * object of every field's key with "type" "metric" and "v" 1, the same numbers
 * (null as NaN), and a document that is that object less "type" and "v".
 */
static void agrees_with_jansson(const char *text, size_t len, const ec_metric *m,
                                const char *doc)
{
    json_error_t err;
    json_t *rec = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err), *d, *round;

    ck_assert_msg(json_is_object(rec), "accepted what Jansson refuses: %.*s (%s)",
                  (int)len, text, err.text);
    ck_assert_uint_eq(json_object_size(rec), DESCRIBE_METRIC_NFIELDS + 2);
    ck_assert_str_eq(json_string_value(json_object_get(rec, "type")), "metric");
    ck_assert(json_is_integer(json_object_get(rec, "v")));
    ck_assert_int_eq(json_integer_value(json_object_get(rec, "v")), 1);
    round = json_object_get(rec, "round");
    ck_assert(json_is_integer(round));
    ck_assert_uint_eq((uint64_t)json_integer_value(round), m->round);
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        json_t *v = json_object_get(rec, reals[i].key);
        ck_assert_msg(json_is_real(v) || json_is_null(v), "%s: %.*s", reals[i].key,
                      (int)len, text);
        same_real(reals[i].key, field(m, i), json_is_real(v) ? json_real_value(v) : NAN);
    }
    d = json_loads(doc, JSON_REJECT_DUPLICATES, &err);
    ck_assert_msg(d != NULL, "document: %s: %s", doc, err.text);
    json_object_del(rec, "type");
    json_object_del(rec, "v");
    ck_assert_msg(json_equal(d, rec),
                  "document %s", doc);
    json_decref(d);
    json_decref(rec);
}

/*
 * describe_metric_record_read, with the checker run on the same text: it
 * must take and refuse the same, with the same round and document; and
 * a document taken reads back as the same row, bit for bit.
 */
static int read_record(const char *text, size_t len, ec_metric *m, char *doc, size_t room)
{
    char *doc2 = malloc(room), *copy = malloc(len ? len : 1);
    uint64_t round = UINT64_MAX;
    ec_metric back;
    int n, n2;

    ck_assert(doc2 && copy);
    memcpy(copy, text, len);    /* not terminated: neither may read past len */
    n = describe_metric_record_read(copy, len, m, doc);
    n2 = describe_metric_record_check(copy, len, &round, doc2);
    ck_assert_msg(n == n2, "reader %d, checker %d: %.*s", n, n2, (int)len, text);
    if (n >= 0) {
        ck_assert_uint_eq(round, m->round);
        ck_assert_str_eq(doc, doc2);
        ck_assert_int_eq(describe_metric_doc_read(doc, (size_t)n, &back), 0);
        ck_assert_uint_eq(back.round, m->round);
        for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
            same_real(reals[i].key, field(&back, i), field(m, i));
    }
    free(doc2);
    free(copy);
    return n;
}

static void check_row(const ec_metric *row)
{
    char buf[DESCRIBE_RECORD_MAX];
    json_error_t err;
    int n = describe_metric_record(row, buf, sizeof buf);
    json_t *got, *want = describe_metric(row);
    const char *key;
    json_t *v;
    char *text;

    ck_assert_int_gt(n, 0);
    ck_assert_uint_eq(strlen(buf), (size_t)n);
    got = json_loads(buf, JSON_REJECT_DUPLICATES, &err);
    ck_assert_msg(got != NULL, "%s: %s", buf, err.text);
    json_object_set_new(want, "type", json_string("metric"));
    json_object_set_new(want, "v", json_integer(1));
    ck_assert_uint_eq(json_object_size(got), json_object_size(want));
    json_object_foreach(want, key, v)
        same_value(key, json_object_get(got, key), v);
    /* Keys in the order Jansson's JSON_SORT_KEYS writes them. */
    text = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
    for (const char *p = buf, *q = text; (p = strchr(p, '"')) && (q = strchr(q, '"'));) {
        size_t lp = strcspn(p + 1, "\""), lq = strcspn(q + 1, "\"");
        ck_assert_msg(lp == lq && memcmp(p, q, lp) == 0, "key order: %s against %s", buf, text);
        p += lp + 2;
        q += lq + 2;
        if (*p == ':')
            p++;
        if (*q == ':')
            q++;
    }
    free(text);
    json_decref(got);
    json_decref(want);

    /* Read back: the same row, and the document the service stores. */
    ec_metric back;
    char doc[DESCRIBE_RECORD_MAX];
    int dn = read_record(buf, (size_t)n, &back, doc, sizeof doc);

    ck_assert_msg(dn > 0, "reader refused %s", buf);
    ck_assert_uint_eq(strlen(doc), (size_t)dn);
    ck_assert_ptr_null(strstr(doc, "\"type\""));
    ck_assert_uint_eq(back.round, row->round);
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++)
        same_real(reals[i].key, field(&back, i), field(row, i));
    agrees_with_jansson(buf, (size_t)n, &back, doc);
}

START_TEST(test_special_values)
{
    const double specials[] = {0.0,      -0.0,        1.0,      -1.0,  7872.0,
                               1e15,     9007199254740991.0, 9007199254740992.0,
                               1e300,    -1e-300,     4.9e-324, 0.1,   1.0 / 3.0,
                               NAN,      INFINITY,    -INFINITY, 2.5e-16, 123456.75};
    size_t ns = sizeof specials / sizeof specials[0];

    for (size_t i = 0; i < ns; i++) {
        ec_metric m = {.round = i * 1000003u,
                       .bits_up = specials[i],
                       .bits_down = specials[(i + 1) % ns],
                       .paper_bits = specials[(i + 2) % ns],
                       .P = specials[(i + 3) % ns],
                       .gap = specials[(i + 4) % ns],
                       .rel_gap = specials[(i + 5) % ns],
                       .grad_norm = specials[(i + 6) % ns],
                       .seconds = specials[(i + 7) % ns],
                       .wire_up = specials[(i + 8) % ns],
                       .wire_down = specials[(i + 9) % ns],
                       .time = specials[(i + 10) % ns]};
        check_row(&m);
    }
    /* The largest round JSON readers take (rounds stop at max_rounds). */
    ec_metric top = {.round = INT64_MAX, .P = 0.5};
    check_row(&top);
}
END_TEST

START_TEST(test_random_rows)
{
    ec_rng r;

    ec_rng_seed(&r, 20261129, 0);
    for (int i = 0; i < 20000; i++) {
        double v[11];
        for (int k = 0; k < 11; k++) {
            uint64_t bits = ec_rng_next(&r);
            double x;
            memcpy(&x, &bits, sizeof x);        /* any double, NaN included */
            if (k % 3 == 1)
                x = (double)(bits >> 12);       /* whole numbers, like bit counts */
            v[k] = x;
        }
        ec_metric m = {.round = ec_rng_next(&r) >> 1, .bits_up = v[0], .bits_down = v[1],
                       .paper_bits = v[2], .P = v[3], .gap = v[4], .rel_gap = v[5],
                       .grad_norm = v[6], .seconds = v[7], .wire_up = v[8], .wire_down = v[9],
                       .time = v[10]};
        check_row(&m);
    }
}
END_TEST

/* Reads text of any length, not terminated: true when the reader took it. */
static int try_read(const char *text, size_t len)
{
    char *copy = malloc(len ? len : 1), doc[4096];
    ec_metric m;
    int n;

    ck_assert_ptr_nonnull(copy);
    memcpy(copy, text, len);
    n = len < sizeof doc ? read_record(copy, len, &m, doc, sizeof doc) : -1;
    if (n >= 0)
        agrees_with_jansson(copy, len, &m, doc);
    free(copy);
    return n >= 0;
}

/*
 * Hostile text: every truncation, every byte deleted, replaced or doubled
 * in a few records. Whatever the reader takes, Jansson must read as the
 * same record; everything else is left to Jansson.
 */
START_TEST(test_reader_mutations)
{
    static const char repl[] = " 0912-+.eEnulx},:\"\\\t\n";
    ec_metric rows[] = {{.round = 0, .P = 0.5, .gap = NAN, .rel_gap = 1.0},
                        {.round = 1234567, .bits_up = 7872.0, .bits_down = -0.0,
                         .paper_bits = 1e300, .P = 1.0 / 3.0, .gap = 4.9e-324,
                         .rel_gap = 2.5e-16, .grad_norm = INFINITY, .seconds = 12.75,
                         .wire_up = 9007199254740992.0, .wire_down = 1e-5,
                         .time = 1796174227.2666991}};
    size_t taken = 0, tried = 0;

    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char buf[DESCRIBE_RECORD_MAX], mut[DESCRIBE_RECORD_MAX + 2];
        size_t n = (size_t)describe_metric_record(&rows[r], buf, sizeof buf);

        for (size_t cut = 0; cut < n; cut++, tried++)
            ck_assert_msg(!try_read(buf, cut), "took a record cut at %zu", cut);
        for (size_t i = 0; i < n; i++) {
            memcpy(mut, buf, i);
            memcpy(mut + i, buf + i + 1, n - i - 1);
            taken += (size_t)try_read(mut, n - 1);
            memcpy(mut, buf, i + 1);
            memcpy(mut + i + 1, buf + i, n - i);
            taken += (size_t)try_read(mut, n + 1);
            for (const char *c = repl; *c; c++) {
                memcpy(mut, buf, n);
                mut[i] = *c;
                taken += (size_t)try_read(mut, n);
            }
            tried += 2 + strlen(repl);
        }
        memcpy(mut, buf, n);
        mut[n / 2] = '\0';      /* a NUL inside */
        ck_assert(!try_read(mut, n));
    }
    /* Some mutants are records still (a digit changed); most are not. */
    ck_assert_uint_gt(taken, 0);
    ck_assert_uint_lt(taken, tried / 4);
}
END_TEST

/* Valid JSON the reader leaves to Jansson, and values at the edges. */
START_TEST(test_reader_edges)
{
    static const char base[] =
        "{\"P\":%s,\"bits_down\":0.0,\"bits_up\":0.0,\"gap\":0.0,\"grad_evals\":0.0,"
        "\"grad_norm\":0.0,"
        "\"paper_bits\":0.0,\"rel_gap\":0.0,\"restarts\":0,\"round\":%s,\"seconds\":0.0,"
        "\"time\":0.0,\"type\":\"metric\",\"v\":1,\"wire_down\":0.0,\"wire_up\":0.0}";
    static const struct {
        const char *p, *round;
        int taken;
    } cases[] = {
        {"0.5", "0", 1},          {"-0.0", "7", 1},       {"1e5", "7", 1},
        {"1E+5", "7", 1},         {"2.5e-400", "7", 1},   /* underflow: Jansson takes it */
        {"null", "9223372036854775807", 1},
        {"5", "7", 0},            /* an integer: Jansson's to read */
        {"1e400", "7", 0},        {"-1e999", "7", 0},     {"01.5", "7", 0},
        {".5", "7", 0},           {"1.", "7", 0},         {"1e", "7", 0},
        {"+1.0", "7", 0},         {"0x1p3", "7", 0},      {"NaN", "7", 0},
        {"nul", "7", 0},          {"\"0.5\"", "7", 0},    {" 0.5", "7", 0},
        {"0.5", "9223372036854775808", 0},  {"0.5", "18446744073709551616", 0},
        {"0.5", "01", 0},         {"0.5", "-1", 0},       {"0.5", "1.0", 0},
        {"0.5", "", 0},           {"0.5", "1e3", 0},
        {"1.00000000000000000000000000000000000000000000000000000000000000001", "7", 0},
        /* Near DBL_MAX, where the checker must convert to know. */
        {"1.7976931348623157e308", "7", 1}, {"-1.7976931348623157e+308", "7", 1},
        {"1.7976931348623159e308", "7", 0}, {"0.00001e312", "7", 1},
        {"100000.0e303", "7", 1},  {"1000000.0e303", "7", 0}, {"1e-99999", "7", 1},
        {"1e99999999999999999999", "7", 0}, {"0.0e99999999999999999999", "7", 1},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[1024];
        int n = snprintf(text, sizeof text, base, cases[i].p, cases[i].round);

        ck_assert_msg(try_read(text, (size_t)n) == cases[i].taken, "P %s, round %s: %s",
                      cases[i].p, cases[i].round, cases[i].taken ? "refused" : "taken");
    }
}
END_TEST

/* Documents of other spellings, as a hand-made row might be stored. */
START_TEST(test_doc_reader_spellings)
{
    static const char *const refused[] = {
        "", "[]", "{}", "not json", "{\"P\":0.5}", "{\"round\":-1}",
        "{\"round\":1.5}", "{\"round\":\"3\"}", "{\"round\":3",
    };
    ec_metric m;
    const char *doc = "{ \"round\": 12, \"P\": 1, \"gap\": null, \"rel_gap\": 2.5e-3,"
                      " \"seconds\": \"x\", \"extra\": [1] }";

    ck_assert_int_eq(describe_metric_doc_read(doc, strlen(doc), &m), 0);
    ck_assert_uint_eq(m.round, 12);
    ck_assert(m.P == 1.0 && m.rel_gap == 2.5e-3);
    ck_assert(isnan(m.gap) && isnan(m.seconds) && isnan(m.bits_up) && isnan(m.wire_down));
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        ck_assert_msg(describe_metric_doc_read(refused[i], strlen(refused[i]), &m) < 0,
                      "took %s", refused[i]);
}
END_TEST

/*
 * A document stored before time existed is not served as it is (it lacks
 * the key): the check refuses it, and its row reads with time NaN, the
 * rest as stored. Today's document passes the check.
 */
START_TEST(test_doc_before_time)
{
    const char *old = "{\"P\":0.5,\"bits_down\":8.0,\"bits_up\":4.0,\"gap\":0.25,"
                      "\"grad_norm\":0.125,\"paper_bits\":64.0,\"rel_gap\":0.75,"
                      "\"round\":3,\"seconds\":1.5,\"wire_down\":2.0,\"wire_up\":1.0}";
    ec_metric m = {.round = 3, .P = 0.5, .time = 1796174227.25}, back;
    char rec[DESCRIBE_RECORD_MAX], doc[DESCRIBE_RECORD_MAX];
    int n;

    const char *spaced = "{ \"round\": 3, \"P\": 0.5, \"bits_down\": 8, \"bits_up\": 4,"
                         " \"gap\": null, \"grad_norm\": 0, \"paper_bits\": 64,"
                         " \"rel_gap\": 1, \"seconds\": 1, \"wire_down\": 2,"
                         " \"wire_up\": 1, \"time\": 1e9, \"grad_evals\": 4, \"restarts\": 2 }";
    /* one stored before restarts existed: read with 0 restarts */
    const char *no_restarts = "{ \"round\": 4, \"P\": 0.5, \"time\": 1e9 }";

    ck_assert(!describe_metric_doc_check(no_restarts, strlen(no_restarts)));
    back.restarts = 7;
    ck_assert_int_eq(describe_metric_doc_read(no_restarts, strlen(no_restarts), &back), 0);
    ck_assert(back.round == 4 && back.restarts == 0 && back.time == 1e9);
    ck_assert(!describe_metric_doc_check(old, strlen(old)));
    ck_assert(describe_metric_doc_check(spaced, strlen(spaced)));
    ck_assert(!describe_metric_doc_check("[1]", 3));
    ck_assert_int_eq(describe_metric_doc_read(old, strlen(old), &back), 0);
    ck_assert(back.round == 3 && back.P == 0.5 && back.seconds == 1.5 &&
              back.wire_up == 1.0);
    ck_assert(isnan(back.time));
    n = describe_metric_record(&m, rec, sizeof rec);
    ck_assert_int_gt(n, 0);
    ck_assert_ptr_nonnull(strstr(rec, ",\"time\":1796174227.25,\"type\":\"metric\""));
    n = describe_metric_record_read(rec, (size_t)n, &back, doc);
    ck_assert_int_gt(n, 0);
    ck_assert(describe_metric_doc_check(doc, (size_t)n));
    ck_assert(back.time == m.time);
}
END_TEST

/* The CSV's last columns are time, grad_evals and restarts; a row that
   cannot fit is refused whole. */
START_TEST(test_csv_time)
{
    ec_metric m = {.round = 7, .seconds = 0.5, .time = 1796174227.266699,
                   .grad_evals = 12.5, .restarts = 3};
    char line[512];
    size_t hl = strlen(describe_csv_header);
    int n;

    ck_assert_str_eq(describe_csv_header + hl - 35, ",wire_down,time,grad_evals,restarts");
    n = describe_csv_row(&m, line, sizeof line);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(line + n - 25, ",1796174227.266699,12.5,3");
    m.seconds = 1e300;       /* "%.6f": 300 digits and more */
    ck_assert_int_eq(describe_csv_row(&m, line, 200), -1);
}
END_TEST

/* CSV reals are the shortest text that reads back as the same double. */
START_TEST(test_csv_shortest)
{
    static const double v[] = {925.4, 0.1, 1e-300, 5e-324, -0.0, 1.0 / 3.0, 2.5e10,
                               0.30000000000000004, 123456789012345678.0, 1.7976931348623157e308};
    ec_metric m = {.round = 3, .bits_up = 925.4, .gap = 0.1, .rel_gap = 1.0 / 3.0};
    char buf[64], line[512];

    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int n = describe_shortest(buf, sizeof buf, v[i]);
        ck_assert_int_gt(n, 0);
        ck_assert_msg(strtod(buf, NULL) == v[i] && signbit(strtod(buf, NULL)) == signbit(v[i]),
                      "%s does not read back as %.17g", buf, v[i]);
        ck_assert_int_le(n, 24);
    }
    describe_shortest(buf, sizeof buf, 925.4);
    ck_assert_str_eq(buf, "925.4");
    describe_shortest(buf, sizeof buf, 0.30000000000000004);
    ck_assert_str_eq(buf, "0.30000000000000004");
    describe_shortest(buf, sizeof buf, 1.0 / 3.0);
    ck_assert_str_eq(buf, "0.3333333333333333");
    ck_assert_int_gt(describe_csv_row(&m, line, sizeof line), 0);
    ck_assert_msg(strncmp(line, "3,925.4,0,0,0,0.1,0.3333333333333333,", 37) == 0, "%s", line);
}
END_TEST

START_TEST(test_short_buffer)
{
    char buf[DESCRIBE_RECORD_MAX - 1];
    ec_metric m = {0};

    ck_assert_int_eq(describe_metric_record(&m, buf, sizeof buf), -1);
}
END_TEST

/*
 * The vocabulary's compressor_kind and unbiased_form say exactly what the
 * engine admits: for every algorithm and every compressor a job may
 * choose, the pair is refused iff the kind does not admit it, and a
 * refusal names compressor (for kind none) or compressor.type.
 */
START_TEST(test_vocabulary_kinds)
{
    json_t *algos = describe_algorithms(), *comps = describe_compressors();
    size_t i, j, admitted = 0, refused = 0;
    json_t *a, *c;

    ck_assert_ptr_nonnull(algos);
    ck_assert_ptr_nonnull(comps);
    ck_assert_int_eq(json_array_size(algos), EC_ALGO_COUNT);
    ck_assert_int_eq(json_array_size(comps), EC_COMP_COUNT);
    json_array_foreach(algos, i, a) {
        const char *kind = json_string_value(json_object_get(a, "compressor_kind"));
        ck_assert_ptr_nonnull(kind);
        json_array_foreach(comps, j, c) {
            const char *name = json_string_value(json_object_get(c, "name")), *field;
            int choosable = json_is_true(json_object_get(c, "contraction"));
            int form = json_is_true(json_object_get(c, "unbiased_form"));
            int admits, is_none = strcmp(name, "none") == 0;
            char why[512];

            if (!choosable)
                continue;
            if (strcmp(kind, "none") == 0)
                admits = is_none;
            else if (strcmp(kind, "unbiased") == 0)
                admits = form;
            else {
                ck_assert_str_eq(kind, "contraction");
                admits = 1;
            }
            field = ec_algo_comp_check((ec_algo_id)i, (ec_comp_type)j, why, sizeof why);
            ck_assert_msg((field == NULL) == (admits != 0), "%s with %s: the vocabulary says %s, the engine %s",
                          json_string_value(json_object_get(a, "name")), name,
                          admits ? "admitted" : "refused", field ? why : "admits it");
            if (field)
                ck_assert_msg(strcmp(field, strcmp(kind, "none") ? "compressor.type"
                                                                 : "compressor") == 0,
                              "%s", field);
            admitted += admits;
            refused += !admits;
        }
    }
    /* Each kind occurs: the loop above compared both outcomes. */
    ck_assert_uint_gt(admitted, 0);
    ck_assert_uint_gt(refused, 0);
    json_decref(algos);
    json_decref(comps);
}
END_TEST

/*
 * compressed_broadcast (per algorithm) and broadcast (per compressor) say
 * exactly which compressor_down the engine admits: for every pair the
 * engine refuses iff one of the two is false, and names compressor_down
 * (the algorithm broadcasts uncompressed) or compressor_down.type.
 */
START_TEST(test_vocabulary_broadcast)
{
    json_t *algos = describe_algorithms(), *comps = describe_compressors();
    size_t i, j, admitted = 0, refused = 0;
    json_t *a, *c;

    ck_assert_ptr_nonnull(algos);
    ck_assert_ptr_nonnull(comps);
    json_array_foreach(algos, i, a) {
        int down = json_is_true(json_object_get(a, "compressed_broadcast"));

        ck_assert(json_is_boolean(json_object_get(a, "compressed_broadcast")));
        json_array_foreach(comps, j, c) {
            int takes = json_is_true(json_object_get(c, "broadcast"));
            const char *field;
            char why[512];

            ck_assert(json_is_boolean(json_object_get(c, "broadcast")));
            if (j == EC_COMP_NONE) {
                ck_assert(!takes);      /* none is "no compressor_down" */
                continue;
            }
            field = ec_algo_down_check((ec_algo_id)i, (ec_comp_type)j, why, sizeof why);
            ck_assert_msg((field == NULL) == (down && takes),
                          "%s with compressor_down %s: the vocabulary says %s, the engine %s",
                          json_string_value(json_object_get(a, "name")),
                          json_string_value(json_object_get(c, "name")),
                          down && takes ? "admitted" : "refused", field ? why : "admits it");
            if (field)
                ck_assert_str_eq(field, down ? "compressor_down.type" : "compressor_down");
            admitted += field == NULL;
            refused += field != NULL;
        }
    }
    ck_assert_uint_gt(admitted, 0);
    ck_assert_uint_gt(refused, 0);
    json_decref(algos);
    json_decref(comps);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("describe");
    TCase *tc = tcase_create("record");

    /* 20000 random rows: seconds alone, but 120 s was seen to run out on
     * a machine at a load of 10 to 20, and the ASan build is slower. */
    tcase_set_timeout(tc, 600);

    tcase_add_test(tc, test_vocabulary_kinds);
    tcase_add_test(tc, test_vocabulary_broadcast);
    tcase_add_test(tc, test_special_values);
    tcase_add_test(tc, test_random_rows);
    tcase_add_test(tc, test_reader_mutations);
    tcase_add_test(tc, test_reader_edges);
    tcase_add_test(tc, test_doc_reader_spellings);
    tcase_add_test(tc, test_doc_before_time);
    tcase_add_test(tc, test_csv_time);
    tcase_add_test(tc, test_csv_shortest);
    tcase_add_test(tc, test_short_buffer);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
