/*
 * Starting the real `ecopt serve` for a test: a temporary directory with
 * its database and a tokens file (alice, bob, and root as admin), port 0,
 * and the port read from what the server prints.
 */
#ifndef ECOPT_SERVERUTIL_H
#define ECOPT_SERVERUTIL_H

#include <signal.h>
#include <sys/wait.h>

#include "testutil.h"

struct server {
    pid_t pid;
    unsigned port;
    char dir[64];
    char db[128];
};

static const char *const tokens =
    "alice:alice-secret-0123456789\n"
    "bob:bob-secret-0123456789abc\n"
    "root:root-secret-0123456789ab:admin\n";

/* Starts ecopt serve on port 0 and reads the port it printed. */
static inline void server_start(struct server *s, int reuse_dir)
{
    const char *bin = getenv("ECOPT_BIN");
    int out[2];
    char line[512] = "", tok[128];
    FILE *f;

    if (!reuse_dir) {
        snprintf(s->dir, sizeof s->dir, "/tmp/ecopt-serve-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(s->dir));
        snprintf(s->db, sizeof s->db, "%s/ecopt.db", s->dir);
        snprintf(tok, sizeof tok, "%s/tokens", s->dir);
        f = fopen(tok, "w");
        fputs(tokens, f);
        fclose(f);
    }
    ck_assert_int_eq(pipe(out), 0);
    s->pid = fork();
    if (s->pid == 0) {
        char listen[] = "127.0.0.1:0";
        dup2(out[1], 1);
        close(out[0]);
        freopen("/dev/null", "w", stderr);
        snprintf(tok, sizeof tok, "%s/tokens", s->dir);
        execl(bin && *bin ? bin : "build/ecopt", "ecopt", "serve", "--listen", listen,
              "--db", s->db, "--tokens-file", tok, "--max-rounds", "50000000",
              "--quiet", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    f = fdopen(out[0], "r");
    ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
    fclose(f);
    ck_assert_msg(sscanf(line, "ecopt: listening on http://127.0.0.1:%u", &s->port) == 1,
                  "server said: %s", line);
}

static inline void server_stop(struct server *s, int sig)
{
    int st;

    kill(s->pid, sig);
    waitpid(s->pid, &st, 0);
}

#define ALICE "alice-secret-0123456789"
#define BOB "bob-secret-0123456789abc"
#define ROOT "root-secret-0123456789ab"

#endif
