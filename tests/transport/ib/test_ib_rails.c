/*
 * test_ib_rails.c - multi-rail verbs (transport/ib/ib_rails.c) over two
 * real RDMA devices: transports in one process, one thread per rank, each
 * rank with GW_IB_HCA naming both devices. Runs where two active ports
 * exist: scripts/rxe-vm, where tests/integration/rxe_vm_test.sh adds a
 * second Soft-RoCE device, rxe1, for it (GW_TEST_RAILS names the two;
 * default "=rxe0,rxe1"). Skipped where there is no RDMA at all.
 *
 * Covered: every size around the cut (128 KiB: one rail below, a part on
 * each rail from it) in both directions and both connection modes, with
 * the data checked and each rail's share counted (a cut message puts one
 * part on every rail; smaller ones take the rails in turn); a pair where
 * one rank has one rail (the pair uses one; the others still use two);
 * the pairs of a hierarchical allreduce's shards (rank i of one host
 * with rank i of another) starting on different rails; and receives
 * whose length disagrees with a cut message by a byte, so that one
 * part's lengths agree: both ends fail with GW_ERR_MISMATCH and the
 * receive buffer stays untouched (the parts' gate, transport.h).
 */

#include "ib_test_util.h"

static const char *rails_hca(void)
{
    const char *h = getenv("GW_TEST_RAILS");
    return h && *h ? h : "=rxe0,rxe1";
}

static uint8_t pattern(int from, size_t i, int msg) { return (uint8_t)(from * 29 + i * 11 + msg); }

/* Sends posted to peer on rail i of rank r's transport (0 where the rail
 * does not carry the peer). */
static uint64_t rail_sends(rank_t *r, int i, int peer)
{
    gw_transport_t *rail = gw__ib_rail(r->t, i);
    if (!rail)
        return 0;
    gw_ib_t *t = gw__ib_of(rail);
    return t->peers[peer].active ? t->peers[peer].s_next : 0;
}

/* Around the cut: 2 x 64 KiB, and one of a MiB and odd. */
static const size_t sizes[] = {0, 1, 4096, 65536, 131071, 131072, 131073, 300001, (1u << 20) + 5};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Every size to every peer, all posted at once, as one collective's
 * messages (one tag: matched by their order alone). */
static int exchange_body(rank_t *r)
{
    int n = r->size;
    gw_request_t q[2 * MAXR * NSIZES];
    uint8_t *sbuf[MAXR * NSIZES] = {0}, *rbuf[MAXR * NSIZES] = {0};
    int nq = 0;
    for (int p = 0; p < n; p++) {
        for (size_t s = 0; p != r->rank && s < NSIZES; s++) {
            size_t idx = (size_t)p * NSIZES + s;
            sbuf[idx] = malloc(sizes[s] + 1);
            rbuf[idx] = malloc(sizes[s] + 16);
            for (size_t i = 0; i < sizes[s]; i++)
                sbuf[idx][i] = pattern(r->rank, i, (int)s);
            memset(rbuf[idx], 0xEE, sizes[s] + 16);
            post(r, &q[nq++], GW_REQ_RECV, p, rbuf[idx], sizes[s], 4, 0);
            post(r, &q[nq++], GW_REQ_SEND, p, sbuf[idx], sizes[s], 4, 0);
        }
    }
    gw_msg_tag_t cur = {.seq = 4};
    gw_status_t st = wait_all(r, q, nq, &cur);
    CHECK(st == GW_OK, "exchange: %s", gw_status_name(st));
    for (int p = 0; p < n; p++) {
        for (size_t s = 0; p != r->rank && s < NSIZES; s++) {
            size_t idx = (size_t)p * NSIZES + s;
            for (size_t i = 0; i < sizes[s]; i++)
                CHECK(rbuf[idx][i] == pattern(p, i, (int)s), "size %zu from %d: byte %zu", sizes[s],
                      p, i);
            CHECK(rbuf[idx][sizes[s]] == 0xEE, "size %zu from %d: written past the end", sizes[s],
                  p);
            free(sbuf[idx]);
            free(rbuf[idx]);
        }
    }
    return 0;
}

/* One message of len from rank 0 to rank 1; rank 0 checks how many parts
 * each rail carried. */
typedef struct {
    size_t len;
    int want_rails; /* rails that must carry one more send: 2 (cut), 1 (whole) */
} one_case_t;

