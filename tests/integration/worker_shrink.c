/*
 * worker_shrink.c - one rank of the shrink tests (test_shrink.c), run by
 * `gradwire launch --elastic` on 4 ranks.
 *
 * Usage: worker_shrink MODE   (kill1, kill2, kill0, kill01, kill0then1, kill0stop1, stop,
 *                             stop0, busy0)
 *
 * Every rank does one allreduce (the job works), then the victims leave:
 * kill1: rank 2 SIGKILLs itself; kill2: ranks 1 and 3; kill0: rank 0;
 * kill01: ranks 0 and 1 (rank 2 must lead); kill0then1: rank 0, and once
 * the survivors have shrunk and checked, rank 1, the shrunk
 * communicator's rank 0, so that its survivors (2 and 3) succeed it in
 * turn; kill0stop1: rank 0 dies and rank 1 is stopped (woken as in stop):
 * ranks 2 and 3 give up on rank 1 and go on under rank 2; rank 1, awake,
 * finds nobody and ranks alive elsewhere, and must not go on alone;
 * stop: rank 2 SIGSTOPs itself, and a child it forked first wakes it
 * WAKE_S seconds later; stop0: rank 0 does (its referee stops with it):
 * the others get no answer to their shrink, depose it and go on under
 * rank 1; rank 0, awake, must be told it was left out; busy0: rank 0
 * sleeps WAKE_S seconds outside gradwire instead (its referee runs on and
 * answers the others' shrink that rank 0 did not ask): the same outcome. The others' second allreduce fails, and they call
 * gw_comm_shrink. A member of the shrunk communicator prints
 *   "rank R: now rank X of N, members A,B,C, sum ok"
 * after it all-gathered the old ranks of the members and checked an
 * allreduce on the new communicator against them (exact: integers); a
 * rank whose shrink fails prints "rank R: shrink GW_ERR_X". The stopped
 * rank, once awake, fails its allreduce and its shrink too (it was left
 * out). In stop mode rank 0 keeps the old communicator (its referee
 * answers the late rank) until the late rank has had its answer.
 * Exit 0 when the rank saw what it printed, 1 on anything unexpected.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define WAKE_S 8

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int is_victim(const char *mode, int rank)
{
    if (!strcmp(mode, "kill1") || !strcmp(mode, "stop"))
        return rank == 2;
    if (!strcmp(mode, "stop0") || !strcmp(mode, "busy0"))
        return rank == 0;
    if (!strcmp(mode, "kill2"))
        return rank == 1 || rank == 3;
    if (!strcmp(mode, "kill0") || !strcmp(mode, "kill0then1"))
        return rank == 0;
    if (!strcmp(mode, "kill01") || !strcmp(mode, "kill0stop1"))
        return rank == 0 || rank == 1;
    return 0;
}

/* On the shrunk communicator: gather the members' old ranks, check that an
 * allreduce of (old rank + 1) sums to what they say, print the line. */
static int check_shrunk(gw_comm_t *nc, int old_rank)
{
    int n = gw_comm_size(nc), me = gw_comm_rank(nc);
    int32_t *old = calloc((size_t)n, sizeof(*old));
    int32_t mine = old_rank;
    gw_status_t st = gw_allgather(nc, &mine, old, 1, GW_INT32);
    if (st != GW_OK) {
        printf("rank %d: allgather on the shrunk communicator: %s\n", old_rank, gw_status_name(st));
        free(old);
        return 1;
    }
    int64_t want = 0, got = old_rank + 1;
    char members[256] = "";
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        want += old[i] + 1;
        len += (size_t)snprintf(members + len, sizeof(members) - len, "%s%d", i ? "," : "", old[i]);
    }
    st = gw_allreduce(nc, &got, &got, 1, GW_INT64, GW_SUM);
    int ok = st == GW_OK && got == want && old[me] == old_rank;
    printf("rank %d: now rank %d of %d, members %s, sum %s\n", old_rank, me, n, members,
           ok ? "ok" : "WRONG");
    free(old);
    return ok ? 0 : 1;
}

/* kill0then1: on the shrunk communicator, old rank 1 (its rank 0) leaves
 * once every member has checked it; the others' allreduce fails and they
 * shrink it too. */
