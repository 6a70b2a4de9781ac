/*
 * test_sock_auth.c - the mutual proof of the data-plane key that opens every
 * TCP data connection and every out-of-band verbs connection
 * (transport/sock_auth.c), over real loopback sockets: two ranks that hold
 * the key get in; a dialler without it, a recorded hello and proof played
 * back, an acceptor's proof reflected back to it, and garbage are turned
 * away with the reason; a dialler learns when the side it dialled does not
 * know the key. A knock counts only with its proof of the key, and only
 * once (its counter must be fresh).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/byteorder.h"
#include "common/clock.h"
#include "common/sha256.h"
#include "transport/sock.h"

#define MAGIC 0x54455354u /* "TEST" */
#define HELLO 56

static uint8_t key_a[GW_SOCK_KEY_LEN], key_b[GW_SOCK_KEY_LEN];

static void init_keys(void)
{
    memset(key_a, 0xa5, sizeof(key_a));
    memset(key_b, 0xa5, sizeof(key_b));
    key_b[31] ^= 1; /* one bit off */
}

static void hello(uint8_t out[HELLO], uint32_t from, uint32_t to)
{
    gw_sock_hello_id_t id = {.magic = MAGIC, .from = from, .to = to};
    memset(id.job_id, 0x42, sizeof(id.job_id));
    memset(out, 0, HELLO);
    gw__sock_hello_id_put(out, &id);
    gw__put_be32(out + 48, 7); /* a protocol field, such as a socket index */
}

/* A connected pair of non-blocking loopback sockets: *d dialled, *a
 * accepted. */
static void tcp_pair(int *d, int *a)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(in);
    cr_assert(l >= 0 && bind(l, (struct sockaddr *)&in, sizeof(in)) == 0 && listen(l, 4) == 0);
    cr_assert(getsockname(l, (struct sockaddr *)&in, &len) == 0);
    *d = gw__sock_open(AF_INET);
    cr_assert(*d >= 0);
    int st = gw__sock_connect(*d, (struct sockaddr *)&in, sizeof(in));
    cr_assert(st != GW_SOCK_FAILED, "connect to loopback: %m");
    struct pollfd p = {.fd = l, .events = POLLIN};
    cr_assert(poll(&p, 1, 2000) == 1);
    *a = gw__sock_accept(l, NULL, 0);
    cr_assert(*a >= 0);
    close(l);
    p = (struct pollfd){.fd = *d, .events = POLLOUT};
    cr_assert(poll(&p, 1, 2000) == 1);
    cr_assert_eq(gw__sock_connect_result(*d, p.revents), 0);
}

typedef struct result {
    int dial_ev, acc_ev; /* the last event of each side */
    char dial_why[96], acc_why[96];
    int confirm_failed;        /* the dialler found the acceptor's proof wrong */
    uint8_t sent_hello[HELLO]; /* what the dialler put on the wire */
    uint8_t sent_proof[GW_SOCK_MAC_LEN];
} result_t;

/* Run the handshake between a dialler holding dkey and an acceptor holding
 * akey until both sides are done or failed (2 s at most). */
