/*
 * codec_powersgd.c - PowerSGD (Vogels et al. 2019): a rank-r approximation
 * of the gradient matrix by one step of subspace iteration per call.
 *
 * With M_i the rows x cols matrix x of rank i and Q (cols x r) the state
 * every rank shares:
 *   P_i = M_i Q            local, psgd_gemm.c's blocked product
 *   P   = sum_i P_i        allreduce (rows r floats)
 *   P^  = orthonormal P    Gram-Schmidt, here, in double, in a fixed order
 *   Q_i = M_i^T P^         local, psgd_gemm.c
 *   R_i = M_i - P^ Q_i^T   the residual, kept for the next step
 *   Q   = sum_i Q_i / n    allreduce (cols r floats)
 *   out = P^ Q^T           the average of the P^ Q_i^T, each rank's own
 *                          contribution included exactly as its peers see it
 * P and Q are the only things on the wire: (rows + cols) r floats instead of
 * rows cols. Both allreduces are plain sums because the scheme is linear in
 * M. Q is kept as the warm start of the next call, which is what makes one
 * power iteration per step enough (the subspace keeps improving over steps).
 *
 * Determinism: after each allreduce every rank holds the same bits, and what
 * it computes from them (Gram-Schmidt, the final P^ Q^T) is plain C with a
 * fixed order of operations rather than BLAS, whose kernels may round
 * differently on different CPUs: so replicas stay bitwise identical even on
 * a mixed cluster. The rank-local products are the project's own kernels
 * (psgd_gemm.c, fixed order as well), so the library links no BLAS.
 *
 * Q starts as uniform random numbers from the shared seed (integer
 * arithmetic, so every rank and every libm agrees). A column of Q that
 * comes out zero (a zero gradient) would stay zero forever under warm
 * starts, so it is drawn afresh from (seed, step, column).
 *
 * Shapes where (rows + cols) r >= rows cols would send more than the dense
 * allreduce; those calls go dense.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "collectives/compress/codec.h"
#include "collectives/compress/psgd_gemm.h"

static size_t psgd_extra(const gw_compress_config_t *cfg, size_t rows, size_t cols)
{
    (void)rows;
    return cols * (size_t)cfg->powersgd_rank;
}

static gw_status_t psgd_check(const gw_compress_config_t *cfg, size_t rows, size_t cols,
                              const gw_logger_t *lg)
{
    (void)cfg;
    if (rows > INT_MAX || cols > INT_MAX) {
        GW_ERROR(lg, "compress", "PowerSGD: a %zu x %zu matrix has a side beyond int range", rows,
                 cols);
        return GW_ERR_UNSUPPORTED;
    }
    return GW_OK;
}

/* Uniform in [-1, 1) from 24 random bits. */
static float uniform(uint32_t key, uint32_t i)
{
    return (float)((int32_t)(gw__cz_rand32(key, i) >> 8) - (1 << 23)) * 0x1p-23f;
}

static void fill_column(float *q, size_t cols, int r, int col, uint32_t key)
{
    for (size_t i = 0; i < cols; i++)
        q[i * (size_t)r + (size_t)col] = uniform(key, (uint32_t)i);
}

static void psgd_init(gw_compress_state_t *st)
{
    int r = st->cfg.powersgd_rank;
    for (int c = 0; c < r; c++)
        fill_column(st->extra, st->cols, r, c, (uint32_t)gw__cz_mix(st->cfg.seed, (uint64_t)c));
}

static int psgd_dense(const gw_compress_state_t *st, int nranks)
{
    (void)nranks;
    size_t r = (size_t)st->cfg.powersgd_rank;
    if (st->rows > SIZE_MAX / 2 || st->rows + st->cols > SIZE_MAX / r)
        return 1;
    return (st->rows + st->cols) * r >= st->count;
}

