/*
 * mpi_allreduce.c - MPI_Allreduce benchmark, printed like nccl-tests and
 * gradwire-bench allreduce, so gradwire can be compared with the MPI its
 * users already have (Open MPI on Debian; any MPI-3 library builds it).
 *
 * Each size runs a correctness pass (when -c 1), then out-of-place and
 * in-place, each as gradwire-bench times it: a barrier, warm-up iterations,
 * then timed iterations back to back, each timed on every rank on its own.
 * After the loop the per-iteration times are reduced with MPI_MAX, so each
 * sample is the slowest rank's view of that iteration, and the table shows
 * the median of those samples. Gathering once after the loop keeps the
 * gather out of the timed region.
 *
 *   mpirun -np 4 ./mpi_allreduce -b 8 -e 32M -f 2 [--json out.json]
 *
 * Transport choice belongs to mpirun (--mca btl tcp,self or vader,self for
 * Open MPI); --label records it in the JSON report.
 */
#include "peer_common.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static MPI_Datatype mpi_dtype(peer_dtype_t t)
{
    switch (t) {
    case PEER_FLOAT32:
        return MPI_FLOAT;
    case PEER_FLOAT64:
        return MPI_DOUBLE;
    case PEER_INT32:
        return MPI_INT32_T;
    }
    return MPI_DATATYPE_NULL;
}

static MPI_Op mpi_op(peer_op_t op)
{
    switch (op) {
    case PEER_SUM:
        return MPI_SUM;
    case PEER_MAX:
        return MPI_MAX;
    case PEER_MIN:
        return MPI_MIN;
    }
    return MPI_OP_NULL;
}

static void usage(FILE *f, const char *prog)
{
    fprintf(f,
            "usage: mpirun [mpirun options] %s [options]\n"
            "MPI_Allreduce benchmark with nccl-tests columns (out-of-place and in-place).\n",
            prog);
    peer_opts_usage(f);
    fprintf(f, "  -h, --help              this text\n");
}

/* Parses the command line identically on every rank, so every rank reaches
 * the same verdict; only rank 0 prints. Returns 1 to run, 0 after --help,
 * -1 on a bad command line. */
static int parse_args(struct peer_opts *o, int argc, char **argv, int rank)
{
    int i;

    peer_opts_default(o);
    for (i = 1; i < argc; i++) {
        int rc;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            if (rank == 0)
                usage(stdout, argv[0]);
            return 0;
        }
        rc = peer_opts_parse_one(o, argc, argv, &i, rank == 0);
        if (rc < 0)
            return -1;
        if (rc == 0) {
            if (rank == 0)
                fprintf(stderr, "error: unknown option '%s' (see --help)\n", argv[i]);
            return -1;
        }
    }
    if (peer_opts_validate(o, rank == 0) != 0)
        return -1;
    if (o->max_bytes / peer_dtype_size(o->dtype) > INT_MAX) {
        if (rank == 0)
            fprintf(stderr,
                    "error: -e %zu needs more than INT_MAX elements, which MPI_Allreduce's "
                    "int count cannot express\n",
                    o->max_bytes);
        return -1;
    }
    return 1;
}

/* Runs warm-up and timed iterations of one mode. send == MPI_IN_PLACE
 * selects the in-place form. On rank 0, times[] receives the per-iteration
 * maximum over ranks. */
static void time_mode(const struct peer_opts *o, const void *send, void *recv, int count,
                      double *mine, double *times, MPI_Comm comm)
{
    MPI_Datatype dt = mpi_dtype(o->dtype);
    MPI_Op op = mpi_op(o->op);
    int k;

    MPI_Barrier(comm);
    for (k = 0; k < o->warmup; k++)
        MPI_Allreduce(send, recv, count, dt, op, comm);
    for (k = 0; k < o->iters; k++) {
        double t0 = peer_now();
        MPI_Allreduce(send, recv, count, dt, op, comm);
        mine[k] = peer_now() - t0;
    }
    MPI_Reduce(mine, times, o->iters, MPI_DOUBLE, MPI_MAX, 0, comm);
}

/* Runs one allreduce of each mode on fresh patterns and returns this rank's
 * wrong elements summed over ranks, per mode. */
static void check_size(const struct peer_opts *o, void *send, void *recv, int count, int rank,
                       int nranks, uint64_t wrong[2], MPI_Comm comm)
{
    MPI_Datatype dt = mpi_dtype(o->dtype);
    MPI_Op op = mpi_op(o->op);
    uint64_t mine[2];

    peer_fill(send, (size_t)count, o->dtype, rank);
    memset(recv, 0xa5, (size_t)count * peer_dtype_size(o->dtype));
    MPI_Allreduce(send, recv, count, dt, op, comm);
    mine[0] = peer_check(recv, (size_t)count, o->dtype, o->op, nranks);

    peer_fill(recv, (size_t)count, o->dtype, rank);
    MPI_Allreduce(MPI_IN_PLACE, recv, count, dt, op, comm);
    mine[1] = peer_check(recv, (size_t)count, o->dtype, o->op, nranks);

    MPI_Allreduce(mine, wrong, 2, MPI_UINT64_T, MPI_SUM, comm);
}

