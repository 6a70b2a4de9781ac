/*
 * worker_tagged.c - one rank of the tagged point-to-point tests
 * (test_p2p_tagged.c): gw_send_tagged, gw_recv_tagged and their
 * non-blocking forms with GW_ANY_TAG and GW_ANY_SOURCE.
 *
 * Usage: worker_tagged MODE
 *   tags      rank 1 sends tags 3, 1, 2 to rank 0, which receives them as
 *             2, 3, then GW_ANY_TAG (must be 1); every status is checked.
 *   anysrc    every rank but 0 sends 20 messages (tags 0..4 in turn) to
 *             rank 0, which receives them all with GW_ANY_SOURCE and
 *             GW_ANY_TAG: each exactly once, status naming its sender and
 *             tag, and each sender's messages in the order it sent them.
 *   order     rank 1 sends 40 messages of tag 7 and, between them, tag 8;
 *             rank 0 takes the tag 7 ones first (tag 8 is held), then the
 *             tag 8 ones: each tag's messages in order.
 *   mismatch  rank 1 sends 4 floats with tag 5, rank 0 receives 5: both
 *             fail with GW_ERR_MISMATCH, blaming rank 1.
 *   dead      rank 2 sends one message to rank 0 and exits without
 *             closing; rank 0 takes it, then waits in a GW_ANY_SOURCE
 *             receive, which must fail naming rank 2.
 *   deadsilent  the same, but rank 2 exits before sending anything, so
 *             rank 0 never connected to it: the receive times out after
 *             GW_TIMEOUT_MS, and the referee blames the rank that is gone.
 *   testany   rank 0 tests (gw_test) a GW_ANY_SOURCE receive nobody sends
 *             to: GW_ERR_TIMEOUT after GW_TIMEOUT_MS, said as such.
 *   args      rank 0 sends with tag GW_ANY_TAG (negative): GW_ERR_INVALID_ARG,
 *             and rank 1, waiting for it, learns of it (the abort).
 *   bound     rank 1 sends 5 messages of 16 MiB with tag 9 that rank 0
 *             does not want, then waits: rank 0's receive of tag 1 fails
 *             with GW_ERR_NO_MEMORY blaming rank 1 (the 64 MiB bound).
 *   pipeline  a 1F1B pipeline schedule over all ranks (one stage each), 6
 *             microbatches: activations forward with tag 2m, gradients
 *             backward with tag 2m+1, both received from GW_ANY_SOURCE
 *             (the tag tells them apart); every value and status checked.
 *   moe       an all-to-all of uneven expert batches: every rank sends
 *             each other rank a count first (tag 0, received from
 *             GW_ANY_SOURCE) and then that many floats (tag 1).
 *   leave     rank 0 chooses standard completion (gw_comm_set_p2p_send),
 *             sends LEAVE_MSGS untagged messages of 8 B to 4 KiB to rank 1,
 *             which receives nothing until rank 0 said (by a file) that
 *             every send returned: under synchronous completion they never
 *             would. Rank 0 then destroys its communicator and exits; rank
 *             1 starts receiving LATE_MS later and must get every message,
 *             every byte right.
 * Prints "rank R: OK" or "rank R: STATUS culprit K" (gw_comm_culprit) and
 * exits 0 when the outcome is the expected one, 1 otherwise.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradwire.h"

static int g_rank;
static int g_bad;

#define EXPECT(cond, ...)                                                  \
    do {                                                                   \
        if (!(cond)) {                                                     \
            printf("rank %d: FAILED %s:%d: ", g_rank, __FILE__, __LINE__); \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
            g_bad = 1;                                                     \
        }                                                                  \
    } while (0)

#define OK_OR_FAIL(st)                                                        \
    do {                                                                      \
        gw_status_t st_ = (st);                                               \
        if (st_ != GW_OK) {                                                   \
            printf("rank %d: FAILED %s:%d: %s\n", g_rank, __FILE__, __LINE__, \
                   gw_status_name(st_));                                      \
            return 1;                                                         \
        }                                                                     \
    } while (0)

static int tags_mode(gw_comm_t *comm)
{
    if (g_rank == 1) {
        float a[3] = {3, 3, 3}, b[2] = {1, 1}, c[1] = {2};
        OK_OR_FAIL(gw_send_tagged(comm, a, 3, GW_FLOAT32, 0, 3));
        OK_OR_FAIL(gw_send_tagged(comm, b, 2, GW_FLOAT32, 0, 1));
        OK_OR_FAIL(gw_send_tagged(comm, c, 1, GW_FLOAT32, 0, 2));
    } else if (g_rank == 0) {
        float buf[3] = {0};
        gw_msg_status_t s;
        OK_OR_FAIL(gw_recv_tagged(comm, buf, 1, GW_FLOAT32, 1, 2, &s));
        EXPECT(buf[0] == 2 && s.source == 1 && s.tag == 2 && s.count == 1, "tag 2: %g from %d/%d",
               buf[0], s.source, s.tag);
        OK_OR_FAIL(gw_recv_tagged(comm, buf, 3, GW_FLOAT32, GW_ANY_SOURCE, 3, &s));
        EXPECT(buf[2] == 3 && s.source == 1 && s.tag == 3 && s.count == 3, "tag 3: %g from %d/%d",
               buf[2], s.source, s.tag);
        OK_OR_FAIL(gw_recv_tagged(comm, buf, 2, GW_FLOAT32, 1, GW_ANY_TAG, &s));
        EXPECT(buf[1] == 1 && s.tag == 1 && s.count == 2, "any tag: %g with tag %d", buf[1], s.tag);
    }
    return 0;
}

#define PER_SENDER 20

static int anysrc_mode(gw_comm_t *comm)
{
    int n = gw_comm_size(comm);
    if (g_rank != 0) {
        gw_handle_t *h[PER_SENDER];
        int32_t msg[PER_SENDER][2];
        for (int i = 0; i < PER_SENDER; i++) {
            msg[i][0] = g_rank;
            msg[i][1] = i;
            OK_OR_FAIL(gw_isend_tagged(comm, msg[i], 2, GW_INT32, 0, i % 5, &h[i]));
        }
        for (int i = 0; i < PER_SENDER; i++)
            OK_OR_FAIL(gw_wait(h[i]));
        return 0;
    }
    int next[64] = {0};
    for (int k = 0; k < (n - 1) * PER_SENDER; k++) {
        int32_t m[2] = {-1, -1};
        gw_msg_status_t s;
        OK_OR_FAIL(gw_recv_tagged(comm, m, 2, GW_INT32, GW_ANY_SOURCE, GW_ANY_TAG, &s));
        EXPECT(s.source == m[0] && s.tag == m[1] % 5,
               "message (%d, %d) reported from rank %d with tag %d", m[0], m[1], s.source, s.tag);
        if (m[0] > 0 && m[0] < n) {
            EXPECT(m[1] == next[m[0]], "rank %d's message %d came where %d was due", m[0], m[1],
                   next[m[0]]);
            next[m[0]] = m[1] + 1;
        }
    }
    for (int r = 1; r < n; r++)
        EXPECT(next[r] == PER_SENDER, "rank %d: %d of %d messages", r, next[r], PER_SENDER);
    return 0;
}

#define ORDER_N 40

static int order_mode(gw_comm_t *comm)
{
    if (g_rank == 1) {
        gw_handle_t *h[2 * ORDER_N];
        int32_t v[2 * ORDER_N];
        for (int i = 0; i < 2 * ORDER_N; i++) {
            v[i] = i;
            OK_OR_FAIL(gw_isend_tagged(comm, &v[i], 1, GW_INT32, 0, i % 2 ? 8 : 7, &h[i]));
        }
        for (int i = 0; i < 2 * ORDER_N; i++)
            OK_OR_FAIL(gw_wait(h[i]));
    } else if (g_rank == 0) {
        for (int i = 0; i < ORDER_N; i++) {
            int32_t v = -1;
            OK_OR_FAIL(gw_recv_tagged(comm, &v, 1, GW_INT32, i % 2 ? 1 : GW_ANY_SOURCE, 7, NULL));
            EXPECT(v == 2 * i, "tag 7's message %d is %d", i, v);
        }
        for (int i = 0; i < ORDER_N; i++) {
            int32_t v = -1;
            gw_msg_status_t s;
            OK_OR_FAIL(gw_recv_tagged(comm, &v, 1, GW_INT32, 1, GW_ANY_TAG, &s));
            EXPECT(v == 2 * i + 1 && s.tag == 8, "tag 8's message %d is %d (tag %d)", i, v, s.tag);
        }
    }
    return 0;
}

/* An expected failure: print it; 0 when it is want. */
static int expect_failure(gw_comm_t *comm, gw_status_t st, gw_status_t want)
{
    printf("rank %d: %s culprit %d\n", g_rank, gw_status_name(st), gw_comm_culprit(comm));
    return st == want ? 0 : 1;
}

