/*
 * test_tcp_faults.c - the TCP transport when things go wrong: peers that
 * die, abort or say goodbye, forged headers, strangers on the listening
 * port, bad interfaces and parameters, missing, silent and refusing peers.
 * The harness is tcp_test_util.h.
 */
#include <pthread.h>

#include "common/sha256.h"
#include "tcp_test_util.h"

/* ---- failures ------------------------------------------------------------------ */

typedef struct death_case {
    int mid_stream;   /* rank 0 dies after writing part of a large message, else idle */
    int victim_sends; /* the survivor is sending (EPIPE/reset) rather than receiving */
} death_case_t;

static int body_death(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const death_case_t *c = arg;
    /* Mid-stream, rank 0 dies after its first progress round that wrote
     * anything; one round writes at most 16 MiB per socket, so 256 MiB
     * cannot all go out in it. Untouched pages of the buffers cost nothing. */
    size_t len = c->mid_stream ? 256 * MIB : 64 * MIB;
    if (rank == 0) {
        if (c->mid_stream && !c->victim_sends) {
            uint8_t *buf = calloc(1, len);
            CHECK(buf, "calloc");
            gw_request_t s;
            make_req(&s, GW_REQ_SEND, 1, 1, 5, buf, len);
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            while (s.bytes_done == 0)
                CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
            CHECK(!s.complete, "the whole message went out in one round");
        } else {
            usleep(100 * 1000);
        }
        _exit(0); /* no close, no goodbye: as if the process crashed */
    }
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    gw_request_t r;
    make_req(&r, c->victim_sends ? GW_REQ_SEND : GW_REQ_RECV, 0, 1, 5, buf, len);
    if (c->victim_sends) {
        memset(buf, 1, len);
        CHECK_ST(t->ops->isend(t, &r), GW_OK);
    } else {
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    }
    /* The clock starts when the peer dies. Mid-stream, that is as its
     * first bytes arrive (it dies right after the round that wrote them):
     * timed from the receive's post instead, it also counted how long the
     * peer took to be scheduled, to connect and to write, 2.7 s once under
     * ASan on a loaded machine. */
    if (c->mid_stream && !c->victim_sends) {
        int64_t until = gw__now_ms() + 5000;
        while (r.bytes_done == 0 && !r.complete && gw__now_ms() < until &&
               t->ops->progress(t, NULL, 10) == GW_OK)
            ;
    }
    int64_t t0 = gw__now_ms();
    gw_status_t st = wait_one(t, &r, 5000);
    int64_t took = gw__now_ms() - t0;
    CHECK_ST(st, GW_ERR_REMOTE);
    CHECK(r.complete && r.status == GW_ERR_REMOTE, "request not failed");
    CHECK(took < 2500, "the failure took %lld ms to notice", (long long)took);
    CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_REMOTE);
    gw_request_t later;
    make_req(&later, GW_REQ_SEND, 0, 2, 5, buf, 1);
    CHECK_ST(t->ops->isend(t, &later), GW_ERR_REMOTE);
    free(buf);
    return 0;
}

Test(tcp, peer_dies_mid_stream, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 1};
    job_t j = job(2, 4, body_death, &c);
    run_job(&j);
}

Test(tcp, peer_dies_while_we_wait, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 0};
    job_t j = job(2, 1, body_death, &c);
    run_job(&j);
}

Test(tcp, peer_dies_while_we_send, .timeout = 15)
{
    static const death_case_t c = {.mid_stream = 0, .victim_sends = 1};
    job_t j = job(2, 2, body_death, &c);
    run_job(&j);
}

/* Rank 0 aborts with a status of its own; rank 1, waiting for a message,
 * fails with that status. */
static int body_abort(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 0) {
        usleep(50 * 1000);
        int64_t t0 = gw__now_ms();
        CHECK_ST(gw__transport_abort(t, GW_ERR_TIMEOUT), GW_OK);
        CHECK(gw__now_ms() - t0 < 500, "abort blocked for %lld ms", (long long)(gw__now_ms() - t0));
        CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_ABORTED);
        make_req(&r, GW_REQ_SEND, 1, 1, 1, buf, sizeof(buf));
        CHECK_ST(t->ops->isend(t, &r), GW_ERR_ABORTED);
        CHECK(r.complete && r.status == GW_ERR_ABORTED, "request not failed");
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_TIMEOUT);
    CHECK(r.status == GW_ERR_TIMEOUT, "request status %s", gw_status_name(r.status));
    return 0;
}

