/*
 * Privileges of a job's processes: the coordinator gives up root before it
 * forks workers (and each MPI worker rank after it), either for a named
 * account or for a uid of the job's own.
 * Kept apart from the runtime so that the code that can change who a
 * process is stays small and in one place.
 */
#ifndef ECOPT_PRIV_H
#define ECOPT_PRIV_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/error.h"

/*
 * Makes this process run as `user` for good: supplementary groups, then
 * the group, then the user (in that order, each checked), and a check that
 * root cannot be regained. Not root: succeeds only when already that user.
 * Call it before forking workers so that they inherit it.
 */
int ec_drop_privileges(const char *user, ec_err *e);

/* The highest uid a job may be given of its own (below the 32-bit ids
   that mean "none" or overflow). */
#define EC_JOB_UID_MAX 2147483646u
/*
 * Makes this process run as a uid that belongs to this job alone (group
 * the same number, no other groups): no account may use it, and any
 * process still running as it, left from an earlier job, is killed first.
 * Needs root. Call it before forking workers.
 */
int ec_drop_to_job_uid(uint32_t uid, ec_err *e);
/*
 * The same drop, checks and all, for another process of a job whose first
 * process has taken the uid (and cleared it) already: an MPI worker rank,
 * which mpirun starts rather than the coordinator forks. Nothing is
 * killed, since as that uid kill(-1) would reach the job's own processes;
 * call it only once the first process has dropped, or its clearing kills
 * this one.
 */
int ec_join_job_uid(uint32_t uid, ec_err *e);
/*
 * Makes this process and all it starts unable to gain privileges: sets
 * no_new_privs, so no exec of a setuid or file-capability program raises
 * them, and (unless it is root, which keeps what its execs need) empties
 * the capability bounding set where it may. The drops above do both, the
 * bounding set before they leave root; a job that drops nothing (a
 * service not run as root) calls this before it forks workers.
 */
int ec_confine(ec_err *e);

/* 1 with its name when an account has this uid, else 0. */
int ec_uid_owner(uint32_t uid, char *name, size_t len);

#endif
