/*
 * ib_cm.h - what the parts of the rdmacm set-up share: ib_cm.c (listening,
 * dialling, the events), ib_cm_connect.c (connect(), and the set-up on
 * first use), ib_cm_cand.c (incoming
 * connections, until they have proven the job's key) and ib_cm_knock.c
 * (knocks: a lower rank asks a higher one to dial it, ib_lazy.c).
 */
#ifndef GW_TRANSPORT_IB_CM_H
#define GW_TRANSPORT_IB_CM_H

#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

/* A proof buffer: the dialler's proof message (GW_IB_CM_PROOF_SIZE), padded. */
#define GW_IB_CM_PROOF_SLOT 48

/* REJ reasons (InfiniBand Architecture Specification, the CM's REJ
 * message), the status of a REJECTED event. */
#define GW_IB_REJ_INVALID_SERVICE_ID 8 /* nobody listens there */
#define GW_IB_REJ_CONSUMER_DEFINED 28  /* the listener rejected (a knock delivered) */

/* Why an incoming request or connection was dropped: the kinds that
 * t->cm_strangers counts (transport/sock_strangers.c). */
enum {
    CM_DROP_CLOSED,  /* it failed or went away before its proof */
    CM_DROP_GARBAGE, /* not a gradwire request of this version */
    CM_DROP_PROOF,   /* a wrong proof, or a knock played back */
    CM_DROP_CLAIM,   /* another job, or a claim that cannot be ours */
    CM_DROP_EVICTED, /* made room for a newer connection */
    CM_DROP_KINDS
};

typedef enum gw_ib_cm_state {
    CM_IDLE,
    CM_WAIT,
    CM_ADDR,
    CM_ROUTE,
    CM_CONNECTING,
    CM_UP
} gw_ib_cm_state_t;

/* One (peer, QP): the attempt we dial, or the proven connection we accepted. */
struct gw_ib_cm_conn {
    int used; /* the peer is ours (see transport.h on all-zero blobs) */
    int peer, qp;
    int out; /* we connect (the peer's rank is lower) */
    gw_ib_cm_state_t state;
    struct rdma_cm_id *id;
    gw_sock_retry_t retry;             /* CM_WAIT: when to try again */
    uint8_t nonce[GW_IB_CM_NONCE_LEN]; /* out: ours in the current request */
    char why[160];
};

typedef struct gw_ib_cm_conn gw_ib_cm_conn_t;

typedef enum gw_ib_cand_state { CAND_FREE, CAND_PROVING, CAND_DEAD } gw_ib_cand_state_t;

/* An incoming connection that has not proven the key (yet). */
struct gw_ib_cm_cand {
    gw_ib_cand_state_t state;
    struct rdma_cm_id *id;
    uint32_t qpn;
    int peer, qp, nqps; /* what its request claims */
    int64_t since;
    gw_ib_cm_shake_t shake;
    char addr[64];
};

typedef struct gw_ib_cm_cand gw_ib_cm_cand_t;

/* ---- ib_cm.c ------------------------------------------------------------- */

gw_ib_cm_conn_t *gw__ib_cm_conn_of(gw_ib_t *t, int peer, int qp);
/* The registered buffer of proof `slot`: one per candidate (received), then
 * one per conn (sent: GW_IB_CM_CANDS + its index). */
uint8_t *gw__ib_cm_proof_buf(gw_ib_t *t, int slot);
gw_status_t gw__ib_cm_nonce(gw_ib_t *t, uint8_t out[GW_IB_CM_NONCE_LEN]);
/* The remote address of id, for messages. */
void gw__ib_cm_peer_str(struct rdma_cm_id *id, char *buf, size_t cap);
void gw__ib_cm_ack_timeout(gw_ib_t *t, struct rdma_cm_id *id);
/* A QP on id, on our PD and CQ; whom names it in an error. */
gw_status_t gw__ib_cm_create_qp(gw_ib_t *t, struct rdma_cm_id *id, const char *whom);
/* The parameters of rdma_connect and rdma_accept, with this private data. */
void gw__ib_cm_param(gw_ib_t *t, struct rdma_conn_param *cp, const uint8_t *pdata, size_t len);

/* Destroy c's id and its QP, if any (its QP number is retired). */
void gw__ib_cm_drop_id(gw_ib_t *t, gw_ib_cm_conn_t *c);
/* Start (or retry) the dial of c: resolve the peer's address; the rest
 * follows from the events. */
void gw__ib_cm_out_start(gw_ib_t *t, gw_ib_cm_conn_t *c);
/* Take one event off the channel and handle it (as the set-up's when
 * connecting, or when the pair is still being set up lazily); 1: handled
 * one, 0: none left. */
int gw__ib_cm_next_event(gw_ib_t *t, gw_status_t *st, int connecting);
/* Our address with port 0: where dials and knocks come from. */
void gw__ib_cm_src_addr(const gw_ib_t *t, struct sockaddr_storage *src);

/* ---- ib_cm_knock.c ------------------------------------------------------- */

/* id->context is a conn, a candidate or a peer (a knock's id): the peer,
 * or NULL. */
gw_ib_peer_t *gw__ib_cm_knock_of(const gw_ib_t *t, void *ctx);
/* An event of p's knock. */
gw_status_t gw__ib_cm_knock_event(gw_ib_t *t, gw_ib_peer_t *p, enum rdma_cm_event_type type,
                                  int status);
/* Destroy p's knock id, if any. */
void gw__ib_cm_knock_end(gw_ib_t *t, gw_ib_peer_t *p);

/* ---- ib_cm_cand.c -------------------------------------------------------- */

/* id->context is a conn or a candidate: the candidate, or NULL. */
gw_ib_cm_cand_t *gw__ib_cm_cand_of(const gw_ib_t *t, void *ctx);
/* A connection request (its private data copied): rejected with one WARN
 * line, or accepted as a candidate. */
void gw__ib_cm_on_request(gw_ib_t *t, struct rdma_cm_id *id, const uint8_t *pdata,
                          size_t pdata_len);
/* An event of a candidate's id. */
void gw__ib_cm_cand_event(gw_ib_t *t, gw_ib_cm_cand_t *k, enum rdma_cm_event_type type, int status);
/* A QP number that is going away: completions still queued for it (its
 * receives flushed when the CM moved it to the error state) are strays,
 * not a protocol error (gw__ib_cm_stray). */
void gw__ib_cm_retire_qpn(gw_ib_t *t, uint32_t qpn);
/* Whether a candidate waits for its proof (connect() then polls the CQ). */
int gw__ib_cm_proving(const gw_ib_t *t);
/* Every rank is connected: drop and destroy what is left of the candidates. */
void gw__ib_cm_cands_end(gw_ib_t *t);
/* Destroy every candidate and free the table (close). */
void gw__ib_cm_cands_free(gw_ib_t *t);

#endif
