/*
 * The frames of wire.h (which documents every layout), written and read one
 * little-endian field at a time. Decoders take their input as hostile:
 * every read is preceded by a length check, every count is checked against
 * d before it sizes anything, and a frame that does not match its declared
 * layout exactly is EC_EPROTO.
 */
#include "ecopt/wire.h"

#include <assert.h>
#include <inttypes.h>
#include <string.h>

#include "ecopt/compress.h"

/* The longest ERROR text; longer texts are cut at encode. */
#define WIRE_MAX_TEXT 1024u

#define WIRE_MSG_FIXED 8u      /* a message's fixed part: type, nnz */
#define WIRE_MSG_DITHER 20u    /* dither's parameters: norm, scale, s */
#define WIRE_MSG_SEED 8u       /* randk's seed */
#define WIRE_VEC_FIXED 8u      /* a vector's fixed part */
#define WIRE_STEP_FIXED 20u    /* dflags, bits, paper_bits */

#define UP_HAS_EXTRA 0x1u
#define UP_HAS_STATS 0x2u      /* ECLK's two error-feedback sums follow */
#define UP_REFRESHED 0x4u      /* ec-lsvrg(-diana) refreshed its reference point */
#define UP_HAS_VALUE 0x8u      /* ECLK adaptive: f64 f_tau at the gradient's point */
#define STEP_INIT 0x1u
#define STEP_HAS_A 0x2u
#define STEP_HAS_STATS 0x4u    /* their sums over the workers follow */
#define STEP_HAS_VALUE 0x8u    /* the sum of the workers' values follows */
#define WIRE_STATS 16u         /* f64 ef_in | f64 ef_out */
#define WIRE_VALUE 8u          /* f64 value */
#define WIRE_UPS_ENTRY 8u      /* u32 worker | u32 length before each UP */

#define VEC_DENSE 0u
#define VEC_SPARSE 1u

/* ---- byte helpers ------------------------------------------------------ */

static void put_u8(uint8_t *p, uint8_t v)
{
    p[0] = v;
}

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_f64(uint8_t *p, double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof bits);
    put_u64(p, bits);
}

static uint8_t get_u8(const uint8_t *p)
{
    return p[0];
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)p[1] << 8);
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static double get_f64(const uint8_t *p)
{
    uint64_t bits = get_u64(p);
    double v;

    memcpy(&v, &bits, sizeof v);
    return v;
}

/* The encoders size a frame first, so the writer never needs to check. */
typedef struct wr {
    uint8_t *p;
    size_t pos;
} wr;

static void wr_u8(wr *w, uint8_t v)
{
    put_u8(w->p + w->pos, v);
    w->pos += 1;
}

static void wr_u16(wr *w, uint16_t v)
{
    put_u16(w->p + w->pos, v);
    w->pos += 2;
}

static void wr_u32(wr *w, uint32_t v)
{
    put_u32(w->p + w->pos, v);
    w->pos += 4;
}

static void wr_u64(wr *w, uint64_t v)
{
    put_u64(w->p + w->pos, v);
    w->pos += 8;
}

static void wr_f64(wr *w, double v)
{
    put_f64(w->p + w->pos, v);
    w->pos += 8;
}

/* The reader checks before every read; what names the payload in errors. */
typedef struct rd {
    const uint8_t *p;
    size_t len;
    size_t pos;
    const char *what;
} rd;

static int rd_need(rd *r, uint64_t n, ec_err *e)
{
    assert(r->pos <= r->len);
    if (n > (uint64_t)(r->len - r->pos))
        return ec_err_set(e, EC_EPROTO,
                          "%s payload truncated: %" PRIu64 " bytes needed at "
                          "offset %zu of %zu",
                          r->what, n, r->pos, r->len);
    return 0;
}

static int rd_end(const rd *r, ec_err *e)
{
    assert(r->pos <= r->len);
    if (r->pos != r->len)
        return ec_err_set(e, EC_EPROTO,
                          "%s payload has %zu trailing bytes after offset %zu",
                          r->what, r->len - r->pos, r->pos);
    return 0;
}

static uint8_t rd_u8(rd *r)
{
    return get_u8(r->p + r->pos++);
}

static uint16_t rd_u16(rd *r)
{
    uint16_t v = get_u16(r->p + r->pos);

    r->pos += 2;
    return v;
}

static uint32_t rd_u32(rd *r)
{
    uint32_t v = get_u32(r->p + r->pos);

    r->pos += 4;
    return v;
}

static uint64_t rd_u64(rd *r)
{
    uint64_t v = get_u64(r->p + r->pos);

    r->pos += 8;
    return v;
}

static double rd_f64(rd *r)
{
    double v = get_f64(r->p + r->pos);

    r->pos += 8;
    return v;
}

/* ECLK's error-feedback sums, when the frame says it has them (UP and
   STEP alike); 0 and 0 when it does not. */
