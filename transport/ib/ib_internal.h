/*
 * ib_internal.h - state shared by the files of the InfiniBand verbs (RDMA)
 * transport.
 *
 *   ib.c          narrative, open, queueing a request, connect, abort, close,
 *                 the ops tables
 *   ib_api.c      libibverbs and librdmacm opened at run time (dlopen)
 *   ib_device.c   enumeration of devices and ports, the choice, the GID
 *   ib_hca.c      GW_IB_HCA parsing and the choice of device and port
 *   ib_gid.c      the choice of the RoCE GID index from sysfs
 *   ib_config.c   the GW_IB_* variables
 *   ib_wire.c     (ib_wire.h) byte layouts: address blob, CTS entries, immediates,
 *                 out-of-band hellos, rdmacm private data
 *   ib_mr_cache.c (ib_mr_cache.h) the registration cache
 *   ib_mr_caches.c  every registration cache of the process, which tell each
 *                 other of memory mapped anew
 *   ib_qp.c       queue pairs: creation, state changes, receive posting
 *   ib_oob.c      connect() with an out-of-band exchange over TCP
 *   ib_oob_knock.c  knocks over TCP (connecting on first use)
 *   ib_cm.c       the set-up through librdmacm: listening, dialling, events
 *                 (ib_cm.h: shared with ib_cm_connect.c, ib_cm_cand.c and
 *                 ib_cm_knock.c)
 *   ib_cm_connect.c  connect() through librdmacm, and its set-up on first use
 *   ib_cm_cand.c  incoming rdmacm connections until they prove the job's key
 *   ib_cm_knock.c knocks through librdmacm (connecting on first use)
 *   ib_res.c      PD, CQ (and its growth), the pairs' blocks, the registration
 *                 cache's backend
 *   ib_lazy.c     pairs connected on first use: which, when, and knocks
 *   ib_post.c     posting: CTS entries, eager messages, payload parts
 *   ib_progress.c completions, waiting, progress()
 *   ib_fail.c     the base's hooks, completion errors, async events,
 *                 peers that are gone
 *
 * What every transport does alike (request checks, queues, the sticky
 * failure logged once) is the base's: transport/base.h.
 *
 * See the comment at the top of ib.c for how data moves and why.
 */
#ifndef GW_TRANSPORT_IB_INTERNAL_H
#define GW_TRANSPORT_IB_INTERNAL_H

#include <infiniband/verbs.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/base.h"
#include "transport/ib/ib_mr_cache.h"
#include "transport/ib/ib_wire.h"
#include "transport/sock.h"

#define GW_IB_SUBSYS "ib"

#define GW_IB_MIN_PART ((size_t)128 * 1024)  /* smallest stripe of a message */
#define GW_IB_MAX_WR_BYTES ((size_t)1 << 30) /* largest single RDMA write we post */
#define GW_IB_INLINE 256 /* max_inline_data we ask for first (then 64, then none) */
#define GW_IB_WQ_DEPTH (2 * GW_IB_FIFO_DEPTH + 16) /* send and receive WRs per QP */
#define GW_IB_POLL_BATCH 32
#define GW_IB_SHUTDOWN_MS 500   /* budget of abort() and close() */
#define GW_IB_ASYNC_GRACE_MS 50 /* a failed completion waits this long for its async event */
/* How long a receive of an eager-sized message waits for its message before
 * it sends its CTS anyway (GW_IB_CTS_DEFER_US; see defer_cts in ib_post.c). */
#define GW_IB_CTS_DEFER_US 200
#define GW_IB_DEFAULT_TIMEOUT_MS 30000
/* Incoming rdmacm connections held while they prove the key (ib_cm.c), and
 * the receives each one's QP gets before it is proven: the CQ has room for
 * their completions too. */
#define GW_IB_CM_CANDS 32
#define GW_IB_CM_CAND_RECVS 8
#define GW_IB_CM_RETIRED 256 /* QP numbers of dropped candidates remembered */

/* ---- the verbs and rdmacm functions, resolved with dlsym ---------------- */

struct _compat_ibv_port_attr;

