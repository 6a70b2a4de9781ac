/*
 * test_select.c - per-peer transport selection and the mux transport.
 *
 * The first half tests the pure parts: GW_TRANSPORT parsing, the plan (which
 * transport carries each pair, from host ids, modes and what each rank
 * opened; it must be symmetric, or two ranks would wait on different
 * transports), its one-line description, and the host id.
 *
 * The second half forks real ranks, as test_tcp.c does, that open the mux
 * with gw__select_open() and connect it over shared memory and loopback TCP.
 * The parent relays the composite blobs and may rewrite the host id in some
 * of them: ranks {0, 1} then look like one host and {2, 3} like another, so
 * pairs inside a "host" use shared memory and pairs across use TCP, all on
 * this machine.
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

/* ---- modes ------------------------------------------------------------------ */

Test(select, mode_parse, .timeout = 10)
{
    gw_select_mode_t m;
    cr_expect_eq(gw__select_mode_parse(NULL, &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_AUTO);
    cr_expect_eq(gw__select_mode_parse("", &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_AUTO);
    cr_expect_eq(gw__select_mode_parse("AUTO", &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_AUTO);
    cr_expect_eq(gw__select_mode_parse("tcp", &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_TCP);
    cr_expect_eq(gw__select_mode_parse("Shm", &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_SHM);
    cr_expect_eq(gw__select_mode_parse("IB", &m), GW_OK);
    cr_expect_eq(m, GW_SELECT_IB);
    m = GW_SELECT_TCP;
    cr_expect_eq(gw__select_mode_parse("rdma", &m), GW_ERR_CONFIG);
    cr_expect_eq(gw__select_mode_parse("tcp,shm", &m), GW_ERR_CONFIG);
    cr_expect_eq(m, GW_SELECT_TCP, "output written on failure");
    cr_expect_str_eq(gw__select_mode_list(), "auto, tcp, shm, ib");
    cr_expect_str_eq(gw__select_mode_name(GW_SELECT_SHM), "shm");
    cr_expect_str_eq(gw__select_mode_name(GW_SELECT_IB), "ib");
    cr_expect_str_eq(gw__select_kind_name(GW_SEL_TCP), "tcp");
    cr_expect_str_eq(gw__select_kind_name(GW_SEL_IB), "ib");
}

/* ---- the plan ------------------------------------------------------------------ */

#define SHM_TCP (GW_SEL_BIT(GW_SEL_SHM) | GW_SEL_BIT(GW_SEL_TCP))

static gw_logger_t quiet_logger(void)
{
    gw_logger_t lg;
    gw__logger_init(&lg, -1);
    lg.level = GW_LOG_NONE;
    return lg;
}

Test(select, plan_same_host_is_shm_other_hosts_tcp, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[8];
    for (int r = 0; r < 8; r++)
        ranks[r] = (gw_select_rank_t){
            .host_id = r < 4 ? 111 : 222, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP};
    gw_select_kind_t route[8];
    cr_assert_eq(gw__select_plan(&lg, 2, 8, ranks, route), GW_OK);
    for (int p = 0; p < 8; p++) {
        gw_select_kind_t want = p == 2 ? GW_SEL_NONE : p < 4 ? GW_SEL_SHM : GW_SEL_TCP;
        cr_expect_eq(route[p], want, "peer %d: %d, expected %d", p, route[p], want);
    }
    char buf[128];
    gw__select_describe(route, 8, buf, sizeof(buf));
    cr_expect_str_eq(buf, "shm to ranks 0,1,3; tcp to ranks 4-7");
}

/* A cluster where only some hosts have RDMA (issue 13): hosts A (ranks
 * 0-1) and C (rank 4) opened ib, host B (ranks 2-3) did not. Pairs of RDMA
 * hosts use ib, the others tcp, and every rank with such a pair says so in
 * one WARN line naming exactly those peers; a TCP-only cluster and an
 * all-RDMA cluster say nothing. */
#define ALL_THREE (SHM_TCP | GW_SEL_BIT(GW_SEL_IB))

static char *fallback_warnings(int rank, int size, const gw_select_rank_t *ranks,
                               gw_select_kind_t *route)
{
    gw_logger_t lg = capture_logger(GW_LOG_INFO);
    cr_assert_eq(gw__select_plan(&lg, rank, size, ranks, route), GW_OK);
    gw__select_warn_fallbacks(&lg, rank, size, ranks, route);
    char *text = captured(&lg);
    fclose(lg.file);
    return text;
}

Test(select, a_fall_back_between_hosts_is_one_warning_naming_the_peers, .timeout = 10)
{
    gw_select_rank_t ranks[5];
    for (int r = 0; r < 5; r++)
        ranks[r] = (gw_select_rank_t){.host_id = r < 2   ? 1
                                                 : r < 4 ? 2
                                                         : 3,
                                      .mode = GW_SELECT_AUTO,
                                      .kinds = r == 2 || r == 3 ? SHM_TCP : ALL_THREE};
    gw_select_kind_t route[5];
    char *text = fallback_warnings(0, 5, ranks, route);
    cr_expect_eq(route[1], GW_SEL_SHM);
    cr_expect_eq(route[2], GW_SEL_TCP);
    cr_expect_eq(route[3], GW_SEL_TCP);
    cr_expect_eq(route[4], GW_SEL_IB, "two RDMA hosts must use ib");
    cr_expect_eq(count_in(text, " WARN "), 1, "expected one WARN line:\n%s", text);
    cr_expect(strstr(text, "without ib, which this rank has (their logs say why): tcp to ranks "
                           "2,3\n"),
              "rank 0's warning does not name exactly ranks 2 and 3:\n%s", text);
    free(text);

    text = fallback_warnings(3, 5, ranks, route);
    cr_expect_eq(route[2], GW_SEL_SHM);
    cr_expect_eq(count_in(text, " WARN "), 1, "expected one WARN line:\n%s", text);
    cr_expect(strstr(text,
                     "this rank has no ib (GW_DEBUG=INFO says why), which these peers on other "
                     "hosts have: tcp to ranks 0,1,4\n"),
              "rank 3's warning does not name exactly ranks 0, 1 and 4:\n%s", text);
    free(text);

    /* Rank 4 alone on its host: ib to 0 and 1, tcp to 2 and 3. */
    text = fallback_warnings(4, 5, ranks, route);
    cr_expect_eq(count_in(text, " WARN "), 1, "%s", text);
    cr_expect(strstr(text, ": tcp to ranks 2,3\n"), "%s", text);
    free(text);

    for (int r = 0; r < 5; r++)
        ranks[r].kinds = SHM_TCP;
    text = fallback_warnings(0, 5, ranks, route);
    cr_expect_eq(count_in(text, " WARN "), 0, "a TCP-only cluster is no fall back:\n%s", text);
    free(text);
    for (int r = 0; r < 5; r++)
        ranks[r].kinds = ALL_THREE;
    text = fallback_warnings(2, 5, ranks, route);
    cr_expect_eq(count_in(text, " WARN "), 0, "an all-RDMA cluster is no fall back:\n%s", text);
    free(text);
}

Test(select, plan_forced_tcp_uses_tcp_everywhere, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[3];
    for (int r = 0; r < 3; r++)
        ranks[r] = (gw_select_rank_t){
            .host_id = 5, .mode = GW_SELECT_TCP, .kinds = GW_SEL_BIT(GW_SEL_TCP)};
    gw_select_kind_t route[3];
    cr_assert_eq(gw__select_plan(&lg, 0, 3, ranks, route), GW_OK);
    cr_expect_eq(route[1], GW_SEL_TCP);
    cr_expect_eq(route[2], GW_SEL_TCP);
    char buf[64];
    gw__select_describe(route, 3, buf, sizeof(buf));
    cr_expect_str_eq(buf, "tcp to ranks 1,2");
}

Test(select, plan_forced_shm_with_remote_peer_is_config_error, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[3];
    for (int r = 0; r < 3; r++)
        ranks[r] = (gw_select_rank_t){
            .host_id = r == 2 ? 9 : 5, .mode = GW_SELECT_SHM, .kinds = GW_SEL_BIT(GW_SEL_SHM)};
    gw_select_kind_t route[3];
    cr_expect_eq(gw__select_plan(&lg, 0, 3, ranks, route), GW_ERR_CONFIG);
    cr_expect_eq(gw__select_plan(&lg, 2, 3, ranks, route), GW_ERR_CONFIG);
    /* Among the two on one host, forcing shm is fine. */
    cr_expect_eq(gw__select_plan(&lg, 0, 2, ranks, route), GW_OK);
    cr_expect_eq(route[1], GW_SEL_SHM);
    char buf[64];
    gw__select_describe(route, 2, buf, sizeof(buf));
    cr_expect_str_eq(buf, "shm to rank 1");
}

Test(select, plan_disagreeing_modes_is_config_error, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[2] = {
        {.host_id = 5, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP},
        {.host_id = 5, .mode = GW_SELECT_TCP, .kinds = GW_SEL_BIT(GW_SEL_TCP)},
    };
    gw_select_kind_t route[2];
    cr_expect_eq(gw__select_plan(&lg, 0, 2, ranks, route), GW_ERR_CONFIG);
    cr_expect_eq(gw__select_plan(&lg, 1, 2, ranks, route), GW_ERR_CONFIG);
}

Test(select, plan_without_common_transport_is_config_error, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    /* Rank 1 opened shared memory only (its network transport failed) and
     * lives on another host: nothing reaches it. */
    gw_select_rank_t ranks[2] = {
        {.host_id = 5, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP},
        {.host_id = 6, .mode = GW_SELECT_AUTO, .kinds = GW_SEL_BIT(GW_SEL_SHM)},
    };
    gw_select_kind_t route[2];
    cr_expect_eq(gw__select_plan(&lg, 0, 2, ranks, route), GW_ERR_CONFIG);
    cr_expect_eq(gw__select_plan(&lg, 1, 2, ranks, route), GW_ERR_CONFIG);
}

Test(select, plan_same_host_without_shm_falls_to_network, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[2] = {
        {.host_id = 5, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP},
        {.host_id = 5, .mode = GW_SELECT_AUTO, .kinds = GW_SEL_BIT(GW_SEL_TCP)},
    };
    gw_select_kind_t route[2];
    cr_assert_eq(gw__select_plan(&lg, 0, 2, ranks, route), GW_OK);
    cr_expect_eq(route[1], GW_SEL_TCP);
    cr_assert_eq(gw__select_plan(&lg, 1, 2, ranks, route), GW_OK);
    cr_expect_eq(route[0], GW_SEL_TCP);
}

/* Whatever the hosts and opened transports, both ends of a pair agree. */
Test(select, plan_is_symmetric, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    enum { N = 7 };
    uint32_t seed = 12345;
    for (int trial = 0; trial < 500; trial++) {
        gw_select_rank_t ranks[N];
        for (int r = 0; r < N; r++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t kinds = (seed >> 16) % 4 == 0 ? GW_SEL_BIT(GW_SEL_TCP) : SHM_TCP;
            ranks[r] = (gw_select_rank_t){
                .host_id = (seed >> 8) % 3, .mode = GW_SELECT_AUTO, .kinds = kinds};
        }
        gw_select_kind_t route[N][N];
        for (int r = 0; r < N; r++)
            cr_assert_eq(gw__select_plan(&lg, r, N, ranks, route[r]), GW_OK);
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++) {
                cr_assert_eq(route[a][b], route[b][a], "trial %d: %d->%d %d, %d->%d %d", trial, a,
                             b, route[a][b], b, a, route[b][a]);
                if (a != b && route[a][b] == GW_SEL_SHM)
                    cr_assert_eq(ranks[a].host_id, ranks[b].host_id);
            }
    }
}

/* Hosts with RDMA: ib between hosts, shared memory inside one, and ib
 * preferred over TCP where a rank somehow has both. */
Test(select, plan_ib_between_hosts_shm_inside, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    const uint32_t shm_ib = GW_SEL_BIT(GW_SEL_SHM) | GW_SEL_BIT(GW_SEL_IB);
    gw_select_rank_t ranks[4];
    for (int r = 0; r < 4; r++)
        ranks[r] =
            (gw_select_rank_t){.host_id = r < 2 ? 7 : 8, .mode = GW_SELECT_AUTO, .kinds = shm_ib};
    ranks[3].kinds |= GW_SEL_BIT(GW_SEL_TCP);
    gw_select_kind_t route[4];
    cr_assert_eq(gw__select_plan(&lg, 0, 4, ranks, route), GW_OK);
    cr_expect_eq(route[1], GW_SEL_SHM);
    cr_expect_eq(route[2], GW_SEL_IB);
    cr_expect_eq(route[3], GW_SEL_IB);
    char buf[64];
    gw__select_describe(route, 4, buf, sizeof(buf));
    cr_expect_str_eq(buf, "shm to rank 1; ib to ranks 2,3");
    cr_assert_eq(gw__select_plan(&lg, 3, 4, ranks, route), GW_OK);
    cr_expect_eq(route[0], GW_SEL_IB);
    cr_expect_eq(route[2], GW_SEL_SHM);
}

Test(select, plan_forced_ib_on_one_host_is_ib, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    gw_select_rank_t ranks[3];
    for (int r = 0; r < 3; r++)
        ranks[r] =
            (gw_select_rank_t){.host_id = 5, .mode = GW_SELECT_IB, .kinds = GW_SEL_BIT(GW_SEL_IB)};
    gw_select_kind_t route[3];
    cr_assert_eq(gw__select_plan(&lg, 1, 3, ranks, route), GW_OK);
    cr_expect_eq(route[0], GW_SEL_IB);
    cr_expect_eq(route[2], GW_SEL_IB);
}

/* In auto mode a rank with RDMA offers TCP too: a host whose RDMA port
 * works and one that fell back to TCP meet over TCP, while two RDMA hosts
 * still take ib (issue 13: a partly-RDMA cluster was refused). */
Test(select, plan_ib_host_and_tcp_host_meet_over_tcp, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    const uint32_t all = GW_SEL_BIT(GW_SEL_SHM) | GW_SEL_BIT(GW_SEL_IB) | GW_SEL_BIT(GW_SEL_TCP);
    gw_select_rank_t ranks[3] = {
        {.host_id = 1, .mode = GW_SELECT_AUTO, .kinds = all},
        {.host_id = 2, .mode = GW_SELECT_AUTO, .kinds = SHM_TCP},
        {.host_id = 3, .mode = GW_SELECT_AUTO, .kinds = all},
    };
    gw_select_kind_t route[3];
    cr_assert_eq(gw__select_plan(&lg, 0, 3, ranks, route), GW_OK);
    cr_expect_eq(route[1], GW_SEL_TCP);
    cr_expect_eq(route[2], GW_SEL_IB);
    cr_assert_eq(gw__select_plan(&lg, 1, 3, ranks, route), GW_OK);
    cr_expect_eq(route[0], GW_SEL_TCP);
    cr_expect_eq(route[2], GW_SEL_TCP);
    /* Without TCP on the RDMA host there is nothing in common: an error. */
    ranks[0].kinds = GW_SEL_BIT(GW_SEL_SHM) | GW_SEL_BIT(GW_SEL_IB);
    cr_expect_eq(gw__select_plan(&lg, 1, 3, ranks, route), GW_ERR_CONFIG);
}

Test(select, describe_ranges, .timeout = 10)
{
    gw_select_kind_t route[10] = {GW_SEL_TCP, GW_SEL_TCP, GW_SEL_TCP, GW_SEL_NONE, GW_SEL_SHM,
                                  GW_SEL_SHM, GW_SEL_TCP, GW_SEL_SHM, GW_SEL_TCP,  GW_SEL_TCP};
    char buf[128];
    gw__select_describe(route, 10, buf, sizeof(buf));
    cr_expect_str_eq(buf, "shm to ranks 4,5,7; tcp to ranks 0-2,6,8,9");
    char small[12];
    gw__select_describe(route, 10, small, sizeof(small));
    cr_expect(strlen(small) < sizeof(small), "not truncated: %s", small);
}

/* ---- host identity ------------------------------------------------------------------ */

Test(select, host_id_is_stable, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    uint64_t a = 0, b = 1;
    cr_assert_eq(gw__host_id(&lg, &a), GW_OK);
    cr_assert_eq(gw__host_id(&lg, &b), GW_OK);
    cr_expect_eq(a, b);
    cr_expect_neq(a, 0);
}

/* A process in another network namespace is another host. */
Test(select, host_id_differs_in_another_network_namespace, .timeout = 10)
{
    gw_logger_t lg = quiet_logger();
    uint64_t here = 0;
    cr_assert_eq(gw__host_id(&lg, &here), GW_OK);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        close(sv[0]);
        uint64_t there = 0;
        int ok = unshare(CLONE_NEWNET) == 0 && gw__host_id(&lg, &there) == GW_OK;
        uint8_t msg[9] = {(uint8_t)ok};
        memcpy(msg + 1, &there, 8);
        _exit(write(sv[1], msg, sizeof(msg)) == (ssize_t)sizeof(msg) ? 0 : 1);
    }
    close(sv[1]);
    uint8_t msg[9] = {0};
    ssize_t n = read(sv[0], msg, sizeof(msg));
    close(sv[0]);
    waitpid(pid, NULL, 0);
    cr_assert_eq(n, (ssize_t)sizeof(msg));
    if (!msg[0])
        cr_skip_test("cannot create a network namespace here (needs CAP_SYS_ADMIN)");
    uint64_t there;
    memcpy(&there, msg + 1, 8);
    cr_expect_neq(there, here);
}

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
