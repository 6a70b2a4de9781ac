/*
 * worker_trial.c - one rank of a fault-injection trial (scripts/fault-trials).
 *
 * The rank joins (gw_comm_init_culprit from the environment), then runs collectives whose results it
 * can check, one after another, until one fails: allreduce (float32 sum and
 * int32 max) over several sizes, broadcast from a rotating root and
 * allgather, every result compared element by element with the value it
 * must have. The driver meanwhile SIGKILLs or SIGSTOPs one rank at a random
 * moment, from outside; this worker does nothing to bring the fault about,
 * so what it reports is what the library did about it.
 *
 * Output, on stdout, machine-readable, one line each:
 *   GWTRIAL ready rank=R at=MONO_MS init_ms=MS transport=NAME
 *       after gw_comm_init_env succeeded (the driver uses it to tell a fault
 *       during the join from one during the collectives);
 *   GWTRIAL end rank=R status=NAME culprit=K phase=init|loop iters=I
 *       wrong=W at=MONO_MS call_ms=MS since_fault_ms=MS op=WHAT
 *       when the rank stops: status is the first non-OK status (GW_OK only
 *       when the iteration cap was reached without a fault); culprit is
 *       gw_comm_culprit(), or when the join itself failed (there is no
 *       communicator to ask) the rank gw_comm_init_culprit blamed; iters the collectives that returned GW_OK;
 *       wrong how many of those had a wrong result; at the CLOCK_MONOTONIC
 *       time of the error in ms (comparable across processes, network
 *       namespaces included); call_ms how long the failing call ran (from
 *       this rank's own view: the time from its first sign of trouble);
 *       since_fault_ms the time from the injected fault to the error, when
 *       the driver wrote the fault's time to $GW_TRIAL_FAULT_FILE before
 *       this rank got its error (else -1; the driver then computes it).
 * A rank that was killed or stopped prints no end line, obviously.
 *
 * Environment: what gw_comm_init_env reads (RANK, WORLD_SIZE, GW_ROOT,
 * GW_JOB_TOKEN, GW_TIMEOUT_MS, GW_TRANSPORT, ...); GW_TRIAL_FAULT_FILE (see
 * above); GW_TRIAL_MAX_ITERS caps the loop (default 1000000) and
 * GW_TRIAL_MAX_MS its duration (default 120000), for runs by hand.
 *
 * Exit status: 0 when the rank ended with an error and every result it got
 * was right; 1 when a result was wrong; 3 when it reached the cap without
 * an error; 2 for a usage problem.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradwire.h"

/* Element counts, cycled: a single element, odd sizes that do not divide
 * evenly into ring chunks, and one large enough (4 MiB of float32) that a
 * fault often lands in the middle of a transfer. */
static const size_t counts[] = {1, 7, 1023, 65536, 1 << 20, 100003};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))
#define MAX_COUNT ((size_t)1 << 20)
/* Kinds of collective, cycled together with the counts. */
enum { K_SUM, K_MAX, K_BCAST, K_GATHER, NKINDS };
static const char *const kind_names[] = {"allreduce_sum", "allreduce_max", "broadcast",
                                         "allgather"};
/* allgather's per-rank count is this fraction of the cycled count. */
#define GATHER_DIV 16

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long env_long(const char *name, long def)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x <= 0 ? def : x;
}

/* The fault's CLOCK_MONOTONIC time in ms, as the driver wrote it, or -1. */
static double fault_time(void)
{
    const char *path = getenv("GW_TRIAL_FAULT_FILE");
    if (!path || !*path)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    double t = -1;
    if (fscanf(f, "%lf", &t) != 1)
        t = -1;
    fclose(f);
    return t;
}

/* The value rank r contributes at element i of iteration it: small
 * integers, so float32 sums over up to 64 ranks are exact. */
static int32_t value(int r, size_t i, long it)
{
    return (int32_t)((i + (size_t)it) % 61 + 1) * (r + 1);
}

static int check_f32(const float *got, size_t n, int size, long it)
{
    int32_t tri = size * (size + 1) / 2;
    for (size_t i = 0; i < n; i++)
        if (got[i] != (float)(value(0, i, it) * tri))
            return 0;
    return 1;
}

static int check_max(const int32_t *got, size_t n, int size, long it)
{
    for (size_t i = 0; i < n; i++)
        if (got[i] != value(size - 1, i, it))
            return 0;
    return 1;
}

static int check_gather(const int32_t *got, size_t per, int size, long it)
{
    for (int r = 0; r < size; r++)
        for (size_t i = 0; i < per; i++)
            if (got[(size_t)r * per + i] != value(r, i, it))
                return 0;
    return 1;
}

