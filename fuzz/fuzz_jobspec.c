/*
 * libFuzzer target for the job spec parser (service/jobspec.c): any bytes
 * as the body of POST /v1/jobs. Besides not crashing, a spec the parser
 * accepts must survive its canonical form: jobspec_to_json, dumped and
 * parsed again, gives back the same canonical text.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobspec.h"

/* The canonical text of a parsed spec; malloc'd. */
static char *canonical(const struct jobspec *spec)
{
    json_t *doc = jobspec_to_json(spec);
    char *text;

    if (!doc)
        abort();
    text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    if (!text)
        abort();
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jobspec spec, again;
    struct jobspec_errors errs;
    char msg[4096], *text, *text2;
    int rc;

    rc = jobspec_parse((const char *)data, size, &spec, &errs);
    /* Every error is also formatted, as `ecopt run` prints it. */
    jobspec_errors_format(&errs, msg, sizeof msg);
    if (rc < 0) {
        if (errs.count == 0) {
            fprintf(stderr, "jobspec_parse failed (%d) naming no error\n", rc);
            abort();
        }
        return 0;
    }
    if (errs.count != 0)
        abort();

    text = canonical(&spec);
    rc = jobspec_parse(text, strlen(text), &again, &errs);
    if (rc < 0) {
        jobspec_errors_format(&errs, msg, sizeof msg);
        fprintf(stderr, "canonical form rejected: %s\n%s\n", text, msg);
        abort();
    }
    text2 = canonical(&again);
    if (strcmp(text, text2) != 0) {
        fprintf(stderr, "canonical form changed:\n%s\n%s\n", text, text2);
        abort();
    }
    free(text);
    free(text2);
    return 0;
}
