/*
 * shm_seg.c - the handshake of one pair of ranks of the shared-memory
 * transport: its segment created, attached, checked and unlinked. When
 * pairs are connected (all at connect(), or each on first use) is
 * shm_connect.c's.
 *
 * For the pair (lo, hi), lo creates "/gw-<job id>-<lo>-<hi>" with O_EXCL
 * (so a segment of another job or a stale one is never taken for ours),
 * sizes it, maps it and fills the header; hi opens the name, waits until the
 * size is final (mapping a segment that is still being sized would give
 * SIGBUS), maps it, unlinks the name at once and checks the header (magic,
 * version, job id, ranks, ring size). From then on the name is gone and the
 * memory lives exactly as long as the two mappings: a crash of either rank
 * leaves nothing in /dev/shm. lo unlinks the name too, once hi has mapped it
 * or on any failure, in case hi never came.
 *
 * The name is no secret (the job id is in it), so a segment does not
 * admit whoever maps it: the creator puts a fresh nonce in the header, the
 * attacher writes its own nonce and its HMAC under the job's data-plane key
 * over the header, both nonces and its pid before it says MAPPED, and the
 * creator checks that proof (constant-time) before it serves the peer. A
 * wrong proof is a stranger that opened the name (the segment is 0600, so
 * it runs as our user): the creator logs it at WARN, drops that segment and
 * offers a fresh one under the same name, which the real rank, still
 * polling for the name, then attaches. The creator answers with its own
 * HMAC before it says READY, which the attacher checks in turn, so neither
 * side serves a peer that does not know the token.
 *
 * Each rank then publishes its pid and the address of a known word in its
 * half of the header (state MAPPED), opens a pidfd on the peer to notice
 * its death later, and tries to read that word from the peer's memory with
 * process_vm_readv. The result says whether this rank can read the peer's
 * large messages directly (can_read, state READY); the peer decides from it
 * whether to send DIRECT headers or stream through the ring. Both ranks
 * wait for each other's READY, so neither sends before the other decided.
 *
 * gw__shm_seg_step() never blocks: it advances the pair as far as the
 * other side allows now, so the caller can drive many pairs at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "transport/shm/shm_internal.h"

void gw__shm_seg_name(const uint8_t job_id[16], int lo, int hi, char *buf, size_t cap)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", job_id[i]);
    snprintf(buf, cap, "/gw-%s-%d-%d", hex, lo, hi);
}

static size_t seg_bytes_of(uint64_t ring_bytes) { return GW_SHM_HDR_BYTES + 2 * ring_bytes; }

/* Point the peer's shortcuts into its mapped segment. */
static void bind_views(gw_shm_t *t, gw_shm_peer_t *p)
{
    int lo_side = t->base.rank < p->rank;
    p->me = lo_side ? 0 : 1;
    p->them = 1 - p->me;
    p->my = &p->seg->side[p->me];
    p->its = &p->seg->side[p->them];
    p->out = &p->seg->dir[p->me]; /* dir[0] is lo -> hi */
    p->in = &p->seg->dir[p->them];
    uint8_t *rings = (uint8_t *)p->seg + GW_SHM_HDR_BYTES;
    p->out_ring = rings + (size_t)p->me * p->ring_bytes;
    p->in_ring = rings + (size_t)p->them * p->ring_bytes;
}

static void publish_mapped(gw_shm_t *t, gw_shm_peer_t *p)
{
    p->my->pid = (uint32_t)getpid();
    atomic_store_explicit(&p->my->cpu, -1, memory_order_relaxed);
    p->my->probe_addr = (uint64_t)(uintptr_t)&t->probe;
    atomic_store_explicit(&p->my->state, GW_SHM_SIDE_MAPPED, memory_order_release);
}

static const char ATTACHER[] = "gradwire shm: attacher";
static const char CREATOR[] = "gradwire shm: creator";

/* HMAC(data-plane key, label || job id || lo || hi || ring bytes || the
 * creator's nonce || the attacher's nonce and pid). */
