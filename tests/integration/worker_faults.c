/*
 * worker_faults.c - one rank of the fault tests: ranks that disagree about a
 * collective, pass bad arguments, die, or use the wrong token. Every rank
 * must get an error (never a hang, never memory written past the count it
 * asked for). Each rank prints "rank R: STATUS_NAME after T ms, culprit K" (K from
 * gw_comm_culprit) and exits 0
 * when the outcome is an error with intact memory, 1 otherwise.
 *
 * Usage: worker_faults MODE   (count, dtype, zero, algo, op, null, overflow,
 *                              baddtype, badop, kill, killmid, token, stop,
 *                              late, absent, chain, connstop, connkill,
 *                              gatherstop)
 *
 * stop: rank 2 stops itself (SIGSTOP) 20 ms into a large allreduce; a child
 * it forked first sends it SIGCONT GW_TIMEOUT_MS + 4 s later, so that it
 * too prints its status and exits. late: rank 2 arrives GW_TIMEOUT_MS + 2 s
 * late at the allreduce (busy outside gradwire) while the others wait.
 * absent: rank 3 exits (status 0) without joining; the others' joins fail.
 * connstop, connkill: rank 2 stops (woken GW_TIMEOUT_MS + 4 s later) or
 * exits at its first data-plane connection (the first connect() to a port
 * other than the root's: this file's connect() stands in for libc's, TCP
 * transport only), after the join and the address all-gather; gatherstop:
 * rank 2 stops at its data plane's listen(), after the join and before its
 * part of the address all-gather. The others' joins fail, naming rank 2
 * (gw_comm_init_culprit).
 * Every mode prints its init failure as "rank R: STATUS after T ms (init),
 * culprit K".
 * chain: point-to-point waits 1 -> 0 -> 3 -> 2 (rank 1 receives from rank
 * 0, which receives from rank 3, which receives from rank 2), and rank 2
 * is busy for 10 s; rank 0 runs with GW_TIMEOUT_MS=3000, so it times out
 * first, waiting for rank 3, which has not timed out and is still waiting.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define COUNT 1023
#define PAD 4096
#define CANARY 0x5A

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die_now(int sig)
{
    (void)sig;
    _exit(0); /* the launcher must not stop the survivors: exit 0 */
}

static int wake_fd = -1; /* stop mode: tells the waker child to start its clock */

static void stop_now(int sig)
{
    (void)sig;
    char b = 1;
    (void)!write(wake_fd, &b, 1);
    raise(SIGSTOP);
}

/* A child that sends the parent SIGCONT ms after the parent stopped. */
static void start_waker(int ms)
{
    int p[2];
    if (pipe(p) != 0)
        return;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
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

static int timeout_ms(void)
{
    const char *t = getenv("GW_TIMEOUT_MS");
    return t ? atoi(t) : 30000;
}

/* The join-phase faults (connstop, connkill, gatherstop): what rank 2 does
 * when the library reaches the point, 0 in every other rank and mode. */
static enum { AT_NONE, AT_CONNECT_STOP, AT_CONNECT_KILL, AT_LISTEN_STOP } join_fault;

static void join_fault_strike(void)
{
    if (join_fault == AT_CONNECT_KILL)
        _exit(0);
    join_fault = AT_NONE;
    char b = 1;
    (void)!write(wake_fd, &b, 1);
    raise(SIGSTOP);
}

/* The root's port, from GW_ROOT ("host:port") as the launcher sets it. */
static int root_port(void)
{
    const char *root = getenv("GW_ROOT");
    const char *colon = root ? strrchr(root, ':') : NULL;
    return colon ? atoi(colon + 1) : -1;
}

/* libc's connect and listen, as the library calls them, with the join
 * fault struck first when it is due. */
int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if ((join_fault == AT_CONNECT_STOP || join_fault == AT_CONNECT_KILL) && addr &&
        (addr->sa_family == AF_INET || addr->sa_family == AF_INET6)) {
        int port = ntohs(addr->sa_family == AF_INET
                             ? ((const struct sockaddr_in *)(const void *)addr)->sin_port
                             : ((const struct sockaddr_in6 *)(const void *)addr)->sin6_port);
        if (port != root_port())
            join_fault_strike();
    }
    return (int)syscall(SYS_connect, fd, addr, len);
}

