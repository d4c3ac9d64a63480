/*
 * Faults and isolation of the real service: SIGKILL a worker, a
 * coordinator and then the server itself while three jobs run and clients
 * poll (long-poll and SSE); after a restart the database is intact, every
 * row a client saw is still there and every job says how it ended. And
 * the workers a job runs on: an unprivileged user when the service is
 * root, no descriptor but their socket, CPU, file and core limits, and a
 * CPU priority below the server's.
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "serverutil.h"
#include "testutil.h"

/* Long enough to outlast any test: a stop only by fault or cancel. Each
 * worker is a process of its own (a9a's light round would otherwise get
 * one CPU fewer than the machine has). */
static const char long_job[] =
    "{\"dataset\": \"a9a\", \"workers\": 2, \"procs\": 2, \"max_rounds\": 40000000,"
    " \"target\": 0}";

/* ---- processes, from /proc ------------------------------------------------ */

/* The children of every thread of pid (the server spawns from several). */
static int proc_children(pid_t pid, pid_t *out, int max)
{
    char path[384], buf[4096];
    struct dirent *de;
    DIR *d;
    int n = 0;

    snprintf(path, sizeof path, "/proc/%d/task", pid);
    if (!(d = opendir(path)))
        return 0;
    while ((de = readdir(d)) && n < max) {
        FILE *f;

        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/children", pid, de->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof buf, f)) {
            char *s = buf, *end;
            for (long v; n < max && (v = strtol(s, &end, 10), end != s); s = end)
                out[n++] = (pid_t)v;
        }
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Gone, or a zombie nobody has reaped yet: either way it runs no more. */
static int proc_gone(pid_t pid)
{
    char path[64], buf[512];
    FILE *f;
    char *p;
    int gone = 1;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(f = fopen(path, "r")))
        return 1;
    if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) && p[1] == ' ')
        gone = p[2] == 'Z' || p[2] == 'X';
    fclose(f);
    return gone;
}

/* The line of /proc/PID/FILE that starts with key, without the key. */
static int proc_line(pid_t pid, const char *file, const char *key, char *out,
                     size_t len)
{
    char path[96], buf[512];
    size_t kl = strlen(key);
    FILE *f;
    int found = 0;

    snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
    if (!(f = fopen(path, "r")))
        return 0;
    while (!found && fgets(buf, sizeof buf, f)) {
        if (strncmp(buf, key, kl) == 0) {
            snprintf(out, len, "%s", buf + kl);
            out[strcspn(out, "\n")] = '\0';
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* The coordinator of job id: the server's child whose command line names
 * the job's spec file. Waits for it up to timeout seconds. */
static pid_t coordinator_of(const struct server *s, const char *id, double timeout)
{
    double until = tu_now() + timeout;

    for (;;) {
        pid_t kids[64];
        int n = proc_children(s->pid, kids, 64);

        for (int i = 0; i < n; i++) {
            char path[64], cmd[4096];
            size_t len;
            FILE *f;

            snprintf(path, sizeof path, "/proc/%d/cmdline", kids[i]);
            if (!(f = fopen(path, "r")))
                continue;
            len = fread(cmd, 1, sizeof cmd - 1, f);
            fclose(f);
            for (size_t k = 0; k < len; k++)
                if (cmd[k] == '\0')
                    cmd[k] = ' ';
            cmd[len] = '\0';
            if (strstr(cmd, id) && strstr(cmd, " run "))
                return kids[i];
        }
        ck_assert_msg(tu_now() < until, "no coordinator for job %s after %g s",
                      id, timeout);
        usleep(20000);
    }
}

/* The n workers of a coordinator, once all are there. */
static void workers_of(pid_t coord, pid_t *out, int n, double timeout)
{
    double until = tu_now() + timeout;

    while (proc_children(coord, out, n) < n) {
        ck_assert_msg(tu_now() < until, "coordinator %d has not %d workers "
                      "after %g s", (int)coord, n, timeout);
        usleep(20000);
    }
}

/* ---- clients that watch a job --------------------------------------------- */

struct seen {
    long long round;
    double rel_gap;
};

struct watcher {
    const struct server *s;
    char id[32];
    int sse;                 /* the event stream, else long-polls */
    atomic_int stop;
    atomic_int count;        /* rows seen so far */
    pthread_t thread;
    struct seen *rows;       /* the watcher's own until joined */
    size_t cap;
    long long after;
    char *buf;               /* SSE bytes not yet a whole event */
    size_t len;
};

static void seen_add(struct watcher *w, long long round, double rel_gap)
{
    size_t n = (size_t)atomic_load(&w->count);

    if (n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 256;
        w->rows = realloc(w->rows, w->cap * sizeof *w->rows);
        ck_assert_ptr_nonnull(w->rows);
    }
    w->rows[n].round = round;
    w->rows[n].rel_gap = rel_gap;
    atomic_store(&w->count, (int)n + 1);
    if (round > w->after)
        w->after = round;
}

/* Whole events out of the SSE bytes: `event: metric`, `id: R`, `data: {}`. */
static size_t on_sse(char *p, size_t sz, size_t nm, void *ctx)
{
    struct watcher *w = ctx;
    size_t len = sz * nm;
    char *end;

    w->buf = realloc(w->buf, w->len + len + 1);
    memcpy(w->buf + w->len, p, len);
    w->len += len;
    w->buf[w->len] = '\0';
    while ((end = strstr(w->buf, "\n\n"))) {
        char *data;

        *end = '\0';
        if (strncmp(w->buf, "event: metric\n", 14) == 0 &&
            (data = strstr(w->buf, "\ndata: "))) {
            json_t *row = json_loads(data + 7, 0, NULL);
            if (row) {
                seen_add(w, json_integer_value(json_object_get(row, "round")),
                         json_number_value(json_object_get(row, "rel_gap")));
                json_decref(row);
            }
        }
        w->len -= (size_t)(end + 2 - w->buf);
        memmove(w->buf, end + 2, w->len + 1);
    }
    return len;
}

static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c,
                       curl_off_t d)
{
    struct watcher *w = ctx;

    (void)a, (void)b, (void)c, (void)d;
    return atomic_load(&w->stop);      /* non-zero aborts the transfer */
}

static void *watch_main(void *arg)
{
    struct watcher *w = arg;

    while (!atomic_load(&w->stop)) {
        CURL *c = curl_easy_init();
        struct reply r = {0};
        char url[256];
        long status = 0;
        CURLcode rc;
        struct curl_slist *h =
            curl_slist_append(NULL, "Authorization: Bearer " ALICE);

        if (w->sse)
            snprintf(url, sizeof url, "http://127.0.0.1:%u/v1/jobs/%s/events?after=%lld",
                     w->s->port, w->id, w->after);
        else
            snprintf(url, sizeof url,
                     "http://127.0.0.1:%u/v1/jobs/%s/metrics?after=%lld&wait=2&limit=1000",
                     w->s->port, w->id, w->after);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(c, CURLOPT_XFERINFODATA, w);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, w->sse ? 0L : 30L);
        w->len = 0;
        if (w->sse) {
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_sse);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
        } else {
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
        }
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (rc == CURLE_OK && status == 200 && !w->sse) {
            json_t *doc = json_loads(r.body, 0, NULL);
            json_t *rows = json_object_get(doc, "rows");
            for (size_t i = 0; i < json_array_size(rows); i++) {
                json_t *row = json_array_get(rows, i);
                seen_add(w, json_integer_value(json_object_get(row, "round")),
                         json_number_value(json_object_get(row, "rel_gap")));
            }
            json_decref(doc);
        }
        free(r.body);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        /* A refused connection (the server is down) or a finished job:
         * try again a little later, not in a tight loop. */
        if (rc != CURLE_OK || status != 200 || w->sse)
            usleep(100000);
    }
    return NULL;
}

