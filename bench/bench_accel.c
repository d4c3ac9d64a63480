/*
 * Acceleration: rounds to relative gap 1e-6 as kappa grows tenfold
 * (lambda2_rel 1e-2, 1e-3, 1e-4) on mushrooms with 20 workers, topk k = 5,
 * for ECLK and the methods it is measured against. An accelerated method's
 * rounds grow like sqrt(kappa): about 3.2x per step; the others' like kappa.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/algo.h"
#include "ecopt/data.h"
#include "ecopt/problem.h"
#include "ecopt/run.h"

static int quiet_row(void *ctx, const ec_metric *row)
{
    (void)ctx;
    (void)row;
    return 0;
}

int main(int argc, char **argv)
{
    static const char *algos[] = {"eclk", "ec-lsvrg", "ec-gd-diana", "ef21"};
    static const double rels[] = {1e-2, 1e-3, 1e-4};
    const char *dir = getenv("ECOPT_DATA_DIR");
    const char *out_path = argc > 1 ? argv[1] : "bench/results/accel.md";
    uint64_t budget = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000;
    char path[1024];
    ec_dataset ds = {0};
    ec_err e = {0};
    uint64_t rounds[4][3];
    double kappa[3], final_gap[4][3];
    FILE *out;

    snprintf(path, sizeof path, "%s/mushrooms", dir ? dir : "../shared/datasets");
    if (ec_libsvm_read(path, NULL, &ds, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    for (int r = 0; r < 3; r++) {
        for (int a = 0; a < 4; a++) {
            ec_job job;
            ec_problem pb;
            ec_params prm;
            ec_summary sum;

            ec_job_defaults(&job);
            ec_algo_from_name(algos[a], &job.algorithm);
            job.lambda2_rel = rels[r];
            job.workers = 20;
            job.compressor.type = EC_COMP_TOPK;
            job.compressor.k = 5;
            job.target = 1e-6;
            job.max_rounds = budget;
            job.eval_every = 10;
            if (ec_problem_init(&pb, &ds, &job, &e) < 0 ||
                ec_problem_solve(&pb, &e) < 0 ||
                ec_params_resolve(&job, &pb, &prm, &e) < 0 ||
                ec_run_inproc(&pb, &prm, &job, quiet_row, NULL, &sum, &e) < 0) {
                fprintf(stderr, "%s\n", e.msg);
                return 1;
            }
            kappa[r] = pb.kappa;
            rounds[a][r] = sum.stop == EC_STOP_TARGET ? sum.rounds : 0;
            final_gap[a][r] = sum.last.rel_gap;
            fprintf(stderr, "%-12s lambda2_rel %g: %s after %llu rounds (gap %.3g, %.1f s)\n",
                    algos[a], rels[r], ec_stop_name(sum.stop),
                    (unsigned long long)sum.rounds, sum.last.rel_gap,
                    sum.last.seconds);
            ec_problem_clear(&pb);
        }
    }
    if (!(out = fopen(out_path, "w"))) {
        perror(out_path);
        return 1;
    }
    for (FILE *f = stdout;; f = out) {
        fprintf(f, "# Rounds to relative gap 1e-6 as kappa grows\n\n"
                   "mushrooms, logistic, 20 workers (contiguous split), topk k = 5, "
                   "batch 1, theory steps, seed 1, budget %llu rounds.\n"
                   "Command: `make bench` (build/bench/bench_accel).\n\n",
                (unsigned long long)budget);
        fprintf(f, "| algorithm | kappa %.0f | kappa %.0f | kappa %.0f | growth per 10x kappa |\n",
                kappa[0], kappa[1], kappa[2]);
        fprintf(f, "|---|---|---|---|---|\n");
        for (int a = 0; a < 4; a++) {
            fprintf(f, "| %s |", algos[a]);
            for (int r = 0; r < 3; r++) {
                if (rounds[a][r])
                    fprintf(f, " %llu |", (unsigned long long)rounds[a][r]);
                else
                    fprintf(f, " not reached (gap %.2g) |", final_gap[a][r]);
            }
            if (rounds[a][0] && rounds[a][1] && rounds[a][2])
                fprintf(f, " %.2fx, %.2fx |\n",
                        (double)rounds[a][1] / rounds[a][0],
                        (double)rounds[a][2] / rounds[a][1]);
            else
                fprintf(f, " n/a |\n");
        }
        fprintf(f, "\nsqrt(10) = 3.16: the growth of an accelerated method; 10 for a "
                   "non-accelerated one.\n");
        if (f == out)
            break;
    }
    fclose(out);
    ec_dataset_clear(&ds);
    return 0;
}
