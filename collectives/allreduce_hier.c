/*
 * allreduce_hier.c - hierarchical allreduce: inside each host, across
 * hosts, inside each host again.
 *
 * The communicator's topology (core/topo.h) says which ranks share a host.
 * The buffer is cut into pieces (below: pipelining); with H hosts and at
 * most G ranks on one host, each piece is cut into G
 * segments whose sizes differ by at most one element (the first count % G
 * get the extra one; segments may be empty). On a host with L ranks, local
 * rank j (its ranks in ascending order) owns the segments g with
 * g mod L == j: every segment has exactly one owner on every host, and a
 * host with fewer ranks than G gives some of its ranks several segments
 * (hosts of 3, 1 and 2 ranks: G = 3; the lone rank owns all three, the
 * pair's first rank owns segments 0 and 2).
 *
 * For each piece:
 * 1. Reduce to the owners, inside each host (shared memory when the
 *    transports found one): every rank sends each segment it does not own
 *    to that segment's owner on its host, all at once; an owner receives
 *    the L - 1 copies of each of its segments into a buffer of its own and
 *    combines them with its own, in local rank order.
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
 * Pipelining: phase 1 of piece p + 1 is posted before phase 2 of piece p
 * starts, and phase 3 of piece p when it ends, so the transport moves them
 * while phase 2's rings wait for the network (every wait drives every
 * posted request). A piece is 8 pipeline chunks (4 MiB by default), at
 * most 64 pieces; the count alone decides, so every rank agrees. Pieces go
 * through phase 2 in order, which keeps the argument above: a ring of
 * piece p waits only for rings of earlier pieces or segments. Run
 * one after another, the phases cost their sum; overlapped, on 8 ranks of
 * 2 busy cores at 1 Gbit/s, about the link time (README).
 *
 * Each element is reduced once, by one rank, in a fixed order (the host's
 * ranks in local order, then the hosts in ring order), and only copied
 * afterwards, so every rank ends with the same bits. Messages between two
 * ranks of one host go in the same order on both ends (phase 1 of piece 0,
 * then phase 1 of p + 1 and phase 3 of p for p = 0, 1, ...; inside each,
 * ascending g); ranks of different hosts meet only in phase 2's rings, in
 * ascending piece and g.
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
 * copy of it first and is reduced in place; phase 1 of piece p + 1 and
 * phase 3 of piece p touch different pieces of it. Memory: the L - 1
 * incoming copies of this rank's segments of one piece (allocated per
 * call, since phase 2's rings use the communicator's scratch meanwhile).
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/coll.h"

/* Pieces of about HIER_PIECE_CHUNKS pipeline chunks (4 MiB at the default
 * chunk) go through the three phases one after another, so that phase 2 of
 * one overlaps phases 1 and 3 of its neighbours; at most HIER_MAX_PIECES,
 * each of which costs phase 2's 2 (H - 1) latencies. */
#define HIER_PIECE_CHUNKS 8
#define HIER_MAX_PIECES 64

typedef struct hier {
    const gw_topo_t *t;
    size_t esize;
    gw_dtype_t dtype;
    gw_op_t op;
    int nseg;          /* G: segments per piece */
    int host, nlocal;  /* this rank's host and its number of ranks */
    int local;         /* this rank's index among them */
    const int *locals; /* the host's ranks in ascending order */
    size_t count;      /* elements of the whole buffer */
    int npieces;
    char *incoming; /* phase 1's copies of this rank's segments of one piece */
    size_t slot;    /* elements per copy: the largest segment */
} hier_t;

/* Requests posted together and waited for together (phase 1 or 3 of one
 * piece): a send or receive per segment owned by another rank (fewer than
 * G) and L - 1 per owned segment (at most ceil(G / L) of them): fewer than
 * 2G + L <= 3G. */
typedef struct req_set {
    gw_request_t *reqs;
    gw_request_t **ptrs;
    int n;
} req_set_t;

/* Element range of piece p, and of segment g inside it. */
static size_t split_count(size_t count, int parts, int i)
{
    return count / (size_t)parts + ((size_t)i < count % (size_t)parts ? 1 : 0);
}
static size_t split_off(size_t count, int parts, int i)
{
    size_t q = count / (size_t)parts, rem = count % (size_t)parts;
    return (size_t)i * q + ((size_t)i < rem ? (size_t)i : rem);
}
static size_t seg_count(const hier_t *h, int p, int g)
{
    return split_count(split_count(h->count, h->npieces, p), h->nseg, g);
}
static size_t seg_off(const hier_t *h, int p, int g)
{
    return split_off(h->count, h->npieces, p) +
           split_off(split_count(h->count, h->npieces, p), h->nseg, g);
}

