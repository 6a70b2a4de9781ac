/*
 * device.h - device buffers as the core sees them: per communicator, the
 * copy engine (the CUDA plugin, or a host engine a test injected), what the
 * caller declared (gw_comm_set_buffers, gw_comm_set_cuda_stream), the
 * staging streams, events and pinned buffers, and the executor that stages
 * a call whose buffers are device memory.
 *
 * The state lives on the root communicator (sub-communicators share the
 * root's engine and staging buffers): every call runs while its thread
 * drives the root's transport (comm_state.c), so one call at a time uses
 * them. gw__device_prepare runs where a collective is issued (async.c),
 * on the caller's thread; the staged executor where it runs.
 */
#ifndef GW_COLLECTIVES_DEVICE_DEVICE_H
#define GW_COLLECTIVES_DEVICE_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/device/copy_engine.h"
#include "gradwire.h"

struct gw_comm;
struct gw_handle;

/* Pinned message buffers kept for reuse by point-to-point (staging_p2p.c),
 * and the smallest one made (bytes). */
#define GW_P2P_POOL 8
#define GW_P2P_POOL_MIN (64u << 10)

/* Chunks in flight in the chunked pipeline (staging_chunked.c). */
#define GW_STAGE_SLOTS 3
/* GW_CUDA_CHUNK's default and bounds (bytes). */
#define GW_CUDA_CHUNK_DEFAULT (4u << 20)
#define GW_CUDA_CHUNK_MIN 4096L
#define GW_CUDA_CHUNK_MAX (1L << 30)

typedef struct gw_device {
    gw_copy_engine_t engine; /* ops NULL: none (yet) */
    void *plugin;            /* dlopen handle of libgradwire-cuda.so, or NULL */
    int load_tried;          /* the plugin was looked for */
    gw_status_t load_status; /* ... and what came of it */
    char why[256];           /* why there is no engine */
    int64_t next_probe_ms;   /* when AUTO next looks for a CUDA runtime in the process */
    int warned;              /* the "no plugin" warning was logged */
    void *user_stream;       /* gw_comm_set_cuda_stream; NULL: the default stream */
    size_t chunk_bytes;
    /* Staging: two streams on cur_device, events, pinned slots. */
    int cur_device; /* -1: none created yet */
    void *d2h_stream, *h2d_stream;
    void *ev_user;
    void *ev_d2h[GW_STAGE_SLOTS], *ev_h2d[GW_STAGE_SLOTS];
    void *slot[GW_STAGE_SLOTS];
    size_t slot_len;
    void *whole[2]; /* whole-buffer staging (staging_whole.c) */
    size_t whole_len[2];
    /* A reducing call on device buffers is running (device_reduce.c): its
     * reductions go to the engine, on the caller's stream, and ev_reduce
     * marks their end. */
    int reducing;
    int reduce_on_host; /* GW_CUDA_REDUCE=host: the CPU reduces the pinned copies */
    void *ev_reduce;
    uint64_t engine_reduces; /* reductions the engine ran ... */
    uint64_t cpu_reduces;    /* ... and the CPU ran, once this state exists (tests) */
    struct {
        void *p; /* NULL: an empty place */
        size_t cap;
        int busy; /* a message in flight uses it */
    } pool[GW_P2P_POOL];
} gw_device_t;

/* The root's device state, created on first use (GW_ERR_NO_MEMORY, or
 * GW_ERR_CONFIG for a malformed GW_CUDA_CHUNK). */
gw_status_t gw__device_state(struct gw_comm *comm, gw_device_t **out);
/* Free it (gw_comm_destroy of a root). */
void gw__device_destroy(struct gw_comm *comm);

/* Where ptr points for this communicator: *dev = its device ordinal, -1
 * for host memory. Host without asking when the caller declared
 * GW_BUFFERS_HOST or ptr is NULL. A pointer declared or detected as device
 * memory with no engine to copy it is GW_ERR_UNSUPPORTED, logged naming
 * what is missing. */
