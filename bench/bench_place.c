/*
 * bench_place.c - where a benchmark's ranks run, as nccl-tests prints it at
 * the start ("#  Rank  0 Pid 1234 on host vm cpus 0"), and whether the
 * ranks outnumber the CPUs of a host.
 *
 * A figure measured with more ranks than CPUs on a host is the scheduler's,
 * not the transport's: a rank that waits for its peer in a spin gives up
 * its CPU only at the end of its time slice, so a small allreduce takes
 * milliseconds instead of microseconds. nccl-tests and mpirun assume a
 * core per rank (mpirun refuses more ranks than slots without
 * --oversubscribe); gradwire-bench runs anyway, as a loaded or small
 * machine is where it is often tried, and says so: a WARNING line in the
 * table, and "oversubscribed" in the JSON run header. A host is a host
 * name, and its CPUs are those its ranks may run on, the union of their
 * affinity masks (a job confined by taskset or a cgroup to 2 CPUs of a
 * 64-CPU node has 2): ranks on emulated hosts share this machine's host
 * name and its CPUs, which is what they really share.
 *
 * Every rank contributes one fixed-size record to a gw_gather to rank 0 (a
 * rank's host name, pid, the CPUs its affinity mask allows, as the kernel
 * lists them and as a mask, and the host's online CPUs); rank 0 keeps them
 * for the table and the report, the others nothing.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* This process's Cpus_allowed_list, as /proc/self/status gives it. */
static void cpus_allowed(char *out, size_t cap)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    snprintf(out, cap, "?");
    while (f && fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Cpus_allowed_list:", 18) != 0)
            continue;
        const char *v = line + 18 + strspn(line + 18, " \t");
        snprintf(out, cap, "%.*s", (int)strcspn(v, "\r\n"), v);
        break;
    }
    if (f)
        fclose(f);
}

int gw_bench_place_alloc(gw_bench_hosts_t *pl, int rank, int size)
{
    memset(pl, 0, sizeof(*pl));
    if (rank != 0)
        return 0;
    pl->ranks = calloc((size_t)size, sizeof(*pl->ranks));
    if (pl->ranks)
        return 0;
    fprintf(stderr, "gradwire-bench: out of memory for %d ranks' placement\n", size);
    return -1;
}

gw_status_t gw_bench_place_gather(gw_comm_t *comm, gw_bench_hosts_t *pl)
{
    int size = gw_comm_size(comm);
    gw_bench_rank_place_t me;
    memset(&me, 0, sizeof(me));
    if (gethostname(me.host, sizeof(me.host) - 1) != 0)
        snprintf(me.host, sizeof(me.host), "unknown");
    me.pid = (int32_t)getpid();
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    me.online = online > 0 ? (int32_t)online : 1;
    cpus_allowed(me.cpus, sizeof(me.cpus));
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < GW_BENCH_PLACE_CPUS && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                me.mask[c / 64] |= (uint64_t)1 << (c % 64);
    /* Only rank 0 prints and writes the report: the records go to it, into
     * what gw_bench_place_alloc gave it before the ranks agreed that their
     * setup succeeded (so no rank waits here for one that gave up). */
    int rank = gw_comm_rank(comm);
    gw_status_t st =
        gw_gather(comm, &me, rank == 0 ? (void *)pl->ranks : NULL, sizeof(me), GW_UINT8, 0);
    if (st != GW_OK || rank != 0)
        return st;
    pl->n = size;
    pl->worst_cpus_or_1 = 1;
    /* A host's ranks against the CPUs they may run on together; the worst
     * host is the one named. */
    for (int i = 0; i < size; i++) {
        int on = 0, first = 1, cpus = 0;
        uint64_t all[GW_BENCH_PLACE_CPUS / 64] = {0};
        for (int k = 0; k < size; k++)
            if (strcmp(pl->ranks[k].host, pl->ranks[i].host) == 0) {
                on++;
                first &= k >= i;
                for (int w = 0; w < GW_BENCH_PLACE_CPUS / 64; w++)
                    all[w] |= pl->ranks[k].mask[w];
            }
        for (int w = 0; w < GW_BENCH_PLACE_CPUS / 64; w++)
            cpus += __builtin_popcountll(all[w]);
        if (cpus == 0)
            cpus = pl->ranks[i].online;
        pl->ranks[i].host_cpus = cpus;
        if (first && on > cpus &&
            (double)on / cpus > (double)pl->worst_ranks / pl->worst_cpus_or_1) {
            pl->oversubscribed = 1;
            pl->worst = i;
            pl->worst_ranks = on;
            pl->worst_cpus_or_1 = cpus;
        }
    }
    return GW_OK;
}

void gw_bench_place_print(const gw_bench_hosts_t *pl, FILE *out)
{
    for (int i = 0; i < pl->n; i++)
        fprintf(out, "#  Rank %2d Pid %7d on %10s cpus %s\n", i, (int)pl->ranks[i].pid,
                pl->ranks[i].host, pl->ranks[i].cpus);
    if (pl->oversubscribed)
        fprintf(out,
                "# WARNING: %d ranks on host %s, which gives them %d CPU%s: oversubscribed, ranks "
                "wait for a CPU and the times are the scheduler's (nccl-tests and mpirun assume "
                "a core per rank)\n",
                pl->worst_ranks, pl->ranks[pl->worst].host, pl->worst_cpus_or_1,
                pl->worst_cpus_or_1 == 1 ? "" : "s");
}

void gw_bench_place_json(gw_kit_json_t *j, const gw_bench_hosts_t *pl)
{
    if (!pl || pl->n == 0) {
        gw_kit_json_null(j, "placement");
        gw_kit_json_null(j, "oversubscribed");
        return;
    }
    gw_kit_json_array(j, "placement", NULL);
    for (int i = 0; i < pl->n; i++) {
        gw_kit_json_object(j, NULL, NULL);
        gw_kit_json_int(j, "rank", i);
        gw_kit_json_str(j, "host", pl->ranks[i].host);
        gw_kit_json_int(j, "pid", pl->ranks[i].pid);
        gw_kit_json_str(j, "cpus", pl->ranks[i].cpus);
        gw_kit_json_int(j, "host_cpus", pl->ranks[i].host_cpus);
        gw_kit_json_close(j, NULL);
    }
    gw_kit_json_close(j, NULL);
    gw_kit_json_bool(j, "oversubscribed", pl->oversubscribed);
}

void gw_bench_place_free(gw_bench_hosts_t *pl)
{
    free(pl->ranks);
    memset(pl, 0, sizeof(*pl));
}
