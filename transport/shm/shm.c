/*
 * shm.c - the shared-memory transport: framed, tagged messages between
 * ranks on the same host through rings in POSIX shared memory.
 *
 * How data moves. Every pair of ranks (lo, hi) shares one segment, created
 * by lo and attached by hi (shm_seg.c) when the pair is first needed (a
 * rank asks the peer to take part by knocking on its door, shm_door.c), or
 * at connect() for every pair with GW_CONNECT=eager (shm_connect.c). It
 * holds a small header and two rings of ring_bytes each, one per
 * direction. A ring is a byte pipe
 * with two counters on separate cache lines: head, the bytes the sender has
 * written (only it writes head), and tail, the bytes the receiver has
 * consumed (only it writes tail). The sender copies into the free part and
 * then publishes head with a release store; the receiver reads head with an
 * acquire load, copies out and publishes tail the same way. Nothing else is
 * shared, so no lock is ever taken and a rank that dies cannot leave one
 * held.
 *
 * A message is a 64-byte record header {magic, kind, tag.seq, tag.sig,
 * flags, length, index, tag.comm_id, sender's address} and, for INLINE
 * messages, the payload, padded to 64 bytes so that the next header is
 * aligned; a payload of at most 16 bytes takes the address's place in
 * the header (GW_SHM_REC_TINY), so that one line carries the whole
 * message. Large payloads
 * stream through the ring in pieces of at most GW_SHM_PIECE, each published
 * at once, so the receiver copies out one piece while the sender copies in
 * the next: a message may be far larger than the ring. The receiver checks a
 * header against the receive posted for it (tag and length exactly) before a
 * byte of payload reaches the user's buffer, as TCP does, and fails with
 * GW_ERR_MISMATCH otherwise. Where no receive is posted yet it takes the
 * header alone (read-ahead), never payload, so that a peer that is in
 * another collective than ours is noticed (gw__tag_conflicts) and the
 * payload waits in the ring, back-pressuring the sender.
 *
 * Single copy. Through the ring every byte is copied twice (into the ring,
 * out of it). Messages of GW_SHM_DIRECT_DEFAULT bytes and more are instead
 * sent as a DIRECT header carrying the address of the sender's buffer: the
 * receiver copies the payload straight from the sender's memory into its
 * own with process_vm_readv (cross-memory attach), and then counts the
 * message in direct_done, which completes the send. One copy instead of
 * two, and it runs on the receiving core, where the reduction that follows
 * finds the data in cache. The kernel allows it only when we may ptrace the
 * peer (same user; Yama's ptrace_scope, seccomp and missing CAP_SYS_PTRACE
 * in containers may forbid it), so each rank probes it at connect() by
 * reading a known word from the peer and tells the peer the result; a pair
 * where the probe failed uses the ring for everything, and each rank whose
 * probes were refused says so in one WARN line naming those peers, the
 * errno and the usual causes (shm_seg.c), since a silent fallback would
 * show only as a slower job. Results are the same either way: the ring
 * path is the one every message below GW_SHM_DIRECT_DEFAULT takes anyway
 * (GW_SHM_DIRECT_MIN=0 forces it, for comparisons).
 *
 * Why the default is 8 MiB, not less. On this project's 2-core test
 * machine (a VM; README, "Shared memory on one host") the kernel's copy
 * (pinning the peer's pages one by one, then copying) was slower than the
 * rings' two memcpy's, whose second copy reads the ring from cache: with
 * single copy from 64 KiB (the old default) a float32 allreduce on 2 ranks
 * was slower than through the rings at every size from 128 KiB to 64 MiB,
 * on 4 ranks at 256 KiB-1 MiB and no faster elsewhere, and point-to-point
 * streams were slower from 2 to 32 MiB on 2 ranks and from 1 to 64 MiB on
 * 4 (two runs of each; below 1 MiB on 2 ranks single copy was ahead in one
 * run of two). The algorithms auto picks on one host send pieces of at
 * most a chunk (512 KiB), so they now use the rings. Single copy is left
 * to messages of 8 MiB and more (point-to-point calls, `rd` forced on
 * large buffers), although the rings were mostly ahead there too: whether
 * to switch it off by default wants a machine with a core per rank, where
 * the receiver's one copy does not compete with the sender for a core.
 *
 * Receipts. A send that asks for one (GW_REQ_RECEIPT: the public
 * point-to-point calls) completes only once the receiver has matched and
 * accepted it. Its INLINE record says so in its flags, and the receiver,
 * when the record passed the check against its receive, stores the
 * record's index in its direction's `accepted` counter (on the cache line
 * of `tail`, which it writes anyway) and rings the bell; the send waits in
 * its own queue, out of the ring, until the counter reaches it. A DIRECT
 * send needs nothing more: the receiver reads it only after accepting it.
 * A receiver that refuses a message aborts, and its abort flag (status,
 * origin, culprit) fails the send; what it accepted before completes first,
 * since it published the counter before the flag.
 *
 * Failure. The first failure breaks the transport, as in TCP: every pending
 * request completes with it, it is logged once at ERROR naming the peer,
 * and every later call returns it. A peer announces close() with a goodbye
 * flag and abort() with its status in an abort flag, in its half of the
 * segment header. A peer that dies says nothing, so while we wait on it we
 * check every GW_SHM_LIVENESS_MS that its process still runs (a pidfd that
 * turns readable when it exits, even before it is reaped; kill(pid, 0) and
 * /proc where pidfds are missing): a dead peer fails the transport with
 * GW_ERR_REMOTE instead of a hang.
 *
 * Segments never outlive the job in /dev/shm: the creator unlinks the name
 * as soon as it has made it, reserves the pages (a full /dev/shm is an
 * error naming the size needed and the space left, never a SIGBUS later)
 * and hands the segment to the peer as a descriptor through the peer's
 * door (shm_seg.c, shm_door.c); the memory lives only as long as a
 * descriptor or a mapping of it, so even a job whose ranks are all killed
 * at once leaves nothing.
 *
 * Memory per rank is bounded. Each pair's rings are GW_SHM_RING_DEFAULT
 * (2 MiB each way) while the rings of all of a rank's peers fit in
 * GW_SHM_RANK_RINGS (32 MiB: up to 9 ranks on a host, where performance
 * was tuned); with more peers on the host the creator halves the rings
 * until they fit, down to GW_SHM_RING_FLOOR (64 KiB), so 128 ranks on a
 * host map about 33 MB each with every pair connected, not 0.5 GiB.
 * Messages stream through a ring in pieces, so a small ring costs
 * bandwidth, never correctness. The creator chooses, and the attacher takes
 * the size of the segment it was handed (no two ranks need to agree on
 * how many peers they have).
 *
 * Waiting. Ranks may outnumber cores (the test machine has 2 cores and runs
 * 4 to 8 ranks), so a waiting rank must not burn the core its peer needs:
 * progress() spins for a few rounds, then yields the core for a short
 * while, then sleeps in a futex wait on words in the segments that the
 * peers bump (and wake) after they moved data for us (shm_wait.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/env.h"
#include "transport/host_id.h"
#include "transport/shm/shm_internal.h"

static const gw__transport_class_t shm_class; /* at the end of the file */

