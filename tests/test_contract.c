/*
 * The API contract against the real server: tests/contract/contract.py
 * calls every operation of api/openapi.yaml, for a success and for its
 * errors, and checks each status and body against the document (JSON
 * Schema, Debian's python3-jsonschema), and /metrics with promtool. A
 * route, a field or a status that drifts from the contract fails here.
 */
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>

#include "serverutil.h"
#include "testutil.h"

/* Copies a dataset into dir, so that uploads never touch the shared data. */
static void copy_dataset(const char *name, const char *dir)
{
    char src[PATH_MAX], dst[PATH_MAX], buf[1 << 16];
    FILE *in, *out;
    size_t n;

    tu_data_path(name, src, sizeof src);
    snprintf(dst, sizeof dst, "%s/%s", dir, name);
    ck_assert_ptr_nonnull(in = fopen(src, "rb"));
    ck_assert_ptr_nonnull(out = fopen(dst, "wb"));
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    ck_assert_int_eq(fclose(out), 0);
}

START_TEST(test_contract)
{
    struct server s;
    char data[96], port[16], url[64], cmd[PATH_MAX + 256];
    const char *extra[] = {"--data-dir", data, NULL};
    int st;

    snprintf(data, sizeof data, "/tmp/ecopt-contract-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(data));
    copy_dataset("heart_scale", data);
    server_start_with(&s, 0, extra);
    snprintf(port, sizeof port, "%u", s.port);
    snprintf(url, sizeof url, "http://127.0.0.1:%s", port);
    snprintf(cmd, sizeof cmd, "python3 -W ignore::DeprecationWarning tests/contract/contract.py api/openapi.yaml %s %s %s",
             url, ALICE, BOB);
    st = system(cmd);
    server_stop(&s, SIGTERM);
    snprintf(cmd, sizeof cmd, "rm -rf %s", data);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "the server drifts from api/openapi.yaml (see the lines above)");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("contract");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_contract);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
