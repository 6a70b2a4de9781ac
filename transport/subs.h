/*
 * subs.h - the sub-transports of a transport made of others: the mux
 * (transport/mux.c: one transport per peer, the plan's choice) and the
 * verbs rails (transport/ib/ib_rails.c: every rail to a peer at once).
 *
 * What both need alike is here: which of the requests handed to each
 * sub-transport are not complete yet (so that a wait can go to the one
 * that is busy, and a round that moved something is told from one that
 * did not), and one failure breaking the whole. When a sub-transport
 * fails, the composite takes its status, culprit, origin and blame as its
 * own, and aborts the others at once, telling their peers whom the
 * failing one blamed, as the communicator would: so every pending request
 * completes, and the whole job learns of it.
 *
 * The rule that makes it safe: a request the caller has seen complete may
 * be released at once, so the pending lists are pruned after every call
 * into a sub-transport, before control returns to the caller.
 */
#ifndef GW_TRANSPORT_SUBS_H
#define GW_TRANSPORT_SUBS_H

#include <stdint.h>

#include "transport/transport.h"

typedef struct gw_sub {
    gw_transport_t *t; /* NULL once closed (or never opened) */
    /* Requests handed to it that were not complete when last looked at. */
    gw_request_t **pend;
    int npend, cap;
} gw_sub_t;

typedef struct gw_subs {
    gw_transport_t *owner; /* the composite, whose failure fields a failure sets */
    const char *subsys;    /* for the composite's log lines */
    gw_sub_t *sub;         /* n of them, owned by the composite */
    int n;
    uint64_t completed; /* requests seen complete, ever */
} gw_subs_t;

/* Hand req to sub-transport i (isend when send, else irecv) and keep it
 * while it is pending. A failure of the sub-transport (anything but
 * GW_ERR_INVALID_ARG, a refused request) breaks the composite
 * (gw__subs_fail) and is returned. */
gw_status_t gw__subs_post(gw_subs_t *s, int i, gw_request_t *req, int send);

/* Progress of sub-transport i; a failure breaks the composite. */
gw_status_t gw__subs_progress(gw_subs_t *s, int i, const gw_msg_tag_t *current, int wait_ms);

/* One non-blocking round over every open sub-transport. */
gw_status_t gw__subs_round(gw_subs_t *s, const gw_msg_tag_t *current);

/* Completed requests and bytes moved so far: a round that changed it did
 * something. */
uint64_t gw__subs_moved(const gw_subs_t *s);

/* Index of the only sub-transport with pending requests, -1 when none is
 * busy, -2 when several are. */
int gw__subs_busy(const gw_subs_t *s);

/* Sub-transport i failed with st: the composite fails with it (the first
 * failure only) and the others are aborted. Returns the composite's
 * failure. */
gw_status_t gw__subs_fail(gw_subs_t *s, int i, gw_status_t st);

/* The composite aborts: it fails with GW_ERR_ABORTED (unless it had
 * failed already) and every sub-transport is aborted with why. */
void gw__subs_abort(gw_subs_t *s, const gw_abort_info_t *why);

/* Close every sub-transport and free the lists (not the array). */
void gw__subs_close(gw_subs_t *s);

#endif
