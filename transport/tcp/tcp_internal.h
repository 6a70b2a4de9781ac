/*
 * tcp_internal.h - state shared by the files of the TCP transport.
 *
 *   tcp.c           narrative, open (listening socket), queueing a request,
 *                   abort, close, the ops table
 *   tcp_wire.c      encoding of frame headers, hellos and the address blob,
 *                   socket options
 *   tcp_conn.c      one connection's handshake, either end (tcp_mesh.h)
 *   tcp_mesh.c      connect() and which connections are made when: on
 *                   first use (lazy) or all at once (eager)
 *   tcp_progress.c  the progress engine
 *   tcp_fail.c      what the sockets report (errno, EOF, hang-up, an ABORT
 *                   read late) turned into the failure, and the base's hooks
 *
 * What every transport does alike (request checks, queues, the sticky
 * failure logged once) is the base's: transport/base.h.
 *
 * The choice of the local address (GW_SOCKET_IFNAME or the bootstrap's),
 * addresses as text, dialling with retries and handshake transfers are the
 * socket module's (transport/sock.h), shared with the verbs transport's
 * out-of-band set-up and the bootstrap.
 *
 * See the comment at the top of tcp.c for how data moves and why.
 */
#ifndef GW_TRANSPORT_TCP_INTERNAL_H
#define GW_TRANSPORT_TCP_INTERNAL_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/base.h"
#include "transport/sock.h"

#define GW_TCP_SUBSYS "tcp"

#define GW_TCP_FRAME_MAGIC 0x47574652u /* "GWFR" */
#define GW_TCP_HELLO_MAGIC 0x4757484cu /* "GWHL" */
#define GW_TCP_ADDR_MAGIC 0x47574144u  /* "GWAD" */
/* 2: hellos carry a nonce and the connection opens with the proof of the
 * data-plane key (transport/sock_auth.c). 3: an ABORT frame carries the
 * rank that first reported the failure and the rank it blames. 4: a DATA
 * header may ask for a receipt (GW_TCP_FLAG_RECEIPT), answered by RECEIPT
 * frames, and a GOODBYE carries the last receipt too. */
#define GW_TCP_PROTOCOL_VERSION 5u

#define GW_TCP_HDR_SIZE 48   /* bytes of a frame header on the wire */
#define GW_TCP_HELLO_SIZE 56 /* bytes of a hello on the wire */
#define GW_TCP_ADDR_SIZE 28  /* bytes used in the address blob */

#define GW_TCP_MIN_PART ((size_t)64 * 1024) /* smallest part of a split message */
#define GW_TCP_SOCKBUF (4 * 1024 * 1024)    /* SO_SNDBUF / SO_RCVBUF we ask for */
#define GW_TCP_MAX_NSOCKS 64
#define GW_TCP_DEFAULT_TIMEOUT_MS 30000 /* when params->timeout_ms <= 0 */
#define GW_TCP_SHUTDOWN_MS 100          /* budget of abort() and close() */
/* Receive staging buffer per connection (gw_tcp_sock_t.rb): frames up to
 * about this size arrive whole in one recv(); a payload of at least
 * GW_TCP_DIRECT_MIN still missing is read straight into the user's buffer. */
#define GW_TCP_RBUF ((size_t)16 * 1024)
#define GW_TCP_DIRECT_MIN ((size_t)4 * 1024)

typedef enum gw_tcp_frame_type {
    GW_TCP_DATA = 1,
    GW_TCP_GOODBYE = 2,
    GW_TCP_ABORT = 3,
    GW_TCP_RECEIPT = 4, /* seq: the peer matched and accepted our messages up to this index */
} gw_tcp_frame_type_t;

/* gw_tcp_hdr_t.flags of a DATA header: the sender waits for a receipt. */
#define GW_TCP_FLAG_RECEIPT 1u

/* Which socket buffer sizes we set ourselves (decided once, at open). */
typedef struct gw_tcp_bufs {
    int set_snd, set_rcv;
} gw_tcp_bufs_t;

