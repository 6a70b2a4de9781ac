/*
 * bench_coll.c - `gradwire-bench allreduce | allgather | reduce_scatter |
 * broadcast | reduce | barrier | sendrecv | alltoall | gather | scatter |
 * allgatherv`, in the manner of nccl-tests' all_reduce_perf,
 * all_gather_perf, reduce_scatter_perf, broadcast_perf, reduce_perf,
 * sendrecv_perf, alltoall_perf, gather_perf and scatter_perf, so that the
 * numbers compare (allgatherv, which nccl-tests lacks, counts like
 * allgather).
 *
 * For every dtype, op and message size, each rank runs the collective out
 * of place (send -> recv) and then in place (MPI's convention: one buffer,
 * a rank's own block at its offset for allgather and reduce-scatter): a few
 * untimed warm-up calls, then `iters` calls timed one by one. A rank's time
 * for an iteration says little on its own (the first rank to enter waits
 * for the last), so the per-iteration times are reduced with GW_MAX over
 * ranks, and the reported time is the median of those maxima; min and max
 * go to the JSON. Units and factors are nccl-tests': GB = 1e9 bytes, size
 * S is the largest buffer of the call (the gathered or the scattered one
 * for allgather, reduce-scatter, gather, scatter and allgatherv, either
 * of alltoall's), algbw = S / t and busbw = algbw times the share of S
 * that crosses the busiest link of an optimal algorithm: 2(n-1)/n for
 * allreduce, (n-1)/n for allgather, reduce-scatter, alltoall, gather,
 * scatter and allgatherv (nccl-tests' factors), 1 for
 * broadcast, reduce and sendrecv (every rank sends S to the next rank and
 * receives S from the previous one at once, out of place only: gw_sendrecv's
 * buffers must not overlap). The barrier has no size: one line, its time.
 *
 * With -c 1 every size is then run once more on fresh input and every
 * element each rank received is compared with the exact answer (bench_data.c
 * explains why the answer is exact): the reduction for allreduce, reduce
 * (on the root) and reduce-scatter (the rank's block of it), the root's
 * input for broadcast, every rank's input in its block for allgather,
 * allgatherv and gather (on the root), rank q's block for this rank in
 * block q for alltoall, the root's block for this rank for scatter, the
 * previous rank's input for sendrecv. The
 * wrong-element counts of all ranks are summed. The receive buffer is first
 * overwritten with values that are certainly wrong, so a call that leaves
 * it alone is caught.
 *
 * Every argument is checked before the communicator exists: a typo must not
 * cost a rendezvous (or a hang waiting for ranks that already quit).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_coll_cmd.h"

#define call_failed(b, st, ...) \
    gw_bench_fail((b)->error, sizeof((b)->error), (b)->r.rank, st, __VA_ARGS__)

/* Wait for every call in flight; the first error, if any. */
static gw_status_t wait_all(gw_bench_coll_job_t *b)
{
    gw_status_t first = GW_OK;
    for (size_t i = 0; i < b->nhandles; i++) {
        gw_status_t st = gw_wait(b->handles[i]);
        if (first == GW_OK)
            first = st;
    }
    b->nhandles = 0;
    return first;
}

/* Issue calls non-blocking calls (b->handles has room); on an error, wait
 * for those already issued and return it. */
static gw_status_t issue(gw_bench_coll_job_t *b, const gw_bench_place_t *pl,
                         const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op, long calls)
{
    for (long k = 0; k < calls; k++) {
        int nh = 0;
        gw_status_t st = gw_bench_coll_icall(&b->r, pl, sh, dt, op, b->handles + b->nhandles, &nh);
        if (st != GW_OK) {
            wait_all(b);
            return st;
        }
        b->nhandles += (size_t)nh;
    }
    return GW_OK;
}

/* One iteration: the blocking call, or with -m M, M non-blocking calls and
 * one wait for them all (nccl-tests' aggregation). */
