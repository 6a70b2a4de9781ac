/* test_bootstrap_ring.c - the bootstrap's ring all-gather between real
 * processes on 127.0.0.1 (transport/bootstrap/bootstrap_ring.c and
 * bootstrap_ring_gather.c): the ring's result is the star's on 2, 3, 8 and
 * 17 ranks; rank 0 alone decides which way the all-gather goes; a rank
 * that dies or hangs in the ring is named by every other rank within the
 * timeout; strangers on a ring listener are dropped while the all-gather
 * completes; GW_BOOTSTRAP_RING_MIN is parsed strictly. Ranks are the
 * harness's (bootstrap_test_util.h); the misbehaving ones are hand-made
 * here: they join through the library and then speak the ring's protocol
 * themselves, so that they die, hang or lie at a chosen point. */
#include <fcntl.h>

#include "bootstrap_test_util.h"
#define RING_SPARE_FDS 3

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "transport/bootstrap/bootstrap_internal.h"

/* ---- the ring's result is the star's ------------------------------------- */

/* n ranks, three all-gathers (256, 7 and 0 bytes per rank), with ring_min
 * on every rank; every rank checks every byte against what the star
 * returns (rank r's block at r x len), and rank 0's log says which path
 * it took. */
static void gather_job(int n, int ring_min, const char *path)
{
    job_t j;
    job_init(&j);
    int slots[MAX_SLOTS];
    for (int r = 0; r < n; r++) {
        spec_t s = rank_spec(r, n, "tok", 20000);
        s.ring_min = ring_min;
        s.ngathers = 3;
        s.lens[0] = 256;
        s.lens[1] = 7;
        s.lens[2] = 0;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 60000);
    for (int r = 0; r < n; r++)
        assert_completed(&j, slots[r], 3);
    char want[96];
    snprintf(want, sizeof(want), "bootstrap all-gather of %d x 256 bytes over the %s", n, path);
    assert_log(&j, slots[0], want);
    job_fini(&j);
}

Test(bootstrap_ring, ring_gives_the_stars_result_on_2_3_8_17_ranks, .timeout = 240)
{
    static const int sizes[] = {2, 3, 8, 17};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        gather_job(sizes[i], 2, "ring");
        gather_job(sizes[i], 0, "star"); /* the default, 64, keeps these on the star */
    }
}

/* Over IPv4 and IPv6 loopback, with blocks that take several partial
 * reads and writes, the root started last. */
static void ring_on(const char *host, int n)
{
    job_t j;
    job_init(&j);
    job_root_at(&j, host);
    int slots[MAX_SLOTS];
    for (int r = n - 1; r >= 0; r--) {
        spec_t s = rank_spec(r, n, "job-token", 20000);
        s.root = j.root;
        s.ring_min = 2;
        s.ngathers = 3;
        s.lens[0] = 128;
        s.lens[1] = 200000;
        s.lens[2] = 0;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 40000);
    for (int r = 0; r < n; r++)
        assert_completed(&j, slots[r], 3);
    assert_log(&j, slots[0], "over the ring");
    job_fini(&j);
}

Test(bootstrap_ring, large_blocks_over_ipv4_and_ipv6, .timeout = 90)
{
    ring_on("127.0.0.1", 5);
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        cr_skip_test("no IPv6 loopback on this host (IPv4 passed)");
    ring_on("::1", 3);
}

/* Rank 0's setting decides for every rank: the others' differ both ways. */
Test(bootstrap_ring, rank_0_decides_the_path, .timeout = 60)
{
    for (int ring = 0; ring < 2; ring++) {
        job_t j;
        job_init(&j);
        int slots[4];
        for (int r = 0; r < 4; r++) {
            spec_t s = rank_spec(r, 4, "tok", 10000);
            s.ring_min = (r == 0) == ring ? 2 : 1000;
            slots[r] = spawn(&j, &s);
        }
        wait_all(&j, 20000);
        for (int r = 0; r < 4; r++)
            assert_completed(&j, slots[r], 1);
        assert_log(&j, slots[0], ring ? "over the ring" : "over the star");
        job_fini(&j);
    }
}

