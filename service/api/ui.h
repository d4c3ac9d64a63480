/*
 * The dashboard: the files of web/ (HTML, CSS, JavaScript), embedded in
 * the binary at build time and served at / and /ui/{file} with their
 * content type, an ETag, and a Content-Security-Policy that allows only
 * this origin's scripts and styles.
 */
#ifndef ECOPT_UI_H
#define ECOPT_UI_H

#include <stddef.h>

/* The routes are h_ui_index (GET /, the dashboard's page) and h_ui_file
   (GET /ui/{file}: one of its files, or a 404 naming it), in api.h. */

/* How many files are embedded (0 in a build that did not embed web/). */
size_t ui_file_count(void);

#endif
