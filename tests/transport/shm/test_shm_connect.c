/*
 * test_shm_connect.c - connection establishment of the shared-memory
 * transport: peers that are not ours (zero blobs), peers on another host,
 * garbage address blobs, peers that exit, stay silent, die before their
 * peer attaches or connect late, a process of our user that knows the job
 * id and hands a rank a segment in another rank's name, ranks without the
 * job's key, and the address blob and segment name encodings themselves.
 *
 * The harness is in shm_test_util.h.
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "shm_test_util.h"

/* ---- connection establishment ---------------------------------------------------- */

/* Ranks in different groups see each other's blob as zero ("not mine"):
 * each group is a mesh of its own, nobody waits for the others, and a rank
 * of the other group cannot be addressed. */
static int body_pairs(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = rank ^ 2; /* 0 <-> 2, 1 <-> 3 */
    size_t len = MIB;
    uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
    CHECK(sbuf && rbuf, "malloc");
    fill(sbuf, len, rank, peer, 1);
    gw_request_t s, r;
    make_req(&s, GW_REQ_SEND, peer, 1, 9, sbuf, len);
    make_req(&r, GW_REQ_RECV, peer, 1, 9, rbuf, len);
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *both[] = {&s, &r};
    CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
    CHECK(verify(rbuf, len, peer, rank, 1) < 0, "content");
    /* A rank of the other group is not ours to talk to. */
    gw_request_t bad;
    make_req(&bad, GW_REQ_SEND, rank ^ 1, 1, 9, sbuf, 1);
    CHECK_ST(t->ops->isend(t, &bad), GW_ERR_INVALID_ARG);
    free(sbuf);
    free(rbuf);
    return 0;
}

Test(shm, zero_address_peers_are_skipped, .timeout = 30)
{
    job_t j = job(4, PATH_DIRECT, body_pairs, NULL);
    j.group[0] = j.group[2] = 0;
    j.group[1] = j.group[3] = 1;
    run_job(&j);
}

static void tamper_host(job_t *j, uint8_t *all)
{
    (void)j;
    all[GW_TRANSPORT_ADDR_MAX + 16] ^= 1; /* rank 1's host id */
}

/* Rank 1 claims another host: rank 0 refuses it; rank 1 (which sees rank
 * 0 on its own host) learns from rank 0's abort flag or death. */
