/*
 * worker_fr.c - one rank of the flight recorder, trace and status tests
 * (fr_test.sh): a few small allreduces, then large ones, during which rank
 * 2 does what the mode says.
 *
 * Usage: worker_fr MODE
 *   stop   rank 2 stops itself (SIGSTOP) 30 ms into the large allreduces;
 *          a child it forked first sends it SIGCONT GW_TIMEOUT_MS + 3 s
 *          later, so that it fails too (and dumps) and exits
 *   abort  rank 2 calls abort() 30 ms into them (the fatal-signal dump)
 *   run    no fault: the large allreduces run for WORKER_FR_SECONDS
 *          (default 1) while something watches the job (gradwire status),
 *          with a span of "compute" (gw_trace_span) between two of them
 *   splitstop  the job splits in halves (gw_comm_split, ranks 0,1 and
 *          2,3) after the small allreduces; the large ones run on the
 *          halves, where rank 2 stops itself as in stop (ranks 2 and 3
 *          fail, and dump that communicator: rank-N.comm-X.json); ranks 0
 *          and 1 run theirs as in run, and exit 0 whatever the outcome
 * Rank 0 prints "root: GW_ROOT" once the communicator is made; each rank
 * prints "rank R: STATUS after N calls" and exits 0 when the
 * mode's outcome came (an error for stop and abort, success for run).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define SMALL_CALLS 5
#define BIG (1u << 21) /* floats: 8 MiB */

static int wake_fd = -1;

static void stop_now(int sig)
{
    (void)sig;
    char b = 1;
    (void)!write(wake_fd, &b, 1);
    raise(SIGSTOP);
}

static void abort_now(int sig)
{
    (void)sig;
    abort();
}

/* A child that sends the parent SIGCONT ms after the parent stopped. */
static void start_waker(int ms)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    pid_t parent = getpid();
    if (fork() == 0) {
        close(p[1]);
        char b;
        if (read(p[0], &b, 1) == 1) {
            usleep((useconds_t)ms * 1000);
            kill(parent, SIGCONT);
        }
        _exit(0);
    }
    close(p[0]);
    wake_fd = p[1];
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "run";
    const char *rank_s = getenv("RANK");
    int my_rank = rank_s ? atoi(rank_s) : -1;
    const char *t = getenv("GW_TIMEOUT_MS");
    int timeout_ms = t ? atoi(t) : 30000;
    int split = strcmp(mode, "splitstop") == 0;
    if (split)
        mode = my_rank < 2 ? "run" : "stop";
    if (strcmp(mode, "stop") == 0 && my_rank == 2)
        start_waker(timeout_ms + 3000);

    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("rank %d: %s (init)\n", my_rank, gw_status_name(st));
        return 1;
    }
    int rank = gw_comm_rank(comm);
    if (rank == 0 && getenv("GW_ROOT")) { /* for `gradwire status` (fr_test.sh) */
        printf("root: %s\n", getenv("GW_ROOT"));
        fflush(stdout);
    }
    float small[2] = {1, 2}, out[2];
    int calls = 0;
    for (int i = 0; i < SMALL_CALLS && st == GW_OK; i++, calls++)
        st = gw_allreduce(comm, small, out, 2, GW_FLOAT32, GW_SUM);

    gw_comm_t *work = comm; /* the large allreduces' communicator */
    if (split && st == GW_OK) {
        st = gw_comm_split(comm, rank / 2, rank, &work);
        if (st != GW_OK) {
            printf("rank %d: %s (split)\n", rank, gw_status_name(st));
            return 1;
        }
    }
    float *big = calloc(BIG, sizeof(float));
    if (!big)
        return 1;
    if (rank == 2 && strcmp(mode, "run") != 0) {
        signal(SIGALRM, strcmp(mode, "stop") == 0 ? stop_now : abort_now);
        struct itimerval it = {.it_value = {.tv_usec = 30000}};
        setitimer(ITIMER_REAL, &it, NULL);
    }
    const char *secs_s = getenv("WORKER_FR_SECONDS");
    int64_t end = now_ns() + (int64_t)((secs_s ? atof(secs_s) : 1.0) * 1e9);
    /* Faults: keep calling until the fault has struck (each call is long
     * against the 30 ms of the timer, so it strikes inside one). */
    /* run: rank 0's clock decides, for all: its flag in big[0] reaches
     * every rank through the allreduce itself, so all make the same calls. */
    int go = 1;
    for (int i = 0; st == GW_OK && go && i < 100000; i++, calls++) {
        int64_t c0 = now_ns();
        if (i == 1)
            usleep(2000); /* some work of the application's own */
        if (i == 1)
            gw_trace_span(comm, "compute", "compute", c0, now_ns());
        big[0] = gw_comm_rank(work) == 0 && now_ns() < end ? 1.0f : 0.0f;
        st = gw_allreduce(work, big, big, BIG, GW_FLOAT32, GW_SUM);
        go = strcmp(mode, "run") != 0 || big[0] > 0.5f;
    }
    printf("rank %d: %s after %d calls\n", rank, gw_status_name(st), calls);
    fflush(stdout);
    free(big);
    if (work != comm)
        gw_comm_destroy(work);
    gw_comm_destroy(comm);
    /* splitstop: rank 2's fault fails the job, so every rank ends with an
     * error, the halves' ranks 0 and 1 perhaps before their run is over;
     * each exits 0 (the launcher would stop the others at a first
     * failure, and rank 2 before it woke to dump). */
    if (split)
        return 0;
    return strcmp(mode, "run") == 0 ? st != GW_OK : st == GW_OK;
}
