/*
 * codec.h - what the gradient codecs (collectives/compress/codec_*.c) see:
 * the compression state, one call's context, the codec ops table and the
 * helpers every codec shares (exchanges that stamp their own tag and count
 * their time, work buffers, random numbers, float helpers).
 *
 * A call of gw_allreduce_compressed (compress_api.c) runs in this order:
 *  1. x = input + residual is written into the state's `next` buffer (the
 *     residual is skipped where it is zero, so that -0.0 inputs survive),
 *     and the maximum |x| of every bucket is taken on the way. With top-k
 *     momentum the velocity goes first: u' = m u + input is written into
 *     `extra_next` (u is `extra`) and x = u' + residual.
 *  2. Those maxima are allreduced with GW_MAX (IEEE maximum: NaN wins), which
 *     is how every rank learns at once whether any rank holds a NaN or an
 *     infinity, and gives int8 its shared scales and fp16 its shared range.
 *  3. Dense calls (warm-up, small tensors, GW_CODEC_NONE) allreduce x as
 *     gw_allreduce would. Otherwise the codec's run() encodes x, exchanges,
 *     and decodes into out, and leaves in x what it did not transmit (the new
 *     residual): x = transmitted + residual.
 *  4. On success the buffers `residual` and `next` (and `extra` and
 *     `extra_next`, where there is one) swap and the step advances; on
 *     failure they are left alone, so the state is unchanged.
 * Every exchange is its own collective on the communicator (its own sequence
 * number) whose signature covers the settings, shape, step, phase and
 * arguments, so ranks that disagree about any of them meet GW_ERR_MISMATCH.
 */
#ifndef GW_COMPRESS_CODEC_H
#define GW_COMPRESS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/coll.h"
#include "gradwire.h"

/* The hot loops are built twice, for AVX2 and for the baseline ISA, and the
 * dynamic loader picks one per CPU (GCC function multiversioning); the
 * compress sources are built with -O3 so that both are vectorised. The two
 * versions give the same bits: the loops use only IEEE operations, which
 * every ISA rounds alike, and the build's ISO C mode (-std=c11) keeps GCC
 * from contracting them into FMAs. */
/* Not under ThreadSanitizer: the loader runs the clones' resolvers before
 * the sanitizer's runtime is up, and the instrumented resolvers crash. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__ELF__) && \
    !defined(__SANITIZE_THREAD__)
#define GW__CZ_HOT __attribute__((target_clones("avx2", "default")))
#else
#define GW__CZ_HOT
#endif

/* Work buffers a codec may keep in its state between calls (grown on
 * demand, freed with the state). */
#define GW__CZ_NWORK 4

typedef struct gw__codec_ops gw__codec_ops_t;

struct gw_compress_state {
    gw_compress_config_t cfg;
    const gw__codec_ops_t *ops; /* NULL for GW_CODEC_NONE */
    size_t rows, cols, count;
    uint64_t step;
    float *residual; /* count floats: what earlier steps did not transmit */
    float *next;     /* count floats: this call's x, then its new residual */
    float *extra;    /* the codec's persistent floats (PowerSGD: Q; top-k
                      * with momentum: the velocity u), saved */
    size_t nextra;
    /* With momentum (cfg.momentum != 0, top-k only), extra is the velocity
     * u, rebuilt from every call's input rather than changed in place: the
     * call writes the new u here (nextra floats) and it is swapped in on
     * success. NULL without momentum. */
    float *extra_next;
    void *work[GW__CZ_NWORK];
    size_t work_len[GW__CZ_NWORK];
    /* A codec's memo between calls (the casts: the last scale exponent, its
     * guess for the next call). Not saved: it changes how fast a call is,
     * never its result. */
    int hint, has_hint;
    gw_compress_stats_t last, total;
};

