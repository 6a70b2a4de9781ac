/*
 * test_hosts.c - gradwire over emulated hosts: scripts/cluster.sh brings up
 * 4 or 8 network namespaces joined by a bridge, each link shaped to 1 Gbit/s,
 * and `gradwire launch --hosts PREFIX` runs the ranks in them. Every
 * collective and algorithm is checked as in the loopback tests
 * (worker_collectives compares each result with an exact serial reference,
 * and all ranks must end with bitwise identical outputs), now with every
 * byte crossing a veth, a bridge and two token buckets.
 *
 * Needs root (namespaces, tc); skipped with the reason otherwise. Each test
 * brings up its own cluster under a prefix unique to this test run and the
 * fixture's fini takes it down, also when an assertion failed; a report hook
 * in the runner process takes it down once more in case the test process
 * was killed (timeout, crash) before its fini could run.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/tuning.h"
#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"
#define WORKER GW_BUILD_DIR "/tests/worker_collectives"
#define PROBE GW_BUILD_DIR "/tests/worker_launch_probe"
#define CLUSTER GW_SOURCE_DIR "/scripts/cluster.sh"
#define RATE "1gbit"

/* Sanitizers make every rank several times slower (and the reference
 * computation of worker_collectives most of all): scale the deadlines. */
#if defined(__SANITIZE_ADDRESS__)
#define SLOW 5
#else
#define SLOW 1
#endif

/* The cluster of this test process: the runner's pid makes it unique to the
 * run (the report hook below rebuilds the same names from its own pid), the
 * letter tells the 4-host from the 8-host cluster. Prefixes must not end
 * with a digit (cluster.sh). */
static char prefix[64];
static int cluster_up;

static void make_prefix(char *buf, size_t cap, pid_t runner, int nhosts)
{
    snprintf(buf, cap, "gwt%d%c", (int)runner, nhosts <= 4 ? 'a' : 'b');
}

static int run_quiet(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Skip (with the reason) unless this process may create namespaces. */
static void need_netns(void)
{
    if (geteuid() != 0)
        cr_skip_test("emulated hosts need root (network namespaces and tc)");
    if (run_quiet("command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1") != 0)
        cr_skip_test("emulated hosts need ip and tc (Debian package iproute2)");
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "ip netns add gwtprobe%dx >/dev/null 2>&1 && ip netns del gwtprobe%dx", (int)getpid(),
             (int)getpid());
    if (run_quiet(cmd) != 0)
        cr_skip_test("cannot create network namespaces here");
}

static void up(int nhosts)
{
    need_netns();
    make_prefix(prefix, sizeof(prefix), getppid(), nhosts);
    char n[16];
    snprintf(n, sizeof(n), "%d", nhosts);
    char *argv[] = {CLUSTER, "up", n, "--prefix", prefix, "--rate", RATE, NULL};
    cluster_up = 1; /* from here on fini must take down whatever exists */
    run_result_t r = run_cmd(argv, NULL, 60);
    cr_assert(r.exited && r.status == 0, "cluster.sh up %d failed:\n%s", nhosts, r.output);
    free(r.output);
}

static void down(void)
{
    if (!cluster_up)
        return;
    char *argv[] = {CLUSTER, "down", "--prefix", prefix, NULL};
    run_result_t r = run_cmd(argv, NULL, 60);
    if (!r.exited || r.status != 0)
        fprintf(stderr, "test_hosts: cluster.sh down --prefix %s failed:\n%s", prefix, r.output);
    free(r.output);
    cluster_up = 0;
}

static void fini_cluster(void) { down(); }

/* In the runner: take down what a test process that was killed (timeout,
 * crash) left behind. cluster.sh down also kills the ranks still running
 * in the namespaces. */
static void down_leftovers(void)
{
    if (geteuid() != 0)
        return;
    for (int nh = 4; nh <= 8; nh += 4) {
        char p[64], cmd[512];
        make_prefix(p, sizeof(p), getpid(), nh);
        snprintf(cmd, sizeof(cmd), "'%s' down --prefix %s >/dev/null 2>&1", CLUSTER, p);
        run_quiet(cmd);
    }
}

