/*
 * The service's settings (service/core/config_table.h): the defaults, the
 * range of every integer setting at both edges, the environment under the
 * flags, the usage text, and docs/configuration.md, "Settings" against the
 * table, so none of them can drift from the others.
 */
#include "config.h"
#include "config_table.h"
#include "testutil.h"

#include <stdint.h>

#define ENV_OF(flag, env, kind, field, deflt, lo, hi, meta, help) env,
static const char *const envs[] = {CONFIG_SETTINGS(ENV_OF)};
#undef ENV_OF
#define FLAG_OF(flag, env, kind, field, deflt, lo, hi, meta, help) flag,
static const char *const flags[] = {CONFIG_SETTINGS(FLAG_OF)};
#undef FLAG_OF
#define DEFAULT_OF(flag, env, kind, field, deflt, lo, hi, meta, help) deflt,
static const char *const deflts[] = {CONFIG_SETTINGS(DEFAULT_OF)};
#undef DEFAULT_OF
#define NFLAGS (sizeof flags / sizeof flags[0])

static void clear_env(void)
{
    for (size_t i = 0; i < NFLAGS; i++)
        if (envs[i])
            unsetenv(envs[i]);
}

/* config_load with argv = serve, --auth off, --data-dir /tmp, then extra
 * (up to 6 words). */
static int load(struct config *c, char *err, size_t errlen, const char *a1,
                const char *a2, const char *a3, const char *a4)
{
    char *argv[10] = {"serve", "--auth", "off", "--data-dir", "/tmp"};
    const char *extra[] = {a1, a2, a3, a4};
    int argc = 5;

    for (size_t i = 0; i < 4 && extra[i]; i++)
        argv[argc++] = (char *)extra[i];
    err[0] = '\0';
    return config_load(c, argc, argv, err, errlen);
}

START_TEST(test_defaults)
{
    struct config c;
    char err[512];

    clear_env();
    ck_assert_msg(load(&c, err, sizeof err, NULL, NULL, NULL, NULL) == 0, "%s", err);
    ck_assert_str_eq(c.host, "127.0.0.1");
    ck_assert_uint_eq(c.port, 8080);
    ck_assert_str_eq(c.db, "ecopt.db");
    ck_assert_str_eq(c.state_dir, "ecopt.db.jobs");
    ck_assert_str_eq(c.tokens_file, "");
    ck_assert_int_eq(c.auth_off, 1);
    ck_assert_uint_eq(c.max_running, 2);
    ck_assert_uint_eq(c.max_total_workers, 64);
    ck_assert_uint_eq(c.max_workers_per_job, 64);
    ck_assert_uint_eq(c.max_running_per_token, 2);
    ck_assert_uint_eq(c.max_queued_per_token, 100);
    ck_assert_uint_eq(c.max_rounds, 10000000);
    ck_assert(c.max_seconds == 86400.0);
    ck_assert_uint_eq(c.max_body, 1048576);
    ck_assert_uint_eq(c.max_upload, 268435456);
    ck_assert_uint_eq(c.threads, 0);   /* the server picks: start.c */
    ck_assert_uint_eq(c.conn_timeout, 30);
    ck_assert_uint_eq(c.max_connections, 1000);
    ck_assert_uint_eq(c.max_streams, 500);
    ck_assert_uint_eq(c.max_streams_per_token, 16);
    ck_assert_int_eq(c.metrics_public, 0);
    ck_assert_int_eq(c.access_log_off, 0);
    ck_assert_uint_eq(c.worker_uid_count, 0);
    ck_assert_int_eq(c.worker_cpu_set, 0);
    ck_assert_uint_eq(c.job_nice, 10);
    ck_assert_uint_eq(c.worker_cpu_limit, 86400);
    ck_assert_uint_eq(c.worker_mem_limit, 0);
    ck_assert_uint_eq(c.max_job_memory, 8192);
    ck_assert_str_eq(c.mpi_hostfile, "");
    ck_assert_uint_eq(c.upload_max_bytes, 0);
    ck_assert_uint_eq(c.upload_max_rows, 0);
    ck_assert_uint_eq(c.upload_max_nnz, 0);
    ck_assert_uint_eq(c.upload_max_d, 0);
    ck_assert_uint_eq(c.upload_validator_mem, 0);
    ck_assert_uint_eq(c.upload_validator_cpu, 0);
}
END_TEST

/* The ranges as they were written before the table, literally, so a row
 * that changes one is seen. */
static const struct {
    const char *flag;
    unsigned long long lo, hi;
} ranges[] = {
    {"max-running", 1, 1024},
    {"max-total-workers", 1, 1ull << 20},
    {"max-workers-per-job", 1, 4096},
    {"max-running-per-token", 1, 1024},
    {"max-queued-per-token", 1, 1000000},
    {"max-rounds", 1, 100000000},
    {"max-seconds", 1, 30ull * 24 * 3600},
    {"max-body", 1024, 1ull << 30},
    {"max-upload", 1024, 1ull << 40},
    {"threads", 1, 256},
    {"conn-timeout", 1, 3600},
    {"max-connections", 16, 1000000},
    {"max-streams-per-token", 1, 100000},
    {"max-streams", 1, 1000000},
    {"job-nice", 0, 19},
    {"worker-cpu-limit", 0, 100000000},
    {"worker-mem-limit", 16, 1u << 30},
    {"max-job-memory", 64, 1u << 30},
    {"upload-max-bytes", 1, 1ull << 50},
    {"upload-max-rows", 1, UINT32_MAX},
    {"upload-max-nnz", 1, 1ull << 40},
    {"upload-max-d", 1, UINT32_MAX},
    {"upload-validator-mem", 64, 1u << 30},
    {"upload-validator-cpu", 1, 100000000},
};

