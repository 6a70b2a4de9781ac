/*
 * shm_internal.h - state shared by the files of the shared-memory transport.
 *
 *   shm.c           narrative, open, queueing a request, abort, close, the
 *                   ops table
 *   shm_seg.c       a pair's handshake: creating, attaching and checking
 *                   its segment
 *   shm_connect.c   connect(): every pair at once, or each on first use
 *   shm_door.c      each rank's door, a socket: how a peer asks it to
 *                   connect (lazy)
 *   shm_progress.c  the progress engine's rounds: ring copies, single-copy
 *                   reads, liveness of peers
 *   shm_wait.c      waiting between rounds: polling, yielding, sleeping on
 *                   bells, and ringing the peers' bells
 *   shm_fail.c      the base's hooks: failing the pending requests, naming
 *                   a peer
 *
 * What every transport does alike (request checks, queues, the sticky
 * failure logged once) is the base's: transport/base.h.
 * See the comment at the top of shm.c for how data moves and why.
 */
#ifndef GW_TRANSPORT_SHM_INTERNAL_H
#define GW_TRANSPORT_SHM_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "transport/base.h"

#define GW_SHM_SUBSYS "shm"

#define GW_SHM_SEG_MAGIC 0x4757534du             /* "GWSM": a segment's header */
#define GW_SHM_ADDR_MAGIC 0x47575341u            /* "GWSA": an address blob */
#define GW_SHM_REC_MAGIC 0x47575352u             /* "GWSR": a record in a ring */
#define GW_SHM_PROBE_MAGIC 0x6777736870726f62ull /* read by the peer's single-copy probe */
#define GW_SHM_DOOR_MAGIC 0x47575344u            /* "GWSD": a knock on a rank's door */
/* 2: the attacher and the creator of a segment prove the data-plane key in
 * its header (shm_seg.c). 3: an abort says who first reported the failure
 * and whom it blames (gw_shm_side_t). 4: a record may ask for a receipt
 * (GW_SHM_REC_RECEIPT), which the receiver gives in its direction's
 * `accepted` counter. 5: records carry the communicator. 6: lo hands the
 * segment to hi through hi's door (never opened by name), and may make its
 * rings smaller than it announced (gw__shm_ring_for). 7: a side says
 * when it may go to sleep soon (gw_shm_side_t.drowsy), and its peers
 * fence and look for a sleeper only then. 8: a message of up to 16 bytes
 * rides in its header's line (GW_SHM_REC_TINY). */
#define GW_SHM_PROTOCOL_VERSION 8u

#define GW_SHM_LINE 64                        /* cache line: unit of alignment in a ring */
#define GW_SHM_HDR_BYTES 4096                 /* segment header, rings follow */
#define GW_SHM_RING_DEFAULT ((size_t)1 << 21) /* bytes of each ring */
#define GW_SHM_RING_MIN ((size_t)1 << 12)
#define GW_SHM_RING_MAX ((size_t)1 << 30)
/* The rings one rank shares with all its peers fit in this many bytes, or
 * each pair's ring shrinks (by halves) to no less than GW_SHM_RING_FLOOR:
 * see shm.c, "Memory per rank is bounded". 32 MiB keeps the default rings
 * for up to 9 ranks on a host. */
#define GW_SHM_RANK_RINGS ((uint64_t)32 << 20)
#define GW_SHM_RING_FLOOR ((uint64_t)64 << 10)
/* Where segments are made (shm_open's directory, named in errors). */
#define GW_SHM_DIR "/dev/shm"
/* Messages of at least this many bytes are read by the receiver straight
 * from the sender's buffer when the kernel permits it (see shm.c: measured
 * slower than the rings below it, and no faster above, on the 2-core test
 * machine; no collective on a few ranks sends a message this large). */
#define GW_SHM_DIRECT_DEFAULT ((size_t)8 * 1024 * 1024)
/* The most a ring copy or a single-copy read moves before the others get a
 * turn (and before head/tail are published, so the peer can overlap). */
#define GW_SHM_PIECE ((size_t)256 * 1024)
/* A send of at most this many bytes, posted when its pair has nothing
 * queued, is written into the ring by the post (shm_progress.c). */
