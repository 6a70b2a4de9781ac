/*
 * test_topo_local.c - topology and the hierarchical allreduce over real
 * processes on this one machine: each rank of `gradwire launch -n N`
 * pretends to be on the host GW_HOST_ID names (the testing override of the
 * published host id, transport/host_id.h), so ranks of one pretend host
 * talk over shared memory and the others over loopback TCP, as on a real
 * cluster. worker_collectives checks every result against its serial
 * reference and every rank's outputs must agree bitwise; the communicator
 * must report the hosts it found (GW_DEBUG=INFO), and an empty GW_HOST_ID
 * must be refused.
 */
#include <criterion/criterion.h>

#include "support/ranks_agree.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_collectives"
#define BENCH GW_BUILD_DIR "/gradwire-bench"
#define MISMATCH GW_BUILD_DIR "/tests/worker_mismatch"
#define SPLIT GW_BUILD_DIR "/tests/worker_split"

/* Run cmd (NULL-terminated, at most 10 words) as n ranks, rank r on
 * pretend host hosts[r] (a string of host letters, one per rank), with
 * GW_DEBUG=INFO; it must pass and log `expect`. Returns its output. */
static char *launch(int n, const char *hosts, char *const *cmd, const char *expect)
{
    char nstr[16], script[512];
    snprintf(nstr, sizeof(nstr), "%d", n);
    snprintf(script, sizeof(script),
             "h=$(printf %%s '%s' | cut -c$((RANK + 1))); GW_HOST_ID=host$h exec \"$0\" \"$@\"",
             hosts);
    char *argv[20] = {LAUNCHER, "launch", "-n", nstr, "--", "sh", "-c", script};
    int a = 8;
    for (int i = 0; cmd[i] && a < 19; i++)
        argv[a++] = cmd[i];
    argv[a] = NULL;
    char *env[] = {"GW_CHUNK_BYTES=8192", "GW_TIMEOUT_MS=60000", "GW_DEBUG=INFO", NULL};
    run_result_t r = run_cmd(argv, env, 240);
    cr_assert(!r.timed_out, "job of %d ranks on hosts %s timed out:\n%s", n, hosts, r.output);
    cr_assert(r.exited && r.status == 0, "job of %d ranks on hosts %s failed (status %d):\n%s", n,
              hosts, r.status, r.output);
    cr_assert(strstr(r.output, expect), "no \"%s\" in the log of hosts %s:\n%s", expect, hosts,
              r.output);
    return r.output;
}

/* worker_collectives as n ranks on pretend hosts: every rank's outputs must
 * agree bitwise. */
static void run_job(int n, const char *hosts, const char *counts, const char *algos,
                    const char *dtypes, const char *ops, const char *colls, const char *expect)
{
    char *dir = make_tmpdir("topo");
    cr_assert_not_null(dir);
    char *cmd[] = {WORKER,         dir,         (char *)counts, (char *)algos,
                   (char *)dtypes, (char *)ops, (char *)colls,  NULL};
    free(launch(n, hosts, cmd, expect));
    free(expect_ranks_agree(dir, n, 0));
    remove_tree(dir);
    free(dir);
}

/* Hosts of 3, 1 and 2 ranks, interleaved: every dtype and op. */
Test(topo_local, uneven_hosts_every_dtype_op, .timeout = 300)
{
    run_job(6, "abcaca", "0,1,5,1023", "hier,ring", "all", "all",
            "allreduce,random,reduce_scatter,allgather", "6 ranks on 3 hosts (at most 3 on one)");
}

/* The launcher's placement over 2 pretend hosts (rank r on r mod 2) and
 * buffers long enough for many chunks in every phase. */
Test(topo_local, two_hosts_of_four_long, .timeout = 300)
{
    run_job(8, "abababab", "65539,300007", "hier,ring", "float32,int32", "sum,max",
            "allreduce,random", "8 ranks on 2 hosts (at most 4 on one)");
}

/* Left to the cost model, a 1 MiB allreduce on 2 hosts of 4 ranks takes the
 * hierarchy (gradwire-bench checks every element), on one host it does
 * not. */
Test(topo_local, chosen_by_the_cost_model, .timeout = 120)
{
    char *cmd[] = {BENCH, "allreduce", "-b", "1M", "-e", "1M", "-n", "2", "-w", "1", NULL};
    free(launch(8, "abababab", cmd, "hier algorithm (the cost model's choice"));
    char *out = launch(4, "aaaa", cmd, "4 ranks on 1 host");
    cr_assert(!strstr(out, "hier algorithm"), "hier chosen on one host:\n%s", out);
    free(out);
}

