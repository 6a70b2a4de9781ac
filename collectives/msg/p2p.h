/*
 * p2p.h - the messaging layer under every algorithm (p2p.c): posting with
 * the current call's tag, waiting with the timeout, and the request window
 * that the pipelined algorithms keep per link.
 */
#ifndef GW_COLLECTIVES_MSG_P2P_H
#define GW_COLLECTIVES_MSG_P2P_H

#include <stddef.h>

#include "collectives/comm/comm.h"

/* Post a send or receive of len bytes to/from peer with the current tag. */
gw_status_t gw__p2p_isend(gw_comm_t *comm, int peer, const void *buf, size_t len,
                          gw_request_t *req);
/* gw__p2p_isend for the public calls: under GW_P2P_SEND_SYNC (comm's
 * p2p_send) the request completes only once the peer matched and accepted
 * the message (GW_REQ_RECEIPT, transport.h), and fails with the peer's
 * verdict when it did not; under GW_P2P_SEND_STANDARD it is a plain send.
 * flags: more request flags (GW_REQ_ANNOUNCE for a tagged message) or 0. */
gw_status_t gw__p2p_isend_public(gw_comm_t *comm, int peer, const void *buf, size_t len,
                                 unsigned flags, gw_request_t *req);
gw_status_t gw__p2p_irecv(gw_comm_t *comm, int peer, void *buf, size_t len, gw_request_t *req);
/* The receive of a message that the transport's peek() showed, sent with
 * GW_REQ_ANNOUNCE (the tagged calls: match.c). */
gw_status_t gw__p2p_irecv_announced(gw_comm_t *comm, int peer, void *buf, size_t len,
                                    gw_request_t *req);
/* Drive progress until every request in reqs[0..n) completed (NULL entries
 * are skipped). Fails on the first failed request, on a conflicting tag from
 * any peer, or after timeout_ms without progress. */
gw_status_t gw__p2p_waitall(gw_comm_t *comm, gw_request_t *const *reqs, int n);
/* Drive progress until at least one of reqs[0..n) (non-NULL, not yet
 * consumed) completed; returns its index in *idx. */
gw_status_t gw__p2p_waitany(gw_comm_t *comm, gw_request_t *const *reqs, int n, int *idx);
/* Non-blocking: one progress pass. */
gw_status_t gw__p2p_poll(gw_comm_t *comm);
/* Send to one peer and receive from another (or the same), both posted
 * before waiting, so rings and exchanges cannot deadlock. */
gw_status_t gw__p2p_sendrecv(gw_comm_t *comm, int dst, const void *sbuf, size_t slen, int src,
                             void *rbuf, size_t rlen);

/* ---- request windows ------------------------------------------------------ */

/* Messages in flight per stream (and, in the algorithms, scratch slots per
 * incoming stream). Two is the least that overlaps receiving chunk c + 1
 * with reducing chunk c. */
#define GW__STREAM_DEPTH 2

/* One direction of one link as a pipelined algorithm uses it: messages
 * posted in order, at most GW__STREAM_DEPTH of them in flight, message p in
 * request p % GW__STREAM_DEPTH. */
typedef struct gw__stream {
    int peer;      /* -1: this rank has no such stream */
    size_t posted; /* messages posted so far */
    size_t done;   /* leading messages completed */
    gw_request_t req[GW__STREAM_DEPTH];
} gw__stream_t;

static inline void gw__stream_init(gw__stream_t *s, int peer)
{
    s->peer = peer;
    s->posted = s->done = 0;
}

/* Whether another message may be posted without reusing a request that is
 * still in flight. */
static inline int gw__stream_room(const gw__stream_t *s)
{
    return s->posted - s->done < GW__STREAM_DEPTH;
}

/* The two streams of a ring: in from the left neighbour (rank - 1), out to
 * the right one (rank + 1). */
static inline void gw__stream_ring(const gw_comm_t *comm, gw__stream_t *in, gw__stream_t *out)
{
    gw__stream_init(in, (comm->rank - 1 + comm->size) % comm->size);
    gw__stream_init(out, (comm->rank + 1) % comm->size);
}

/* Post the stream's next message. */
gw_status_t gw__stream_send(gw_comm_t *comm, gw__stream_t *s, const void *buf, size_t len);
gw_status_t gw__stream_recv(gw_comm_t *comm, gw__stream_t *s, void *buf, size_t len);

/* Count the leading requests that completed since the last call, setting
 * *moved when there are any; a failed one fails the communicator. */
gw_status_t gw__stream_reap(gw_comm_t *comm, gw__stream_t *s, int *moved);
/* gw__stream_reap on each of s[0..n). */
gw_status_t gw__streams_reap(gw_comm_t *comm, gw__stream_t *const *s, int n, int *moved);

/* Wait until one request still in flight on any of s[0..n) completes
 * (streams without a peer are skipped). When none is in flight the
 * algorithm has nothing to wait for and never will: that is a bug in it,
 * logged as "internal error: <what> stalled" and failed with
 * GW_ERR_PROTOCOL. */
gw_status_t gw__streams_wait(gw_comm_t *comm, gw__stream_t *const *s, int n, const char *what);

#endif
