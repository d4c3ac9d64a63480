/*
 * Compression operators Q for vectors in R^d, and the messages they produce.
 * Contraction compressors satisfy E||Q(x) - x||^2 <= (1 - delta)||x||^2.
 * Compressing allocates nothing: every buffer lives in the compressor or the
 * message, sized for d when they are made.
 */
#ifndef ECOPT_COMPRESS_H
#define ECOPT_COMPRESS_H

#include <stdint.h>

#include "ecopt/error.h"
#include "ecopt/rng.h"

/* Which count a compressor takes: none, k (1..d) or s (levels, 1..65535). */
typedef enum ec_comp_param {
    EC_COMP_PARAM_NONE = 0,
    EC_COMP_PARAM_K,
    EC_COMP_PARAM_S
} ec_comp_param;

/* How a message of the compressor travels (wire.h gives the bytes). */
typedef enum ec_comp_layout {
    EC_COMP_LAYOUT_DENSE = 0,   /* nnz values, the indices implied */
    EC_COMP_LAYOUT_INDEXED,     /* nnz (index, value) pairs */
    EC_COMP_LAYOUT_SEEDED,      /* nnz values and the seed of their indices */
    EC_COMP_LAYOUT_LEVELS       /* the norm, levels and signs (dithering) */
} ec_comp_layout;

/*
 * The compressors, one row each; every list of them (the names, the
 * checks, the wire, the memory account, the service's menus) comes from
 * here. The numbers travel on the wire: rows are append-only.
 *
 * X(ID, NAME, PARAM, UNBIASED, CONTRACTION, BROADCAST, LAYOUT, SHIFT, SUMMARY)
 *   PARAM        EC_COMP_PARAM_ suffix: the count it takes
 *   UNBIASED     1: E Q(x) = x
 *   CONTRACTION  1: a job may choose it (E||Q(x) - x||^2 <= (1 - delta)
 *                ||x||^2); 0: the unbiased forms DIANA's shifts use alone
 *   BROADCAST    1: compressor_down may take it (EF21-P compresses the
 *                broadcast with a contractive sparsifier, as its analysis
 *                and experiments do)
 *   LAYOUT       EC_COMP_LAYOUT_ suffix
 *   SHIFT        DIANA's unbiased shift compressor for it (same k or s);
 *                an unbiased contraction (natural) is its own
 */
#define EC_COMPRESSORS(X)                                                     \
    X(EC_COMP_NONE, "none", NONE, 1, 1, 0, DENSE, EC_COMP_NONE,               \
      "identity: all d values")                                               \
    X(EC_COMP_TOPK, "topk", K, 0, 1, 1, INDEXED, EC_COMP_RANDK_UNBIASED,      \
      "the k largest |x_j|; ties go to the smaller index")                    \
    X(EC_COMP_RANDK, "randk", K, 0, 1, 1, SEEDED, EC_COMP_RANDK_UNBIASED,     \
      "k uniform coordinates without replacement, unscaled")                  \
    X(EC_COMP_RANDK_UNBIASED, "randk-unbiased", K, 1, 0, 0, SEEDED,           \
      EC_COMP_NONE, "(d/k) randk; omega = d/k - 1")                                         \
    X(EC_COMP_DITHER, "dither", S, 0, 1, 0, LEVELS, EC_COMP_DITHER_UNBIASED,  \
      "random dithering, s levels, scaled by 1/(1+omega)")                    \
    X(EC_COMP_DITHER_UNBIASED, "dither-unbiased", S, 1, 0, 0, LEVELS,         \
      EC_COMP_NONE, "random dithering without the scaling")                   \
    X(EC_COMP_NATURAL, "natural", NONE, 1, 1, 0, DENSE, EC_COMP_NATURAL,      \
      "natural compression: each value rounded at random to a neighbouring "  \
      "power of two, unbiased; omega = 1/8, so a contraction, delta = 7/8")   \
    X(EC_COMP_NATDITHER, "natural-dither", S, 0, 1, 0, LEVELS,                \
      EC_COMP_NATDITHER_UNBIASED,                                             \
      "natural dithering: levels 2^(1-s)..1 of the norm, scaled by "          \
      "1/(1+omega)")                                                          \
    X(EC_COMP_NATDITHER_UNBIASED, "natural-dither-unbiased", S, 1, 0, 0,      \
      LEVELS, EC_COMP_NONE, "natural dithering without the scaling")

typedef enum ec_comp_type {
#define EC_COMP_ENUM(id, name, param, unbiased, contraction, broadcast, layout, shift, \
                     summary) id,
    EC_COMPRESSORS(EC_COMP_ENUM)
#undef EC_COMP_ENUM
} ec_comp_type;

/* The number of rows; outside the enum, so that a switch over the types
 * that misses one is still warned about. */
