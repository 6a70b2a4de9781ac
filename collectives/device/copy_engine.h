/*
 * copy_engine.h - the copy-engine interface under device buffers: what the
 * staging pipeline (staging_chunked.c, staging_whole.c) needs from a GPU
 * runtime, and nothing more. Two implementations: the CUDA one in the
 * plugin libgradwire-cuda.so (collectives/cuda/engine_cuda.c, on cudart), which
 * libgradwire opens with dlopen on first need (engine_load.c), and a
 * host-memory one (engine_host.c) that tests inject into a communicator:
 * it declares regions of ordinary memory "device memory" and defers every
 * copy until an event behind it is queried or waited for, so a pipeline
 * that reads a buffer before its copy is known to be done reads stale
 * data, and a test sees it.
 *
 * Streams and events are opaque pointers owned by the engine. Copies on one
 * stream run in the order they were issued; copies on different streams in
 * any order, unless an event orders them (stream_wait_event). Every op
 * returns a gw_status_t; on failure the engine's `error` says why in one
 * line (a CUDA error name and its text), which the caller logs once.
 *
 * The plugin's ABI is this table: its one exported function,
 * gw_cuda_plugin_open, fills in a pointer to its static const table and a
 * fresh engine. `size` comes first, so a libgradwire that finds a smaller
 * table than its own (an older plugin) refuses it instead of calling past
 * its end.
 */
#ifndef GW_COLLECTIVES_DEVICE_COPY_ENGINE_H
#define GW_COLLECTIVES_DEVICE_COPY_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gradwire.h"

typedef struct gw_copy_engine_ops {
    size_t size; /* sizeof(gw_copy_engine_ops_t) of the build that made it */
    const char *name;
    /* Where ptr points: *device = the device ordinal for device memory, -1
     * for memory the host can read (ordinary, pinned or managed). */
    gw_status_t (*pointer_device)(void *eng, const void *ptr, int *device);
    gw_status_t (*device_count)(void *eng, int *count);
    gw_status_t (*device_name)(void *eng, int device, char *buf, size_t cap);
    /* Make device current on the calling thread (streams, events and copies
     * that follow belong to it). */
    gw_status_t (*set_device)(void *eng, int device);
    /* Page-locked host memory, which the copies reach by DMA. */
    gw_status_t (*host_alloc)(void *eng, size_t len, void **out);
    void (*host_free)(void *eng, void *ptr);
    gw_status_t (*stream_create)(void *eng, void **out);
    void (*stream_destroy)(void *eng, void *stream);
    /* Copies of len bytes, queued on stream; they return before the copy
     * is done. d2h: device src to host dst; h2d: host src to device dst. */
    gw_status_t (*copy_d2h)(void *eng, void *dst, const void *src, size_t len, void *stream);
    gw_status_t (*copy_h2d)(void *eng, void *dst, const void *src, size_t len, void *stream);
    gw_status_t (*event_create)(void *eng, void **out);
    void (*event_destroy)(void *eng, void *event);
    /* The event completes when everything queued on stream before it did. */
    gw_status_t (*event_record)(void *eng, void *event, void *stream);
    /* *done = 1 once the event completed; a failed copy before it is this
     * call's error. */
    gw_status_t (*event_query)(void *eng, void *event, int *done);
    /* Block the calling thread until the event completed. */
    gw_status_t (*event_wait)(void *eng, void *event);
    /* Work queued on stream after this waits for the event. */
    gw_status_t (*stream_wait_event)(void *eng, void *stream, void *event);
    /* The last failure, in one line; never NULL. */
    const char *(*error)(void *eng);
    void (*destroy)(void *eng);
    /* Reductions of device buffers run here, not on the host CPU
     * (device_reduce.c): out[i] = a[i] OP b[i] for count elements, queued
     * on stream, bitwise gw__reduce (collectives/reduce_kernels.h: a's NaN
     * first, wrapping integers, halves rounded once). Each pointer is
     * device memory or host memory, pinned or not: the engine reaches host
     * operands itself (the CUDA engine reads pinned memory mapped into the
     * device, and copies ordinary memory through device scratch on the
     * same stream). out may alias a or b exactly. Done once an event
     * recorded on stream after it completed. */
    gw_status_t (*reduce)(void *eng, void *out, const void *a, const void *b, size_t count,
                          gw_dtype_t dtype, gw_op_t op, void *stream);
    /* buf[i] /= nranks, bitwise gw__reduce_finish_avg, queued on stream. */
    gw_status_t (*finish_avg)(void *eng, void *buf, size_t count, gw_dtype_t dtype, int nranks,
                              void *stream);
    /* GPUDirect RDMA (transport/ib/ib_dmabuf.c): a dmabuf file descriptor
     * exporting the device memory [ptr, ptr + len) (the caller closes it)
     * and ptr's offset in it (cuMemGetHandleForAddressRange). Memory that
     * cannot be exported (host memory, no driver support) is
     * GW_ERR_UNSUPPORTED, error() saying why. */
    gw_status_t (*dmabuf_fd)(void *eng, const void *ptr, size_t len, int *fd, uint64_t *offset);
} gw_copy_engine_ops_t;