/* One call in progress. */
typedef struct gw__cz_call {
    gw_comm_t *comm;
    gw_compress_state_t *st;
    int n, rank;
    size_t count;
    const float *in; /* count floats: the caller's gradient */
    float *x;        /* count floats: x on entry; the codec leaves the residual */
    float *out;      /* count floats, may be the caller's input (in place) */
    /* Set by a codec's prepare() that encoded x on a guess (see there). */
    int prepared, prepared_guess;
    const float *gmax; /* max |x| over ranks, per bucket or one value */
    size_t ngmax;
    uint64_t key; /* random key of this call: seed, step */
    int phase;    /* exchanges made so far in this call */
    /* Accounting, filled by the helpers below and by the codec. */
    int64_t comm_ns, comm_cpu_ns; /* wall and thread CPU time in exchanges */
    int64_t encode_ns, decode_ns;
    uint64_t encoded_bytes;
} gw__cz_call_t;

struct gw__codec_ops {
    size_t size; /* sizeof(gw__codec_ops_t) */
    gw_codec_t codec;
    /* 1: the shared maxima of step 2 are per bucket (int8); 0: one value. */
    int per_bucket_max;
    /* Settings and shape the codec cannot serve (logged, naming the
     * problem); NULL: anything goes. */
    gw_status_t (*check)(const gw_compress_config_t *cfg, size_t rows, size_t cols,
                         const gw_logger_t *lg);
    /* Floats of persistent codec state for this shape (NULL: none), and
     * their initial value (NULL: zeros). */
    size_t (*extra_floats)(const gw_compress_config_t *cfg, size_t rows, size_t cols);
    void (*extra_init)(gw_compress_state_t *st);
    /* 1 when this call should use the dense path (e.g. PowerSGD on a shape
     * where it saves nothing); NULL: never. Must depend only on what every
     * rank agrees on (settings, shape, rank count). */
    int (*go_dense)(const gw_compress_state_t *st, int nranks);
    /* A call that cannot work with this many ranks (logged); NULL: fine. */
    gw_status_t (*check_ranks)(const gw_compress_state_t *st, int nranks, const gw_logger_t *lg);
    /* Optional step 1 of its own, for a codec that can usually encode in
     * the same pass (the casts: x, its maximum and its 16-bit image in one
     * pass over memory instead of two). It returns the largest |x| exactly
     * as step 1 would (per_bucket_max must be 0) and may leave in call->x
     * and in its work buffers an encoding made on a guess (say, the last
     * call's scale), with call->prepared set. run() must then check the
     * guess against the shared maximum and, where it was wrong, form x
     * again (gw__cz_form_x) and encode afresh: the result never depends on
     * the guess. Cannot fail (without memory it just forms x). */
    uint32_t (*prepare)(gw__cz_call_t *call);
    /* Encode call->x, exchange, decode the average into call->out; leave
     * the new residual in call->x. */
    gw_status_t (*run)(gw__cz_call_t *call);
};

extern const gw__codec_ops_t gw__codec_fp16;
extern const gw__codec_ops_t gw__codec_bf16;
extern const gw__codec_ops_t gw__codec_int8;
extern const gw__codec_ops_t gw__codec_sign;
extern const gw__codec_ops_t gw__codec_topk;
extern const gw__codec_ops_t gw__codec_powersgd;

/* Step 1 as compress_api.c does it: call->x = input + residual (or as the
 * state's settings say), returning the largest |x| as an order-preserving
 * integer (compress_api.c). */
uint32_t gw__cz_form_x(gw__cz_call_t *call);

/* The ops of a codec; NULL for GW_CODEC_NONE and unknown values. */
const gw__codec_ops_t *gw__codec_lookup(gw_codec_t codec);

/* The first setting in which a and b differ ("codec", "seed", ...), or NULL
 * when they are equal (compress_state.c). */
const char *gw__cz_config_diff(const gw_compress_config_t *a, const gw_compress_config_t *b);

/* ---- exchanges (compress_comm.c) ---------------------------------------- */

/* Allreduce as one phase of the call: stamps a tag whose signature covers
 * the call and the arguments, runs algo (GW_ALGO_AUTO: as gw_allreduce would
 * pick; never GW_AVG), and adds the time to call->comm_ns. With one rank it
 * copies. */
gw_status_t gw__cz_allreduce(gw__cz_call_t *call, const void *send, void *recv, size_t count,
                             gw_dtype_t dtype, gw_op_t op, gw_algo_t algo);

