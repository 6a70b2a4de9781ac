/*
 * test_bench_args.c - gradwire-bench must reject a bad command line with a
 * clear message and exit status 2, before it creates a communicator.
 *
 * The environment names a rank 1 of 2 whose root does not answer, with a
 * long timeout: a bench that tried to join the job before checking its
 * arguments would sit in gw_comm_init_env and overrun the test's deadline
 * (or fail with status 1), so these cases also prove the order.
 */
#include <criterion/criterion.h>

#include "support/run.h"

#define BENCH GW_BUILD_DIR "/gradwire-bench"

static char *const no_job_env[] = {"RANK=1",
                                   "WORLD_SIZE=2",
                                   "GW_ROOT=127.0.0.1:9",
                                   "MASTER_ADDR=127.0.0.1",
                                   "MASTER_PORT=9",
                                   "GW_TIMEOUT_MS=60000",
                                   NULL};

static void expect_usage_error(char *const argv[], const char *message)
{
    if (access(BENCH, X_OK) != 0)
        cr_assert_fail("%s is missing: build the gradwire-bench target", BENCH);
    run_result_t r = run_cmd(argv, no_job_env, 10);
    char cmd[512] = "";
    for (int i = 1; argv[i]; i++)
        snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " %s", argv[i]);
    cr_assert(!r.timed_out,
              "`gradwire-bench%s` did not return: it must reject its arguments "
              "before joining a job",
              cmd);
    cr_assert(r.exited && r.status == 2, "`gradwire-bench%s`: status %d, want 2:\n%s", cmd,
              r.status, r.output);
    cr_assert(strstr(r.output, message), "`gradwire-bench%s`: no \"%s\" in:\n%s", cmd, message,
              r.output);
    cr_assert_null(strstr(r.output, "# gradwire-bench allreduce"),
                   "`gradwire-bench%s` started a run:\n%s", cmd, r.output);
    free(r.output);
}

#define EXPECT(message, ...)                        \
    do {                                            \
        char *argv_[] = {BENCH, __VA_ARGS__, NULL}; \
        expect_usage_error(argv_, message);         \
    } while (0)

Test(bench_args, sizes, .timeout = 60)
{
    EXPECT("minbytes (-b 10) is larger than maxbytes (-e 5)", "allreduce", "-b", "10", "-e", "5");
    EXPECT("minbytes (-b 2048) is larger than maxbytes (-e 1024)", "allreduce", "-b", "2K", "-e",
           "1K");
    EXPECT("-b wants a size in bytes", "allreduce", "-b", "12Q");
    EXPECT("-b wants a size in bytes", "allreduce", "-b", "-5");
    EXPECT("-e wants a size in bytes", "allreduce", "-e", "");
    EXPECT("-e wants a size in bytes", "allreduce", "-e", "99999999999999999999");
    EXPECT("-e wants a size in bytes", "allreduce", "-e", "20000000000G");
    EXPECT("-b 0 cannot grow by a factor", "allreduce", "-b", "0");
    EXPECT("more than 100000 sizes", "allreduce", "-b", "1", "-e", "1G", "-i", "1");
}

Test(bench_args, steps_and_iterations, .timeout = 60)
{
    EXPECT("-f wants an integer step factor", "allreduce", "-f", "1");
    EXPECT("-f wants an integer step factor", "allreduce", "-f", "1.5");
    EXPECT("-i wants a positive step", "allreduce", "-i", "0");
    EXPECT("-f and -i both given", "allreduce", "-f", "4", "-i", "8");
    EXPECT("-n wants a number of iterations", "allreduce", "-n", "0");
    EXPECT("-w wants a number of iterations", "allreduce", "-w", "x");
    EXPECT("-c wants 0 or 1", "allreduce", "-c", "2");
}

Test(bench_args, names, .timeout = 60)
{
    EXPECT("unknown datatype \"nosuchtype\"", "allreduce", "-d", "nosuchtype");
    EXPECT("unknown op \"bogus\"", "allreduce", "-o", "bogus");
    EXPECT("unknown algorithm \"fastest\"", "allreduce", "--algo", "fastest");
    EXPECT("unknown datatype \"complex\"", "allreduce", "--datatype=complex");
}

Test(bench_args, options_and_subcommands, .timeout = 60)
{
    EXPECT("unknown option \"-x\"", "allreduce", "-x");
    EXPECT("unknown option \"--frobnicate\"", "allreduce", "--frobnicate");
    EXPECT("option -b needs a value", "allreduce", "-b");
    EXPECT("option --json needs a value", "allreduce", "--json");
    EXPECT("unexpected argument \"extra\"", "allreduce", "extra");
    EXPECT("unknown benchmark \"frobnicate\"", "frobnicate");
    EXPECT("usage: gradwire-bench", "--no-such-flag");
}

