/*
 * test_compress.c - gw_allreduce_compressed with every codec, one thread per
 * rank over the in-memory transport (test_compress_harness.h).
 *
 * What is checked, and how:
 *  - every codec over 2, 3, 4 and 8 ranks and counts 0, 1, 7, 1001, 4096 and
 *    4099, three steps each: all ranks end with bitwise identical results,
 *    and error feedback loses nothing over the steps: the sum of the outputs
 *    equals the average over ranks of (sum of inputs - final residual), up to
 *    the float rounding of the decoding (a tolerance per codec);
 *  - per step and per element, input + old residual = transmitted + new
 *    residual: exactly for top-k and the casts (where the residual is
 *    representable), and for int8 and sign the residual is the input minus
 *    the value the codec transmits (recomputed here from its definition),
 *    rounded once;
 *  - constant inputs reduce exactly;
 *  - stochastic int8 rounding is unbiased (Monte Carlo);
 *  - PowerSGD reconstructs matrices whose sum has rank r;
 *  - warm-up steps and small tensors give bitwise what gw_allreduce gives;
 *  - NaN and infinity fail every rank with GW_ERR_INVALID_ARG, name the
 *    element in the log, leave output and state alone and the communicator
 *    usable;
 *  - ranks with different settings or steps fail with GW_ERR_MISMATCH;
 *  - the statistics count what was sent.
 */
#include "test_compress_harness.h"

#define STEPS 3

/* ---- every codec, every rank count, every size ---- */

typedef struct sweep_arg {
    gw_codec_t codec;
} sweep_arg_t;

/* Relative tolerance of the conservation check, per codec. */
static double codec_tol(gw_codec_t codec)
{
    switch (codec) {
    case GW_CODEC_FP16:
        return 2e-3; /* partial sums rounded to 11 bits per hop */
    case GW_CODEC_BF16:
        return 2e-2; /* ... to 8 bits */
    default:
        return 2e-5; /* only float rounding of the decoding */
    }
}

static void sweep_body(ctx_t *c, const void *argp)
{
    const sweep_arg_t *a = argp;
    static const size_t counts[] = {0, 1, 7, 1001, 4096, 4099};
    const int n = c->comm.size;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        size_t count = counts[ci], rows, cols;
        shape_of(count, &rows, &cols);
        gw_compress_config_t cfg = config(a->codec);
        gw_compress_state_t *st = NULL;
        gw_status_t s = gw_compress_state_create(&cfg, rows, cols, &st);
        CHECK(c, s == GW_OK, "create %s %zu: %s", gw_codec_name(a->codec), count,
              gw_status_name(s));
        if (s != GW_OK)
            return;
        float *in = malloc(count * sizeof(float) + 4), *out = malloc(count * sizeof(float) + 4);
        double *sum_in = calloc(count + 1, sizeof(double)), *sum_out = calloc(count + 1, 8);
        double maxabs = 0;
        for (int step = 0; step < STEPS; step++) {
            for (size_t i = 0; i < count; i++) {
                in[i] = grad((uint64_t)step + 17 * count, c->rank, i);
                sum_in[i] += in[i];
                maxabs = fmax(maxabs, fabs(in[i]));
            }
            /* In place on odd steps. */
            float *dst = step % 2 ? in : out;
            s = gw_allreduce_compressed(&c->comm, st, count ? in : NULL, count ? dst : NULL, count);
            char what[96];
            snprintf(what, sizeof(what), "%s count %zu step %d", gw_codec_name(a->codec), count,
                     step);
            CHECK(c, s == GW_OK, "%s: %s", what, gw_status_name(s));
            if (s != GW_OK)
                break;
            check_agree(c, what, dst, count * sizeof(float));
            for (size_t i = 0; i < count; i++)
                sum_out[i] += dst[i];
        }
        if (s == GW_OK) {
            /* sum_in - residual, to be averaged over ranks by rank 0. */
            for (size_t i = 0; i < count; i++)
                sum_in[i] -= st->residual[i];
            c->job->shared[c->rank] = sum_in;
            sync_all(c);
            if (c->rank == 0) {
                double tol = codec_tol(a->codec) * STEPS * (n + 1) * (maxabs + 1e-30);
                for (size_t i = 0; i < count; i++) {
                    double want = 0;
                    for (int r = 0; r < n; r++)
                        want += ((const double *)c->job->shared[r])[i];
                    want /= n;
                    if (fabs(sum_out[i] - want) > tol) {
                        note(c,
                             "%s count %zu: element %zu: outputs sum to %.9g, inputs minus "
                             "residuals average %.9g (tolerance %.3g)",
                             gw_codec_name(a->codec), count, i, sum_out[i], want, tol);
                        break;
                    }
                }
            }
            sync_all(c);
            CHECK(c, gw_compress_state_step(st) == STEPS, "step counter is %llu",
                  (unsigned long long)gw_compress_state_step(st));
        }
        free(sum_in);
        free(sum_out);
        free(in);
        free(out);
        gw_compress_state_destroy(st);
        if (s != GW_OK)
            return;
    }
}

