/*
 * worker_split.c - one rank of the sub-communicator test (test_split.c).
 *
 * Usage: worker_split MODE. Every rank prints "rank R: ok" (or what went
 * wrong) and exits 0 (1 on a failed check).
 *
 * Mode "all" (any number of ranks): splits into even/odd (key = rank),
 * even/odd with reversed keys, one-rank groups, all but rank 0 (which
 * passes GW_UNDEFINED), and a dup; on each child every collective, with
 * results checked against a serial reference computed from the parent
 * ranks of the child's members; the even and odd children run their
 * collectives at the same time while the parent waits, parent and child
 * calls alternate, gw_iallreduce on a child and on the parent are in
 * flight at once, point-to-point and a compressed allreduce run on a
 * child; after an alltoall on the parent has connected every pair (connections
 * are made on first use), the number of open file descriptors (and of sockets among them)
 * is the same before the splits and after every call on the children;
 * then the children are destroyed in both orders (a child before its
 * parent, and the parent before a child that is then still used).
 * Mode "mismatch": in the even child, its rank 1 passes another count:
 * every even rank must fail with GW_ERR_MISMATCH ("rank R: child
 * GW_ERR_MISMATCH").
 * Mode "kill" (4 ranks): in the even child {0, 2}, parent rank 2 (child
 * rank 1) exits while child rank 0 waits for it in an allreduce: rank 0
 * prints "rank 0: child STATUS culprit 1"; the odd ranks then fail in a
 * parent allreduce naming parent rank 2 ("rank R: parent STATUS culprit
 * 2").
 * Mode "leave" (4 ranks): the even ranks {0, 2} finish first: a child
 * allreduce, then they close their communicators and exit, rank 0's
 * referee with them ("rank R: left"). Then in the odd child {1, 3},
 * parent rank 3 (child rank 1) hangs (sleeps 3 x GW_TIMEOUT_MS) while
 * child rank 0 waits for it in an allreduce: parent rank 1 must fail with
 * GW_ERR_TIMEOUT naming child rank 1, the rank it waited for, not rank 0,
 * which left cleanly ("rank 1: child GW_ERR_TIMEOUT culprit 1").
 * Mode "abort" (3 ranks): rank 0 waits in an allreduce on a dup, which
 * rank 1 joins 2 s late, when a watchdog thread aborts the parent: the
 * abort of any communicator aborts the transport they share, so rank 0's
 * call on the child must fail with GW_ERR_ABORTED within 1.5 s ("rank 0:
 * child GW_ERR_ABORTED in time").
 * Mode "hier" (on pretend hosts, GW_HOST_ID, two or more ranks per host):
 * the lower and the upper half of the ranks form two children; each child
 * knows its members' hosts: the cost model picks the hierarchical
 * allreduce for a large buffer when the child spans several hosts with
 * several ranks on one, and that allreduce is exact on the child.
 * Mode "time": rank 0 prints the mean time of an all-gather of four
 * int32 per rank and of gw_comm_split (then gw_comm_destroy), 1000 of
 * each, twice, for the README's figure (not part of the test).
 */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/fd_count.h"
#include "gradwire.h"

static int g_rank;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            printf("rank %d: FAILED at line %d: ", g_rank, __LINE__); \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
            fflush(stdout);                                           \
            exit(1);                                                  \
        }                                                             \
    } while (0)