void gw__shm_addr_encode(uint32_t pid, uint64_t host_id, uint64_t ring_bytes,
                         uint8_t blob[GW_TRANSPORT_ADDR_MAX])
{
    memset(blob, 0, GW_TRANSPORT_ADDR_MAX);
    gw__put_le32(blob + 0, GW_SHM_ADDR_MAGIC);
    gw__put_le32(blob + 4, GW_SHM_PROTOCOL_VERSION);
    gw__put_le32(blob + 8, pid);
    gw__put_le64(blob + 16, host_id);
    gw__put_le64(blob + 24, ring_bytes);
}

gw_status_t gw__shm_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX], uint32_t *pid,
                                uint64_t *host_id, uint64_t *ring_bytes)
{
    if (gw__get_le32(blob) != GW_SHM_ADDR_MAGIC ||
        gw__get_le32(blob + 4) != GW_SHM_PROTOCOL_VERSION)
        return GW_ERR_PROTOCOL;
    uint64_t ring = gw__get_le64(blob + 24);
    if (gw__get_le32(blob + 8) == 0 || ring < GW_SHM_RING_MIN || ring > GW_SHM_RING_MAX ||
        (ring & (ring - 1)) != 0)
        return GW_ERR_PROTOCOL;
    *pid = gw__get_le32(blob + 8);
    *host_id = gw__get_le64(blob + 16);
    *ring_bytes = ring;
    return GW_OK;
}