/* A frame header in host form (see tcp_wire.c for its wire layout). */
typedef struct gw_tcp_hdr {
    uint32_t magic;
    uint16_t type;
    uint16_t flags; /* DATA: GW_TCP_FLAG_RECEIPT or 0 */
    uint64_t seq;   /* RECEIPT, GOODBYE: the receipt's message index */
    uint32_t sig;
    union {               /* one word on the wire, whose meaning the type gives */
        int32_t status;   /* ABORT: the sender's gw_status_t */
        uint32_t comm_id; /* DATA: the message's communicator (tag.comm_id) */
    };
    uint64_t total;    /* length of the whole message; ABORT: the origin rank */
    uint64_t offset;   /* of this part in the message; ABORT: the culprit rank */
    uint64_t part_len; /* payload bytes that follow this header */
} gw_tcp_hdr_t;

/* The first bytes on every new connection, in both directions. */
typedef struct gw_tcp_hello {
    gw_sock_hello_id_t id; /* magic, job id, from and to rank (sock.h) */
    uint32_t version;
    uint32_t sock_idx;
    uint32_t nsocks;
} gw_tcp_hello_t;

/* How the transport uses gw_request_t.priv. */
#define GW_TCP_REQ_IDX(r) ((r)->priv[0])        /* 1, 2, ... in posting order per peer */
#define GW_TCP_REQ_NPARTS(r) ((r)->priv[1])     /* parts the message is split into */
#define GW_TCP_REQ_PARTS_DONE(r) ((r)->priv[2]) /* parts fully sent or received */
#define GW_TCP_REQ_MATCHED(r) ((r)->priv[3])    /* receive: part 0's header checked */

/* One TCP connection to a peer. The send side and the receive side are
 * independent state machines; each moves one frame at a time. */
typedef struct gw_tcp_sock {
    int fd;
    int idx; /* socket index k: carries part k of every message split into > k parts */
    /* Send side. */
    gw_request_t *sreq; /* message whose part is being written, or NULL */
    uint64_t s_last;    /* index of the last message this socket carried */
    uint8_t s_hdr[GW_TCP_HDR_SIZE];
    size_t s_hdr_done; /* header bytes written */
    size_t s_part_off, s_part_len, s_done;
    int s_midframe; /* a frame was left half written when the transport failed */
    int ctrl;       /* abort()/close(): a GOODBYE or ABORT is being written */
    int s_receipt;  /* a RECEIPT frame is being written (sreq is NULL) */
    int s_full;     /* the kernel refused bytes: write again only once poll() says POLLOUT */
    /* Receive side. */
    gw_request_t *rreq; /* message whose part is being read, or NULL */
    uint64_t r_last;    /* index of the last message this socket delivered */
    /* Bytes read from the socket and not yet parsed: rb[rb_pos, rb_len).
     * One recv() brings a small frame's header and payload together (and
     * any frames behind it); rb is allocated on the first read. */
    uint8_t *rb;
    size_t rb_pos, rb_len;
    gw_tcp_hdr_t r_hdr; /* the last complete header */
    int r_held;         /* r_hdr is a DATA header waiting for its receive */
    size_t r_part_off, r_part_len, r_done;
    int goodbye; /* the peer sent GOODBYE on this socket */
    int eof;     /* ... and then closed it: nothing more to read */
    int dead;    /* failed (reset, EOF mid-frame): write nothing more */
} gw_tcp_sock_t;

typedef struct gw_tcp_peer {
    int rank;
    char addr_str[64];            /* its listening address, for messages */
    struct sockaddr_storage addr; /* where we connect to it */
    socklen_t addr_len;
    gw_tcp_sock_t *socks;            /* nsocks entries */
    gw_request_t *sq_head, *sq_tail; /* sends, FIFO, unfinished only */
    gw_request_t *rq_head, *rq_tail; /* receives, FIFO, unfinished only */
    uint64_t s_next, r_next;         /* index given to the next send / receive */
    int goodbye;                     /* GOODBYE arrived on socket 0: no more messages */
    /* Receipts (GW_REQ_RECEIPT). Sends written in full whose receipt has not
     * come yet wait in aq; `acked` is the highest index the peer's receipts
     * named. rc_due is the highest index of ours that matched a message
     * asking for a receipt, rc_sent the highest one a RECEIPT frame carried
     * (or is carrying). Receipts are cumulative: messages match in order, so
     * "accepted up to n" covers every message before n. */
    gw_request_t *aq_head, *aq_tail;
    uint64_t acked;
    uint64_t rc_due, rc_sent;
    /* Connections (tcp_mesh.c): up once all nsocks are, and then in
     * progress()'s poll set; outs while we dial them, given up at
     * dial_deadline. */
    int up;
    struct gw_tcp_out *outs;
    int64_t dial_deadline;
    /* A higher peer that we need but that has not dialled us is asked to
     * (a knock, tcp_conn.c): the connection carrying the request while it
     * is made, and whether it was made (tcp_mesh.c). */
    int knock_fd;
    int knocked;
    int64_t knock_at;    /* knocked and not yet dialled back: knock again then */
    int knock_gap;       /* ms until the next knock, doubling (tcp_mesh.c) */
    int knock_listed;    /* in the mesh's list of peers whose dial we await */
    uint64_t knock_sent; /* the counter of our last knock to it (sock.h) */
    uint64_t knock_seen; /* the counter of its last knock that we acted on */
    int dial_for_knock;  /* we dial it because it knocked, not for a request of
                          * ours: failing to, while we have none, fails nothing */
} gw_tcp_peer_t;

