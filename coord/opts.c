/*
 * The coordinator's option table (COORD_OPTIONS in coord.h) as data: the
 * command line parses with it, and the service builds a coordinator's
 * arguments with it, so a flag, its check and its range are written once.
 */
#include "coord.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/job.h"
#include "ecopt/priv.h"
#include "launch.h"

enum coord_kind {
    KIND_STRING, KIND_USER, KIND_SHA, KIND_BACKEND, KIND_FD, KIND_COUNT,
    KIND_REAL, KIND_SWITCH, KIND_FLAG
};

struct coord_option {
    const char *flag;
    const char *dashed;     /* "--" and the flag */
    int shortopt;
    enum coord_kind kind;
    const char *metavar;
    double lo, hi;
    const char *help;
    size_t offset;      /* of the field in struct coord_opts */
};

static const struct coord_option options[] = {
#define ROW(field, flag, sh, kind, meta, lo, hi, help)                        \
    {flag, "--" flag, sh, KIND_##kind, meta, lo, hi, help, offsetof(struct coord_opts, field)},
    COORD_OPTIONS(ROW)
#undef ROW
};

#define NOPTIONS (sizeof options / sizeof options[0])

void coord_opts_init(struct coord_opts *o)
{
    memset(o, 0, sizeof *o);
    o->report_fd = -1;
    o->data_dir = getenv("ECOPT_DATA_DIR");
}

size_t coord_option_count(void)
{
    return NOPTIONS;
}

const char *coord_option_flag(size_t i)
{
    return options[i].flag;
}

int coord_option_short(size_t i)
{
    return options[i].shortopt;
}

const char *coord_option_metavar(size_t i)
{
    return options[i].metavar;
}

const char *coord_option_help(size_t i)
{
    static char text[1024];
    size_t n = launch_count(), used = 0;

    if (options[i].kind != KIND_BACKEND)
        return options[i].help;
    /* "a (...),\nb (...) or\nc (...);\n" and the option's own help. */
    for (size_t k = 0; k < n && used < sizeof text; k++)
        used += (size_t)snprintf(text + used, sizeof text - used, "%s%s",
                                 launch_at(k)->help,
                                 k + 1 < n - 1 ? ",\n" : k + 1 == n - 1 ? " or\n" : ";\n");
    if (used < sizeof text)
        snprintf(text + used, sizeof text - used, "%s", options[i].help);
    return text;
}

#define FIELD(o, opt, type) ((type *)(void *)((char *)(o) + (opt)->offset))
#define CFIELD(o, opt, type) ((type const *)(const void *)((const char *)(o) + (opt)->offset))

/* The backends' names as "a, b or c", from the launcher table. */
static void backend_list(char *out, size_t len)
{
    size_t n = launch_count(), used = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s",
                                 i == 0 ? "" : i + 1 == n ? " or " : ", ",
                                 launch_at(i)->name);
}

static int set_real(const struct coord_option *opt, double *out, const char *text,
                    char *err, size_t errlen)
{
    char *end;
    double v = strtod(text, &end);
    int ok = *end == '\0' && end != text && v <= opt->hi &&
             (opt->lo == 0 ? v > 0 : v >= opt->lo);

    if (!ok) {
        snprintf(err, errlen, "--%s must be in %c%g, %g] %s (got '%s')", opt->flag,
                 opt->lo == 0 ? '(' : '[', opt->lo, opt->hi,
                 strcmp(opt->metavar, "MB") == 0 ? "MB" : "seconds", text);
        return -1;
    }
    *out = v;
    return 0;
}

static int set_count(const struct coord_option *opt, long long *out, const char *text,
                     char *err, size_t errlen)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(text, &end, 10);
    if (errno || *end || end == text || v < (long long)opt->lo || v > (long long)opt->hi) {
        snprintf(err, errlen, "--%s must be in %lld..%lld (got '%s')", opt->flag,
                 (long long)opt->lo, (long long)opt->hi, text);
        return -1;
    }
    *out = v;
    return 0;
}

