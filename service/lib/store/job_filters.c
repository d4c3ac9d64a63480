/* The job list's filters on parameters and results: the field table's
 * names and kinds, the parser of one filter, and what the list's filtered
 * statements need bound (docs/api.md, "Filters"). */
#include "store_int.h"

static const struct {
    const char *name, *meaning;
    enum store_field_kind kind;
} job_fields[] = {
#define STORE_FIELD_ROW(id, name, kind, sql, meaning) {name, meaning, STORE_FIELD_##kind},
    STORE_JOB_FIELDS(STORE_FIELD_ROW)
#undef STORE_FIELD_ROW
};

static const char *const op_suffixes[] = {
#define STORE_OP_SUFFIX(id, suffix, sql) suffix,
    STORE_FILTER_OPS(STORE_OP_SUFFIX)
#undef STORE_OP_SUFFIX
};

const char *store_job_field_name(enum store_job_field f)
{
    return (unsigned)f < STORE_F_COUNT ? job_fields[f].name : NULL;
}

const char *store_job_field_meaning(enum store_job_field f)
{
    return (unsigned)f < STORE_F_COUNT ? job_fields[f].meaning : NULL;
}

enum store_field_kind store_job_field_kind(enum store_job_field f)
{
    return (unsigned)f < STORE_F_COUNT ? job_fields[f].kind : STORE_FIELD_TEXT;
}

const char *store_filter_op_suffix(enum store_filter_op op)
{
    return (unsigned)op < STORE_OP_COUNT ? op_suffixes[op] : NULL;
}

/* A decimal number as people write one ("1e-6", "-2.5", "4"), finite:
 * no spaces, hex, inf or nan, which strtod alone would take. */
static int parse_number(const char *v, double *out)
{
    char *end;

    if (!*v || strspn(v, "0123456789+-.eE") != strlen(v))
        return -1;
    *out = strtod(v, &end);
    return *end || !isfinite(*out) ? -1 : 0;
}

/* The field and comparison key names: key is NAME or NAME and a suffix. */
static int field_of(const char *key, enum store_job_field *f, enum store_filter_op *op)
{
    size_t len = strlen(key);

    for (int o = 0; o < STORE_OP_COUNT; o++) {
        size_t sl = strlen(op_suffixes[o]);

        if (len <= sl || strcmp(key + len - sl, op_suffixes[o]) != 0)
            continue;
        for (int i = 0; i < STORE_F_COUNT; i++)
            if (strlen(job_fields[i].name) == len - sl &&
                memcmp(job_fields[i].name, key, len - sl) == 0) {
                *f = (enum store_job_field)i;
                *op = (enum store_filter_op)o;
                return 0;
            }
    }
    return -1;
}

int store_job_cond_parse(const char *key, const char *value, struct store_job_cond *out,
                         char *why, size_t whylen)
{
    enum store_job_field f;
    enum store_filter_op op;
    struct store_job_cond c = {0};

    if (!key || field_of(key, &f, &op) < 0)
        return 1;
    c.field = f;
    c.op = op;
    if (!value || !*value) {
        snprintf(why, whylen, "%s: a value is required", key);
        return -1;
    }
    if (strlen(value) > STORE_COND_VALUE_MAX) {
        snprintf(why, whylen, "%s: the value is longer than %d bytes", key,
                 STORE_COND_VALUE_MAX);
        return -1;
    }
    switch (job_fields[f].kind) {
    case STORE_FIELD_NUMBER:
        if (parse_number(value, &c.number) < 0) {
            snprintf(why, whylen, "%s must be a finite decimal number (got \"%.40s\")", key,
                     value);
            return -1;
        }
        break;
    case STORE_FIELD_BOOL:
        if (op != STORE_OP_EQ) {
            snprintf(why, whylen, "%s: %s is true or false; it takes no comparison", key,
                     job_fields[f].name);
            return -1;
        }
        if (strcmp(value, "true") && strcmp(value, "false")) {
            snprintf(why, whylen, "%s must be true or false (got \"%.40s\")", key, value);
            return -1;
        }
        c.number = strcmp(value, "true") == 0;
        break;
    case STORE_FIELD_TEXT:
        if (op != STORE_OP_EQ && op != STORE_OP_NE) {
            snprintf(why, whylen, "%s: %s is text; it takes = and _ne only", key,
                     job_fields[f].name);
            return -1;
        }
        c.text = value;
        break;
    }
    *out = c;
    return 0;
}

/* Binds the conditions to their named parameters; -1 for one given twice
 * or out of range. */
int store__bind_conds(struct use *u, const struct store_job_filter *f, struct store_err *err)
{
    unsigned char seen[STORE_F_COUNT][STORE_OP_COUNT] = {{0}};

    for (size_t i = 0; i < f->nconds; i++) {
        const struct store_job_cond *c = &f->conds[i];
        char name[64];
        int idx;

        if ((unsigned)c->field >= STORE_F_COUNT || (unsigned)c->op >= STORE_OP_COUNT ||
            seen[c->field][c->op]++)
            return store__set_err(err, STORE_EINVAL, 0,
                                  "list jobs: a condition out of range or given twice");
        snprintf(name, sizeof name, ":%s%s", job_fields[c->field].name, op_suffixes[c->op]);
        idx = sqlite3_bind_parameter_index(u->s, name);
        if (idx <= 0)
            return store__set_err(err, STORE_EINVAL, 0, "list jobs: no parameter %s", name);
        if (job_fields[c->field].kind == STORE_FIELD_TEXT)
            bind_text(u, idx, c->text);
        else
            bind_real(u, idx, c->number);
    }
    return 0;
}

/* Where the next filtered page starts when this one had no more rows:
 * below the jobs it looked at, if it looked at all it may. */
int store__scan_cursor(struct store *st, const struct store_job_filter *f, int64_t before,
                       char next_cursor[STORE_CURSOR_SIZE], struct store_err *err)
{
    struct use u = use(st, f->owner ? SQL_JOB_SCANNED_OWNER : SQL_JOB_SCANNED);
    int rc;

    bind_int(&u, 1, before);
    bind_text(&u, 2, f->owner);
    bind_int(&u, 3, STORE_JOB_SCAN);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        if (sqlite3_column_int64(u.s, 0) >= STORE_JOB_SCAN)
            snprintf(next_cursor, STORE_CURSOR_SIZE, "%" PRId64,
                     (int64_t)sqlite3_column_int64(u.s, 1));
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "list jobs");
    }
    done(&u);
    return rc;
}
