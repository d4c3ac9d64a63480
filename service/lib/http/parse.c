/*
 * HTTP, the pure parts: small helpers, text made valid UTF-8 (utf8.h),
 * quoting, the status table, query strings, path patterns, bearer tokens
 * and JSON content types.
 */
#include "http_int.h"

#include "utf8.h"

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */

const struct http__status http__status_table[NSTATUS] = {
#define STATUS_ROW(code, phrase) {code, phrase},
    HTTP_STATUSES(STATUS_ROW)
#undef STATUS_ROW
};

uint64_t http__mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec http__ns_to_timespec(uint64_t ns)
{
    struct timespec ts;

    ts.tv_sec = (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    return ts;
}

void http__fmt(char *buf, size_t len, const char *f, ...)
{
    va_list ap;

    va_start(ap, f);
    vsnprintf(buf, len, f, ap);
    va_end(ap);
}

/* A JSON string of s with each invalid byte replaced by U+FFFD, because a
   detail may quote whatever a client sent. */
json_t *http__json_text(const char *s)
{
    size_t n = strlen(s), o = 0;
    const unsigned char *p = (const unsigned char *)s;
    char *clean;
    json_t *j;

    if (utf8_valid(s, n))
        return json_string(s);
    if (!(clean = malloc(3 * n + 1)))
        return NULL;
    for (size_t i = 0, k; i < n; i += k) {
        if ((k = utf8_char(p + i, n - i, NULL))) {
            memcpy(clean + o, s + i, k);
            o += k;
        } else {
            memcpy(clean + o, "\xEF\xBF\xBD", 3);
            o += 3;
            k = 1;
        }
    }
    clean[o] = '\0';
    j = json_string(clean);
    free(clean);
    return j;
}

/* Quotes up to max bytes of s for a message or a log line: printable ASCII
   as is, the rest (and '"', '\\') as \xHH, "..." when cut. */
void http__quote(char *dst, size_t dstlen, const char *s, size_t n,
                 size_t max)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (size_t i = 0; i < n && i < max; i++) {
        unsigned char c = (unsigned char)s[i];

        if (o + 8 >= dstlen)
            break;
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            dst[o++] = (char)c;
        } else {
            dst[o++] = '\\';
            dst[o++] = 'x';
            dst[o++] = hex[c >> 4];
            dst[o++] = hex[c & 15];
        }
    }
    if (n > max && o + 4 < dstlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o] = '\0';
}

int http__is_token_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

int http__is_id_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

const char *http_status_phrase(int status)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (http__status_table[i].code == status)
            return http__status_table[i].phrase;
    return "Unknown";
}

size_t http__status_slot(int status)
{
    for (size_t i = 0; i < NSTATUS; i++)
        if (http__status_table[i].code == status)
            return i;
    return NSTATUS;
}

/* ------------------------------------------------------------------ */
/* Query strings and paths: pure parsers                                */

/*
 * Decodes n bytes of one name or value into dst. Returns the decoded
 * length, or -1 at a malformed escape (its offset in *bad), -2 past max.
 */
static long pct_decode(const char *src, size_t n, char *dst, size_t max,
                       size_t *bad)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)src[i];

        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = i + 1 < n ? hexval((unsigned char)src[i + 1]) : -1;
            int lo = i + 2 < n ? hexval((unsigned char)src[i + 2]) : -1;

            if (hi < 0 || lo < 0) {
                *bad = i;
                return -1;
            }
            c = hi << 4 | lo;
            i += 2;
        }
        if (o == max)
            return -2;
        dst[o++] = (char)c;
    }
    return (long)o;
}

static int query_fail(struct http_parse_error *err, int code,
                      const char *param, const char *f, ...)
    __attribute__((format(printf, 4, 5)));

static int query_fail(struct http_parse_error *err, int code,
                      const char *param, const char *f, ...)
{
    va_list ap;

    if (err) {
        http__fmt(err->param, sizeof err->param, "%s", param ? param : "");
        va_start(ap, f);
        vsnprintf(err->detail, sizeof err->detail, f, ap);
        va_end(ap);
    }
    return code;
}