static void watcher_start(struct watcher *w, const struct server *s,
                          const char *id, int sse)
{
    memset(w, 0, sizeof *w);
    w->s = s;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->sse = sse;
    w->after = -1;
    ck_assert_int_eq(pthread_create(&w->thread, NULL, watch_main, w), 0);
}

static void watcher_stop(struct watcher *w)
{
    atomic_store(&w->stop, 1);
    pthread_join(w->thread, NULL);
    free(w->buf);
    w->buf = NULL;
}

/* Every row of the job as the server has it now: round -> rel_gap. */
static json_t *all_rows(const struct server *s, const char *id)
{
    json_t *all = json_object();
    long long after = -1;

    for (int page = 0; page < 10000; page++) {
        char path[128], key[32];
        struct reply r;
        json_t *doc, *rows;
        int more;

        snprintf(path, sizeof path, "/v1/jobs/%s/metrics?after=%lld&limit=500", id, after);
        r = req(s, "GET", path, ALICE, NULL, NULL);
        ck_assert_msg(r.status == 200, "%s: %ld", path, r.status);
        doc = json_of(&r);
        rows = json_object_get(doc, "rows");
        for (size_t i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i);
            snprintf(key, sizeof key, "%lld",
                     (long long)json_integer_value(json_object_get(row, "round")));
            json_object_set(all, key, json_object_get(row, "rel_gap"));
        }
        after = json_integer_value(json_object_get(doc, "next_after"));
        more = json_is_true(json_object_get(doc, "more"));
        json_decref(doc);
        free(r.body);
        if (!more)
            break;
    }
    return all;
}

