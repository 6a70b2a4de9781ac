/*
 * ib_dmabuf.h - GPUDirect RDMA: device memory registered with the NIC
 * through dmabuf, or the reason it cannot be (ib_dmabuf.c).
 */
#ifndef GW_TRANSPORT_IB_DMABUF_H
#define GW_TRANSPORT_IB_DMABUF_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/device/copy_engine.h"
#include "common/log.h"
#include "gradwire.h"

struct ibv_pd;
struct ibv_mr;

/* ibv_reg_dmabuf_mr's signature: the verbs library's, or a test's
 * stand-in. */
typedef struct ibv_mr *(*gw_ib_reg_dmabuf_fn)(struct ibv_pd *pd, uint64_t offset, size_t len,
                                              uint64_t iova, int fd, int access);

/* Register [ptr, ptr + len) of device memory for RDMA: the engine exports
 * it as a dmabuf (its dmabuf_fd op: cuMemGetHandleForAddressRange in the
 * CUDA plugin), and reg registers that with pd at the buffer's own virtual
 * address as iova, so peers address it as they address host memory. The
 * descriptor is closed afterwards (the registration holds the memory).
 * GW_OK with *mr; otherwise GW_ERR_UNSUPPORTED and why (cap bytes) names
 * the step that failed and its reason: no engine, an engine without
 * export, a verbs library without ibv_reg_dmabuf_mr, the export's error,
 * the registration's errno. Nothing is logged. */
gw_status_t gw__ib_dmabuf_reg(const gw_copy_engine_t *eng, gw_ib_reg_dmabuf_fn reg,
                              struct ibv_pd *pd, const void *ptr, size_t len, int access,
                              struct ibv_mr **mr, char *why, size_t cap);

/* One communicator's decision: tried at the first device buffer; a failure
 * is logged once (WARN, naming why) and every device buffer is then staged
 * through host memory without asking again. */
typedef struct gw_ib_gdr {
    int tried;
    int usable;
    char why[256];
} gw_ib_gdr_t;

/* 1: register device buffers through dmabuf (*mr set); 0: stage them (the
 * reason logged once, on the first refusal). */
int gw__ib_gdr_decide(gw_ib_gdr_t *g, const gw_logger_t *log, const gw_copy_engine_t *eng,
                      gw_ib_reg_dmabuf_fn reg, struct ibv_pd *pd, const void *ptr, size_t len,
                      int access, struct ibv_mr **mr);

#endif