#define OK(call)                                                   \
    do {                                                           \
        gw_status_t st_ = (call);                                  \
        CHECK(st_ == GW_OK, "%s: %s", #call, gw_status_name(st_)); \
    } while (0)

/* The value parent rank p contributes at element i. */
static int64_t value(int p, size_t i) { return (int64_t)(p + 1) * (int64_t)(i % 7 + 1); }

/* Every collective on child, whose rank r is parent rank members[r]. */
static void check_collectives(gw_comm_t *child, const int *members, int n, size_t count)
{
    int r = gw_comm_rank(child);
    CHECK(gw_comm_size(child) == n, "size %d, want %d", gw_comm_size(child), n);
    int64_t *in = malloc((count * n + 1) * sizeof(int64_t));
    int64_t *out = malloc((count * n + 1) * sizeof(int64_t));
    for (size_t i = 0; i < count * n; i++)
        in[i] = value(members[r], i);
    /* allreduce sum and max */
    OK(gw_allreduce(child, in, out, count, GW_INT64, GW_SUM));
    for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int m = 0; m < n; m++)
            want += value(members[m], i);
        CHECK(out[i] == want, "allreduce[%zu] = %lld, want %lld", i, (long long)out[i],
              (long long)want);
    }
    OK(gw_allreduce(child, in, out, count, GW_INT64, GW_MAX));
    for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int m = 0; m < n; m++)
            want = value(members[m], i) > want ? value(members[m], i) : want;
        CHECK(out[i] == want, "allreduce max[%zu]", i);
    }
    /* broadcast from the last child rank */
    int root = n - 1;
    memset(out, 0, count * sizeof(int64_t));
    OK(gw_broadcast(child, in, out, count, GW_INT64, root));
    for (size_t i = 0; i < count; i++)
        CHECK(out[i] == value(members[root], i), "broadcast[%zu]", i);
    /* reduce to child rank 0 */
    OK(gw_reduce(child, in, out, count, GW_INT64, GW_SUM, 0));
    if (r == 0)
        for (size_t i = 0; i < count; i++) {
            int64_t want = 0;
            for (int m = 0; m < n; m++)
                want += value(members[m], i);
            CHECK(out[i] == want, "reduce[%zu]", i);
        }
    /* allgather: block m is child rank m's */
    OK(gw_allgather(child, in, out, count, GW_INT64));
    for (int m = 0; m < n; m++)
        for (size_t i = 0; i < count; i++)
            CHECK(out[m * count + i] == value(members[m], i), "allgather[%d][%zu]", m, i);
    /* reduce_scatter: block r of the sum */
    OK(gw_reduce_scatter(child, in, out, count, GW_INT64, GW_SUM));
    for (size_t i = 0; i < count; i++) {
        int64_t want = 0;
        for (int m = 0; m < n; m++)
            want += value(members[m], r * count + i);
        CHECK(out[i] == want, "reduce_scatter[%zu]", i);
    }
    OK(gw_barrier(child));
    free(in);
    free(out);
}

/* The members of color `color` under `colors`/`keys`, ordered by (key,
 * parent rank), into members; returns their number. */
static int members_of(int size, const int *colors, const int *keys, int color, int *members)
{
    int n = 0;
    for (int p = 0; p < size; p++)
        if (colors[p] == color)
            members[n++] = p;
    for (int a = 0; a < n; a++) /* insertion sort by (key, rank) */
        for (int b = a; b > 0; b--) {
            int x = members[b - 1], y = members[b];
            if (keys[x] > keys[y] || (keys[x] == keys[y] && x > y)) {
                members[b - 1] = y;
                members[b] = x;
            }
        }
    return n;
}

static gw_comm_t *split_checked(gw_comm_t *comm, const int *colors, const int *keys, int *members,
                                int *n)
{
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    gw_comm_t *child = NULL;
    OK(gw_comm_split(comm, colors[rank], keys[rank], &child));
    if (colors[rank] == GW_UNDEFINED) {
        CHECK(child == NULL, "GW_UNDEFINED gave a communicator");
        return NULL;
    }
    CHECK(child != NULL, "no communicator");
    *n = members_of(size, colors, keys, colors[rank], members);
    int want = 0;
    while (members[want] != rank)
        want++;
    CHECK(gw_comm_rank(child) == want, "child rank %d, want %d", gw_comm_rank(child), want);
    CHECK(gw_comm_size(child) == *n, "child size %d, want %d", gw_comm_size(child), *n);
    return child;
}

