/*
 * TCP connections made on first use (gw_transport_params_t.lazy, what
 * GW_CONNECT=lazy gives a communicator; tcp_conn.c): a ring opens its two
 * neighbours' connections only, strangers that reach the listening port
 * after connect() are dropped while the job goes on, and a peer that we
 * dial but that never answers fails the transport naming it within the
 * timeout.
 */
#include "tcp_test_util.h"

/* After a ring exchange every rank has connections to its two ring
 * neighbours only (one each for 2 ranks): nsocks data sockets and the
 * control one per neighbour, and no dial or handshake left. */
static int body_ring_neighbours(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    gw_tcp_t *tt = gw__tcp_of(t);
    CHECK(tt->npfds == 0, "%d sockets up before any message", tt->npfds);
    if (ring_exchange(t, rank, size, 6000) != 0)
        return 1;
    int neighbours = size == 2 ? 1 : 2;
    CHECK(tt->npfds == neighbours * tt->nsocks, "%d sockets up after the ring, want %d", tt->npfds,
          neighbours * tt->nsocks);
    for (int r = 0; r < size; r++) {
        int ring = r == (rank + 1) % size || r == (rank + size - 1) % size;
        CHECK(r == rank || tt->peers[r].up == ring, "rank %d is %sconnected", r,
              tt->peers[r].up ? "" : "not ");
    }
    CHECK(!gw__tcp_mesh_busy(tt), "connections still being made after the ring");
    return 0;
}

Test(tcp_lazy, a_ring_connects_its_neighbours_only, .timeout = 15)
{
    job_t j = job(4, 2, body_ring_neighbours, NULL);
    j.lazy = 1;
    run_job(&j);
    j = job(2, 1, body_ring_neighbours, NULL);
    j.lazy = 1;
    run_job(&j);
}

static int connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Whether the transport closed fd (EOF or reset), driving its progress
 * meanwhile, within ms. */
static int dropped_within(gw_transport_t *t, int fd, int ms)
{
    int64_t end = gw__now_ms() + ms;
    while (gw__now_ms() < end) {
        if (t->ops->progress(t, NULL, 10) != GW_OK)
            return 0;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char c[64];
        if (poll(&p, 1, 0) == 1 && recv(fd, c, sizeof(c), MSG_DONTWAIT) <= 0)
            return 1;
    }
    return 0;
}

/* Rank 0, connected lazily, is reached on its listening port by a client
 * that sends garbage, one that sends a hello of another job, and one that
 * claims to be rank 0 itself: each is dropped, and the ring that follows
 * works. */
static int body_strangers(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    if (rank == 0) {
        gw_tcp_t *tt = gw__tcp_of(t);
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        CHECK(tt->listen_fd >= 0, "no listening socket after a lazy connect()");
        CHECK(getsockname(tt->listen_fd, (struct sockaddr *)&ss, &len) == 0, "getsockname: %m");
        uint8_t hello[GW_TCP_HELLO_SIZE];
        gw_tcp_hello_t h = {.id = {.magic = GW_TCP_HELLO_MAGIC, .from = 1, .to = 0},
                            .version = GW_TCP_PROTOCOL_VERSION,
                            .nsocks = (uint32_t)tt->ndata};
        static const char garbage[] = "GET / HTTP/1.0\r\n\r\n................................"
                                      "..............................";
        for (int k = 0; k < 3; k++) {
            int fd = connect_to(&ss, len);
            CHECK(fd >= 0, "stranger %d could not connect: %m", k);
            memset(h.id.job_id, k == 1 ? 0x43 : 0x42, sizeof(h.id.job_id));
            h.id.from = k == 2 ? 0 : 1; /* k 2: rank 0 never dials itself */
            gw__tcp_hello_encode(&h, hello);
            if (k == 0)
                write_all(fd, garbage, sizeof(garbage) - 1);
            else
                write_all(fd, hello, sizeof(hello));
            int dropped = dropped_within(t, fd, 3000);
            close(fd);
            CHECK(dropped, "stranger %d was not dropped within 3 s", k);
            CHECK(t->failed == GW_OK, "a stranger broke the transport: %s",
                  gw_status_name(t->failed));
        }
    }
    return ring_exchange(t, rank, size, 6000);
}

Test(tcp_lazy, strangers_on_the_port_are_dropped_and_the_job_goes_on, .timeout = 20)
{
    job_t j = job(3, 1, body_strangers, NULL);
    j.lazy = 1;
    run_job(&j);
}

/* Rank 1 opens (so its port accepts connections in the kernel) but never
 * runs its transport: rank 2, which dials it on its first send, must fail
 * with GW_ERR_TIMEOUT naming rank 1 within the timeout (plus a margin). */
static int body_send_to_silent(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    if (rank != 2)
        return 0;
    uint8_t buf[64];
    gw_request_t r;
    make_req(&r, GW_REQ_SEND, 1, 1, 7, buf, sizeof(buf));
    int64_t t0 = gw__now_ms();
    gw_status_t st = t->ops->isend(t, &r);
    while (st == GW_OK && !r.complete && gw__now_ms() - t0 < 5000)
        st = t->ops->progress(t, NULL, 50);
    int64_t took = gw__now_ms() - t0;
    CHECK(r.complete && r.status == GW_ERR_TIMEOUT, "the send ended %s (%s) after %lld ms",
          r.complete ? "complete" : "pending", gw_status_name(r.status), (long long)took);
    CHECK(t->culprit == 1, "culprit %d, want 1", t->culprit);
    CHECK(took >= 500 && took < 1500, "failed after %lld ms, timeout 500", (long long)took);
    return 0;
}

Test(tcp_lazy, a_peer_that_never_answers_is_named_within_the_timeout, .timeout = 15)
{
    job_t j = job(3, 1, body_send_to_silent, NULL);
    j.lazy = 1;
    j.timeout_ms = 500;
    j.skip_connect_rank = 1;
    run_job(&j);
}