static void sweep(gw_codec_t codec)
{
    sweep_arg_t a = {codec};
    static const int ranks[] = {2, 3, 4, 8};
    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++)
        job_run(ranks[i], sweep_body, &a);
}

Test(compress_sweep, none, .timeout = 120) { sweep(GW_CODEC_NONE); }
Test(compress_sweep, fp16, .timeout = 120) { sweep(GW_CODEC_FP16); }
Test(compress_sweep, bf16, .timeout = 120) { sweep(GW_CODEC_BF16); }
Test(compress_sweep, int8, .timeout = 120) { sweep(GW_CODEC_INT8); }
Test(compress_sweep, sign, .timeout = 120) { sweep(GW_CODEC_SIGN); }
Test(compress_sweep, topk, .timeout = 120) { sweep(GW_CODEC_TOPK); }
Test(compress_sweep, powersgd, .timeout = 120) { sweep(GW_CODEC_POWERSGD); }
Test(compress_sweep, one_rank, .timeout = 60)
{
    for (size_t k = 0; k < NCODECS; k++) {
        sweep_arg_t a = {all_codecs[k]};
        job_run(1, sweep_body, &a);
    }
}

/* ---- error feedback, step by step ---- */

/* x as the library forms it: the residual is skipped where it is zero. */
static float x_of(float g, float r) { return r == 0.0f ? g : g + r; }