static int all_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm);
    int fds0, socks0, fds, socks;
    /* Connections are made on first use (GW_CONNECT=lazy): an alltoall
     * connects every pair first, so that the count below shows what the
     * children add (no new bootstrap, no new listening port), not the
     * parent's own connections coming up as the children need them. */
    int32_t *sb = calloc((size_t)size, sizeof(*sb)), *rb = calloc((size_t)size, sizeof(*rb));
    CHECK(sb && rb && gw_alltoall(comm, sb, rb, 1, GW_INT32) == GW_OK, "warm-up alltoall");
    free(sb);
    free(rb);
    count_fds(&fds0, &socks0);
    int colors[64], keys[64], members[64], n;

    /* even/odd, key = rank */
    for (int p = 0; p < size; p++) {
        colors[p] = p % 2;
        keys[p] = p;
    }
    int evenodd_members[64], evenodd_n;
    gw_comm_t *evenodd = split_checked(comm, colors, keys, evenodd_members, &evenodd_n);
    CHECK(strcmp(gw_comm_transport(evenodd), evenodd_n > 1 ? gw_comm_transport(comm) : "self") == 0,
          "child transport %s", gw_comm_transport(evenodd));
    check_collectives(evenodd, evenodd_members, evenodd_n, 1000);

    /* even/odd with keys reversing the order */
    for (int p = 0; p < size; p++)
        keys[p] = -p;
    gw_comm_t *reversed = split_checked(comm, colors, keys, members, &n);
    CHECK(gw_comm_rank(reversed) == n - 1 - gw_comm_rank(evenodd), "reversed rank %d",
          gw_comm_rank(reversed));
    check_collectives(reversed, members, n, 37);

    /* one-rank groups */
    for (int p = 0; p < size; p++) {
        colors[p] = p;
        keys[p] = 0;
    }
    gw_comm_t *alone = split_checked(comm, colors, keys, members, &n);
    CHECK(strcmp(gw_comm_transport(alone), "self") == 0, "alone over %s", gw_comm_transport(alone));
    check_collectives(alone, members, n, 10);

    /* everyone but rank 0 */
    for (int p = 0; p < size; p++) {
        colors[p] = p == 0 ? GW_UNDEFINED : 3;
        keys[p] = 0;
    }
    gw_comm_t *rest = split_checked(comm, colors, keys, members, &n);
    if (rest)
        check_collectives(rest, members, n, 100);

    /* dup */
    gw_comm_t *dup = NULL;
    OK(gw_comm_dup(comm, &dup));
    CHECK(gw_comm_rank(dup) == rank && gw_comm_size(dup) == size, "dup rank/size");
    for (int p = 0; p < size; p++)
        members[p] = p;
    check_collectives(dup, members, size, 500);
    /* a split of a child */
    gw_comm_t *grandchild = NULL;
    OK(gw_comm_dup(evenodd, &grandchild));
    check_collectives(grandchild, evenodd_members, evenodd_n, 50);

    /* The even and the odd child at the same time (rank-disjoint), many
     * calls each, then the parent; then parent and child alternate. */
    for (int k = 0; k < 20; k++)
        check_collectives(evenodd, evenodd_members, evenodd_n, 1 + (size_t)k * 13);
    int64_t x = rank, sum = 0, want_sum = (int64_t)size * (size - 1) / 2;
    OK(gw_allreduce(comm, &x, &sum, 1, GW_INT64, GW_SUM));
    CHECK(sum == want_sum, "parent sum %lld", (long long)sum);
    for (int k = 0; k < 10; k++) {
        int64_t cs = 0, want_cs = 0;
        OK(gw_allreduce(comm, &x, &sum, 1, GW_INT64, GW_SUM));
        CHECK(sum == want_sum, "parent sum %lld", (long long)sum);
        OK(gw_allreduce(evenodd, &x, &cs, 1, GW_INT64, GW_SUM));
        for (int m = 0; m < evenodd_n; m++)
            want_cs += evenodd_members[m];
        CHECK(cs == want_cs, "child sum %lld, want %lld", (long long)cs, (long long)want_cs);
        OK(gw_allreduce(dup, &x, &sum, 1, GW_INT64, GW_SUM));
        CHECK(sum == want_sum, "dup sum");
    }

    /* Non-blocking: child and parent in flight at once, completed in the
     * other order; then blocking calls on both behind them. */
    for (int k = 0; k < 5; k++) {
        size_t count = 4096;
        float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++) {
            a[i] = (float)value(rank, i);
            b[i] = (float)value(rank, i + 1);
        }
        gw_handle_t *hc, *hp;
        OK(gw_iallreduce(evenodd, a, a, count, GW_FLOAT32, GW_SUM, &hc));
        OK(gw_iallreduce(comm, b, b, count, GW_FLOAT32, GW_SUM, &hp));
        OK(gw_wait(hp));
        OK(gw_wait(hc));
        for (size_t i = 0; i < count; i++) {
            float wa = 0, wb = 0;
            for (int m = 0; m < evenodd_n; m++)
                wa += (float)value(evenodd_members[m], i);
            for (int p = 0; p < size; p++)
                wb += (float)value(p, i + 1);
            CHECK(a[i] == wa && b[i] == wb, "iallreduce[%zu]: %g %g, want %g %g", i, a[i], b[i], wa,
                  wb);
        }
        free(a);
        free(b);
        OK(gw_allreduce(dup, &x, &sum, 1, GW_INT64, GW_SUM));
        CHECK(sum == want_sum, "dup sum after iallreduce");
    }

    /* Point-to-point on a child: a ring exchange in child ranks. */
    if (evenodd_n > 1) {
        int cr = gw_comm_rank(evenodd);
        int right = (cr + 1) % evenodd_n, left = (cr - 1 + evenodd_n) % evenodd_n;
        int64_t mine[3] = {evenodd_members[cr], 7, 9}, got[3] = {0};
        OK(gw_sendrecv(evenodd, mine, 3, right, got, 3, left, GW_INT64));
        CHECK(got[0] == evenodd_members[left] && got[1] == 7, "sendrecv got %lld from %d",
              (long long)got[0], left);
        if (cr == 0)
            OK(gw_send(evenodd, mine, 3, GW_INT64, 1));
        else if (cr == 1) {
            OK(gw_recv(evenodd, got, 3, GW_INT64, 0));
            CHECK(got[0] == evenodd_members[0], "recv got %lld", (long long)got[0]);
        }
    }
    /* A compressed allreduce on a child. */
    {
        gw_compress_config_t cc;
        gw_compress_config_init(&cc);
        cc.codec = GW_CODEC_FP16;
        cc.min_elements = 0;
        gw_compress_state_t *state = NULL;
        size_t count = 2048;
        OK(gw_compress_state_create(&cc, 1, count, &state));
        float *g = malloc(count * sizeof(float)), *avg = malloc(count * sizeof(float));
        for (size_t i = 0; i < count; i++)
            g[i] = (float)value(rank, i);
        OK(gw_allreduce_compressed(evenodd, state, g, avg, count));
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int m = 0; m < evenodd_n; m++)
                want += (double)value(evenodd_members[m], i);
            want /= evenodd_n;
            CHECK(fabs(avg[i] - want) <= 0.01 * want + 1e-3, "compressed[%zu] %g, want %g", i,
                  avg[i], want);
        }
        free(g);
        free(avg);
        gw_compress_state_destroy(state);
    }

    count_fds(&fds, &socks);
    CHECK(fds == fds0 && socks == socks0,
          "file descriptors %d (sockets %d) after the splits, %d (%d) before", fds, socks, fds0,
          socks0);
    if (rank == 0)
        printf("rank 0: fds %d sockets %d before and after the splits\n", fds, socks);

    /* Destroy in both orders: children before the parent, and the parent
     * before children that are then still used. */
    OK(gw_comm_destroy(reversed));
    OK(gw_comm_destroy(alone));
    OK(gw_comm_destroy(rest));
    OK(gw_comm_destroy(comm));
    for (int k = 0; k < 3; k++) {
        OK(gw_allreduce(dup, &x, &sum, 1, GW_INT64, GW_SUM));
        CHECK(sum == want_sum, "dup sum after the parent's destroy");
        check_collectives(grandchild, evenodd_members, evenodd_n, 33);
    }
    OK(gw_comm_destroy(evenodd)); /* the grandchild's parent, before it */
    check_collectives(grandchild, evenodd_members, evenodd_n, 21);
    OK(gw_barrier(dup));
    OK(gw_comm_destroy(dup));
    OK(gw_comm_destroy(grandchild));
    printf("rank %d: ok\n", rank);
    return 0;
}

