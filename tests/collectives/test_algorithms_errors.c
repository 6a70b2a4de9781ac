/*
 * test_algorithms_errors.c - failures in the collective algorithms: ranks
 * that call with a different op or count, a rank that never comes and one
 * that has closed its transport. Every rank must fail with the same status
 * (mismatches and closed peers at once, an absent rank by time-out), and the
 * communicator must stay failed afterwards.
 *
 * The harness is in algo_test_util.h.
 */
#include "algo_test_util.h"

/* ------------------------------------ errors ------------------------------------ */

typedef struct fault_arg {
    int kind;  /* which collective */
    int fault; /* FAULT_* */
    gw_status_t expect;
    size_t count; /* elements (reduce-scatter: count / 8 per rank) */
} fault_arg_t;

enum { FAULT_COUNT, FAULT_OP, FAULT_ABSENT, FAULT_CLOSED };
enum { K_RING, K_TREE, K_RD, K_ALLGATHER, K_REDUCE_SCATTER, K_BARRIER, K_COUNT };
static const char *const kind_names[] = {"ring",      "tree",           "rd",
                                         "allgather", "reduce_scatter", "barrier"};

static gw_status_t run_kind(ctx_t *c, int kind, size_t count, gw_op_t op, void *buf, void *out)
{
    switch (kind) {
    case K_RING:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_ring(&c->comm, buf, out, count, GW_INT32, op);
    case K_TREE:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_tree(&c->comm, buf, out, count, GW_INT32, op);
    case K_RD:
        begin(c, GW_COLL_ALLREDUCE, count, GW_INT32, op, 0);
        return gw__allreduce_rd(&c->comm, buf, out, count, GW_INT32, op);
    case K_ALLGATHER:
        begin(c, GW_COLL_ALLGATHER, count, GW_INT32, op, 0);
        return gw__allgather_ring(&c->comm, buf, out, count, GW_INT32);
    case K_REDUCE_SCATTER:
        begin(c, GW_COLL_REDUCE_SCATTER, count / 8, GW_INT32, op, 0);
        return gw__reduce_scatter_ring(&c->comm, buf, out, count / 8, GW_INT32, op);
    default:
        begin(c, GW_COLL_BARRIER, count, GW_UINT8, op, 0);
        return gw__barrier_dissemination(&c->comm);
    }
}

static void fault_body(ctx_t *c, const void *arg)
{
    const fault_arg_t *a = arg;
    int n = c->comm.size, odd = c->rank == n - 1;
    size_t count = a->count;
    int32_t *buf = calloc(count + 8, sizeof(int32_t));
    int32_t *out = calloc((count + 8) * (size_t)n, sizeof(int32_t));
    /* The failures are the point here; keep their log lines out of the
     * test output. */
    c->comm.log.level = GW_LOG_NONE;
    if (odd && (a->fault == FAULT_ABSENT || a->fault == FAULT_CLOSED)) {
        if (a->fault == FAULT_CLOSED) {
            c->comm.transport->ops->close(c->comm.transport);
            c->comm.transport = NULL;
        }
        sync_all(c); /* stay away until the others have given up */
    } else {
        if (odd && a->fault == FAULT_COUNT)
            count += 8;
        gw_op_t op = odd && a->fault == FAULT_OP ? GW_MAX : GW_SUM;
        int64_t t0 = gw__now_ms();
        gw_status_t st = run_kind(c, a->kind, count, op, buf, out);
        int64_t took = gw__now_ms() - t0;
        CHECK(c, st == a->expect, "%s: got %s, expected %s", kind_names[a->kind],
              gw_status_name(st), gw_status_name(a->expect));
        CHECK(c, c->comm.failed == st, "%s: comm->failed is %s after %s", kind_names[a->kind],
              gw_status_name(c->comm.failed), gw_status_name(st));
        /* Mismatches and closed peers are reported at once, not by timeout. */
        if (a->fault != FAULT_ABSENT)
            CHECK(c, took < c->comm.timeout_ms / 2, "%s: took %lld ms", kind_names[a->kind],
                  (long long)took);
        /* A failed communicator stays failed. */
        gw_status_t again = run_kind(c, a->kind, count, op, buf, out);
        CHECK(c, again == st, "%s: second call gave %s", kind_names[a->kind],
              gw_status_name(again));
        if (a->fault == FAULT_ABSENT || a->fault == FAULT_CLOSED)
            sync_all(c);
    }
    free(buf);
    free(out);
}

Test(errors, mismatched_arguments_fail_every_rank, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++)
        for (int n = 2; n <= 5; n++) {
            fault_arg_t op = {kind, FAULT_OP, GW_ERR_MISMATCH, 800};
            job_run(n, 10000, n % 2, fault_body, &op);
            /* Empty buffers still exchange (zero-length) messages, so a
             * disagreement is caught there too. */
            fault_arg_t empty = {kind, FAULT_OP, GW_ERR_MISMATCH, 0};
            job_run(n, 10000, (n + 1) % 2, fault_body, &empty);
            if (kind != K_BARRIER) {
                fault_arg_t count = {kind, FAULT_COUNT, GW_ERR_MISMATCH, 800};
                job_run(n, 10000, (n + 1) % 2, fault_body, &count);
            }
        }
}

Test(errors, absent_rank_times_out, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++) {
        fault_arg_t a = {kind, FAULT_ABSENT, GW_ERR_TIMEOUT, 800};
        job_run(4, 300, kind % 2, fault_body, &a);
    }
}

Test(errors, closed_peer_fails_fast, .timeout = 60)
{
    for (int kind = 0; kind < K_COUNT; kind++) {
        fault_arg_t a = {kind, FAULT_CLOSED, GW_ERR_REMOTE, 800};
        job_run(3, 10000, kind % 2, fault_body, &a);
    }
}