static int range_error(const char *err, const char *flag, unsigned long long lo,
                       unsigned long long hi, const char *got)
{
    char want[256];

    snprintf(want, sizeof want, "--%s must be an integer in %llu..%llu (got '%s')",
             flag, lo, hi, got);
    return strstr(err, want) != NULL;
}

START_TEST(test_ranges)
{
    struct config c;
    char err[512], opt[64], v[32];

    clear_env();
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        unsigned long long lo = ranges[i].lo, hi = ranges[i].hi;

        snprintf(opt, sizeof opt, "--%s", ranges[i].flag);
        if (lo > 0 && !(lo == 16 && strcmp(ranges[i].flag, "worker-mem-limit") == 0)) {
            snprintf(v, sizeof v, "%llu", lo - 1);
            ck_assert_int_lt(load(&c, err, sizeof err, opt, v, NULL, NULL), 0);
            ck_assert_msg(range_error(err, ranges[i].flag, lo, hi, v), "%s", err);
        }
        snprintf(v, sizeof v, "%llu", hi + 1);
        ck_assert_int_lt(load(&c, err, sizeof err, opt, v, NULL, NULL), 0);
        ck_assert_msg(range_error(err, ranges[i].flag, lo, hi, v), "%s", err);
        /* Both edges pass the range (a later rule may still refuse one,
         * as --max-streams 1000000 is not below --max-connections). */
        snprintf(v, sizeof v, "%llu", lo);
        load(&c, err, sizeof err, opt, v, NULL, NULL);
        ck_assert_msg(!strstr(err, "must be an integer"), "%s %s: %s", opt, v, err);
        snprintf(v, sizeof v, "%llu", hi);
        load(&c, err, sizeof err, opt, v, NULL, NULL);
        ck_assert_msg(!strstr(err, "must be an integer"), "%s %s: %s", opt, v, err);
        ck_assert_int_lt(load(&c, err, sizeof err, opt, "-1", NULL, NULL), 0);
        ck_assert_int_lt(load(&c, err, sizeof err, opt, "12x", NULL, NULL), 0);
    }
    /* 0 is the one value below worker-mem-limit's range it takes. */
    ck_assert_int_eq(load(&c, err, sizeof err, "--worker-mem-limit", "0", NULL, NULL), 0);
    ck_assert_int_lt(load(&c, err, sizeof err, "--worker-mem-limit", "15", NULL, NULL), 0);
    ck_assert_int_eq(load(&c, err, sizeof err, "--worker-mem-limit", "16", NULL, NULL), 0);
    ck_assert_uint_eq(c.worker_mem_limit, 16);
}
END_TEST

START_TEST(test_env_and_flags)
{
    struct config c;
    char err[512];

    clear_env();
    setenv("ECOPT_MAX_RUNNING", "5", 1);
    setenv("ECOPT_LISTEN", "[::1]:9000", 1);
    setenv("ECOPT_METRICS_PUBLIC", "1", 1);
    setenv("ECOPT_WORKER_CPU_LIMIT", "7", 1);
    ck_assert_msg(load(&c, err, sizeof err, "--max-running", "6", "--quiet", NULL) == 0,
                  "%s", err);
    ck_assert_uint_eq(c.max_running, 6);            /* the flag wins */
    ck_assert_str_eq(c.host, "::1");
    ck_assert_uint_eq(c.port, 9000);
    ck_assert_int_eq(c.metrics_public, 1);
    ck_assert_int_eq(c.access_log_off, 1);
    ck_assert_uint_eq(c.worker_cpu_limit, 7);
    ck_assert_int_eq(c.worker_cpu_set, 1);
    setenv("ECOPT_METRICS_PUBLIC", "off", 1);
    ck_assert_msg(load(&c, err, sizeof err, NULL, NULL, NULL, NULL) == 0, "%s", err);
    ck_assert_int_eq(c.metrics_public, 0);
    ck_assert_msg(load(&c, err, sizeof err, "--metrics-public", NULL, NULL, NULL) == 0,
                  "%s", err);
    ck_assert_int_eq(c.metrics_public, 1);
    setenv("ECOPT_METRICS_PUBLIC", "yes", 1);
    ck_assert_int_lt(load(&c, err, sizeof err, NULL, NULL, NULL, NULL), 0);
    ck_assert_str_eq(err, "ECOPT_METRICS_PUBLIC must be on or off (got 'yes')");
    clear_env();
    setenv("ECOPT_MAX_RUNNING", "0", 1);
    ck_assert_int_lt(load(&c, err, sizeof err, NULL, NULL, NULL, NULL), 0);
    ck_assert_str_eq(err, "ECOPT_MAX_RUNNING must be an integer in 1..1024 (got '0')");
    clear_env();
    /* auth takes on and off only; 1 is not one of them. */
    ck_assert_int_lt(load(&c, err, sizeof err, "--auth", "1", NULL, NULL), 0);
    ck_assert_str_eq(err, "--auth must be on or off (got '1')");
    ck_assert_int_lt(load(&c, err, sizeof err, "--no-such", NULL, NULL, NULL), 0);
    ck_assert_str_eq(err, "unknown option (see ecopt serve --help)");
    ck_assert_int_lt(load(&c, err, sizeof err, "--listen", "8080", NULL, NULL), 0);
    ck_assert_msg(strstr(err, "--listen must be HOST:PORT"), "%s", err);
    ck_assert_int_lt(load(&c, err, sizeof err, "--worker-user", "", NULL, NULL), 0);
    ck_assert_msg(strstr(err, "--worker-user must be a user name of 1..63 bytes"), "%s", err);
    ck_assert_int_lt(load(&c, err, sizeof err, "--db", "", NULL, NULL), 0);
    ck_assert_msg(strstr(err, "--db must be a path of 1.."), "%s", err);
    ck_assert_int_lt(load(&c, err, sizeof err, "extra", NULL, NULL, NULL), 0);
    ck_assert_str_eq(err, "unexpected argument 'extra'");
}
END_TEST

