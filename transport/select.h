/*
 * select.h - which transport carries each pair of ranks, and the "mux"
 * transport that routes every peer to its own sub-transport.
 *
 * GW_TRANSPORT says what may be used: "auto" (the default) takes shared
 * memory to ranks on this host and the network transport to the others:
 * RDMA verbs ("ib") between hosts that both have an active RDMA port, else
 * TCP (one INFO line says why RDMA is not used here), so a cluster where
 * only some hosts have RDMA works, RDMA where both ends have it; "tcp", "shm" or "ib" force one
 * transport for every peer ("shm" with a peer on another host is a
 * configuration error naming that peer; "ib" without a usable RDMA port is
 * an error saying why). Every rank opens the transports its mode allows
 * before the bootstrap exchange (it cannot know yet where its peers are)
 * and publishes one composite address blob: its host id and each opened
 * transport's own blob. After the exchange, every rank runs the same
 * deterministic plan over all blobs, so the two ranks of a pair always
 * agree on the transport between them; transports that carry no peer are
 * closed again. When one transport carries every peer, gw__select_unwrap()
 * hands it out directly, so a single-transport job pays nothing for the
 * routing layer.
 *
 *   select.c  modes, candidates, the plan, the composite blob
 *   mux.c     the mux transport: opening, connecting, routing, progress
 */
#ifndef GW_TRANSPORT_SELECT_H
#define GW_TRANSPORT_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "common/log.h"
#include "gradwire.h"
#include "transport/transport.h"

/* What GW_TRANSPORT asks for. The values travel in address blobs. */
typedef enum gw_select_mode {
    GW_SELECT_AUTO = 1,
    GW_SELECT_TCP = 2,
    GW_SELECT_SHM = 3,
    GW_SELECT_IB = 4,
} gw_select_mode_t;

/* Transports the plan chooses from; the values travel in address blobs.
 * GW_SEL_IB is the verbs transport (transport/ib/). */
typedef enum gw_select_kind {
    GW_SEL_NONE = 0,
    GW_SEL_SHM = 1,
    GW_SEL_TCP = 2,
    GW_SEL_IB = 3,
} gw_select_kind_t;

#define GW_SEL_BIT(kind) (1u << (unsigned)(kind))

/* The verbs transport's ops (transport/ib/ib.c); declared here rather than
 * in transport.h because only the selection opens it by name. */
extern const gw_transport_ops_t gw__ib_transport_ops;

/* NULL, "" and "auto" are GW_SELECT_AUTO; otherwise a transport name,
 * case-insensitive. GW_ERR_CONFIG (not logged) for anything else. */
gw_status_t gw__select_mode_parse(const char *name, gw_select_mode_t *out);
/* "auto, tcp, shm, ib": the values GW_TRANSPORT accepts in this build. */
const char *gw__select_mode_list(void);
const char *gw__select_mode_name(gw_select_mode_t mode);
const char *gw__select_kind_name(gw_select_kind_t kind);

/* What GW_TRANSPORT=mode restricts the choice to (GW_SEL_NONE: auto). */
gw_select_kind_t gw__select_mode_only(gw_select_mode_t mode);

/* A transport the plan may choose; gw__select_candidates() lists them in
 * order of preference. */
typedef struct gw_select_candidate {
    gw_select_kind_t kind;
    const char *name;
    const gw_transport_ops_t *ops;
    int local_only; /* serves only ranks on this host */
} gw_select_candidate_t;

const gw_select_candidate_t *gw__select_candidates(size_t *n);

/* What the plan knows about one rank, from its address blob. */
typedef struct gw_select_rank {
    uint64_t host_id;
    gw_select_mode_t mode;
    uint32_t kinds; /* GW_SEL_BIT() of every transport it opened */
} gw_select_rank_t;

/* route[p] = the transport between `rank` and rank p (GW_SEL_NONE for
 * rank itself). Deterministic and symmetric: rank q computes the same
 * transport for the pair (q, rank). GW_ERR_CONFIG, logged naming the first
 * peer concerned, when ranks disagree on GW_TRANSPORT, when "shm" is forced
 * with a peer on another host, or when a pair has no transport in common. */
