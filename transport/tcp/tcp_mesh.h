/*
 * tcp_mesh.h - what the TCP transport's connection files share:
 * tcp_conn.c (the handshake of one connection, both ways) and tcp_mesh.c
 * (which connections to make and when: lazily or all at once).
 */
#ifndef GW_TRANSPORT_TCP_MESH_H
#define GW_TRANSPORT_TCP_MESH_H

#include <poll.h>

#include "transport/tcp/tcp_internal.h"

#define MAX_STRANGERS 64 /* connections not yet admitted, kept at once */

/* OUT_DIAL: waiting for the next attempt, or for connect() (see dial). */
typedef enum out_state { OUT_DIAL, OUT_SHAKE, OUT_DONE } out_state_t;

/* One connection we dial: peer->outs holds nsocks of them while we dial. */
struct gw_tcp_out {
    gw_sock_dial_t dial;
    int peer, idx;
    out_state_t state;
    gw_sock_shake_t sh;
};
typedef struct gw_tcp_out out_conn_t;

typedef struct in_conn {
    int fd; /* -1 once handed over or dropped */
    char addr[64];
    int64_t since; /* accepted at (ms): a handshake that lasts is dropped */
    gw_sock_shake_t sh;
    int proven;      /* it proved the key and is being admitted */
    int bad_nsocks;  /* its hello's sockets per peer differ from ours */
    uint32_t nsocks; /* ... which are these */
    uint32_t from, idx;
    int knock; /* its hello is a knock: its proof is read next */
} in_conn_t;

/* Why an accepted connection was dropped, counted by kind once the first
 * strangers were logged (transport/sock_strangers.c). */
enum {
    TCP_DROP_CLOSED,  /* closed, silent or broken before the handshake ended */
    TCP_DROP_GARBAGE, /* not our magic */
    TCP_DROP_PROOF,   /* a wrong proof, or a replay */
    TCP_DROP_CLAIM,   /* its hello's ids are not for us (job, ranks, socket) */
    TCP_DROP_EVICTED, /* too many connections not yet admitted */
    TCP_DROP_KINDS
};

/* What connects peers, for the transport's life when it connects lazily
 * (gw_tcp_t.mesh), for connect() alone when it connects eagerly. */
typedef struct gw_tcp_mesh {
    gw_tcp_t *t;
    int *dialing; /* peers whose connections we dial now (their outs) */
    int ndialing;
    int *knocking; /* higher peers we are asking to dial us (knock_fd) */
    int nknocking;
    int *awaiting; /* higher peers knocked on, whose dial we wait for */
    int nawaiting;
    in_conn_t *ins; /* accepted connections not yet admitted */
    int nin, cap_in;
    struct pollfd *pfds;           /* listener, the dialled sockets, then the accepted ones */
    int npeers, nup;               /* peers over TCP, and those fully connected */
    gw_sock_seen_t seen;           /* dialler nonces seen, to name replays */
    gw_sock_strangers_t strangers; /* dropped connections, logged with a bound */
} mesh_t;

/* tcp_conn.c: the handshakes. */
void gw__tcp_make_hello(const gw_tcp_t *t, int from, int to, int idx,
                        uint8_t out[GW_TCP_HELLO_SIZE]);
/* Connecting lazily, a refused connection means that the peer is gone. */
gw_status_t gw__tcp_refused(gw_tcp_t *t, const gw_tcp_peer_t *p);
/* Move a connection we dial on after poll() reported revents (0: it was
 * not polled); a fatal error is returned, a failed attempt retried. */
gw_status_t gw__tcp_out_step(mesh_t *m, out_conn_t *o, short revents);
/* Accept what waits on the listener; drop c, a stranger, saying why; move
 * an accepted connection's handshake on. */
void gw__tcp_in_accept(mesh_t *m);
void gw__tcp_in_drop(mesh_t *m, in_conn_t *c, int kind, const char *why);
gw_status_t gw__tcp_in_step(mesh_t *m, in_conn_t *c);

/* tcp_mesh.c: once every connection of p is up, p joins progress(). */
void gw__tcp_peer_ready(mesh_t *m, gw_tcp_peer_t *p);
/* We dial p because it knocked and it failed (refused, or no answer in
 * time): 1 when that fails nothing, since no request of ours waits for p
 * (the dial is given up, and made again when one does); 0 when it fails
 * the transport as any dial of ours would. */
int gw__tcp_dial_give_up(mesh_t *m, gw_tcp_peer_t *p, const char *why);

#endif