static void ef_body(ctx_t *c, const void *argp)
{
    const gw_codec_t codec = ((const sweep_arg_t *)argp)->codec;
    const int n = c->comm.size;
    const size_t count = 1000, bucket = 256;
    gw_compress_config_t cfg = config(codec);
    cfg.bucket_elements = bucket;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, count, 1, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *g = malloc(count * 4), *x = malloc(count * 4), *out = malloc(count * 4);
    double *t = malloc(count * 8);
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < count; i++) {
            g[i] = grad(99 + (uint64_t)step, c->rank, i);
            x[i] = x_of(g[i], st->residual[i]);
        }
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, g, out, count);
        CHECK(c, s == GW_OK, "%s step %d: %s", gw_codec_name(codec), step, gw_status_name(s));
        if (s != GW_OK)
            break;
        const float *r = st->residual;
        c->job->shared[c->rank] = x;
        sync_all(c);
        size_t taken = 0;
        for (size_t i = 0; i < count && c->nerr == 0; i++) {
            double d = (double)x[i] - (double)r[i]; /* exact: both floats, close */
            float tv = (float)d;
            uint32_t tb;
            memcpy(&tb, &tv, 4);
            switch (codec) {
            case GW_CODEC_TOPK:
                /* Sent whole (residual exactly 0) or not at all (residual = x). */
                CHECK(c, r[i] == 0.0f || memcmp(&r[i], &x[i], 4) == 0,
                      "topk element %zu: residual %g of x %g", i, (double)r[i], (double)x[i]);
                taken += r[i] == 0.0f && x[i] != 0.0f;
                t[i] = r[i] == 0.0f ? x[i] : 0.0;
                break;
            case GW_CODEC_FP16:
            case GW_CODEC_BF16:
                /* t = x - r exactly, and t fits the 16-bit format's significand. */
                CHECK(c, (double)tv == d, "%s element %zu: x - residual is not a float",
                      gw_codec_name(codec), i);
                CHECK(c, (tb & (codec == GW_CODEC_FP16 ? 0x1fffu : 0xffffu)) == 0,
                      "%s element %zu: transmitted %a has more bits than the format",
                      gw_codec_name(codec), i, (double)tv);
                break;
            case GW_CODEC_INT8: {
                size_t b = i / bucket;
                float m = 0;
                for (int rr = 0; rr < n; rr++) {
                    const float *xr = c->job->shared[rr];
                    for (size_t j = b * bucket; j < count && j < (b + 1) * bucket; j++)
                        m = fmaxf(m, fabsf(xr[j]));
                }
                int levels = 127 / n;
                float v = (x[i] / m) * (float)levels;
                long q = lrint(d / m * levels);
                float tq = m * ((float)q / (float)levels);
                CHECK(c, q >= (long)floorf(v) && q <= (long)floorf(v) + 1 && labs(q) <= levels,
                      "int8 element %zu: level %ld for v = %g", i, q, (double)v);
                CHECK(c, r[i] == x[i] - tq, "int8 element %zu: residual %a, x - t = %a", i,
                      (double)r[i], (double)(x[i] - tq));
                break;
            }
            case GW_CODEC_SIGN: {
                size_t b = i / bucket, lo = b * bucket;
                size_t hi = lo + bucket < count ? lo + bucket : count;
                double sum = 0;
                for (size_t j = lo; j < hi; j++)
                    sum += fabs((double)x[j]);
                float sc = (float)(sum / (double)(hi - lo));
                float ts = x[i] < 0 ? -sc : sc;
                CHECK(c, r[i] == x[i] - ts, "sign element %zu: residual %a, x - t = %a", i,
                      (double)r[i], (double)(x[i] - ts));
                break;
            }
            default:
                break;
            }
        }
        if (codec == GW_CODEC_TOPK) {
            size_t k = (size_t)ceil(cfg.topk_ratio * count);
            CHECK(c, taken <= k, "topk sent %zu elements, k = %zu", taken, k);
            /* The average of what every rank transmitted, in rank order. */
            c->job->shared2[c->rank] = t;
            sync_all(c);
            for (size_t i = 0; i < count; i++) {
                double acc = 0;
                for (int rr = 0; rr < n; rr++)
                    acc += ((const double *)c->job->shared2[rr])[i];
                float want = (float)(acc / n);
                if (memcmp(&want, &out[i], 4) != 0) {
                    note(c, "topk element %zu: out %a, average of transmitted %a", i,
                         (double)out[i], (double)want);
                    break;
                }
            }
        }
        sync_all(c);
    }
    free(t);
    free(out);
    free(x);
    free(g);
    gw_compress_state_destroy(st);
}

Test(compress_ef, transmitted_plus_residual, .timeout = 60)
{
    static const gw_codec_t codecs[] = {GW_CODEC_FP16, GW_CODEC_BF16, GW_CODEC_INT8, GW_CODEC_SIGN,
                                        GW_CODEC_TOPK};
    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        sweep_arg_t a = {codecs[k]};
        job_run(3, ef_body, &a);
    }
}

/* ---- constants ---- */

