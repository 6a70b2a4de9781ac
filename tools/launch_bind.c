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
 * With `--bind auto`, the default, when every rank runs on this machine
 * (here, or on emulated hosts, which share its CPUs) and there are no more
 * ranks than cores the launcher may use, rank r is bound to the r-th of
 * those cores: to the first CPU of it that the launcher's affinity mask
 * holds, so that with SMT two ranks never share a core's hyperthreads
 * while another core is idle (the kernel's thread_siblings_list says
 * which CPUs are one core). With more ranks than cores nothing is bound,
 * and the launcher says so on stderr: pinning cannot give each rank a core,
 * and it would stop the scheduler from moving a rank off a busy one.
 * `--bind core` binds round-robin over the cores even then; `--bind none`
 * leaves placement to the scheduler. Binding is the default as it is
 * mpirun's: on an idle machine it was better at every size (2 ranks, 8 B
 * to 2 MiB). The price is under a load the job does not own: a bound rank
 * cannot leave its core to whatever else runs there (with another
 * benchmark beside them, bound 2 MiB allreduces took 0.77-8.1 ms in four
 * runs against 0.53-1.4 ms unbound), so a shared node wants `--bind none`
 * (docs/guide/running-jobs.md has the measurements). Ranks started over
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

/* The first CPU of c's core (c itself when sysfs does not say). */
static int core_of(int c)
{
    char path[96], line[64];
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
    FILE *f = fopen(path, "r");
    int first = c;
    if (f) {
        if (fgets(line, sizeof(line), f) && sscanf(line, "%d", &first) != 1)
            first = c;
        fclose(f);
    }
    return first;
}

int gw_launch_bind_plan(const struct gw_launch_opts *o, int *cpus, int cap)
{
    if (o->bind == GW_LAUNCH_BIND_NONE || o->hostfile)
        return 0;
    cpu_set_t set, cores;
    CPU_ZERO(&set);
    CPU_ZERO(&cores);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
        fprintf(stderr, "gradwire launch: note: cannot read this process's CPUs (%m): the ranks "
                        "run unbound\n");
        return 0;
    }
    /* One CPU per core: the first of each core that the mask holds. */
    int n = 0, ncpus = 0;
    for (int c = 0; c < CPU_SETSIZE && n < cap; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        ncpus++;
        int core = core_of(c);
        if (core < 0 || core >= CPU_SETSIZE)
            core = c;
        if (CPU_ISSET(core, &cores) && core != c)
            continue;
        CPU_SET(core, &cores);
        cpus[n++] = c;
    }
    if (o->bind == GW_LAUNCH_BIND_AUTO && o->nranks > n) {
        fprintf(stderr,
                "gradwire launch: note: %d ranks and %d core%s (%d CPU%s) to run on: the ranks "
                "run unbound, as binding cannot give each its own core (--bind core binds them "
                "round robin anyway; --bind none runs them unbound without this note)\n",
                o->nranks, n, n == 1 ? "" : "s", ncpus, ncpus == 1 ? "" : "s");
        return 0;
    }
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
