/*
 * api_more.c - the public calls of the collectives that move blocks
 * without reducing them: alltoall, alltoallv, gather, scatter and
 * allgatherv, blocking and non-blocking. They validate their arguments,
 * stamp the call's tag, run their algorithm (one file each under
 * collectives/) and go through the same scheduler as api.c's calls
 * (gw__async_run, gw__async_start), so they keep their place in call order
 * with every other collective of the communicator.
 *
 * Mismatches, collective by collective (the rules of api.c's top comment:
 * tags catch a disagreement where a message crosses it; a call must make
 * sure that every rank's result depends on a checked message from every
 * rank, or agree first):
 *  - alltoall: kind, count, dtype in the signature. Every rank receives
 *    from every other directly, so a rank that disagrees is caught by
 *    each of them.
 *  - gather, scatter: kind, count, dtype, root in the signature; the leaves
 *    hear only from the root (or nobody), so the dissemination barrier runs
 *    first under the call's tag (agree first), as for broadcast and reduce.
 *  - allgatherv: every rank must pass the same recvcounts; the signature's
 *    count word is a digest of them, and the ring's chain of checked
 *    receives (allgather's argument) makes every rank fail together. A
 *    rank whose sendcount is not its own recvcounts[rank] disagrees with
 *    itself: GW_ERR_MISMATCH, passed on to the peers.
 *  - alltoallv: counts differ by rank legitimately; what must agree is
 *    each pair's: rank a's sendcounts[b] is rank b's recvcounts[a]. The
 *    transports match every message by tag and exact length, so a pair
 *    that disagrees fails at the receiver with GW_ERR_MISMATCH; but the
 *    other ranks need not hear from that receiver, so the call ends with a
 *    dissemination barrier (agree last): nobody passes it while one rank
 *    failed, and the failure's abort reaches them with its status. A
 *    rank whose own block disagrees (sendcounts[rank] != recvcounts[rank])
 *    fails likewise. The dtype is in the signature.
 * An invalid argument on one rank fails the communicator and tells the
 * peers, as in api.c.
 *
 * In place (pointer equality, as gw_allgather's): alltoall and alltoallv
 * with sendbuf == recvbuf (alltoallv then sends what recvcounts and
 * rdispls describe; sendcounts and sdispls are ignored), gather at the root
 * with sendbuf at the root's block of recvbuf, scatter at the root with
 * recvbuf at the root's block of sendbuf, allgatherv with sendbuf at
 * recvbuf + displs[rank]. alltoall(v) in place goes through the
 * communicator's scratch memory (a copy of what is sent).
 */
#include <stdint.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/coll.h"
#include "collectives/comm/flight_recorder.h"

static const char *name_of(gw_coll_kind_t kind)
{
    switch (kind) {
    case GW_COLL_ALLTOALL:
        return "gw_alltoall";
    case GW_COLL_ALLTOALLV:
        return "gw_alltoallv";
    case GW_COLL_GATHER:
        return "gw_gather";
    case GW_COLL_SCATTER:
        return "gw_scatter";
    default:
        return "gw_allgatherv";
    }
}

/* Elements to bytes, refusing what would overflow the address space. */
static int bytes_of(size_t elems, size_t esize, size_t *out)
{
    return !__builtin_mul_overflow(elems, esize, out) && *out <= (size_t)PTRDIFF_MAX;
}

/* Per-rank counts and displacements: present, and no block's end
 * overflowing; *extent receives the largest end in bytes. */
static gw_status_t check_blocks(gw_comm_t *comm, const char *fn, const char *which,
                                const size_t *counts, const size_t *displs, size_t esize,
                                size_t *extent)
{
    if (!counts || !displs) {
        GW_ERROR(&comm->log, "api", "%s: %s counts or displacements are NULL", fn, which);
        return GW_ERR_INVALID_ARG;
    }
    *extent = 0;
    for (int j = 0; j < comm->size; j++) {
        size_t end, bytes;
        if (__builtin_add_overflow(counts[j], displs[j], &end) || !bytes_of(end, esize, &bytes)) {
            GW_ERROR(&comm->log, "api",
                     "%s: %s block %d (%zu elements at %zu) overflows the address space", fn, which,
                     j, counts[j], displs[j]);
            return GW_ERR_OVERFLOW;
        }
        if (counts[j] > 0 && bytes > *extent)
            *extent = bytes;
    }
    return GW_OK;
}

static gw_status_t need_buf(gw_comm_t *comm, const char *fn, const char *which, const void *buf,
                            size_t bytes)
{
    if (bytes > 0 && !buf) {
        GW_ERROR(&comm->log, "api", "%s: %s buffer is NULL with %zu bytes to move", fn, which,
                 bytes);
        return GW_ERR_INVALID_ARG;
    }
    return GW_OK;
}

