/*
 * engine_cuda.c - the CUDA copy engine: the plugin libgradwire-cuda.so,
 * the only part of gradwire that links the CUDA runtime (libcudart).
 * libgradwire opens it with dlopen when a device buffer first needs it
 * (collectives/device/engine_load.c) and calls gw_cuda_plugin_open, its one
 * exported function, which fails with the CUDA error when the runtime
 * finds no driver or no device, so that libgradwire can say why.
 *
 * Each op of copy_engine.h is one runtime call: cudaPointerGetAttributes,
 * cudaHostAlloc, cudaMemcpyAsync (cudaMemcpyDefault: unified addressing
 * tells the direction, so a buffer declared device memory that is in fact
 * host memory still copies), cudaEventRecord / Query / Synchronize,
 * cudaStreamWaitEvent. Streams are non-blocking (cudaStreamNonBlocking),
 * so staging copies do not serialise with the application's legacy default
 * stream; events are created without timing. Errors keep the CUDA error's
 * name and text for the caller to log.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#include "collectives/device/copy_engine.h"

typedef struct cuda_engine {
    char err[200];
} cuda_engine_t;

static gw_status_t fail(cuda_engine_t *e, cudaError_t rc, const char *call)
{
    snprintf(e->err, sizeof(e->err), "%s: %s (%s)", call, cudaGetErrorName(rc),
             cudaGetErrorString(rc));
    return rc == cudaErrorMemoryAllocation ? GW_ERR_NO_MEMORY : GW_ERR_SYSTEM;
}

#define CALL(e, expr)                     \
    do {                                  \
        cudaError_t rc_ = (expr);         \
        if (rc_ != cudaSuccess)           \
            return fail((e), rc_, #expr); \
    } while (0)

static gw_status_t pointer_device(void *eng, const void *ptr, int *device)
{
    struct cudaPointerAttributes a;
    cudaError_t rc = cudaPointerGetAttributes(&a, ptr);
    if (rc == cudaErrorInvalidValue) { /* older runtimes: memory CUDA never saw */
        (void)cudaGetLastError();
        *device = -1;
        return GW_OK;
    }
    if (rc != cudaSuccess)
        return fail(eng, rc, "cudaPointerGetAttributes");
    *device = a.type == cudaMemoryTypeDevice ? a.device : -1;
    return GW_OK;
}

static gw_status_t device_count(void *eng, int *count)
{
    CALL((cuda_engine_t *)eng, cudaGetDeviceCount(count));
    return GW_OK;
}

static gw_status_t device_name(void *eng, int device, char *buf, size_t cap)
{
    struct cudaDeviceProp p;
    CALL((cuda_engine_t *)eng, cudaGetDeviceProperties(&p, device));
    snprintf(buf, cap, "%s (%.1f GiB, compute %d.%d, PCI %04x:%02x:%02x)", p.name,
             (double)p.totalGlobalMem / (1024.0 * 1024 * 1024), p.major, p.minor, p.pciDomainID,
             p.pciBusID, p.pciDeviceID);
    return GW_OK;
}

static gw_status_t set_device(void *eng, int device)
{
    CALL((cuda_engine_t *)eng, cudaSetDevice(device));
    return GW_OK;
}

static gw_status_t host_alloc(void *eng, size_t len, void **out)
{
    CALL((cuda_engine_t *)eng, cudaHostAlloc(out, len ? len : 1, cudaHostAllocPortable));
    return GW_OK;
}

static void host_free(void *eng, void *ptr)
{
    (void)eng;
    if (ptr)
        cudaFreeHost(ptr);
}

static gw_status_t stream_create(void *eng, void **out)
{
    cudaStream_t s;
    CALL((cuda_engine_t *)eng, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *out = s;
    return GW_OK;
}

static void stream_destroy(void *eng, void *stream)
{
    (void)eng;
    cudaStreamDestroy((cudaStream_t)stream);
}

static gw_status_t copy_d2h(void *eng, void *dst, const void *src, size_t len, void *stream)
{
    CALL((cuda_engine_t *)eng,
         cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, (cudaStream_t)stream));
    return GW_OK;
}