/* What the JSON and the header call the transport and the algorithm: Open
 * MPI's choices arrive as OMPI_MCA_* variables when given to mpirun with
 * --mca, and otherwise the library picks. */
static const char *mca_or(const char *name, const char *fallback)
{
    const char *v = getenv(name);
    return v != NULL && *v != '\0' ? v : fallback;
}

/* The first line of MPI_Get_library_version(), e.g. "Open MPI v4.1.4, ...". */
static void library_version(char *buf, size_t len)
{
    char full[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;

    MPI_Get_library_version(full, &n);
    full[n < (int)sizeof(full) ? n : (int)sizeof(full) - 1] = '\0';
    full[strcspn(full, "\r\n")] = '\0';
    snprintf(buf, len, "%s", full);
}

/* A short library name for the report, from the version string. */
static const char *library_name(const char *version)
{
    if (strncmp(version, "Open MPI", 8) == 0)
        return "openmpi";
    if (strstr(version, "MPICH") != NULL)
        return "mpich";
    return "mpi";
}

int main(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    struct peer_opts o;
    struct peer_report report;
    char version[256];
    void *send = NULL, *recv = NULL;
    double *mine = NULL, *times = NULL;
    size_t tsize, bytes;
    int rank, nranks, rc, ok, all_ok;
    int status = 1;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);

    rc = parse_args(&o, argc, argv, rank);
    if (rc <= 0) {
        MPI_Finalize();
        return rc == 0 ? 0 : 2;
    }
    tsize = peer_dtype_size(o.dtype);
    library_version(version, sizeof(version));

    /* Every rank must agree to go on, or a rank that failed to allocate
     * would leave the others waiting in the first collective. */
    ok = posix_memalign(&send, 4096, o.max_bytes) == 0 &&
         posix_memalign(&recv, 4096, o.max_bytes) == 0 &&
         (mine = malloc((size_t)o.iters * sizeof(*mine))) != NULL &&
         (times = malloc((size_t)o.iters * sizeof(*times))) != NULL;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, comm);
    if (!all_ok) {
        if (!ok)
            fprintf(stderr, "error: rank %d: cannot allocate 2 x %zu bytes of buffers\n", rank,
                    o.max_bytes);
        goto out_free;
    }

    if (rank == 0) {
        peer_report_init(&report, stdout, &o, library_name(version), version,
                         mca_or("OMPI_MCA_btl", "library default"),
                         mca_or("OMPI_MCA_coll_tuned_allreduce_algorithm", "library default"),
                         nranks);
        peer_report_header(&report);
    }
    for (bytes = o.min_bytes; bytes != 0; bytes = peer_next_size(&o, bytes)) {
        struct peer_row row;
        int count = (int)(bytes / tsize);
        uint64_t wrong[2] = {0, 0};

        memset(&row, 0, sizeof(row));
        if (o.check)
            check_size(&o, send, recv, count, rank, nranks, wrong, comm);

        /* The in-place buffer starts from the pattern and is not refilled
         * between iterations (as nccl-tests): its values grow, which costs a
         * CPU reduction nothing, and refilling would warm the caches. */
        peer_fill(send, (size_t)count, o.dtype, rank);
        time_mode(&o, send, recv, count, mine, times, comm);
        if (rank == 0) {
            row.bytes = (size_t)count * tsize;
            row.count = (size_t)count;
            peer_stats_compute(&row.oop, times, o.iters, row.bytes, nranks);
            row.oop.wrong = wrong[0];
        }
        peer_fill(recv, (size_t)count, o.dtype, rank);
        time_mode(&o, MPI_IN_PLACE, recv, count, mine, times, comm);
        if (rank == 0) {
            peer_stats_compute(&row.ip, times, o.iters, row.bytes, nranks);
            row.ip.wrong = wrong[1];
            peer_report_row(&report, &row);
        }
    }
    if (rank == 0) {
        status = peer_report_finish(&report) == 0 && peer_report_wrong(&report) == 0 ? 0 : 1;
        peer_report_free(&report);
    } else {
        status = 0;
    }
    /* A wrong result anywhere fails every rank, so mpirun's status shows it
     * whichever rank it reports. */
    MPI_Allreduce(MPI_IN_PLACE, &status, 1, MPI_INT, MPI_MAX, comm);

out_free:
    free(times);
    free(mine);
    free(recv);
    free(send);
    MPI_Finalize();
    return status;
}