#define GW_SHM_POST_COPY ((size_t)4096)
/* After a message that took at most this many bytes of the ring, header
 * included, the sender warms the lines of the next one of its size while
 * it waits, and the receiver those it will read (shm_progress.c,
 * "Warming"); past them, warming slowed the messages down. */
#define GW_SHM_WARM_SEND_MAX ((uint64_t)2048 + GW_SHM_LINE)
#define GW_SHM_WARM_RECV_MAX ((uint64_t)16 * GW_SHM_LINE)
#define GW_SHM_DIRECT_PIECE ((size_t)1024 * 1024)
#define GW_SHM_DEFAULT_TIMEOUT_MS 30000
#define GW_SHM_LIVENESS_MS 20         /* how often peers' liveness is checked while waiting */
#define GW_SHM_SPIN_NS (20LL * 1000)  /* idle time polling before yielding */
#define GW_SHM_YIELD_NS (50LL * 1000) /* idle time before sleeping */
/* A rank says it is drowsy at least this long before it sleeps (shm_wait.c). */
#define GW_SHM_DROWSY_NS (20LL * 1000)

/* Address blob (GW_TRANSPORT_ADDR_MAX bytes, little-endian host integers
 * are fine: both ends are on one host):
 *   0 u32 GW_SHM_ADDR_MAGIC   4 u32 protocol version   8 u32 pid
 *  12 u32 flags              16 u64 host id            24 u64 ring bytes
 *  32.. zero */
#define GW_SHM_ADDR_SIZE 32
#define GW_SHM_ADDR_LAZY 1u /* flags: pairs are connected on first use (shm_connect.c) */

typedef enum gw_shm_rec_kind {
    GW_SHM_INLINE = 1, /* payload follows in the ring */
    GW_SHM_DIRECT = 2, /* the receiver reads the payload from the sender's memory */
} gw_shm_rec_kind_t;

/* Every message starts with one record header, 64-byte aligned in the ring.
 * An INLINE payload follows it, padded to a multiple of 64 bytes, except a
 * tiny one (GW_SHM_REC_TINY), which rides in the header's own line. */
typedef struct gw_shm_rec {
    uint32_t magic;
    uint32_t kind;
    uint64_t seq;
    uint32_t sig;
    uint32_t flags; /* GW_SHM_REC_RECEIPT, GW_SHM_REC_TINY, or 0 */
    uint64_t len;
    uint64_t index;   /* messages sent in this direction so far, from 1 */
    uint32_t comm_id; /* the message's communicator (tag.comm_id), since version 5 */
    uint32_t reserved;
    union {
        uint64_t addr;                  /* DIRECT: the payload's address in the sender */
        uint8_t tiny[GW_SHM_LINE - 48]; /* GW_SHM_REC_TINY: the payload itself */
    } u;
} gw_shm_rec_t;

_Static_assert(sizeof(gw_shm_rec_t) == GW_SHM_LINE, "a record header is one cache line");

/* gw_shm_rec_t.flags: the sender waits until the receiver has matched and
 * accepted this (INLINE) message; a DIRECT one completes only when the
 * receiver has read it, which it does only after accepting it. */
#define GW_SHM_REC_RECEIPT 1u
/* An INLINE message of at most GW_SHM_TINY_MAX bytes is in the header's
 * u.tiny, and nothing follows the header: the receiver's one cache miss
 * brings the message whole (Open MPI's vader does the same in its fast
 * boxes). Since protocol version 8. */
#define GW_SHM_REC_TINY 2u
#define GW_SHM_TINY_MAX ((size_t)(GW_SHM_LINE - 48))

/* What one rank of a pair says about itself, written by that rank only. */
typedef struct gw_shm_side {
    _Atomic uint32_t state; /* GW_SHM_SIDE_* */
    uint32_t pid;
    uint64_t probe_addr;          /* where GW_SHM_PROBE_MAGIC is in its memory */
    _Atomic uint32_t can_read;    /* 1: it reads our buffers directly (DIRECT) */
    _Atomic uint32_t goodbye;     /* 1: it closed its communicator */
    _Atomic int32_t abort_status; /* non-zero: it aborted with this gw_status_t */
    /* Of its abort, written before abort_status (which is stored with
     * release, so a reader that sees the status sees these): the rank that
     * first reported the failure and the rank it blames, -1 for none. */
    _Atomic int32_t abort_origin;
    _Atomic int32_t abort_culprit;
    _Atomic uint32_t sleeping; /* 1: it may be asleep in a futex wait on `bell` */
    /* 1: it may sleep soon, not before GW_SHM_DROWSY_NS from now; 0: it
     * polls, or is not waiting at all (shm_wait.c, "Bells"). */
    _Atomic uint32_t drowsy;
    _Atomic uint32_t bell; /* bumped by the peer after it moved data */
    _Atomic int32_t cpu;   /* the CPU it last waited on, -1 unknown */
    /* The proof of the data-plane key (shm_seg.c): the attacher's nonce, and
     * each side's HMAC over the header and both nonces. */
    uint8_t nonce[16];
    uint8_t mac[32];
} __attribute__((aligned(GW_SHM_LINE))) gw_shm_side_t;

