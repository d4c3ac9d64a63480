/* The subcommands of the ecopt binary; each returns the process exit code. */
#ifndef ECOPT_CMD_H
#define ECOPT_CMD_H

/* Exit codes every subcommand shares. */
enum {
    EXIT_OK = 0,          /* the job reached its target or its round budget */
    EXIT_INTERNAL = 1,    /* an internal failure (out of memory, I/O) */
    EXIT_USAGE = 2,       /* bad arguments, a bad job spec or bad data */
    EXIT_JOB_FAILED = 3   /* the job ran but diverged or timed out */
};

int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);   /* serve.c */
int cmd_gen(int argc, char **argv);     /* cmd_gen.c */
/* The client commands (client.c): -1 when cmd is not one of them. */
int cmd_client(const char *cmd, int argc, char **argv, const char *url,
               const char *token);
const char *cmd_client_usage(void);

#endif
