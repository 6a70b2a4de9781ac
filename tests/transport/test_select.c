/*
 * test_select.c - the mux transport between real processes (the plan it
 * follows is tested on its own in test_select_plan.c).
 *
 * The tests fork real ranks, as test_tcp.c does, that open the mux with
 * gw__select_open() and connect it over shared memory and loopback TCP.
 * The parent relays the composite blobs and may rewrite the host id in some
 * of them: ranks {0, 1} then look like one host and {2, 3} like another, so
 * pairs inside a "host" use shared memory and pairs across use TCP, all on
 * this machine. Last, the fall-back from RDMA where this machine has none.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "common/clock.h"
#include "common/log.h"
#include "support/log_capture.h"
#include "transport/host_id.h"
#include "transport/select.h"
#include "transport/transport.h"
#include "transport_test_util.h"

#define SHM_TCP (GW_SEL_BIT(GW_SEL_SHM) | GW_SEL_BIT(GW_SEL_TCP))

/* ---- the mux between real processes -------------------------------------------------- */

#define MAX_RANKS 4
#define MIB ((size_t)1024 * 1024)
#define JOB_DEADLINE_MS 12000

typedef struct job {
    int n;
    gw_select_mode_t mode[MAX_RANKS];
    int host[MAX_RANKS]; /* the parent rewrites host ids: equal numbers, one host */
    int fake_hosts;
    int bad_magic_rank; /* -1, or a rank whose blob the parent breaks */
    rank_fn fn;
    const void *arg;
    const char *want_name; /* the transport's name after unwrap */
    int expect_connect[MAX_RANKS];
    uint8_t job_id[16];
} job_t;

