/*
 * test_tcp.c - the TCP transport between real processes on loopback: data
 * of every size over one and several sockets, ordering, rings and
 * all-to-all, IPv6, and mismatched messages (tags, lengths, read-ahead).
 * Failures and connection set-up are in test_tcp_faults.c; the harness is
 * tcp_test_util.h.
 */
#include "../transport_bodies.h"
#include "tcp_test_util.h"

/* ---- data movement ----------------------------------------------------------- */

static const size_t exchange_sizes[] = {0, 1, 1000, 64 * 1024 - 1, MIB + 3, 8 * MIB};
#define NSIZES (sizeof(exchange_sizes) / sizeof(exchange_sizes[0]))

/* Ranks 0 and 1 send each other every size at once, then check the bytes. */
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
        CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
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

Test(tcp, exchange_sizes_one_socket, .timeout = 15)
{
    job_t j = job(2, 1, body_exchange, NULL);
    run_job(&j);
}

Test(tcp, exchange_sizes_four_sockets, .timeout = 15)
{
    job_t j = job(2, 4, body_exchange, NULL);
    run_job(&j);
}

Test(tcp, many_messages_in_order, .timeout = 15)
{
    job_t j = job(2, 4, body_in_order, NULL);
    run_job(&j);
}

Test(tcp, ring_one_socket, .timeout = 15)
{
    job_t j = job(4, 1, body_ring, NULL);
    run_job(&j);
}

Test(tcp, ring_four_sockets, .timeout = 15)
{
    job_t j = job(3, 4, body_ring, NULL);
    run_job(&j);
}

/* Every rank sends two messages to every other rank (one small, one split
 * over the sockets) and receives theirs: the whole mesh carries data. */
static int body_all_to_all(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    enum { NM = 2 };
    static const size_t lens[NM] = {777, 700 * 1024 + 5};
    gw_request_t reqs[2 * MAX_RANKS * NM];
    gw_request_t *ptrs[2 * MAX_RANKS * NM];
    uint8_t *bufs[2 * MAX_RANKS * NM];
    int n = 0;
    for (int m = 0; m < NM; m++) {
        for (int d = 1; d < size; d++) {
            int to = (rank + d) % size, from = (rank + size - d) % size;
            bufs[n] = malloc(lens[m]);
            CHECK(bufs[n], "malloc");
            fill(bufs[n], lens[m], rank, to, (uint64_t)m + 1);
            make_req(&reqs[n], GW_REQ_SEND, to, (uint64_t)m + 1, 3, bufs[n], lens[m]);
            CHECK_ST(t->ops->isend(t, &reqs[n]), GW_OK);
            ptrs[n] = &reqs[n];
            n++;
            bufs[n] = malloc(lens[m]);
            CHECK(bufs[n], "malloc");
            make_req(&reqs[n], GW_REQ_RECV, from, (uint64_t)m + 1, 3, bufs[n], lens[m]);
            CHECK_ST(t->ops->irecv(t, &reqs[n]), GW_OK);
            ptrs[n] = &reqs[n];
            n++;
        }
    }
    CHECK_ST(wait_all(t, ptrs, n, NULL, 6000), GW_OK);
    for (int i = 0; i < n; i++) {
        if (reqs[i].kind == GW_REQ_RECV) {
            long bad = verify(bufs[i], reqs[i].len, reqs[i].peer, rank, reqs[i].tag.seq);
            CHECK(bad < 0, "message %llu from rank %d: byte %ld is wrong",
                  (unsigned long long)reqs[i].tag.seq, reqs[i].peer, bad);
        }
        free(bufs[i]);
    }
    return 0;
}

/* Ping-pong of tiny and empty messages: each one must be delivered by the
 * progress round in which it arrives, without waiting for more data. */