/* The local index of segment g's owner on a host of nlocal ranks. */
static int owner_index(int g, int nlocal) { return g % nlocal; }

static gw_status_t post(gw_comm_t *comm, req_set_t *rs, int is_send, int peer, char *buf,
                        size_t bytes)
{
    gw_request_t *r = &rs->reqs[rs->n];
    gw_status_t st = is_send ? gw__p2p_isend(comm, peer, buf, bytes, r)
                             : gw__p2p_irecv(comm, peer, buf, bytes, r);
    if (st == GW_OK)
        rs->ptrs[rs->n++] = r;
    return st;
}

static gw_status_t wait_set(gw_comm_t *comm, req_set_t *rs)
{
    gw_status_t st = rs->n > 0 ? gw__p2p_waitall(comm, rs->ptrs, rs->n) : GW_OK;
    rs->n = 0;
    return st;
}

/* Phase 1 of piece p, posted: each segment to its owner on this host, the
 * copies of ours into h->incoming (receives first, ascending segment and
 * peer, then sends, ascending segment). */
static gw_status_t post_to_owners(gw_comm_t *comm, const hier_t *h, int p, char *buf, req_set_t *rs)
{
    const int L = h->nlocal;
    gw_status_t st;
    size_t k = 0;
    for (int g = h->local; g < h->nseg; g += L, k++)
        for (int j = 0, s = 0; j < L; j++) {
            if (j == h->local)
                continue;
            char *dst =
                gw__at(h->incoming, (k * (size_t)(L - 1) + (size_t)s++) * h->slot * h->esize);
            if ((st = post(comm, rs, 0, h->locals[j], dst, seg_count(h, p, g) * h->esize)) != GW_OK)
                return st;
        }
    for (int g = 0; g < h->nseg; g++) {
        int j = owner_index(g, L);
        if (j != h->local &&
            (st = post(comm, rs, 1, h->locals[j], gw__at(buf, seg_off(h, p, g) * h->esize),
                       seg_count(h, p, g) * h->esize)) != GW_OK)
            return st;
    }
    return GW_OK;
}

/* After phase 1 of piece p: our segments reduced with the copies. */
static gw_status_t reduce_owned(gw_comm_t *comm, const hier_t *h, int p, char *buf)
{
    const int L = h->nlocal;
    size_t k = 0;
    for (int g = h->local; g < h->nseg; g += L, k++) {
        size_t len = seg_count(h, p, g);
        char *seg = gw__at(buf, seg_off(h, p, g) * h->esize);
        for (int s = 0; s < L - 1 && len > 0; s++) {
            gw_status_t st = gw__coll_reduce(comm, seg, seg,
                                             h->incoming + (k * (size_t)(L - 1) + (size_t)s) *
                                                               h->slot * h->esize,
                                             len, h->dtype, h->op);
            if (st != GW_OK)
                return st;
        }
    }
    return GW_OK;
}

/* Phase 2 of piece p: the ring of each owned segment's owners across the
 * hosts. */
