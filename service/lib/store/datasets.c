/* The store's dataset rows and the P* and lambda_max caches. */
#include "store_int.h"

/* ---- The P* cache ---------------------------------------------------- */

/* "%.17g" round-trips every double; -0 is written as 0 to equal it. */
static int pstar_key_text(const struct store_pstar_key *key,
                          char l1[32], char l2[32], struct store_err *err)
{
    if (!key || !store__is_sha256(key->dataset_sha256) || !key->loss ||
        !isfinite(key->lambda1) || !isfinite(key->lambda2))
        return store__set_err(err, STORE_EINVAL, 0,
                              "P* cache: the key needs a dataset SHA-256 (64 "
                              "lowercase hex digits), a loss and finite lambdas");
    snprintf(l1, 32, "%.17g", key->lambda1 == 0 ? 0.0 : key->lambda1);
    snprintf(l2, 32, "%.17g", key->lambda2 == 0 ? 0.0 : key->lambda2);
    return 0;
}

int store_pstar_get(struct store *st, const struct store_pstar_key *key,
                    struct store_pstar *out, struct store_err *err)
{
    char l1[32], l2[32];
    struct use u;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = pstar_key_text(key, l1, l2, err)) < 0)
        return rc;
    u = use(st, SQL_PSTAR_GET);
    bind_text(&u, 1, key->dataset_sha256);
    bind_text(&u, 2, key->loss);
    bind_text(&u, 3, l1);
    bind_text(&u, 4, l2);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        out->p_star = col_real(u.s, 0);
        col_copy(u.s, 1, out->method, sizeof out->method);
        out->bound = col_real(u.s, 2);
        out->computed_at = sqlite3_column_int64(u.s, 3);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "P* cache: no entry");
    } else {
        rc = store__sql_fail(st->db, err, rc, "read the P* cache");
    }
    done(&u);
    return rc;
}

int store_pstar_list(struct store *st, const char *dataset_sha256,
                     const char *loss, size_t max, struct store_pstar **out,
                     size_t *n, struct store_err *err)
{
    struct store_pstar *v = NULL;
    size_t cnt = 0;
    struct use u;
    int rc;

    *out = NULL;
    *n = 0;
    if (!store__is_sha256(dataset_sha256) || !loss || max == 0 || max > 100000)
        return store__set_err(err, STORE_EINVAL, 0,
                              "P* cache: a dataset SHA-256, a loss and 1..100000 "
                              "entries at most");
    if (!(v = calloc(max, sizeof *v)))
        return store__set_err(err, STORE_ENOMEM, 0, "P* cache: out of memory");
    u = use(st, SQL_PSTAR_LIST);
    bind_text(&u, 1, dataset_sha256);
    bind_text(&u, 2, loss);
    bind_int(&u, 3, (int64_t)max);
    while ((rc = step(&u)) == SQLITE_ROW && cnt < max) {
        const char *l1 = (const char *)sqlite3_column_text(u.s, 0);
        const char *l2 = (const char *)sqlite3_column_text(u.s, 1);
        struct store_pstar *e = &v[cnt];

        if (!l1 || !l2)
            continue;
        e->lambda1 = strtod(l1, NULL);
        e->lambda2 = strtod(l2, NULL);
        e->p_star = col_real(u.s, 2);
        col_copy(u.s, 3, e->method, sizeof e->method);
        e->bound = col_real(u.s, 4);
        e->computed_at = sqlite3_column_int64(u.s, 5);
        cnt++;
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        rc = store__sql_fail(st->db, err, rc, "read the P* cache");
        free(v);
    } else {
        rc = 0;
        *out = v;
        *n = cnt;
    }
    done(&u);
    return rc;
}

int store_pstar_put(struct store *st, const struct store_pstar_key *key,
                    const struct store_pstar *val, struct store_err *err)
{
    char l1[32], l2[32];
    struct store_pstar old;
    struct use u;
    double tol;
    int rc;

    if ((rc = pstar_key_text(key, l1, l2, err)) < 0)
        return rc;
    if (!val || !isfinite(val->p_star) ||
        !memchr(val->method, '\0', sizeof val->method))
        return store__set_err(err, STORE_EINVAL, 0,
                              "P* cache: P* must be finite and the method a "
                              "string");
    u = use(st, SQL_PSTAR_PUT);
    bind_text(&u, 1, key->dataset_sha256);
    bind_text(&u, 2, key->loss);
    bind_text(&u, 3, l1);
    bind_text(&u, 4, l2);
    bind_real(&u, 5, val->p_star);
    bind_text(&u, 6, val->method);
    bind_real(&u, 7, val->bound);
    bind_int(&u, 8, store__now_ms());
    if ((rc = exec_use(st, &u, "write the P* cache", err)) < 0)
        return rc;
    if (sqlite3_changes(st->db) == 1)
        return 0;
    /* An entry is never replaced: the same value again is no news, and
       another one is an error the caller reports. */
    if ((rc = store_pstar_get(st, key, &old, err)) < 0)
        return rc;
    tol = fmax(fmax(isfinite(old.bound) ? old.bound : 0,
                    isfinite(val->bound) ? val->bound : 0),
               1e-9 * fmax(1.0, fabs(old.p_star)));
    if (fabs(old.p_star - val->p_star) <= tol)
        return 0;
    return store__set_err(err, STORE_ECONFLICT, 0,
                          "P* cache: the entry for dataset %.12s, %s loss, lambda1 %s, "
                          "lambda2 %s holds P* = %.17g (%s); this one found %.17g (%s): "
                          "the entry is kept", key->dataset_sha256, key->loss, l1, l2,
                          old.p_star, old.method, val->p_star, val->method);
}

