/*
 * base.h - what every transport does the same way, written once: opening
 * the instance, checking and resetting a posted request, the request
 * queues, and the failure path (fail once, log once, complete everything).
 *
 * A transport describes itself with one static const gw__transport_class_t
 * (its name, log subsystem, ops table and the hooks only it can fill: how
 * to queue a checked request, how to make progress, how to fail its
 * pending requests and how to name a peer) and lets
 * gw__transport_open_base() allocate its struct, which embeds
 * gw_transport_t first (gw__container_of gets back to it). Its ops table
 * points isend, irecv and progress at the base's, which check and then
 * call the hooks. From then on the base owns the sticky failure status
 * (t->failed) and whether connect() succeeded (t->connected), so the
 * checks at the top of isend, irecv and progress, and the first failure's
 * message, read the same in every transport. The mux (mux.c) uses the
 * base for its instance and its progress checks only: it fails through
 * its sub-transports.
 */
#ifndef GW_TRANSPORT_BASE_H
#define GW_TRANSPORT_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "common/container_of.h"
#include "transport/transport.h"

struct gw__transport_class {
    size_t size;        /* sizeof(gw__transport_class_t) */
    const char *name;   /* the instance's name ("tcp"); a mux renames itself */
    const char *subsys; /* log subsystem of the base's messages */
    const gw_transport_ops_t *ops;
    /* The transport has just failed with st: complete every pending request
     * with it (and drop what they hold). NULL: nothing is ever pending. */
    void (*fail_pending)(gw_transport_t *t, gw_status_t st);
    /* How failure messages name a peer, e.g. "rank 3 (10.0.0.1:4000)". */
    void (*describe_peer)(const gw_transport_t *t, int peer, char *buf, size_t cap);
    /* Whether requests for `peer` (a valid rank other than ours) may be
     * posted; NULL: every peer may. */
    int (*peer_usable)(const gw_transport_t *t, int peer);
    /* Queue a request that passed the base's checks: valid, reset for its
     * kind, the transport healthy and connected. */
    gw_status_t (*post)(gw_transport_t *t, gw_request_t *req);
    /* progress() of a healthy, connected transport (transport.h). */
    gw_status_t (*progress)(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms);
};

/* Check the arguments of an open() (rank within size; logged), allocate
 * impl_size zeroed bytes, whose first member must be the gw_transport_t,
 * and fill that base from cls and params. GW_ERR_INVALID_ARG or
 * GW_ERR_NO_MEMORY (logged). */
gw_status_t gw__transport_open_base(const gw__transport_class_t *cls,
                                    const gw_transport_params_t *params, size_t impl_size,
                                    gw_transport_t **out);

/* The isend, irecv and progress slots of a transport's ops table. They
 * reject a malformed request (logged, the request untouched), reset the
 * request for its kind, complete it at once with the sticky status of a
 * failed transport (and return that status), refuse posting or progress
 * before connect() (GW_ERR_INVALID_ARG, logged), and otherwise hand over
 * to the class's post or progress. */
gw_status_t gw__transport_isend(gw_transport_t *t, gw_request_t *req);
gw_status_t gw__transport_irecv(gw_transport_t *t, gw_request_t *req);
gw_status_t gw__transport_progress(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms);

/* A request was posted for a peer that can no longer take part (`state`
 * says why: "already closed its communicator"): fail the transport with
 * GW_ERR_REMOTE naming the peer and the request. */
gw_status_t gw__transport_post_refused(gw_transport_t *t, const gw_request_t *req,
                                       const char *state);

/* The checks at the top of every connect(): GW_ERR_INVALID_ARG for a NULL
 * transport or address table, the sticky failure of a failed transport,
 * and GW_ERR_INVALID_ARG (logged: "connect() called twice") when connect()
 * already succeeded or, `started` non-zero, an earlier call got under way
 * (the transport's own sign of it; 0 where it has none). */
gw_status_t gw__transport_connect_check(gw_transport_t *t, const uint8_t *all_addrs, int started);

/* The checks of gw__transport_progress, for a transport that routes to
 * others (the mux): GW_OK, the sticky failure, or GW_ERR_INVALID_ARG
 * (logged) before connect(). */
gw_status_t gw__transport_progress_check(gw_transport_t *t);

