/*
 * fuzz_sock_auth.c - libFuzzer target for the mutual proof of the
 * data-plane key (transport/sock_auth.c) that opens every TCP data
 * connection and every out-of-band verbs connection: the hellos and the
 * proofs it reads from a peer that may be anyone. The state machine runs on
 * real (AF_UNIX stream) sockets, with the hello of the TCP transport
 * (GW_TCP_HELLO_MAGIC, GW_TCP_HELLO_SIZE bytes).
 *
 * The first input byte picks who the input is:
 *   0  a stranger dialling our acceptor: the rest is what arrives on the
 *      connection, in reads of 1..64 bytes (the second byte); then the
 *      stranger closes. The acceptor must never find the dialler proven (it
 *      cannot know the MAC over our fresh nonce), and a failure says why.
 *   1  a stranger answering our dialler: the same, for the acceptor's reply
 *      (hello and MAC) and its admission byte; the dialler must never
 *      confirm the reply nor be done.
 *   2  a man in the middle of a genuine dialler and acceptor that both hold
 *      the key: the second byte..: the dialler's hello (magic kept), then
 *      changes (direction, stream offset, XOR byte) made to the bytes in
 *      flight. Nothing changed: both sides are done. A byte changed from
 *      the dialler to the acceptor: the acceptor never finds the dialler
 *      proven; from the acceptor to the dialler: the dialler is never done.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "fuzz_util.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_internal.h"

#define MAGIC GW_TCP_HELLO_MAGIC
#define HELLO GW_TCP_HELLO_SIZE
#define ROUNDS 64
#define CHANGES_MAX 8

static const uint8_t key[GW_SOCK_KEY_LEN] = {0x6b, 0x65, 0x79, 0x21, 1, 2, 3, 4, 5, 6, 7, 8};

/* A connected pair of non-blocking stream sockets; aborts when the system
 * refuses (not a finding). */
static void pair(int fds[2])
{
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0)
        abort();
}

static void drain(int fd)
{
    uint8_t junk[512];
    while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
        ;
}

static void check_failure(const gw_sock_shake_t *sh)
{
    FUZZ_CHECK(memchr(sh->why, '\0', sizeof(sh->why)) != NULL);
    FUZZ_CHECK(sh->why[0] != '\0');
}

/* Mode 0: the input is a stranger's bytes to our acceptor, which takes a
 * whole hello as a knock when the first byte's bit 6 says so (then the
 * knock's proof is read, and can never be right). */