typedef struct gw_ib_api {
    void *verbs_lib;
    void *rdmacm_lib; /* NULL when librdmacm could not be opened */
    char rdmacm_why[160];
    /* libibverbs */
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
    int (*query_port_compat)(struct ibv_context *ctx, uint8_t port,
                             struct _compat_ibv_port_attr *attr);
    int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    /* Optional (rdma-core v34 and later; NULL without it): GPUDirect RDMA
     * registration of device memory (ib_dmabuf.c). */
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                    int fd, int access);
    struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *ctx);
    int (*destroy_comp_channel)(struct ibv_comp_channel *ch);
    struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *cq_ctx,
                                struct ibv_comp_channel *ch, int vector);
    int (*destroy_cq)(struct ibv_cq *cq);
    int (*resize_cq)(struct ibv_cq *cq, int cqe);
    int (*get_cq_event)(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_ctx);
    void (*ack_cq_events)(struct ibv_cq *cq, unsigned int n);
    struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
    int (*destroy_qp)(struct ibv_qp *qp);
    int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
    void (*ack_async_event)(struct ibv_async_event *ev);
    const char *(*wc_status_str)(enum ibv_wc_status st);
    const char *(*event_type_str)(enum ibv_event_type ev);
    /* librdmacm */
    struct rdma_event_channel *(*create_event_channel)(void);
    void (*destroy_event_channel)(struct rdma_event_channel *ch);
    int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id, void *ctx,
                     enum rdma_port_space ps);
    int (*destroy_id)(struct rdma_cm_id *id);
    int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
    int (*listen)(struct rdma_cm_id *id, int backlog);
    int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                        int timeout_ms);
    int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
    int (*cm_create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
    void (*cm_destroy_qp)(struct rdma_cm_id *id);
    int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *param);
    int (*reject)(struct rdma_cm_id *id, const void *pdata, uint8_t len);
    int (*disconnect)(struct rdma_cm_id *id);
    int (*get_cm_event)(struct rdma_event_channel *ch, struct rdma_cm_event **ev);
    int (*ack_cm_event)(struct rdma_cm_event *ev);
    const char *(*event_str)(enum rdma_cm_event_type ev);
    int (*set_option)(struct rdma_cm_id *id, int level, int name, void *val, size_t len);
    uint16_t (*get_src_port)(struct rdma_cm_id *id); /* network byte order */
} gw_ib_api_t;

/* Open libibverbs (verbs_soname) and, when rdmacm_soname is not NULL,
 * librdmacm, and resolve every function above. GW_ERR_UNSUPPORTED with the
 * reason in why when libibverbs or one of its functions is missing; a
 * missing librdmacm only leaves api->rdmacm_lib NULL (reason in
 * api->rdmacm_why). Nothing is logged. */
gw_status_t gw__ib_api_open(gw_ib_api_t *api, const char *verbs_soname, const char *rdmacm_soname,
                            char *why, size_t why_cap);
void gw__ib_api_close(gw_ib_api_t *api);
/* Port attributes through the provider when it has the modern entry point,
 * as verbs.h's inline ibv_query_port does. */
int gw__ib_query_port(const gw_ib_api_t *api, struct ibv_context *ctx, uint8_t port,
                      struct ibv_port_attr *attr);

/* ---- configuration (ib_config.c) ---------------------------------------- */

typedef enum gw_ib_cm_mode { GW_IB_CM_RDMACM = 1, GW_IB_CM_OOB = 2 } gw_ib_cm_mode_t;

typedef struct gw_ib_config {
    const char *hca;    /* GW_IB_HCA, or NULL */
    int gid_index;      /* GW_IB_GID_INDEX, or -1: automatic */
    int qps;            /* GW_IB_QPS, 1..GW_IB_MAX_QPS */
    int cm_mode;        /* GW_IB_CM; 0: rdmacm when it can be used, else oob */
    int timeout;        /* GW_IB_TIMEOUT: local ACK timeout exponent, 1..31 */
    int retry_cnt;      /* GW_IB_RETRY_CNT, 0..7 */
    int sl;             /* GW_IB_SL, 0..15 */
    int tc;             /* GW_IB_TC, 0..255 */
    int reg_cache;      /* GW_IB_REG_CACHE: 0 disables caching registrations */
    long reg_cache_max; /* GW_IB_REG_CACHE_MAX: entries kept */
    int spin_us;        /* GW_IB_SPIN_US: busy polling before sleeping */
    int eager_max;      /* GW_IB_EAGER: largest message sent eagerly, 0..4096 */
    int cts_defer_us;   /* GW_IB_CTS_DEFER_US: a small receive's CTS waits this long */
    const char *sysfs;  /* GW_IB_SYSFS (tests), default /sys */
    int test_qp_error;  /* GW_IB_TEST_QP_ERROR (tests): messages before a QP fails; 0: never */
    int test_reject;    /* GW_IB_TEST_REJECT (tests): connection requests still to reject */
    int rails;          /* GW_IB_RAILS: ports to use, 0: automatic (ib_hca.c) */
} gw_ib_config_t;

/* Read the GW_IB_* variables; GW_ERR_CONFIG (logged, naming the variable)
 * for a malformed one. */
gw_status_t gw__ib_config_read(const gw_logger_t *lg, gw_ib_config_t *cfg);

/* ---- device and port choice (ib_hca.c) ---------------------------------- */

#define GW_IB_HCA_MAX_ENTRIES 32

typedef struct gw_ib_hca_entry {
    char name[64];
    int port; /* -1: any port */
} gw_ib_hca_entry_t;

/* GW_IB_HCA, NCCL style: a comma-separated list of DEVICE[:PORT]; a leading
 * '^' makes it a list to exclude, a leading '=' requires exact names
 * (otherwise an entry matches every device whose name starts with it). */
typedef struct gw_ib_hca_filter {
    int exclude;
    int exact;
    int n;
    gw_ib_hca_entry_t entries[GW_IB_HCA_MAX_ENTRIES];
} gw_ib_hca_filter_t;

