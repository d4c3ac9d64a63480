/*
 * The Open MPI backend: rank 0 coordinates, ranks 1..P host the n workers
 * in contiguous blocks (as the process backend's processes do),
 * and the frames of ecopt/wire.h travel as MPI messages instead of over
 * sockets. Same seed, same binary: the same rows as the other backends.
 * Only built where mpicc exists (the ecopt-mpi program).
 */
#ifndef ECOPT_MPI_H
#define ECOPT_MPI_H

#include "ecopt/problem.h"
#include "ecopt/proc.h"
#include "ecopt/run.h"

/* MPI_Init and the caller's rank and the world's size. */
int ec_mpi_init(int *argc, char ***argv, int *rank, int *size, ec_err *e);
void ec_mpi_finalize(void);
/* Ends every rank at once, for failures a rank cannot report otherwise. */
void ec_mpi_abort(int code);
/* Returns once every rank has called it: 0, or < 0 when a rank is gone. */
int ec_mpi_barrier(void);

/* Rank 0: the coordinator, over ranks 1..P (a world of 2..n + 1). */
int ec_run_mpi(const ec_problem *pb, const ec_params *prm, const ec_job *job,
               const ec_proc_opts *opts, ec_metric_fn fn, void *ctx,
               ec_summary *sum, ec_err *e);
/* Ranks 1..P of a world of size P + 1: rank - 1's block of workers until
 * STOP; returns an exit code. */
int ec_mpi_worker(const ec_problem *pb, const ec_params *prm, int rank,
                  int size);
/*
 * A worker rank, before it builds its problem: waits (asleep, while rank
 * 0 reads the data and solves P*) for the constants rank 0 computed for
 * the job's n workers, and gives them as g for ec_problem_init_given;
 * *L_bar is the array g points into, for the caller to free. 0, or < 0
 * with e set when they do not come or are out of range.
 */
int ec_mpi_constants(uint32_t n, ec_problem_given *g, double **L_bar, ec_err *e);
/*
 * A worker rank that cannot serve (its data, its uid, its limits): sends
 * rank 0, in place of its HELLO, an ERROR frame that names this rank, its
 * host and why, so the job fails with that reason; then waits for rank 0,
 * which ends the world once it has read it. Returns an exit code.
 */
int ec_mpi_worker_fail(int rank, const char *why);

#endif