static int rd_stats(rd *r, int has, double *ef_in, double *ef_out, ec_err *e)
{
    int rc;

    *ef_in = *ef_out = 0.0;
    if (!has)
        return 0;
    if ((rc = rd_need(r, WIRE_STATS, e)) < 0)
        return rc;
    *ef_in = rd_f64(r);
    *ef_out = rd_f64(r);
    return 0;
}

/* ECLK adaptive's value (UP) or the sum of them (STEP), when the frame
   says it has one; 0 when it does not. */
static int rd_value(rd *r, int has, double *value, ec_err *e)
{
    int rc;

    *value = 0.0;
    if (!has)
        return 0;
    if ((rc = rd_need(r, WIRE_VALUE, e)) < 0)
        return rc;
    *value = rd_f64(r);
    return 0;
}

/* The length of the longest prefix of s[0..n) that does not end inside a
 * UTF-8 sequence: a cut backs up over continuation bytes to a lead byte. */
static size_t utf8_prefix(const char *s, size_t len, size_t n)
{
    size_t cut;

    if (n >= len)
        return len;
    cut = n;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
        cut--;
    return cut;
}

/* ---- header ------------------------------------------------------------ */

void ec_wire_header_encode(uint8_t *buf, const ec_wire_header *h)
{
    put_u32(buf, h->magic);
    put_u16(buf + 4, h->version);
    put_u16(buf + 6, h->type);
    put_u32(buf + 8, h->flags);
    put_u32(buf + 12, h->length);
    put_u64(buf + 16, h->round);
}

static const char *type_name(uint16_t type)
{
    switch (type) {
    case EC_WIRE_HELLO:
        return "HELLO";
    case EC_WIRE_WELCOME:
        return "WELCOME";
    case EC_WIRE_STEP:
        return "STEP";
    case EC_WIRE_UP:
        return "UP";
    case EC_WIRE_STOP:
        return "STOP";
    case EC_WIRE_ERROR:
        return "ERROR";
    case EC_WIRE_UPS:
        return "UPS";
    }
    return NULL;
}

/*
 * Beyond magic, version, type and the length limit, the header also checks
 * what it alone can: the flags a type allows, and the exact length of the
 * fixed-size payloads (STOP has no payload decoder to check it later).
 */
int ec_wire_header_decode(const uint8_t *buf, size_t len, size_t max_payload,
                          ec_wire_header *h, ec_err *e)
{
    const char *name;
    uint32_t allowed_flags = 0;
    long exact = -1;

    if (len < EC_WIRE_HEADER_SIZE)
        return ec_err_set(e, EC_EPROTO,
                          "frame header truncated: %zu of %d bytes", len,
                          EC_WIRE_HEADER_SIZE);
    h->magic = get_u32(buf);
    h->version = get_u16(buf + 4);
    h->type = get_u16(buf + 6);
    h->flags = get_u32(buf + 8);
    h->length = get_u32(buf + 12);
    h->round = get_u64(buf + 16);

    if (h->magic != EC_WIRE_MAGIC)
        return ec_err_set(e, EC_EPROTO,
                          "bad magic 0x%08" PRIx32 " (want 0x%08x)", h->magic,
                          EC_WIRE_MAGIC);
    if (h->version != EC_WIRE_VERSION)
        return ec_err_set(e, EC_EPROTO, "unsupported version %u (want %d)",
                          (unsigned)h->version, EC_WIRE_VERSION);
    if (!(name = type_name(h->type)))
        return ec_err_set(e, EC_EPROTO, "unknown frame type %u",
                          (unsigned)h->type);
    if (h->type == EC_WIRE_UPS) {
        if (max_payload > EC_WIRE_MAX_UPS_PAYLOAD)
            max_payload = EC_WIRE_MAX_UPS_PAYLOAD;
    } else if (max_payload > EC_WIRE_MAX_PAYLOAD)
        max_payload = EC_WIRE_MAX_PAYLOAD;
    if (h->length > max_payload)
        return ec_err_set(e, EC_EPROTO,
                          "payload length %" PRIu32 " over the limit %zu",
                          h->length, max_payload);

    if ((h->type == EC_WIRE_HELLO || h->type == EC_WIRE_WELCOME) &&
        h->round != 0)
        return ec_err_set(e, EC_EPROTO,
                          "%s frame with round %" PRIu64 " (must be 0)", name,
                          h->round);
    switch (h->type) {
    case EC_WIRE_HELLO:
        exact = 16;
        break;
    case EC_WIRE_WELCOME:
        exact = 8;
        break;
    case EC_WIRE_STOP:
        exact = 0;
        break;
    case EC_WIRE_STEP:
        allowed_flags = EC_WIRE_STEP_HAS_DOWN;
        if (!(h->flags & EC_WIRE_STEP_HAS_DOWN))
            exact = 0;
        break;
    case EC_WIRE_ERROR:
        if (h->length > WIRE_MAX_TEXT)
            return ec_err_set(e, EC_EPROTO,
                              "ERROR text length %" PRIu32 " over the limit %u",
                              h->length, WIRE_MAX_TEXT);
        break;
    }
    if (h->flags & ~allowed_flags)
        return ec_err_set(e, EC_EPROTO,
                          "unknown flags 0x%" PRIx32 " on a %s frame",
                          h->flags & ~allowed_flags, name);
    if (exact >= 0 && h->length != (uint32_t)exact)
        return ec_err_set(e, EC_EPROTO,
                          "%s payload length %" PRIu32 " (must be %ld)", name,
                          h->length, exact);
    return 0;
}

