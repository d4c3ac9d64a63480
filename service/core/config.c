/* The service's configuration: defaults, ECOPT_* variables, then flags. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ecopt/proc.h"

static int parse_listen(const char *s, struct config *c, char *err,
                        size_t errlen, const char *what)
{
    const char *colon = strrchr(s, ':');
    char *end;
    unsigned long port;
    size_t hl;

    if (!colon || colon == s) {
        snprintf(err, errlen, "%s must be HOST:PORT, e.g. 127.0.0.1:8080 (got '%s')",
                 what, s);
        return -1;
    }
    hl = (size_t)(colon - s);
    if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {    /* [::1]:8080 */
        s++;
        hl -= 2;
    }
    if (hl >= sizeof c->host) {
        snprintf(err, errlen, "%s: host too long", what);
        return -1;
    }
    errno = 0;
    port = strtoul(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || port > 65535) {
        snprintf(err, errlen, "%s: port must be in 0..65535 (got '%s')", what,
                 colon + 1);
        return -1;
    }
    memcpy(c->host, s, hl);
    c->host[hl] = '\0';
    c->port = (unsigned)port;
    return 0;
}

static int parse_uint(const char *s, unsigned long long lo,
                      unsigned long long hi, unsigned long long *out,
                      char *err, size_t errlen, const char *what)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || end == s || s[0] == '-' || v < lo || v > hi) {
        snprintf(err, errlen, "%s must be an integer in %llu..%llu (got '%s')",
                 what, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

static int copy_path(char *dst, size_t len, const char *src, char *err,
                     size_t errlen, const char *what)
{
    if (!*src || strlen(src) >= len) {
        snprintf(err, errlen, "%s must be a path of 1..%zu bytes", what, len - 1);
        return -1;
    }
    memcpy(dst, src, strlen(src) + 1);
    return 0;
}

/* FIRST-LAST: uids of the jobs' own, at most 65536 of them. */
static int parse_uid_range(const char *s, struct config *c, char *err, size_t errlen,
                           const char *what)
{
    unsigned long long first, last;
    char *end;

    errno = 0;
    first = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-' || *end != '-' || !end[1] || end[1] == '-') {
        snprintf(err, errlen, "%s must be FIRST-LAST, a range of uids such as "
                 "200000-200063 (got '%s')", what, s);
        return -1;
    }
    s = end + 1;
    last = strtoull(s, &end, 10);
    if (errno || *end || first < 1 || last > EC_JOB_UID_MAX || first > last ||
        last - first >= 65536) {
        snprintf(err, errlen, "%s must be FIRST-LAST with 1 <= FIRST <= LAST <= %u and "
                 "at most 65536 uids (got '%llu-%s')", what, (unsigned)EC_JOB_UID_MAX,
                 first, s);
        return -1;
    }
    c->worker_uid_first = (uint32_t)first;
    c->worker_uid_count = (uint32_t)(last - first + 1);
    return 0;
}

/* Keys of the settings without a letter of their own (past any char). */
enum {
    KEY_UPLOAD_MAX_BYTES = 256,
    KEY_UPLOAD_MAX_ROWS,
    KEY_UPLOAD_MAX_NNZ,
    KEY_UPLOAD_MAX_D,
    KEY_UPLOAD_VALIDATOR_MEM,
    KEY_UPLOAD_VALIDATOR_CPU,
    KEY_MAX_JOB_MEMORY,
    KEY_MPI_HOSTFILE,
    KEY_UPLOAD_VALIDATORS,
    KEY_UPLOAD_QUEUE,
    KEY_UPLOAD_PER_TOKEN
};

/* One setting from either source; `what` names it in messages. */
static int apply(struct config *c, int key, const char *v, const char *what,
                 char *err, size_t errlen)
{
    unsigned long long u;

    switch (key) {
    case 'l':
        return parse_listen(v, c, err, errlen, what);
    case 'b':
        return copy_path(c->db, sizeof c->db, v, err, errlen, what);
    case 'd':
        return copy_path(c->data_dir, sizeof c->data_dir, v, err, errlen, what);
    case 't':
        return copy_path(c->tokens_file, sizeof c->tokens_file, v, err, errlen, what);
    case 'a':
        if (strcmp(v, "off") == 0)
            c->auth_off = 1;
        else if (strcmp(v, "on") == 0)
            c->auth_off = 0;
        else {
            snprintf(err, errlen, "%s must be on or off (got '%s')", what, v);
            return -1;
        }
        return 0;
    case 'r':
        if (parse_uint(v, 1, 1024, &u, err, errlen, what) < 0)
            return -1;
        c->max_running = (unsigned)u;
        return 0;
    case 'w':
        if (parse_uint(v, 1, 1u << 20, &u, err, errlen, what) < 0)
            return -1;
        c->max_total_workers = (unsigned)u;
        return 0;
    case 'W':
        if (parse_uint(v, 1, 4096, &u, err, errlen, what) < 0)
            return -1;
        c->max_workers_per_job = (unsigned)u;
        return 0;
    case 'p':
        if (parse_uint(v, 1, 1024, &u, err, errlen, what) < 0)
            return -1;
        c->max_running_per_token = (unsigned)u;
        return 0;
    case 'q':
        if (parse_uint(v, 1, 1000000, &u, err, errlen, what) < 0)
            return -1;
        c->max_queued_per_token = (unsigned)u;
        return 0;
    case 'R':
        if (parse_uint(v, 1, 100000000, &u, err, errlen, what) < 0)
            return -1;
        c->max_rounds = u;
        return 0;
    case 'S':
        if (parse_uint(v, 1, 30ull * 24 * 3600, &u, err, errlen, what) < 0)
            return -1;
        c->max_seconds = (double)u;
        return 0;
    case 'B':
        if (parse_uint(v, 1024, 1ull << 30, &u, err, errlen, what) < 0)
            return -1;
        c->max_body = (size_t)u;
        return 0;
    case 'U':
        if (parse_uint(v, 1024, 1ull << 40, &u, err, errlen, what) < 0)
            return -1;
        c->max_upload = (size_t)u;
        return 0;
    case 'T':
        if (parse_uint(v, 1, 256, &u, err, errlen, what) < 0)
            return -1;
        c->threads = (unsigned)u;
        return 0;
    case 's':
        return copy_path(c->state_dir, sizeof c->state_dir, v, err, errlen, what);
    case 'o':
        if (parse_uint(v, 1, 3600, &u, err, errlen, what) < 0)
            return -1;
        c->conn_timeout = (unsigned)u;
        return 0;
    case 'n':
        if (parse_uint(v, 16, 1000000, &u, err, errlen, what) < 0)
            return -1;
        c->max_connections = (unsigned)u;
        return 0;
    case 'x':
        if (parse_uint(v, 1, 100000, &u, err, errlen, what) < 0)
            return -1;
        c->max_streams_per_token = (unsigned)u;
        return 0;
    case 'X':
        if (parse_uint(v, 1, 1000000, &u, err, errlen, what) < 0)
            return -1;
        c->max_streams = (unsigned)u;
        return 0;
    case 'P':
        if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
            c->metrics_public = 1;
        else if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
            c->metrics_public = 0;
        else {
            snprintf(err, errlen, "%s must be on or off (got '%s')", what, v);
            return -1;
        }
        return 0;
    case 'u':
        if (!*v || strlen(v) >= sizeof c->worker_user) {
            snprintf(err, errlen, "%s must be a user name of 1..%zu bytes",
                     what, sizeof c->worker_user - 1);
            return -1;
        }
        memcpy(c->worker_user, v, strlen(v) + 1);
        return 0;
    case 'i':
        return parse_uid_range(v, c, err, errlen, what);
    case 'c':
        if (parse_uint(v, 0, 100000000, &u, err, errlen, what) < 0)
            return -1;
        c->worker_cpu_limit = (unsigned)u;
        c->worker_cpu_set = 1;
        return 0;
    case KEY_UPLOAD_MAX_BYTES:
        if (parse_uint(v, 1, 1ull << 50, &u, err, errlen, what) < 0)
            return -1;
        c->upload_max_bytes = u;
        return 0;
    case KEY_UPLOAD_MAX_ROWS:
        if (parse_uint(v, 1, UINT32_MAX, &u, err, errlen, what) < 0)
            return -1;
        c->upload_max_rows = u;
        return 0;
    case KEY_UPLOAD_MAX_NNZ:
        if (parse_uint(v, 1, 1ull << 40, &u, err, errlen, what) < 0)
            return -1;
        c->upload_max_nnz = u;
        return 0;
    case KEY_UPLOAD_MAX_D:
        if (parse_uint(v, 1, UINT32_MAX, &u, err, errlen, what) < 0)
            return -1;
        c->upload_max_d = u;
        return 0;
    case KEY_UPLOAD_VALIDATOR_MEM:
        if (parse_uint(v, 64, 1u << 30, &u, err, errlen, what) < 0)
            return -1;
        c->upload_validator_mem = (unsigned)u;
        return 0;
    case KEY_MPI_HOSTFILE:
        return copy_path(c->mpi_hostfile, sizeof c->mpi_hostfile, v, err, errlen, what);
    case KEY_UPLOAD_VALIDATOR_CPU:
        if (parse_uint(v, 1, 100000000, &u, err, errlen, what) < 0)
            return -1;
        c->upload_validator_cpu = (unsigned)u;
        return 0;
    case KEY_UPLOAD_VALIDATORS:
        if (parse_uint(v, 1, 256, &u, err, errlen, what) < 0)
            return -1;
        c->upload_validators = (unsigned)u;
        return 0;
    case KEY_UPLOAD_QUEUE:
        if (parse_uint(v, 1, 100000, &u, err, errlen, what) < 0)
            return -1;
        c->upload_queue = (unsigned)u;
        return 0;
    case KEY_UPLOAD_PER_TOKEN:
        if (parse_uint(v, 1, 100000, &u, err, errlen, what) < 0)
            return -1;
        c->upload_per_token = (unsigned)u;
        return 0;
    case KEY_MAX_JOB_MEMORY:
        if (parse_uint(v, 64, 1u << 30, &u, err, errlen, what) < 0)
            return -1;
        c->max_job_memory = (unsigned)u;
        return 0;
    case 'm':
        if (strcmp(v, "0") != 0 &&
            parse_uint(v, 16, 1u << 30, &u, err, errlen, what) < 0)
            return -1;
        c->worker_mem_limit = strcmp(v, "0") == 0 ? 0 : (unsigned)u;
        return 0;
    }
    return 0;
}

/*
 * --worker-uids: a uid of its own for each running job, so that jobs
 * cannot signal, trace or read one another. Needs root, room for
 * --max-running jobs, and uids no account uses (a job's processes may be
 * killed as a whole by uid).
 */
static int worker_uids_check(struct config *c, char *err, size_t errlen)
{
    uint32_t last = c->worker_uid_first + (c->worker_uid_count - 1);
    char owner[64];

    if (c->worker_user[0]) {
        snprintf(err, errlen, "give --worker-user (ECOPT_WORKER_USER) or --worker-uids "
                 "(ECOPT_WORKER_UIDS), not both");
        return -1;
    }
    if (geteuid() != 0) {
        snprintf(err, errlen, "--worker-uids (ECOPT_WORKER_UIDS): only a service "
                 "running as root can run jobs as other uids");
        return -1;
    }
    if (c->worker_uid_count < c->max_running) {
        snprintf(err, errlen, "--worker-uids %u-%u has %u uids, fewer than the %u jobs "
                 "--max-running lets run at once", c->worker_uid_first, last,
                 c->worker_uid_count, c->max_running);
        return -1;
    }
    for (uint32_t i = 0; i < c->worker_uid_count; i++) {
        if (ec_uid_owner(c->worker_uid_first + i, owner, sizeof owner)) {
            snprintf(err, errlen, "--worker-uids %u-%u: uid %u belongs to user '%s'; "
                     "the range must hold uids no account uses", c->worker_uid_first,
                     last, c->worker_uid_first + i, owner);
            return -1;
        }
    }
    return 0;
}

/*
 * Jobs of a service running as root run as an unprivileged user: `nobody`
 * unless --worker-user names another. Any other service runs them as
 * itself, and can only be asked for its own user. A CPU limit not given
 * is the job's time budget: one worker cannot use more than that.
 */
static int worker_user_check(struct config *c, char *err, size_t errlen)
{
    struct passwd pw, *found = NULL;
    char buf[4096];
    int r;

    if (!c->worker_cpu_set)
        c->worker_cpu_limit = (unsigned)c->max_seconds;
    if (c->worker_uid_count)
        return worker_uids_check(c, err, errlen);
    if (!c->worker_user[0] && geteuid() == 0)
        snprintf(c->worker_user, sizeof c->worker_user, "nobody");
    if (!c->worker_user[0])
        return 0;
    r = getpwnam_r(c->worker_user, &pw, buf, sizeof buf, &found);
    if (r != 0 || !found) {
        snprintf(err, errlen, "worker user '%s' (--worker-user or "
                 "ECOPT_WORKER_USER): %s", c->worker_user,
                 r ? strerror(r) : "no such user");
        return -1;
    }
    if (geteuid() != 0) {
        if (pw.pw_uid != geteuid()) {
            snprintf(err, errlen, "worker user '%s': only a service running "
                     "as root can run jobs as another user", c->worker_user);
            return -1;
        }
        c->worker_user[0] = '\0';       /* already that user */
    }
    return 0;
}

/*
 * MPI jobs (--mpi-hostfile): the admin's choice, and only where they can
 * run: the hostfile readable, ecopt-mpi beside the coordinator's binary
 * (or at $ECOPT_MPI_BIN, as ecopt run looks for it) and mpirun on PATH.
 */
static int mpi_check(struct config *c, char *err, size_t errlen)
{
    const char *env_bin = getenv("ECOPT_MPI_BIN");
    char bin[PATH_MAX + 16];
    const char *slash = strrchr(c->exe, '/');

    if (access(c->mpi_hostfile, R_OK) != 0) {
        snprintf(err, errlen, "--mpi-hostfile (ECOPT_MPI_HOSTFILE) %s: %s",
                 c->mpi_hostfile, strerror(errno));
        return -1;
    }
    if (env_bin && *env_bin)
        snprintf(bin, sizeof bin, "%s", env_bin);
    else
        snprintf(bin, sizeof bin, "%.*s/ecopt-mpi",
                 slash ? (int)(slash - c->exe) : 1, slash ? c->exe : ".");
    if (access(bin, X_OK) != 0) {
        snprintf(err, errlen, "--mpi-hostfile: MPI jobs need %s, which is built "
                 "where mpicc exists (apt-get install libopenmpi-dev openmpi-bin, "
                 "then make)", bin);
        return -1;
    }
    if (system("command -v mpirun >/dev/null 2>&1") != 0) {
        snprintf(err, errlen, "--mpi-hostfile: MPI jobs need mpirun on PATH "
                 "(apt-get install openmpi-bin)");
        return -1;
    }
    return 0;
}

static const struct {
    int key;
    const char *flag, *env;
} settings[] = {
    {'l', "listen", "ECOPT_LISTEN"},
    {'b', "db", "ECOPT_DB"},
    {'d', "data-dir", "ECOPT_DATA_DIR"},
    {'t', "tokens-file", "ECOPT_TOKENS_FILE"},
    {'a', "auth", "ECOPT_AUTH"},
    {'r', "max-running", "ECOPT_MAX_RUNNING"},
    {'w', "max-total-workers", "ECOPT_MAX_TOTAL_WORKERS"},
    {'W', "max-workers-per-job", "ECOPT_MAX_WORKERS_PER_JOB"},
    {'p', "max-running-per-token", "ECOPT_MAX_RUNNING_PER_TOKEN"},
    {'q', "max-queued-per-token", "ECOPT_MAX_QUEUED_PER_TOKEN"},
    {'R', "max-rounds", "ECOPT_MAX_ROUNDS"},
    {'S', "max-seconds", "ECOPT_MAX_SECONDS"},
    {'B', "max-body", "ECOPT_MAX_BODY"},
    {'T', "threads", "ECOPT_THREADS"},
    {'U', "max-upload", "ECOPT_MAX_UPLOAD"},
    {'s', "state-dir", "ECOPT_STATE_DIR"},
    {'o', "conn-timeout", "ECOPT_CONN_TIMEOUT"},
    {'n', "max-connections", "ECOPT_MAX_CONNECTIONS"},
    {'x', "max-streams-per-token", "ECOPT_MAX_STREAMS_PER_TOKEN"},
    {'X', "max-streams", "ECOPT_MAX_STREAMS"},
    {'u', "worker-user", "ECOPT_WORKER_USER"},
    {'i', "worker-uids", "ECOPT_WORKER_UIDS"},
    {'c', "worker-cpu-limit", "ECOPT_WORKER_CPU_LIMIT"},
    {'m', "worker-mem-limit", "ECOPT_WORKER_MEM_LIMIT"},
    {KEY_UPLOAD_MAX_BYTES, "upload-max-bytes", "ECOPT_UPLOAD_MAX_BYTES"},
    {KEY_UPLOAD_MAX_ROWS, "upload-max-rows", "ECOPT_UPLOAD_MAX_ROWS"},
    {KEY_UPLOAD_MAX_NNZ, "upload-max-nnz", "ECOPT_UPLOAD_MAX_NNZ"},
    {KEY_UPLOAD_MAX_D, "upload-max-d", "ECOPT_UPLOAD_MAX_D"},
    {KEY_UPLOAD_VALIDATOR_MEM, "upload-validator-mem", "ECOPT_UPLOAD_VALIDATOR_MEM"},
    {KEY_UPLOAD_VALIDATOR_CPU, "upload-validator-cpu", "ECOPT_UPLOAD_VALIDATOR_CPU"},
    {KEY_UPLOAD_VALIDATORS, "upload-validators", "ECOPT_UPLOAD_VALIDATORS"},
    {KEY_UPLOAD_QUEUE, "upload-queue", "ECOPT_UPLOAD_QUEUE"},
    {KEY_UPLOAD_PER_TOKEN, "upload-per-token", "ECOPT_UPLOAD_PER_TOKEN"},
    {KEY_MAX_JOB_MEMORY, "max-job-memory", "ECOPT_MAX_JOB_MEMORY"},
    {KEY_MPI_HOSTFILE, "mpi-hostfile", "ECOPT_MPI_HOSTFILE"},
};
#define NSETTINGS (sizeof settings / sizeof settings[0])

int config_load(struct config *c, int argc, char **argv, char *err,
                size_t errlen)
{
    struct option opts[NSETTINGS + 3];
    char what[96];
    ssize_t len;
    int ch;

    memset(c, 0, sizeof *c);
    snprintf(c->host, sizeof c->host, "127.0.0.1");
    c->port = 8080;
    snprintf(c->db, sizeof c->db, "ecopt.db");
    snprintf(c->data_dir, sizeof c->data_dir, "datasets");
    c->max_running = 2;
    c->max_total_workers = 64;
    c->max_workers_per_job = 64;
    c->max_queued_per_token = 100;
    c->max_rounds = 10000000;
    c->max_seconds = 24 * 3600;
    c->max_body = 1 << 20;
    c->max_upload = (size_t)256 << 20;
    c->threads = 4;
    c->conn_timeout = 30;
    c->max_connections = 1000;
    c->max_streams_per_token = 16;
    c->max_job_memory = 8192;
    len = readlink("/proc/self/exe", c->exe, sizeof c->exe - 1);
    c->exe[len > 0 ? len : 0] = '\0';

    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = getenv(settings[i].env);
        if (v && *v && apply(c, settings[i].key, v, settings[i].env, err, errlen) < 0)
            return -1;
    }
    {
        const char *v = getenv("ECOPT_METRICS_PUBLIC");
        if (v && *v && apply(c, 'P', v, "ECOPT_METRICS_PUBLIC", err, errlen) < 0)
            return -1;
    }
    for (size_t i = 0; i < NSETTINGS; i++) {
        opts[i].name = settings[i].flag;
        opts[i].has_arg = required_argument;
        opts[i].flag = NULL;
        opts[i].val = settings[i].key;
    }
    opts[NSETTINGS] = (struct option){"quiet", no_argument, NULL, 'Q'};
    opts[NSETTINGS + 1] = (struct option){"metrics-public", no_argument, NULL, 'P'};
    opts[NSETTINGS + 2] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (ch == 'Q') {
            c->access_log_off = 1;
            continue;
        }
        if (ch == 'P') {
            c->metrics_public = 1;
            continue;
        }
        if (ch == '?') {
            snprintf(err, errlen, "unknown option (see ecopt serve --help)");
            return -1;
        }
        for (size_t i = 0; i < NSETTINGS; i++)
            if (settings[i].key == ch)
                snprintf(what, sizeof what, "--%s", settings[i].flag);
        if (apply(c, ch, optarg, what, err, errlen) < 0)
            return -1;
    }
    if (optind != argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -1;
    }
    /*
     * Streams and long-polls hold their connection for as long as they
     * last; kept below the connection limit, they leave the rest for
     * everything else, /livez and /readyz included. (MHD splits the limit
     * evenly among its threads, and a thread whose share is full stops
     * accepting while the others go on, so the room left is the server's
     * whole, wherever the streams landed.)
     */
    if (!c->max_streams)
        c->max_streams = c->max_connections / 2;
    if (c->max_streams >= c->max_connections) {
        snprintf(err, errlen, "--max-streams (ECOPT_MAX_STREAMS) %u must be below "
                 "--max-connections %u, so that streams never take every connection",
                 c->max_streams, c->max_connections);
        return -1;
    }
    if (c->max_streams_per_token > c->max_streams)
        c->max_streams_per_token = c->max_streams;
    /*
     * Running jobs are never stopped to make room, so with tokens one slot
     * stays open to the others by default: one token's long jobs cannot
     * hold every slot while another token's job waits. Without
     * authentication every job has the same owner.
     */
    if (!c->max_running_per_token)
        c->max_running_per_token = c->auth_off || c->max_running < 2
                                       ? c->max_running : c->max_running - 1;
    if (c->max_running_per_token > c->max_running)
        c->max_running_per_token = c->max_running;
    if (!c->auth_off && !c->tokens_file[0]) {
        snprintf(err, errlen, "no tokens: set ECOPT_TOKENS_FILE (or --tokens-file), "
                 "or ECOPT_AUTH=off (--auth off) to serve without authentication");
        return -1;
    }
    if (worker_user_check(c, err, errlen) < 0)
        return -1;
    if (c->mpi_hostfile[0] && mpi_check(c, err, errlen) < 0)
        return -1;
    if (!c->state_dir[0]) {
        size_t dl = strlen(c->db);
        if (dl + sizeof ".jobs" > sizeof c->state_dir) {
            snprintf(err, errlen, "--db path too long to derive the state directory");
            return -1;
        }
        memcpy(c->state_dir, c->db, dl);
        memcpy(c->state_dir + dl, ".jobs", sizeof ".jobs");
    }
    if (access(c->data_dir, R_OK | X_OK) != 0) {
        snprintf(err, errlen, "data directory %s: %s (ECOPT_DATA_DIR or --data-dir)",
                 c->data_dir, strerror(errno));
        return -1;
    }
    return 0;
}
