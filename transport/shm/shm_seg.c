/*
 * shm_seg.c - connect() of the shared-memory transport: one segment per
 * pair of ranks, created, attached, checked and unlinked.
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
 * Everything runs in one loop over all peers under one deadline, without
 * blocking on any single peer; a peer whose process is gone, or that never
 * shows up before the timeout, is named in the error.
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

typedef enum conn_state {
    C_ATTACH,      /* hi: waiting for lo's segment to appear and be sized */
    C_INIT,        /* hi: mapped, waiting for lo to fill the header */
    C_WAIT_MAPPED, /* waiting for the peer to publish its pid */
    C_WAIT_READY,  /* probed the peer; waiting for its probe result */
    C_DONE,
} conn_state_t;

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

static gw_status_t create_seg(gw_shm_t *t, gw_shm_peer_t *p)
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
static gw_status_t attach_seg(gw_shm_t *t, gw_shm_peer_t *p, conn_state_t *cs)
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
    *cs = C_INIT;
    return GW_OK;
}

static gw_status_t check_header(gw_shm_t *t, gw_shm_peer_t *p, conn_state_t *cs)
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
    *cs = C_WAIT_MAPPED;
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
    return create_seg(t, p);
}

/* Try a single-copy read of the peer's probe word. A refusal is kept in
 * refused_errno and reported once for all peers after connect()
 * (report_refused). */
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

/* One WARN line for every peer whose memory the kernel would not let us
 * read: which ranks, the error, and what commonly causes it here. */
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
    char scope[32] = "";
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    int v = -1;
    if (f) {
        if (fscanf(f, "%d", &v) == 1)
            snprintf(scope, sizeof(scope), "Yama ptrace_scope is %d; ", v);
        fclose(f);
    }
    errno = err;
    GW_WARN(t->base.log, GW_SHM_SUBSYS,
            "the kernel refuses cross-memory attach to %d of %d peers (ranks %s; "
            "process_vm_readv: %m): %sit needs ptrace access to the peer (same user, the peer "
            "dumpable, Yama ptrace_scope 0 or CAP_SYS_PTRACE, not denied by seccomp or a "
            "container); their large messages go through the rings instead (two copies, "
            "slower, results unchanged)",
            count, t->npeers, ranks, scope);
}