Test(tcp, abort_frame_carries_status, .timeout = 15)
{
    job_t j = job(2, 2, body_abort, NULL);
    run_job(&j);
}

/* Rank 0 aborts on behalf of others: rank 2 reported the failure and rank 1
 * is to blame. Ranks 1 and 2, waiting for a message from rank 0, fail with
 * the status, and take over the culprit and the origin from the frame
 * instead of blaming rank 0, the messenger. */
static int body_abort_blame(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 0) {
        usleep(50 * 1000);
        gw_abort_info_t why = {.status = GW_ERR_TIMEOUT, .origin = 2, .culprit = 1};
        CHECK_ST(t->ops->abort(t, &why), GW_OK);
        CHECK(t->culprit == 1 && t->origin == 2, "the aborting rank blames %d (origin %d)",
              t->culprit, t->origin);
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_TIMEOUT);
    CHECK(t->culprit == 1, "rank %d blames rank %d, not rank 1", rank, t->culprit);
    CHECK(t->origin == 2, "rank %d has origin %d, not rank 2", rank, t->origin);
    CHECK(t->blame == GW_BLAME_ABORT, "rank %d: blame kind %d", rank, (int)t->blame);
    return 0;
}

Test(tcp, abort_frame_carries_origin_and_culprit, .timeout = 15)
{
    job_t j = job(3, 1, body_abort_blame, NULL);
    run_job(&j);
}

typedef struct goodbye_case {
    int recv_posted_first; /* rank 1's receive is pending when the goodbye comes */
} goodbye_case_t;

static int body_goodbye(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const goodbye_case_t *c = arg;
    uint8_t buf[100];
    gw_request_t r;
    if (rank == 0) {
        if (!c->recv_posted_first) {
            fill(buf, sizeof(buf), 0, 1, 1);
            make_req(&r, GW_REQ_SEND, 1, 1, 1, buf, sizeof(buf));
            CHECK_ST(t->ops->isend(t, &r), GW_OK);
            CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        } else {
            usleep(100 * 1000);
        }
        return 0; /* rank_main closes: goodbye */
    }
    if (c->recv_posted_first) {
        make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_REMOTE);
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_OK);
    CHECK(verify(buf, sizeof(buf), 0, 1, 1) < 0, "content");
    /* A goodbye with nothing expected from that peer is fine. */
    int64_t end = gw__now_ms() + 300;
    while (gw__now_ms() < end)
        CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
    make_req(&r, GW_REQ_RECV, 0, 2, 1, buf, sizeof(buf));
    gw_status_t st = t->ops->irecv(t, &r);
    if (st == GW_OK)
        st = wait_one(t, &r, 5000);
    CHECK_ST(st, GW_ERR_REMOTE);
    CHECK(r.complete && r.status == GW_ERR_REMOTE, "request not failed");
    return 0;
}

Test(tcp, goodbye_then_receive_is_remote_error, .timeout = 15)
{
    static const goodbye_case_t c = {.recv_posted_first = 0};
    job_t j = job(2, 2, body_goodbye, &c);
    run_job(&j);
}

Test(tcp, goodbye_with_receive_pending_is_remote_error, .timeout = 15)
{
    static const goodbye_case_t c = {.recv_posted_first = 1};
    job_t j = job(2, 1, body_goodbye, &c);
    run_job(&j);
}

/* Write raw bytes on rank 0's socket k to rank 1, behind the transport's
 * back (the sockets are non-blocking: wait for room with poll). */
static int raw_send(gw_transport_t *base, int peer, int k, const void *buf, size_t len)
{
    gw_tcp_t *t = gw__tcp_of(base);
    int fd = t->peers[peer].socks[k].fd;
    const uint8_t *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            poll(&pfd, 1, 100);
            continue;
        }
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

typedef struct forgery {
    int bad_magic; /* else: part 1's header disagrees with part 0 */
} forgery_t;

/* Rank 0 forges frames; rank 1 must fail with GW_ERR_PROTOCOL before
 * trusting them, and its abort tells rank 0. */