static int mismatch_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm);
    gw_comm_t *child = NULL;
    gw_status_t split_st = gw_comm_split(comm, rank % 2, rank, &child);
    /* An odd rank may still finish the split when the even ranks' abort
     * comes (they share its transport): only the even ranks check. */
    if (rank % 2 == 0) {
        OK(split_st);
        int64_t buf[8] = {0};
        size_t count = gw_comm_rank(child) == 1 ? 5 : 4;
        /* A good one first, which a rank still finishing it may fail in
         * already: the others' abort for the next one can overtake it. */
        gw_status_t st = gw_allreduce(child, buf, buf, 4, GW_INT64, GW_SUM);
        if (st == GW_OK)
            st = gw_allreduce(child, buf, buf, count, GW_INT64, GW_SUM);
        printf("rank %d: child %s\n", rank, gw_status_name(st));
        CHECK(st == GW_ERR_MISMATCH, "want GW_ERR_MISMATCH");
    }
    fflush(stdout);
    gw_comm_destroy(child);
    gw_comm_destroy(comm);
    return 0;
}

static int kill_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm);
    gw_comm_t *child = NULL;
    OK(gw_comm_split(comm, rank % 2, rank, &child));
    OK(gw_barrier(comm));
    int64_t x = rank, sum = 0;
    if (rank == 2) {
        usleep(300000);
        _exit(0); /* gone without a goodbye, while child rank 0 waits */
    }
    if (rank == 0) {
        gw_status_t st = gw_allreduce(child, &x, &sum, 1, GW_INT64, GW_SUM);
        printf("rank %d: child %s culprit %d\n", rank, gw_status_name(st), gw_comm_culprit(child));
        CHECK(st != GW_OK, "the child's allreduce succeeded without its rank 1");
    } else {
        /* The odd ranks' child, which rank 0's abort may reach first on a
         * slow machine: any outcome, and a right sum when it succeeds. */
        gw_status_t st = gw_allreduce(child, &x, &sum, 1, GW_INT64, GW_SUM);
        CHECK(st != GW_OK || sum == 4, "odd sum %lld", (long long)sum);
    }
    gw_status_t st = gw_allreduce(comm, &x, &sum, 1, GW_INT64, GW_SUM);
    printf("rank %d: parent %s culprit %d\n", rank, gw_status_name(st), gw_comm_culprit(comm));
    fflush(stdout);
    gw_comm_destroy(child);
    gw_comm_destroy(comm);
    _exit(0); /* the launcher must not stop the survivors: exit 0 */
}

