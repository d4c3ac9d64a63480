/* The subcommands of the ecopt binary; each returns the process exit code,
   one of those below, with the sentence on stderr: the cli floor's error
   convention (docs/architecture.md, "Errors"). */
#ifndef ECOPT_CMD_H
#define ECOPT_CMD_H

#include "coord.h"

/* Exit codes every subcommand shares: the coordinator's (coord.h). A
   job's own end gives the exit status of its outcome (format/outcome.h):
   EXIT_OK, EXIT_BUDGET or EXIT_JOB_FAILED. */
enum {
    EXIT_OK = COORD_OK,
    EXIT_INTERNAL = COORD_INTERNAL,
    EXIT_USAGE = COORD_USAGE,
    EXIT_JOB_FAILED = COORD_JOB_FAILED,
    EXIT_BUDGET = COORD_BUDGET
};

int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);   /* serve.c */
int cmd_gen(int argc, char **argv);     /* cmd_gen.c */
/* The client commands (client.c): -1 when cmd is not one of them. */
int cmd_client(const char *cmd, int argc, char **argv, const char *url,
               const char *token);
const char *cmd_client_usage(void);

#endif
