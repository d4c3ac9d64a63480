/*
 * The job spec written out (jobspec.h): its canonical JSON, which the
 * store keeps and the API serves, and its problems as lines of text.
 * Reading and checking a spec is jobspec.c's.
 */
#include "jobspec.h"

#include <math.h>
#include <stdio.h>

#include "ecopt/algo.h"

/* ---- The canonical form ---------------------------------------------- */

/* A field that is not set (null) is left out: the JobSpec schema has no
   nulls, and an absent field means its default. json_object_set_new
   takes a NULL value as a failure, so one flag (ok) says whether all
   went in. */
static void put(json_t *obj, const char *key, json_t *value, int *ok)
{
    if (json_is_null(value)) {
        json_decref(value);
        return;
    }
    if (json_object_set_new(obj, key, value) < 0)
        *ok = 0;
}

/* Unset doubles are NaN in ec_job, and then absent in JSON. */
static json_t *real_or_null(double x)
{
    return isnan(x) ? json_null() : json_real(x);
}

json_t *jobspec_to_json(const struct jobspec *spec)
{
    const ec_job *job = &spec->job;
    const ec_comp_spec *comp = &job->compressor;
    json_t *doc = json_object(), *compressor = json_object();
    json_t *labels = json_object();
    int ok = doc && compressor && labels;

    if (!ok)
        goto fail;
    put(compressor, "type", json_string(ec_comp_name(comp->type)), &ok);
    put(compressor, "k", comp->k ? json_integer(comp->k) : json_null(), &ok);
    put(compressor, "k_frac", real_or_null(job->k_frac), &ok);
    put(compressor, "s", comp->s ? json_integer(comp->s) : json_null(), &ok);
    for (unsigned i = 0; i < spec->nlabels; i++)
        put(labels, spec->labels[i].key,
            json_string(spec->labels[i].value), &ok);

    put(doc, "dataset", json_string(job->dataset), &ok);
    put(doc, "loss", json_string(ec_loss_name(job->loss)), &ok);
    put(doc, "lambda1", json_real(job->lambda1), &ok);
    put(doc, "lambda2", real_or_null(job->lambda2), &ok);
    put(doc, "lambda2_rel", real_or_null(job->lambda2_rel), &ok);
    put(doc, "workers", json_integer(job->workers), &ok);
    put(doc, "algorithm", json_string(ec_algo_name(job->algorithm)), &ok);
    put(doc, "compressor", compressor, &ok);
    compressor = NULL;                         /* doc holds it now */
    /* EF21-P's compressor, only when the broadcast is compressed: a job
     * without one keeps the canonical form it always had. */
    if (job->compressor_down.type != EC_COMP_NONE) {
        const ec_comp_spec *cd = &job->compressor_down;
        json_t *down = json_object();

        put(down, "type", json_string(ec_comp_name(cd->type)), &ok);
        put(down, "k", cd->k ? json_integer(cd->k) : json_null(), &ok);
        put(down, "k_frac", real_or_null(job->k_frac_down), &ok);
        put(down, "s", cd->s ? json_integer(cd->s) : json_null(), &ok);
        put(doc, "compressor_down", down, &ok);
    }
    put(doc, "batch", job->batch == EC_JOB_BATCH_FULL ? json_string("full")
                                                      : json_integer(job->batch),
        &ok);
    put(doc, "participation", real_or_null(job->participation), &ok);
    put(doc, "p", real_or_null(job->p), &ok);
    put(doc, "step_size", real_or_null(job->step_size), &ok);
    /* The multiplier only applies to the theory step, and giving both is
     * refused, so it is written only when there is no explicit step. */
    put(doc, "step_multiplier",
        isnan(job->step_size) ? json_real(job->step_multiplier) : json_null(),
        &ok);
    put(doc, "smoothness_multiplier", real_or_null(job->smoothness_multiplier), &ok);
    put(doc, "eclk_rule",
        job->eclk_rule >= 0 ? json_string(ec_eclk_rule_name((ec_eclk_rule)job->eclk_rule))
                            : json_null(), &ok);
    put(doc, "eclk_guard", job->eclk_guard >= 0 ? json_boolean(job->eclk_guard) : json_null(),
        &ok);
    put(doc, "eclk_guard_threshold", real_or_null(job->eclk_guard_threshold), &ok);
    put(doc, "econtrol_eta", real_or_null(job->econtrol_eta), &ok);
    put(doc, "max_rounds", json_integer((json_int_t)job->max_rounds), &ok);
    put(doc, "target", json_real(job->target), &ok);
    put(doc, "eval_every", json_integer(job->eval_every), &ok);
    put(doc, "seed", json_integer((json_int_t)job->seed), &ok);
    put(doc, "split", json_string(ec_split_name(job->split)), &ok);
    put(doc, "split_alpha", real_or_null(job->split_alpha), &ok);
    put(doc, "max_seconds", json_real(job->max_seconds), &ok);
    put(doc, "name", spec->name[0] ? json_string(spec->name) : json_null(),
        &ok);
    put(doc, "labels", labels, &ok);
    labels = NULL;
    put(doc, "backend", json_string(jobspec_backend_name(spec->backend)),
        &ok);
    put(doc, "procs", spec->procs ? json_integer(spec->procs) : json_null(),
        &ok);
    if (ok)
        return doc;
fail:
    json_decref(compressor);
    json_decref(labels);
    json_decref(doc);
    return NULL;
}

/* ---- The problems as text -------------------------------------------- */

size_t jobspec_errors_format(const struct jobspec_errors *errs, char *buf,
                             size_t len)
{
    size_t used = 0;
    int n;

    if (len > 0)
        buf[0] = '\0';
    if (!errs)
        return 0;
    for (unsigned i = 0; i < errs->count && i < JOBSPEC_MAX_ERRORS; i++) {
        const struct jobspec_error *e = &errs->item[i];

        n = snprintf(used < len ? buf + used : NULL,
                     used < len ? len - used : 0, "%s%s%s%s",
                     i ? "\n" : "", e->field, e->field[0] ? ": " : "",
                     e->detail);
        used += n > 0 ? (size_t)n : 0;
    }
    if (errs->dropped) {
        n = snprintf(used < len ? buf + used : NULL,
                     used < len ? len - used : 0,
                     "\n(and %u more problems)", errs->dropped);
        used += n > 0 ? (size_t)n : 0;
    }
    return used;
}
