/*
 * test_ib_lazy.c - pairs of the verbs transport connected on first use
 * (params.lazy; ib_lazy.c, ib_cm_knock.c, ib_oob.c), through the RDMA CM
 * and out of band, over a real RDMA device: a ring
 * connects only its neighbours' QPs, a peer that needs nothing from us yet
 * still connects when we knock (and when it is the one to dial), every
 * message of an all-to-all arrives exactly, a peer that closed before we
 * needed it is named at once whichever of us dials, a dial that was
 * rejected is retried (also eagerly), the CQ grows with the pairs, strangers at the out-of-band port
 * (open until close when connecting on first use) leave the job going, and
 * ranks that disagree about lazy connections stop at connect(). Skipped where no
 * active RDMA port exists (here: everywhere but scripts/rxe-vm; see
 * tests/integration/rxe_vm_test.sh).
 *
 * The harness is in ib_test_util.h.
 */
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ib_test_util.h"

#define ALL_LAZY 0xfu

static int up_peers(const rank_t *r)
{
    const gw_ib_t *t = gw__ib_of(r->t);
    int n = 0;
    for (int p = 0; p < r->size; p++)
        n += p != r->rank && gw__ib_peer_up(t, &t->peers[p]);
    return n;
}

static int qps_made(const rank_t *r)
{
    const gw_ib_t *t = gw__ib_of(r->t);
    int n = 0;
    for (int p = 0; p < r->size; p++)
        for (int k = 0; k < t->nqps; k++)
            n += t->peers[p].qp[k] != NULL;
    return n;
}

/* n ranks connecting on first use over cm, with qps QPs per peer, run body
 * once (every connect() and every body must succeed). */
static void lazy_job(int n, const char *cm, const char *qps, int (*body)(rank_t *), const void *arg)
{
    setenv("GW_IB_QPS", qps, 1);
    job_t j;
    job_open_connect(&j, n, cm, ALL_LAZY, 1);
    job_run(&j, body, arg);
    job_end(&j);
}

static uint8_t byte_of(int from, int to, size_t i) { return (uint8_t)(from * 37 + to * 11 + i); }

/* Send len bytes to `to` and receive them from `from`, checking them. */
static int exchange_with(rank_t *r, int to, int from, size_t len, uint64_t seq)
{
    uint8_t *s = malloc(len), *d = malloc(len);
    CHECK(s && d, "malloc");
    for (size_t i = 0; i < len; i++)
        s[i] = byte_of(r->rank, to, i);
    memset(d, 0xEE, len);
    gw_request_t q[2];
    post(r, &q[0], GW_REQ_SEND, to, s, len, seq, 1);
    post(r, &q[1], GW_REQ_RECV, from, d, len, seq, 1);
    gw_status_t st = wait_all(r, q, 2, NULL);
    CHECK(st == GW_OK, "exchange with %d/%d: %s", to, from, gw_status_name(st));
    for (size_t i = 0; i < len; i++)
        CHECK(d[i] == byte_of(from, r->rank, i), "byte %zu from rank %d", i, from);
    free(s);
    free(d);
    return 0;
}

/* Around a 4-rank ring, three rounds of a small (eager) and a striped
 * message: only the two neighbours are connected afterwards. */
static int ring_body(rank_t *r)
{
    CHECK(up_peers(r) == 0 && qps_made(r) == 0, "%d peers up, %d QPs made before any message",
          up_peers(r), qps_made(r));
    int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    for (uint64_t round = 1; round <= 3; round++) {
        if (exchange_with(r, next, prev, 100, 2 * round) != 0 ||
            exchange_with(r, next, prev, 600000, 2 * round + 1) != 0)
            return 1;
    }
    const gw_ib_t *t = gw__ib_of(r->t);
    int across = (r->rank + 2) % r->size;
    CHECK(gw__ib_peer_up(t, &t->peers[next]) && gw__ib_peer_up(t, &t->peers[prev]),
          "a neighbour is not connected");
    CHECK(!gw__ib_peer_up(t, &t->peers[across]) && t->peers[across].qp[0] == NULL,
          "rank %d, which we never sent to, is connected", across);
    CHECK(up_peers(r) == 2, "%d peers up, want 2", up_peers(r));
    CHECK(t->cq_pairs == 2, "the CQ has room for %d pairs' QPs, want 2", t->cq_pairs);
    return 0;
}