enum { GW_SHM_SIDE_NONE = 0, GW_SHM_SIDE_MAPPED = 1, GW_SHM_SIDE_READY = 2 };

/* One direction of a pair. head is written by the sender only, tail and
 * done by the receiver only; they sit on separate cache lines so the two
 * cores do not fight over one line. */
typedef struct gw_shm_dir {
    _Atomic uint64_t head __attribute__((aligned(GW_SHM_LINE))); /* bytes written */
    _Atomic uint64_t tail __attribute__((aligned(GW_SHM_LINE))); /* bytes consumed */
    _Atomic uint64_t direct_done; /* DIRECT messages the receiver finished reading */
    /* The receipt: the index of the last message asking for one that the
     * receiver matched and accepted (cumulative: messages match in order).
     * On tail's cache line, which the receiver writes anyway. */
    _Atomic uint64_t accepted;
} gw_shm_dir_t;

/* The segment of the pair (lo, hi), lo < hi: header, then ring 0 (lo -> hi)
 * and ring 1 (hi -> lo), each ring_bytes. */
typedef struct gw_shm_seg {
    uint32_t magic;
    uint32_t version;
    uint8_t job_id[16];
    uint32_t lo, hi;
    uint64_t ring_bytes;
    uint8_t nonce[16];          /* the creator's, fresh per segment */
    _Atomic uint32_t init_done; /* the creator filled the fields above */
    gw_shm_side_t side[2];      /* [0] lo, [1] hi */
    gw_shm_dir_t dir[2];        /* [0] lo -> hi, [1] hi -> lo */
} gw_shm_seg_t;

_Static_assert(sizeof(gw_shm_seg_t) <= GW_SHM_HDR_BYTES, "segment header fits its page");

/* How the transport uses gw_request_t.priv. */
#define GW_SHM_REQ_INDEX(r) ((r)->priv[0]) /* send: DIRECT index, or message index in aq */

/* Where a pair's connection stands (shm_seg.c). */
typedef enum gw_shm_conn {
    GW_SHM_C_IDLE,        /* lazy: nobody asked for it yet */
    GW_SHM_C_ATTACH,      /* hi: waiting for lo's segment to appear and be sized */
    GW_SHM_C_INIT,        /* hi: mapped, waiting for lo to fill the header */
    GW_SHM_C_WAIT_MAPPED, /* waiting for the peer to publish its pid */
    GW_SHM_C_WAIT_READY,  /* probed the peer; waiting for its probe result */
    GW_SHM_C_DONE,        /* messages move */
} gw_shm_conn_t;

