/*
 * The dashboard's files, served from memory. mk/ui.mk turns the files of
 * web/ into ecopt_web_assets.inc (each file its bytes, and a table of them)
 * and puts its directory on this file's include path; a build without it
 * (say the fuzzers') still compiles, and answers / with a 404 that says so.
 */
#include "ui.h"

#include "api.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

struct ui_asset {
    const char *name;           /* "app.js" */
    const char *data;
    const size_t *len;
};

#if defined(__has_include)
#if __has_include("ecopt_web_assets.inc")
#include "ecopt_web_assets.inc"
#define UI_EMBEDDED 1
#endif
#endif
#ifndef UI_EMBEDDED
static const struct ui_asset ui_assets[1] = {{NULL, NULL, NULL}};
static const size_t ui_nassets = 0;
#endif

/* Only this origin's scripts, styles and requests; plots come as blob:
   images; no frames, no forms posting elsewhere, no plugins. */
#define UI_CSP                                                              \
    "default-src 'none'; script-src 'self'; style-src 'self'; "             \
    "img-src 'self' blob: data:; connect-src 'self'; base-uri 'none'; "     \
    "form-action 'none'; frame-ancestors 'none'"

size_t ui_file_count(void)
{
    return ui_nassets;
}

static const char *content_type(const char *name)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".svg", "image/svg+xml"},
        {".json", "application/json"},
        {".txt", "text/plain; charset=utf-8"},
    };
    const char *dot = strrchr(name, '.');

    for (size_t i = 0; dot && i < sizeof types / sizeof types[0]; i++)
        if (strcmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

/* A strong ETag: FNV-1a of the bytes, which change only with the build. */
static void etag_of(const struct ui_asset *a, char out[24])
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < *a->len; i++) {
        h ^= (unsigned char)a->data[i];
        h *= 0x100000001b3ull;
    }
    snprintf(out, 24, "\"%016llx\"", (unsigned long long)h);
}

static int serve(struct http_req *rq, struct http_resp *rs, const char *name)
{
    const struct ui_asset *a = NULL;
    const char *inm = http_header(rq, "If-None-Match");
    char etag[24], detail[200];

    for (size_t i = 0; i < ui_nassets; i++)
        if (strcmp(ui_assets[i].name, name) == 0)
            a = &ui_assets[i];
    if (!a) {
        if (ui_nassets == 0)
            snprintf(detail, sizeof detail, "this ecopt was built without the dashboard "
                                            "(web/ was not embedded)");
        else
            snprintf(detail, sizeof detail, "no dashboard file '%.80s'", name);
        return http_reply_problem(rs, 404, NULL, detail, NULL);
    }
    etag_of(a, etag);
    /* Revalidated on every load (no-cache), so a new build shows at once,
       and answered with 304 when nothing changed. */
    http_reply_header(rs, "ETag", etag);
    http_reply_header(rs, "Cache-Control", "no-cache");
    http_reply_header(rs, "X-Content-Type-Options", "nosniff");
    http_reply_header(rs, "Referrer-Policy", "no-referrer");
    if (strcmp(name, "index.html") == 0) {
        http_reply_header(rs, "Content-Security-Policy", UI_CSP);
        http_reply_header(rs, "X-Frame-Options", "DENY");
    }
    if (inm && strstr(inm, etag))
        return http_reply_text(rs, 304, content_type(name), "", 0);
    return http_reply_text(rs, 200, content_type(name), a->data, *a->len);
}

int h_ui_index(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    (void)who;
    return serve(rq, rs, "index.html");
}

int h_ui_file(struct http_req *rq, struct http_resp *rs, const struct token *who)
{
    (void)who;
    return serve(rq, rs, http_param(rq, "file"));
}