/* ---- hand-made ranks ------------------------------------------------------ */

typedef enum hand_mode {
    HAND_DIE,      /* connect to the next rank, send our block, exit */
    HAND_HANG,     /* the same, then stop answering (sleep until killed) */
    HAND_STRANGER, /* first knock on the next rank's listener as strangers
                    * would (silent, a wrong token, garbage), then take part
                    * honestly */
} hand_mode_t;

/* Exit codes of a hand-made rank that could not do its part: the test
 * reads them as "the harness failed", never as a result. */
enum { X_IO = 10, X_PROTO = 11, X_AUTH = 12 };

static int send_full(int fd, const void *b, size_t n)
{
    size_t d = 0;
    while (d < n) {
        ssize_t r = send(fd, (const uint8_t *)b + d, n - d, MSG_NOSIGNAL);
        if (r <= 0)
            return -1;
        d += (size_t)r;
    }
    return 0;
}

static void must(int ok, int code)
{
    if (!ok)
        _exit(code);
}

static void set_blocking(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    must(fl >= 0 && fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == 0, X_IO);
}

/* The next message from rank 0 that is not a GATHER_START. */
static void from_root(int fd, uint8_t *m, gw_bs_hdr_t *h)
{
    for (;;) {
        must(read_full(fd, m, GW_BS_HDR_LEN) == 0, X_IO);
        must(gw__bs_decode_hdr(m, GW_BS_HDR_LEN, h, NULL) == GW_OK, X_PROTO);
        must(h->payload_len <= GW_BS_SMALL_MSG_MAX - GW_BS_HDR_LEN, X_PROTO);
        must(read_full(fd, m + GW_BS_HDR_LEN, h->payload_len) == 0, X_IO);
        if (h->type != GW_BS_GATHER_START)
            return;
    }
}

static void nonce(uint8_t n[GW_BS_NONCE_LEN], int salt)
{
    for (int i = 0; i < (int)GW_BS_NONCE_LEN; i++)
        n[i] = (uint8_t)(getpid() * 7 + salt * 13 + i);
}

/* Dial the ring listener at a and make the handshake as `rank` with key.
 * check: verify the listener's proof (a stranger cannot). Returns the
 * connection. */
static int ring_dial(const struct sockaddr_storage *a, socklen_t al, const uint8_t *key,
                     size_t key_len, int rank, int size, int check, int salt)
{
    int fd = socket(a->ss_family, SOCK_STREAM, 0);
    must(fd >= 0 && connect(fd, (const struct sockaddr *)a, al) == 0, X_IO);
    gw_bs_hello_t h = {.rank = rank, .size = size};
    nonce(h.client_nonce, salt);
    uint8_t m[GW_BS_CHALLENGE_LEN];
    gw__bs_encode_hello(&h, m);
    must(send_full(fd, m, GW_BS_HELLO_LEN) == 0, X_IO);
    must(read_full(fd, m, GW_BS_CHALLENGE_LEN) == 0, X_IO);
    gw_bs_challenge_t ch;
    must(gw__bs_decode_challenge(m, GW_BS_CHALLENGE_LEN, &ch, NULL) == GW_OK, X_PROTO);
    uint8_t proof[GW_BS_PROOF_LEN];
    if (check) {
        gw__bs_root_proof(key, key_len, h.client_nonce, ch.server_nonce, proof);
        must(memcmp(proof, ch.root_proof, sizeof(proof)) == 0, X_AUTH);
    }
    gw__bs_rank_proof(key, key_len, ch.server_nonce, h.client_nonce, (uint32_t)rank, proof);
    gw__bs_encode_response(proof, m);
    must(send_full(fd, m, GW_BS_RESPONSE_LEN) == 0, X_IO);
    return fd;
}