/* The local view of one peer. */
typedef struct gw_shm_peer {
    int rank;
    int served; /* its address blob was not zero: we connect to it */
    gw_shm_conn_t conn;
    int64_t conn_start_ms; /* when we started to connect it */
    int door_gone;         /* its door was gone when we knocked */
    int knock_due;         /* its door's queue was full: knock again */
    pid_t pid;
    int pidfd;           /* -1 where pidfd_open is not available */
    uint64_t ring_bytes; /* lo: what it made; hi: the most lo may make, then what it made */
    int created;         /* we created the segment */
    int fd; /* lo: the segment until a knock handed it over; hi: received, not yet mapped */
    gw_shm_seg_t *seg;
    size_t seg_bytes;
    int me, them;            /* our and its index in seg->side */
    gw_shm_side_t *my, *its; /* &seg->side[me], &seg->side[them] */
    gw_shm_dir_t *out, *in;  /* our sending and receiving directions */
    uint8_t *out_ring, *in_ring;
    int direct_ok;     /* the peer reads our large messages itself */
    int refused_errno; /* our single-copy probe of it failed with this errno (0: it did not) */
    /* Send side. */
    gw_request_t *sq_head, *sq_tail; /* not yet fully in the ring */
    gw_request_t *dq_head, *dq_tail; /* DIRECT, waiting for the peer's read */
    gw_request_t *aq_head, *aq_tail; /* INLINE, in the ring, waiting for the receipt */
    uint64_t s_index;                /* messages sent so far */
    uint64_t s_head;                 /* out->head as we last wrote it */
    uint64_t s_tail;                 /* out->tail as last read (stale is safe: less room) */
    uint64_t s_direct;               /* DIRECT messages sent so far */
    uint64_t s_warm;                 /* bytes to warm after a small send (shm_progress.c) */
    uint64_t s_warmed;               /* s_head + 1 when they were warmed there, or 0 */
    int s_hdr_done;                  /* the head request's header is in the ring */
    size_t s_done;                   /* payload bytes of the head request in the ring */
    /* Receive side. */
    gw_request_t *rq_head, *rq_tail; /* posted, unfinished */
    gw_shm_rec_t r_hdr;              /* the header of the message being received */
    int r_held;                      /* r_hdr read, but no receive claimed it yet */
    gw_request_t *rreq;              /* the receive r_hdr belongs to */
    size_t r_done;                   /* payload bytes of rreq copied */
    uint64_t r_tail;                 /* in->tail as we last wrote it */
    uint64_t r_fetched;              /* head up to which a small message was prefetched */
    uint64_t r_index;                /* messages received so far */
    uint64_t r_warm;                 /* bytes to fetch while waiting after a small message */
    int bell_due;                    /* we published for it this round: ring its bell */
    int goodbye;                     /* it closed, and its ring is drained */
    int gone;                        /* its process is gone */
} gw_shm_peer_t;

typedef struct gw_shm {
    gw_transport_t base; /* first: gw__transport_open_base() allocates through it */
    int timeout_ms;
    uint8_t job_id[16];
    uint8_t data_key[32]; /* what every segment's attacher proves (transport.h) */
    uint64_t host_id;
    size_t ring_bytes;
    size_t direct_min;       /* 0: never read the peer's memory directly */
    int allow_direct;        /* we may read peers' memory (probe at connect) */
    volatile uint64_t probe; /* GW_SHM_PROBE_MAGIC, read by peers' probes */
    gw_shm_peer_t *peers;    /* size entries; ours is unused */
    int npeers;              /* served peers */
    int lazy;                /* connect a pair when it is first needed (params.lazy) */
    int nconnecting;         /* peers between IDLE and DONE */
    int nconnected;          /* peers DONE */
    int refused_warned;      /* the first refused single-copy probe was logged at WARN */
    int door_fd;             /* ours (lazy): a bound Unix datagram socket, or -1 */
    int64_t door_seen_ms;    /* when we last looked at it */
    unsigned strangers;      /* knocks that did not count */
    uint64_t moved;          /* bytes and completions so far, to tell idle rounds */
    int bells_due;           /* peers with bell_due set */
    uint64_t woken;          /* sleeps a peer's bell ended (tests look) */
    int64_t idle_since_ns;   /* 0 when the last round moved something */
    int64_t next_liveness_ms;
    int no_waitv;     /* the kernel lacks futex_waitv: sleep on one peer's bell */
    int64_t spin_ns;  /* idle time spent polling before yielding the core */
    int spin;         /* polling is worth it: no peer we wait for shares our CPU */
    int64_t yield_ns; /* idle time before sleeping in the futex */
    int drowsy;       /* what our sides' drowsy say, since drowsy_since_ns */
    int64_t drowsy_since_ns;
} gw_shm_t;

static inline gw_shm_t *gw__shm_of(gw_transport_t *t)
{
    return gw__container_of(t, gw_shm_t, base);
}

/* Round up to the ring's alignment. */
static inline uint64_t gw__shm_align(uint64_t n)
{
    return (n + GW_SHM_LINE - 1) & ~(uint64_t)(GW_SHM_LINE - 1);
}

/* Bytes an INLINE message of len bytes takes in the ring after its header:
 * none for a tiny one (GW_SHM_REC_TINY), else the payload padded to lines. */
