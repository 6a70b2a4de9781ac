/*
 * test_shm_connect.c - connection establishment of the shared-memory
 * transport: peers that are not ours (zero blobs), peers on another host,
 * garbage address blobs, peers that exit, stay silent, die before their
 * peer attaches or connect late, a process of our user that knows the job
 * id and attaches a segment first or creates one first, and the address
 * blob and segment name encodings themselves.
 *
 * The harness is in shm_test_util.h.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>

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

/* An impostor that knows the job id (it is in the segment's name) attaches
 * rank 0's segment for rank 1 before rank 1 does, claims rank 1's pid, and
 * says MAPPED with a proof it cannot make right; like a real attacher it
 * unlinks the name. Rank 0 must drop that segment and offer a fresh one,
 * which rank 1 (late) attaches: the exchange completes with the right
 * bytes. */
typedef struct shm_impostor {
    char name[96];
    uint32_t pid; /* rank 1's, which it claims */
    size_t bytes;
    int attached; /* it mapped the segment and said MAPPED */
    pthread_t th;
} shm_impostor_t;

static shm_impostor_t shm_imp;

static void *shm_impostor_main(void *arg)
{
    shm_impostor_t *im = arg;
    int64_t deadline = gw__now_ms() + 3000;
    int fd = -1;
    while (fd < 0 && gw__now_ms() < deadline) {
        fd = shm_open(im->name, O_RDWR | O_CLOEXEC, 0);
        if (fd < 0)
            usleep(1000);
    }
    if (fd < 0)
        return NULL;
    struct stat sb;
    while (gw__now_ms() < deadline && fstat(fd, &sb) == 0 && (size_t)sb.st_size < im->bytes)
        usleep(1000);
    gw_shm_seg_t *s = mmap(NULL, im->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED)
        return NULL;
    shm_unlink(im->name);
    while (gw__now_ms() < deadline && !atomic_load(&s->init_done))
        usleep(1000);
    s->side[1].pid = im->pid;
    memset(s->side[1].nonce, 0x11, sizeof(s->side[1].nonce));
    memset(s->side[1].mac, 0x6b, sizeof(s->side[1].mac)); /* a guess */
    atomic_store(&s->side[1].state, GW_SHM_SIDE_MAPPED);
    im->attached = 1;
    usleep(200 * 1000); /* holds the mapping while rank 0 judges it */
    munmap(s, im->bytes);
    return NULL;
}

static void add_shm_impostor(job_t *j, uint8_t *all)
{
    shm_impostor_t *im = &shm_imp;
    memset(im, 0, sizeof(*im));
    uint32_t pid;
    uint64_t host, ring0, ring1;
    cr_assert_eq(gw__shm_addr_decode(all, &pid, &host, &ring0), GW_OK);
    cr_assert_eq(gw__shm_addr_decode(all + GW_TRANSPORT_ADDR_MAX, &im->pid, &host, &ring1), GW_OK);
    im->bytes = GW_SHM_HDR_BYTES + 2 * ring0; /* the creator (rank 0) sizes the rings */
    gw__shm_seg_name(j->job_id, 0, 1, im->name, sizeof(im->name));
    pthread_create(&im->th, NULL, shm_impostor_main, im);
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
    free(sbuf);
    free(rbuf);
    return 0;
}

Test(shm, impostor_attaching_first_is_dropped_and_the_job_goes_on, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, body_one_exchange, NULL);
    j.tamper = add_shm_impostor;
    j.delay_connect_rank = 1;
    j.delay_connect_ms = 600;
    run_job(&j);
    pthread_join(shm_imp.th, NULL);
    cr_expect(shm_imp.attached, "the impostor never attached: the proof was not tested");
}

/* The other way round: an impostor of our user who knows the job id creates
 * rank 0's segment for rank 1 before rank 0 does (rank 0 here never
 * connects), with a header that is right in every field it can know, claims
 * rank 0's pid, and says READY with a proof it cannot make right once rank
 * 1 has proven its side. Rank 1 must refuse it (GW_ERR_AUTH) rather than
 * serve a segment that a process without the token made. */
