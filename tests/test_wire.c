/*
 * Tests for the wire protocol: every frame round-trips bit for bit with real
 * compressor output, and the decoders reject every truncation, every
 * inconsistent count or index, bad headers and random corruption with
 * EC_EPROTO, never reading past the bytes they are given (each decode gets
 * a malloc'd copy of exactly its input, so AddressSanitizer sees over-reads).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ecopt/compress.h"
#include "ecopt/wire.h"
#include "testutil.h"

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define CANARY 0xA5

/* ---- helpers --------------------------------------------------------- */

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* A malloc'd copy of exactly n bytes: reading p[n] is an ASan error. */
static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n);

    ck_assert(q || n == 0);
    if (n)
        memcpy(q, p, n);
    return q;
}

/* The first byte of p[0..n) that is not v, or n: one assertion instead of
 * n (Check records every assertion, which makes them slow in loops). */
static size_t first_not(const uint8_t *p, size_t n, uint8_t v)
{
    size_t i = 0;

    while (i < n && p[i] == v)
        i++;
    return i;
}

static int same_bits(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static ec_compressor *make_comp(ec_comp_type type, uint32_t k, uint32_t s,
                                uint32_t d)
{
    ec_comp_spec spec = {.type = type, .k = k, .s = s};
    ec_err e = {0};
    ec_compressor *c = ec_compressor_new(&spec, d, &e);

    ck_assert_msg(c != NULL, "ec_compressor_new: %s", e.msg);
    return c;
}

/* Gaussian entries with some exact +0.0 and -0.0 among them. */
static void fill(double *x, uint32_t d, ec_rng *r)
{
    for (uint32_t j = 0; j < d; j++) {
        uint64_t u = ec_rng_below(r, 10);

        x[j] = u == 0 ? 0.0 : u == 1 ? -0.0 : ec_rng_normal(r);
    }
}

static void assert_same_msg(const ec_msg *a, const ec_msg *b)
{
    ck_assert_int_eq(a->type, b->type);
    ck_assert_uint_eq(a->d, b->d);
    ck_assert_uint_eq(a->nnz, b->nnz);
    if (a->nnz) {
        ck_assert_mem_eq(a->idx, b->idx, a->nnz * sizeof *a->idx);
        ck_assert_mem_eq(a->val, b->val, a->nnz * sizeof *a->val);
    }
    ck_assert_uint_eq(a->value_bits, b->value_bits);
    ck_assert_uint_eq(a->index_bits, b->index_bits);
    ck_assert_uint_eq(a->paper_bits, b->paper_bits);
    ck_assert_uint_eq(a->seed, b->seed);
    ck_assert(same_bits(a->norm, b->norm));
    ck_assert(same_bits(a->scale, b->scale));
    ck_assert_uint_eq(a->s, b->s);
}

/* Decoded outputs for one d, reused across decodes as a receiver would. */
typedef struct sink {
    uint32_t d;
    ec_up up;
    ec_down down;
    int has_down;
    uint32_t u[4];
    char text[2048];
} sink;

static void sink_init(sink *s, uint32_t d)
{
    memset(s, 0, sizeof *s);
    s->d = d;
    ck_assert_int_eq(ec_up_init(&s->up, d), 0);
    ck_assert_int_eq(ec_down_init(&s->down, d), 0);
}

static void sink_clear(sink *s)
{
    ec_up_clear(&s->up);
    ec_down_clear(&s->down);
}

/* The payload decoder a receiver would call for h; STOP has none. */
static int decode_payload(const ec_wire_header *h, const uint8_t *p,
                          size_t len, sink *s, ec_err *e)
{
    switch (h->type) {
    case EC_WIRE_HELLO:
        return ec_wire_decode_hello(p, len, &s->u[0], &s->u[1], &s->u[2],
                                    &s->u[3], e);
    case EC_WIRE_WELCOME:
        return ec_wire_decode_welcome(p, len, &s->u[0], &s->u[1], e);
    case EC_WIRE_STEP:
        return ec_wire_decode_step(p, len, h->flags, s->d, &s->down,
                                   &s->has_down, e);
    case EC_WIRE_UP:
        return ec_wire_decode_up(p, len, s->d, &s->up, e);
    case EC_WIRE_STOP:
        return len == 0 ? 0 : ec_err_set(e, EC_EPROTO, "STOP has a payload");
    case EC_WIRE_ERROR:
        return ec_wire_decode_error(p, len, s->text, sizeof s->text, e);
    case EC_WIRE_UPS: {
        ec_wire_ups_rd it;
        const uint8_t *one;
        size_t onelen;
        uint32_t worker;
        int rc = ec_wire_ups_open(&it, p, len, e);

        while (rc == 0 &&
               (rc = ec_wire_ups_next(&it, &worker, &one, &onelen, e)) == 1)
            rc = ec_wire_decode_up(one, onelen, s->d, &s->up, e);
        return rc;
    }
    }
    ck_abort_msg("header decode let type %u through", (unsigned)h->type);
    return EC_EINVAL;
}

/*
 * What a receiver does with the bytes it got: header (from an exact copy of
 * at most 24 bytes), the length against what is there (a short frame is a
 * dead peer), then the payload from an exact copy of length bytes.
 */
static int decode_frame(const uint8_t *buf, size_t len, sink *s,
                        ec_wire_header *h, ec_err *e)
{
    size_t hlen = len < EC_WIRE_HEADER_SIZE ? len : EC_WIRE_HEADER_SIZE;
    uint8_t *hb = dup_exact(buf, hlen), *pb;
    int rc = ec_wire_header_decode(hb, hlen, ec_wire_max_payload(s->d), h, e);

    free(hb);
    if (rc < 0)
        return rc;
    if (h->length > len - EC_WIRE_HEADER_SIZE)
        return ec_err_set(e, EC_EPROTO, "frame truncated");
    pb = dup_exact(buf + EC_WIRE_HEADER_SIZE, h->length);
    rc = decode_payload(h, pb, h->length, s, e);
    free(pb);
    return rc;
}

/* Encodes an UP into a fresh buffer of exactly its size. */
static uint8_t *encode_up(const ec_up *up, uint64_t round, long *size)
{
    uint8_t tmp[1];
    long need;
    uint8_t *buf;
    size_t cap = 64;

    /* Grow until it fits; EC_ELIMIT is the only failure. */
    ck_assert_int_eq(ec_wire_encode_up(tmp, 0, round, up), EC_ELIMIT);
    for (;;) {
        buf = malloc(cap);
        ck_assert_ptr_nonnull(buf);
        need = ec_wire_encode_up(buf, cap, round, up);
        if (need >= 0)
            break;
        ck_assert_int_eq(need, EC_ELIMIT);
        free(buf);
        cap *= 2;
    }
    *size = need;
    return buf;
}

/* ---- valid frames, for truncation, canaries and mutation ------------- */

enum { FRAME_D = 123, FRAME_MAX = 16 };

typedef struct frame {
    const char *name;
    uint8_t buf[8192];
    long len;
} frame;

/* One of every frame shape at d = FRAME_D; returns how many. */
static int make_frames(frame *f)
{
    const uint32_t d = FRAME_D;
    static const struct {
        const char *name;
        ec_comp_type q, extra;
        uint32_t k;
        int has_extra;
    } ups[] = {
        {"UP none", EC_COMP_NONE, 0, 0, 0},
        {"UP topk+none", EC_COMP_TOPK, EC_COMP_NONE, 7, 1},
        {"UP randk", EC_COMP_RANDK, 0, 9, 0},
        {"UP randk-unbiased+dither-unbiased", EC_COMP_RANDK_UNBIASED,
         EC_COMP_DITHER_UNBIASED, 20, 1},
        {"UP dither", EC_COMP_DITHER, 0, 0, 0},
        {"UP topk k=d", EC_COMP_TOPK, 0, FRAME_D, 0},
    };
    double x[FRAME_D];
    ec_rng r;
    ec_up up;
    ec_down down;
    int n = 0;

    ec_rng_seed(&r, 7, 0);
    f[n].name = "HELLO";
    f[n].len = ec_wire_encode_hello(f[n].buf, sizeof f[n].buf, 3, 5, 4242, d);
    n++;
    f[n].name = "WELCOME";
    f[n].len = ec_wire_encode_welcome(f[n].buf, sizeof f[n].buf, 8, d);
    n++;
    f[n].name = "STOP";
    f[n].len = ec_wire_encode_stop(f[n].buf, sizeof f[n].buf, 99);
    n++;
    f[n].name = "ERROR";
    f[n].len = ec_wire_encode_error(f[n].buf, sizeof f[n].buf, 5,
                                    "worker 3: loss is NaN at round 5");
    n++;
    f[n].name = "STEP empty";
    f[n].len = ec_wire_encode_step(f[n].buf, sizeof f[n].buf, 1, NULL, d);
    n++;

    ck_assert_int_eq(ec_down_init(&down, d), 0);
    for (uint32_t j = 0; j < d; j += 6)
        down.v[j] = j % 12 ? -0.0 : 1.0 + j;
    down.bits = 1234;
    down.paper_bits = 5678;
    f[n].name = "STEP sparse";
    f[n].len = ec_wire_encode_step(f[n].buf, sizeof f[n].buf, 2, &down, d);
    n++;
    fill(down.v, d, &r);
    fill(down.a, d, &r);
    down.has_a = 1;
    down.init = 1;
    f[n].name = "STEP dense+a";
    f[n].len = ec_wire_encode_step(f[n].buf, sizeof f[n].buf, 3, &down, d);
    n++;
    ec_down_clear(&down);

    ck_assert_int_eq(ec_up_init(&up, d), 0);
    for (int i = 0; i < COUNT(ups); i++) {
        ec_compressor *c = make_comp(ups[i].q, ups[i].k, 5, d);

        fill(x, d, &r);
        ec_compress(c, x, &r, &up.q);
        ec_compressor_free(c);
        up.has_extra = ups[i].has_extra;
        if (up.has_extra) {
            c = make_comp(ups[i].extra, 3, 2, d);
            fill(x, d, &r);
            ec_compress(c, x, &r, &up.extra);
            ec_compressor_free(c);
        }
        f[n].name = ups[i].name;
        f[n].len = ec_wire_encode_up(f[n].buf, sizeof f[n].buf, 10 + i, &up);
        n++;
    }
    ec_up_clear(&up);

    /* The init exchange: an empty q as ec_up_init left it, a dense extra. */
    ck_assert_int_eq(ec_up_init(&up, d), 0);
    {
        ec_compressor *c = make_comp(EC_COMP_NONE, 0, 0, d);

        fill(x, d, &r);
        ec_compress(c, x, &r, &up.extra);
        ec_compressor_free(c);
    }
    up.has_extra = 1;
    f[n].name = "UP init exchange";
    f[n].len = ec_wire_encode_up(f[n].buf, sizeof f[n].buf, 0, &up);
    n++;
    ec_up_clear(&up);

    for (int i = 0; i < n; i++)
        ck_assert_msg(f[i].len > 0, "%s: %ld", f[i].name, f[i].len);
    ck_assert_int_le(n, FRAME_MAX);
    return n;
}

/* ---- round trips: UP ------------------------------------------------- */

/* Every row of the compressor table, so a compressor added there is
 * round-tripped here too. */
#define TYPE_OF(id, ...) id,
static const ec_comp_type all_types[] = {EC_COMPRESSORS(TYPE_OF)};
#undef TYPE_OF

START_TEST(test_up_round_trip)
{
    /* _i is the type of q; extra cycles through every type. */
    const ec_comp_type qtype = all_types[_i];
    static const uint32_t dims[] = {1, 2, 63, 64, 65, 123, 1000};
    ec_rng r;

    ec_rng_seed(&r, 100 + (uint64_t)_i, 0);
    for (int di = 0; di < COUNT(dims); di++) {
        const uint32_t d = dims[di];
        const uint32_t ks[] = {1, d / 3 + 1, d};
        double *x = malloc(d * sizeof *x);
        ec_up up;
        sink s;

        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(ec_up_init(&up, d), 0);
        sink_init(&s, d);
        for (int ki = 0; ki < COUNT(ks); ki++) {
            for (int et = -1; et < COUNT(all_types); et++) {
                ec_compressor *cq = make_comp(qtype, ks[ki], 1 + 7u * ki, d);
                ec_compressor *ce = NULL;
                ec_wire_header h;
                ec_err e = {0};
                long size;
                uint8_t *buf;

                fill(x, d, &r);
                ec_compress(cq, x, &r, &up.q);
                /* ec-lsvrg's refresh: a flag, no payload */
                up.refreshed = (et + ki) % 2 != 0;
                up.has_extra = et >= 0;
                if (up.has_extra) {
                    ce = make_comp(all_types[et], ks[2 - ki], 3, d);
                    fill(x, d, &r);
                    ec_compress(ce, x, &r, &up.extra);
                }
                buf = encode_up(&up, 77, &size);
                ck_assert_msg(decode_frame(buf, (size_t)size, &s, &h, &e) == 0,
                              "d=%u k=%u extra=%d: %s", d, ks[ki], et, e.msg);
                ck_assert_uint_eq(h.type, EC_WIRE_UP);
                ck_assert_uint_eq(h.round, 77);
                ck_assert_uint_eq(h.flags, 0);
                ck_assert_uint_eq(h.length + EC_WIRE_HEADER_SIZE, size);
                ck_assert_int_eq(s.up.has_extra, up.has_extra);
                ck_assert_int_eq(s.up.refreshed, up.refreshed);
                ck_assert_uint_eq((size_t)size, EC_WIRE_HEADER_SIZE + ec_wire_up_payload(&up));
                assert_same_msg(&s.up.q, &up.q);
                if (up.has_extra)
                    assert_same_msg(&s.up.extra, &up.extra);
                else
                    ck_assert_uint_eq(s.up.extra.nnz, 0);
                ck_assert_uint_eq(ec_up_bits(&s.up), ec_up_bits(&up));
                ck_assert_uint_eq(ec_up_paper_bits(&s.up),
                                  ec_up_paper_bits(&up));
                free(buf);
                ec_compressor_free(cq);
                ec_compressor_free(ce);
            }
        }
        sink_clear(&s);
        ec_up_clear(&up);
        free(x);
    }
}
END_TEST

/* A UPS frame carries each hosted worker's UP in order; each entry decodes
 * to the message encoded, and every inconsistency of the entries is a
 * protocol error. */
START_TEST(test_ups_round_trip)
{
    const uint32_t d = 40;
    double x[40];
    ec_compressor *c = make_comp(EC_COMP_TOPK, 3, 0, d);
    ec_up up[3], out;
    ec_rng r;
    ec_wire_header h;
    ec_wire_ups_rd it;
    ec_err e = {0};
    uint8_t buf[4096], small[64], *p;
    const uint8_t *one;
    size_t onelen;
    uint32_t worker;
    long len;
    int got;

    ec_rng_seed(&r, 11, 0);
    ck_assert_int_eq(ec_up_init(&out, d), 0);
    len = ec_wire_ups_begin(buf, sizeof buf, 42);
    ck_assert_int_eq(len, EC_WIRE_HEADER_SIZE + 4);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(ec_up_init(&up[i], d), 0);
        fill(x, d, &r);
        ec_compress(c, x, &r, &up[i].q);
        up[i].has_stats = i == 1;
        up[i].ef_in = 2.5;
        up[i].ef_out = i == 1 ? 0.25 : 0.0;
        if (!up[i].has_stats)
            up[i].ef_in = 0.0;
        len = ec_wire_ups_add(buf, sizeof buf, (size_t)len, 5 + i, &up[i]);
        ck_assert_int_gt(len, 0);
    }
    /* No room: EC_ELIMIT, the frame so far untouched. */
    memcpy(small, buf, sizeof small);
    ck_assert_int_eq(ec_wire_ups_add(small, sizeof small, EC_WIRE_HEADER_SIZE + 4,
                                     9, &up[0]), EC_ELIMIT);
    ck_assert_int_eq(ec_wire_header_decode(buf, (size_t)len,
                                           ec_wire_max_payload_ups(d, 3), &h, &e), 0);
    ck_assert_uint_eq(h.type, EC_WIRE_UPS);
    ck_assert_uint_eq(h.round, 42);
    ck_assert_uint_eq(h.length, (size_t)len - EC_WIRE_HEADER_SIZE);
    ck_assert_int_eq(ec_wire_ups_open(&it, buf + EC_WIRE_HEADER_SIZE, h.length, &e), 0);
    for (int i = 0; i < 3; i++) {
        got = ec_wire_ups_next(&it, &worker, &one, &onelen, &e);
        ck_assert_int_eq(got, 1);
        ck_assert_uint_eq(worker, 5 + i);
        ck_assert_uint_eq(onelen, ec_wire_up_payload(&up[i]));
        ck_assert_int_eq(ec_wire_decode_up(one, onelen, d, &out, &e), 0);
        assert_same_msg(&out.q, &up[i].q);
        ck_assert_int_eq(out.has_stats, up[i].has_stats);
        ck_assert(out.ef_out == up[i].ef_out);
    }
    ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), 0);
    /* A UPS frame's limit grows with the workers it carries. */
    ck_assert_int_eq(ec_wire_header_decode(buf, (size_t)len,
                                           h.length - 1, &h, &e),
                     EC_EPROTO);
    ck_assert_uint_ge(ec_wire_max_payload_ups(d, 3), 3 * ec_wire_max_payload_ups(d, 1) / 2);

    /* Hostile payloads: a count above the entries, trailing bytes, an
     * entry length past the end. */
    p = malloc(h.length + 8);
    memcpy(p, buf + EC_WIRE_HEADER_SIZE, h.length);
    p[0] = 4;
    ck_assert_int_eq(ec_wire_ups_open(&it, p, h.length, &e), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), 1);
    ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "truncated"));
    p[0] = 3;
    memset(p + h.length, 0, 8);
    ck_assert_int_eq(ec_wire_ups_open(&it, p, h.length + 8, &e), 0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), 1);
    ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "trailing"));
    p[8] = 0xff;           /* the first entry's length, low byte */
    p[9] = 0xff;
    ck_assert_int_eq(ec_wire_ups_open(&it, p, h.length, &e), 0);
    ck_assert_int_eq(ec_wire_ups_next(&it, &worker, &one, &onelen, &e), EC_EPROTO);
    ck_assert_int_eq(ec_wire_ups_open(&it, p, 3, &e), EC_EPROTO);
    free(p);
    for (int i = 0; i < 3; i++)
        ec_up_clear(&up[i]);
    ec_up_clear(&out);
    ec_compressor_free(c);
}
END_TEST