/* ---- sizes ------------------------------------------------------------- */

static int msg_type_known(uint32_t t)
{
    return t < EC_COMP_COUNT;
}

static int msg_is_dense(ec_comp_type t)
{
    return ec_comp_info_of(t)->layout == EC_COMP_LAYOUT_DENSE;
}

static int msg_is_dither(ec_comp_type t)
{
    return ec_comp_info_of(t)->layout == EC_COMP_LAYOUT_LEVELS;
}

static int msg_is_randk(ec_comp_type t)
{
    return ec_comp_info_of(t)->layout == EC_COMP_LAYOUT_SEEDED;
}

/* Types whose indices travel explicitly: dense implies them, a seeded
 * layout has a seed instead. */
static int msg_has_indices(ec_comp_type t)
{
    ec_comp_layout l = ec_comp_info_of(t)->layout;

    return l == EC_COMP_LAYOUT_INDEXED || l == EC_COMP_LAYOUT_LEVELS;
}

/* A message's encoded size; uint64_t so no count can wrap. */
static uint64_t msg_size(ec_comp_type type, uint64_t nnz)
{
    uint64_t size = WIRE_MSG_FIXED + 8 * nnz;

    if (msg_is_randk(type))
        size += WIRE_MSG_SEED;
    if (msg_is_dither(type))
        size += WIRE_MSG_DITHER;
    if (msg_has_indices(type))
        size += 4 * nnz;
    return size;
}

static int vec_sparse(uint64_t nnz, uint32_t d)
{
    return 12 * nnz < 8 * (uint64_t)d;
}

static uint64_t vec_size(uint64_t nnz, uint32_t d)
{
    return WIRE_VEC_FIXED + (vec_sparse(nnz, d) ? 12 * nnz : 8 * (uint64_t)d);
}

/* Entries whose bit pattern is not +0.0 (-0.0 counts: it must survive). */
static uint32_t vec_count(const double *v, uint32_t d)
{
    uint32_t n = 0;

    for (uint32_t j = 0; j < d; j++) {
        uint64_t bits;

        memcpy(&bits, &v[j], sizeof bits);
        n += bits != 0;
    }
    return n;
}

size_t ec_wire_max_payload(uint32_t d)
{
    /* dither with every level nonzero is the largest message (its
     * parameters and 12 bytes an entry); two dense vectors the largest
     * STEP; ERROR's text bounds the small frames. */
    uint64_t up = 4 + 2 * msg_size(EC_COMP_DITHER, d) + WIRE_STATS + WIRE_VALUE;
    uint64_t step = WIRE_STEP_FIXED + 2 * (WIRE_VEC_FIXED + 8 * (uint64_t)d) +
                    WIRE_STATS + WIRE_VALUE;
    uint64_t max = up > step ? up : step;

    if (max < WIRE_MAX_TEXT)
        max = WIRE_MAX_TEXT;
    return max > EC_WIRE_MAX_PAYLOAD ? EC_WIRE_MAX_PAYLOAD : (size_t)max;
}

size_t ec_wire_max_payload_ups(uint32_t d, uint32_t count)
{
    uint64_t up = 4 + 2 * msg_size(EC_COMP_DITHER, d) + WIRE_STATS + WIRE_VALUE;
    uint64_t max = 4 + (uint64_t)count * (WIRE_UPS_ENTRY + up);

    if (max < WIRE_MAX_TEXT)
        max = WIRE_MAX_TEXT;
    return max > EC_WIRE_MAX_UPS_PAYLOAD ? EC_WIRE_MAX_UPS_PAYLOAD : (size_t)max;
}

/* ---- encoders ---------------------------------------------------------- */

/*
 * Checks that a frame with this payload fits both the protocol's cap and
 * buf, then writes its header; the writer is left at the payload.
 */
static long frame_begin(wr *w, uint8_t *buf, size_t cap, uint16_t type,
                        uint32_t flags, uint64_t payload, uint64_t round)
{
    ec_wire_header h = {EC_WIRE_MAGIC, EC_WIRE_VERSION, type, flags, 0, round};

    if (payload > EC_WIRE_MAX_PAYLOAD ||
        EC_WIRE_HEADER_SIZE + payload > (uint64_t)cap)
        return EC_ELIMIT;
    h.length = (uint32_t)payload;
    ec_wire_header_encode(buf, &h);
    w->p = buf;
    w->pos = EC_WIRE_HEADER_SIZE;
    return (long)(EC_WIRE_HEADER_SIZE + payload);
}