static int body_forgery(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const forgery_t *c = arg;
    size_t len = 256 * 1024, half = len / 2;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    if (rank == 0) {
        memset(buf, 0x11, len);
        uint8_t hdr[GW_TCP_HDR_SIZE];
        gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                          .type = GW_TCP_DATA,
                          .seq = 1,
                          .sig = 2,
                          .total = len,
                          .offset = 0,
                          .part_len = half};
        if (c->bad_magic) {
            h.magic = 0x12345678;
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 0, hdr, sizeof(hdr)) == 0, "raw send");
        } else {
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 0, hdr, sizeof(hdr)) == 0, "raw send");
            CHECK(raw_send(t, 1, 0, buf, half) == 0, "raw send");
            h.seq = 7; /* part 1 claims another message */
            h.offset = half;
            gw__tcp_hdr_encode(&h, hdr);
            CHECK(raw_send(t, 1, 1, hdr, sizeof(hdr)) == 0, "raw send");
            CHECK(raw_send(t, 1, 1, buf, half) == 0, "raw send");
        }
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, 1, 1, 2, buf, 1);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_ERR_PROTOCOL);
        free(buf);
        return 0;
    }
    memset(buf, 0x5A, len);
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, 2, buf, len);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_PROTOCOL);
    for (size_t i = half; i < len; i++)
        CHECK(buf[i] == 0x5A, "byte %zu was written from a disagreeing part", i);
    CHECK_ST(gw__transport_abort(t, GW_ERR_PROTOCOL), GW_OK);
    free(buf);
    return 0;
}

Test(tcp, garbage_header_is_protocol_error, .timeout = 15)
{
    static const forgery_t c = {.bad_magic = 1};
    job_t j = job(2, 1, body_forgery, &c);
    run_job(&j);
}

Test(tcp, part_header_disagreeing_with_part0_is_protocol_error, .timeout = 15)
{
    static const forgery_t c = {.bad_magic = 0};
    job_t j = job(2, 2, body_forgery, &c);
    run_job(&j);
}

/* ---- connection establishment ---------------------------------------------------- */

static int connect_stranger(const uint8_t *blob)
{
    struct sockaddr_storage ss;
    socklen_t len;
    if (gw__tcp_addr_decode(blob, &ss, &len) != GW_OK)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Strangers knock on the ports of rank 0 (which accepts from the others) and
 * of the last rank: garbage, silence, a hello of another job, a hello with a
 * bad rank, and an immediate close. */
static void add_strangers(job_t *j, uint8_t *all)
{
    static const char garbage[] = "GET / HTTP/1.0\r\nHost: gradwire\r\n\r\n0123456789abcdef";
    for (int which = 0; which < 2; which++) {
        const uint8_t *blob = all + (which ? j->n - 1 : 0) * GW_TRANSPORT_ADDR_MAX;
        int fd;
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, garbage, sizeof(garbage));
            j->stranger_fds[j->nstrangers++] = fd;
        }
        if ((fd = connect_stranger(blob)) >= 0) /* silent */
            j->stranger_fds[j->nstrangers++] = fd;
        if ((fd = connect_stranger(blob)) >= 0)
            close(fd);
        uint8_t hello[GW_TCP_HELLO_SIZE];
        gw_tcp_hello_t h = {.id = {.magic = GW_TCP_HELLO_MAGIC, .from = 1, .to = 0},
                            .version = GW_TCP_PROTOCOL_VERSION,
                            .sock_idx = 0,
                            .nsocks = (uint32_t)j->nsocks};
        memset(h.id.job_id, 0x43, sizeof(h.id.job_id)); /* not our job (0x42) */
        gw__tcp_hello_encode(&h, hello);
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, hello, sizeof(hello));
            j->stranger_fds[j->nstrangers++] = fd;
        }
        memset(h.id.job_id, 0x42, sizeof(h.id.job_id));
        h.id.from = 0; /* rank 0 never connects to anyone */
        gw__tcp_hello_encode(&h, hello);
        if ((fd = connect_stranger(blob)) >= 0) {
            write_all(fd, hello, sizeof(hello));
            j->stranger_fds[j->nstrangers++] = fd;
        }
    }
}

