/*
 * libFuzzer target for the scheduler's reader of metric records
 * (describe_metric_record_read in service/describe.c), which takes the
 * coordinator's lines without a JSON parser. The input is one line.
 * Whatever the reader accepts, Jansson must read as a metric record with
 * the same numbers (null as NaN), the document must be that record less
 * "type" and "v", and writing the row again and reading it back must give
 * the same row, bit for bit. The scheduler's checker
 * (describe_metric_record_check) must take and refuse the same lines,
 * with the same round and document, and the store's reader of documents
 * (describe_metric_doc_read) must give the document's row back.
 */
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "describe.h"

static const char *const keys[] = {"P", "bits_down", "bits_up", "gap", "grad_evals",
                                   "grad_norm", "paper_bits", "rel_gap", "seconds",
                                   "time", "wire_down", "wire_up"};

static double field(const ec_metric *m, size_t i)
{
    const double v[] = {m->P, m->bits_down, m->bits_up, m->gap, m->grad_evals,
                        m->grad_norm, m->paper_bits, m->rel_gap, m->seconds, m->time,
                        m->wire_down, m->wire_up};
    return v[i];
}

static int same(double a, double b)
{
    return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0;
}

static void fail(const char *what, const char *line)
{
    fprintf(stderr, "%s: %s\n", what, line);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line, *doc, *cdoc, again[DESCRIBE_RECORD_MAX], doc2[DESCRIBE_RECORD_MAX];
    ec_metric m, m2;
    uint64_t round = 0;
    json_error_t err;
    json_t *rec, *d;
    int n, cn;

    if (size >= 4096 || !(line = malloc(size + 1)) || !(doc = malloc(size + 1)) ||
        !(cdoc = malloc(size + 1)))
        abort();
    memcpy(line, data, size);
    line[size] = '\0';          /* for messages; the reader gets size bytes */
    n = describe_metric_record_read(line, size, &m, doc);
    cn = describe_metric_record_check(line, size, &round, cdoc);
    if (cn != n || (n >= 0 && (round != m.round || strcmp(doc, cdoc) != 0)))
        fail("the checker and the reader disagree", line);
    free(cdoc);
    if (n < 0) {
        free(line);
        free(doc);
        return 0;
    }
    if (describe_metric_doc_read(doc, (size_t)n, &m2) < 0 || m2.round != m.round ||
        m2.restarts != m.restarts)
        fail("the document is not read back", doc);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!same(field(&m2, i), field(&m, i)))
            fail("the document reads back otherwise", doc);
    if ((size_t)n != strlen(doc))
        fail("document length", line);
    rec = json_loadb(line, size, JSON_REJECT_DUPLICATES, &err);
    if (!json_is_object(rec) || json_object_size(rec) != DESCRIBE_METRIC_NFIELDS + 2)
        fail("accepted what Jansson does not read as an object of every key", line);
    if (!json_is_string(json_object_get(rec, "type")) ||
        strcmp(json_string_value(json_object_get(rec, "type")), "metric") != 0 ||
        !json_is_integer(json_object_get(rec, "v")) ||
        json_integer_value(json_object_get(rec, "v")) != 1 ||
        !json_is_integer(json_object_get(rec, "round")) ||
        (uint64_t)json_integer_value(json_object_get(rec, "round")) != m.round ||
        !json_is_integer(json_object_get(rec, "restarts")) ||
        (uint64_t)json_integer_value(json_object_get(rec, "restarts")) != m.restarts)
        fail("type, v, round or restarts differ", line);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(rec, keys[i]);
        if (!(json_is_real(v) || json_is_null(v)) ||
            !same(field(&m, i), json_is_real(v) ? json_real_value(v) : NAN))
            fail(keys[i], line);
    }
    d = json_loads(doc, JSON_REJECT_DUPLICATES, &err);
    json_object_del(rec, "type");
    json_object_del(rec, "v");
    if (!d || !json_equal(d, rec))
        fail("the document is not the record less type and v", line);
    /* The writer's text of this row reads back as the same row. */
    n = describe_metric_record(&m, again, sizeof again);
    if (n < 0 || describe_metric_record_read(again, (size_t)n, &m2, doc2) < 0 ||
        m2.round != m.round || m2.restarts != m.restarts)
        fail("the row written again is not read back", again);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (!same(field(&m2, i), field(&m, i)))
            fail("the row written again reads back otherwise", again);
    json_decref(d);
    json_decref(rec);
    free(line);
    free(doc);
    return 0;
}
