/*
 * shm_door.c - how a rank asks a peer on its host to connect, when pairs
 * are connected on first use (params.lazy, GW_CONNECT=lazy).
 *
 * A pair's segment is made by the lower rank and attached by the higher
 * one (shm_seg.c), and both must take part before a message moves. The
 * rank that first needs the pair starts its side; the other may need
 * nothing from us for a long time (it may be about to send to a third rank,
 * or never post the receive our message waits for), so it must be told.
 * Every rank therefore owns a door, a small segment
 * "/gw-<job id>-door-<rank>" made at open(), before the addresses are
 * exchanged, so that it exists by the time anyone can knock. To knock, a
 * rank maps the peer's door, checks that it is the peer's (magic, job id,
 * rank, the pid its address announced), sets its own bit, raises `any` and
 * rings the bell (a futex word the owner sleeps on with its peers' bells).
 * The owner looks at `any` once per progress round (one load of its own
 * memory), takes the bits and starts connecting those peers. A knock is
 * only a request: the connection that follows proves the job's data-plane
 * key both ways as at creation, so a stranger who knocks makes us offer a
 * segment that nobody else can use, and the job goes on.
 *
 * Both sides knock when they start, whoever started first, so a pair is
 * never half-asked. A door that is gone when we knock means its owner
 * closed or died: a message for it can never be delivered, so the pair
 * fails in the next progress round, naming it. The owner unlinks its door at close(); a rank that is
 * killed cannot, so a rank that finds a peer's process gone removes that
 * peer's door, and any pair segment of it that it never attached
 * (gw__shm_forget_names).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "transport/shm/shm_internal.h"

void gw__shm_door_name(const uint8_t job_id[16], int rank, char *buf, size_t cap)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", job_id[i]);
    snprintf(buf, cap, "/gw-%s-door-%d", hex, rank);
}

static size_t door_bytes_of(int size)
{
    size_t words = ((size_t)size + 63) / 64;
    size_t bytes = sizeof(gw_shm_door_t) + words * sizeof(uint64_t);
    return (bytes + 4095) & ~(size_t)4095;
}

gw_status_t gw__shm_door_open(gw_shm_t *t)
{
    const gw_logger_t *lg = t->base.log;
    gw__shm_door_name(t->job_id, t->base.rank, t->door_name, sizeof(t->door_name));
    t->door_bytes = door_bytes_of(t->base.size);
    int fd = shm_open(t->door_name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "creating shared memory %s (this rank's door): %m%s",
                 t->door_name, errno == EEXIST ? " (is another process using this job id?)" : "");
        t->door_name[0] = '\0';
        return GW_ERR_SYSTEM;
    }
    gw_status_t st = GW_ERR_SYSTEM;
    void *m = MAP_FAILED;
    if (ftruncate(fd, (off_t)t->door_bytes) != 0)
        GW_ERROR(lg, GW_SHM_SUBSYS, "sizing shared memory %s to %zu bytes: %m (is /dev/shm full?)",
                 t->door_name, t->door_bytes);
    else if ((m = mmap(NULL, t->door_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) ==
             MAP_FAILED)
        GW_ERROR(lg, GW_SHM_SUBSYS, "mapping shared memory %s: %m", t->door_name);
    close(fd);
    if (m == MAP_FAILED) {
        shm_unlink(t->door_name);
        t->door_name[0] = '\0';
        return st;
    }
    t->door = m;
    t->door->version = GW_SHM_PROTOCOL_VERSION;
    memcpy(t->door->job_id, t->job_id, sizeof(t->job_id));
    t->door->rank = (uint32_t)t->base.rank;
    t->door->size = (uint32_t)t->base.size;
    t->door->pid = (uint32_t)getpid();
    /* Last: a knocker that sees the magic sees the fields before it. */
    atomic_thread_fence(memory_order_release);
    t->door->magic = GW_SHM_DOOR_MAGIC;
    return GW_OK;
}

void gw__shm_door_close(gw_shm_t *t)
{
    if (t->door_name[0] && shm_unlink(t->door_name) != 0 && errno != ENOENT)
        GW_WARN(t->base.log, GW_SHM_SUBSYS, "unlinking shared memory %s: %m", t->door_name);
    t->door_name[0] = '\0';
    if (t->door)
        munmap(t->door, t->door_bytes);
    t->door = NULL;
}

gw_status_t gw__shm_door_gone(gw_shm_t *t, gw_shm_peer_t *p)
{
    if (gw__shm_peer_gone(p)) {
        gw__shm_forget_names(t, p);
        return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                                 "died before we connected to it: its process is gone");
    }
    return gw__shm_peer_fail(t, p, GW_ERR_REMOTE,
                             "already closed its communicator (its shared-memory door is gone), "
                             "but we need to connect to it");
}

