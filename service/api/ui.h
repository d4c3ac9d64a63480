/*
 * The dashboard: the files of web/ (HTML, CSS, JavaScript), embedded in
 * the binary at build time and served at / and /ui/{file} with their
 * content type, an ETag, and a Content-Security-Policy that allows only
 * this origin's scripts and styles.
 */
#ifndef ECOPT_UI_H
#define ECOPT_UI_H

#include <stddef.h>

#include "http.h"

/* GET /: the dashboard's page. */
int ui_index(struct http_req *rq, struct http_resp *rs);
/* GET /ui/{file}: one of its files, or a 404 naming it. */
int ui_file(struct http_req *rq, struct http_resp *rs);

/* How many files are embedded (0 in a build that did not embed web/). */
size_t ui_file_count(void);

#endif
