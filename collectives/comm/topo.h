/*
 * topo.h - which ranks share a host, and the order in which rings visit
 * the ranks (topo.c).
 *
 * Every rank publishes a 64-bit host id in its transport address (the
 * selection's composite blob, transport/select.h), so after the bootstrap's
 * all-gather each rank knows every rank's host without another round trip,
 * and all ranks compute the same topology from the same ids. Hosts are
 * numbered by their lowest rank; the ring order lists host 0's ranks in
 * ascending order, then host 1's, and so on, so that a ring crosses each
 * host boundary once whatever the launcher's placement (`gradwire launch
 * --hosts` puts rank r on host r mod H: in rank order every ring edge would
 * cross the network).
 */
#ifndef GW_COLLECTIVES_COMM_TOPO_H
#define GW_COLLECTIVES_COMM_TOPO_H

#include <stdint.h>

#include "gradwire.h"

typedef struct gw_topo {
    int size;
    int nhosts;
    int local_max;   /* most ranks on one host */
    int *host_of;    /* rank -> host (0 .. nhosts-1, numbered by lowest rank) */
    int *order;      /* ring position -> rank: hosts contiguous */
    int *pos;        /* rank -> ring position (inverse of order) */
    int *host_first; /* nhosts + 1 entries: host h holds order[host_first[h] ..
                        host_first[h + 1]) */
} gw_topo_t;

/* The topology of size ranks whose host ids are host_ids[0 .. size). On
 * GW_ERR_NO_MEMORY *out is left empty (gw__topo_free is still safe). */
gw_status_t gw__topo_build(const uint64_t *host_ids, int size, gw_topo_t *out);
void gw__topo_free(gw_topo_t *t);

/* Ranks on host h, and the first of them. */
static inline int gw__topo_host_size(const gw_topo_t *t, int h)
{
    return t->host_first[h + 1] - t->host_first[h];
}
static inline const int *gw__topo_host_ranks(const gw_topo_t *t, int h)
{
    return t->order + t->host_first[h];
}

#endif