/* Parse spec (NULL or "" give an empty filter that accepts everything).
 * GW_ERR_CONFIG with the reason in why for malformed specs. */
gw_status_t gw__ib_hca_parse(const char *spec, gw_ib_hca_filter_t *f, char *why, size_t why_cap);
/* Index of the first entry that matches (device, port), or -1; for an
 * exclude filter, -1 means "not excluded". */
int gw__ib_hca_match(const gw_ib_hca_filter_t *f, const char *device, int port);

/* One port as the enumeration saw it. */
typedef struct gw_ib_port_info {
    char device[64];
    int port;
    int active;     /* state == IBV_PORT_ACTIVE */
    int link_layer; /* IBV_LINK_LAYER_INFINIBAND or _ETHERNET */
    const char *state_str;
} gw_ib_port_info_t;

/* The port to use among ports[0..n): in the filter's order for an include
 * list, else the first active port not excluded. Returns its index, or -1
 * with the reason in why (no ports, none active, none matching). */
int gw__ib_choose_port(const gw_ib_hca_filter_t *f, const gw_ib_port_info_t *ports, int n,
                       char *why, size_t why_cap);
/* The ports of the rails (ib_rails.c): want of them (GW_IB_RAILS), or, for
 * want 0, every active port an include list admits and else the first
 * active port; at most cap, their indices in idx, the first the one
 * gw__ib_choose_port takes. Returns how many, or -1 with the reason in why
 * (none active, or fewer than want). */
int gw__ib_choose_rails(const gw_ib_hca_filter_t *f, const gw_ib_port_info_t *ports, int n,
                        int want, int *idx, int cap, char *why, size_t why_cap);

/* ---- GID choice (ib_gid.c) ---------------------------------------------- */

/* The GID index to use on a RoCE port, from
 * <sysfs>/class/infiniband/<dev>/ports/<port>/{gids,gid_attrs/types}: the
 * first RoCE v2 GID that is an IPv4-mapped address, else the first RoCE v2
 * global IPv6 GID, else the same for RoCE v1; zero and link-local GIDs only
 * as a last resort. desc (may be NULL) receives "index 1 (RoCE v2,
 * ::ffff:198.18.0.1)". GW_ERR_NOT_FOUND with the reason in desc when the
 * port has no usable GID. */
gw_status_t gw__ib_gid_pick(const char *sysfs, const char *device, int port, int *index, char *desc,
                            size_t desc_cap);
/* Checks a GID index the user gave (GW_IB_GID_INDEX) against the port's
 * table (table_len entries; roce: the port is Ethernet, so the entry must
 * be RoCE v1 or v2): GW_OK with "GID index 3 (RoCE v2, ::ffff:1.2.3.4,
 * from GW_IB_GID_INDEX)" in desc, or GW_ERR_CONFIG when it is out of
 * range, unused (zero) or of another type, with desc naming the device,
 * port, index and the usable indices. Without sysfs only the range is
 * checked. */
gw_status_t gw__ib_gid_check(const char *sysfs, const char *device, int port, int index, int roce,
                             int table_len, char *desc, size_t desc_cap);
/* Parse a sysfs GID text ("fe80:0000:...:0001") into 16 bytes. */
int gw__ib_gid_parse(const char *text, uint8_t gid[16]);
/* "::ffff:1.2.3.4" or the full IPv6 form, for messages. */
void gw__ib_gid_str(const uint8_t gid[16], char *buf, size_t cap);

/* ---- the transport ------------------------------------------------------ */

/* How the transport uses gw_request_t.priv. */
#define GW_IB_REQ_IDX(r) ((r)->priv[0]) /* 1, 2, ... in posting order per peer */
#define GW_IB_REQ_NPARTS(r) ((r)->priv[1])
#define GW_IB_REQ_PARTS_DONE(r) ((r)->priv[2]) /* parts completed */
#define GW_IB_REQ_MR(r) ((r)->priv[3])         /* gw_ib_mr_entry_t *, or 0 */
#define GW_IB_REQ_STARTED(r) ((r)->priv[4])    /* recv: 1 + number of its CTS; send: CTS matched */
/* GW_IB_REQ_STARTED of a send that went eagerly and waits for its receipt. */
#define GW_IB_SEND_EAGER_WAIT 2u
/* ... of a send whose announcement went (GW_REQ_ANNOUNCE) and that waits
 * for its CTS. */
#define GW_IB_SEND_ANNOUNCED 3u
#define GW_IB_REQ_POSTED(r) ((r)->priv[5]) /* send: parts posted */
#define GW_IB_REQ_DEFER(r) ((r)->priv[5])  /* recv: its CTS waits until then (ns), 0: unset */
#define GW_IB_REQ_RADDR(r) ((r)->priv[6])  /* send: where the receiver wants it */
#define GW_IB_REQ_RKEY(r) ((r)->priv[7])

