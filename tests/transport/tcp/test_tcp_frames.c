/*
 * test_tcp_frames.c - what the TCP transport's small-message path costs in
 * system calls, and that the bytes it reads ahead arrive intact: a small
 * frame (header and payload) comes in with one read, a write the kernel can
 * take goes without asking poll() first, and frames that piled up in the
 * staging buffer before their receives were posted, of every size around
 * the buffer's and across several sockets, reach the right receive.
 * Counts, never times: the data path's reads and polls are counted by the
 * transport itself (gw_tcp_t.nreads, npolls). The harness is
 * tcp_test_util.h.
 */
#include "tcp_test_util.h"

#define PINGS 64

/* Rank 0 sends PINGS 8-byte messages, one at a time, each answered by
 * rank 1 before the next: every message arrives alone, header and payload
 * in one segment, and the receiver must take each with a single read. */
static int body_one_read_per_frame(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    gw_tcp_t *tcp = gw__tcp_of(t);
    int peer = 1 - rank;
    uint64_t reads_before = tcp->nreads;
    for (uint64_t i = 1; i <= PINGS; i++) {
        uint8_t out[8], in[8];
        fill(out, sizeof(out), rank, peer, i);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, peer, i, 0x51, out, sizeof(out));
        make_req(&r, GW_REQ_RECV, peer, i, 0x51, in, sizeof(in));
        if (rank == 0) {
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            CHECK_ST(wait_one(t, &s, 5000), GW_OK);
            CHECK_ST(t->ops->irecv(t, &r), GW_OK);
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        } else {
            CHECK_ST(t->ops->irecv(t, &r), GW_OK);
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            CHECK_ST(wait_one(t, &s, 5000), GW_OK);
        }
        long bad = verify(in, sizeof(in), peer, rank, i);
        CHECK(bad < 0, "message %llu: byte %ld is wrong", (unsigned long long)i, bad);
    }
    uint64_t reads = tcp->nreads - reads_before;
    /* A header read apart from its payload would take two reads per
     * message, and a read until EAGAIN a third. Rank 0 may also read rank
     * 1's GOODBYE frames (one per connection: the data one and the control
     * one) while it waits for the last answer, since rank 1 closes as soon
     * as that answer is out. */
    CHECK(reads <= PINGS + (rank == 0 ? 2 : 0),
          "%llu reads for %d messages of 8 bytes: more than one each", (unsigned long long)reads,
          PINGS);
    return 0;
}

Test(tcp_frames, one_read_per_small_frame, .timeout = 20)
{
    job_t j = job(2, 1, body_one_read_per_frame, NULL);
    run_job(&j);
}

/* A send posted on a connection whose kernel buffer has room completes in
 * the very progress call that follows, without a poll(): only what cannot
 * be written at once waits for POLLOUT. */
static int body_send_without_poll(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    gw_tcp_t *tcp = gw__tcp_of(t);
    int peer = 1 - rank;
    uint8_t buf[8] = {0};
    gw_request_t s, r;
    if (rank == 0) {
        for (uint64_t i = 1; i <= 4; i++) {
            make_req(&s, GW_REQ_SEND, peer, i, 0x52, buf, sizeof(buf));
            uint64_t polls = tcp->npolls;
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            CHECK_ST(t->ops->progress(t, NULL, 0), GW_OK);
            CHECK(s.complete && s.status == GW_OK, "send %llu not complete after one round",
                  (unsigned long long)i);
            CHECK(tcp->npolls == polls, "send %llu: %llu poll() calls before a write that fit",
                  (unsigned long long)i, (unsigned long long)(tcp->npolls - polls));
        }
        make_req(&r, GW_REQ_RECV, peer, 5, 0x52, buf, sizeof(buf));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        return wait_one(t, &r, 5000) == GW_OK ? 0 : 1;
    }
    for (uint64_t i = 1; i <= 4; i++) {
        make_req(&r, GW_REQ_RECV, peer, i, 0x52, buf, sizeof(buf));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
    }
    make_req(&s, GW_REQ_SEND, peer, 5, 0x52, buf, sizeof(buf));
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    return 0;
}

Test(tcp_frames, send_that_fits_needs_no_poll, .timeout = 20)
{
    job_t j = job(2, 1, body_send_without_poll, NULL);
    run_job(&j);
}

#define PILE 120

/* Sizes around the staging buffer's (GW_TCP_RBUF) and the direct-read
 * threshold (GW_TCP_DIRECT_MIN), zero, two that are split over the sockets
 * (at least 2 * 64 KiB), and small ones last: the pile's tail then sits
 * whole in the staging buffer, where no poll() will report it. */
