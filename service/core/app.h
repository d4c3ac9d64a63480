/*
 * The service as one object: its configuration, the database connections,
 * the tokens, the scheduler of coordinator processes and the HTTP server.
 * `ecopt serve` makes one, runs it until SIGTERM, and frees it.
 */
#ifndef ECOPT_APP_H
#define ECOPT_APP_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "http.h"
#include "store.h"

struct config {
    char host[64];
    unsigned port;
    char db[PATH_MAX];
    char data_dir[PATH_MAX];
    char tokens_file[PATH_MAX];
    int auth_off;                 /* only when asked for explicitly */
    char exe[PATH_MAX];           /* the ecopt binary coordinators run */
    char state_dir[PATH_MAX];     /* job specs and coordinator logs */
    unsigned max_running;         /* jobs running at once */
    unsigned max_total_workers;   /* workers of all running jobs */
    unsigned max_workers_per_job;
    unsigned max_running_per_token; /* 0 before config_load: max_running */
    unsigned max_queued_per_token;
    uint64_t max_rounds;          /* per job */
    double max_seconds;           /* per job */
    size_t max_body;
    size_t max_upload;            /* bytes of one dataset upload */
    unsigned threads;
    int access_log_off;
    unsigned conn_timeout;        /* idle seconds before MHD drops a client */
    unsigned max_connections;     /* open HTTP connections at once */
    char worker_user[64];         /* jobs run as this user; "" as the service */
    uint32_t worker_uid_first;    /* --worker-uids: each running job gets its */
    uint32_t worker_uid_count;    /* own uid of these; 0 count: not in use */
    unsigned worker_cpu_limit;    /* CPU seconds per worker; 0 none */
    int worker_cpu_set;           /* given, not the --max-seconds default */
    unsigned worker_mem_limit;    /* MB of address space per worker; 0 none */
};

/* Defaults, then the environment (ECOPT_*), then argv; a sentence naming
 * the flag or variable and what it accepts on error. */
int config_load(struct config *cfg, int argc, char **argv, char *err,
                size_t errlen);

struct token {
    char name[64];
    char secret[128];
    int admin;
};

/* Failed authentications are counted per client address; past
 * AUTH_FAIL_MAX within AUTH_FAIL_WINDOW seconds the address is refused
 * (429) until the window has passed, which makes guessing tokens slow. */
#define AUTH_FAIL_SLOTS 256
#define AUTH_FAIL_MAX 20
#define AUTH_FAIL_WINDOW 60.0

struct auth_fail {
    char addr[64];
    double first;            /* monotonic seconds of the window's start */
    unsigned count;
};

struct auth {
    struct token *tokens;
    size_t n;
    int off;
    pthread_mutex_t fail_lock;
    struct auth_fail fails[AUTH_FAIL_SLOTS];
};

/* Lines "name:secret" or "name:secret:admin"; '#' starts a comment. */
int auth_load(struct auth *a, const char *path, char *err, size_t errlen);
void auth_free(struct auth *a);
/*
 * The token presented, compared in constant time against every known one
 * (the time does not depend on which, or whether, one matches). NULL when
 * none matches. With auth off, a fixed admin identity.
 */
const struct token *auth_check(const struct auth *a, const char *presented);
/* Seconds until addr may try again, or 0 when it is not blocked. */
double auth_blocked(struct auth *a, const char *addr);
void auth_failed(struct auth *a, const char *addr);

struct sched;
struct watch;

struct app {
    struct config cfg;
    struct auth auth;
    struct store *writer;         /* every write goes through it ... */
    pthread_mutex_t wlock;        /* ... one at a time */
    struct store **readers;       /* a pool for the request threads */
    int *reader_busy;
    size_t nreaders;
    pthread_mutex_t rlock;
    pthread_cond_t rcond;
    struct sched *sched;
    struct watch *watch;
    struct http_server *http;
};

/* Borrow a reader connection; give it back. Never NULL once started. */
struct store *app_reader(struct app *app);
void app_reader_done(struct app *app, struct store *st);