/* wr_id of work requests that are not data parts (those carry the request
 * pointer, which is never this small). */
#define GW_IB_WR_CTS 1u
#define GW_IB_WR_CTRL 2u
#define GW_IB_WR_RECV 3u
#define GW_IB_WR_EAGER 4u
#define GW_IB_WR_PROOF_SEND 5u /* rdmacm: the dialler's proof (ib_cm.c) */
#define GW_IB_WR_PROOF_RECV 6u /* rdmacm: the receive that takes it */

typedef struct gw_ib_peer {
    int rank;
    int active; /* this transport carries it (its address blob is not all zero) */
    /* The pair's block (GW_IB_PAIR_BLOCK): ours, and where the peer's is. */
    uint8_t *blk;
    uint32_t blk_lkey;
    struct ibv_mr *blk_mr; /* its own registration (lazily), or NULL (part of fifo_mr) */
    uint64_t rblk;         /* the peer's block for us, from the set-up; 0 before */
    uint32_t rblk_rkey;
    char desc[112]; /* "rank 3 (198.18.0.1:4791, rxe0)", for messages */
    gw_ib_addr_t addr;
    struct ibv_qp *qp[GW_IB_MAX_QPS];
    struct rdma_cm_id *cm_id[GW_IB_MAX_QPS]; /* rdmacm mode */
    int sq_used[GW_IB_MAX_QPS];              /* send WRs posted and not completed */
    int qp_up;                               /* QPs connected */
    int oob_fd;                              /* OOB mode: kept to notice the peer's death */
    /* Send side. */
    gw_request_t *sq_head, *sq_tail;   /* posted, not complete */
    uint64_t s_next;                   /* index of the last send posted */
    gw_ib_cts_t cts[GW_IB_FIFO_DEPTH]; /* CTS received, by idx % depth */
    uint8_t cts_have[GW_IB_FIFO_DEPTH];
    uint64_t s_cts_next;                  /* lowest index the next CTS entry may carry */
    uint64_t s_cts_seen;                  /* CTS entries taken out of the FIFO */
    uint64_t eager_sent;                  /* eager messages sent */
    uint64_t eager_freed;                 /* ... that it took out of its slots */
    uint64_t eager_idx[GW_IB_FIFO_DEPTH]; /* message sent eagerly, by idx % depth */
    /* Receive side, eager: messages that landed in our slots, in order. */
    uint64_t r_eager_in;       /* eager messages arrived */
    uint64_t r_eager_freed;    /* ... taken out (sent back in CTS entries) */
    uint64_t r_eager_reported; /* ... as last told (CTS entry, eager header) */
    /* Receipts: the highest index of an eager message asking for one that
     * we accepted, and the highest one a RECEIPT immediate carried. */
    uint64_t rc_due, rc_sent;
    int eager_limit; /* largest eager message between us: the smaller GW_IB_EAGER of both */
    gw_ib_eager_hdr_t r_eager[GW_IB_EAGER_SLOTS]; /* headers of those not taken out */
    /* Receive side. */
    gw_request_t *rq_head, *rq_tail;
    uint64_t r_next;      /* index of the last receive posted */
    uint64_t r_cts_next;  /* index of the next receive whose CTS is to be sent */
    uint64_t r_cts_sent;  /* CTS entries sent: entry n goes to slot n % depth */
    uint64_t r_cts_acked; /* ... that the sender has taken out (slots free again) */
    int goodbye;          /* it closed its communicator */
    int gone;             /* its connection broke (after a goodbye: fine) */
    /* Its ABORT_FROM immediate, for the ABORT that follows it: -1 when none
     * came (or it named no rank). */
    int abort_origin, abort_culprit;
    /* Connection on first use (ib_lazy.c). */
    int wanted;                  /* a request for it was posted, or it dialled us */
    int64_t dial_deadline;       /* we dial it: the pair fails if not up by then */
    int64_t knock_at;            /* we wait for its dial: when to knock again */
    int knock_gap;               /* ms between knocks, doubling */
    int knocks;                  /* knocks delivered */
    struct rdma_cm_id *knock_id; /* rdmacm: a knock under way */
    int knock_fd;                /* out of band: a knock's connection under way, or -1 */
    uint64_t knock_sent;         /* our last knock's counter (sock.h) */
    uint64_t knock_seen;         /* its last knock's counter that we acted on */
    int dial_for_knock;          /* we dial it because it knocked, not for a request of
                                  * ours: failing to, while we have none, fails nothing */
    int cq_counted;              /* the CQ has room for its QPs' completions */
} gw_ib_peer_t;

/* A pair's block, in each rank's memory: the CTS FIFO the peer writes its
 * entries into, our staging of the entries we write into its FIFO, the
 * eager slots it writes into, and our staging of those we write into its
 * slots. Each side tells the other where its block is when the pair is set
 * up (ib_oob.c, ib_cm.c); the offsets inside are the same on both. */
