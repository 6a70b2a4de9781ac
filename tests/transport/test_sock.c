/*
 * test_sock.c - the socket module shared by the TCP transport, the verbs
 * transport's out-of-band set-up and the bootstrap (transport/sock.h):
 * addresses as text and in address blobs, the retry pauses, dialling and
 * accepting on loopback, and resumable transfers.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/sock.h"

static struct sockaddr_storage v4(const char *ip, uint16_t port)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    inet_pton(AF_INET, ip, &in->sin_addr);
    return ss;
}

static struct sockaddr_storage v6(const char *ip, uint16_t port, uint32_t scope)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    in6->sin6_scope_id = scope;
    inet_pton(AF_INET6, ip, &in6->sin6_addr);
    return ss;
}

Test(sock, addresses_as_text)
{
    char s[80];
    struct sockaddr_storage a = v4("198.18.0.7", 29500);
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "198.18.0.7:29500");
    a = v6("2001:db8::1", 9, 7); /* a scope on a global address is not shown */
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "[2001:db8::1]:9");
    a = v6("::ffff:198.18.0.1", 1, 0);
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "[::ffff:198.18.0.1]:1");
    unsigned lo = if_nametoindex("lo");
    if (lo) {
        a = v6("fe80::1", 5, lo);
        gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
        cr_expect_str_eq(s, "[fe80::1%lo]:5");
    }
    a = v6("fe80::1", 5, 0xfffffff0u); /* no such interface: its number */
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "[fe80::1%4294967280]:5");
    memset(&a, 0, sizeof(a));
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "(no address)");
    a.ss_family = AF_UNIX;
    gw__sock_addr_str((struct sockaddr *)&a, s, sizeof(s));
    cr_expect_str_eq(s, "(address family 1)");
}

Test(sock, local_address_choice)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    struct sockaddr_storage out, dflt = v4("127.0.0.1", 4242);
    socklen_t len = 0;
    char desc[160], s[80];
    /* A named interface: its IPv4 address, port 0. */
    cr_assert_eq(gw__sock_pick_addr(&lg, "test", "lo", NULL, 0, &out, &len, desc, sizeof(desc)),
                 GW_OK);
    gw__sock_addr_str((struct sockaddr *)&out, s, sizeof(s));
    cr_expect_str_eq(s, "127.0.0.1:0");
    cr_expect_eq(len, sizeof(struct sockaddr_in));
    cr_expect_str_eq(desc, "interface lo, from GW_SOCKET_IFNAME");
    /* No name: the bootstrap's local address, its port dropped. */
    cr_assert_eq(gw__sock_pick_addr(&lg, "test", NULL, &dflt, sizeof(struct sockaddr_in), &out,
                                    &len, desc, sizeof(desc)),
                 GW_OK);
    gw__sock_addr_str((struct sockaddr *)&out, s, sizeof(s));
    cr_expect_str_eq(s, "127.0.0.1:0");
    cr_expect_str_eq(desc, "interface lo, which routes to the bootstrap root");
    /* A dual-stack bootstrap socket's ::ffff:a.b.c.d: plain IPv4. */
    dflt = v6("::ffff:127.0.0.1", 4242, 0);
    cr_assert_eq(gw__sock_pick_addr(&lg, "test", "", &dflt, sizeof(struct sockaddr_in6), &out, &len,
                                    desc, sizeof(desc)),
                 GW_OK);
    cr_expect_eq(out.ss_family, AF_INET);
    /* Errors: a name that does not exist, a wildcard, nothing at all. */
    cr_expect_eq(
        gw__sock_pick_addr(&lg, "test", "gw_no_such_if0", NULL, 0, &out, &len, desc, sizeof(desc)),
        GW_ERR_CONFIG);
    dflt = v4("0.0.0.0", 1);
    cr_expect_eq(gw__sock_pick_addr(&lg, "test", NULL, &dflt, sizeof(struct sockaddr_in), &out,
                                    &len, desc, sizeof(desc)),
                 GW_ERR_CONFIG);
    cr_expect_eq(gw__sock_pick_addr(&lg, "test", NULL, NULL, 0, &out, &len, desc, sizeof(desc)),
                 GW_ERR_CONFIG);
    gw__logger_fini(&lg);
}

