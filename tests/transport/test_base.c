/*
 * test_base.c - the base every transport embeds (transport/base.h), through
 * a fake transport that records what the base asks of it: the checks at
 * the top of isend, irecv and progress, the failure that is logged once and
 * completes every pending request, the request queues, and the helpers for
 * read-ahead conflicts, header matching, abort statuses and message parts.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "support/log_capture.h"
#include "transport/base.h"

typedef struct fake {
    gw_transport_t base; /* first, as every transport has it */
    gw_request_t *q_head, *q_tail;
    int posted, progressed, failed_pending;
    gw_status_t fail_status;
} fake_t;

static fake_t *fake_of(gw_transport_t *t) { return gw__container_of(t, fake_t, base); }

static gw_status_t fake_post(gw_transport_t *t, gw_request_t *req)
{
    fake_t *f = fake_of(t);
    f->posted++;
    gw__req_queue_push(&f->q_head, &f->q_tail, req);
    return GW_OK;
}

static gw_status_t fake_progress(gw_transport_t *t, const gw_msg_tag_t *current, int wait_ms)
{
    (void)current;
    (void)wait_ms;
    fake_of(t)->progressed++;
    return GW_OK;
}

static void fake_fail_pending(gw_transport_t *t, gw_status_t st)
{
    fake_t *f = fake_of(t);
    f->failed_pending++;
    f->fail_status = st;
    gw__req_queue_fail(&f->q_head, &f->q_tail, st);
}

static void fake_describe(const gw_transport_t *t, int peer, char *buf, size_t cap)
{
    (void)t;
    snprintf(buf, cap, "rank %d (fake)", peer);
}

static int fake_usable(const gw_transport_t *t, int peer)
{
    (void)t;
    return peer != 3; /* another transport carries rank 3 */
}

static const gw_transport_ops_t fake_ops = {
    .size = sizeof(gw_transport_ops_t),
    .isend = gw__transport_isend,
    .irecv = gw__transport_irecv,
    .progress = gw__transport_progress,
};

static const gw__transport_class_t fake_class = {
    .size = sizeof(gw__transport_class_t),
    .name = "fake",
    .subsys = "fake",
    .ops = &fake_ops,
    .fail_pending = fake_fail_pending,
    .describe_peer = fake_describe,
    .peer_usable = fake_usable,
    .post = fake_post,
    .progress = fake_progress,
};

static gw_logger_t lg;

static fake_t *open_fake(int rank, int size)
{
    gw_transport_params_t params;
    memset(&params, 0, sizeof(params));
    params.rank = rank;
    params.size = size;
    params.log = &lg;
    gw_transport_t *t = NULL;
    cr_assert_eq(gw__transport_open_base(&fake_class, &params, sizeof(fake_t), &t), GW_OK);
    return fake_of(t);
}

static void setup(void) { lg = capture_logger(GW_LOG_TRACE); }
static void teardown(void) { fclose(lg.file); }

static gw_request_t request(int peer, void *buf, size_t len)
{
    gw_request_t r;
    memset(&r, 0, sizeof(r));
    r.peer = peer;
    r.buf = buf;
    r.len = len;
    r.tag.seq = 7;
    r.tag.sig = 0x1234;
    return r;
}

TestSuite(base, .init = setup, .fini = teardown);

Test(base, open_fills_the_base_and_checks_the_rank)
{
    fake_t *f = open_fake(1, 4);
    cr_assert_str_eq(f->base.name, "fake");
    cr_assert_eq(f->base.ops, &fake_ops);
    cr_assert_eq(f->base.cls, &fake_class);
    cr_assert_eq(f->base.rank, 1);
    cr_assert_eq(f->base.size, 4);
    cr_assert_eq(f->base.connected, 0);
    cr_assert_eq(f->base.failed, GW_OK);
    free(f);

    gw_transport_params_t params;
    memset(&params, 0, sizeof(params));
    params.rank = 4;
    params.size = 4;
    params.log = &lg;
    gw_transport_t *t = NULL;
    cr_assert_eq(gw__transport_open_base(&fake_class, &params, sizeof(fake_t), &t),
                 GW_ERR_INVALID_ARG);
    cr_assert_null(t);
    char *text = captured(&lg);
    cr_assert(strstr(text, "rank 4 of 4 ranks is not a valid rank"), "%s", text);
    free(text);
}