START_TEST(test_up_init_exchange)
{
    /* The init exchange sends an empty q (as ec_up_init left it: type
     * none, nnz 0) and the dense gradient as extra. */
    const uint32_t d = 50;
    double x[50];
    ec_compressor *c = make_comp(EC_COMP_NONE, 0, 0, d);
    ec_rng r;
    ec_up up;
    sink s;
    ec_wire_header h;
    ec_err e = {0};
    long size;
    uint8_t *buf;

    ec_rng_seed(&r, 5, 0);
    ck_assert_int_eq(ec_up_init(&up, d), 0);
    sink_init(&s, d);
    fill(x, d, &r);
    ec_compress(c, x, &r, &up.extra);
    up.has_extra = 1;
    buf = encode_up(&up, 0, &size);
    /* flags, q's fixed part alone, extra's fixed part and d values. */
    ck_assert_int_eq(size, EC_WIRE_HEADER_SIZE + 4 + 8 + 8 + 8 * d);
    ck_assert_msg(decode_frame(buf, (size_t)size, &s, &h, &e) == 0, "%s",
                  e.msg);
    assert_same_msg(&s.up.q, &up.q);
    assert_same_msg(&s.up.extra, &up.extra);
    ck_assert_uint_eq(s.up.q.value_bits + s.up.q.paper_bits, 0);
    ck_assert_uint_eq(ec_up_bits(&s.up), 64 * d);
    free(buf);
    sink_clear(&s);
    ec_up_clear(&up);
    ec_compressor_free(c);
}
END_TEST