/* Break the transport: the first failure only is logged at ERROR (a NULL
 * fmt logs nothing: abort() logs its own line), becomes the sticky status
 * and completes every pending request (cls->fail_pending). Returns the
 * sticky status, which is the first failure's. It names no culprit. */
gw_status_t gw__transport_fail(gw_transport_t *t, gw_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* gw__transport_fail with the message prefixed by the peer's description,
 * blaming the peer (t->culprit), detected here (t->origin is this rank),
 * and t->blame from the status: GW_ERR_MISMATCH, GW_ERR_PROTOCOL and
 * GW_ERR_AUTH say the peer sent something wrong (GW_BLAME_PEER),
 * GW_ERR_TIMEOUT that we waited for it, anything else that it is gone
 * (GW_BLAME_LOST). */
gw_status_t gw__transport_peer_fail(gw_transport_t *t, int peer, gw_status_t st, const char *fmt,
                                    ...) __attribute__((format(printf, 4, 5)));

/* `peer` sent an abort (`got`, with origin and culprit -1 where its frame
 * named none or no valid rank): fail the transport with its status, taking
 * its culprit and origin (the peer itself where it named none) instead of
 * blaming the messenger, and log "rank P (...) aborted: <status>", with
 * whom it blames and who reported first where those are other ranks. */
gw_status_t gw__transport_peer_aborted(gw_transport_t *t, int peer, const gw_abort_info_t *got);

/* The start of every transport's abort(): fails the transport with
 * GW_ERR_ABORTED and no message (abort() logs its own), blaming why's
 * culprit when it had not failed yet, and returns what to tell the peers:
 * why's status (GW_ERR_ABORTED for GW_OK) and culprit, and why's origin or,
 * when it names none, this rank. */
gw_abort_info_t gw__transport_abort_begin(gw_transport_t *t, const gw_abort_info_t *why);

/* A rank as an abort carries it on the wire: -1 unless in [0, size). */
int gw__transport_abort_rank(int64_t wire, int size);

/* A message that `peer` has announced (it "sent a message" whose header
 * we read ahead, or "waits for a message": `what`) with tag `pending` and
 * len bytes proves it is in another collective than `current`
 * (gw__tag_conflicts): GW_ERR_MISMATCH, failing the transport. */
gw_status_t gw__transport_check_pending(gw_transport_t *t, int peer, const char *what,
                                        const gw_msg_tag_t *pending, uint64_t len,
                                        const gw_msg_tag_t *current);

/* The message that arrived for receive r (tag `got`, len bytes) must
 * match it exactly, before a byte of payload reaches r's buffer:
 * GW_ERR_MISMATCH, failing the transport, when it does not. */
gw_status_t gw__transport_check_match(gw_transport_t *t, const gw_request_t *r,
                                      const gw_msg_tag_t *got, uint64_t len);

/* The status a peer's abort carries on the wire; anything that is not a
 * known failure status still means the peer aborted (GW_ERR_ABORTED). */
gw_status_t gw__transport_abort_status(int64_t wire);

/* How many parts a len-byte message is split into over `lanes`
 * connections of one peer (sockets, queue pairs): one per lane at most,
 * none smaller than min_part, at least one. Both ends compute it from the
 * length alone, so no control message says it. */
size_t gw__transport_nparts(size_t len, size_t min_part, int lanes);
/* The byte range of part k of nparts: contiguous, of near-equal sizes. */
void gw__transport_part_range(size_t len, size_t nparts, size_t k, size_t *off, size_t *plen);

/* ---- requests and their queues (first in, first out, linked by next) ---- */

static inline void gw__req_complete(gw_request_t *r, gw_status_t st)
{
    r->status = st;
    r->complete = 1;
}

void gw__req_queue_push(gw_request_t **head, gw_request_t **tail, gw_request_t *r);
/* Unlink r wherever it is in the queue (nothing when it is not there). */
void gw__req_queue_remove(gw_request_t **head, gw_request_t **tail, gw_request_t *r);
/* Unlink the head, which must exist. */
gw_request_t *gw__req_queue_pop(gw_request_t **head, gw_request_t **tail);
/* Complete every request of the queue with st and empty it. */
void gw__req_queue_fail(gw_request_t **head, gw_request_t **tail, gw_status_t st);

/* One pause of a spinning wait: lets the sibling hyperthread (or, in a VM,
 * the host) run while we poll shared memory. */
static inline void gw__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
