/*
 * test_shm_bounds.c - what the shared-memory transport may take from a
 * host: a /dev/shm too small for a segment is a clear error
 * (GW_ERR_NO_MEMORY, logged with the size needed and the space left), not
 * a rank killed by SIGBUS later; a job whose ranks all die without a word
 * leaves nothing in /dev/shm, not even a segment still on its way to its
 * peer; and the rings shrink when many peers share a host, while 2 to 9
 * ranks keep the default.
 *
 * The first two run each job in a private mount namespace with a small
 * tmpfs of its own on /dev/shm (unshare, as root), so that the space used
 * is this job's alone and can be asserted to drop back to zero. Without
 * root they are skipped.
 *
 * The harness is in shm_test_util.h.
 */
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "shm_test_util.h"

/* A private tmpfs of `size` (mount's syntax) on /dev/shm, for this test
 * process and the ranks it forks. */
static void private_dev_shm(const char *size)
{
    if (geteuid() != 0)
        cr_skip_test("a private /dev/shm needs root (unshare -m, mount)");
    if (unshare(CLONE_NEWNS) != 0)
        cr_skip_test("unshare(CLONE_NEWNS): %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "making / private: %s",
                 strerror(errno));
    char opts[64];
    snprintf(opts, sizeof(opts), "size=%s,mode=1777", size);
    cr_assert_eq(mount("gwtest", "/dev/shm", "tmpfs", 0, opts), 0, "mounting a tmpfs: %s",
                 strerror(errno));
}

/* Bytes used in /dev/shm. The last reference to a segment may be dropped
 * by the kernel a moment after its holder was reaped (a descriptor in a
 * closed socket's queue goes through a work queue): wait up to a second
 * for the space to come back. */
static unsigned long long shm_used(void)
{
    unsigned long long used = 0;
    for (int i = 0; i < 100; i++) {
        struct statvfs vf;
        cr_assert_eq(statvfs("/dev/shm", &vf), 0);
        used = (unsigned long long)(vf.f_blocks - vf.f_bfree) * vf.f_frsize;
        if (used == 0)
            break;
        usleep(10 * 1000);
    }
    return used;
}

/* Run the job with the ranks' stderr (the log) in a file; return it. */
static char *run_job_logged(job_t *j)
{
    char path[] = "/tmp/gw-shm-bounds-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    run_job(j);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    off_t n = lseek(fd, 0, SEEK_END);
    char *log = calloc(1, (size_t)n + 1);
    cr_assert(log && pread(fd, log, (size_t)n, 0) == n);
    close(fd);
    fputs(log, stderr); /* still shown with the test's output */
    return log;
}

/* A 2-rank job's segment is 4 MiB (two rings of 2 MiB); /dev/shm has 1. */
Test(shm_bounds, full_dev_shm_is_no_memory_naming_size_and_space, .timeout = 30)
{
    private_dev_shm("1m");
    job_t j = job(2, PATH_DEFAULT, NULL, NULL);
    j.expect_connect[0] = GW_ERR_NO_MEMORY;
    j.expect_connect[1] = GW_ERR_REMOTE; /* rank 0 gave up and left */
    char *log = run_job_logged(&j);
    char want[128];
    snprintf(want, sizeof(want), "reserving %zu bytes of shared memory for the pair with rank 1",
             (size_t)GW_SHM_HDR_BYTES + 2 * GW_SHM_RING_DEFAULT);
    cr_expect(strstr(log, want), "no \"%s\" in the log", want);
    cr_expect(strstr(log, "/dev/shm has 1048576 bytes left of 1048576"),
              "the log does not say the space left in /dev/shm");
    cr_expect(strstr(log, "No space left on device"), "the log does not give the errno");
    cr_expect_eq(shm_used(), 0, "%llu bytes of /dev/shm still used", shm_used());
    free(log);
}

