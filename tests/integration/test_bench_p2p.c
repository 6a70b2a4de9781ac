/*
 * gradwire-bench p2p end to end: between ranks 0 and 1 it must run every
 * mode with no wrong byte; with --pairs all it must measure every pair of
 * ranks exactly once, in n-1 rounds (n for odd n) where no rank is in two
 * pairs at once; with --pairs serial one pair per round. The JSON is read
 * by Python's parser, not by string matching.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"
#define PYTHON "/usr/bin/python3"

/* Checks a --pairs JSON: argv: file, ranks, rounds, pairs per round at
 * most, sizes per pair. Prints what is wrong and exits 1. */
static const char *check_pairs_py =
    "import json, sys\n"
    "d = json.load(open(sys.argv[1]))\n"
    "n, rounds, per_round, sizes = map(int, sys.argv[2:6])\n"
    "bad = []\n"
    "if d['ranks'] != n: bad.append('ranks %s' % d['ranks'])\n"
    "if d['rounds'] != rounds: bad.append('rounds %s, want %d' % (d['rounds'], rounds))\n"
    "if d['wrong'] != 0 or d['error'] is not None: bad.append('wrong/error %s %s' % (d['wrong'], "
    "d['error']))\n"
    "pairs = sorted((l['a'], l['b']) for l in d['links'])\n"
    "want = [(a, b) for a in range(n) for b in range(a + 1, n)]\n"
    "if pairs != want: bad.append('pairs %s, want %s' % (pairs, want))\n"
    "for k in range(rounds):\n"
    "    ls = [l for l in d['links'] if l['round'] == k]\n"
    "    ends = [l['a'] for l in ls] + [l['b'] for l in ls]\n"
    "    if len(ends) != len(set(ends)): bad.append('round %d: a rank in two pairs' % k)\n"
    "    if len(ls) > per_round: bad.append('round %d: %d pairs' % (k, len(ls)))\n"
    "for l in d['links']:\n"
    "    if len(l['results']) != sizes: bad.append('pair %d-%d: %d sizes' % (l['a'], l['b'], "
    "len(l['results'])))\n"
    "    for r in l['results']:\n"
    "        if r['wrong'] != 0 or not r['lat_us']['p50'] > 0: bad.append('pair %d-%d: %s' % "
    "(l['a'], l['b'], r))\n"
    "print('\\n'.join(bad) if bad else 'ok')\n"
    "sys.exit(1 if bad else 0)\n";

static void pairs(const char *nranks, const char *transport, const char *mode, const char *rounds,
                  const char *per_round)
{
    if (access(PYTHON, X_OK) != 0)
        cr_skip_test("the JSON check needs %s", PYTHON);
    char *dir = make_tmpdir("p2p");
    char json[512], tr[64];
    snprintf(json, sizeof(json), "%s/pairs.json", dir);
    snprintf(tr, sizeof(tr), "GW_TRANSPORT=%s", transport);
    char *argv[] = {LAUNCHER,     "launch", "-n", (char *)nranks, "--",  BENCH, "p2p", "--pairs",
                    (char *)mode, "-b",     "8",  "-e",           "32K", "-f",  "64",  "-n",
                    "10",         "-w",     "2",  "--json",       json,  NULL};
    char *env[] = {"GW_TIMEOUT_MS=60000", tr, NULL};
    run_result_t r = run_cmd(argv, env, 240);
    cr_assert(!r.timed_out, "p2p --pairs %s timed out:\n%s", mode, r.output);
    cr_assert(r.exited && r.status == 0, "p2p --pairs %s on %s ranks over %s failed (%d):\n%s",
              mode, nranks, transport, r.status, r.output);
    cr_expect(strstr(r.output, "# wrong bytes: 0"), "%s", r.output);
    cr_expect(strstr(r.output, "over the "), "no summary over the pairs:\n%s", r.output);
    /* 8 B, 512 B, 32 KiB: 3 sizes per pair. */
    char *check[] = {PYTHON,
                     "-c",
                     (char *)check_pairs_py,
                     json,
                     (char *)nranks,
                     (char *)rounds,
                     (char *)per_round,
                     "3",
                     NULL};
    run_result_t c = run_cmd(check, NULL, 30);
    cr_expect(c.exited && c.status == 0, "p2p --pairs %s, %s ranks: %s\nbench output:\n%s", mode,
              nranks, c.output, r.output);
    free(c.output);
    free(r.output);
    remove_tree(dir);
    free(dir);
}

Test(bench_p2p, every_pair_in_rounds_even, .timeout = 300) { pairs("4", "tcp", "all", "3", "2"); }
Test(bench_p2p, every_pair_in_rounds_odd, .timeout = 300) { pairs("5", "shm", "all", "5", "2"); }
Test(bench_p2p, every_pair_one_at_a_time, .timeout = 300) { pairs("4", "tcp", "serial", "6", "1"); }

/* The default: ranks 0 and 1 only, every mode, both transports, sends
 * completing with receipts (sync) and without (standard); other ranks
 * leave at once. */
Test(bench_p2p, first_pair_every_mode, .timeout = 200)
{
    const char *transports[] = {"tcp", "shm"};
    for (int i = 0; i < 4; i++) {
        char tr[64], mode[64];
        snprintf(tr, sizeof(tr), "GW_TRANSPORT=%s", transports[i % 2]);
        snprintf(mode, sizeof(mode), "GW_P2P_SEND=%s", i < 2 ? "sync" : "standard");
        char *argv[] = {LAUNCHER, "launch", "-n", "3",  "--", BENCH, "p2p", "-b", "8",
                        "-e",     "1M",     "-f", "32", "-n", "20",  "-w",  "2",  NULL};
        char *env[] = {"GW_TIMEOUT_MS=60000", tr, mode, NULL};
        run_result_t r = run_cmd(argv, env, 100);
        cr_assert(r.exited && r.status == 0, "p2p over %s, %s, failed (%d):\n%s", transports[i % 2],
                  mode, r.status, r.output);
        cr_expect(strstr(r.output, "rank 0 <-> rank 1"), "%s", r.output);
        cr_expect(strstr(r.output, "# wrong bytes: 0 (rank 0: 0, rank 1: 0)"), "%s", r.output);
        int rows = 0;
        for (const char *p = r.output; (p = strstr(p, "\n[0]   ")); p++)
            rows++;
        cr_expect_eq(rows, 4, "want 4 sizes (8, 256, 8K, 256K... up to 1M), got %d:\n%s", rows,
                     r.output);
        free(r.output);
    }
}
