/*
 * The coordinator <-> worker wire protocol: frames encoded byte by byte
 * (little-endian, doubles as IEEE-754 bit patterns), never as structs.
 * Encoders and decoders are pure functions over buffers; decoders treat
 * their input as hostile and check every length before using it.
 *
 * A job runs its n workers on P processes (MPI ranks), each hosting a
 * contiguous block of them. A process says HELLO (its first worker and how
 * many it hosts) -> coordinator WELCOME; then per exchange the coordinator
 * sends STEP (carrying the previous broadcast, if any) to each process and
 * each answers UPS with the STEP's round: one UP per hosted worker, in
 * worker order; STOP ends it. A process that fails sends ERROR. HELLO and
 * WELCOME carry round 0. (A lone UP frame is the same message outside a
 * UPS; the runtimes send UPS.)
 *
 * Frame = 24-byte header + payload:
 *   u32 magic "ECOP" | u16 version | u16 type | u32 flags | u32 length |
 *   u64 round
 * length is the payload's size and is checked against a maximum before
 * anything is allocated or read.
 *
 * Payload layouts (sizes in bytes; every reserved field is 0):
 *
 *   HELLO    u32 first worker | u32 count (>= 1) | u32 pid | u32 d     (16)
 *   WELCOME  u32 n | u32 d                                             (8)
 *   STOP     empty
 *   ERROR    the text's bytes, no NUL, at most 1024
 *   UP       u32 flags (bit0: has_extra, bit1: has_stats, bit2: refreshed,
 *            bit3: has_value) | message q |
 *            [message extra] | [f64 ef_in | f64 ef_out] | [f64 value]
 *   UPS      u32 count | count times: u32 worker | u32 len | UP payload
 *            of len bytes (each at most EC_WIRE_MAX_PAYLOAD; the whole at
 *            most EC_WIRE_MAX_UPS_PAYLOAD)
 *   STEP     empty without a broadcast; with one (header flag
 *            EC_WIRE_STEP_HAS_DOWN): u32 dflags (bit0 init, bit1 has_a,
 *            bit2 has_stats, bit3 has_value) | u64 bits | u64 paper_bits |
 *            vector v | [vector a] | [f64 ef_in | f64 ef_out] | [f64 value]
 *            (the stats are ECLK's error-feedback sums on coin rounds, for
 *            its online contraction estimate; the value the sum of the
 *            workers' f_tau for the adaptive rule's guard: see ecopt/algo.h)
 *
 *   message  u8 type | u8 reserved | u16 reserved | u32 nnz             (8)
 *            then by type (an ec_comp_type):
 *              none:            f64 val[nnz]; nnz = d, or 0 for the empty
 *                               q of an init exchange; idx is 0..nnz-1
 *              topk:            u32 idx[nnz] | f64 val[nnz]
 *              randk(-unb.):    u64 seed | f64 val[nnz]; idx is rebuilt
 *                               from the seed with ec_randk_indices
 *              dither(-unb.):   f64 norm | f64 scale | u32 s |
 *                               u32 idx[nnz] | f64 val[nnz]
 *            nnz is k for topk and randk (1..d) and s is 1..65535. idx is
 *            strictly ascending and below d. The bit counters are not sent:
 *            the decoder derives them with ec_msg_count_bits from (type, d,
 *            nnz, s), as ec_compress did. Fields a type does not carry
 *            decode as 0, which is what ec_compress leaves in them.
 *
 *   vector   u8 kind | u8 reserved | u16 reserved | u32 nnz             (8)
 *            kind 0 (dense):  nnz = d, f64 val[d]
 *            kind 1 (sparse): u32 idx[nnz] | f64 val[nnz], the entries
 *                             whose bit pattern is not zero (so -0.0 is
 *                             kept and decoding is bitwise exact); chosen
 *                             when 12 nnz < 8 d
 *
 * So at d = 123 an UP frame is 48 bytes for topk with k = 1, 52 for randk
 * with k = 1, 1020 for none, and 56 + 12 nnz for dither.
 */
#ifndef ECOPT_WIRE_H
#define ECOPT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/algo.h"
#include "ecopt/error.h"

#define EC_WIRE_MAGIC 0x504f4345u     /* "ECOP" as little-endian bytes */
#define EC_WIRE_VERSION 2
#define EC_WIRE_MAX_UPS_PAYLOAD (1u << 30)  /* a UPS frame, any d */
#define EC_WIRE_HEADER_SIZE 24
#define EC_WIRE_MAX_PAYLOAD (64u << 20)   /* absolute cap, any d */

enum ec_wire_type {
    EC_WIRE_HELLO = 1,     /* worker -> coordinator: u32 worker, u32 pid, u32 d */
    EC_WIRE_WELCOME = 2,   /* coordinator -> worker: u32 n, u32 d */
    EC_WIRE_STEP = 3,      /* coordinator -> worker: an optional broadcast */
    EC_WIRE_UP = 4,        /* worker -> coordinator: one ec_up */
    EC_WIRE_STOP = 5,      /* coordinator -> worker: empty; exit */
    EC_WIRE_ERROR = 6,     /* worker -> coordinator: UTF-8 text, no NUL */
    EC_WIRE_UPS = 7        /* process -> coordinator: its workers' UPs */
};