void gw__shm_set_direct(gw_transport_t *base, int allow, size_t min_bytes)
{
    gw_shm_t *t = gw__shm_of(base);
    t->allow_direct = allow;
    t->direct_min = min_bytes;
}

/* Our address: pid, host, ring size, and whether we connect lazily. */
static void encode_ours(const gw_shm_t *t, uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    gw__shm_addr_encode((uint32_t)getpid(), t->host_id, t->ring_bytes, addr);
    if (t->lazy)
        gw__put_le32(addr + 12, GW_SHM_ADDR_LAZY);
}

gw_status_t gw__shm_set_ring(gw_transport_t *base, size_t bytes,
                             uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    gw_shm_t *t = gw__shm_of(base);
    if (bytes < GW_SHM_RING_MIN || bytes > GW_SHM_RING_MAX || (bytes & (bytes - 1)) != 0)
        return GW_ERR_INVALID_ARG;
    t->ring_bytes = bytes;
    encode_ours(t, addr);
    return GW_OK;
}

static void shm_free(gw_shm_t *t)
{
    if (t->peers) {
        gw__shm_unmap_all(t);
        for (int r = 0; r < t->base.size; r++)
            if (t->peers[r].pidfd >= 0)
                close(t->peers[r].pidfd);
    }
    gw__shm_door_close(t);
    free(t->peers);
    explicit_bzero(t->data_key, sizeof(t->data_key));
    free(t);
}

static gw_status_t shm_open_(const gw_transport_params_t *params, gw_transport_t **out,
                             uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    if (!params || !out || !addr)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    gw_transport_t *base = NULL;
    gw_status_t st = gw__transport_open_base(&shm_class, params, sizeof(gw_shm_t), &base);
    if (st != GW_OK)
        return st;
    gw_shm_t *t = gw__shm_of(base);
    t->door_fd = -1;
    t->timeout_ms = params->timeout_ms > 0 ? params->timeout_ms : GW_SHM_DEFAULT_TIMEOUT_MS;
    memcpy(t->job_id, params->job_id, sizeof(t->job_id));
    memcpy(t->data_key, params->data_key, sizeof(t->data_key));
    t->ring_bytes = GW_SHM_RING_DEFAULT;
    t->direct_min = GW_SHM_DIRECT_DEFAULT;
    t->allow_direct = 1;
    t->probe = GW_SHM_PROBE_MAGIC;
    t->lazy = params->lazy != 0;
    t->spin_ns = GW_SHM_SPIN_NS;
    t->yield_ns = GW_SHM_YIELD_NS;
    long spin_us, yield_us, direct_min;
    if (gw__env_int(lg, GW_ENV_SHM_SPIN_US, &spin_us) != GW_OK ||
        gw__env_int(lg, GW_ENV_SHM_YIELD_US, &yield_us) != GW_OK ||
        gw__env_int(lg, GW_ENV_SHM_DIRECT_MIN, &direct_min) != GW_OK) {
        free(t);
        return GW_ERR_CONFIG;
    }
    t->spin_ns = spin_us * 1000;
    t->yield_ns = yield_us * 1000;
    t->direct_min = (size_t)direct_min;
    t->peers = calloc((size_t)params->size, sizeof(*t->peers));
    if (!t->peers) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "out of memory for %d peers", params->size);
        free(t);
        return GW_ERR_NO_MEMORY;
    }
    for (int r = 0; r < params->size; r++) {
        t->peers[r].rank = r;
        t->peers[r].pidfd = -1;
        t->peers[r].fd = -1;
    }
    st = gw__host_id(lg, &t->host_id);
    if (st != GW_OK) {
        shm_free(t);
        return st;
    }
    /* The door exists before our address leaves, so that no peer can
     * knock, or hand us a segment, before it is there (shm_door.c). */
    if ((st = gw__shm_door_open(t)) != GW_OK) {
        shm_free(t);
        return st;
    }
    encode_ours(t, addr);
    GW_TRACE(lg, GW_SHM_SUBSYS, "open: pid %ld, host id %016llx, rings of %zu bytes, %s",
             (long)getpid(), (unsigned long long)t->host_id, t->ring_bytes,
             t->lazy ? "pairs connected on first use" : "every pair connected at connect()");
    *out = &t->base;
    return GW_OK;
}