static int mismatch_mode(gw_comm_t *comm)
{
    float buf[5] = {1, 2, 3, 4, 5};
    if (g_rank == 1)
        return expect_failure(comm, gw_send_tagged(comm, buf, 4, GW_FLOAT32, 0, 5),
                              GW_ERR_MISMATCH);
    if (g_rank == 0) {
        float got[5] = {9, 9, 9, 9, 9};
        gw_status_t st = gw_recv_tagged(comm, got, 5, GW_FLOAT32, GW_ANY_SOURCE, 5, NULL);
        EXPECT(got[0] == 9, "the mismatched message was written");
        return expect_failure(comm, st, GW_ERR_MISMATCH);
    }
    return 0;
}

/* Rank 0 tests a GW_ANY_SOURCE receive that nothing matches; rank 1
 * waits for rank 0. */
static int testany_mode(gw_comm_t *comm)
{
    int32_t v = 1;
    gw_status_t st;
    if (g_rank == 0) {
        gw_handle_t *h;
        OK_OR_FAIL(gw_irecv_tagged(comm, &v, 1, GW_INT32, GW_ANY_SOURCE, 3, NULL, &h));
        int done = 0;
        while ((st = gw_test(h, &done)) == GW_OK && !done)
            usleep(1000);
        return expect_failure(comm, st, GW_ERR_TIMEOUT);
    }
    /* Rank 1 stays outside gradwire for twice the timeout before its own
     * receive from rank 0: the timeout that fires must be rank 0's tested
     * receive. Both waiting GW_TIMEOUT_MS at once raced, and rank 1's
     * receive once timed out first (CI, the quiet pass), so that rank 0
     * was blamed before its own wait ended. */
    const char *ms = getenv("GW_TIMEOUT_MS");
    usleep((useconds_t)(2 * (ms ? atol(ms) : 2000)) * 1000);
    st = gw_recv_tagged(comm, &v, 1, GW_INT32, 0, 3, NULL);
    printf("rank %d: %s culprit %d\n", g_rank, gw_status_name(st), gw_comm_culprit(comm));
    return st == GW_OK;
}