Test(sock, address_wire_layout)
{
    uint8_t w[GW_SOCK_ADDR_WIRE];
    struct sockaddr_storage a = v4("198.18.0.7", 0x1234), b;
    socklen_t len = 0;
    gw__sock_addr_put(w, (struct sockaddr *)&a);
    const uint8_t want4[GW_SOCK_ADDR_WIRE] = {4, 0x12, 0x34, 198, 18, 0, 7};
    cr_expect_arr_eq(w, want4, sizeof(want4));
    cr_expect_eq(gw__sock_addr_get(w, &b, &len), GW_OK);
    cr_expect_eq(len, sizeof(struct sockaddr_in));
    cr_expect_eq(memcmp(&a, &b, sizeof(struct sockaddr_in)), 0);

    a = v6("2001:db8::2", 9, 0x01020304);
    gw__sock_addr_put(w, (struct sockaddr *)&a);
    cr_expect_eq(w[0], 6);
    cr_expect_eq(w[3], 0x20);
    cr_expect_eq(w[18], 0x02);
    cr_expect_eq(w[19], 0x01, "scope id big-endian at 19");
    cr_expect_eq(w[22], 0x04);
    cr_expect_eq(gw__sock_addr_get(w, &b, &len), GW_OK);
    cr_expect_eq(len, sizeof(struct sockaddr_in6));
    cr_expect_eq(memcmp(&a, &b, sizeof(struct sockaddr_in6)), 0);

    memset(&a, 0, sizeof(a)); /* no address: all zero */
    gw__sock_addr_put(w, (struct sockaddr *)&a);
    const uint8_t zero[GW_SOCK_ADDR_WIRE] = {0};
    cr_expect_arr_eq(w, zero, sizeof(zero));
    cr_expect_eq(gw__sock_addr_get(w, &b, &len), GW_ERR_NOT_FOUND);
    cr_expect_eq(len, 0);
    w[0] = 5;
    cr_expect_eq(gw__sock_addr_get(w, &b, &len), GW_ERR_PROTOCOL);
}

Test(sock, hello_identity_layout)
{
    gw_sock_hello_id_t id = {.magic = 0x4757484c, .from = 3, .to = 0x01020304}, got;
    for (int i = 0; i < 16; i++)
        id.job_id[i] = (uint8_t)(0xa0 + i);
    uint8_t w[GW_SOCK_HELLO_ID_SIZE];
    memset(w, 0xee, sizeof(w));
    gw__sock_hello_id_put(w, &id);
    const uint8_t head[8] = {'G', 'W', 'H', 'L', 0xee, 0xee, 0xee, 0xee};
    cr_expect_arr_eq(w, head, 8, "magic first; bytes 4-7 are the protocol's");
    cr_expect_eq(w[8], 0xa0);
    cr_expect_eq(w[23], 0xaf);
    cr_expect_eq(w[27], 3);
    cr_expect_eq(w[28], 1);
    cr_expect_eq(w[31], 4);
    gw__sock_hello_id_get(w, &got);
    cr_expect_eq(memcmp(&got, &id, sizeof(id)), 0);
}

Test(sock, retry_pauses_double_up_to_a_second)
{
    gw_sock_retry_t r;
    gw__sock_retry_init(&r);
    cr_expect_eq(r.at, 0, "the first attempt is due at once");
    const int want[] = {10, 20, 40, 80, 160, 320, 640, 1000, 1000};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        int64_t before = gw__now_ms();
        cr_expect_eq(gw__sock_retry_arm(&r), want[i]);
        cr_expect_geq(r.at, before + want[i]);
    }
}

static int listener(struct sockaddr_storage *ss, socklen_t *len)
{
    *ss = v4("127.0.0.1", 0);
    *len = sizeof(struct sockaddr_in);
    int fd = gw__sock_open(AF_INET);
    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)ss, *len), 0);
    cr_assert_eq(listen(fd, 4), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)ss, len), 0);
    return fd;
}

