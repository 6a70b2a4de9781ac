/*
 * worker_threads.c - one rank of test_comm_threads.c: a communicator and
 * one made from it (MODE "dup": gw_comm_dup; "split": gw_comm_split with
 * one color), driven by two threads at once, each running ITERS
 * allreduces (results checked) on its own communicator.
 *
 * With a third argument "cross", the ranks start in opposite orders: even
 * ranks' parent thread first and their child thread 100 ms later, odd
 * ranks the other way round, so that each first call waits for peers that
 * are in the other communicator's call: the interleaving two threads give
 * sooner or later, made certain.
 *
 * Usage: worker_threads MODE ITERS [cross]. Prints "rank R: parent STATUS child
 * STATUS" with each thread's first failure (GW_OK when it finished every
 * call with right results) and, for a failure, its gw_last_error, then
 * exits 0: the test judges the statuses.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gradwire.h"

#define COUNT 256

typedef struct side {
    gw_comm_t *comm;
    int iters;
    float scale; /* parent 1, child 1000: a message of the wrong one shows */
    int delay_ms;
    gw_status_t status;
    char why[1024];
} side_t;

static void *drive(void *arg)
{
    side_t *s = arg;
    const int rank = gw_comm_rank(s->comm), size = gw_comm_size(s->comm);
    float in[COUNT], out[COUNT];
    s->status = GW_OK;
    if (s->delay_ms > 0) {
        struct timespec ts = {0, (long)s->delay_ms * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int it = 0; it < s->iters; it++) {
        for (int i = 0; i < COUNT; i++)
            in[i] = s->scale * (float)(rank + 1);
        gw_status_t st = gw_allreduce(s->comm, in, out, COUNT, GW_FLOAT32, GW_SUM);
        if (st != GW_OK) {
            s->status = st;
            snprintf(s->why, sizeof(s->why), "%s", gw_last_error(s->comm));
            return NULL;
        }
        const float want = s->scale * (float)(size * (size + 1) / 2);
        for (int i = 0; i < COUNT; i++)
            if (out[i] != want) {
                s->status = GW_ERR_PROTOCOL;
                snprintf(s->why, sizeof(s->why), "iteration %d: element %d is %g, not %g", it, i,
                         (double)out[i], (double)want);
                return NULL;
            }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "dup";
    const int iters = argc > 2 ? atoi(argv[2]) : 2000;
    setvbuf(stdout, NULL, _IOLBF, 0);
    gw_comm_t *comm = NULL, *child = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("rank ?: init: %s\n", gw_status_name(st));
        return 1;
    }
    const int rank = gw_comm_rank(comm);
    st = strcmp(mode, "split") == 0 ? gw_comm_split(comm, 0, rank, &child)
                                    : gw_comm_dup(comm, &child);
    if (st != GW_OK) {
        /* Another rank's refusal may abort the job before the dup is done
         * here: a result like any other. */
        printf("rank %d: parent %s child %s (the %s failed)\n", rank, gw_status_name(st),
               gw_status_name(st), mode);
        printf("rank %d: %s: %s\n", rank, mode, gw_last_error(comm));
        gw_comm_destroy(comm);
        return 0;
    }
    const int cross = argc > 3 && strcmp(argv[3], "cross") == 0;
    side_t parent = {.comm = comm, .iters = iters, .scale = 1.0f};
    side_t kid = {.comm = child, .iters = iters, .scale = 1000.0f};
    if (cross)
        *(rank % 2 ? &parent.delay_ms : &kid.delay_ms) = 100;
    pthread_t a, b;
    pthread_create(&a, NULL, drive, &parent);
    pthread_create(&b, NULL, drive, &kid);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("rank %d: parent %s child %s\n", rank, gw_status_name(parent.status),
           gw_status_name(kid.status));
    if (parent.status != GW_OK)
        printf("rank %d: parent: %s\n", rank, parent.why);
    if (kid.status != GW_OK)
        printf("rank %d: child: %s\n", rank, kid.why);
    gw_comm_destroy(child);
    gw_comm_destroy(comm);
    return 0;
}
