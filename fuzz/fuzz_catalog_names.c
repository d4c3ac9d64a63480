/*
 * libFuzzer target for the catalog's names (service/core/catalog.c,
 * datadir_name_check): the input is a dataset name as a client sends it
 * (in a job spec, a query or a path). An accepted name is 1..128 bytes of
 * [A-Za-z0-9._-] not starting with '.', checked against an independent
 * spelling of the rule, so it can never be "." or "..", a hidden or
 * temporary file, the versions folder or a path; a refused one gets a
 * sentence. Names with a NUL inside are what a C string cuts them to.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"               /* CATALOG_TEMP_PREFIX */
#include "datadir.h"

static int rule(const char *s, size_t n)
{
    if (n < 1 || n > DATADIR_NAME_MAX || s[0] == '.')
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                     "0123456789._-") == n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *name = malloc(size + 1);
    const char *why;
    size_t n;

    if (!name)
        return 0;
    memcpy(name, data, size);
    name[size] = '\0';
    n = strlen(name);
    why = datadir_name_check(name);
    if ((why == NULL) != rule(name, n)) {
        fprintf(stderr, "datadir_name_check(\"%s\") %s, the rule says %s\n", name,
                why ? "refuses" : "accepts", rule(name, n) ? "yes" : "no");
        abort();
    }
    if (why && !*why)
        abort();                /* a refusal is a sentence */
    if (!why && (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0 ||
                 strncmp(name, CATALOG_TEMP_PREFIX, sizeof CATALOG_TEMP_PREFIX - 1) == 0 ||
                 strcmp(name, DATADIR_VERSIONS) == 0))
        abort();
    if (datadir_name_check(NULL) == NULL)
        abort();
    free(name);
    return 0;
}