START_TEST(test_usage_lists_every_setting)
{
    char *text = NULL, word[96];
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    ck_assert_ptr_nonnull(f);
    config_usage(f);
    fclose(f);
    for (size_t i = 0; i < NFLAGS; i++) {
        snprintf(word, sizeof word, "--%s ", flags[i]);
        ck_assert_msg(strstr(text, word), "usage lacks %s", word);
        if (envs[i])
            ck_assert_msg(strstr(text, envs[i]), "usage lacks %s", envs[i]);
    }
    /* Each default as the table gives it, once the lines are joined. */
    for (char *r = text, *w = text; ; r++) {
        if (*r == ' ' || *r == '\n') {
            while (r[1] == ' ' || r[1] == '\n')
                r++;
            *w++ = ' ';
        } else if (!(*w++ = *r))
            break;
    }
    for (size_t i = 0; i < NFLAGS; i++) {
        char phrase[96];
        const char *row, *next = NULL, *at;

        if (!deflts[i] || !envs[i])
            continue;
        snprintf(word, sizeof word, "--%s ", flags[i]);
        row = strstr(text, word);
        if (i + 1 < NFLAGS) {
            snprintf(word, sizeof word, "--%s ", flags[i + 1]);
            next = strstr(row, word);
        }
        snprintf(phrase, sizeof phrase, "default %s", deflts[i]);
        at = strstr(row, phrase);
        ck_assert_msg(at && (!next || at < next), "usage: --%s without its %s",
                      flags[i], phrase);
    }
    free(text);
}
END_TEST

/* The rows of docs/configuration.md, "Settings". */
static char *docs_table(void)
{
    static char buf[1 << 17];
    const char *path = "docs/configuration.md", *heading = "## Settings";
    FILE *f = fopen(path, "r");
    char line[4096];
    int in = 0;
    size_t n = 0;

    ck_assert_msg(f != NULL, "cannot read %s", path);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, heading, strlen(heading)) == 0) {
            in = 1;
            continue;
        }
        if (in && line[0] == '#')
            break;
        if (in && line[0] == '|' && n + strlen(line) < sizeof buf) {
            memcpy(buf + n, line, strlen(line));
            n += strlen(line);
        }
    }
    buf[n] = '\0';
    fclose(f);
    ck_assert_msg(n > 0, "no settings table in %s", path);
    return buf;
}

START_TEST(test_docs_match_table)
{
    const char *rows = docs_table(), *p = rows;
    char word[96];

    /* Every setting is in the docs, with its variable... */
    for (size_t i = 0; i < NFLAGS; i++) {
        snprintf(word, sizeof word, "`--%s", flags[i]);
        ck_assert_msg(strstr(rows, word), "the docs' settings table lacks --%s", flags[i]);
        if (envs[i])
            ck_assert_msg(strstr(rows, envs[i]), "the docs' settings table lacks %s",
                          envs[i]);
    }
    /* ...and every flag the docs list is a setting. */
    while ((p = strstr(p, "`--"))) {
        size_t n = strspn(p + 3, "abcdefghijklmnopqrstuvwxyz-");
        int known = 0;

        for (size_t i = 0; i < NFLAGS; i++)
            known |= strlen(flags[i]) == n && strncmp(flags[i], p + 3, n) == 0;
        ck_assert_msg(known, "the docs list --%.*s, which is no setting", (int)n, p + 3);
        p += 3 + n;
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("settings");

    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_ranges);
    tcase_add_test(tc, test_env_and_flags);
    tcase_add_test(tc, test_usage_lists_every_setting);
    tcase_add_test(tc, test_docs_match_table);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