Test(ib_lazy, a_ring_connects_only_its_neighbours, .timeout = 180)
{
    lazy_job(4, "rdmacm", "2", ring_body, NULL);
}
Test(ib_lazy, a_ring_connects_only_its_neighbours_oob, .timeout = 180)
{
    lazy_job(4, "oob", "2", ring_body, NULL);
}

/* Every rank with every other, both directions at once. */
static int all_to_all_body(rank_t *r)
{
    for (int d = 1; d < r->size; d++) {
        int to = (r->rank + d) % r->size, from = (r->rank + r->size - d) % r->size;
        if (exchange_with(r, to, from, d == 1 ? 5000 : 70000, (uint64_t)d) != 0)
            return 1;
    }
    CHECK(up_peers(r) == r->size - 1, "%d peers up after an all-to-all", up_peers(r));
    /* The CQ started with room for two peers' QPs and grew with the pairs. */
    const gw_ib_t *t = gw__ib_of(r->t);
    int need = (r->size - 1) * t->nqps * 2 * GW_IB_WQ_DEPTH +
               GW_IB_CM_CANDS * (GW_IB_CM_CAND_RECVS + 1) + 16;
    CHECK(t->cq_pairs == r->size - 1 && t->cq->cqe >= need,
          "the CQ has room for %d pairs, %d entries; %d pairs need %d", t->cq_pairs, t->cq->cqe,
          r->size - 1, need);
    return 0;
}

/* 3 pairs of 2 QPs: more than the CQ's first size. */
Test(ib_lazy, all_to_all, .timeout = 180) { lazy_job(4, "rdmacm", "2", all_to_all_body, NULL); }
Test(ib_lazy, all_to_all_oob, .timeout = 180) { lazy_job(4, "oob", "2", all_to_all_body, NULL); }

/* The rank that sends (arg: 0 or 1) posts its send first; the other only
 * makes progress, posting nothing, until the pair is up, and then its
 * receive. Rank 0 sending knocks on rank 1; rank 1 sending dials rank 0. */
static int one_sided_body(rank_t *r)
{
    int sender = *(const int *)r->arg, peer = 1 - r->rank;
    const gw_ib_t *t = gw__ib_of(r->t);
    uint8_t buf[3000];
    gw_request_t q;
    if (r->rank == sender) {
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = byte_of(r->rank, peer, i);
        post(r, &q, GW_REQ_SEND, peer, buf, sizeof(buf), 9, 2);
    } else {
        int64_t until = gw__now_ms() + 10000;
        while (!gw__ib_peer_up(t, &t->peers[peer]) && gw__now_ms() < until)
            CHECK(r->t->ops->progress(r->t, NULL, 10) == GW_OK, "progress failed");
        CHECK(gw__ib_peer_up(t, &t->peers[peer]),
              "rank %d never connected to rank %d, which has a send for it", r->rank, peer);
        memset(buf, 0, sizeof(buf));
        post(r, &q, GW_REQ_RECV, peer, buf, sizeof(buf), 9, 2);
    }
    gw_status_t st = wait_all(r, &q, 1, NULL);
    CHECK(st == GW_OK, "%s: %s", r->rank == sender ? "send" : "receive", gw_status_name(st));
    for (size_t i = 0; r->rank != sender && i < sizeof(buf); i++)
        CHECK(buf[i] == byte_of(peer, r->rank, i), "byte %zu", i);
    CHECK(r->rank != 0 || sender != 0 || t->peers[1].knocks >= 1, "rank 0 never knocked");
    return 0;
}

static void one_sided(const char *cm)
{
    static const int zero = 0, one = 1;
    lazy_job(2, cm, "1", one_sided_body, &zero);
    lazy_job(2, cm, "1", one_sided_body, &one);
}

Test(ib_lazy, a_knock_connects_a_peer_that_posts_nothing_yet, .timeout = 120)
{
    one_sided("rdmacm");
}
Test(ib_lazy, a_knock_connects_a_peer_that_posts_nothing_yet_oob, .timeout = 120)
{
    one_sided("oob");
}

/* Rank 1 closes at once; rank 0 (which knocks on it) and rank 2 (which
 * dials it) then send to it: both fail at once, naming it. */