ReportHook(TEST_CRASH)(struct criterion_test_stats *stats)
{
    (void)stats;
    down_leftovers();
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    down_leftovers();
}

/* Run worker_collectives as n ranks on the cluster (k per host when k > 0)
 * and check that it passed and that every rank's outputs are identical. */
static void run_job(int n, int k, const char *counts, const char *algos, const char *dtypes,
                    const char *ops, const char *colls, const char *nsocks, double timeout)
{
    char *dir = make_tmpdir("hosts");
    cr_assert_not_null(dir);
    char nstr[16], kstr[16], tstr[32];
    snprintf(nstr, sizeof(nstr), "%d", n);
    snprintf(kstr, sizeof(kstr), "%d", k);
    snprintf(tstr, sizeof(tstr), "%.0f", timeout * SLOW - 5);
    char *argv[20];
    int a = 0;
    argv[a++] = LAUNCHER;
    argv[a++] = "launch";
    argv[a++] = "--hosts";
    argv[a++] = prefix;
    argv[a++] = "-n";
    argv[a++] = nstr;
    if (k > 0) {
        argv[a++] = "--ranks-per-host";
        argv[a++] = kstr;
    }
    argv[a++] = "--timeout"; /* the launcher stops the ranks before we give up */
    argv[a++] = tstr;
    argv[a++] = "--";
    argv[a++] = WORKER;
    argv[a++] = dir;
    argv[a++] = (char *)counts;
    argv[a++] = (char *)algos;
    argv[a++] = (char *)dtypes;
    argv[a++] = (char *)ops;
    argv[a++] = (char *)colls;
    argv[a] = NULL;
    char nsock_env[64];
    snprintf(nsock_env, sizeof(nsock_env), "GW_NSOCKS=%s", nsocks);
    /* Small chunks send even the small counts through many pipeline steps. */
    char *env[] = {nsock_env, "GW_CHUNK_BYTES=8192", "GW_TIMEOUT_MS=60000", NULL};
    timeout *= SLOW;
    run_result_t r = run_cmd(argv, env, timeout);
    cr_assert(!r.timed_out, "job of %d ranks on %s timed out after %.0f s:\n%s", n, prefix, timeout,
              r.output);
    cr_assert(r.exited && r.status == 0, "job of %d ranks on %s failed (status %d):\n%s", n, prefix,
              r.status, r.output);
    free(expect_ranks_agree(dir, n, 0));
    free(r.output);
    remove_tree(dir);
    free(dir);
}

TestSuite(hosts, .fini = fini_cluster);

/* 4 hosts: every collective, algorithm, dtype and op on small counts. */
Test(hosts, four_hosts_every_collective, .timeout = 120 * SLOW)
{
    up(4);
    run_job(4, 0, "0,1,7,1023", "all", "all", "all", "all", "2", 100);
}

/* The optimised build only: under the sanitizers the large counts and the
 * eight hosts would run the code the tests around them run (the chunking
 * of large counts under ASan is test_collectives_tcp's), ten times slower
 * and alone on the machine. */
#if !defined(__SANITIZE_ADDRESS__)
/* 2^20 + 3 elements through every allreduce algorithm, exact and random
 * inputs, over 1 Gbit/s links: a 4-byte and a 1-byte type, so that the
 * chunks of an odd count split at different byte offsets (the 2- and
 * 8-byte types ran here too, 16 s of the suite's time alone on the
 * machine for the same chunking; every type meets every algorithm on the
 * small counts of four_hosts_every_collective). */
Test(hosts, four_hosts_large_allreduce, .timeout = 180 * SLOW)
{
    up(4);
    run_job(4, 0, "1048579", "all", "float32,int8", "sum,max", "allreduce,random", "1", 160);
}

/* 8 hosts: every collective, algorithm, dtype and op on two small counts,
 * then the large allreduce per algorithm in a few dtypes. */
Test(hosts, eight_hosts, .timeout = 240 * SLOW)
{
    up(8);
    run_job(8, 0, "1,1023", "all", "all", "all", "all", "1", 110);
    run_job(8, 0, "1048579", "all", "float32,bfloat16", "sum,avg", "allreduce", "2", 110);
}
#endif

/* Two ranks per host: neighbours in the ring share a host, so some pairs
 * talk inside a namespace and others across the bridge. 5 ranks leave the
 * last host with one. */