static void check_integrity(const char *db)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *st = NULL;

    ck_assert_int_eq(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_msg(strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0,
                  "integrity_check of %s: %s", db, sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(h);
}

/*
 * Three jobs run, two watched by long-polls and one by SSE (and another
 * long-poll on each). A random worker of one job is SIGKILLed, then the
 * coordinator of another, then the server. After a restart on the same
 * database: integrity_check is ok, every row a client saw is stored with
 * the value it saw, and each job ended with a reason that says why.
 */
START_TEST(test_kill_worker_coordinator_server)
{
    struct server s;
    struct watcher w[6];
    char id[3][32];
    pid_t coord[3], work[2];
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    int victim_job, victim_worker;
    json_t *doc;
    const char *reason;

    if (getenv("ECOPT_FAULT_SEED"))
        seed = (unsigned)strtoul(getenv("ECOPT_FAULT_SEED"), NULL, 10);
    srand(seed);
    victim_job = rand() % 3;
    victim_worker = rand() % 2;
    fprintf(stderr, "test_faults: seed %u: worker %d of job %d, then the "
            "coordinator of job %d\n", seed, victim_worker, victim_job,
            (victim_job + 1) % 3);

    setenv("ECOPT_MAX_RUNNING", "3", 1);
    setenv("ECOPT_MAX_RUNNING_PER_TOKEN", "3", 1);   /* all three are alice's */
    server_start(&s, 0);
    for (int j = 0; j < 3; j++)
        job_create(&s, ALICE, long_job, id[j]);
    for (int j = 0; j < 3; j++) {
        json_decref(job_wait(&s, ALICE, id[j], "running", 60));
        coord[j] = coordinator_of(&s, id[j], 30);
    }
    for (int j = 0; j < 3; j++) {
        watcher_start(&w[j], &s, id[j], j == 1);
        watcher_start(&w[3 + j], &s, id[j], 0);
    }
    /* Each watcher has seen rows: the clients are live when things die. */
    for (double until = tu_now() + 90;;) {
        int ready = 1;
        for (int i = 0; i < 6; i++)
            ready &= atomic_load(&w[i].count) >= 5;
        if (ready)
            break;
        ck_assert_msg(tu_now() < until, "the watchers saw no rows in 90 s");
        usleep(50000);
    }

    /* A worker: its job fails, saying which worker and the signal. */
    workers_of(coord[victim_job], work, 2, 30);
    ck_assert_int_eq(kill(work[victim_worker], SIGKILL), 0);
    doc = job_wait(&s, ALICE, id[victim_job], "failed", 60);
    reason = json_string_value(json_object_get(doc, "reason"));
    ck_assert_msg(reason && strstr(reason, "died (signal 9)"), "reason '%s'", reason);
    json_decref(doc);

    /* Another job's coordinator: that job fails too; the third runs on. */
    int b = (victim_job + 1) % 3, c = (victim_job + 2) % 3;
    workers_of(coord[b], work, 2, 30);
    ck_assert_int_eq(kill(coord[b], SIGKILL), 0);
    doc = job_wait(&s, ALICE, id[b], "failed", 60);
    reason = json_string_value(json_object_get(doc, "reason"));
    ck_assert_msg(reason && strstr(reason, "coordinator died (signal 9)"),
                  "reason '%s'", reason);
    json_decref(doc);
    /* Its workers die with it (parent-death signal). */
    for (double until = tu_now() + 30; !proc_gone(work[0]) || !proc_gone(work[1]);) {
        ck_assert_msg(tu_now() < until, "workers of a killed coordinator live on");
        usleep(20000);
    }
    doc = job_get(&s, ALICE, id[c]);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "running");
    json_decref(doc);
    /* The survivor's watchers keep getting rows. */
    {
        int before = atomic_load(&w[c].count), before2 = atomic_load(&w[3 + c].count);
        for (double until = tu_now() + 60;
             atomic_load(&w[c].count) <= before || atomic_load(&w[3 + c].count) <= before2;) {
            ck_assert_msg(tu_now() < until, "no new rows for job %s in 60 s", id[c]);
            usleep(50000);
        }
    }

    /* The server. Its last job's coordinator and workers end on their own
     * once the report pipe is broken. */
    workers_of(coord[c], work, 2, 30);
    server_stop(&s, SIGKILL);
    for (double until = tu_now() + 30;
         !proc_gone(coord[c]) || !proc_gone(work[0]) || !proc_gone(work[1]);) {
        ck_assert_msg(tu_now() < until, "job processes outlived the server by 30 s");
        usleep(20000);
    }
    for (int i = 0; i < 6; i++)
        watcher_stop(&w[i]);
    check_integrity(s.db);

    server_start(&s, 1);
    check_integrity(s.db);
    for (int j = 0; j < 3; j++) {
        const char *state;

        doc = job_get(&s, ALICE, id[j]);
        state = json_string_value(json_object_get(doc, "state"));
        reason = json_string_value(json_object_get(doc, "reason"));
        ck_assert_msg(job_state_final(state) || strcmp(state, "running") == 0 ||
                          strcmp(state, "queued") == 0, "job %s: %s", id[j], state);
        ck_assert_msg(reason && *reason, "job %s (%s) has no reason", id[j], state);
        if (j == c) {
            ck_assert_str_eq(state, "interrupted");
            ck_assert_msg(strstr(reason, "service stopped"), "reason '%s'", reason);
        } else {
            ck_assert_str_eq(state, "failed");
        }
        json_decref(doc);
    }
    /* Every row any client saw is there, with the value it saw. */
    for (int j = 0; j < 3; j++) {
        json_t *rows = all_rows(&s, id[j]);
        size_t checked = 0;

        for (int i = j; i < 6; i += 3) {
            int n = atomic_load(&w[i].count);
            ck_assert_int_gt(n, 0);
            for (int k = 0; k < n; k++, checked++) {
                char key[32];
                json_t *v;

                snprintf(key, sizeof key, "%lld", w[i].rows[k].round);
                v = json_object_get(rows, key);
                ck_assert_msg(v != NULL, "job %s: round %s, seen by a client, "
                              "is gone after the restart", id[j], key);
                ck_assert_msg(json_number_value(v) == w[i].rows[k].rel_gap,
                              "job %s round %s: rel_gap %.17g stored, %.17g seen",
                              id[j], key, json_number_value(v), w[i].rows[k].rel_gap);
            }
        }
        fprintf(stderr, "test_faults: job %d: %zu rows stored, %zu client "
                "observations checked\n", j, json_object_size(rows), checked);
        json_decref(rows);
    }
    for (int i = 0; i < 6; i++)
        free(w[i].rows);
    server_stop(&s, SIGTERM);
}
END_TEST