/*
 * The bit counters are not on the wire: the decoder derives them. For
 * every compressor type, at dimensions on both sides of powers of two (the
 * index width) and level counts on both sides of them (the level width),
 * with vectors that give dither no levels at all (zero, NaN), the decoded
 * counters are the encoder's. The process backend's metric rows are sums
 * of these counters, so this is what keeps them bitwise equal to the
 * in-process run's.
 */
START_TEST(test_up_bits_every_type)
{
    const ec_comp_type type = all_types[_i];
    static const uint32_t dims[] = {1, 2, 3, 64, 65, 1024, 1025, 4097};
    static const uint32_t levels[] = {1, 2, 3, 4, 7, 8, 255, 256, 65535};
    enum { GAUSS, ZERO, NOT_FINITE, VECTORS };
    ec_rng r;

    ec_rng_seed(&r, 600 + (uint64_t)_i, 0);
    for (int di = 0; di < COUNT(dims); di++) {
        const uint32_t d = dims[di];
        const uint32_t ks[] = {1, (d + 1) / 2, d};
        double *x = malloc(d * sizeof *x);
        ec_up up;
        sink s;

        ck_assert_ptr_nonnull(x);
        ck_assert_int_eq(ec_up_init(&up, d), 0);
        sink_init(&s, d);
        for (int pi = 0; pi < COUNT(levels); pi++) {
            for (int vi = 0; vi < VECTORS; vi++) {
                /* The message as q alone, then as extra beside an init
                 * exchange's empty q. */
                for (int as_extra = 0; as_extra < 2; as_extra++) {
                    ec_compressor *c =
                        make_comp(type, ks[pi % 3], levels[pi], d);
                    ec_msg *m = as_extra ? &up.extra : &up.q;
                    const ec_msg *got = as_extra ? &s.up.extra : &s.up.q;
                    ec_wire_header h;
                    ec_err e = {0};
                    long size;
                    uint8_t *buf;

                    if (vi == GAUSS)
                        fill(x, d, &r);
                    for (uint32_t j = 0; vi != GAUSS && j < d; j++)
                        x[j] = vi == ZERO ? 0.0 : j == d / 2 ? NAN : 1.0;
                    ec_compress(c, x, &r, m);
                    if (as_extra) {
                        ec_msg_clear(&up.q);
                        ck_assert_int_eq(ec_msg_init(&up.q, d), 0);
                    }
                    up.has_extra = as_extra;
                    /* Leftovers in the sink must not survive. */
                    s.up.q.value_bits = s.up.extra.value_bits = 12345;
                    buf = encode_up(&up, 3, &size);
                    ck_assert_msg(
                        decode_frame(buf, (size_t)size, &s, &h, &e) == 0,
                        "%s d=%u: %s", ec_comp_name(type), d, e.msg);
                    ck_assert_uint_eq(got->nnz, m->nnz);
                    ck_assert_msg(got->value_bits == m->value_bits &&
                                      got->index_bits == m->index_bits &&
                                      got->paper_bits == m->paper_bits,
                                  "%s d=%u nnz=%u s=%u: decoded %llu/%llu/"
                                  "%llu bits, sent %llu/%llu/%llu",
                                  ec_comp_name(type), d, m->nnz, m->s,
                                  (unsigned long long)got->value_bits,
                                  (unsigned long long)got->index_bits,
                                  (unsigned long long)got->paper_bits,
                                  (unsigned long long)m->value_bits,
                                  (unsigned long long)m->index_bits,
                                  (unsigned long long)m->paper_bits);
                    if (as_extra)
                        ck_assert_uint_eq(s.up.q.value_bits +
                                              s.up.q.index_bits +
                                              s.up.q.paper_bits,
                                          0);
                    ck_assert_uint_eq(ec_up_bits(&s.up), ec_up_bits(&up));
                    ck_assert_uint_eq(ec_up_paper_bits(&s.up),
                                      ec_up_paper_bits(&up));
                    free(buf);
                    ec_compressor_free(c);
                }
            }
        }
        sink_clear(&s);
        ec_up_clear(&up);
        free(x);
    }
}
END_TEST

