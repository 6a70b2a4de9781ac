/*
 * check_gpu.c - the node's GPU, when one is present: a device-to-device
 * copy and the copies between pinned host memory and the device, each of
 * --node-size bytes, timed as the triad is (check_node.c).
 *
 * Whether there is one is the library's answer (gw_cuda_info: the CUDA
 * plugin, libgradwire-cuda.so, opened at run time, and the runtime it
 * links): built without CUDA (GW_CUDA=OFF), without a driver or without a
 * device, the GPU is "not present" with that reason, and its check SKIPs.
 * Where one is present, the runtime the plugin found is opened here too
 * (dlopen, with the plugin's list of names, engine_load.c) and called
 * through dlsym, so this file needs no CUDA header and builds the same
 * with GW_CUDA=ON and OFF; the check tool stays on the public API.
 *
 * Not measured yet: a GEMM on the GPU (it needs cuBLAS); the report says
 * so.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

typedef int (*cuda_malloc_fn)(void **, size_t);
typedef int (*cuda_free_fn)(void *);
typedef int (*cuda_memcpy_fn)(void *, const void *, size_t, int);
typedef int (*cuda_sync_fn)(void);
typedef int (*cuda_set_device_fn)(int);

/* cudaMemcpyKind's values. */
#define H2D 1
#define D2H 2
#define D2D 3

typedef struct cuda {
    cuda_malloc_fn malloc_dev, malloc_host;
    cuda_free_fn free_dev, free_host;
    cuda_memcpy_fn memcpy;
    cuda_sync_fn sync;
    cuda_set_device_fn set_device;
} cuda_t;

static void *sym(void *h, const char *name) { return dlsym(h, name); }

static int open_runtime(cuda_t *c)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                        "libcudart.so"};
    void *h = NULL;
    for (size_t i = 0; !h && i < sizeof(names) / sizeof(names[0]); i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h)
        return -1;
    c->malloc_dev = (cuda_malloc_fn)(uintptr_t)sym(h, "cudaMalloc");
    c->malloc_host = (cuda_malloc_fn)(uintptr_t)sym(h, "cudaMallocHost");
    c->free_dev = (cuda_free_fn)(uintptr_t)sym(h, "cudaFree");
    c->free_host = (cuda_free_fn)(uintptr_t)sym(h, "cudaFreeHost");
    c->memcpy = (cuda_memcpy_fn)(uintptr_t)sym(h, "cudaMemcpy");
    c->sync = (cuda_sync_fn)(uintptr_t)sym(h, "cudaDeviceSynchronize");
    c->set_device = (cuda_set_device_fn)(uintptr_t)sym(h, "cudaSetDevice");
    return c->malloc_dev && c->malloc_host && c->free_dev && c->free_host && c->memcpy && c->sync &&
                   c->set_device
               ? 0
               : -1;
}

/* Copies of `bytes` in direction kind until min_s has passed: GB/s, or NAN
 * when a copy fails. A device-to-device copy reads and writes: counted
 * once, as cudaMemcpy's bandwidth usually is. */
static double copy_rate(const cuda_t *c, void *dst, const void *src, size_t bytes, int kind,
                        double min_s)
{
    if (c->memcpy(dst, src, bytes, kind) != 0 || c->sync() != 0)
        return NAN;
    long copies = 0;
    double t0 = gw_kit_now_s(), elapsed = 0;
    do {
        if (c->memcpy(dst, src, bytes, kind) != 0)
            return NAN;
        copies++;
        if (c->sync() != 0)
            return NAN;
        elapsed = gw_kit_now_s() - t0;
    } while (elapsed < min_s);
    return (double)bytes * (double)copies / elapsed / 1e9;
}

void gwc_gpu_measure(gwc_node_fig_t *f, size_t bytes, double min_s)
{
    gw_cuda_info_t info;
    memset(&info, 0, sizeof(info));
    const char *why = NULL;
    char buf[96];
    if (gw_cuda_info(&info) != GW_OK)
        why = "gw_cuda_info failed";
    else if (!info.built)
        why = "gradwire was built without CUDA (GW_CUDA=OFF)";
    else if (!info.loaded) {
        snprintf(buf, sizeof(buf), "%.90s", info.why[0] ? info.why : "no CUDA runtime");
        why = buf;
    } else if (info.device_count < 1)
        why = "no CUDA device";
    for (int k = GWC_NODE_GPU_D2D; k <= GWC_NODE_GPU_D2H; k++)
        snprintf(f->why[k], sizeof(f->why[k]), "GPU not present");
    if (why) {
        f->gpu = 0;
        snprintf(f->gpu_name, sizeof(f->gpu_name), "%s", why);
        return;
    }
    f->gpu = 1;
    snprintf(f->gpu_name, sizeof(f->gpu_name), "%.80s (of %d)", info.devices[0], info.device_count);
    cuda_t c;
    memset(&c, 0, sizeof(c));
    void *d0 = NULL, *d1 = NULL, *host = NULL;
    const char *fail = NULL;
    if (open_runtime(&c) != 0)
        fail = "cannot open the CUDA runtime the plugin found";
    else if (c.set_device(0) != 0 || c.malloc_dev(&d0, bytes) != 0 ||
             c.malloc_dev(&d1, bytes) != 0 || c.malloc_host(&host, bytes) != 0)
        fail = "cannot allocate the copies' buffers on device 0";
    if (fail) {
        for (int k = GWC_NODE_GPU_D2D; k <= GWC_NODE_GPU_D2H; k++)
            snprintf(f->why[k], sizeof(f->why[k]), "%s", fail);
    } else {
        memset(host, 1, bytes);
        f->v[GWC_NODE_GPU_D2D] = copy_rate(&c, d1, d0, bytes, D2D, min_s);
        f->v[GWC_NODE_GPU_H2D] = copy_rate(&c, d0, host, bytes, H2D, min_s);
        f->v[GWC_NODE_GPU_D2H] = copy_rate(&c, host, d0, bytes, D2H, min_s);
        for (int k = GWC_NODE_GPU_D2D; k <= GWC_NODE_GPU_D2H; k++)
            snprintf(f->why[k], sizeof(f->why[k]), "%s",
                     isnan(f->v[k]) ? "a cudaMemcpy failed" : "");
    }
    if (c.free_dev) {
        if (d0)
            c.free_dev(d0);
        if (d1)
            c.free_dev(d1);
        if (host)
            c.free_host(host);
    }
}