/* Orthonormalise the columns of the rows x r row-major matrix p in place:
 * Gram-Schmidt with each projection done twice ("twice is enough" for
 * numerical orthogonality), sums in double. A column that loses all but
 * DEPENDENT of its norm to the projections lies in the span of the earlier
 * ones (up to float rounding, which is all that is left of it): normalising
 * that rounding noise would bring back an earlier direction, so the column
 * becomes zero instead. */
#define DEPENDENT 1e-4

static double column_norm(const float *p, size_t rows, size_t ld, int j)
{
    double norm = 0;
    for (size_t i = 0; i < rows; i++)
        norm += (double)p[i * ld + (size_t)j] * (double)p[i * ld + (size_t)j];
    return sqrt(norm);
}

static void orthonormalise(float *p, size_t rows, int r)
{
    const size_t ld = (size_t)r;
    for (int j = 0; j < r; j++) {
        double before = column_norm(p, rows, ld, j);
        for (int pass = 0; pass < 2; pass++) {
            for (int c = 0; c < j; c++) {
                double d = 0;
                for (size_t i = 0; i < rows; i++)
                    d += (double)p[i * ld + (size_t)j] * (double)p[i * ld + (size_t)c];
                for (size_t i = 0; i < rows; i++)
                    p[i * ld + (size_t)j] =
                        (float)((double)p[i * ld + (size_t)j] - d * (double)p[i * ld + (size_t)c]);
            }
        }
        double norm = column_norm(p, rows, ld, j);
        int keep = norm > 0 && norm > DEPENDENT * before;
        for (size_t i = 0; i < rows; i++)
            p[i * ld + (size_t)j] = keep ? (float)((double)p[i * ld + (size_t)j] / norm) : 0.0f;
    }
}

static int all_finite(const float *v, size_t n)
{
    uint32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t a = gw__cz_absbits(v[i]);
        m = a > m ? a : m;
    }
    return m < 0x7f800000u;
}

/* t[j] = sum over k (in order) of p[k] q[k * stride + j], j < len: a piece
 * of one row of a rank-r product. */
static inline void product_row(float *t, const float *p, const float *q, size_t len, size_t stride,
                               int r)
{
    for (size_t j = 0; j < len; j++)
        t[j] = p[0] * q[j];
    for (int k = 1; k < r; k++) {
        const float *qk = q + (size_t)k * stride;
        float pk = p[k];
        for (size_t j = 0; j < len; j++)
            t[j] += pk * qk[j];
    }
}

/* out = P^ Qavg^T (the result) and, when m is not NULL, m -= P^ Qloc^T (the
 * residual), row by row in one pass over m and out. qa and ql are r x cols
 * (Q transposed). This rank's own contribution P^ Qloc^T is computed the way
 * the result is, in a fixed order. */
GW__CZ_HOT static void reconstruct(float *out, float *m, const float *p, const float *qa,
                                   const float *ql, size_t rows, size_t cols, int r)
{
    float t[1024];
    for (size_t i = 0; i < rows; i++) {
        const float *pi = p + i * (size_t)r;
        product_row(out + i * cols, pi, qa, cols, cols, r);
        if (!m)
            continue;
        float *mi = m + i * cols;
        for (size_t j0 = 0; j0 < cols; j0 += 1024) {
            size_t len = cols - j0 < 1024 ? cols - j0 : 1024;
            product_row(t, pi, ql + j0, len, cols, r);
            for (size_t j = 0; j < len; j++)
                mi[j0 + j] -= t[j];
        }
    }
}

