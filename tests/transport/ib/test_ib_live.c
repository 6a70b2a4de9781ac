/*
 * test_ib_live.c - the IB transport over a real RDMA device: two or three
 * transports in one process, one thread per rank, exchanging tagged
 * messages. Skipped where no active RDMA port exists (here: everywhere but
 * scripts/rxe-vm, which runs it over Soft-RoCE; see
 * tests/integration/rxe_vm_test.sh).
 *
 * Covered: sizes around the inline and eager limits, empty messages,
 * striping over several QPs, more messages in flight than the CTS FIFO
 * holds, eager messages that arrive before their receive, both directions
 * at once, tag and length mismatches eager and not (both ends fail, the
 * receive buffer stays untouched; also when the receive held its CTS back),
 * small messages that need no CTS entry at all, a peer in another
 * collective noticed with no send posted, abort and goodbye, the registration cache (one
 * registration for repeated messages; memory freed and mapped again is
 * registered again and receives the data), and both connection modes.
 */
#include <sys/mman.h>

#include "ib_test_util.h"

static uint8_t pattern(int from, size_t i, int msg)
{
    return (uint8_t)(from * 31 + i * 7 + msg * 13);
}

/* ---- exchange --------------------------------------------------------------------- */

/* Around the CTS entry (64), the inline limit of an eager message (192 of
 * payload after its 64-byte header) and of a payload write (256), the
 * eager limit (4096) and the striping threshold (2 x 128 KiB). */
static const size_t sizes[] = {0,   1,   63,  64,   65,   191,    192,    193,
                               255, 256, 257, 4096, 4097, 100000, 300000, 3u << 20};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every rank sends every size to every other rank, all posted at once. */
static int exchange_body(rank_t *r)
{
    int n = r->size;
    gw_request_t *q = calloc((size_t)2 * n * NSIZES, sizeof(*q));
    uint8_t **sbuf = calloc((size_t)n * NSIZES, sizeof(*sbuf));
    uint8_t **rbuf = calloc((size_t)n * NSIZES, sizeof(*rbuf));
    int nq = 0;
    for (int p = 0; p < n; p++) {
        if (p == r->rank)
            continue;
        for (size_t s = 0; s < NSIZES; s++) {
            size_t idx = (size_t)p * NSIZES + s;
            sbuf[idx] = malloc(sizes[s] + 1);
            rbuf[idx] = malloc(sizes[s] + 16);
            for (size_t i = 0; i < sizes[s]; i++)
                sbuf[idx][i] = pattern(r->rank, i, (int)s);
            memset(rbuf[idx], 0xEE, sizes[s] + 16);
            post(r, &q[nq++], GW_REQ_RECV, p, rbuf[idx], sizes[s], 7, (uint32_t)s);
            post(r, &q[nq++], GW_REQ_SEND, p, sbuf[idx], sizes[s], 7, (uint32_t)s);
        }
    }
    gw_msg_tag_t cur = {.seq = 7};
    gw_status_t st = wait_all(r, q, nq, &cur);
    CHECK(st == GW_OK, "exchange: %s", gw_status_name(st));
    for (int p = 0; p < n; p++) {
        if (p == r->rank)
            continue;
        for (size_t s = 0; s < NSIZES; s++) {
            size_t idx = (size_t)p * NSIZES + s;
            for (size_t i = 0; i < sizes[s]; i++)
                CHECK(rbuf[idx][i] == pattern(p, i, (int)s), "size %zu from %d: byte %zu", sizes[s],
                      p, i);
            CHECK(rbuf[idx][sizes[s]] == 0xEE, "size %zu: written past the end", sizes[s]);
            free(sbuf[idx]);
            free(rbuf[idx]);
        }
    }
    free(q);
    free(sbuf);
    free(rbuf);
    return 0;
}

static void exchange(int n, const char *cm, const char *qps)
{
    setenv("GW_IB_QPS", qps, 1);
    job_t j;
    job_start(&j, n, cm);
    job_run(&j, exchange_body, NULL);
    job_run(&j, exchange_body, NULL); /* again: registrations come from the cache */
    job_end(&j);
}

