/*
 * comm_tuning.c - the cost model's figures for a communicator, from the
 * transports its pairs of ranks use.
 *
 * Which transport carries a pair is known only after the address exchange
 * (transport/select.c plans it from every rank's composite address), so
 * creation reads GW_TUNING_FILE early (a bad file fails this rank before it
 * joins the job, as before) and sets the figures once the addresses are in:
 * the defaults of the transports the pairs use (collectives/tuning.c: the
 * worst link decides alpha and beta, the worst link inside a host
 * beta_local), then every key the file gives over them, then
 * GW_CHUNK_BYTES. Every rank computes the same figures from the same
 * addresses, so every rank's cost model picks the same algorithm: a rank
 * that looked only at its own peers (the lone rank of a host sees only
 * TCP, its neighbours shm and TCP) could pick another and deadlock.
 */
#include <stdlib.h>
#include <string.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"

gw_status_t gw__comm_tuning_file(gw_tuning_t *file, const gw_logger_t *lg)
{
    /* Only the keys the file gives (file->from_file) replace a default. */
    memset(file, 0, sizeof(*file));
    gw__tuning_rules_default(file);
    return gw__tuning_load_env(file, lg);
}

void gw__comm_tuning_apply(gw_comm_t *comm, unsigned intra, unsigned inter, const gw_tuning_t *file,
                           size_t chunk_bytes)
{
    gw_tuning_t *t = &comm->tuning;
    gw__tuning_links(t, intra, inter);
    gw__tuning_merge(t, file);
    /* GW_CHUNK_BYTES, resolved with the configuration, wins over both. */
    if (chunk_bytes)
        t->chunk_bytes = chunk_bytes;
    comm->chunk_bytes = t->chunk_bytes;
}

static unsigned link_bits(uint32_t kinds)
{
    return ((kinds & GW_SEL_BIT(GW_SEL_SHM)) ? GW_TUNING_LINK_SHM : 0) |
           ((kinds & GW_SEL_BIT(GW_SEL_TCP)) ? GW_TUNING_LINK_TCP : 0) |
           ((kinds & GW_SEL_BIT(GW_SEL_IB)) ? GW_TUNING_LINK_IB : 0);
}

gw_status_t gw__comm_tuning_from_addrs(gw_comm_t *comm, const uint8_t *all, const gw_tuning_t *file,
                                       size_t chunk_bytes)
{
    gw_select_rank_t *ranks = calloc((size_t)comm->size, sizeof(*ranks));
    if (!ranks)
        return GW_ERR_NO_MEMORY;
    for (int r = 0; r < comm->size; r++) {
        gw_select_blob_t v;
        if (gw__select_blob_decode(all + (size_t)r * GW_TRANSPORT_ADDR_MAX, &v) != GW_OK) {
            GW_ERROR(&comm->log, "init", "rank %d's address is not a gradwire address", r);
            free(ranks);
            return GW_ERR_PROTOCOL;
        }
        ranks[r].host_id = v.host_id;
        ranks[r].mode = v.mode;
        ranks[r].kinds = v.kinds;
    }
    uint32_t intra, inter;
    gw_status_t st = gw__select_links(comm->size, ranks, &intra, &inter);
    free(ranks);
    if (st != GW_OK)
        return st;
    gw__comm_tuning_apply(comm, link_bits(intra), link_bits(inter), file, chunk_bytes);
    const gw_tuning_t *t = &comm->tuning;
    GW_INFO(&comm->log, "init",
            "cost model: alpha %.3g s, beta %.3g s/B, beta_local %.3g s/B, gamma %.3g s/B "
            "(links inside a host: %s%s%s; between hosts: %s%s%s%s)",
            t->alpha, t->beta, t->beta_local, t->gamma,
            intra & GW_SEL_BIT(GW_SEL_SHM) ? "shm " : "",
            intra & GW_SEL_BIT(GW_SEL_TCP) ? "tcp " : "", intra & GW_SEL_BIT(GW_SEL_IB) ? "ib" : "",
            inter & GW_SEL_BIT(GW_SEL_TCP) ? "tcp " : "", inter & GW_SEL_BIT(GW_SEL_IB) ? "ib" : "",
            inter ? "" : "none", file->from_file ? "; GW_TUNING_FILE over them" : "");
    return GW_OK;
}