#define GW_IB_CTS_BLOCK (GW_IB_FIFO_DEPTH * GW_IB_CTS_SIZE)
#define GW_IB_EAGER_BLOCK (GW_IB_EAGER_SLOTS * GW_IB_EAGER_SLOT)
#define GW_IB_BLK_EAGER (2 * GW_IB_CTS_BLOCK) /* offset of the eager slots */
#define GW_IB_PAIR_BLOCK (2 * GW_IB_CTS_BLOCK + 2 * GW_IB_EAGER_BLOCK)

/* Where a completion's QP number leads. */
typedef struct gw_ib_qpn_map {
    uint32_t qpn;
    int peer, qp;
} gw_ib_qpn_map_t;

typedef struct gw_ib {
    gw_transport_t base; /* first: gw__transport_open_base() allocates through it */
    gw_ib_api_t api;
    gw_ib_config_t cfg;
    int forced; /* GW_TRANSPORT=ib asked for this transport (params->forced) */
    int lazy;   /* pairs connect on first use (params->lazy; ib_lazy.c) */
    int nqps;
    int timeout_ms;
    uint8_t job_id[16];
    uint8_t data_key[32]; /* what every connection proves (transport.h) */
    /* Device. */
    struct ibv_context *ctx;
    int own_ctx; /* ctx came from ibv_open_device (else librdmacm owns it) */
    int port_num;
    struct ibv_port_attr port_attr;
    int gid_index; /* -1: no GRH */
    union ibv_gid gid;
    int inline_req; /* max_inline_data the next QP asks for */
    int max_inline; /* the smallest any QP got; -1 before the first QP */
    char dev_name[64];
    /* The ports of every rail GW_IB_RAILS and GW_IB_HCA ask for, this one
     * first, as exact GW_IB_HCA entries ("=mlx5_1:1"): ib_rails.c opens an
     * instance on each of the others. */
    int nrails;
    char rail_spec[GW_IB_MAX_RAILS][72];
    struct ibv_pd *pd;
    struct ibv_comp_channel *channel;
    struct ibv_cq *cq;
    int cq_size;
    int cq_max;   /* the device's max_cqe */
    int cq_pairs; /* pairs whose QPs the CQ has room for (gw__ib_cq_room) */
    unsigned cq_events_unacked;
    int cq_armed;
    /* Connecting every pair at once: one registration holds every pair's
     * block (GW_IB_PAIR_BLOCK), block r for peer r. Lazily each pair
     * registers its own when it is set up (gw__ib_pair_block). */
    uint8_t *fifo_mem;
    size_t fifo_bytes;
    struct ibv_mr *fifo_mr;
    gw_ib_mr_cache_t mrc;
    /* Connection management. */
    gw_ib_cm_mode_t cm_mode;
    struct rdma_event_channel *cm_channel;
    struct rdma_cm_id *listen_id;
    struct gw_ib_cm_conn *cm_conns; /* rdmacm mode: one per (peer, QP) */
    int ncm_conns;
    struct gw_ib_cm_cand *cm_cands;   /* rdmacm: incoming connections not proven yet */
    gw_sock_strangers_t cm_strangers; /* rdmacm: requests and candidates dropped, logged
                                       * with a bound (transport/sock_strangers.c) */
    char cm_where[96];                /* "the RDMA CM listener ADDR", for its lines */
    uint8_t *cm_auth_mem;             /* proofs received (per candidate) and sent (per conn) */
    struct ibv_mr *cm_auth_mr;
    uint32_t cm_retired[GW_IB_CM_RETIRED]; /* QP numbers of dropped candidates */
    unsigned cm_nretired;
    int listen_fd;              /* OOB mode: TCP listener */
    struct gw_ib_oob_mesh *oob; /* OOB mode, lazily: the set-up after connect() */
    gw_ib_addr_t local;
    char local_str[64];
    gw_ib_peer_t *peers; /* size entries; ours unused */
    gw_ib_qpn_map_t *qpn_map;
    int nqpn;
    int qpn_dirty;       /* a QP came or went since the map was built (rdmacm set-up) */
    struct pollfd *pfds; /* channel, async, cm, oob sockets: for blocking waits */
    int npfds;
    unsigned progress_calls;
    int no_defer; /* about to sleep: receives send their CTS at once */
    uint64_t ncompleted;
} gw_ib_t;

static inline gw_ib_t *gw__ib_of(gw_transport_t *t) { return gw__container_of(t, gw_ib_t, base); }

/* Slot s of the FIFO that p writes into, of our staging of the entries we
 * write into p's FIFO, of the eager slots p writes into and of our staging
 * of those we write into p's; and where slot s of p's FIFO and of its
 * eager slots for us are. */