Test(shm, peer_on_another_host_is_config_error, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.tamper = tamper_host;
    j.expect_connect[0] = GW_ERR_CONFIG;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

static void tamper_magic(job_t *j, uint8_t *all)
{
    (void)j;
    all[0] ^= 0xff; /* rank 0's magic */
}

Test(shm, garbage_address_is_protocol_error, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.tamper = tamper_magic;
    j.timeout_ms = 1500;
    /* Rank 1 rejects rank 0's blob; rank 0, which created the segment, sees
     * rank 1 leave without attaching. */
    j.expect_connect[0] = GW_ERR_REMOTE;
    j.expect_connect[1] = GW_ERR_PROTOCOL;
    run_job(&j);
}

/* A peer that exits without connecting: the creator notices its death
 * instead of waiting for the timeout, and unlinks the segment. */
Test(shm, peer_exits_before_connecting, .timeout = 30)
{
    job_t j = job(3, PATH_DIRECT, NULL, NULL);
    j.skip_connect_rank = 2;
    j.skip_connect_ms = 100;
    j.timeout_ms = 8000;
    j.expect_connect[0] = GW_ERR_REMOTE;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

/* A peer that stays alive but never connects: a time-out naming it. */
Test(shm, silent_peer_times_out, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.skip_connect_rank = 0;
    j.skip_connect_ms = 2500;
    j.timeout_ms = 1000;
    j.expect_connect[1] = GW_ERR_TIMEOUT;
    run_job(&j);
}

/* Rank 0 creates the segment and is killed before rank 1 attaches: rank 1
 * still finds the name, unlinks it and reports the death. */
Test(shm, creator_killed_before_attach_leaves_nothing, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.delay_connect_rank = 1;
    j.delay_connect_ms = 800;
    j.kill_rank = 0;
    j.kill_rank_at_ms = 300;
    j.expect_killed = 1;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

Test(shm, late_peer_connects, .timeout = 30)
{
    job_t j = job(3, PATH_DIRECT, body_all_to_all, NULL);
    j.delay_connect_rank = 0;
    j.delay_connect_ms = 300;
    run_job(&j);
}

/* A process of our user that knows the job id (it is in the door's name)
 * hands rank 1 a segment of its own through rank 1's door, in rank 0's
 * name, before rank 0 (late) hands over the real one. The kernel stamps the
 * datagram with the stranger's pid, so rank 1 closes that segment, counts a
 * stranger and attaches rank 0's: the exchange completes with the right
 * bytes. */
typedef struct shm_stranger {
    uint8_t job_id[16];
    int sent; /* its knock with a segment reached rank 1's door */
} shm_stranger_t;

static shm_stranger_t shm_str;

static void send_stranger_segment(job_t *j, uint8_t *all)
{
    (void)all;
    shm_stranger_t *im = &shm_str;
    memset(im, 0, sizeof(*im));
    memcpy(im->job_id, j->job_id, sizeof(im->job_id));
    int seg = memfd_create("impostor", MFD_CLOEXEC);
    cr_assert(seg >= 0 && ftruncate(seg, (off_t)(GW_SHM_HDR_BYTES + 2 * GW_SHM_RING_DEFAULT)) == 0);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    struct sockaddr_un a;
    socklen_t al = gw__shm_door_addr(j->job_id, 1, &a);
    uint8_t msg[GW_SHM_KNOCK_LEN];
    gw__shm_knock_encode(0, msg); /* in rank 0's name */
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    memset(&ctl, 0, sizeof(ctl));
    struct iovec iov = {msg, sizeof(msg)};
    struct msghdr mh = {.msg_name = &a,
                        .msg_namelen = al,
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &seg, sizeof(int));
    im->sent = sendmsg(fd, &mh, 0) == (ssize_t)sizeof(msg);
    close(fd);
    close(seg);
}

static int body_one_exchange(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    int peer = 1 - rank;
    size_t len = 300 * 1024;
    uint8_t *sbuf = malloc(len), *rbuf = malloc(len);
    CHECK(sbuf && rbuf, "malloc");
    fill(sbuf, len, rank, peer, 3);
    gw_request_t s, r;
    make_req(&s, GW_REQ_SEND, peer, 3, 9, sbuf, len);
    make_req(&r, GW_REQ_RECV, peer, 3, 9, rbuf, len);
    CHECK_ST(t->ops->isend(t, &s), GW_OK);
    CHECK_ST(t->ops->irecv(t, &r), GW_OK);
    gw_request_t *both[] = {&s, &r};
    CHECK_ST(wait_all(t, both, 2, NULL, 5000), GW_OK);
    CHECK(verify(rbuf, len, peer, rank, 3) < 0, "content");
    if (rank == 1)
        CHECK(gw__shm_of(t)->strangers == 1, "%u strangers counted, want 1",
              gw__shm_of(t)->strangers);
    free(sbuf);
    free(rbuf);
    return 0;
}

Test(shm, stranger_handing_a_segment_is_refused_and_the_job_goes_on, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_one_exchange, NULL);
    j.tamper = send_stranger_segment;
    j.delay_connect_rank = 0;
    j.delay_connect_ms = 600;
    run_job(&j);
    cr_expect(shm_str.sent, "the stranger's segment never reached rank 1's door");
}

/* A rank that does not know the job's data-plane key (no token) attaches
 * the segment it was handed, but its proof is wrong: the creator refuses
 * it (GW_ERR_AUTH) rather than serve it, and tells it why. */
Test(shm, attacher_without_the_token_is_refused, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.wrong_key_rank = 1;
    j.expect_connect[0] = GW_ERR_AUTH;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

/* The same with the creator lacking the key: it cannot check the
 * attacher's proof either, and refuses it the same way. */
Test(shm, creator_without_the_token_is_refused, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.wrong_key_rank = 0;
    j.expect_connect[0] = GW_ERR_AUTH;
    j.expect_connect[1] = GW_ERR_REMOTE;
    run_job(&j);
}

Test(shm, address_blob_round_trip)
{
    uint8_t blob[GW_TRANSPORT_ADDR_MAX];
    gw__shm_addr_encode(4242, 0x0123456789abcdefull, 1u << 20, blob);
    uint32_t pid;
    uint64_t host, ring;
    cr_assert_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_OK);
    cr_expect_eq(pid, 4242u);
    cr_expect_eq(host, 0x0123456789abcdefull);
    cr_expect_eq(ring, 1u << 20);
    for (size_t i = GW_SHM_ADDR_SIZE; i < sizeof(blob); i++)
        cr_expect_eq(blob[i], 0, "byte %zu of the blob is not zero", i);
    gw__shm_addr_encode(4242, 1, 3000, blob); /* not a power of two */
    cr_expect_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_ERR_PROTOCOL);
    gw__shm_addr_encode(4242, 1, 1u << 20, blob);
    blob[0] ^= 1;
    cr_expect_eq(gw__shm_addr_decode(blob, &pid, &host, &ring), GW_ERR_PROTOCOL);
    char name[96];
    uint8_t id[16];
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(i * 17);
    gw__shm_seg_name(id, 3, 12, name, sizeof(name));
    cr_expect_str_eq(name, "/gw-00112233445566778899aabbccddeeff-3-12");
}
