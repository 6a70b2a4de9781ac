/*
 * test_shm_faults.c - what the shared-memory transport does when ranks
 * disagree or fail after connecting: tag and length mismatches (the receive
 * buffer stays untouched), read-ahead headers that prove a disagreement,
 * garbage in a ring, peers that die, are killed, abort or say goodbye.
 * Every case ends in an error on every rank, never a hang.
 *
 * The harness is in shm_test_util.h.
 */
#include "../transport_bodies.h"
#include "shm_test_util.h"

/* ---- mismatches -------------------------------------------------------------- */

Test(shm, tag_mismatch_leaves_buffer_untouched, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xBB, .send_len = 1000, .recv_len = 1000};
    job_t j = job(2, PATH_DIRECT, body_mismatch, &c);
    run_job(&j);
}

Test(shm, length_mismatch_longer_receive_single_copy, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = MIB, .recv_len = 2 * MIB};
    job_t j = job(2, PATH_DIRECT, body_mismatch, &c);
    run_job(&j);
}

Test(shm, length_mismatch_shorter_receive_ring, .timeout = 30)
{
    static const mismatch_case_t c = {.recv_sig = 0xAA, .send_len = 4 * MIB, .recv_len = 1000};
    job_t j = job(2, PATH_RING, body_mismatch, &c);
    run_job(&j);
}

typedef struct conflict_case {
    gw_msg_tag_t current; /* rank 1's collective; rank 0 sends seq 3, sig 0x11 */
    int conflicts;
} conflict_case_t;

/* Rank 1 posts no receive and only calls progress(current): the header read
 * ahead from rank 0 must be reported when it proves a disagreement, and be
 * harmless (its message intact) when rank 0 is merely ahead. */
static int body_conflict(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const conflict_case_t *c = arg;
    size_t len = 3 * 64 * 1024;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    if (rank == 0) {
        fill(buf, len, 0, 1, 3);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, 1, 3, 0x11, buf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        uint8_t dummy[4];
        make_req(&r, GW_REQ_RECV, 1, 4, 0x11, dummy, sizeof(dummy));
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        if (c->conflicts) {
            CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_ERR_MISMATCH); /* rank 1's abort */
        } else {
            CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
            CHECK(dummy[0] == 0x77, "ack content");
        }
        free(buf);
        return 0;
    }
    int64_t end = gw__now_ms() + (c->conflicts ? 3000 : 300);
    gw_status_t st = GW_OK;
    while (st == GW_OK && gw__now_ms() < end)
        st = t->ops->progress(t, &c->current, 10);
    if (c->conflicts) {
        CHECK_ST(st, GW_ERR_MISMATCH);
        CHECK_ST(gw__transport_abort(t, GW_ERR_MISMATCH), GW_OK);
        CHECK_ST(t->ops->progress(t, NULL, 0), GW_ERR_MISMATCH);
    } else {
        CHECK_ST(st, GW_OK);
        memset(buf, 0, len);
        gw_request_t r, s;
        make_req(&r, GW_REQ_RECV, 0, 3, 0x11, buf, len);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        long bad = verify(buf, len, 0, 1, 3);
        CHECK(bad < 0, "byte %ld of the read-ahead message is wrong", bad);
        uint8_t ack[4] = {0x77, 0x77, 0x77, 0x77};
        make_req(&s, GW_REQ_SEND, 0, 4, 0x11, ack, sizeof(ack));
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    }
    free(buf);
    return 0;
}

Test(shm, readahead_detects_older_sequence, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 4, .sig = 0x11}, .conflicts = 1};
    job_t j = job(2, PATH_DIRECT, body_conflict, &c);
    run_job(&j);
}

Test(shm, readahead_detects_other_signature, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 3, .sig = 0x22}, .conflicts = 1};
    job_t j = job(2, PATH_RING, body_conflict, &c);
    run_job(&j);
}

Test(shm, readahead_of_newer_sequence_is_fine, .timeout = 30)
{
    static const conflict_case_t c = {.current = {.seq = 2, .sig = 0x11}, .conflicts = 0};
    job_t j = job(2, PATH_DIRECT, body_conflict, &c);
    run_job(&j);
}

