/*
 * shm_connect.c - which pairs of ranks the shared-memory transport
 * connects, and when.
 *
 * A pair's handshake is shm_seg.c's: lo makes the segment, hi attaches it,
 * both prove the job's data-plane key and probe single copy. This file
 * decides when it happens.
 *
 * On first use (params.lazy: GW_CONNECT=lazy, the communicator's default),
 * connect() only reads the addresses. A pair starts connecting when the
 * first request for it is posted, or when the peer knocks on our door
 * because it posted one (shm_door.c); starting knocks on the peer's door in
 * turn, so both sides take part whoever needed the pair first. The
 * progress engine then moves every pair that is connecting one step per
 * round, next to the pairs that carry messages, and queued requests wait
 * until their pair is up. So a ring allreduce maps two segments per rank,
 * not size - 1, and a 64-rank job on one host no longer maps 63 segments of
 * two rings each per rank at creation. A peer whose process is gone while
 * we connect to it fails the transport naming it. One that is alive but
 * never takes part (stopped, hung, busy outside gradwire) is the caller's
 * time-out, as for a message it never receives: the pair has no deadline
 * of its own, since the peer answers a knock only when it next makes
 * progress, which may be any time later.
 *
 * Eagerly (GW_CONNECT=eager), connect() starts every pair and drives them
 * all in one loop under one deadline, without blocking on any single peer,
 * and returns once every pair is up; a peer whose process is gone, or that
 * never shows up before the timeout, is named in the error.
 *
 * Both sides must agree: our address blob says which way we connect, and a
 * peer that connects the other way is a configuration error at connect(),
 * since a lazy rank would wait at the door of an eager one that never
 * builds one, and the eager one would time out waiting for the lazy one.
 *
 * A refused single-copy probe (the kernel will not let us read the peer's
 * memory) is reported once: for every refused peer at the end of an eager
 * connect(), in one WARN line; lazily, at WARN for the first peer refused
 * and at INFO for later ones, since pairs come up one by one.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "transport/shm/shm_internal.h"

static const char *conn_stage(gw_shm_conn_t c)
{
    return c == GW_SHM_C_ATTACH        ? "it never handed us its shared memory"
           : c == GW_SHM_C_INIT        ? "it never initialised its shared memory"
           : c == GW_SHM_C_WAIT_MAPPED ? "it never mapped our shared memory"
                                       : "it never finished the handshake";
}

static void yama_scope(char *buf, size_t cap)
{
    buf[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) == 1)
            snprintf(buf, cap, "Yama ptrace_scope is %d; ", v);
        fclose(f);
    }
}

static const char REFUSED_WHY[] =
    "it needs ptrace access to the peer (same user, the peer dumpable, Yama ptrace_scope 0 or "
    "CAP_SYS_PTRACE, not denied by seccomp or a container); their large messages go through the "
    "rings instead (two copies, results unchanged)";

/* Eager: one WARN line for every peer whose memory the kernel would not
 * let us read: which ranks, the error, and what commonly causes it here. */
static void report_refused(gw_shm_t *t)
{
    char ranks[256];
    size_t len = 0;
    int count = 0, err = 0;
    ranks[0] = '\0';
    for (int r = 0; r < t->base.size; r++) {
        const gw_shm_peer_t *p = &t->peers[r];
        if (!p->served || !p->refused_errno)
            continue;
        err = p->refused_errno;
        int w = snprintf(ranks + len, sizeof(ranks) - len, "%s%d", count ? "," : "", r);
        if (w > 0 && (size_t)w < sizeof(ranks) - len)
            len += (size_t)w;
        count++;
    }
    if (count == 0)
        return;
    char scope[32];
    yama_scope(scope, sizeof(scope));
    errno = err;
    GW_WARN(t->base.log, GW_SHM_SUBSYS,
            "the kernel refuses cross-memory attach to %d of %d peers (ranks %s; "
            "process_vm_readv: %m): %s%s",
            count, t->npeers, ranks, scope, REFUSED_WHY);
    t->refused_warned = 1;
}

/* Lazy: p just came up. */
static void note_connected(gw_shm_t *t, gw_shm_peer_t *p)
{
    GW_INFO(t->base.log, GW_SHM_SUBSYS, "connected to rank %d in %lld ms (%s)", p->rank,
            (long long)(gw__now_ms() - p->conn_start_ms),
            p->direct_ok ? "it reads our large messages in place"
                         : "rings only: it does not read our large messages in place");
    if (!p->refused_errno)
        return;
    errno = p->refused_errno;
    if (t->refused_warned) {
        GW_INFO(t->base.log, GW_SHM_SUBSYS,
                "the kernel refuses cross-memory attach to rank %d too (process_vm_readv: %m)",
                p->rank);
        return;
    }
    char scope[32];
    yama_scope(scope, sizeof(scope));
    errno = p->refused_errno;
    GW_WARN(t->base.log, GW_SHM_SUBSYS,
            "the kernel refuses cross-memory attach to rank %d (process_vm_readv: %m): %s%s; "
            "further peers refused are logged at INFO",
            p->rank, scope, REFUSED_WHY);
    t->refused_warned = 1;
}