START_TEST(test_randk_indices_match_compress)
{
    /* The decoder's derivation is the compressor's: same seed, same set,
     * and the scratch bitmap is zero again afterwards. */
    static const uint32_t shapes[][2] = {{1, 1},    {64, 64}, {65, 1},
                                         {123, 60}, {1000, 999}, {4096, 17}};

    for (int i = 0; i < COUNT(shapes); i++) {
        const uint32_t d = shapes[i][0], k = shapes[i][1];
        const size_t words = (d + 63) / 64;
        ec_compressor *c = make_comp(EC_COMP_RANDK, k, 0, d);
        double *x = calloc(d, sizeof *x);
        uint64_t *bitmap = calloc(words, sizeof *bitmap);
        uint32_t *idx = malloc(d * sizeof *idx);
        ec_msg m;
        ec_rng r;

        ck_assert(x && bitmap && idx);
        ck_assert_int_eq(ec_msg_init(&m, d), 0);
        ec_rng_seed(&r, 900 + (uint64_t)i, 0);
        for (int rep = 0; rep < 10; rep++) {
            ec_compress(c, x, &r, &m);
            ec_randk_indices(m.seed, d, k, bitmap, idx);
            ck_assert_mem_eq(idx, m.idx, k * sizeof *idx);
            for (size_t w = 0; w < words; w++)
                ck_assert_uint_eq(bitmap[w], 0);
        }
        ec_msg_clear(&m);
        ec_compressor_free(c);
        free(x);
        free(bitmap);
        free(idx);
    }
}
END_TEST

/* ---- round trips: STEP and the small frames -------------------------- */

enum step_kind {
    STEP_SPARSE,       /* 20 nonzeros of 123 */
    STEP_DENSE,        /* every entry nonzero */
    STEP_NEG_ZEROS,    /* sparse, with -0.0 entries that must survive */
    STEP_ALL_ZERO,     /* the init broadcast's v */
    STEP_EDGE,         /* exactly at the sparse/dense boundary */
    STEP_KINDS
};

static void fill_step(double *v, uint32_t d, enum step_kind kind, ec_rng *r)
{
    memset(v, 0, d * sizeof *v);
    switch (kind) {
    case STEP_SPARSE:
        for (uint32_t i = 0; i < 20; i++)
            v[(i * 37 + 5) % d] = ec_rng_normal(r);
        break;
    case STEP_DENSE:
        for (uint32_t j = 0; j < d; j++)
            v[j] = ec_rng_normal(r) + 10.0;
        break;
    case STEP_NEG_ZEROS:
        for (uint32_t j = 0; j < d; j += 5)
            v[j] = j % 10 ? -0.0 : ec_rng_normal(r);
        break;
    case STEP_ALL_ZERO:
    case STEP_KINDS:
        break;
    case STEP_EDGE:
        /* 12 nnz < 8 d fails first at nnz = ceil(2d/3). */
        for (uint32_t j = 0; j < (2 * d + 2) / 3; j++)
            v[j] = 1.0;
        break;
    }
}

/* A vector's encoded size as the format defines it: sparse (kind 1, 12
 * bytes an entry whose bit pattern is not zero) only when that is below
 * 8 d, dense (kind 0) otherwise, even at a tie. */
static long vec_bytes(const double *v, uint32_t d, uint8_t *kind)
{
    long nnz = 0;

    for (uint32_t j = 0; j < d; j++) {
        uint64_t bits;

        memcpy(&bits, &v[j], sizeof bits);
        nnz += bits != 0;
    }
    *kind = 12 * nnz < 8 * (long)d;
    return 8 + (*kind ? 12 * nnz : 8 * (long)d);
}

START_TEST(test_step_round_trip)
{
    static const uint32_t dims[] = {1, 3, 123, 1000};
    ec_rng r;

    ec_rng_seed(&r, 200, 0);
    for (int di = 0; di < COUNT(dims); di++) {
        const uint32_t d = dims[di];
        uint8_t *buf = malloc(32 + 20 * (size_t)d + 64);
        size_t cap = 32 + 20 * (size_t)d + 64;
        ec_down down;
        sink s;

        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(ec_down_init(&down, d), 0);
        sink_init(&s, d);
        for (int vk = 0; vk < STEP_KINDS; vk++) {
            for (int ak = -1; ak < STEP_KINDS; ak++) {
                ec_wire_header h;
                ec_err e = {0};
                uint8_t kind, akind;
                long size;

                fill_step(down.v, d, (enum step_kind)vk, &r);
                down.has_a = ak >= 0;
                fill_step(down.a, d,
                          ak >= 0 ? (enum step_kind)ak : STEP_ALL_ZERO, &r);
                down.init = vk == STEP_ALL_ZERO;
                down.bits = ec_rng_next(&r);
                down.paper_bits = ec_rng_next(&r);
                /* Leftovers in the sink's a must not survive !has_a. */
                s.down.a[0] = 42.0;
                size = ec_wire_encode_step(buf, cap, 9, &down, d);
                ck_assert_int_eq(size, EC_WIRE_HEADER_SIZE + 20 +
                                           vec_bytes(down.v, d, &kind) +
                                           (down.has_a
                                                ? vec_bytes(down.a, d, &akind)
                                                : 0));
                ck_assert_uint_eq(buf[EC_WIRE_HEADER_SIZE + 20], kind);
                ck_assert_msg(decode_frame(buf, (size_t)size, &s, &h, &e) == 0,
                              "d=%u v=%d a=%d: %s", d, vk, ak, e.msg);
                ck_assert_uint_eq(h.flags, EC_WIRE_STEP_HAS_DOWN);
                ck_assert_int_eq(s.has_down, 1);
                ck_assert_int_eq(s.down.init, down.init);
                ck_assert_int_eq(s.down.has_a, down.has_a);
                ck_assert_uint_eq(s.down.bits, down.bits);
                ck_assert_uint_eq(s.down.paper_bits, down.paper_bits);
                ck_assert_mem_eq(s.down.v, down.v, d * sizeof *down.v);
                ck_assert_mem_eq(s.down.a, down.a, d * sizeof *down.a);
            }
        }
        sink_clear(&s);
        ec_down_clear(&down);
        free(buf);
    }
}
END_TEST

START_TEST(test_step_empty)
{
    uint8_t buf[EC_WIRE_HEADER_SIZE];
    ec_wire_header h;
    ec_err e = {0};
    sink s;

    sink_init(&s, 10);
    ck_assert_int_eq(ec_wire_encode_step(buf, sizeof buf, 4, NULL, 10),
                     EC_WIRE_HEADER_SIZE);
    s.has_down = 1;
    ck_assert_int_eq(decode_frame(buf, sizeof buf, &s, &h, &e), 0);
    ck_assert_uint_eq(h.flags, 0);
    ck_assert_uint_eq(h.length, 0);
    ck_assert_uint_eq(h.round, 4);
    ck_assert_int_eq(s.has_down, 0);
    sink_clear(&s);
}
END_TEST

