/*
 * test_ib_cm.c - the verbs transport's rdmacm connection set-up (ib_cm.c,
 * GW_IB_CM=rdmacm) over a real RDMA device, with impostors at its RDMA CM
 * port that know the job id (it crosses the wire in clear) but not the job
 * token. Two transports in one process, one thread per rank; the impostors
 * speak librdmacm themselves, through rank 0's own table of its functions.
 * Skipped where no active RDMA port exists (here: everywhere but
 * scripts/rxe-vm, which runs it over Soft-RoCE; see
 * tests/integration/rxe_vm_test.sh). The private data and the proofs
 * themselves are tested on the host (test_ib_wire.c).
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

#define NRANKS 2
#define WAIT_MS 10000

typedef struct rank {
    gw_logger_t lg;
    gw_transport_t *t;
    const uint8_t *all;
    gw_status_t connect_st;
    gw_status_t run_st;
} rank_t;

static void *connect_thread(void *arg)
{
    rank_t *r = arg;
    r->connect_st = r->t->ops->connect(r->t, r->all);
    return NULL;
}

/* Open NRANKS transports in rdmacm mode; skips without RDMA. Rank 0 logs
 * its warnings into log0, for the test to read. */
static void open_ranks(rank_t *r, uint8_t *all, FILE *log0)
{
    setenv("GW_IB_CM", "rdmacm", 1);
    for (int i = 0; i < NRANKS; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].lg.level = getenv("GW_TEST_DEBUG") ? GW_LOG_TRACE
                        : i == 0                ? GW_LOG_WARN
                                                : GW_LOG_ERROR;
        r[i].lg.rank = i;
        r[i].lg.file = i == 0 ? log0 : stderr;
        strcpy(r[i].lg.host, "cm");
        gw_transport_params_t p;
        memset(&p, 0, sizeof(p));
        p.rank = i;
        p.size = NRANKS;
        p.log = &r[i].lg;
        p.timeout_ms = 20000;
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
            cr_skip_test("no RDMA port usable with librdmacm here (%s); run under scripts/rxe-vm",
                         gw_status_name(st));
        }
        cr_assert_eq(st, GW_OK, "open of rank %d: %s", i, gw_status_name(st));
        r[i].all = all;
    }
}

/* ---- an impostor speaking librdmacm ---------------------------------------------- */

typedef enum imp_mode {
    IMP_WRONG_PROOF, /* a well-formed request, then a proof it cannot make right */
    IMP_SILENT,      /* a well-formed request, then nothing while the real rank connects */
} imp_mode_t;

typedef struct impostor {
    const gw_ib_api_t *api;
    struct sockaddr_storage dst, src;
    imp_mode_t mode;
    volatile int release; /* IMP_SILENT: let go now */
    /* What happened. */
    int accepted;   /* rank 0 accepted its request (so its proof was awaited) */
    int rep_ok;     /* ... with an accept of this protocol */
    int proof_sent; /* its proof went out */
    int dropped;    /* rank 0 disconnected it */
    char fail[160]; /* why it could not play its part */
    pthread_t th;
} impostor_t;

/* The next event within ms, with its private data; -1: none. */
static int next_event(impostor_t *im, struct rdma_event_channel *ch, int ms,
                      enum rdma_cm_event_type *type, uint8_t *pdata, size_t *plen)
{
    struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
    if (poll(&pfd, 1, ms) <= 0)
        return -1;
    struct rdma_cm_event *ev;
    if (im->api->get_cm_event(ch, &ev) != 0)
        return -1;
    *type = ev->event;
    size_t n = 0;
    if (pdata && ev->param.conn.private_data) {
        n = ev->param.conn.private_data_len < *plen ? ev->param.conn.private_data_len : *plen;
        memcpy(pdata, ev->param.conn.private_data, n);
    }
    if (plen)
        *plen = n;
    im->api->ack_cm_event(ev);
    return 0;
}

static int expect_event(impostor_t *im, struct rdma_event_channel *ch, enum rdma_cm_event_type want,
                        const char *what)
{
    enum rdma_cm_event_type type;
    if (next_event(im, ch, WAIT_MS, &type, NULL, NULL) != 0) {
        snprintf(im->fail, sizeof(im->fail), "%s: no event", what);
        return -1;
    }
    if (type != want) {
        snprintf(im->fail, sizeof(im->fail), "%s: %s", what, im->api->event_str(type));
        return -1;
    }
    return 0;
}