/* ---- The lambda_max cache -------------------------------------------- */

int store_lmax_get(struct store *st, const char *dataset_sha256,
                   struct store_lmax *out, struct store_err *err)
{
    struct use u;
    int rc;

    memset(out, 0, sizeof *out);
    if (!store__is_sha256(dataset_sha256))
        return store__set_err(err, STORE_EINVAL, 0,
                              "lambda_max cache: the key is a dataset SHA-256 "
                              "(64 lowercase hex digits)");
    u = use(st, SQL_LMAX_GET);
    bind_text(&u, 1, dataset_sha256);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        out->value = col_real(u.s, 0);
        col_copy(u.s, 1, out->method, sizeof out->method);
        out->steps = (uint32_t)sqlite3_column_int64(u.s, 2);
        out->computed_at = sqlite3_column_int64(u.s, 3);
        rc = 0;
    } else if (rc == SQLITE_DONE) {
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "lambda_max cache: no entry");
    } else {
        rc = store__sql_fail(st->db, err, rc, "read the lambda_max cache");
    }
    done(&u);
    return rc;
}

int store_lmax_put(struct store *st, const char *dataset_sha256,
                   const struct store_lmax *val, struct store_err *err)
{
    struct use u;

    if (!store__is_sha256(dataset_sha256) || !val || !isfinite(val->value) ||
        val->value < 0 || val->steps < 1 ||
        !memchr(val->method, '\0', sizeof val->method) || !val->method[0])
        return store__set_err(err, STORE_EINVAL, 0,
                              "lambda_max cache: a dataset SHA-256, a finite "
                              "value >= 0, a method and steps >= 1");
    u = use(st, SQL_LMAX_PUT);
    bind_text(&u, 1, dataset_sha256);
    bind_real(&u, 2, val->value);
    bind_text(&u, 3, val->method);
    bind_int(&u, 4, (int64_t)val->steps);
    bind_int(&u, 5, store__now_ms());
    return exec_use(st, &u, "write the lambda_max cache", err);
}

/* ---- Datasets -------------------------------------------------------- */

void store_dataset_clear(struct store_dataset *ds)
{
    if (!ds)
        return;
    free(ds->name);
    free(ds->labels);
    free(ds->owner);
    memset(ds, 0, sizeof *ds);
}

void store_datasets_free(struct store_dataset *ds, size_t n)
{
    if (!ds)
        return;
    for (size_t i = 0; i < n; i++)
        store_dataset_clear(&ds[i]);
    free(ds);
}

static int dataset_from_row(sqlite3_stmt *s, struct store_dataset *out,
                            struct store_err *err)
{
    int nomem = 0;

    memset(out, 0, sizeof *out);
    out->name = col_dup(s, 0, &nomem);
    col_copy(s, 1, out->sha256, sizeof out->sha256);
    out->rows = sqlite3_column_int64(s, 2);
    out->d = sqlite3_column_int64(s, 3);
    out->nnz = sqlite3_column_int64(s, 4);
    out->labels = col_dup(s, 5, &nomem);
    out->bytes = sqlite3_column_int64(s, 6);
    out->uploaded_at = sqlite3_column_int64(s, 7);
    out->owner = col_dup(s, 8, &nomem);
    out->shared = sqlite3_column_int(s, 9) != 0;
    if (nomem) {
        store_dataset_clear(out);
        return store__set_err(err, STORE_ENOMEM, 0, "read a dataset: out of memory");
    }
    return 0;
}

int store_dataset_put(struct store *st, const struct store_dataset *ds,
                      struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_PUT);

    if (!ds || !ds->name || !*ds->name || !store__is_sha256(ds->sha256) ||
        !ds->labels || ds->rows < 0 || ds->d < 0 || ds->nnz < 0 ||
        ds->bytes < 0)
        return store__set_err(err, STORE_EINVAL, 0,
                              "store a dataset: a name, a SHA-256 (64 lowercase "
                              "hex digits), labels and counts >= 0 are required");
    bind_text(&u, 1, ds->name);
    bind_text(&u, 2, ds->sha256);
    bind_int(&u, 3, ds->rows);
    bind_int(&u, 4, ds->d);
    bind_int(&u, 5, ds->nnz);
    bind_text(&u, 6, ds->labels);
    bind_int(&u, 7, ds->bytes);
    bind_int(&u, 8, ds->uploaded_at ? ds->uploaded_at : store__now_ms());
    bind_text(&u, 9, ds->owner);
    bind_int(&u, 10, ds->shared != 0);
    return exec_use(st, &u, "store a dataset", err);
}