static int body_ping_pong(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t buf[8];
    int64_t t0 = gw__now_ms();
    for (uint64_t i = 1; i <= 1000; i++) {
        size_t len = i % 2 ? 0 : sizeof(buf);
        gw_request_t r;
        if ((int)(i % 2) == rank) {
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
        fprintf(stderr, "rank %d: 1000 ping-pong messages in %lld ms\n", rank,
                (long long)(gw__now_ms() - t0));
    return 0;
}

Test(tcp, ping_pong, .timeout = 15)
{
    job_t j = job(2, 2, body_ping_pong, NULL);
    run_job(&j);
}

Test(tcp, all_to_all_four_ranks, .timeout = 15)
{
    job_t j = job(4, 3, body_all_to_all, NULL);
    run_job(&j);
}

Test(tcp, ipv6_loopback, .timeout = 15)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&in6, sizeof(in6)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        cr_skip_test("no IPv6 loopback on this host");
    job_t j = job(2, 2, body_exchange, NULL);
    j.ipv6 = 1;
    run_job(&j);
}

/* ---- mismatches -------------------------------------------------------------- */

Test(tcp, tag_mismatch_leaves_buffer_untouched, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xBB, .send_len = 1000, .recv_len = 1000};
    job_t j = job(2, 1, body_mismatch, &c);
    run_job(&j);
}

Test(tcp, length_mismatch_longer_receive, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = MIB, .recv_len = 2 * MIB};
    job_t j = job(2, 4, body_mismatch, &c);
    run_job(&j);
}

Test(tcp, length_mismatch_shorter_receive, .timeout = 15)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = 4 * MIB, .recv_len = 1000};
    job_t j = job(2, 2, body_mismatch, &c);
    run_job(&j);
}

typedef struct conflict_case {
    gw_msg_tag_t current; /* rank 1's collective; rank 0 sends seq 3, sig 0x11 */
    int conflicts;
} conflict_case_t;

/* Rank 1 posts no receive and only calls progress(current): the header read
 * ahead from rank 0 must be reported when it proves a disagreement, and must
 * be harmless (and its message intact) when rank 0 is merely ahead. */
static int body_conflict(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const conflict_case_t *c = arg;
    size_t len = 3 * 64 * 1024;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    if (rank == 0) {
        fill(buf, len, 0, 1, 3);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, 1, 3, 0x11, buf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 5000), GW_OK);
        uint8_t dummy[4];
        make_req(&r, GW_REQ_RECV, 1, 4, 0x11, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        if (c->conflicts) {
            CHECK_ST(wait_one(t, &r, 5000), GW_ERR_MISMATCH); /* rank 1's abort */
        } else {
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
            CHECK(dummy[0] == 0x77, "ack content");
        }
        free(buf);
        return 0;
    }
    int64_t end = gw__now_ms() + (c->conflicts ? 3000 : 300);
    gw_status_t st = GW_OK;
    while (st == GW_OK && gw__now_ms() < end)
        st = t->ops->progress(t, &c->current, 10);
    if (c->conflicts) {
        CHECK_ST(st, GW_ERR_MISMATCH);
        CHECK_ST(gw__transport_abort(t, GW_ERR_MISMATCH), GW_OK);
        CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    } else {
        CHECK_ST(st, GW_OK);
        memset(buf, 0, len);
        gw_request_t r, s;
        make_req(&r, GW_REQ_RECV, 0, 3, 0x11, buf, len);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        long bad = verify(buf, len, 0, 1, 3);
        CHECK(bad < 0, "byte %ld of the read-ahead message is wrong", bad);
        uint8_t ack[4] = {0x77, 0x77, 0x77, 0x77};
        make_req(&s, GW_REQ_SEND, 0, 4, 0x11, ack, sizeof(ack));
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    }
    free(buf);
    return 0;
}

Test(tcp, readahead_detects_older_sequence, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 4, .sig = 0x11}, .conflicts = 1};
    job_t j = job(2, 2, body_conflict, &c);
    run_job(&j);
}

Test(tcp, readahead_detects_other_signature, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 3, .sig = 0x22}, .conflicts = 1};
    job_t j = job(2, 1, body_conflict, &c);
    run_job(&j);
}

Test(tcp, readahead_of_newer_sequence_is_fine, .timeout = 15)
{
    static const conflict_case_t c = {.current = {.seq = 2, .sig = 0x11}, .conflicts = 0};
    job_t j = job(2, 2, body_conflict, &c);
    run_job(&j);
}
