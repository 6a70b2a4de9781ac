/*
 * test_shm_lazy.c - pairs of the shared-memory transport connected on
 * first use (params.lazy; shm_connect.c, shm_door.c): a ring maps only its
 * neighbours' segments, a peer that needs nothing from us yet still takes
 * part when we knock, every path carries messages exactly, a peer that
 * died or closed before we needed it is named at once, strangers' knocks
 * count for nothing and leave the job going, and ranks that disagree about
 * lazy connections stop at connect(). Every job's /dev/shm is checked
 * empty afterwards, also when a rank was killed.
 *
 * The harness is in shm_test_util.h.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <sys/socket.h>
#include <sys/un.h>

#include "common/byteorder.h"
#include "shm_test_util.h"
#include "support/fd_count.h"

/* Mappings of this job's names in /proc/self/maps: the segments of the
 * pairs we connected (unlinked, so "(deleted)"). */
static int mapped_names(gw_transport_t *t)
{
    char prefix[128];
    gw__shm_seg_name(gw__shm_of(t)->job_id, 0, 0, prefix, sizeof(prefix));
    *strrchr(prefix, '-') = '\0';
    *strrchr(prefix, '-') = '\0'; /* "/gw-<job id>" */
    return count_maps_of(prefix);
}

static int connected_peers(gw_transport_t *t) { return gw__shm_of(t)->nconnected; }

/* Each rank sends 1 MiB to the next and receives from the one before. */
static int body_ring(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    CHECK(connected_peers(t) == 0, "%d pairs connected before the first message",
          connected_peers(t));
    CHECK(mapped_names(t) == 0, "%d segments mapped before the first message", mapped_names(t));
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    size_t len = MIB;
    uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
    CHECK(sbuf && rbuf, "malloc");
    for (int round = 1; round <= 3; round++) {
        fill(sbuf, len, rank, next, (uint64_t)round);
        memset(rbuf, 0, len);
        gw_request_t s, r;
        make_req(&s, GW_REQ_SEND, next, (uint64_t)round, 5, sbuf, len);
        make_req(&r, GW_REQ_RECV, prev, (uint64_t)round, 5, rbuf, len);
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        gw_request_t *both[] = {&s, &r};
        CHECK_ST(wait_all(t, both, 2, NULL, 8000), GW_OK);
        long bad = verify(rbuf, len, prev, rank, (uint64_t)round);
        CHECK(bad < 0, "round %d: byte %ld from rank %d is wrong", round, bad, prev);
    }
    /* Our two neighbours, nobody else (with 4 ranks, rank + 2 stays idle). */
    CHECK(connected_peers(t) == 2, "%d pairs connected, want 2", connected_peers(t));
    CHECK(mapped_names(t) == 2, "%d segments mapped, want our two neighbours'", mapped_names(t));
    CHECK(gw__shm_of(t)->peers[(rank + 2) % size].conn == GW_SHM_C_IDLE,
          "the rank opposite us was connected");
    free(sbuf);
    free(rbuf);
    return 0;
}

Test(shm_lazy, ring_maps_only_its_neighbours, .timeout = 60)
{
    for (path_t path = PATH_DIRECT; path <= PATH_TINY_RING; path++) {
        job_t j = job(4, path, body_ring, NULL);
        j.lazy = 1;
        run_job(&j);
    }
}

/* Every rank to every other, each path: the pairs come up in any order. */
Test(shm_lazy, all_to_all_every_path, .timeout = 60)
{
    for (path_t path = PATH_DIRECT; path <= PATH_TINY_RING; path++) {
        job_t j = job(4, path, body_all_to_all, NULL);
        j.lazy = 1;
        run_job(&j);
    }
}

/* The sender posts one 8 KiB message; the receiver posts nothing for a
 * second and only makes progress. The message fits the ring, so the send
 * completes as soon as the pair is up, which needs the receiver to answer
 * the knock. Then the receive is posted and must find the message. */
static int body_knock(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    int sender = *(const int *)arg, receiver = 1 - sender;
    size_t len = 8192;
    uint8_t buf[8192];
    if (rank == sender) {
        fill(buf, len, rank, receiver, 7);
        gw_request_t s;
        make_req(&s, GW_REQ_SEND, receiver, 7, 1, buf, len);
        int64_t t0 = gw__now_ms();
        CHECK_ST(t->ops->isend(t, &s), GW_OK);
        CHECK_ST(wait_one(t, &s, 700), GW_OK);
        CHECK(gw__now_ms() - t0 < 700, "the send took %lld ms", (long long)(gw__now_ms() - t0));
        /* Stay until the receiver has read it (its goodbye would fail
         * nothing, but keep the pair's lifetime simple). */
        gw_request_t r;
        uint8_t ack = 0;
        make_req(&r, GW_REQ_RECV, receiver, 8, 1, &ack, 1);
        CHECK_ST(t->ops->irecv(t, &r), GW_OK);
        CHECK_ST(wait_one(t, &r, 5000), GW_OK);
        return 0;
    }
    int64_t until = gw__now_ms() + 1000;
    while (gw__now_ms() < until)
        CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
    CHECK(connected_peers(t) == 1, "the knock did not connect the pair");
    memset(buf, 0, len);
    gw_request_t r;
    make_req(&r, GW_REQ_RECV, sender, 7, 1, buf, len);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    CHECK_ST(wait_one(t, &r, 2000), GW_OK);
    CHECK(verify(buf, len, sender, rank, 7) < 0, "content");
    uint8_t ack = 1;
    gw_request_t s;
    make_req(&s, GW_REQ_SEND, sender, 8, 1, &ack, 1);
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(wait_one(t, &s, 5000), GW_OK);
    return 0;
}

