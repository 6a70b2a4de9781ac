/*
 * overlap.c - refusing send and receive buffers that partly overlap.
 *
 * An out-of-place collective reads sendbuf while it writes recvbuf: the
 * algorithms copy, reduce into and receive into recvbuf in whatever order
 * suits them, so when the two ranges share bytes, some elements are
 * overwritten before they are read and the call returns GW_OK with a wrong
 * answer. Each call defines one exact in-place layout (the same pointer, or
 * this rank's block of the larger buffer); that is the only overlap it
 * accepts. Any other is GW_ERR_INVALID_ARG, naming the call and both byte
 * ranges, before a byte moves. Like every invalid argument it fails the
 * communicator, so the peers (already waiting in the call) learn of it.
 */
#include <inttypes.h>
#include <stdint.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"

gw_status_t gw__check_overlap(gw_comm_t *comm, const char *fn, const void *sendbuf,
                              size_t send_bytes, const void *recvbuf, size_t recv_bytes,
                              const void *in_place_send)
{
    if (!sendbuf || !recvbuf || send_bytes == 0 || recv_bytes == 0)
        return GW_OK;
    if (sendbuf == in_place_send)
        return GW_OK;
    /* Addresses as integers: comparing pointers into different objects
     * is undefined in C, and these may well be different objects. */
    const uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
    if (s + send_bytes <= r || r + recv_bytes <= s)
        return GW_OK;
    GW_ERROR(&comm->log, "api",
             "%s: the send buffer [0x%" PRIxPTR ", 0x%" PRIxPTR
             ") and the receive buffer [0x%" PRIxPTR ", 0x%" PRIxPTR
             ") overlap, which gives wrong results: pass buffers that do not "
             "overlap, or in place exactly as %s defines it (send buffer at 0x%" PRIxPTR ")",
             fn, s, s + send_bytes, r, r + recv_bytes, fn, (uintptr_t)in_place_send);
    return GW_ERR_INVALID_ARG;
}