static inline uint8_t *gw__ib_fifo_slot(const gw_ib_peer_t *p, int s)
{
    return p->blk + (size_t)s * GW_IB_CTS_SIZE;
}
static inline uint8_t *gw__ib_stage_slot(const gw_ib_peer_t *p, int s)
{
    return p->blk + GW_IB_CTS_BLOCK + (size_t)s * GW_IB_CTS_SIZE;
}
static inline uint8_t *gw__ib_eager_slot(const gw_ib_peer_t *p, int s)
{
    return p->blk + GW_IB_BLK_EAGER + (size_t)s * GW_IB_EAGER_SLOT;
}
static inline uint8_t *gw__ib_eager_stage(const gw_ib_peer_t *p, int s)
{
    return gw__ib_eager_slot(p, s) + GW_IB_EAGER_BLOCK;
}
static inline uint64_t gw__ib_remote_fifo_slot(const gw_ib_peer_t *p, int s)
{
    return p->rblk + (uint64_t)s * GW_IB_CTS_SIZE;
}
static inline uint64_t gw__ib_remote_eager_slot(const gw_ib_peer_t *p, int s)
{
    return p->rblk + GW_IB_BLK_EAGER + (uint64_t)s * GW_IB_EAGER_SLOT;
}

/* p's block, made (and registered) now if the pair has none: at set-up,
 * before its address goes to the peer. */
gw_status_t gw__ib_pair_block(gw_ib_t *t, gw_ib_peer_t *p);
/* Make room in the CQ for the completions of p's QPs before they are
 * created (or, for an incoming rdmacm connection, before its receives are
 * posted in full): connecting on first use the CQ starts small and grows
 * (ibv_resize_cq, doubling) as pairs are set up. GW_ERR_CONFIG (logged)
 * when the device's max_cqe has no room for them. */
gw_status_t gw__ib_cq_room(gw_ib_t *t, gw_ib_peer_t *p);
/* The key under which the peer writes into p's block. */
static inline uint32_t gw__ib_blk_rkey(const gw_ib_t *t, const gw_ib_peer_t *p)
{
    return p->blk_mr ? p->blk_mr->rkey : t->fifo_mr->rkey;
}

extern const gw_transport_ops_t gw__ib_transport_ops;

/* One instance on one port (ib.c): the port GW_IB_HCA and GW_IB_RAILS
 * choose first (only NULL: the rails it finds are in nrails and
 * rail_spec), or exactly the port `only` names ("=mlx5_1:1"). */
gw_status_t gw__ib_open_port(const gw_transport_params_t *params, const char *only,
                             gw_transport_t **out, uint8_t addr[GW_TRANSPORT_ADDR_MAX]);

/* The ops table's open (ib_rails.c): the instance of gw__ib_open_port
 * when one rail is asked for, else a transport over one instance per
 * rail. */
gw_status_t gw__ib_rails_open(const gw_transport_params_t *params, gw_transport_t **out,
                              uint8_t addr[GW_TRANSPORT_ADDR_MAX]);

/* The rails of a transport gw__ib_transport_ops opened (1 for a plain
 * instance), and rail i's instance (a plain instance is its own rail 0),
 * or NULL: for tests and diagnostics. */
int gw__ib_rails_count(gw_transport_t *t);
gw_transport_t *gw__ib_rail(gw_transport_t *t, int i);

/* Sleep up to wait_ms until one of the n instances ts (the rails) has
 * something to do, in one poll() over all their fds (pfds: room for
 * n * (4 + size) entries), and handle what it reports; returns at once
 * when one of them could move without waiting. A failure is the
 * instance's own (its base.failed). */
gw_status_t gw__ib_wait_many(gw_ib_t *const *ts, int n, int wait_ms, struct pollfd *pfds);

/* ib_res.c: PD, completion channel and CQ, the pairs' blocks (all of them
 * at once unless t->lazy), the registration cache. */
gw_status_t gw__ib_setup_resources(gw_ib_t *t);

/* ib_device.c */
/* Log why RDMA is not used (INFO; ERROR under GW_TRANSPORT=ib, which asked
 * for it: t->forced) and return st. */