/* ---- isolation ------------------------------------------------------------ */

/*
 * Whether this process may read where another user's descriptors lead
 * (the links /proc/PID/fd/N): that is ptrace access, so it takes
 * CAP_SYS_PTRACE, which root in a container (docker build, docker run)
 * lacks. Which descriptors a process holds (the directory's entries)
 * needs no such capability.
 */
static int can_read_fd_links(void)
{
    char line[256];
    unsigned long long eff;

    ck_assert(proc_line(getpid(), "status", "CapEff:", line, sizeof line));
    eff = strtoull(line, NULL, 16);
    return (int)((eff >> CAP_SYS_PTRACE) & 1);
}

/* What a job's worker may hold and be, as /proc shows it. The service runs
 * as root in the tests, so the drop to `nobody` (the default) is real. */
START_TEST(test_worker_isolation)
{
    struct server s;
    char id[32], path[96], line[256], target[128];
    pid_t coord, work[2];
    struct dirent *de;
    DIR *d;
    int links, inside = 0;

    if (geteuid() != 0) {
        /* CI runs as root; a developer's own run cannot switch users. */
        tu_skip("ROOT", "test_faults: not root: the drop to nobody is not tested");
        return;
    }
    if (!(links = can_read_fd_links()))
        tu_skip("PTRACE", "test_faults: no CAP_SYS_PTRACE (a container's root): "
                "where the coordinator's and the workers' descriptors lead is "
                "not read; the workers' are counted, the server's are seen "
                "to be close-on-exec");
    server_start(&s, 0);
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "running", 60));
    coord = coordinator_of(&s, id, 30);
    workers_of(coord, work, 2, 60);
    job_wait_first_row(&s, ALICE, id, 60);
    /* The coordinator has dropped to nobody too, once the data was read. */
    ck_assert(proc_line(coord, "status", "Uid:", line, sizeof line));
    ck_assert_str_eq(line, "\t65534\t65534\t65534\t65534");
    /* Nothing of the server's reached it: not the database, not the tokens.
     * Without CAP_SYS_PTRACE the coordinator's links cannot be read, but the
     * server's can (it runs as this process's user and was not setuid):
     * each of its descriptors into its directory is close-on-exec, so none
     * of them passed to the coordinator it spawned. */
    snprintf(path, sizeof path, "/proc/%d/fd", links ? coord : s.pid);
    ck_assert_ptr_nonnull(d = opendir(path));
    while ((de = readdir(d))) {
        char fdpath[384], info[300];
        ssize_t n;

        if (de->d_name[0] == '.')
            continue;
        snprintf(fdpath, sizeof fdpath, "%s/%s", path, de->d_name);
        n = readlink(fdpath, target, sizeof target - 1);
        if (n < 0 && errno == ENOENT && !links)
            continue; /* a connection of the server's, closed meanwhile */
        ck_assert_msg(n > 0, "%s: %s", fdpath, strerror(errno));
        target[n] = '\0';
        if (!strstr(target, s.dir) || strstr(target, ".log"))
            continue;
        ck_assert_msg(!links, "the coordinator holds fd %s: %s", de->d_name, target);
        inside++;
        snprintf(info, sizeof info, "fdinfo/%s", de->d_name);
        ck_assert(proc_line(s.pid, info, "flags:", line, sizeof line));
        ck_assert_msg(strtoul(line, NULL, 8) & O_CLOEXEC,
                      "the server's fd %s (%s) is not close-on-exec: flags %s",
                      de->d_name, target, line);
    }
    /* the server's side holds its database at least */
    ck_assert_msg(links || inside > 0, "no descriptor of the server leads into %s", s.dir);
    closedir(d);
    for (int i = 0; i < 2; i++) {
        int fds = 0;

        ck_assert(proc_line(work[i], "status", "Uid:", line, sizeof line));
        ck_assert_str_eq(line, "\t65534\t65534\t65534\t65534");
        ck_assert(proc_line(work[i], "status", "Gid:", line, sizeof line));
        ck_assert_str_eq(line, "\t65534\t65534\t65534\t65534");
        ck_assert(proc_line(work[i], "status", "Groups:", line, sizeof line));
        {
            char *end;
            long g = strtol(line, &end, 10);
            ck_assert_msg(g == 65534 && end[strspn(end, " \t")] == '\0',
                          "groups '%s'", line);
        }
        /* Descriptors: stdin, stdout, stderr and the socket, nothing else. */
        snprintf(path, sizeof path, "/proc/%d/fd", work[i]);
        ck_assert_ptr_nonnull(d = opendir(path));
        while ((de = readdir(d))) {
            long fd;
            ssize_t n;
            char fdpath[384];

            if (de->d_name[0] == '.')
                continue;
            fd = strtol(de->d_name, NULL, 10);
            ck_assert_msg(fd >= 0 && fd <= 3, "worker %d holds descriptor %s",
                          (int)work[i], de->d_name);
            fds++;
            if (!links)
                continue;
            snprintf(fdpath, sizeof fdpath, "%s/%s", path, de->d_name);
            n = readlink(fdpath, target, sizeof target - 1);
            ck_assert_int_gt(n, 0);
            target[n] = '\0';
            if (fd == 3)
                ck_assert_msg(strncmp(target, "socket:", 7) == 0, "fd 3 is %s", target);
        }
        closedir(d);
        ck_assert_int_eq(fds, 4);
        /* Limits: CPU (the job's time budget by default), files, no cores. */
        ck_assert(proc_line(work[i], "limits", "Max cpu time", line, sizeof line));
        ck_assert_msg(strstr(line, " 86400 ") && strstr(line, " 86405 "), "cpu '%s'", line);
        ck_assert(proc_line(work[i], "limits", "Max open files", line, sizeof line));
        ck_assert_msg(strstr(line, " 16 "), "files '%s'", line);
        ck_assert(proc_line(work[i], "limits", "Max core file size", line, sizeof line));
        ck_assert_msg(strstr(line, " 0 "), "core '%s'", line);
    }
    job_cancel(&s, ALICE, id, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Whether /proc/PID/environ holds an entry that starts with prefix. */
static int environ_has(pid_t pid, const char *prefix)
{
    char path[64], buf[65536];
    size_t n, pl = strlen(prefix);
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: %s", path, strerror(errno));
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1)
        if (strncmp(buf + i, prefix, pl) == 0)
            return 1;
    return 0;
}

