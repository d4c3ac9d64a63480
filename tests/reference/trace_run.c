/*
 * Runs a job in this process for a number of rounds and writes its
 * reference trace (ecopt/trace.h): the driver of tests/reference/run.sh,
 * linked against the engine alone.
 *
 *   trace_run dataset=a1a algorithm=ec-sgd compressor=topk k=5 workers=4 \
 *             rounds=300 out=FILE [batch= lambda2_rel= lambda1= loss= s= seed=
 *             participation= lambda2=]
 *
 * Exits 0 when the trace is written, 2 on a bad argument (naming it), 1 on
 * any other failure.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/trace.h"

struct args {
    ec_job job;
    unsigned long long rounds;
    const char *out;
};

static int bad(const char *arg, const char *why)
{
    fprintf(stderr, "trace_run: %s: %s\n", arg, why);
    return 2;
}

static int parse_uint(const char *arg, const char *v, unsigned long long max,
                      unsigned long long *out)
{
    char *end;

    errno = 0;
    if (*v < '0' || *v > '9')
        return bad(arg, "not a count");
    *out = strtoull(v, &end, 10);
    if (errno || *end || *out > max)
        return bad(arg, "not a count in range");
    return 0;
}

static int parse_double(const char *arg, const char *v, double *out)
{
    char *end;

    errno = 0;
    *out = strtod(v, &end);
    if (errno || end == v || *end || !isfinite(*out) || *out < 0)
        return bad(arg, "not a finite number >= 0");
    return 0;
}

/* One key=value argument into a; 0, or 2 after saying what is wrong. */
static int parse_arg(struct args *a, const char *arg)
{
    const char *eq = strchr(arg, '=');
    const char *v = eq ? eq + 1 : NULL;
    size_t kl = eq ? (size_t)(eq - arg) : 0;
    unsigned long long u;
    int rc = 0;

#define KEY(name) (kl == strlen(name) && !strncmp(arg, name, kl))
    if (!eq)
        return bad(arg, "expected key=value");
    if (KEY("dataset")) {
        if (strlen(v) >= sizeof a->job.dataset)
            return bad(arg, "path too long");
        strcpy(a->job.dataset, v);
    } else if (KEY("algorithm")) {
        if (ec_algo_from_name(v, &a->job.algorithm) < 0)
            return bad(arg, "unknown algorithm");
    } else if (KEY("compressor")) {
        if (ec_comp_from_name(v, &a->job.compressor.type) < 0)
            return bad(arg, "unknown compressor");
    } else if (KEY("k")) {
        if (!(rc = parse_uint(arg, v, UINT32_MAX, &u)))
            a->job.compressor.k = (uint32_t)u;
    } else if (KEY("s")) {
        if (!(rc = parse_uint(arg, v, EC_JOB_MAX_DITHER_LEVELS, &u)))
            a->job.compressor.s = (uint32_t)u;
    } else if (KEY("workers")) {
        if (!(rc = parse_uint(arg, v, EC_JOB_MAX_WORKERS, &u)))
            a->job.workers = (uint32_t)u;
    } else if (KEY("batch")) {
        if (!(rc = parse_uint(arg, v, UINT32_MAX, &u)))
            a->job.batch = (uint32_t)u;
    } else if (KEY("seed")) {
        rc = parse_uint(arg, v, UINT64_MAX, &u);
        a->job.seed = u;
    } else if (KEY("rounds")) {
        rc = parse_uint(arg, v, 1000000, &a->rounds);
    } else if (KEY("lambda2_rel")) {
        rc = parse_double(arg, v, &a->job.lambda2_rel);
    } else if (KEY("lambda1")) {
        rc = parse_double(arg, v, &a->job.lambda1);
    } else if (KEY("lambda2")) {
        rc = parse_double(arg, v, &a->job.lambda2);
    } else if (KEY("compressor_down")) {
        if (ec_comp_from_name(v, &a->job.compressor_down.type) < 0)
            return bad(arg, "unknown compressor");
    } else if (KEY("k_down")) {
        if (!(rc = parse_uint(arg, v, UINT32_MAX, &u)))
            a->job.compressor_down.k = (uint32_t)u;
    } else if (KEY("step_multiplier")) {
        rc = parse_double(arg, v, &a->job.step_multiplier);
    } else if (KEY("participation")) {
        rc = parse_double(arg, v, &a->job.participation);
    } else if (KEY("eclk_rule")) {
        int found = 0;
        for (int r = 0; r < EC_ECLK_RULE_COUNT; r++)
            if (!strcmp(v, ec_eclk_rule_name((ec_eclk_rule)r))) {
                a->job.eclk_rule = r;
                found = 1;
            }
        if (!found)
            return bad(arg, "unknown eclk_rule");
    } else if (KEY("eclk_guard")) {
        if (!(rc = parse_uint(arg, v, 1, &u)))
            a->job.eclk_guard = (int)u;
    } else if (KEY("loss")) {
        if (ec_loss_from_name(v, &a->job.loss) < 0)
            return bad(arg, "unknown loss");
    } else if (KEY("out")) {
        a->out = v;
    } else {
        return bad(arg, "unknown key (dataset, algorithm, compressor, k, s, "
                        "workers, batch, seed, rounds, lambda2_rel, "
                        "lambda1, lambda2, participation, eclk_rule, "
                        "eclk_guard, compressor_down, k_down, step_multiplier, "
                        "loss, out)");
    }
#undef KEY
    return rc;
}

