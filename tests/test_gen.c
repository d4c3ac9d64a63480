/*
 * ecopt gen, through the real binary: the same arguments give the same
 * bytes, the file has the shape asked for, loads, runs, and its row blocks
 * differ; hostile arguments get a clear error and no file.
 */
#include <sys/wait.h>

#include "ecopt/data.h"
#include "sha256.h"
#include "testutil.h"

static char ecopt[1024];

/* Runs `ecopt gen ARGS`; returns the exit status, stderr in err. */
static int gen(const char *args, char *err, size_t errlen)
{
    char cmd[2048];
    FILE *p;
    size_t n;
    int st;

    snprintf(cmd, sizeof cmd, "%s gen %s 2>&1 >/dev/null", ecopt, args);
    ck_assert_ptr_nonnull(p = popen(cmd, "r"));
    n = fread(err, 1, errlen - 1, p);
    err[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void sha_file(const char *path, char hex[SHA256_HEX_SIZE])
{
    struct sha256 h;
    char buf[65536];
    size_t n;
    FILE *f = fopen(path, "rb");

    ck_assert_ptr_nonnull(f);
    sha256_init(&h);
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        sha256_update(&h, buf, n);
    fclose(f);
    sha256_final_hex(&h, hex);
}

static void temp_path(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "/tmp/ecopt-gen-%ld-%s.svm", (long)getpid(), tag);
}

START_TEST(test_gen_deterministic)
{
    char a[256], b[256], c[256], args[600], err[4096];
    char ha[SHA256_HEX_SIZE], hb[SHA256_HEX_SIZE], hc[SHA256_HEX_SIZE];

    temp_path(a, sizeof a, "a");
    temp_path(b, sizeof b, "b");
    temp_path(c, sizeof c, "c");
    snprintf(args, sizeof args, "--rows 3000 --features 5000 --nnz 12 --seed 7 -o %s", a);
    ck_assert_int_eq(gen(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "--rows 3000 --features 5000 --nnz 12 --seed 7 -o %s", b);
    ck_assert_int_eq(gen(args, err, sizeof err), 0);
    snprintf(args, sizeof args, "--rows 3000 --features 5000 --nnz 12 --seed 8 -o %s", c);
    ck_assert_int_eq(gen(args, err, sizeof err), 0);
    sha_file(a, ha);
    sha_file(b, hb);
    sha_file(c, hc);
    ck_assert_str_eq(ha, hb);
    ck_assert_str_ne(ha, hc);   /* the seed matters */
    unlink(a);
    unlink(b);
    unlink(c);
}
END_TEST

/* Reads the file as text: every row has k increasing indices in 1..d and a
   label of +1 or -1; counts, per block of rows, the entries in the block's
   own slice of the features. */
START_TEST(test_gen_shape)
{
    enum { ROWS = 2000, D = 4000, K = 9, SOURCES = 4 };
    char path[256], args[600], err[4096], line[4096];
    unsigned long rows = 0, own = 0, total = 0, pos = 0, maxidx = 0;
    FILE *f;

    temp_path(path, sizeof path, "shape");
    snprintf(args, sizeof args, "-n %d -D %d -k %d --sources %d -s 3 -o %s", ROWS, D, K,
             SOURCES, path);
    ck_assert_int_eq(gen(args, err, sizeof err), 0);
    ck_assert_ptr_nonnull(f = fopen(path, "r"));
    while (fgets(line, sizeof line, f)) {
        char *p = line, *end;
        unsigned long prev = 0, n = 0, src = rows / (ROWS / SOURCES);

        ck_assert_msg(strncmp(p, "+1 ", 3) == 0 || strncmp(p, "-1 ", 3) == 0,
                      "row %lu: label", rows + 1);
        pos += p[0] == '+';
        p += 2;
        while (*p == ' ') {
            unsigned long idx = strtoul(p + 1, &end, 10);
            ck_assert_int_eq(*end, ':');
            ck_assert_msg(idx > prev && idx <= D, "row %lu: index %lu after %lu",
                          rows + 1, idx, prev);
            strtod(end + 1, &p);
            prev = idx;
            maxidx = idx > maxidx ? idx : maxidx;
            own += (idx - 1) * SOURCES / D == src;
            n++;
        }
        ck_assert_int_eq(*p, '\n');
        ck_assert_int_eq(n, K);
        total += n;
        rows++;
    }
    fclose(f);
    ck_assert_int_eq(rows, ROWS);
    ck_assert_uint_le(maxidx, D);
    /* 80% own plus a quarter of the 20% drawn anywhere: 85% expected. */
    ck_assert_msg(own > 0.8 * total && own < 0.9 * total, "own share %g",
                  (double)own / total);
    ck_assert_msg(pos > ROWS / 5 && pos < ROWS * 4 / 5, "%lu of %d labels +1", pos, ROWS);
    unlink(path);
}
END_TEST

START_TEST(test_gen_loads_and_runs)
{
    char path[256], spec[64], args[600], err[4096], cmd[2048], job[512];
    ec_dataset ds = {0};
    ec_err e = {0};

    temp_path(path, sizeof path, "run");
    snprintf(args, sizeof args, "--rows 1500 --features 300 --nnz 6 --loss ridge -o %s", path);
    ck_assert_int_eq(gen(args, err, sizeof err), 0);
    ck_assert_int_eq(ec_libsvm_read(path, NULL, &ds, &e), 0);
    ck_assert_uint_eq(ds.n_rows, 1500);
    ck_assert_uint_le(ds.d, 300);
    ck_assert_uint_eq(ds.nnz, 1500 * 6);
    ck_assert_int_eq(ds.n_labels, 2);
    ec_dataset_clear(&ds);
    snprintf(job, sizeof job,
             "{\"dataset\": \"%s\", \"workers\": 4, \"loss\": \"squared\","
             " \"algorithm\": \"ec-gd-diana\", \"compressor\": {\"type\": \"topk\", \"k\": 20},"
             " \"max_rounds\": 2000, \"target\": 1e-4, \"eval_every\": 10}", path);
    tu_write_temp_str(job, spec, sizeof spec);
    snprintf(cmd, sizeof cmd, "%s run %s --backend process --quiet >/dev/null", ecopt, spec);
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 0);
    unlink(spec);
    unlink(path);
}
END_TEST

START_TEST(test_gen_bad_args)
{
    static const struct {
        const char *args, *says;
    } cases[] = {
        {"--rows 0 --features 10 --nnz 2", "--rows must be a whole number in 1.."},
        {"--rows -5 --features 10 --nnz 2", "--rows must be a whole number"},
        {"--rows 10 --features 0 --nnz 2", "--features must be a whole number in 1..16777216"},
        {"--rows 10 --features 10 --nnz 0", "--nnz must be a whole number in 1.."},
        {"--rows 10 --features 10 --nnz 11", "nnz (nonzeros per row) must not exceed features"},
        {"--rows 10 --features 99999999999 --nnz 2", "--features must be a whole number"},
        {"--rows 2000000000 --features 1000 --nnz 20", "rows x nnz must not exceed"},
        {"--rows 10x --features 10 --nnz 2", "--rows must be a whole number"},
        {"--rows 10 --features 10 --nnz 2 --sources 11", "sources must be in 1..min"},
        {"--rows 10 --features 10 --nnz 2 --loss hinge", "--loss must be logistic or ridge"},
        {"--rows 10 --features 10", "--nnz is required"},
        {"--rows 10 --features 10 --nnz 2 --seed -1", "--seed must be a whole number"},
    };
    char path[256], args[700], err[4096];

    temp_path(path, sizeof path, "bad");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "%s -o %s", cases[i].args, path);
        ck_assert_int_eq(gen(args, err, sizeof err), 2);
        ck_assert_msg(strstr(err, cases[i].says), "'%s': said '%s'", cases[i].args, err);
        ck_assert_msg(access(path, F_OK) != 0, "'%s' left a file", cases[i].args);
    }
    snprintf(args, sizeof args, "--rows 10 --features 10 --nnz 2");
    ck_assert_int_eq(gen(args, err, sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--output is required"));
    /* an unwritable place: a clear error, nothing left behind */
    ck_assert_int_eq(gen("--rows 10 --features 10 --nnz 2 -o /nonexistent/x.svm", err,
                         sizeof err), 2);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent/x.svm"));
}
END_TEST

int main(void)
{
    const char *bin = getenv("ECOPT_BIN");
    Suite *s = suite_create("gen");
    TCase *tc = tcase_create("gen");

    snprintf(ecopt, sizeof ecopt, "%s", bin && *bin ? bin : "build/ecopt");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_gen_deterministic);
    tcase_add_test(tc, test_gen_shape);
    tcase_add_test(tc, test_gen_loads_and_runs);
    tcase_add_test(tc, test_gen_bad_args);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
