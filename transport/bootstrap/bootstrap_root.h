/*
 * bootstrap_root.h - what the two files of rank 0's join share:
 *
 *   bootstrap_root.c   the protocol on each connection (HELLO, CHALLENGE,
 *                      RESPONSE, REJECT), the join loop, the welcomes
 *   bootstrap_table.c  the table of unfinished handshakes: accepting,
 *                      evicting, expiring, logging the strangers, the
 *                      descriptor limit, and the clean-up after the join
 *
 * The root port is open to anyone, so the join must stay quick while
 * thousands of strangers (silent, garbage, a wrong token, connect-and-
 * close) arrive with the ranks; bootstrap_table.c says how.
 */
#ifndef GW_TRANSPORT_BOOTSTRAP_ROOT_H
#define GW_TRANSPORT_BOOTSTRAP_ROOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "transport/bootstrap/bootstrap_internal.h"

typedef enum gw_bs_conn_state {
    GW_BS_CONN_HELLO,     /* reading the HELLO */
    GW_BS_CONN_CHALLENGE, /* writing the CHALLENGE */
    GW_BS_CONN_RESPONSE,  /* reading the RESPONSE (or the rank's REJECT) */
    GW_BS_CONN_REJECT,    /* writing our REJECT; closed once it is out */
    GW_BS_CONN_WRONG,     /* sent a wrong proof: answered at its handshake deadline */
    GW_BS_CONN_JOINED,    /* authenticated and accepted, waiting for the others */
    GW_BS_CONN_CLOSED,    /* dropped; freed at the end of the pass */
} gw_bs_conn_state_t;

/* Why a connection that never proved the token was dropped, for the
 * summaries of the strangers. */
typedef enum gw_bs_drop {
    GW_BS_DROP_SILENT,  /* no complete handshake in time */
    GW_BS_DROP_GARBAGE, /* not the bootstrap protocol */
    GW_BS_DROP_AUTH,    /* a wrong proof, or the peer rejected ours */
    GW_BS_DROP_LEFT,    /* closed or reset by the peer */
    GW_BS_DROP_EVICTED, /* made room for a newer connection */
    GW_BS_DROP_KINDS
} gw_bs_drop_t;

/* A link of one of the table's lists (circular, the list's head its
 * sentinel). */
typedef struct gw_bs_link {
    struct gw_bs_link *prev, *next;
} gw_bs_link_t;

typedef struct gw_bs_conn {
    int fd;
    gw_bs_conn_state_t state;
    int rank; /* as claimed in the HELLO */
    int size;
    int64_t deadline;     /* of the handshake */
    int hdr_done;         /* the header of the message being read is decoded */
    uint32_t events;      /* what epoll watches for */
    gw_bs_link_t pending; /* in join.pending while the handshake is unfinished */
    gw_bs_link_t evict;   /* in join.silent until the whole HELLO is in; in
                           * join.wrong after a wrong proof */
    struct gw_bs_conn *dead_next;
    gw_bs_hdr_t hdr;
    gw_sock_io_t io;
    char addr[GW_BS_ADDR_TEXT];
    uint8_t client_nonce[GW_BS_NONCE_LEN];
    uint8_t server_nonce[GW_BS_NONCE_LEN];
    uint8_t buf[GW_BS_SMALL_MSG_MAX];
} gw_bs_conn_t;

typedef struct gw_bs_join {
    gw_bootstrap_t *bs;
    const uint8_t *key;
    size_t key_len;
    int lfd;
    int ep; /* epoll over lfd (data.ptr NULL) and every connection */
    int handshake_ms;
    gw_bs_link_t pending; /* unfinished handshakes, in accept order */
    gw_bs_link_t silent;  /* those of them without a whole HELLO, in accept order */
    gw_bs_link_t wrong;   /* those that sent a wrong proof, in accept order */
    size_t npending, cap;
    gw_bs_conn_t *dead;     /* closed in this pass, freed at its end */
    gw_bs_conn_t **by_rank; /* [size]: the joined connection of each rank */
    int joined;             /* ranks other than 0 */
    gw_status_t fatal;
    int64_t accept_paused_until; /* 0: accepting */
    int fd_short_warned;
    /* the strangers: logged one by one, then counted and summed up
     * (transport/sock_strangers.c) */
    gw_sock_strangers_t strangers;
    /* RLIMIT_NOFILE as found, and as set for the join (0: not raised) */
    rlim_t nofile_found, nofile_set;
} gw_bs_join_t;

/* ---- bootstrap_root.c ---------------------------------------------------- */

/* Move the connection's handshake on: its socket is ready (or, just
 * accepted, may be). */
void gw__bs_conn_event(gw_bs_join_t *j, gw_bs_conn_t *c);

/* ---- bootstrap_table.c --------------------------------------------------- */

/* Empty lists, and the descriptor limit raised for the table (which it
 * sizes). */
void gw__bs_table_init(gw_bs_join_t *j);
/* The listener is readable: accept what waits (a batch), making room. */
void gw__bs_table_accept(gw_bs_join_t *j);
/* Drop the handshakes past their deadline; answer the wrong proofs. */
void gw__bs_table_expire(gw_bs_join_t *j, int64_t now);
/* The earliest handshake deadline, or INT64_MAX. */
int64_t gw__bs_table_next_deadline(const gw_bs_join_t *j);
/* The HELLO is in: no longer among the first to evict. */
void gw__bs_table_spoke(gw_bs_join_t *j, gw_bs_conn_t *c);
/* A wrong proof: the connection waits for its deadline, first to evict. */
void gw__bs_table_wrong(gw_bs_join_t *j, gw_bs_conn_t *c);
/* The rank proved the token and joined: out of the table for good. */
void gw__bs_table_joined(gw_bs_join_t *j, gw_bs_conn_t *c);
/* Leave the table and epoll, close; freed by gw__bs_table_free_dead. */
void gw__bs_conn_close(gw_bs_join_t *j, gw_bs_conn_t *c);
/* Log (or count) a stranger's connection with why, and close it. */
void gw__bs_conn_drop(gw_bs_join_t *j, gw_bs_conn_t *c, gw_bs_drop_t kind, const char *why);
/* Log (or count) it only. */
void gw__bs_stranger(gw_bs_join_t *j, const gw_bs_conn_t *c, gw_bs_drop_t kind, const char *why);
/* One line for the strangers counted since the last one, at most once a
 * second unless forced; and when the next one is due (INT64_MAX: none). */
void gw__bs_strangers_summary(gw_bs_join_t *j, int64_t now, int force);
int64_t gw__bs_strangers_summary_due(const gw_bs_join_t *j);
/* Free what this pass closed. */
void gw__bs_table_free_dead(gw_bs_join_t *j);
/* The join is over: close what is left of the table (in a thread of its
 * own when it is much) and restore the descriptor limit. */
void gw__bs_table_cleanup(gw_bs_join_t *j);

#endif