static void const_body(ctx_t *c, const void *argp)
{
    const gw_codec_t codec = ((const sweep_arg_t *)argp)->codec;
    static const float values[] = {0.75f, -1.5f, 3.0e-3f, 1024.0f};
    const size_t rows = 40, cols = 25, count = rows * cols;
    for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++) {
        float cv = values[v];
        /* 3e-3 is not a 16-bit value, and 3 x 3e-3 is not a float: the
         * casts and the dense sum reduce constants exactly only where the
         * format holds them and their sums. int8, sign and top-k scale by
         * the constant itself and are exact for any. */
        if ((codec == GW_CODEC_FP16 || codec == GW_CODEC_BF16 || codec == GW_CODEC_NONE) && v == 2)
            continue;
        gw_compress_config_t cfg = config(codec);
        gw_compress_state_t *st = NULL;
        if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK) {
            note(c, "create failed");
            return;
        }
        float *in = malloc(count * 4), *out = malloc(count * 4);
        for (size_t i = 0; i < count; i++)
            in[i] = cv;
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
        CHECK(c, s == GW_OK, "%s: %s", gw_codec_name(codec), gw_status_name(s));
        size_t sent = 0;
        for (size_t i = 0; s == GW_OK && i < count; i++) {
            if (codec == GW_CODEC_POWERSGD) {
                if (fabsf(out[i] - cv) > 1e-5f * fabsf(cv)) {
                    note(c, "powersgd constant %g: element %zu is %.9g", (double)cv, i,
                         (double)out[i]);
                    break;
                }
            } else if (codec == GW_CODEC_TOPK) {
                sent += out[i] == cv;
                if (out[i] != cv && out[i] != 0.0f) {
                    note(c, "topk constant %g: element %zu is %.9g", (double)cv, i, (double)out[i]);
                    break;
                }
                if ((out[i] == cv) != (st->residual[i] == 0.0f))
                    note(c, "topk constant %g: element %zu sent but residual %g", (double)cv, i,
                         (double)st->residual[i]);
            } else if (out[i] != cv) {
                note(c, "%s constant %g: element %zu is %.9g", gw_codec_name(codec), (double)cv, i,
                     (double)out[i]);
                break;
            } else if (st->residual[i] != 0.0f && codec != GW_CODEC_NONE) {
                note(c, "%s constant %g: element %zu left residual %g", gw_codec_name(codec),
                     (double)cv, i, (double)st->residual[i]);
                break;
            }
        }
        if (codec == GW_CODEC_TOPK)
            CHECK(c, sent == (size_t)ceil(cfg.topk_ratio * count), "topk sent %zu", sent);
        free(in);
        free(out);
        gw_compress_state_destroy(st);
    }
}

Test(compress_exact, constants, .timeout = 60)
{
    for (size_t k = 0; k < NCODECS; k++) {
        sweep_arg_t a = {all_codecs[k]};
        job_run(3, const_body, &a);
        job_run(4, const_body, &a);
    }
}

/* ---- int8 is unbiased ---- */

#define MC_COUNT 64
#define MC_STEPS 3000

static void unbiased_body(ctx_t *c, const void *argp)
{
    (void)argp;
    const int n = c->comm.size;
    gw_compress_config_t cfg = config(GW_CODEC_INT8);
    cfg.error_feedback = 0; /* each step must be unbiased on its own */
    cfg.bucket_elements = MC_COUNT;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, MC_COUNT, 1, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float in[MC_COUNT], out[MC_COUNT];
    double mean[MC_COUNT] = {0}, exact[MC_COUNT] = {0};
    float m = 0;
    /* Values off the quantization grid; element 0 (the largest) sets M. */
    for (size_t i = 0; i < MC_COUNT; i++) {
        for (int r = 0; r < n; r++) {
            float v = i == 0 ? 1.0f : (float)(sin(1.0 + (double)i * 0.7 + r) * 0.93);
            exact[i] += v / n;
            m = fmaxf(m, fabsf(v));
            if (r == c->rank)
                in[i] = v;
        }
    }
    for (int step = 0; step < MC_STEPS; step++) {
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, MC_COUNT);
        if (s != GW_OK) {
            note(c, "step %d: %s", step, gw_status_name(s));
            break;
        }
        for (size_t i = 0; i < MC_COUNT; i++)
            mean[i] += out[i];
    }
    /* One rank's rounding error has variance <= s^2 / 4 (s = M / L, one
     * level); the average over n ranks and MC_STEPS steps has a standard
     * deviation <= s / (2 sqrt(n MC_STEPS)). Five of those: */
    double level = m / (127 / n);
    double tol = 5 * level / (2 * sqrt((double)n * MC_STEPS));
    double worst = 0, bias_sum = 0;
    for (size_t i = 0; i < MC_COUNT; i++) {
        double err = mean[i] / MC_STEPS - exact[i];
        bias_sum += err;
        worst = fmax(worst, fabs(err));
        CHECK(c, fabs(err) <= tol,
              "element %zu: Monte Carlo mean %.7f, exact %.7f (tolerance "
              "%.2g, one level %.3g)",
              i, mean[i] / MC_STEPS, exact[i], tol, level);
    }
    /* Round-to-nearest would be off by up to half a level; the mean error
     * over all elements must be far below that too. */
    CHECK(c, fabs(bias_sum / MC_COUNT) <= tol / 4, "mean error over elements %.3g",
          bias_sum / MC_COUNT);
    gw_compress_state_destroy(st);
}