long ec_wire_encode_hello(uint8_t *buf, size_t cap, uint32_t worker,
                          uint32_t count, uint32_t pid, uint32_t d)
{
    wr w;
    long n = frame_begin(&w, buf, cap, EC_WIRE_HELLO, 0, 16, 0);

    if (n < 0)
        return n;
    wr_u32(&w, worker);
    wr_u32(&w, count);
    wr_u32(&w, pid);
    wr_u32(&w, d);
    assert((long)w.pos == n);
    return n;
}

long ec_wire_encode_welcome(uint8_t *buf, size_t cap, uint32_t n, uint32_t d)
{
    wr w;
    long size = frame_begin(&w, buf, cap, EC_WIRE_WELCOME, 0, 8, 0);

    if (size < 0)
        return size;
    wr_u32(&w, n);
    wr_u32(&w, d);
    assert((long)w.pos == size);
    return size;
}

long ec_wire_encode_stop(uint8_t *buf, size_t cap, uint64_t round)
{
    wr w;

    return frame_begin(&w, buf, cap, EC_WIRE_STOP, 0, 0, round);
}

/* The text is cut to WIRE_MAX_TEXT bytes at a UTF-8 boundary and at its
 * first NUL (there is none: it is a C string). */
long ec_wire_encode_error(uint8_t *buf, size_t cap, uint64_t round,
                          const char *text)
{
    size_t len = text ? strlen(text) : 0;
    wr w;
    long n;

    len = utf8_prefix(text, len, WIRE_MAX_TEXT);
    n = frame_begin(&w, buf, cap, EC_WIRE_ERROR, 0, len, round);
    if (n < 0)
        return n;
    if (len)
        memcpy(buf + w.pos, text, len);
    return n;
}

static void write_msg(wr *w, const ec_msg *m)
{
    wr_u8(w, (uint8_t)m->type);
    wr_u8(w, 0);
    wr_u16(w, 0);
    wr_u32(w, m->nnz);
    if (msg_is_randk(m->type))
        wr_u64(w, m->seed);
    if (msg_is_dither(m->type)) {
        wr_f64(w, m->norm);
        wr_f64(w, m->scale);
        wr_u32(w, m->s);
    }
    if (msg_has_indices(m->type))
        for (uint32_t i = 0; i < m->nnz; i++)
            wr_u32(w, m->idx[i]);
    for (uint32_t i = 0; i < m->nnz; i++)
        wr_f64(w, m->val[i]);
}

static int is_plus_zero(double v)
{
    uint64_t bits;

    memcpy(&bits, &v, sizeof bits);
    return bits == 0;
}

/* The k or s of a message as the compressor that made it would check them;
 * NULL if they are in range. A type none message has neither. */
static const char *msg_params_check(const ec_msg *m, char *buf,
                                    unsigned buflen)
{
    ec_comp_spec spec = {.type = m->type};

    switch (ec_comp_info_of(m->type)->param) {
    case EC_COMP_PARAM_NONE:
        return NULL;
    case EC_COMP_PARAM_S:
        spec.s = m->s;
        break;
    case EC_COMP_PARAM_K:
        spec.k = m->nnz;
        break;
    }
    return ec_comp_check(&spec, m->d, buf, buflen);
}

/*
 * What the decoder will insist on, and what it cannot see because it is
 * not sent: the bit counters are the derived ones and the fields the type
 * does not carry are zero. A message failing this is a caller bug.
 */
static int msg_consistent(const ec_msg *m)
{
    ec_msg derived = *m;

    if (!msg_type_known((uint32_t)m->type) || m->nnz > m->d)
        return 0;
    if (msg_is_dense(m->type) && m->nnz != 0 && m->nnz != m->d)
        return 0;
    if (msg_params_check(m, NULL, 0))
        return 0;
    for (uint32_t i = 1; i < m->nnz && msg_has_indices(m->type); i++)
        if (m->idx[i] <= m->idx[i - 1])
            return 0;
    ec_msg_count_bits(&derived);
    if (derived.value_bits != m->value_bits ||
        derived.index_bits != m->index_bits ||
        derived.paper_bits != m->paper_bits)
        return 0;
    if (!msg_is_randk(m->type) && m->seed != 0)
        return 0;
    if (!msg_is_dither(m->type) &&
        (!is_plus_zero(m->norm) || !is_plus_zero(m->scale) || m->s != 0))
        return 0;
    return 1;
}

size_t ec_wire_up_payload(const ec_up *up)
{
    uint64_t payload = 4 + msg_size(up->q.type, up->q.nnz);

    if (up->has_extra)
        payload += msg_size(up->extra.type, up->extra.nnz);
    if (up->has_stats)
        payload += WIRE_STATS;
    if (up->has_value)
        payload += WIRE_VALUE;
    return (size_t)payload;
}

