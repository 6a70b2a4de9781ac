/*
 * Connections made on first use, over real processes: `gradwire launch`
 * starts worker_scale (worker_scale.c) over TCP and over shared memory
 * with the communicator's default GW_CONNECT=lazy. A ring allreduce on 16
 * ranks opens its two neighbours' connections only (sockets counted in
 * /proc/self/fd, shared-memory segments in /proc/self/maps), a
 * point-to-point message reaches a peer that nothing connected before,
 * and a rank that died before anyone connected to it is named by the
 * ranks that need it within the timeout.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_scale"

static run_result_t job_over(const char *transport, const char *connect, int n, const char *mode,
                             const char *timeout_ms, double limit_s)
{
    char ns[8], tenv[40], trenv[40], cenv[40];
    snprintf(ns, sizeof(ns), "%d", n);
    snprintf(tenv, sizeof(tenv), "GW_TIMEOUT_MS=%s", timeout_ms);
    snprintf(trenv, sizeof(trenv), "GW_TRANSPORT=%s", transport);
    snprintf(cenv, sizeof(cenv), "GW_CONNECT=%s", connect);
    char *argv[] = {LAUNCHER, "launch", "-n", ns, "--", WORKER, (char *)mode, NULL};
    char *env[] = {trenv, "GW_NSOCKS=1", tenv, cenv, NULL};
    run_result_t r = run_cmd(argv, env, limit_s);
    cr_assert(!r.timed_out, "%d ranks over %s, %s: hung:\n%s", n, transport, mode, r.output);
    return r;
}

static run_result_t job(int n, const char *mode, const char *timeout_ms, double limit_s)
{
    return job_over("tcp", "lazy", n, mode, timeout_ms, limit_s);
}

static void expect_line(const run_result_t *r, const char *text)
{
    cr_assert(strstr(r->output, text), "expected \"%s\" in:\n%s", text, r->output);
}

/* Two neighbours, two connections each (the data socket and the control
 * one): 4 sockets opened by the allreduce. Besides them a rank other than
 * 0 holds its bootstrap connection, its listening socket and its heir
 * listener (where it would lead the others if rank 0 died:
 * transport/bootstrap/bootstrap_heir.c), 7 in all (rank 0 also holds the
 * bootstrap's star). A full mesh would be 32. */
Test(scale, a_ring_of_16_opens_only_its_two_neighbours, .timeout = 120)
{
    run_result_t r = job(16, "ring", "20000", 90);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    /* Rank 0's count moves with the bootstrap's own connections too. */
    expect_line(&r, "rank 0: ring opened");
    for (int rank = 1; rank < 16; rank++) {
        char want[64];
        snprintf(want, sizeof(want), "rank %d: ring opened 4 sockets, 7 open", rank);
        expect_line(&r, want);
    }
    free(r.output);
}

/* Rank `rank`'s line of mode "ring" says it had `before` and `after`
 * shared-memory mappings (its socket counts vary on rank 0, whose
 * bootstrap star closes meanwhile). */
static void expect_maps(const run_result_t *r, int rank, int before, int after)
{
    char head[48], want[80];
    snprintf(head, sizeof(head), "rank %d: ring opened ", rank);
    snprintf(want, sizeof(want), "; %d shared-memory maps before, %d after\n", before, after);
    const char *line = strstr(r->output, head);
    cr_assert(line, "rank %d printed no ring line:\n%s", rank, r->output);
    const char *semi = strchr(line, ';');
    cr_assert(semi && strncmp(semi, want, strlen(want)) == 0, "rank %d: want \"%s\" in:\n%s", rank,
              want, r->output);
}

/* Over shared memory a rank maps no segment at creation, and the ring its
 * two neighbours': 0 before, 2 after. Eagerly, all 15 segments are mapped
 * at creation. */
Test(scale, a_ring_of_16_over_shm_maps_only_its_two_neighbours, .timeout = 120)
{
    run_result_t r = job_over("shm", "lazy", 16, "ring", "20000", 90);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    for (int rank = 0; rank < 16; rank++)
        expect_maps(&r, rank, 0, 2);
    free(r.output);
    r = job_over("shm", "eager", 16, "ring", "20000", 90);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    for (int rank = 0; rank < 16; rank++)
        expect_maps(&r, rank, 15, 15);
    free(r.output);
}

/* Rank size-1 and rank 0, a pair nothing connected before, exchange a
 * message (mode "p2p"), over TCP or shared memory, 8 ranks. */
static void expect_p2p(const char *transport)
{
    run_result_t r = job_over(transport, "lazy", 8, "p2p", "20000", 90);
    cr_assert(r.exited && r.status == 0, "%s", r.output);
    for (int rank = 0; rank < 8; rank++) {
        char want[32];
        snprintf(want, sizeof(want), "rank %d: ok", rank);
        expect_line(&r, want);
    }
    free(r.output);
}

Test(scale, point_to_point_over_shm_to_a_peer_not_yet_connected, .timeout = 120)
{
    expect_p2p("shm");
}

Test(scale, point_to_point_to_a_peer_not_yet_connected, .timeout = 120) { expect_p2p("tcp"); }

/* Rank 1 exits before anyone connected to it. Rank 2 dials it, rank 0
 * asks it to dial (a knock): both are refused, and both fail naming rank
 * 1 within the timeout of 3 s, not after it. */
static void expect_named(const char *out, int rank, int dead)
{
    char want[32];
    snprintf(want, sizeof(want), "rank %d: GW_ERR_", rank);
    const char *line = strstr(out, want);
    cr_assert(line, "rank %d printed no failure:\n%s", rank, out);
    int culprit = -2, ms = -1;
    const char *c = strstr(line, "culprit ");
    cr_assert(c && sscanf(c, "culprit %d after %d ms", &culprit, &ms) == 2, "%s", out);
    cr_expect_eq(culprit, dead, "rank %d blames rank %d, not rank %d:\n%s", rank, culprit, dead,
                 out);
    cr_expect(ms < 3000, "rank %d took %d ms (timeout 3000):\n%s", rank, ms, out);
}

Test(scale, a_dead_peer_never_connected_is_named_within_the_timeout, .timeout = 120)
{
    run_result_t r = job(4, "dead", "3000", 60);
    expect_named(r.output, 0, 1);
    expect_named(r.output, 2, 1);
    free(r.output);
    /* The last rank dead, and only rank 0 needs it: no one dials it, and
     * rank 0's knock is what finds it gone. */
    r = job(4, "deadtop", "3000", 60);
    expect_named(r.output, 0, 3);
    free(r.output);
}

/* The same over shared memory: the dead rank's door (a socket) went with
 * its process, so the knock finds no door and the process gone. */
Test(scale, a_dead_peer_never_connected_over_shm_is_named_within_the_timeout, .timeout = 120)
{
    run_result_t r = job_over("shm", "lazy", 4, "dead", "3000", 60);
    expect_named(r.output, 0, 1);
    expect_named(r.output, 2, 1);
    free(r.output);
    r = job_over("shm", "lazy", 4, "deadtop", "3000", 60);
    expect_named(r.output, 0, 3);
    free(r.output);
}
