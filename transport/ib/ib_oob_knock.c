/*
 * ib_oob_knock.c - knocks over TCP: how a lower rank asks a higher one to
 * dial it when the pair connects on first use (ib_lazy.c) and the pair is
 * set up out of band (ib_oob.c).
 *
 * A knock is a hello like a dial's (job id, ranks, a nonce holding our
 * knock counter for the pair) for GW_IB_KNOCK_QP QPs, followed by its
 * proof of the job's key (transport/sock_auth.c), sent on a connection to
 * the higher rank's out-of-band port that is closed at once: the higher
 * rank checks the proof and that the counter is fresh, and dials us,
 * where the dial's handshake proves the key both ways again. A connection that is refused
 * means nobody listens there any more (the rank closed its communicator
 * or died, since every rank listens from open to close): the pair fails
 * at once, naming it. Any other failure leaves the knock to be sent again
 * (ib_lazy.c).
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "transport/ib/ib_oob.h"

/* The knock's connection to p is made (err 0) or failed (err): send the
 * hello and close, or say why not. */
static gw_status_t knock_result(gw_ib_t *t, gw_ib_peer_t *p, int err)
{
    if (err == 0) {
        gw_ib_hello_t h;
        gw__ib_oob_hello_head(t, p->rank, &h);
        h.nqps = GW_IB_KNOCK_QP;
        uint8_t hello[GW_IB_HELLO_SIZE];
        gw__ib_hello_encode(&h, hello);
        if (gw__sock_send_knock(p->knock_fd, t->data_key, hello, sizeof(hello), &p->knock_sent) ==
            0)
            p->knocks++;
        else
            GW_TRACE(t->base.log, GW_IB_SUBSYS, "knocking on %s: %m", p->desc);
    }
    close(p->knock_fd);
    p->knock_fd = -1;
    if (err == ECONNREFUSED)
        return gw__ib_peer_fail(t, p, GW_ERR_REMOTE,
                                "no longer listens at its out-of-band address (our knock was "
                                "refused): it closed its communicator or died");
    if (err) {
        errno = err;
        GW_TRACE(t->base.log, GW_IB_SUBSYS, "knocking on %s: %m; knocking again later", p->desc);
    }
    return GW_OK;
}

gw_status_t gw__ib_oob_knock(gw_ib_t *t, gw_ib_peer_t *p)
{
    if (p->knock_fd >= 0)
        return GW_OK; /* one under way */
    const struct sockaddr *sa = (const struct sockaddr *)&p->addr.sa;
    socklen_t sl =
        sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    p->knock_fd = gw__sock_open(sa->sa_family);
    if (p->knock_fd < 0)
        return GW_OK; /* knocked again later */
    int st = gw__sock_connect(p->knock_fd, sa, sl);
    if (st == GW_SOCK_CONNECTING)
        return GW_OK;
    return knock_result(t, p, st == GW_SOCK_CONNECTED ? 0 : errno);
}

gw_status_t gw__ib_oob_knocks_step(gw_ib_t *t)
{
    for (int r = t->base.rank + 1; r < t->base.size; r++) {
        gw_ib_peer_t *p = &t->peers[r];
        if (p->knock_fd < 0)
            continue;
        struct pollfd pfd = {.fd = p->knock_fd, .events = POLLOUT};
        if (poll(&pfd, 1, 0) <= 0)
            continue;
        int err = gw__sock_connect_result(p->knock_fd, pfd.revents);
        gw_status_t st = err < 0 ? GW_OK : knock_result(t, p, err);
        if (st != GW_OK)
            return st;
    }
    return GW_OK;
}
