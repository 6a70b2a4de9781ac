/*
 * ib_oob.h - what the two halves of the out-of-band set-up share: ib_oob.c
 * (the listener, and one connection's handshake: hellos, proofs, READY
 * bytes) and ib_oob_mesh.c (every connection at once: dials, accepts,
 * strangers, connect(), and the same after connect() when pairs connect
 * on first use).
 */
#ifndef GW_TRANSPORT_IB_OOB_H
#define GW_TRANSPORT_IB_OOB_H

#include <poll.h>

#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

#define MAX_STRANGERS 64
#define READY_BYTE 0x52

typedef enum phase {
    P_DIAL,       /* out: waiting to retry connect(), or connect() in progress */
    P_SHAKE,      /* the hellos and the proofs of the key (sock_auth.c) */
    P_SEND,       /* sending our READY byte */
    P_RECV_READY, /* receiving the peer's READY byte */
    P_DONE,
} phase_t;

typedef struct conn {
    gw_sock_dial_t s; /* the socket; the rest serves only the connections we dial */
    int peer;         /* -1: incoming, not proven yet */
    int out;          /* we dialled */
    phase_t phase;
    gw_sock_shake_t sh;
    uint32_t claim; /* incoming: the rank its hello claims */
    int bad_nqps;   /* incoming: its hello's QPs per peer differ from ours */
    uint8_t byte;   /* READY, sent or received */
    size_t done;
    uint64_t accepted; /* incoming: its place in the order of accepts */
    char addr[64];     /* incoming: where it came from */
} conn_t;

/* Why an incoming connection was dropped: the kinds its stranger log
 * counts (transport/sock_strangers.c). */
enum {
    OOB_DROP_CLOSED,  /* closed or silent before its proof */
    OOB_DROP_GARBAGE, /* not a hello of this protocol */
    OOB_DROP_PROOF,   /* a wrong proof, or a knock or hello played back */
    OOB_DROP_CLAIM,   /* a hello of another job, or a claim that cannot be ours */
    OOB_DROP_EVICTED, /* made room for a newer connection */
    OOB_DROP_KINDS
};

typedef struct gw_ib_oob_mesh {
    gw_ib_t *t;
    conn_t *c;
    int n, cap;
    uint32_t *peer_psn;            /* our first PSN towards each rank */
    int pending;                   /* peers not done */
    uint64_t accepts;              /* connections accepted so far */
    gw_sock_seen_t seen;           /* dialler nonces seen, to name replays */
    struct pollfd *pfds;           /* the listener and every connection */
    gw_sock_strangers_t strangers; /* dropped connections, logged with a bound */
    char where[96];                /* "the out-of-band port ADDR", for its lines */
} mesh_t;

static inline const gw_logger_t *gw__ib_oob_log(const mesh_t *m) { return m->t->base.log; }

/* ---- ib_oob.c ------------------------------------------------------------- */

/* Move c as far as its socket allows (revents: what poll() said, or 0). */
gw_status_t gw__ib_oob_step(mesh_t *m, conn_t *c, short revents);
/* An incoming connection that is not (or not yet proven to be) a rank of
 * this job, dropped for a reason of kind (OOB_DROP_*): a WARN line with its
 * address and why for the first ones, then counted and summed up
 * (transport/sock_strangers.c); its slot is free. */
void gw__ib_oob_drop(mesh_t *m, conn_t *c, int kind, const char *why);

/* A hello from this rank to peer: zero but for magic, version, job id and
 * ranks (the caller fills in the rest). */
void gw__ib_oob_hello_head(const gw_ib_t *t, int peer, gw_ib_hello_t *h);

/* ---- ib_oob_mesh.c -------------------------------------------------------- */

/* The QPs for rank r (INIT, receives posted), its block and room in the
 * CQ, and our first PSN towards it, unless they exist. */
gw_status_t gw__ib_oob_peer_qps(mesh_t *m, int r);

#endif
