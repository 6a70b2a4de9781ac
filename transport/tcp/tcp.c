/*
 * tcp.c - the TCP transport: framed, tagged messages between every pair of
 * ranks over plain sockets.
 *
 * How data moves. open() picks the local address (transport/sock_addr.c), binds a
 * non-blocking listening socket and returns its address as a blob that the
 * bootstrap hands to every rank. Each pair of ranks is joined by nsocks
 * connections, the higher rank dialling the lower one, when a request
 * first needs them (or all of them in connect(), when asked to connect
 * eagerly: tcp_mesh.c), and a hello on each connection (job id, ranks,
 * socket index) and the proof of the job's key make sure that strangers on
 * our port are dropped instead of being taken for peers (tcp_conn.c). From then on nothing moves unless the owner calls
 * progress() (tcp_progress.c): isend() and irecv() only queue a request,
 * first in first out per peer and per direction, and each progress() round
 * polls every socket once and moves as many bytes as the kernel takes or
 * has, for every peer and both directions in the same round, so that
 * symmetric exchanges (rings, where everyone sends and receives at once)
 * cannot deadlock on full socket buffers.
 *
 * A message of len bytes travels in nparts = min(nsocks, max(1, len / 64 KiB))
 * parts: contiguous byte ranges of near-equal size, part k on socket k, each
 * preceded on its socket by a frame header. Several sockets per peer let the
 * kernel run several TCP streams (and, on multi-queue NICs, several cores) in
 * parallel; parts of at least 64 KiB keep the per-part header and system call
 * cost negligible, and small messages go on socket 0 alone. Both ends derive
 * nparts from the length, so no extra control message is needed; since
 * socket 0 carries part 0 of every message, in order, its headers tell the
 * receiver the tag and length of each next message. The receiver checks that
 * header against the posted receive (tag and length must match exactly)
 * before it copies a byte of payload into the user's buffer. A small frame
 * is written with one sendmsg() and read with one recv() into the
 * connection's staging buffer, header and payload together; a large
 * payload is read straight into the user's buffer. Where no receive is
 * posted yet, the receiver parses the next header only and leaves the rest
 * in the staging buffer (bounded) and the kernel: natural back-pressure on
 * the sender, and the header read ahead still reveals a peer that is in
 * another collective than ours (gw__tag_conflicts). Details, and the brief
 * spin before a wait sleeps, in tcp_progress.c.
 *
 * Wire format (integers big-endian; byte layouts in tcp_wire.c):
 *   hello, once per connection in each direction (56 bytes), then the
 *   proof of the data-plane key (transport/sock_auth.c):
 *     magic, protocol version, job id[16], from rank, to rank, nonce[16],
 *     socket index, sockets per peer
 *   frame header (48 bytes), followed by part_len payload bytes:
 *     magic, type (DATA, GOODBYE, ABORT), tag.seq, tag.sig, status (ABORT),
 *     total message length, part offset, part length (ABORT: the ranks
 *     that first reported the failure and that it blames)
 * GOODBYE, ABORT and RECEIPT frames are a header alone. A sender writes them
 * only at a frame boundary of a socket, so the receiver always finds them
 * where it expects a header.
 *
 * Receipts. A send that asks for one (GW_REQ_RECEIPT: the public
 * point-to-point calls) completes only once the receiver matched its
 * header against the receive and accepted it: the DATA header says so in
 * its flags, and the receiver answers with a RECEIPT frame naming the
 * highest message index it accepted (cumulative, since messages match in
 * order). Receipts travel on one more connection per pair than GW_NSOCKS
 * asks for, the control connection (socket index nsocks), which carries no
 * data: on a data socket a receipt could queue behind a message the peer
 * has not posted a receive for yet, whose header it holds while the rest
 * waits in the kernel, and the peer's send would wait for a receipt stuck
 * behind its own unread message. A receiver that rejects a message fails
 * and aborts, and the ABORT frame (status, origin, culprit) fails the
 * send; ABORT and GOODBYE repeat the last receipt, so a receiver that
 * closes right after its receive still releases the sender, and messages
 * accepted before the one that failed complete with GW_OK on both ends.
 *
 * Failure. The first failure breaks the whole transport: every pending
 * request completes with it, it is logged once at ERROR naming the peer, and
 * every later call returns it (a communicator that failed must be rebuilt).
 * EOF without a preceding GOODBYE, a reset or a broken pipe means the peer
 * died (GW_ERR_REMOTE); a header with a bad magic is GW_ERR_PROTOCOL; an
 * ABORT frame carries the peer's status, the rank that first reported the
 * failure and the rank blamed for it, which become ours; a GOODBYE is
 * the peer's close() and is fine unless we still expect a message from it
 * (GW_ERR_REMOTE). Sends use MSG_NOSIGNAL, so a dead peer never raises
 * SIGPIPE in the user's process. abort() and close() never wait on a peer
 * for more than GW_TCP_SHUTDOWN_MS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env.h"
#include "transport/tcp/tcp_internal.h"

static const gw__transport_class_t tcp_class; /* at the end of the file */

