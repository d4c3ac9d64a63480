/*
 * The in-process runtime: the round loop over simulated workers, with the
 * evaluation, stop rules and bit accounting every backend shares.
 */
#include "ecopt/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const char *ec_stop_name(ec_stop s)
{
    switch (s) {
    case EC_STOP_TARGET:
        return "target";
    case EC_STOP_MAX_ROUNDS:
        return "max_rounds";
    case EC_STOP_MAX_SECONDS:
        return "max_seconds";
    case EC_STOP_DIVERGED:
        return "diverged";
    case EC_STOP_CANCELLED:
        return "cancelled";
    case EC_STOP_FAILED:
        return "failed";
    }
    return "unknown";
}

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ec_eval(const ec_problem *pb, const double *point, double *tmp,
             double *tmp2, ec_metric *row)
{
    row->P = ec_problem_value(pb, point);
    row->gap = row->P - pb->P_star;
    row->rel_gap = row->gap / (pb->P0 - pb->P_star);
    row->grad_norm = ec_problem_grad_norm(pb, point, tmp, tmp2);
}

int ec_should_stop(const ec_problem *pb, const ec_job *job,
                   const ec_metric *row, ec_summary *sum)
{
    double start_gap = pb->P0 - pb->P_star;

    if (!isfinite(row->P) || !isfinite(row->grad_norm) ||
        row->gap > 1e6 * start_gap) {
        sum->stop = EC_STOP_DIVERGED;
        snprintf(sum->reason, sizeof sum->reason,
                 "diverged at round %llu (P - P* = %.3g, %s)",
                 (unsigned long long)row->round, row->gap,
                 isfinite(row->P) ? "over 1e6 times the start" : "not finite");
        return 1;
    }
    if (row->rel_gap <= job->target) {
        sum->stop = EC_STOP_TARGET;
        snprintf(sum->reason, sizeof sum->reason,
                 "target %.3g reached at round %llu", job->target,
                 (unsigned long long)row->round);
        return 1;
    }
    if (row->round >= job->max_rounds) {
        sum->stop = EC_STOP_MAX_ROUNDS;
        snprintf(sum->reason, sizeof sum->reason,
                 "max_rounds %llu reached (relative gap %.3g > target %.3g)",
                 (unsigned long long)job->max_rounds, row->rel_gap,
                 job->target);
        return 1;
    }
    if (row->seconds >= job->max_seconds) {
        sum->stop = EC_STOP_MAX_SECONDS;
        snprintf(sum->reason, sizeof sum->reason,
                 "max_seconds %.0f reached at round %llu (relative gap %.3g)",
                 job->max_seconds, (unsigned long long)row->round,
                 row->rel_gap);
        return 1;
    }
    return 0;
}

/* Cumulative traffic of a run. */
typedef struct traffic {
    uint64_t bits_up, paper_up, bits_down;   /* summed over workers */
} traffic;

/* One exchange: every worker steps, the server reduces, the model moves. */
static void exchange(ec_worker *workers, ec_up *ups, uint32_t n,
                     ec_model *model, ec_down *down, traffic *acc)
{
    for (uint32_t t = 0; t < n; t++) {
        ec_worker_step(&workers[t], model, &ups[t]);
        acc->bits_up += ec_up_bits(&ups[t]);
        acc->paper_up += ec_up_paper_bits(&ups[t]);
    }
    ec_server_reduce(model, ups, n, down);
    acc->bits_down += down->bits;
    ec_model_apply(model, down);
}

int ec_run_inproc(const ec_problem *pb, const ec_params *prm,
                  const ec_job *job, ec_metric_fn fn, void *ctx,
                  ec_summary *sum, ec_err *e)
{
    uint32_t n = pb->n, d = pb->d;
    ec_worker *workers = calloc(n, sizeof *workers);
    ec_up *ups = calloc(n, sizeof *ups);
    double *tmp = malloc(d * sizeof *tmp), *tmp2 = malloc(d * sizeof *tmp2);
    ec_model model = {0};
    ec_down down = {0};
    ec_metric row = {0};
    traffic acc = {0, 0, 0};
    double t0;
    int rc = 0;
    uint32_t made = 0;

    memset(sum, 0, sizeof *sum);
    if (!workers || !ups || !tmp || !tmp2 || ec_down_init(&down, d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", n);
        goto out;
    }
    if ((rc = ec_model_init(&model, pb, prm, e)) < 0)
        goto out;
    for (; made < n; made++) {
        if ((rc = ec_worker_init(&workers[made], pb, prm, made, e)) < 0)
            goto out;
        if (ec_up_init(&ups[made], d) < 0) {
            rc = ec_err_set(e, EC_ENOMEM, "out of memory for messages");
            goto out;
        }
    }

    t0 = now_seconds();
    if (!model.initialised)
        exchange(workers, ups, n, &model, &down, &acc);
    for (;;) {
        row.round = model.round;
        row.bits_up = (double)acc.bits_up / n;
        row.bits_down = (double)acc.bits_down;
        row.paper_bits = (double)acc.paper_up / n;
        row.seconds = now_seconds() - t0;
        ec_eval(pb, ec_model_point(&model), tmp, tmp2, &row);
        sum->evals++;
        if (fn && fn(ctx, &row)) {
            sum->stop = EC_STOP_CANCELLED;
            snprintf(sum->reason, sizeof sum->reason,
                     "cancelled at round %llu",
                     (unsigned long long)row.round);
            break;
        }
        if (ec_should_stop(pb, job, &row, sum))
            break;
        /* Run to the next evaluation point; the clock is read every round
         * so that max_seconds holds even with a large eval_every. */
        do
            exchange(workers, ups, n, &model, &down, &acc);
        while (model.round % job->eval_every != 0 &&
               model.round < job->max_rounds &&
               now_seconds() - t0 < job->max_seconds);
    }
    sum->rounds = model.round;
    sum->last = row;
out:
    for (uint32_t t = 0; t < n && workers; t++) {
        ec_worker_clear(&workers[t]);
        if (ups)
            ec_up_clear(&ups[t]);
    }
    free(workers);
    free(ups);
    free(tmp);
    free(tmp2);
    ec_model_clear(&model);
    ec_down_clear(&down);
    return rc;
}