/* An UP payload at the writer's position; its size was checked. */
static void write_up(wr *w, const ec_up *up)
{
    assert(msg_consistent(&up->q));
    assert(!up->has_extra || msg_consistent(&up->extra));
    wr_u32(w, (up->has_extra ? UP_HAS_EXTRA : 0) |
                  (up->has_stats ? UP_HAS_STATS : 0) |
                  (up->refreshed ? UP_REFRESHED : 0) |
                  (up->has_value ? UP_HAS_VALUE : 0));
    write_msg(w, &up->q);
    if (up->has_extra)
        write_msg(w, &up->extra);
    if (up->has_stats) {
        wr_f64(w, up->ef_in);
        wr_f64(w, up->ef_out);
    }
    if (up->has_value)
        wr_f64(w, up->value);
}

long ec_wire_encode_up(uint8_t *buf, size_t cap, uint64_t round,
                       const ec_up *up)
{
    wr w;
    long n = frame_begin(&w, buf, cap, EC_WIRE_UP, 0, ec_wire_up_payload(up),
                         round);

    if (n < 0)
        return n;
    write_up(&w, up);
    assert((long)w.pos == n);
    return n;
}

long ec_wire_ups_begin(uint8_t *buf, size_t cap, uint64_t round)
{
    ec_wire_header h = {EC_WIRE_MAGIC, EC_WIRE_VERSION, EC_WIRE_UPS, 0, 4,
                        round};

    if (cap < EC_WIRE_HEADER_SIZE + 4)
        return EC_ELIMIT;
    ec_wire_header_encode(buf, &h);
    put_u32(buf + EC_WIRE_HEADER_SIZE, 0);
    return EC_WIRE_HEADER_SIZE + 4;
}

long ec_wire_ups_add(uint8_t *buf, size_t cap, size_t len, uint32_t worker,
                     const ec_up *up)
{
    uint64_t one = ec_wire_up_payload(up);
    uint64_t total = (uint64_t)len + WIRE_UPS_ENTRY + one;
    wr w;

    assert(len >= EC_WIRE_HEADER_SIZE + 4);
    if (one > EC_WIRE_MAX_PAYLOAD ||
        total - EC_WIRE_HEADER_SIZE > EC_WIRE_MAX_UPS_PAYLOAD ||
        total > (uint64_t)cap)
        return EC_ELIMIT;
    w.p = buf;
    w.pos = len;
    wr_u32(&w, worker);
    wr_u32(&w, (uint32_t)one);
    write_up(&w, up);
    assert((uint64_t)w.pos == total);
    put_u32(buf + EC_WIRE_HEADER_SIZE, get_u32(buf + EC_WIRE_HEADER_SIZE) + 1);
    put_u32(buf + 12, (uint32_t)(total - EC_WIRE_HEADER_SIZE));
    return (long)total;
}

static void write_vec(wr *w, const double *v, uint32_t d, uint32_t nnz)
{
    int sparse = vec_sparse(nnz, d);

    wr_u8(w, sparse ? VEC_SPARSE : VEC_DENSE);
    wr_u8(w, 0);
    wr_u16(w, 0);
    wr_u32(w, sparse ? nnz : d);
    if (!sparse) {
        for (uint32_t j = 0; j < d; j++)
            wr_f64(w, v[j]);
        return;
    }
    /* Indices first, then values: two passes over v instead of a copy. */
    for (uint32_t j = 0; j < d; j++) {
        uint64_t bits;

        memcpy(&bits, &v[j], sizeof bits);
        if (bits)
            wr_u32(w, j);
    }
    for (uint32_t j = 0; j < d; j++) {
        uint64_t bits;

        memcpy(&bits, &v[j], sizeof bits);
        if (bits)
            wr_u64(w, bits);
    }
}

long ec_wire_encode_step(uint8_t *buf, size_t cap, uint64_t round,
                         const ec_down *down, uint32_t d)
{
    uint32_t nv, na = 0;
    uint64_t payload;
    wr w;
    long n;

    if (!down)
        return frame_begin(&w, buf, cap, EC_WIRE_STEP, 0, 0, round);
    nv = vec_count(down->v, d);
    payload = WIRE_STEP_FIXED + vec_size(nv, d);
    if (down->has_a) {
        na = vec_count(down->a, d);
        payload += vec_size(na, d);
    }
    if (down->has_stats)
        payload += WIRE_STATS;
    if (down->has_value)
        payload += WIRE_VALUE;
    n = frame_begin(&w, buf, cap, EC_WIRE_STEP, EC_WIRE_STEP_HAS_DOWN, payload,
                    round);
    if (n < 0)
        return n;
    wr_u32(&w, (down->init ? STEP_INIT : 0) | (down->has_a ? STEP_HAS_A : 0) |
                   (down->has_stats ? STEP_HAS_STATS : 0) |
                   (down->has_value ? STEP_HAS_VALUE : 0));
    wr_u64(&w, down->bits);
    wr_u64(&w, down->paper_bits);
    write_vec(&w, down->v, d, nv);
    if (down->has_a)
        write_vec(&w, down->a, d, na);
    if (down->has_stats) {
        wr_f64(&w, down->ef_in);
        wr_f64(&w, down->ef_out);
    }
    if (down->has_value)
        wr_f64(&w, down->value);
    assert((long)w.pos == n);
    return n;
}

