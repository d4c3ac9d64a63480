/*
 * libFuzzer target for the metrics cursor of GET /v1/jobs/{id}/metrics
 * (metrics_cursor_parse and metrics_cursor_fit in service/handlers.c). The
 * input is a row count, the number of rows the store would report after
 * the cursor, as one byte choosing its kind and 8 bytes (little-endian),
 * then the raw query string, which goes through the real query parser
 * first as it does in the server. The kinds make the edges easy to reach:
 * small, just below INT64_MAX, negative, or any int64. Accepted cursors
 * must be within the documented ranges, and after fitting the remaining
 * rows sampled every `every` must fit in max_points.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "http.h"

static void fail(const char *what, const struct metrics_cursor *c)
{
    fprintf(stderr, "%s: after %lld limit %lld every %lld max_points %lld "
            "wait %lld\n", what, c->after, c->limit, c->every, c->max_points,
            c->wait);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct http_query q;
    struct http_parse_error perr;
    struct http_req rq;
    struct metrics_cursor c;
    struct query_problem qp;
    uint64_t raw = 0;
    int64_t count;
    char *copy;

    if (size < 9)
        return 0;
    for (int i = 0; i < 8; i++)
        raw |= (uint64_t)data[1 + i] << (8 * i);
    switch (data[0] % 4) {
    case 0:
        count = (int64_t)(raw % 65536);
        break;
    case 1:
        count = INT64_MAX - (int64_t)(raw % 65536);
        break;
    case 2:
        count = -(int64_t)(raw % 65536);
        break;
    default:
        memcpy(&count, &raw, sizeof count);
    }
    data += 9;
    size -= 9;

    if (!(copy = malloc(size ? size : 1)))
        abort();
    memcpy(copy, data, size);
    if (http_query_parse(copy, size, &q, &perr) < 0) {
        free(copy);
        return 0;
    }
    memset(&rq, 0, sizeof rq);
    rq.nquery = q.count;
    rq.query = q.item;
    memset(&qp, 0, sizeof qp);
    if (metrics_cursor_parse(&rq, &c, &qp) < 0) {
        if (!qp.param || !qp.detail[0] || qp.min > qp.max)
            abort();
    } else {
        if (c.after < -1 || c.limit < 1 || c.limit > 10000 || c.every < 1 ||
            c.every > 1000000000 || c.wait < 0 || c.wait > 60 ||
            (c.max_points != 0 && (c.max_points < 2 || c.max_points > 10000)))
            fail("cursor out of its ranges", &c);
        metrics_cursor_fit(&c, count);
        if (c.every < 1 || c.limit < 1)
            fail("fitted cursor out of range", &c);
        if (c.max_points > 0) {
            if (c.limit > c.max_points)
                fail("limit above max_points", &c);
            /* Rows 0, every, 2 every, ... of count: at most max_points. */
            if (count > c.max_points &&
                (count - 1) / c.every + 1 > c.max_points)
                fail("the downsampled curve does not fit max_points", &c);
        }
    }
    http_query_free(&q);
    free(copy);
    return 0;
}