static int rank_main(job_t *j, int rank, int fd)
{
    gw_logger_t lg;
    gw__logger_init(&lg, rank);
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = rank;
    pr.size = j->n;
    pr.log = &lg;
    pr.timeout_ms = 5000;
    pr.nsocks = 2;
    memcpy(pr.job_id, j->job_id, sizeof(pr.job_id));
    struct sockaddr_in *in = (struct sockaddr_in *)&pr.default_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pr.default_addr_len = sizeof(*in);

    uint8_t mine[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    CHECK_ST(gw__select_open(&pr, j->mode[rank], &t, mine), GW_OK);
    CHECK(strcmp(t->name, "mux") == 0, "name before connect: %s", t->name);
    uint8_t *all = exchange_blobs(fd, mine, j->n);
    CHECK(all, "exchanging addresses with the parent");
    gw_status_t st = t->ops->connect(t, all);
    free(all);
    CHECK(st == (gw_status_t)j->expect_connect[rank], "connect returned %s, expected %s",
          gw_status_name(st), gw_status_name((gw_status_t)j->expect_connect[rank]));
    if (st != GW_OK) {
        t->ops->close(t);
        return 0;
    }
    t = gw__select_unwrap(t);
    CHECK(strcmp(t->name, j->want_name) == 0, "transport %s, expected %s", t->name, j->want_name);
    int rc = j->fn ? j->fn(t, rank, j->n, j->arg) : 0;
    t->ops->close(t);
    gw__logger_fini(&lg);
#if defined(__SANITIZE_ADDRESS__)
    CHECK(__lsan_do_recoverable_leak_check() == 0, "memory leaked (see the report above)");
#endif
    return rc;
}

static int rank_main_of(void *job, int rank, int fd) { return rank_main(job, rank, fd); }

/* The parent rewrites host ids (fake hosts) and breaks a blob's magic. */
static void tamper_of(void *job, uint8_t *all)
{
    job_t *j = job;
    for (int r = 0; r < j->n; r++) {
        uint8_t *b = all + r * GW_TRANSPORT_ADDR_MAX;
        if (j->fake_hosts) {
            uint64_t id = 0x7e57000000000000ull + (uint64_t)j->host[r];
            memcpy(b + GW_SELECT_ADDR_HOST_OFF, &id, 8);
        }
        if (r == j->bad_magic_rank)
            b[0] ^= 0xff;
    }
}

static void run_job(job_t *j)
{
    cr_assert_eq(getrandom(j->job_id, sizeof(j->job_id), 0), (ssize_t)sizeof(j->job_id));
    ranks_run_t rr = {.n = j->n,
                      .deadline_ms = JOB_DEADLINE_MS,
                      .job = j,
                      .rank_main = rank_main_of,
                      .tamper = tamper_of};
    fork_ranks(&rr);
    expect_ranks_ok(&rr, -1);
}

static job_t job(int n, gw_select_mode_t mode, rank_fn fn, const char *want_name)
{
    job_t j;
    memset(&j, 0, sizeof(j));
    j.n = n;
    for (int r = 0; r < MAX_RANKS; r++)
        j.mode[r] = mode;
    j.fn = fn;
    j.want_name = want_name;
    j.bad_magic_rank = -1;
    return j;
}

/* Every rank sends a small and a large message to every other rank, and
 * then everyone passes 6 MiB around the ring at once, through a mix of
 * shared-memory and TCP links. */
static int body_traffic(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    enum { NM = 2 };
    static const size_t lens[NM] = {777, 700 * 1024 + 5};
    gw_request_t reqs[2 * MAX_RANKS * NM + 2];
    gw_request_t *ptrs[2 * MAX_RANKS * NM + 2];
    uint8_t *bufs[2 * MAX_RANKS * NM + 2];
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
    size_t big = 6 * MIB;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    bufs[n] = malloc(big);
    CHECK(bufs[n], "malloc");
    fill(bufs[n], big, rank, right, 9);
    make_req(&reqs[n], GW_REQ_SEND, right, 9, 3, bufs[n], big);
    CHECK_ST(t->ops->isend(t, &reqs[n]), GW_OK);
    ptrs[n] = &reqs[n];
    n++;
    bufs[n] = malloc(big);
    CHECK(bufs[n], "malloc");
    make_req(&reqs[n], GW_REQ_RECV, left, 9, 3, bufs[n], big);
    CHECK_ST(t->ops->irecv(t, &reqs[n]), GW_OK);
    ptrs[n] = &reqs[n];
    n++;
    CHECK_ST(wait_all(t, ptrs, n, NULL, 8000), GW_OK);
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

Test(select, mux_two_fake_hosts_is_shm_plus_tcp, .timeout = 30)
{
    job_t j = job(4, GW_SELECT_AUTO, body_traffic, "shm+tcp");
    j.fake_hosts = 1;
    j.host[0] = j.host[1] = 0;
    j.host[2] = j.host[3] = 1;
    run_job(&j);
}

/* Host ids 0,1,0,1: the ring alternates between TCP and shared memory. */
Test(select, mux_interleaved_hosts, .timeout = 30)
{
    job_t j = job(4, GW_SELECT_AUTO, body_traffic, "shm+tcp");
    j.fake_hosts = 1;
    j.host[1] = j.host[3] = 1;
    run_job(&j);
}

Test(select, auto_on_one_host_is_plain_shm, .timeout = 30)
{
    job_t j = job(3, GW_SELECT_AUTO, body_traffic, "shm");
    run_job(&j);
}

Test(select, auto_on_separate_hosts_is_plain_tcp, .timeout = 30)
{
    job_t j = job(3, GW_SELECT_AUTO, body_traffic, "tcp");
    j.fake_hosts = 1;
    j.host[1] = 1;
    j.host[2] = 2;
    run_job(&j);
}

Test(select, forced_tcp_on_one_host, .timeout = 30)
{
    job_t j = job(3, GW_SELECT_TCP, body_traffic, "tcp");
    run_job(&j);
}

Test(select, forced_shm, .timeout = 30)
{
    job_t j = job(2, GW_SELECT_SHM, body_traffic, "shm");
    run_job(&j);
}

Test(select, forced_shm_across_hosts_is_config_error, .timeout = 30)
{
    job_t j = job(3, GW_SELECT_SHM, NULL, "shm");
    j.fake_hosts = 1;
    j.host[2] = 1;
    for (int r = 0; r < 3; r++)
        j.expect_connect[r] = GW_ERR_CONFIG;
    run_job(&j);
}

Test(select, disagreeing_modes_is_config_error, .timeout = 30)
{
    job_t j = job(3, GW_SELECT_AUTO, NULL, "shm");
    j.mode[1] = GW_SELECT_TCP;
    for (int r = 0; r < 3; r++)
        j.expect_connect[r] = GW_ERR_CONFIG;
    run_job(&j);
}

Test(select, garbage_blob_is_protocol_error, .timeout = 30)
{
    job_t j = job(2, GW_SELECT_AUTO, NULL, "shm");
    j.bad_magic_rank = 1;
    for (int r = 0; r < 2; r++)
        j.expect_connect[r] = GW_ERR_PROTOCOL;
    run_job(&j);
}

/* Rank 0 aborts with a status of its own: rank 1 (shared memory) and ranks
 * 2 and 3 (TCP) all fail with that status. */
static int body_abort(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    uint8_t buf[64];
    if (rank == 0) {
        usleep(100 * 1000);
        CHECK_ST(gw__transport_abort(t, GW_ERR_TIMEOUT), GW_OK);
        gw_request_t r;
        make_req(&r, GW_REQ_SEND, 1, 1, 1, buf, sizeof(buf));
        CHECK_ST(t->ops->isend(t, &r), GW_ERR_ABORTED);
        usleep(300 * 1000);
        return 0;
    }
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *one[] = {&r};
    CHECK_ST(wait_all(t, one, 1, NULL, 5000), GW_ERR_TIMEOUT);
    (void)size;
    return 0;
}

Test(select, abort_reaches_shm_and_tcp_peers, .timeout = 30)
{
    job_t j = job(4, GW_SELECT_AUTO, body_abort, "shm+tcp");
    j.fake_hosts = 1;
    j.host[2] = j.host[3] = 1;
    run_job(&j);
}

/* Rank 3 dies: rank 2 (its shared-memory peer) and rank 0 (a TCP peer
 * waiting for it) fail with GW_ERR_REMOTE; the mux then aborts its other
 * transport, so rank 1, waiting on rank 0 over shared memory, fails too
 * instead of hanging. */
static int body_death(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    (void)size;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 3) {
        usleep(100 * 1000);
        _exit(0);
    }
    int from = rank == 1 ? 0 : 3;
    make_req(&r, GW_REQ_RECV, from, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *one[] = {&r};
    gw_status_t st = wait_all(t, one, 1, NULL, 6000);
    CHECK(st == GW_ERR_REMOTE || (rank == 1 && st == GW_ERR_ABORTED), "rank %d: %s", rank,
          gw_status_name(st));
    return 0;
}

Test(select, death_over_tcp_breaks_the_shm_side_too, .timeout = 30)
{
    job_t j = job(4, GW_SELECT_AUTO, body_death, "shm+tcp");
    j.fake_hosts = 1;
    j.host[2] = j.host[3] = 1;
    run_job(&j);
}

/* ---- falling back from RDMA -------------------------------------------------------------- */

static gw_transport_params_t loopback_params(const gw_logger_t *lg)
{
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = 0;
    pr.size = 2;
    pr.log = lg;
    pr.timeout_ms = 2000;
    pr.nsocks = 1;
    struct sockaddr_in *in = (struct sockaddr_in *)&pr.default_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pr.default_addr_len = sizeof(*in);
    return pr;
}

/* The transports a composite blob announces, as GW_SEL_BIT()s. */
static uint32_t blob_kinds(const uint8_t *b)
{
    uint32_t kinds = 0;
    size_t off = GW_SELECT_ADDR_HDR;
    for (int e = 0; e < b[6]; e++) {
        uint16_t len;
        memcpy(&len, b + off + 2, 2);
        kinds |= GW_SEL_BIT(b[off]);
        off += 4 + len;
    }
    return kinds;
}

/* Whether the ib transport opens here on its own (a machine with an active
 * RDMA port): then there is no fallback to see. */
static int rdma_usable_here(void)
{
    gw_logger_t lg = capture_logger(GW_LOG_NONE);
    gw_transport_params_t pr = loopback_params(&lg);
    gw_transport_t *t = NULL;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw_status_t st = gw__ib_transport_ops.open(&pr, &t, blob);
    if (st == GW_OK)
        t->ops->close(t);
    fclose(lg.file);
    return st == GW_OK;
}

/* No RDMA here (no device, or no libibverbs): auto mode opens TCP as the
 * network transport and says why in one INFO line, not a warning. */
Test(select, auto_without_rdma_falls_back_to_tcp_with_one_info_line, .timeout = 30)
{
    unsetenv("GW_TRANSPORT");
    unsetenv("GW_IB_HCA");
    if (rdma_usable_here())
        cr_skip_test("this machine has a usable RDMA port: nothing falls back");
    gw_logger_t lg = capture_logger(GW_LOG_INFO);
    gw_transport_params_t pr = loopback_params(&lg);
    gw_transport_t *t = NULL;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw_status_t st = gw__select_open(&pr, GW_SELECT_AUTO, &t, blob);
    char *text = captured(&lg);
    cr_assert_eq(st, GW_OK, "auto mode failed without RDMA: %s\n%s", gw_status_name(st), text);
    uint32_t kinds = blob_kinds(blob);
    cr_expect(kinds & GW_SEL_BIT(GW_SEL_TCP), "TCP is not in the blob (kinds 0x%x)", kinds);
    cr_expect(!(kinds & GW_SEL_BIT(GW_SEL_IB)), "ib is in the blob (kinds 0x%x)", kinds);
    cr_expect_eq(count_in(text, " ib INFO not using RDMA"), 1, "expected one INFO line:\n%s", text);
    cr_expect_eq(count_in(text, " ib ERROR "), 0, "%s", text);
    cr_expect_eq(count_in(text, " WARN "), 0, "a fallback to TCP is no warning:\n%s", text);
    t->ops->close(t);
    free(text);
    fclose(lg.file);
}

/* The same with the choice forced (GW_TRANSPORT=ib, here through the mode
 * alone, as a gw_config_t field would ask): an error saying why, and no
 * transport at all. */
Test(select, forced_ib_without_rdma_is_an_error_saying_why, .timeout = 30)
{
    unsetenv("GW_TRANSPORT");
    unsetenv("GW_IB_HCA");
    if (rdma_usable_here())
        cr_skip_test("this machine has a usable RDMA port: GW_TRANSPORT=ib works");
    gw_logger_t lg = capture_logger(GW_LOG_WARN);
    gw_transport_params_t pr = loopback_params(&lg);
    gw_transport_t *t = NULL;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw_status_t st = gw__select_open(&pr, GW_SELECT_IB, &t, blob);
    char *text = captured(&lg);
    cr_expect(st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED, "open returned %s\n%s",
              gw_status_name(st), text);
    cr_expect_eq(count_in(text, " ib ERROR GW_TRANSPORT=ib, but RDMA is not usable here: "), 1,
                 "expected one ERROR line saying why:\n%s", text);
    cr_expect(strstr(text, "no RDMA device") || strstr(text, "libibverbs"),
              "the error does not say what is missing:\n%s", text);
    free(text);
    fclose(lg.file);
}

/* Ranks on separate hosts with no RDMA anywhere: auto mode connects them
 * over TCP (the unwrapped transport is plain tcp), end to end. */
Test(select, auto_without_rdma_connects_hosts_over_tcp, .timeout = 30)
{
    unsetenv("GW_IB_HCA");
    if (rdma_usable_here())
        cr_skip_test("this machine has a usable RDMA port: the hosts would use ib");
    job_t j = job(2, GW_SELECT_AUTO, body_traffic, "tcp");
    j.fake_hosts = 1;
    j.host[1] = 1;
    run_job(&j);
}

/* gw__select_links is what every rank's plan gives its pairs, all of them
 * together, split by same host or not: checked against the plans of every
 * rank on random jobs (hosts 1-3, each rank with its own set of opened
 * transports, TCP always among them so that every pair has one). */
Test(select, links_are_the_union_of_every_plan, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    unsigned seed = 12345;
    for (int job = 0; job < 2000; job++) {
        seed = seed * 1103515245u + 12345u;
        int n = 1 + (int)((seed >> 16) % 9);
        gw_select_rank_t ranks[9];
        for (int r = 0; r < n; r++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t kinds = GW_SEL_BIT(GW_SEL_TCP);
            if ((seed >> 16) & 1)
                kinds |= GW_SEL_BIT(GW_SEL_SHM);
            if ((seed >> 17) & 1)
                kinds |= GW_SEL_BIT(GW_SEL_IB);
            ranks[r] = (gw_select_rank_t){
                .host_id = 1 + (seed >> 18) % 3, .mode = GW_SELECT_AUTO, .kinds = kinds};
        }
        uint32_t want_intra = 0, want_inter = 0;
        for (int r = 0; r < n; r++) {
            gw_select_kind_t route[9];
            cr_assert_eq(gw__select_plan(&lg, r, n, ranks, route), GW_OK);
            for (int p = 0; p < n; p++)
                if (p != r)
                    *(ranks[p].host_id == ranks[r].host_id ? &want_intra : &want_inter) |=
                        GW_SEL_BIT(route[p]);
        }
        uint32_t intra = 99, inter = 99;
        cr_assert_eq(gw__select_links(n, ranks, &intra, &inter), GW_OK);
        cr_assert_eq(intra, want_intra, "job %d (%d ranks): intra %#x, the plans %#x", job, n,
                     intra, want_intra);
        cr_assert_eq(inter, want_inter, "job %d (%d ranks): inter %#x, the plans %#x", job, n,
                     inter, want_inter);
    }
}

/* The cases the cost model's figures come from, by name. */
Test(select, links_of_one_host_two_hosts_and_forced_tcp, .timeout = 10)
{
    gw_select_rank_t ranks[4];
    uint32_t intra, inter;
    for (int r = 0; r < 4; r++)
        ranks[r] = (gw_select_rank_t){.host_id = 7, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP};
    cr_assert_eq(gw__select_links(4, ranks, &intra, &inter), GW_OK);
    cr_expect_eq(intra, GW_SEL_BIT(GW_SEL_SHM));
    cr_expect_eq(inter, 0);
    ranks[3].host_id = 8; /* the lone rank of its host sees TCP alone */
    cr_assert_eq(gw__select_links(4, ranks, &intra, &inter), GW_OK);
    cr_expect_eq(intra, GW_SEL_BIT(GW_SEL_SHM));
    cr_expect_eq(inter, GW_SEL_BIT(GW_SEL_TCP));
    for (int r = 0; r < 4; r++)
        ranks[r] = (gw_select_rank_t){
            .host_id = 7, .mode = GW_SELECT_TCP, .kinds = GW_SEL_BIT(GW_SEL_TCP)};
    cr_assert_eq(gw__select_links(4, ranks, &intra, &inter), GW_OK);
    cr_expect_eq(intra, GW_SEL_BIT(GW_SEL_TCP));
    cr_expect_eq(inter, 0);
    cr_assert_eq(gw__select_links(1, ranks, &intra, &inter), GW_OK);
    cr_expect_eq(intra | inter, 0);
}