int coord_option_set(struct coord_opts *o, size_t i, const char *text, char *err,
                     size_t errlen)
{
    const struct coord_option *opt = &options[i];
    char names[128];
    char *end;

    switch (opt->kind) {
    case KIND_USER:
        if (!*text) {
            snprintf(err, errlen, "--%s must name a user", opt->flag);
            return -1;
        }
        /* fall through */
    case KIND_STRING:
        *FIELD(o, opt, const char *) = text;
        return 0;
    case KIND_SHA:
        if (strlen(text) != 64 || strspn(text, "0123456789abcdef") != 64) {
            snprintf(err, errlen, "--%s must be 64 lowercase hex digits", opt->flag);
            return -1;
        }
        *FIELD(o, opt, const char *) = text;
        return 0;
    case KIND_BACKEND:
        if (!launch_find(text)) {
            backend_list(names, sizeof names);
            snprintf(err, errlen, "--%s must be %s (got '%s')", opt->flag, names, text);
            return -1;
        }
        *FIELD(o, opt, const char *) = text;
        return 0;
    case KIND_FD: {
        long v;

        errno = 0;
        v = strtol(text, &end, 10);
        if (errno || *end || end == text || v < 0 || v > 1 << 20) {
            snprintf(err, errlen, "--%s must be a descriptor number (got '%s')",
                     opt->flag, text);
            return -1;
        }
        *FIELD(o, opt, int) = (int)v;
        return 0;
    }
    case KIND_COUNT:
        return set_count(opt, FIELD(o, opt, long long), text, err, errlen);
    case KIND_REAL:
        return set_real(opt, FIELD(o, opt, double), text, err, errlen);
    case KIND_SWITCH:
        if (strcmp(text, "auto") != 0 && strcmp(text, "off") != 0) {
            snprintf(err, errlen, "--%s must be auto or off (got '%s')", opt->flag, text);
            return -1;
        }
        *FIELD(o, opt, int) = strcmp(text, "auto") == 0;
        return 0;
    case KIND_FLAG:
        *FIELD(o, opt, int) = 1;
        return 0;
    }
    return -1;
}

/* Option opt's value in o as text in buf, or NULL when it is unset. */
static const char *value_text(const struct coord_opts *o, const struct coord_option *opt,
                              char *buf, size_t len)
{
    int n = -1;

    switch (opt->kind) {
    case KIND_STRING:
    case KIND_USER:
    case KIND_SHA:
    case KIND_BACKEND: {
        const char *s = *CFIELD(o, opt, const char *);
        return s && *s ? s : NULL;
    }
    case KIND_FD:
        if (*CFIELD(o, opt, int) >= 0)
            n = snprintf(buf, len, "%d", *CFIELD(o, opt, int));
        break;
    case KIND_COUNT:
        if (*CFIELD(o, opt, long long) > 0)
            n = snprintf(buf, len, "%lld", *CFIELD(o, opt, long long));
        break;
    case KIND_REAL:
        if (*CFIELD(o, opt, double) > 0)
            n = snprintf(buf, len, "%.17g", *CFIELD(o, opt, double));
        break;
    case KIND_SWITCH:
        return *CFIELD(o, opt, int) ? "auto" : NULL;
    case KIND_FLAG:
        return *CFIELD(o, opt, int) ? "" : NULL;
    }
    return n >= 0 && (size_t)n < len ? buf : NULL;
}

int coord_opts_argv(const struct coord_opts *o, char **argv, int *argc, char *buf,
                    size_t buflen)
{
    size_t used = 0;

    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct coord_option *opt = &options[i];
        char text[64];
        const char *v = value_text(o, opt, text, sizeof text);
        size_t vlen;

        if (!v)
            continue;
        argv[(*argc)++] = (char *)opt->dashed;
        if (opt->kind == KIND_FLAG)
            continue;
        if (v == text) {        /* a number: kept in buf */
            vlen = strlen(text) + 1;
            if (used + vlen > buflen)
                return -1;
            memcpy(buf + used, text, vlen);
            v = buf + used;
            used += vlen;
        }
        argv[(*argc)++] = (char *)v;
    }
    return 0;
}