gw_status_t gw__ib_unavailable(const gw_ib_t *t, gw_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Choose and open the device and port, fill t->ctx, port_num, port_attr,
 * gid_index, gid, dev_name; gid_desc says how the GID was chosen. */
gw_status_t gw__ib_open_device(gw_ib_t *t, char *gid_desc, size_t gid_cap);

/* ib_qp.c */
/* A QP could not be created with error err: when the device may have
 * refused the inline size, ask for less (and return 1: try again). */
int gw__ib_qp_inline_retry(gw_ib_t *t, int err);
/* A QP was created with these capabilities. */
void gw__ib_qp_created(gw_ib_t *t, const struct ibv_qp_init_attr *a);
/* A QP for peer p, index k (OOB mode: ibv_create_qp, then INIT). */
gw_status_t gw__ib_qp_create(gw_ib_t *t, gw_ib_peer_t *p, int k);
void gw__ib_qp_init_attr(const gw_ib_t *t, struct ibv_qp_init_attr *a);
/* INIT -> RTR -> RTS with the peer's numbers (OOB mode). */
gw_status_t gw__ib_qp_connect(gw_ib_t *t, gw_ib_peer_t *p, int k, uint32_t remote_qpn,
                              uint32_t remote_psn, uint32_t local_psn);
/* Fill the receive queue of a fresh QP. */
gw_status_t gw__ib_qp_post_recvs(gw_ib_t *t, gw_ib_peer_t *p, int k, int n);
/* Post n receives without a buffer on qp: 0 or the verbs error. */
int gw__ib_qp_post_empty_recvs(struct ibv_qp *qp, int n);
/* Build the QP-number map from the QPs that exist (all of them once
 * connect() is done). */
gw_status_t gw__ib_qpn_map_build(gw_ib_t *t);
const gw_ib_qpn_map_t *gw__ib_qpn_lookup(const gw_ib_t *t, uint32_t qpn);
/* The same, first rebuilding the map when QPs came or went (qpn_dirty). */
const gw_ib_qpn_map_t *gw__ib_qpn_find(gw_ib_t *t, uint32_t qpn);
/* Post a zero-length SEND_WITH_IMM (control) on QP 0 of p. */
gw_status_t gw__ib_post_ctrl(gw_ib_t *t, gw_ib_peer_t *p, gw_ib_imm_kind_t kind, uint64_t value);
/* Where the errno of a failed verbs call leads. */
gw_status_t gw__ib_errno_status(int err);

/* ib_oob.c / ib_cm.c: connect() in each mode, and their share of open/close. */
gw_status_t gw__ib_oob_listen(gw_ib_t *t, const gw_transport_params_t *params, char *desc,
                              size_t desc_cap);
gw_status_t gw__ib_oob_connect(gw_ib_t *t);
/* Out of band, lazily: the same as the rdmacm functions below, and the
 * mesh freed at close. */
gw_status_t gw__ib_oob_dial_peer(gw_ib_t *t, gw_ib_peer_t *p);
gw_status_t gw__ib_oob_knock(gw_ib_t *t, gw_ib_peer_t *p);
/* Knocks whose connect() is under way (ib_oob_knock.c). */
gw_status_t gw__ib_oob_knocks_step(gw_ib_t *t);
gw_status_t gw__ib_oob_lazy_step(gw_ib_t *t);
const char *gw__ib_oob_dial_why(gw_ib_t *t, const gw_ib_peer_t *p);
/* Whether connections (dials, handshakes of peers that dialled us, knocks)
 * are under way: their sockets are not in progress()'s poll set. */
int gw__ib_oob_busy(const gw_ib_t *t);
void gw__ib_oob_free(gw_ib_t *t);
gw_status_t gw__ib_cm_listen(gw_ib_t *t, char *desc, size_t desc_cap);
gw_status_t gw__ib_cm_connect(gw_ib_t *t);
/* rdmacm, lazily: start dialling every QP of p (a lower rank), or knock on
 * p (a higher one), and move what is due. */
gw_status_t gw__ib_cm_dial_peer(gw_ib_t *t, gw_ib_peer_t *p);
gw_status_t gw__ib_cm_knock(gw_ib_t *t, gw_ib_peer_t *p);
gw_status_t gw__ib_cm_lazy_step(gw_ib_t *t);
/* The last error of a dial to p that is not up, or "". */
const char *gw__ib_cm_dial_why(gw_ib_t *t, const gw_ib_peer_t *p);
/* When the next attempt of a dial to p is due (gw__now_ms() time), or
 * INT64_MAX when none waits. */
int64_t gw__ib_cm_next_retry(gw_ib_t *t, const gw_ib_peer_t *p);
/* rdmacm events after connect(): disconnections. */
gw_status_t gw__ib_cm_poll_events(gw_ib_t *t);
/* A completion of the proof receive (GW_IB_WR_PROOF_RECV): judge the
 * dialler's proof, and admit or drop the connection. */
gw_status_t gw__ib_cm_on_proof(gw_ib_t *t, const struct ibv_wc *wc);
/* Whether a completion on a QP outside the map belongs to an incoming
 * connection that is not (or never was) proven: then it is ignored. */
int gw__ib_cm_stray(const gw_ib_t *t, uint32_t qpn);
void gw__ib_cm_teardown(gw_ib_t *t);

/* ib_lazy.c: pairs connected on first use (t->lazy). */
/* The first request for p was posted: start connecting the pair (dial a
 * lower rank, knock on a higher one). Nothing when under way or up. */
gw_status_t gw__ib_want_peer(gw_ib_t *t, gw_ib_peer_t *p);
/* Whether p's QPs are all connected, so requests for it may be posted. */
static inline int gw__ib_peer_up(const gw_ib_t *t, const gw_ib_peer_t *p)
{
    return p->qp_up >= t->nqps;
}
/* Whether pairs are being connected: progress() then moves them each call
 * and sleeps at most until gw__ib_lazy_wake_ms(). */
int gw__ib_lazy_busy(const gw_ib_t *t);
/* Milliseconds until the next retry, knock or deadline is due (>= 0). */
int gw__ib_lazy_wake_ms(gw_ib_t *t);
/* Move the pairs being connected: connection events, retries that are due,
 * knocks to send again, and the deadlines of our dials. */
gw_status_t gw__ib_lazy_progress(gw_ib_t *t);
/* A lower rank knocked: dial it (TRACE; nothing when under way or up). */
gw_status_t gw__ib_knocked_by(gw_ib_t *t, int peer);
/* Our dial to p failed or ran out of time (why): when we dial it only
 * because it knocked and no request of ours waits for it, the dial is
 * stopped with a WARN and 1 returned (the job goes on; a request or a
 * knock dials again); else 0, and the caller fails the pair. */
int gw__ib_dial_give_up(gw_ib_t *t, gw_ib_peer_t *p, const char *why);
/* Stop the dials to p under way, before any of its QPs moved: 0; -1 when
 * one is past that point (it cannot be undone). */
int gw__ib_oob_dial_stop(gw_ib_t *t, gw_ib_peer_t *p);
void gw__ib_cm_dial_stop(gw_ib_t *t, gw_ib_peer_t *p);

/* ib_post.c */
/* Post what can be posted for every peer: CTS entries for receives, eager
 * messages and payload parts for sends. *did: something was posted. */
gw_status_t gw__ib_post_all(gw_ib_t *t, int *did);
/* Deliver the eager messages waiting in p's slots to their receives. */
gw_status_t gw__ib_match_eager(gw_ib_t *t, gw_ib_peer_t *p, int *did);
/* One more part of r completed; the request completes with its last. */
void gw__ib_part_done(gw_ib_t *t, gw_ib_peer_t *p, gw_request_t *r);
/* p's RECEIPT immediate (28 bits of a message index): the eager sends up
 * to that index that wait for it complete. */
gw_status_t gw__ib_take_receipt(gw_ib_t *t, gw_ib_peer_t *p, uint32_t value);
/* Release what a request holds (its registration). */
void gw__ib_req_release(gw_ib_t *t, gw_request_t *r);

/* ib_progress.c */
gw_status_t gw__ib_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms);
/* Poll the CQ until it is empty or budget completions were handled. */
gw_status_t gw__ib_poll_cq(gw_ib_t *t, int budget, int *handled);

