/*
 * ib_dmabuf.c - GPUDirect RDMA: registering device memory with the NIC
 * through dmabuf, so that the NIC reads and writes GPU memory directly
 * (NCCL's net plugins do the same), or the reason it cannot be, after
 * which device buffers are staged through pinned host memory as ever.
 *
 * The registration has two halves and both must work: the GPU driver
 * exports the range as a dmabuf file descriptor (the copy engine's
 * dmabuf_fd: cuMemGetHandleForAddressRange in the CUDA plugin, so
 * libgradwire links no CUDA library), and the verbs library registers that
 * descriptor (ibv_reg_dmabuf_mr, rdma-core v34 and later, resolved at run
 * time by ib_api.c). Each can refuse for reasons of its own (an old
 * driver, the proprietary kernel module without dmabuf, a NIC or provider
 * without it, rlimits), so the first refusal decides for the communicator,
 * with one log line that names the step and the reason; the transfer then
 * falls back to staging, which always works. Tests drive both halves with
 * the host copy engine and a verbs stand-in (tests/transport/test_ib_dmabuf.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "transport/ib/ib_dmabuf.h"

gw_status_t gw__ib_dmabuf_reg(const gw_copy_engine_t *eng, gw_ib_reg_dmabuf_fn reg,
                              struct ibv_pd *pd, const void *ptr, size_t len, int access,
                              struct ibv_mr **mr, char *why, size_t cap)
{
    *mr = NULL;
    if (!eng || !eng->ops) {
        snprintf(why, cap, "no CUDA copy engine is loaded");
        return GW_ERR_UNSUPPORTED;
    }
    if (eng->ops->size < sizeof(gw_copy_engine_ops_t) || !eng->ops->dmabuf_fd) {
        snprintf(why, cap, "the %s copy engine cannot export device memory as dmabuf",
                 eng->ops->name);
        return GW_ERR_UNSUPPORTED;
    }
    if (!reg) {
        snprintf(why, cap, "libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than v34)");
        return GW_ERR_UNSUPPORTED;
    }
    int fd = -1;
    uint64_t offset = 0;
    if (eng->ops->dmabuf_fd(eng->impl, ptr, len, &fd, &offset) != GW_OK) {
        snprintf(why, cap, "exporting the device memory as dmabuf: %s", eng->ops->error(eng->impl));
        return GW_ERR_UNSUPPORTED;
    }
    errno = 0;
    struct ibv_mr *m = reg(pd, offset, len, (uint64_t)(uintptr_t)ptr, fd, access);
    int err = errno;
    close(fd);
    if (!m) {
        snprintf(why, cap, "ibv_reg_dmabuf_mr of %zu bytes: %s", len,
                 err ? strerror(err) : "failed (no errno)");
        return GW_ERR_UNSUPPORTED;
    }
    *mr = m;
    return GW_OK;
}

int gw__ib_gdr_decide(gw_ib_gdr_t *g, const gw_logger_t *log, const gw_copy_engine_t *eng,
                      gw_ib_reg_dmabuf_fn reg, struct ibv_pd *pd, const void *ptr, size_t len,
                      int access, struct ibv_mr **mr)
{
    *mr = NULL;
    if (g->tried && !g->usable)
        return 0;
    gw_status_t st = gw__ib_dmabuf_reg(eng, reg, pd, ptr, len, access, mr, g->why, sizeof(g->why));
    if (st == GW_OK) {
        if (!g->tried)
            GW_INFO(log, "ib", "GPUDirect RDMA: device memory registered through dmabuf");
        g->tried = g->usable = 1;
        return 1;
    }
    /* The first refusal decides for the communicator (whenever it comes:
     * a range the driver will not export after others it did), with one
     * line; device buffers are staged from then on, without asking again. */
    g->tried = 1;
    g->usable = 0;
    GW_WARN(log, "ib",
            "GPUDirect RDMA unavailable, device buffers are staged through host memory: %s",
            g->why);
    return 0;
}
