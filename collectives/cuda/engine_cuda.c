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
 *
 * Reductions (reduce, finish_avg) are the project's kernels
 * (collectives/cuda/reduce.cu, bitwise the CPU's) on the caller's stream.
 * Pinned host memory (cudaHostAlloc: the staging slots, where the wire's
 * data lands) is read and written by the kernel in place, mapped into the
 * device through unified addressing, so no separate copy sits on the
 * path; ordinary (pageable) host memory, which a kernel cannot reach, goes
 * through device scratch with stream-ordered copies on the same stream.
 * dmabuf_fd exports device memory for GPUDirect RDMA through the driver's
 * cuMemGetHandleForAddressRange, found with cudaGetDriverEntryPointByVersion
 * so that the plugin still links only the runtime.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "collectives/cuda/cuda_kernels.h"
#include "collectives/device/copy_engine.h"
/* GW_CUDA_KERNELS: the kernels were built (nvcc found); without them the
 * table has no reduce, and device buffers are reduced by the CPU on their
 * pinned copies, as before the kernels. */

typedef struct cuda_engine {
    char err[200];
    /* Device scratch for pageable operands (reduce): a, b, out. One
     * stream's reductions use it in stream order; set_device frees it when
     * the device changes. */
    void *scratch[3];
    size_t scratch_len;
    int scratch_dev;
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

static void free_scratch(cuda_engine_t *e)
{
    for (int i = 0; i < 3; i++) {
        if (e->scratch[i])
            cudaFree(e->scratch[i]);
        e->scratch[i] = NULL;
    }
    e->scratch_len = 0;
}

static gw_status_t set_device(void *eng, int device)
{
    cuda_engine_t *e = eng;
    CALL(e, cudaSetDevice(device));
    if (e->scratch_len && e->scratch_dev != device)
        free_scratch(e);
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

#ifdef GW_CUDA_KERNELS
/* Memory a kernel can reach as it is: device, managed or pinned host
 * memory (unified addressing maps pinned memory into every device). */
static int kernel_reaches(const void *ptr)
{
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged ||
           a.type == cudaMemoryTypeHost;
}

static gw_status_t scratch(cuda_engine_t *e, size_t len)
{
    if (e->scratch_len >= len)
        return GW_OK;
    /* Frees wait for the device, so earlier reductions have used the old
     * scratch by then. */
    free_scratch(e);
    int dev = 0;
    CALL(e, cudaGetDevice(&dev));
    for (int i = 0; i < 3; i++)
        CALL(e, cudaMalloc(&e->scratch[i], len));
    e->scratch_len = len;
    e->scratch_dev = dev;
    return GW_OK;
}

/* Element sizes, kept here: the plugin calls nothing in libgradwire (which
 * an application may have opened with RTLD_LOCAL, hiding its symbols). */
static size_t elem_size(gw_dtype_t dtype)
{
    switch (dtype) {
    case GW_FLOAT64:
    case GW_INT64:
        return 8;
    case GW_FLOAT32:
    case GW_INT32:
        return 4;
    case GW_FLOAT16:
    case GW_BFLOAT16:
        return 2;
    case GW_INT8:
    case GW_UINT8:
        return 1;
    default:
        return 0;
    }
}

static gw_status_t kernel_failed(cuda_engine_t *e, gw_status_t st, const char *what, size_t count,
                                 gw_dtype_t dtype)
{
    cudaError_t rc = cudaGetLastError();
    snprintf(e->err, sizeof(e->err), "%s of %zu elements (dtype %d): %s (%s)", what, count,
             (int)dtype, cudaGetErrorName(rc), cudaGetErrorString(rc));
    return st;
}

static gw_status_t reduce(void *eng, void *out, const void *a, const void *b, size_t count,
                          gw_dtype_t dtype, gw_op_t op, void *stream)
{
    cuda_engine_t *e = eng;
    size_t len = count * elem_size(dtype);
    cudaStream_t s = (cudaStream_t)stream;
    int ra = kernel_reaches(a), rb = kernel_reaches(b), ro = kernel_reaches(out);
    gw_status_t st;
    if ((!ra || !rb || !ro) && (st = scratch(e, len)) != GW_OK)
        return st;
    const void *ka = a, *kb = b;
    void *ko = out;
    if (!ra) {
        CALL(e, cudaMemcpyAsync(e->scratch[0], a, len, cudaMemcpyHostToDevice, s));
        ka = e->scratch[0];
    }
    if (!rb) {
        CALL(e, cudaMemcpyAsync(e->scratch[1], b, len, cudaMemcpyHostToDevice, s));
        kb = e->scratch[1];
    }
    if (!ro)
        ko = out == a ? (void *)ka : out == b ? (void *)kb : e->scratch[2];
    if ((st = gw__cuda_reduce(ko, ka, kb, count, dtype, op, stream)) != GW_OK)
        return kernel_failed(e, st, "gw__cuda_reduce", count, dtype);
    if (!ro)
        CALL(e, cudaMemcpyAsync(out, ko, len, cudaMemcpyDeviceToHost, s));
    return GW_OK;
}

static gw_status_t finish_avg(void *eng, void *buf, size_t count, gw_dtype_t dtype, int nranks,
                              void *stream)
{
    cuda_engine_t *e = eng;
    size_t len = count * elem_size(dtype);
    cudaStream_t s = (cudaStream_t)stream;
    void *k = buf;
    gw_status_t st;
    if (!kernel_reaches(buf)) {
        if ((st = scratch(e, len)) != GW_OK)
            return st;
        k = e->scratch[2];
        CALL(e, cudaMemcpyAsync(k, buf, len, cudaMemcpyHostToDevice, s));
    }
    if ((st = gw__cuda_reduce_finish_avg(k, count, dtype, nranks, stream)) != GW_OK)
        return kernel_failed(e, st, "gw__cuda_reduce_finish_avg", count, dtype);
    if (k != buf)
        CALL(e, cudaMemcpyAsync(buf, k, len, cudaMemcpyDeviceToHost, s));
    return GW_OK;
}
#endif

typedef CUresult (*get_handle_fn)(void *handle, CUdeviceptr dptr, size_t size,
                                  CUmemRangeHandleType type, unsigned long long flags);

static gw_status_t dmabuf_fd(void *eng, const void *ptr, size_t len, int *fd, uint64_t *offset)
{
    cuda_engine_t *e = eng;
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess || a.type != cudaMemoryTypeDevice) {
        (void)cudaGetLastError();
        snprintf(e->err, sizeof(e->err), "%p is not CUDA device memory", ptr);
        return GW_ERR_UNSUPPORTED;
    }
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported,
                               (enum cudaDeviceAttr)CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                               a.device) != cudaSuccess ||
        !supported) {
        (void)cudaGetLastError();
        snprintf(e->err, sizeof(e->err),
                 "device %d does not support dmabuf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: "
                 "driver or kernel too old, or the open kernel module is not in use)",
                 a.device);
        return GW_ERR_UNSUPPORTED;
    }
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuMemGetHandleForAddressRange", &fn, 11070,
                                         cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        snprintf(e->err, sizeof(e->err), "the CUDA driver has no cuMemGetHandleForAddressRange");
        return GW_ERR_UNSUPPORTED;
    }
    /* The range must be page aligned: export the pages around it. */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)ptr & ~(page - 1);
    uintptr_t hi = ((uintptr_t)ptr + len + page - 1) & ~(page - 1);
    int h = -1;
    CUresult rc =
        ((get_handle_fn)fn)(&h, (CUdeviceptr)lo, hi - lo, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0);
    if (rc != CUDA_SUCCESS || h < 0) {
        snprintf(e->err, sizeof(e->err), "cuMemGetHandleForAddressRange: CUresult %d", (int)rc);
        return GW_ERR_UNSUPPORTED;
    }
    *fd = h;
    *offset = (uint64_t)((uintptr_t)ptr - lo);
    return GW_OK;
}

static const char *error(void *eng) { return ((cuda_engine_t *)eng)->err; }

static void destroy(void *eng)
{
    free_scratch(eng);
    free(eng);
}

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
#ifdef GW_CUDA_KERNELS
    .reduce = reduce,
    .finish_avg = finish_avg,
#endif
    .dmabuf_fd = dmabuf_fd,
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