/* Shared by the handlers (handlers.c). */
/* Who is asking: the token, or NULL with a 401 (or 429, for an address
 * that failed too often) already replied. */
const struct token *app_authn(struct http_req *rq, struct http_resp *rs);
struct jobspec;
/* What the server's own rules reject in a parsed spec: the field, a
 * sentence, and for limits their name and value. */
struct spec_problem {
    char field[96];
    char detail[320];
    const char *limit;
    double value;
};
int app_check_spec(struct app *a, const struct jobspec *spec,
                   struct spec_problem *sp);
/* A new job's row from a parsed spec: its canonical text and labels are
 * malloc'd into *spec_text and *labels_text (the caller frees both, also
 * on failure), which in points into. -1 when out of memory. */
int app_job_new(const struct jobspec *spec, const char *owner,
                struct store_job_new *in, char **spec_text, char **labels_text);
int store_problem(struct http_resp *rs, const struct store_err *e,
                  const char *what);
json_t *app_job_json(const struct store_job *j);
/* A query parameter that is not what it must be: the 400's content. */
struct query_problem {
    const char *param;            /* static: the parameter's name */
    long long min, max;
    char detail[160];
};
/*
 * The metrics route's cursor, from its query: after (-1..2^63-1, default
 * -1), limit (1..10000, default 1000), every (1..10^9, default 1),
 * max_points (2..10000, or 0 when absent) and wait (0..60 s). Pure, for
 * the handler and the fuzzer: 0, or -1 with the first bad one in *qp.
 */
struct metrics_cursor {
    long long after, limit, every, max_points, wait;
};
int metrics_cursor_parse(const struct http_req *rq, struct metrics_cursor *c,
                         struct query_problem *qp);
/* With max_points, fits the count rows after the cursor into max_points:
 * sets every (count may be anything) and caps limit. */
void metrics_cursor_fit(struct metrics_cursor *c, int64_t count);
/* Replies with the job's rows after `after` (JSON, or CSV). final: the
   job has ended, so every page of it is for keeps (pagecache.h); owner,
   when not NULL, lets such pages be kept. */
int app_reply_metrics(struct app *a, struct http_resp *rs, const char *id,
                      long long after, size_t limit, size_t every, int csv,
                      int final, const char *owner);

/*
 * Watching jobs (watch.c): long-polls and SSE streams wait on a job; the
 * scheduler notifies after each batch of rows and when the job ends.
 */
int watch_init(struct app *a);
void watch_free(struct app *a);
void watch_notify(struct app *a, const char *id);
/* Ends long-polls whose time is up; the scheduler calls it often. */
void watch_sweep(struct app *a);
int watch_longpoll(struct app *a, struct http_resp *rs, const char *id,
                   long long after, size_t limit, size_t every, int csv,
                   unsigned wait_ms);
int watch_events(struct app *a, struct http_resp *rs, const char *id,
                 long long after);

/* Experiments (experiments.c); the handlers in handlers.c authenticate. */
int h_experiments_create(struct http_req *rq, struct http_resp *rs,
                         const struct token *t);
int h_experiment_reply(struct http_req *rq, struct http_resp *rs,
                       struct app *a, const char *id, const char *owner,
                       int status);

/* The route table (handlers.c) and its size. */
extern const struct http_route app_routes[];
extern const size_t app_nroutes;

/* The scheduler (sched.c): starts queued jobs within the limits, reads
 * their progress into the store, and ends them. */
int sched_start(struct app *app, char *err, size_t errlen);
void sched_wake(struct sched *s);
/* SIGTERM to a running job's coordinator group; 0, or < 0 if not running
 * here (the caller then finishes a queued job itself). */
int sched_cancel(struct sched *s, const char *id);
/* Stops starting jobs, ends the running ones (marked interrupted), joins. */
void sched_stop(struct sched *s);
unsigned sched_running(struct sched *s);

#endif