static gw_status_t copy_h2d(void *eng, void *dst, const void *src, size_t len, void *stream)
{
    CALL((cuda_engine_t *)eng,
         cudaMemcpyAsync(dst, src, len, cudaMemcpyDefault, (cudaStream_t)stream));
    return GW_OK;
}

static gw_status_t event_create(void *eng, void **out)
{
    cudaEvent_t ev;
    CALL((cuda_engine_t *)eng, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    *out = ev;
    return GW_OK;
}

static void event_destroy(void *eng, void *event)
{
    (void)eng;
    cudaEventDestroy((cudaEvent_t)event);
}

static gw_status_t event_record(void *eng, void *event, void *stream)
{
    CALL((cuda_engine_t *)eng, cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    return GW_OK;
}

static gw_status_t event_query(void *eng, void *event, int *done)
{
    cudaError_t rc = cudaEventQuery((cudaEvent_t)event);
    if (rc == cudaErrorNotReady) {
        *done = 0;
        return GW_OK;
    }
    if (rc != cudaSuccess)
        return fail(eng, rc, "cudaEventQuery");
    *done = 1;
    return GW_OK;
}

static gw_status_t event_wait(void *eng, void *event)
{
    CALL((cuda_engine_t *)eng, cudaEventSynchronize((cudaEvent_t)event));
    return GW_OK;
}

static gw_status_t stream_wait_event(void *eng, void *stream, void *event)
{
    CALL((cuda_engine_t *)eng, cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    return GW_OK;
}

static const char *error(void *eng) { return ((cuda_engine_t *)eng)->err; }

static void destroy(void *eng) { free(eng); }

static const gw_copy_engine_ops_t cuda_engine_ops = {
    .size = sizeof(gw_copy_engine_ops_t),
    .name = "cuda",
    .pointer_device = pointer_device,
    .device_count = device_count,
    .device_name = device_name,
    .set_device = set_device,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .copy_d2h = copy_d2h,
    .copy_h2d = copy_h2d,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_wait = event_wait,
    .stream_wait_event = stream_wait_event,
    .error = error,
    .destroy = destroy,
};

__attribute__((visibility("default"))) gw_status_t
gw_cuda_plugin_open(size_t ops_size, const gw_copy_engine_ops_t **ops, void **impl, char *why,
                    size_t cap)
{
    if (ops_size > sizeof(gw_copy_engine_ops_t)) {
        snprintf(why, cap, "libgradwire is newer than this plugin (ops table %zu > %zu bytes)",
                 ops_size, sizeof(gw_copy_engine_ops_t));
        return GW_ERR_UNSUPPORTED;
    }
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess || n == 0) {
        int runtime = 0, driver = 0;
        cudaRuntimeGetVersion(&runtime);
        cudaDriverGetVersion(&driver);
        snprintf(why, cap, "%s: cudaGetDeviceCount: %s (%s; runtime %d, driver %d)",
                 rc == cudaErrorInsufficientDriver   ? "no usable CUDA driver"
                 : rc == cudaErrorNoDevice || n == 0 ? "no CUDA device"
                                                     : "CUDA unusable",
                 cudaGetErrorName(rc == cudaSuccess ? cudaErrorNoDevice : rc),
                 cudaGetErrorString(rc == cudaSuccess ? cudaErrorNoDevice : rc), runtime, driver);
        return GW_ERR_UNSUPPORTED;
    }
    cuda_engine_t *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(why, cap, "out of memory");
        return GW_ERR_NO_MEMORY;
    }
    snprintf(e->err, sizeof(e->err), "no error");
    *ops = &cuda_engine_ops;
    *impl = e;
    return GW_OK;
}