static void *impostor_main(void *arg)
{
    impostor_t *im = arg;
    const gw_ib_api_t *api = im->api;
    struct rdma_event_channel *ch = api->create_event_channel();
    struct rdma_cm_id *id = NULL;
    struct ibv_pd *pd = NULL;
    struct ibv_cq *cq = NULL;
    struct ibv_mr *mr = NULL;
    static uint8_t guess[GW_IB_CM_MAC_LEN];
    if (!ch || api->create_id(ch, &id, NULL, RDMA_PS_TCP) != 0) {
        snprintf(im->fail, sizeof(im->fail), "rdma_create_id: %m");
        goto out;
    }
    if (api->resolve_addr(id, (struct sockaddr *)&im->src, (struct sockaddr *)&im->dst, 2000) !=
            0 ||
        expect_event(im, ch, RDMA_CM_EVENT_ADDR_RESOLVED, "resolving the address") != 0)
        goto out;
    if (api->resolve_route(id, 2000) != 0 ||
        expect_event(im, ch, RDMA_CM_EVENT_ROUTE_RESOLVED, "resolving the route") != 0)
        goto out;
    pd = api->alloc_pd(id->verbs);
    cq = pd ? api->create_cq(id->verbs, 16, NULL, NULL, 0) : NULL;
    memset(guess, 0x5c, sizeof(guess));
    mr = cq ? api->reg_mr(pd, guess, sizeof(guess), IBV_ACCESS_LOCAL_WRITE) : NULL;
    struct ibv_qp_init_attr ia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    if (!mr || api->cm_create_qp(id, pd, &ia) != 0) {
        snprintf(im->fail, sizeof(im->fail), "verbs resources: %m");
        goto out;
    }
    /* Everything right but the key: the job id, ranks, QP, version. */
    gw_ib_cm_pdata_t req = {.from = 1, .to = 0, .qp_idx = 0, .nqps = 1};
    for (int k = 0; k < 16; k++) {
        req.job_id[k] = (uint8_t)(0x40 + k);
        req.nonce[k] = (uint8_t)(0xc0 + k);
    }
    uint8_t buf[GW_IB_CM_REQ_SIZE];
    gw__ib_cm_req_encode(&req, buf);
    struct rdma_conn_param cp = {.private_data = buf,
                                 .private_data_len = sizeof(buf),
                                 .responder_resources = 1,
                                 .initiator_depth = 1,
                                 .retry_count = 7,
                                 .rnr_retry_count = 7};
    if (api->connect(id, &cp) != 0) {
        snprintf(im->fail, sizeof(im->fail), "rdma_connect: %m");
        goto out;
    }
    enum rdma_cm_event_type type;
    uint8_t rep[256];
    size_t replen = sizeof(rep);
    if (next_event(im, ch, WAIT_MS, &type, rep, &replen) != 0 ||
        type != RDMA_CM_EVENT_ESTABLISHED) {
        snprintf(im->fail, sizeof(im->fail), "its request was not accepted");
        goto out;
    }
    im->accepted = 1;
    gw_ib_cm_pdata_t a;
    im->rep_ok = gw__ib_cm_rep_decode(rep, replen, &a) == GW_OK;
    if (im->mode == IMP_WRONG_PROOF) {
        struct ibv_sge sge = {
            .addr = (uint64_t)(uintptr_t)guess, .length = sizeof(guess), .lkey = mr->lkey};
        struct ibv_send_wr wr = {.opcode = IBV_WR_SEND,
                                 .send_flags = IBV_SEND_SIGNALED,
                                 .sg_list = &sge,
                                 .num_sge = 1},
                           *bad;
        im->proof_sent = ibv_post_send(id->qp, &wr, &bad) == 0;
    } else {
        while (!im->release)
            usleep(10 * 1000);
    }
    int64_t end = gw__now_ms() + WAIT_MS;
    while (im->mode == IMP_WRONG_PROOF && !im->dropped && gw__now_ms() < end)
        if (next_event(im, ch, 100, &type, NULL, NULL) == 0 && type == RDMA_CM_EVENT_DISCONNECTED)
            im->dropped = 1;
    api->disconnect(id);
out:
    if (id && id->qp)
        api->cm_destroy_qp(id);
    if (mr)
        api->dereg_mr(mr);
    if (cq)
        api->destroy_cq(cq);
    if (pd)
        api->dealloc_pd(pd);
    if (id)
        api->destroy_id(id);
    if (ch)
        api->destroy_event_channel(ch);
    return NULL;
}

static void impostor_init(impostor_t *im, rank_t *r0, const uint8_t *all, imp_mode_t mode)
{
    memset(im, 0, sizeof(*im));
    im->api = &gw__ib_of(r0->t)->api;
    im->mode = mode;
    gw_ib_addr_t a0;
    cr_assert_eq(gw__ib_addr_decode(all, &a0), GW_OK);
    memcpy(&im->dst, &a0.sa, sizeof(a0.sa));
    memcpy(&im->src, &a0.sa, sizeof(a0.sa)); /* the same device: any port */
    if (im->src.ss_family == AF_INET)
        ((struct sockaddr_in *)&im->src)->sin_port = 0;
    else
        ((struct sockaddr_in6 *)&im->src)->sin6_port = 0;
}

/* ---- the job the impostors try to break ------------------------------------------ */

#define MSG_LEN ((size_t)300 * 1024) /* striped nowhere, but not eager */