static gw_status_t step(gw_shm_t *t, gw_shm_peer_t *p, conn_state_t *cs)
{
    gw_status_t st = GW_OK;
    if (*cs == C_ATTACH)
        st = attach_seg(t, p, cs);
    if (st == GW_OK && *cs == C_INIT)
        st = check_header(t, p, cs);
    if (st != GW_OK || *cs != C_WAIT_MAPPED)
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
    *cs = C_WAIT_READY;
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

static gw_status_t report_timeout(gw_shm_t *t, const conn_state_t *cs)
{
    char msg[1024];
    size_t n = 0;
    msg[0] = '\0';
    for (int r = 0; r < t->base.size; r++) {
        if (!t->peers[r].served || cs[r] == C_DONE)
            continue;
        const char *why = cs[r] == C_ATTACH        ? "its shared memory never appeared"
                          : cs[r] == C_INIT        ? "it never initialised its shared memory"
                          : cs[r] == C_WAIT_MAPPED ? "it never mapped our shared memory"
                                                   : "it never finished the handshake";
        int w = snprintf(msg + n, sizeof(msg) - n, "%srank %d (pid %ld): %s", n ? "; " : "", r,
                         (long)t->peers[r].pid, why);
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
        p->served = 1;
        p->pid = (pid_t)pid;
        /* The creator (lo) sizes the rings. */
        p->ring_bytes = r < t->base.rank ? ring : t->ring_bytes;
        int lo = r < t->base.rank ? r : t->base.rank, hi = r < t->base.rank ? t->base.rank : r;
        gw__shm_seg_name(t->job_id, lo, hi, p->name, sizeof(p->name));
        p->pidfd = (int)syscall(SYS_pidfd_open, p->pid, 0);
        if (p->pidfd < 0 && errno != ENOSYS && errno != ESRCH)
            GW_TRACE(t->base.log, GW_SHM_SUBSYS, "pidfd_open(%ld) for rank %d: %m", (long)p->pid,
                     r);
        t->npeers++;
    }
    return GW_OK;
}

gw_status_t gw__shm_connect(gw_transport_t *base, const uint8_t *all_addrs)
{
    gw_shm_t *t = gw__shm_of(base);
    if (!t || !all_addrs)
        return GW_ERR_INVALID_ARG;
    if (t->base.failed != GW_OK)
        return t->base.failed;
    if (t->base.connected || t->npeers > 0) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS, "connect() called twice");
        return GW_ERR_INVALID_ARG;
    }
    int size = t->base.size, rank = t->base.rank;
    int64_t start = gw__now_ms();
    conn_state_t *cs = calloc((size_t)size, sizeof(*cs));
    if (!cs) {
        GW_ERROR(t->base.log, GW_SHM_SUBSYS, "out of memory for %d peers", size);
        return gw__shm_fail(t, GW_ERR_NO_MEMORY, NULL);
    }
    gw_status_t st = read_addrs(t, all_addrs);
    for (int r = 0; st == GW_OK && r < size; r++) {
        gw_shm_peer_t *p = &t->peers[r];
        cs[r] = C_DONE;
        if (!p->served)
            continue;
        cs[r] = C_ATTACH;
        if (r > rank) {
            st = create_seg(t, p);
            cs[r] = C_WAIT_MAPPED;
        }
    }
    int64_t deadline = start + t->timeout_ms;
    while (st == GW_OK) {
        int pending = 0, moved = 0;
        for (int r = 0; r < size && st == GW_OK; r++) {
            gw_shm_peer_t *p = &t->peers[r];
            if (cs[r] == C_DONE)
                continue;
            conn_state_t before = cs[r];
            st = step(t, p, &cs[r]);
            if (st == GW_OK && cs[r] == C_WAIT_READY &&
                atomic_load_explicit(&p->its->state, memory_order_acquire) == GW_SHM_SIDE_READY &&
                (st = check_creator(t, p)) == GW_OK) {
                p->direct_ok = atomic_load_explicit(&p->its->can_read, memory_order_relaxed) &&
                               t->direct_min > 0;
                cs[r] = C_DONE;
            }
            moved |= cs[r] != before;
            pending += cs[r] != C_DONE;
            int32_t ab = p->its && cs[r] != C_DONE
                             ? atomic_load_explicit(&p->its->abort_status, memory_order_acquire)
                             : 0;
            if (st == GW_OK && ab != 0) {
                GW_ERROR(t->base.log, GW_SHM_SUBSYS, "rank %d (pid %ld) failed to connect: %s", r,
                         (long)p->pid, gw_status_str(gw__transport_abort_status(ab)));
                st = GW_ERR_REMOTE;
            }
            if (st == GW_OK && cs[r] != C_DONE && gw__shm_peer_gone(p)) {
                GW_ERROR(t->base.log, GW_SHM_SUBSYS,
                         "rank %d (pid %ld) exited before it connected through shared memory", r,
                         (long)p->pid);
                st = GW_ERR_REMOTE;
            }
        }
        if (st != GW_OK || pending == 0)
            break;
        if (gw__now_ms() >= deadline) {
            st = report_timeout(t, cs);
            break;
        }
        if (!moved)
            poll(NULL, 0, 1);
    }
    free(cs);
    if (st != GW_OK) {
        /* Peers that mapped a segment with us learn at once that we gave up. */
        gw_abort_info_t why = {.status = st, .origin = t->base.rank, .culprit = -1};
        for (int r = 0; r < size; r++)
            if (t->peers[r].my)
                gw__shm_tell_abort(&t->peers[r], &why);
        gw__shm_unmap_all(t);
        return gw__shm_fail(t, st, NULL);
    }
    t->base.connected = 1;
    report_refused(t);
    int direct = 0;
    for (int r = 0; r < size; r++)
        direct += t->peers[r].served && t->peers[r].direct_ok;
    GW_INFO(t->base.log, GW_SHM_SUBSYS,
            "connected to %d peers in %lld ms (rings of %zu bytes; %d of them read our large "
            "messages in place)",
            t->npeers, (long long)(gw__now_ms() - start), t->ring_bytes, direct);
    return GW_OK;
}

void gw__shm_unmap_all(gw_shm_t *t)
{
    for (int r = 0; r < t->base.size; r++) {
        gw_shm_peer_t *p = &t->peers[r];
        if (p->created && p->name[0]) {
            if (shm_unlink(p->name) != 0 && errno != ENOENT)
                GW_WARN(t->base.log, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", p->name);
        }
        p->name[0] = '\0';
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