int store_dataset_get(struct store *st, const char *name,
                      struct store_dataset *out, struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_GET);
    int rc;

    memset(out, 0, sizeof *out);
    if (!name)
        return store__set_err(err, STORE_EINVAL, 0, "no dataset name");
    bind_text(&u, 1, name);
    rc = step(&u);
    if (rc == SQLITE_ROW)
        rc = dataset_from_row(u.s, out, err);
    else if (rc == SQLITE_DONE)
        rc = store__set_err(err, STORE_ENOTFOUND, 0, "no dataset %.200s", name);
    else
        rc = store__sql_fail(st->db, err, rc, "read a dataset");
    done(&u);
    return rc;
}

int store_dataset_list(struct store *st, struct store_dataset **out,
                       size_t *n, struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_LIST);
    struct store_dataset *list = NULL;
    size_t count = 0, cap = 0;
    int rc;

    while ((rc = step(&u)) == SQLITE_ROW) {
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            struct store_dataset *grown = realloc(list, ncap * sizeof *list);

            if (!grown) {
                rc = store__set_err(err, STORE_ENOMEM, 0,
                                    "list datasets: out of memory");
                goto out;
            }
            list = grown;
            cap = ncap;
        }
        if ((rc = dataset_from_row(u.s, &list[count], err)) < 0)
            goto out;
        count++;
    }
    rc = rc == SQLITE_DONE ? 0 : store__sql_fail(st->db, err, rc, "list datasets");
out:
    done(&u);
    if (rc < 0) {
        store_datasets_free(list, count);
        list = NULL;
        count = 0;
    }
    *out = list;
    *n = count;
    return rc;
}

int store_dataset_delete(struct store *st, const char *name,
                         struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_DELETE);
    int rc;

    if (!name)
        return store__set_err(err, STORE_EINVAL, 0, "no dataset name");
    bind_text(&u, 1, name);
    if ((rc = exec_use(st, &u, "delete a dataset", err)) < 0)
        return rc;
    return sqlite3_changes(st->db) == 1
               ? 0
               : store__set_err(err, STORE_ENOTFOUND, 0, "no dataset %.200s", name);
}

int store_dataset_usage(struct store *st, const char *owner, int64_t *names,
                        int64_t *bytes, struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_USAGE);
    int rc;

    *names = *bytes = 0;
    if (!owner)
        return store__set_err(err, STORE_EINVAL, 0, "no owner");
    bind_text(&u, 1, owner);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *names = sqlite3_column_int64(u.s, 0);
        *bytes = sqlite3_column_int64(u.s, 1);
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "count a token's datasets");
    }
    done(&u);
    return rc;
}

int store_dataset_jobs(struct store *st, const char *name, int64_t *n,
                       struct store_err *err)
{
    struct use u = use(st, SQL_DATASET_JOBS);
    int rc;

    *n = 0;
    if (!name)
        return store__set_err(err, STORE_EINVAL, 0, "no dataset name");
    bind_text(&u, 1, name);
    rc = step(&u);
    if (rc == SQLITE_ROW) {
        *n = sqlite3_column_int64(u.s, 0);
        rc = 0;
    } else {
        rc = store__sql_fail(st->db, err, rc, "count a dataset's jobs");
    }
    done(&u);
    return rc;
}

int store_versions_in_use(struct store *st, char (**out)[65], size_t *n,
                          struct store_err *err)
{
    struct use u = use(st, SQL_VERSIONS_IN_USE);
    char (*list)[65] = NULL;
    size_t count = 0, cap = 0;
    int rc;

    while ((rc = step(&u)) == SQLITE_ROW) {
        if (count == cap) {
            size_t ncap = cap ? 2 * cap : 64;
            char (*grown)[65] = realloc(list, ncap * sizeof *list);

            if (!grown) {
                rc = store__set_err(err, STORE_ENOMEM, 0, "versions: out of memory");
                goto out;
            }
            list = grown;
            cap = ncap;
        }
        col_copy(u.s, 0, list[count], sizeof list[count]);
        count++;
    }
    rc = rc == SQLITE_DONE ? 0 : store__sql_fail(st->db, err, rc, "list versions in use");
out:
    done(&u);
    if (rc < 0) {
        free(list);
        list = NULL;
        count = 0;
    }
    *out = list;
    *n = count;
    return rc;
}
