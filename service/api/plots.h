/*
 * The plot routes: a job's or an experiment's convergence curves as SVG
 * (relative gap, log scale, against rounds, bits sent up, or seconds),
 * drawn by plot.h from the stored metric rows, under the same ownership
 * rules as the JSON routes.
 */
#ifndef ECOPT_PLOTS_H
#define ECOPT_PLOTS_H

#include "http.h"

/* Rows read per curve at most (evenly thinned by the store), before the
   writer's own min/max downsampling to the plot's max_points. */
#define PLOTS_JOB_ROWS 10000
#define PLOTS_EXPERIMENT_ROWS 4000

/* GET /v1/jobs/{id}/plot.svg?x=rounds|bits|seconds&max_points=N */
int plots_job(struct http_req *rq, struct http_resp *rs);
/* GET /v1/experiments/{id}/plot.svg?x=...: one curve per job. */
int plots_experiment(struct http_req *rq, struct http_resp *rs);

#endif