/* STEP flags */
#define EC_WIRE_STEP_HAS_DOWN 0x1u

typedef struct ec_wire_header {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t flags;
    uint32_t length;
    uint64_t round;
} ec_wire_header;

void ec_wire_header_encode(uint8_t *buf, const ec_wire_header *h);
/* Decodes and validates 24 bytes: magic, version, a known type,
 * length <= max_payload (held to EC_WIRE_MAX_PAYLOAD), the flags the type
 * allows, the exact length of fixed-size payloads, and round 0 on HELLO and
 * WELCOME. EC_EPROTO with a sentence otherwise. */
int ec_wire_header_decode(const uint8_t *buf, size_t len, size_t max_payload,
                          ec_wire_header *h, ec_err *e);

/* The largest payload any frame of a job with dimension d can need; the
 * receive side rejects longer lengths before reading. */
size_t ec_wire_max_payload(uint32_t d);
/* The same for a UPS frame of count workers. */
size_t ec_wire_max_payload_ups(uint32_t d, uint32_t count);

/*
 * Whole frames (header included) into buf of capacity cap. Each returns
 * the frame's size in bytes, or EC_ELIMIT if cap is too small or if the
 * payload would exceed EC_WIRE_MAX_PAYLOAD whatever cap is (a job whose d
 * makes its messages that large cannot run over the wire). buf is left
 * untouched on EC_ELIMIT. A buffer of EC_WIRE_HEADER_SIZE +
 * ec_wire_max_payload(d) bytes holds any frame of a job with dimension d.
 * An UP's messages must be as ec_compress (or a decoder) leaves them: the
 * encoder does not send their bit counters, so it asserts they are the
 * ones ec_msg_count_bits derives.
 */
long ec_wire_encode_hello(uint8_t *buf, size_t cap, uint32_t worker,
                          uint32_t count, uint32_t pid, uint32_t d);
long ec_wire_encode_welcome(uint8_t *buf, size_t cap, uint32_t n, uint32_t d);
/* down may be NULL: the first STEP carries no broadcast. */
long ec_wire_encode_step(uint8_t *buf, size_t cap, uint64_t round,
                         const ec_down *down, uint32_t d);
long ec_wire_encode_up(uint8_t *buf, size_t cap, uint64_t round,
                       const ec_up *up);
long ec_wire_encode_stop(uint8_t *buf, size_t cap, uint64_t round);
/* The payload size of up as an UP frame or UPS entry carries it. */
size_t ec_wire_up_payload(const ec_up *up);
/* A UPS frame built in place: begin writes its header and a count of 0
 * (returns the frame's size so far, or EC_ELIMIT); each add appends one
 * worker's UP at len, the size so far, and returns the new size, or
 * EC_ELIMIT (buf untouched) when cap or a payload cap is too small. */
long ec_wire_ups_begin(uint8_t *buf, size_t cap, uint64_t round);
long ec_wire_ups_add(uint8_t *buf, size_t cap, size_t len, uint32_t worker,
                     const ec_up *up);
long ec_wire_encode_error(uint8_t *buf, size_t cap, uint64_t round,
                          const char *text);

/*
 * Payload decoders (the header already decoded and its length read).
 * Outputs must be made with ec_up_init(out, d) or ec_down_init(out, d) for
 * the same d (the decoders write up to d entries without checking room).
 * They are filled exactly as the sender's were: a decoded message compares
 * equal, field by field and bit for bit, to the one encoded, its bit
 * counters included. Any inconsistency (a length that does not match,
 * nnz > d, an index >= d or out of order, an unknown message type, a k or s
 * out of range, nonzero reserved bytes, trailing bytes) is EC_EPROTO with a
 * sentence; the outputs may then be partly written.
 */
int ec_wire_decode_hello(const uint8_t *p, size_t len, uint32_t *worker,
                         uint32_t *count, uint32_t *pid, uint32_t *d,
                         ec_err *e);
int ec_wire_decode_welcome(const uint8_t *p, size_t len, uint32_t *n,
                           uint32_t *d, ec_err *e);
/* *has_down tells whether a broadcast was present (flags of the header). */
int ec_wire_decode_step(const uint8_t *p, size_t len, uint32_t flags,
                        uint32_t d, ec_down *out, int *has_down, ec_err *e);
int ec_wire_decode_up(const uint8_t *p, size_t len, uint32_t d, ec_up *out,
                      ec_err *e);
/* A UPS payload, entry by entry: open reads the count; each next gives
 * one entry's worker and its UP payload (for ec_wire_decode_up), 1, then
 * 0 after the last (trailing bytes are EC_EPROTO), or < 0 with e set. The
 * caller checks the workers are the ones the process hosts, in order. */
typedef struct ec_wire_ups_rd {
    const uint8_t *p;
    size_t len, pos;
    uint32_t left;
} ec_wire_ups_rd;

int ec_wire_ups_open(ec_wire_ups_rd *it, const uint8_t *p, size_t len,
                     ec_err *e);
int ec_wire_ups_next(ec_wire_ups_rd *it, uint32_t *worker,
                     const uint8_t **up, size_t *uplen, ec_err *e);
/* Copies the text (truncated, NUL-terminated) into buf. */
int ec_wire_decode_error(const uint8_t *p, size_t len, char *buf,
                         size_t buflen, ec_err *e);

#endif