static int one_body(rank_t *r)
{
    const one_case_t *c = r->arg;
    uint8_t *buf = malloc(c->len);
    memset(buf, r->rank == 0 ? 0x5A : 0, c->len);
    uint64_t before[2] = {rail_sends(r, 0, 1), rail_sends(r, 1, 1)};
    gw_request_t q;
    post(r, &q, r->rank == 0 ? GW_REQ_SEND : GW_REQ_RECV, 1 - r->rank, buf, c->len, 9, 1);
    gw_msg_tag_t cur = {.seq = 9, .sig = 1};
    gw_status_t st = wait_all(r, &q, 1, &cur);
    CHECK(st == GW_OK, "len %zu: %s", c->len, gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < c->len; i++)
        CHECK(buf[i] == 0x5A, "len %zu: byte %zu", c->len, i);
    if (r->rank == 0) {
        int grew = (rail_sends(r, 0, 1) > before[0]) + (rail_sends(r, 1, 1) > before[1]);
        CHECK(grew == c->want_rails, "len %zu went over %d rails, expected %d", c->len, grew,
              c->want_rails);
    }
    free(buf);
    return 0;
}

static void two_rails(const char *cm)
{
    const char *hca[MAXR] = {rails_hca(), rails_hca()};
    job_t j;
    job_open_connect_hca(&j, 2, cm, 0, 1, 20000, hca);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(gw__ib_rails_count(j.r[i].t), 2,
                     "rank %d has %d rails with GW_IB_HCA=%s (is the second device there?)", i,
                     gw__ib_rails_count(j.r[i].t), rails_hca());
    job_run(&j, exchange_body, NULL);
    job_run(&j, exchange_body, NULL); /* again: the turns go on, registrations cached */
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 2; k++)
            cr_assert_gt(rail_sends(&j.r[i], k, 1 - i), 0, "rank %d sent nothing on rail %d", i, k);
    one_case_t cut = {.len = 1u << 20, .want_rails = 2};
    one_case_t whole = {.len = 1000, .want_rails = 1};
    job_run(&j, one_body, &cut);
    job_run(&j, one_body, &whole);
    job_run(&j, one_body, &whole);
    job_end(&j);
}

Test(ib_rails, two_rails_oob, .timeout = 150) { two_rails("oob"); }
Test(ib_rails, two_rails_rdmacm, .timeout = 150) { two_rails("rdmacm"); }

/* Ranks 0 and 1 have two rails, rank 2 one: its pairs use one rail. */
Test(ib_rails, a_rank_with_one_rail, .timeout = 150)
{
    char first[64];
    snprintf(first, sizeof(first), "%s", rails_hca());
    char *comma = strchr(first, ',');
    cr_assert(comma, "GW_TEST_RAILS=%s lists one device", rails_hca());
    *comma = '\0';
    const char *hca[MAXR] = {rails_hca(), rails_hca(), first};
    job_t j;
    job_open_connect_hca(&j, 3, "oob", 0, 1, 20000, hca);
    cr_assert_eq(gw__ib_rails_count(j.r[0].t), 2);
    cr_assert_eq(gw__ib_rails_count(j.r[2].t), 1);
    job_run(&j, exchange_body, NULL);
    cr_assert_gt(rail_sends(&j.r[0], 1, 1), 0, "rank 0 sent nothing to rank 1 on rail 1");
    cr_assert_eq(rail_sends(&j.r[0], 1, 2), 0, "rank 0's rail 1 carried messages to rank 2");
    cr_assert_gt(rail_sends(&j.r[0], 0, 2), 0, "rank 0 sent nothing to rank 2");
    job_end(&j);
}

/* Rank i of one "host" with rank i of another: ranks 0-2 and 1-3, as a
 * hierarchical allreduce pairs its shards on two hosts of two ranks.
 * Their first messages go to different rails (0 and 1), each pair's
 * next to the other rail. */
static int shard_body(rank_t *r)
{
    int peer = r->rank ^ 2;
    uint32_t v[2] = {(uint32_t)r->rank, 0}, got[2] = {0, 0};
    gw_request_t q[4];
    post(r, &q[0], GW_REQ_RECV, peer, &got[0], 4, 6, 0);
    post(r, &q[1], GW_REQ_SEND, peer, &v[0], 4, 6, 0);
    gw_msg_tag_t cur = {.seq = 6};
    CHECK(wait_all(r, q, 2, &cur) == GW_OK, "first exchange");
    int low = r->rank < peer ? r->rank : peer;
    CHECK(rail_sends(r, low % 2, peer) == 1 && rail_sends(r, 1 - low % 2, peer) == 0,
          "rank %d's first message to rank %d went to rails %llu/%llu, expected rail %d", r->rank,
          peer, (unsigned long long)rail_sends(r, 0, peer),
          (unsigned long long)rail_sends(r, 1, peer), low % 2);
    post(r, &q[2], GW_REQ_RECV, peer, &got[1], 4, 6, 0);
    post(r, &q[3], GW_REQ_SEND, peer, &v[1], 4, 6, 0);
    CHECK(wait_all(r, q + 2, 2, &cur) == GW_OK, "second exchange");
    CHECK(rail_sends(r, 0, peer) == 1 && rail_sends(r, 1, peer) == 1,
          "rank %d's second message to rank %d did not take the other rail", r->rank, peer);
    CHECK(got[0] == (uint32_t)peer && got[1] == 0, "rank %d got %u, %u", r->rank, got[0], got[1]);
    return 0;
}