/* Rings small enough for the room there is: the same /dev/shm serves. */
Test(shm_bounds, small_rings_fit_a_small_dev_shm, .timeout = 30)
{
    private_dev_shm("1m");
    job_t j = job(3, PATH_TINY_RING, body_all_to_all, NULL);
    run_job(&j);
    cr_expect_eq(shm_used(), 0, "%llu bytes of /dev/shm still used", shm_used());
}

/* Rank 0 makes the pair's segment and hands it to rank 1's door; rank 1
 * never looks (it never connects) and then dies without a word, and rank 0
 * is SIGKILLed: nobody is left to clean up, and nothing may remain, neither
 * a name nor the space. */
Test(shm_bounds, job_killed_while_connecting_leaves_nothing, .timeout = 30)
{
    private_dev_shm("64m");
    job_t j = job(2, PATH_DEFAULT, NULL, NULL);
    j.skip_connect_rank = 1;
    j.skip_connect_ms = 1200;
    j.skip_connect_hard = 1;
    j.kill_rank = 0;
    j.kill_rank_at_ms = 600;
    j.expect_killed = 1;
    j.timeout_ms = 5000;
    run_job(&j); /* and no name of the job is left in /dev/shm */
    cr_expect_eq(shm_used(), 0, "%llu bytes of /dev/shm still used after the job", shm_used());
}

/* The same once the pair carries messages: every rank is killed in the
 * middle of a stream (rank 1 dies hard when its peer's death is seen). */
static int body_stream_then_die(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)size;
    (void)arg;
    size_t len = 4 * MIB;
    uint8_t *buf = malloc(len);
    CHECK(buf, "malloc");
    fill(buf, len, rank, 1 - rank, 1);
    for (uint64_t seq = 1;; seq++) {
        gw_request_t r;
        gw_status_t st;
        if (rank == 0) {
            make_req(&r, GW_REQ_SEND, 1, seq, 9, buf, len);
            st = t->ops->isend(t, &r);
        } else {
            make_req(&r, GW_REQ_RECV, 0, seq, 9, buf, len);
            st = t->ops->irecv(t, &r);
        }
        gw_request_t *one[] = {&r};
        if (st != GW_OK || wait_all(t, one, 1, NULL, 5000) != GW_OK)
            _exit(0); /* its peer is gone: die without closing */
    }
}

Test(shm_bounds, job_killed_mid_stream_leaves_nothing, .timeout = 30)
{
    private_dev_shm("64m");
    job_t j = job(2, PATH_RING, body_stream_then_die, NULL);
    j.lazy = 1;
    j.kill_rank = 0;
    j.kill_rank_at_ms = 800;
    j.expect_killed = 1;
    run_job(&j);
    cr_expect_eq(shm_used(), 0, "%llu bytes of /dev/shm still used after the job", shm_used());
}

Test(shm_bounds, rings_shrink_only_when_many_peers_share_a_host)
{
    for (int n = 2; n <= 9; n++)
        cr_expect_eq(gw__shm_ring_for(GW_SHM_RING_DEFAULT, n - 1), GW_SHM_RING_DEFAULT,
                     "%d ranks on a host lose the default rings", n);
    cr_expect_eq(gw__shm_ring_for(GW_SHM_RING_DEFAULT, 15), 1u << 20);
    cr_expect_eq(gw__shm_ring_for(GW_SHM_RING_DEFAULT, 127), 128u << 10);
    cr_expect_eq(gw__shm_ring_for(GW_SHM_RING_DEFAULT, 1023), GW_SHM_RING_FLOOR);
    for (int n = 2; n <= 1024; n++) {
        uint64_t ring = gw__shm_ring_for(GW_SHM_RING_DEFAULT, n - 1);
        cr_expect(ring == GW_SHM_RING_FLOOR || (uint64_t)(n - 1) * 2 * ring <= GW_SHM_RANK_RINGS,
                  "%d ranks: rings of %llu bytes", n, (unsigned long long)ring);
        cr_expect(ring >= GW_SHM_RING_FLOOR && (ring & (ring - 1)) == 0);
    }
    /* A ring already smaller than the floor (a test's) is kept. */
    cr_expect_eq(gw__shm_ring_for(4096, 127), 4096);
}
