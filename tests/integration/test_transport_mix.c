/*
 * test_transport_mix.c - collectives over every transport choice, with real
 * processes: shared memory forced, TCP forced and the automatic choice on
 * one host under `gradwire launch`, and a job whose ranks live on two
 * emulated hosts (network namespaces, scripts/cluster.sh), so that the
 * links inside a host are shared memory and the links between hosts TCP,
 * and ring and tree collectives run over the mix.
 *
 * Each run starts worker_collectives as every rank: it checks each result
 * against a serial reference and writes a hash of every output, which must
 * agree across ranks bitwise. GW_DEBUG=INFO makes every rank log the
 * transport it chose for each peer; the test checks those lines, so a job
 * that silently fell back to another transport fails.
 *
 * The two-host case starts the ranks itself (two per namespace, through
 * `ip netns exec`, with RANK, WORLD_SIZE, GW_ROOT on host 0's 198.18
 * address and a job token), since the launcher does not place ranks in
 * namespaces. It needs root and network namespaces and is skipped, saying
 * why, where they are missing. Its cluster has a prefix of its own and is
 * torn down whatever happens.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_collectives"
#define FAULTS GW_BUILD_DIR "/tests/worker_faults"
#define CLUSTER GW_SOURCE_DIR "/scripts/cluster.sh"

#define COUNTS "0,7,1023,262147"
#define DTYPES "float32,bfloat16,int8"
#define OPS "sum,max"

static void expect_text(const char *output, const char *text)
{
    cr_assert(strstr(output, text), "expected \"%s\" in:\n%s", text, output);
}

/* `gradwire launch -n n` of worker_collectives with GW_TRANSPORT=transport. */
static void launch_job(int n, const char *transport, const char *want_name)
{
    char *dir = make_tmpdir("mix");
    cr_assert_not_null(dir);
    char nstr[16], tenv[64];
    snprintf(nstr, sizeof(nstr), "%d", n);
    snprintf(tenv, sizeof(tenv), "GW_TRANSPORT=%s", transport);
    char *argv[] = {LAUNCHER, "launch", "-n",   nstr, "--",  WORKER, dir,
                    COUNTS,   "all",    DTYPES, OPS,  "all", NULL};
    char chunk[] = "GW_CHUNK_BYTES=8192", timeout[] = "GW_TIMEOUT_MS=60000",
         debug[] = "GW_DEBUG=INFO";
    char *env[] = {tenv, chunk, timeout, debug, NULL};
    run_result_t r = run_cmd(argv, env, 280);
    cr_assert(!r.timed_out, "job timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "job failed (status %d):\n%s", r.status, r.output);
    free(expect_ranks_agree(dir, n, 0)); /* every rank the same hashes */
    for (int rank = 0; rank < n; rank++) {
        char want[128];
        snprintf(want, sizeof(want), "rank %d of %d connected over %s (GW_TRANSPORT=%s", rank, n,
                 want_name, transport);
        expect_text(r.output, want);
    }
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(transport_mix, forced_shm_four_ranks, .timeout = 300) { launch_job(4, "shm", "shm"); }

Test(transport_mix, forced_tcp_three_ranks, .timeout = 300) { launch_job(3, "tcp", "tcp"); }

Test(transport_mix, auto_on_one_host_is_shm, .timeout = 300) { launch_job(4, "auto", "shm"); }

/* Faults over shared memory: a dead peer and disagreeing ranks are reported
 * on every rank, promptly (worker_faults checks memory and prints statuses). */
static void faults(const char *mode, int n, const char *want)
{
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    char *argv[] = {LAUNCHER, "launch", "-n", nstr, "--", FAULTS, (char *)mode, NULL};
    char tenv[] = "GW_TRANSPORT=shm", timeout[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {tenv, timeout, NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(!r.timed_out, "mode %s hung:\n%s", mode, r.output);
    cr_assert(r.exited && r.status == 0, "mode %s: a rank did not get a clean error:\n%s", mode,
              r.output);
    expect_text(r.output, want);
    cr_assert(r.seconds < 30, "mode %s took %.1f s", mode, r.seconds);
    free(r.output);
}

Test(transport_mix, shm_dead_peer_and_mismatch, .timeout = 200)
{
    faults("kill", 4, "GW_ERR_REMOTE");
    faults("killmid", 3, "rank 0: GW_ERR");
    faults("count", 4, "GW_ERR_MISMATCH");
}

/* ---- two emulated hosts ------------------------------------------------------ */

#define NRANKS 4
#define ROOT_PORT 29517

static char prefix[64];

static void cluster_down(void)
{
    if (!prefix[0])
        return;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), CLUSTER " --prefix %s down >/dev/null 2>&1", prefix);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: '%s' failed: namespaces %s* may be left\n", cmd, prefix);
}

/* Two hosts, or a skip that says why. */
static void cluster_up(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root for network namespaces (scripts/cluster.sh)");
    if (system("command -v ip >/dev/null 2>&1") != 0)
        cr_skip_test("needs 'ip' (iproute2) for network namespaces");
    /* The prefix must not end with a digit (cluster.sh's rule). */
    snprintf(prefix, sizeof(prefix), "gwmix%ldx", (long)getpid());
    char cmd[512];
    snprintf(cmd, sizeof(cmd), CLUSTER " --prefix %s up 2 >/tmp/gw-%s-up.log 2>&1", prefix, prefix);
    if (system(cmd) != 0) {
        char path[128];
        snprintf(path, sizeof(path), "/tmp/gw-%s-up.log", prefix);
        char *log = read_file(path);
        unlink(path);
        cluster_down();
        cr_skip_test("network namespaces unavailable: cluster.sh up failed: %s", log ? log : "");
    }
    char path[128];
    snprintf(path, sizeof(path), "/tmp/gw-%s-up.log", prefix);
    unlink(path);
}

/* Start rank r in host r / 2 with the job's environment; its output goes to
 * dir/out<r>. */
static pid_t start_rank(int r, const char *dir, const char *transport, char *const *worker_argv)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    setpgid(0, 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/out%d", dir, r);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    char num[16], ns[80];
    snprintf(num, sizeof(num), "%d", r);
    snprintf(ns, sizeof(ns), "%s%d", prefix, r / 2);
    setenv("RANK", num, 1);
    snprintf(num, sizeof(num), "%d", NRANKS);
    setenv("WORLD_SIZE", num, 1);
    char root[64];
    snprintf(root, sizeof(root), "198.18.0.1:%d", ROOT_PORT);
    setenv("GW_ROOT", root, 1);
    setenv("GW_JOB_TOKEN", "transport-mix-test", 1);
    setenv("GW_TRANSPORT", transport, 1);
    setenv("GW_DEBUG", "INFO", 1);
    setenv("GW_TIMEOUT_MS", "60000", 1);
    setenv("GW_CHUNK_BYTES", "8192", 1);
    unsetenv("GW_SOCKET_IFNAME");
    char *argv[24] = {"ip", "netns", "exec", ns};
    int n = 4;
    for (int i = 0; worker_argv[i] && n < 23; i++)
        argv[n++] = worker_argv[i];
    argv[n] = NULL;
    execvp("ip", argv);
    _exit(127);
}

typedef struct host_run {
    int status[NRANKS];
    int timed_out;
    char *out[NRANKS];
} host_run_t;

static host_run_t run_on_hosts(const char *dir, const char *transport, char *const *worker_argv,
                               double timeout_s)
{
    host_run_t hr;
    memset(&hr, 0, sizeof(hr));
    pid_t pids[NRANKS];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < NRANKS; r++)
        pids[r] = start_rank(r, dir, transport, worker_argv);
    int done[NRANKS] = {0}, left = NRANKS;
    double end = run__now() + timeout_s;
    while (left > 0 && run__now() < end) {
        for (int r = 0; r < NRANKS; r++) {
            int st;
            if (!done[r] && pids[r] > 0 && waitpid(pids[r], &st, WNOHANG) == pids[r]) {
                done[r] = 1;
                left--;
                hr.status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            }
        }
        usleep(10000);
    }
    for (int r = 0; r < NRANKS; r++) {
        if (!done[r]) {
            hr.timed_out = 1;
            if (pids[r] > 0) {
                kill(-pids[r], SIGKILL);
                waitpid(pids[r], NULL, 0);
            }
            hr.status[r] = -1;
        }
        char path[512];
        snprintf(path, sizeof(path), "%s/out%d", dir, r);
        hr.out[r] = read_file(path);
        if (!hr.out[r])
            hr.out[r] = strdup("(no output)");
    }
    return hr;
}

static void free_run(host_run_t *hr)
{
    for (int r = 0; r < NRANKS; r++)
        free(hr->out[r]);
}

static const char *all_output(const host_run_t *hr, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int r = 0; r < NRANKS; r++) {
        int w =
            snprintf(buf + n, cap - n, "--- rank %d (exit %d):\n%s", r, hr->status[r], hr->out[r]);
        if (w < 0 || (size_t)w >= cap - n)
            break;
        n += (size_t)w;
    }
    return buf;
}

