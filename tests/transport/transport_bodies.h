/*
 * transport_bodies.h - the transport contract as rank bodies that every
 * transport's harness runs (tcp_test_util.h, shm_test_util.h): messages
 * match in posting order, whatever arrives before its receive; a receive
 * that disagrees with its message fails on both sides without touching the
 * buffer; a ring of large messages in both directions at once.
 *
 * Header-only, every function static inline.
 */
#ifndef GW_TESTS_TRANSPORT_BODIES_H
#define GW_TESTS_TRANSPORT_BODIES_H

#include <stdlib.h>
#include <string.h>

#include "transport_test_util.h"

#define NMSG 400
static inline size_t inorder_len(int i)
{
    return (size_t)(i * 7919) % (300 * 1024) + (i % 3 == 0 ? 0 : 1);
}

/* Rank 0 posts NMSG sends of mixed sizes at once (on shm: INLINE and DIRECT); rank 1
 * posts the receives one at a time with progress in between, so headers
 * are read ahead before their receive exists. Every message arrives whole
 * and in order. */
static inline int body_in_order(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    gw_request_t *reqs = calloc(NMSG, sizeof(*reqs));
    uint8_t **bufs = calloc(NMSG, sizeof(*bufs));
    gw_request_t **ptrs = calloc(NMSG, sizeof(*ptrs));
    CHECK(reqs && bufs && ptrs, "calloc");
    for (int i = 0; i < NMSG; i++) {
        size_t len = inorder_len(i);
        bufs[i] = malloc(len ? len : 1);
        CHECK(bufs[i], "malloc");
        ptrs[i] = &reqs[i];
        if (rank == 0) {
            fill(bufs[i], len, 0, 1, (uint64_t)i + 1);
            make_req(&reqs[i], GW_REQ_SEND, 1, (uint64_t)i + 1, 7, bufs[i], len);
            CHECK_ST(t->ops->isend(t, &reqs[i]), GW_OK);
        } else {
            make_req(&reqs[i], GW_REQ_RECV, 0, (uint64_t)i + 1, 7, bufs[i], len);
            CHECK_ST(t->ops->irecv(t, &reqs[i]), GW_OK);
            gw_msg_tag_t cur = {.seq = (uint64_t)i + 1, .sig = 7};
            CHECK_ST(t->ops->progress(t, &cur, 0), GW_OK);
        }
    }
    CHECK_ST(wait_all(t, ptrs, NMSG, NULL, 10000), GW_OK);
    for (int i = 0; i < NMSG && rank == 1; i++) {
        long bad = verify(bufs[i], inorder_len(i), 0, 1, (uint64_t)i + 1);
        CHECK(bad < 0, "message %d (len %zu): byte %ld is wrong", i, inorder_len(i), bad);
    }
    for (int i = 0; i < NMSG; i++)
        free(bufs[i]);
    free(bufs);
    free(ptrs);
    free(reqs);
    return 0;
}

typedef struct mismatch_case {
    uint32_t recv_sig; /* the sender always uses 0xAA */
    size_t send_len, recv_len;
} mismatch_case_t;

/* Rank 0 sends; rank 1 posts a receive that disagrees. Rank 1 must fail with
 * GW_ERR_MISMATCH without touching its buffer (the canary), then abort; rank
 * 0 learns of it through the abort (a frame on TCP, a flag on shm). After
 * the failure the transport stays broken. */
static inline int body_mismatch(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const mismatch_case_t *c = arg;
    if (rank == 0) {
        uint8_t *buf = malloc(c->send_len);
        CHECK(buf, "malloc");
        fill(buf, c->send_len, 0, 1, 1);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, 1, 1, 0xAA, buf, c->send_len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        uint8_t dummy[16];
        make_req(&r, GW_REQ_RECV, 1, 2, 0xAA, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH);
        free(buf);
        return 0;
    }
    uint8_t *buf = malloc(c->recv_len);
    CHECK(buf, "malloc");
    memset(buf, 0x5A, c->recv_len);
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, c->recv_sig, buf, c->recv_len);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH);
    CHECK(r.complete && r.status == GW_ERR_MISMATCH, "request not failed");
    CHECK(r.bytes_done == 0, "%zu payload bytes were received", r.bytes_done);
    for (size_t i = 0; i < c->recv_len; i++)
        CHECK(buf[i] == 0x5A, "byte %zu of the receive buffer was overwritten", i);
    CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    gw_request_t later;
    make_req(&later, GW_REQ_RECV, 0, 2, 0xAA, buf, 1);
    CHECK_ST(t->ops->irecv(t, &later), GW_ERR_MISMATCH);
    CHECK(later.complete && later.status == GW_ERR_MISMATCH, "later request not failed");
    CHECK_ST(gw__transport_abort(t, GW_ERR_MISMATCH), GW_OK);
    free(buf);
    return 0;
}

/* Everyone sends 8 MiB to the right and receives 8 MiB from the left at
 * once, twice: far more than socket buffers or a shared-memory ring hold,
 * so it only finishes if sends and receives of all peers are interleaved.
 * Each round must finish within wait_ms. */
static inline int ring_exchange(gw_transport_t *t, int rank, int size, int wait_ms)
{
    size_t len = (size_t)8 << 20;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    for (uint64_t round = 1; round <= 2; round++) {
        uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
        CHECK(sbuf && rbuf, "malloc");
        fill(sbuf, len, rank, right, round);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, right, round, 99, sbuf, len);
        make_req(&r, GW_REQ_RECV, left, round, 99, rbuf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        gw_msg_tag_t cur = {.seq = round, .sig = 99};
        CHECK_ST(wait_all(t, both, 2, &cur, wait_ms), GW_OK);
        long bad = verify(rbuf, len, left, rank, round);
        CHECK(bad < 0, "round %llu: byte %ld from rank %d is wrong", (unsigned long long)round, bad,
              left);
        free(sbuf);
        free(rbuf);
    }
    return 0;
}

#endif /* GW_TESTS_TRANSPORT_BODIES_H */