Test(compress_int8, stochastic_rounding_is_unbiased, .timeout = 120)
{
    job_run(2, unbiased_body, NULL);
    job_run(3, unbiased_body, NULL);
}

/* ---- PowerSGD ---- */

static void psgd_body(ctx_t *c, const void *argp)
{
    (void)argp;
    const int n = c->comm.size, r = 4;
    const size_t rows = 64, cols = 48, count = rows * cols;
    gw_compress_config_t cfg = config(GW_CODEC_POWERSGD);
    cfg.powersgd_rank = r;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    /* M_i = U V_i^T with U shared: the sum has rank r. */
    float *in = malloc(count * 4), *out = malloc(count * 4);
    double *mean = calloc(count, sizeof(double));
    for (int k = 0; k < r; k++) {
        for (int rr = 0; rr < n; rr++)
            for (size_t i = 0; i < rows; i++)
                for (size_t j = 0; j < cols; j++) {
                    double v = (double)grad(5, 100 + k, i) * grad(6, rr * 16 + k, j);
                    mean[i * cols + j] += v / n;
                }
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            double v = 0;
            for (int k = 0; k < r; k++)
                v += (double)grad(5, 100 + k, i) * grad(6, c->rank * 16 + k, j);
            in[i * cols + j] = (float)v;
        }
    double scale = 0;
    for (size_t i = 0; i < count; i++)
        scale = fmax(scale, fabs(mean[i]));
    for (int step = 0; step < 2; step++) {
        gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
        CHECK(c, s == GW_OK, "step %d: %s", step, gw_status_name(s));
        if (s != GW_OK)
            break;
        check_agree(c, "powersgd", out, count * 4);
        double worst = 0, worst_res = 0;
        for (size_t i = 0; i < count; i++) {
            worst = fmax(worst, fabs(out[i] - mean[i]));
            worst_res = fmax(worst_res, fabs(st->residual[i]));
        }
        CHECK(c, worst <= 1e-5 * scale,
              "step %d: rank-%d matrix reconstructed with error %.3g "
              "(largest element %.3g)",
              step, r, worst, scale);
        CHECK(c, worst_res <= 1e-5 * scale, "step %d: residual %.3g", step, worst_res);
        gw_compress_stats_t last;
        gw_compress_stats_get(st, &last, NULL);
        CHECK(c,
              last.compressed_calls == 1 &&
                  last.encoded_bytes == (rows + cols) * (size_t)r * sizeof(float),
              "step %d: encoded %llu bytes", step, (unsigned long long)last.encoded_bytes);
    }
    free(mean);
    free(in);
    free(out);
    gw_compress_state_destroy(st);
}

Test(compress_powersgd, reconstructs_rank_r, .timeout = 60)
{
    job_run(3, psgd_body, NULL);
    job_run(1, psgd_body, NULL);
}

/* ---- warm-up and small tensors are the dense allreduce ---- */

static void warmup_body(ctx_t *c, const void *argp)
{
    const gw_codec_t codec = ((const sweep_arg_t *)argp)->codec;
    const size_t rows = 60, cols = 50, count = rows * cols;
    gw_compress_config_t cfg = config(codec);
    cfg.warmup_steps = 2;
    gw_compress_config_t small = cfg;
    small.warmup_steps = 0;
    small.min_elements = count + 1;
    gw_compress_state_t *st = NULL, *sst = NULL;
    if (gw_compress_state_create(&cfg, rows, cols, &st) != GW_OK ||
        gw_compress_state_create(&small, rows, cols, &sst) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4), *ref = malloc(count * 4);
    for (int step = 0; step < 3; step++) {
        for (size_t i = 0; i < count; i++)
            in[i] = grad(7 + (uint64_t)step, c->rank, i);
        in[3] = -0.0f; /* -0.0 must survive like in the dense allreduce */
        gw_status_t s = gw_allreduce(&c->comm, in, ref, count, GW_FLOAT32, GW_AVG);
        gw_status_t s1 = gw_allreduce_compressed(&c->comm, st, in, out, count);
        CHECK(c, s == GW_OK && s1 == GW_OK, "step %d: %s / %s", step, gw_status_name(s),
              gw_status_name(s1));
        gw_compress_stats_t last;
        gw_compress_stats_get(st, &last, NULL);
        if (step < 2) {
            CHECK(c, memcmp(out, ref, count * 4) == 0,
                  "%s warm-up step %d differs from "
                  "gw_allreduce",
                  gw_codec_name(codec), step);
            CHECK(c, last.compressed_calls == 0, "warm-up step %d counted as compressed", step);
        } else if (codec != GW_CODEC_NONE) {
            CHECK(c, last.compressed_calls == 1, "step 2 was not compressed");
        }
        s1 = gw_allreduce_compressed(&c->comm, sst, in, out, count);
        CHECK(c, s1 == GW_OK && memcmp(out, ref, count * 4) == 0,
              "%s: a tensor under min_elements differs from gw_allreduce (%s)",
              gw_codec_name(codec), gw_status_name(s1));
    }
    free(in);
    free(out);
    free(ref);
    gw_compress_state_destroy(st);
    gw_compress_state_destroy(sst);
}

