/*
 * gloo_allreduce.cc - Gloo allreduce benchmark, printed like nccl-tests and
 * gradwire-bench allreduce, so gradwire can be compared with the library
 * PyTorch's CPU backend uses, measured side by side in one run.
 *
 * Ranks meet through a gloo::rendezvous::FileStore in a directory every rank
 * can see (--store DIR; use a fresh one per run, or a new --prefix: the
 * store never overwrites a key, so keys left by an earlier run make every
 * rank fail at once with "File already exists"), then connect a full mesh over
 * Gloo's TCP transport bound to --hostname. Rank and world size come from
 * RANK and WORLD_SIZE (as `gradwire launch` sets them) or --rank and
 * --world-size.
 *
 * Gloo's algorithm objects (AllreduceRingChunked, AllreduceHalvingDoubling,
 * AllreduceRing) are built once per size, outside the timed region, as Gloo's
 * own benchmark and PyTorch do, and only run() is timed. They reduce in
 * place; the out-of-place figure times a memcpy of the input into the output
 * followed by the in-place run, which is what a caller that needs to keep its
 * input must do with these classes.
 *
 * Timing is gradwire-bench's, as in mpi_allreduce.c: a barrier, warm-up
 * iterations, then timed iterations back to back, each timed on every rank;
 * afterwards the per-iteration times are reduced with max, and the table
 * shows the median of those maxima.
 */
#include "peer_common.h"

#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

namespace
{

enum class Algo { RingChunked, HalvingDoubling, Ring };

struct GlooOpts {
    struct peer_opts common;
    Algo algo = Algo::RingChunked;
    const char *algo_name = "ring_chunked";
    std::string store;
    std::string prefix;
    std::string hostname = "127.0.0.1";
    int rank = -1;
    int size = -1;
    int timeout_ms = 60000;
};

void usage(FILE *f, const char *prog)
{
    std::fprintf(f,
                 "usage: %s --store DIR [options]\n"
                 "Gloo allreduce benchmark with nccl-tests columns (out-of-place and in-place).\n"
                 "Start one process per rank; RANK and WORLD_SIZE come from the environment\n"
                 "unless given as flags.\n",
                 prog);
    peer_opts_usage(f);
    std::fprintf(f,
                 "      --algo A            ring_chunked (default), halving_doubling, ring\n"
                 "      --store DIR         FileStore rendezvous directory, shared by all ranks;\n"
                 "                          use a fresh one per run (created if missing)\n"
                 "      --prefix STR        key prefix inside the store (to reuse one DIR)\n"
                 "      --hostname ADDR     address of this rank's TCP device (default 127.0.0.1)\n"
                 "      --rank N            this rank (default $RANK)\n"
                 "      --world-size N      number of ranks (default $WORLD_SIZE)\n"
                 "      --timeout-ms MS     Gloo's I/O and rendezvous timeout (default 60000)\n"
                 "  -h, --help              this text\n");
}

bool parse_nonneg(const char *s, int min, int *out)
{
    char *end;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > INT_MAX)
        return false;
    *out = static_cast<int>(v);
    return true;
}

/* Returns 1 to run, 0 after --help, -1 on a bad command line. Every rank
 * prints its own errors: with hand-started processes there is no one rank
 * whose terminal is the only one watched. */