static int leave_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm);
    gw_comm_t *child = NULL;
    OK(gw_comm_split(comm, rank % 2, rank, &child));
    int64_t x = rank, sum = 0;
    OK(gw_allreduce(child, &x, &sum, 1, GW_INT64, GW_SUM));
    if (rank % 2 == 0) {
        gw_comm_destroy(child);
        gw_comm_destroy(comm);
        printf("rank %d: left\n", rank);
        return 0;
    }
    if (rank == 3) {
        const char *ms = getenv("GW_TIMEOUT_MS");
        long hang_ms = 3 * (ms ? atol(ms) : 1000);
        usleep((useconds_t)hang_ms * 1000);
    } else {
        gw_status_t st = gw_allreduce(child, &x, &sum, 1, GW_INT64, GW_SUM);
        printf("rank %d: child %s culprit %d\n", rank, gw_status_name(st), gw_comm_culprit(child));
        CHECK(st != GW_OK, "the child's allreduce succeeded while its rank 1 hung");
    }
    fflush(stdout);
    gw_comm_destroy(child);
    gw_comm_destroy(comm);
    _exit(0); /* the launcher must not stop rank 3: exit 0 */
}

static double now_us(void);

static void *abort_later(void *comm)
{
    usleep(300000);
    gw_comm_abort(comm);
    return NULL;
}

