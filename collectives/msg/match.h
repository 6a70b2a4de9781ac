/*
 * match.h - MPI-style matching for the tagged point-to-point calls
 * (match.c): tags, GW_ANY_TAG, GW_ANY_SOURCE, the unexpected-message
 * queue and the receives' status.
 */
#ifndef GW_COLLECTIVES_MSG_MATCH_H
#define GW_COLLECTIVES_MSG_MATCH_H

#include <stddef.h>
#include <stdint.h>

#include "collectives/comm/comm.h"

/* What one communicator holds of unexpected messages at most, in bytes of
 * payload; one more fails it with GW_ERR_NO_MEMORY naming the sender. */
#define GW_P2P_UNEXPECTED_BYTES ((size_t)64 << 20)

/* The transport tag of a tagged message: the communicator's tagged space
 * (a comm id of its own, so collectives and untagged messages never
 * match or conflict with it), the user's tag, and the signature of count
 * and dtype. */
gw_msg_tag_t gw__match_tag(gw_comm_t *comm, int tag, uint32_t sig);

/* Post a tagged send in the handle's request (a receipt is asked for). */
gw_status_t gw__match_send(gw_comm_t *comm, int peer, int tag, const void *buf, size_t len,
                           uint32_t sig, gw_request_t *req);

/* Queue a tagged receive (h->tagged filled in, h->req.len the bytes it
 * takes): matched at once against the held unexpected messages, or when
 * one arrives. */
gw_status_t gw__match_recv(gw_comm_t *comm, gw_handle_t *h);

/* One pass: finish landed messages and take in the messages whose headers
 * arrived (called after every progress round, p2p.c). */
gw_status_t gw__match_pump(gw_comm_t *comm);

/* Forget a tagged receive that is being finished or abandoned. */
void gw__match_forget(gw_comm_t *comm, gw_handle_t *h);

/* Free the engine and every held message (gw_comm_destroy). */
void gw__match_free(gw_comm_t *comm);

#endif
