/*
 * bench_main.c - `gradwire-bench BENCHMARK [options]`: the dispatcher.
 *
 * Each benchmark is a function taking its own argv (argv[0] is its name) and
 * returning the exit status: 0 when every call succeeded and every checked
 * element was right, 1 otherwise, 2 for a bad command line. Benchmarks are
 * built on the public API only and get their ranks from the environment, so
 * they run under `gradwire launch`, torchrun-style launchers, mpirun or srun.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire-bench BENCHMARK [options]\n"
                 "\n"
                 "benchmarks:\n"
                 "  allreduce    allreduce bandwidth and correctness, as nccl-tests'\n"
                 "               all_reduce_perf\n"
                 "  allgather, reduce_scatter, broadcast, reduce\n"
                 "               the same for the other collectives, as nccl-tests'\n"
                 "               all_gather_perf, reduce_scatter_perf, broadcast_perf and\n"
                 "               reduce_perf\n"
                 "  barrier      barrier latency\n"
                 "  sendrecv     every rank sends to the next and receives from the previous\n"
                 "               at once, as nccl-tests' sendrecv_perf\n"
                 "  alltoall, gather, scatter\n"
                 "               as nccl-tests' alltoall_perf, gather_perf and scatter_perf\n"
                 "  allgatherv   allgatherv with blocks of one size, counted as allgather\n"
                 "  alltoallv    alltoallv with blocks of one size, counted as alltoall, as\n"
                 "               OSU's osu_alltoallv\n"
                 "  p2p          point-to-point bandwidth and latency between ranks 0 and 1,\n"
                 "               as perftest's ib_write_bw and ib_write_lat\n"
                 "  mbw_mr       message rate and bandwidth of several pairs at once, each\n"
                 "               with a window of messages in flight, as OSU's osu_mbw_mr\n"
                 "  tune         measure the cost model's alpha, beta and gamma and write\n"
                 "               them as a tuning file for GW_TUNING_FILE\n"
                 "  compress     gradient compression codecs against the dense allreduce\n"
                 "\n"
                 "Run `gradwire-bench BENCHMARK --help` for its options. Start one process\n"
                 "per rank, e.g. `gradwire launch -n 4 gradwire-bench allreduce`.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GW_BENCH_EXIT_USAGE;
    }
    const char *name = argv[1];
    static const char *const colls[] = {"allreduce", "allgather", "reduce_scatter", "broadcast",
                                        "reduce",    "barrier",   "sendrecv",       "alltoall",
                                        "gather",    "scatter",   "allgatherv",     "alltoallv"};
    for (size_t i = 0; i < sizeof(colls) / sizeof(colls[0]); i++)
        if (strcmp(name, colls[i]) == 0)
            return gw_bench_coll_main(argc - 1, argv + 1);
    if (strcmp(name, "p2p") == 0)
        return gw_bench_p2p_main(argc - 1, argv + 1);
    if (strcmp(name, "mbw_mr") == 0)
        return gw_bench_mbw_mr_main(argc - 1, argv + 1);
    if (strcmp(name, "tune") == 0)
        return gw_bench_tune_main(argc - 1, argv + 1);
    if (strcmp(name, "compress") == 0)
        return gw_bench_compress_main(argc - 1, argv + 1);
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        printf("gradwire-bench (gradwire %s)\n", gw_version());
        return 0;
    }
    fprintf(stderr, "gradwire-bench: unknown benchmark \"%s\"\n", name);
    usage(stderr);
    return GW_BENCH_EXIT_USAGE;
}