static gw_status_t across_hosts(gw_comm_t *comm, const hier_t *h, int p, char *buf, int *members)
{
    const gw_topo_t *t = h->t;
    for (int g = h->local; g < h->nseg; g += h->nlocal) {
        for (int x = 0; x < t->nhosts; x++) {
            int nl = gw__topo_host_size(t, x);
            members[x] = gw__topo_host_ranks(t, x)[owner_index(g, nl)];
        }
        char *seg = gw__at(buf, seg_off(h, p, g) * h->esize);
        gw_status_t st = gw__allreduce_ring_over(comm, members, t->nhosts, h->host, seg, seg,
                                                 seg_count(h, p, g), h->dtype, h->op);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}

/* Phase 3 of piece p, posted: every owner hands its finished segments to
 * its host's ranks (ascending segment, then peer). */
static gw_status_t post_from_owners(gw_comm_t *comm, const hier_t *h, int p, char *buf,
                                    req_set_t *rs)
{
    const int L = h->nlocal;
    gw_status_t st;
    for (int g = 0; g < h->nseg; g++) {
        int j = owner_index(g, L);
        char *seg = gw__at(buf, seg_off(h, p, g) * h->esize);
        size_t bytes = seg_count(h, p, g) * h->esize;
        if (j != h->local) {
            if ((st = post(comm, rs, 0, h->locals[j], seg, bytes)) != GW_OK)
                return st;
            continue;
        }
        for (int q = 0; q < L; q++)
            if (q != h->local && (st = post(comm, rs, 1, h->locals[q], seg, bytes)) != GW_OK)
                return st;
    }
    return GW_OK;
}

/* The pipeline: phase 1 of piece p + 1 is posted before phase 2 of piece
 * p starts and phase 3 of piece p after it ends, so the transport moves
 * them while the ring waits for the network. Every rank posts in the same
 * order (phase 1 of p + 1, phase 3 of p, for p = 0, 1, ...), so messages
 * between two ranks of a host match in order; phase 1 of p + 1 and phase 3
 * of p touch different pieces of recvbuf. */
static gw_status_t pipeline(gw_comm_t *comm, hier_t *h, char *buf, req_set_t *in, req_set_t *out,
                            int *members)
{
    gw_status_t st = post_to_owners(comm, h, 0, buf, in);
    if (st == GW_OK)
        st = wait_set(comm, in);
    if (st == GW_OK)
        st = reduce_owned(comm, h, 0, buf);
    for (int p = 0; st == GW_OK && p < h->npieces; p++) {
        if (p + 1 < h->npieces && (st = post_to_owners(comm, h, p + 1, buf, in)) != GW_OK)
            break;
        if ((st = across_hosts(comm, h, p, buf, members)) != GW_OK)
            break;
        if ((st = wait_set(comm, out)) != GW_OK || /* phase 3 of p - 1 */
            (st = post_from_owners(comm, h, p, buf, out)) != GW_OK)
            break;
        if (p + 1 < h->npieces) {
            if ((st = wait_set(comm, in)) != GW_OK ||
                (st = reduce_owned(comm, h, p + 1, buf)) != GW_OK)
                break;
        }
    }
    if (st == GW_OK)
        st = wait_set(comm, out);
    return st;
}

gw_status_t gw__allreduce_hier(gw_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                               gw_dtype_t dtype, gw_op_t op)
{
    const gw_topo_t *t = &comm->topo;
    if (!t->order)
        return gw__allreduce_ring(comm, sendbuf, recvbuf, count, dtype, op);
    hier_t h = {
        .t = t,
        .esize = gw_dtype_size(dtype),
        .dtype = dtype,
        .op = op,
        .nseg = t->local_max,
        .host = t->host_of[comm->rank],
        .count = count,
    };
    h.nlocal = gw__topo_host_size(t, h.host);
    h.locals = gw__topo_host_ranks(t, h.host);
    h.local = t->pos[comm->rank] - t->host_first[h.host];
    /* The number of pieces depends on the count alone: every rank agrees. */
    size_t piece_bytes = HIER_PIECE_CHUNKS * (comm->chunk_bytes ? comm->chunk_bytes : 1);
    size_t pieces = count * h.esize / piece_bytes + 1;
    h.npieces = pieces > HIER_MAX_PIECES ? HIER_MAX_PIECES : (int)pieces;
    h.slot = split_count(split_count(count, h.npieces, 0), h.nseg, 0);
    size_t mine = (size_t)((h.nseg - h.local + h.nlocal - 1) / h.nlocal);
    if (count > 0 && recvbuf != sendbuf)
        memmove(recvbuf, sendbuf, count * h.esize);

    size_t nreq = 3 * (size_t)h.nseg + 1;
    req_set_t in = {calloc(nreq, sizeof(gw_request_t)), calloc(nreq, sizeof(gw_request_t *)), 0};
    req_set_t out = {calloc(nreq, sizeof(gw_request_t)), calloc(nreq, sizeof(gw_request_t *)), 0};
    int *members = malloc((size_t)t->nhosts * sizeof(*members));
    size_t incoming = mine * (size_t)(h.nlocal - 1) * h.slot * h.esize;
    h.incoming = incoming ? malloc(incoming) : NULL;
    gw_status_t st = GW_ERR_NO_MEMORY;
    if (in.reqs && in.ptrs && out.reqs && out.ptrs && members && (h.incoming || !incoming))
        st = pipeline(comm, &h, recvbuf, &in, &out, members);
    free(in.reqs);
    free(in.ptrs);
    free(out.reqs);
    free(out.ptrs);
    free(members);
    free(h.incoming);
    return st;
}