/* A record header that no sender of ours writes. */
typedef struct garbage_case {
    uint32_t magic;
    uint32_t flags;
    uint64_t len;
} garbage_case_t;

/* Rank 0 writes a bad record header into its ring behind the transport's
 * back: rank 1 must fail with GW_ERR_PROTOCOL, having written nothing. */
static int body_garbage(gw_transport_t *base, int rank, int size, const void *arg)
{
    (void)size;
    const garbage_case_t *g = arg;
    if (rank == 0) {
        gw_shm_peer_t *p = &gw__shm_of(base)->peers[1];
        gw_shm_rec_t rec;
        memset(&rec, 0, sizeof(rec));
        rec.magic = g->magic;
        rec.kind = GW_SHM_INLINE;
        rec.flags = g->flags;
        rec.len = g->len;
        rec.index = 1;
        uint64_t head = atomic_load(&p->out->head);
        memcpy(p->out_ring + (head & (p->ring_bytes - 1)), &rec, sizeof(rec));
        atomic_store(&p->out->head, head + sizeof(rec));
        uint8_t dummy[4];
        gw_request_t r;
        make_req(&r, GW_REQ_RECV, 1, 1, 2, dummy, sizeof(dummy));
        CHECK_ST(base->ops->irecv(base, &r), GW_OK);
        CHECK_ST(wait_one(base, &r, 5000), GW_ERR_PROTOCOL);
        return 0;
    }
    uint8_t buf[256];
    memset(buf, 0xEE, sizeof(buf));
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, 0, 1, 2, buf, g->len <= sizeof(buf) ? g->len : sizeof(buf));
    CHECK_ST(base->ops->irecv(base, &r), GW_OK);
    CHECK_ST(wait_one(base, &r, 5000), GW_ERR_PROTOCOL);
    for (size_t i = 0; i < sizeof(buf); i++)
        CHECK(buf[i] == 0xEE, "byte %zu of the receive buffer was written", i);
    CHECK_ST(gw__transport_abort(base, GW_ERR_PROTOCOL), GW_OK);
    return 0;
}

Test(shm, garbage_in_ring_is_protocol_error, .timeout = 30)
{
    static const garbage_case_t g = {.magic = 0x12345678, .len = 16};
    job_t j = job(2, PATH_DIRECT, body_garbage, &g);
    run_job(&j);
}

/* A header that says its payload is in its line, with a length that does
 * not fit there: read as said, it would copy from past the header. */
Test(shm, tiny_record_too_long_is_protocol_error, .timeout = 30)
{
    static const garbage_case_t g = {
        .magic = GW_SHM_REC_MAGIC, .flags = GW_SHM_REC_TINY, .len = GW_SHM_TINY_MAX + 1};
    job_t j = job(2, PATH_RING, body_garbage, &g);
    run_job(&j);
}

/* A short INLINE message whose header does not carry it: its sender is not
 * speaking this protocol. */
Test(shm, short_record_without_tiny_flag_is_protocol_error, .timeout = 30)
{
    static const garbage_case_t g = {.magic = GW_SHM_REC_MAGIC, .len = 8};
    job_t j = job(2, PATH_RING, body_garbage, &g);
    run_job(&j);
}

/* ---- failures ------------------------------------------------------------------ */

typedef enum death_kind {
    DIE_IDLE,       /* rank 0 dies while rank 1 waits for a message */
    DIE_MID_STREAM, /* rank 0 dies after writing part of a large message */
    DIE_WHILE_READ, /* rank 1 sends a DIRECT message rank 0 never reads */
} death_kind_t;