START_TEST(test_small_frames_round_trip)
{
    uint8_t buf[2048];
    char long_text[2000], cut[1100];
    ec_wire_header h;
    ec_err e = {0};
    sink s;
    long n;

    sink_init(&s, 4);
    n = ec_wire_encode_hello(buf, sizeof buf, 7, 9, 31337, 0xfffffffeu);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE + 16);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_uint_eq(h.type, EC_WIRE_HELLO);
    ck_assert_uint_eq(s.u[0], 7);
    ck_assert_uint_eq(s.u[1], 9);
    ck_assert_uint_eq(s.u[2], 31337);
    ck_assert_uint_eq(s.u[3], 0xfffffffeu);
    /* A process hosts at least one worker, and no block passes 2^32. */
    n = ec_wire_encode_hello(buf, sizeof buf, 7, 0, 1, 10);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "HELLO for 0 workers"));
    n = ec_wire_encode_hello(buf, sizeof buf, 0xfffffff0u, 0x20, 1, 10);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), EC_EPROTO);

    n = ec_wire_encode_welcome(buf, sizeof buf, 16, 123);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE + 8);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_uint_eq(h.type, EC_WIRE_WELCOME);
    ck_assert_uint_eq(s.u[0], 16);
    ck_assert_uint_eq(s.u[1], 123);

    n = ec_wire_encode_stop(buf, sizeof buf, UINT64_MAX);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_uint_eq(h.type, EC_WIRE_STOP);
    ck_assert_uint_eq(h.round, UINT64_MAX);

    n = ec_wire_encode_error(buf, sizeof buf, 3, "out of memory");
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE + 13);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_str_eq(s.text, "out of memory");

    n = ec_wire_encode_error(buf, sizeof buf, 3, NULL);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_str_eq(s.text, "");

    /* Long text is cut to 1024 bytes... */
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    n = ec_wire_encode_error(buf, sizeof buf, 3, long_text);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE + 1024);
    ck_assert_int_eq(decode_frame(buf, (size_t)n, &s, &h, &e), 0);
    ck_assert_uint_eq(strlen(s.text), 1024);

    /* ...and never inside a UTF-8 sequence ("\xc3\xa9" straddles 1024). */
    memset(long_text, 'a', 1023);
    memcpy(long_text + 1023, "\xc3\xa9tail", 7);
    n = ec_wire_encode_error(buf, sizeof buf, 3, long_text);
    ck_assert_int_eq(n, EC_WIRE_HEADER_SIZE + 1023);

    /* The decoder truncates into a small buffer, also at a boundary. */
    n = ec_wire_encode_error(buf, sizeof buf, 3, "ab\xc3\xa9" "cd");
    ck_assert_int_eq(ec_wire_decode_error(buf + EC_WIRE_HEADER_SIZE, 6, cut, 4,
                                          &e), 0);
    ck_assert_str_eq(cut, "ab");
    ck_assert_int_eq(ec_wire_decode_error(buf + EC_WIRE_HEADER_SIZE, 6, cut, 5,
                                          &e), 0);
    ck_assert_str_eq(cut, "ab\xc3\xa9");
    ck_assert_int_eq(ec_wire_decode_error(buf + EC_WIRE_HEADER_SIZE, 6, cut, 0,
                                          &e), 0);
    sink_clear(&s);
}
END_TEST

START_TEST(test_documented_sizes)
{
    /* The sizes the report quotes, so a format change shows up here. */
    const uint32_t d = 123;
    double x[123], v[123] = {0};
    uint8_t buf[4096];
    ec_compressor *c;
    ec_rng r;
    ec_up up;
    ec_down down = {.v = v, .a = v, .has_a = 0};

    ec_rng_seed(&r, 1, 0);
    fill(x, d, &r);
    ck_assert_int_eq(ec_up_init(&up, d), 0);

    /* header 24 + UP flags 4 + message type/nnz 8, then the body: */
    c = make_comp(EC_COMP_TOPK, 1, 0, d);
    ec_compress(c, x, &r, &up.q);           /* one index, one value */
    ck_assert_int_eq(ec_wire_encode_up(buf, sizeof buf, 1, &up), 36 + 12);
    ec_compressor_free(c);

    c = make_comp(EC_COMP_RANDK, 1, 0, d);
    ec_compress(c, x, &r, &up.q);           /* the seed, one value */
    ck_assert_int_eq(ec_wire_encode_up(buf, sizeof buf, 1, &up), 36 + 16);
    ec_compressor_free(c);

    c = make_comp(EC_COMP_NONE, 0, 0, d);
    ec_compress(c, x, &r, &up.q);           /* d values */
    ck_assert_int_eq(ec_wire_encode_up(buf, sizeof buf, 1, &up), 36 + 984);
    ec_compressor_free(c);

    /* norm, scale, s; then an index and a value per nonzero level (this
     * vector leaves 30 of them). */
    c = make_comp(EC_COMP_DITHER, 0, 4, d);
    ec_compress(c, x, &r, &up.q);
    ck_assert_uint_eq(up.q.nnz, 30);
    ck_assert_int_eq(ec_wire_encode_up(buf, sizeof buf, 1, &up),
                     36 + 20 + 12 * 30);
    ec_compressor_free(c);

    for (uint32_t i = 0; i < 20; i++)
        v[i * 6] = 1.0 + i;
    ck_assert_int_eq(ec_wire_encode_step(buf, sizeof buf, 1, &down, d), 292);
    ec_up_clear(&up);
}
END_TEST

START_TEST(test_max_payload)
{
    /* Two dither messages with every level nonzero and ECLK's two sums
     * are the largest UP (two topk with k = d come 40 bytes short); the
     * header accepts exactly that much and no more. */
    const uint32_t d = 123;
    const size_t max = ec_wire_max_payload(d);
    double x[123];
    ec_compressor *c = make_comp(EC_COMP_DITHER, 0, 65535, d);
    ec_compressor *cu = make_comp(EC_COMP_DITHER_UNBIASED, 0, 65535, d);
    ec_compressor *ct = make_comp(EC_COMP_TOPK, d, 0, d);
    uint8_t hb[EC_WIRE_HEADER_SIZE];
    ec_wire_header h = {EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_UP, 0, 0, 0};
    ec_err e = {0};
    ec_rng r;
    ec_up up;
    long size;
    uint8_t *buf;

    /* flags, two dither messages, the stats and the value */
    ck_assert_uint_eq(max, 4 + 2 * (8 + 20 + 12 * d) + 16 + 8);
    ck_assert_uint_eq(ec_wire_max_payload(1), 1024);
    ck_assert_uint_eq(ec_wire_max_payload(UINT32_MAX), EC_WIRE_MAX_PAYLOAD);
    ck_assert_uint_le(ec_wire_max_payload(1000000), EC_WIRE_MAX_PAYLOAD);

    ec_rng_seed(&r, 2, 0);
    ck_assert_int_eq(ec_up_init(&up, d), 0);
    /* Equal magnitudes put every |x_j| s / ||x|| far above one level. */
    for (uint32_t j = 0; j < d; j++)
        x[j] = j % 2 ? 1.0 : -1.0;
    ec_compress(ct, x, &r, &up.q);
    ec_compress(ct, x, &r, &up.extra);
    up.has_extra = 1;
    up.has_stats = 1;
    up.has_value = 1;
    buf = encode_up(&up, 0, &size);
    ck_assert_uint_eq((size_t)size, EC_WIRE_HEADER_SIZE + max - 40);
    free(buf);
    ec_compress(c, x, &r, &up.q);
    ec_compress(cu, x, &r, &up.extra);
    ck_assert_uint_eq(up.q.nnz, d);
    ck_assert_uint_eq(up.extra.nnz, d);
    buf = encode_up(&up, 0, &size);
    ck_assert_uint_eq((size_t)size, EC_WIRE_HEADER_SIZE + max);

    h.length = (uint32_t)max;
    ec_wire_header_encode(hb, &h);
    ck_assert_int_eq(ec_wire_header_decode(hb, sizeof hb, max, &h, &e), 0);
    h.length = (uint32_t)max + 1;
    ec_wire_header_encode(hb, &h);
    ck_assert_int_eq(ec_wire_header_decode(hb, sizeof hb, max, &h, &e),
                     EC_EPROTO);
    /* A caller's limit above the absolute cap is held to the cap. */
    h.length = EC_WIRE_MAX_PAYLOAD + 1;
    ec_wire_header_encode(hb, &h);
    ck_assert_int_eq(ec_wire_header_decode(hb, sizeof hb, SIZE_MAX, &h, &e),
                     EC_EPROTO);
    free(buf);
    ec_up_clear(&up);
    ec_compressor_free(c);
    ec_compressor_free(cu);
    ec_compressor_free(ct);
}
END_TEST

START_TEST(test_encode_over_absolute_cap)
{
    /* Two dense vectors of 4.5M doubles exceed the 64 MiB cap: the encoder
     * refuses before writing, whatever capacity it is told it has. */
    const uint32_t d = 4500000;
    double *v = malloc((size_t)d * sizeof *v);
    ec_down down = {.v = v, .a = v, .has_a = 1};
    uint8_t buf[64];

    ck_assert_ptr_nonnull(v);
    for (uint32_t j = 0; j < d; j++)
        v[j] = 1.0;
    memset(buf, CANARY, sizeof buf);
    ck_assert_int_eq(ec_wire_encode_step(buf, SIZE_MAX, 1, &down, d),
                     EC_ELIMIT);
    ck_assert_uint_eq(first_not(buf, sizeof buf, CANARY), sizeof buf);
    free(v);
}
END_TEST

/* ---- hostile input: headers ------------------------------------------ */