static gw_status_t shm_post(gw_transport_t *base, gw_request_t *req)
{
    gw_shm_t *t = gw__shm_of(base);
    gw_shm_peer_t *p = &t->peers[req->peer];
    if (!p->served) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                 "%s: rank %d is not connected through shared memory (internal error)",
                 req->kind == GW_REQ_SEND ? "isend" : "irecv", req->peer);
        return GW_ERR_INVALID_ARG;
    }
    if (req->kind == GW_REQ_SEND)
        gw__req_queue_push(&p->sq_head, &p->sq_tail, req);
    else
        gw__req_queue_push(&p->rq_head, &p->rq_tail, req);
    if (p->goodbye)
        return gw__transport_post_refused(base, req, "already closed its communicator");
    if (p->conn == GW_SHM_C_IDLE) {
        /* The pair's first request: connect it (shm_connect.c); the
         * request waits in its queue until the pair is up. */
        gw_status_t st = gw__shm_start_connect(t, p);
        if (st != GW_OK)
            return gw__shm_connect_failed(t, p, st);
    }
    if (req->kind == GW_REQ_SEND && p->sq_head == req && p->conn == GW_SHM_C_DONE &&
        req->len <= GW_SHM_POST_COPY)
        gw__shm_send_now(t, p);
    return GW_OK;
}

/* Raise a flag in our half of every segment (goodbye, or the abort `why`),
 * and wake peers that sleep. */
static int tell_peers(gw_shm_t *t, const gw_abort_info_t *why)
{
    int told = 0;
    for (int r = 0; r < t->base.size; r++) {
        gw_shm_peer_t *p = &t->peers[r];
        if (!p->my) /* not mapped, or its header not checked yet */
            continue;
        told++;
        if (!why)
            atomic_store_explicit(&p->my->goodbye, 1, memory_order_release);
        else
            gw__shm_tell_abort(p, why);
        gw__shm_ring_bell(p);
    }
    return told;
}

static gw_status_t shm_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw_shm_t *t = gw__shm_of(base);
    gw_abort_info_t tell = gw__transport_abort_begin(base, why);
    int told = tell_peers(t, &tell);
    GW_INFO(t->base.log, GW_SHM_SUBSYS,
            "aborting (%s, blaming rank %d, first reported by rank %d): told %d peers",
            gw_status_str(tell.status), tell.culprit, tell.origin, told);
    return GW_OK;
}

static void shm_close(gw_transport_t *base)
{
    if (!base)
        return;
    gw_shm_t *t = gw__shm_of(base);
    /* Requests still queued are not completed: the caller is tearing down
     * and may have released them already. Data we wrote stays readable in
     * the peer's mapping after we unmap ours. */
    int told = tell_peers(t, NULL);
    GW_TRACE(t->base.log, GW_SHM_SUBSYS, "closing: said goodbye to %d peers", told);
    if (t->strangers > 0)
        GW_INFO(t->base.log, GW_SHM_SUBSYS, "%u knocks on our door did not count (strangers)",
                t->strangers);
    shm_free(t);
}

/* The record read ahead (r_held) is the next message's when no receive
 * for the peer is unfinished. */
static int shm_peek(gw_transport_t *base, int peer, gw_msg_tag_t *tag, size_t *len)
{
    gw_shm_t *t = gw__shm_of(base);
    if (peer < 0 || peer >= base->size || peer == base->rank)
        return -1;
    const gw_shm_peer_t *p = &t->peers[peer];
    if (p->rq_head || !p->r_held)
        return 0;
    *tag = (gw_msg_tag_t){.seq = p->r_hdr.seq, .sig = p->r_hdr.sig, .comm_id = p->r_hdr.comm_id};
    *len = (size_t)p->r_hdr.len;
    return 1;
}

const gw_transport_ops_t gw__shm_transport_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = shm_open_,
    .connect = gw__shm_connect,
    .isend = gw__transport_isend,
    .irecv = gw__transport_irecv,
    .progress = gw__transport_progress,
    .mem_reg = gw__transport_mem_reg_unsupported,
    .mem_dereg = gw__transport_mem_dereg_unsupported,
    .abort = shm_abort,
    .close = shm_close,
    .peek = shm_peek,
};

static const gw__transport_class_t shm_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "shm",
    .subsys = GW_SHM_SUBSYS,
    .ops = &gw__shm_transport_ops,
    .fail_pending = gw__shm_fail_pending,
    .describe_peer = gw__shm_describe_peer,
    .post = shm_post,
    .progress = gw__shm_progress,
};