/* Rank 0 posts a send with a negative tag; rank 1 waits for it. */
static int args_mode(gw_comm_t *comm)
{
    int32_t v = 1;
    if (g_rank == 0) {
        gw_handle_t *h = NULL;
        gw_status_t st = gw_isend_tagged(comm, &v, 1, GW_INT32, 1, GW_ANY_TAG, &h);
        EXPECT(h == NULL, "a refused send left a handle");
        return expect_failure(comm, st, GW_ERR_INVALID_ARG);
    }
    if (g_rank == 1)
        return expect_failure(comm, gw_recv_tagged(comm, &v, 1, GW_INT32, 0, GW_ANY_TAG, NULL),
                              GW_ERR_INVALID_ARG);
    return 0;
}

static int dead_mode(gw_comm_t *comm, int silent)
{
    int32_t v = 42;
    if (g_rank == 2) {
        if (!silent)
            OK_OR_FAIL(gw_send_tagged(comm, &v, 1, GW_INT32, 0, 1));
        fflush(stdout);
        _exit(0); /* without gw_comm_destroy: a death, as the peers see it */
    }
    if (g_rank == 0) {
        if (!silent)
            OK_OR_FAIL(gw_recv_tagged(comm, &v, 1, GW_INT32, 2, 1, NULL));
        gw_status_t st = gw_recv_tagged(comm, &v, 1, GW_INT32, GW_ANY_SOURCE, GW_ANY_TAG, NULL);
        printf("rank 0: %s culprit %d\n", gw_status_name(st), gw_comm_culprit(comm));
        return st == GW_OK || gw_comm_culprit(comm) != 2;
    }
    /* Rank 1 waits for rank 0, which fails and tells it. */
    gw_status_t st = gw_recv_tagged(comm, &v, 1, GW_INT32, 0, 1, NULL);
    printf("rank %d: %s culprit %d\n", g_rank, gw_status_name(st), gw_comm_culprit(comm));
    return st == GW_OK;
}