static const struct header_case {
    const char *name;
    uint32_t magic;
    uint16_t version, type;
    uint32_t flags, length;
    size_t max;
    const char *sentence;   /* a substring of e.msg */
    uint64_t round;         /* HELLO and WELCOME must say 0 */
} header_cases[] = {
    {"bad magic", 0x12345678, EC_WIRE_VERSION, EC_WIRE_UP, 0, 10, 4000,
     "bad magic 0x12345678", 5},
    {"bad version", EC_WIRE_MAGIC, 7, EC_WIRE_UP, 0, 10, 4000,
     "unsupported version 7", 5},
    {"version 0", EC_WIRE_MAGIC, 0, EC_WIRE_UP, 0, 10, 4000,
     "unsupported version 0", 5},
    {"unknown type", EC_WIRE_MAGIC, EC_WIRE_VERSION, 99, 0, 10, 4000,
     "unknown frame type 99", 5},
    {"type 0", EC_WIRE_MAGIC, EC_WIRE_VERSION, 0, 0, 10, 4000, "unknown frame type 0", 5},
    {"type 8", EC_WIRE_MAGIC, EC_WIRE_VERSION, 8, 0, 10, 4000, "unknown frame type 8", 5},
    {"version 1", EC_WIRE_MAGIC, 1, EC_WIRE_UP, 0, 10, 4000,
     "unsupported version 1", 5},
    {"oversize", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_UP, 0, 1000000, 4000,
     "payload length 1000000 over the limit 4000", 5},
    {"oversize u32", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_STEP, 1, UINT32_MAX, 4000,
     "over the limit", 5},
    {"flags on UP", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_UP, 1, 10, 4000,
     "unknown flags 0x1", 5},
    {"flags on STEP", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_STEP, 3, 10, 4000,
     "unknown flags 0x2", 5},
    {"HELLO short", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_HELLO, 0, 11, 4000,
     "HELLO payload length 11", 0},
    {"WELCOME long", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_WELCOME, 0, 9, 4000,
     "WELCOME payload length 9", 0},
    {"STOP payload", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_STOP, 0, 1, 4000,
     "STOP payload length 1", 5},
    {"STEP empty payload", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_STEP, 0, 8, 4000,
     "STEP payload length 8", 5},
    {"ERROR too long", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_ERROR, 0, 1025, 4000,
     "ERROR text length 1025", 5},
    {"HELLO round", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_HELLO, 0, 16, 4000,
     "HELLO frame with round 5 (must be 0)", 5},
    {"WELCOME round", EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_WELCOME, 0, 8, 4000,
     "WELCOME frame with round 1 (must be 0)", 1},
};

START_TEST(test_header_rejects)
{
    const struct header_case *c = &header_cases[_i];
    ec_wire_header h = {c->magic,  c->version, c->type,
                        c->flags,  c->length,  c->round};
    ec_wire_header out;
    uint8_t raw[EC_WIRE_HEADER_SIZE], *hb;
    ec_err e = {0};

    ec_wire_header_encode(raw, &h);
    hb = dup_exact(raw, sizeof raw);
    ck_assert_int_eq(ec_wire_header_decode(hb, sizeof raw, c->max, &out, &e),
                     EC_EPROTO);
    ck_assert_int_eq(e.code, EC_EPROTO);
    ck_assert_msg(strstr(e.msg, c->sentence), "%s: \"%s\" lacks \"%s\"",
                  c->name, e.msg, c->sentence);
    free(hb);
}
END_TEST

START_TEST(test_header_layout)
{
    /* The bytes are the documented little-endian layout. */
    static const uint8_t want[EC_WIRE_HEADER_SIZE] = {
        'E', 'C', 'O', 'P', 1, 0, 4, 0, 0x01, 0, 0, 0,
        0x10, 0x20, 0, 0, 8, 7, 6, 5, 4, 3, 2, 1};
    ec_wire_header h = {EC_WIRE_MAGIC, 1, EC_WIRE_UP, 1, 0x2010,
                        0x0102030405060708ull};
    uint8_t buf[EC_WIRE_HEADER_SIZE];

    ec_wire_header_encode(buf, &h);
    ck_assert_mem_eq(buf, want, sizeof want);
}
END_TEST

/* ---- hostile input: truncation --------------------------------------- */

START_TEST(test_every_truncation)
{
    static frame f[FRAME_MAX];
    int n = make_frames(f);
    sink s;

    sink_init(&s, FRAME_D);
    for (int i = 0; i < n; i++) {
        ec_wire_header h;
        ec_err e = {0};

        ck_assert_msg(decode_frame(f[i].buf, (size_t)f[i].len, &s, &h, &e) ==
                          0,
                      "%s: %s", f[i].name, e.msg);
        /* As a frame: every prefix is short of what the header says. */
        for (long len = 0; len < f[i].len; len++) {
            uint8_t *b = dup_exact(f[i].buf, (size_t)len);

            ck_assert_msg(decode_frame(b, (size_t)len, &s, &h, &e) ==
                              EC_EPROTO,
                          "%s cut at %ld decoded", f[i].name, len);
            free(b);
        }
        /* As a payload: each decoder notices on its own (ERROR text has no
         * structure, so only the frame length can tell it was cut). */
        ck_assert_int_eq(ec_wire_header_decode(f[i].buf, EC_WIRE_HEADER_SIZE,
                                               ec_wire_max_payload(FRAME_D),
                                               &h, &e),
                         0);
        if (h.type == EC_WIRE_ERROR)
            continue;
        for (uint32_t len = 0; len < h.length; len++) {
            uint8_t *b = dup_exact(f[i].buf + EC_WIRE_HEADER_SIZE, len);

            e.code = 0;
            ck_assert_msg(decode_payload(&h, b, len, &s, &e) == EC_EPROTO,
                          "%s payload cut at %u decoded", f[i].name, len);
            ck_assert_int_eq(e.code, EC_EPROTO);
            free(b);
        }
    }
    sink_clear(&s);
}
END_TEST

/* ---- hostile input: inconsistent payloads ---------------------------- */

/*
 * Edits of a valid payload. Offsets: UP flags at 0, q's fixed part at 4
 * (type 4, reserved 5..7, nnz 8), then q's body at 12: topk indices at 12;
 * randk's seed at 12; dither's norm at 12, scale 20, s 28, indices at 32.
 */
typedef struct payload_case {
    const char *name;
    ec_comp_type type;      /* of q; extra is absent */
    uint32_t k;
    size_t at;              /* where to write */
    int width;              /* 1, 2 or 4 bytes; 0: append a byte */
    uint32_t value;
    int copy;               /* >= 0: write the value of idx[copy] instead */
    const char *sentence;
} payload_case;

#define IDX(n) (12 + 4 * (n))          /* topk */
#define DITHER_S 28
#define DITHER_IDX(n) (32 + 4 * (n))

static size_t index_at(ec_comp_type type, int n)
{
    return type == EC_COMP_TOPK ? IDX(n) : DITHER_IDX(n);
}