Test(ib_live, exchange_oob, .timeout = 120) { exchange(2, "oob", "1"); }
Test(ib_live, exchange_rdmacm, .timeout = 120) { exchange(2, "rdmacm", "1"); }
Test(ib_live, exchange_three_ranks_striped, .timeout = 180) { exchange(3, "rdmacm", "3"); }
Test(ib_live, exchange_oob_striped, .timeout = 120) { exchange(2, "oob", "2"); }

/* More messages than the FIFO has slots, in one direction, posted at once. */
static int stream_body(rank_t *r)
{
    enum { N = 3 * GW_IB_FIFO_DEPTH + 5 };
    static gw_request_t q[2][N];
    uint32_t *buf = calloc(N, sizeof(uint32_t));
    gw_request_t *mine = q[r->rank];
    for (int i = 0; i < N; i++) {
        if (r->rank == 0) {
            buf[i] = 1000u + (uint32_t)i;
            post(r, &mine[i], GW_REQ_SEND, 1, &buf[i], sizeof(uint32_t), 1, 0);
        } else {
            post(r, &mine[i], GW_REQ_RECV, 0, &buf[i], sizeof(uint32_t), 1, 0);
        }
    }
    gw_msg_tag_t cur = {.seq = 1};
    gw_status_t st = wait_all(r, mine, N, &cur);
    CHECK(st == GW_OK, "stream: %s", gw_status_name(st));
    for (int i = 0; r->rank == 1 && i < N; i++)
        CHECK(buf[i] == 1000u + (uint32_t)i, "message %d arrived as %u: out of order?", i, buf[i]);
    free(buf);
    return 0;
}

Test(ib_live, more_in_flight_than_fifo_slots, .timeout = 120)
{
    setenv("GW_IB_QPS", "1", 1);
    job_t j;
    job_start(&j, 2, "rdmacm");
    job_run(&j, stream_body, NULL);
    job_end(&j);
}

/* ---- mismatches -------------------------------------------------------------------- */

typedef struct mm_case {
    uint32_t send_sig, recv_sig;
    size_t send_len, recv_len;
} mm_case_t;

/* Rank 0 sends, rank 1 receives something else. The rank that detects the
 * mismatch aborts with it, as the communicator does; an eager sender whose
 * send completed learns it from that abort. Both must end with
 * GW_ERR_MISMATCH, and the receive buffer must be untouched. */
static int mismatch_body(rank_t *r)
{
    const mm_case_t *c = r->arg;
    static uint8_t bufs[2][16384];
    uint8_t *buf = bufs[r->rank];
    memset(buf, r->rank == 0 ? 0x11 : 0xC3, sizeof(bufs[0]));
    gw_request_t q;
    if (r->rank == 0)
        post(r, &q, GW_REQ_SEND, 1, buf, c->send_len, 3, c->send_sig);
    else
        post(r, &q, GW_REQ_RECV, 0, buf, c->recv_len, 3, c->recv_sig);
    gw_msg_tag_t cur = {.seq = 3, .sig = r->rank == 0 ? c->send_sig : c->recv_sig};
    gw_status_t st = mismatch_outcome(r, &q, &cur);
    CHECK(st == GW_ERR_MISMATCH, "got %s, expected GW_ERR_MISMATCH", gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < sizeof(bufs[1]); i++)
        CHECK(buf[i] == 0xC3, "the receive buffer was written at byte %zu", i);
    return 0;
}

static void mismatch(const char *cm, mm_case_t c)
{
    job_t j;
    job_start(&j, 2, cm);
    job_run(&j, mismatch_body, &c);
    job_end(&j);
}

Test(ib_live, tag_mismatch_fails_both_ends, .timeout = 90)
{
    mismatch("oob", (mm_case_t){.send_sig = 1, .recv_sig = 2, .send_len = 100, .recv_len = 100});
    mismatch("oob", (mm_case_t){.send_sig = 1, .recv_sig = 2, .send_len = 9000, .recv_len = 9000});
}

Test(ib_live, length_mismatch_fails_both_ends, .timeout = 90)
{
    mismatch("rdmacm", (mm_case_t){.send_sig = 5, .recv_sig = 5, .send_len = 200, .recv_len = 100});
    /* A receive small enough to come eagerly holds its CTS back for a
     * while; the larger message waits for it and must still be refused. */
    mismatch("rdmacm",
             (mm_case_t){.send_sig = 5, .recv_sig = 5, .send_len = 5000, .recv_len = 100});
    mismatch("rdmacm",
             (mm_case_t){.send_sig = 5, .recv_sig = 5, .send_len = 12000, .recv_len = 9000});
}