static void stranger_to_acceptor(const uint8_t *in, size_t n)
{
    if (n < 1)
        return;
    size_t chunk = 1 + in[0] % 64;
    int as_knock = (in[0] & 0x40) != 0;
    in++;
    n--;
    int fds[2];
    pair(fds);
    gw_sock_shake_t a;
    gw_sock_seen_t seen;
    memset(&seen, 0, sizeof(seen));
    gw__sock_shake_accept(&a, key, MAGIC, HELLO, &seen);
    size_t off = 0;
    int ev = GW_SHAKE_AGAIN;
    for (int round = 0; round < ROUNDS * 4 && ev != GW_SHAKE_FAILED; round++) {
        if (off < n) {
            size_t len = n - off < chunk ? n - off : chunk;
            ssize_t w = send(fds[1], in + off, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            off += w > 0 ? (size_t)w : 0;
        } else {
            shutdown(fds[1], SHUT_WR); /* the stranger has said all */
        }
        ev = gw__sock_shake_step(fds[0], &a);
        if (ev == GW_SHAKE_HELLO) {
            /* What it sent opens with our magic and is a hello's length. */
            FUZZ_CHECK(gw__get_be32(a.theirs) == MAGIC);
            if (as_knock) {
                gw__sock_shake_knock(&a);
                ev = gw__sock_shake_step(fds[0], &a);
                FUZZ_CHECK(ev != GW_SHAKE_KNOCK); /* a proof without the key */
                drain(fds[1]);
                continue;
            }
            uint8_t reply[HELLO];
            memset(reply, 0, sizeof(reply));
            gw__put_be32(reply, MAGIC);
            if (gw__sock_shake_reply(&a, fuzz_logger(), "fuzz", reply, HELLO) != GW_OK)
                abort();
            ev = gw__sock_shake_step(fds[0], &a);
        }
        FUZZ_CHECK(ev != GW_SHAKE_PROVEN && ev != GW_SHAKE_DONE);
        drain(fds[1]);
    }
    if (ev == GW_SHAKE_FAILED)
        check_failure(&a);
    /* Garbage is named as such, however it arrived. */
    if (n >= 4 && gw__get_be32(in) != MAGIC)
        FUZZ_CHECK(ev == GW_SHAKE_FAILED && strstr(a.why, "garbage") != NULL);
    gw__sock_shake_wipe(&a);
    close(fds[0]);
    close(fds[1]);
}

/* Mode 1: the input is a stranger's answer to our dialler. */
static void stranger_to_dialler(const uint8_t *in, size_t n)
{
    if (n < 1)
        return;
    size_t chunk = 1 + in[0] % 64;
    in++;
    n--;
    int fds[2];
    pair(fds);
    gw_sock_shake_t d;
    uint8_t hello[HELLO];
    memset(hello, 0, sizeof(hello));
    gw__put_be32(hello, MAGIC);
    if (gw__sock_shake_dial(&d, fuzz_logger(), "fuzz", key, MAGIC, hello, HELLO, HELLO) != GW_OK)
        abort();
    size_t off = 0;
    int ev = GW_SHAKE_AGAIN;
    for (int round = 0; round < ROUNDS * 4 && ev != GW_SHAKE_FAILED; round++) {
        ev = gw__sock_shake_step(fds[0], &d);
        if (ev == GW_SHAKE_REPLY) {
            /* Its MAC cannot be right: it was made without our nonce. */
            FUZZ_CHECK(gw__sock_shake_confirm(&d) != 0);
            ev = GW_SHAKE_FAILED;
            break;
        }
        FUZZ_CHECK(ev != GW_SHAKE_DONE);
        drain(fds[1]);
        if (off < n) {
            size_t len = n - off < chunk ? n - off : chunk;
            ssize_t w = send(fds[1], in + off, len, MSG_DONTWAIT | MSG_NOSIGNAL);
            off += w > 0 ? (size_t)w : 0;
        } else {
            shutdown(fds[1], SHUT_WR);
        }
    }
    if (ev == GW_SHAKE_FAILED)
        check_failure(&d);
    gw__sock_shake_wipe(&d);
    close(fds[0]);
    close(fds[1]);
}

typedef struct change {
    int to_dialler; /* the acceptor -> dialler stream, else dialler -> acceptor */
    size_t at;      /* offset in that stream */
    uint8_t xor ;
} change_t;

typedef struct wire {
    int from, to; /* forward what arrives on `from` to `to` */
    size_t off;   /* bytes forwarded so far */
    int changed;  /* a byte forwarded was changed */
} wire_t;

/* Forward what is waiting, changing the bytes the changes name. */
static void forward(wire_t *w, const change_t *ch, int nch, int to_dialler)
{
    uint8_t buf[512];
    ssize_t r;
    while ((r = recv(w->from, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        for (int i = 0; i < nch; i++)
            if (ch[i].to_dialler == to_dialler && ch[i].at >= w->off &&
                ch[i].at < w->off + (size_t)r) {
                buf[ch[i].at - w->off] ^= ch[i].xor ;
                w->changed = 1;
            }
        if (send(w->to, buf, (size_t)r, MSG_NOSIGNAL) != r)
            abort(); /* the socket buffers hold far more than a handshake */
        w->off += (size_t)r;
    }
}

/* Mode 2: a genuine dialler and acceptor, and a man in the middle. */
static void man_in_the_middle(const uint8_t *in, size_t n)
{
    if (n < HELLO)
        return;
    uint8_t hello[HELLO];
    memcpy(hello, in, HELLO);
    gw__put_be32(hello, MAGIC); /* a hello the acceptor would take */
    in += HELLO;
    n -= HELLO;
    change_t ch[CHANGES_MAX];
    int nch = 0;
    for (int k = 0; n >= 4 && k < CHANGES_MAX; in += 4, n -= 4, k++) {
        change_t c = {.to_dialler = in[0] & 1,
                      .at = ((size_t)in[1] << 8 | in[2]) % (HELLO + 2 * GW_SOCK_MAC_LEN + 1),
                      .xor = in[3]};
        /* Changes of one byte add up (two of the same cancel out). */
        int i = 0;
        while (i < nch && (ch[i].to_dialler != c.to_dialler || ch[i].at != c.at))
            i++;
        if (i == nch)
            ch[nch++] = c;
        else
            ch[i].xor ^= c.xor ;
    }
    int kept = 0;
    for (int i = 0; i < nch; i++)
        if (ch[i].xor != 0) /* XOR 0 changes nothing */
            ch[kept++] = ch[i];
    nch = kept;
    int dl[2], ac[2]; /* dialler <-> middle, middle <-> acceptor */
    pair(dl);
    pair(ac);
    wire_t up = {.from = dl[1], .to = ac[1]}, down = {.from = ac[1], .to = dl[1]};
    gw_sock_shake_t d, a;
    if (gw__sock_shake_dial(&d, fuzz_logger(), "fuzz", key, MAGIC, hello, HELLO, HELLO) != GW_OK)
        abort();
    gw__sock_shake_accept(&a, key, MAGIC, HELLO, NULL);
    int dev = GW_SHAKE_AGAIN, aev = GW_SHAKE_AGAIN, proven = 0;
    for (int round = 0; round < ROUNDS; round++) {
        if (dev != GW_SHAKE_DONE && dev != GW_SHAKE_FAILED) {
            dev = gw__sock_shake_step(dl[0], &d);
            if (dev == GW_SHAKE_REPLY)
                dev = gw__sock_shake_confirm(&d) == 0 ? gw__sock_shake_step(dl[0], &d)
                                                      : GW_SHAKE_FAILED;
        }
        forward(&up, ch, nch, 0);
        if (aev != GW_SHAKE_DONE && aev != GW_SHAKE_FAILED) {
            aev = gw__sock_shake_step(ac[0], &a);
            if (aev == GW_SHAKE_HELLO) {
                uint8_t reply[HELLO];
                memcpy(reply, a.theirs, HELLO); /* an answer like the TCP transport's */
                if (gw__sock_shake_reply(&a, fuzz_logger(), "fuzz", reply, HELLO) != GW_OK)
                    abort();
                aev = gw__sock_shake_step(ac[0], &a);
            }
            if (aev == GW_SHAKE_PROVEN) {
                proven = 1;
                gw__sock_shake_admit(&a);
                aev = gw__sock_shake_step(ac[0], &a);
            }
        }
        forward(&down, ch, nch, 1);
        if ((dev == GW_SHAKE_DONE || dev == GW_SHAKE_FAILED) &&
            (aev == GW_SHAKE_DONE || aev == GW_SHAKE_FAILED))
            break;
    }
    if (!up.changed && !down.changed)
        FUZZ_CHECK(dev == GW_SHAKE_DONE && aev == GW_SHAKE_DONE && proven);
    if (up.changed)
        FUZZ_CHECK(!proven);
    if (down.changed)
        FUZZ_CHECK(dev != GW_SHAKE_DONE);
    if (dev == GW_SHAKE_FAILED)
        check_failure(&d);
    if (aev == GW_SHAKE_FAILED)
        check_failure(&a);
    gw__sock_shake_wipe(&d);
    gw__sock_shake_wipe(&a);
    close(dl[0]);
    close(dl[1]);
    close(ac[0]);
    close(ac[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0:
        stranger_to_acceptor(data + 1, size - 1);
        break;
    case 1:
        stranger_to_dialler(data + 1, size - 1);
        break;
    default:
        man_in_the_middle(data + 1, size - 1);
        break;
    }
    return 0;
}