Test(base, malformed_requests_are_refused_untouched)
{
    fake_t *f = open_fake(1, 4);
    f->base.connected = 1;
    char buf[8];
    gw_request_t bad[] = {request(1, buf, 8), request(4, buf, 8), request(-1, buf, 8),
                          request(0, NULL, 8), request(3, buf, 8)};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bad[i].complete = 42; /* the base must not reset what it refuses */
        cr_assert_eq(f->base.ops->isend(&f->base, &bad[i]), GW_ERR_INVALID_ARG, "request %zu", i);
        cr_assert_eq(bad[i].complete, 42, "request %zu", i);
    }
    cr_assert_eq(f->posted, 0);
    char *text = captured(&lg);
    cr_assert_eq(count_in(text, "isend: invalid request"), 5, "%s", text);
    free(text);
    /* An empty message needs no buffer. */
    gw_request_t empty = request(0, NULL, 0);
    cr_assert_eq(f->base.ops->irecv(&f->base, &empty), GW_OK);
    cr_assert_eq(f->posted, 1);
    free(f);
}

Test(base, posting_before_connect_is_refused)
{
    fake_t *f = open_fake(0, 2);
    char buf[4];
    gw_request_t r = request(1, buf, sizeof(buf));
    cr_assert_eq(f->base.ops->irecv(&f->base, &r), GW_ERR_INVALID_ARG);
    cr_assert_eq(f->base.ops->progress(&f->base, NULL, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(f->posted, 0);
    cr_assert_eq(f->progressed, 0);
    char *text = captured(&lg);
    cr_assert(strstr(text, "irecv before connect() succeeded"), "%s", text);
    cr_assert(strstr(text, "progress() called before connect() succeeded"), "%s", text);
    free(text);
    free(f);
}

/* The checks at the top of every transport's connect(). */
Test(base, connect_is_checked_once_for_every_transport)
{
    fake_t *f = open_fake(0, 2);
    uint8_t addrs[2 * GW_TRANSPORT_ADDR_MAX] = {0};
    cr_assert_eq(gw__transport_connect_check(NULL, addrs, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__transport_connect_check(&f->base, NULL, 0), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__transport_connect_check(&f->base, addrs, 0), GW_OK);
    cr_assert_eq(gw__transport_connect_check(&f->base, addrs, 1), GW_ERR_INVALID_ARG,
                 "a connect() already under way (the transport's own sign) is refused");
    f->base.connected = 1;
    cr_assert_eq(gw__transport_connect_check(&f->base, addrs, 0), GW_ERR_INVALID_ARG);
    char *text = captured(&lg);
    cr_assert_eq(count_in(text, "connect() called twice"), 2, "%s", text);
    free(text);
    f->base.connected = 0;
    f->base.failed = GW_ERR_REMOTE;
    cr_assert_eq(gw__transport_connect_check(&f->base, addrs, 0), GW_ERR_REMOTE,
                 "a failed transport's connect() returns its failure");
    free(f);
}

Test(base, a_posted_request_is_reset_for_its_kind)
{
    fake_t *f = open_fake(0, 2);
    f->base.connected = 1;
    char buf[4];
    gw_request_t r = request(1, buf, sizeof(buf));
    r.complete = 1;
    r.status = GW_ERR_REMOTE;
    r.bytes_done = 99;
    memset(r.priv, 0xab, sizeof(r.priv));
    cr_assert_eq(f->base.ops->isend(&f->base, &r), GW_OK);
    cr_assert_eq(f->posted, 1);
    cr_assert_eq(r.kind, GW_REQ_SEND);
    cr_assert_eq(r.complete, 0);
    cr_assert_eq(r.status, GW_OK);
    cr_assert_eq(r.bytes_done, 0);
    for (size_t i = 0; i < sizeof(r.priv) / sizeof(r.priv[0]); i++)
        cr_assert_eq(r.priv[i], 0);
    cr_assert_eq(f->base.ops->progress(&f->base, NULL, 0), GW_OK);
    cr_assert_eq(f->progressed, 1);
    free(f);
}

Test(base, the_first_failure_is_logged_once_and_completes_everything)
{
    fake_t *f = open_fake(0, 3);
    f->base.connected = 1;
    char buf[4];
    gw_request_t a = request(1, buf, sizeof(buf)), b = request(2, buf, sizeof(buf));
    cr_assert_eq(f->base.ops->isend(&f->base, &a), GW_OK);
    cr_assert_eq(f->base.ops->irecv(&f->base, &b), GW_OK);

    cr_assert_eq(gw__transport_peer_fail(&f->base, 2, GW_ERR_REMOTE, "hung up (socket %d)", 5),
                 GW_ERR_REMOTE);
    cr_assert_eq(f->failed_pending, 1);
    cr_assert(a.complete && b.complete);
    cr_assert_eq(a.status, GW_ERR_REMOTE);
    cr_assert_eq(b.status, GW_ERR_REMOTE);
    cr_assert_null(f->q_head);

    /* Later failures neither log nor replace the first one's status. */
    cr_assert_eq(gw__transport_fail(&f->base, GW_ERR_PROTOCOL, "garbage"), GW_ERR_REMOTE);
    cr_assert_eq(gw__transport_fail(&f->base, GW_ERR_ABORTED, NULL), GW_ERR_REMOTE);
    cr_assert_eq(f->failed_pending, 1);
    char *text = captured(&lg);
    cr_assert_eq(count_in(text, " ERROR "), 1, "%s", text);
    cr_assert(strstr(text, "rank 2 (fake) hung up (socket 5)"), "%s", text);
    cr_assert_null(strstr(text, "garbage"), "%s", text);
    free(text);

    /* A request posted after the failure completes at once with it. */
    gw_request_t c = request(1, buf, sizeof(buf));
    cr_assert_eq(f->base.ops->isend(&f->base, &c), GW_ERR_REMOTE);
    cr_assert(c.complete);
    cr_assert_eq(c.status, GW_ERR_REMOTE);
    cr_assert_eq(f->posted, 2);
    cr_assert_eq(f->base.ops->progress(&f->base, NULL, 0), GW_ERR_REMOTE);
    cr_assert_eq(f->progressed, 0);
    free(f);
}

Test(base, a_failure_without_a_message_logs_nothing)
{
    fake_t *f = open_fake(0, 2);
    cr_assert_eq(gw__transport_fail(&f->base, GW_ERR_ABORTED, NULL), GW_ERR_ABORTED);
    cr_assert_eq(f->failed_pending, 1);
    char *text = captured(&lg);
    cr_assert_eq(count_in(text, " ERROR "), 0, "%s", text);
    free(text);
    free(f);
}

Test(base, a_peer_failure_keeps_errno_for_its_message)
{
    fake_t *f = open_fake(0, 2);
    errno = ECONNRESET;
    cr_assert_eq(gw__transport_peer_fail(&f->base, 1, GW_ERR_REMOTE, "recv on socket 0: %m"),
                 GW_ERR_REMOTE);
    char *text = captured(&lg);
    cr_assert(strstr(text, "rank 1 (fake) recv on socket 0: Connection reset by peer"), "%s", text);
    free(text);
    free(f);
}

Test(base, posting_to_a_peer_that_left_fails_naming_it)
{
    fake_t *f = open_fake(0, 2);
    char buf[4];
    gw_request_t r = request(1, buf, sizeof(buf));
    r.kind = GW_REQ_RECV;
    cr_assert_eq(gw__transport_post_refused(&f->base, &r, "already closed its communicator"),
                 GW_ERR_REMOTE);
    char *text = captured(&lg);
    cr_assert(strstr(text, "rank 1 (fake) already closed its communicator, but a receive for it "
                           "was posted (seq 7, len 4)"),
              "%s", text);
    free(text);
    free(f);
}

Test(base, read_ahead_conflicts_and_mismatches_fail_with_mismatch)
{
    fake_t *f = open_fake(0, 2);
    gw_msg_tag_t current = {.seq = 5, .sig = 0xaa};
    gw_msg_tag_t later = {.seq = 6, .sig = 0xbb}, same = {.seq = 5, .sig = 0xaa};
    cr_assert_eq(gw__transport_check_pending(&f->base, 1, "sent a message", &later, 8, &current),
                 GW_OK);
    cr_assert_eq(gw__transport_check_pending(&f->base, 1, "sent a message", &same, 8, &current),
                 GW_OK);
    char buf[4];
    gw_request_t r = request(1, buf, sizeof(buf));
    gw_msg_tag_t match = {.seq = 7, .sig = 0x1234};
    cr_assert_eq(gw__transport_check_match(&f->base, &r, &match, 4), GW_OK);
    cr_assert_eq(f->base.failed, GW_OK);

    gw_msg_tag_t other = {.seq = 5, .sig = 0xcc};
    cr_assert_eq(
        gw__transport_check_pending(&f->base, 1, "waits for a message", &other, 8, &current),
        GW_ERR_MISMATCH);
    char *text = captured(&lg);
    cr_assert(strstr(text, "rank 1 (fake) waits for a message of collective (seq 5, sig "
                           "0x000000cc, len 8) while this rank is in collective (seq 5, sig "
                           "0x000000aa)"),
              "%s", text);
    free(text);
    free(f);

    f = open_fake(0, 2);
    cr_assert_eq(gw__transport_check_match(&f->base, &r, &match, 5), GW_ERR_MISMATCH);
    text = captured(&lg);
    cr_assert(strstr(text, "expected (seq 7, sig 0x00001234, len 4), received (seq 7, sig "
                           "0x00001234, len 5)"),
              "%s", text);
    free(text);
    free(f);
}

Test(base, abort_statuses)
{
    cr_assert_eq(gw__transport_abort_status(GW_ERR_MISMATCH), GW_ERR_MISMATCH);
    cr_assert_eq(gw__transport_abort_status(GW_ERR_TIMEOUT), GW_ERR_TIMEOUT);
    cr_assert_eq(gw__transport_abort_status(0), GW_ERR_ABORTED);
    cr_assert_eq(gw__transport_abort_status(-3), GW_ERR_ABORTED);
    cr_assert_eq(gw__transport_abort_status(9999), GW_ERR_ABORTED);
    cr_assert_eq(gw__transport_abort_status((int64_t)1 << 40), GW_ERR_ABORTED);
}

Test(base, queues_keep_posting_order)
{
    gw_request_t r[4];
    memset(r, 0, sizeof(r));
    gw_request_t *head = NULL, *tail = NULL;
    for (int i = 0; i < 4; i++)
        gw__req_queue_push(&head, &tail, &r[i]);
    gw__req_queue_remove(&head, &tail, &r[3]); /* the tail */
    cr_assert_eq(tail, &r[2]);
    gw__req_queue_remove(&head, &tail, &r[1]); /* the middle */
    gw__req_queue_remove(&head, &tail, &r[1]); /* not there any more: nothing */
    cr_assert_eq(gw__req_queue_pop(&head, &tail), &r[0]);
    cr_assert_eq(head, &r[2]);
    cr_assert_eq(gw__req_queue_pop(&head, &tail), &r[2]);
    cr_assert_null(head);
    cr_assert_null(tail);
    gw__req_queue_push(&head, &tail, &r[1]);
    gw__req_queue_push(&head, &tail, &r[3]);
    gw__req_queue_fail(&head, &tail, GW_ERR_REMOTE);
    cr_assert_null(head);
    cr_assert_null(tail);
    cr_assert(r[1].complete && r[3].complete);
    cr_assert_eq(r[3].status, GW_ERR_REMOTE);
    cr_assert_null(r[1].next);
}

Test(base, parts_cover_the_message_exactly)
{
    const size_t min = 64 * 1024;
    cr_assert_eq(gw__transport_nparts(0, min, 4), 1);
    cr_assert_eq(gw__transport_nparts(min - 1, min, 4), 1);
    cr_assert_eq(gw__transport_nparts(3 * min, min, 4), 3);
    cr_assert_eq(gw__transport_nparts(100 * min, min, 4), 4);
    size_t lens[] = {0, 1, min + 3, 10 * min + 7};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t n = gw__transport_nparts(lens[i], min, 4), next = 0;
        for (size_t k = 0; k < n; k++) {
            size_t off, plen;
            gw__transport_part_range(lens[i], n, k, &off, &plen);
            cr_assert_eq(off, next, "len %zu part %zu", lens[i], k);
            next = off + plen;
        }
        cr_assert_eq(next, lens[i]);
    }
}
