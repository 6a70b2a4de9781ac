/*
 * ib_res.c - what the verbs transport holds on its device besides the QPs:
 * the protection domain, the completion channel and queue, the pairs'
 * blocks (CTS FIFO and eager slots, GW_IB_PAIR_BLOCK) and the registration
 * cache's backend.
 *
 * Connecting every pair at once, everything is sized for every peer at
 * open: one registration holds every pair's block, and the CQ has room
 * for every peer's QPs. Connecting on first use (ib_lazy.c), a pair
 * registers its block when it is set up (gw__ib_pair_block), and the CQ
 * starts with room for two peers' QPs and doubles as pairs are set up
 * (gw__ib_cq_room), so that a job of thousands of ranks pins and polls for
 * the pairs its algorithms use, not for all of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "transport/ib/ib_internal.h"

/* ---- the registration cache's backend ------------------------------------ */

static int backend_reg(void *ctx, void *addr, size_t len, void **mr, uint32_t *lkey, uint32_t *rkey)
{
    gw_ib_t *t = ctx;
    struct ibv_mr *m =
        t->api.reg_mr(t->pd, addr, len,
                      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    if (!m)
        return errno ? errno : EINVAL;
    *mr = m;
    *lkey = m->lkey;
    *rkey = m->rkey;
    return 0;
}

static void backend_dereg(void *ctx, void *mr)
{
    gw_ib_t *t = ctx;
    if (t->api.dereg_mr(mr) != 0)
        GW_WARN(t->base.log, GW_IB_SUBSYS, "ibv_dereg_mr: %m");
}

static int backend_mark(void *ctx, void *addr, size_t len, int *token)
{
    gw_ib_t *t = ctx;
    int err = gw__ib_mem_mark(addr, len, token);
    if (err && t->mrc.unmarked == 0) {
        errno = err;
        GW_INFO(t->base.log, GW_IB_SUBSYS,
                "registrations of memory that cannot be marked (mbind: %m) are released after "
                "each message instead of cached");
    }
    return err ? -1 : 0;
}

static int backend_check(void *ctx, const void *addr, size_t len, int token)
{
    (void)ctx;
    return gw__ib_mem_check(addr, len, token);
}

static int backend_fresh(void *ctx, const void *addr, size_t len)
{
    (void)ctx;
    return gw__ib_mem_fresh(addr, len);
}

/* Half of RLIMIT_MEMLOCK when it is finite: the cache must leave room for
 * the registrations of requests in flight. */
static size_t cache_byte_budget(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        return (size_t)rl.rlim_cur / 2 > 0 ? (size_t)rl.rlim_cur / 2 : 1;
    return SIZE_MAX;
}

static gw_status_t set_nonblock(const gw_logger_t *lg, int fd, const char *what)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "making the %s non-blocking: %m", what);
        return GW_ERR_SYSTEM;
    }
    return GW_OK;
}

/* CQ entries for the QPs of `pairs` peers and the candidates. */
static long cq_entries(const gw_ib_t *t, int pairs)
{
    return (long)pairs * t->nqps * 2 * GW_IB_WQ_DEPTH + GW_IB_CM_CANDS * (GW_IB_CM_CAND_RECVS + 1) +
           16;
}

gw_status_t gw__ib_cq_room(gw_ib_t *t, gw_ib_peer_t *p)
{
    if (p->cq_counted)
        return GW_OK;
    long need = cq_entries(t, t->cq_pairs + 1);
    if (need > t->cq_size) {
        long want = 2L * t->cq_size > need ? 2L * t->cq_size : need;
        if (want > t->cq_max)
            want = t->cq_max;
        if (need > want) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS,
                     "connecting %s: %d connected peers with %d QPs each need a CQ of %ld "
                     "entries, but %s allows %d: lower GW_IB_QPS",
                     p->desc, t->cq_pairs + 1, t->nqps, need, t->dev_name, t->cq_max);
            return GW_ERR_CONFIG;
        }
        if (t->api.resize_cq(t->cq, (int)want) != 0) {
            GW_ERROR(t->base.log, GW_IB_SUBSYS,
                     "connecting %s: growing the CQ from %d to %ld entries on %s: %m", p->desc,
                     t->cq_size, want, t->dev_name);
            return GW_ERR_SYSTEM;
        }
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "CQ grown from %d to %d entries for %d peers",
                 t->cq_size, t->cq->cqe, t->cq_pairs + 1);
        t->cq_size = t->cq->cqe > want ? t->cq->cqe : (int)want;
    }
    p->cq_counted = 1;
    t->cq_pairs++;
    return GW_OK;
}