Test(tcp, strangers_do_not_break_connect, .timeout = 15)
{
    job_t j = job(3, 2, body_ring, NULL);
    j.tamper = add_strangers;
    run_job(&j);
    cr_expect_geq(j.nstrangers, 6, "the strangers could not even connect");
}

/* An impostor that knows the job id (0x42 here, sent in clear by the
 * bootstrap) but not the token claims the last rank's socket 0 towards rank
 * 0: it sends a well-formed hello, reads rank 0's answer and sends a proof
 * it cannot make right; then it plays the same hello and proof back on a
 * second connection. Both must be dropped, never admitted, and the real
 * last rank must still get in and the ring exchange complete with the
 * right bytes. */
typedef struct impostor {
    struct sockaddr_storage ss;
    socklen_t len;
    int n, nsocks;
    int answered[2]; /* rank 0 answered its hello (so its proof was judged) */
    int admitted[2]; /* rank 0 admitted it (the OK byte came) */
    pthread_t th;
} impostor_t;

static impostor_t the_impostor;

static int imp_connect(const impostor_t *im)
{
    int fd = socket(im->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (fd >= 0 && connect(fd, (struct sockaddr *)&im->ss, im->len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int read_full(int fd, uint8_t *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(fd, buf + got, len - got, 0);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static void *impostor_main(void *arg)
{
    impostor_t *im = arg;
    uint8_t hello[GW_TCP_HELLO_SIZE], reply[GW_TCP_HELLO_SIZE + GW_SOCK_MAC_LEN];
    uint8_t proof[GW_SOCK_MAC_LEN], ok;
    gw_tcp_hello_t h = {.id = {.magic = GW_TCP_HELLO_MAGIC, .from = (uint32_t)im->n - 1, .to = 0},
                        .version = GW_TCP_PROTOCOL_VERSION,
                        .sock_idx = 0,
                        .nsocks = (uint32_t)im->nsocks};
    memset(h.id.job_id, 0x42, sizeof(h.id.job_id)); /* our job's id */
    gw__tcp_hello_encode(&h, hello);
    for (int i = 0; i < GW_SOCK_NONCE_LEN; i++)
        hello[GW_SOCK_NONCE_AT + i] = (uint8_t)(0x90 + i);
    /* Its best guess: a MAC under the job id, which is all it knows. */
    uint8_t guess_key[16];
    memset(guess_key, 0x42, sizeof(guess_key));
    for (int round = 0; round < 2; round++) {
        int fd = imp_connect(im);
        if (fd < 0)
            return NULL;
        if (write_all(fd, hello, sizeof(hello)) == 0 && read_full(fd, reply, sizeof(reply)) == 0) {
            im->answered[round] = 1;
            if (round == 0)
                gw__hmac_sha256(guess_key, sizeof(guess_key), reply, sizeof(reply), proof);
            if (write_all(fd, proof, sizeof(proof)) == 0 && read_full(fd, &ok, 1) == 0)
                im->admitted[round] = 1;
        }
        close(fd);
    }
    return NULL;
}

static void add_impostor(job_t *j, uint8_t *all)
{
    impostor_t *im = &the_impostor;
    memset(im, 0, sizeof(*im));
    im->n = j->n;
    im->nsocks = j->nsocks;
    if (gw__tcp_addr_decode(all, &im->ss, &im->len) != GW_OK)
        return;
    pthread_create(&im->th, NULL, impostor_main, im);
}

Test(tcp, impostor_with_the_job_id_is_dropped_and_the_job_goes_on, .timeout = 20)
{
    job_t j = job(3, 1, body_ring, NULL);
    j.tamper = add_impostor;
    /* The real rank 2 comes late, so that the impostor's claim is judged
     * first rather than turned away as a duplicate of a proven socket. */
    j.delay_connect_ms[2] = 400;
    run_job(&j);
    pthread_join(the_impostor.th, NULL);
    cr_expect(the_impostor.answered[0],
              "rank 0 never answered the impostor's hello: its proof was not tested");
    cr_expect(!the_impostor.admitted[0], "rank 0 admitted the impostor with a wrong proof");
    /* The replayed hello is known by its nonce: dropped before an answer. */
    cr_expect(!the_impostor.answered[1], "rank 0 answered a replayed hello");
    cr_expect(!the_impostor.admitted[1], "rank 0 admitted a replayed hello and proof");
}

static int body_small_exchange(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    uint8_t sbuf[300], rbuf[300];
    fill(sbuf, sizeof(sbuf), rank, peer, 9);
    gw_request_t s, r;
    make_req(&s, GW_REQ_SEND, peer, 9, 9, sbuf, sizeof(sbuf));
    make_req(&r, GW_REQ_RECV, peer, 9, 9, rbuf, sizeof(rbuf));
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *both[] = {&s, &r};
    CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
    CHECK(verify(rbuf, sizeof(rbuf), peer, rank, 9) < 0, "content");
    return 0;
}

Test(tcp, ifname_lo_works, .timeout = 15)
{
    job_t j = job(2, 2, body_small_exchange, NULL);
    j.ifname = "lo";
    run_job(&j);
}

static void open_one(const char *ifname, gw_status_t want)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = 0;
    pr.size = 2;
    pr.log = &lg;
    pr.timeout_ms = 1000;
    pr.ifname = ifname;
    pr.nsocks = 1;
    struct sockaddr_in *in = (struct sockaddr_in *)&pr.default_addr;
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    pr.default_addr_len = sizeof(*in);
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    gw_status_t st = gw__tcp_transport_ops.open(&pr, &t, addr);
    cr_expect_eq(st, want, "open(ifname %s) gave %s, expected %s", ifname ? ifname : "(none)",
                 gw_status_name(st), gw_status_name(want));
    if (st == GW_OK) {
        struct sockaddr_storage ss;
        socklen_t len;
        cr_expect_eq(gw__tcp_addr_decode(addr, &ss, &len), GW_OK);
        cr_expect_eq(ss.ss_family, AF_INET);
        cr_expect_eq(((struct sockaddr_in *)&ss)->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        cr_expect_neq(((struct sockaddr_in *)&ss)->sin_port, 0);
        cr_expect_eq(gw__tcp_transport_ops.mem_reg(t, addr, 1, NULL), GW_ERR_UNSUPPORTED);
        cr_expect_eq(gw__tcp_transport_ops.mem_dereg(t, NULL), GW_ERR_UNSUPPORTED);
        /* Nothing moves before connect(). */
        cr_expect_neq(t->ops->progress(t, NULL, 0), GW_OK);
        t->ops->close(t);
    } else {
        cr_expect_null(t, "*out written on failure");
    }
    gw__logger_fini(&lg);
}

Test(tcp, ifname_that_does_not_exist_is_config_error, .timeout = 15)
{
    setenv("GW_SOCKET_IFNAME", "gw_no_such_if0", 1);
    open_one(getenv("GW_SOCKET_IFNAME"), GW_ERR_CONFIG);
    unsetenv("GW_SOCKET_IFNAME");
    open_one("lo", GW_OK);
    open_one(NULL, GW_OK);
    open_one("", GW_OK);
}

Test(tcp, bad_open_parameters, .timeout = 15)
{
    gw_transport_params_t pr;
    memset(&pr, 0, sizeof(pr));
    pr.rank = 0;
    pr.size = 2;
    pr.nsocks = 0;
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_transport_t *t = NULL;
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_CONFIG);
    pr.nsocks = 1;
    pr.rank = 2;
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_INVALID_ARG);
    pr.rank = 0; /* no default address and no ifname */
    cr_expect_eq(gw__tcp_transport_ops.open(&pr, &t, addr), GW_ERR_CONFIG);
    cr_expect_null(t);
    gw__tcp_transport_ops.close(NULL);
}

/* Rank 1 never connects: rank 0, which waits for rank 1's connections, must
 * time out on time and name it. */
Test(tcp, missing_peer_times_out, .timeout = 15)
{
    job_t j = job(2, 2, NULL, NULL);
    j.timeout_ms = 500;
    j.skip_connect_rank = 1;
    j.expect_connect[0] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Rank 0 never connects (but listens): rank 1's connections are accepted by
 * the kernel and never answered, so its handshakes time out. */
Test(tcp, silent_peer_times_out, .timeout = 15)
{
    job_t j = job(2, 1, NULL, NULL);
    j.timeout_ms = 500;
    j.skip_connect_rank = 0;
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

static void point_rank0_at_closed_port(job_t *j, uint8_t *all)
{
    (void)j;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(in);
    bind(fd, (struct sockaddr *)&in, sizeof(in));
    getsockname(fd, (struct sockaddr *)&in, &len);
    close(fd); /* nobody listens there now: connections are refused */
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    memcpy(&ss, &in, sizeof(in));
    gw__tcp_addr_encode((struct sockaddr *)&ss, all);
}

Test(tcp, refused_connection_retries_then_times_out, .timeout = 15)
{
    job_t j = job(2, 1, NULL, NULL);
    j.timeout_ms = 600;
    j.tamper = point_rank0_at_closed_port;
    j.expect_connect[0] = GW_ERR_TIMEOUT; /* rank 1 never gets through */
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Ranks that disagree on GW_NSOCKS: both say so at once, once each proved
 * the key (an impostor's hello must not be able to stop the job). */
static int body_nothing(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)t;
    (void)rank;
    (void)size;
    (void)arg;
    return 0;
}

Test(tcp, nsocks_disagreement_is_config_error, .timeout = 15)
{
    job_t j = job(2, 1, body_nothing, NULL);
    j.nsocks_of[0] = 2;
    j.timeout_ms = 800;
    j.expect_connect[0] = GW_ERR_CONFIG;
    j.expect_connect[1] = GW_ERR_CONFIG;
    run_job(&j);
}

/* ---- pieces ---------------------------------------------------------------------- */

Test(tcp, parts_cover_the_message)
{
    cr_expect_eq(gw__tcp_nparts(0, 4), 1);
    cr_expect_eq(gw__tcp_nparts(64 * 1024 - 1, 4), 1);
    cr_expect_eq(gw__tcp_nparts(128 * 1024, 4), 2);
    cr_expect_eq(gw__tcp_nparts(MIB + 3, 4), 4);
    cr_expect_eq(gw__tcp_nparts(MIB + 3, 1), 1);
    const size_t lens[] = {0, 1, 65536, 131071, MIB + 3, 8 * MIB};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        for (int ns = 1; ns <= 8; ns++) {
            size_t np = gw__tcp_nparts(lens[i], ns), next = 0;
            for (size_t k = 0; k < np; k++) {
                size_t off, plen;
                gw__tcp_part_range(lens[i], np, k, &off, &plen);
                cr_expect_eq(off, next, "len %zu part %zu", lens[i], k);
                if (np > 1)
                    cr_expect_geq(plen, 64 * 1024, "len %zu part %zu is %zu", lens[i], k, plen);
                next = off + plen;
            }
            cr_expect_eq(next, lens[i]);
        }
    }
}

Test(tcp, wire_round_trip)
{
    gw_tcp_hdr_t h = {.magic = GW_TCP_FRAME_MAGIC,
                      .type = GW_TCP_ABORT,
                      .seq = 0x0102030405060708ull,
                      .sig = 0xdeadbeef,
                      .status = GW_ERR_TIMEOUT,
                      .total = 1ull << 40,
                      .offset = 12345,
                      .part_len = 678};
    uint8_t buf[GW_TCP_HDR_SIZE];
    gw__tcp_hdr_encode(&h, buf);
    cr_expect_eq(buf[0], 0x47); /* big-endian magic "GWFR" */
    cr_expect_eq(buf[3], 0x52);
    gw_tcp_hdr_t d;
    gw__tcp_hdr_decode(buf, &d);
    cr_expect(memcmp(&h, &d, sizeof(h)) == 0);

    struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(4242)};
    inet_pton(AF_INET6, "fe80::1", &in6.sin6_addr);
    in6.sin6_scope_id = 3;
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__tcp_addr_encode((struct sockaddr *)&in6, blob);
    struct sockaddr_storage ss;
    socklen_t len;
    cr_expect_eq(gw__tcp_addr_decode(blob, &ss, &len), GW_OK);
    cr_expect_eq(len, sizeof(in6));
    cr_expect(memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr, &in6.sin6_addr, 16) == 0);
    cr_expect_eq(((struct sockaddr_in6 *)&ss)->sin6_port, htons(4242));
    cr_expect_eq(((struct sockaddr_in6 *)&ss)->sin6_scope_id, 3u);
    blob[0] ^= 1;
    cr_expect_eq(gw__tcp_addr_decode(blob, &ss, &len), GW_ERR_PROTOCOL);
}