/* The escape at raw+at, quoted for a message: "%zz", "%4", "%". */
static void escape_text(char *buf, size_t len, const char *raw, size_t n,
                        size_t at)
{
    size_t k = n - at < 3 ? n - at : 3;

    http__quote(buf, len, raw + at, k, 3);
}

static int decode_part(const char *raw, size_t n, char **out, size_t max,
                       const char *key, struct http_parse_error *err)
{
    char esc[32];
    size_t bad = 0;
    long got = pct_decode(raw, n, *out, max, &bad);

    if (got == -1) {
        escape_text(esc, sizeof esc, raw, n, bad);
        if (key)
            return query_fail(err, EC_EPARSE, key,
                              "query parameter '%s' has a malformed "
                              "percent-escape \"%s\" (want %%XX, X a hex "
                              "digit)", key, esc);
        return query_fail(err, EC_EPARSE, NULL,
                          "a query parameter name has a malformed "
                          "percent-escape \"%s\" (want %%XX, X a hex digit)",
                          esc);
    }
    if (got == -2) {
        if (key)
            return query_fail(err, EC_ELIMIT, key,
                              "query parameter '%s' is longer than the limit "
                              "of %d bytes", key, HTTP_QUERY_MAX_VALUE);
        return query_fail(err, EC_ELIMIT, NULL,
                          "a query parameter name is longer than the limit "
                          "of %d bytes", HTTP_QUERY_MAX_KEY);
    }
    if (memchr(*out, '\0', (size_t)got))
        return key ? query_fail(err, EC_EPARSE, key,
                                "query parameter '%s' contains a NUL byte "
                                "(%%00)", key)
                   : query_fail(err, EC_EPARSE, NULL,
                                "a query parameter name contains a NUL byte "
                                "(%%00)");
    if (!utf8_valid(*out, (size_t)got))
        return key ? query_fail(err, EC_EPARSE, key,
                                "query parameter '%s' is not valid UTF-8",
                                key)
                   : query_fail(err, EC_EPARSE, NULL,
                                "a query parameter name is not valid UTF-8");
    (*out)[got] = '\0';
    *out += got + 1;
    return 0;
}

int http_query_parse(const char *raw, size_t len, struct http_query *q,
                     struct http_parse_error *err)
{
    char *out;
    int rc;

    memset(q, 0, sizeof *q);
    if (err)
        err->param[0] = err->detail[0] = '\0';
    if (len > HTTP_QUERY_MAX_LEN)
        return query_fail(err, EC_ELIMIT, NULL,
                          "the query string is %zu bytes, longer than the "
                          "limit of %d", len, HTTP_QUERY_MAX_LEN);
    if (len == 0)
        return 0;
    /* Decoding never lengthens, and each pair gains at most one NUL. */
    if (!(q->storage = malloc(len + 2)))
        return query_fail(err, EC_ENOMEM, NULL, "out of memory");
    out = q->storage;
    for (size_t i = 0, j; i < len; i = j + 1) {
        const char *eq;
        size_t kend;
        char *key;

        for (j = i; j < len && raw[j] != '&'; j++)
            ;
        if (j == i)
            continue;           /* "a=1&&b=2": an empty pair means nothing */
        eq = memchr(raw + i, '=', j - i);
        kend = eq ? (size_t)(eq - raw) : j;
        if (kend == i) {
            rc = query_fail(err, EC_EPARSE, NULL,
                            "a query parameter has an empty name (at byte "
                            "%zu of the query)", i);
            goto fail;
        }
        if (q->count == HTTP_QUERY_MAX_PARAMS) {
            rc = query_fail(err, EC_ELIMIT, NULL,
                            "the query has more than the limit of %d "
                            "parameters", HTTP_QUERY_MAX_PARAMS);
            goto fail;
        }
        key = out;
        if ((rc = decode_part(raw + i, kend - i, &out, HTTP_QUERY_MAX_KEY,
                              NULL, err)) < 0)
            goto fail;
        q->item[q->count].key = key;
        if (eq) {
            q->item[q->count].value = out;
            if ((rc = decode_part(eq + 1, j - kend - 1, &out,
                                  HTTP_QUERY_MAX_VALUE, key, err)) < 0)
                goto fail;
        } else {
            q->item[q->count].value = "";
        }
        q->count++;
    }
    return 0;
fail:
    http_query_free(q);
    return rc;
}