/* ---- decoders ---------------------------------------------------------- */

int ec_wire_decode_hello(const uint8_t *p, size_t len, uint32_t *worker,
                         uint32_t *count, uint32_t *pid, uint32_t *d,
                         ec_err *e)
{
    rd r = {p, len, 0, "HELLO"};
    int rc;

    if ((rc = rd_need(&r, 16, e)) < 0)
        return rc;
    *worker = rd_u32(&r);
    *count = rd_u32(&r);
    *pid = rd_u32(&r);
    *d = rd_u32(&r);
    if (*count == 0 || *count > UINT32_MAX - *worker)
        return ec_err_set(e, EC_EPROTO,
                          "HELLO for %" PRIu32 " workers from worker %" PRIu32,
                          *count, *worker);
    return rd_end(&r, e);
}

int ec_wire_decode_welcome(const uint8_t *p, size_t len, uint32_t *n,
                           uint32_t *d, ec_err *e)
{
    rd r = {p, len, 0, "WELCOME"};
    int rc;

    if ((rc = rd_need(&r, 8, e)) < 0)
        return rc;
    *n = rd_u32(&r);
    *d = rd_u32(&r);
    return rd_end(&r, e);
}

int ec_wire_decode_error(const uint8_t *p, size_t len, char *buf,
                         size_t buflen, ec_err *e)
{
    const uint8_t *nul;
    size_t n;

    if (len > WIRE_MAX_TEXT)
        return ec_err_set(e, EC_EPROTO,
                          "ERROR text length %zu over the limit %u", len,
                          WIRE_MAX_TEXT);
    if (len && (nul = memchr(p, 0, len)))
        return ec_err_set(e, EC_EPROTO,
                          "ERROR text has a NUL byte at offset %zu",
                          (size_t)(nul - p));
    if (buflen == 0)
        return 0;
    n = utf8_prefix((const char *)p, len, buflen - 1);
    if (n)
        memcpy(buf, p, n);
    buf[n] = '\0';
    return 0;
}

/* Index j at position i of a list must be below d and above prev. */
static int check_index(const rd *r, const char *which, uint32_t i, uint32_t j,
                       uint32_t prev, uint32_t d, ec_err *e)
{
    if (j >= d)
        return ec_err_set(e, EC_EPROTO,
                          "%s %s index %" PRIu32 " at position %" PRIu32
                          " is out of range for d = %" PRIu32,
                          r->what, which, j, i, d);
    if (i > 0 && j <= prev)
        return ec_err_set(e, EC_EPROTO,
                          "%s %s index %" PRIu32 " at position %" PRIu32
                          " is not above the previous index %" PRIu32,
                          r->what, which, j, i, prev);
    return 0;
}

/* Reads u32 idx[nnz] (the caller has checked they are there). */
static int read_indices(rd *r, uint32_t nnz, uint32_t d, uint32_t *idx,
                        const char *which, ec_err *e)
{
    int rc;

    for (uint32_t i = 0; i < nnz; i++) {
        uint32_t j = rd_u32(r);

        if ((rc = check_index(r, which, i, j, i ? idx[i - 1] : 0, d, e)) < 0)
            return rc;
        idx[i] = j;
    }
    return 0;
}

/*
 * A randk message's indices are rebuilt from its seed. ec_randk_indices
 * wants a zeroed bitmap of (d + 63) / 64 words; the message's own val array
 * (d doubles from ec_msg_init, malloc'd and so without a declared type) is
 * free until the values are read, so it serves as that bitmap: no
 * allocation, O(d/64 + k), and the values overwrite it afterwards.
 */
static void rebuild_randk(ec_msg *out, uint64_t seed, uint32_t d, uint32_t k)
{
    size_t words = ((size_t)d + 63) / 64;
    uint64_t *bitmap = (uint64_t *)(void *)out->val;

    assert(words <= (d ? d : 1));
    memset(bitmap, 0, words * sizeof *bitmap);
    ec_randk_indices(seed, d, k, bitmap, out->idx);
}

