/*
 * test_bootstrap_progress.c - set-up that talks. A rank that cannot reach
 * its root, and a root whose ranks do not come, say so at the default log
 * level GW_JOIN_PROGRESS_MS after they started (10 s by default; 1 s here,
 * so that the tests take seconds) and again three times as long later,
 * naming the root address and the missing ranks, and give up at
 * GW_JOIN_TIMEOUT_MS, not at the collectives' GW_TIMEOUT_MS (300 s by
 * default). Before, both waited the whole GW_TIMEOUT_MS in silence, and
 * these tests ran into their limit.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

static char logpath[64];

static void setup(void)
{
    snprintf(logpath, sizeof(logpath), "/tmp/gw-bs-progress-%d.log", (int)getpid());
    unlink(logpath);
    setenv("GW_DEBUG_FILE", logpath, 1);
    unsetenv("GW_DEBUG"); /* the default level: WARN */
    unsetenv("GW_TIMEOUT_MS");
    setenv("GW_JOB_TOKEN", "bootstrap-progress-test-token", 1);
    setenv("GW_JOIN_TIMEOUT_MS", "6000", 1);
    /* Lines at 1 s and 4 s, two seconds before the join gives up. */
    setenv("GW_JOIN_PROGRESS_MS", "1000", 1);
    setenv("GW_TRANSPORT", "tcp", 1);
}

static void teardown(void) { unlink(logpath); }

/* A loopback socket bound to a free port and not listening: connections to
 * it are refused for as long as it stays open. */
static int bound_port(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* How many lines of the log hold what. */
static int count_lines(const char *log, const char *what)
{
    int n = 0;
    for (const char *p = log; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static char *slurp(void)
{
    FILE *f = fopen(logpath, "r");
    char *buf = calloc(1, 1 << 16);
    if (f) {
        size_t n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = '\0';
        fclose(f);
    }
    return buf;
}

/* rank of size against root; the status, the seconds it took and the log. */
static gw_status_t init_alone(int rank, int size, const char *root, double *secs, char **log)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = size;
    cfg.root = root;
    gw_comm_t *comm = NULL;
    double t0 = now_s();
    gw_status_t st = gw_comm_init(&cfg, &comm);
    *secs = now_s() - t0;
    if (comm)
        gw_comm_destroy(comm);
    *log = slurp();
    return st;
}

Test(bootstrap_progress, a_rank_that_cannot_reach_the_root_says_so, .init = setup, .fini = teardown,
     .timeout = 60)
{
    int port, fd = bound_port(&port);
    char root[64], want[256];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    double secs;
    char *log;
    gw_status_t st = init_alone(1, 2, root, &secs, &log);
    close(fd);
    cr_expect_neq(st, GW_OK);
    cr_expect_lt(secs, 30.0, "GW_JOIN_TIMEOUT_MS=6000 took %.1f s", secs);
    snprintf(want, sizeof(want), " WARN rank 1 still cannot reach the root %s", root);
    cr_expect_geq(count_lines(log, want), 2, "not two progress lines \"%s\":\n%s", want, log);
    cr_expect(strstr(log, "is the root address (GW_ROOT, MASTER_ADDR) the same on every rank"),
              "%s", log);
    free(log);
}

Test(bootstrap_progress, a_root_names_the_missing_ranks, .init = setup, .fini = teardown,
     .timeout = 60)
{
    int port, fd = bound_port(&port);
    close(fd); /* free again, for the root to listen on */
    char root[64], want[256];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    double secs;
    char *log;
    gw_status_t st = init_alone(0, 3, root, &secs, &log);
    cr_expect_eq(st, GW_ERR_TIMEOUT, "%s", gw_status_name(st));
    cr_expect_lt(secs, 30.0, "GW_JOIN_TIMEOUT_MS=6000 took %.1f s", secs);
    cr_expect_geq(count_lines(log, " WARN rank 0 has waited "), 2, "not two progress lines:\n%s",
                  log);
    snprintf(want, sizeof(want),
             "at the root %s: 1 of 3 ranks joined (rank 0 included); "
             "missing ranks 1, 2",
             root);
    cr_expect(strstr(log, want), "no progress line \"%s\":\n%s", want, log);
    free(log);
}