static const payload_case up_cases[] = {
    {"nnz > d", EC_COMP_TOPK, 5, 8, 4, 124, -1, "nnz 124 over d = 123"},
    {"nnz huge", EC_COMP_RANDK, 5, 8, 4, UINT32_MAX, -1, "over d = 123"},
    {"randk nnz > d", EC_COMP_RANDK, 5, 8, 4, 200, -1, "nnz 200 over d"},
    {"none nnz != d", EC_COMP_NONE, 0, 8, 4, 122, -1, "must be 0 or d = 123"},
    {"none nnz short", EC_COMP_NONE, 0, 8, 4, 1, -1, "must be 0 or d"},
    {"topk nnz 0", EC_COMP_TOPK, 5, 8, 4, 0, -1,
     "UP q of type topk: compressor.k must be in 1..123 (got 0)"},
    {"randk nnz 0", EC_COMP_RANDK, 5, 8, 4, 0, -1,
     "UP q of type randk: compressor.k must be in 1..123 (got 0)"},
    {"dither s 0", EC_COMP_DITHER, 0, DITHER_S, 4, 0, -1,
     "UP q of type dither: compressor.s must be in 1..65535 (got 0)"},
    {"dither s too large", EC_COMP_DITHER, 0, DITHER_S, 4, 65536, -1,
     "compressor.s must be in 1..65535 (got 65536)"},
    {"dither s huge", EC_COMP_DITHER, 0, DITHER_S, 4, UINT32_MAX, -1,
     "compressor.s must be in 1..65535"},
    {"idx >= d", EC_COMP_TOPK, 5, IDX(4), 4, 123, -1,
     "out of range for d = 123"},
    {"idx huge", EC_COMP_TOPK, 5, IDX(0), 4, UINT32_MAX, -1, "out of range"},
    {"idx repeated", EC_COMP_TOPK, 5, IDX(2), 4, 0, 1,
     "is not above the previous"},
    {"idx out of order", EC_COMP_TOPK, 5, IDX(1), 4, 0, 3,
     "is not above the previous"},
    {"dither idx repeated", EC_COMP_DITHER, 0, DITHER_IDX(1), 4, 0, 0,
     "is not above the previous"},
    {"dither idx >= d", EC_COMP_DITHER, 0, DITHER_IDX(0), 4, 123, -1,
     "out of range for d = 123"},
    {"unknown msg type", EC_COMP_TOPK, 5, 4, 1, EC_COMP_COUNT, -1,
     "unknown message type"},
    {"msg type 255", EC_COMP_NONE, 0, 4, 1, 255, -1,
     "unknown message type 255"},
    {"msg reserved u8", EC_COMP_TOPK, 5, 5, 1, 1, -1, "reserved"},
    {"msg reserved u16", EC_COMP_TOPK, 5, 6, 2, 0x100, -1, "reserved"},
    {"unknown up flags", EC_COMP_TOPK, 5, 0, 4, 0x10, -1, "UP flags 0x10"},
    {"has_stats but none", EC_COMP_TOPK, 5, 0, 4, 2, -1, "truncated"},
    {"has_value but none", EC_COMP_TOPK, 5, 0, 4, 8, -1, "truncated"},
    {"has_extra but none", EC_COMP_TOPK, 5, 0, 4, 1, -1, "truncated"},
    {"trailing byte", EC_COMP_TOPK, 5, 0, 0, 0, -1, "1 trailing bytes"},
    {"trailing after randk", EC_COMP_RANDK, 3, 0, 0, 0, -1, "trailing"},
    {"trailing after dither", EC_COMP_DITHER, 0, 0, 0, 0, -1, "trailing"},
    {"type changes layout", EC_COMP_TOPK, 5, 4, 1, EC_COMP_RANDK, -1,
     "trailing"},
    {"topk read as dither", EC_COMP_TOPK, 5, 4, 1, EC_COMP_DITHER, -1,
     "truncated"},
    {"randk read as none", EC_COMP_RANDK, 5, 4, 1, EC_COMP_NONE, -1,
     "must be 0 or d"},
};

static void patch(uint8_t *p, const payload_case *c)
{
    uint32_t v = c->value;

    if (c->copy >= 0) {
        const uint8_t *q = p + index_at(c->type, c->copy);

        v = q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
            (uint32_t)q[3] << 24;
    }
    if (c->width == 1)
        p[c->at] = (uint8_t)v;
    else if (c->width == 2)
        le16(p + c->at, (uint16_t)v);
    else
        le32(p + c->at, v);
}

START_TEST(test_up_rejects)
{
    const payload_case *c = &up_cases[_i];
    const uint32_t d = 123;
    double x[123];
    ec_compressor *comp = make_comp(c->type, c->k, 4, d);
    ec_rng r;
    ec_up up;
    ec_err e = {0};
    long size;
    uint8_t *frame, *p;
    size_t len;

    ec_rng_seed(&r, 300, 0);
    for (uint32_t j = 0; j < d; j++)
        x[j] = ec_rng_normal(&r);
    ck_assert_int_eq(ec_up_init(&up, d), 0);
    ec_compress(comp, x, &r, &up.q);
    frame = encode_up(&up, 0, &size);
    len = (size_t)size - EC_WIRE_HEADER_SIZE + (c->width == 0);
    p = malloc(len);
    ck_assert_ptr_nonnull(p);
    memcpy(p, frame + EC_WIRE_HEADER_SIZE, (size_t)size - EC_WIRE_HEADER_SIZE);
    if (c->width == 0)
        p[len - 1] = 0;
    else
        patch(p, c);
    ck_assert_int_eq(ec_wire_decode_up(p, len, d, &up, &e), EC_EPROTO);
    ck_assert_msg(strstr(e.msg, c->sentence), "%s: \"%s\" lacks \"%s\"",
                  c->name, e.msg, c->sentence);
    free(p);
    free(frame);
    ec_up_clear(&up);
    ec_compressor_free(comp);
}
END_TEST

/*
 * STEP payload edits on a broadcast whose v is sparse (nonzeros at 3, 10
 * and 50 of d = 123) and a dense: dflags 0, bits 4, paper 12, v's header at
 * 20 (kind 20, reserved 21, nnz 24), v's indices at 28..39, values at
 * 40..63, a's header at 64 (kind 64, nnz 68).
 */
static const struct step_case {
    const char *name;
    size_t at;
    int width;              /* 0: append a byte */
    uint32_t value;
    const char *sentence;
} step_cases[] = {
    {"unknown dflags", 0, 4, 0x10, "flags 0x10"},
    {"unknown kind", 20, 1, 2, "unknown kind 2"},
    {"vector reserved", 21, 1, 1, "reserved"},
    {"sparse nnz > d", 24, 4, 124, "nnz 124 over d = 123"},
    {"sparse nnz huge", 24, 4, UINT32_MAX, "over d = 123"},
    {"sparse idx >= d", 32, 4, 123, "out of range for d = 123"},
    {"sparse idx repeated", 32, 4, 3, "is not above the previous index 3"},
    {"sparse idx out of order", 36, 4, 5, "is not above the previous"},
    {"dense length != d", 68, 4, 122, "(must be d = 123)"},
    {"dense length 0", 68, 4, 0, "(must be d = 123)"},
    {"no a after all", 0, 4, 0, "trailing"},
    {"a claimed sparse", 64, 1, 1, "truncated"},
    {"trailing byte", 0, 0, 0, "1 trailing bytes"},
};

START_TEST(test_step_rejects)
{
    const struct step_case *c = &step_cases[_i];
    const uint32_t d = 123;
    ec_down down;
    uint8_t frame[4096], *p;
    ec_err e = {0};
    int has_down = 1;
    long size;
    size_t len;

    ck_assert_int_eq(ec_down_init(&down, d), 0);
    down.v[3] = 1.0;
    down.v[10] = -2.0;
    down.v[50] = 3.0;
    for (uint32_t j = 0; j < d; j++)
        down.a[j] = 1.0 + j;
    down.has_a = 1;
    size = ec_wire_encode_step(frame, sizeof frame, 1, &down, d);
    ck_assert_int_eq(size, EC_WIRE_HEADER_SIZE + 20 + 8 + 36 + 8 + 8 * d);
    len = (size_t)size - EC_WIRE_HEADER_SIZE + (c->width == 0);
    p = calloc(len, 1);
    ck_assert_ptr_nonnull(p);
    memcpy(p, frame + EC_WIRE_HEADER_SIZE, (size_t)size - EC_WIRE_HEADER_SIZE);
    if (c->width == 1)
        p[c->at] = (uint8_t)c->value;
    else if (c->width == 4)
        le32(p + c->at, c->value);
    ck_assert_int_eq(ec_wire_decode_step(p, len, EC_WIRE_STEP_HAS_DOWN, d,
                                         &down, &has_down, &e),
                     EC_EPROTO);
    ck_assert_int_eq(has_down, 0);
    ck_assert_msg(strstr(e.msg, c->sentence), "%s: \"%s\" lacks \"%s\"",
                  c->name, e.msg, c->sentence);
    /* Flags from the header are checked too. */
    ck_assert_int_eq(ec_wire_decode_step(p, 0, 2, d, &down, &has_down, &e),
                     EC_EPROTO);
    ck_assert_int_eq(ec_wire_decode_step(p, 1, 0, d, &down, &has_down, &e),
                     EC_EPROTO);
    free(p);
    ec_down_clear(&down);
}
END_TEST

