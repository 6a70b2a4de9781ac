/*
 * allreduce_hier.c - hierarchical allreduce: inside each host, across
 * hosts, inside each host again.
 *
 * The communicator's topology (core/topo.h) says which ranks share a host.
 * With H hosts and at most G ranks on one host, the buffer is cut into G
 * segments whose sizes differ by at most one element (the first count % G
 * get the extra one; segments may be empty). On a host with L ranks, local
 * rank j (its ranks in ascending order) owns the segments g with
 * g mod L == j: every segment has exactly one owner on every host, and a
 * host with fewer ranks than G gives some of its ranks several segments
 * (hosts of 3, 1 and 2 ranks: G = 3; the lone rank owns all three, the
 * pair's first rank owns segments 0 and 2).
 *
 * 1. Reduce to the owners, inside each host (shared memory when the
 *    transports found one): every rank sends each segment it does not own
 *    to that segment's owner on its host, all at once; an owner receives
 *    the L - 1 copies of each of its segments into scratch and combines
 *    them with its own, in local rank order.
 * 2. Across hosts: for each segment g, the H owners of g (one per host,
 *    hosts in order) run the ring allreduce (allreduce_ring.c) on it. A
 *    rank runs the rings of its segments in ascending g. That cannot
 *    deadlock: the owners of segment 0 are every host's first rank, for
 *    which it is the first ring; and a member of ring g waits only in
 *    rings of smaller segments, which complete by the same argument.
 * 3. Back to every rank, inside each host: each owner sends its finished
 *    segments to the other ranks of its host, which receive them straight
 *    into recvbuf.
 *
 * Each element is reduced once, by one rank, in a fixed order (the host's
 * ranks in local order, then the hosts in ring order), and only copied
 * afterwards, so every rank ends with the same bits. Messages between two
 * ranks of one host go in a fixed order on both ends (phase 1's segments of
 * the receiver, then phase 3's of the sender, each in ascending g); ranks
 * of different hosts meet only in phase 2's rings, in ascending g.
 *
 * Cost for S bytes, L ranks on each of H hosts (beta_l the per-byte time
 * inside a host, beta across hosts): phases 1 and 3 move (L-1)/L S per rank
 * inside the host, phase 2 moves 2 (H-1)/H S across each host's link (the
 * host's L owners together), against the host-ordered flat ring's
 * 2 (n-1)/n S across that link:
 *     T = 2(H-1) alpha + 2 (L-1)/L S beta_l + 2 (H-1)/H S beta + S gamma.
 * On 4 hosts of 2 ranks the link carries 1.5 S instead of 1.75 S; it is the
 * link, not the ranks, that binds when hosts are joined by a network.
 *
 * Degenerate cases need nothing special: one host (H = 1) is phases 1 and 3
 * alone (the rings have one member and copy nothing), one rank per host
 * (G = 1) is phase 2 alone, the flat ring over the hosts. A communicator
 * without a topology (built by hand) runs the flat ring.
 *
 * Waiting: a rank that owns few segments posts phase 3's receives while
 * its host's other owners are still in phase 2, and sees no byte move
 * until they finish; so GW_TIMEOUT_MS must cover a whole phase 2 (a few
 * seconds per GB at 1 Gbit/s), not just the gap between two chunks as in
 * the ring.
 *
 * Buffers: sendbuf is only read; recvbuf (which may equal sendbuf) gets a
 * copy of it first and is reduced in place. Scratch: the L - 1 incoming
 * copies of this rank's segments, at most (L-1)/L S rounded up per segment
 * owned; phase 2's rings then reuse the scratch for their own slots.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"

typedef struct hier {
    const gw_topo_t *t;
    size_t count, esize;
    gw_dtype_t dtype;
    gw_op_t op;
    int nseg;          /* G: segments */
    int host, nlocal;  /* this rank's host and its number of ranks */
    int local;         /* this rank's index among them */
    const int *locals; /* the host's ranks in ascending order */
} hier_t;

static size_t seg_count(const hier_t *h, int g)
{
    size_t q = h->count / (size_t)h->nseg, rem = h->count % (size_t)h->nseg;
    return q + ((size_t)g < rem ? 1 : 0);
}

static size_t seg_off(const hier_t *h, int g)
{
    size_t q = h->count / (size_t)h->nseg, rem = h->count % (size_t)h->nseg;
    return (size_t)g * q + ((size_t)g < rem ? (size_t)g : rem);
}

/* The local index of segment g's owner on a host of nlocal ranks. */
static int owner_index(int g, int nlocal) { return g % nlocal; }

