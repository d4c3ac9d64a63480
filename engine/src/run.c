/*
 * The in-process runtime: the round loop over simulated workers, with the
 * evaluation, stop rules and bit accounting every backend shares.
 */
#include "ecopt/run.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecopt/clock.h"

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

/*
 * What the relative gap divides by: the start's gap P(x0) - P*, or, when
 * the start is already optimal to P*'s precision (a lambda1 so large that
 * 0 is the minimizer gives P(x0) = P*), the rounding of P* itself. The
 * relative gap is then 0 at the start and finite after it, never 0/0.
 */
static double start_gap(const ec_problem *pb)
{
    double gap = pb->P0 - pb->P_star;
    double rounding = DBL_EPSILON * fmax(fabs(pb->P_star), 1.0);

    return gap > rounding ? gap : rounding;
}

void ec_eval(const ec_problem *pb, const double *point, double *tmp,
             double *tmp2, ec_metric *row)
{
    row->P = ec_problem_value(pb, point);
    row->gap = row->P - pb->P_star;
    row->rel_gap = row->gap / start_gap(pb);
    row->grad_norm = ec_problem_grad_norm(pb, point, tmp, tmp2);
}

int ec_should_stop(const ec_problem *pb, const ec_job *job,
                   const ec_metric *row, ec_summary *sum)
{
    /* A gap that is not a number never passes for a result: the run
     * failed, whatever round it reached. */
    if (!isfinite(row->P) || !isfinite(row->grad_norm) || !isfinite(row->rel_gap)) {
        sum->stop = EC_STOP_DIVERGED;
        snprintf(sum->reason, sizeof sum->reason,
                 "diverged at round %llu (the %s is not finite)",
                 (unsigned long long)row->round,
                 !isfinite(row->P) ? "objective" : !isfinite(row->grad_norm)
                                                       ? "gradient norm" : "relative gap");
        return 1;
    }
    if (row->gap > 1e6 * start_gap(pb)) {
        sum->stop = EC_STOP_DIVERGED;
        snprintf(sum->reason, sizeof sum->reason,
                 "diverged at round %llu (P - P* = %.3g, over 1e6 times the start)",
                 (unsigned long long)row->round, row->gap);
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

void ec_workers_step_into(ec_worker *w, uint32_t count, const ec_model *m,
                          ec_up *up, ec_down *down, ec_traffic *acc)
{
    for (uint32_t i = 0; i < count; i++) {
        if (!ec_model_participates(m, w[i].tau))
            continue;           /* not sampled: no step, no message */
        ec_worker_step(&w[i], m, up);
        acc->bits_up += ec_up_bits(up);
        acc->paper_up += ec_up_paper_bits(up);
        ec_server_reduce_add(down, up);
    }
}

/* The in-process backend: every worker steps here, in worker order, into
 * one uplink that is added to the broadcast before the next worker steps,
 * as the coordinator of the other backends adds what it decodes. */
struct inproc {
    ec_worker *workers;
    ec_up up;
    uint32_t n;
};

static int inproc_exchange(void *vctx, const ec_model *model, ec_down *down,
                           ec_traffic *acc, ec_summary *sum)
{
    struct inproc *ip = vctx;

    (void)sum;
    ec_server_reduce_begin(model, down);
    ec_workers_step_into(ip->workers, ip->n, model, &ip->up, down, acc);
    ec_server_reduce_end(model, ip->n, down);
    acc->bits_down += down->bits;
    return 0;
}

int ec_run_inproc(const ec_problem *pb, const ec_params *prm,
                  const ec_job *job, ec_metric_fn fn, void *ctx,
                  ec_summary *sum, ec_err *e)
{
    uint32_t n = pb->n, d = pb->d;
    struct inproc ip = {0};
    ec_backend be = {&ip, inproc_exchange, NULL};
    int rc = 0;

    memset(sum, 0, sizeof *sum);
    ip.n = n;
    if (ec_up_init(&ip.up, d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for %u workers", n);
        goto out;
    }
    /* One set of compressors and scratch vectors, as a worker process. */
    if ((rc = ec_workers_new(&ip.workers, pb, prm, 0, n, e)) < 0)
        goto out;
    rc = ec_run_loop(pb, prm, job, &be, fn, ctx, sum, e);
out:
    ec_workers_free(ip.workers, n);
    ec_up_clear(&ip.up);
    return rc;
}

static void fill_row(ec_metric *row, const ec_model *m, const ec_traffic *acc,
                     uint32_t n, double seconds)
{
    row->round = m->round;
    row->bits_up = (double)acc->bits_up / n;
    row->bits_down = (double)acc->bits_down;
    row->paper_bits = (double)acc->paper_up / n;
    row->wire_up = (double)acc->wire_up / n;
    row->wire_down = (double)acc->wire_down / n;
    row->grad_evals = (double)acc->grads / n;
    row->seconds = seconds;
    row->time = ec_wall_clock();
    row->restarts = m->restarts;
}

int ec_run_loop(const ec_problem *pb, const ec_params *prm, const ec_job *job,
                ec_backend *be, ec_metric_fn fn, void *ctx, ec_summary *sum,
                ec_err *e)
{
    uint32_t n = pb->n, d = pb->d;
    double *tmp = malloc(d * sizeof *tmp), *tmp2 = malloc(d * sizeof *tmp2);
    ec_model own = {0}, *model = be->model ? be->model : &own;
    ec_down down = {0};
    ec_metric row = {0};
    ec_traffic acc = {0, 0, 0, 0, 0, 0};
    double t0;
    int rc = 0, failed = 0;

    memset(sum, 0, sizeof *sum);
    if (!tmp || !tmp2 || ec_down_init(&down, d) < 0) {
        rc = ec_err_set(e, EC_ENOMEM, "out of memory for the run (d = %u)", d);
        goto out;
    }
    if ((!be->model && (rc = ec_model_init(&own, pb, prm, e)) < 0) ||
        (rc = ec_down_primal_init(&down, prm, e)) < 0)
        goto out;

    t0 = ec_clock();
    acc.grads = ec_setup_grads(pb, prm);
    if (!model->initialised) {
        acc.grads += ec_round_grads(model);
        if (be->exchange(be->ctx, model, &down, &acc, sum) < 0)
            failed = 1;
        else
            ec_model_apply(model, &down);
    }
    while (!failed) {
        fill_row(&row, model, &acc, n, ec_clock() - t0);
        ec_eval(pb, ec_model_point(model), tmp, tmp2, &row);
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
        /* Run to the next evaluation point; the clock and the signal flag
         * are read every round, so max_seconds and SIGTERM hold even with
         * a large eval_every. */
        do {
            if (ec_signal_caught()) {
                sum->stop = EC_STOP_CANCELLED;
                snprintf(sum->reason, sizeof sum->reason,
                         "cancelled by signal %d at round %llu",
                         ec_signal_caught(), (unsigned long long)model->round);
                failed = 1;
                break;
            }
            acc.grads += ec_round_grads(model);
            if (be->exchange(be->ctx, model, &down, &acc, sum) < 0) {
                failed = 1;
                break;
            }
            acc.grads += down.refresh_rows;
            ec_model_apply(model, &down);
        } while (model->round % job->eval_every != 0 &&
                 model->round < job->max_rounds &&
                 ec_clock() - t0 < job->max_seconds);
    }
    if (failed) {
        /* The last good evaluation stands; the counters say how far the
         * job got. */
        fill_row(&row, model, &acc, n, ec_clock() - t0);
        if (!sum->evals)
            ec_eval(pb, ec_model_point(model), tmp, tmp2, &row);
    }
    sum->rounds = model->round;
    sum->last = row;
    ec_model_eclk_report(model, &sum->eclk);
out:
    free(tmp);
    free(tmp2);
    ec_model_clear(&own);
    ec_down_clear(&down);
    return rc;
}
