/*
 * topo.c - hosts and the host-contiguous ring order (contract in topo.h).
 *
 * Built once per communicator from the host ids of the address exchange.
 * Quadratic in the number of hosts in the worst case (each rank looks for
 * its host among those already seen), which at thousands of ranks is still
 * milliseconds, done once.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/comm/topo.h"

void gw__topo_free(gw_topo_t *t)
{
    free(t->host_of);
    free(t->order);
    free(t->pos);
    free(t->host_first);
    memset(t, 0, sizeof(*t));
}

gw_status_t gw__topo_build(const uint64_t *host_ids, int size, gw_topo_t *out)
{
    gw_topo_t t = {.size = size};
    uint64_t *seen = malloc((size_t)size * sizeof(*seen));
    t.host_of = malloc((size_t)size * sizeof(int));
    t.order = malloc((size_t)size * sizeof(int));
    t.pos = malloc((size_t)size * sizeof(int));
    t.host_first = calloc((size_t)size + 1, sizeof(int));
    if (!seen || !t.host_of || !t.order || !t.pos || !t.host_first) {
        free(seen);
        gw__topo_free(&t);
        memset(out, 0, sizeof(*out));
        return GW_ERR_NO_MEMORY;
    }
    /* Hosts numbered in order of their lowest rank. */
    for (int r = 0; r < size; r++) {
        int h = 0;
        while (h < t.nhosts && seen[h] != host_ids[r])
            h++;
        if (h == t.nhosts)
            seen[t.nhosts++] = host_ids[r];
        t.host_of[r] = h;
        t.host_first[h + 1]++;
    }
    free(seen);
    for (int h = 0; h < t.nhosts; h++) {
        int local = t.host_first[h + 1];
        if (local > t.local_max)
            t.local_max = local;
        t.host_first[h + 1] += t.host_first[h];
    }
    /* Counting sort by host, stable: ascending ranks inside each host. */
    int *fill = malloc((size_t)t.nhosts * sizeof(int));
    if (!fill) {
        gw__topo_free(&t);
        memset(out, 0, sizeof(*out));
        return GW_ERR_NO_MEMORY;
    }
    memcpy(fill, t.host_first, (size_t)t.nhosts * sizeof(int));
    for (int r = 0; r < size; r++) {
        int p = fill[t.host_of[r]]++;
        t.order[p] = r;
        t.pos[r] = p;
    }
    free(fill);
    *out = t;
    return GW_OK;
}
