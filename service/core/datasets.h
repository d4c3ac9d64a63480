/*
 * The datasets API: the LibSVM files directly inside the data directory,
 * listed with their stats, and uploads streamed to a temporary file there,
 * validated by the engine's reader and renamed into place atomically.
 * Nothing it does reaches outside the data directory.
 */
#ifndef ECOPT_DATASETS_H
#define ECOPT_DATASETS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "http.h"

struct app;

#define DATASETS_NAME_MAX 128
/* The upload limit when the configuration gives none (max_upload). */
#define DATASETS_MAX_UPLOAD_DEFAULT ((size_t)256 << 20)
/* Uploads in progress are ".upload-" and 12 letters; never a valid name. */
#define DATASETS_TEMP_PREFIX ".upload-"

/*
 * NULL when name may name a dataset: 1..128 bytes of [A-Za-z0-9._-], not
 * starting with '.' (so never "." or "..", never a temporary file, never a
 * path). Otherwise the rule it breaks, as a sentence.
 */
const char *datasets_name_check(const char *name);

/*
 * Removes the temporary files of uploads that were cut short by the
 * service stopping (a crash, SIGKILL). Call it at start, before serving,
 * when no upload can be in progress. Returns how many it removed, or -1
 * with errno when the directory cannot be read.
 */
int datasets_cleanup(const char *data_dir);

/*
 * The handlers; rq->app is a struct app. Every one needs a bearer token,
 * as the jobs routes do.
 *
 * GET /v1/datasets: {"datasets": [...]}, each regular file with a valid
 * name, by name: {name, rows, d, nnz, labels: [neg, pos], bytes, sha256,
 * uploaded_at (ms, or null when the file was not uploaded here)}, or
 * {name, bytes, sha256, error} when the engine's reader refuses it.
 *
 * GET /v1/datasets/{name}: one of those, or 404.
 *
 * POST /v1/datasets?name=NAME[&replace=true], route flag HTTP_STREAM_BODY:
 * the body is the file, plain or gzip. 201 (200 when it replaced one) with
 * Location and the stats; 409 when NAME exists and replace is not true;
 * 413 past max_upload; 422 for a bad name or a file the reader refuses,
 * with its message.
 */
/*
 * A dataset as the list serves it (stats read and stored on first use):
 * its rows, dimension and SHA-256, and the stat of the file those belong
 * to, so that a later reader can tell whether it reads the same file.
 * -1 with a sentence in err when there is no such dataset or the reader
 * refuses it.
 */
struct datasets_file {
    int64_t rows, d;
    char sha256[65];
    struct stat st;
};

int datasets_file(struct app *a, const char *name, struct datasets_file *out,
                  char *err, size_t errlen);

int datasets_list(struct http_req *rq, struct http_resp *rs);
int datasets_get(struct http_req *rq, struct http_resp *rs);
int datasets_upload(struct http_req *rq, struct http_resp *rs);

#endif