Test(hosts, two_ranks_per_host, .timeout = 120 * SLOW)
{
    up(4);
    run_job(8, 2, "0,7,1023", "all", "float32,int8", "sum,min", "all", "2", 50);
    run_job(5, 2, "1,1023", "all", "bfloat16", "prod", "allreduce,reduce,broadcast", "1", 50);
}

/* The launcher's placement (rank r on host r mod 4) with 2 ranks per host,
 * 2+2+1+1 ranks, and 2 hosts of 4 in blocks: the host-ordered rings and
 * the hierarchical allreduce (chosen explicitly and by the cost model) on
 * counts 0, 1, fewer than the ranks, odd, and one long enough to take many
 * chunks through every phase. */
Test(hosts, hierarchical_any_placement, .timeout = 200 * SLOW)
{
    up(4);
    run_job(8, 0, "0,1,5,1023,65539", "ring,hier,auto", "float32,int64,float16", "sum,prod,max",
            "allreduce,random,reduce_scatter,allgather", "1", 60);
    run_job(6, 0, "0,3,1023,65539", "hier", "all", "all", "allreduce,random", "1", 60);
    run_job(8, 4, "1,7,65539", "ring,hier", "bfloat16,int8", "sum,min",
            "allreduce,reduce_scatter,allgather", "1", 50);
}

/* Inode of a namespace file, to tell which namespace a rank ran in. */
static unsigned long long ns_inode(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
    return (unsigned long long)st.st_ino;
}

/* Where each rank runs and what it is told: rank r in PREFIX<r mod 4>
 * without --ranks-per-host, in PREFIX<r / 2> with 2; the root is host 0's
 * eth0 address; LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK follow. */