#define BIG (16u << 20)

static int bound_mode(gw_comm_t *comm)
{
    if (g_rank == 1) {
        char *buf = calloc(1, BIG);
        gw_handle_t *h[5];
        gw_status_t st = GW_OK;
        for (int i = 0; i < 5 && st == GW_OK; i++)
            st = gw_isend_tagged(comm, buf, BIG, GW_UINT8, 0, 9, &h[i]);
        for (int i = 0; i < 5 && st == GW_OK; i++)
            st = gw_wait(h[i]);
        free(buf);
        printf("rank 1: %s culprit %d\n", gw_status_name(st), gw_comm_culprit(comm));
        return st == GW_OK;
    }
    if (g_rank == 0) {
        int32_t v;
        return expect_failure(comm, gw_recv_tagged(comm, &v, 1, GW_INT32, 1, 1, NULL),
                              GW_ERR_NO_MEMORY) ||
               gw_comm_culprit(comm) != 1;
    }
    return 0;
}

#define MB 6
#define WIDTH 33

/* One stage's step: forward adds the stage's rank + 1, backward doubles. */
static int pipeline_mode(gw_comm_t *comm)
{
    int n = gw_comm_size(comm), s = g_rank;
    float act[MB][WIDTH], grad[MB][WIDTH];
    gw_handle_t *pend[4 * MB];
    int npend = 0;
    int warmup = n - s - 1 < MB ? n - s - 1 : MB;
    int fwd = 0, bwd = 0;
    /* The schedule: warmup forwards, then one forward and one backward in
     * turn, then the remaining backwards. */
    while (bwd < MB) {
        int do_fwd = fwd < MB && (fwd < warmup || fwd - bwd <= warmup);
        if (do_fwd) {
            int m = fwd++;
            gw_msg_status_t st = {0};
            if (s == 0)
                for (int i = 0; i < WIDTH; i++)
                    act[m][i] = (float)(m * 100 + i);
            else
                OK_OR_FAIL(
                    gw_recv_tagged(comm, act[m], WIDTH, GW_FLOAT32, GW_ANY_SOURCE, 2 * m, &st));
            EXPECT(s == 0 || (st.source == s - 1 && st.tag == 2 * m), "forward %d: status %d/%d", m,
                   st.source, st.tag);
            for (int i = 0; i < WIDTH; i++)
                act[m][i] += (float)(s + 1);
            if (s < n - 1)
                OK_OR_FAIL(
                    gw_isend_tagged(comm, act[m], WIDTH, GW_FLOAT32, s + 1, 2 * m, &pend[npend++]));
        } else {
            int m = bwd++;
            if (s == n - 1) {
                /* The loss's gradient: the activation itself. */
                memcpy(grad[m], act[m], sizeof(grad[m]));
            } else {
                gw_msg_status_t st;
                OK_OR_FAIL(gw_recv_tagged(comm, grad[m], WIDTH, GW_FLOAT32, GW_ANY_SOURCE,
                                          2 * m + 1, &st));
                EXPECT(st.source == s + 1 && st.tag == 2 * m + 1, "backward %d: status %d/%d", m,
                       st.source, st.tag);
            }
            for (int i = 0; i < WIDTH; i++)
                grad[m][i] *= 2;
            if (s > 0)
                OK_OR_FAIL(gw_isend_tagged(comm, grad[m], WIDTH, GW_FLOAT32, s - 1, 2 * m + 1,
                                           &pend[npend++]));
        }
    }
    for (int i = 0; i < npend; i++)
        OK_OR_FAIL(gw_wait(pend[i]));
    /* Stage s's gradient: the last activation doubled once per stage from
     * n - 1 down to s. */
    float total = (float)(n * (n + 1) / 2);
    for (int m = 0; m < MB; m++)
        for (int i = 0; i < WIDTH; i++) {
            float want = ((float)(m * 100 + i) + total) * (float)(1 << (n - s));
            EXPECT(grad[m][i] == want, "stage %d microbatch %d [%d]: %g, not %g", s, m, i,
                   grad[m][i], want);
        }
    return 0;
}

