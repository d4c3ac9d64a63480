/*
 * What the coordinator's files share and nobody else uses: the dataset
 * and its P* hint (data.c) and the processes' limits (limits.c).
 */
#ifndef ECOPT_COORD_INT_H
#define ECOPT_COORD_INT_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "ecopt/data.h"
#include "ecopt/memory.h"
#include "ecopt/problem.h"
#include "ecopt/proc.h"
#include "launch.h"

/*
 * The job's dataset, open: the version the service recorded (read from
 * the versions folder, or the name, and hashed: it must be that version)
 * or, run by hand, a path or a name in the data directory. *fd is the
 * descriptor, *st its stat and shown the name messages give it. 0, or -1
 * with a sentence in err that quotes nothing of the file.
 */
int coord_data_open(const char *name, const char *dir, const char *version, int *fd,
                    struct stat *st, char *shown, size_t shownlen, char *err,
                    size_t errlen);
/* Reads the LibSVM data fd holds, from its start. */
int coord_data_read(int fd, const char *shown, const ec_libsvm_opts *o, ec_dataset *ds,
                    ec_err *e);
/* Whether the file read is still as it was before (its stat in *after). */
int coord_data_unchanged(int fd, const struct stat *before, struct stat *after);

/*
 * A P* hint file (api/report-format.md, "The P* hint") kept when it is for
 * the very file that was read: the version sha when there is one, else
 * the file identity before and after reading. NULL when it is not (the job
 * solves as usual; a line on info says why when the file is bad).
 */
json_t *coord_hint_load(const char *hint, const struct stat *before,
                        const struct stat *after, const char *sha, FILE *info);
/* lambda_max(A^T A) from a kept hint: 1 with the value and its Lanczos
   steps when it has them, else 0 (ec_problem_init_lmax() decides whether
   the job's row order lets it be used). */
int coord_hint_lmax(json_t *root, double *lambda_max, uint32_t *steps);
/* Takes P* from a kept hint when its loss and lambdas are the problem's,
   and frees it (NULL: nothing). */
void coord_hint_use(json_t *root, const char *hint, ec_problem *pb, FILE *info);

/*
 * The address-space limit of a process whose own allocations the memory
 * account puts at own: a quarter more, EC_MEM_PROCESS_BASE for code,
 * libraries and stacks, and held (what an MPI rank's runtime maps).
 */
uint64_t coord_mem_limit(uint64_t own, uint64_t held);
/* The memory account of the job on procs worker processes, the coordinator
 * stepping local of the workers itself. */
void coord_job_estimate(const ec_dataset *ds, const ec_job *job, uint32_t procs,
                        uint32_t local, ec_mem_estimate *est);
/*
 * --nice N: this process's nice value raised to N (its CPU priority
 * lowered) unless it already is N or more. Every process of the job
 * inherits it: the workers it forks, mpirun and the ranks mpirun starts
 * here. 0, or -1 with a sentence in err.
 */
int coord_lower_priority(long long nice, char *err, size_t errlen);

/*
 * --mem-limits auto: this process's address-space limit from the account
 * and, unless --worker-mem-limit gave one, each worker process's
 * (l->popts.worker_mem_above), with a line on info. Not in an
 * AddressSanitizer build, whose shadow memory is no part of the account.
 * 0, or -1 with errno.
 */
int coord_set_memory_limits(const ec_dataset *ds, const struct launcher *ln,
                            struct launch *l, FILE *info);

/* Closes every descriptor but stdio and keep (-1: none): what the process
   that started the coordinator left open without close-on-exec. */
void coord_close_inherited(int keep);

/* Drops to the job's user, its uid, or confines this process (root or
   not): as --worker-user and --worker-uid say. */
int coord_drop_privileges(const struct coord_opts *o, ec_err *e);

#endif