int parse_args(GlooOpts *g, int argc, char **argv)
{
    peer_opts_default(&g->common);
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (std::strcmp(arg, "-h") == 0 || std::strcmp(arg, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        }
        int rc = peer_opts_parse_one(&g->common, argc, argv, &i, 1);
        if (rc < 0)
            return -1;
        if (rc > 0)
            continue;
        static const char *const with_value[] = {"--algo",      "--store", "--prefix",
                                                 "--hostname",  "--rank",  "--world-size",
                                                 "--timeout-ms"};
        bool known = false;
        for (const char *name : with_value)
            known = known || std::strcmp(arg, name) == 0;
        if (!known) {
            std::fprintf(stderr, "error: unknown option '%s' (see --help)\n", arg);
            return -1;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "error: option %s needs a value\n", arg);
            return -1;
        }
        const char *val = argv[++i];
        bool ok = true;
        if (std::strcmp(arg, "--algo") == 0) {
            if (std::strcmp(val, "ring_chunked") == 0)
                g->algo = Algo::RingChunked;
            else if (std::strcmp(val, "halving_doubling") == 0)
                g->algo = Algo::HalvingDoubling;
            else if (std::strcmp(val, "ring") == 0)
                g->algo = Algo::Ring;
            else
                ok = false;
            g->algo_name = val;
        } else if (std::strcmp(arg, "--store") == 0) {
            g->store = val;
            ok = *val != '\0';
        } else if (std::strcmp(arg, "--prefix") == 0) {
            g->prefix = val;
        } else if (std::strcmp(arg, "--hostname") == 0) {
            g->hostname = val;
            ok = *val != '\0';
        } else if (std::strcmp(arg, "--rank") == 0) {
            ok = parse_nonneg(val, 0, &g->rank);
        } else if (std::strcmp(arg, "--world-size") == 0) {
            ok = parse_nonneg(val, 1, &g->size);
        } else {
            ok = parse_nonneg(val, 1, &g->timeout_ms);
        }
        if (!ok) {
            std::fprintf(stderr, "error: bad value '%s' for %s (see --help)\n", val, arg);
            return -1;
        }
    }

    const char *env;
    if (g->rank < 0 && (env = std::getenv("RANK")) != nullptr && !parse_nonneg(env, 0, &g->rank)) {
        std::fprintf(stderr, "error: bad RANK='%s' in the environment\n", env);
        return -1;
    }
    if (g->size < 0 && (env = std::getenv("WORLD_SIZE")) != nullptr &&
        !parse_nonneg(env, 1, &g->size)) {
        std::fprintf(stderr, "error: bad WORLD_SIZE='%s' in the environment\n", env);
        return -1;
    }
    if (g->rank < 0 || g->size < 0) {
        std::fprintf(stderr, "error: rank and world size unknown: set RANK and WORLD_SIZE or "
                             "pass --rank and --world-size\n");
        return -1;
    }
    if (g->rank >= g->size) {
        std::fprintf(stderr, "error: rank %d is not below world size %d\n", g->rank, g->size);
        return -1;
    }
    if (g->store.empty()) {
        std::fprintf(stderr, "error: --store DIR is required (a fresh directory shared by all "
                             "ranks)\n");
        return -1;
    }
    if (peer_opts_validate(&g->common, 1) != 0)
        return -1;
    /* Gloo's algorithms keep the byte count in an int. */
    if (g->common.max_bytes > static_cast<size_t>(INT_MAX)) {
        std::fprintf(stderr, "error: -e %zu exceeds Gloo's limit of INT_MAX bytes per allreduce\n",
                     g->common.max_bytes);
        return -1;
    }
    return 1;
}

template <typename T> const gloo::ReductionFunction<T> *reduction(peer_op_t op)
{
    switch (op) {
    case PEER_MAX:
        return gloo::ReductionFunction<T>::max;
    case PEER_MIN:
        return gloo::ReductionFunction<T>::min;
    case PEER_SUM:
        break;
    }
    return gloo::ReductionFunction<T>::sum;
}

template <typename T>
std::unique_ptr<gloo::Algorithm>
make_algo(const GlooOpts &g, const std::shared_ptr<gloo::Context> &ctx, T *buf, int count)
{
    std::vector<T *> ptrs{buf};
    const gloo::ReductionFunction<T> *fn = reduction<T>(g.common.op);
    switch (g.algo) {
    case Algo::HalvingDoubling:
        return std::unique_ptr<gloo::Algorithm>(
            new gloo::AllreduceHalvingDoubling<T>(ctx, ptrs, count, fn));
    case Algo::Ring:
        return std::unique_ptr<gloo::Algorithm>(new gloo::AllreduceRing<T>(ctx, ptrs, count, fn));
    case Algo::RingChunked:
        break;
    }
    return std::unique_ptr<gloo::Algorithm>(
        new gloo::AllreduceRingChunked<T>(ctx, ptrs, count, fn));
}

/* Replaces times[] with its element-wise maximum over ranks. */
void max_over_ranks(const std::shared_ptr<gloo::Context> &ctx, std::vector<double> &times)
{
    gloo::AllreduceRing<double> gather(ctx, {times.data()}, static_cast<int>(times.size()),
                                       gloo::ReductionFunction<double>::max);
    gather.run();
}