/* Elements rank r sends rank q: uneven, some none (0 -> 2, 2 -> 1, 2 -> 3). */
static uint64_t batch(int r, int q) { return (uint64_t)((r + 2 * q) % 4) * 3; }

static int moe_mode(gw_comm_t *comm)
{
    int n = gw_comm_size(comm), r = g_rank;
    uint64_t counts_out[64], counts_in[64];
    float *out[64], *in[64];
    gw_handle_t *h[256];
    int nh = 0;
    for (int q = 0; q < n; q++) {
        if (q == r)
            continue;
        counts_out[q] = batch(r, q);
        out[q] = malloc((counts_out[q] + 1) * sizeof(float));
        for (uint64_t i = 0; i < counts_out[q]; i++)
            out[q][i] = (float)(r * 1000 + q * 100) + (float)i;
        OK_OR_FAIL(gw_isend_tagged(comm, &counts_out[q], 1, GW_UINT64, q, 0, &h[nh++]));
        OK_OR_FAIL(gw_isend_tagged(comm, out[q], counts_out[q], GW_FLOAT32, q, 1, &h[nh++]));
    }
    /* Every count first, in whatever order the senders get to them (the
     * batches travel meanwhile, held), then the batches. */
    for (int k = 0; k < n - 1; k++) {
        uint64_t c;
        gw_msg_status_t s;
        OK_OR_FAIL(gw_recv_tagged(comm, &c, 1, GW_UINT64, GW_ANY_SOURCE, 0, &s));
        EXPECT(s.source >= 0 && s.source < n && s.source != r && c == batch(s.source, r),
               "count from %d: %llu", s.source, (unsigned long long)c);
        if (s.source >= 0 && s.source < n)
            counts_in[s.source] = c;
    }
    for (int q = 0; q < n; q++) {
        if (q == r)
            continue;
        in[q] = malloc((counts_in[q] + 1) * sizeof(float));
        OK_OR_FAIL(gw_irecv_tagged(comm, in[q], counts_in[q], GW_FLOAT32, q, 1, NULL, &h[nh++]));
    }
    for (int i = 0; i < nh; i++)
        OK_OR_FAIL(gw_wait(h[i]));
    for (int q = 0; q < n; q++) {
        if (q == r)
            continue;
        for (uint64_t i = 0; i < counts_in[q]; i++)
            EXPECT(in[q][i] == (float)(q * 1000 + r * 100) + (float)i, "from %d [%llu]: %g", q,
                   (unsigned long long)i, in[q][i]);
        free(in[q]);
        free(out[q]);
    }
    return 0;
}

#define LEAVE_MSGS 4
#define LATE_MS 300

/* The file by which leave's rank 0 says that its sends returned: one per
 * job (the root's address is the job's). */
static void leave_flag(char *path, size_t cap)
{
    const char *root = getenv("GW_ROOT");
    snprintf(path, cap, "/tmp/gw-leave-%s", root ? root : "none");
    for (char *c = path + 5; *c; c++)
        if (*c == '/' || *c == ':' || *c == '[' || *c == ']')
            *c = '_';
}

