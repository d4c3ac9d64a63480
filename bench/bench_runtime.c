/*
 * The process runtime's cost per round: ECLK on a9a, 20 workers, topk
 * k = 1, batch 1, run with forked workers and in process, beside the raw
 * cost of the same communication pattern (a small frame out to each of n
 * socketpair peers and one back from each, no work) measured in the same
 * run. Also the bytes per round up and down against the least an encoding
 * could send (k indices + k values per worker up).
 */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ecopt/data.h"
#include "ecopt/proc.h"
#include "ecopt/run.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* n echo children; `rounds` times: send 64 bytes to each, read each echo. */
static double pingpong_round(unsigned n, unsigned rounds)
{
    int *fds = calloc(n, sizeof *fds);
    pid_t *pids = calloc(n, sizeof *pids);
    char buf[64] = {0};
    double t0, t;

    for (unsigned i = 0; i < n; i++) {
        int sv[2];
        socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
        if ((pids[i] = fork()) == 0) {
            /* only its own end, or the others never see EOF */
            for (unsigned j = 0; j < i; j++)
                close(fds[j]);
            close(sv[0]);
            while (recv(sv[1], buf, sizeof buf, MSG_WAITALL) == (ssize_t)sizeof buf)
                send(sv[1], buf, sizeof buf, 0);
            _exit(0);
        }
        close(sv[1]);
        fds[i] = sv[0];
    }
    t0 = now();
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < n; i++)
            send(fds[i], buf, sizeof buf, 0);
        for (unsigned i = 0; i < n; i++)
            recv(fds[i], buf, sizeof buf, MSG_WAITALL);
    }
    t = (now() - t0) / rounds;
    for (unsigned i = 0; i < n; i++) {
        close(fds[i]);
        waitpid(pids[i], NULL, 0);
    }
    free(fds);
    free(pids);
    return t;
}

static int quiet(void *ctx, const ec_metric *row)
{
    (void)ctx;
    (void)row;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("ECOPT_DATA_DIR");
    const char *out_path = argc > 1 ? argv[1] : "bench/results/runtime.md";
    const unsigned n = 20, rounds = 3000;
    char path[1024];
    ec_dataset ds = {0};
    ec_problem pb;
    ec_params prm;
    ec_job job;
    ec_summary s_in, s_proc;
    ec_err e = {0};
    double t_in, t_proc, t_pp1, t_ppn;
    FILE *out;

    snprintf(path, sizeof path, "%s/a9a", dir ? dir : "../shared/datasets");
    ec_job_defaults(&job);
    job.workers = n;
    job.lambda2_rel = 1e-4;
    job.compressor.type = EC_COMP_TOPK;
    job.compressor.k = 1;
    job.max_rounds = rounds;
    job.target = 0;
    job.eval_every = rounds;     /* time the rounds, not the evaluations */
    if (ec_libsvm_read(path, NULL, &ds, &e) < 0 || ec_problem_init(&pb, &ds, &job, &e) < 0 ||
        ec_problem_solve(&pb, &e) < 0 || ec_params_resolve(&job, &pb, &prm, &e) < 0 ||
        ec_signal_install(&e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    if (ec_run_inproc(&pb, &prm, &job, quiet, NULL, &s_in, &e) < 0 ||
        ec_run_process(&pb, &prm, &job, NULL, quiet, NULL, &s_proc, &e) < 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    t_in = s_in.last.seconds / rounds;
    t_proc = s_proc.last.seconds / rounds;
    /* The raw costs are the best of five batches each: scheduling noise
     * from other processes only ever adds time. */
    t_pp1 = t_ppn = 1e9;
    for (int rep = 0; rep < 5; rep++) {
        double a = pingpong_round(1, 4000), b = pingpong_round(n, rounds / 5);
        t_pp1 = a < t_pp1 ? a : t_pp1;
        t_ppn = b < t_ppn ? b : t_ppn;
    }

    if (!(out = fopen(out_path, "w"))) {
        perror(out_path);
        return 1;
    }
    for (FILE *f = stdout;; f = out) {
        double overhead = t_proc - t_in;

        fprintf(f, "# Process runtime: cost per round\n\n"
                   "ECLK on a9a, %u workers, topk k = 1, batch 1, lambda2_rel 1e-4, "
                   "%u rounds, one evaluation; 2-core machine. "
                   "Command: `make bench` (build/bench/bench_runtime).\n\n", n, rounds);
        fprintf(f, "| what | per round | rounds/s |\n|---|---|---|\n");
        fprintf(f, "| in process (workers simulated) | %.1f us | %.0f |\n", t_in * 1e6, 1 / t_in);
        fprintf(f, "| forked workers over socketpairs | %.1f us | %.0f |\n", t_proc * 1e6, 1 / t_proc);
        fprintf(f, "| raw ping-pong, 1 peer (best of 5) | %.1f us | %.0f |\n", t_pp1 * 1e6, 1 / t_pp1);
        fprintf(f, "| raw ping-pong x %u (1 peer's time times n) | %.1f us | %.0f |\n", n,
                t_pp1 * n * 1e6, 1 / (t_pp1 * n));
        fprintf(f, "| raw broadcast + gather over %u peers (best of 5) | %.1f us | %.0f |\n", n,
                t_ppn * 1e6, 1 / t_ppn);
        fprintf(f, "\nRuntime overhead per round (processes minus in-process): %.1f us = "
                   "%.2fx the n raw round trips (%.1f us), %.2fx the raw broadcast + gather.\n",
                overhead * 1e6, overhead / (t_pp1 * n), t_pp1 * n * 1e6, overhead / t_ppn);
        fprintf(f, "\nBytes per round per worker: up %.1f (minimum %u: k indices + k values; "
                   "the rest is the 24-byte header, the message's fixed fields and the "
                   "dense gradient on coin rounds), down %.1f.\n",
                s_proc.last.wire_up / s_proc.rounds, 12u * job.compressor.k,
                s_proc.last.wire_down / s_proc.rounds);
        if (f == out)
            break;
    }
    fclose(out);
    ec_problem_clear(&pb);
    ec_dataset_clear(&ds);
    return 0;
}