static gw_status_t iteration(gw_bench_coll_job_t *b, const gw_bench_place_t *pl,
                             const gw_bench_shape_t *sh, gw_dtype_t dt, gw_op_t op)
{
    if (b->o.agg == 1)
        return gw_bench_coll_call(&b->r, pl, sh, dt, op);
    gw_status_t st = issue(b, pl, sh, dt, op, b->o.agg);
    return st == GW_OK ? wait_all(b) : st;
}

/* Time and check one (dtype, op, size, placement); fills *pr. */
static int measure(gw_bench_coll_job_t *b, gw_dtype_t dt, gw_op_t op, const gw_bench_shape_t *sh,
                   int in_place, gw_bench_coll_cell_t *pr)
{
    const char *where = in_place ? "in-place" : "out-of-place", *name = b->o.coll->name;
    const char *opname = b->o.coll->has_op ? gw_op_name(op) : "-";
    gw_bench_place_t pl = gw_bench_coll_place(&b->r, sh, dt, in_place);
    long n = b->o.sw.iters;
    gw_status_t st;

    gw_bench_coll_fill(&b->r, &pl, sh, dt, op);
    if ((st = gw_barrier(b->r.comm)) != GW_OK)
        return call_failed(b, st, "gw_barrier before %zu B", sh->bytes);
    for (long it = 0; it < b->o.sw.warmup; it++)
        if ((st = iteration(b, &pl, sh, dt, op)) != GW_OK)
            return call_failed(b, st, "gw_%s (%s, %zu B %s %s, warm-up)", name, where, sh->bytes,
                               gw_dtype_name(dt), opname);
    if (b->o.blocking) {
        for (long it = 0; it < n; it++) {
            double t0 = gw_kit_now_us();
            if ((st = iteration(b, &pl, sh, dt, op)) != GW_OK)
                return call_failed(b, st, "gw_%s (%s, %zu B %s %s, iteration %ld)", name, where,
                                   sh->bytes, gw_dtype_name(dt), opname, it);
            b->times[it] = (gw_kit_now_us() - t0) / (double)b->o.agg;
        }
    } else {
        /* -z 0: no wait until every call is issued; each iteration's time
         * is the mean over all of them. */
        double t0 = gw_kit_now_us();
        st = issue(b, &pl, sh, dt, op, n * b->o.agg);
        if (st == GW_OK)
            st = wait_all(b);
        if (st != GW_OK)
            return call_failed(b, st, "gw_%s (%s, %zu B %s %s, %ld calls without waiting)", name,
                               where, sh->bytes, gw_dtype_name(dt), opname, n * b->o.agg);
        double each = (gw_kit_now_us() - t0) / (double)(n * b->o.agg);
        for (long it = 0; it < n; it++)
            b->times[it] = each;
    }
    if ((st = gw_bench_timing_reduce_by(b->r.comm, b->times, b->tmax, n, b->o.avg, &pr->t)) !=
        GW_OK)
        return call_failed(b, st, "gw_allreduce of the timings");
    pr->algbw = pr->t.med_us > 0 ? (double)sh->bytes / pr->t.med_us / 1e3 : 0;
    pr->busbw = pr->algbw * b->o.coll->busbw_factor(b->r.size);
    pr->wrong = -1;
    pr->ran = 1;
    if (!b->o.check)
        return 0;

    gw_bench_coll_fill(&b->r, &pl, sh, dt, op);
    gw_bench_coll_poison(&b->r, &pl, sh, dt, op, in_place);
    if ((st = gw_bench_coll_call(&b->r, &pl, sh, dt, op)) != GW_OK)
        return call_failed(b, st, "gw_%s (%s, %zu B %s %s, check)", name, where, sh->bytes,
                           gw_dtype_name(dt), opname);
    int64_t local = gw_bench_coll_wrong(&b->r, &pl, sh, dt, op);
    if ((st = gw_allreduce(b->r.comm, &local, &pr->wrong, 1, GW_INT64, GW_SUM)) != GW_OK)
        return call_failed(b, st, "gw_allreduce of the wrong-element counts");
    return 0;
}