/* 1 when the peer closes fd within 5 s (after a REJECT or not). */
static int closed_on_us(int fd)
{
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    uint8_t b[512];
    ssize_t r;
    while ((r = read(fd, b, sizeof(b))) > 0)
        ;
    return r == 0 || errno == ECONNRESET;
}

/* Accept the previous rank on lfd and check its proof. */
static int ring_accept(int lfd, const uint8_t *key, size_t key_len, int prev, int size)
{
    int fd = accept(lfd, NULL, NULL);
    must(fd >= 0, X_IO);
    uint8_t m[GW_BS_CHALLENGE_LEN];
    must(read_full(fd, m, GW_BS_HELLO_LEN) == 0, X_IO);
    gw_bs_hello_t h;
    must(gw__bs_decode_hello(m, GW_BS_HELLO_LEN, &h, NULL) == GW_OK, X_PROTO);
    must(h.rank == prev && h.size == size, X_PROTO);
    gw_bs_challenge_t ch;
    nonce(ch.server_nonce, 99);
    gw__bs_root_proof(key, key_len, h.client_nonce, ch.server_nonce, ch.root_proof);
    gw__bs_encode_challenge(&ch, m);
    must(send_full(fd, m, GW_BS_CHALLENGE_LEN) == 0, X_IO);
    must(read_full(fd, m, GW_BS_RESPONSE_LEN) == 0, X_IO);
    uint8_t got[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    must(gw__bs_decode_response(m, GW_BS_RESPONSE_LEN, got, NULL) == GW_OK, X_PROTO);
    gw__bs_rank_proof(key, key_len, ch.server_nonce, h.client_nonce, (uint32_t)prev, want);
    must(memcmp(got, want, sizeof(want)) == 0, X_AUTH);
    return fd;
}

static void send_block(int fd, const uint8_t *b, size_t len)
{
    uint8_t p[GW_BS_DATA_PREFIX_LEN];
    gw__bs_encode_data_prefix((uint32_t)len, p);
    must(send_full(fd, p, sizeof(p)) == 0 && send_full(fd, b, len) == 0, X_IO);
}

/* The body of a hand-made rank: it joins through the library, then speaks
 * the all-gather's protocol itself. result.gather_ok: every block right
 * (HAND_STRANGER); result.local_st: how many stranger connections the next
 * rank closed on us (of 3). Never returns. */
static void run_hand(const job_t *j, int slot, int rank, int size, size_t len, hand_mode_t mode)
{
    result_t *res = &j->res[slot];
    gw_logger_t lg;
    gw__logger_init(&lg, rank);
    lg.level = GW_LOG_NONE;
    gw_bootstrap_params_t p = {.rank = rank,
                               .size = size,
                               .root = j->root,
                               .token = "tok",
                               .timeout_ms = 20000,
                               .log = &lg,
                               .ring_min = 2};
    gw_bootstrap_t *bs = NULL;
    res->open_st = gw__bootstrap_open(&p, &bs);
    must(res->open_st == GW_OK, X_IO);
    int root = bs->root_fd;
    set_blocking(root);
    uint8_t *all = calloc((size_t)size, len);
    for (size_t i = 0; i < len; i++)
        all[(size_t)rank * len + i] = pattern(rank, i, len);
    send_block(root, all + (size_t)rank * len, len);
    uint8_t m[GW_BS_SMALL_MSG_MAX];
    gw_bs_hdr_t h;
    from_root(root, m, &h);
    must(h.type == GW_BS_RING_OPEN, X_PROTO);
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t ll = sizeof(la);
    must(lfd >= 0 && bind(lfd, (struct sockaddr *)&la, sizeof(la)) == 0 && listen(lfd, 8) == 0 &&
             getsockname(lfd, (struct sockaddr *)&la, &ll) == 0,
         X_IO);
    uint8_t port[4] = {0, 0, (uint8_t)(ntohs(la.sin_port) >> 8), (uint8_t)ntohs(la.sin_port)};
    send_block(root, port, sizeof(port));
    from_root(root, m, &h);
    must(h.type == GW_BS_RING_PEER, X_PROTO);
    uint8_t wire[GW_BS_RING_ADDR_LEN];
    must(gw__bs_decode_ring_peer(m, GW_BS_RING_PEER_LEN, wire, NULL) == GW_OK, X_PROTO);
    struct sockaddr_storage next;
    socklen_t nl;
    must(gw__sock_addr_get(wire, &next, &nl) == GW_OK, X_PROTO);
    const uint8_t *key = bs->ring_key;
    size_t kl = sizeof(bs->ring_key);
    int next_rank = (rank + 1) % size, prev = (rank + size - 1) % size;

    int silent = -1;
    if (mode == HAND_STRANGER) {
        /* A port scanner: connects and says nothing, holding a slot. */
        silent = socket(AF_INET, SOCK_STREAM, 0);
        must(silent >= 0 && connect(silent, (struct sockaddr *)&next, nl) == 0, X_IO);
        /* A process with another token: it cannot check the listener's
         * proof, and its own is refused. */
        static const char wrong[] = "not the token";
        int fd = ring_dial(&next, nl, (const uint8_t *)wrong, strlen(wrong), rank, size, 0, 1);
        res->local_st += closed_on_us(fd);
        close(fd);
        /* Garbage: an HTTP request, as long as a HELLO. */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        must(fd >= 0 && connect(fd, (struct sockaddr *)&next, nl) == 0, X_IO);
        static const char junk[] =
            "GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: yy\r\n";
        must(send_full(fd, junk, GW_BS_HELLO_LEN) == 0, X_IO);
        res->local_st += closed_on_us(fd);
        close(fd);
    }
    int out = ring_dial(&next, nl, key, kl, rank, size, 1, 2);
    send_block(out, all + (size_t)rank * len, len);
    if (mode == HAND_DIE) {
        res->done = 1;
        _exit(0); /* killed in the ring: every connection closes with us */
    }
    if (mode == HAND_HANG) {
        res->done = 1;
        for (;;)
            pause(); /* stopped: connections open, nothing said */
    }
    int in = ring_accept(lfd, key, kl, prev, size);
    close(lfd);
    for (int s = 0; s < size - 1; s++) {
        int b = ((rank - 1 - s) % size + size) % size;
        uint8_t pre[GW_BS_DATA_PREFIX_LEN];
        uint32_t dl = 0;
        must(read_full(in, pre, sizeof(pre)) == 0 && read_full(in, all + (size_t)b * len, len) == 0,
             X_IO);
        must(gw__bs_decode_data_prefix(pre, sizeof(pre), &dl, NULL) == GW_OK && dl == len, X_PROTO);
        if (s < size - 2)
            send_block(out, all + (size_t)b * len, len);
    }
    gw_bs_report_t rep = {
        .kind = GW_BS_REPORT_STATE, .culprit = -1, .origin = -1, .waiting_on = -1};
    size_t rl = gw__bs_encode_report(&rep, m);
    must(send_full(root, m, rl) == 0, X_IO);
    from_root(root, m, &h);
    must(h.type == GW_BS_DATA && h.payload_len == 4, X_PROTO); /* go */
    int ok = 1;
    for (int r = 0; ok && r < size; r++)
        for (size_t i = 0; ok && i < len; i++)
            ok = all[(size_t)r * len + i] == pattern(r, i, len);
    res->gather_ok[0] = ok;
    (void)next_rank;
    if (silent >= 0)
        res->local_st += closed_on_us(silent); /* dropped once we were in */
    close(in);
    close(out);
    gw__bootstrap_close(bs);
    res->done = 1;
    _exit(0);
}

static int spawn_hand(job_t *j, int rank, int size, size_t len, hand_mode_t mode)
{
    int slot = j->nslots++;
    cr_assert_lt(slot, MAX_SLOTS);
    memset(&j->res[slot], 0, sizeof(result_t));
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        run_hand(j, slot, rank, size, len, mode);
    j->pids[slot] = pid;
    return slot;
}

/* n ranks with ring_min 2, rank `victim` hand-made in `mode`; the others'
 * slots in slots[] (slots[victim] is the victim's). */
static void ring_job(job_t *j, int n, int victim, hand_mode_t mode, int timeout_ms, int *slots)
{
    job_init(j);
    for (int r = 0; r < n; r++) {
        if (r == victim) {
            slots[r] = spawn_hand(j, r, n, 128, mode);
            continue;
        }
        spec_t s = rank_spec(r, n, "tok", timeout_ms);
        s.ring_min = 2;
        slots[r] = spawn(j, &s);
    }
}

/* Every rank but the victim fails the all-gather naming it, within the
 * timeout (plus rank 0's grace and its margin when it hangs). */
static void assert_named(const job_t *j, int n, int victim, const int *slots, long long within_ms)
{
    char who[32];
    snprintf(who, sizeof(who), "rank %d", victim);
    for (int r = 0; r < n; r++) {
        if (r == victim)
            continue;
        const result_t *res = &j->res[slots[r]];
        cr_assert_eq(res->open_st, GW_OK);
        cr_assert_neq(res->gather_st[0], GW_OK, "rank %d: the all-gather succeeded", r);
        cr_assert_eq(res->gather_culprit[0], victim, "rank %d blames rank %d, not rank %d (%s)", r,
                     res->gather_culprit[0], victim,
                     gw_status_name((gw_status_t)res->gather_st[0]));
        cr_assert_lt(res->gather_ms[0], within_ms, "rank %d took %lld ms", r, res->gather_ms[0]);
        assert_log(j, slots[r], who);
    }
}

Test(bootstrap_ring, a_rank_killed_in_the_ring_is_named_by_every_other_rank, .timeout = 60)
{
    static const int sizes[] = {3, 6};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int n = sizes[i], victim = n - 2, slots[MAX_SLOTS];
        job_t j;
        ring_job(&j, n, victim, HAND_DIE, 8000, slots);
        wait_all(&j, 20000);
        /* Its death is seen at once: well within the timeout. */
        assert_named(&j, n, victim, slots, 8000);
        job_fini(&j);
    }
}