/* nccl-tests' -m, -a, -N and -z, and the message-rate benchmark's -p and -W. */
Test(bench_args, conventions, .timeout = 60)
{
    EXPECT("-m wants a number of calls per iteration in 1..1000000", "allreduce", "-m", "0");
    EXPECT("-a wants 0 (rank 0), 1 (mean), 2 (min) or 3 (max), not \"4\"", "allreduce", "-a", "4");
    EXPECT("(the algorithm is --algo)", "allreduce", "-a", "ring");
    EXPECT("-N wants a number of cycles in 0..1000000", "allreduce", "-N", "-1");
    EXPECT("-z wants 0 or 1", "allreduce", "-z", "2");
    EXPECT("-z 0 issues all 2000 x 1000 calls before one wait", "allreduce", "-z", "0", "-n",
           "2000", "-m", "1000");
    EXPECT("-m wants a number", "barrier", "-m", "x");
    EXPECT("-p wants a number of pairs", "mbw_mr", "-p", "0");
    EXPECT("-W wants a window of 1..4096 messages", "mbw_mr", "-W", "5000");
    EXPECT("sizes from -b 0 to -e 4194304", "mbw_mr", "-b", "0");
    EXPECT("unknown option \"-r\"", "mbw_mr", "-r", "1");
    EXPECT("-o means nothing to alltoallv", "alltoallv", "-o", "sum");
}

Test(bench_args, help, .timeout = 30)
{
    char *argv[] = {BENCH, "allreduce", "--help", NULL};
    cr_assert_eq(access(BENCH, X_OK), 0, "%s is missing", BENCH);
    run_result_t r = run_cmd(argv, no_job_env, 10);
    cr_assert(r.exited && r.status == 0, "status %d:\n%s", r.status, r.output);
    cr_assert(strstr(r.output, "usage: gradwire-bench allreduce"), "%s", r.output);
    cr_assert(strstr(r.output, "--json FILE"), "%s", r.output);
    free(r.output);
}

/* The other collectives: options that mean nothing to one are refused, not
 * ignored; each has its own usage text. */
Test(bench_args, other_collectives, .timeout = 60)
{
    EXPECT("-o means nothing to allgather", "allgather", "-o", "max");
    EXPECT("-o means nothing to broadcast", "broadcast", "-o", "sum");
    EXPECT("-r means nothing to allreduce", "allreduce", "-r", "1");
    EXPECT("--algo means nothing to reduce", "reduce", "--algo", "ring");
    EXPECT("-r wants a rank", "broadcast", "-r", "-1");
    EXPECT("-r wants a rank", "reduce", "--root=one");
    EXPECT("-b means nothing to barrier", "barrier", "-b", "8");
    EXPECT("--json means nothing to barrier", "barrier", "--json", "x.json");
    EXPECT("-n wants a number of barriers", "barrier", "-n", "0");
    EXPECT("unknown datatype \"quad\"", "reduce_scatter", "-d", "quad");
    EXPECT("-o means nothing to sendrecv", "sendrecv", "-o", "sum");
    EXPECT("--pairs takes first, all or serial", "p2p", "--pairs", "two");
    EXPECT("-r means nothing to sendrecv", "sendrecv", "-r", "1");
    EXPECT("-o means nothing to alltoall", "alltoall", "-o", "sum");
    EXPECT("-r means nothing to alltoall", "alltoall", "-r", "1");
    EXPECT("--algo means nothing to gather", "gather", "--algo", "ring");
    EXPECT("-o means nothing to scatter", "scatter", "-o", "max");
    EXPECT("-r wants a rank", "scatter", "-r", "-1");
    EXPECT("-r wants a rank", "gather", "--root=x");
    EXPECT("-r means nothing to allgatherv", "allgatherv", "-r", "0");
    EXPECT("unknown datatype \"quad\"", "alltoall", "-d", "quad");
    const char *names[] = {"allgather", "reduce_scatter", "broadcast", "reduce",
                           "barrier",   "sendrecv",       "alltoall",  "gather",
                           "scatter",   "allgatherv",     "alltoallv", "mbw_mr"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char *argv[] = {BENCH, (char *)names[i], "--help", NULL};
        run_result_t r = run_cmd(argv, no_job_env, 10);
        char want[64];
        snprintf(want, sizeof(want), "usage: gradwire-bench %s", names[i]);
        cr_assert(r.exited && r.status == 0 && strstr(r.output, want), "%s --help:\n%s", names[i],
                  r.output);
        free(r.output);
    }
}