static int add_result(gw_bench_coll_job_t *b, const gw_bench_coll_row_t *r)
{
    if (gw_bench_reserve((void **)&b->res, &b->capres, b->nres, sizeof(*r), 64) != 0) {
        snprintf(b->error, sizeof(b->error), "out of memory for the results");
        return -1;
    }
    b->res[b->nres++] = *r;
    return 0;
}

/* Every size of every (dtype, op). Returns 0, or -1 with b->error set. */
static int run_sweep(gw_bench_coll_job_t *b, long cycle)
{
    for (int d = 0; d < b->o.ndtypes; d++) {
        gw_dtype_t dt = b->o.dtypes[d];
        for (int k = 0; k < b->o.nops; k++) {
            gw_op_t op = b->o.ops[k];
            /* -d all, -o all: only the combinations that exist (one
             * explicit pair that does not is refused at parsing). */
            if (b->o.coll->has_op && !gw_bench_combo_exists(dt, op))
                continue;
            for (size_t s = b->o.sw.minbytes;; s = gw_bench_coll_next_size(&b->o, s)) {
                gw_bench_coll_row_t r = {.cycle = cycle, .dtype = dt, .op = op};
                gw_bench_shape_t sh = gw_bench_coll_shape(&b->r, s, dt);
                r.count = sh.count;
                r.bytes = sh.bytes;
                r.algo =
                    b->o.coll->has_algo ? gw_comm_pick_algo(b->r.comm, r.count, dt) : GW_ALGO_AUTO;
                for (int p = 0; p < (b->o.coll->out_of_place_only ? 1 : 2); p++)
                    if (measure(b, dt, op, &sh, p, &r.p[p]) != 0)
                        return -1;
                if (add_result(b, &r) != 0)
                    return -1;
                if (b->r.rank == 0)
                    gw_bench_coll_print_row(b, &r);
                if (gw_bench_coll_next_size(&b->o, s) == 0)
                    break;
            }
        }
    }
    return 0;
}

/* -N: the sweep N times (0: until stopped, keeping only the last sweep's
 * rows, so that memory stays bounded). */
static int run_all(gw_bench_coll_job_t *b)
{
    for (long c = 0; b->o.cycles == 0 || c < b->o.cycles; c++) {
        if (b->o.cycles == 0)
            b->nres = 0;
        if (b->r.rank == 0 && b->o.cycles != 1) {
            printf("# cycle %ld\n", c + 1);
            fflush(stdout);
        }
        if (run_sweep(b, c) != 0)
            return -1;
    }
    return 0;
}

/* Set up buffers (and the JSON file on rank 0); every rank learns whether
 * all succeeded, so that none is left waiting for a rank that gave up. */
