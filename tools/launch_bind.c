/*
 * launch_bind.c - `gradwire launch --bind`: which CPU each rank runs on.
 *
 * Ranks that wait for each other run best on CPUs of their own. Left to
 * the scheduler, two ranks that wake each other through a futex are often
 * placed on one CPU (wake affinity), and stay there while another CPU is
 * idle: on the 2-core build machine an 8-byte allreduce of 2 ranks over
 * shared memory took 9.7-9.9 us with both ranks pinned to CPU 0 and
 * 0.81-0.85 us pinned to CPUs 0 and 1, and unpinned runs fell into either
 * mode (0.82, 0.83, 16.5 us in three runs; bench commands in the README's
 * "Is auto the right choice?"). Open MPI's mpirun binds ranks to cores by
 * default for the same reason, so the side-by-side tables compared a
 * pinned vader with a floating gradwire.
 *
 * With `--bind auto`, when every rank runs on this machine (here, or on
 * emulated hosts, which share its CPUs) and there are no more ranks than
 * CPUs the launcher may use, rank r is bound to the r-th of those CPUs.
 * With more ranks than CPUs nothing is bound: pinning cannot give each
 * rank a CPU, and it would stop the scheduler from moving a rank off a
 * busy one. `--bind core` binds round-robin even then. The default is
 * `none`, the scheduler's placement: on an idle machine binding was better
 * at every size (2 ranks, 8 B to 2 MiB), but with another benchmark
 * running beside them bound ranks made 2 MiB allreduces slower and erratic
 * (0.77-8.1 ms in four runs, against 0.53-1.4 ms unbound), as a rank
 * pinned to a core cannot leave it to whatever else runs there. A node of
 * its own wants `--bind auto` (README, "Running jobs"). Ranks started over
 * ssh (--hostfile) are never bound here: their CPUs are another machine's.
 * The CPUs are those of the launcher's own affinity mask, so `taskset -c
 * 2,3 gradwire launch ...` confines the job to CPUs 2 and 3.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "launch.h"

int gw_launch_bind_parse(const char *v, int *mode)
{
    if (strcmp(v, "auto") == 0)
        *mode = GW_LAUNCH_BIND_AUTO;
    else if (strcmp(v, "core") == 0)
        *mode = GW_LAUNCH_BIND_CORE;
    else if (strcmp(v, "none") == 0)
        *mode = GW_LAUNCH_BIND_NONE;
    else
        return -1;
    return 0;
}

int gw_launch_bind_plan(const struct gw_launch_opts *o, int *cpus, int cap)
{
    if (o->bind == GW_LAUNCH_BIND_NONE || o->hostfile)
        return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return 0;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < cap; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    if (o->bind == GW_LAUNCH_BIND_AUTO && o->nranks > n)
        return 0;
    return n;
}

void gw_launch_bind_rank(const int *cpus, int ncpus, int r)
{
    if (ncpus <= 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus[r % ncpus], &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        dprintf(2, "gradwire launch: rank %d: cannot bind to CPU %d: %m (running unbound)\n", r,
                cpus[r % ncpus]);
}