static int read_msg(rd *r, uint32_t d, ec_msg *out, const char *which,
                    ec_err *e)
{
    uint32_t type, nnz, reserved;
    const char *bad;
    char why[128];
    int rc;

    /* The whole fixed part is read before the body's length is checked
     * against what is left after it. */
    if ((rc = rd_need(r, WIRE_MSG_FIXED, e)) < 0)
        return rc;
    type = rd_u8(r);
    reserved = rd_u8(r);
    reserved |= rd_u16(r);
    nnz = rd_u32(r);
    if (!msg_type_known(type))
        return ec_err_set(e, EC_EPROTO, "%s %s has unknown message type %u",
                          r->what, which, (unsigned)type);
    if (reserved)
        return ec_err_set(e, EC_EPROTO,
                          "%s %s has nonzero reserved bytes", r->what, which);
    if (nnz > d)
        return ec_err_set(e, EC_EPROTO,
                          "%s %s has nnz %" PRIu32 " over d = %" PRIu32,
                          r->what, which, nnz, d);
    if (msg_is_dense((ec_comp_type)type) && nnz != 0 && nnz != d)
        return ec_err_set(e, EC_EPROTO,
                          "%s %s of type %s has nnz %" PRIu32
                          " (must be 0 or d = %" PRIu32 ")",
                          r->what, which, ec_comp_name((ec_comp_type)type), nnz, d);
    if ((rc = rd_need(r, msg_size((ec_comp_type)type, nnz) - WIRE_MSG_FIXED,
                      e)) < 0)
        return rc;

    out->type = (ec_comp_type)type;
    out->d = d;
    out->nnz = nnz;
    out->seed = 0;
    out->norm = 0.0;
    out->scale = 0.0;
    out->s = 0;
    if (msg_is_randk(out->type))
        out->seed = rd_u64(r);
    if (msg_is_dither(out->type)) {
        out->norm = rd_f64(r);
        out->scale = rd_f64(r);
        out->s = rd_u32(r);
    }
    /* k (= nnz) and s within what a compressor accepts, which also keeps
     * the derived bit counts meaningful. */
    if ((bad = msg_params_check(out, why, sizeof why)))
        return ec_err_set(e, EC_EPROTO, "%s %s of type %s: %s", r->what,
                          which, ec_comp_name(out->type), bad);

    if (msg_is_randk(out->type)) {
        rebuild_randk(out, out->seed, d, nnz);
    } else if (msg_has_indices(out->type)) {
        if ((rc = read_indices(r, nnz, d, out->idx, which, e)) < 0)
            return rc;
    } else {
        for (uint32_t j = 0; j < nnz; j++)
            out->idx[j] = j;
    }
    for (uint32_t i = 0; i < nnz; i++)
        out->val[i] = rd_f64(r);
    ec_msg_count_bits(out);
    return 0;
}

/* An ec_msg with nothing in it, for an UP without its extra. */
static void msg_empty(ec_msg *m, uint32_t d)
{
    m->type = EC_COMP_NONE;
    m->d = d;
    m->nnz = 0;
    m->seed = 0;
    m->norm = m->scale = 0.0;
    m->s = 0;
    ec_msg_count_bits(m);
}

int ec_wire_decode_up(const uint8_t *p, size_t len, uint32_t d, ec_up *out,
                      ec_err *e)
{
    rd r = {p, len, 0, "UP"};
    uint32_t flags;
    int rc;

    assert(out->q.idx && out->q.val && out->extra.idx && out->extra.val);
    if ((rc = rd_need(&r, 4, e)) < 0)
        return rc;
    flags = rd_u32(&r);
    if (flags & ~(UP_HAS_EXTRA | UP_HAS_STATS | UP_REFRESHED | UP_HAS_VALUE))
        return ec_err_set(e, EC_EPROTO,
                          "UP flags 0x%" PRIx32 " has unknown bits", flags);
    if ((rc = read_msg(&r, d, &out->q, "q", e)) < 0)
        return rc;
    out->has_extra = (flags & UP_HAS_EXTRA) != 0;
    if (out->has_extra)
        rc = read_msg(&r, d, &out->extra, "extra", e);
    else
        msg_empty(&out->extra, d);
    if (rc < 0)
        return rc;
    out->has_stats = (flags & UP_HAS_STATS) != 0;
    out->refreshed = (flags & UP_REFRESHED) != 0;
    if ((rc = rd_stats(&r, out->has_stats, &out->ef_in, &out->ef_out, e)) < 0)
        return rc;
    out->has_value = (flags & UP_HAS_VALUE) != 0;
    if ((rc = rd_value(&r, out->has_value, &out->value, e)) < 0)
        return rc;
    return rd_end(&r, e);
}

int ec_wire_ups_open(ec_wire_ups_rd *it, const uint8_t *p, size_t len,
                     ec_err *e)
{
    rd r = {p, len, 0, "UPS"};
    int rc;

    if ((rc = rd_need(&r, 4, e)) < 0)
        return rc;
    it->p = p;
    it->len = len;
    it->pos = 4;
    it->left = rd_u32(&r);
    return 0;
}

