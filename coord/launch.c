/* The launcher table: one launcher per row of JOBSPEC_BACKENDS. */
#include "launch.h"

#include <string.h>

#define DECLARE(e, name, sym) extern const struct launcher sym;
JOBSPEC_BACKENDS(DECLARE)
#undef DECLARE

static const struct launcher *const launchers[] = {
#define ROW(e, name, sym) [e] = &sym,
    JOBSPEC_BACKENDS(ROW)
#undef ROW
};

size_t launch_count(void)
{
    return sizeof launchers / sizeof launchers[0];
}

const struct launcher *launch_at(size_t i)
{
    return launchers[i];
}

const struct launcher *launch_find(const char *name)
{
    for (size_t i = 0; i < launch_count(); i++)
        if (strcmp(launchers[i]->name, name) == 0)
            return launchers[i];
    return NULL;
}
