/* ecopt gen: writes a deterministic synthetic LibSVM file (ecopt/gen.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "ecopt/gen.h"

static const char gen_usage[] =
    "usage: ecopt gen --rows N --features D --nnz K [options] -o FILE\n"
    "\n"
    "Writes a synthetic sparse LibSVM file: N rows of K nonzeros each over D\n"
    "features, in S contiguous blocks (sources) that each draw 80% of their\n"
    "features from their own slice of the D, so contiguous shards differ;\n"
    "labels +1/-1 from a planted model with noise. The same arguments give\n"
    "the same bytes.\n"
    "\n"
    "  -n, --rows N          rows (samples)\n"
    "  -D, --features D      features, 1..16777216\n"
    "  -k, --nnz K           nonzeros per row, 1..D; N x K at most 2^31\n"
    "  -s, --seed S          seed (default 1)\n"
    "      --sources S       row blocks (default min(10, N, D))\n"
    "      --loss NAME       logistic (labels drawn from sigmoid(4 margin),\n"
    "                        default) or ridge (sign of margin + noise)\n"
    "  -o, --output FILE     where to write (- for stdout); a file is written\n"
    "                        beside it and renamed, so it is whole or absent\n";

/* A whole number in lo..hi, or a message naming the option. */
static int parse_count(const char *name, const char *s, uint64_t lo,
                       uint64_t hi, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (!*s || strchr(s, '-') || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "ecopt gen: --%s must be a whole number in %" PRIu64
                "..%" PRIu64 " (got '%s')\n", name, lo, hi, s);
        return -1;
    }
    *out = v;
    return 0;
}

int cmd_gen(int argc, char **argv)
{
    static const struct option opts[] = {
        {"rows", required_argument, NULL, 'n'},
        {"features", required_argument, NULL, 'D'},
        {"nnz", required_argument, NULL, 'k'},
        {"seed", required_argument, NULL, 's'},
        {"sources", required_argument, NULL, 'S'},
        {"loss", required_argument, NULL, 'L'},
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    ec_gen_opts go = {.seed = 1, .labels = EC_GEN_LOGISTIC};
    const char *output = NULL, *why;
    int have_rows = 0, have_d = 0, have_k = 0, c, rc;
    char tmp[4200];
    FILE *f;
    ec_err e = {0};

    optind = 1;
    while ((c = getopt_long(argc, argv, "n:D:k:s:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_count("rows", optarg, 1, EC_GEN_MAX_NNZ, &go.rows) < 0)
                return EXIT_USAGE;
            have_rows = 1;
            break;
        case 'D':
            if (parse_count("features", optarg, 1, EC_GEN_MAX_D, &go.d) < 0)
                return EXIT_USAGE;
            have_d = 1;
            break;
        case 'k':
            if (parse_count("nnz", optarg, 1, EC_GEN_MAX_D, &go.nnz) < 0)
                return EXIT_USAGE;
            have_k = 1;
            break;
        case 's':
            if (parse_count("seed", optarg, 0, UINT64_MAX, &go.seed) < 0)
                return EXIT_USAGE;
            break;
        case 'S':
            if (parse_count("sources", optarg, 1, EC_GEN_MAX_NNZ, &go.sources) < 0)
                return EXIT_USAGE;
            break;
        case 'L':
            if (strcmp(optarg, "logistic") == 0)
                go.labels = EC_GEN_LOGISTIC;
            else if (strcmp(optarg, "ridge") == 0)
                go.labels = EC_GEN_RIDGE;
            else {
                fprintf(stderr, "ecopt gen: --loss must be logistic or ridge (got '%s')\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case 'o':
            output = optarg;
            break;
        case 'h':
            fputs(gen_usage, stdout);
            return EXIT_OK;
        default:
            fputs(gen_usage, stderr);
            return EXIT_USAGE;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "ecopt gen: unexpected argument '%s'\n%s", argv[optind], gen_usage);
        return EXIT_USAGE;
    }
    if (!have_rows || !have_d || !have_k || !output) {
        fprintf(stderr, "ecopt gen: --%s is required\n%s",
                !have_rows ? "rows" : !have_d ? "features" : !have_k ? "nnz" : "output",
                gen_usage);
        return EXIT_USAGE;
    }
    if ((why = ec_gen_check(&go))) {
        fprintf(stderr, "ecopt gen: %s\n", why);
        return EXIT_USAGE;
    }
    if (strcmp(output, "-") == 0) {
        rc = ec_gen_write(stdout, &go, &e);
        if (rc == 0 && fflush(stdout) != 0)
            rc = ec_err_set(&e, EC_EIO, "writing stdout: %s", strerror(errno));
        if (rc < 0)
            fprintf(stderr, "ecopt gen: %s\n", e.msg);
        return rc < 0 ? EXIT_INTERNAL : EXIT_OK;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", output, (long)getpid());
    if (!(f = fopen(tmp, "w"))) {
        fprintf(stderr, "ecopt gen: %s: %s\n", tmp, strerror(errno));
        return EXIT_USAGE;
    }
    rc = ec_gen_write(f, &go, &e);
    if (fclose(f) != 0 && rc == 0)
        rc = ec_err_set(&e, EC_EIO, "%s: %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, output) != 0)
        rc = ec_err_set(&e, EC_EIO, "%s: %s", output, strerror(errno));
    if (rc < 0) {
        fprintf(stderr, "ecopt gen: %s\n", e.msg);
        unlink(tmp);
        return rc == EC_EINVAL ? EXIT_USAGE : EXIT_INTERNAL;
    }
    return EXIT_OK;
}