/* Everything a rank can check alone. *sent receives the bytes this rank
 * reads from sendbuf's extent (what an in-place alltoall(v) copies). */
static gw_status_t validate(gw_comm_t *comm, const gw_coll_args_t *a, size_t *sent)
{
    const char *fn = name_of(a->kind);
    const size_t esize = gw_dtype_size(a->dtype);
    const int n = comm->size, is_root = comm->rank == a->root;
    if (esize == 0) {
        GW_ERROR(&comm->log, "api", "%s: unknown dtype %d", fn, (int)a->dtype);
        return GW_ERR_INVALID_ARG;
    }
    size_t block = 0, all = 0, ext = 0;
    gw_status_t st = GW_OK;
    switch (a->kind) {
    case GW_COLL_ALLTOALLV:
    case GW_COLL_ALLGATHERV:
        break;
    default:
        if (a->count > SIZE_MAX / (size_t)n || !bytes_of(a->count, esize, &block) ||
            !bytes_of(a->count * (size_t)n, esize, &all)) {
            GW_ERROR(&comm->log, "api", "%s: %zu x %d elements of %s overflow the address space",
                     fn, a->count, n, gw_dtype_name(a->dtype));
            return GW_ERR_OVERFLOW;
        }
    }
    if ((a->kind == GW_COLL_GATHER || a->kind == GW_COLL_SCATTER) &&
        (a->root < 0 || a->root >= n)) {
        GW_ERROR(&comm->log, "api", "%s: root %d out of range [0, %d)", fn, a->root, n);
        return GW_ERR_INVALID_ARG;
    }
    *sent = 0;
    switch (a->kind) {
    case GW_COLL_ALLTOALL:
        *sent = all;
        if ((st = need_buf(comm, fn, "send", a->sendbuf, all)) == GW_OK)
            st = need_buf(comm, fn, "receive", a->recvbuf, all);
        if (st == GW_OK)
            st = gw__check_overlap(comm, fn, a->sendbuf, all, a->recvbuf, all, a->recvbuf);
        return st;
    case GW_COLL_GATHER:
        if ((st = need_buf(comm, fn, "send", a->sendbuf, block)) == GW_OK && is_root)
            st = need_buf(comm, fn, "receive", a->recvbuf, all);
        /* In place on root: sendbuf == recvbuf + root's block. */
        if (st == GW_OK && is_root)
            st = gw__check_overlap(
                comm, fn, a->sendbuf, block, a->recvbuf, all,
                (const void *)((uintptr_t)a->recvbuf + (uintptr_t)a->root * block));
        return st;
    case GW_COLL_SCATTER:
        if ((st = need_buf(comm, fn, "receive", a->recvbuf, block)) == GW_OK && is_root)
            st = need_buf(comm, fn, "send", a->sendbuf, all);
        /* In place on root: recvbuf == sendbuf + root's block. */
        if (st == GW_OK && is_root)
            st = gw__check_overlap(
                comm, fn, a->sendbuf, all, a->recvbuf, block,
                (const void *)((uintptr_t)a->recvbuf - (uintptr_t)a->root * block));
        return st;
    case GW_COLL_ALLTOALLV: {
        int in_place = a->sendbuf == a->recvbuf;
        const size_t *sc = in_place ? a->recvcounts : a->sendcounts;
        const size_t *sd = in_place ? a->rdispls : a->sdispls;
        if ((st = check_blocks(comm, fn, "receive", a->recvcounts, a->rdispls, esize, &ext)) !=
                GW_OK ||
            (st = need_buf(comm, fn, "receive", a->recvbuf, ext)) != GW_OK)
            return st;
        if ((st = check_blocks(comm, fn, "send", sc, sd, esize, sent)) != GW_OK ||
            (st = need_buf(comm, fn, "send", a->sendbuf, *sent)) != GW_OK)
            return st;
        if (sc[comm->rank] != a->recvcounts[comm->rank]) {
            GW_ERROR(&comm->log, "api",
                     "%s: rank %d sends itself %zu elements (sendcounts[%d]) but expects %zu "
                     "(recvcounts[%d])",
                     fn, comm->rank, sc[comm->rank], comm->rank, a->recvcounts[comm->rank],
                     comm->rank);
            return GW_ERR_MISMATCH;
        }
        /* The extents from each buffer's start to its last block's end. */
        return gw__check_overlap(comm, fn, a->sendbuf, *sent, a->recvbuf, ext, a->recvbuf);
    }
    default: /* GW_COLL_ALLGATHERV */
        if ((st = check_blocks(comm, fn, "receive", a->recvcounts, a->rdispls, esize, &ext)) !=
                GW_OK ||
            (st = need_buf(comm, fn, "receive", a->recvbuf, ext)) != GW_OK ||
            (st = need_buf(comm, fn, "send", a->sendbuf, a->count * esize)) != GW_OK)
            return st;
        if (a->count != a->recvcounts[comm->rank]) {
            GW_ERROR(&comm->log, "api",
                     "%s: rank %d sends %zu elements but recvcounts[%d] says %zu", fn, comm->rank,
                     a->count, comm->rank, a->recvcounts[comm->rank]);
            return GW_ERR_MISMATCH;
        }
        return gw__check_overlap(
            comm, fn, a->sendbuf, a->count * esize, a->recvbuf, ext,
            (const void *)((uintptr_t)a->recvbuf + (uintptr_t)(a->rdispls[comm->rank] * esize)));
    }
}

