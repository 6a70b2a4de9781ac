/*
 * test_ib_oob.c - the verbs transport's out-of-band connection set-up
 * (ib_oob.c, GW_IB_CM=oob) over a real RDMA device, with strangers knocking
 * on its TCP port. Two transports in one process, one thread per rank.
 * Skipped where no active RDMA port exists (here: everywhere but
 * scripts/rxe-vm, which runs it over Soft-RoCE; see
 * tests/integration/rxe_vm_test.sh).
 */
#include <criterion/criterion.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "transport/ib/ib_internal.h"
#include "transport/sock.h"

#define NRANKS 2

typedef struct rank {
    gw_logger_t lg;
    gw_transport_t *t;
    const uint8_t *all;
    gw_status_t connect_st;
} rank_t;

static void *connect_thread(void *arg)
{
    rank_t *r = arg;
    r->connect_st = r->t->ops->connect(r->t, r->all);
    return NULL;
}

/* Open NRANKS transports in OOB mode on loopback; skips without RDMA. */
static void open_ranks(rank_t *r, uint8_t *all, int timeout_ms)
{
    setenv("GW_IB_CM", "oob", 1);
    for (int i = 0; i < NRANKS; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].lg.level = getenv("GW_TEST_DEBUG") ? GW_LOG_TRACE : GW_LOG_ERROR;
        r[i].lg.rank = i;
        r[i].lg.file = stderr;
        strcpy(r[i].lg.host, "oob");
        gw_transport_params_t p;
        memset(&p, 0, sizeof(p));
        p.rank = i;
        p.size = NRANKS;
        p.log = &r[i].lg;
        p.timeout_ms = timeout_ms;
        p.nsocks = 1;
        for (int k = 0; k < 16; k++)
            p.job_id[k] = (uint8_t)(0x40 + k);
        memset(p.data_key, 0x5c, sizeof(p.data_key)); /* the bootstrap's, on every rank */
        struct sockaddr_in *lo = (struct sockaddr_in *)&p.default_addr;
        lo->sin_family = AF_INET;
        lo->sin_addr.s_addr = htonl(0x7f000001);
        p.default_addr_len = sizeof(*lo);
        gw_status_t st = gw__ib_transport_ops.open(&p, &r[i].t, all + i * GW_TRANSPORT_ADDR_MAX);
        if (st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED) {
            for (int k = 0; k < i; k++)
                r[k].t->ops->close(r[k].t);
            cr_skip_test("no usable RDMA port here (%s); run under scripts/rxe-vm",
                         gw_status_name(st));
        }
        cr_assert_eq(st, GW_OK, "open of rank %d: %s", i, gw_status_name(st));
        r[i].all = all;
    }
}

/* A stranger connects to the port, sends a hello-sized block of garbage and
 * waits until it is dropped: when this returns, the listener has accepted
 * it, judged it and closed it. */
static int knock(const struct sockaddr_storage *ss)
{
    socklen_t len =
        ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (const struct sockaddr *)ss, len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    uint8_t junk[GW_IB_HELLO_SIZE];
    memset(junk, 0x5a, sizeof(junk));
    gw_sock_io_t io;
    gw__sock_io_set(&io, junk, sizeof(junk), NULL, 0);
    int r = gw__sock_io_run(fd, &io, 1, gw__now_ms() + 5000);
    uint8_t b;
    gw__sock_io_set(&io, &b, 1, NULL, 0);
    if (r == GW_SOCK_IO_DONE)
        r = gw__sock_io_run(fd, &io, 0, gw__now_ms() + 5000);
    close(fd);
    return r == GW_SOCK_IO_EOF ? 0 : -1;
}

/* More strangers than the listener holds at once come and go, one after
 * the other, while rank 0 waits for rank 1: each is dropped, and rank 1,
 * which dials only after all of them, still gets in. */
Test(ib_oob, strangers_that_went_away_do_not_lock_out_a_rank, .timeout = 120)
{
    rank_t r[NRANKS];
    uint8_t all[NRANKS * GW_TRANSPORT_ADDR_MAX];
    open_ranks(r, all, 10000);
    gw_ib_addr_t a0;
    cr_assert_eq(gw__ib_addr_decode(all, &a0), GW_OK);
    pthread_t th[NRANKS];
    pthread_create(&th[0], NULL, connect_thread, &r[0]);
    int dropped = 0;
    for (int i = 0; i < 200; i++)
        dropped += knock(&a0.sa) == 0;
    cr_expect_eq(dropped, 200, "every stranger is accepted and dropped");
    pthread_create(&th[1], NULL, connect_thread, &r[1]);
    for (int i = 0; i < NRANKS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NRANKS; i++) {
        cr_expect_eq(r[i].connect_st, GW_OK, "connect of rank %d: %s", i,
                     gw_status_name(r[i].connect_st));
        r[i].t->ops->close(r[i].t);
    }
}

/* More strangers than the listener holds at once connect and say nothing,
 * holding their connections for the whole set-up: the one that has waited
 * longest makes room for each newcomer, so rank 1 still gets in (a real
 * rank dropped this way sees EOF and dials again). */
