/* ecopt: the multi-call binary (run, and later serve and the client). */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0) {
        printf("usage: ecopt run JOB.json\n");
        return argc < 2 ? 2 : 0;
    }
    fprintf(stderr, "ecopt: unknown command '%s'\n", argv[1]);
    return 2;
}
