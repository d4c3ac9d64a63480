/*
 * libFuzzer target for the request-line parsers of service/lib/http/
 * (parse.c): the input is a raw request target, "path?query". The path is matched
 * against every pattern of the service's real route table (api_routes),
 * and the query goes through the strict query parser. Whatever is
 * accepted must be what the header promises: parameters and query pairs
 * within their limits, NUL-free, and pointing into their buffers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "http.h"

static void fail(const char *what)
{
    fprintf(stderr, "%s\n", what);
    abort();
}

static void match_routes(const char *path)
{
    size_t plen = strlen(path);

    for (size_t i = 0; i < api_nroutes; i++) {
        const char *pattern = api_routes[i].pattern;
        struct http_kv params[HTTP_MAX_PATH_PARAMS];
        struct http_parse_error err;
        size_t n = 0, need = plen + strlen(pattern) + 2;
        /* Exactly the room the header asks for, so ASan sees overflows. */
        char *buf = malloc(need);
        int rc;

        if (!buf)
            abort();
        memset(&err, 0, sizeof err);
        rc = http_path_match(pattern, path, params, &n, buf, &err);
        if (rc == 1) {
            if (n > HTTP_MAX_PATH_PARAMS)
                fail("too many path parameters");
            for (size_t j = 0; j < n; j++) {
                size_t len = strlen(params[j].value);

                if (len < 1 || len > HTTP_PARAM_MAX)
                    fail("a path parameter is out of 1..128 bytes");
                if (strcmp(params[j].value, ".") == 0 ||
                    strcmp(params[j].value, "..") == 0 ||
                    strspn(params[j].value, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                            "abcdefghijklmnopqrstuvwxyz"
                                            "0123456789_.-") != len)
                    fail("a path parameter is not [A-Za-z0-9_.-]");
            }
        } else if (rc == -1) {
            if (!err.detail[0])
                fail("a rejected parameter without a sentence");
        } else if (rc != 0) {
            fail("http_path_match returned something else");
        }
        free(buf);
    }
}

static void parse_query(const uint8_t *raw, size_t len)
{
    struct http_query q;
    struct http_parse_error err;
    /* An exact copy: the parser is given a length, not a C string. */
    char *copy = malloc(len ? len : 1);
    int rc;

    if (!copy)
        abort();
    memcpy(copy, raw, len);
    memset(&err, 0, sizeof err);
    rc = http_query_parse(copy, len, &q, &err);
    if (rc == 0) {
        if (q.count > HTTP_QUERY_MAX_PARAMS)
            fail("too many query parameters");
        for (size_t i = 0; i < q.count; i++) {
            size_t klen = strlen(q.item[i].key);

            if (klen < 1 || klen > HTTP_QUERY_MAX_KEY ||
                strlen(q.item[i].value) > HTTP_QUERY_MAX_VALUE)
                fail("a query pair is out of its limits");
        }
        http_query_free(&q);
    } else if (!err.detail[0] || strlen(err.detail) >= sizeof err.detail) {
        fail("a rejected query without a sentence");
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *qmark = memchr(data, '?', size);
    size_t plen = qmark ? (size_t)(qmark - data) : size;
    char *path;

    /* libmicrohttpd hands over the path as a C string: no NULs in it. */
    if (!memchr(data, '\0', plen)) {
        if (!(path = malloc(plen + 1)))
            abort();
        memcpy(path, data, plen);
        path[plen] = '\0';
        match_routes(path);
        free(path);
    }
    if (qmark)
        parse_query(qmark + 1, size - plen - 1);
    else
        parse_query(data, size);
    return 0;
}