Test(bootstrap_ring, a_rank_hung_in_the_ring_is_named_by_every_other_rank, .timeout = 60)
{
    int n = 5, victim = 2, slots[MAX_SLOTS];
    int timeout = 2000;
    job_t j;
    ring_job(&j, n, victim, HAND_HANG, timeout, slots);
    for (int r = 0; r < n; r++)
        if (r != victim)
            wait_slot(&j, slots[r], 20000);
    kill(j.pids[slots[victim]], SIGKILL);
    waitpid(j.pids[slots[victim]], NULL, 0);
    j.pids[slots[victim]] = 0;
    /* The ring's timeout, rank 0's grace (500 ms at this timeout) and
     * margins: well under twice the timeout. */
    assert_named(&j, n, victim, slots, 2 * timeout);
    for (int r = 0; r < n; r++)
        if (r != victim)
            cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_TIMEOUT, "rank %d got %s", r,
                         gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
    job_fini(&j);
}

Test(bootstrap_ring, strangers_on_a_ring_listener_are_dropped_and_the_job_goes_on, .timeout = 60)
{
    int n = 4, hand = 1, slots[MAX_SLOTS];
    job_t j;
    ring_job(&j, n, hand, HAND_STRANGER, 10000, slots);
    wait_all(&j, 20000);
    for (int r = 0; r < n; r++)
        if (r != hand)
            assert_completed(&j, slots[r], 1);
    cr_assert(j.res[slots[hand]].gather_ok[0], "the hand-made rank got wrong blocks");
    cr_assert_eq(j.res[slots[hand]].local_st, 3, "the next rank kept %d stranger(s)",
                 3 - j.res[slots[hand]].local_st);
    /* The rank whose listener they knocked on says so. */
    assert_log(&j, slots[hand + 1], "its proof does not match the job token");
    assert_log(&j, slots[hand + 1], "malformed hello");
    assert_log(&j, slots[hand + 1], "the neighbour is in already");
    job_fini(&j);
}