static void tcp_free(gw_tcp_t *t)
{
    gw__tcp_mesh_free(t);
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    if (t->peers) {
        for (int r = 0; r < t->base.size; r++) {
            gw_tcp_sock_t *socks = t->peers[r].socks;
            if (!socks)
                continue;
            for (int k = 0; k < t->nsocks; k++) {
                if (socks[k].fd >= 0)
                    close(socks[k].fd);
                free(socks[k].rb);
            }
            free(socks);
        }
    }
    free(t->peers);
    free(t->pfds);
    free(t->pfd_socks);
    free(t->pfd_peers);
    explicit_bzero(t->data_key, sizeof(t->data_key));
    free(t);
}

static gw_status_t alloc_peers(gw_tcp_t *t)
{
    t->peers = calloc((size_t)t->base.size, sizeof(*t->peers));
    if (!t->peers)
        return GW_ERR_NO_MEMORY;
    for (int r = 0; r < t->base.size; r++) {
        gw_tcp_peer_t *p = &t->peers[r];
        p->rank = r;
        p->knock_fd = -1;
        strcpy(p->addr_str, "address not known yet");
        if (r == t->base.rank)
            continue;
        p->socks = calloc((size_t)t->nsocks, sizeof(*p->socks));
        if (!p->socks)
            return GW_ERR_NO_MEMORY;
        for (int k = 0; k < t->nsocks; k++) {
            p->socks[k].fd = -1;
            p->socks[k].idx = k;
        }
    }
    return GW_OK;
}

static gw_status_t tcp_open(const gw_transport_params_t *params, gw_transport_t **out,
                            uint8_t addr[GW_TRANSPORT_ADDR_MAX])
{
    if (!params || !out || !addr)
        return GW_ERR_INVALID_ARG;
    const gw_logger_t *lg = params->log;
    gw_transport_t *base = NULL;
    gw_status_t st = gw__transport_open_base(&tcp_class, params, sizeof(gw_tcp_t), &base);
    if (st != GW_OK)
        return st;
    gw_tcp_t *t = gw__tcp_of(base);
    if (params->nsocks < 1 || params->nsocks > GW_TCP_MAX_NSOCKS) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "%d sockets per peer (GW_NSOCKS) is not in [1, %d]",
                 params->nsocks, GW_TCP_MAX_NSOCKS);
        free(t);
        return GW_ERR_CONFIG;
    }
    t->ndata = params->nsocks;
    t->nsocks = params->nsocks + 1; /* the control connection: see the top of the file */
    t->timeout_ms = params->timeout_ms > 0 ? params->timeout_ms : GW_TCP_DEFAULT_TIMEOUT_MS;
    memcpy(t->job_id, params->job_id, sizeof(t->job_id));
    memcpy(t->data_key, params->data_key, sizeof(t->data_key));
    t->listen_fd = -1;
    t->lazy = params->lazy;
    long spin_us;
    if (gw__env_int(lg, GW_ENV_TCP_SPIN_US, &spin_us) != GW_OK) {
        free(t);
        return GW_ERR_CONFIG;
    }
    t->spin_ns = (int64_t)spin_us * 1000;
    st = alloc_peers(t);
    if (st != GW_OK) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "out of memory for %d peers", params->size);
        goto err_free;
    }

    struct sockaddr_storage ss;
    socklen_t sl = 0;
    char desc[160];
    st = gw__sock_pick_addr(lg, GW_TCP_SUBSYS, params->ifname, &params->default_addr,
                            params->default_addr_len, &ss, &sl, desc, sizeof(desc));
    if (st != GW_OK)
        goto err_free;
    gw__sock_addr_str((const struct sockaddr *)&ss, t->local_str, sizeof(t->local_str));
    t->listen_fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (t->listen_fd < 0) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "socket() for listening on %s: %m", t->local_str);
        st = GW_ERR_SYSTEM;
        goto err_free;
    }
    /* Accepted sockets inherit the buffer sizes; they must be set before
     * listen() to take part in the window scale of the handshake. */
    gw__tcp_pick_bufs(lg, &t->bufs);
    gw__tcp_set_bufs(lg, &t->bufs, t->listen_fd);
    if (bind(t->listen_fd, (const struct sockaddr *)&ss, sl) != 0) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "bind(%s) (%s): %m", t->local_str, desc);
        st = GW_ERR_SYSTEM;
        goto err_free;
    }
    /* Every peer may connect all its sockets at once, plus a few strangers. */
    long backlog = (long)params->size * t->nsocks + 64;
    if (listen(t->listen_fd, backlog > 65535 ? 65535 : (int)backlog) != 0) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "listen(%s): %m", t->local_str);
        st = GW_ERR_SYSTEM;
        goto err_free;
    }
    sl = sizeof(ss);
    if (getsockname(t->listen_fd, (struct sockaddr *)&ss, &sl) != 0) {
        GW_ERROR(lg, GW_TCP_SUBSYS, "getsockname() of the socket listening on %s: %m",
                 t->local_str);
        st = GW_ERR_SYSTEM;
        goto err_free;
    }
    gw__sock_addr_str((const struct sockaddr *)&ss, t->local_str, sizeof(t->local_str));
    gw__tcp_addr_encode((const struct sockaddr *)&ss, addr);
    GW_INFO(lg, GW_TCP_SUBSYS, "listening on %s (%s), %d data socket%s per peer and a control one",
            t->local_str, desc, t->ndata, t->ndata == 1 ? "" : "s");
    *out = &t->base;
    return GW_OK;

