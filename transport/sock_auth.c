/*
 * sock_auth.c - the mutual proof of the job's data-plane key that opens every
 * TCP data connection and every out-of-band connection of the verbs
 * transport (sock.h says what goes over the wire).
 *
 * The job id alone used to admit a connection, and it is no secret: rank 0
 * sends it in clear in the bootstrap WELCOME and it names shared-memory
 * segments. So each side now proves that it holds the data-plane key, which
 * the bootstrap derives from the job token (the bootstrap itself proves the
 * token the same way). Each proof is an HMAC over both hellos as sent, and
 * each hello carries a fresh nonce of its sender: a proof recorded on one
 * connection is worthless on the next, because the other side's nonce is
 * new, and the labels "acceptor" and "dialler" keep a proof from being
 * reflected back to the side that asked for it. The acceptor also
 * remembers the dialler nonces it has seen, so that a hello played back is
 * named as a replay in the log rather than as a wrong proof.
 *
 * A knock (a lower rank asking a higher one to dial it, when pairs connect
 * on first use) is one message on a connection closed at once, so it
 * cannot answer a challenge: it carries its proof, an HMAC under the same
 * key over its own hello, and its freshness is a counter. The nonce of a
 * knock is the sender's knock counter for the pair (then 8 random bytes),
 * and the acceptor acts on a proven knock only when that counter is above
 * the last one it acted on from the same rank. A per-pair counter rather
 * than a cache of nonces seen within a time window: it needs 8 bytes per
 * peer instead of a cache that a flood can wash out, and no clocks that
 * agree across hosts. The counter starts from the sender's wall clock in
 * microseconds, so a sender that starts again starts above what it sent
 * before; and knocks are only requests: the dial that answers a knock
 * proves the key both ways, and a dial that nobody needs never fails the
 * transport (tcp_mesh.c), so a replay that got through would cost one
 * dial, nothing more. Without the proof, anyone who read the job id (it
 * names shared-memory doors) could make a rank dial a peer busy elsewhere,
 * and the transport failed blaming an innocent rank.
 *
 * The state machine only moves bytes and checks proofs: what a hello must
 * say (ranks, socket index, versions) and what to do with a connection that
 * fails is each protocol's, which is why it stops and hands over at each
 * hello and once the dialler is proven.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "common/byteorder.h"
#include "common/sha256.h"
#include "transport/sock.h"

#define OK_BYTE 0x4b /* "K": the acceptor admitted the connection */

enum {
    D_SEND_HELLO,
    D_RECV_REPLY,
    D_CONFIRM, /* the caller checks the reply */
    D_SEND_PROOF,
    D_RECV_OK,
    A_RECV_HELLO,
    A_REPLY, /* the caller checks the hello */
    A_SEND_REPLY,
    A_RECV_PROOF,
    A_ADMIT, /* the caller decides */
    A_SEND_OK,
    A_RECV_KNOCK, /* the proof that follows a knock's hello */
    S_KNOCKED,
    S_DONE,
    S_FAILED,
};

static gw_status_t nonce(const gw_logger_t *lg, const char *subsys, uint8_t *out)
{
    size_t got = 0;
    while (got < GW_SOCK_NONCE_LEN) {
        ssize_t r = getrandom(out + got, GW_SOCK_NONCE_LEN - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            GW_ERROR(lg, subsys, "getrandom() for a handshake nonce: %m");
            return GW_ERR_SYSTEM;
        }
        got += (size_t)r;
    }
    return GW_OK;
}

/* HMAC(key, label || len(dial) || dial || len(acc) || acc): the lengths
 * keep the split between the two hellos unambiguous. */
static void proof(const gw_sock_shake_t *sh, const char *label, uint8_t mac[GW_SOCK_MAC_LEN])
{
    const uint8_t *dial = sh->dialler ? sh->mine : sh->theirs;
    const uint8_t *acc = sh->dialler ? sh->theirs : sh->mine;
    size_t dlen = sh->dialler ? sh->mine_len : sh->theirs_len;
    size_t alen = sh->dialler ? sh->theirs_len : sh->mine_len;
    uint8_t n[4];
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, sh->key, GW_SOCK_KEY_LEN);
    gw__hmac_sha256_update(&h, label, strlen(label) + 1);
    gw__put_be32(n, (uint32_t)dlen);
    gw__hmac_sha256_update(&h, n, 4);
    gw__hmac_sha256_update(&h, dial, dlen);
    gw__put_be32(n, (uint32_t)alen);
    gw__hmac_sha256_update(&h, n, 4);
    gw__hmac_sha256_update(&h, acc, alen);
    gw__hmac_sha256_final(&h, mac);
}