static int body_death(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    const death_kind_t *kind = arg;
    size_t len = 64 * MIB;
    if (rank == 0) {
        if (*kind == DIE_MID_STREAM) {
            uint8_t *buf = calloc(1, len);
            CHECK(buf, "calloc");
            gw_request_t s;
            make_req(&s, GW_REQ_SEND, 1, 1, 5, buf, len);
            CHECK_ST(t->ops->isend(t, &s), GW_OK);
            while (s.bytes_done == 0)
                CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
            CHECK(!s.complete, "the whole message went out at once");
        } else {
            usleep(100 * 1000);
        }
        _exit(0); /* no close, no goodbye: as if the process crashed */
    }
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    gw_request_t r;
    int sends = *kind == DIE_WHILE_READ;
    make_req(&r, sends ? GW_REQ_SEND : GW_REQ_RECV, 0, 1, 5, buf, len);
    if (sends) {
        memset(buf, 1, len);
        CHECK_ST(t->ops->isend(t, &r), GW_OK);
    } else {
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
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

Test(shm, peer_dies_while_we_wait, .timeout = 30)
{
    static const death_kind_t k = DIE_IDLE;
    job_t j = job(2, PATH_DIRECT, body_death, &k);
    run_job(&j);
}

Test(shm, peer_dies_mid_stream, .timeout = 30)
{
    static const death_kind_t k = DIE_MID_STREAM;
    job_t j = job(2, PATH_TINY_RING, body_death, &k);
    run_job(&j);
}

Test(shm, peer_dies_before_reading_our_message, .timeout = 30)
{
    static const death_kind_t k = DIE_WHILE_READ;
    job_t j = job(2, PATH_DIRECT, body_death, &k);
    run_job(&j);
}

/* The parent SIGKILLs rank 0 while rank 1 waits for a message. */
static int body_killed(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    uint8_t buf[64];
    gw_request_t r;
    if (rank == 0) {
        for (;;)
            pause();
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 8000), GW_ERR_REMOTE);
    return 0;
}

Test(shm, killed_peer_is_remote_error_and_leaves_nothing, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_killed, NULL);
    j.kill_rank = 0;
    j.kill_rank_at_ms = 500;
    j.expect_killed = 1;
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
        usleep(200 * 1000); /* still alive: the flag, not our death, must tell rank 1 */
        return 0;
    }
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    int64_t t0 = gw__now_ms();
    CHECK_ST(wait_one(t, &r, 5000), GW_ERR_TIMEOUT);
    CHECK(r.status == GW_ERR_TIMEOUT, "request status %s", gw_status_name(r.status));
    CHECK(gw__now_ms() - t0 < 200, "the abort took %lld ms to arrive",
          (long long)(gw__now_ms() - t0));
    return 0;
}

Test(shm, abort_flag_carries_status, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_abort, NULL);
    run_job(&j);
}

/* As over TCP: rank 0 aborts naming rank 1 as the culprit and rank 2 as the
 * origin; ranks 1 and 2 take both over from its flag, not blaming rank 0. */
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
        usleep(200 * 1000); /* still alive: the flag, not our death, must tell them */
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

Test(shm, abort_flag_carries_origin_and_culprit, .timeout = 30)
{
    job_t j = job(3, PATH_DIRECT, body_abort_blame, NULL);
    run_job(&j);
}

typedef struct goodbye_case {
    int recv_posted_first; /* rank 1's receive is pending when the goodbye comes */
} goodbye_case_t;

/* A message sent before close() is still delivered after it (it waits in
 * the ring, which outlives the sender's mapping); a receive that nothing
 * will ever satisfy fails with GW_ERR_REMOTE. */
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
    usleep(300 * 1000); /* rank 0 has closed (and exited) by now */
    make_req(&r, GW_REQ_RECV, 0, 1, 1, buf, sizeof(buf));
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 5000), GW_OK);
    CHECK(verify(buf, sizeof(buf), 0, 1, 1) < 0, "content");
    int64_t end = gw__now_ms() + 100;
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

Test(shm, message_before_goodbye_is_delivered_then_remote_error, .timeout = 30)
{
    static const goodbye_case_t c = {.recv_posted_first = 0};
    job_t j = job(2, PATH_DIRECT, body_goodbye, &c);
    run_job(&j);
}

Test(shm, goodbye_with_receive_pending_is_remote_error, .timeout = 30)
{
    static const goodbye_case_t c = {.recv_posted_first = 1};
    job_t j = job(2, PATH_DIRECT, body_goodbye, &c);
    run_job(&j);
}