gw_status_t gw__shm_knock(gw_shm_t *t, gw_shm_peer_t *p)
{
    const gw_logger_t *lg = t->base.log;
    char name[96];
    gw__shm_door_name(t->job_id, p->rank, name, sizeof(name));
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0 && errno == ENOENT) {
        /* Said by the next progress round (gw__shm_connect_step), not by
         * the post that knocked: a post succeeds, what it can never do
         * fails in progress, as for a peer whose goodbye we see later. */
        p->door_gone = 1;
        return GW_OK;
    }
    if (fd < 0) {
        GW_ERROR(lg, GW_SHM_SUBSYS, "opening rank %d's door %s: %m", p->rank, name);
        return gw__shm_fail(t, GW_ERR_SYSTEM, NULL);
    }
    size_t bytes = door_bytes_of(t->base.size);
    struct stat sb;
    gw_shm_door_t *d = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size == bytes)
        d = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (d == MAP_FAILED) {
        GW_ERROR(lg, GW_SHM_SUBSYS,
                 "rank %d's door %s is not %zu bytes or cannot be mapped: is another job using "
                 "the same name?",
                 p->rank, name, bytes);
        return gw__shm_fail(t, GW_ERR_PROTOCOL, NULL);
    }
    uint32_t magic = d->magic;
    atomic_thread_fence(memory_order_acquire);
    if (magic != GW_SHM_DOOR_MAGIC || d->version != GW_SHM_PROTOCOL_VERSION ||
        memcmp(d->job_id, t->job_id, sizeof(t->job_id)) != 0 || d->rank != (uint32_t)p->rank ||
        d->size != (uint32_t)t->base.size || d->pid != (uint32_t)p->pid) {
        GW_ERROR(lg, GW_SHM_SUBSYS,
                 "rank %d's door %s is not what its address announced (magic 0x%08x, rank %u of "
                 "%u, pid %u; expected pid %ld): is another job using the same name?",
                 p->rank, name, (unsigned)magic, (unsigned)d->rank, (unsigned)d->size,
                 (unsigned)d->pid, (long)p->pid);
        munmap(d, bytes);
        return gw__shm_fail(t, GW_ERR_PROTOCOL, NULL);
    }
    int me = t->base.rank;
    atomic_fetch_or_explicit(&d->bits[me / 64], (uint64_t)1 << (me % 64), memory_order_release);
    atomic_store_explicit(&d->any, 1, memory_order_release);
    atomic_fetch_add_explicit(&d->bell, 1, memory_order_release);
    syscall(SYS_futex, &d->bell, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    munmap(d, bytes);
    GW_TRACE(lg, GW_SHM_SUBSYS, "knocked on rank %d's door", p->rank);
    return GW_OK;
}

gw_status_t gw__shm_door_answer(gw_shm_t *t)
{
    gw_shm_door_t *d = t->door;
    if (!d || !atomic_load_explicit(&d->any, memory_order_relaxed))
        return GW_OK;
    atomic_store_explicit(&d->any, 0, memory_order_relaxed);
    atomic_thread_fence(memory_order_seq_cst); /* clear `any` before taking the bits */
    int words = (t->base.size + 63) / 64;
    for (int w = 0; w < words; w++) {
        uint64_t bits = atomic_exchange_explicit(&d->bits[w], 0, memory_order_acquire);
        while (bits) {
            int r = w * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (r >= t->base.size || r == t->base.rank || !t->peers[r].served) {
                GW_WARN(t->base.log, GW_SHM_SUBSYS,
                        "a knock on our door claims to come from rank %d, %s: ignored (carrying "
                        "on)",
                        r,
                        r == t->base.rank   ? "which is this rank"
                        : r >= t->base.size ? "which is not in the job"
                                            : "which does not reach us through shared memory");
                continue;
            }
            gw_shm_peer_t *p = &t->peers[r];
            if (p->conn != GW_SHM_C_IDLE)
                continue; /* already connecting or connected */
            GW_TRACE(t->base.log, GW_SHM_SUBSYS, "rank %d knocked: connecting", r);
            gw_status_t st = gw__shm_start_connect(t, p);
            if (st != GW_OK)
                return gw__shm_connect_failed(t, p, st);
        }
    }
    t->moved++;
    return GW_OK;
}

void gw__shm_forget_names(gw_shm_t *t, gw_shm_peer_t *p)
{
    char name[96];
    gw__shm_door_name(t->job_id, p->rank, name, sizeof(name));
    shm_unlink(name);
    if (p->name[0] && shm_unlink(p->name) == 0)
        GW_TRACE(t->base.log, GW_SHM_SUBSYS, "removed %s, left by rank %d", p->name, p->rank);
    p->name[0] = '\0';
}