/*
 * A job's coordinator and workers cannot gain privileges back: an empty
 * capability bounding set (when the service runs as root, who can empty
 * it) and no_new_privs; and they see none of the server's environment
 * but what they need (PATH, the data directory).
 */
START_TEST(test_job_confinement)
{
    struct server s;
    char id[32], line[256];
    pid_t procs[3];

    setenv("ECOPT_TEST_SECRET", "hunter2", 1);
    server_start(&s, 0);
    unsetenv("ECOPT_TEST_SECRET");
    job_create(&s, ALICE, long_job, id);
    json_decref(job_wait(&s, ALICE, id, "running", 60));
    procs[0] = coordinator_of(&s, id, 30);
    workers_of(procs[0], procs + 1, 2, 60);
    job_wait_first_row(&s, ALICE, id, 60);
    for (int i = 0; i < 3; i++) {
        const char *who = i ? "worker" : "coordinator";

        ck_assert(proc_line(procs[i], "status", "NoNewPrivs:", line, sizeof line));
        ck_assert_msg(strcmp(line, "\t1") == 0, "%s %d: NoNewPrivs%s", who, (int)procs[i],
                      line);
        ck_assert(proc_line(procs[i], "status", "CapBnd:", line, sizeof line));
        if (geteuid() == 0)
            ck_assert_msg(strcmp(line, "\t0000000000000000") == 0, "%s %d: CapBnd%s", who,
                          (int)procs[i], line);
        if (!can_read_fd_links())
            continue;   /* another uid's environ is ptrace access too */
        ck_assert_msg(!environ_has(procs[i], "ECOPT_TEST_SECRET="),
                      "%s %d holds the server's environment", who, (int)procs[i]);
        ck_assert_msg(environ_has(procs[i], "PATH="), "%s %d: no PATH", who, (int)procs[i]);
        ck_assert_msg(environ_has(procs[i], "ECOPT_DATA_DIR="), "%s %d: no ECOPT_DATA_DIR",
                      who, (int)procs[i]);
    }
    if (!can_read_fd_links())
        tu_skip("PTRACE", "test_faults: no CAP_SYS_PTRACE: the job's environment is not "
                "read");
    job_cancel(&s, ALICE, id, 30);
    server_stop(&s, SIGTERM);
}
END_TEST