Test(sock, dial_accept_and_transfer, .timeout = 10)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(&ss, &len);
    char addr[64];
    errno = 0;
    cr_expect_lt(gw__sock_accept(lfd, addr, sizeof(addr)), 0);
    cr_expect(errno == EAGAIN || errno == EWOULDBLOCK, "nobody waits: %s", strerror(errno));

    int fd = gw__sock_open(AF_INET);
    int st = gw__sock_connect(fd, (struct sockaddr *)&ss, len);
    cr_assert_neq(st, GW_SOCK_FAILED, "%s", strerror(errno));
    while (st == GW_SOCK_CONNECTING) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        cr_assert_eq(poll(&p, 1, 5000), 1);
        int err = gw__sock_connect_result(fd, p.revents);
        cr_assert_leq(err, 0, "%s", strerror(err));
        st = err == 0 ? GW_SOCK_CONNECTED : st;
    }
    cr_expect_eq(gw__sock_nodelay(fd), 0);
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 5000), 1);
    int afd = gw__sock_accept(lfd, addr, sizeof(addr));
    cr_assert_geq(afd, 0);
    cr_expect_eq(strncmp(addr, "127.0.0.1:", 10), 0, "%s", addr);

    /* Two segments out, read back in pieces of another shape. */
    char head[3] = "abc", body[5] = "defgh", got[8];
    gw_sock_io_t tx, rx;
    gw__sock_io_set(&tx, head, sizeof(head), body, sizeof(body));
    cr_expect_eq(gw__sock_io_run(fd, &tx, 1, gw__now_ms() + 5000), GW_SOCK_IO_DONE);
    gw__sock_io_set(&rx, got, 6, got + 6, 2);
    cr_expect_eq(gw__sock_io_run(afd, &rx, 0, gw__now_ms() + 5000), GW_SOCK_IO_DONE);
    cr_expect_arr_eq(got, "abcdefgh", 8);
    /* Nothing more comes: a step says so, a run times out. */
    gw__sock_io_set(&rx, got, 1, NULL, 0);
    cr_expect_eq(gw__sock_io_step(afd, &rx, 0), GW_SOCK_IO_AGAIN);
    cr_expect_eq(gw__sock_io_run(afd, &rx, 0, gw__now_ms() + 20), GW_SOCK_IO_TIMEOUT);
    close(fd);
    cr_expect_eq(gw__sock_io_run(afd, &rx, 0, gw__now_ms() + 5000), GW_SOCK_IO_EOF);
    /* Writing to a closed peer is an error, not SIGPIPE. */
    int rc;
    do {
        gw__sock_io_set(&tx, body, sizeof(body), NULL, 0);
        rc = gw__sock_io_run(afd, &tx, 1, gw__now_ms() + 5000);
    } while (rc == GW_SOCK_IO_DONE);
    cr_expect_eq(rc, GW_SOCK_IO_ERROR);
    close(afd);
    close(lfd);
}

Test(sock, refused_connection_is_reported, .timeout = 10)
{
    struct sockaddr_storage ss;
    socklen_t len;
    close(listener(&ss, &len)); /* nobody listens there now */
    int fd = gw__sock_open(AF_INET);
    int st = gw__sock_connect(fd, (struct sockaddr *)&ss, len);
    int err = st == GW_SOCK_FAILED ? errno : -1;
    while (err < 0) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        cr_assert_eq(poll(&p, 1, 5000), 1);
        err = gw__sock_connect_result(fd, p.revents);
    }
    cr_expect_eq(err, ECONNREFUSED, "%s", strerror(err));
    close(fd);
}

static int dial_until_settled(gw_sock_dial_t *d, struct sockaddr_storage *ss, socklen_t len,
                              const char **what)
{
    int st = gw__sock_dial_step(d, (struct sockaddr *)ss, len, 0, NULL, NULL, what);
    while (st == GW_SOCK_CONNECTING) {
        struct pollfd p = {.fd = d->fd, .events = gw__sock_dial_events(d)};
        cr_assert_eq(p.events, POLLOUT, "connect() under way: poll for POLLOUT");
        cr_assert_eq(poll(&p, 1, 5000), 1);
        st = gw__sock_dial_step(d, (struct sockaddr *)ss, len, p.revents, NULL, NULL, what);
    }
    return st;
}

/* A refused attempt is recorded and rescheduled; the next one, due only
 * after its pause, reaches the listener that has come up meanwhile. */
Test(sock, dial_retries_until_the_peer_listens, .timeout = 10)
{
    struct sockaddr_storage ss;
    socklen_t len;
    int lfd = listener(&ss, &len);
    close(lfd); /* nobody listens there now */
    gw_sock_dial_t d;
    gw__sock_dial_init(&d);
    cr_expect_eq(gw__sock_dial_events(&d), 0);
    const char *what = NULL;
    cr_assert_eq(dial_until_settled(&d, &ss, len, &what), GW_SOCK_FAILED);
    cr_expect_str_eq(what, "connect");
    cr_expect_eq(gw__sock_dial_failed(&d, what), GW_SOCK_RETRY_FIRST_MS);
    cr_expect_eq(d.fd, -1);
    cr_expect_str_eq(d.why, "connect: Connection refused");
    cr_expect_eq(gw__sock_dial_step(&d, (struct sockaddr *)&ss, len, 0, NULL, NULL, &what),
                 GW_SOCK_CONNECTING, "not due yet");
    cr_expect_eq(d.fd, -1);

    lfd = gw__sock_open(AF_INET);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    cr_assert_eq(bind(lfd, (struct sockaddr *)&ss, len), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    while (gw__now_ms() < d.retry.at)
        poll(NULL, 0, 1);
    cr_expect_eq(dial_until_settled(&d, &ss, len, &what), GW_SOCK_CONNECTED);
    cr_expect_eq(gw__sock_dial_events(&d), 0, "connected: the caller's protocol polls");
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 5000), 1);
    int afd = gw__sock_accept(lfd, NULL, 0);
    cr_expect_geq(afd, 0);
    close(afd);
    close(d.fd);
    close(lfd);
}
