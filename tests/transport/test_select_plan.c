/*
 * test_select_plan.c - the pure parts of per-peer transport selection:
 * GW_TRANSPORT parsing, the plan (which transport carries each pair, from
 * host ids, modes and what each rank opened; it must be symmetric, or two
 * ranks would wait on different transports), the fall-back warnings, the
 * plan's one-line description, and the host id. The mux between real
 * processes is test_select.c.
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