#define EC_COMP_PLUS_ONE(...) +1
enum { EC_COMP_COUNT = 0 EC_COMPRESSORS(EC_COMP_PLUS_ONE) };
#undef EC_COMP_PLUS_ONE

/* A compressor's row. */
typedef struct ec_comp_info {
    const char *name;
    ec_comp_param param;
    int unbiased;
    int contraction;
    int broadcast;
    ec_comp_layout layout;
    ec_comp_type shift;
    const char *summary;
} ec_comp_info;

/* The row of t; NULL if t is no compressor. */
const ec_comp_info *ec_comp_info_of(ec_comp_type t);

typedef struct ec_comp_spec {
    ec_comp_type type;
    uint32_t k;             /* topk, randk, randk-unbiased: 1..d */
    uint32_t s;             /* dither: number of levels, 1..65535 */
} ec_comp_spec;

/* The row's name ("none", "topk", ...); NULL if out of range. */
const char *ec_comp_name(ec_comp_type t);
/* The type for a name; returns < 0 for an unknown name. */
int ec_comp_from_name(const char *name, ec_comp_type *out);

/* "none, topk, randk, dither": the names of the compressors a job may
 * choose (contraction set) or of all, joined by ", " into buf. */
const char *ec_comp_names(int contraction_only, char *buf, unsigned buflen);
/* "topk, randk": the names of the compressors compressor_down may take. */
const char *ec_comp_broadcast_names(char *buf, unsigned buflen);

/* NULL when spec is valid for dimension d, else a sentence such as
 * "compressor.k must be in 1..123 (got 0)". */
const char *ec_comp_check(const ec_comp_spec *spec, uint32_t d, char *buf,
                          unsigned buflen);

/* delta of the contraction (1 for none, k/d for topk and randk, 1/(1+omega)
 * for dither and natural-dither, 1 - omega = 7/8 for natural, unbiased with
 * omega < 1); 0 for the unbiased types that are not contractions. */
double ec_comp_delta(const ec_comp_spec *spec, uint32_t d);
/* omega of the unbiased form: 0 for none, d/k - 1 for randk(-unbiased),
 * min(d/s^2, sqrt(d)/s) for dither(-unbiased), 1/8 for natural, 1/8 +
 * min(sqrt(d)/2^(s-1), d/4^(s-1)) for natural-dither(-unbiased); topk has
 * none and gives -1. */
double ec_comp_omega(const ec_comp_spec *spec, uint32_t d);

/*
 * A compressed vector: nnz entries (idx ascending, val), plus its exact size.
 * idx and val have room for d entries. Coordinates not listed are zero. A
 * message of type none lists all d coordinates, or none at all (the empty q
 * of an init exchange).
 *
 * Sizes: value_bits and index_bits are what an explicit encoding sends, and
 * depend on (type, d, nnz, s) alone (ec_msg_count_bits), so a receiver
 * holding those rebuilds them:
 *   none:            64 nnz value bits (nnz = d, or 0), 0 index bits
 *   topk:            64 k value bits, k * ceil(log2 d) index bits
 *   randk(-unbiased): 64 k value bits, 64 index bits (the shared seed)
 *   dither(-unb.):   64 (the norm) + d * ceil(log2(s+1)) (levels) + nnz (signs)
 *                    value bits, 0 index bits; natural-dither(-unbiased) alike
 *   natural:         64 d value bits (nnz = d), 0 index bits
 * with k = nnz. paper_bits follows the reference code each compressor's
 * experiments come from (docs/algorithms.md, "Counting bits"): 64 per
 * value for none, topk and randk (64 nnz, indices and seeds free),
 * 64 + nnz (1 + ceil(log2 s)) for dither and natural-dither (the norm, a
 * sign and the level bits of each entry sent), and 9 per value for natural
 * (a sign and an 8-bit exponent, as its paper counts binary32).
 *
 * For randk, seed is the draw the indices came from. For dither, every
 * val[i] equals +-level * unit exactly, unit = ec_dither_unit(norm, s, scale),
 * so a decoder holding (norm, levels, signs) rebuilds the same doubles; for
 * natural-dither, +-2^(level - s) * norm * scale exactly (ec_msg_level gives
 * the level back). Every val[i] of natural is +-0 or +-2^e (or x[i] itself
 * when that is not finite).
 * Fields a type does not use (seed but for randk; norm, scale and s but for
 * dither) are 0.
 */
typedef struct ec_msg {
    ec_comp_type type;
    uint32_t d;
    uint32_t nnz;
    uint32_t *idx;
    double *val;
    uint64_t value_bits;
    uint64_t index_bits;
    uint64_t paper_bits;
    uint64_t seed;          /* randk */
    double norm;            /* dither: ||x||_2 */
    double scale;           /* dither: 1/(1+omega); the unbiased forms: 1 */
    uint32_t s;             /* dither: levels */
} ec_msg;

