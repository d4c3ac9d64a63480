/*
 * What the client commands share (client.c): the service's address and
 * token, one request, its problem+json shown as people read it, and text
 * from the service made safe for a terminal. client.c and each cmd_*.c
 * file hold some of the commands; cmd_client in commands.c picks one.
 */
#ifndef ECOPT_CLIENT_H
#define ECOPT_CLIENT_H

#include <jansson.h>
#include <stddef.h>

#include "cmd.h"

/* Exit codes of the client, beside cmd.h's. */
enum { EXIT_SERVICE = 1, EXIT_CONNECT = 4 };

struct client {
    char url[512];
    char token[256];
};

/* A growing, NUL-terminated buffer; client_to_buf is a libcurl write
   callback that appends to one. */
struct client_buf {
    char *data;
    size_t len;
};
size_t client_to_buf(char *p, size_t sz, size_t n, void *ctx);

/*
 * Text from the service as a terminal may show it: control characters
 * (C0, DEL and C1 as UTF-8) written as \xNN. The result lives until 16
 * more calls; long text is cut with "...".
 */
const char *client_term_text(const char *s);
/* A string member as a terminal may show it, "-" if none. */
const char *client_str(json_t *o, const char *k);
/* Prints a problem+json reply (status, body) the way people read it. */
void client_problem(long status, const char *body);
/*
 * One request. Returns the HTTP status (the body in *out, malloc'd), or
 * -1 when the service could not be reached (already reported). accept
 * NULL: any.
 */
long client_request(const struct client *c, const char *method, const char *path,
                    const char *body, size_t body_len, const char *accept,
                    struct client_buf *out);
/* A request as an exit code: EXIT_OK (with *doc the parsed body when doc
   is given), EXIT_SERVICE after printing the problem, EXIT_CONNECT. */
int client_call(const struct client *c, const char *method, const char *path,
                const char *body, json_t **doc);
/* A file (or stdin for "-") whole; NULL after saying why. */
char *client_slurp(const char *path);
/* A document as JSON, reals to 17 digits. */
void client_print_json(json_t *doc);
/* Whether a job in this state (a name of the API's) has ended. */
int client_state_final(const char *state);
/* The Unix milliseconds as ISO 8601 UTC ("2026-12-05T07:45:42.123Z"). */
void client_iso_time(char *buf, size_t len, long long ms);

/* A comparison table (GET /v1/experiments/{id}, /v1/compare): per job
   its rounds and bits to the target, its final gap and step multiplier. */
void client_print_comparison(json_t *table);

/* The commands (commands.c runs them): each returns the exit status. */
int cmd_list(const struct client *c, int argc, char **argv);   /* client.c */
/* show, cancel and delete: what is one of them */
int cmd_simple(const struct client *c, const char *what, int argc, char **argv);
int cmd_metrics(const struct client *c, int argc, char **argv);
int client_watch(const struct client *c, const char *id);     /* cmd_watch.c */
int cmd_watch(const struct client *c, int argc, char **argv);
int cmd_logs(const struct client *c, int argc, char **argv);
int cmd_experiment(const struct client *c, int argc, char **argv);  /* cmd_data.c */
int cmd_datasets(const struct client *c, int argc, char **argv);
int cmd_submit(const struct client *c, int argc, char **argv); /* cmd_jobs.c */
int cmd_retry(const struct client *c, int argc, char **argv);
int cmd_compare(const struct client *c, int argc, char **argv);
int cmd_plot(const struct client *c, int argc, char **argv);

#endif