static const char ACCEPTOR[] = "gradwire data connection: acceptor";
static const char KNOCK[] = "gradwire data connection: knock";

/* HMAC(key, KNOCK || len(hello) || hello). */
static void knock_proof(const uint8_t key[GW_SOCK_KEY_LEN], const uint8_t *hello, size_t len,
                        uint8_t mac[GW_SOCK_MAC_LEN])
{
    uint8_t n[4];
    gw_hmac_sha256_t h;
    gw__hmac_sha256_init(&h, key, GW_SOCK_KEY_LEN);
    gw__hmac_sha256_update(&h, KNOCK, sizeof(KNOCK));
    gw__put_be32(n, (uint32_t)len);
    gw__hmac_sha256_update(&h, n, 4);
    gw__hmac_sha256_update(&h, hello, len);
    gw__hmac_sha256_final(&h, mac);
}

uint64_t gw__sock_knock_next(uint64_t *counter)
{
    struct timespec ts;
    uint64_t now = 0;
    if (clock_gettime(CLOCK_REALTIME, &ts) == 0)
        now = (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
    *counter = now > *counter ? now : *counter + 1;
    return *counter;
}

int gw__sock_send_knock(int fd, const uint8_t key[GW_SOCK_KEY_LEN], uint8_t *hello, size_t len,
                        uint64_t *counter)
{
    uint8_t msg[GW_SOCK_HELLO_MAX + GW_SOCK_MAC_LEN];
    if (len > GW_SOCK_HELLO_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    uint8_t *nonce = hello + GW_SOCK_NONCE_AT;
    gw__put_be64(nonce, gw__sock_knock_next(counter));
    /* The counter alone keeps nonces unique; the random half only makes
     * them unpredictable, so a kernel short of random bytes costs nothing. */
    size_t rest = GW_SOCK_NONCE_LEN - GW_SOCK_KNOCK_COUNTER_LEN;
    if (getrandom(nonce + GW_SOCK_KNOCK_COUNTER_LEN, rest, GRND_NONBLOCK) != (ssize_t)rest)
        memset(nonce + GW_SOCK_KNOCK_COUNTER_LEN, 0, rest);
    memcpy(msg, hello, len);
    knock_proof(key, hello, len, msg + len);
    ssize_t n = send(fd, msg, len + GW_SOCK_MAC_LEN, MSG_NOSIGNAL | MSG_DONTWAIT);
    explicit_bzero(msg, sizeof(msg));
    if (n == (ssize_t)(len + GW_SOCK_MAC_LEN))
        return 0;
    if (n >= 0)
        errno = EMSGSIZE;
    return -1;
}

int gw__sock_knock_fresh(uint64_t *last, const uint8_t *hello)
{
    uint64_t c = gw__get_be64(hello + GW_SOCK_NONCE_AT);
    if (c <= *last)
        return 0;
    *last = c;
    return 1;
}
static const char DIALLER[] = "gradwire data connection: dialler";

static void expect(gw_sock_shake_t *sh, int phase, size_t len)
{
    sh->phase = phase;
    sh->len = len;
    sh->done = 0;
}

void gw__sock_shake_knock(gw_sock_shake_t *sh) { expect(sh, A_RECV_KNOCK, GW_SOCK_MAC_LEN); }

gw_status_t gw__sock_shake_dial(gw_sock_shake_t *sh, const gw_logger_t *lg, const char *subsys,
                                const uint8_t key[GW_SOCK_KEY_LEN], uint32_t magic,
                                const uint8_t *hello, size_t hello_len, size_t reply_len)
{
    memset(sh, 0, sizeof(*sh));
    sh->dialler = 1;
    sh->magic = magic;
    memcpy(sh->key, key, GW_SOCK_KEY_LEN);
    memcpy(sh->mine, hello, hello_len);
    sh->mine_len = hello_len;
    sh->theirs_len = reply_len;
    gw_status_t st = nonce(lg, subsys, sh->mine + GW_SOCK_NONCE_AT);
    if (st != GW_OK)
        return st;
    memcpy(sh->buf, sh->mine, hello_len);
    expect(sh, D_SEND_HELLO, hello_len);
    return GW_OK;
}

void gw__sock_shake_accept(gw_sock_shake_t *sh, const uint8_t key[GW_SOCK_KEY_LEN], uint32_t magic,
                           size_t hello_len, gw_sock_seen_t *seen)
{
    memset(sh, 0, sizeof(*sh));
    sh->magic = magic;
    sh->seen = seen;
    memcpy(sh->key, key, GW_SOCK_KEY_LEN);
    sh->theirs_len = hello_len;
    expect(sh, A_RECV_HELLO, hello_len);
}

static int fail(gw_sock_shake_t *sh, int io, const char *why)
{
    sh->phase = S_FAILED;
    sh->io = io;
    snprintf(sh->why, sizeof(sh->why), "%s", why);
    return GW_SHAKE_FAILED;
}

/* 1 when the nonce was seen before; else it is remembered. */
static int replayed(gw_sock_seen_t *s, const uint8_t *n)
{
    unsigned have = s->n < GW_SOCK_SEEN_MAX ? s->n : GW_SOCK_SEEN_MAX;
    for (unsigned i = 0; i < have; i++)
        if (memcmp(s->nonce[i], n, GW_SOCK_NONCE_LEN) == 0)
            return 1;
    memcpy(s->nonce[s->next], n, GW_SOCK_NONCE_LEN);
    s->next = (s->next + 1) % GW_SOCK_SEEN_MAX;
    s->n++;
    return 0;
}

/* The message of the current phase arrived whole in buf: act on it. */
static int on_received(gw_sock_shake_t *sh)
{
    uint8_t mac[GW_SOCK_MAC_LEN];
    switch (sh->phase) {
    case D_RECV_REPLY:
        memcpy(sh->theirs, sh->buf, sh->theirs_len);
        sh->phase = D_CONFIRM;
        return GW_SHAKE_REPLY;
    case D_RECV_OK:
        if (sh->buf[0] != OK_BYTE)
            return fail(sh, GW_SOCK_IO_DONE, "it did not admit us");
        sh->phase = S_DONE;
        return GW_SHAKE_DONE;
    case A_RECV_HELLO:
        memcpy(sh->theirs, sh->buf, sh->theirs_len);
        if (sh->seen && replayed(sh->seen, sh->theirs + GW_SOCK_NONCE_AT))
            return fail(sh, GW_SOCK_IO_DONE, "replayed (a hello whose nonce we have seen)");
        sh->phase = A_REPLY;
        return GW_SHAKE_HELLO;
    case A_RECV_KNOCK:
        knock_proof(sh->key, sh->theirs, sh->theirs_len, mac);
        if (!gw__ct_equal(mac, sh->buf, GW_SOCK_MAC_LEN))
            return fail(sh, GW_SOCK_IO_DONE, "wrong knock proof (it does not know the job token)");
        sh->phase = S_KNOCKED;
        return GW_SHAKE_KNOCK;
    case A_RECV_PROOF:
        proof(sh, DIALLER, mac);
        if (!gw__ct_equal(mac, sh->buf, GW_SOCK_MAC_LEN))
            return fail(sh, GW_SOCK_IO_DONE, "wrong proof (it does not know the job token)");
        sh->phase = A_ADMIT;
        return GW_SHAKE_PROVEN;
    }
    return fail(sh, GW_SOCK_IO_DONE, "handshake out of order");
}

int gw__sock_shake_step(int fd, gw_sock_shake_t *sh)
{
    for (;;) {
        int writing;
        switch (sh->phase) {
        case D_SEND_HELLO:
        case D_SEND_PROOF:
        case A_SEND_REPLY:
        case A_SEND_OK:
            writing = 1;
            break;
        case D_RECV_REPLY:
        case D_RECV_OK:
        case A_RECV_HELLO:
        case A_RECV_PROOF:
        case A_RECV_KNOCK:
            writing = 0;
            break;
        case S_KNOCKED:
            return GW_SHAKE_KNOCK;
        case D_CONFIRM:
            return GW_SHAKE_REPLY;
        case A_REPLY:
            return GW_SHAKE_HELLO;
        case A_ADMIT:
            return GW_SHAKE_PROVEN;
        case S_DONE:
            return GW_SHAKE_DONE;
        default:
            return GW_SHAKE_FAILED;
        }
        int r = gw__sock_io_buf(fd, sh->buf, sh->len, &sh->done, writing);
        /* Garbage is named as such even when its sender closed at once. */
        if (sh->phase == A_RECV_HELLO && sh->done >= 4 && gw__get_be32(sh->buf) != sh->magic) {
            char why[64];
            snprintf(why, sizeof(why), "it sent garbage (0x%08x is not our magic)",
                     (unsigned)gw__get_be32(sh->buf));
            return fail(sh, GW_SOCK_IO_DONE, why);
        }
        if (r == GW_SOCK_IO_AGAIN)
            return GW_SHAKE_AGAIN;
        if (r != GW_SOCK_IO_DONE) {
            int saved = errno;
            fail(sh, r, r == GW_SOCK_IO_EOF ? "it closed during the handshake" : "socket error");
            errno = r == GW_SOCK_IO_EOF ? ECONNRESET : saved;
            return GW_SHAKE_FAILED;
        }
        switch (sh->phase) {
        case D_SEND_HELLO:
            expect(sh, D_RECV_REPLY, sh->theirs_len + GW_SOCK_MAC_LEN);
            continue;
        case D_SEND_PROOF:
            expect(sh, D_RECV_OK, 1);
            continue;
        case A_SEND_REPLY:
            expect(sh, A_RECV_PROOF, GW_SOCK_MAC_LEN);
            continue;
        case A_SEND_OK:
            sh->phase = S_DONE;
            return GW_SHAKE_DONE;
        default: {
            int ev = on_received(sh);
            if (ev != GW_SHAKE_AGAIN)
                return ev;
        }
        }
    }
}

short gw__sock_shake_events(const gw_sock_shake_t *sh)
{
    switch (sh->phase) {
    case D_SEND_HELLO:
    case D_SEND_PROOF:
    case A_SEND_REPLY:
    case A_SEND_OK:
        return POLLOUT;
    case D_RECV_REPLY:
    case D_RECV_OK:
    case A_RECV_HELLO:
    case A_RECV_PROOF:
    case A_RECV_KNOCK:
        return POLLIN;
    }
    return 0;
}

gw_status_t gw__sock_shake_reply(gw_sock_shake_t *sh, const gw_logger_t *lg, const char *subsys,
                                 const uint8_t *reply, size_t reply_len)
{
    memcpy(sh->mine, reply, reply_len);
    sh->mine_len = reply_len;
    gw_status_t st = nonce(lg, subsys, sh->mine + GW_SOCK_NONCE_AT);
    if (st != GW_OK)
        return st;
    memcpy(sh->buf, sh->mine, reply_len);
    proof(sh, ACCEPTOR, sh->buf + reply_len);
    expect(sh, A_SEND_REPLY, reply_len + GW_SOCK_MAC_LEN);
    return GW_OK;
}

int gw__sock_shake_confirm(gw_sock_shake_t *sh)
{
    uint8_t mac[GW_SOCK_MAC_LEN];
    proof(sh, ACCEPTOR, mac);
    /* The reply and its MAC arrived together in buf. */
    if (!gw__ct_equal(mac, sh->buf + sh->theirs_len, GW_SOCK_MAC_LEN)) {
        fail(sh, GW_SOCK_IO_DONE, "wrong proof (it does not know the job token)");
        return -1;
    }
    proof(sh, DIALLER, sh->buf);
    expect(sh, D_SEND_PROOF, GW_SOCK_MAC_LEN);
    return 0;
}

void gw__sock_shake_admit(gw_sock_shake_t *sh)
{
    sh->buf[0] = OK_BYTE;
    expect(sh, A_SEND_OK, 1);
}

void gw__sock_shake_wipe(gw_sock_shake_t *sh) { explicit_bzero(sh, sizeof(*sh)); }