Test(ib_oob, silent_strangers_do_not_lock_out_a_rank, .timeout = 120)
{
    rank_t r[NRANKS];
    uint8_t all[NRANKS * GW_TRANSPORT_ADDR_MAX];
    open_ranks(r, all, 10000);
    gw_ib_addr_t a0;
    cr_assert_eq(gw__ib_addr_decode(all, &a0), GW_OK);
    socklen_t len =
        a0.sa.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    pthread_t th[NRANKS];
    pthread_create(&th[0], NULL, connect_thread, &r[0]);
    enum { NSILENT = 80 };
    int silent[NSILENT];
    for (int i = 0; i < NSILENT; i++) {
        silent[i] = socket(a0.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(silent[i], (const struct sockaddr *)&a0.sa, len), 0);
    }
    poll(NULL, 0, 2000); /* rank 0 accepts them all meanwhile */
    pthread_create(&th[1], NULL, connect_thread, &r[1]);
    for (int i = 0; i < NRANKS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NSILENT; i++)
        close(silent[i]);
    for (int i = 0; i < NRANKS; i++) {
        cr_expect_eq(r[i].connect_st, GW_OK, "connect of rank %d: %s", i,
                     gw_status_name(r[i].connect_st));
        r[i].t->ops->close(r[i].t);
    }
}

/* Reads exactly len bytes within 5 s: 0, or -1 on EOF, error or time-out. */
static int read_exact(int fd, uint8_t *buf, size_t len)
{
    gw_sock_io_t io;
    gw__sock_io_set(&io, buf, len, NULL, 0);
    return gw__sock_io_run(fd, &io, 0, gw__now_ms() + 5000) == GW_SOCK_IO_DONE ? 0 : -1;
}

/* An impostor that knows the job id (it crosses the wire in clear) but not
 * the token claims rank 1 towards rank 0 before rank 1 dials: a well-formed
 * hello, then a proof it cannot make right; then the same hello played
 * back. Rank 0 answers the first (so its proof is judged), admits neither,
 * and knows the second by its nonce; nothing the impostor sent touches
 * rank 0's QPs, and rank 1 still gets in. */
Test(ib_oob, impostor_with_the_job_id_is_dropped, .timeout = 120)
{
    rank_t r[NRANKS];
    uint8_t all[NRANKS * GW_TRANSPORT_ADDR_MAX];
    open_ranks(r, all, 10000);
    gw_ib_addr_t a0;
    cr_assert_eq(gw__ib_addr_decode(all, &a0), GW_OK);
    socklen_t len =
        a0.sa.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    pthread_t th[NRANKS];
    pthread_create(&th[0], NULL, connect_thread, &r[0]);
    gw_ib_hello_t h;
    memset(&h, 0, sizeof(h));
    h.id.magic = GW_IB_HELLO_MAGIC;
    h.version = GW_IB_PROTOCOL_VERSION;
    for (int k = 0; k < 16; k++)
        h.id.job_id[k] = (uint8_t)(0x40 + k);
    h.id.from = 1;
    h.id.to = 0;
    h.nqps = 1;
    h.psn = 0x1234;
    h.qpn[0] = 0x777;
    uint8_t hello[GW_IB_HELLO_SIZE], reply[GW_IB_HELLO_SIZE + GW_SOCK_MAC_LEN];
    gw__ib_hello_encode(&h, hello);
    for (int i = 0; i < GW_SOCK_NONCE_LEN; i++)
        hello[GW_SOCK_NONCE_AT + i] = (uint8_t)(0xc0 + i);
    int answered[2] = {0, 0}, admitted[2] = {0, 0};
    for (int round = 0; round < 2; round++) {
        int fd = socket(a0.sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(connect(fd, (const struct sockaddr *)&a0.sa, len), 0);
        gw_sock_io_t io;
        gw__sock_io_set(&io, hello, sizeof(hello), NULL, 0);
        cr_assert_eq(gw__sock_io_run(fd, &io, 1, gw__now_ms() + 5000), GW_SOCK_IO_DONE);
        if (read_exact(fd, reply, sizeof(reply)) == 0) {
            answered[round] = 1;
            uint8_t proof[GW_SOCK_MAC_LEN], ok;
            memset(proof, 0x5c, sizeof(proof)); /* a guess */
            gw__sock_io_set(&io, proof, sizeof(proof), NULL, 0);
            if (gw__sock_io_run(fd, &io, 1, gw__now_ms() + 5000) == GW_SOCK_IO_DONE &&
                read_exact(fd, &ok, 1) == 0)
                admitted[round] = 1;
        }
        close(fd);
    }
    pthread_create(&th[1], NULL, connect_thread, &r[1]);
    for (int i = 0; i < NRANKS; i++)
        pthread_join(th[i], NULL);
    cr_expect(answered[0], "rank 0 never answered the impostor: its proof was not judged");
    cr_expect(!admitted[0], "rank 0 admitted an impostor with a wrong proof");
    cr_expect(!answered[1], "rank 0 answered a replayed hello");
    cr_expect(!admitted[1], "rank 0 admitted a replayed hello");
    for (int i = 0; i < NRANKS; i++) {
        cr_expect_eq(r[i].connect_st, GW_OK, "connect of rank %d: %s", i,
                     gw_status_name(r[i].connect_st));
        r[i].t->ops->close(r[i].t);
    }
}