/* Stamp the tag of a phase that a codec drives itself with gw__p2p_*
 * (count, dtype and op describe it for the signature). The codec adds the
 * time it spends waiting to call->comm_ns. */
void gw__cz_begin(gw__cz_call_t *call, size_t count, gw_dtype_t dtype, gw_op_t op);

/* Allgather of `bytes` bytes per rank into recv (n * bytes), as one phase. */
gw_status_t gw__cz_allgather(gw__cz_call_t *call, const void *send, void *recv, size_t bytes);

/* Payload bytes this rank sends in a ring allreduce of `bytes` bytes made of
 * elements of esize bytes (the ring's block split, counted exactly). */
uint64_t gw__cz_ring_bytes(size_t count, size_t esize, int n, int rank);

/* ---- buffers, random numbers, clocks (compress_util.c) ------------------ */

/* Work buffer `slot` of the state with at least len bytes (64-byte
 * aligned; contents undefined). Logs and returns GW_ERR_NO_MEMORY. */
gw_status_t gw__cz_work(gw__cz_call_t *call, int slot, size_t len, void **out);

/* A 64-bit mix of its inputs (splitmix64 finaliser over each word). */
uint64_t gw__cz_mix(uint64_t a, uint64_t b);

/* 32 random bits for element i of the stream `key` (a counter-based hash:
 * any element can be drawn in any order, on any rank). */
static inline uint32_t gw__cz_rand32(uint32_t key, uint32_t i)
{
    uint32_t h = i * 0x9e3779b9u ^ key;
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    h ^= h >> 16;
    return h;
}

/* |x| as an order-preserving integer: for non-negative floats the bit
 * pattern orders like the value, and NaN sorts above infinity. */
static inline uint32_t gw__cz_absbits(float x)
{
    uint32_t u;
    __builtin_memcpy(&u, &x, 4);
    return u & 0x7fffffffu;
}

static inline float gw__cz_from_bits(uint32_t u)
{
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

/* Step 1 for one element: g + r where the residual r is not zero, g itself
 * (bit for bit, -0.0 included) where it is. Spelled with bit masks rather
 * than ?: so that the loops around it vectorise: the sum is computed
 * everywhere and only selected where it is wanted. */
static inline float gw__cz_plus_residual(float g, float r)
{
    float s = g + r;
    uint32_t gb, sb;
    __builtin_memcpy(&gb, &g, 4);
    __builtin_memcpy(&sb, &s, 4);
    uint32_t use = 0u - (uint32_t)(r != 0.0f);
    return gw__cz_from_bits((sb & use) | (gb & ~use));
}

/* The int8 codec's stochastic rounding of one bucket (codec_int8.c): x (all
 * |x| <= m, m > 0) becomes levels q in [-levels, levels], random bits from
 * stream `key`, and x is left holding x - m (q / levels). */
void gw__cz_int8_quantize(float *x, int8_t *q, uint32_t len, float m, int levels, uint32_t key);

/* The sign codec's encoding of x (one rank's message, bucket scales and
 * residual) and decoding of n gathered messages (codec_sign.c), and
 * PowerSGD's Gram-Schmidt of P (rows x r) and reconstruction out = P Qa^T,
 * m -= P Ql^T (codec_powersgd.c): exposed as the references of the GPU
 * kernels (collectives/cuda). */
void gw__cz_sign_encode(float *x, size_t count, size_t bucket, uint8_t *msg);
void gw__cz_sign_decode(const uint8_t *all, int n, size_t count, size_t bucket, float *out);
void gw__cz_psgd_orthonormalise(float *p, size_t rows, int r);
void gw__cz_psgd_reconstruct(float *out, float *m, const float *p, const float *qa, const float *ql,
                             size_t rows, size_t cols, int r);

/* Monotonic wall-clock and this thread's CPU time, in nanoseconds. */
int64_t gw__cz_now(void);
int64_t gw__cz_cpu_now(void);

/* The checksum that ends a saved compression state (compress_save.c):
 * FNV-1a 64 over every byte before the trailer. */
uint64_t gw__cz_state_checksum(const uint8_t *p, size_t n);

#endif