static int closed_peer_body(rank_t *r)
{
    if (r->rank == 1) {
        r->t->ops->close(r->t);
        r->t = NULL;
        return 0;
    }
    usleep(300 * 1000);
    uint8_t b[64] = {0};
    gw_request_t q;
    int64_t t0 = gw__now_ms();
    post(r, &q, GW_REQ_SEND, 1, b, sizeof(b), 1, 1);
    gw_status_t st = wait_all(r, &q, 1, NULL);
    int64_t took = gw__now_ms() - t0;
    CHECK(st == GW_ERR_REMOTE, "send to the closed rank 1 gave %s", gw_status_name(st));
    CHECK(took < 2000, "it took %lld ms to notice", (long long)took);
    CHECK(r->t->culprit == 1, "culprit %d, want rank 1", r->t->culprit);
    return 0;
}

Test(ib_lazy, a_peer_that_closed_before_we_need_it_is_named, .timeout = 120)
{
    lazy_job(3, "rdmacm", "1", closed_peer_body, NULL);
}
Test(ib_lazy, a_peer_that_closed_before_we_need_it_is_named_oob, .timeout = 120)
{
    lazy_job(3, "oob", "1", closed_peer_body, NULL);
}

/* Rank 0 rejects the first connection request of each run
 * (GW_IB_TEST_REJECT): rank 1's dial is retried, and the receives that the
 * rejection flushed from its first QP are not taken for a protocol error. */
static int small_exchange_body(rank_t *r)
{
    return exchange_with(r, 1 - r->rank, 1 - r->rank, 3000, 4);
}

Test(ib_lazy, a_rejected_dial_is_retried, .timeout = 120)
{
    setenv("GW_IB_QPS", "1", 1);
    for (unsigned lazy = 0; lazy <= ALL_LAZY; lazy += ALL_LAZY) {
        setenv("GW_IB_TEST_REJECT", "1", 1);
        job_t j;
        job_open_connect(&j, 2, "rdmacm", lazy, 1);
        unsetenv("GW_IB_TEST_REJECT");
        job_run(&j, small_exchange_body, NULL);
        cr_expect_eq(gw__ib_of(j.r[0].t)->cfg.test_reject, 0, "rank 0 rejected no request");
        job_end(&j);
    }
}

/* A connection to rank 0's out-of-band port, from a stranger: -1 on error. */
static int stranger_at(const rank_t *r)
{
    gw_ib_addr_t a;
    if (gw__ib_addr_decode(r->all, &a) != GW_OK)
        return -1;
    const struct sockaddr *sa = (const struct sockaddr *)&a.sa;
    socklen_t len =
        sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, sa, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* After connect(), strangers at rank 0's out-of-band port, which stays
 * open when pairs connect on first use: one sends a hello-sized block of
 * garbage, one says nothing. The pair still connects when rank 1 needs
 * it, the message arrives, and the garbage's connection is dropped. */
static int strangers_body(rank_t *r)
{
    int garbage = -1, silent = -1;
    if (r->rank == 1) {
        garbage = stranger_at(r);
        silent = stranger_at(r);
        CHECK(garbage >= 0 && silent >= 0, "connecting to rank 0's port: %s", strerror(errno));
        uint8_t junk[GW_IB_HELLO_SIZE];
        memset(junk, 0x5a, sizeof(junk));
        CHECK(send(garbage, junk, sizeof(junk), MSG_NOSIGNAL) == (ssize_t)sizeof(junk), "send");
    }
    if (exchange_with(r, 1 - r->rank, 1 - r->rank, 5000, 3) != 0)
        return 1;
    if (r->rank == 1) {
        struct pollfd pfd = {.fd = garbage, .events = POLLIN};
        uint8_t b;
        CHECK(poll(&pfd, 1, 5000) == 1 && recv(garbage, &b, 1, 0) == 0,
              "the stranger that sent garbage was not dropped");
        close(garbage);
        close(silent);
    }
    return 0;
}

Test(ib_lazy, strangers_at_the_port_leave_the_job_going_oob, .timeout = 120)
{
    lazy_job(2, "oob", "1", strangers_body, NULL);
}

/* Rank 1 connects eagerly, rank 0 lazily: both refuse at connect(). */
Test(ib_lazy, ranks_that_disagree_stop_at_connect, .timeout = 60)
{
    setenv("GW_IB_QPS", "1", 1);
    for (int oob = 0; oob <= 1; oob++) {
        job_t j;
        job_open_connect(&j, 2, oob ? "oob" : "rdmacm", 0x1u, 0);
        for (int i = 0; i < 2; i++)
            cr_expect_eq(j.r[i].connect_st, GW_ERR_CONFIG, "%s: connect of rank %d: %s",
                         oob ? "oob" : "rdmacm", i, gw_status_name(j.r[i].connect_st));
        job_end(&j);
    }
}