/* Small messages sent before their receives exist: the first ones wait in
 * the eager slots, the rest wait for their CTS, and all arrive in order. */
static int early_body(rank_t *r)
{
    enum { N = 3 * GW_IB_EAGER_SLOTS + 1 };
    uint32_t vals[N];
    gw_request_t q[N];
    gw_msg_tag_t cur = {.seq = 2};
    if (r->rank == 0) {
        for (int i = 0; i < N; i++) {
            vals[i] = 0xA000u + (uint32_t)i;
            post(r, &q[i], GW_REQ_SEND, 1, &vals[i], sizeof(vals[i]), 2, 0);
        }
        gw_status_t st = wait_all(r, q, N, &cur);
        CHECK(st == GW_OK, "sends: %s", gw_status_name(st));
        return 0;
    }
    /* Let the eager messages land before any receive is posted. */
    int64_t until = gw__now_ms() + 1500;
    while (gw__now_ms() < until)
        CHECK(r->t->ops->progress(r->t, &cur, 10) == GW_OK, "progress before the receives");
    gw_ib_t *t = gw__ib_of(r->t);
    CHECK(t->peers[0].r_eager_in == GW_IB_EAGER_SLOTS, "%llu eager messages waiting, expected %d",
          (unsigned long long)t->peers[0].r_eager_in, GW_IB_EAGER_SLOTS);
    memset(vals, 0, sizeof(vals));
    for (int i = 0; i < N; i++)
        post(r, &q[i], GW_REQ_RECV, 0, &vals[i], sizeof(vals[i]), 2, 0);
    gw_status_t st = wait_all(r, q, N, &cur);
    CHECK(st == GW_OK, "receives: %s", gw_status_name(st));
    for (int i = 0; i < N; i++)
        CHECK(vals[i] == 0xA000u + (uint32_t)i, "message %d is 0x%x", i, vals[i]);
    return 0;
}

Test(ib_live, eager_before_the_receive_then_cts, .timeout = 90)
{
    setenv("GW_IB_QPS", "1", 1);
    job_t j;
    job_start(&j, 2, "rdmacm");
    job_run(&j, early_body, NULL);
    job_end(&j);
}

/* Rank 1 waits for a message of collective 4 that rank 0, now in
 * collective 5, will never send: rank 0 notices from the CTS alone. */
static int conflict_body(rank_t *r)
{
    uint8_t buf[8];
    gw_request_t q;
    if (r->rank == 1) {
        post(r, &q, GW_REQ_RECV, 0, buf, sizeof(buf), 4, 9);
        gw_msg_tag_t cur = {.seq = 4, .sig = 9};
        gw_status_t st = wait_all(r, &q, 1, &cur);
        CHECK(st == GW_ERR_ABORTED || st == GW_ERR_MISMATCH, "got %s", gw_status_name(st));
        return 0;
    }
    gw_msg_tag_t cur = {.seq = 5, .sig = 9};
    int64_t end = gw__now_ms() + DEADLINE_MS;
    gw_status_t st = GW_OK;
    while (st == GW_OK && gw__now_ms() < end)
        st = r->t->ops->progress(r->t, &cur, 10);
    CHECK(st == GW_ERR_MISMATCH, "got %s", gw_status_name(st));
    gw__transport_abort(r->t, st); /* as the communicator does */
    return 0;
}

Test(ib_live, conflicting_collective_seen_without_a_send, .timeout = 60)
{
    job_t j;
    job_start(&j, 2, "oob");
    job_run(&j, conflict_body, NULL);
    job_end(&j);
}

/* ---- small messages without CTS entries ---------------------------------------------- */

/* A ping-pong of small messages: each goes eagerly, and the receive
 * waiting for it holds its CTS back (GW_IB_CTS_DEFER_US) while the eager
 * slots' credit comes back in the other direction's eager headers, so no
 * CTS entry is written at all. With GW_IB_CTS_DEFER_US=0 every receive
 * writes one, which shows the count tells the two apart. The ranks poll
 * without ever sleeping (which would send the held CTS entries). */