static gw_status_t psgd_run(gw__cz_call_t *call)
{
    gw_compress_state_t *s = call->st;
    gw_comm_t *comm = call->comm;
    const size_t rows = s->rows, cols = s->cols;
    const int r = s->cfg.powersgd_rank;
    const size_t rr = (size_t)r;
    float *m = call->x, *q = s->extra;
    void *pm, *qm, *tm;
    int64_t t0 = gw__cz_now();
    gw_status_t st = gw__cz_work(call, 1, rows * rr * sizeof(float), &pm);
    if (st == GW_OK)
        st = gw__cz_work(call, 2, cols * rr * sizeof(float), &qm);
    if (st == GW_OK)
        st = gw__cz_work(call, 3, 2 * cols * rr * sizeof(float), &tm);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    float *p = pm, *ql = qm, *qt = tm, *qlt = qt + cols * rr;

    /* P_i = M_i Q (qt is free until the second product: Q's transpose). */
    gw__psgd_gemm_mq(p, m, q, qt, rows, cols, r);
    call->encode_ns += gw__cz_now() - t0;
    if ((st = gw__cz_allreduce(call, p, p, rows * rr, GW_FLOAT32, GW_SUM, GW_ALGO_AUTO)) != GW_OK)
        return st;

    t0 = gw__cz_now();
    if (!all_finite(p, rows * rr)) {
        /* Every rank holds the same P, so every rank ends up here. */
        GW_ERROR(&comm->log, "compress",
                 "PowerSGD: M Q overflowed (gradients too large for "
                 "float32); the step is skipped on every rank");
        return GW_ERR_INVALID_ARG;
    }
    orthonormalise(p, rows, r);
    /* Q_i = M_i^T P^, kept (transposed) for the residual M_i - P^ Q_i^T. */
    gw__psgd_gemm_mtp(qlt, m, p, rows, cols, r);
    for (size_t i = 0; i < cols; i++)
        for (size_t k = 0; k < rr; k++)
            ql[i * rr + k] = qlt[k * cols + i];
    call->encoded_bytes = (uint64_t)(rows + cols) * rr * sizeof(float);
    call->encode_ns += gw__cz_now() - t0;

    if ((st = gw__cz_allreduce(call, ql, ql, cols * rr, GW_FLOAT32, GW_SUM, GW_ALGO_AUTO)) != GW_OK)
        return st;

    t0 = gw__cz_now();
    if (!all_finite(ql, cols * rr)) {
        GW_ERROR(&comm->log, "compress",
                 "PowerSGD: M^T P overflowed; the step is skipped on "
                 "every rank");
        return GW_ERR_INVALID_ARG;
    }
    const float n = (float)call->n;
    for (size_t i = 0; i < cols; i++)
        for (size_t k = 0; k < rr; k++)
            qt[k * cols + i] = ql[i * rr + k] / n;
    reconstruct(call->out, s->cfg.error_feedback ? m : NULL, p, qt, qlt, rows, cols, r);
    /* The averaged Q is the next call's warm start (the state changes only
     * now that nothing can fail any more). */
    for (size_t k = 0; k < rr; k++) {
        int zero = 1;
        for (size_t i = 0; i < cols; i++) {
            q[i * rr + k] = qt[k * cols + i];
            zero &= qt[k * cols + i] == 0.0f;
        }
        if (zero)
            fill_column(q, cols, r, (int)k,
                        (uint32_t)gw__cz_mix(call->key, 0x51ull << 32 | (uint64_t)k));
    }
    call->decode_ns += gw__cz_now() - t0;
    return GW_OK;
}

/* Gram-Schmidt and the reconstruction on their own (codec.h): the
 * reference of the GPU kernels (collectives/cuda/powersgd.cu). */
void gw__cz_psgd_orthonormalise(float *p, size_t rows, int r) { orthonormalise(p, rows, r); }

void gw__cz_psgd_reconstruct(float *out, float *m, const float *p, const float *qa, const float *ql,
                             size_t rows, size_t cols, int r)
{
    reconstruct(out, m, p, qa, ql, rows, cols, r);
}

const gw__codec_ops_t gw__codec_powersgd = {
    .size = sizeof(gw__codec_ops_t),
    .codec = GW_CODEC_POWERSGD,
    .per_bucket_max = 0,
    .check = psgd_check,
    .extra_floats = psgd_extra,
    .extra_init = psgd_init,
    .go_dense = psgd_dense,
    .run = psgd_run,
};
