/*
 * The coordinator <-> worker wire protocol: frames encoded byte by byte
 * (little-endian, doubles as IEEE-754 bit patterns), never as structs.
 * Encoders and decoders are pure functions over buffers; decoders treat
 * their input as hostile and check every length before using it.
 *
 * Frame = 24-byte header + payload:
 *   u32 magic "ECOP" | u16 version | u16 type | u32 flags | u32 length |
 *   u64 round
 * length is the payload's size and is checked against a maximum before
 * anything is allocated or read.
 *
 * A job: worker HELLO -> coordinator WELCOME; then per exchange the
 * coordinator sends STEP (carrying the previous broadcast, if any) and each
 * worker answers UP; STOP ends it. A worker that fails sends ERROR.
 */
#ifndef ECOPT_WIRE_H
#define ECOPT_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "ecopt/algo.h"
#include "ecopt/error.h"

#define EC_WIRE_MAGIC 0x504f4345u     /* "ECOP" as little-endian bytes */
#define EC_WIRE_VERSION 1
#define EC_WIRE_HEADER_SIZE 24
#define EC_WIRE_MAX_PAYLOAD (64u << 20)   /* absolute cap, any d */

enum ec_wire_type {
    EC_WIRE_HELLO = 1,     /* worker -> coordinator: u32 worker, u32 pid, u32 d */
    EC_WIRE_WELCOME = 2,   /* coordinator -> worker: u32 n, u32 d */
    EC_WIRE_STEP = 3,      /* coordinator -> worker: an optional broadcast */
    EC_WIRE_UP = 4,        /* worker -> coordinator: one ec_up */
    EC_WIRE_STOP = 5,      /* coordinator -> worker: empty; exit */
    EC_WIRE_ERROR = 6      /* worker -> coordinator: UTF-8 text, no NUL */
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
/* Decodes and validates 24 bytes: magic, version, a known type, and
 * length <= max_payload. EC_EPROTO with a sentence otherwise. */
int ec_wire_header_decode(const uint8_t *buf, size_t len, size_t max_payload,
                          ec_wire_header *h, ec_err *e);

/* The largest payload any frame of a job with dimension d can need; the
 * receive side rejects longer lengths before reading. */
size_t ec_wire_max_payload(uint32_t d);

/*
 * Whole frames (header included) into buf of capacity cap. Each returns
 * the frame's size in bytes, or EC_ELIMIT if cap is too small (nothing
 * useful is left in buf then).
 */
long ec_wire_encode_hello(uint8_t *buf, size_t cap, uint32_t worker,
                          uint32_t pid, uint32_t d);
long ec_wire_encode_welcome(uint8_t *buf, size_t cap, uint32_t n, uint32_t d);
/* down may be NULL: the first STEP carries no broadcast. */
long ec_wire_encode_step(uint8_t *buf, size_t cap, uint64_t round,
                         const ec_down *down, uint32_t d);
long ec_wire_encode_up(uint8_t *buf, size_t cap, uint64_t round,
                       const ec_up *up);
long ec_wire_encode_stop(uint8_t *buf, size_t cap, uint64_t round);
long ec_wire_encode_error(uint8_t *buf, size_t cap, uint64_t round,
                          const char *text);

/*
 * Payload decoders (the header already decoded and its length read).
 * Outputs are preallocated for dimension d (ec_up_init, ec_down_init) and
 * filled exactly as the sender's were: a decoded message compares equal,
 * bit for bit, to the one encoded. Any inconsistency (a length that does
 * not match, nnz > d, an index >= d or out of order, an unknown message
 * type, trailing bytes) is EC_EPROTO with a sentence.
 */
int ec_wire_decode_hello(const uint8_t *p, size_t len, uint32_t *worker,
                         uint32_t *pid, uint32_t *d, ec_err *e);
int ec_wire_decode_welcome(const uint8_t *p, size_t len, uint32_t *n,
                           uint32_t *d, ec_err *e);
/* *has_down tells whether a broadcast was present (flags of the header). */
int ec_wire_decode_step(const uint8_t *p, size_t len, uint32_t flags,
                        uint32_t d, ec_down *out, int *has_down, ec_err *e);
int ec_wire_decode_up(const uint8_t *p, size_t len, uint32_t d, ec_up *out,
                      ec_err *e);
/* Copies the text (truncated, NUL-terminated) into buf. */
int ec_wire_decode_error(const uint8_t *p, size_t len, char *buf,
                         size_t buflen, ec_err *e);

#endif
