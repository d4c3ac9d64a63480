/*
 * libFuzzer target for the job spec parser (service/jobspec.c): any bytes
 * as the body of POST /v1/jobs. Besides not crashing, a spec the parser
 * accepts must survive its canonical form: jobspec_to_json, dumped and
 * parsed again, gives back an equal spec, field by field (doubles bit for
 * bit), and the same canonical text.
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

static int same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* The name of the first field that differs, or NULL. */
static const char *differs(const struct jobspec *a, const struct jobspec *b)
{
    const ec_job *x = &a->job, *y = &b->job;

    if (strcmp(x->dataset, y->dataset) != 0)
        return "dataset";
    if (x->loss != y->loss)
        return "loss";
    if (!same_double(x->lambda1, y->lambda1))
        return "lambda1";
    if (!same_double(x->lambda2, y->lambda2))
        return "lambda2";
    if (!same_double(x->lambda2_rel, y->lambda2_rel))
        return "lambda2_rel";
    if (x->workers != y->workers)
        return "workers";
    if (x->algorithm != y->algorithm)
        return "algorithm";
    if (x->compressor.type != y->compressor.type ||
        x->compressor.k != y->compressor.k ||
        x->compressor.s != y->compressor.s)
        return "compressor";
    if (!same_double(x->k_frac, y->k_frac))
        return "k_frac";
    if (x->batch != y->batch)
        return "batch";
    if (!same_double(x->p, y->p))
        return "p";
    if (!same_double(x->step_size, y->step_size))
        return "step_size";
    if (!same_double(x->step_multiplier, y->step_multiplier))
        return "step_multiplier";
    if (x->max_rounds != y->max_rounds)
        return "max_rounds";
    if (!same_double(x->target, y->target))
        return "target";
    if (x->eval_every != y->eval_every)
        return "eval_every";
    if (x->seed != y->seed)
        return "seed";
    if (x->split != y->split)
        return "split";
    if (!same_double(x->split_alpha, y->split_alpha))
        return "split_alpha";
    if (!same_double(x->max_seconds, y->max_seconds))
        return "max_seconds";
    if (strcmp(a->name, b->name) != 0)
        return "name";
    if (a->nlabels != b->nlabels)
        return "labels";
    for (unsigned i = 0; i < a->nlabels; i++)
        if (strcmp(a->labels[i].key, b->labels[i].key) != 0 ||
            strcmp(a->labels[i].value, b->labels[i].value) != 0)
            return "labels";
    if (a->backend != b->backend)
        return "backend";
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct jobspec spec, again;
    struct jobspec_errors errs;
    char msg[4096], *text, *text2;
    const char *field;
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
    if ((field = differs(&spec, &again))) {
        fprintf(stderr, "canonical form changed %s: %s\n", field, text);
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
