/*
 * Set-up: lambda_max(A^T A) for L_f by the engine's Lanczos method
 * (inside ec_problem_init) against the power iteration it replaced
 * (reimplemented here with its stop rule: the Rayleigh quotient moved by
 * at most 1e-12 relative, at most 10000 steps), on the same data in the
 * same run, alternating A and B. CPU seconds, products with A^T A, the
 * relative difference of the two values, (Lanczos - power) / Lanczos:
 * both are Rayleigh quotients, lower bounds of lambda_max, so a positive
 * difference means the Lanczos value is the closer.
 *
 * With `pstar` as the third argument: P* of the same problem (lambda1 = 0,
 * lambda2_rel 1e-4, logistic) by the engine's solver for it (Newton-CG
 * when d > 4096) against restarted FISTA, the solver it replaced, forced
 * by a lambda1 too small to change any prox (as test_problem does): CPU
 * seconds, iterations, and the relative difference of the two P*.
 *
 * With `setup`: one job's set-up by the engine alone, L_f then P*, as one
 * line of numbers (CPU s of each, Lanczos steps, Newton steps, Hessian
 * products, lambda_max, P*) for bench_setup_ab.sh, which alternates two
 * builds of the engine on it.
 *
 *   build/bench/bench_setup FILE [REPS] [lmax|pstar|setup] >> bench/results/setup.md
 *
 * FILE is a LibSVM file (a name is looked up in $ECOPT_DATA_DIR).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecopt/data.h"
#include "ecopt/problem.h"

static double cpu(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The power iteration as ec_problem_init ran it before, over all of d. */
static double power_lmax(const ec_dataset *ds, int *steps)
{
    uint32_t d = ds->d;
    double *v = malloc(d * sizeof *v), *av = malloc(d * sizeof *av);
    double lam = 0.0, nv = 0.0;

    if (!v || !av) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (uint32_t j = 0; j < d; j++) {
        v[j] = 1.0 + 0.1 * (double)((j * 2654435761u) % 1000) / 1000.0;
        nv += v[j] * v[j];
    }
    for (uint32_t j = 0; j < d; j++)
        v[j] /= sqrt(nv);
    for (*steps = 1; *steps <= 10000; ++*steps) {
        double lam_new = 0.0, n2 = 0.0;

        memset(av, 0, d * sizeof *av);
        for (uint32_t i = 0; i < ds->n_rows; i++) {
            double t = 0.0;
            for (uint64_t p = ds->row_ptr[i]; p < ds->row_ptr[i + 1]; p++)
                t += ds->val[p] * v[ds->col[p]];
            for (uint64_t p = ds->row_ptr[i]; p < ds->row_ptr[i + 1]; p++)
                av[ds->col[p]] += t * ds->val[p];
            lam_new += t * t;
        }
        for (uint32_t j = 0; j < d; j++)
            n2 += av[j] * av[j];
        n2 = sqrt(n2);
        for (uint32_t j = 0; j < d; j++)
            v[j] = av[j] / n2;
        if (*steps > 3 && fabs(lam_new - lam) <= 1e-12 * lam_new) {
            lam = lam_new;
            break;
        }
        lam = lam_new;
    }
    free(v);
    free(av);
    return lam;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int bench_pstar(const char *name, ec_dataset *ds, int reps)
{
    double ta[16], tb[16], ratio[16], pa = 0, pb_ = 0;
    int ia = 0, ib = 0, prod = 0;
    const char *ma = "";
    ec_err e = {0};

    for (int r = 0; r < reps; r++) {
        ec_problem pb, copy;
        ec_job job;
        double t0;

        ec_job_defaults(&job);
        job.workers = 1;
        job.lambda2_rel = 1e-4;
        if (ec_problem_init(&pb, ds, &job, &e) < 0)
            goto fail;
        t0 = cpu();
        if (ec_problem_solve(&pb, &e) < 0)
            goto fail;
        ta[r] = cpu() - t0;
        pa = pb.P_star;
        ia = pb.solve_iters;
        prod = pb.solve_products;
        ma = pb.solve_method;
        copy = pb;
        copy.lambda1 = 1e-300;
        t0 = cpu();
        if (ec_problem_solve(&copy, &e) < 0)
            goto fail;
        tb[r] = cpu() - t0;
        pb_ = copy.P_star;
        ib = copy.solve_iters;
        ratio[r] = tb[r] / ta[r];
        ec_problem_clear(&pb);
    }
    qsort(ta, reps, sizeof *ta, cmp);
    qsort(tb, reps, sizeof *tb, cmp);
    qsort(ratio, reps, sizeof *ratio, cmp);
    printf("| %s | %u x %u, %llu nnz | %s %.2f | %d (%d products) | %.2f | %d | "
           "%.1fx (%.1f-%.1f) | %+.1e |\n",
           name, ds->n_rows, ds->d, (unsigned long long)ds->nnz, ma, ta[reps / 2],
           ia, prod, tb[reps / 2], ib, ratio[reps / 2], ratio[0], ratio[reps - 1],
           (pa - pb_) / pa);
    return 0;
fail:
    fprintf(stderr, "%s\n", e.msg);
    return 1;
}

/* L_f and P* of the bench's job by the engine, once: one line of numbers. */
static int bench_one_setup(ec_dataset *ds)
{
    ec_problem pb;
    ec_job job;
    ec_err e = {0};
    double t0, t1, t2;

    ec_job_defaults(&job);
    job.workers = 1;
    job.lambda2_rel = 1e-4;
    t0 = cpu();
    if (ec_problem_init(&pb, ds, &job, &e) < 0)
        goto fail;
    t1 = cpu();
    if (ec_problem_solve(&pb, &e) < 0)
        goto fail;
    t2 = cpu();
    printf("%.3f %u %.3f %d %d %.17g %.17g\n", t1 - t0, pb.lmax_steps, t2 - t1,
           pb.solve_iters, pb.solve_products, pb.lmax_data * ds->n_rows / 0.25,
           pb.P_star);
    ec_problem_clear(&pb);
    ec_dataset_clear(ds);
    return 0;
fail:
    fprintf(stderr, "%s\n", e.msg);
    return 1;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("ECOPT_DATA_DIR");
    char path[1024];
    ec_dataset ds = {0};
    ec_err e = {0};
    int reps = argc > 2 ? atoi(argv[2]) : 3, psteps = 0;
    double ta[16], tb[16], ratio[16], lam_l = 0, lam_p = 0;
    uint32_t lsteps = 0;

    if (argc < 2 || reps < 1 || reps > 16 ||
        (argc > 3 && strcmp(argv[3], "lmax") && strcmp(argv[3], "pstar") &&
         strcmp(argv[3], "setup"))) {
        fprintf(stderr, "usage: bench_setup FILE [REPS 1..16] [lmax|pstar|setup]\n");
        return 2;
    }
    if (strchr(argv[1], '/'))
        snprintf(path, sizeof path, "%s", argv[1]);
    else
        snprintf(path, sizeof path, "%s/%s", dir ? dir : "../shared/datasets", argv[1]);
    if (ec_libsvm_read(path, NULL, &ds, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    if (argc > 3 && strcmp(argv[3], "pstar") == 0)
        return bench_pstar(argv[1], &ds, reps);
    if (argc > 3 && strcmp(argv[3], "setup") == 0)
        return bench_one_setup(&ds);
    for (int r = 0; r < reps; r++) {
        ec_problem pb;
        ec_job job;
        double t0;

        ec_job_defaults(&job);
        job.workers = 1;
        job.lambda2_rel = 1e-4;
        t0 = cpu();
        if (ec_problem_init(&pb, &ds, &job, &e) < 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        ta[r] = cpu() - t0;
        lam_l = pb.lmax_data * ds.n_rows / 0.25;
        lsteps = pb.lmax_steps;
        ec_problem_clear(&pb);
        t0 = cpu();
        lam_p = power_lmax(&ds, &psteps);
        tb[r] = cpu() - t0;
        ratio[r] = tb[r] / ta[r];
    }
    qsort(ta, reps, sizeof *ta, cmp);
    qsort(tb, reps, sizeof *tb, cmp);
    qsort(ratio, reps, sizeof *ratio, cmp);
    printf("| %s | %u x %u, %llu nnz | %.2f | %u | %.2f | %d | %.1fx (%.1f-%.1f) | %+.1e |\n",
           argv[1], ds.n_rows, ds.d, (unsigned long long)ds.nnz, ta[reps / 2],
           lsteps, tb[reps / 2], psteps, ratio[reps / 2], ratio[0],
           ratio[reps - 1], (lam_l - lam_p) / lam_l);
    ec_dataset_clear(&ds);
    return 0;
}