START_TEST(test_small_payload_rejects)
{
    static const uint8_t hello[17] = {0, 0, 0, 0, 1};
    static const uint8_t text_nul[] = {'b', 'a', 'd', 0, 'x'};
    uint8_t *big = calloc(1025, 1), *p;
    char buf[64];
    uint32_t a, b, c;
    ec_err e = {0};

    ck_assert_ptr_nonnull(big);
    memset(big, 'y', 1025);
    p = dup_exact(hello, 17);
    ck_assert_int_eq(ec_wire_decode_hello(p, 17, &a, &b, &c, &c, &e), EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "trailing"));
    ck_assert_int_eq(ec_wire_decode_welcome(p, 9, &a, &b, &e), EC_EPROTO);
    ck_assert_int_eq(ec_wire_decode_welcome(p, 7, &a, &b, &e), EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "truncated"));
    free(p);

    p = dup_exact(text_nul, sizeof text_nul);
    ck_assert_int_eq(ec_wire_decode_error(p, sizeof text_nul, buf, sizeof buf,
                                          &e),
                     EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "NUL byte at offset 3"));
    free(p);
    ck_assert_int_eq(ec_wire_decode_error(big, 1025, buf, sizeof buf, &e),
                     EC_EPROTO);
    ck_assert_ptr_nonnull(strstr(e.msg, "1025 over the limit 1024"));
    ck_assert_int_eq(ec_wire_decode_error(big, 1024, buf, sizeof buf, &e), 0);
    ck_assert_uint_eq(strlen(buf), sizeof buf - 1);
    free(big);
}
END_TEST

/* ---- encoders respect their capacity --------------------------------- */

START_TEST(test_encode_too_small)
{
    /* Every capacity short of the frame is EC_ELIMIT and leaves the whole
     * buffer untouched; the exact capacity writes exactly the frame. */
    static frame f[FRAME_MAX];
    static uint8_t buf[8192 + 64];
    int n = make_frames(f);

    for (int i = 0; i < n; i++) {
        ec_wire_header h;
        ec_err e = {0};
        sink s;

        /* Recover the frame's arguments by decoding it. */
        sink_init(&s, FRAME_D);
        ck_assert_int_eq(decode_frame(f[i].buf, (size_t)f[i].len, &s, &h, &e),
                         0);
        for (long cap = 0; cap <= f[i].len; cap++) {
            long got = 0;

            memset(buf, CANARY, sizeof buf);
            switch (h.type) {
            case EC_WIRE_HELLO:
                got = ec_wire_encode_hello(buf, (size_t)cap, s.u[0], s.u[1],
                                           s.u[2], s.u[3]);
                break;
            case EC_WIRE_WELCOME:
                got = ec_wire_encode_welcome(buf, (size_t)cap, s.u[0], s.u[1]);
                break;
            case EC_WIRE_STOP:
                got = ec_wire_encode_stop(buf, (size_t)cap, h.round);
                break;
            case EC_WIRE_ERROR:
                got = ec_wire_encode_error(buf, (size_t)cap, h.round, s.text);
                break;
            case EC_WIRE_STEP:
                got = ec_wire_encode_step(buf, (size_t)cap, h.round,
                                          s.has_down ? &s.down : NULL,
                                          FRAME_D);
                break;
            case EC_WIRE_UP:
                got = ec_wire_encode_up(buf, (size_t)cap, h.round, &s.up);
                break;
            }
            if (cap < f[i].len) {
                ck_assert_msg(got == EC_ELIMIT, "%s cap %ld: %ld", f[i].name,
                              cap, got);
                ck_assert_msg(first_not(buf, sizeof buf, CANARY) == sizeof buf,
                              "%s cap %ld wrote into the buffer", f[i].name,
                              cap);
            } else {
                ck_assert_int_eq(got, f[i].len);
                ck_assert_mem_eq(buf, f[i].buf, (size_t)got);
                ck_assert_uint_eq(first_not(buf + got, sizeof buf - (size_t)got,
                                            CANARY),
                                  sizeof buf - (size_t)got);
            }
        }
        sink_clear(&s);
    }
}
END_TEST

/* ---- random corruption ----------------------------------------------- */

/* What a decoded message promises: nnz <= d, indices ascending below d. */
static int msg_valid(const ec_msg *m)
{
    if (m->d != FRAME_D || m->nnz > m->d)
        return 0;
    for (uint32_t i = 0; i < m->nnz; i++)
        if (m->idx[i] >= m->d || (i && m->idx[i - 1] >= m->idx[i]))
            return 0;
    return 1;
}

START_TEST(test_mutations)
{
    /* Flip, overwrite or cut random bytes of valid frames: decoding says 0
     * or EC_EPROTO, and whatever it accepts is internally consistent. */
    static frame f[FRAME_MAX];
    static uint8_t buf[8192];
    int n = make_frames(f);
    long ok = 0, rejected = 0;
    ec_rng r;
    sink s;

    sink_init(&s, FRAME_D);
    ec_rng_seed(&r, 500, 0);
    for (int iter = 0; iter < 30000; iter++) {
        const frame *src = &f[ec_rng_below(&r, (uint64_t)n)];
        size_t len = (size_t)src->len;
        int edits = 1 + (int)ec_rng_below(&r, 4);
        ec_wire_header h;
        ec_err e = {0};
        int rc;

        memcpy(buf, src->buf, len);
        for (int m = 0; m < edits; m++) {
            size_t at = (size_t)ec_rng_below(&r, len);

            switch (ec_rng_below(&r, 4)) {
            case 0:
                buf[at] ^= (uint8_t)(1u << ec_rng_below(&r, 8));
                break;
            case 1:
                buf[at] = (uint8_t)ec_rng_next(&r);
                break;
            case 2:   /* small counts and indices are the interesting ones */
                buf[at] = (uint8_t)ec_rng_below(&r, 4);
                break;
            default:
                if (ec_rng_below(&r, 8) == 0)
                    len = (size_t)ec_rng_below(&r, len + 1);
                break;
            }
            if (len == 0)
                break;
        }
        rc = decode_frame(buf, len, &s, &h, &e);
        ck_assert_msg(rc == 0 || rc == EC_EPROTO, "iter %d: rc %d", iter, rc);
        if (rc < 0) {
            ck_assert_int_eq(e.code, EC_EPROTO);
            ck_assert_uint_gt(strlen(e.msg), 0);
            rejected++;
            continue;
        }
        ok++;
        if (h.type == EC_WIRE_UP) {
            ck_assert_msg(msg_valid(&s.up.q), "iter %d: q accepted", iter);
            ck_assert_msg(!s.up.has_extra || msg_valid(&s.up.extra),
                          "iter %d: extra accepted", iter);
        }
    }
    /* Both outcomes happen: values decode, structure is rejected. */
    ck_assert_int_gt(ok, 1000);
    ck_assert_int_gt(rejected, 1000);
    sink_clear(&s);
}
END_TEST

/* ---- suite ------------------------------------------------------------ */

static Suite *wire_suite(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("core");

    tcase_add_loop_test(tc, test_up_round_trip, 0, COUNT(all_types));
    tcase_add_test(tc, test_up_init_exchange);
    tcase_add_test(tc, test_ups_round_trip);
    tcase_add_loop_test(tc, test_up_bits_every_type, 0, COUNT(all_types));
    tcase_add_test(tc, test_randk_indices_match_compress);
    tcase_add_test(tc, test_step_round_trip);
    tcase_add_test(tc, test_step_empty);
    tcase_add_test(tc, test_small_frames_round_trip);
    tcase_add_test(tc, test_documented_sizes);
    tcase_add_test(tc, test_max_payload);
    tcase_add_test(tc, test_encode_over_absolute_cap);
    tcase_add_loop_test(tc, test_header_rejects, 0, COUNT(header_cases));
    tcase_add_test(tc, test_header_layout);
    tcase_add_test(tc, test_every_truncation);
    tcase_add_loop_test(tc, test_up_rejects, 0, COUNT(up_cases));
    tcase_add_loop_test(tc, test_step_rejects, 0, COUNT(step_cases));
    tcase_add_test(tc, test_small_payload_rejects);
    tcase_add_test(tc, test_encode_too_small);
    tcase_add_test(tc, test_mutations);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(wire_suite());
}
