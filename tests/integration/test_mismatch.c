/*
 * Every collective, every argument: one rank of a job calls the collective
 * with one argument changed (count, count 0, dtype, op, root, algorithm) or
 * calls another collective; every rank must fail with GW_ERR_MISMATCH,
 * promptly (GW_TIMEOUT_MS is a minute: a timeout would take that long), and
 * keep its receive buffer intact past its count. Over TCP and shared
 * memory, on 4 ranks with the odd one first, in the middle and last, and on
 * 3 and 5 ranks with counts smaller than the number of ranks (ring chunks
 * of no element). worker_mismatch does the calls and exits 0 only on
 * GW_ERR_MISMATCH with an intact buffer.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define WORKER GW_BUILD_DIR "/tests/worker_mismatch"

/* A mismatch is detected from the messages of the call itself: seconds at
 * most, on a loaded 2-core machine, against a GW_TIMEOUT_MS of 60 s. */
#define PROMPT_S 10.0

static const char *const transports[] = {"tcp", "shm"};

/* The arguments each collective has (a change of any must be caught). */
typedef struct case_set {
    const char *coll;
    const char *whats[8];
} case_set_t;

static const case_set_t cases[] = {
    {"allreduce", {"count", "zero", "dtype", "op", "algo", "kind", NULL}},
    {"broadcast", {"count", "zero", "dtype", "root", "kind", NULL}},
    {"reduce", {"count", "zero", "dtype", "op", "root", "kind", NULL}},
    {"allgather", {"count", "zero", "dtype", "kind", NULL}},
    {"reduce_scatter", {"count", "zero", "dtype", "op", "kind", NULL}},
    {"barrier", {"kind", NULL}},
};

static void expect_mismatch(const char *transport, int n, const char *coll, const char *what,
                            int odd, const char *count)
{
    char nstr[16], oddstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    snprintf(oddstr, sizeof(oddstr), "%d", odd);
    char *argv[] = {LAUNCHER,     "launch",     "-n",   nstr,          "--", WORKER,
                    (char *)coll, (char *)what, oddstr, (char *)count, NULL};
    char trenv[64];
    snprintf(trenv, sizeof(trenv), "GW_TRANSPORT=%s", transport);
    char *env[] = {trenv, "GW_TIMEOUT_MS=60000", NULL};
    run_result_t r = run_cmd(argv, env, 90);
    cr_assert(!r.timed_out, "%s %s, rank %d of %d differs, over %s: hung:\n%s", coll, what, odd, n,
              transport, r.output);
    cr_assert(r.exited && r.status == 0,
              "%s %s, rank %d of %d differs (count %s), over %s: not GW_ERR_MISMATCH on every "
              "rank:\n%s",
              coll, what, odd, n, count, transport, r.output);
    for (int rank = 0; rank < n; rank++) {
        char want[64];
        snprintf(want, sizeof(want), "rank %d: GW_ERR_MISMATCH after", rank);
        cr_assert(strstr(r.output, want), "%s %s over %s: rank %d did not report:\n%s", coll, what,
                  transport, rank, r.output);
    }
    cr_assert(r.seconds < PROMPT_S, "%s %s over %s: the mismatch took %.1f s to report", coll, what,
              transport, r.seconds);
    free(r.output);
}

static void every_case(int n, const int *odds, int nodds, const char *count)
{
    for (size_t t = 0; t < sizeof(transports) / sizeof(transports[0]); t++)
        for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++)
            for (const char *const *w = cases[c].whats; *w; w++)
                for (int o = 0; o < nodds; o++)
                    expect_mismatch(transports[t], n, cases[c].coll, *w, odds[o], count);
}

Test(mismatch, every_collective_every_argument_4_ranks, .timeout = 600)
{
    const int odds[] = {0, 1, 3};
    every_case(4, odds, 3, "1024");
}

/* Counts below the number of ranks leave ring chunks empty and
 * non-power-of-two sizes add the recursive-doubling fold: the chain of
 * checked receives must still reach every rank. */
Test(mismatch, small_counts_odd_sizes, .timeout = 600)
{
    const int odds3[] = {2};
    every_case(3, odds3, 1, "2");
    const int odds5[] = {0, 4};
    every_case(5, odds5, 2, "3");
}

/* Point-to-point: the receiver fails at once; the sender's eager send may
 * complete first (gradwire.h), and its next call fails with the
 * receiver's GW_ERR_MISMATCH (worker_mismatch makes that call). */
Test(mismatch, point_to_point_length_and_dtype, .timeout = 300)
{
    const char *whats[] = {"count", "zero", "dtype", "kind"};
    for (size_t t = 0; t < 2; t++)
        for (size_t w = 0; w < 4; w++)
            for (int odd = 0; odd < 2; odd++)
                expect_mismatch(transports[t], 2, "p2p", whats[w], odd, "1024");
}
