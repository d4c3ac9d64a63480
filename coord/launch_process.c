/* The process launcher: worker processes forked by the coordinator and
   connected by socketpairs (ec_run_process). */
#include "launch.h"

#include "ecopt/memory.h"

/* Without procs the launcher sizes itself to the round, now that the
 * data's shape is known (docs/architecture.md, "How a job runs"). */
static void sized(struct launch *l, const ec_dataset *ds)
{
    ec_mem_job mj;
    uint32_t n = l->spec->job.workers;
    uint64_t round;

    if (l->spec->procs)
        return;
    ec_mem_job_from(&mj, &l->spec->job, ds->n_rows, ds->nnz, ds->d, 1);
    round = ec_round_bytes(&mj);
    l->popts.procs = ec_procs_default_for(n, round);
    /* A light round's coordinator steps a share of the workers itself;
     * the processes host the rest. */
    l->popts.local = ec_procs_local_for(n, l->popts.procs, round);
}

static int run(struct launch *l, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, ec_metric_fn on_metric, void *ctx, ec_summary *sum,
               ec_err *e)
{
    return ec_run_process(pb, prm, job, &l->popts, on_metric, ctx, sum, e);
}

const struct launcher launch_process = {
    .name = "process",
    .help = "process (forked workers over sockets)",
    .workers = LAUNCH_PROCESSES,
    .sized = sized,
    .run = run,
};