int main(int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "usage: worker_trial (configured by the environment; see the source)\n");
        return 2;
    }
    const char *rank_env = getenv("RANK");
    int my_rank = rank_env ? atoi(rank_env) : -1;
    long max_iters = env_long("GW_TRIAL_MAX_ITERS", 1000000);
    double max_ms = (double)env_long("GW_TRIAL_MAX_MS", 120000);

    double t0 = now_ms();
    gw_comm_t *comm = NULL;
    int init_culprit = -1;
    gw_status_t st = gw_comm_init_culprit(NULL, &comm, &init_culprit);
    double t1 = now_ms();
    if (st != GW_OK) {
        double tf = fault_time();
        printf("GWTRIAL end rank=%d status=%s culprit=%d phase=init iters=0 wrong=0 at=%.3f "
               "call_ms=%.1f since_fault_ms=%.1f op=init\n",
               my_rank, gw_status_name(st), init_culprit, t1, t1 - t0, tf >= 0 ? t1 - tf : -1.0);
        fflush(stdout);
        return 0;
    }
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    printf("GWTRIAL ready rank=%d at=%.3f init_ms=%.1f transport=%s\n", rank, t1, t1 - t0,
           gw_comm_transport(comm));
    fflush(stdout);

    size_t cap = MAX_COUNT * (size_t)size; /* allgather's output is the largest */
    int32_t *send = malloc(cap * sizeof(int32_t)), *recv = malloc(cap * sizeof(int32_t));
    float *fsend = malloc(MAX_COUNT * sizeof(float)), *frecv = malloc(MAX_COUNT * sizeof(float));
    if (!send || !recv || !fsend || !frecv) {
        fprintf(stderr, "worker_trial: out of memory\n");
        return 2;
    }
    long it = 0, wrong = 0;
    const char *what = "none";
    double call_start = now_ms(), call_end = call_start;
    while (it < max_iters && call_start - t1 < max_ms) {
        int kind = (int)(it % NKINDS);
        size_t n = counts[(it / NKINDS) % NCOUNTS];
        what = kind_names[kind];
        int ok = 1;
        call_start = now_ms();
        switch (kind) {
        case K_SUM:
            for (size_t i = 0; i < n; i++)
                fsend[i] = (float)value(rank, i, it);
            memset(frecv, 0, n * sizeof(float));
            st = gw_allreduce(comm, fsend, frecv, n, GW_FLOAT32, GW_SUM);
            call_end = now_ms();
            ok = st != GW_OK || check_f32(frecv, n, size, it);
            break;
        case K_MAX:
            for (size_t i = 0; i < n; i++)
                send[i] = value(rank, i, it);
            memset(recv, 0, n * sizeof(int32_t));
            st = gw_allreduce(comm, send, recv, n, GW_INT32, GW_MAX);
            call_end = now_ms();
            ok = st != GW_OK || check_max(recv, n, size, it);
            break;
        case K_BCAST: {
            int root = (int)((it / NKINDS) % size);
            for (size_t i = 0; i < n; i++)
                send[i] = value(root, i, it);
            memset(recv, 0, n * sizeof(int32_t));
            st = gw_broadcast(comm, rank == root ? send : NULL, recv, n, GW_INT32, root);
            call_end = now_ms();
            ok = st != GW_OK || memcmp(recv, send, n * sizeof(int32_t)) == 0;
            break;
        }
        default: {
            size_t per = n / GATHER_DIV + 1;
            for (size_t i = 0; i < per; i++)
                send[i] = value(rank, i, it);
            memset(recv, 0, per * (size_t)size * sizeof(int32_t));
            st = gw_allgather(comm, send, recv, per, GW_INT32);
            call_end = now_ms();
            ok = st != GW_OK || check_gather(recv, per, size, it);
            break;
        }
        }
        if (st != GW_OK)
            break;
        if (!ok) {
            if (wrong == 0)
                fprintf(stderr,
                        "worker_trial: rank %d: wrong result of %s of %zu elements "
                        "(iteration %ld)\n",
                        rank, what, n, it);
            wrong++;
        }
        it++;
    }
    double tf = fault_time();
    printf("GWTRIAL end rank=%d status=%s culprit=%d phase=loop iters=%ld wrong=%ld at=%.3f "
           "call_ms=%.1f since_fault_ms=%.1f op=%s\n",
           rank, gw_status_name(st), gw_comm_culprit(comm), it, wrong, call_end,
           call_end - call_start, st != GW_OK && tf >= 0 ? call_end - tf : -1.0,
           st != GW_OK ? what : "none");
    fflush(stdout);
    gw_comm_destroy(comm);
    free(send);
    free(recv);
    free(fsend);
    free(frecv);
    if (wrong)
        return 1;
    return st != GW_OK ? 0 : 3;
}
