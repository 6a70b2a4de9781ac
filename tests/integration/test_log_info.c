/*
 * What a job says at INFO, as users read it (README: Environment
 * variables): the library's version with the transport each rank chose,
 * the algorithm each kind of collective ran (once per kind and algorithm,
 * not once per call), and GW_DEBUG_SUBSYS keeping only the subsystems
 * asked for. Real ranks (gradwire-bench allreduce under the launcher).
 */
#include <criterion/criterion.h>

#include "gradwire.h"
#include "support/run.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define BENCH GW_BUILD_DIR "/gradwire-bench"

static char *job(char *subsys, char *algo)
{
    char *argv[] = {LAUNCHER, "launch", "-n", "2",  "--", BENCH, "allreduce", "-b", "8",
                    "-e",     "1M",     "-f", "32", "-n", "3",   "-w",        "1",  NULL};
    char *env[] = {"GW_DEBUG=INFO", "GW_TIMEOUT_MS=60000", subsys, algo, NULL};
    run_result_t r = run_cmd(argv, env, 120);
    cr_assert(r.exited && r.status == 0, "job failed (%d):\n%s", r.status, r.output);
    return r.output;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++)
        n++;
    return n;
}

Test(log_info, version_transport_and_algorithm_once, .timeout = 150)
{
    char *out = job("GW_DEBUG_SUBSYS=init,coll", "GW_DISCARD=1");
    char want[128];
    snprintf(want, sizeof(want), "gradwire init INFO gradwire %s: rank 0 of 2 connected over",
             gw_version());
    cr_expect(strstr(out, want), "no \"%s\":\n%s", want, out);
    /* 8 B .. 1 MiB: 5 sizes x 2 placements x 4 calls, and the bench's own
     * allreduces; one line per algorithm used. */
    int lines = count(out, "gradwire coll INFO gw_allreduce of");
    cr_expect(lines >= 2 && lines <= 2 * GW_ALGO_COUNT,
              "%d allreduce INFO lines for 2 ranks: want one per rank and algorithm:\n%s", lines,
              out);
    cr_expect(strstr(out, "algorithm (the cost model's choice for this size)"), "%s", out);
    cr_expect_eq(count(out, "gradwire tcp INFO") + count(out, "gradwire shm INFO") +
                     count(out, "gradwire bootstrap INFO"),
                 0, "GW_DEBUG_SUBSYS=init,coll let other subsystems' INFO through:\n%s", out);
    free(out);
}

Test(log_info, an_algorithm_set_says_so, .timeout = 150)
{
    char *out = job("GW_DEBUG_SUBSYS=coll", "GW_ALGO=tree");
    cr_expect(strstr(out, "tree algorithm (set by GW_ALGO or gw_comm_set_algo)"), "%s", out);
    cr_expect_null(strstr(out, "ring algorithm"), "%s", out);
    cr_expect_eq(count(out, "gradwire init INFO"), 0, "%s", out);
    free(out);
}

Test(log_info, excluded_subsystems_stay_quiet, .timeout = 150)
{
    char *out = job("GW_DEBUG_SUBSYS=^coll", "GW_DISCARD=1");
    cr_expect_eq(count(out, "gradwire coll INFO"), 0, "%s", out);
    cr_expect(strstr(out, "gradwire init INFO"), "%s", out);
    free(out);
}