static void seg_proof(const gw_shm_t *t, const gw_shm_seg_t *s, const char *label,
                      uint8_t mac[GW_SHA256_DIGEST_LEN])
{
    uint8_t fields[4 + 4 + 8 + 4];
    gw__put_be32(fields, s->lo);
    gw__put_be32(fields + 4, s->hi);
    gw__put_be64(fields + 8, s->ring_bytes);
    gw__put_be32(fields + 16, s->side[1].pid);
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, t->data_key, sizeof(t->data_key));
    gw__hmac_sha256_update(&h, label, strlen(label) + 1);
    gw__hmac_sha256_update(&h, s->job_id, sizeof(s->job_id));
    gw__hmac_sha256_update(&h, fields, sizeof(fields));
    gw__hmac_sha256_update(&h, s->nonce, sizeof(s->nonce));
    gw__hmac_sha256_update(&h, s->side[1].nonce, sizeof(s->side[1].nonce));
    gw__hmac_sha256_final(&h, mac);
}

static gw_status_t fresh_nonce(const gw_logger_t *lg, uint8_t out[16])
{
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(out + got, 16 - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            GW_ERROR(lg, GW_SHM_SUBSYS, "getrandom() for a segment nonce: %m");
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    return GW_OK;
}

gw_status_t gw__shm_seg_create(gw_shm_t *t, gw_shm_peer_t *p)
{
    const gw_logger_t *lg = t->base.log;
    p->seg_bytes = seg_bytes_of(p->ring_bytes);
    int fd = shm_open(p->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "creating shared memory %s for rank %d: %m", p->name, p->rank);
        return GW_ERR_SYSTEM;
    }
    p->created = 1;
    gw_status_t st = GW_ERR_SYSTEM;
    if (ftruncate(fd, (off_t)p->seg_bytes) != 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "sizing shared memory %s to %zu bytes: %m (is /dev/shm full?)",
                 p->name, p->seg_bytes);
        goto out_close;
    }
    /* MAP_POPULATE: the rings' pages are allocated and mapped now, not by
     * a page fault per 4 KiB on the first pass of messages through them
     * (seen as 64 KiB allreduces 3-8x slower in short benchmark runs). */
    void *m = mmap(NULL, p->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "mapping shared memory %s (%zu bytes): %m", p->name,
                 p->seg_bytes);
        goto out_close;
    }
    p->seg = m;
    p->seg->magic = GW_SHM_SEG_MAGIC;
    p->seg->version = GW_SHM_PROTOCOL_VERSION;
    memcpy(p->seg->job_id, t->job_id, sizeof(t->job_id));
    p->seg->lo = (uint32_t)t->base.rank;
    p->seg->hi = (uint32_t)p->rank;
    p->seg->ring_bytes = p->ring_bytes;
    if ((st = fresh_nonce(lg, p->seg->nonce)) != GW_OK)
        goto out_close;
    st = GW_ERR_SYSTEM;
    bind_views(t, p);
    publish_mapped(t, p);
    atomic_store_explicit(&p->seg->init_done, 1, memory_order_release);
    st = GW_OK;
out_close:
    close(fd);
    return st;
}