/* Phase 1: every segment reaches its owner on this host, reduced. */
static gw_status_t reduce_to_owners(gw_comm_t *comm, const hier_t *h, char *buf, gw_request_t *reqs,
                                    gw_request_t **ptrs)
{
    const int L = h->nlocal;
    size_t mine = 0, slot = 0; /* elements per incoming copy: the largest owned segment */
    for (int g = h->local; g < h->nseg; g += L) {
        mine++;
        if (seg_count(h, g) > slot)
            slot = seg_count(h, g);
    }
    char *scratch = NULL;
    gw_status_t st = gw__coll_scratch(comm, mine * (size_t)(L - 1) * slot * h->esize, &scratch);
    if (st != GW_OK)
        return st;
    int n = 0;
    /* Receives first (ascending segment, then peer), then sends. */
    size_t k = 0;
    for (int g = h->local; g < h->nseg; g += L, k++) {
        for (int j = 0, s = 0; j < L; j++) {
            if (j == h->local)
                continue;
            char *dst = gw__at(scratch, ((k * (size_t)(L - 1) + (size_t)s++) * slot) * h->esize);
            if ((st = gw__p2p_irecv(comm, h->locals[j], dst, seg_count(h, g) * h->esize,
                                    &reqs[n])) != GW_OK)
                return st;
            ptrs[n] = &reqs[n];
            n++;
        }
    }
    for (int g = 0; g < h->nseg; g++) {
        int j = owner_index(g, L);
        if (j == h->local)
            continue;
        if ((st = gw__p2p_isend(comm, h->locals[j], gw__at(buf, seg_off(h, g) * h->esize),
                                seg_count(h, g) * h->esize, &reqs[n])) != GW_OK)
            return st;
        ptrs[n] = &reqs[n];
        n++;
    }
    if ((st = gw__p2p_waitall(comm, ptrs, n)) != GW_OK)
        return st;
    k = 0;
    for (int g = h->local; g < h->nseg; g += L, k++) {
        size_t len = seg_count(h, g);
        char *seg = gw__at(buf, seg_off(h, g) * h->esize);
        for (int s = 0; s < L - 1 && len > 0; s++)
            gw__reduce(seg, seg, scratch + ((k * (size_t)(L - 1) + (size_t)s) * slot) * h->esize,
                       len, h->dtype, h->op);
    }
    return GW_OK;
}

/* Phase 2: the ring of each owned segment's owners across the hosts. */
static gw_status_t across_hosts(gw_comm_t *comm, const hier_t *h, char *buf, int *members)
{
    const gw_topo_t *t = h->t;
    for (int g = h->local; g < h->nseg; g += h->nlocal) {
        for (int x = 0; x < t->nhosts; x++) {
            int nl = gw__topo_host_size(t, x);
            members[x] = gw__topo_host_ranks(t, x)[owner_index(g, nl)];
        }
        char *seg = gw__at(buf, seg_off(h, g) * h->esize);
        gw_status_t st = gw__allreduce_ring_over(comm, members, t->nhosts, h->host, seg, seg,
                                                 seg_count(h, g), h->dtype, h->op);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Phase 3: every owner hands its finished segments to its host's ranks. */
static gw_status_t owners_to_all(gw_comm_t *comm, const hier_t *h, char *buf, gw_request_t *reqs,
                                 gw_request_t **ptrs)
{
    const int L = h->nlocal;
    int n = 0;
    gw_status_t st;
    for (int g = 0; g < h->nseg; g++) {
        int j = owner_index(g, L);
        char *seg = gw__at(buf, seg_off(h, g) * h->esize);
        size_t bytes = seg_count(h, g) * h->esize;
        if (j != h->local) {
            st = gw__p2p_irecv(comm, h->locals[j], seg, bytes, &reqs[n]);
            if (st != GW_OK)
                return st;
            ptrs[n] = &reqs[n];
            n++;
            continue;
        }
        for (int p = 0; p < L; p++) {
            if (p == h->local)
                continue;
            if ((st = gw__p2p_isend(comm, h->locals[p], seg, bytes, &reqs[n])) != GW_OK)
                return st;
            ptrs[n] = &reqs[n];
            n++;
        }
    }
    return gw__p2p_waitall(comm, ptrs, n);
}

gw_status_t gw__allreduce_hier(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op)
{
    const gw_topo_t *t = &comm->topo;
    if (!t->order)
        return gw__allreduce_ring(comm, sendbuf, recvbuf, count, dtype, op);
    hier_t h = {
        .t = t,
        .count = count,
        .esize = gw_dtype_size(dtype),
        .dtype = dtype,
        .op = op,
        .nseg = t->local_max,
        .host = t->host_of[comm->rank],
    };
    h.nlocal = gw__topo_host_size(t, h.host);
    h.locals = gw__topo_host_ranks(t, h.host);
    h.local = t->pos[comm->rank] - t->host_first[h.host];
    if (count > 0 && recvbuf != sendbuf)
        memmove(recvbuf, sendbuf, count * h.esize);

    /* Requests of phase 1 or 3: a send or receive per segment owned by
     * another rank (fewer than G), and L - 1 per owned segment (at most
     * ceil(G / L) of them): fewer than 2G + L <= 3G. */
    size_t nreq = 3 * (size_t)h.nseg + 1;
    gw_request_t *reqs = calloc(nreq, sizeof(*reqs));
    gw_request_t **ptrs = calloc(nreq, sizeof(*ptrs));
    int *members = malloc((size_t)t->nhosts * sizeof(*members));
    gw_status_t st = GW_ERR_NO_MEMORY;
    if (!reqs || !ptrs || !members)
        goto out;
    st = reduce_to_owners(comm, &h, recvbuf, reqs, ptrs);
    if (st == GW_OK)
        st = across_hosts(comm, &h, recvbuf, members);
    if (st == GW_OK)
        st = owners_to_all(comm, &h, recvbuf, reqs, ptrs);
out:
    free(reqs);
    free(ptrs);
    free(members);
    return st;
}