/* The nice value of pid, field 19 of /proc/PID/stat (the 17th after the
 * command's closing parenthesis). */
static int proc_nice(pid_t pid)
{
    char path[64], buf[1024];
    char *p;
    long v = 0;
    FILE *f;

    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    ck_assert_msg((f = fopen(path, "r")) != NULL, "%s: %s", path, strerror(errno));
    ck_assert(fgets(buf, sizeof buf, f) != NULL);
    fclose(f);
    ck_assert((p = strrchr(buf, ')')) != NULL);
    for (int field = 2; field < 19; field++) {
        ck_assert_msg((p = strchr(p + 1, ' ')) != NULL, "%s: '%s'", path, buf);
        if (field == 18)
            v = strtol(p + 1, NULL, 10);
    }
    return (int)v;
}

/*
 * Every process of a job, its coordinator and its workers, runs at
 * --job-nice (10 by default), the server's own threads at the nice value
 * they were started with; --job-nice 0 leaves a job at the server's.
 */
START_TEST(test_job_nice)
{
    static const struct {
        const char *env;     /* ECOPT_JOB_NICE, or NULL: the default */
        int want;            /* the job's nice value; -1 the server's */
    } cases[] = {{NULL, 10}, {"17", 17}, {"0", -1}};
    int own;

    /* A test run under nice (make check under nice -n 19, say) starts its
     * server there; root lowers its own value so that 10 is a change. */
    errno = 0;
    own = getpriority(PRIO_PROCESS, 0);
    if (own > 0 && geteuid() == 0 && setpriority(PRIO_PROCESS, 0, 0) == 0)
        own = 0;
    if (own >= 10) {
        tu_skip("NICE", "test_faults: run at nice %d, not root: --job-nice is not tested",
                own);
        return;
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct server s;
        char id[32];
        pid_t procs[3];
        int want;

        if (cases[c].env)
            setenv("ECOPT_JOB_NICE", cases[c].env, 1);
        server_start(&s, 0);
        unsetenv("ECOPT_JOB_NICE");
        want = cases[c].want < 0 ? own : cases[c].want;
        ck_assert_int_eq(proc_nice(s.pid), own);
        job_create(&s, ALICE, long_job, id);
        json_decref(job_wait(&s, ALICE, id, "running", 60));
        procs[0] = coordinator_of(&s, id, 30);
        workers_of(procs[0], procs + 1, 2, 60);
        job_wait_first_row(&s, ALICE, id, 60);
        for (int i = 0; i < 3; i++)
            ck_assert_msg(proc_nice(procs[i]) == want,
                          "ECOPT_JOB_NICE %s: %s %d at nice %d, not %d",
                          cases[c].env ? cases[c].env : "unset",
                          i ? "worker" : "coordinator", (int)procs[i],
                          proc_nice(procs[i]), want);
        ck_assert_int_eq(proc_nice(s.pid), own);
        job_cancel(&s, ALICE, id, 30);
        server_stop(&s, SIGTERM);
    }
}
END_TEST

/* The uid line of /proc/PID/status ("Uid:" or "Gid:") as one number, all
 * four ids equal; fails otherwise. */
static unsigned proc_id(pid_t pid, const char *key)
{
    char line[256], want[128];
    unsigned id = 0;

    ck_assert(proc_line(pid, "status", key, line, sizeof line));
    ck_assert_int_eq(sscanf(line, "%u", &id), 1);
    snprintf(want, sizeof want, "\t%u\t%u\t%u\t%u", id, id, id, id);
    ck_assert_msg(strcmp(line, want) == 0, "pid %d %s '%s'", (int)pid, key, line);
    return id;
}

/*
 * --worker-uids: two jobs running at once each have a uid of their own
 * from the range (group the same), their workers too; and a process left
 * running as a uid of the range is killed before a job runs as it.
 */
