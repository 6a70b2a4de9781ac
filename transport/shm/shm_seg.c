/*
 * shm_seg.c - the handshake of one pair of ranks of the shared-memory
 * transport: its segment created, attached, checked and unlinked. When
 * pairs are connected (all at connect(), or each on first use) is
 * shm_connect.c's.
 *
 * For the pair (lo, hi), lo creates "/gw-<job id>-<lo>-<hi>" with O_EXCL
 * and unlinks the name at once, reserves every page of it (posix_fallocate:
 * on a full /dev/shm this is an error naming the size needed and the space
 * left, where a sparse segment would map fine and kill the rank with SIGBUS
 * on first touch), maps it, fills the header and hands the descriptor to hi
 * through hi's door, a Unix socket (SCM_RIGHTS; shm_door.c), whose name
 * only hi can hold while it lives. hi maps the descriptor it received and
 * checks the header (magic, version, job id, ranks, ring size). The name
 * exists only between two adjacent system calls, so a job killed at any
 * moment, all its ranks at once included, leaves nothing in /dev/shm: the
 * memory lives exactly as long as a descriptor or a mapping of it (a
 * segment still on its way in a socket goes with the socket). It stays in
 * /dev/shm rather than in a memfd so that the size an administrator gave
 * that tmpfs still bounds it.
 *
 * Each side maps the segment with MAP_POPULATE and then writes once to
 * every page of both rings (touch_rings), before the pair carries a
 * message: where a process's first access to a page is costly even with
 * the page tables filled (virtual machines), the set-up pays it once
 * instead of the first messages through the rings.
 *
 * Nobody but hi can receive the segment, but the proof stays: the creator
 * puts a fresh nonce in the header, the attacher writes its own nonce and
 * its HMAC under the job's data-plane key over the header, both nonces and
 * its pid before it says MAPPED, and the creator checks that proof
 * (constant-time) before it serves the peer; a wrong one (a process that
 * took the descriptor from hi, or a peer without the token) is GW_ERR_AUTH.
 * The creator answers with its own HMAC before it says READY, which the
 * attacher checks in turn, so neither side serves a peer that does not
 * know the token.
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
#include <sys/statvfs.h>
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

/* Write once to every page of both rings, in this process, before the pair
 * carries a message. MAP_POPULATE maps the pages in the kernel's page
 * tables, yet on the test machine (a paravirtualised guest) each process's
 * first access to each page still cost microseconds, below the guest: its
 * fault counters did not move. Rings are filled in order, so the first pass
 * of messages through them paid it, and short runs measured that: a 2-rank
 * allreduce over shared memory took 3.8 us at 1 KiB and 15.5 us at 2 KiB for
 * about the first 2,000 messages, 1.25 and 1.3 us with the rings touched
 * here (and 512 B 1.28 -> 1.00 us). Each write stores the byte's own value:
 * the creator's before it hands the segment over, the attacher's before it
 * says MAPPED, and neither side writes a ring before both are READY, so
 * nothing races. The cost moves to set-up, it does not grow: on the test
 * machine a page's first touch costs about 5 us after MAP_POPULATE (11 us
 * without it, and MADV_POPULATE_WRITE leaves the same 5 us), so 5 ms for a
 * pair's default rings and at most about 40 ms for all of a rank's rings,
 * which GW_SHM_RANK_RINGS bounds (32 ranks connected eagerly on 2 cores:
 * shm_scale's init 0.7 -> 1.4 s); where the page tables are all there is,
 * a page is one store. */
static void touch_rings(const gw_shm_peer_t *p)
{
    volatile uint8_t *rings = (volatile uint8_t *)p->seg + GW_SHM_HDR_BYTES;
    for (size_t off = 0; off < 2 * (size_t)p->ring_bytes; off += 4096)
        rings[off] = rings[off];
}

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

/* Why a reservation failed, in words a user can act on: the size asked for
 * and what /dev/shm has left (ENOSPC, the tmpfs is full) or the memory
 * left (ENOMEM: memory or the cgroup's limit). */
static void report_no_space(gw_shm_t *t, gw_shm_peer_t *p, int err)
{
    struct statvfs vf;
    unsigned long long left = 0, total = 0;
    if (statvfs(GW_SHM_DIR, &vf) == 0) {
        left = (unsigned long long)vf.f_bavail * vf.f_frsize;
        total = (unsigned long long)vf.f_blocks * vf.f_frsize;
    }
    errno = err;
    GW_ERROR(t->base.log, GW_SHM_SUBSYS,
             "reserving %zu bytes of shared memory for the pair with rank %d: %m; " GW_SHM_DIR
             " has %llu bytes left of %llu (every pair of ranks on this host that talks needs "
             "one such segment; this rank has %d peers here): give " GW_SHM_DIR
             " more room (mount -o remount,size=..., or docker run --shm-size), run fewer ranks "
             "per host, or use GW_TRANSPORT=tcp",
             p->seg_bytes, p->rank, left, total, t->npeers);
}