gw_status_t gw__shm_start_connect(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (t->base.failed != GW_OK)
        return t->base.failed;
    p->conn_start_ms = gw__now_ms();
    if (p->pidfd < 0) {
        p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
        if (p->pidfd < 0 && errno != ENOSYS && errno != ESRCH)
            GW_TRACE(t->base.log, GW_SHM_SUBSYS, "pidfd_open(%ld) for rank %d: %m", (long)p->pid,
                     p->rank);
    }
    t->nconnecting++;
    p->conn = GW_SHM_C_ATTACH;
    if (p->rank > t->base.rank) {
        p->conn = GW_SHM_C_WAIT_MAPPED;
        gw_status_t st = gw__shm_seg_create(t, p);
        if (st != GW_OK)
            return st;
    }
    /* lo hands the segment over by knocking (shm_door.c); lazily, hi
     * knocks too, to ask lo to make it. */
    return p->created || t->lazy ? gw__shm_knock(t, p) : GW_OK;
}

gw_status_t gw__shm_connect_step(gw_shm_t *t, gw_shm_peer_t *p, int liveness)
{
    if (p->door_gone)
        return gw__shm_door_gone(t, p);
    gw_shm_conn_t before = p->conn;
    gw_status_t st = gw__shm_seg_step(t, p);
    if (p->conn != before)
        t->moved++;
    if (st == GW_OK && p->conn == GW_SHM_C_DONE) {
        t->nconnecting--;
        t->nconnected++;
        if (t->lazy)
            note_connected(t, p);
        return GW_OK;
    }
    int32_t ab = st == GW_OK && p->its
                     ? atomic_load_explicit(&p->its->abort_status, memory_order_acquire)
                     : 0;
    if (ab != 0) {
        if (t->lazy)
            return gw__shm_peer_aborted(t, p, ab);
        GW_ERROR(t->base.log, GW_SHM_SUBSYS, "rank %d (pid %ld) failed to connect: %s", p->rank,
                 (long)p->pid, gw_status_str(gw__transport_abort_status(ab)));
        return GW_ERR_REMOTE;
    }
    if (st == GW_OK && liveness && gw__shm_peer_gone(p)) {
        if (t->lazy)
            return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                     "died while we connected to it: its process is gone");
        GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                 "rank %d (pid %ld) died before it connected through shared memory: its process "
                 "is gone",
                 p->rank, (long)p->pid);
        return GW_ERR_REMOTE;
    }
    return st;
}

static gw_status_t report_timeout(gw_shm_t *t)
{
    char msg[1024];
    size_t n = 0;
    msg[0] = '\0';
    for (int r = 0; r < t->base.size; r++) {
        const gw_shm_peer_t *p = &t->peers[r];
        if (!p->served || p->conn == GW_SHM_C_DONE)
            continue;
        int w = snprintf(msg + n, sizeof(msg) - n, "%srank %d (pid %ld): %s", n ? "; " : "", r,
                         (long)p->pid, conn_stage(p->conn));
        if (w > 0 && (size_t)w < sizeof(msg) - n)
            n += (size_t)w;
    }
    GW_ERROR(t->base.log, GW_SHM_SUBSYS,
             "connecting through shared memory timed out after %d ms: %s", t->timeout_ms, msg);
    return GW_ERR_TIMEOUT;
}

/* Read the peers' address blobs; a zero blob is a peer served elsewhere. */
static gw_status_t read_addrs(gw_shm_t *t, const uint8_t *all_addrs)
{
    static const uint8_t zero[GW_TRANSPORT_ADDR_MAX];
    for (int r = 0; r < t->base.size; r++) {
        if (r == t->base.rank)
            continue;
        const uint8_t *blob = all_addrs + (size_t)r * GW_TRANSPORT_ADDR_MAX;
        gw_shm_peer_t *p = &t->peers[r];
        if (memcmp(blob, zero, sizeof(zero)) == 0)
            continue;
        uint32_t pid;
        uint64_t host_id, ring;
        if (gw__shm_addr_decode(blob, &pid, &host_id, &ring) != GW_OK) {
            GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                     "the address of rank %d is not a gradwire shared-memory address (version "
                     "%u): do all ranks run the same gradwire?",
                     r, GW_SHM_PROTOCOL_VERSION);
            return GW_ERR_PROTOCOL;
        }
        if (host_id != t->host_id) {
            GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                     "rank %d is on another host (host id %016llx, ours %016llx): shared memory "
                     "connects only ranks on one host (same kernel, network namespace and "
                     "/dev/shm)",
                     r, (unsigned long long)host_id, (unsigned long long)t->host_id);
            return GW_ERR_CONFIG;
        }
        int lazy = (gw__get_le32(blob + 12) & GW_SHM_ADDR_LAZY) != 0;
        if (lazy != t->lazy) {
            GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                     "rank %d connects shared memory %s and this rank %s: set GW_CONNECT alike "
                     "on every rank",
                     r, lazy ? "on first use (GW_CONNECT=lazy)" : "eagerly (GW_CONNECT=eager)",
                     t->lazy ? "on first use" : "eagerly");
            return GW_ERR_CONFIG;
        }
        p->served = 1;
        p->pid = (pid_t)pid;
        /* The creator (lo) sizes the rings: for hi, lo's announced size is
         * the most the segment it hands over may have (shm_seg.c). */
        p->ring_bytes = r < t->base.rank ? ring : t->ring_bytes;
        t->npeers++;
    }
    for (int r = t->base.rank + 1; r < t->base.size; r++)
        if (t->peers[r].served)
            t->peers[r].ring_bytes = gw__shm_ring_for(t->ring_bytes, t->npeers);
    return GW_OK;
}