/* An engine: its table and its own state. */
typedef struct gw_copy_engine {
    const gw_copy_engine_ops_t *ops;
    void *impl;
} gw_copy_engine_t;

/* The plugin's entry point (collectives/cuda/engine_cuda.c): on success *ops and
 * *impl describe a fresh engine; otherwise why (cap bytes) says what is
 * missing (no driver, no device) and the status is GW_ERR_UNSUPPORTED. */
#define GW_CUDA_PLUGIN_ENTRY "gw_cuda_plugin_open"
typedef gw_status_t (*gw_cuda_plugin_open_fn)(size_t ops_size, const gw_copy_engine_ops_t **ops,
                                              void **impl, char *why, size_t cap);

/* ---- the host-memory engine (engine_host.c), for tests ------------------- */

/* What a host engine records of each operation, in the order it happened:
 * issuing a copy, a copy actually performed (completing), an event
 * recorded, an event found complete. */
typedef enum gw_host_op {
    GW_HOST_ISSUE_D2H,
    GW_HOST_ISSUE_H2D,
    GW_HOST_DONE_D2H,
    GW_HOST_DONE_H2D,
    GW_HOST_RECORD,
    GW_HOST_EVENT_DONE,
    GW_HOST_ISSUE_REDUCE, /* len: the bytes of one operand (count x element size) */
    GW_HOST_DONE_REDUCE,
    GW_HOST_DMABUF /* an export asked for; len: the range's bytes */
} gw_host_op_t;

typedef struct gw_host_log_entry {
    gw_host_op_t op;
    const void *dst, *src; /* copies */
    size_t len;
} gw_host_log_entry_t;

typedef struct gw_host_engine_opts {
    /* Queries of an event that report "not done" before it completes, each
     * time (0: it completes on the first query). Waits always complete. */
    int query_delay;
    /* Fail the n-th copy (1-based, D2H and H2D counted together) when it is
     * performed; 0: none fails. */
    int fail_copy;
    /* Fail the n-th reduction (reduce or finish_avg) when it runs; 0: none. */
    int fail_reduce;
    /* dmabuf_fd exports declared device memory (a memfd standing in for
     * the GPU's dmabuf); 0: it refuses, as a driver without dmabuf does. */
    int dmabuf;
} gw_host_engine_opts_t;

/* A host engine (heap-allocated; freed by its table's destroy). */
gw_status_t gw__host_engine_create(const gw_host_engine_opts_t *opts, gw_copy_engine_t *out);
/* Declare [ptr, ptr + len) device memory of device ordinal dev. At most 64
 * regions per engine. */
gw_status_t gw__host_engine_declare(gw_copy_engine_t *eng, const void *ptr, size_t len, int dev);
/* The log so far: *n entries at *entries (valid until the next operation). */
void gw__host_engine_log(gw_copy_engine_t *eng, const gw_host_log_entry_t **entries, size_t *n);
/* Pinned blocks currently allocated (a leak check for tests). */
size_t gw__host_engine_live_allocs(gw_copy_engine_t *eng);
/* Pinned blocks allocated so far, freed or not (a reuse check). */
size_t gw__host_engine_allocs(gw_copy_engine_t *eng);

#endif