static size_t pile_size(int i)
{
    static const size_t tail[] = {0,
                                  1,
                                  GW_TCP_DIRECT_MIN - 1,
                                  GW_TCP_DIRECT_MIN,
                                  GW_TCP_RBUF - GW_TCP_HDR_SIZE,
                                  GW_TCP_RBUF,
                                  GW_TCP_RBUF + 1,
                                  3 * 64 * 1024 + 5,
                                  300 * 1024,
                                  8,
                                  100,
                                  0,
                                  1};
    int ntail = (int)(sizeof(tail) / sizeof(tail[0]));
    return i >= PILE - ntail ? tail[i - (PILE - ntail)] : (size_t)(i * 997) % 20000;
}

/* Rank 0 sends PILE messages back to back; rank 1 lets them pile up (in
 * the kernel and in its staging buffers, read ahead by progress rounds
 * with no receive posted), then posts the receives one at a time, each
 * waited for before the next, so that each claims a header held since an
 * earlier round and finds its payload partly or wholly in the buffer. */
static int body_pile(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    if (rank == 0) {
        gw_request_t *s = calloc(PILE, sizeof(*s));
        uint8_t **bufs = calloc(PILE, sizeof(*bufs));
        CHECK(s && bufs, "calloc");
        gw_request_t **all = calloc(PILE, sizeof(*all));
        CHECK(all, "calloc");
        for (int i = 0; i < PILE; i++) {
            size_t len = pile_size(i);
            bufs[i] = malloc(len + 1);
            CHECK(bufs[i], "malloc");
            fill(bufs[i], len, rank, peer, (uint64_t)i + 1);
            make_req(&s[i], GW_REQ_SEND, peer, (uint64_t)i + 1, 0x53, bufs[i], len);
            CHECK_ST(t->ops->isend(t, &s[i]), GW_OK);
            all[i] = &s[i];
        }
        CHECK_ST(wait_all(t, all, PILE, NULL, 8000), GW_OK);
        uint8_t done;
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, peer, PILE + 1, 0x53, &done, 1);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 8000), GW_OK);
        for (int i = 0; i < PILE; i++)
            free(bufs[i]);
        free(bufs);
        free(s);
        free(all);
        return 0;
    }
    int64_t until = gw__now_ms() + 300;
    while (gw__now_ms() < until)
        CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
    for (int i = 0; i < PILE; i++) {
        size_t len = pile_size(i);
        uint8_t *buf = malloc(len + 1);
        CHECK(buf, "malloc");
        memset(buf, 0xEE, len + 1);
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, peer, (uint64_t)i + 1, 0x53, buf, len);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        long bad = verify(buf, len, peer, rank, (uint64_t)i + 1);
        CHECK(bad < 0, "message %d (%zu bytes): byte %ld is wrong", i, len, bad);
        CHECK(buf[len] == 0xEE, "message %d (%zu bytes): written past its end", i, len);
        free(buf);
    }
    uint8_t done = 1;
    gw_request_t s;
    make_req(&s, GW_REQ_SEND, peer, PILE + 1, 0x53, &done, 1);
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    return 0;
}

Test(tcp_frames, piled_up_frames_one_socket, .timeout = 30)
{
    job_t j = job(2, 1, body_pile, NULL);
    run_job(&j);
}

Test(tcp_frames, piled_up_frames_three_sockets, .timeout = 30)
{
    job_t j = job(2, 3, body_pile, NULL);
    run_job(&j);
}

/* A rank spins before a wait sleeps (GW_TCP_SPIN_US) only where its host
 * has a CPU for every TCP rank on it: arg says which the body expects. */
static int body_spin(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)rank;
    (void)size;
    int expect_spin = *(const int *)arg;
    int64_t spin_ns = gw__tcp_of(t)->spin_ns;
    CHECK(expect_spin ? spin_ns > 0 : spin_ns == 0, "%d ranks on %ld CPUs: spin %lld ns", size,
          sysconf(_SC_NPROCESSORS_ONLN), (long long)spin_ns);
    return 0;
}

Test(tcp_frames, no_spin_with_more_ranks_than_cpus, .timeout = 20)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus + 1 > MAX_RANKS)
        cr_skip_test("%ld CPUs: the harness cannot start more ranks than that", cpus);
    static const int no = 0;
    job_t j = job((int)cpus + 1, 1, body_spin, &no);
    run_job(&j);
}

Test(tcp_frames, spin_with_a_cpu_per_rank, .timeout = 20)
{
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        cr_skip_test("one CPU: two ranks already outnumber it");
    static const int yes = 1;
    job_t j = job(2, 1, body_spin, &yes);
    run_job(&j);
}
