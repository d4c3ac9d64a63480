/*
 * libFuzzer target for the wire decoders (engine/src/wire.c). The input is
 * a u16 dimension d (little-endian; 0 means 1) and then what a receiver
 * read from its socket: a header and a payload, decoded exactly as the
 * coordinator and the workers do, each from a malloc'd copy of exactly its
 * bytes so that AddressSanitizer sees any over-read. A frame the decoders
 * accept must round-trip: encoded again and decoded, it gives back the
 * same message, bit for bit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ecopt/wire.h"

#define MAX_D 4096

static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n ? n : 1);

    if (!q)
        abort();
    if (n)
        memcpy(q, p, n);
    return q;
}

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "round trip: %s differs\n", what);
        abort();
    }
}

static void same_msg(const ec_msg *a, const ec_msg *b)
{
    check(a->type == b->type && a->d == b->d && a->nnz == b->nnz, "msg type");
    check(a->nnz == 0 || (memcmp(a->idx, b->idx, a->nnz * sizeof *a->idx) == 0 &&
                          memcmp(a->val, b->val, a->nnz * sizeof *a->val) == 0),
          "msg entries");
    check(a->value_bits == b->value_bits && a->index_bits == b->index_bits &&
          a->paper_bits == b->paper_bits, "msg bits");
    check(a->seed == b->seed && a->s == b->s &&
          memcmp(&a->norm, &b->norm, sizeof a->norm) == 0 &&
          memcmp(&a->scale, &b->scale, sizeof a->scale) == 0, "msg params");
}

/* Encodes into a buffer of exactly the frame's size and decodes that. */
static uint8_t *reencode_up(const ec_up *up, uint64_t round, uint32_t d,
                            long *n)
{
    size_t cap = EC_WIRE_HEADER_SIZE + ec_wire_max_payload(d);
    uint8_t *buf = malloc(cap);

    if (!buf)
        abort();
    *n = ec_wire_encode_up(buf, cap, round, up);
    check(*n >= EC_WIRE_HEADER_SIZE, "UP encode");
    return buf;
}

static void round_trip_up(const ec_up *up, uint64_t round, uint32_t d)
{
    ec_up again;
    ec_wire_header h;
    ec_err e = {0};
    long n;
    uint8_t *buf = reencode_up(up, round, d, &n);

    if (ec_up_init(&again, d) < 0)
        abort();
    check(ec_wire_header_decode(buf, EC_WIRE_HEADER_SIZE,
                                ec_wire_max_payload(d), &h, &e) == 0 &&
          h.length == (size_t)n - EC_WIRE_HEADER_SIZE && h.round == round,
          "UP header");
    check(ec_wire_decode_up(buf + EC_WIRE_HEADER_SIZE, h.length, d, &again,
                            &e) == 0, "UP decode");
    same_msg(&up->q, &again.q);
    check(up->has_extra == again.has_extra, "has_extra");
    same_msg(&up->extra, &again.extra);
    ec_up_clear(&again);
    free(buf);
}

static void round_trip_step(const ec_down *down, uint64_t round, uint32_t d)
{
    size_t cap = EC_WIRE_HEADER_SIZE + ec_wire_max_payload(d);
    uint8_t *buf = malloc(cap);
    ec_down again;
    ec_wire_header h;
    ec_err e = {0};
    int has_down = 0;
    long n;

    if (!buf || ec_down_init(&again, d) < 0)
        abort();
    n = ec_wire_encode_step(buf, cap, round, down, d);
    check(n >= EC_WIRE_HEADER_SIZE, "STEP encode");
    check(ec_wire_header_decode(buf, EC_WIRE_HEADER_SIZE,
                                ec_wire_max_payload(d), &h, &e) == 0,
          "STEP header");
    check(ec_wire_decode_step(buf + EC_WIRE_HEADER_SIZE, h.length, h.flags, d,
                              &again, &has_down, &e) == 0 && has_down,
          "STEP decode");
    check(again.init == down->init && again.has_a == down->has_a &&
          again.bits == down->bits && again.paper_bits == down->paper_bits,
          "STEP fields");
    check(memcmp(again.v, down->v, d * sizeof *down->v) == 0, "STEP v");
    check(!down->has_a || memcmp(again.a, down->a, d * sizeof *down->a) == 0,
          "STEP a");
    ec_down_clear(&again);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ec_wire_header h;
    ec_err e = {0};
    uint32_t d, u[4];
    uint8_t *hb, *pb;
    size_t hlen;
    char text[2048];
    int rc = 0, has_down;

    if (size < 2)
        return 0;
    d = (uint32_t)data[0] | (uint32_t)data[1] << 8;
    if (d == 0)
        d = 1;
    if (d > MAX_D)
        return 0;
    data += 2;
    size -= 2;

    hlen = size < EC_WIRE_HEADER_SIZE ? size : EC_WIRE_HEADER_SIZE;
    hb = dup_exact(data, hlen);
    rc = ec_wire_header_decode(hb, hlen, ec_wire_max_payload(d), &h, &e);
    free(hb);
    if (rc < 0)
        return 0;
    if (h.length > size - EC_WIRE_HEADER_SIZE)
        return 0;   /* a short frame: the receiver sees a dead peer */
    pb = dup_exact(data + EC_WIRE_HEADER_SIZE, h.length);

    switch (h.type) {
    case EC_WIRE_HELLO:
        rc = ec_wire_decode_hello(pb, h.length, &u[0], &u[1], &u[2], &u[3], &e);
        break;
    case EC_WIRE_WELCOME:
        rc = ec_wire_decode_welcome(pb, h.length, &u[0], &u[1], &e);
        break;
    case EC_WIRE_ERROR:
        rc = ec_wire_decode_error(pb, h.length, text, sizeof text, &e);
        if (rc == 0 && strlen(text) >= sizeof text)
            abort();
        break;
    case EC_WIRE_STOP:
        break;
    case EC_WIRE_UP: {
        ec_up up;

        if (ec_up_init(&up, d) < 0)
            abort();
        rc = ec_wire_decode_up(pb, h.length, d, &up, &e);
        if (rc == 0)
            round_trip_up(&up, h.round, d);
        ec_up_clear(&up);
        break;
    }
    case EC_WIRE_UPS: {
        ec_wire_ups_rd it;
        const uint8_t *one;
        size_t onelen;
        uint32_t worker;
        ec_up up;

        if (ec_up_init(&up, d) < 0)
            abort();
        rc = ec_wire_ups_open(&it, pb, h.length, &e);
        while (rc == 0 &&
               (rc = ec_wire_ups_next(&it, &worker, &one, &onelen, &e)) == 1) {
            if (one < pb || one + onelen > pb + h.length)
                abort();   /* an entry outside the payload */
            rc = ec_wire_decode_up(one, onelen, d, &up, &e);
            if (rc == 0)
                round_trip_up(&up, h.round, d);
        }
        ec_up_clear(&up);
        break;
    }
    case EC_WIRE_STEP: {
        ec_down down;

        if (ec_down_init(&down, d) < 0)
            abort();
        rc = ec_wire_decode_step(pb, h.length, h.flags, d, &down, &has_down,
                                 &e);
        if (rc == 0 && has_down)
            round_trip_step(&down, h.round, d);
        ec_down_clear(&down);
        break;
    }
    default:
        fprintf(stderr, "header decode let type %u through\n",
                (unsigned)h.type);
        abort();
    }
    /* A rejection always says why. */
    if (rc < 0 && (rc != EC_EPROTO || !e.msg[0]))
        abort();
    free(pb);
    return 0;
}