int ec_msg_init(ec_msg *m, uint32_t d);   /* 0 or EC_ENOMEM */
void ec_msg_clear(ec_msg *m);             /* NULL or zeroed is a no-op */
/* dense[j] += alpha * m[j] for the listed coordinates. A dense message
 * (type none) lists 0..nnz-1 in order: these two read its val alone, so
 * a maker of dense messages that only these consume (the engine's dense
 * uplinks) may leave idx unwritten. */
void ec_msg_axpy(const ec_msg *m, double alpha, double *dense);
/* out[j] = m[j], zeros elsewhere (out has d entries). */
void ec_msg_to_dense(const ec_msg *m, double *out);
/* Sets value_bits, index_bits and paper_bits from type, d, nnz and s as
 * listed above; ec_compress counts with it, and so does a wire decoder. */
void ec_msg_count_bits(ec_msg *m);

double ec_dither_unit(double norm, uint32_t s, double scale);
/* The level (0..s) of entry i of a dither or natural-dither message: the
 * random choice a trace records. */
uint32_t ec_msg_level(const ec_msg *m, uint32_t i);

typedef struct ec_compressor ec_compressor;   /* spec + scratch for one d */

ec_compressor *ec_compressor_new(const ec_comp_spec *spec, uint32_t d,
                                 ec_err *e);
void ec_compressor_free(ec_compressor *c);
/* The bytes of scratch ec_compressor_new allocates for spec at d (the
 * memory account's term). */
uint64_t ec_comp_scratch_bytes(const ec_comp_spec *spec, uint32_t d);
const ec_comp_spec *ec_compressor_spec(const ec_compressor *c);

/*
 * How top-k finds its entries. Every method gives the same message (the k
 * largest |x_j|, ties to the smaller index, in index order); AUTO, the
 * default, picks the fastest for k and d. The others are for the tests,
 * which hold each to a sorting reference, and for bench_compress.
 */
typedef enum {
    EC_TOPK_SELECT_AUTO,
    EC_TOPK_SELECT_HEAP,    /* one pass keeping the k best in a heap */
    EC_TOPK_SELECT_RADIX,   /* MSB-first radix select, O(d) whatever x */
    EC_TOPK_SELECT_FILTER   /* one pass keeping candidates above a bar */
} ec_topk_select;

/* 0, EC_EINVAL (not a top-k compressor, or no such method) or EC_ENOMEM
 * (the heap's k entries). Not for use between a compress and its reader. */
int ec_compressor_set_topk_select(ec_compressor *c, ec_topk_select select);

/*
 * out = Q(x). Draws from rng only for the random compressors. O(d) time for
 * every type, topk included (selection, not a sort), and no allocation.
 * Deterministic given x and the rng state.
 */
void ec_compress(ec_compressor *c, const double *x, ec_rng *rng,
                 ec_msg *out);

/*
 * Compression fed in pieces, for a caller that makes x in a pass of its
 * own (ECLK's error memory) and would otherwise read all d entries back:
 * begin, then feed x[begin..end) for consecutive ranges that cover 0..d in
 * order (each piece as it is made, while it is still in the cache), then
 * end, which writes the message ec_compress would have written for the
 * whole x, bit for bit. x is the whole vector each time, and the entries
 * fed must not change before end. Only where ec_compress_feeds says so
 * (top-k by the filter: k above the heap's range and below d), and no
 * other call on c in between.
 */
int ec_compress_feeds(const ec_compressor *c);
void ec_compress_feed_begin(ec_compressor *c);
/*
 * ec_compress_feed_begin for a caller that feeds one stream round after
 * round (a worker's error memory) and keeps *hint for it, 0 at the start:
 * the filter starts from a bar guessed from the last call's threshold
 * instead of from the first k entries, and ec_compress_feed_end leaves the
 * next guess in *hint. The message is the same whatever *hint holds; a
 * guess too high costs ec_compress_feed_end a second pass over x.
 */
void ec_compress_feed_begin_hinted(ec_compressor *c, uint64_t *hint);
void ec_compress_feed(ec_compressor *c, const double *x, uint32_t begin,
                      uint32_t end);
void ec_compress_feed_end(ec_compressor *c, const double *x, ec_msg *out);

/*
 * The ascending index set of a randk message with this seed, exactly as
 * ec_compress derives it: idx[0..k) (k <= d). bitmap is scratch of
 * (d + 63) / 64 words that must be zero on entry and is zero again on
 * return. O(d/64 + k), no allocation.
 */
void ec_randk_indices(uint64_t seed, uint32_t d, uint32_t k, uint64_t *bitmap,
                      uint32_t *idx);

#endif