static inline uint64_t gw__shm_body(uint64_t len)
{
    return len <= GW_SHM_TINY_MAX ? 0 : gw__shm_align(len);
}

/* shm.c */
void gw__shm_addr_encode(uint32_t pid, uint64_t host_id, uint64_t ring_bytes,
                         uint8_t blob[GW_TRANSPORT_ADDR_MAX]);
/* GW_ERR_PROTOCOL for a blob that is not a shm address. */
gw_status_t gw__shm_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX], uint32_t *pid,
                                uint64_t *host_id, uint64_t *ring_bytes);
/* Tests: set before connect() to forbid (0) or allow (1) single-copy reads,
 * and the size from which they are used. */
void gw__shm_set_direct(gw_transport_t *t, int allow, size_t min_bytes);
/* Tests: rings of `bytes` (a power of two) for the segments this rank
 * creates; rewrites our address blob, so call it before publishing that. */
gw_status_t gw__shm_set_ring(gw_transport_t *t, size_t bytes, uint8_t addr[GW_TRANSPORT_ADDR_MAX]);

/* shm_seg.c */
/* "/gw-<job id>-<lo>-<hi>": the segment of a pair, named only while it is
 * made (it then shows as "/dev/shm/gw-... (deleted)" in /proc/PID/maps). */
void gw__shm_seg_name(const uint8_t job_id[16], int lo, int hi, char *buf, size_t cap);
/* lo's side: create, reserve, map and fill the pair's segment; its
 * descriptor waits in p->fd for the knock that hands it to hi. A full
 * /dev/shm is GW_ERR_NO_MEMORY, logged with the size and the space left. */
gw_status_t gw__shm_seg_create(gw_shm_t *t, gw_shm_peer_t *p);
/* Advance p's handshake (p->conn, from ATTACH or WAIT_MAPPED) as far as the
 * peer allows now, without blocking; GW_SHM_C_DONE when both sides proved
 * the key and said READY. A failure is logged and returned. */
gw_status_t gw__shm_seg_step(gw_shm_t *t, gw_shm_peer_t *p);

/* shm_connect.c */
/* The rings lo makes for each of its pairs, given the size it announced and
 * the number of peers on the host: ring halved until npeers pairs of rings
 * fit GW_SHM_RANK_RINGS, down to GW_SHM_RING_FLOOR. */
uint64_t gw__shm_ring_for(uint64_t ring, int npeers);
gw_status_t gw__shm_connect(gw_transport_t *base, const uint8_t *all_addrs);
/* Start connecting p (IDLE -> creating or attaching its segment); lazily,
 * also knock on its door so that it starts too. */
gw_status_t gw__shm_start_connect(gw_shm_t *t, gw_shm_peer_t *p);
/* One step of p's connection: GW_OK whether or not it advanced (p->conn
 * says), else the failure (logged, naming p). `liveness`: also look
 * whether its process is gone. */
gw_status_t gw__shm_connect_step(gw_shm_t *t, gw_shm_peer_t *p, int liveness);
/* Unmap every segment; close the descriptors not yet mapped or handed over. */
void gw__shm_unmap_all(gw_shm_t *t);

/* shm_door.c */
struct sockaddr_un;
/* The door of `rank`: the abstract name "gw-shm-<job id>-<rank>" (sun_path
 * starts with a NUL and is not NUL-terminated); returns its length. */
socklen_t gw__shm_door_addr(const uint8_t job_id[16], int rank, struct sockaddr_un *a);
/* Bind our door (lazy transports, at open()). */
gw_status_t gw__shm_door_open(gw_shm_t *t);
/* Close it; its name goes with it (close()). */
void gw__shm_door_close(gw_shm_t *t);
/* A knock, the one datagram a door takes: u32 GW_SHM_DOOR_MAGIC, u32 the
 * knocking rank (little-endian). decode: GW_ERR_PROTOCOL for bytes that
 * are not exactly one; whether the rank is one of ours is the caller's. */
#define GW_SHM_KNOCK_LEN 8
void gw__shm_knock_encode(int rank, uint8_t msg[GW_SHM_KNOCK_LEN]);
gw_status_t gw__shm_knock_decode(const uint8_t *msg, size_t n, int *rank);
/* Ask p to connect: one datagram to its door. A door that is gone (p
 * closed or died) sets p->door_gone, a full one p->knock_due, for the next
 * round; GW_ERR_SYSTEM (logged) for anything else. */