Test(transport_mix, two_hosts_mix_shm_and_tcp, .timeout = 400, .fini = cluster_down)
{
    cluster_up();
    char *dir = make_tmpdir("mixhosts");
    cr_assert_not_null(dir);
    char *argv[] = {WORKER, dir, COUNTS, "all", DTYPES, OPS, "all", NULL};
    host_run_t hr = run_on_hosts(dir, "auto", argv, 300);
    static char text[1 << 16];
    all_output(&hr, text, sizeof(text));
    cr_assert(!hr.timed_out, "job timed out:\n%s", text);
    for (int r = 0; r < NRANKS; r++)
        cr_assert_eq(hr.status[r], 0, "rank %d failed:\n%s", r, text);
    free(expect_ranks_agree(dir, NRANKS, 0)); /* every rank the same hashes */
    /* Ranks 0, 1 on host 0 and 2, 3 on host 1. */
    static const char *const plans[NRANKS] = {
        "rank 0: shm to rank 1; tcp to ranks 2,3",
        "rank 1: shm to rank 0; tcp to ranks 2,3",
        "rank 2: shm to rank 3; tcp to ranks 0,1",
        "rank 3: shm to rank 2; tcp to ranks 0,1",
    };
    for (int r = 0; r < NRANKS; r++) {
        cr_expect(strstr(hr.out[r], plans[r]), "rank %d did not log \"%s\":\n%s", r, plans[r],
                  hr.out[r]);
        char want[96];
        snprintf(want, sizeof(want), "rank %d of %d connected over shm+tcp", r, NRANKS);
        cr_expect(strstr(hr.out[r], want), "rank %d did not log \"%s\":\n%s", r, want, hr.out[r]);
    }
    free_run(&hr);
    remove_tree(dir);
    free(dir);
}