START_TEST(test_worker_uids)
{
    const unsigned FIRST = tu_uid_block();
    struct server s;
    char id[3][32], range[64];
    pid_t coord[3], work[2], stray;
    unsigned uid[3];
    int st;

    if (geteuid() != 0) {
        tu_skip("ROOT", "test_faults: not root: --worker-uids is not tested");
        return;
    }
    /* Left over "from an earlier job" on the range's first uid: it would
     * die of its alarm in 120 s, so SIGKILL can only be the next job's. */
    stray = fork();
    if (stray == 0) {
        if (setgroups(0, NULL) < 0 || setgid(FIRST) < 0 || setuid(FIRST) < 0)
            _exit(126);
        alarm(120);
        for (;;)
            pause();
    }
    ck_assert_int_gt(stray, 0);
    snprintf(range, sizeof range, "%u-%u", FIRST, FIRST + 1);
    setenv("ECOPT_WORKER_UIDS", range, 1);
    setenv("ECOPT_MAX_RUNNING", "2", 1);
    setenv("ECOPT_MAX_RUNNING_PER_TOKEN", "2", 1);   /* both are alice's */
    server_start(&s, 0);
    for (int j = 0; j < 2; j++)
        job_create(&s, ALICE, long_job, id[j]);
    for (int j = 0; j < 2; j++) {
        json_decref(job_wait(&s, ALICE, id[j], "running", 60));
        coord[j] = coordinator_of(&s, id[j], 30);
        job_wait_first_row(&s, ALICE, id[j], 60);
        /* Rows come after the drop: the coordinator is on its uid now. */
        uid[j] = proc_id(coord[j], "Uid:");
        ck_assert_uint_eq(proc_id(coord[j], "Gid:"), uid[j]);
        ck_assert_msg(uid[j] == FIRST || uid[j] == FIRST + 1, "uid %u", uid[j]);
        workers_of(coord[j], work, 2, 60);
        for (int w = 0; w < 2; w++) {
            ck_assert_uint_eq(proc_id(work[w], "Uid:"), uid[j]);
            ck_assert_uint_eq(proc_id(work[w], "Gid:"), uid[j]);
        }
    }
    ck_assert_uint_ne(uid[0], uid[1]);
    ck_assert_int_eq(waitpid(stray, &st, 0), stray);
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
                  "the stray process ended with status %#x, not by SIGKILL", st);

    /* A job that ends gives its uid back: the third job runs on it. */
    job_cancel(&s, ALICE, id[0], 30);
    job_create(&s, ALICE, long_job, id[2]);
    json_decref(job_wait(&s, ALICE, id[2], "running", 60));
    coord[2] = coordinator_of(&s, id[2], 30);
    job_wait_first_row(&s, ALICE, id[2], 60);
    uid[2] = proc_id(coord[2], "Uid:");
    ck_assert_uint_eq(uid[2], uid[0]);
    for (int j = 1; j < 3; j++)
        job_cancel(&s, ALICE, id[j], 30);
    server_stop(&s, SIGTERM);
}
END_TEST

/* A worker that uses more CPU than --worker-cpu-limit ends its job, and
 * the reason says so. */
START_TEST(test_worker_cpu_limit)
{
    struct server s;
    char id[32];
    json_t *doc;
    const char *reason;
    /* Full local gradients every round: the workers, not the coordinator,
     * burn the CPU, and top-1 compression keeps it far from its target. */
    static const char busy[] =
        "{\"dataset\": \"a9a\", \"workers\": 2, \"algorithm\": \"ec-gd\","
        " \"compressor\": {\"type\": \"topk\", \"k\": 1},"
        " \"max_rounds\": 40000000, \"target\": 0}";

    setenv("ECOPT_WORKER_CPU_LIMIT", "1", 1);
    server_start(&s, 0);
    job_create(&s, ALICE, busy, id);
    doc = job_wait(&s, ALICE, id, "final", 120);
    reason = json_string_value(json_object_get(doc, "reason"));
    ck_assert_str_eq(json_string_value(json_object_get(doc, "state")), "failed");
    ck_assert_msg(reason && strstr(reason, "exceeded its CPU time limit of 1 s"),
                  "reason '%s'", reason);
    json_decref(doc);
    server_stop(&s, SIGTERM);
}
END_TEST

/* Runs argv (with ECOPT_BIN as argv[0]) as uid, or as we are when uid < 0;
 * returns the exit status and what it wrote to stderr. */
static int run_as(int uid, const char *const *args, char *err, size_t errlen)
{
    const char *bin = getenv("ECOPT_BIN");
    const char *argv[16];
    int p[2], st;
    size_t n = 0;
    ssize_t r;
    pid_t pid;

    argv[0] = bin && *bin ? bin : "build/ecopt";
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i], argv[i + 2] = NULL;
    ck_assert_int_eq(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(p[1], 2);
        close(p[0]);
        if (uid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)uid) < 0 ||
                         setuid((uid_t)uid) < 0))
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    while (n + 1 < errlen && (r = read(p[0], err + n, errlen - 1 - n)) > 0)
        n += (size_t)r;
    err[n] = '\0';
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A worker user that does not exist, or a switch asked of a process that
 * is not root: clear errors, exit status 2, no job run as the wrong user. */