err_free:
    tcp_free(t);
    return st;
}

static gw_status_t tcp_post(gw_transport_t *base, gw_request_t *req)
{
    gw_tcp_t *t = gw__tcp_of(base);
    gw_tcp_peer_t *p = &t->peers[req->peer];
    GW_TCP_REQ_NPARTS(req) = gw__tcp_nparts(req->len, t->ndata);
    if (req->kind == GW_REQ_SEND) {
        GW_TCP_REQ_IDX(req) = ++p->s_next;
        gw__req_queue_push(&p->sq_head, &p->sq_tail, req);
    } else {
        GW_TCP_REQ_IDX(req) = ++p->r_next;
        gw__req_queue_push(&p->rq_head, &p->rq_tail, req);
    }
    if (p->goodbye)
        return gw__transport_post_refused(base, req, "already closed its communicator");
    gw_status_t st = gw__tcp_want_peer(t, req->peer);
    return st == GW_OK ? GW_OK : gw__tcp_fail(t, st, NULL);
}

/* A socket where the peer expects a header next: nothing half written. */
static int at_frame_boundary(const gw_tcp_sock_t *s)
{
    return s->fd >= 0 && !s->dead && !s->s_midframe &&
           !((s->sreq || s->s_receipt) && s->s_hdr_done > 0);
}

/* Write a GOODBYE or ABORT frame on every socket at a frame boundary,
 * giving up after budget_ms: a peer that stopped reading must not hold us.
 * Either carries the last receipt due to its peer (a RECEIPT frame in the
 * making is dropped for it): messages this rank accepted before it aborted
 * or closed complete on the sender.
 * Returns how many sockets took the whole frame; *eligible how many tried. */
static int send_control(gw_tcp_t *t, uint32_t type, const gw_abort_info_t *why, int budget_ms,
                        int *eligible)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC, .type = (uint16_t)type};
    if (why) {
        h.status = (int32_t)why->status;
        h.total = (uint64_t)(int64_t)why->origin;
        h.offset = (uint64_t)(int64_t)why->culprit;
    }
    int pending = 0, sent = 0;
    for (int i = 0; i < t->npfds; i++) {
        gw_tcp_sock_t *s = t->pfd_socks[i];
        s->ctrl = at_frame_boundary(s);
        if (s->ctrl) {
            h.seq = t->pfd_peers[i]->rc_due;
            gw__tcp_hdr_encode(&h, s->s_hdr);
            s->s_hdr_done = 0;
            s->sreq = NULL;
            s->s_receipt = 0;
            pending++;
        }
    }
    if (eligible)
        *eligible = pending;
    int64_t deadline = gw__now_ms() + budget_ms;
    while (pending > 0) {
        for (int i = 0; i < t->npfds; i++) {
            gw_tcp_sock_t *s = t->pfd_socks[i];
            struct pollfd *pfd = &t->pfds[i];
            pfd->fd = -1;
            pfd->events = POLLOUT;
            while (s->ctrl) {
                ssize_t n = send(s->fd, s->s_hdr + s->s_hdr_done, GW_TCP_HDR_SIZE - s->s_hdr_done,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                    continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                    pfd->fd = s->fd;
                    break;
                }
                if (n < 0) { /* the peer is gone: nothing to tell it */
                    GW_TRACE(t->base.log, GW_TCP_SUBSYS, "telling rank %d on socket %d: %m",
                             t->pfd_peers[i]->rank, s->idx);
                    s->ctrl = 0;
                    s->dead = 1;
                    pending--;
                    break;
                }
                s->s_hdr_done += (size_t)n;
                if (s->s_hdr_done == GW_TCP_HDR_SIZE) {
                    s->ctrl = 0;
                    pending--;
                    sent++;
                }
            }
        }
        int64_t left = deadline - gw__now_ms();
        if (pending == 0 || left <= 0)
            break;
        if (poll(t->pfds, (nfds_t)t->npfds, (int)left) < 0 && errno != EINTR)
            break;
    }
    for (int i = 0; i < t->npfds; i++) {
        gw_tcp_sock_t *s = t->pfd_socks[i];
        if (s->ctrl)
            s->s_midframe = s->s_hdr_done > 0; /* never write on it again */
        s->ctrl = 0;
    }
    return sent;
}

