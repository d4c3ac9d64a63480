/*
 * libFuzzer target for the body of PATCH /v1/jobs/{id} (jobs_patch_doc,
 * then the spec's checks, as jobs_relabel runs them): any bytes as the
 * patch, applied to a valid spec with two labels. Besides not crashing:
 * a patch that is refused names a field; a patch that is accepted leaves
 * every label it sets with its value, removes every label it nulls, and
 * keeps the labels it does not name.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobs.h"
#include "jobspec.h"

static const char base_spec[] =
    "{\"dataset\":\"a9a\",\"algorithm\":\"eclk\",\"compressor\":{\"type\":\"topk\",\"k\":5},"
    "\"workers\":4,\"name\":\"base\",\"labels\":{\"team\":\"opt\",\"run\":\"3\"}}";

static const char *label_of(const struct jobspec *spec, const char *key)
{
    for (unsigned i = 0; i < spec->nlabels; i++)
        if (strcmp(spec->labels[i].key, key) == 0)
            return spec->labels[i].value;
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *patch = json_loadb((const char *)data, size, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *doc = json_loads(base_spec, 0, NULL), *labels, *v;
    struct spec_problem sp;
    struct jobspec spec;
    struct jobspec_errors errs = {0};
    const char *key, *got;

    if (!doc)
        abort();
    if (!patch) {
        json_decref(doc);
        return 0;
    }
    if (jobs_patch_doc(doc, patch, &sp) < 0) {
        if (!sp.detail[0])
            abort();                    /* a refusal says why */
        goto out;
    }
    if (jobspec_from_json(doc, &spec, &errs) < 0) {
        if (!errs.count || !errs.item[0].detail[0])
            abort();
        goto out;
    }
    labels = json_object_get(patch, "labels");
    json_object_foreach(labels, key, v) {
        got = label_of(&spec, key);
        if (json_is_null(v) ? got != NULL : !got || strcmp(got, json_string_value(v)))
            abort();
    }
    if (!json_object_get(labels, "team") && (!(got = label_of(&spec, "team")) ||
                                             strcmp(got, "opt")))
        abort();
    if (!json_object_get(labels, "run") && (!(got = label_of(&spec, "run")) || strcmp(got, "3")))
        abort();
out:
    json_decref(patch);
    json_decref(doc);
    return 0;
}
