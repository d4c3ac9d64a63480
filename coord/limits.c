/*
 * What a coordinator holds and may use: its descriptors, its user, and
 * the address-space limits the memory account gives it and its workers.
 */
#include "coord_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ecopt/priv.h"

uint64_t coord_mem_limit(uint64_t own, uint64_t held)
{
    return held + own + own / 4 + EC_MEM_PROCESS_BASE;
}

void coord_job_estimate(const ec_dataset *ds, const ec_job *job, uint32_t procs,
                        uint32_t local, ec_mem_estimate *est)
{
    ec_mem_job mj;

    ec_mem_job_from(&mj, job, ds->n_rows, ds->nnz, ds->d, procs);
    mj.local = local;
    ec_estimate_memory(&mj, est);
}

#ifndef __SANITIZE_ADDRESS__
/* The line saying what the workers' limits are. */
static void print_worker_limits(FILE *info, const struct launcher *ln, struct launch *l,
                                const ec_mem_estimate *est)
{
    ec_proc_opts *popts = &l->popts;

    if (ln->workers == LAUNCH_RANKS && popts->worker_mem_limit)
        fprintf(info, ", each worker rank %.0f MiB",
                popts->worker_mem_limit / 1048576.0);
    else if (ln->workers == LAUNCH_RANKS)
        fprintf(info, ", each worker rank about %.0f MiB (both count the "
                "%.0f MiB the MPI runtime maps at a rank's start)",
                coord_mem_limit(est->rank, l->held) / 1048576.0, l->held / 1048576.0);
    else if (est->procs && popts->worker_mem_limit)
        fprintf(info, ", each worker process %.0f MiB",
                popts->worker_mem_limit / 1048576.0);
    else if (est->procs) {
        popts->worker_mem_above = coord_mem_limit(est->process, 0);
        fprintf(info, ", each worker process %.0f MiB above what it "
                "inherits from the coordinator",
                popts->worker_mem_above / 1048576.0);
    }
}
#endif

int coord_set_memory_limits(const ec_dataset *ds, const struct launcher *ln,
                            struct launch *l, FILE *info)
{
#ifdef __SANITIZE_ADDRESS__
    (void)ds, (void)ln, (void)l;
    fprintf(info, "memory     no limits in an AddressSanitizer build\n");
    return 0;
#else
    ec_mem_estimate est;
    struct rlimit rl;

    coord_job_estimate(ds, &l->spec->job,
                       ln->workers == LAUNCH_IN_COORDINATOR ? 0 : l->popts.procs,
                       l->popts.local, &est);
    if (getrlimit(RLIMIT_AS, &rl) < 0)
        return -1;
    rl.rlim_cur = coord_mem_limit(est.coordinator, l->held);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur > rl.rlim_max)
        rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_AS, &rl) < 0)
        return -1;
    fprintf(info, "memory     limits: coordinator %.0f MiB", rl.rlim_cur / 1048576.0);
    print_worker_limits(info, ln, l, &est);
    fputc('\n', info);
    return 0;
#endif
}

/* Closes the descriptors lo..hi: close_range(2) where the kernel has it
   (Linux 5.9), else one by one up to the open-file limit. */
static void close_span(unsigned lo, unsigned hi)
{
    long max = sysconf(_SC_OPEN_MAX);

    if (lo > hi)
        return;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, lo, hi, 0) == 0)
        return;
#endif
    for (long fd = lo; fd <= (long)hi && fd < (max > 0 ? max : 65536); fd++)
        close((int)fd);
}

/*
 * A coordinator holds stdio and its report descriptor, nothing else: what
 * the process that started it left open without close-on-exec is closed
 * before anything else is done, so that no job can read or write it.
 */
void coord_close_inherited(int keep)
{
    if (keep >= 3) {
        close_span(3, (unsigned)keep - 1);
        close_span((unsigned)keep + 1, ~0u);
    } else {
        close_span(3, ~0u);
    }
}

int coord_drop_privileges(const struct coord_opts *o, ec_err *e)
{
    if (o->worker_user)
        return ec_drop_privileges(o->worker_user, e);
    if (o->worker_uid > 0)
        return ec_drop_to_job_uid((uint32_t)o->worker_uid, e);
    return ec_confine(e);
}

int coord_lower_priority(long long nice, char *err, size_t errlen)
{
    int now;

    /* getpriority's -1 is also a nice value: errno tells them apart. */
    errno = 0;
    now = getpriority(PRIO_PROCESS, 0);
    if (now == -1 && errno) {
        snprintf(err, errlen, "getpriority: %s", strerror(errno));
        return -1;
    }
    if (now >= nice)
        return 0;       /* never raise a priority the job was started with */
    if (setpriority(PRIO_PROCESS, 0, (int)nice) < 0) {
        snprintf(err, errlen, "setpriority to nice %lld: %s", nice, strerror(errno));
        return -1;
    }
    return 0;
}