/* Read and drop what the peer sent before closing: closing a socket with
 * unread data makes the kernel answer with a reset instead of a FIN, which
 * can make the peer miss the frames we just wrote. */
static void close_sockets(gw_tcp_t *t)
{
    char sink[16384];
    for (int r = 0; r < t->base.size; r++) {
        for (int k = 0; t->peers[r].socks && k < t->nsocks; k++) {
            gw_tcp_sock_t *s = &t->peers[r].socks[k];
            if (s->fd < 0)
                continue;
            for (int n = 0; n < 256; n++)
                if (recv(s->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
                    break;
            close(s->fd);
            s->fd = -1;
            s->dead = 1;
        }
    }
    if (t->listen_fd >= 0) {
        close(t->listen_fd);
        t->listen_fd = -1;
    }
}

static gw_status_t tcp_abort(gw_transport_t *base, const gw_abort_info_t *why)
{
    if (!base)
        return GW_ERR_INVALID_ARG;
    gw_tcp_t *t = gw__tcp_of(base);
    /* Fail first: pending requests complete, and sockets left in the middle
     * of a frame are marked so that no ABORT is written into a payload. */
    gw_abort_info_t tell = gw__transport_abort_begin(base, why);
    int eligible = 0;
    int told = send_control(t, GW_TCP_ABORT, &tell, GW_TCP_SHUTDOWN_MS, &eligible);
    GW_INFO(t->base.log, GW_TCP_SUBSYS,
            "aborting (%s, blaming rank %d, first reported by rank %d): told %d of %d connections "
            "to %d peers (%d were at a frame boundary)",
            gw_status_str(tell.status), tell.culprit, tell.origin, told, t->npfds, t->base.size - 1,
            eligible);
    close_sockets(t);
    return GW_OK;
}

static void tcp_close(gw_transport_t *base)
{
    if (!base)
        return;
    gw_tcp_t *t = gw__tcp_of(base);
    int eligible = 0;
    int told = send_control(t, GW_TCP_GOODBYE, NULL, GW_TCP_SHUTDOWN_MS, &eligible);
    GW_TRACE(t->base.log, GW_TCP_SUBSYS,
             "closing: said goodbye on %d of %d connections; %llu requests completed with %llu "
             "reads and %llu polls",
             told, eligible, (unsigned long long)t->ncompleted, (unsigned long long)t->nreads,
             (unsigned long long)t->npolls);
    /* Requests still queued are not completed: the caller is tearing down
     * and may have released them already. */
    close_sockets(t);
    tcp_free(t);
}

/* The header socket 0 read ahead is the next message's when no receive
 * for the peer is unfinished (parts k > 0 travel on the other sockets). */
static int tcp_peek(gw_transport_t *base, int peer, gw_msg_tag_t *tag, size_t *len)
{
    gw_tcp_t *t = gw__tcp_of(base);
    if (peer < 0 || peer >= base->size || peer == base->rank)
        return -1;
    const gw_tcp_peer_t *p = &t->peers[peer];
    if (!p->socks || p->rq_head || !p->socks[0].r_held)
        return 0;
    const gw_tcp_hdr_t *h = &p->socks[0].r_hdr;
    *tag = (gw_msg_tag_t){.seq = h->seq, .sig = h->sig, .comm_id = h->comm_id};
    *len = (size_t)h->total;
    return 1;
}

const gw_transport_ops_t gw__tcp_transport_ops = {
    .size = sizeof(gw_transport_ops_t),
    .open = tcp_open,
    .connect = gw__tcp_connect,
    .isend = gw__transport_isend,
    .irecv = gw__transport_irecv,
    .progress = gw__transport_progress,
    .mem_reg = gw__transport_mem_reg_unsupported,
    .mem_dereg = gw__transport_mem_dereg_unsupported,
    .abort = tcp_abort,
    .close = tcp_close,
    .peek = tcp_peek,
};

static const gw__transport_class_t tcp_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "tcp",
    .subsys = GW_TCP_SUBSYS,
    .ops = &gw__tcp_transport_ops,
    .fail_pending = gw__tcp_fail_pending,
    .describe_peer = gw__tcp_describe_peer,
    .post = tcp_post,
    .progress = gw__tcp_progress,
};