/* The count word of allgatherv's signature: FNV-1a over the counts, so
 * ranks that pass other counts stamp other tags. */
static size_t counts_digest(const size_t *counts, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int j = 0; j < n; j++) {
        uint64_t v = counts[j];
        for (int i = 0; i < 8; i++, v >>= 8) {
            h ^= v & 0xff;
            h *= 1099511628211ull;
        }
    }
    return (size_t)h;
}

/* The algorithm of a validated call, under its tag, on two ranks or more. */
static gw_status_t run_more(gw_comm_t *comm, const gw_coll_args_t *a, size_t sent)
{
    const int n = comm->size;
    gw_status_t st;
    switch (a->kind) {
    case GW_COLL_ALLTOALL:
    case GW_COLL_ALLTOALLV: {
        gw__blocks_t rb = {a->recvcounts, a->rdispls, a->count},
                     sb = {a->sendcounts, a->sdispls, a->count};
        const void *from = a->sendbuf;
        if (a->sendbuf == a->recvbuf) { /* in place: send a copy */
            char *copy = NULL;
            if ((st = gw__coll_scratch(comm, sent, &copy)) != GW_OK)
                return st;
            if (sent > 0)
                memcpy(copy, a->recvbuf, sent);
            from = copy;
            sb = rb;
        }
        gw__coll_begin(comm, a->kind, a->kind == GW_COLL_ALLTOALL ? a->count : 0, a->dtype, GW_SUM,
                       0, GW_ALGO_AUTO);
        gw__fr_begin(comm->fr, comm->seq, a->kind, a->count, a->dtype, GW_ALGO_AUTO);
        st = gw__alltoall_pairwise(comm, from, &sb, a->recvbuf, &rb, a->dtype);
        /* alltoallv agrees last: see the top. */
        if (st == GW_OK && a->kind == GW_COLL_ALLTOALLV)
            st = gw__barrier_dissemination(comm);
        return st;
    }
    case GW_COLL_GATHER:
    case GW_COLL_SCATTER:
        gw__coll_begin(comm, a->kind, a->count, a->dtype, GW_SUM, a->root, GW_ALGO_AUTO);
        gw__fr_begin(comm->fr, comm->seq, a->kind, a->count, a->dtype, GW_ALGO_AUTO);
        if ((st = gw__barrier_dissemination(comm)) != GW_OK)
            return st;
        return a->kind == GW_COLL_GATHER
                   ? gw__gather_linear(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->root)
                   : gw__scatter_linear(comm, a->sendbuf, a->recvbuf, a->count, a->dtype, a->root);
    default: { /* GW_COLL_ALLGATHERV */
        gw__blocks_t blocks = {a->recvcounts, a->rdispls, 0};
        gw__coll_begin(comm, a->kind, counts_digest(a->recvcounts, n), a->dtype, GW_SUM, 0,
                       GW_ALGO_RING);
        gw__fr_begin(comm->fr, comm->seq, a->kind, a->count, a->dtype, GW_ALGO_RING);
        return gw__allgatherv_ring(comm, a->sendbuf, a->recvbuf, &blocks, a->dtype);
    }
    }
}

/* One rank alone: its own block, copied. */
static void run_alone(const gw_coll_args_t *a)
{
    const size_t esize = gw_dtype_size(a->dtype);
    size_t len = a->count * esize, from = 0, to = 0;
    if (a->kind == GW_COLL_ALLTOALLV) {
        len = a->recvcounts[0] * esize;
        from = (a->sendbuf == a->recvbuf ? a->rdispls[0] : a->sdispls[0]) * esize;
        to = a->rdispls[0] * esize;
    } else if (a->kind == GW_COLL_ALLGATHERV) {
        to = a->rdispls[0] * esize;
    }
    const char *src = gw__cat(a->sendbuf, from);
    char *dst = gw__at(a->recvbuf, to);
    if (len > 0 && src != dst)
        memmove(dst, src, len);
}