static result_t shake_pair(const uint8_t *dkey, const uint8_t *akey, gw_sock_seen_t *seen)
{
    result_t r;
    memset(&r, 0, sizeof(r));
    int dfd, afd;
    tcp_pair(&dfd, &afd);
    gw_sock_shake_t d, a;
    uint8_t h[HELLO];
    hello(h, 3, 0);
    cr_assert_eq(gw__sock_shake_dial(&d, NULL, "test", dkey, MAGIC, h, HELLO, HELLO), GW_OK);
    memcpy(r.sent_hello, d.buf, HELLO);
    gw__sock_shake_accept(&a, akey, MAGIC, HELLO, seen);
    int dfin = 0, afin = 0;
    int64_t deadline = gw__now_ms() + 2000;
    while ((!dfin || !afin) && gw__now_ms() < deadline) {
        if (!dfin) {
            int ev = gw__sock_shake_step(dfd, &d);
            if (ev == GW_SHAKE_REPLY) {
                if (gw__sock_shake_confirm(&d) != 0) {
                    r.confirm_failed = 1;
                    ev = GW_SHAKE_FAILED;
                } else {
                    memcpy(r.sent_proof, d.buf, GW_SOCK_MAC_LEN);
                    continue;
                }
            }
            r.dial_ev = ev;
            dfin = ev == GW_SHAKE_DONE || ev == GW_SHAKE_FAILED;
            if (dfin) {
                memcpy(r.dial_why, d.why, sizeof(r.dial_why));
                close(dfd); /* as a dialler that gives up does */
            }
        }
        if (!afin) {
            int ev = gw__sock_shake_step(afd, &a);
            if (ev == GW_SHAKE_HELLO) {
                uint8_t reply[HELLO];
                hello(reply, 0, 3);
                cr_assert_eq(gw__sock_shake_reply(&a, NULL, "test", reply, HELLO), GW_OK);
                continue;
            }
            if (ev == GW_SHAKE_PROVEN) {
                gw__sock_shake_admit(&a);
                continue;
            }
            r.acc_ev = ev;
            afin = ev == GW_SHAKE_DONE || ev == GW_SHAKE_FAILED;
            if (afin) {
                memcpy(r.acc_why, a.why, sizeof(r.acc_why));
                close(afd);
            }
        }
        struct pollfd p[2] = {{.fd = dfin ? -1 : dfd, .events = gw__sock_shake_events(&d)},
                              {.fd = afin ? -1 : afd, .events = gw__sock_shake_events(&a)}};
        poll(p, 2, 50);
    }
    cr_assert(dfin && afin, "the handshake did not finish within 2 s");
    return r;
}

Test(sock_auth, both_sides_holding_the_key_get_in, .init = init_keys)
{
    result_t r = shake_pair(key_a, key_a, NULL);
    cr_expect_eq(r.dial_ev, GW_SHAKE_DONE, "dialler: %s", r.dial_why);
    cr_expect_eq(r.acc_ev, GW_SHAKE_DONE, "acceptor: %s", r.acc_why);
    /* The nonce is fresh: never the zeros the protocol left there. */
    static const uint8_t zero[GW_SOCK_NONCE_LEN];
    cr_expect_neq(memcmp(r.sent_hello + GW_SOCK_NONCE_AT, zero, sizeof(zero)), 0);
}

Test(sock_auth, dialler_learns_that_the_acceptor_lacks_the_key, .init = init_keys)
{
    result_t r = shake_pair(key_a, key_b, NULL);
    cr_expect(r.confirm_failed, "the acceptor's proof under another key was accepted");
    cr_expect_str_eq(r.dial_why, "wrong proof (it does not know the job token)");
    cr_expect_eq(r.acc_ev, GW_SHAKE_FAILED, "the acceptor admitted a dialler that gave up");
}

/* A raw impostor: it knows the job id and the layout but not the key, so
 * whatever it sends as its proof is wrong; send_mac picks what it sends. */
enum { BAD_KEY, REFLECT, RECORDED };

static void impostor(int how, const result_t *recorded, gw_sock_seen_t *seen, const char *want)
{
    int dfd, afd;
    tcp_pair(&dfd, &afd);
    gw_sock_shake_t a;
    gw__sock_shake_accept(&a, key_a, MAGIC, HELLO, seen);
    uint8_t h[HELLO], reply[HELLO + GW_SOCK_MAC_LEN], mac[GW_SOCK_MAC_LEN];
    if (how == RECORDED) {
        memcpy(h, recorded->sent_hello, HELLO);
    } else {
        hello(h, 3, 0);
        for (int i = 0; i < GW_SOCK_NONCE_LEN; i++)
            h[GW_SOCK_NONCE_AT + i] = (uint8_t)(i * 37 + how);
    }
    cr_assert_eq(write(dfd, h, HELLO), HELLO);
    int64_t deadline = gw__now_ms() + 2000;
    size_t got = 0;
    int ev = GW_SHAKE_AGAIN, sent_proof = 0;
    while (gw__now_ms() < deadline) {
        ev = gw__sock_shake_step(afd, &a);
        if (ev == GW_SHAKE_HELLO) {
            uint8_t r[HELLO];
            hello(r, 0, 3);
            cr_assert_eq(gw__sock_shake_reply(&a, NULL, "test", r, HELLO), GW_OK);
            continue;
        }
        if (ev == GW_SHAKE_PROVEN || ev == GW_SHAKE_DONE || ev == GW_SHAKE_FAILED)
            break;
        ssize_t n = recv(dfd, reply + got, sizeof(reply) - got, MSG_DONTWAIT);
        if (n > 0)
            got += (size_t)n;
        if (got == sizeof(reply) && !sent_proof) {
            if (how == BAD_KEY)
                gw__hmac_sha256(key_b, sizeof(key_b), reply, sizeof(reply), mac);
            else if (how == REFLECT)
                memcpy(mac, reply + HELLO, GW_SOCK_MAC_LEN);
            else
                memcpy(mac, recorded->sent_proof, GW_SOCK_MAC_LEN);
            cr_assert_eq(write(dfd, mac, sizeof(mac)), (ssize_t)sizeof(mac));
            sent_proof = 1;
        }
        struct pollfd p = {.fd = afd, .events = gw__sock_shake_events(&a)};
        poll(&p, 1, 20);
    }
    cr_expect_eq(ev, GW_SHAKE_FAILED, "the impostor (%d) was %s", how,
                 ev == GW_SHAKE_PROVEN ? "admitted" : "neither admitted nor dropped");
    if (ev == GW_SHAKE_FAILED)
        cr_expect(strstr(a.why, want) != NULL, "dropped as \"%s\", expected \"%s\"", a.why, want);
    close(dfd);
    close(afd);
}

