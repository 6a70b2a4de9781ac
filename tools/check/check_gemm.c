/*
 * check_gemm.c - the node's GEMM rate: an n x n single-precision matrix
 * product (cblas_sgemm) through OpenBLAS, on the threads the host's first
 * rank may use (check_node.c).
 *
 * OpenBLAS is opened here at run time (dlopen), not linked: linked, its
 * constructor would start a thread per CPU in every rank of the check,
 * though one rank per host multiplies, and libgradwire itself must never
 * bring a BLAS into a process (a torch process has its own: issue #29,
 * tests/install/needed_test.sh). Opened, it lives only in the rank that
 * measures, and where it is not installed the figure is "not measured:
 * libopenblas.so.0 not found" and the rest of the check goes on. The
 * library is the one the trainer links (Debian's libopenblas0, the
 * pthread flavour by default); its thread count is set to ours before the
 * product.
 *
 * It stays open (RTLD_NODELETE): closing a BLAS whose threads were started
 * is not safe in every version.
 *
 * Timed as the triad is (check_node.c): one product first (OpenBLAS
 * starts its threads and packs), then products until --node-time has
 * passed, 2 n^3 floating-point operations each, over the whole time; a
 * first product that alone took longer than --node-time is the
 * measurement (a host held to 2% of a CPU spent 7 s on each product of
 * the default order here).
 */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* cblas.h's values: CblasRowMajor, CblasNoTrans. */
#define ROW_MAJOR 101
#define NO_TRANS 111

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
typedef void (*set_threads_fn)(int);

double gwc_gemm(long n, int threads, double min_s, char *why, size_t cap)
{
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so"};
    /* OpenBLAS's idle threads spin for 2^28 cycles (about 0.1 s) after
     * each product before they sleep (OPENBLAS_THREAD_TIMEOUT, read when
     * it loads): spinning, they would take the CPUs from this rank's
     * network phases and its neighbours', and on a host held to a sliver
     * of a CPU eat its quota (a host held to 2% took 24 s for its node
     * checks, most of it spun). 2^4 cycles: they sleep at once, and each
     * product, tens of milliseconds, wakes them. A user's setting wins. */
    setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        snprintf(why, cap, "libopenblas.so.0 not found (Debian package libopenblas0)");
        return NAN;
    }
    sgemm_fn sgemm = (sgemm_fn)(uintptr_t)dlsym(h, "cblas_sgemm");
    set_threads_fn set_threads = (set_threads_fn)(uintptr_t)dlsym(h, "openblas_set_num_threads");
    double rate = NAN;
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float));
    float *c = malloc(nn * sizeof(float));
    if (!sgemm) {
        snprintf(why, cap, "the OpenBLAS found has no cblas_sgemm");
        goto out;
    }
    if (!a || !b || !c) {
        snprintf(why, cap, "cannot allocate 3 x %zu bytes", nn * sizeof(float));
        goto out;
    }
    if (set_threads)
        set_threads(threads);
    for (size_t i = 0; i < nn; i++) {
        a[i] = 1.0f;
        b[i] = 0.5f;
    }
    int m = (int)n;
    long products = 0;
    double t0 = gw_kit_now_s(), elapsed = 0;
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, m, m, 1.0f, a, m, b, m, 0.0f, c, m);
    elapsed = gw_kit_now_s() - t0;
    if (elapsed >= min_s) {
        /* The first product alone outlasted the measurement: it is the
         * measurement (its thread start is little beside it), and a host
         * that slow is not kept busy for another. */
        products = 1;
    } else {
        t0 = gw_kit_now_s();
        do {
            sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, m, m, m, 1.0f, a, m, b, m, 0.0f, c, m);
            products++;
            elapsed = gw_kit_now_s() - t0;
        } while (elapsed < min_s);
    }
    /* Every element is n x 1 x 0.5, exactly in single precision. */
    if (c[nn / 2] != 0.5f * (float)n) {
        snprintf(why, cap, "sgemm computed %g, not %g", (double)c[nn / 2], 0.5 * (double)n);
        goto out;
    }
    rate = 2.0 * (double)n * (double)n * (double)n * (double)products / elapsed / 1e9;
out:
    free(a);
    free(b);
    free(c);

    return rate;
}