uint64_t gw__shm_ring_for(uint64_t ring, int npeers)
{
    while (ring > GW_SHM_RING_FLOOR && (uint64_t)npeers * 2 * ring > GW_SHM_RANK_RINGS)
        ring >>= 1;
    return ring;
}

/* Every pair now, under one deadline. */
static gw_status_t connect_all(gw_shm_t *t)
{
    int64_t deadline = gw__now_ms() + t->timeout_ms;
    gw_status_t st = GW_OK;
    for (int r = 0; st == GW_OK && r < t->base.size; r++)
        if (t->peers[r].served)
            st = gw__shm_start_connect(t, &t->peers[r]);
    while (st == GW_OK && t->nconnecting > 0) {
        uint64_t moved = t->moved;
        st = gw__shm_door_answer(t); /* segments handed to us */
        for (int r = 0; r < t->base.size && st == GW_OK; r++) {
            gw_shm_peer_t *p = &t->peers[r];
            if (!p->served || p->conn == GW_SHM_C_DONE)
                continue;
            if (p->knock_due)
                st = gw__shm_knock(t, p);
            if (st == GW_OK)
                st = gw__shm_connect_step(t, p, 1);
        }
        if (st != GW_OK || t->nconnecting == 0)
            break;
        if (gw__now_ms() >= deadline)
            st = report_timeout(t);
        else if (t->moved == moved)
            poll(NULL, 0, 1);
    }
    return st;
}

gw_status_t gw__shm_connect(gw_transport_t *base, const uint8_t *all_addrs)
{
    gw_status_t st =
        gw__transport_connect_check(base, all_addrs, base && gw__shm_of(base)->npeers > 0);
    if (st != GW_OK)
        return st;
    gw_shm_t *t = gw__shm_of(base);
    int64_t start = gw__now_ms();
    st = read_addrs(t, all_addrs);
    if (st == GW_OK && t->lazy) {
        t->base.connected = 1;
        GW_INFO(t->base.log, GW_SHM_SUBSYS,
                "%d peers reach us through shared memory, each connected on first use (rings of "
                "%zu bytes)",
                t->npeers, (size_t)gw__shm_ring_for(t->ring_bytes, t->npeers));
        return GW_OK;
    }
    if (st == GW_OK)
        st = connect_all(t);
    if (st != GW_OK) {
        /* Peers that mapped a segment with us learn at once that we gave up. */
        gw_abort_info_t why = {.status = st, .origin = t->base.rank, .culprit = -1};
        for (int r = 0; r < t->base.size; r++)
            if (t->peers[r].my)
                gw__shm_tell_abort(&t->peers[r], &why);
        gw__shm_unmap_all(t);
        return gw__shm_fail(t, st, NULL);
    }
    t->base.connected = 1;
    report_refused(t);
    int direct = 0;
    for (int r = 0; r < t->base.size; r++)
        direct += t->peers[r].served && t->peers[r].direct_ok;
    GW_INFO(t->base.log, GW_SHM_SUBSYS,
            "connected to %d peers in %lld ms (rings of %zu bytes; %d of them read our large "
            "messages in place)",
            t->npeers, (long long)(gw__now_ms() - start),
            (size_t)gw__shm_ring_for(t->ring_bytes, t->npeers), direct);
    return GW_OK;
}

void gw__shm_unmap_all(gw_shm_t *t)
{
    for (int r = 0; r < t->base.size; r++) {
        gw_shm_peer_t *p = &t->peers[r];
        if (p->fd >= 0)
            close(p->fd);
        p->fd = -1;
        if (p->seg)
            munmap(p->seg, p->seg_bytes);
        p->seg = NULL;
        p->my = p->its = NULL;
        p->out = p->in = NULL;
        p->out_ring = p->in_ring = NULL;
    }
}