Test(hosts, placement_and_environment, .timeout = 60 * SLOW)
{
    up(4);
    for (int k = 0; k <= 2; k += 2) {
        char kstr[16];
        snprintf(kstr, sizeof(kstr), "%d", k);
        char *script = "echo \"$RANK $(stat -L -c %i /proc/self/ns/net) $LOCAL_RANK "
                       "$LOCAL_WORLD_SIZE $GROUP_RANK $GW_ROOT $MASTER_ADDR "
                       "$(ip -4 -o addr show dev eth0 | awk '{print $4}')\"";
        char *argv_rr[] = {LAUNCHER,      "launch", "--hosts", prefix, "-n",   "6",
                           "--no-prefix", "--",     "sh",      "-c",   script, NULL};
        char *argv_k[] = {
            LAUNCHER, "launch",      "--hosts", prefix, "-n", "6",    "--ranks-per-host",
            kstr,     "--no-prefix", "--",      "sh",   "-c", script, NULL};
        run_result_t r = run_cmd(k ? argv_k : argv_rr, NULL, 30 * SLOW);
        cr_assert(r.exited && r.status == 0, "launch (k=%d) failed:\n%s", k, r.output);
        int seen = 0;
        char *save = NULL;
        for (char *line = strtok_r(r.output, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save)) {
            int rank, lrank, lsize, group;
            unsigned long long ino;
            char root[128], maddr[128], addr[128];
            /* 6 ranks on fewer cores: the launcher says they run unbound. */
            if (strncmp(line, "gradwire launch: note:", 22) == 0)
                continue;
            cr_assert_eq(sscanf(line, "%d %llu %d %d %d %127s %127s %127s", &rank, &ino, &lrank,
                                &lsize, &group, root, maddr, addr),
                         8, "unexpected line \"%s\"", line);
            cr_assert(rank >= 0 && rank < 6);
            int host = k ? rank / k : rank % 4;
            int want_lrank = k ? rank % k : rank / 4;
            int want_lsize = k ? 2 : (rank % 4 < 2 ? 2 : 1);
            char path[256], want_addr[64];
            snprintf(path, sizeof(path), "/run/netns/%s%d", prefix, host);
            cr_expect_eq(ino, ns_inode(path), "k=%d rank %d is not in %s", k, rank, path);
            snprintf(want_addr, sizeof(want_addr), "198.18.0.%d/24", host + 1);
            cr_expect_str_eq(addr, want_addr, "k=%d rank %d", k, rank);
            cr_expect_eq(group, host, "k=%d rank %d GROUP_RANK", k, rank);
            cr_expect_eq(lrank, want_lrank, "k=%d rank %d LOCAL_RANK", k, rank);
            cr_expect_eq(lsize, want_lsize, "k=%d rank %d LOCAL_WORLD_SIZE", k, rank);
            cr_expect_eq(strncmp(root, "198.18.0.1:", 11), 0, "GW_ROOT %s", root);
            cr_expect_str_eq(maddr, "198.18.0.1");
            seen |= 1 << rank;
        }
        cr_expect_eq(seen, 0x3f, "not every rank reported (k=%d):\n%s", k, r.output);
        free(r.output);
    }

    /* More ranks than the hosts hold at --ranks-per-host: refused, nothing
     * started. */
    char *argv_big[] = {LAUNCHER,           "launch", "--hosts", prefix, "-n", "9",
                        "--ranks-per-host", "2",      "--",      "true", NULL};
    run_result_t r = run_cmd(argv_big, NULL, 30 * SLOW);
    cr_expect(r.exited && r.status == 1, "status %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "need 5 hosts"), "%s", r.output);
    free(r.output);
}

/* `gradwire-bench tune` across hosts writes a tuning file the library
 * loads; the bandwidth it measured cannot beat the 1 Gbit/s links, which
 * shows that the ranks really talked across the emulated network. */
Test(hosts, tune_writes_a_loadable_file, .timeout = 120 * SLOW)
{
    up(4);
    char *dir = make_tmpdir("tune");
    cr_assert_not_null(dir);
    char out[512];
    snprintf(out, sizeof(out), "%s/cluster.tuning", dir);
    char tmo[32];
    snprintf(tmo, sizeof(tmo), "%d", 100 * SLOW);
    char *argv[] = {LAUNCHER, "launch", "--hosts", prefix, "--timeout", tmo, "--", BENCH, "tune",
                    "--out",  out,      "-s",      "8M",   "-n",        "5", "-m", "50",  NULL};
    run_result_t r = run_cmd(argv, NULL, 110 * SLOW);
    cr_assert(r.exited && r.status == 0, "tune failed (status %d):\n%s", r.status, r.output);
    gw_tuning_t t;
    gw__tuning_defaults(&t, "tcp");
    double default_beta = t.beta;
    gw_logger_t lg = {.level = GW_LOG_ERROR, .file = stderr};
    cr_assert_eq(gw__tuning_load(&t, out, &lg), GW_OK, "tune wrote a file the library rejects");
    cr_expect_neq(t.beta, default_beta);
    cr_expect(t.alpha > 0 && t.gamma > 0);
    /* 1 Gbit/s is 125e6 bytes/s, so at least 8e-9 s per byte (a little
     * slack for the token buckets' burst). */
    cr_expect_geq(t.beta, 0.9 * 8e-9, "beta %.3g s/B is faster than the 1 Gbit/s links:\n%s",
                  t.beta, r.output);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

/* No such hosts: a clear error that says how to make them. Needs no root. */
Test(hosts, missing_namespaces_are_explained, .timeout = 30)
{
    char p[64];
    snprintf(p, sizeof(p), "gwtnone%dx", (int)getpid());
    char *argv[] = {LAUNCHER, "launch", "--hosts", p, "--", "true", NULL};
    run_result_t r = run_cmd(argv, NULL, 20);
    cr_expect(r.exited && r.status == 1, "status %d:\n%s", r.status, r.output);
    char want[512];
    snprintf(want, sizeof(want),
             "no emulated host %s0 (/run/netns/%s0 does not exist): run "
             "`scripts/cluster.sh up N --prefix %s` first",
             p, p, p);
    cr_expect(strstr(r.output, want), "want \"%s\" in:\n%s", want, r.output);
    free(r.output);

    char *bad[] = {LAUNCHER, "launch", "--hosts", "a/b", "--", "true", NULL};
    r = run_cmd(bad, NULL, 20);
    cr_expect(r.exited && r.status == 2, "status %d:\n%s", r.status, r.output);
    cr_expect(strstr(r.output, "bad namespace prefix"), "%s", r.output);
    free(r.output);
}