Test(compress_dense, warmup_and_small_tensors_equal_gw_allreduce, .timeout = 60)
{
    for (size_t k = 0; k < NCODECS; k++) {
        sweep_arg_t a = {all_codecs[k]};
        job_run(3, warmup_body, &a);
    }
}

/* ---- large messages: the allgather goes around the ring ---- */

static void large_body(ctx_t *c, const void *argp)
{
    const gw_codec_t codec = ((const sweep_arg_t *)argp)->codec;
    const int n = c->comm.size;
    const size_t count = 600001; /* fp16 blocks, top-k lists: > 256 KiB a rank */
    gw_compress_config_t cfg = config(codec);
    cfg.topk_ratio = 0.1;
    gw_compress_state_t *st = NULL;
    if (gw_compress_state_create(&cfg, count, 1, &st) != GW_OK) {
        note(c, "create failed");
        return;
    }
    float *in = malloc(count * 4), *out = malloc(count * 4);
    for (size_t i = 0; i < count; i++)
        in[i] = grad(77, c->rank, i);
    gw_status_t s = gw_allreduce_compressed(&c->comm, st, in, out, count);
    CHECK(c, s == GW_OK, "%s: %s", gw_codec_name(codec), gw_status_name(s));
    check_agree(c, gw_codec_name(codec), out, s == GW_OK ? count * 4 : 0);
    for (size_t i = 0; s == GW_OK && i < count; i++) {
        double mean = 0;
        for (int r = 0; r < n; r++)
            mean += grad(77, r, i);
        mean /= n;
        /* fp16: a few roundings of 11 bits; top-k: the element was sent by
         * every rank (exact sum), by some, or by none. */
        double err = fabs(out[i] - mean);
        int ok = codec == GW_CODEC_FP16 ? err <= 4e-3 * 2.0 + 1e-6 : 1;
        if (!ok) {
            note(c, "%s element %zu: %.9g, mean %.9g", gw_codec_name(codec), i, (double)out[i],
                 mean);
            break;
        }
    }
    gw_compress_stats_t last;
    gw_compress_stats_get(st, &last, NULL);
    if (codec == GW_CODEC_TOPK) {
        size_t k = (size_t)ceil(0.1 * count);
        CHECK(c, last.bytes_sent >= (uint64_t)(n - 1) * 8 * k, "topk sent %llu bytes",
              (unsigned long long)last.bytes_sent);
    }
    free(in);
    free(out);
    gw_compress_state_destroy(st);
}

Test(compress_sweep, large_messages, .timeout = 120)
{
    static const gw_codec_t codecs[] = {GW_CODEC_FP16, GW_CODEC_BF16, GW_CODEC_TOPK};
    for (size_t k = 0; k < sizeof(codecs) / sizeof(codecs[0]); k++) {
        sweep_arg_t a = {codecs[k]};
        job_run(2, large_body, &a);
        job_run(3, large_body, &a);
    }
}

/* ---- the casts' one-pass encoding is only a guess at the scale ---- */

