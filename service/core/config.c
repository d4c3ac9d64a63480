/* The service's configuration: defaults, ECOPT_* variables, then flags. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_table.h"
#include "ecopt/proc.h"

/* getopt_long values of the settings: OPT_FIRST + their row. */
#define OPT_FIRST 1000

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

/* How a setting's value is read (config_table.h lists the kinds). */
enum config_kind {
    CFG_UINT, CFG_U64, CFG_SIZE, CFG_SECONDS, CFG_MB0, CFG_CPU, CFG_PATH,
    CFG_USER, CFG_LISTEN, CFG_UIDS, CFG_OFF, CFG_SWITCH, CFG_OCTAL
};

struct setting {
    const char *flag, *env;
    enum config_kind kind;
    size_t offset, size;            /* of its field in struct config */
    const char *deflt;
    unsigned long long lo, hi;
    const char *meta, *help;
};

#define FIELD_OF(field) (((struct config *)0)->field)
/* Each kind's field type, so that a row naming the wrong field fails to
 * compile rather than writing past it. */
#define KIND_TYPE_OK(kind, field) _Generic(FIELD_OF(field),                  \
    unsigned: (kind) == CFG_UINT || (kind) == CFG_MB0 || (kind) == CFG_CPU ||\
              (kind) == CFG_UIDS || (kind) == CFG_OCTAL,                     \
    unsigned long: (kind) == CFG_U64 || (kind) == CFG_SIZE,                  \
    unsigned long long: (kind) == CFG_U64 || (kind) == CFG_SIZE,             \
    double: (kind) == CFG_SECONDS,                                           \
    char *: (kind) == CFG_PATH || (kind) == CFG_USER || (kind) == CFG_LISTEN,\
    int: (kind) == CFG_OFF || (kind) == CFG_SWITCH,                          \
    default: 0)

#define SETTING_ROW(flag, env, kind, field, deflt, lo, hi, meta, help)       \
    {flag, env, CFG_##kind, offsetof(struct config, field),                  \
     sizeof FIELD_OF(field), deflt, lo, hi, meta, help},
static const struct setting settings[] = {CONFIG_SETTINGS(SETTING_ROW)};
#undef SETTING_ROW
#define NSETTINGS (sizeof settings / sizeof settings[0])