START_TEST(test_worker_user_errors)
{
    char spec[64], err[4096], free_uid[16];
    int fd, rc;

    if (geteuid() != 0) {
        tu_skip("ROOT", "test_faults: not root: the user switch errors are not tested");
        return;
    }
    fd = open(tu_write_temp_str("{\"dataset\": \"heart_scale\", \"workers\": 2,"
                                " \"max_rounds\": 20}", spec, sizeof spec),
              O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(fchmod(fd, 0644), 0);     /* readable by nobody below */
    close(fd);

    rc = run_as(-1, (const char *const[]){"run", spec, "--worker-user",
                                          "no-such-user-ecopt", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "worker user 'no-such-user-ecopt': no such user"), "%s", err);

    rc = run_as(65534, (const char *const[]){"run", spec, "--worker-user", "root",
                                             NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "only root can switch users"), "%s", err);

    /* Asked for its own user, a non-root run just runs: its 20 rounds end
     * above the target, so the budget ran out (exit 5, docs/cli.md). */
    rc = run_as(65534, (const char *const[]){"run", spec, "--worker-user", "nobody",
                                             NULL},
                err, sizeof err);
    ck_assert_msg(rc == 5, "exit %d: %s", rc, err);

    rc = run_as(-1, (const char *const[]){"serve", "--listen", "127.0.0.1:0", "--auth",
                                          "off", "--db", "/tmp/ecopt-never.db",
                                          "--worker-user", "no-such-user-ecopt", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "worker user 'no-such-user-ecopt'"), "%s", err);
    ck_assert_int_ne(access("/tmp/ecopt-never.db", F_OK), 0);

    /* --worker-uids: the range's form, its size, uids of accounts. */
    static const struct {
        const char *range, *max_running, *says;
    } bad[] = {
        {"abc", "2", "must be FIRST-LAST"},
        {"100-", "2", "must be FIRST-LAST"},
        {"5-3", "2", "1 <= FIRST <= LAST"},
        {"0-3", "2", "1 <= FIRST <= LAST"},
        {"1-99999", "2", "at most 65536 uids"},
        {"3999000-3999000", "2", "has 1 uids, fewer than the 2 jobs"},
        {"65530-65540", "2", "uid 65534 belongs to user 'nobody'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = run_as(-1, (const char *const[]){"serve", "--listen", "127.0.0.1:0", "--auth",
                                              "off", "--db", "/tmp/ecopt-never.db",
                                              "--max-running", bad[i].max_running,
                                              "--worker-uids", bad[i].range, NULL},
                    err, sizeof err);
        ck_assert_msg(rc == 2, "%s: exit %d: %s", bad[i].range, rc, err);
        ck_assert_msg(strstr(err, bad[i].says), "%s: %s", bad[i].range, err);
    }
    rc = run_as(-1, (const char *const[]){"serve", "--listen", "127.0.0.1:0", "--auth",
                                          "off", "--db", "/tmp/ecopt-never.db",
                                          "--worker-user", "nobody", "--worker-uids",
                                          "3999000-3999009", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "not both"), "exit %d: %s", rc, err);
    rc = run_as(65534, (const char *const[]){"serve", "--listen", "127.0.0.1:0", "--auth",
                                             "off", "--db", "/tmp/ecopt-never.db",
                                             "--worker-uids", "3999000-3999009", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "only a service running as root"), "exit %d: %s",
                  rc, err);
    ck_assert_int_ne(access("/tmp/ecopt-never.db", F_OK), 0);

    /* ecopt run --worker-uid: an account's uid, 0, or with --worker-user. */
    rc = run_as(-1, (const char *const[]){"run", spec, "--worker-uid", "65534", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "uid 65534 belongs to user 'nobody'"),
                  "exit %d: %s", rc, err);
    rc = run_as(-1, (const char *const[]){"run", spec, "--worker-uid", "0", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "--worker-uid must be in 1.."), "exit %d: %s", rc,
                  err);
    rc = run_as(-1, (const char *const[]){"run", spec, "--worker-uid", "3999005",
                                          "--worker-user", "nobody", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "not both"), "exit %d: %s", rc, err);
    rc = run_as(65534, (const char *const[]){"run", spec, "--worker-uid", "3999005", NULL},
                err, sizeof err);
    ck_assert_msg(rc == 2 && strstr(err, "only root can switch users"), "exit %d: %s", rc,
                  err);
    /* As root, a free uid just works (to its round budget: 5). */
    snprintf(free_uid, sizeof free_uid, "%u", tu_uid_block() + 5);
    rc = run_as(-1, (const char *const[]){"run", spec, "--worker-uid", free_uid, NULL},
                err, sizeof err);
    ck_assert_msg(rc == 5, "exit %d: %s", rc, err);
    unlink(spec);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *kill_tc = tcase_create("kill"), *iso = tcase_create("isolation");
    int rc;

    curl_global_init(CURL_GLOBAL_DEFAULT);
    tcase_set_timeout(kill_tc, 400);
    tcase_add_test(kill_tc, test_kill_worker_coordinator_server);
    tcase_set_timeout(iso, 200);
    tcase_add_test(iso, test_worker_isolation);
    tcase_add_test(iso, test_job_confinement);
    tcase_add_test(iso, test_job_nice);
    tcase_add_test(iso, test_worker_uids);
    tcase_add_test(iso, test_worker_cpu_limit);
    tcase_add_test(iso, test_worker_user_errors);
    suite_add_tcase(s, iso);
    suite_add_tcase(s, kill_tc);
    rc = tu_run(s);
    curl_global_cleanup();
    return rc;
}