gw_status_t gw__ib_setup_resources(gw_ib_t *t)
{
    const gw_logger_t *lg = t->base.log;
    struct ibv_device_attr da;
    if (t->api.query_device(t->ctx, &da) != 0) {
        GW_ERROR(lg, GW_IB_SUBSYS, "ibv_query_device(%s): %m", t->dev_name);
        return GW_ERR_SYSTEM;
    }
    /* Every QP's two queues, and the receives of the rdmacm connections
     * that have not proven the key yet (ib_cm.c): for every peer when they
     * are all connected at once, for the first two (a ring's) when they
     * are connected on first use (the CQ grows with them: gw__ib_cq_room). */
    t->cq_max = da.max_cqe;
    int pairs = t->base.size - 1;
    if (t->lazy && pairs > 2)
        pairs = 2;
    long cqe = cq_entries(t, pairs);
    if (cqe > da.max_cqe) {
        GW_ERROR(lg, GW_IB_SUBSYS,
                 "%d peers with %d QPs each need a CQ of %ld entries, but %s allows %d: "
                 "lower GW_IB_QPS%s",
                 pairs, t->nqps, cqe, t->dev_name, da.max_cqe,
                 t->lazy ? "" : ", or connect pairs on first use (GW_CONNECT=lazy)");
        return GW_ERR_CONFIG;
    }
    t->cq_size = (int)cqe;
    t->pd = t->api.alloc_pd(t->ctx);
    if (!t->pd) {
        GW_ERROR(lg, GW_IB_SUBSYS, "ibv_alloc_pd(%s): %m", t->dev_name);
        return GW_ERR_SYSTEM;
    }
    t->channel = t->api.create_comp_channel(t->ctx);
    if (!t->channel) {
        GW_ERROR(lg, GW_IB_SUBSYS, "ibv_create_comp_channel(%s): %m", t->dev_name);
        return GW_ERR_SYSTEM;
    }
    if (set_nonblock(lg, t->channel->fd, "completion channel") != GW_OK ||
        set_nonblock(lg, t->ctx->async_fd, "async event fd") != GW_OK)
        return GW_ERR_SYSTEM;
    t->cq = t->api.create_cq(t->ctx, t->cq_size, t, t->channel, 0);
    if (!t->cq) {
        GW_ERROR(lg, GW_IB_SUBSYS, "ibv_create_cq(%s, %d entries): %m", t->dev_name, t->cq_size);
        return GW_ERR_SYSTEM;
    }
    /* Connecting every pair at once, one registration holds every pair's
     * block; lazily, each pair registers its own when it is set up. */
    t->fifo_bytes = t->lazy ? 0 : (size_t)t->base.size * GW_IB_PAIR_BLOCK;
    if (t->fifo_bytes) {
        void *mem = NULL;
        if (posix_memalign(&mem, 4096, t->fifo_bytes) != 0) {
            GW_ERROR(lg, GW_IB_SUBSYS, "out of memory for %zu bytes of CTS FIFOs and eager slots",
                     t->fifo_bytes);
            return GW_ERR_NO_MEMORY;
        }
        memset(mem, 0, t->fifo_bytes);
        t->fifo_mem = mem;
        t->fifo_mr = t->api.reg_mr(t->pd, mem, t->fifo_bytes,
                                   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!t->fifo_mr) {
            GW_ERROR(lg, GW_IB_SUBSYS,
                     "registering %zu bytes of CTS FIFOs and eager slots on %s: %m (is the "
                     "locked-memory limit, ulimit -l, too low?)",
                     t->fifo_bytes, t->dev_name);
            return GW_ERR_SYSTEM;
        }
        for (int r = 0; r < t->base.size; r++) {
            t->peers[r].blk = t->fifo_mem + (size_t)r * GW_IB_PAIR_BLOCK;
            t->peers[r].blk_lkey = t->fifo_mr->lkey;
        }
    }
    gw_ib_mr_backend_t be = {.ctx = t,
                             .reg = backend_reg,
                             .dereg = backend_dereg,
                             .mark = backend_mark,
                             .check = backend_check,
                             .fresh = backend_fresh};
    gw__ib_mr_cache_init(&t->mrc, &be, t->cfg.reg_cache, (size_t)t->cfg.reg_cache_max,
                         cache_byte_budget());
    return GW_OK;
}

gw_status_t gw__ib_pair_block(gw_ib_t *t, gw_ib_peer_t *p)
{
    if (p->blk)
        return GW_OK;
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, GW_IB_PAIR_BLOCK) != 0) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS, "out of memory for the CTS FIFO and eager slots of %s",
                 p->desc);
        return GW_ERR_NO_MEMORY;
    }
    memset(mem, 0, GW_IB_PAIR_BLOCK);
    p->blk_mr = t->api.reg_mr(t->pd, mem, GW_IB_PAIR_BLOCK,
                              IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!p->blk_mr) {
        GW_ERROR(t->base.log, GW_IB_SUBSYS,
                 "registering %d bytes of CTS FIFO and eager slots for %s on %s: %m (is the "
                 "locked-memory limit, ulimit -l, too low?)",
                 (int)GW_IB_PAIR_BLOCK, p->desc, t->dev_name);
        free(mem);
        return GW_ERR_SYSTEM;
    }
    p->blk = mem;
    p->blk_lkey = p->blk_mr->lkey;
    return GW_OK;
}
