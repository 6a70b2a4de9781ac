/*
 * allgather_ring.c - allgather around a ring.
 *
 * recvbuf holds n blocks of m = sendcount elements, block b being rank b's
 * sendbuf. Rank r first puts its own block in place (nothing to do in place,
 * where sendbuf == recvbuf + r m). At step s (0 .. n-2) it sends block r - s
 * to its right neighbour and receives block r - s - 1 from its left one,
 * straight into its place in recvbuf; that block is what it sends at the
 * next step. After n - 1 steps every block has visited every rank once.
 * Data is only copied, so all ranks hold the same bytes.
 *
 * Streaming: blocks are cut into chunks of comm->chunk_bytes, and chunk c of
 * step s is forwarded as soon as chunk c of step s - 1 has arrived, with
 * AG_DEPTH messages in flight per direction. No scratch memory is needed.
 *
 * Cost for S = n m elements' bytes: every rank sends and receives
 * (n-1)/n S in n - 1 steps:
 *     T = (n-1) alpha + (n-1)/n S beta.
 */
#include <string.h>

#include "collectives/coll.h"

/* Messages in flight per direction. */
#define AG_DEPTH 2

static inline char *at(char *base, size_t off) { return off ? base + off : base; }

static gw_status_t reap(gw_comm_t *comm, gw_request_t *req, size_t posted, size_t *done,
                        int *moved)
{
    while (*done < posted && req[*done % AG_DEPTH].complete) {
        gw_status_t st = req[*done % AG_DEPTH].status;
        if (st != GW_OK)
            return gw__comm_fail(comm, st);
        (*done)++;
        *moved = 1;
    }
    return GW_OK;
}

gw_status_t gw__allgather_ring(gw_comm_t *comm, const void *sendbuf, void *recvbuf,
                               size_t sendcount, gw_dtype_t dtype)
{
    const int n = comm->size, rank = comm->rank;
    const int right = (rank + 1) % n, left = (rank - 1 + n) % n;
    const size_t esize = gw_dtype_size(dtype), m = sendcount;
    const size_t chunk = comm->chunk_bytes / esize ? comm->chunk_bytes / esize : 1;
    /* An empty block is still one zero-length message (mismatches surface). */
    const size_t nch = m == 0 ? 1 : (m + chunk - 1) / chunk;
    const size_t total = (size_t)(n - 1) * nch;

    char *mine = at(recvbuf, (size_t)rank * m * esize);
    if (m > 0 && (const char *)sendbuf != mine)
        memcpy(mine, sendbuf, m * esize);

    /* Message p (both directions) is chunk p % nch of step p / nch. */
    gw_request_t rreq[AG_DEPTH], sreq[AG_DEPTH];
    size_t recv_posted = 0, recv_done = 0, send_posted = 0, send_done = 0;
    for (;;) {
        int moved = 0;
        gw_status_t st;
        if ((st = reap(comm, rreq, recv_posted, &recv_done, &moved)) != GW_OK)
            return st;
        if ((st = reap(comm, sreq, send_posted, &send_done, &moved)) != GW_OK)
            return st;

        while (recv_posted < total && recv_posted - recv_done < AG_DEPTH) {
            size_t s = recv_posted / nch, c = recv_posted % nch;
            size_t b = ((size_t)rank + 2 * (size_t)n - s - 1) % (size_t)n;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            st = gw__p2p_irecv(comm, left, at(recvbuf, (b * m + first) * esize), len * esize,
                               &rreq[recv_posted % AG_DEPTH]);
            if (st != GW_OK)
                return st;
            recv_posted++;
            moved = 1;
        }

        /* Send p forwards receive p - nch (the same block, one step later). */
        while (send_posted < total && send_posted - send_done < AG_DEPTH &&
               (send_posted < nch || recv_done > send_posted - nch)) {
            size_t s = send_posted / nch, c = send_posted % nch;
            size_t b = ((size_t)rank + 2 * (size_t)n - s) % (size_t)n;
            size_t first = c * chunk, len = m - first < chunk ? m - first : chunk;
            st = gw__p2p_isend(comm, right, at(recvbuf, (b * m + first) * esize), len * esize,
                               &sreq[send_posted % AG_DEPTH]);
            if (st != GW_OK)
                return st;
            send_posted++;
            moved = 1;
        }

        if (recv_done == total && send_done == total)
            return GW_OK;
        if (moved)
            continue;

        gw_request_t *wait[2 * AG_DEPTH];
        int nwait = 0;
        for (size_t p = recv_done; p < recv_posted; p++)
            if (!rreq[p % AG_DEPTH].complete)
                wait[nwait++] = &rreq[p % AG_DEPTH];
        for (size_t p = send_done; p < send_posted; p++)
            if (!sreq[p % AG_DEPTH].complete)
                wait[nwait++] = &sreq[p % AG_DEPTH];
        if (nwait == 0) {
            GW_ERROR(&comm->log, "coll", "internal error: ring allgather stalled");
            return gw__comm_fail(comm, GW_ERR_PROTOCOL);
        }
        int idx;
        if ((st = gw__p2p_waitany(comm, wait, nwait, &idx)) != GW_OK)
            return st;
    }
}