/* Shared memory forced across hosts: every rank fails at once with a
 * configuration error that names a peer on the other host. */
Test(transport_mix, two_hosts_forced_shm_is_config_error, .timeout = 120, .fini = cluster_down)
{
    cluster_up();
    char *dir = make_tmpdir("mixshm");
    cr_assert_not_null(dir);
    char *argv[] = {WORKER, dir, "7", "ring", "float32", "sum", "allreduce", NULL};
    double t0 = run__now();
    host_run_t hr = run_on_hosts(dir, "shm", argv, 60);
    double took = run__now() - t0;
    static char text[1 << 16];
    all_output(&hr, text, sizeof(text));
    cr_assert(!hr.timed_out, "job hung:\n%s", text);
    for (int r = 0; r < NRANKS; r++) {
        cr_expect_neq(hr.status[r], 0, "rank %d succeeded:\n%s", r, text);
        cr_expect(strstr(hr.out[r], "invalid configuration"), "rank %d:\n%s", r, hr.out[r]);
        const char *other = r < 2 ? "rank 2 is on another host" : "rank 0 is on another host";
        cr_expect(strstr(hr.out[r], other), "rank %d did not name the peer:\n%s", r, hr.out[r]);
    }
    cr_expect(took < 30, "the error took %.1f s", took);
    free_run(&hr);
    remove_tree(dir);
    free(dir);
}
