/* The inproc launcher: no worker processes; the coordinator simulates
   every worker itself (ec_run_inproc). */
#include "launch.h"

static int run(struct launch *l, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, ec_metric_fn on_metric, void *ctx, ec_summary *sum,
               ec_err *e)
{
    (void)l;
    return ec_run_inproc(pb, prm, job, on_metric, ctx, sum, e);
}

const struct launcher launch_inproc = {
    .name = "inproc",
    .help = "inproc (workers simulated in this process)",
    .workers = LAUNCH_IN_COORDINATOR,
    .run = run,
};