/* ---- GW_BOOTSTRAP_RING_MIN ---------------------------------------------- */

static gw_status_t resolve_with(const char *value, gw_comm_resolved_t *r, char *log, size_t cap)
{
    if (value)
        setenv("GW_BOOTSTRAP_RING_MIN", value, 1);
    else
        unsetenv("GW_BOOTSTRAP_RING_MIN");
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    FILE *f = tmpfile();
    cr_assert_not_null(f);
    lg.file = f;
    lg.level = GW_LOG_WARN;
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 2;
    cfg.root = "127.0.0.1:1";
    gw_status_t st = gw__comm_resolve(&cfg, &lg, r);
    fflush(f);
    rewind(f);
    size_t k = fread(log, 1, cap - 1, f);
    log[k] = '\0';
    fclose(f);
    return st;
}

Test(bootstrap_ring, ring_min_is_parsed_strictly, .timeout = 10)
{
    gw_comm_resolved_t r;
    char log[4096];
    cr_assert_eq(resolve_with(NULL, &r, log, sizeof(log)), GW_OK);
    cr_assert_eq(r.ring_min, GW_BOOTSTRAP_RING_MIN_DEFAULT);
    cr_assert_eq(GW_BOOTSTRAP_RING_MIN_DEFAULT, 256);
    cr_assert_eq(resolve_with("2", &r, log, sizeof(log)), GW_OK);
    cr_assert_eq(r.ring_min, 2);
    cr_assert_eq(resolve_with("4096", &r, log, sizeof(log)), GW_OK);
    cr_assert_eq(r.ring_min, 4096);
    static const char *const bad[] = {"",   "abc", "1",    "0",  "-3",         " 8",
                                      "8 ", "64k", "0x40", "+8", "99999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_assert_eq(resolve_with(bad[i], &r, log, sizeof(log)), GW_ERR_CONFIG,
                     "GW_BOOTSTRAP_RING_MIN=\"%s\" accepted", bad[i]);
        cr_assert(strstr(log, "GW_BOOTSTRAP_RING_MIN") != NULL,
                  "the error for \"%s\" does not name the variable: %s", bad[i], log);
    }
}