gw_status_t gw__shm_seg_create(gw_shm_t *t, gw_shm_peer_t *p)
{
    const gw_logger_t *lg = t->base.log;
    p->seg_bytes = seg_bytes_of(p->ring_bytes);
    char name[96];
    gw__shm_seg_name(t->job_id, t->base.rank, p->rank, name, sizeof(name));
    /* The name exists only between these two calls: the segment reaches the
     * peer as a descriptor through its door (shm_door.c), so nothing is
     * left in /dev/shm whenever the job is killed. It is made in /dev/shm
     * (not a memfd) so that the tmpfs size limit an administrator set there
     * still bounds it, and the mappings keep a name in /proc/PID/maps. */
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "creating shared memory %s for rank %d: %m", name, p->rank);
        return GW_ERR_SYSTEM;
    }
    if (shm_unlink(name) != 0)
        GW_WARN(lg, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", name);
    p->created = 1;
    gw_status_t st = GW_ERR_SYSTEM;
    /* Reserve every page now: a sparse segment on a full tmpfs would be
     * mapped fine and then kill the rank with SIGBUS at the first touch of
     * a page that cannot be had. */
    int err = posix_fallocate(fd, 0, (off_t)p->seg_bytes);
    if (err == ENOSPC || err == ENOMEM || err == EFBIG) {
        report_no_space(t, p, err);
        st = GW_ERR_NO_MEMORY;
        goto err_close;
    }
    if (err != 0) {
        errno = err;
        GW_ERROR(lg, GW_SHM_SUBSYS, "reserving %zu bytes of shared memory for rank %d: %m",
                 p->seg_bytes, p->rank);
        goto err_close;
    }
    /* MAP_POPULATE: the rings' pages are mapped now, not by a page fault
     * per 4 KiB on the first pass of messages through them (seen as 64 KiB
     * allreduces 3-8x slower in short benchmark runs); touch_rings does
     * what it leaves. */
    void *m = mmap(NULL, p->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (m == MAP_FAILED) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "mapping shared memory for rank %d (%zu bytes): %m", p->rank,
                 p->seg_bytes);
        st = errno == ENOMEM ? GW_ERR_NO_MEMORY : GW_ERR_SYSTEM;
        goto err_close;
    }
    p->seg = m;
    touch_rings(p);
    p->seg->magic = GW_SHM_SEG_MAGIC;
    p->seg->version = GW_SHM_PROTOCOL_VERSION;
    memcpy(p->seg->job_id, t->job_id, sizeof(t->job_id));
    p->seg->lo = (uint32_t)t->base.rank;
    p->seg->hi = (uint32_t)p->rank;
    p->seg->ring_bytes = p->ring_bytes;
    if ((st = fresh_nonce(lg, p->seg->nonce)) != GW_OK)
        goto err_unmap;
    bind_views(t, p);
    publish_mapped(t, p);
    atomic_store_explicit(&p->seg->init_done, 1, memory_order_release);
    p->fd = fd; /* until the knock that hands it to the peer went out */
    return GW_OK;
err_unmap:
    munmap(p->seg, p->seg_bytes);
    p->seg = NULL;
err_close:
    close(fd);
    return st;
}

/* hi's side: lo's segment came through our door (shm_door.c put its
 * descriptor in p->fd); until then there is nothing to do. Its size says
 * the rings' size, which lo chose (shm_connect.c, ring_for) and the header
 * repeats; check_header compares the two. */
static gw_status_t attach_seg(gw_shm_t *t, gw_shm_peer_t *p, gw_shm_conn_t *cs)
{
    const gw_logger_t *lg = t->base.log;
    if (p->fd < 0)
        return GW_OK; /* lo has not handed it over yet */
    struct stat sb;
    if (fstat(p->fd, &sb) != 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "fstat of rank %d's shared memory: %m", p->rank);
        return GW_ERR_SYSTEM;
    }
    uint64_t ring =
        sb.st_size > GW_SHM_HDR_BYTES ? ((uint64_t)sb.st_size - GW_SHM_HDR_BYTES) / 2 : 0;
    if (!S_ISREG(sb.st_mode) || ring < GW_SHM_RING_MIN || ring > p->ring_bytes ||
        (ring & (ring - 1)) != 0 || (size_t)sb.st_size != seg_bytes_of(ring)) {
        GW_ERROR(lg, GW_SHM_SUBSYS,
                 "rank %d's shared memory has %lld bytes: not a segment with rings of a power "
                 "of two of at most %llu bytes",
                 p->rank, (long long)sb.st_size, (unsigned long long)p->ring_bytes);
        return GW_ERR_PROTOCOL;
    }
    p->ring_bytes = ring;
    p->seg_bytes = seg_bytes_of(ring);
    void *m = mmap(NULL, p->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, p->fd, 0);
    if (m == MAP_FAILED) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "mapping rank %d's shared memory (%zu bytes): %m", p->rank,
                 p->seg_bytes);
        return errno == ENOMEM ? GW_ERR_NO_MEMORY : GW_ERR_SYSTEM;
    }
    p->seg = m;
    touch_rings(p);
    close(p->fd);
    p->fd = -1;
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
 * Only the process behind the peer's door received the segment, so this is
 * a process of our user that took it from the peer (ptrace) or a peer
 * without the token: never served. */
static gw_status_t wrong_attacher(gw_shm_t *t, gw_shm_peer_t *p)
{
    GW_ERROR(t->base.log, GW_SHM_SUBSYS,
             "pid %lu mapped the shared memory we made for rank %d (pid %ld) with a wrong proof: "
             "it does not know the job token",
             (unsigned long)p->its->pid, p->rank, (long)p->pid);
    return GW_ERR_AUTH;
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
            return wrong_attacher(t, p);
        seg_proof(t, p->seg, CREATOR, p->my->mac); /* before READY, which releases it */
    }
    if (p->its->pid != (uint32_t)p->pid) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                 "rank %d announced pid %ld but pid %lu mapped our shared memory", p->rank,
                 (long)p->pid, (unsigned long)p->its->pid);
        return GW_ERR_PROTOCOL;
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
    /* Our copies of the counters we alone write (and of the tail we read). */
    p->s_head = atomic_load_explicit(&p->out->head, memory_order_relaxed);
    p->s_tail = atomic_load_explicit(&p->out->tail, memory_order_acquire);
    p->r_tail = atomic_load_explicit(&p->in->tail, memory_order_relaxed);
    p->conn = GW_SHM_C_DONE;
    return GW_OK;
}
