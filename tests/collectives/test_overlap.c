/*
 * test_overlap.c - send and receive buffers that partly overlap are
 * refused (GW_ERR_INVALID_ARG, naming the call), by every collective, while
 * each call's exact in-place layout and buffers that merely touch still
 * work: on one rank through gw_comm_init, and on two ranks (in-process,
 * over the memory transport) where the in-place layout of allgather and
 * reduce-scatter depends on the rank.
 */
#include "rank_threads.h"

static gw_comm_t *one_rank(void)
{
    setenv("GW_DEBUG", "NONE", 1);
    unsetenv("GW_DEBUG_FILE");
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *comm = NULL;
    cr_assert_eq(gw_comm_init(&cfg, &comm), GW_OK);
    return comm;
}

/* Every call with recvbuf one element past sendbuf (a partial overlap) on a
 * fresh one-rank communicator: refused, the reason naming the call. */
Test(overlap, every_call_refuses_a_partial_overlap)
{
    float b[64];
    const size_t cnt[1] = {8}, dsp[1] = {0};
    for (int k = 0; k < 10; k++) {
        gw_comm_t *c = one_rank();
        float *s = b, *r = b + 1;
        gw_status_t st = GW_OK;
        const char *fn = "";
        switch (k) {
        case 0:
            st = gw_allreduce(c, s, r, 8, GW_FLOAT32, GW_SUM), fn = "gw_allreduce";
            break;
        case 1:
            st = gw_broadcast(c, s, r, 8, GW_FLOAT32, 0), fn = "gw_broadcast";
            break;
        case 2:
            st = gw_reduce(c, s, r, 8, GW_FLOAT32, GW_SUM, 0), fn = "gw_reduce";
            break;
        case 3:
            st = gw_allgather(c, s, r, 8, GW_FLOAT32), fn = "gw_allgather";
            break;
        case 4:
            st = gw_reduce_scatter(c, s, r, 8, GW_FLOAT32, GW_SUM), fn = "gw_reduce_scatter";
            break;
        case 5:
            st = gw_alltoall(c, s, r, 8, GW_FLOAT32), fn = "gw_alltoall";
            break;
        case 6:
            st = gw_alltoallv(c, s, cnt, dsp, r, cnt, dsp, GW_FLOAT32), fn = "gw_alltoallv";
            break;
        case 7:
            st = gw_gather(c, s, r, 8, GW_FLOAT32, 0), fn = "gw_gather";
            break;
        case 8:
            st = gw_scatter(c, s, r, 8, GW_FLOAT32, 0), fn = "gw_scatter";
            break;
        default:
            st = gw_allgatherv(c, s, r, 8, cnt, dsp, GW_FLOAT32), fn = "gw_allgatherv";
            break;
        }
        cr_expect_eq(st, GW_ERR_INVALID_ARG, "%s with overlapping buffers: %s", fn,
                     gw_status_name(st));
        const char *why = gw_last_error(c);
        cr_expect(strstr(why, fn) && strstr(why, "overlap"), "%s: reason \"%s\"", fn, why);
        /* The receive buffer starting inside the send buffer's end, too. */
        gw_comm_destroy(c);
        c = one_rank();
        cr_expect_eq(gw_allreduce(c, b + 1, b, 8, GW_FLOAT32, GW_SUM), GW_ERR_INVALID_ARG,
                     "receive buffer before the send buffer, overlapping");
        gw_comm_destroy(c);
    }
}