/* Rank 2 of 4 runs out of file descriptors: enough for its root connection,
 * its ring listener and its dial to rank 3, none for accepting rank 1.
 * It must fail at once naming the limit, and every rank must name it, long
 * before the 10 s timeout (the listener stays readable while the
 * connection waits in its queue: waiting would spin until the deadline). */
Test(bootstrap_ring, a_rank_out_of_descriptors_fails_at_once_naming_itself, .timeout = 60)
{
    int n = 4, victim = 2, slots[MAX_SLOTS];
    job_t j;
    job_init(&j);
    for (int r = 0; r < n; r++) {
        spec_t s = rank_spec(r, n, "tok", 10000);
        s.ring_min = 2;
        s.ngathers = 1;
        s.lens[0] = 64;
        if (r == victim)
            s.nofile_spare = RING_SPARE_FDS;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 30000);
    assert_log(&j, slots[victim], "accepting rank 1's ring connection: Too many open files");
    cr_assert_neq(j.res[slots[victim]].gather_st[0], GW_OK);
    cr_assert_lt(j.res[slots[victim]].gather_ms[0], 5000, "rank 2 took %lld ms",
                 j.res[slots[victim]].gather_ms[0]);
    assert_named(&j, n, victim, slots, 5000);
    job_fini(&j);
}