gw_status_t gw__shm_knock(gw_shm_t *t, gw_shm_peer_t *p);
/* p's door was gone when we knocked: fail the transport naming p, as dead
 * (its process is gone) or closed. */
gw_status_t gw__shm_door_gone(gw_shm_t *t, gw_shm_peer_t *p);
/* Start connecting every peer that knocked since the last look. */
gw_status_t gw__shm_door_answer(gw_shm_t *t);

/* shm_progress.c */
/* 1 when pid is gone (exited, even if not yet reaped). */
int gw__shm_peer_gone(gw_shm_peer_t *p);
/* Write p's queued sends into its ring now and ring the bells due. */
void gw__shm_send_now(gw_shm_t *t, gw_shm_peer_t *p);
/* One round over every peer; now_ns is the caller's latest clock reading.
 * Rings the bells due before it returns, a failure included. */
gw_status_t gw__shm_round(gw_shm_t *t, const gw_msg_tag_t *current, int64_t now_ns);

/* shm_wait.c */
gw_status_t gw__shm_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms);
/* Wake the peer if it sleeps waiting for us (nothing unless it is drowsy). */
void gw__shm_ring_bell(gw_shm_peer_t *p);
/* Wake each peer with a bell due that sleeps: one fence for all of them,
 * when one of them is drowsy. */
void gw__shm_ring_due_bells(gw_shm_t *t);

/* A publish for p in a round: a small one's bell is rung at the end of
 * the round (gw__shm_ring_due_bells), after one fence for all of them
 * when a peer is drowsy (shm_wait.c, "Bells"). The fence waits until our
 * stores are visible, which for a line the peer is polling means a round
 * trip to its core; at the end of the round that wait overlaps our own
 * reading of what the peer sent us, instead of preceding it. A publish of
 * more than GW_SHM_POST_COPY bytes rings at once (a sleeping peer starts on
 * it while we go on), and so do the due bells before any copy that large
 * (gw__shm_before_copy): a peer that sleeps never waits for more than small
 * work of ours. */
static inline void gw__shm_bell_due(gw_shm_t *t, gw_shm_peer_t *p, uint64_t moved)
{
    if (moved > GW_SHM_POST_COPY) {
        gw__shm_ring_bell(p);
        return;
    }
    if (!p->bell_due) {
        p->bell_due = 1;
        t->bells_due++;
    }
}

static inline void gw__shm_before_copy(gw_shm_t *t, size_t len)
{
    if (t->bells_due && len > GW_SHM_POST_COPY)
        gw__shm_ring_due_bells(t);
}

/* shm_fail.c */
/* Break the transport (gw__transport_fail in transport/base.h): log once,
 * complete every pending request with st, return the sticky status. */
#define gw__shm_fail(t, st, ...) gw__transport_fail(&(t)->base, (st), __VA_ARGS__)
/* The same with the message prefixed by "rank R (pid P, shared memory) ". */
#define gw__shm_peer_fail(t, p, st, ...) \
    gw__transport_peer_fail(&(t)->base, (p)->rank, (st), __VA_ARGS__)
/* p raised its abort flag with status ab (non-zero): fail with its status,
 * origin and culprit (gw__transport_peer_aborted). */
gw_status_t gw__shm_peer_aborted(gw_shm_t *t, gw_shm_peer_t *p, int32_t ab);
/* Raise our abort flag towards p, with why's status, origin and culprit. */
void gw__shm_tell_abort(gw_shm_peer_t *p, const gw_abort_info_t *why);
/* The base's hooks (gw__transport_class_t). */
void gw__shm_fail_pending(gw_transport_t *base, gw_status_t st);
void gw__shm_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap);

/* A pair's connection failed with st (logged): fail the transport, naming
 * the peer unless the cause is ours (out of memory, a system call). */
static inline gw_status_t gw__shm_connect_failed(gw_shm_t *t, gw_shm_peer_t *p, gw_status_t st)
{
    if (st == GW_ERR_SYSTEM || st == GW_ERR_NO_MEMORY)
        return gw__shm_fail(t, st, NULL);
    return gw__shm_peer_fail(t, p, st, NULL);
}

#endif