#define PINGS 64

static int pingpong_body(rank_t *r)
{
    int peer = 1 - r->rank;
    gw_msg_tag_t cur = {.seq = 6, .sig = 1};
    for (int i = 0; i < PINGS; i++) {
        uint64_t out = ((uint64_t)r->rank << 32) | (uint64_t)i, in = 0;
        gw_request_t q[2];
        int first = r->rank == 0 ? 0 : 1; /* rank 0 sends first, rank 1 answers */
        for (int k = 0; k < 2; k++) {
            if (k == first)
                post(r, &q[k], GW_REQ_SEND, peer, &out, sizeof(out), 6, 1);
            else
                post(r, &q[k], GW_REQ_RECV, peer, &in, sizeof(in), 6, 1);
            if (r->rank == 1 && k == 0) {
                gw_status_t st = wait_all(r, q, 1, &cur);
                CHECK(st == GW_OK, "ping %d: %s", i, gw_status_name(st));
            }
        }
        gw_status_t st = wait_all(r, q, 2, &cur);
        CHECK(st == GW_OK, "round %d: %s", i, gw_status_name(st));
        CHECK(in == (((uint64_t)peer << 32) | (uint64_t)i), "round %d: got 0x%llx", i,
              (unsigned long long)in);
    }
    return 0;
}

static void pingpong(const char *defer_us, uint64_t *cts_sent)
{
    setenv("GW_IB_QPS", "1", 1);
    setenv("GW_IB_SPIN_US", "100000000", 1);
    setenv("GW_IB_CTS_DEFER_US", defer_us, 1);
    job_t j;
    job_start(&j, 2, "rdmacm");
    job_run(&j, pingpong_body, NULL);
    *cts_sent = 0;
    for (int i = 0; i < 2; i++)
        *cts_sent += gw__ib_of(j.r[i].t)->peers[1 - i].r_cts_sent;
    job_end(&j);
}

Test(ib_live, small_ping_pong_writes_no_cts, .timeout = 120)
{
    uint64_t held, at_once;
    pingpong("10000000", &held);
    pingpong("0", &at_once);
    cr_expect_eq(held, 0, "%llu CTS entries written for %d eager messages",
                 (unsigned long long)held, 2 * PINGS);
    /* Rank 0 posts each receive before its ping, so its CTS always goes;
     * rank 1's may find its ping already there. */
    cr_expect_geq(at_once, PINGS, "only %llu CTS entries without holding them back",
                  (unsigned long long)at_once);
}

/* ---- abort and goodbye -------------------------------------------------------------- */

static int abort_body(rank_t *r)
{
    uint8_t buf[64];
    gw_request_t q;
    if (r->rank == 0) {
        gw__transport_abort(r->t, GW_ERR_TIMEOUT);
        return 0;
    }
    post(r, &q, GW_REQ_RECV, 0, buf, sizeof(buf), 1, 0);
    gw_status_t st = wait_all(r, &q, 1, NULL);
    CHECK(st == GW_ERR_TIMEOUT, "the peer's abort reason came as %s", gw_status_name(st));
    return 0;
}

Test(ib_live, abort_carries_the_reason, .timeout = 60)
{
    job_t j;
    job_start(&j, 2, "rdmacm");
    job_run(&j, abort_body, NULL);
    job_end(&j);
}

/* Rank 0 aborts on behalf of others (rank 2 reported, rank 1 is to blame):
 * its ABORT_FROM immediate lands before the ABORT, and ranks 1 and 2 take
 * over that culprit and origin instead of blaming rank 0. */
static int abort_blame_body(rank_t *r)
{
    uint8_t buf[64];
    gw_request_t q;
    if (r->rank == 0) {
        gw_abort_info_t why = {.status = GW_ERR_TIMEOUT, .origin = 2, .culprit = 1};
        r->t->ops->abort(r->t, &why);
        return 0;
    }
    post(r, &q, GW_REQ_RECV, 0, buf, sizeof(buf), 1, 0);
    gw_status_t st = wait_all(r, &q, 1, NULL);
    CHECK(st == GW_ERR_TIMEOUT, "the peer's abort reason came as %s", gw_status_name(st));
    CHECK(r->t->culprit == 1 && r->t->origin == 2 && r->t->blame == GW_BLAME_ABORT,
          "rank %d blames rank %d (origin %d, kind %d), not rank 1 (origin 2)", r->rank,
          r->t->culprit, r->t->origin, (int)r->t->blame);
    return 0;
}