static int abort_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm);
    gw_comm_t *dup = NULL;
    OK(gw_comm_dup(comm, &dup));
    if (rank == 1)
        sleep(2);
    pthread_t watchdog;
    if (rank == 0)
        pthread_create(&watchdog, NULL, abort_later, comm);
    float v[16] = {0};
    double t0 = now_us();
    gw_status_t st = gw_allreduce(dup, v, v, 16, GW_FLOAT32, GW_SUM);
    double dt = (now_us() - t0) / 1e6;
    if (rank == 0) {
        pthread_join(watchdog, NULL);
        printf("rank 0: child %s %s (%.2f s)\n", gw_status_name(st),
               st == GW_ERR_ABORTED && dt < 1.5 ? "in time" : "late", dt);
        st = gw_allreduce(comm, v, v, 16, GW_FLOAT32, GW_SUM);
        printf("rank 0: parent %s\n", gw_status_name(st));
    } else {
        printf("rank %d: child %s\n", rank, gw_status_name(st));
    }
    fflush(stdout);
    gw_comm_destroy(dup);
    gw_comm_destroy(comm);
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int time_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm), reps = 1000;
    int32_t words[4] = {rank}, all[4 * 64];
    OK(gw_barrier(comm));
    /* Alternating, twice, so that neither gets the warmer machine. */
    for (int round = 0; round < 2; round++) {
        double t0 = now_us();
        for (int k = 0; k < reps; k++)
            OK(gw_allgather(comm, words, all, 4, GW_INT32));
        double t1 = now_us();
        for (int k = 0; k < reps; k++) {
            gw_comm_t *child = NULL;
            OK(gw_comm_split(comm, rank % 2, rank, &child));
            OK(gw_comm_destroy(child));
        }
        double t2 = now_us();
        if (rank == 0)
            printf("rank 0: %d ranks over %s: allgather of 4 x int32 %.1f us, gw_comm_split + "
                   "gw_comm_destroy %.1f us\n",
                   gw_comm_size(comm), gw_comm_transport(comm), (t1 - t0) / reps, (t2 - t1) / reps);
    }
    gw_comm_destroy(comm);
    return 0;
}

static int hier_mode(gw_comm_t *comm)
{
    int rank = gw_comm_rank(comm), size = gw_comm_size(comm), bad = 0;
    gw_comm_t *child = NULL;
    gw_status_t st = gw_comm_split(comm, rank < size / 2 ? 0 : 1, rank, &child);
    if (st != GW_OK) {
        printf("rank %d: split: %s\n", rank, gw_status_name(st));
        return 1;
    }
    size_t n = 100003;
    gw_algo_t pick = gw_comm_pick_algo(child, (size_t)8 << 20, GW_FLOAT32);
    if (pick != GW_ALGO_HIER) {
        printf("rank %d: the child's cost model picked %s for 32 MiB, not hier\n", rank,
               gw_algo_name(pick));
        bad = 1;
    }
    float *x = malloc(n * sizeof(float));
    int csize = gw_comm_size(child), first = rank < size / 2 ? 0 : size / 2;
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((size_t)rank * 3 + i % 97);
    gw_comm_set_algo(child, GW_ALGO_HIER);
    st = gw_allreduce(child, x, x, n, GW_FLOAT32, GW_SUM);
    for (size_t i = 0; st == GW_OK && i < n && !bad; i++) {
        double want = 0;
        for (int r = first; r < first + csize; r++)
            want += (double)((size_t)r * 3 + i % 97);
        if (x[i] != (float)want) {
            printf("rank %d: hier allreduce on the child: element %zu is %g, not %g\n", rank, i,
                   x[i], want);
            bad = 1;
        }
    }
    if (st != GW_OK) {
        printf("rank %d: hier allreduce on the child: %s\n", rank, gw_status_name(st));
        bad = 1;
    }
    free(x);
    gw_comm_destroy(child);
    gw_comm_destroy(comm);
    if (!bad)
        printf("rank %d: ok\n", rank);
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    setvbuf(stdout, NULL, _IOLBF, 0);
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("rank ?: init: %s\n", gw_status_name(st));
        return 1;
    }
    g_rank = gw_comm_rank(comm);
    if (strcmp(mode, "mismatch") == 0)
        return mismatch_mode(comm);
    if (strcmp(mode, "kill") == 0)
        return kill_mode(comm);
    if (strcmp(mode, "leave") == 0)
        return leave_mode(comm);
    if (strcmp(mode, "time") == 0)
        return time_mode(comm);
    if (strcmp(mode, "abort") == 0)
        return abort_mode(comm);
    if (strcmp(mode, "hier") == 0)
        return hier_mode(comm);
    return all_mode(comm);
}