Test(sock_auth, a_dialler_without_the_key_is_dropped, .init = init_keys)
{
    impostor(BAD_KEY, NULL, NULL, "wrong proof");
}

Test(sock_auth, the_acceptors_own_proof_reflected_is_dropped, .init = init_keys)
{
    impostor(REFLECT, NULL, NULL, "wrong proof");
}

/* A genuine dialler's hello and proof, recorded and played back: to the
 * same acceptor (which has seen the nonce) it is a replay; to one that has
 * not, the proof is wrong because the acceptor's nonce is new. */
Test(sock_auth, a_recorded_handshake_played_back_is_dropped, .init = init_keys)
{
    static gw_sock_seen_t seen;
    memset(&seen, 0, sizeof(seen));
    result_t r = shake_pair(key_a, key_a, &seen);
    cr_assert_eq(r.acc_ev, GW_SHAKE_DONE, "the genuine handshake failed: %s", r.acc_why);
    impostor(RECORDED, &r, &seen, "replayed");
    impostor(RECORDED, &r, NULL, "wrong proof");
}

Test(sock_auth, garbage_is_named, .init = init_keys)
{
    int dfd, afd;
    tcp_pair(&dfd, &afd);
    gw_sock_shake_t a;
    gw__sock_shake_accept(&a, key_a, MAGIC, HELLO, NULL);
    static const char get[] = "GET / HTTP/1.0\r\n\r\n";
    cr_assert_eq(write(dfd, get, sizeof(get)), (ssize_t)sizeof(get));
    close(dfd);
    int ev = GW_SHAKE_AGAIN;
    for (int i = 0; i < 100 && ev == GW_SHAKE_AGAIN; i++) {
        struct pollfd p = {.fd = afd, .events = POLLIN};
        poll(&p, 1, 20);
        ev = gw__sock_shake_step(afd, &a);
    }
    cr_expect_eq(ev, GW_SHAKE_FAILED);
    cr_expect(strstr(a.why, "garbage") != NULL, "why: %s", a.why);
    close(afd);
}

/* The acceptor's side of one knock of len bytes (a hello, then maybe a
 * proof) sent on a fresh connection and closed: the event it ends with,
 * why, and the hello it read. */
static int knock_acceptor(const uint8_t *msg, size_t len, gw_sock_seen_t *seen, char *why,
                          uint8_t got[HELLO])
{
    int dfd, afd;
    tcp_pair(&dfd, &afd);
    cr_assert_eq(write(dfd, msg, len), (ssize_t)len);
    close(dfd);
    gw_sock_shake_t a;
    gw__sock_shake_accept(&a, key_a, MAGIC, HELLO, seen);
    int ev = GW_SHAKE_AGAIN;
    for (int i = 0; i < 100 && (ev == GW_SHAKE_AGAIN || ev == GW_SHAKE_HELLO); i++) {
        if (ev == GW_SHAKE_HELLO)
            gw__sock_shake_knock(&a); /* the hello says "knock": its proof comes next */
        struct pollfd p = {.fd = afd, .events = POLLIN};
        poll(&p, 1, 20);
        ev = gw__sock_shake_step(afd, &a);
    }
    snprintf(why, 96, "%s", a.why);
    memcpy(got, a.theirs, HELLO);
    close(afd);
    return ev;
}

