/*
 * Knocks and strangers on the TCP transport's listening port, connecting
 * on first use (tcp_conn.c, tcp_mesh.c, transport/sock_auth.c,
 * transport/sock_strangers.c):
 *
 *   - a knock in a rank's name with the right job id but without the
 *     job's key (no proof, a garbage proof) or played back makes no rank
 *     dial anyone, and a genuine knock whose dial cannot finish (the
 *     knocker is busy outside gradwire for longer than the timeout) fails
 *     nothing while no message of ours waits for that rank: the job goes
 *     on and its ring works afterwards;
 *   - a flood of connections that prove nothing costs a bounded number of
 *     log lines (the first ones, then a summary at most once a second).
 */
#include <fcntl.h>
#include <sys/random.h>

#include "tcp_test_util.h"
#include "transport/sock.h"
#include "transport/tcp/tcp_mesh.h"

#define BUSY_MS 4000 /* rank 1 is busy outside gradwire this long */
#define TIMEOUT_MS \
    1000 /* the transports' timeout_ms: handshakes too, so not less on a busy machine */

static int connect_to(const struct sockaddr_storage *ss, socklen_t len)
{
    int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (const struct sockaddr *)ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Send bytes to p's listening port on a connection of their own, closed at
 * once (as a knock is). */
static int send_to(const gw_tcp_peer_t *p, const void *buf, size_t len)
{
    int fd = connect_to(&p->addr, p->addr_len);
    if (fd < 0)
        return -1;
    int rc = write_all(fd, buf, len);
    close(fd);
    return rc;
}

/* Drive our transport for ms (a rank that waits in gradwire). */
static int progress_for(gw_transport_t *t, int rank, int ms)
{
    int64_t end = gw__now_ms() + ms;
    while (gw__now_ms() < end)
        CHECK_ST(t->ops->progress(t, NULL, 10), GW_OK);
    return 0;
}

/* Rank 0 forges knocks on rank 2's port in rank 1's name (the job id is
 * right: it is no secret): the hello alone, the hello with a garbage
 * proof; then a genuine one (made with the job's key, as rank 1 would);
 * then that genuine one played back. Rank 1 is busy outside gradwire
 * meanwhile. Rank 2 must dial rank 1 once (for the genuine knock), give
 * that dial up without failing when it cannot finish, and drop the other
 * three as strangers. Then the ring runs. */
static int body_forged_knocks(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    gw_tcp_t *tt = gw__tcp_of(t);
    if (rank == 1) {
        usleep(BUSY_MS * 1000);
    } else if (rank == 0) {
        const gw_tcp_peer_t *p2 = &tt->peers[2];
        uint8_t knock[GW_TCP_HELLO_SIZE + GW_SOCK_MAC_LEN];
        gw__tcp_make_hello(tt, 1, 2, (int)GW_TCP_KNOCK, knock);
        CHECK(getrandom(knock + GW_SOCK_NONCE_AT, GW_SOCK_NONCE_LEN, 0) == GW_SOCK_NONCE_LEN,
              "getrandom: %m");
        CHECK(send_to(p2, knock, GW_TCP_HELLO_SIZE) == 0, "forged knock without proof: %m");
        memset(knock + GW_TCP_HELLO_SIZE, 0xa5, GW_SOCK_MAC_LEN);
        knock[GW_SOCK_NONCE_AT] ^= 1;
        CHECK(send_to(p2, knock, sizeof(knock)) == 0, "forged knock with garbage proof: %m");
        if (progress_for(t, rank, 300) != 0)
            return 1;
        /* A genuine knock, as rank 1 sends it, caught on a socket pair. */
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair: %m");
        uint8_t hello[GW_TCP_HELLO_SIZE];
        uint64_t counter = 0;
        gw__tcp_make_hello(tt, 1, 2, (int)GW_TCP_KNOCK, hello);
        CHECK(gw__sock_send_knock(sv[0], tt->data_key, hello, sizeof(hello), &counter) == 0,
              "making a knock: %m");
        CHECK(read(sv[1], knock, sizeof(knock)) == (ssize_t)sizeof(knock), "reading it: %m");
        close(sv[0]);
        close(sv[1]);
        CHECK(send_to(p2, knock, sizeof(knock)) == 0, "genuine knock: %m");
        /* Played back once the dial it caused was given up. */
        if (progress_for(t, rank, TIMEOUT_MS + 700) != 0)
            return 1;
        CHECK(send_to(p2, knock, sizeof(knock)) == 0, "replayed knock: %m");
        if (progress_for(t, rank, 300) != 0)
            return 1;
    } else {
        int dials = 0, was = 0;
        int64_t end = gw__now_ms() + BUSY_MS - 300;
        while (gw__now_ms() < end) {
            gw_status_t st = t->ops->progress(t, NULL, 5);
            CHECK(st == GW_OK && t->failed == GW_OK,
                  "knocks in rank 1's name broke the transport (%s, culprit %d) while rank 1 "
                  "was busy elsewhere",
                  gw_status_name(st != GW_OK ? st : t->failed), t->culprit);
            int dialing = tt->peers[1].outs != NULL;
            dials += dialing && !was;
            was = dialing;
        }
        CHECK(dials == 1, "rank 2 dialled rank 1 %d times: want once (the genuine knock)", dials);
        CHECK(tt->mesh && tt->mesh->strangers.total == 3,
              "%ld connections dropped as strangers: want 3 (no proof, garbage proof, replay)",
              tt->mesh ? tt->mesh->strangers.total : -1L);
        CHECK(!tt->peers[1].up, "rank 1 connected while busy");
    }
    return ring_exchange(t, rank, size, 6000);
}

Test(tcp_knock, forged_or_replayed_knocks_move_nobody_and_the_job_goes_on, .timeout = 30)
{
    job_t j = job(3, 1, body_forged_knocks, NULL);
    j.lazy = 1;
    j.timeout_ms = TIMEOUT_MS;
    run_job(&j);
}

#define FLOOD 200

/* Rank 0 connects FLOOD times to rank 1's port, sending garbage and
 * closing; rank 1 drops them all while its stderr is caught: the lines
 * it writes are bounded (the first GW_SOCK_STRANGERS_LOGGED, one saying
 * that the rest are counted, a summary at most once a second), not one per
 * connection. */
static int body_flood(gw_transport_t *t, int rank, int size, const void *arg)
{
    (void)arg;
    gw_tcp_t *tt = gw__tcp_of(t);
    if (rank == 0) {
        static const char garbage[] = "GET / HTTP/1.0\r\n\r\n";
        for (int k = 0; k < FLOOD; k++)
            CHECK(send_to(&tt->peers[1], garbage, sizeof(garbage) - 1) == 0, "stranger %d: %m", k);
    } else {
        fflush(stderr);
        int saved = dup(2);
        FILE *cap = tmpfile();
        CHECK(saved >= 0 && cap && dup2(fileno(cap), 2) == 2, "catching stderr: %m");
        int64_t t0 = gw__now_ms();
        while (tt->mesh && tt->mesh->strangers.total < FLOOD && gw__now_ms() - t0 < 8000)
            if (t->ops->progress(t, NULL, 10) != GW_OK)
                break;
        long long took = (long long)(gw__now_ms() - t0);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        long total = tt->mesh ? tt->mesh->strangers.total : -1;
        CHECK(total >= FLOOD, "%ld of %d strangers dropped in %lld ms", total, FLOOD, took);
        rewind(cap);
        int lines = 0, one_by_one = 0;
        char line[1024];
        while (fgets(line, sizeof(line), cap)) {
            lines++;
            one_by_one += strstr(line, "closing a connection from") != NULL;
        }
        fclose(cap);
        long bound = GW_SOCK_STRANGERS_LOGGED + 1 + took / GW_SOCK_STRANGER_SUMMARY_MS + 1;
        CHECK(one_by_one == GW_SOCK_STRANGERS_LOGGED, "%d strangers logged one by one, want %d",
              one_by_one, GW_SOCK_STRANGERS_LOGGED);
        CHECK(lines <= bound, "%d log lines for %d strangers in %lld ms: want at most %ld", lines,
              FLOOD, took, bound);
    }
    return ring_exchange(t, rank, size, 6000);
}

Test(tcp_knock, a_flood_of_strangers_costs_a_bounded_number_of_log_lines, .timeout = 30)
{
    job_t j = job(2, 1, body_flood, NULL);
    j.lazy = 1;
    run_job(&j);
}
