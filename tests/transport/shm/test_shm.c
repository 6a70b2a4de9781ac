/*
 * test_shm.c - data movement over the shared-memory transport between real
 * processes: every message size on each path (single copy, ring, tiny
 * ring), which path the default single-copy size puts a message on, long
 * in-order streams, rings and all-to-all among up to four ranks,
 * and ping-pong latency with sleeping receivers.
 *
 * The harness (forked ranks, the parent standing in for the bootstrap,
 * deadline and /dev/shm leftovers checks) is in shm_test_util.h; failures
 * are in test_shm_faults.c, connection establishment in test_shm_connect.c.
 */
#include "../transport_bodies.h"
#include "shm_test_util.h"

/* ---- data movement ----------------------------------------------------------- */

/* 16 and 17: the largest message in its header's line, the smallest after it. */
static const size_t exchange_sizes[] = {
    0, 1, 8, 16, 17, 63, 64, 1000, 64 * 1024 - 1, 64 * 1024, MIB + 3, 8 * MIB};
#define NSIZES (sizeof(exchange_sizes) / sizeof(exchange_sizes[0]))

/* Ranks 0 and 1 send each other every size at once, then check the bytes
 * and that nothing was written past the end of the receive buffer. */
static int body_exchange(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    for (size_t i = 0; i < NSIZES; i++) {
        size_t len = exchange_sizes[i];
        uint64_t seq = i + 1;
        uint8_t *sbuf = malloc(len + 1), *rbuf = malloc(len + 1);
        CHECK(sbuf && rbuf, "malloc");
        fill(sbuf, len, rank, peer, seq);
        memset(rbuf, 0xEE, len + 1);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, peer, seq, 0x1234, sbuf, len);
        make_req(&r, GW_REQ_RECV, peer, seq, 0x1234, rbuf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        CHECK_ST(wait_all(t, both, 2, NULL, 8000), GW_OK);
        CHECK(s.bytes_done == len && r.bytes_done == len, "bytes_done %zu/%zu for len %zu",
              s.bytes_done, r.bytes_done, len);
        long bad = verify(rbuf, len, peer, rank, seq);
        CHECK(bad < 0, "len %zu: byte %ld is wrong", len, bad);
        CHECK(rbuf[len] == 0xEE, "len %zu: wrote past the end of the buffer", len);
        free(sbuf);
        free(rbuf);
    }
    return 0;
}

Test(shm, exchange_sizes_single_copy, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_exchange, NULL);
    run_job(&j);
}

Test(shm, exchange_sizes_ring, .timeout = 30)
{
    job_t j = job(2, PATH_RING, body_exchange, NULL);
    run_job(&j);
}

Test(shm, exchange_sizes_tiny_ring, .timeout = 30)
{
    job_t j = job(2, PATH_TINY_RING, body_exchange, NULL);
    run_job(&j);
}

/* One rank may not read the other's memory: its large messages still come
 * through (as INLINE), while the other direction stays single-copy. */
Test(shm, exchange_sizes_one_way_single_copy, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_exchange, NULL);
    j.no_direct_rank = 1;
    run_job(&j);
}

/* The default single-copy size, GW_SHM_DIRECT_DEFAULT: rank 0 sends one
 * byte less, which must stream through the ring, then exactly that many,
 * which must go DIRECT (counted in s_direct); rank 1 checks both. */
static int body_default_boundary(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    gw_shm_peer_t *p = &gw__shm_of(t)->peers[peer];
    const size_t lens[] = {GW_SHM_DIRECT_DEFAULT - 1, GW_SHM_DIRECT_DEFAULT};
    for (uint64_t i = 0; i < 2; i++) {
        size_t len = lens[i];
        uint8_t *buf = malloc(len);
        CHECK(buf, "malloc");
        gw_request_t r;
        if (rank == 0) {
            fill(buf, len, rank, peer, i + 1);
            make_req(&r, GW_REQ_SEND, peer, i + 1, 7, buf, len);
            CHECK_ST(t->ops->isend(t, &r), GW_OK);
        } else {
            make_req(&r, GW_REQ_RECV, peer, i + 1, 7, buf, len);
            CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        }
        CHECK_ST(wait_one(t, &r, 8000), GW_OK);
        if (rank == 0) {
            CHECK(p->direct_ok, "the single-copy probe of rank 1 failed here");
            CHECK(p->s_direct == i, "after %zu bytes: %llu DIRECT sends, want %llu", len,
                  (unsigned long long)p->s_direct, (unsigned long long)i);
        } else {
            CHECK(verify(buf, len, peer, rank, i + 1) < 0, "len %zu: wrong bytes", len);
        }
        free(buf);
    }
    return 0;
}

Test(shm, default_single_copy_size, .timeout = 30)
{
    unsetenv("GW_SHM_DIRECT_MIN");
    job_t j = job(2, PATH_DEFAULT, body_default_boundary, NULL);
    run_job(&j);
}

Test(shm, many_messages_in_order, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_in_order, NULL);
    run_job(&j);
}

Test(shm, many_messages_in_order_tiny_ring, .timeout = 30)
{
    job_t j = job(2, PATH_TINY_RING, body_in_order, NULL);
    run_job(&j);
}

/* The ring exchange of transport_bodies.h, each round within 8 s. */
static int body_ring(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    return ring_exchange(t, rank, size, 8000);
}

Test(shm, ring_exchange_single_copy, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_ring, NULL);
    run_job(&j);
}

Test(shm, ring_exchange_ring, .timeout = 30)
{
    job_t j = job(3, PATH_RING, body_ring, NULL);
    run_job(&j);
}

Test(shm, all_to_all_four_ranks, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_all_to_all, NULL);
    run_job(&j);
}

/* Ping-pong of tiny and empty messages: each must be delivered by the round
 * in which it arrives, and a sleeping receiver must be woken. */
static int body_ping_pong(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t buf[8];
    int64_t t0 = gw__now_ns();
    uint64_t woken = 0;
    for (uint64_t i = 1; i <= 2000; i++) {
        if (i == 2000) /* before the last pause, whose message rank 0's goodbye follows */
            woken = gw__shm_of(t)->woken;
        size_t len = i % 2 ? 0 : sizeof(buf);
        gw_request_t r;
        if ((int)(i % 2) == rank) {
            if (i % 500 == 0)
                usleep(5000); /* long enough for the peer to fall asleep */
            fill(buf, len, rank, peer, i);
            make_req(&r, GW_REQ_SEND, peer, i, 1, buf, len);
            CHECK_ST(t->ops->isend(t, &r), GW_OK);
        } else {
            make_req(&r, GW_REQ_RECV, peer, i, 1, buf, len);
            CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        }
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        if ((int)(i % 2) != rank)
            CHECK(verify(buf, len, peer, rank, i) < 0, "message %llu", (unsigned long long)i);
    }
    if (getenv("GW_TEST_VERBOSE"))
        fprintf(stderr, "rank %d: 2000 ping-pong messages in %.1f us each\n", rank,
                (double)(gw__now_ns() - t0) / 2000 / 1000);
    /* Rank 1 slept through rank 0's pauses: a message sent while it slept
     * rang its bell (a bell that is not rung ends the sleep only at its
     * timeout, GW_SHM_SLEEP_NS later, and is not counted). The last pause
     * is not counted: rank 0's goodbye, which rings too, follows it. */
    if (rank == 1)
        CHECK(woken >= 1, "no sleep ended by a bell in 3 pauses of the sender");
    return 0;
}

Test(shm, ping_pong, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_ping_pong, NULL);
    run_job(&j);
}