/* ib_fail.c */
/* Break the transport (gw__transport_fail in transport/base.h): log once,
 * complete every pending request with st (releasing its registration),
 * return the sticky status. */
#define gw__ib_fail(t, st, ...) gw__transport_fail(&(t)->base, (st), __VA_ARGS__)
/* The same with the message prefixed by the peer's desc. */
#define gw__ib_peer_fail(t, p, st, ...) \
    gw__transport_peer_fail(&(t)->base, (p)->rank, (st), __VA_ARGS__)
/* The base's hooks (gw__transport_class_t). */
void gw__ib_fail_pending(gw_transport_t *base, gw_status_t st);
void gw__ib_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap);
/* A failed work completion: GW_ERR_REMOTE or GW_ERR_SYSTEM with the status
 * string and a hint. */
gw_status_t gw__ib_wc_fail(gw_ib_t *t, const struct ibv_wc *wc);
/* The status and hint for a work completion status (exposed for tests). */
gw_status_t gw__ib_wc_status_class(enum ibv_wc_status st, const char **hint);
/* Read every pending async event; fatal ones fail the transport. */
gw_status_t gw__ib_async_events(gw_ib_t *t);
/* GW_IB_TEST_QP_ERROR: once t->ncompleted reaches it, move the QPs to the
 * lowest-ranked connected peer into IBV_QPS_ERR (once; logged at WARN). */
void gw__ib_test_qp_error(gw_ib_t *t);
/* The connection to p broke (socket EOF, RDMA CM disconnect): a failure
 * when requests with p are pending and it said no goodbye; otherwise later
 * requests for p fail when they are posted. */
gw_status_t gw__ib_peer_gone(gw_ib_t *t, gw_ib_peer_t *p, const char *how);
/* The value of an ABORT_FROM immediate, and its ranks (-1: none). */
static inline uint32_t gw__ib_abort_from_encode(int origin, int culprit)
{
    uint32_t o =
        origin >= 0 && origin < (int)GW_IB_IMM_NO_RANK ? (uint32_t)origin : GW_IB_IMM_NO_RANK;
    uint32_t c =
        culprit >= 0 && culprit < (int)GW_IB_IMM_NO_RANK ? (uint32_t)culprit : GW_IB_IMM_NO_RANK;
    return o << 14 | c;
}
static inline void gw__ib_abort_from_decode(uint32_t value, int *origin, int *culprit)
{
    uint32_t o = (value >> 14) & GW_IB_IMM_NO_RANK, c = value & GW_IB_IMM_NO_RANK;
    *origin = o == GW_IB_IMM_NO_RANK ? -1 : (int)o;
    *culprit = c == GW_IB_IMM_NO_RANK ? -1 : (int)c;
}
/* The status an ABORT immediate carries (GW_ERR_ABORTED when unknown). */
static inline gw_status_t gw__ib_abort_status(uint32_t value)
{
    return gw__transport_abort_status(value);
}

#endif