static void *exchange_thread(void *arg)
{
    rank_t *r = arg;
    int peer = r->lg.rank == 0 ? 1 : 0;
    uint8_t *sbuf = malloc(MSG_LEN), *rbuf = calloc(1, MSG_LEN);
    for (size_t i = 0; i < MSG_LEN; i++)
        sbuf[i] = (uint8_t)(i * 7 + (size_t)r->lg.rank);
    gw_request_t q[2];
    memset(q, 0, sizeof(q));
    q[0] = (gw_request_t){.peer = peer, .buf = rbuf, .len = MSG_LEN, .tag = {.seq = 1, .sig = 9}};
    q[1] = (gw_request_t){.peer = peer, .buf = sbuf, .len = MSG_LEN, .tag = {.seq = 1, .sig = 9}};
    r->run_st = r->t->ops->irecv(r->t, &q[0]);
    if (r->run_st == GW_OK)
        r->run_st = r->t->ops->isend(r->t, &q[1]);
    int64_t end = gw__now_ms() + WAIT_MS;
    while (r->run_st == GW_OK && !(q[0].complete && q[1].complete)) {
        if (gw__now_ms() > end)
            r->run_st = GW_ERR_TIMEOUT;
        else
            r->run_st = r->t->ops->progress(r->t, NULL, 10);
    }
    if (r->run_st == GW_OK)
        r->run_st = q[0].status != GW_OK ? q[0].status : q[1].status;
    for (size_t i = 0; r->run_st == GW_OK && i < MSG_LEN; i++)
        if (rbuf[i] != (uint8_t)(i * 7 + (size_t)peer))
            r->run_st = GW_ERR_PROTOCOL; /* wrong bytes */
    free(sbuf);
    free(rbuf);
    return NULL;
}

static char *slurp(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    char *s = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
    rewind(f);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n)
        s[0] = '\0';
    return s;
}

/* Two impostors claim rank 1 towards rank 0 before rank 1 dials: the
 * first sends a proof it cannot make right and must be disconnected with a
 * WARN line naming its address; the second is accepted and then says
 * nothing while it holds its connection. Rank 1 still gets in (the silent
 * candidate holds no slot), the two ranks exchange a message, and nothing
 * the impostors did reaches the job. */
Test(ib_cm, impostor_with_the_job_id_is_dropped_and_the_real_rank_gets_in, .timeout = 120)
{
    rank_t r[NRANKS];
    uint8_t all[NRANKS * GW_TRANSPORT_ADDR_MAX];
    FILE *log0 = tmpfile();
    cr_assert(log0);
    open_ranks(r, all, log0);
    pthread_t th[NRANKS];
    pthread_create(&th[0], NULL, connect_thread, &r[0]);

    impostor_t wrong, silent;
    impostor_init(&wrong, &r[0], all, IMP_WRONG_PROOF);
    impostor_main(&wrong);
    impostor_init(&silent, &r[0], all, IMP_SILENT);
    pthread_create(&silent.th, NULL, impostor_main, &silent);
    for (int i = 0; i < 500 && !silent.accepted && !silent.fail[0]; i++)
        usleep(10 * 1000);

    pthread_create(&th[1], NULL, connect_thread, &r[1]);
    for (int i = 0; i < NRANKS; i++)
        pthread_join(th[i], NULL);
    silent.release = 1;
    pthread_join(silent.th, NULL);

    cr_expect(wrong.accepted,
              "rank 0 never accepted the first impostor (%s): its proof was not "
              "judged",
              wrong.fail);
    cr_expect(wrong.rep_ok, "rank 0's accept is not a version %u accept", GW_IB_PROTOCOL_VERSION);
    cr_expect(wrong.proof_sent, "the first impostor could not send its proof");
    cr_expect(wrong.dropped, "rank 0 did not disconnect an impostor with a wrong proof");
    cr_expect(silent.accepted, "rank 0 never accepted the silent impostor (%s)", silent.fail);
    for (int i = 0; i < NRANKS; i++)
        cr_expect_eq(r[i].connect_st, GW_OK, "connect of rank %d: %s", i,
                     gw_status_name(r[i].connect_st));
    if (r[0].connect_st == GW_OK && r[1].connect_st == GW_OK) {
        for (int i = 0; i < NRANKS; i++)
            pthread_create(&th[i], NULL, exchange_thread, &r[i]);
        for (int i = 0; i < NRANKS; i++)
            pthread_join(th[i], NULL);
        for (int i = 0; i < NRANKS; i++)
            cr_expect_eq(r[i].run_st, GW_OK, "rank %d's exchange after the impostors: %s", i,
                         gw_status_name(r[i].run_st));
    }
    for (int i = 0; i < NRANKS; i++)
        r[i].t->ops->close(r[i].t);
    char *log = slurp(log0);
    char host[64];
    gw__sock_addr_str((const struct sockaddr *)&wrong.src, host, sizeof(host));
    char *colon = strrchr(host, ':'); /* the impostor's port is its own */
    if (colon)
        *colon = '\0';
    const char *line = strstr(log, "dropping the RDMA CM connection from ");
    cr_expect(line && strstr(line, host) && strstr(line, "wrong proof"),
              "no WARN line naming the impostor (%s) and its wrong proof in rank 0's log:\n%s",
              host, log);
    free(log);
    fclose(log0);
}
