/*
 * Dropping root for good: to a named account, or to a uid of the job's own
 * that no account uses (see ecopt/priv.h).
 */
#include "ecopt/priv.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

/*
 * Empties the capability bounding set, from the highest capability the
 * kernel knows down (EINVAL: past it), so that not even a setuid-root
 * program run later gets any back. EPERM: this process may not change the
 * set (no CAP_SETPCAP: not root, or a root whose container took it away);
 * no_new_privs then keeps exec from raising what it has.
 */
static int drop_bounding_set(ec_err *e)
{
    for (int cap = 0; cap <= 63; cap++) {
        if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1)
            continue;           /* not in the set, or past the last one */
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 || errno == EINVAL)
            continue;
        if (errno == EPERM)
            return 0;
        return ec_err_set(e, EC_EIO, "dropping capability %d from the bounding set: %s",
                          cap, strerror(errno));
    }
    return 0;
}

static int no_new_privs(ec_err *e)
{
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return ec_err_set(e, EC_EIO, "no_new_privs: %s", strerror(errno));
    return 0;
}

int ec_confine(ec_err *e)
{
    /* A process that stays root (ecopt run by root, asked for no drop)
     * keeps its bounding set: without it every program it execs, mpirun
     * and its launch agent too, would start without capabilities. */
    if (geteuid() != 0 && drop_bounding_set(e) < 0)
        return -1;
    return no_new_privs(e);
}

/* Groups, group, user, in that order, each checked; then root must be out
   of reach, and the bounding set and no_new_privs keep it so (ec_confine).
   `who` names the target in messages. */
static int drop_to(uid_t uid, gid_t gid, const char *who, ec_err *e)
{
    if (geteuid() != 0) {
        if (geteuid() == uid && getuid() == uid)
            return ec_confine(e);
        return ec_err_set(e, EC_EINVAL,
                          "cannot run workers as %s (uid %u): only root can "
                          "switch users, and this process runs as uid %u",
                          who, (unsigned)uid, (unsigned)geteuid());
    }
    /* The bounding set changes only with CAP_SETPCAP, which setuid takes
     * away: emptied first, while this process still holds it. */
    if (drop_bounding_set(e) < 0)
        return -1;
    if (setgroups(1, &gid) < 0)
        return ec_err_set(e, EC_EIO, "setgroups for %s: %s", who, strerror(errno));
    if (setgid(gid) < 0)
        return ec_err_set(e, EC_EIO, "setgid(%u) for %s: %s", (unsigned)gid, who,
                          strerror(errno));
    if (setuid(uid) < 0)
        return ec_err_set(e, EC_EIO, "setuid(%u) for %s: %s", (unsigned)uid, who,
                          strerror(errno));
    if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid ||
        (uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)))
        return ec_err_set(e, EC_EIO, "privileges of %s did not stick", who);
    return no_new_privs(e);
}

int ec_drop_privileges(const char *user, ec_err *e)
{
    struct passwd pw, *found = NULL;
    char buf[4096], who[128];
    int r = getpwnam_r(user, &pw, buf, sizeof buf, &found);

    if (r != 0 || !found)
        return ec_err_set(e, EC_EINVAL, "worker user '%s': %s", user,
                          r ? strerror(r) : "no such user");
    snprintf(who, sizeof who, "user '%s'", user);
    return drop_to(pw.pw_uid, pw.pw_gid, who, e);
}

int ec_uid_owner(uint32_t uid, char *name, size_t len)
{
    struct passwd pw, *found = NULL;
    char buf[4096];

    if (getpwuid_r((uid_t)uid, &pw, buf, sizeof buf, &found) != 0 || !found)
        return 0;
    snprintf(name, len, "%s", pw.pw_name);
    return 1;
}

/* The checks and the drop of ec_drop_to_job_uid and ec_join_job_uid;
   `clear`: kill what still runs as the uid, once this process is it. */
static int to_job_uid(uint32_t uid, int clear, ec_err *e)
{
    char who[64], owner[64];
    int rc;

    if (uid == 0 || uid > EC_JOB_UID_MAX)
        return ec_err_set(e, EC_EINVAL, "worker uid %u: must be in 1..%u", (unsigned)uid,
                          (unsigned)EC_JOB_UID_MAX);
    if (ec_uid_owner(uid, owner, sizeof owner))
        return ec_err_set(e, EC_EINVAL,
                          "worker uid %u belongs to user '%s': a job's own uid must "
                          "be one no account uses", (unsigned)uid, owner);
    /* Unlike drop_to, not even "already that uid" will do: kill(-1) below
     * would then reach processes this job did not start. */
    if (geteuid() != 0)
        return ec_err_set(e, EC_EINVAL,
                          "cannot run workers as uid %u: only root can switch users, "
                          "and this process runs as uid %u", (unsigned)uid,
                          (unsigned)geteuid());
    snprintf(who, sizeof who, "uid %u", (unsigned)uid);
    if ((rc = drop_to((uid_t)uid, (gid_t)uid, who, e)) < 0 || !clear)
        return rc;
    /* Whatever still runs as this uid is left from an earlier job: as that
     * uid, kill(-1) reaches exactly those processes (on Linux not the
     * caller itself). ESRCH: there were none. */
    if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
        return ec_err_set(e, EC_EIO, "clearing uid %u: %s", (unsigned)uid, strerror(errno));
    return 0;
}

int ec_drop_to_job_uid(uint32_t uid, ec_err *e)
{
    return to_job_uid(uid, 1, e);
}

int ec_join_job_uid(uint32_t uid, ec_err *e)
{
    return to_job_uid(uid, 0, e);
}