typedef struct shm_creator_impostor {
    char name[96];
    uint8_t job_id[16];
    uint32_t pid; /* rank 0's, which it claims */
    uint64_t ring;
    size_t bytes;
    int created; /* it made the segment */
    int judged;  /* rank 1 proved its side and saw the impostor's READY */
    pthread_t th;
} shm_creator_impostor_t;

static shm_creator_impostor_t shm_cimp;

static void *shm_creator_impostor_main(void *arg)
{
    shm_creator_impostor_t *im = arg;
    int fd = shm_open(im->name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return NULL;
    gw_shm_seg_t *s = MAP_FAILED;
    if (ftruncate(fd, (off_t)im->bytes) == 0)
        s = mmap(NULL, im->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (s == MAP_FAILED) {
        shm_unlink(im->name);
        return NULL;
    }
    s->magic = GW_SHM_SEG_MAGIC;
    s->version = GW_SHM_PROTOCOL_VERSION;
    memcpy(s->job_id, im->job_id, sizeof(s->job_id));
    s->lo = 0;
    s->hi = 1;
    s->ring_bytes = im->ring;
    memset(s->nonce, 0x22, sizeof(s->nonce));
    s->side[0].pid = im->pid;
    atomic_store(&s->side[0].cpu, -1);
    atomic_store(&s->side[0].state, GW_SHM_SIDE_MAPPED);
    atomic_store(&s->init_done, 1);
    im->created = 1;
    int64_t deadline = gw__now_ms() + 3000;
    while (gw__now_ms() < deadline && atomic_load(&s->side[1].state) < GW_SHM_SIDE_MAPPED)
        usleep(1000);
    if (atomic_load(&s->side[1].state) >= GW_SHM_SIDE_MAPPED) {
        memset(s->side[0].mac, 0x6b, sizeof(s->side[0].mac)); /* a guess */
        atomic_store(&s->side[0].state, GW_SHM_SIDE_READY);
        im->judged = 1;
        usleep(300 * 1000); /* holds the mapping while rank 1 judges it */
    }
    munmap(s, im->bytes);
    shm_unlink(im->name); /* rank 1 unlinked it when it attached, unless it never came */
    return NULL;
}

static void add_shm_creator_impostor(job_t *j, uint8_t *all)
{
    shm_creator_impostor_t *im = &shm_cimp;
    memset(im, 0, sizeof(*im));
    uint32_t pid1;
    uint64_t host, ring1;
    cr_assert_eq(gw__shm_addr_decode(all, &im->pid, &host, &im->ring), GW_OK);
    cr_assert_eq(gw__shm_addr_decode(all + GW_TRANSPORT_ADDR_MAX, &pid1, &host, &ring1), GW_OK);
    im->bytes = GW_SHM_HDR_BYTES + 2 * im->ring; /* the creator (rank 0) sizes the rings */
    memcpy(im->job_id, j->job_id, sizeof(im->job_id));
    gw__shm_seg_name(j->job_id, 0, 1, im->name, sizeof(im->name));
    pthread_create(&im->th, NULL, shm_creator_impostor_main, im);
}

Test(shm, attacher_refuses_a_segment_made_without_the_token, .timeout = 30)
{
    job_t j = job(2, PATH_DIRECT, NULL, NULL);
    j.tamper = add_shm_creator_impostor;
    j.skip_connect_rank = 0; /* alive, so rank 1 does not see it leave first */
    j.skip_connect_ms = 2000;
    j.expect_connect[1] = GW_ERR_AUTH;
    run_job(&j);
    pthread_join(shm_cimp.th, NULL);
    cr_expect(shm_cimp.created, "the impostor could not create the segment first");
    cr_expect(shm_cimp.judged, "rank 1 never proved its side: the creator's proof was not tested");
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
