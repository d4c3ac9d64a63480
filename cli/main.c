/* ecopt: one binary, several commands (run, serve, gen and the client's). */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "validator.h"

#ifndef ECOPT_VERSION
#define ECOPT_VERSION "0.1.0"
#endif

static const char usage[] =
    "usage: ecopt COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  run JOB.json   run a job and print its progress\n"
    "  serve          serve the REST API (see api/openapi.yaml)\n"
    "  gen            write a synthetic LibSVM file (deterministic)\n"
    "\n"
    "ecopt COMMAND --help shows a command's options; ecopt --version.\n";

int main(int argc, char **argv)
{
    const char *url = NULL, *token = NULL;
    int rc;

    /* Client options may come before the command. */
    while (argc >= 3 && (strcmp(argv[1], "--url") == 0 || strcmp(argv[1], "--token") == 0)) {
        if (strcmp(argv[1], "--url") == 0)
            url = argv[2];
        else
            token = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc < 2) {
        /* Every command, the client's too: what a new user types first. */
        fputs(usage, stderr);
        fputs(cmd_client_usage(), stderr);
        return EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage, stdout);
        fputs(cmd_client_usage(), stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("ecopt %s\n", ECOPT_VERSION);
        return EXIT_OK;
    }
    /* Not listed: the server's upload validator (validator.h). */
    if (strcmp(argv[1], "__validate-upload") == 0)
        return validator_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(argv[1], "gen") == 0)
        return cmd_gen(argc - 1, argv + 1);
    if (strcmp(argv[1], "serve") == 0)
        return cmd_serve(argc - 1, argv + 1);
    if ((rc = cmd_client(argv[1], argc - 1, argv + 1, url, token)) >= 0)
        return rc;
    fprintf(stderr, "ecopt: unknown command '%s'\n%s%s", argv[1], usage, cmd_client_usage());
    return EXIT_USAGE;
}