static int second_round(gw_comm_t **nc, int old_rank)
{
    gw_status_t st = gw_barrier(*nc);
    if (st != GW_OK) {
        printf("rank %d: barrier on the shrunk communicator: %s\n", old_rank, gw_status_name(st));
        return 1;
    }
    if (old_rank == 1) {
        usleep(200 * 1000);
        raise(SIGKILL);
    }
    int32_t one = 1, sum = 0;
    st = gw_allreduce(*nc, &one, &sum, 1, GW_INT32, GW_SUM);
    if (st == GW_OK) {
        printf("rank %d: the allreduce succeeded without rank 1\n", old_rank);
        return 1;
    }
    gw_comm_t *again = NULL;
    double t0 = now_ms();
    st = gw_comm_shrink(*nc, &again);
    printf("rank %d: second shrink %s after %.0f ms\n", old_rank, gw_status_name(st),
           now_ms() - t0);
    if (st != GW_OK)
        return 1;
    gw_comm_destroy(*nc);
    *nc = again;
    return check_shrunk(again, old_rank);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc != 2) {
        fprintf(stderr, "usage: worker_shrink kill1|kill2|kill0|kill01|kill0then1|kill0stop1|stop|"
                        "stop0|busy0\n");
        return 2;
    }
    const char *mode = argv[1];
    gw_comm_t *comm;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("rank ?: init %s\n", gw_status_name(st));
        return 1;
    }
    int rank = gw_comm_rank(comm);
    int32_t one = 1, sum = 0;
    st = gw_allreduce(comm, &one, &sum, 1, GW_INT32, GW_SUM);
    /* A victim may leave as soon as its own part of this first allreduce
     * is done, before a survivor's is: then the survivor's fails here. */
    int early = st != GW_OK && !is_victim(mode, rank);
    if (!early && (st != GW_OK || sum != gw_comm_size(comm))) {
        printf("rank %d: first allreduce %s\n", rank, gw_status_name(st));
        return 1;
    }
    int stopped = 0;
    if (is_victim(mode, rank)) {
        usleep(200 * 1000); /* usually the others are in the second one by now */
        if (!strcmp(mode, "busy0")) {
            sleep(WAKE_S);
            stopped = 1;
        } else if (strcmp(mode, "stop") != 0 && strcmp(mode, "stop0") != 0 &&
                   !(rank == 1 && !strcmp(mode, "kill0stop1"))) {
            raise(SIGKILL);
        }
        if (!stopped) {
            pid_t parent = getpid();
            if (fork() == 0) {
                sleep(WAKE_S);
                kill(parent, SIGCONT);
                _exit(0);
            }
            raise(SIGSTOP);
            stopped = 1;
        }
    }
    double t0 = now_ms();
    if (!early)
        st = gw_allreduce(comm, &one, &sum, 1, GW_INT32, GW_SUM);
    if (st == GW_OK && stopped && (!strcmp(mode, "stop0") || !strcmp(mode, "busy0"))) {
        /* Every other rank sent its part before it gave up, and a TCP
         * connection keeps what was sent after its sender closed it: rank
         * 0 may complete the call from its buffers (its referee, stopped
         * with it, has not yet read the others' reports). Its shrink must
         * still leave it out. */
        printf("rank %d: the second allreduce completed from what the others sent before they "
               "gave up\n",
               rank);
    } else if (st == GW_OK) {
        printf("rank %d: the second allreduce succeeded without the victims\n", rank);
        return 1;
    }
    printf("rank %d: allreduce %s, culprit %d\n", rank, gw_status_name(st), gw_comm_culprit(comm));
    gw_comm_t *nc = NULL;
    st = gw_comm_shrink(comm, &nc);
    printf("rank %d: shrink %s after %.0f ms\n", rank, gw_status_name(st), now_ms() - t0);
    int rc = 0;
    if (st == GW_OK)
        rc = check_shrunk(nc, rank);
    else
        rc = stopped ? 0 : 1;
    if (st == GW_OK && rc == 0 && !strcmp(mode, "kill0then1"))
        rc = second_round(&nc, rank);
    if (stopped && st == GW_OK)
        rc = 1; /* a rank that was only slow must not get in */
    if (!strcmp(mode, "stop") && rank == 0)
        sleep(WAKE_S + 2); /* the referee answers the late rank meanwhile */
    if (!strcmp(mode, "kill0stop1") && !stopped)
        sleep(WAKE_S + 4); /* the old heir listeners answer the late rank meanwhile */
    gw_comm_destroy(nc);
    gw_comm_destroy(comm);
    return rc;
}
