/*
 * mem_transport.h - an in-memory transport for testing the collective
 * algorithms with one thread per rank inside one process (tests only).
 *
 * A fabric holds, for every ordered pair of ranks, a FIFO of messages behind
 * one mutex. In eager mode isend copies the payload into the destination's
 * FIFO and completes at once. In rendezvous mode it only queues a reference
 * to the sender's buffer, which the receiver copies when it matches the
 * message; the send completes after that (as with zero-copy transports, or
 * TCP once socket buffers are full), so an algorithm that reuses a buffer
 * before its send completed, or that needs unbounded buffering to make
 * progress, fails here. irecv queues the request, and progress() matches the
 * queued requests against the FIFO in order, checking tag and length exactly
 * as the real transports do (a mismatch fails with GW_ERR_MISMATCH before a
 * byte is written). progress() sleeps on a condition variable for at most
 * wait_ms when nothing can be done. abort() makes every peer's progress fail
 * with the abort reason; a rank that closes its instance while a peer still
 * waits for its data makes that peer fail with GW_ERR_REMOTE.
 */
#ifndef GW_TESTS_MEM_TRANSPORT_H
#define GW_TESTS_MEM_TRANSPORT_H

#include <stddef.h>

#include "transport/transport.h"

typedef struct memt_fabric memt_fabric_t;

/* A fabric for `size` ranks, eager or rendezvous (see above); NULL when out
 * of memory. */
memt_fabric_t *memt_fabric_create(int size, int rendezvous);
/* Free the fabric and every undelivered message. Close the instances first. */
void memt_fabric_destroy(memt_fabric_t *fab);
/* The transport instance of one rank (close it with t->ops->close). */
gw_status_t memt_open(memt_fabric_t *fab, int rank, const gw_logger_t *log, gw_transport_t **out);
/* Messages sent on the fabric so far (all ranks). */
size_t memt_messages(memt_fabric_t *fab);

#endif