int ec_wire_ups_next(ec_wire_ups_rd *it, uint32_t *worker,
                     const uint8_t **up, size_t *uplen, ec_err *e)
{
    rd r = {it->p, it->len, it->pos, "UPS"};
    uint32_t n;
    int rc;

    if (it->left == 0)
        return rd_end(&r, e) < 0 ? EC_EPROTO : 0;
    if ((rc = rd_need(&r, WIRE_UPS_ENTRY, e)) < 0)
        return rc;
    *worker = rd_u32(&r);
    n = rd_u32(&r);
    if ((rc = rd_need(&r, n, e)) < 0)
        return rc;
    *up = r.p + r.pos;
    *uplen = n;
    it->pos = r.pos + n;
    it->left--;
    return 1;
}

/* Fills v[0..d) from a vector; zeros wherever the sender sent none. */
static int read_vec(rd *r, uint32_t d, double *v, const char *which,
                    ec_err *e)
{
    uint32_t kind, reserved, nnz, prev = 0;
    size_t vals;
    int rc;

    if ((rc = rd_need(r, WIRE_VEC_FIXED, e)) < 0)
        return rc;
    kind = rd_u8(r);
    reserved = rd_u8(r);
    reserved |= rd_u16(r);
    nnz = rd_u32(r);
    if (kind != VEC_DENSE && kind != VEC_SPARSE)
        return ec_err_set(e, EC_EPROTO, "%s vector %s has unknown kind %u",
                          r->what, which, (unsigned)kind);
    if (reserved)
        return ec_err_set(e, EC_EPROTO,
                          "%s vector %s has nonzero reserved bytes", r->what,
                          which);
    if (kind == VEC_DENSE) {
        if (nnz != d)
            return ec_err_set(e, EC_EPROTO,
                              "%s dense vector %s has length %" PRIu32
                              " (must be d = %" PRIu32 ")",
                              r->what, which, nnz, d);
        if ((rc = rd_need(r, 8 * (uint64_t)d, e)) < 0)
            return rc;
        for (uint32_t j = 0; j < d; j++)
            v[j] = rd_f64(r);
        return 0;
    }
    if (nnz > d)
        return ec_err_set(e, EC_EPROTO,
                          "%s sparse vector %s has nnz %" PRIu32
                          " over d = %" PRIu32,
                          r->what, which, nnz, d);
    if ((rc = rd_need(r, 12 * (uint64_t)nnz, e)) < 0)
        return rc;
    /* Indices come first and values after them; each value is placed as
     * its index is checked, reading it from its own offset. */
    memset(v, 0, (size_t)d * sizeof *v);
    vals = r->pos + 4 * (size_t)nnz;
    for (uint32_t i = 0; i < nnz; i++) {
        uint32_t j = rd_u32(r);

        if ((rc = check_index(r, which, i, j, prev, d, e)) < 0)
            return rc;
        v[j] = get_f64(r->p + vals + 8 * (size_t)i);
        prev = j;
    }
    r->pos = vals + 8 * (size_t)nnz;
    return 0;
}

int ec_wire_decode_step(const uint8_t *p, size_t len, uint32_t flags,
                        uint32_t d, ec_down *out, int *has_down, ec_err *e)
{
    rd r = {p, len, 0, "STEP"};
    uint32_t dflags;
    int rc;

    *has_down = 0;
    if (flags & ~EC_WIRE_STEP_HAS_DOWN)
        return ec_err_set(e, EC_EPROTO,
                          "unknown flags 0x%" PRIx32 " on a STEP frame",
                          flags & ~EC_WIRE_STEP_HAS_DOWN);
    if (!(flags & EC_WIRE_STEP_HAS_DOWN))
        return rd_end(&r, e);

    assert(out && out->v && out->a);
    if ((rc = rd_need(&r, WIRE_STEP_FIXED, e)) < 0)
        return rc;
    dflags = rd_u32(&r);
    if (dflags & ~(STEP_INIT | STEP_HAS_A | STEP_HAS_STATS | STEP_HAS_VALUE))
        return ec_err_set(e, EC_EPROTO,
                          "STEP broadcast flags 0x%" PRIx32 " has unknown bits",
                          dflags);
    out->init = (dflags & STEP_INIT) != 0;
    out->has_a = (dflags & STEP_HAS_A) != 0;
    out->bits = rd_u64(&r);
    out->paper_bits = rd_u64(&r);
    if ((rc = read_vec(&r, d, out->v, "v", e)) < 0)
        return rc;
    if (out->has_a)
        rc = read_vec(&r, d, out->a, "a", e);
    else
        memset(out->a, 0, (size_t)d * sizeof *out->a);
    if (rc < 0)
        return rc;
    out->has_stats = (dflags & STEP_HAS_STATS) != 0;
    if ((rc = rd_stats(&r, out->has_stats, &out->ef_in, &out->ef_out, e)) < 0)
        return rc;
    out->has_value = (dflags & STEP_HAS_VALUE) != 0;
    if ((rc = rd_value(&r, out->has_value, &out->value, e)) < 0)
        return rc;
    if ((rc = rd_end(&r, e)) < 0)
        return rc;
    *has_down = 1;
    return 0;
}