Test(shm_lazy, a_knock_connects_a_peer_that_needs_nothing_yet, .timeout = 60)
{
    static const int senders[] = {0, 1}; /* the creator knocks; the attacher knocks */
    for (int i = 0; i < 2; i++) {
        job_t j = job(2, PATH_DIRECT, body_knock, &senders[i]);
        j.lazy = 1;
        run_job(&j);
    }
}

/* Rank 0 waits, then sends to rank 2, which is gone by then (killed, or
 * closed and still alive): the send fails at once naming it. */
static int body_send_late_to_2(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    gw_status_t want = *(const gw_status_t *)arg;
    if (rank == 2) {
        usleep(5000 * 1000); /* killed long before this ends */
        return 0;
    }
    if (rank != 0)
        return 0;
    usleep(600 * 1000);
    uint8_t b[64] = {0};
    gw_request_t s;
    make_req(&s, GW_REQ_SEND, 2, 1, 1, b, sizeof(b));
    int64_t t0 = gw__now_ms();
    gw_status_t st = t->ops->isend(t, &s);
    if (st == GW_OK)
        st = wait_one(t, &s, 3000);
    CHECK(st == want, "send to rank 2 gave %s, want %s", gw_status_name(st), gw_status_name(want));
    CHECK(gw__now_ms() - t0 < 1000, "it took %lld ms to notice", (long long)(gw__now_ms() - t0));
    CHECK(t->culprit == 2, "culprit %d, want rank 2", t->culprit);
    return 0;
}

Test(shm_lazy, a_peer_killed_before_we_need_it_is_named, .timeout = 60)
{
    static const gw_status_t want = GW_ERR_REMOTE;
    job_t j = job(3, PATH_DIRECT, body_send_late_to_2, &want);
    j.lazy = 1;
    j.kill_rank = 2;
    j.kill_rank_at_ms = 300;
    j.expect_killed = 1;
    run_job(&j); /* and nothing of it is left in /dev/shm */
}

/* Rank 2 returns at once: connect_and_run closes its transport, then it
 * lingers, alive but closed. */
static int body_closed_peer(gw_transport_t *t, int rank, int size, const void *arg)
{
    if (rank == 2)
        return 0;
    return body_send_late_to_2(t, rank, size, arg);
}

Test(shm_lazy, a_peer_that_closed_before_we_need_it_is_named, .timeout = 60)
{
    static const gw_status_t want = GW_ERR_REMOTE;
    job_t j = job(3, PATH_DIRECT, body_closed_peer, &want);
    j.lazy = 1;
    j.linger_rank = 2;
    j.linger_ms = 2000;
    run_job(&j);
}

/* Rank 2, standing in for a process of our user that knows the job id,
 * knocks on rank 1's door in rank 0's name, in rank 1's own, for a rank
 * beyond the job, and with bytes that are no knock: the kernel says which
 * pid sent each, so none of them counts, rank 1 starts nothing, and every
 * message of the exchange after it still arrives. */
static int body_stranger_knocks(gw_transport_t *t, int rank, int size, const void *arg)
{
    if (rank == 2) {
        int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
        CHECK(fd >= 0, "socket: %s", strerror(errno));
        struct sockaddr_un a;
        socklen_t al = gw__shm_door_addr(gw__shm_of(t)->job_id, 1, &a);
        static const uint32_t claims[] = {0, 1, 40};
        for (size_t i = 0; i < 3; i++) {
            uint8_t msg[8];
            gw__put_le32(msg, GW_SHM_DOOR_MAGIC);
            gw__put_le32(msg + 4, claims[i]);
            CHECK(sendto(fd, msg, sizeof(msg), 0, (struct sockaddr *)&a, al) == 8, "sendto: %s",
                  strerror(errno));
        }
        CHECK(sendto(fd, "GET / HTTP/1.1\r\n", 16, 0, (struct sockaddr *)&a, al) == 16,
              "sendto: %s", strerror(errno));
        close(fd);
    }
    if (rank == 0)
        usleep(800 * 1000); /* the real rank 0 knocks only after rank 1 looked */
    if (rank == 1) {
        int64_t until = gw__now_ms() + 500;
        while (gw__now_ms() < until)
            CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
        CHECK(gw__shm_of(t)->peers[0].conn == GW_SHM_C_IDLE,
              "a knock in rank 0's name from another process started a connection");
        CHECK(gw__shm_of(t)->strangers == 4, "%u strangers counted, want 4",
              gw__shm_of(t)->strangers);
    }
    return body_all_to_all(t, rank, size, arg);
}

Test(shm_lazy, strangers_knocks_leave_the_job_going, .timeout = 60)
{
    job_t j = job(4, PATH_DIRECT, body_stranger_knocks, NULL);
    j.lazy = 1;
    run_job(&j);
}

/* One rank connects eagerly, the other lazily: both refuse at connect(). */
Test(shm_lazy, ranks_that_disagree_stop_at_connect, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.lazy = 1;
    j.eager_rank = 1;
    j.expect_connect[0] = GW_ERR_CONFIG;
    j.expect_connect[1] = GW_ERR_CONFIG;
    run_job(&j);
}