/*
 * fp16 and bf16 encode x in the pass that forms it, with the scale of the
 * state's last call, and start over when the shared maximum asks for
 * another (cast_ring.c). Whichever way a call went, its bits must be those
 * of the plain two-pass path. State a runs as it likes; state b is made to
 * take every path in turn (no guess, a wrong guess, the right one) while
 * the inputs' range jumps by powers of two, to zeros (of either sign) and,
 * for bf16, close to FLT_MAX, where even bfloat16 needs a scale.
 */
static void guess_body(ctx_t *c, const void *argp)
{
    const gw_codec_t codec = ((const sweep_arg_t *)argp)->codec;
    const size_t count = 3001;
    gw_compress_config_t cfg = config(codec);
    gw_compress_state_t *a = NULL, *b = NULL;
    if (gw_compress_state_create(&cfg, count, 1, &a) != GW_OK ||
        gw_compress_state_create(&cfg, count, 1, &b) != GW_OK) {
        note(c, "create failed");
        return;
    }
    static const float ranges[] = {1.0f,    1.0f,    0x1p-20f, 0x1p-20f, 0.0f, 3.0f,
                                   0x1p12f, 0x1p12f, 1e37f,    1e37f,    0.5f};
    const int nsteps = (int)(sizeof(ranges) / sizeof(ranges[0]));
    float *in = malloc(count * 4), *oa = malloc(count * 4), *ob = malloc(count * 4);
    /* A fresh state's first call with zeros of either sign: nothing is
     * sent, and the residual is x itself, bit for bit (bf16 guesses the
     * scale even on a first call). */
    gw_compress_state_t *z = NULL;
    if (gw_compress_state_create(&cfg, count, 1, &z) == GW_OK) {
        for (size_t i = 0; i < count; i++)
            in[i] = i % 3 ? -0.0f : 0.0f;
        gw_status_t sz = gw_allreduce_compressed(&c->comm, z, in, oa, count);
        CHECK(c, sz == GW_OK && memcmp(z->residual, in, count * 4) == 0,
              "%s: zeros left a residual that is not x (%s)", gw_codec_name(codec),
              gw_status_name(sz));
        gw_compress_state_destroy(z);
    }
    for (int step = 0; step < nsteps; step++) {
        if (codec == GW_CODEC_FP16 && ranges[step] > 1e30f)
            continue; /* fp16 scales everything anyway */
        for (size_t i = 0; i < count; i++)
            in[i] = ranges[step] == 0.0f ? (i % 2 ? -0.0f : 0.0f)
                                         : grad(800 + (uint64_t)step, c->rank, i) * ranges[step];
        switch (step % 3) {
        case 0:
            b->has_hint = 0;
            break; /* no guess */
        case 1:
            b->has_hint = 1;
            b->hint = a->hint + 3;
            break; /* a wrong one */
        default:
            b->has_hint = a->has_hint;
            b->hint = a->hint;
            break;
        }
        gw_status_t sa = gw_allreduce_compressed(&c->comm, a, in, oa, count);
        gw_status_t sb = gw_allreduce_compressed(&c->comm, b, in, ob, count);
        CHECK(c, sa == GW_OK && sb == GW_OK, "%s step %d: %s / %s", gw_codec_name(codec), step,
              gw_status_name(sa), gw_status_name(sb));
        CHECK(c, memcmp(oa, ob, count * 4) == 0, "%s step %d (range %g): outputs differ",
              gw_codec_name(codec), step, (double)ranges[step]);
        CHECK(c, memcmp(a->residual, b->residual, count * 4) == 0,
              "%s step %d (range %g): residuals differ", gw_codec_name(codec), step,
              (double)ranges[step]);
        check_agree(c, gw_codec_name(codec), oa, count * 4);
    }
    free(in);
    free(oa);
    free(ob);
    gw_compress_state_destroy(a);
    gw_compress_state_destroy(b);
}

Test(compress_exact, cast_scale_guesses_do_not_change_results, .timeout = 60)
{
    static const gw_codec_t codecs[] = {GW_CODEC_FP16, GW_CODEC_BF16};
    for (size_t k = 0; k < 2; k++) {
        sweep_arg_t a = {codecs[k]};
        job_run(3, guess_body, &a);
        job_run(1, guess_body, &a);
    }
}