/* hi's side: one attempt; *progressed when the state advanced. */
static gw_status_t attach_seg(gw_shm_t *t, gw_shm_peer_t *p, gw_shm_conn_t *cs)
{
    const gw_logger_t *lg = t->base.log;
    if (p->fd < 0) {
        p->fd = shm_open(p->name, O_RDWR | O_CLOEXEC, 0);
        if (p->fd < 0) {
            if (errno == ENOENT)
                return GW_OK; /* lo has not created it yet */
            GW_ERROR(lg, GW_SHM_SUBSYS, "opening rank %d's shared memory %s: %m", p->rank, p->name);
            return GW_ERR_SYSTEM;
        }
    }
    struct stat sb;
    if (fstat(p->fd, &sb) != 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "fstat of rank %d's shared memory %s: %m", p->rank, p->name);
        return GW_ERR_SYSTEM;
    }
    p->seg_bytes = seg_bytes_of(p->ring_bytes);
    if ((size_t)sb.st_size < p->seg_bytes)
        return GW_OK; /* lo is still sizing it */
    if ((size_t)sb.st_size != p->seg_bytes) {
        GW_ERROR(lg, GW_SHM_SUBSYS,
                 "rank %d's shared memory %s has %lld bytes, expected %zu: is another job using "
                 "the same name?",
                 p->rank, p->name, (long long)sb.st_size, p->seg_bytes);
        return GW_ERR_PROTOCOL;
    }
    void *m = mmap(NULL, p->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, p->fd, 0);
    if (m == MAP_FAILED) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "mapping rank %d's shared memory %s (%zu bytes): %m", p->rank,
                 p->name, p->seg_bytes);
        return GW_ERR_SYSTEM;
    }
    p->seg = m;
    close(p->fd);
    p->fd = -1;
    /* Both mappings exist (lo mapped before sizing finished): the name has
     * served its purpose. */
    if (shm_unlink(p->name) != 0 && errno != ENOENT)
        GW_WARN(lg, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", p->name);
    p->name[0] = '\0';
    *cs = GW_SHM_C_INIT;
    return GW_OK;
}

static gw_status_t check_header(gw_shm_t *t, gw_shm_peer_t *p, gw_shm_conn_t *cs)
{
    if (!atomic_load_explicit(&p->seg->init_done, memory_order_acquire))
        return GW_OK;
    const gw_shm_seg_t *s = p->seg;
    if (s->magic != GW_SHM_SEG_MAGIC || s->version != GW_SHM_PROTOCOL_VERSION ||
        memcmp(s->job_id, t->job_id, sizeof(t->job_id)) != 0 || s->lo != (uint32_t)p->rank ||
        s->hi != (uint32_t)t->base.rank || s->ring_bytes != p->ring_bytes) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                 "rank %d's shared memory is not what it announced (magic 0x%08x, version %u, "
                 "ranks %u-%u, ring %llu bytes): is another job using the same name?",
                 p->rank, (unsigned)s->magic, (unsigned)s->version, (unsigned)s->lo,
                 (unsigned)s->hi, (unsigned long long)s->ring_bytes);
        return GW_ERR_PROTOCOL;
    }
    bind_views(t, p);
    gw_status_t st = fresh_nonce(t->base.log, p->my->nonce);
    if (st != GW_OK)
        return st;
    p->my->pid = (uint32_t)getpid(); /* publish_mapped writes it again */
    seg_proof(t, p->seg, ATTACHER, p->my->mac);
    publish_mapped(t, p);
    *cs = GW_SHM_C_WAIT_MAPPED;
    return GW_OK;
}

/* The creator's side: whoever mapped our segment did not prove the key.
 * Drop the segment and offer a fresh one under the same name: the real
 * rank, which polls for the name until it finds it, attaches that. */
