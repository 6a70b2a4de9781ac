/*
 * hostlist.h - Slurm's host list expressions ("n[01-04,07],gpu[1-2]-ib[0-1]")
 * expanded into host names, in the order and spelling of `scontrol show
 * hostnames` (hostlist.c explains the rules). For the launchers' node lists
 * (SLURM_JOB_NODELIST, SLURM_STEP_NODELIST) and `gradwire hostlist`.
 */
#ifndef GW_COMMON_HOSTLIST_H
#define GW_COMMON_HOSTLIST_H

#include <stddef.h>

#include "gradwire.h"

/* The most hosts one bracket range may give (Slurm's own limit), and the
 * most one expression may give in all: four such ranges, beyond any
 * cluster Slurm runs (its largest have tens of thousands of nodes), and
 * expanded in well under a second. */
#define GW_HOSTLIST_RANGE_MAX 65536
#define GW_HOSTLIST_HOSTS_MAX (1 << 18)
/* The longest host name, as a host name may be (HOST_NAME_MAX is 64). */
#define GW_HOSTLIST_NAME_MAX 255

/* The expanded names: names[0..count), NUL-terminated strings that all
 * live in storage (freed with the list). */
typedef struct gw_hostlist {
    char **names;
    size_t count;
    char *storage;
} gw_hostlist_t;

/* Expand expr into *out (zeroed first). GW_OK; GW_ERR_INVALID_ARG with
 * what is wrong and where in err[0..cap) (an unterminated or empty
 * bracket, a range whose end is below its start, text after the last
 * bracket, a name too long, more than the limits above); GW_ERR_NO_MEMORY.
 * An empty expression, or one of separators only, gives no names. */
gw_status_t gw__hostlist_expand(const char *expr, gw_hostlist_t *out, char *err, size_t cap);

void gw__hostlist_free(gw_hostlist_t *list);

#endif