Test(ib_rails, shard_pairs_start_on_different_rails, .timeout = 150)
{
    const char *hca[MAXR] = {rails_hca(), rails_hca(), rails_hca(), rails_hca()};
    job_t j;
    job_open_connect_hca(&j, 4, "oob", 0xfu, 1, 20000, hca);
    job_run(&j, shard_body, NULL);
    job_end(&j);
}

/* A buffer freed and mapped again at the same address: once one rail has
 * registered (and marked) the new mapping, another rail's registration of
 * the old one must not pass its cache's check. (Seen between two VMs:
 * allreduces, gathers and scatters of 1.2 MB over two rails wrote halves
 * into the old pages, with GW_IB_REG_CACHE=0 none did.) */
Test(ib_rails, a_mapping_replaced_under_one_rail_is_seen_by_all, .timeout = 150)
{
    const char *hca[MAXR] = {rails_hca(), rails_hca()};
    job_t j;
    job_open_connect_hca(&j, 2, "oob", 0x3u, 1, 20000, hca);
    cr_assert_eq(gw__ib_rails_count(j.r[0].t), 2);
    gw_ib_t *a = gw__ib_of(gw__ib_rail(j.r[0].t, 0)), *b = gw__ib_of(gw__ib_rail(j.r[0].t, 1));
    cr_assert(remap_seen_by_b(a, b),
              "rail 1 kept its registration of the old mapping after rail 0 registered the "
              "new one");
    job_end(&j);
}

/* A cut message against a receive a byte shorter or longer: some parts'
 * lengths agree, one's does not. */
typedef struct {
    size_t send_len, recv_len;
} mm_case_t;

static int mismatch_body(rank_t *r)
{
    const mm_case_t *c = r->arg;
    size_t cap = c->send_len > c->recv_len ? c->send_len : c->recv_len;
    uint8_t *buf = malloc(cap);
    memset(buf, r->rank == 0 ? 0x11 : 0xC3, cap);
    gw_request_t q;
    if (r->rank == 0)
        post(r, &q, GW_REQ_SEND, 1, buf, c->send_len, 3, 5);
    else
        post(r, &q, GW_REQ_RECV, 0, buf, c->recv_len, 3, 5);
    gw_msg_tag_t cur = {.seq = 3, .sig = 5};
    gw_status_t st = mismatch_outcome(r, &q, &cur);
    CHECK(st == GW_ERR_MISMATCH, "send %zu, receive %zu: got %s, expected GW_ERR_MISMATCH",
          c->send_len, c->recv_len, gw_status_name(st));
    for (size_t i = 0; r->rank == 1 && i < cap; i++)
        CHECK(buf[i] == 0xC3, "send %zu, receive %zu: the receive buffer was written at byte %zu",
              c->send_len, c->recv_len, i);
    free(buf);
    return 0;
}

static void mismatch(const char *cm, mm_case_t c)
{
    const char *hca[MAXR] = {rails_hca(), rails_hca()};
    job_t j;
    job_open_connect_hca(&j, 2, cm, 0, 1, 20000, hca);
    job_run(&j, mismatch_body, &c);
    job_end(&j);
}

Test(ib_rails, length_off_by_one_fails_both_ends_untouched, .timeout = 150)
{
    /* 300000 cuts into 150000 + 150000, 299999 into 150000 + 149999: the
     * first parts agree, and without the gate the first would land. */
    mismatch("oob", (mm_case_t){.send_len = 300000, .recv_len = 299999});
    mismatch("rdmacm", (mm_case_t){.send_len = 299999, .recv_len = 300000});
    /* 300001 into 150001 + 150000: the second parts agree. */
    mismatch("oob", (mm_case_t){.send_len = 300001, .recv_len = 300000});
    /* Cut on one side, whole on the other. */
    mismatch("oob", (mm_case_t){.send_len = 131072, .recv_len = 131071});
}