static int leave_mode(gw_comm_t *comm)
{
    static const size_t sizes[LEAVE_MSGS] = {8, 256, 1024, 4096};
    char flag[300];
    leave_flag(flag, sizeof(flag));
    /* Connected first: a pair that connects on first use (GW_CONNECT=lazy)
     * needs both ranks in a call to connect, and rank 1 will be in none. */
    OK_OR_FAIL(gw_barrier(comm));
    if (g_rank == 0) {
        OK_OR_FAIL(gw_comm_set_p2p_send(comm, GW_P2P_SEND_STANDARD));
        EXPECT(gw_comm_set_p2p_send(comm, (gw_p2p_send_t)7) == GW_ERR_INVALID_ARG,
               "an unknown mode was taken");
        EXPECT(gw_comm_set_p2p_send(NULL, GW_P2P_SEND_SYNC) == GW_ERR_INVALID_ARG,
               "a NULL communicator was taken");
        for (int m = 0; m < LEAVE_MSGS; m++) {
            uint8_t buf[4096];
            for (size_t i = 0; i < sizes[m]; i++)
                buf[i] = (uint8_t)(m * 31 + (int)i);
            OK_OR_FAIL(gw_send(comm, buf, sizes[m], GW_UINT8, 1));
        }
        FILE *f = fopen(flag, "w");
        EXPECT(f != NULL, "cannot write %s", flag);
        if (f)
            fclose(f);
        return 0;
    }
    if (g_rank == 1) {
        int waited = 0;
        while (access(flag, F_OK) != 0 && waited++ < 2000) /* 20 s */
            usleep(10 * 1000);
        EXPECT(access(flag, F_OK) == 0, "rank 0's sends did not all return before a receive");
        unlink(flag);
        usleep(LATE_MS * 1000);
        for (int m = 0; m < LEAVE_MSGS; m++) {
            uint8_t buf[4096];
            OK_OR_FAIL(gw_recv(comm, buf, sizes[m], GW_UINT8, 0));
            size_t wrong = 0;
            for (size_t i = 0; i < sizes[m]; i++)
                wrong += buf[i] != (uint8_t)(m * 31 + (int)i);
            EXPECT(wrong == 0, "message %d: %zu of %zu bytes wrong", m, wrong, sizes[m]);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "tags";
    setvbuf(stdout, NULL, _IOLBF, 0);
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init_env(&comm);
    if (st != GW_OK) {
        printf("rank ?: init: %s\n", gw_status_name(st));
        return 1;
    }
    g_rank = gw_comm_rank(comm);
    int rc = 1;
    if (strcmp(mode, "tags") == 0)
        rc = tags_mode(comm);
    else if (strcmp(mode, "anysrc") == 0)
        rc = anysrc_mode(comm);
    else if (strcmp(mode, "order") == 0)
        rc = order_mode(comm);
    else if (strcmp(mode, "mismatch") == 0)
        rc = mismatch_mode(comm);
    else if (strcmp(mode, "dead") == 0)
        rc = dead_mode(comm, 0);
    else if (strcmp(mode, "deadsilent") == 0)
        rc = dead_mode(comm, 1);
    else if (strcmp(mode, "testany") == 0)
        rc = testany_mode(comm);
    else if (strcmp(mode, "args") == 0)
        rc = args_mode(comm);
    else if (strcmp(mode, "bound") == 0)
        rc = bound_mode(comm);
    else if (strcmp(mode, "pipeline") == 0)
        rc = pipeline_mode(comm);
    else if (strcmp(mode, "moe") == 0)
        rc = moe_mode(comm);
    else if (strcmp(mode, "leave") == 0)
        rc = leave_mode(comm);
    else
        printf("rank %d: unknown mode %s\n", g_rank, mode);
    int healthy = rc == 0 && !g_bad && strcmp(mode, "mismatch") && strncmp(mode, "dead", 4) &&
                  strcmp(mode, "bound") && strcmp(mode, "args") && strcmp(mode, "testany");
    /* A barrier keeps a rank from closing while a peer still wants its
     * receipts; the failure modes skip it (their communicators broke), and
     * so does leave, whose sender must not wait for its receiver. */
    if (healthy && strcmp(mode, "leave") != 0 && (st = gw_barrier(comm)) != GW_OK) {
        printf("rank %d: FAILED barrier: %s\n", g_rank, gw_status_name(st));
        rc = 1;
    }
    if (healthy)
        printf("rank %d: OK\n", g_rank);
    gw_comm_destroy(comm);
    return rc || g_bad;
}