static gw_status_t offer_again(gw_shm_t *t, gw_shm_peer_t *p)
{
    GW_WARN(t->base.log, GW_SHM_SUBSYS,
            "pid %lu attached the shared memory %s for rank %d (pid %ld) with a wrong proof (it "
            "does not know the job token): dropping that segment and offering a fresh one "
            "(carrying on)",
            (unsigned long)p->its->pid, p->name[0] ? p->name : "(unlinked)", p->rank, (long)p->pid);
    munmap(p->seg, p->seg_bytes);
    p->seg = NULL;
    p->my = p->its = NULL;
    p->out = p->in = NULL;
    p->out_ring = p->in_ring = NULL;
    int lo = t->base.rank, hi = p->rank;
    gw__shm_seg_name(t->job_id, lo, hi, p->name, sizeof(p->name));
    if (shm_unlink(p->name) != 0 && errno != ENOENT)
        GW_WARN(t->base.log, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", p->name);
    p->created = 0;
    return gw__shm_seg_create(t, p);
}

/* Try a single-copy read of the peer's probe word. A refusal is kept in
 * refused_errno and reported by shm_connect.c. */
static int probe_direct(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (!t->allow_direct)
        return 0;
    uint64_t v = 0;
    struct iovec local = {&v, sizeof(v)};
    struct iovec remote = {(void *)(uintptr_t)p->its->probe_addr, sizeof(v)};
    ssize_t n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
    if (n == (ssize_t)sizeof(v) && v == GW_SHM_PROBE_MAGIC)
        return 1;
    if (n < 0 && errno == ESRCH)
        return 0; /* it is gone: the connect loop reports that */
    if (n < 0)
        p->refused_errno = errno;
    else
        GW_WARN(t->base.log, GW_SHM_SUBSYS,
                "single-copy probe of rank %d (pid %ld) read 0x%016llx, not the probe word: "
                "its large messages go through the ring",
                p->rank, (long)p->pid, (unsigned long long)v);
    return 0;
}

static gw_status_t step(gw_shm_t *t, gw_shm_peer_t *p, gw_shm_conn_t *cs)
{
    gw_status_t st = GW_OK;
    if (*cs == GW_SHM_C_ATTACH)
        st = attach_seg(t, p, cs);
    if (st == GW_OK && *cs == GW_SHM_C_INIT)
        st = check_header(t, p, cs);
    if (st != GW_OK || *cs != GW_SHM_C_WAIT_MAPPED)
        return st;
    if (atomic_load_explicit(&p->its->state, memory_order_acquire) < GW_SHM_SIDE_MAPPED)
        return GW_OK;
    if (p->created) {
        uint8_t mac[GW_SHA256_DIGEST_LEN];
        seg_proof(t, p->seg, ATTACHER, mac);
        if (!gw__ct_equal(mac, p->its->mac, sizeof(mac)))
            return offer_again(t, p);
        seg_proof(t, p->seg, CREATOR, p->my->mac); /* before READY, which releases it */
    }
    if (p->its->pid != (uint32_t)p->pid) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                 "rank %d announced pid %ld but pid %lu mapped our shared memory", p->rank,
                 (long)p->pid, (unsigned long)p->its->pid);
        return GW_ERR_PROTOCOL;
    }
    if (p->created && p->name[0]) {
        if (shm_unlink(p->name) != 0 && errno != ENOENT)
            GW_WARN(t->base.log, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", p->name);
        p->name[0] = '\0';
    }
    atomic_store_explicit(&p->my->can_read, (uint32_t)probe_direct(t, p), memory_order_relaxed);
    atomic_store_explicit(&p->my->state, GW_SHM_SIDE_READY, memory_order_release);
    *cs = GW_SHM_C_WAIT_READY;
    return GW_OK;
}

/* The attacher's side, once the creator said READY: its proof must be
 * right before we serve it. Nobody else can be the creator of the segment
 * we mapped, so a wrong one is fatal. */
static gw_status_t check_creator(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (p->created)
        return GW_OK;
    uint8_t mac[GW_SHA256_DIGEST_LEN];
    seg_proof(t, p->seg, CREATOR, mac);
    if (gw__ct_equal(mac, p->its->mac, sizeof(mac)))
        return GW_OK;
    GW_ERROR(t->base.log, GW_SHM_SUBSYS,
             "the shared memory of rank %d (pid %ld) was made by a process that does not know the "
             "job token (wrong proof)",
             p->rank, (long)p->pid);
    return GW_ERR_AUTH;
}

gw_status_t gw__shm_seg_step(gw_shm_t *t, gw_shm_peer_t *p)
{
    gw_status_t st = step(t, p, &p->conn);
    if (st != GW_OK || p->conn != GW_SHM_C_WAIT_READY ||
        atomic_load_explicit(&p->its->state, memory_order_acquire) != GW_SHM_SIDE_READY)
        return st;
    if ((st = check_creator(t, p)) != GW_OK)
        return st;
    p->direct_ok =
        atomic_load_explicit(&p->its->can_read, memory_order_relaxed) && t->direct_min > 0;
    p->conn = GW_SHM_C_DONE;
    return GW_OK;
}