gw_status_t gw__device_where(struct gw_comm *comm, const void *ptr, int *dev);

/* Before a collective is run or queued: classify its buffers and, when one
 * is device memory, make the call go through the staged executor (the
 * handle keeps the host executor in host_execute). Errors as
 * gw__device_where; the communicator is then failed (and peers told). */
gw_status_t gw__device_prepare(struct gw_comm *comm, struct gw_handle *call);

/* The staged executor: chunked for allreduce, broadcast, reduce,
 * allgather and reduce-scatter (staging_chunked.c), the whole buffer for
 * the rest (staging_whole.c). */
gw_status_t gw__staged_execute(struct gw_comm *comm, const struct gw_handle *h);
gw_status_t gw__staged_chunked(struct gw_comm *comm, const struct gw_handle *h);
gw_status_t gw__staged_whole(struct gw_comm *comm, const struct gw_handle *h);

/* Shared by the stagers: streams and events on device dev (recreated when
 * the device changes); a pinned buffer of at least len bytes from the
 * whole-buffer cache (which = 0 or 1); an engine failure logged and turned
 * into the communicator's failure. */
gw_status_t gw__device_streams(struct gw_comm *comm, gw_device_t *d, int dev);
gw_status_t gw__device_pinned(struct gw_comm *comm, gw_device_t *d, int which, size_t len,
                              void **out);
gw_status_t gw__device_engine_fail(struct gw_comm *comm, gw_device_t *d, gw_status_t st,
                                   const char *what);

/* Run h's host executor with its reductions on the device (reducing set
 * around it). */
gw_status_t gw__device_reduce_run(struct gw_comm *comm, gw_device_t *d, const struct gw_handle *h);

/* A copy of len bytes between device and host, waited for. */
gw_status_t gw__device_copy_sync(struct gw_comm *comm, void *dst, const void *src, size_t len,
                                 int to_device);

/* Point-to-point (staging_p2p.c, called by p2p_api.c): *use is the buffer
 * the message uses, buf itself or its pinned copy *pinned (NULL: buf is host
 * memory; a send's data is already copied in). unstage copies a received
 * message up (when st is GW_OK) and frees the copy; it returns st or the
 * copy's failure. release frees the copy of a message that never
 * completed (gw_comm_destroy). Errors fail the communicator. */
gw_status_t gw__device_p2p_stage(struct gw_comm *comm, int is_send, void *buf, size_t nbytes,
                                 void **use, void **pinned);
gw_status_t gw__device_p2p_unstage(struct gw_comm *comm, int is_send, void *dst, void *pinned,
                                   size_t nbytes, gw_status_t st);
void gw__device_p2p_release(struct gw_comm *comm, void *pinned);
/* Free the pool's buffers (the engine is going away). */
void gw__device_p2p_pool_free(gw_device_t *d);

/* Tests: give the communicator (its root) this engine, which it owns from
 * now on (destroyed with it); replaces any other. Not thread-safe: before
 * the first call. */
void gw__comm_set_copy_engine(struct gw_comm *comm, const gw_copy_engine_t *engine);

/* The plugin (engine_load.c): open libgradwire-cuda.so (GW_CUDA_PLUGIN, else
 * next to the object this code is in, else the loader's search path) and
 * the engine it makes. why receives the reason when it fails: plugin
 * missing, libcudart missing (dlerror), no driver or no device (the CUDA
 * error). *handle is the dlopen handle to dlclose after the engine's
 * destroy. */
gw_status_t gw__cuda_plugin_load(gw_copy_engine_t *engine, void **handle, char *why, size_t cap,
                                 char *path, size_t path_cap);
/* A CUDA runtime (libcudart or libcuda) is loaded in this process. */
int gw__cuda_runtime_in_process(void);
/* With the runtime in the process but no plugin: is ptr device memory,
 * according to that runtime's cudaPointerGetAttributes? 0 when it cannot
 * tell. */
int gw__cuda_runtime_says_device(const void *ptr);

#endif