typedef struct gw_tcp_mesh gw_tcp_mesh_t; /* tcp_conn.c */

typedef struct gw_tcp {
    gw_transport_t base; /* first: gw__transport_open_base() allocates through it */
    int ndata;           /* data sockets per peer (GW_NSOCKS): message parts go there */
    int nsocks;          /* connections per peer: ndata, then the control one (tcp.c) */
    int timeout_ms;
    gw_tcp_bufs_t bufs;
    uint8_t job_id[16];
    uint8_t data_key[GW_SOCK_KEY_LEN]; /* what every connection proves (transport.h) */
    int listen_fd;                     /* open for the transport's life when it connects lazily */
    int lazy;                          /* connect on first use (gw_transport_params_t.lazy) */
    gw_tcp_mesh_t *mesh;               /* connections being made; NULL once connect() is eager */
    char local_str[64];                /* our listening address */
    gw_tcp_peer_t *peers;              /* size entries; ours is unused */
    struct pollfd *pfds; /* one per socket of the peers up, for progress(), and the listener */
    gw_tcp_sock_t **pfd_socks;
    gw_tcp_peer_t **pfd_peers;
    int npfds;
    uint64_t ncompleted; /* requests completed so far, to tell rounds that did work */
    int64_t spin_ns;     /* GW_TCP_SPIN_US: poll without sleeping this long before blocking */
    int spin_misses;     /* spins in a row that ended without an answer (tcp_progress.c) */
    int spin_rest;       /* waits left that sleep at once, after too many such spins */
    /* System calls of the data path, for the trace at close and the tests
     * that hold the path to one read per small frame and no poll() before a
     * write that the kernel can take. */
    uint64_t nreads, npolls;
} gw_tcp_t;

static inline gw_tcp_t *gw__tcp_of(gw_transport_t *t)
{
    return gw__container_of(t, gw_tcp_t, base);
}

/* Parts of a len-byte message over nsocks sockets, and the byte range of
 * part k. Both ends compute them from the length alone. */
static inline size_t gw__tcp_nparts(size_t len, int nsocks)
{
    return gw__transport_nparts(len, GW_TCP_MIN_PART, nsocks);
}
#define gw__tcp_part_range gw__transport_part_range

/* tcp_wire.c */
void gw__tcp_hdr_encode(const gw_tcp_hdr_t *h, uint8_t out[GW_TCP_HDR_SIZE]);
void gw__tcp_hdr_decode(const uint8_t in[GW_TCP_HDR_SIZE], gw_tcp_hdr_t *h);
void gw__tcp_hello_encode(const gw_tcp_hello_t *h, uint8_t out[GW_TCP_HELLO_SIZE]);
void gw__tcp_hello_decode(const uint8_t in[GW_TCP_HELLO_SIZE], gw_tcp_hello_t *h);
/* Generous socket buffers where the kernel grants them (see tcp_wire.c),
 * and TCP_NODELAY; failures are warned about, not fatal. */
void gw__tcp_pick_bufs(const gw_logger_t *lg, gw_tcp_bufs_t *bufs);
void gw__tcp_set_bufs(const gw_logger_t *lg, const gw_tcp_bufs_t *bufs, int fd);
void gw__tcp_tune_established(const gw_logger_t *lg, int fd, int peer, int idx);
/* Address blob layout (GW_TRANSPORT_ADDR_MAX bytes, big-endian integers):
 *   0  u32 GW_TCP_ADDR_MAGIC     4  u8 protocol version
 *   5  the socket address as sock.h lays it out (GW_SOCK_ADDR_WIRE bytes):
 *   5  u8 family (4 or 6)        6  u16 port     8  16 bytes address (IPv4: the first 4)
 *  24  u32 IPv6 scope id         28.. zero
 * decode: GW_ERR_PROTOCOL for a blob that is not one of ours. */