/* Communicator creation sets the cost model's figures from the transports
 * its pairs use (comm_tuning.c), the same on every rank: shared memory's
 * on one host, TCP's when GW_TRANSPORT=tcp, and on two hosts TCP's for
 * alpha and beta (the worst link) with shared memory's inside a host. The
 * INFO line prints what comm->tuning holds; with one set of figures for
 * every transport the three would be the same. */
Test(topo_local, creation_applies_the_transports_figures, .timeout = 120)
{
    /* launch() passes at most 11 words. */
    char *cmd[] = {BENCH, "allreduce", "-b", "8", "-e", "8", "-n", "1", NULL};
    char *tcp_cmd[] = {
        "env", "GW_TRANSPORT=tcp", BENCH, "allreduce", "-b", "8", "-e", "8", "-n", "1", NULL};
    static const char shm[] =
        "cost model: alpha 2.5e-06 s, beta 4e-10 s/B, beta_local 4.7e-10 s/B, gamma 5.5e-11 s/B "
        "(links inside a host: shm ; between hosts: none)";
    static const char tcp[] =
        "cost model: alpha 1.1e-05 s, beta 4.6e-10 s/B, beta_local 3.5e-10 s/B, gamma 5.5e-11 s/B "
        "(links inside a host: tcp ; between hosts: none)";
    static const char mixed[] =
        "cost model: alpha 1.1e-05 s, beta 4.6e-10 s/B, beta_local 4.7e-10 s/B, gamma 5.5e-11 s/B "
        "(links inside a host: shm ; between hosts: tcp )";
    char *out = launch(4, "aaaa", cmd, shm);
    cr_expect(!strstr(out, "1.1e-05"), "a TCP figure over shared memory:\n%s", out);
    free(out);
    free(launch(4, "aaaa", tcp_cmd, tcp));
    out = launch(4, "aabb", cmd, mixed);
    /* Every rank, the lone TCP-only view of none of them, logs the same. */
    int lines = 0;
    for (const char *p = out; (p = strstr(p, mixed)); p++)
        lines++;
    cr_expect_eq(lines, 4, "%d of 4 ranks logged the mixed figures:\n%s", lines, out);
    free(out);
}

/* One rank runs the hierarchical allreduce, the others the ring, on 2 and
 * 3 pretend hosts: every rank fails with GW_ERR_MISMATCH (worker_mismatch
 * exits 0 only then, with its buffer intact). */
Test(topo_local, algorithm_mismatch_fails_every_rank, .timeout = 120)
{
    static const struct {
        int n;
        const char *hosts, *odd;
    } jobs[] = {{4, "abab", "1"}, {6, "abcaca", "0"}, {6, "abcaca", "5"}};
    for (size_t j = 0; j < sizeof(jobs) / sizeof(jobs[0]); j++) {
        char *cmd[] = {MISMATCH, "allreduce", "hier", (char *)jobs[j].odd, "1024", NULL};
        char *out = launch(jobs[j].n, jobs[j].hosts, cmd, "GW_ERR_MISMATCH");
        for (int rank = 0; rank < jobs[j].n; rank++) {
            char want[64];
            snprintf(want, sizeof(want), "rank %d: GW_ERR_MISMATCH after", rank);
            cr_assert(strstr(out, want), "hosts %s, rank %s on hier: rank %d did not fail:\n%s",
                      jobs[j].hosts, jobs[j].odd, rank, out);
        }
        free(out);
    }
}

Test(topo_local, empty_host_id_is_refused, .timeout = 60)
{
    char *argv[] = {LAUNCHER, "launch", "-n", "2", "--", WORKER, "/nonexistent", "1", NULL};
    char *env[] = {"GW_HOST_ID=", "GW_TIMEOUT_MS=20000", NULL};
    run_result_t r = run_cmd(argv, env, 60);
    cr_assert(!r.timed_out, "hung:\n%s", r.output);
    cr_assert(!(r.exited && r.status == 0), "an empty GW_HOST_ID was accepted:\n%s", r.output);
    cr_assert(strstr(r.output, "GW_HOST_ID"), "the error does not name GW_HOST_ID:\n%s", r.output);
    free(r.output);
}

/* Sub-communicators know their members' hosts: 8 ranks on 4 pretend hosts
 * of two, split in halves (hosts 0-1 and 2-3): each child's cost model
 * picks the hierarchical allreduce, which is exact on it. */
Test(topo_local, split_children_know_their_hosts, .timeout = 120)
{
    char *cmd[] = {SPLIT, "hier", NULL};
    char *out = launch(8, "00112233", cmd, "rank 0: ok");
    for (int r = 1; r < 8; r++) {
        char want[32];
        snprintf(want, sizeof(want), "rank %d: ok", r);
        cr_expect(strstr(out, want), "no \"%s\":\n%s", want, out);
    }
    free(out);
}