/* A knock made by gw__sock_send_knock, caught on a socket pair. */
static void make_knock(const uint8_t *key, uint64_t *counter, uint8_t out[HELLO + GW_SOCK_MAC_LEN])
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    uint8_t h[HELLO];
    hello(h, 1, 2);
    cr_assert_eq(gw__sock_send_knock(sv[0], key, h, HELLO, counter), 0, "send_knock: %m");
    cr_assert_eq(read(sv[1], out, HELLO + GW_SOCK_MAC_LEN), HELLO + GW_SOCK_MAC_LEN);
    cr_expect_eq(memcmp(out, h, GW_SOCK_NONCE_AT), 0, "the hello went out as given");
    close(sv[0]);
    close(sv[1]);
}

Test(sock_auth, a_knock_is_acted_on_only_with_its_proof_and_only_once, .init = init_keys)
{
    uint8_t k1[HELLO + GW_SOCK_MAC_LEN], k2[HELLO + GW_SOCK_MAC_LEN], got[HELLO];
    uint64_t counter = 0, last = 0;
    char why[96];
    make_knock(key_a, &counter, k1);
    make_knock(key_a, &counter, k2);
    cr_expect_eq(gw__get_be64(k2 + GW_SOCK_NONCE_AT), counter, "the nonce holds the counter");
    cr_expect_gt(gw__get_be64(k2 + GW_SOCK_NONCE_AT), gw__get_be64(k1 + GW_SOCK_NONCE_AT),
                 "the counter grows");

    /* The genuine knocks prove the key; the second is fresh after the
     * first, the first played back after the second is not. */
    cr_assert_eq(knock_acceptor(k1, sizeof(k1), NULL, why, got), GW_SHAKE_KNOCK, "why: %s", why);
    cr_expect(gw__sock_knock_fresh(&last, got), "a first knock is fresh");
    cr_assert_eq(knock_acceptor(k2, sizeof(k2), NULL, why, got), GW_SHAKE_KNOCK, "why: %s", why);
    cr_expect(gw__sock_knock_fresh(&last, got), "a later knock is fresh");
    cr_assert_eq(knock_acceptor(k1, sizeof(k1), NULL, why, got), GW_SHAKE_KNOCK, "why: %s", why);
    cr_expect_not(gw__sock_knock_fresh(&last, got), "an older knock played back was fresh");
    cr_assert_eq(knock_acceptor(k2, sizeof(k2), NULL, why, got), GW_SHAKE_KNOCK, "why: %s", why);
    cr_expect_not(gw__sock_knock_fresh(&last, got), "the last knock played back was fresh");

    /* Without the key: no proof, a garbage proof, a proof under another
     * key, a proof over another hello. */
    cr_expect_eq(knock_acceptor(k1, HELLO, NULL, why, got), GW_SHAKE_FAILED, "no proof");
    uint8_t bad[HELLO + GW_SOCK_MAC_LEN];
    memcpy(bad, k1, sizeof(bad));
    memset(bad + HELLO, 0x5a, GW_SOCK_MAC_LEN);
    cr_expect_eq(knock_acceptor(bad, sizeof(bad), NULL, why, got), GW_SHAKE_FAILED,
                 "garbage proof");
    cr_expect(strstr(why, "wrong knock proof") != NULL, "why: %s", why);
    uint64_t c2 = 0;
    make_knock(key_b, &c2, bad);
    cr_expect_eq(knock_acceptor(bad, sizeof(bad), NULL, why, got), GW_SHAKE_FAILED,
                 "another key's proof");
    memcpy(bad, k1, sizeof(bad));
    bad[28] ^= 1; /* another target rank */
    cr_expect_eq(knock_acceptor(bad, sizeof(bad), NULL, why, got), GW_SHAKE_FAILED,
                 "a proof over another hello");

    /* A replay that the nonce memory still holds is named at its hello. */
    gw_sock_seen_t seen;
    memset(&seen, 0, sizeof(seen));
    cr_expect_eq(knock_acceptor(k2, sizeof(k2), &seen, why, got), GW_SHAKE_KNOCK);
    cr_expect_eq(knock_acceptor(k2, sizeof(k2), &seen, why, got), GW_SHAKE_FAILED);
    cr_expect(strstr(why, "replayed") != NULL, "why: %s", why);
}