void http_query_free(struct http_query *q)
{
    free(q->storage);
    memset(q, 0, sizeof *q);
}

int http__param_valid(const char *s, size_t n)
{
    if (n == 0 || n > HTTP_PARAM_MAX)
        return 0;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!http__is_id_char((unsigned char)s[i]))
            return 0;
    return 1;
}

int http__segment_is_param(const char *p, size_t n)
{
    return n >= 3 && p[0] == '{' && p[n - 1] == '}';
}

int http_path_match(const char *pattern, const char *path,
                    struct http_kv params[HTTP_MAX_PATH_PARAMS],
                    size_t *nparams, char *buf, struct http_parse_error *err)
{
    const char *p = pattern, *s = path;
    char *b = buf;
    size_t n = 0;
    char bad_name[PARAM_NAME_MAX + 1] = "", bad_value[80] = "";
    int bad = 0;

    *nparams = 0;
    for (;;) {
        size_t plen, slen;

        if (*p != '/' || *s != '/')
            return 0;
        p++, s++;
        plen = strcspn(p, "/");
        slen = strcspn(s, "/");
        if (http__segment_is_param(p, plen)) {
            size_t nlen = plen - 2;

            if (n == HTTP_MAX_PATH_PARAMS || nlen > PARAM_NAME_MAX)
                return 0;
            if (!bad && !http__param_valid(s, slen)) {
                bad = 1;
                memcpy(bad_name, p + 1, nlen);
                bad_name[nlen] = '\0';
                http__quote(bad_value, sizeof bad_value, s, slen, 40);
            }
            params[n].key = b;
            memcpy(b, p + 1, nlen);
            b[nlen] = '\0';
            b += nlen + 1;
            params[n].value = b;
            memcpy(b, s, slen);
            b[slen] = '\0';
            b += slen + 1;
            n++;
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        p += plen, s += slen;
        if (!*p || !*s)
            break;
    }
    if (*p || *s)
        return 0;
    *nparams = n;
    if (bad) {
        if (err) {
            http__fmt(err->param, sizeof err->param, "%s", bad_name);
            http__fmt(err->detail, sizeof err->detail,
                      "path parameter '%s' must be 1..%d characters of "
                      "[A-Za-z0-9_.-], not \".\" or \"..\"; got \"%s\"",
                      bad_name, HTTP_PARAM_MAX, bad_value);
        }
        return -1;
    }
    return 1;
}

/* "Bearer T" (scheme in any case) with T a token68; anything else is no
   token, and the auth layer decides what that means. */
int http_bearer_valid(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!(http__is_id_char(c) || c == '~' || c == '+' || c == '/' || c == '='))
            return 0;
    }
    return n > 0;
}

void http__parse_bearer(const char *auth, char *out, size_t outlen)
{
    size_t n;

    out[0] = '\0';
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return;
    auth += 7;
    while (*auth == ' ')
        auth++;
    n = strcspn(auth, " ");
    if (n >= outlen || auth[n + strspn(auth + n, " ")] != '\0' ||
        !http_bearer_valid(auth, n))
        return;
    memcpy(out, auth, n);
    out[n] = '\0';
}

/* application/json or application/X+json; a charset, if any, is UTF-8. */
int http__json_content_type(const char *ct)
{
    const char *semi, *cs;
    size_t n;

    while (*ct == ' ')
        ct++;
    n = strcspn(ct, "; ");
    if (!((n == 16 && strncasecmp(ct, "application/json", 16) == 0) ||
          (n > 17 && strncasecmp(ct, "application/", 12) == 0 &&
           strncasecmp(ct + n - 5, "+json", 5) == 0)))
        return 0;
    for (semi = strchr(ct, ';'); semi; semi = strchr(semi + 1, ';')) {
        cs = semi + 1;
        while (*cs == ' ')
            cs++;
        if (strncasecmp(cs, "charset=", 8) == 0) {
            cs += 8;
            if (*cs == '"')
                cs++;
            if (strncasecmp(cs, "utf-8", 5) != 0 ||
                (cs[5] && !strchr("\"; ", cs[5])))
                return 0;
        }
    }
    return 1;
}