/* In place (the same pointer) and buffers that only touch are fine. */
Test(overlap, in_place_and_adjacent_are_allowed)
{
    gw_comm_t *c = one_rank();
    float b[16];
    for (int i = 0; i < 16; i++)
        b[i] = (float)i;
    cr_expect_eq(gw_allreduce(c, b, b + 8, 8, GW_FLOAT32, GW_SUM), GW_OK, "touching, after");
    for (int i = 0; i < 8; i++)
        cr_expect_eq(b[8 + i], (float)i, "element %d: %g", i, (double)b[8 + i]);
    for (int i = 0; i < 8; i++)
        b[8 + i] = (float)(50 + i);
    cr_expect_eq(gw_allreduce(c, b + 8, b, 8, GW_FLOAT32, GW_SUM), GW_OK, "touching, before");
    for (int i = 0; i < 8; i++)
        cr_expect_eq(b[i], (float)(50 + i), "element %d: %g", i, (double)b[i]);
    cr_expect_eq(gw_allreduce(c, b, b, 8, GW_FLOAT32, GW_SUM), GW_OK);
    cr_expect_eq(gw_allgather(c, b, b, 8, GW_FLOAT32), GW_OK);
    cr_expect_eq(gw_reduce_scatter(c, b, b, 8, GW_FLOAT32, GW_SUM), GW_OK);
    cr_expect_eq(gw_alltoall(c, b, b, 8, GW_FLOAT32), GW_OK);
    cr_expect_eq(gw_broadcast(c, b, b, 8, GW_FLOAT32, 0), GW_OK);
    cr_expect_eq(gw_reduce(c, b, b, 8, GW_FLOAT32, GW_SUM, 0), GW_OK);
    cr_expect_eq(gw_gather(c, b, b, 8, GW_FLOAT32, 0), GW_OK);
    cr_expect_eq(gw_scatter(c, b, b, 8, GW_FLOAT32, 0), GW_OK);
    for (int i = 0; i < 8; i++)
        cr_expect_eq(b[i], (float)(50 + i), "in place changed element %d: %g", i, (double)b[i]);
    gw_comm_destroy(c);
}

/* Two ranks: in place is rank r's block (allgather: sendbuf == recvbuf +
 * r blocks; reduce-scatter: recvbuf == sendbuf + r blocks) and works; the
 * other rank's block, which overlaps too, is refused on both ranks. */
static void two_rank_body(ctx_t *c, const void *arg)
{
    (void)arg;
    gw_comm_t *comm = &c->comm;
    comm->log.level = GW_LOG_NONE;
    comm->log.slot = &comm->last_error; /* as gw_comm_init sets it */
    const int r = c->rank, n = comm->size;
    int32_t ag[8], rs[8];
    for (int i = 0; i < 4; i++)
        ag[r * 4 + i] = r * 100 + i;
    gw_status_t st = gw_allgather(comm, ag + r * 4, ag, 4, GW_INT32);
    if (st != GW_OK)
        note(c, "in-place allgather: %s (%s)", gw_status_name(st), gw_last_error(comm));
    for (int j = 0; j < n && st == GW_OK; j++)
        for (int i = 0; i < 4; i++)
            if (ag[j * 4 + i] != j * 100 + i)
                note(c, "in-place allgather: element %d of block %d is %d", i, j, ag[j * 4 + i]);
    for (int k = 0; k < 8; k++)
        rs[k] = k;
    st = gw_reduce_scatter(comm, rs, rs + r * 4, 4, GW_INT32, GW_SUM);
    if (st != GW_OK)
        note(c, "in-place reduce_scatter: %s (%s)", gw_status_name(st), gw_last_error(comm));
    for (int i = 0; i < 4 && st == GW_OK; i++)
        if (rs[r * 4 + i] != n * (r * 4 + i))
            note(c, "in-place reduce_scatter: element %d is %d", i, rs[r * 4 + i]);
    sync_all(c);
    /* The other rank's block as the send buffer: inside the receive
     * buffer, not where this rank's result goes. */
    st = gw_allgather(comm, ag + (1 - r) * 4, ag, 4, GW_INT32);
    if (st != GW_ERR_INVALID_ARG)
        note(c, "allgather from the other rank's block: %s, not GW_ERR_INVALID_ARG",
             gw_status_name(st));
    else if (!strstr(gw_last_error(comm), "gw_allgather"))
        note(c, "the reason does not name the call: %s", gw_last_error(comm));
}

Test(overlap, two_ranks_in_place_is_this_ranks_block)
{
    threads_opts_t o = {.timeout_ms = 10000};
    threads_run(2, &o, two_rank_body, NULL);
}
