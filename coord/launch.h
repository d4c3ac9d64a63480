/*
 * How a job's worker processes are started, apart from how they talk
 * (ec_backend, engine/include/ecopt/run.h): none (the workers run inside
 * the coordinator), fork and socketpair, or mpirun. A launcher is one
 * file, coord/launch_NAME.c, defining a `const struct launcher`, and one
 * row in JOBSPEC_BACKENDS (format/jobspec.h), which names the backend in
 * a job spec and the launcher that runs it (docs/architecture.md,
 * "Launchers"). Errors: an exit status (enum coord_exit), or a sentence.
 */
#ifndef ECOPT_LAUNCH_H
#define ECOPT_LAUNCH_H

#include <stdint.h>
#include <stdio.h>

#include "coord.h"
#include "ecopt/data.h"
#include "ecopt/proc.h"
#include "ecopt/run.h"

/* Where the workers of a job run. */
enum launch_workers {
    LAUNCH_IN_COORDINATOR,   /* simulated inside the coordinator */
    LAUNCH_PROCESSES,        /* worker processes the coordinator forks */
    LAUNCH_RANKS             /* MPI ranks, each with its own runtime */
};

/* One job's launch, as the coordinator fills it. */
struct launch {
    const struct coord_opts *o;
    const struct jobspec *spec;
    const ec_libsvm_opts *ropts;    /* how the dataset is read */
    ec_proc_opts popts;             /* procs and each worker's limits */
    uint64_t held;                  /* address space at the start that the
                                       memory account does not cover (an
                                       MPI rank's runtime); 0 otherwise */
    int rank;                       /* this process's MPI rank; 0 else */
    FILE *status;                   /* rank 0: where the job's exit status
                                       goes (launch_mpi.c); NULL none */
};

/* What start returns when this process goes on as the coordinator. */
#define LAUNCH_GO (-1)

struct launcher {
    const char *name;               /* the backend's name (jobspec.h) */
    const char *help;               /* the name and a few words, for
                                       the usage of --backend */
    enum launch_workers workers;
    /*
     * Before the data is read: LAUNCH_GO, or an exit status when this
     * process's part of the job is over (it ran the job elsewhere, or was
     * one of its worker ranks). NULL: go on.
     */
    int (*start)(struct launch *l);
    /* The data's shape is known: the launcher may size l->popts.procs.
       NULL: as the spec or the engine's default says. */
    void (*sized)(struct launch *l, const ec_dataset *ds);
    /* The coordinator runs as the job's user now. 0, or -1 with a
       sentence in err. NULL: nothing to do. */
    int (*joined)(struct launch *l, char *err, size_t errlen);
    /* Runs the rounds: as ec_run_process (engine/include/ecopt/proc.h). */
    int (*run)(struct launch *l, const ec_problem *pb, const ec_params *prm,
               const ec_job *job, ec_metric_fn on_metric, void *ctx, ec_summary *sum,
               ec_err *e);
    /* The job ends with exit status rc (sum: zeros if it never ran):
       the status this process exits with. NULL: rc. */
    int (*end)(struct launch *l, int rc, const ec_summary *sum);
};

/* The launchers, in JOBSPEC_BACKENDS's order. */
size_t launch_count(void);
const struct launcher *launch_at(size_t i);
/* The launcher of a backend's name, or NULL. */
const struct launcher *launch_find(const char *name);

#endif