/* The dataset's path: as given when it has a slash, else in ECOPT_DATA_DIR. */
static void data_path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("ECOPT_DATA_DIR");

    if (strchr(name, '/') || !dir)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s/%s", dir, name);
}

/* The rounds, exactly as a backend runs them: every worker that takes part
 * steps, the server reduces, the model applies; the trace between and
 * after. */
static int run(FILE *f, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, unsigned long long rounds, ec_err *e)
{
    uint32_t n = pb->n;
    ec_worker *ws = calloc(n, sizeof *ws);
    ec_up *ups = calloc(n, sizeof *ups);
    ec_model m;
    ec_down down;
    int rc = -1, model = 0, dn = 0;
    uint32_t made = 0, upn = 0;

    if (!ws || !ups)
        goto out;
    if (ec_model_init(&m, pb, prm, e) < 0)
        goto out;
    model = 1;
    if (ec_down_init(&down, pb->d) < 0)
        goto out;
    dn = 1;
    if (ec_down_primal_init(&down, prm, e) < 0)
        goto out;
    for (; made < n; made++)
        if (ec_worker_init(&ws[made], pb, prm, made, e) < 0)
            goto out;
    for (; upn < n; upn++)
        if (ec_up_init(&ups[upn], pb->d) < 0)
            goto out;
    if (ec_trace_header(f, pb, prm, job) < 0)
        goto out;
    while (m.round < rounds) {
        for (uint32_t t = 0; t < n; t++)
            if (ec_model_participates(&m, t))
                ec_worker_step(&ws[t], &m, &ups[t]);
        ec_server_reduce(&m, ups, n, &down);
        if (ec_trace_exchange(f, &m, ws, ups, n) < 0 ||
            ec_trace_broadcast(f, &down) < 0)
            goto out;
        ec_model_apply(&m, &down);
        if (ec_trace_state(f, &m) < 0)
            goto out;
    }
    rc = 0;
out:
    for (uint32_t t = 0; t < upn; t++)
        ec_up_clear(&ups[t]);
    for (uint32_t t = 0; t < made; t++)
        ec_worker_clear(&ws[t]);
    if (dn)
        ec_down_clear(&down);
    if (model)
        ec_model_clear(&m);
    free(ws);
    free(ups);
    return rc;
}

int main(int argc, char **argv)
{
    struct args a = {.rounds = 300};
    char path[2048];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_params prm;
    ec_err e = {0};
    FILE *f;
    int rc = 1, pb_made = 0;

    ec_job_defaults(&a.job);
    a.job.lambda2_rel = 1e-3;
    a.job.workers = 4;
    for (int i = 1; i < argc; i++)
        if (parse_arg(&a, argv[i]))
            return 2;
    if (!a.job.dataset[0] || !a.out)
        return bad("arguments", "dataset= and out= are required");
    data_path(a.job.dataset, path, sizeof path);
    if (ec_libsvm_read(path, NULL, &ds, &e) < 0)
        goto fail;
    if (ec_problem_init(&pb, &ds, &a.job, &e) < 0)
        goto fail;
    pb_made = 1;
    if (ec_params_resolve(&a.job, &pb, &prm, &e) < 0) {
        fprintf(stderr, "trace_run: %s\n", e.msg);
        rc = 2;
        goto out;
    }
    if (!(f = fopen(a.out, "w"))) {
        fprintf(stderr, "trace_run: %s: %s\n", a.out, strerror(errno));
        goto out;
    }
    rc = run(f, &pb, &prm, &a.job, a.rounds, &e);
    if (fclose(f) != 0 || rc < 0) {
        fprintf(stderr, "trace_run: writing %s failed%s%s\n", a.out,
                e.msg[0] ? ": " : "", e.msg);
        rc = 1;
        goto out;
    }
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "trace_run: %s\n", e.msg);
out:
    if (pb_made)
        ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    return rc;
}