/* The benchmark proper, for element type T. Returns the process status. */
template <typename T>
int run(const GlooOpts &g, const std::shared_ptr<gloo::Context> &ctx, const char *version)
{
    const struct peer_opts &o = g.common;
    const int rank = ctx->rank, nranks = ctx->size;
    const size_t tsize = sizeof(T);
    std::vector<T> send(o.max_bytes / tsize), recv(o.max_bytes / tsize);
    std::vector<double> times(static_cast<size_t>(o.iters));
    gloo::BarrierAllToAll barrier(ctx);
    struct peer_report report = {};

    if (rank == 0) {
        peer_report_init(&report, stdout, &o, "gloo", version, "tcp", g.algo_name, nranks);
        peer_report_header(&report);
    }
    for (size_t bytes = o.min_bytes; bytes != 0; bytes = peer_next_size(&o, bytes)) {
        const int count = static_cast<int>(bytes / tsize);
        const size_t nbytes = static_cast<size_t>(count) * tsize;
        std::unique_ptr<gloo::Algorithm> algo = make_algo<T>(g, ctx, recv.data(), count);
        struct peer_row row;
        std::memset(&row, 0, sizeof(row));
        row.bytes = nbytes;
        row.count = static_cast<size_t>(count);

        if (o.check) {
            /* Wrong counts travel as doubles: exact up to 2^53 elements. */
            std::vector<double> wrong(2);
            peer_fill(send.data(), row.count, o.dtype, rank);
            std::memcpy(recv.data(), send.data(), nbytes);
            algo->run();
            wrong[0] =
                static_cast<double>(peer_check(recv.data(), row.count, o.dtype, o.op, nranks));
            peer_fill(recv.data(), row.count, o.dtype, rank);
            algo->run();
            wrong[1] =
                static_cast<double>(peer_check(recv.data(), row.count, o.dtype, o.op, nranks));
            gloo::AllreduceRing<double> sum(ctx, {wrong.data()}, 2);
            sum.run();
            row.oop.wrong = static_cast<uint64_t>(wrong[0]);
            row.ip.wrong = static_cast<uint64_t>(wrong[1]);
        }

        peer_fill(send.data(), row.count, o.dtype, rank);
        barrier.run();
        for (int k = 0; k < o.warmup; k++) {
            std::memcpy(recv.data(), send.data(), nbytes);
            algo->run();
        }
        for (int k = 0; k < o.iters; k++) {
            double t0 = peer_now();
            std::memcpy(recv.data(), send.data(), nbytes);
            algo->run();
            times[static_cast<size_t>(k)] = peer_now() - t0;
        }
        max_over_ranks(ctx, times);
        if (rank == 0)
            peer_stats_compute(&row.oop, times.data(), o.iters, nbytes, nranks);

        /* As in mpi_allreduce.c, the in-place buffer is not refilled between
         * iterations: refilling would warm the caches. */
        peer_fill(recv.data(), row.count, o.dtype, rank);
        barrier.run();
        for (int k = 0; k < o.warmup; k++)
            algo->run();
        for (int k = 0; k < o.iters; k++) {
            double t0 = peer_now();
            algo->run();
            times[static_cast<size_t>(k)] = peer_now() - t0;
        }
        max_over_ranks(ctx, times);
        if (rank == 0) {
            peer_stats_compute(&row.ip, times.data(), o.iters, nbytes, nranks);
            peer_report_row(&report, &row);
        }
    }

    int status = 0;
    if (rank == 0) {
        status = peer_report_finish(&report) == 0 && peer_report_wrong(&report) == 0 ? 0 : 1;
        peer_report_free(&report);
    }
    /* Every rank exits with the verdict, whichever rank a launcher reports. */
    std::vector<double> verdict{static_cast<double>(status)};
    gloo::AllreduceRing<double> share(ctx, {verdict.data()}, 1,
                                      gloo::ReductionFunction<double>::max);
    share.run();
    return verdict[0] != 0.0 ? 1 : 0;
}

} // namespace

int main(int argc, char **argv)
{
    GlooOpts g;
    int rc = parse_args(&g, argc, argv);
    if (rc <= 0)
        return rc == 0 ? 0 : 2;

    /* Several ranks may race to create the directory; EEXIST is success. */
    if (mkdir(g.store.c_str(), 0700) != 0 && errno != EEXIST) {
        std::fprintf(stderr, "error: rank %d: cannot create store directory '%s': %s\n", g.rank,
                     g.store.c_str(), std::strerror(errno));
        return 1;
    }

    char version[32];
    std::snprintf(version, sizeof(version), "Gloo %d.%d.%d", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR,
                  GLOO_VERSION_PATCH);

    /* Gloo reports every failure (refused connection, timeout, dead peer) by
     * throwing; one handler turns them into a message and a status. */
    try {
        gloo::transport::tcp::attr attr;
        attr.hostname = g.hostname;
        auto dev = gloo::transport::tcp::CreateDevice(attr);

        gloo::rendezvous::FileStore file_store(g.store);
        std::unique_ptr<gloo::rendezvous::PrefixStore> prefixed;
        gloo::rendezvous::Store *store = &file_store;
        if (!g.prefix.empty()) {
            prefixed.reset(new gloo::rendezvous::PrefixStore(g.prefix, file_store));
            store = prefixed.get();
        }

        auto ctx = std::make_shared<gloo::rendezvous::Context>(g.rank, g.size);
        ctx->setTimeout(std::chrono::milliseconds(g.timeout_ms));
        ctx->connectFullMesh(*store, dev);

        switch (g.common.dtype) {
        case PEER_FLOAT64:
            return run<double>(g, ctx, version);
        case PEER_INT32:
            return run<int32_t>(g, ctx, version);
        case PEER_FLOAT32:
            break;
        }
        return run<float>(g, ctx, version);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "error: rank %d of %d: %s\n", g.rank, g.size, e.what());
        return 1;
    }
}
