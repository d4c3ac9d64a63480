/*
 * Writes the seed corpus of fuzz_wire: real frames of every type and of
 * every compressor, made by the encoders from real compressor output, each
 * prefixed with the u16 dimension the target decodes them for.
 * Usage: seeds_wire DIR (fuzz/corpus/wire).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "ecopt/compress.h"
#include "ecopt/wire.h"

static unsigned written;

static void put(const char *dir, const char *name, uint32_t d,
                const uint8_t *frame, long len)
{
    char path[512];
    FILE *f;
    uint8_t pre[2] = {(uint8_t)d, (uint8_t)(d >> 8)};

    if (len < 0) {
        fprintf(stderr, "seeds_wire: encoding %s failed (%ld)\n", name, len);
        exit(1);
    }
    snprintf(path, sizeof path, "%s/d%u-%s", dir, (unsigned)d, name);
    if (!(f = fopen(path, "wb")) || fwrite(pre, 1, 2, f) != 2 ||
        fwrite(frame, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    written++;
}

static void fill(double *x, uint32_t d, ec_rng *r)
{
    for (uint32_t j = 0; j < d; j++) {
        uint64_t u = ec_rng_below(r, 10);

        x[j] = u == 0 ? 0.0 : u == 1 ? -0.0 : ec_rng_normal(r);
    }
}

static void compress(ec_comp_type type, uint32_t k, uint32_t s, uint32_t d,
                     const double *x, ec_rng *r, ec_msg *out)
{
    ec_comp_spec spec = {.type = type, .k = k, .s = s};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, d, &e);

    if (!c) {
        fprintf(stderr, "seeds_wire: %s\n", e.msg);
        exit(1);
    }
    ec_compress(c, x, r, out);
    ec_compressor_free(c);
}

static void frames_for(const char *dir, uint32_t d)
{
    static const struct {
        const char *name;
        ec_comp_type q, extra;
        int has_extra;
    } ups[] = {
        {"up-none", EC_COMP_NONE, 0, 0},
        {"up-topk-extra-none", EC_COMP_TOPK, EC_COMP_NONE, 1},
        {"up-randk", EC_COMP_RANDK, 0, 0},
        {"up-randk-unbiased-extra-dither-unbiased", EC_COMP_RANDK_UNBIASED,
         EC_COMP_DITHER_UNBIASED, 1},
        {"up-dither", EC_COMP_DITHER, 0, 0},
    };
    size_t cap = EC_WIRE_HEADER_SIZE + ec_wire_max_payload(d);
    uint8_t *buf = malloc(cap);
    double *x = malloc(d * sizeof *x);
    uint32_t k = d > 4 ? d / 4 : 1;
    ec_rng r;
    ec_up up;
    ec_down down;

    if (!buf || !x || ec_up_init(&up, d) < 0 || ec_down_init(&down, d) < 0)
        exit(1);
    ec_rng_seed(&r, 7, d);
    put(dir, "hello", d, buf, ec_wire_encode_hello(buf, cap, 3, 2, 4242, d));
    put(dir, "welcome", d, buf, ec_wire_encode_welcome(buf, cap, 8, d));
    put(dir, "stop", d, buf, ec_wire_encode_stop(buf, cap, 99));
    put(dir, "error", d, buf, ec_wire_encode_error(buf, cap, 5,
        "worker 3: loss is NaN at round 5"));
    put(dir, "step-empty", d, buf, ec_wire_encode_step(buf, cap, 1, NULL, d));

    /* A sparse broadcast, then a dense one with a. */
    down.v[0] = 1.5;
    down.v[d - 1] = -0.0;
    down.bits = 1234;
    down.paper_bits = 5678;
    put(dir, "step-sparse", d, buf, ec_wire_encode_step(buf, cap, 2, &down, d));
    fill(down.v, d, &r);
    fill(down.a, d, &r);
    down.has_a = 1;
    down.init = 1;
    put(dir, "step-dense-a", d, buf, ec_wire_encode_step(buf, cap, 3, &down, d));

    for (size_t i = 0; i < sizeof ups / sizeof ups[0]; i++) {
        fill(x, d, &r);
        compress(ups[i].q, k, 5, d, x, &r, &up.q);
        up.has_extra = ups[i].has_extra;
        if (up.has_extra) {
            fill(x, d, &r);
            compress(ups[i].extra, 3 < d ? 3 : d, 2, d, x, &r, &up.extra);
        }
        put(dir, ups[i].name, d, buf,
            ec_wire_encode_up(buf, cap, 10 + i, &up));
    }
    /* A process's frame: the last UP above for workers 3 and 4. */
    {
        long len = ec_wire_ups_begin(buf, cap, 20);

        len = ec_wire_ups_add(buf, cap, (size_t)len, 3, &up);
        if (len > 0)
            len = ec_wire_ups_add(buf, cap, (size_t)len, 4, &up);
        put(dir, "ups", d, buf, len);
    }
    ec_up_clear(&up);
    ec_down_clear(&down);
    free(x);
    free(buf);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: seeds_wire DIR\n");
        return 2;
    }
    frames_for(argv[1], 8);
    frames_for(argv[1], 123);
    printf("%u frames in %s\n", written, argv[1]);
    return 0;
}