Test(ib_live, abort_carries_origin_and_culprit, .timeout = 90)
{
    job_t j;
    job_start(&j, 3, "rdmacm");
    job_run(&j, abort_blame_body, NULL);
    job_end(&j);
}

Test(ib_live, goodbye_then_post_is_remote_error, .timeout = 60)
{
    job_t j;
    job_start(&j, 2, "oob");
    j.r[0].t->ops->close(j.r[0].t);
    j.r[0].t = NULL;
    rank_t *r = &j.r[1];
    uint8_t buf[8];
    gw_request_t q;
    post(r, &q, GW_REQ_RECV, 0, buf, sizeof(buf), 1, 0);
    gw_status_t st = wait_all(r, &q, 1, NULL);
    cr_assert_eq(st, GW_ERR_REMOTE, "got %s", gw_status_name(st));
    job_end(&j);
}

/* ---- registration cache ------------------------------------------------------------- */

static int cache_body(rank_t *r)
{
    gw_ib_t *t = gw__ib_of(r->t);
    size_t len = 1u << 20;
    gw_msg_tag_t cur = {.seq = 1};
    uint64_t regs_before = 0;
    for (int round = 0; round < 20; round++) {
        /* The same buffer every round, then a fresh mapping at the same
         * address for the last rounds. */
        static uint8_t *buf[2];
        if (round == 0 || round == 15) {
            if (buf[r->rank])
                munmap(buf[r->rank], len);
            void *hint = buf[r->rank];
            buf[r->rank] = mmap(hint, len, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | (hint ? MAP_FIXED : 0), -1, 0);
            CHECK(buf[r->rank] != MAP_FAILED, "mmap");
        }
        if (round == 1)
            regs_before = t->mrc.regs;
        gw_request_t q;
        if (r->rank == 0) {
            memset(buf[0], round + 1, len);
            post(r, &q, GW_REQ_SEND, 1, buf[0], len, 1, 0);
        } else {
            memset(buf[1], 0, len);
            post(r, &q, GW_REQ_RECV, 0, buf[1], len, 1, 0);
        }
        gw_status_t st = wait_all(r, &q, 1, &cur);
        CHECK(st == GW_OK, "round %d: %s", round, gw_status_name(st));
        if (r->rank == 1)
            for (size_t i = 0; i < len; i += 4093)
                CHECK(buf[1][i] == round + 1, "round %d: byte %zu is %d: %s", round, i, buf[1][i],
                      round >= 15 ? "data went to the old, unmapped pages" : "wrong data");
        if (round == 14)
            CHECK(t->mrc.regs == regs_before, "%llu registrations for one buffer",
                  (unsigned long long)(t->mrc.regs - regs_before));
    }
    CHECK(t->mrc.stale >= 1 || t->mrc.unmarked > 0, "the remapped buffer was not noticed");
    return 0;
}

Test(ib_live, registration_cache, .timeout = 120)
{
    job_t j;
    job_start(&j, 2, "rdmacm");
    job_run(&j, cache_body, NULL);
    job_end(&j);
}

/* Two verbs transports of one process (here two ranks' of one job; in
 * use, communicators made by separate gw_comm_init calls): a buffer that
 * one registered is freed and mapped again at the same address, and the
 * other registers and marks the new mapping. The first one's entry for the
 * old mapping passes the mark check from then on; the list of the
 * process's caches (ib_mr_caches.c) must keep it from being used. */
Test(ib_live, a_mapping_replaced_under_another_transport_is_seen, .timeout = 120)
{
    job_t j;
    job_start(&j, 2, "oob");
    gw_ib_t *a = gw__ib_of(j.r[0].t), *b = gw__ib_of(j.r[1].t);
    cr_assert(remap_seen_by_b(a, b),
              "transport B kept its registration of the old mapping after transport A "
              "registered the new one (unmarked: %llu)",
              (unsigned long long)b->mrc.unmarked);
    job_end(&j);
}
