/*
 * mpi_pingpong.c - MPI point-to-point latency, as OSU's osu_latency and
 * `gradwire-bench p2p -m lat` measure it: ranks 0 and 1 bounce one message
 * back and forth (MPI_Send then MPI_Recv on rank 0, the other way round on
 * rank 1), and each iteration's latency is half its round trip as rank 0
 * sees it. The table gives the median, 90th and 99th percentiles, least
 * and most over the timed iterations, in microseconds; --json writes the
 * same rows with the keys of gradwire-bench p2p's lat_us, so that
 * bench/latency.sh reads both alike. With --sync the sends are MPI_Ssend,
 * which complete only once the receive matched them: the peer of
 * gradwire's default synchronous sends (GW_P2P_SEND=sync); MPI_Send is
 * the peer of GW_P2P_SEND=standard.
 *
 *   mpirun -np 2 ./mpi_pingpong -b 8 -e 64K [-n 1000] [-w 100] [--sync] [--json out.json]
 *
 * Sizes double from -b to -e. Transport choice belongs to mpirun (--mca
 * btl tcp,self or vader,self for Open MPI). Other ranks than 0 and 1 only
 * wait at the barriers.
 */
#include "peer_common.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The p-th percentile of sorted v[0..n). */
static double pct(const double *v, int n, double p)
{
    int i = (int)(p / 100.0 * (n - 1) + 0.5);
    return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpirun -np 2 [mpirun options] %s [-b MIN] [-e MAX] [-n ITERS] [-w WARMUP] "
            "[--sync] [--json FILE]\n"
            "MPI ping-pong latency (half the round trip), as osu_latency; --sync: MPI_Ssend "
            "instead of MPI_Send.\n",
            prog);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t minb = 8, maxb = 64 * 1024;
    int iters = 1000, warmup = 100;
    const char *json = NULL;
    int sync = 0;
    for (int i = 1; i < argc; i++) {
        int more = i + 1 < argc;
        if (!strcmp(argv[i], "-b") && more && peer_parse_size(argv[i + 1], &minb) == 0) {
            i++;
        } else if (!strcmp(argv[i], "-e") && more && peer_parse_size(argv[i + 1], &maxb) == 0) {
            i++;
        } else if (!strcmp(argv[i], "-n") && more && atoi(argv[i + 1]) > 0) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "-w") && more && atoi(argv[i + 1]) >= 0) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sync")) {
            sync = 1;
        } else if (!strcmp(argv[i], "--json") && more) {
            json = argv[++i];
        } else {
            if (rank == 0) {
                fprintf(stderr, "%s: bad or unknown argument '%s'\n", argv[0], argv[i]);
                usage(stderr, argv[0]);
            }
            MPI_Finalize();
            return 2;
        }
    }
    if (size < 2 || minb < 1 || maxb < minb) {
        if (rank == 0)
            fprintf(stderr, "%s: needs at least 2 ranks and 1 <= -b <= -e\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    char *sbuf = malloc(maxb), *rbuf = malloc(maxb);
    double *lat = malloc(sizeof(double) * (size_t)iters);
    if (!sbuf || !rbuf || !lat) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(sbuf, 0xA5, maxb);
    FILE *jf = NULL;
    if (rank == 0) {
        char ver[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0;
        MPI_Get_library_version(ver, &len);
        char *nl = strchr(ver, '\n');
        if (nl)
            *nl = '\0';
        printf("# %s, %s\n# %8s %10s %10s %10s %10s %10s\n", ver, sync ? "MPI_Ssend" : "MPI_Send",
               "size", "p50_us", "p90_us", "p99_us", "min_us", "max_us");
        if (json && !(jf = fopen(json, "w"))) {
            fprintf(stderr, "%s: cannot write %s\n", argv[0], json);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        if (jf)
            fprintf(jf,
                    "{\"benchmark\": \"pingpong\", \"library\": \"openmpi\", \"send\": \"%s\", "
                    "\"ranks\": %d, \"iters\": %d, \"warmup_iters\": %d, \"results\": [",
                    sync ? "MPI_Ssend" : "MPI_Send", size, iters, warmup);
    }
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm) = sync ? MPI_Ssend : MPI_Send;
    for (size_t b = minb; b <= maxb; b *= 2) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = -warmup; i < iters; i++) {
            double t0 = MPI_Wtime();
            if (rank == 0) {
                send(sbuf, (int)b, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)b, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(rbuf, (int)b, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                send(sbuf, (int)b, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
            }
            if (i >= 0)
                lat[i] = (MPI_Wtime() - t0) * 1e6 / 2;
        }
        if (rank == 0) {
            qsort(lat, (size_t)iters, sizeof(double), cmp_double);
            double p50 = pct(lat, iters, 50), p90 = pct(lat, iters, 90), p99 = pct(lat, iters, 99);
            printf("  %8zu %10.2f %10.2f %10.2f %10.2f %10.2f\n", b, p50, p90, p99, lat[0],
                   lat[iters - 1]);
            if (jf)
                fprintf(jf,
                        "%s{\"bytes\": %zu, \"lat_us\": {\"p50\": %g, \"p90\": %g, \"p99\": %g, "
                        "\"min\": %g, \"max\": %g}}",
                        b == minb ? "" : ", ", b, p50, p90, p99, lat[0], lat[iters - 1]);
        }
        if (b > maxb / 2)
            break;
    }
    if (jf) {
        fprintf(jf, "]}\n");
        fclose(jf);
    }
    free(sbuf);
    free(rbuf);
    free(lat);
    MPI_Finalize();
    return 0;
}