void gw__tcp_addr_encode(const struct sockaddr *sa, uint8_t blob[GW_TRANSPORT_ADDR_MAX]);
gw_status_t gw__tcp_addr_decode(const uint8_t blob[GW_TRANSPORT_ADDR_MAX],
                                struct sockaddr_storage *out, socklen_t *out_len);

/* tcp_mesh.c */
#define GW_TCP_MAX_ADMITTING 256  /* connections of real ranks being admitted at once */
#define GW_TCP_KNOCK 0xffffffffu  /* hello.sock_idx of a knock: "dial me" (tcp_conn.c) */
#define GW_TCP_KNOCK_AGAIN_MS 250 /* a knocked peer that has not dialled is knocked again */
gw_status_t gw__tcp_connect(gw_transport_t *base, const uint8_t *all_addrs);
/* A request for peer was posted: when it is ours to dial and not connected
 * or under way, start dialling it (lazy connections). */
gw_status_t gw__tcp_want_peer(gw_tcp_t *t, int peer);
/* peer, a lower rank, knocked and proved it: dial it, unless connected or
 * under way. */
gw_status_t gw__tcp_knocked(gw_tcp_t *t, int peer);
/* Connections are being made (dials, handshakes): poll them soon. */
int gw__tcp_mesh_busy(const gw_tcp_t *t);
/* Accept, dial and shake hands as far as possible without waiting; fails
 * (the caller fails the transport) on a fatal error or a peer we dialled
 * in vain for timeout_ms. */
gw_status_t gw__tcp_mesh_progress(gw_tcp_t *t);
/* Peers we knocked on are awaited: knock again on those due (a peer that
 * died after our knock then refuses, and is named). */
int gw__tcp_mesh_awaiting(const gw_tcp_t *t);
gw_status_t gw__tcp_mesh_knock_again(gw_tcp_t *t);
void gw__tcp_mesh_free(gw_tcp_t *t);

/* tcp_progress.c */
/* One recv() into s's staging buffer, after the bytes not yet parsed
 * (moved to its start); what recv() returned (-1 with errno, ENOMEM when
 * the buffer cannot be allocated). */
ssize_t gw__tcp_rb_fill(gw_tcp_t *t, gw_tcp_sock_t *s);
gw_status_t gw__tcp_progress(gw_transport_t *base, const gw_msg_tag_t *current, int wait_ms);

/* tcp_fail.c */
/* Break the transport (gw__transport_fail in transport/base.h): log once,
 * complete every pending request with st, return the sticky status. */
#define gw__tcp_fail(t, st, ...) gw__transport_fail(&(t)->base, (st), __VA_ARGS__)
/* The same with the message prefixed by "rank R (address) ". */
#define gw__tcp_peer_fail(t, p, st, ...) \
    gw__transport_peer_fail(&(t)->base, (p)->rank, (st), __VA_ARGS__)
/* The base's hooks (gw__transport_class_t): fail every queued request and
 * forget the frames in flight; "rank R (address)". */
void gw__tcp_fail_pending(gw_transport_t *base, gw_status_t st);
void gw__tcp_describe_peer(const gw_transport_t *base, int peer, char *buf, size_t cap);
/* p sent the ABORT frame h: the transport fails with its status, origin
 * and culprit (gw__transport_peer_aborted). */
gw_status_t gw__tcp_peer_aborted(gw_tcp_t *t, const gw_tcp_peer_t *p, const gw_tcp_hdr_t *h);
/* Socket s of p failed: a send/recv errno, EOF, or an error or hang-up on a
 * socket we were not reading. */
gw_status_t gw__tcp_sock_errno(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s, int err,
                               const char *op);
gw_status_t gw__tcp_sock_eof(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s);
gw_status_t gw__tcp_idle_sock_error(gw_tcp_t *t, gw_tcp_peer_t *p, gw_tcp_sock_t *s);

/* tcp_spin.c: poll(t->pfds[0 .. np), timeout ms) as progress waits: after
 * up to t->spin_ns of non-blocking polls, unless spinning stands down. */
int gw__tcp_poll_spin(gw_tcp_t *t, int np, int timeout);

#endif
