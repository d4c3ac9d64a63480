/* The words of a job's states and stop reasons: store.h's tables. */
#include "store_int.h"

static const char *const state_names[STORE_JOB_STATE_COUNT] = {
    [STORE_JOB_QUEUED] = "queued",
    [STORE_JOB_RUNNING] = "running",
    [STORE_JOB_SUCCEEDED] = "succeeded",
    [STORE_JOB_FAILED] = "failed",
    [STORE_JOB_CANCELLED] = "cancelled",
    [STORE_JOB_INTERRUPTED] = "interrupted",
};

static const struct {
    const char *name, *stop, *meaning;
} stop_rows[STORE_STOP_COUNT] = {
#define STORE_STOP_ROW(id, name, stop, meaning) [id] = {name, stop, meaning},
    STORE_STOP_REASONS(STORE_STOP_ROW)
#undef STORE_STOP_ROW
};

const char *store_stop_name(enum store_stop s)
{
    return (unsigned)s < STORE_STOP_COUNT ? stop_rows[s].name : NULL;
}

const char *store_stop_meaning(enum store_stop s)
{
    return (unsigned)s < STORE_STOP_COUNT ? stop_rows[s].meaning : NULL;
}

enum store_stop store_stop_of_final(const char *stop)
{
    for (int i = 0; stop && i < STORE_STOP_COUNT; i++)
        if (stop_rows[i].stop && strcmp(stop, stop_rows[i].stop) == 0)
            return (enum store_stop)i;
    return STORE_STOP_FAILED;
}

int store_stop_from_name(const char *name, enum store_stop *out)
{
    for (int i = 0; name && i < STORE_STOP_COUNT; i++) {
        if (strcmp(name, stop_rows[i].name) == 0) {
            *out = (enum store_stop)i;
            return 0;
        }
    }
    return STORE_EINVAL;
}

const char *store_stop_names(char *buf, size_t len)
{
    size_t n = 0;

    if (len)
        buf[0] = '\0';
    for (int i = 0; i < STORE_STOP_COUNT && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "",
                              stop_rows[i].name);
    return buf;
}

const char *store_job_state_name(enum store_job_state s)
{
    return (unsigned)s < STORE_JOB_STATE_COUNT ? state_names[s] : NULL;
}

int store_job_state_from_name(const char *name, enum store_job_state *out)
{
    for (int i = 0; name && i < STORE_JOB_STATE_COUNT; i++) {
        if (strcmp(name, state_names[i]) == 0) {
            *out = (enum store_job_state)i;
            return 0;
        }
    }
    return STORE_EINVAL;
}

int store_job_state_is_final(enum store_job_state s)
{
    return s >= STORE_JOB_SUCCEEDED && s < STORE_JOB_STATE_COUNT;
}