#define SETTING_TYPE_CHECK(flag, env, kind, field, deflt, lo, hi, meta, help) \
    _Static_assert(KIND_TYPE_OK(CFG_##kind, field),                          \
                   "config_table.h: --" flag " has a field of another type");
CONFIG_SETTINGS(SETTING_TYPE_CHECK)
#undef SETTING_TYPE_CHECK

static int parse_on_off(const char *v, int numbers_too, int *on)
{
    if (strcmp(v, "on") == 0 || (numbers_too && strcmp(v, "1") == 0))
        *on = 1;
    else if (strcmp(v, "off") == 0 || (numbers_too && strcmp(v, "0") == 0))
        *on = 0;
    else
        return -1;
    return 0;
}

/* One setting from either source; `what` names it in messages. */
static int apply(struct config *c, const struct setting *s, const char *v,
                 const char *what, char *err, size_t errlen)
{
    char *field = (char *)c + s->offset;
    unsigned long long u = 0;
    int on;

    switch (s->kind) {
    case CFG_LISTEN:
        return parse_listen(v, c, err, errlen, what);
    case CFG_UIDS:
        return parse_uid_range(v, c, err, errlen, what);
    case CFG_PATH:
        return copy_path(field, s->size, v, err, errlen, what);
    case CFG_USER:
        if (!*v || strlen(v) >= s->size) {
            snprintf(err, errlen, "%s must be a user name of 1..%zu bytes",
                     what, s->size - 1);
            return -1;
        }
        memcpy(field, v, strlen(v) + 1);
        return 0;
    case CFG_OFF:
    case CFG_SWITCH:
        if (parse_on_off(v, s->kind == CFG_SWITCH, &on) < 0) {
            snprintf(err, errlen, "%s must be on or off (got '%s')", what, v);
            return -1;
        }
        *(int *)field = s->kind == CFG_OFF ? !on : on;
        return 0;
    case CFG_OCTAL: {
        char *end;
        unsigned long o;

        errno = 0;
        o = strtoul(v, &end, 8);
        if (errno || *end || end == v || v[0] == '-' || o > s->hi) {
            snprintf(err, errlen, "%s must be an octal mask in 000..%03llo, e.g. 077 or "
                     "027 (got '%s')", what, s->hi, v);
            return -1;
        }
        *(unsigned *)field = (unsigned)o;
        return 0;
    }
    case CFG_MB0:
        if (strcmp(v, "0") == 0) {
            *(unsigned *)field = 0;
            return 0;
        }
        break;
    default:
        break;
    }
    if (parse_uint(v, s->lo, s->hi, &u, err, errlen, what) < 0)
        return -1;
    switch (s->kind) {
    case CFG_U64:
        *(uint64_t *)field = u;
        break;
    case CFG_SIZE:
        *(size_t *)field = (size_t)u;
        break;
    case CFG_SECONDS:
        *(double *)field = (double)u;
        break;
    case CFG_CPU:
        c->worker_cpu_set = 1;
        /* fall through */
    default:
        *(unsigned *)field = (unsigned)u;
        break;
    }
    return 0;
}

/* "--flag META": the left column of the usage text. */
static int usage_left(const struct setting *s, char *buf, size_t len)
{
    return snprintf(buf, len, "--%s%s%s", s->flag, s->meta[0] ? " " : "", s->meta);
}

void config_usage(FILE *out)
{
    enum { COLUMN = 30, WIDTH = 76 };
    char left[64], text[512];

    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        const char *p = text;
        int col;

        usage_left(s, left, sizeof left);
        if (!s->env)
            snprintf(text, sizeof text, "%s", s->help);
        else if (s->kind == CFG_SWITCH)
            snprintf(text, sizeof text, "%s=on: %s", s->env, s->help);
        else if (s->deflt)
            snprintf(text, sizeof text, "%s, %s, default %s", s->env, s->help, s->deflt);
        else
            snprintf(text, sizeof text, "%s, %s", s->env, s->help);
        col = fprintf(out, "  %-*s", COLUMN - 2, left);
        if (col > COLUMN) {
            fputc('\n', out);
            col = fprintf(out, "%*s", COLUMN, "");
        }
        /* Words, wrapped at WIDTH, each line starting at COLUMN. */
        while (*p) {
            size_t word = strcspn(p, " ");

            if (col > COLUMN && col + 1 + (int)word > WIDTH) {
                fprintf(out, "\n%*s", COLUMN, "");
                col = COLUMN;
            } else if (col > COLUMN) {
                fputc(' ', out);
                col++;
            }
            col += fprintf(out, "%.*s", (int)word, p);
            p += word;
            while (*p == ' ')
                p++;
        }
        fputc('\n', out);
    }
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

int config_load(struct config *c, int argc, char **argv, char *err,
                size_t errlen)
{
    struct option opts[NSETTINGS + 1];
    char what[96];
    ssize_t len;
    int ch;

    memset(c, 0, sizeof *c);
    len = readlink("/proc/self/exe", c->exe, sizeof c->exe - 1);
    c->exe[len > 0 ? len : 0] = '\0';

    /* The defaults, read by the same rules as any value. */
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];

        if (s->deflt && apply(c, s, s->deflt, s->flag, err, errlen) < 0)
            return -1;
    }
    for (size_t i = 0; i < NSETTINGS; i++) {
        const struct setting *s = &settings[i];
        const char *v = s->env ? getenv(s->env) : NULL;

        if (v && *v && apply(c, s, v, s->env, err, errlen) < 0)
            return -1;
    }
    for (size_t i = 0; i < NSETTINGS; i++) {
        opts[i].name = settings[i].flag;
        opts[i].has_arg = settings[i].kind == CFG_SWITCH ? no_argument
                                                         : required_argument;
        opts[i].flag = NULL;
        opts[i].val = OPT_FIRST + (int)i;
    }
    opts[NSETTINGS] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        const struct setting *s;

        if (ch < OPT_FIRST || ch >= OPT_FIRST + (int)NSETTINGS) {
            snprintf(err, errlen, "unknown option (see ecopt serve --help)");
            return -1;
        }
        s = &settings[ch - OPT_FIRST];
        snprintf(what, sizeof what, "--%s", s->flag);
        if (apply(c, s, s->kind == CFG_SWITCH ? "on" : optarg, what, err, errlen) < 0)
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