static gw_status_t execute_more(gw_comm_t *comm, const gw_handle_t *h)
{
    const gw_coll_args_t *a = &h->args;
    if (atomic_load(&comm->abort_requested))
        return gw__comm_fail(comm, GW_ERR_ABORTED);
    if (comm->failed != GW_OK)
        return comm->failed;
    size_t sent = 0;
    gw_status_t st = validate(comm, a, &sent);
    if (st != GW_OK)
        return gw__comm_fail(comm, st);
    if (comm->size == 1) {
        run_alone(a);
        return GW_OK;
    }
    GW_TRACE(&comm->log, "coll", "%s #%llu: %zu x %s", name_of(a->kind),
             (unsigned long long)comm->seq + 1, a->count, gw_dtype_name(a->dtype));
    st = gw__comm_op_end(comm, run_more(comm, a, sent));
    return st == GW_OK ? GW_OK : gw__comm_fail(comm, st);
}

/* Blocking calls run through the scheduler (in order behind queued
 * non-blocking ones); gw_i* calls queue a handle. */
static gw_status_t run_call(gw_comm_t *comm, const gw_coll_args_t *args, gw_handle_t **handle)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    gw_handle_t call = {.execute = execute_more, .args = *args};
    if (!handle)
        return gw__async_run(comm, &call, "a collective");
    return gw__async_start(comm, &call, handle);
}

#define GW__MORE(handle, ...)                  \
    do {                                       \
        gw_coll_args_t args_ = {__VA_ARGS__};  \
        return run_call(comm, &args_, handle); \
    } while (0)

gw_status_t gw_alltoall(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                        gw_dtype_t dtype)
{
    GW__MORE(NULL, .kind = GW_COLL_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
             .dtype = dtype);
}

gw_status_t gw_alltoallv(gw_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                         const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                         const size_t *rdispls, gw_dtype_t dtype)
{
    GW__MORE(NULL, .kind = GW_COLL_ALLTOALLV, .sendbuf = sendbuf, .sendcounts = sendcounts,
             .sdispls = sdispls, .recvbuf = recvbuf, .recvcounts = recvcounts, .rdispls = rdispls,
             .dtype = dtype);
}

gw_status_t gw_gather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                      gw_dtype_t dtype, int root)
{
    GW__MORE(NULL, .kind = GW_COLL_GATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
             .dtype = dtype, .root = root);
}

gw_status_t gw_scatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                       gw_dtype_t dtype, int root)
{
    GW__MORE(NULL, .kind = GW_COLL_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
             .dtype = dtype, .root = root);
}

gw_status_t gw_allgatherv(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                          const size_t *recvcounts, const size_t *displs, gw_dtype_t dtype)
{
    GW__MORE(NULL, .kind = GW_COLL_ALLGATHERV, .sendbuf = sendbuf, .recvbuf = recvbuf,
             .count = sendcount, .recvcounts = recvcounts, .rdispls = displs, .dtype = dtype);
}

/* ---- non-blocking forms -------------------------------------------------- */

#define GW__IMORE(...)                 \
    do {                               \
        if (!handle)                   \
            return GW_ERR_INVALID_ARG; \
        GW__MORE(handle, __VA_ARGS__); \
    } while (0)

gw_status_t gw_ialltoall(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                         gw_dtype_t dtype, gw_handle_t **handle)
{
    GW__IMORE(.kind = GW_COLL_ALLTOALL, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
              .dtype = dtype);
}

gw_status_t gw_ialltoallv(gw_comm_t *comm, const void *sendbuf, const size_t *sendcounts,
                          const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                          const size_t *rdispls, gw_dtype_t dtype, gw_handle_t **handle)
{
    GW__IMORE(.kind = GW_COLL_ALLTOALLV, .sendbuf = sendbuf, .sendcounts = sendcounts,
              .sdispls = sdispls, .recvbuf = recvbuf, .recvcounts = recvcounts, .rdispls = rdispls,
              .dtype = dtype);
}

gw_status_t gw_igather(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                       gw_dtype_t dtype, int root, gw_handle_t **handle)
{
    GW__IMORE(.kind = GW_COLL_GATHER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
              .dtype = dtype, .root = root);
}

gw_status_t gw_iscatter(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                        gw_dtype_t dtype, int root, gw_handle_t **handle)
{
    GW__IMORE(.kind = GW_COLL_SCATTER, .sendbuf = sendbuf, .recvbuf = recvbuf, .count = count,
              .dtype = dtype, .root = root);
}

gw_status_t gw_iallgatherv(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t sendcount,
                           const size_t *recvcounts, const size_t *displs, gw_dtype_t dtype,
                           gw_handle_t **handle)
{
    GW__IMORE(.kind = GW_COLL_ALLGATHERV, .sendbuf = sendbuf, .recvbuf = recvbuf,
              .count = sendcount, .recvcounts = recvcounts, .rdispls = displs, .dtype = dtype);
}