int listen(int fd, int backlog)
{
    if (join_fault == AT_LISTEN_STOP)
        join_fault_strike();
    return (int)syscall(SYS_listen, fd, backlog);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODE\n", argv[0]);
        return 2;
    }
    const char *mode = argv[1];
    const char *rank_env = getenv("RANK");
    int my_rank = rank_env ? atoi(rank_env) : 0;
    if (strcmp(mode, "token") == 0 && my_rank == 1)
        setenv("GW_JOB_TOKEN", "not-the-job-token", 1);
    if (strcmp(mode, "stop") == 0 && my_rank == 2)
        start_waker(timeout_ms() + 4000); /* before any connection exists */
    if (strcmp(mode, "chain") == 0 && my_rank == 0)
        setenv("GW_TIMEOUT_MS", "3000", 1);

    int connstop = strcmp(mode, "connstop") == 0, gatherstop = strcmp(mode, "gatherstop") == 0;
    int connkill = strcmp(mode, "connkill") == 0;
    if (my_rank == 2 && (connstop || gatherstop))
        start_waker(timeout_ms() + 4000);
    if (my_rank == 2)
        join_fault = connstop     ? AT_CONNECT_STOP
                     : connkill   ? AT_CONNECT_KILL
                     : gatherstop ? AT_LISTEN_STOP
                                  : AT_NONE;
    int init_fails = strcmp(mode, "token") == 0 || strcmp(mode, "absent") == 0 || connstop ||
                     connkill || gatherstop;
    /* The join-phase faults test what the library itself says about a rank
     * missing from the join, as under a launcher that does not watch the
     * set-up (srun, torchrun): `gradwire launch` would stop such a job at
     * once, naming the rank (tools/launch_formed.c, test_launch checks
     * that), before the ranks could say anything. So the ranks do not tell
     * it how their set-up goes. */
    if (init_fails)
        unsetenv("GW_LAUNCH_SETUP");
    if (strcmp(mode, "absent") == 0 && my_rank == 3)
        return 0;
    double t0 = now_ms();
    gw_comm_t *comm = NULL;
    int culprit = -1;
    gw_status_t st = gw_comm_init_culprit(NULL, &comm, &culprit);
    if (st != GW_OK) {
        printf("rank %d: %s after %.0f ms (init), culprit %d\n", my_rank, gw_status_name(st),
               now_ms() - t0, culprit);
        return init_fails ? 0 : 1;
    }
    int rank = gw_comm_rank(comm);
    if (strcmp(mode, "chain") == 0) {
        static const int from[4] = {3, 0, -1, 2}; /* whom each rank receives from */
        float buf[16] = {0};
        t0 = now_ms();
        if (rank == 2) {
            usleep(10 * 1000 * 1000);
            st = gw_send(comm, buf, 16, GW_FLOAT32, 3);
        } else {
            st = gw_recv(comm, buf, 16, GW_FLOAT32, from[rank]);
        }
        printf("rank %d: %s after %.0f ms, culprit %d\n", rank, gw_status_name(st), now_ms() - t0,
               gw_comm_culprit(comm));
        fflush(stdout);
        gw_comm_destroy(comm);
        return st != GW_OK ? 0 : 1;
    }
    size_t count = COUNT;
    gw_dtype_t dtype = GW_FLOAT32;
    gw_op_t op = GW_SUM;
    size_t big = (size_t)16 << 20; /* elements, for killmid: 64 MiB of float32 */
    /* The rank that misbehaves: 1, or GW_FAULT_RANK (slurm_test.sh puts it
     * on another host than rank 0). */
    const char *fault_rank = getenv("GW_FAULT_RANK");
    int special = rank == (fault_rank ? atoi(fault_rank) : 1);

    if (strcmp(mode, "kill") == 0) {
        /* Everyone is connected and done with the barrier (and waiting in
         * the allreduce) when rank 1 dies. */
        st = gw_barrier(comm);
        if (st != GW_OK) {
            printf("rank %d: barrier failed unexpectedly: %s\n", rank, gw_status_name(st));
            gw_comm_destroy(comm);
            return 1;
        }
        if (special) {
            usleep(200000);
            _exit(0);
        }
    }
    if (strcmp(mode, "killmid") == 0) {
        count = big;
        if (special)
            signal(SIGALRM, die_now);
    }
    if (strcmp(mode, "stop") == 0) {
        count = big;
        if (rank == 2)
            signal(SIGALRM, stop_now);
    }
    if (strcmp(mode, "late") == 0 && rank == 2)
        usleep((useconds_t)(timeout_ms() + 2000) * 1000);
    if (special && strcmp(mode, "count") == 0)
        count = COUNT + 1;
    if (special && strcmp(mode, "dtype") == 0)
        dtype = GW_INT32;
    if (special && strcmp(mode, "zero") == 0)
        count = 0;
    if (special && strcmp(mode, "algo") == 0)
        gw_comm_set_algo(comm, GW_ALGO_TREE);
    else if (strcmp(mode, "algo") == 0)
        gw_comm_set_algo(comm, GW_ALGO_RING);
    if (special && strcmp(mode, "op") == 0)
        op = GW_MAX;

    size_t bytes = count * 8 + PAD; /* room for the largest dtype plus padding */
    uint8_t *send = malloc(bytes), *recv = malloc(bytes);
    memset(send, 0, bytes);
    memset(recv, CANARY, bytes);
    const void *sendp = send;
    if (special && strcmp(mode, "null") == 0)
        sendp = NULL;
    if (strcmp(mode, "overflow") == 0)
        count = SIZE_MAX / 4;
    if (strcmp(mode, "baddtype") == 0)
        dtype = (gw_dtype_t)99;
    if (strcmp(mode, "badop") == 0)
        op = (gw_op_t)42;

    if ((special && strcmp(mode, "killmid") == 0) || (rank == 2 && strcmp(mode, "stop") == 0)) {
        struct itimerval it = {{0, 0}, {0, 20000}}; /* die or stop 20 ms into the call */
        setitimer(ITIMER_REAL, &it, NULL);
    }
    t0 = now_ms();
    st = gw_allreduce(comm, sendp, recv, count, dtype, op);
    double elapsed = now_ms() - t0;
    printf("rank %d: %s after %.0f ms, culprit %d\n", rank, gw_status_name(st), elapsed,
           gw_comm_culprit(comm));
    fflush(stdout);
    int ok = st != GW_OK;
    /* Nothing may be written past what this rank asked for. */
    size_t written = count <= (size_t)COUNT + 1 ? count * gw_dtype_size(dtype) : 0;
    if (count <= (size_t)COUNT + 1) {
        for (size_t i = written; i < bytes; i++)
            if (recv[i] != CANARY) {
                printf("rank %d: receive buffer written past its count at byte %zu\n", rank, i);
                ok = 0;
                break;
            }
    }
    /* A failed communicator stays failed. */
    if (st != GW_OK && gw_barrier(comm) == GW_OK) {
        printf("rank %d: barrier succeeded on a failed communicator\n", rank);
        ok = 0;
    }
    gw_comm_destroy(comm);
    free(send);
    free(recv);
    return ok ? 0 : 1;
}