static int setup(gw_bench_coll_job_t *b, gw_bench_report_t *json)
{
    gw_status_t st;
    int ok = 1;
    size_t cap = b->o.sw.maxbytes ? b->o.sw.maxbytes : 1;
    if (b->o.algo != GW_ALGO_AUTO && (st = gw_comm_set_algo(b->r.comm, b->o.algo)) != GW_OK)
        return call_failed(b, st, "gw_comm_set_algo(%s)", gw_algo_name(b->o.algo));
    b->r.send = malloc(cap);
    b->r.recv = malloc(cap);
    b->r.counts = calloc((size_t)b->r.size, sizeof(size_t));
    b->r.displs = calloc((size_t)b->r.size, sizeof(size_t));
    b->handles =
        calloc((size_t)(b->o.blocking ? b->o.agg : b->o.agg * b->o.sw.iters) * GW_BENCH_MAX_HANDLES,
               sizeof(*b->handles));
    if (!b->handles)
        ok = 0;
    b->times = calloc((size_t)b->o.sw.iters, sizeof(double));
    b->tmax = calloc((size_t)b->o.sw.iters, sizeof(double));
    if (!b->r.send || !b->r.recv || !b->times || !b->tmax || !b->r.counts || !b->r.displs) {
        fprintf(stderr, "gradwire-bench: rank %d: cannot allocate 2 x %zu bytes of buffers\n",
                b->r.rank, cap);
        ok = 0;
    }
    if (b->o.coll->has_root && b->r.root >= b->r.size) {
        /* Every rank sees the same size: all of them stop here, after
         * meeting in setup_end, so none exits (and has the launcher stop
         * rank 0) before rank 0 has said why. */
        if (b->r.rank == 0)
            fprintf(stderr, "%s: root %d is not a rank of this job (%d ranks)\n", b->o.name,
                    b->r.root, b->r.size);
        snprintf(b->error, sizeof(b->error), "root %d out of range", b->r.root);
        char ignored[sizeof(b->error)];
        gw_bench_setup_end(b->r.comm, b->r.rank, 0, b->o.coll->name, b->o.json, json, ignored,
                           sizeof(ignored));
        return -1;
    }
    if (gw_bench_place_alloc(&b->place, b->r.rank, b->r.size) != 0)
        ok = 0;
    if (gw_bench_setup_end(b->r.comm, b->r.rank, ok, b->o.coll->name, b->o.json, json, b->error,
                           sizeof(b->error)) != 0)
        return -1;
    if ((st = gw_bench_place_gather(b->r.comm, &b->place)) != GW_OK)
        return call_failed(b, st, "gw_gather of where the ranks run");
    json->place = &b->place;
    return 0;
}

int gw_bench_coll_main(int argc, char **argv)
{
    gw_bench_coll_job_t b;
    gw_bench_report_t json = {0};
    double avg;
    int64_t wrong;
    const gw_bench_coll_t *d = gw_bench_coll_find(argv[0]);
    if (!d)
        return GW_BENCH_EXIT_USAGE; /* bench_main.c dispatches only our names */
    memset(&b, 0, sizeof(b));
    int rc = gw_bench_coll_parse(argc, argv, d, &b.o);
    if (rc >= 0)
        return rc;
    b.r.coll = d;
    b.r.root = b.o.root;

    if (gw_bench_join("gradwire-bench", &b.r.comm, &b.r.rank, &b.r.size) != 0)
        return GW_BENCH_EXIT_FAIL;
    if (d->id == GW_BENCH_SENDRECV && b.r.size < 2) {
        fprintf(stderr, "%s: needs at least 2 ranks (have 1)\n", b.o.name);
        gw_comm_destroy(b.r.comm);
        return GW_BENCH_EXIT_USAGE;
    }
    rc = GW_BENCH_EXIT_FAIL;
    if (setup(&b, &json) == 0) {
        if (b.r.rank == 0)
            gw_bench_coll_print_header(&b);
        rc = run_all(&b) == 0 ? 0 : GW_BENCH_EXIT_FAIL;
        if (b.r.rank == 0)
            gw_bench_coll_print_footer(&b);
        if (b.r.rank == 0 && b.o.plot && gw_bench_coll_plot(&b) != 0)
            rc = GW_BENCH_EXIT_FAIL;
    }
    gw_bench_coll_totals(&b, &avg, &wrong);
    if (wrong > 0)
        rc = GW_BENCH_EXIT_FAIL;
    if (json.f && gw_bench_coll_write_json(&json, &b, rc == 0) != 0)
        rc = GW_BENCH_EXIT_FAIL;
    free(b.res);
    free(b.tmax);
    free(b.times);
    free(b.r.recv);
    free(b.r.send);
    free(b.r.counts);
    free(b.r.displs);
    free(b.handles);
    gw_bench_place_free(&b.place);
    gw_comm_destroy(b.r.comm);
    return rc;
}