gw_status_t gw__select_plan(const gw_logger_t *lg, int rank, int size,
                            const gw_select_rank_t *ranks, gw_select_kind_t *route);

/* After a plan in auto mode: one WARN line (at most) naming the peers on
 * other hosts that `rank` reaches over a slower transport than one of the
 * two ends opened (this rank has RDMA and they do not, or the other way
 * round), so that a cluster where only some hosts have RDMA never falls
 * back silently. Pairs where neither end opened the faster transport (a
 * TCP-only cluster) are not warned about. Best effort: says nothing when
 * out of memory. */
void gw__select_warn_fallbacks(const gw_logger_t *lg, int rank, int size,
                               const gw_select_rank_t *ranks, const gw_select_kind_t *route);

/* Which transports the plan gives the pairs of ranks on one host (*intra)
 * and on two hosts (*inter), as GW_SEL_BIT()s of the kinds: the same on
 * every rank, since it is made from the same blobs (the cost model's
 * figures are chosen from it: collectives/api/comm_tuning.c). A pair with
 * no transport in common counts for nothing (the plan rejects it).
 * GW_ERR_NO_MEMORY only. */
gw_status_t gw__select_links(int size, const gw_select_rank_t *ranks, uint32_t *intra,
                             uint32_t *inter);

/* "shm to ranks 0,1,3; tcp to ranks 4-7" (transports in plan order, rank
 * runs as ranges), truncated to cap. */
void gw__select_describe(const gw_select_kind_t *route, int size, char *buf, size_t cap);

/* Composite address blob (GW_TRANSPORT_ADDR_MAX bytes, host byte order):
 *   0 u32 GW_SELECT_ADDR_MAGIC  4 u8 version  5 u8 mode  6 u8 entries  7 u8 0
 *   8 u64 host id
 *  16 entries: u8 kind, u8 0, u16 length, then that many bytes of the
 *     transport's own blob (its trailing zeros cut: blobs are zero-padded)
 *  .. zero */
#define GW_SELECT_ADDR_MAGIC 0x4757584du /* "GWXM" */
#define GW_SELECT_ADDR_VERSION 1u
#define GW_SELECT_ADDR_HOST_OFF 8
#define GW_SELECT_ADDR_HDR 16

/* A composite blob taken apart: each transport's own blob points into it. */
typedef struct gw_select_blob {
    uint64_t host_id;
    gw_select_mode_t mode;
    uint32_t kinds;                    /* GW_SEL_BIT() of every entry */
    const uint8_t *sub[GW_SEL_IB + 1]; /* each transport's blob in it */
    size_t sub_len[GW_SEL_IB + 1];
} gw_select_blob_t;

/* GW_ERR_PROTOCOL (not logged) for a blob that is not one of ours. */
gw_status_t gw__select_blob_decode(const uint8_t *b, gw_select_blob_t *v);
/* The blob of n transports (kinds[i] with its own blob blobs[i]);
 * GW_ERR_CONFIG, logged, when they do not fit. */
gw_status_t gw__select_blob_encode(const gw_logger_t *lg, gw_select_mode_t mode, uint64_t host_id,
                                   int n, const gw_select_kind_t *kinds,
                                   const uint8_t *const *blobs,
                                   uint8_t addr[GW_TRANSPORT_ADDR_MAX]);

/* Open the transports `mode` allows and fill the composite blob. *out is a
 * mux: connect() it with every rank's composite blob, then call
 * gw__select_unwrap(). Errors: what a transport's open() returned (logged
 * there), GW_ERR_CONFIG when the blobs do not fit GW_TRANSPORT_ADDR_MAX. */
gw_status_t gw__select_open(const gw_transport_params_t *params, gw_select_mode_t mode,
                            gw_transport_t **out, uint8_t addr[GW_TRANSPORT_ADDR_MAX]);

/* After a successful connect(): the one transport that carries every peer,
 * with the mux freed, or the mux itself (named "shm+tcp" etc.) when several
 * do. Returns t for anything that is not a connected mux. */
gw_transport_t *gw__select_unwrap(gw_transport_t *t);

#endif
