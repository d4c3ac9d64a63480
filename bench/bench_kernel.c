/*
 * Kernel speed: full-gradient passes per second over a9a, beside a plain
 * memory copy of the same CSR arrays in the same run (the bandwidth floor
 * of one pass), printed as a ratio.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ecopt/data.h"
#include "ecopt/problem.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("ECOPT_DATA_DIR");
    const char *name = argc > 1 ? argv[1] : "a9a";
    char path[1024];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_job job;
    ec_err e = {0};
    double t0, t_grad, t_copy, sink = 0;
    int passes = 0, copies = 0;

    snprintf(path, sizeof path, "%s/%s", dir ? dir : "../shared/datasets", name);
    if (ec_libsvm_read(path, NULL, &ds, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    ec_job_defaults(&job);
    job.lambda2_rel = 1e-4;
    if (ec_problem_init(&pb, &ds, &job, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double *x = calloc(ds.d, sizeof *x), *g = calloc(ds.d, sizeof *g);
    size_t bytes = ec_dataset_bytes(&ds);
    char *dst = malloc(bytes);
    for (uint32_t j = 0; j < ds.d; j++)
        x[j] = 0.01 * (j % 7) - 0.02;

    t0 = now();
    while (now() - t0 < 2.0) {
        ec_problem_grad(&pb, x, g);
        sink += g[passes % ds.d];
        passes++;
    }
    t_grad = (now() - t0) / passes;

    t0 = now();
    while (now() - t0 < 2.0) {
        size_t off = 0;
        memcpy(dst + off, ds.row_ptr, (ds.n_rows + 1) * sizeof *ds.row_ptr);
        off += (ds.n_rows + 1) * sizeof *ds.row_ptr;
        memcpy(dst + off, ds.col, ds.nnz * sizeof *ds.col);
        off += ds.nnz * sizeof *ds.col;
        memcpy(dst + off, ds.val, ds.nnz * sizeof *ds.val);
        off += ds.nnz * sizeof *ds.val;
        memcpy(dst + off, ds.y, ds.n_rows * sizeof *ds.y);
        sink += dst[copies % bytes];
        copies++;
    }
    t_copy = (now() - t0) / copies;

    printf("kernel speed on %s (%u rows, d = %u, nnz = %llu, CSR %.2f MB)\n",
           name, ds.n_rows, ds.d, (unsigned long long)ds.nnz, bytes / 1e6);
    printf("| what | per pass | passes/s | ratio to memcpy |\n|---|---|---|---|\n");
    printf("| full gradient | %.3f ms | %.0f | %.2f |\n", t_grad * 1e3,
           1 / t_grad, t_grad / t_copy);
    printf("| memcpy of the CSR arrays | %.3f ms | %.0f | 1.00 |\n",
           t_copy * 1e3, 1 / t_copy);
    fprintf(stderr, "(sink %g)\n", sink);
    free(x);
    free(g);
    free(dst);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    return 0;
}
