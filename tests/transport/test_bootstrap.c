/* test_bootstrap.c - the bootstrap between real processes on 127.0.0.1:
 * joins of 1 to 8 ranks, all-gathers, and every way a join or an all-gather
 * can go wrong (wrong token, strangers, duplicates, size mismatch, no root,
 * dead ranks), each of which must end in an error or a completed job, never
 * a hang. Ranks are forked children that report through shared memory and
 * log to files that the tests read. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/bootstrap.h"
#include "transport/bootstrap_msg.h"

#define MAX_SLOTS 16
#define MAX_GATHERS 3

typedef struct spec {
    int rank, size, timeout_ms;
    const char *token;
    const char *root; /* NULL: the job's 127.0.0.1 root */
    int ngathers;
    size_t lens[MAX_GATHERS];
    int die_after_open; /* exit right after joining, before any all-gather */
} spec_t;

typedef struct result {
    int done;
    int open_st;
    int gather_st[MAX_GATHERS];
    int gather_ok[MAX_GATHERS];
    uint8_t job_id[GW_BS_JOB_ID_LEN];
    int local_st;
    int local_family;
    char local_text[96];
    long long elapsed_ms;
} result_t;

typedef struct job {
    int port;
    char root[64];
    char dir[64];
    result_t *res; /* MAX_SLOTS, shared with the children */
    pid_t pids[MAX_SLOTS];
    int nslots;
} job_t;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t l = sizeof(a);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &l), 0);
    close(fd);
    return ntohs(a.sin_port);
}

static void job_init(job_t *j)
{
    memset(j, 0, sizeof(*j));
    j->port = free_port();
    snprintf(j->root, sizeof(j->root), "127.0.0.1:%d", j->port);
    snprintf(j->dir, sizeof(j->dir), "/tmp/gw-bs-test-XXXXXX");
    cr_assert_not_null(mkdtemp(j->dir));
    j->res = mmap(NULL, MAX_SLOTS * sizeof(result_t), PROT_READ | PROT_WRITE,
                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(j->res, MAP_FAILED);
}

static void log_path(const job_t *j, int slot, char *out, size_t cap)
{
    snprintf(out, cap, "%s/slot%d.log", j->dir, slot);
}

/* Remove the logs of a passed test (a failed one keeps them for a look). */
static void job_fini(job_t *j)
{
    for (int i = 0; i < j->nslots; i++) {
        char path[128];
        log_path(j, i, path, sizeof(path));
        unlink(path);
    }
    rmdir(j->dir);
    munmap(j->res, MAX_SLOTS * sizeof(result_t));
}

static uint8_t pattern(int rank, size_t i, size_t len)
{
    return (uint8_t)(rank * 31 + i * 7 + len + 1);
}

static void fmt_sockaddr(const struct sockaddr_storage *ss, socklen_t len, char *out, size_t cap)
{
    char host[64], serv[16];
    if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, cap, "?");
    else
        snprintf(out, cap, "%s", host);
}

/* The body of a rank process. Never returns. */
static void run_rank(const job_t *j, const spec_t *s, int slot)
{
    result_t *res = &j->res[slot];
    gw_logger_t lg;
    gw__logger_init(&lg, s->rank);
    char path[128];
    log_path(j, slot, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) {
        setvbuf(f, NULL, _IOLBF, 0);
        lg.file = f;
        lg.owns_file = 1;
    }
    lg.level = GW_LOG_INFO;
    gw_bootstrap_params_t p = {
        .rank = s->rank,
        .size = s->size,
        .root = s->root ? s->root : j->root,
        .token = s->token,
        .timeout_ms = s->timeout_ms,
        .log = &lg,
    };
    gw_bootstrap_t *bs = NULL;
    int64_t t0 = gw__now_ms();
    res->open_st = gw__bootstrap_open(&p, &bs);
    res->elapsed_ms = (long long)(gw__now_ms() - t0);
    if (res->open_st == GW_OK) {
        gw__bootstrap_job_id(bs, res->job_id);
        struct sockaddr_storage ss;
        socklen_t sl = 0;
        res->local_st = gw__bootstrap_local_addr(bs, &ss, &sl);
        if (res->local_st == GW_OK) {
            res->local_family = ss.ss_family;
            fmt_sockaddr(&ss, sl, res->local_text, sizeof(res->local_text));
        }
        if (s->die_after_open) {
            res->done = 1;
            _exit(0); /* no goodbye: the connection closes with the process */
        }
        for (int g = 0; g < s->ngathers; g++) {
            size_t len = s->lens[g];
            uint8_t *mine = malloc(len + 1), *all = malloc((size_t)s->size * len + 1);
            for (size_t i = 0; i < len; i++)
                mine[i] = pattern(s->rank, i, len);
            res->gather_st[g] = gw__bootstrap_allgather(bs, mine, len, all);
            int ok = res->gather_st[g] == GW_OK;
            for (int r = 0; ok && r < s->size; r++)
                for (size_t i = 0; ok && i < len; i++)
                    ok = all[(size_t)r * len + i] == pattern(r, i, len);
            res->gather_ok[g] = ok;
            free(mine);
            free(all);
        }
        gw__bootstrap_close(bs);
    }
    gw__logger_fini(&lg);
    res->done = 1;
    _exit(0);
}

static int spawn(job_t *j, const spec_t *s)
{
    int slot = j->nslots++;
    cr_assert_lt(slot, MAX_SLOTS);
    memset(&j->res[slot], 0, sizeof(result_t));
    j->res[slot].open_st = -1;
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        run_rank(j, s, slot);
    j->pids[slot] = pid;
    return slot;
}

static spec_t rank_spec(int rank, int size, const char *token, int timeout_ms)
{
    spec_t s;
    memset(&s, 0, sizeof(s));
    s.rank = rank;
    s.size = size;
    s.token = token;
    s.timeout_ms = timeout_ms;
    s.ngathers = 1;
    s.lens[0] = 128;
    return s;
}

/* Wait for one slot's process; a process still running after timeout_ms is
 * a hang: kill everything and fail. */
static void wait_slot(job_t *j, int slot, int timeout_ms)
{
    int64_t deadline = gw__now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(j->pids[slot], &st, WNOHANG);
        if (r == j->pids[slot]) {
            j->pids[slot] = 0;
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
                      "rank process of slot %d crashed (status 0x%x)", slot, st);
            cr_assert(j->res[slot].done, "slot %d did not finish", slot);
            return;
        }
        if (gw__now_ms() > deadline) {
            for (int i = 0; i < j->nslots; i++)
                if (j->pids[i] > 0)
                    kill(j->pids[i], SIGKILL);
            cr_assert_fail("slot %d hangs after %d ms", slot, timeout_ms);
        }
        usleep(2000);
    }
}

static void wait_all(job_t *j, int timeout_ms)
{
    for (int i = 0; i < j->nslots; i++)
        if (j->pids[i] > 0)
            wait_slot(j, i, timeout_ms);
}

static int slurp_contains(const job_t *j, int slot, const char *needle)
{
    char path[128];
    log_path(j, slot, path, sizeof(path));
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

static void assert_log(const job_t *j, int slot, const char *needle)
{
    cr_assert(slurp_contains(j, slot, needle), "log of slot %d lacks \"%s\"", slot, needle);
}

static void assert_completed(const job_t *j, int slot, int ngathers)
{
    const result_t *r = &j->res[slot];
    cr_assert_eq(r->open_st, GW_OK, "slot %d: open gave %s", slot,
                 gw_status_name((gw_status_t)r->open_st));
    for (int g = 0; g < ngathers; g++) {
        cr_assert_eq(r->gather_st[g], GW_OK, "slot %d: all-gather %d gave %s", slot, g,
                     gw_status_name((gw_status_t)r->gather_st[g]));
        cr_assert(r->gather_ok[g], "slot %d: all-gather %d returned wrong data", slot, g);
    }
}

static void assert_same_job_id(const job_t *j, const int *slots, int n)
{
    static const uint8_t zero[GW_BS_JOB_ID_LEN];
    cr_assert(memcmp(j->res[slots[0]].job_id, zero, sizeof(zero)) != 0, "job id is zero");
    for (int i = 1; i < n; i++)
        cr_assert_arr_eq(j->res[slots[i]].job_id, j->res[slots[0]].job_id, GW_BS_JOB_ID_LEN,
                         "slot %d has another job id", slots[i]);
}

/* ---- a hand-made peer speaking the protocol from the test process ---- */

static int connect_retry(int port, int timeout_ms)
{
    int64_t deadline = gw__now_ms() + timeout_ms;
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(fd, 0);
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
            struct timeval tv = {.tv_sec = 10};
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            return fd;
        }
        close(fd);
        cr_assert(gw__now_ms() < deadline, "cannot connect to the root on port %d", port);
        usleep(5000);
    }
}

/* Returns once rank 0 accepts connections (the probe is dropped by it as a
 * connection that closed during the handshake). */
static void wait_listening(int port)
{
    close(connect_retry(port, 5000));
}

static int read_full(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, (uint8_t *)buf + got, len - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* Wait until the root closes our connection; returns the ms it took. */
static long long wait_closed(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int64_t t0 = gw__now_ms();
    char b[64];
    ssize_t r;
    while ((r = read(fd, b, sizeof(b))) > 0)
        ;
    cr_assert(r == 0 || errno == ECONNRESET, "the root did not close the connection (%s)",
              r < 0 ? strerror(errno) : "data");
    return (long long)(gw__now_ms() - t0);
}

/* HELLO, CHALLENGE, RESPONSE with the proof for `token` (or a forged one),
 * and the root's answer to it: the status of its REJECT. */
static gw_status_t fake_rank(int fd, const char *token, int rank, int size, int forge,
                             gw_bs_reject_t *rej)
{
    gw_bs_hello_t hello = {.rank = rank, .size = size};
    memset(hello.client_nonce, 0x42, sizeof(hello.client_nonce));
    uint8_t m[GW_BS_SMALL_MSG_MAX];
    gw__bs_encode_hello(&hello, m);
    cr_assert_eq(write(fd, m, GW_BS_HELLO_LEN), (ssize_t)GW_BS_HELLO_LEN);
    cr_assert_eq(read_full(fd, m, GW_BS_CHALLENGE_LEN), 0, "no challenge");
    gw_bs_challenge_t ch;
    cr_assert_eq(gw__bs_decode_challenge(m, GW_BS_CHALLENGE_LEN, &ch, NULL), GW_OK);
    uint8_t proof[GW_BS_PROOF_LEN], want[GW_BS_PROOF_LEN];
    gw__bs_root_proof(token, strlen(token), hello.client_nonce, ch.server_nonce, want);
    cr_assert_arr_eq(want, ch.root_proof, sizeof(want), "the root's proof is wrong");
    gw__bs_rank_proof(token, strlen(token), ch.server_nonce, hello.client_nonce, (uint32_t)rank,
                      proof);
    if (forge)
        proof[0] ^= 1;
    gw__bs_encode_response(proof, m);
    cr_assert_eq(write(fd, m, GW_BS_RESPONSE_LEN), (ssize_t)GW_BS_RESPONSE_LEN);
    cr_assert_eq(read_full(fd, m, GW_BS_HDR_LEN), 0, "no answer to the response");
    gw_bs_hdr_t h;
    cr_assert_eq(gw__bs_decode_hdr(m, GW_BS_HDR_LEN, &h, NULL), GW_OK);
    cr_assert_eq(h.type, GW_BS_REJECT, "expected a reject, got %s", gw__bs_type_name(h.type));
    cr_assert_eq(read_full(fd, m + GW_BS_HDR_LEN, h.payload_len), 0);
    cr_assert_eq(gw__bs_decode_reject(m, GW_BS_HDR_LEN + h.payload_len, rej, NULL), GW_OK);
    return rej->status;
}

/* ---- tests --------------------------------------------------------------- */

Test(bootstrap, one_rank_needs_no_network, .timeout = 10)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    gw_bootstrap_params_t p = {.rank = 0, .size = 1, .root = NULL, .timeout_ms = 100, .log = &lg};
    gw_bootstrap_t *bs = NULL;
    cr_assert_eq(gw__bootstrap_open(&p, &bs), GW_OK);
    uint8_t mine[5] = {1, 2, 3, 4, 5}, all[5] = {0};
    cr_assert_eq(gw__bootstrap_allgather(bs, mine, sizeof(mine), all), GW_OK);
    cr_assert_arr_eq(all, mine, sizeof(mine));
    cr_assert_eq(gw__bootstrap_allgather(bs, all, sizeof(all), all), GW_OK); /* in place */
    cr_assert_arr_eq(all, mine, sizeof(mine));
    struct sockaddr_storage ss;
    socklen_t sl;
    cr_assert_eq(gw__bootstrap_local_addr(bs, &ss, &sl), GW_ERR_NOT_FOUND);
    uint8_t id[16], zero[16] = {0};
    gw__bootstrap_job_id(bs, id);
    cr_assert(memcmp(id, zero, sizeof(id)) != 0);
    gw__bootstrap_close(bs);
    gw__bootstrap_close(NULL);
}

Test(bootstrap, bad_parameters, .timeout = 10)
{
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    gw_bootstrap_t *bs = NULL;
    gw_bootstrap_params_t p = {.rank = 0, .size = 2, .root = "127.0.0.1:1", .timeout_ms = 100,
                               .log = &lg};
    cr_assert_eq(gw__bootstrap_open(NULL, &bs), GW_ERR_INVALID_ARG);
    cr_assert_eq(gw__bootstrap_open(&p, NULL), GW_ERR_INVALID_ARG);
    gw_bootstrap_params_t q = p;
    q.rank = 2;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.rank = -1;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.size = 0;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    q = p;
    q.timeout_ms = 0;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    static const char *const bad_roots[] = {"nonsense", "host:", ":80", "host:0", "host:65536",
                                            "[::1]80", NULL};
    for (int i = 0; bad_roots[i]; i++) {
        q = p;
        q.root = bad_roots[i];
        cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG, "root \"%s\" accepted",
                     bad_roots[i]);
    }
    q = p;
    q.root = NULL;
    cr_assert_eq(gw__bootstrap_open(&q, &bs), GW_ERR_CONFIG);
    cr_assert_null(bs, "output written on failure");
    cr_assert_eq(gw__bootstrap_allgather(NULL, NULL, 0, NULL), GW_ERR_INVALID_ARG);
}

static void join_n(int n, const char *host)
{
    job_t j;
    job_init(&j);
    char root[64];
    if (strchr(host, ':'))
        snprintf(root, sizeof(root), "[%s]:%d", host, j.port);
    else
        snprintf(root, sizeof(root), "%s:%d", host, j.port);
    int slots[MAX_SLOTS];
    /* Start the root last, so the others go through connect retries. */
    for (int r = n - 1; r >= 0; r--) {
        spec_t s = rank_spec(r, n, "job-token", 10000);
        s.root = root;
        /* Transport-address sized, empty, and large enough to take several
         * partial reads and writes. */
        s.ngathers = 3;
        s.lens[0] = 128;
        s.lens[1] = 0;
        s.lens[2] = 200000;
        slots[r] = spawn(&j, &s);
        if (r == n - 1 && n > 1)
            usleep(30000);
    }
    wait_all(&j, 20000);
    for (int r = 0; r < n; r++) {
        assert_completed(&j, slots[r], 3);
        if (n > 1) {
            cr_assert_eq(j.res[slots[r]].local_st, GW_OK);
            cr_assert_str_eq(j.res[slots[r]].local_text, host, "rank %d local address %s", r,
                             j.res[slots[r]].local_text);
        }
    }
    assert_same_job_id(&j, slots, n);
    job_fini(&j);
}

Test(bootstrap, join_and_allgather_1, .timeout = 30) { join_n(1, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_2, .timeout = 30) { join_n(2, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_4, .timeout = 30) { join_n(4, "127.0.0.1"); }
Test(bootstrap, join_and_allgather_8, .timeout = 40) { join_n(8, "127.0.0.1"); }

Test(bootstrap, join_over_ipv6, .timeout = 30)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    if (!ok)
        cr_skip_test("no IPv6 loopback on this host");
    join_n(3, "::1");
}

Test(bootstrap, wrong_token_is_rejected_and_the_job_goes_on, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "right", 10000);
    int root = spawn(&j, &s0);
    spec_t bad = rank_spec(1, 2, "wrong", 5000);
    int b = spawn(&j, &bad);
    wait_slot(&j, b, 10000);
    cr_assert_eq(j.res[b].open_st, GW_ERR_AUTH, "wrong token gave %s",
                 gw_status_name((gw_status_t)j.res[b].open_st));
    assert_log(&j, b, "does not match this rank's job token");
    spec_t good = rank_spec(1, 2, "right", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    assert_log(&j, root, "wrong job token");
    assert_log(&j, root, "dropped connection from 127.0.0.1:");
    job_fini(&j);
}

Test(bootstrap, forged_proof_gets_reject_auth, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 10000);
    int root = spawn(&j, &s0);
    /* A peer that verifies the root but then sends a wrong proof. */
    int fd = connect_retry(j.port, 5000);
    gw_bs_reject_t rej;
    cr_assert_eq(fake_rank(fd, "tok", 1, 2, 1, &rej), GW_ERR_AUTH, "reason: %s", rej.reason);
    wait_closed(fd, 5000);
    close(fd);
    /* An authenticated peer claiming a rank outside the job. */
    fd = connect_retry(j.port, 5000);
    cr_assert_eq(fake_rank(fd, "tok", 5, 2, 0, &rej), GW_ERR_CONFIG);
    cr_assert(strstr(rej.reason, "rank 5") != NULL, "reason: %s", rej.reason);
    close(fd);
    spec_t good = rank_spec(1, 2, "tok", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    assert_log(&j, root, "wrong job token");
    job_fini(&j);
}

Test(bootstrap, strangers_do_not_stop_the_job, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 10000);
    int root = spawn(&j, &s0);

    int garbage = connect_retry(j.port, 5000);
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    cr_assert_eq(write(garbage, http, strlen(http)), (ssize_t)strlen(http));
    wait_closed(garbage, 5000); /* dropped for its bad magic */
    close(garbage);

    int silent = connect_retry(j.port, 5000); /* sends nothing; stays open */

    int half = connect_retry(j.port, 5000);
    gw_bs_hello_t hello = {.rank = 1, .size = 3};
    memset(hello.client_nonce, 0, sizeof(hello.client_nonce));
    uint8_t m[GW_BS_HELLO_LEN];
    gw__bs_encode_hello(&hello, m);
    cr_assert_eq(write(half, m, 20), 20);
    shutdown(half, SHUT_WR); /* closes half way through the hello */
    wait_closed(half, 5000);
    close(half);

    int empty = connect_retry(j.port, 5000); /* connects and leaves at once */
    close(empty);

    spec_t s1 = rank_spec(1, 3, "tok", 10000), s2 = rank_spec(2, 3, "tok", 10000);
    int a = spawn(&j, &s1), b = spawn(&j, &s2);
    wait_all(&j, 15000);
    close(silent);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_completed(&j, b, 1);
    int slots[] = {root, a, b};
    assert_same_job_id(&j, slots, 3);
    assert_log(&j, root, "bad magic");
    assert_log(&j, root, "closed during the handshake");
    job_fini(&j);
}

Test(bootstrap, silent_connection_dropped_after_handshake_timeout, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 6000); /* handshake limit: 3000 ms */
    int root = spawn(&j, &s0);
    int silent = connect_retry(j.port, 5000);
    long long waited = wait_closed(silent, 5500);
    close(silent);
    cr_assert_geq(waited, 2000, "dropped after %lld ms, before its handshake deadline", waited);
    spec_t s1 = rank_spec(1, 2, "tok", 5000);
    int a = spawn(&j, &s1);
    wait_all(&j, 10000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_log(&j, root, "no complete handshake within 3000 ms");
    job_fini(&j);
}

Test(bootstrap, no_root_times_out, .timeout = 15)
{
    job_t j;
    job_init(&j);
    spec_t s = rank_spec(1, 2, "tok", 500);
    int a = spawn(&j, &s);
    wait_all(&j, 5000);
    cr_assert_eq(j.res[a].open_st, GW_ERR_TIMEOUT, "got %s",
                 gw_status_name((gw_status_t)j.res[a].open_st));
    cr_assert_geq(j.res[a].elapsed_ms, 450, "gave up after %lld ms", j.res[a].elapsed_ms);
    cr_assert_lt(j.res[a].elapsed_ms, 3000, "took %lld ms", j.res[a].elapsed_ms);
    assert_log(&j, a, j.root);
    assert_log(&j, a, "could not connect to the root");
    job_fini(&j);
}

Test(bootstrap, duplicate_rank_is_rejected, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, NULL, 10000);
    int root = spawn(&j, &s0);
    spec_t s1 = rank_spec(1, 3, NULL, 10000);
    int a = spawn(&j, &s1), b = spawn(&j, &s1);
    /* Whichever rank 1 comes second is refused at once; the first waits. */
    int first = -1;
    int64_t deadline = gw__now_ms() + 10000;
    while (first < 0 && gw__now_ms() < deadline) {
        if (waitpid(j.pids[a], NULL, WNOHANG) == j.pids[a])
            first = a;
        else if (waitpid(j.pids[b], NULL, WNOHANG) == j.pids[b])
            first = b;
        else
            usleep(2000);
    }
    cr_assert_geq(first, 0, "neither rank 1 finished");
    j.pids[first] = 0;
    cr_assert_eq(j.res[first].open_st, GW_ERR_CONFIG, "duplicate got %s",
                 gw_status_name((gw_status_t)j.res[first].open_st));
    assert_log(&j, first, "duplicate rank");
    spec_t s2 = rank_spec(2, 3, NULL, 10000);
    int c = spawn(&j, &s2);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, first == a ? b : a, 1);
    assert_completed(&j, c, 1);
    assert_log(&j, root, "unauthenticated"); /* no token: warned about */
    job_fini(&j);
}

Test(bootstrap, size_mismatch_is_rejected, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 10000);
    int root = spawn(&j, &s0);
    spec_t bad = rank_spec(1, 3, "tok", 5000);
    int b = spawn(&j, &bad);
    wait_slot(&j, b, 10000);
    cr_assert_eq(j.res[b].open_st, GW_ERR_CONFIG);
    assert_log(&j, b, "size mismatch");
    spec_t good = rank_spec(1, 2, "tok", 10000);
    int g = spawn(&j, &good);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, g, 1);
    job_fini(&j);
}

Test(bootstrap, empty_and_null_token_agree, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, NULL, 10000), s1 = rank_spec(1, 2, "", 10000);
    int root = spawn(&j, &s0), a = spawn(&j, &s1);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_log(&j, root, "unauthenticated");
    cr_assert(!slurp_contains(&j, a, "unauthenticated"), "only rank 0 warns");
    job_fini(&j);
}

Test(bootstrap, root_timeout_names_missing_ranks, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 1500);
    int root = spawn(&j, &s0);
    wait_listening(j.port);
    spec_t s1 = rank_spec(1, 3, "tok", 10000);
    int a = spawn(&j, &s1);
    wait_all(&j, 12000);
    cr_assert_eq(j.res[root].open_st, GW_ERR_TIMEOUT);
    assert_log(&j, root, "2 of 3 ranks joined");
    assert_log(&j, root, "missing rank 2");
    /* Rank 1 learns at once that the root gave up, without its own timeout. */
    cr_assert_eq(j.res[a].open_st, GW_ERR_REMOTE, "rank 1 got %s",
                 gw_status_name((gw_status_t)j.res[a].open_st));
    cr_assert_lt(j.res[a].elapsed_ms, 9000);
    job_fini(&j);
}

Test(bootstrap, rank_that_leaves_before_the_start_can_rejoin, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 3, "tok", 10000);
    int root = spawn(&j, &s0);
    wait_listening(j.port);
    spec_t early = rank_spec(1, 3, "tok", 500); /* joins, then gives up waiting */
    int e = spawn(&j, &early);
    wait_slot(&j, e, 5000);
    cr_assert_eq(j.res[e].open_st, GW_ERR_TIMEOUT);
    spec_t s1 = rank_spec(1, 3, "tok", 10000), s2 = rank_spec(2, 3, "tok", 10000);
    int a = spawn(&j, &s1), b = spawn(&j, &s2);
    wait_all(&j, 15000);
    assert_completed(&j, root, 1);
    assert_completed(&j, a, 1);
    assert_completed(&j, b, 1);
    assert_log(&j, root, "rank 1 disconnected before every rank joined");
    job_fini(&j);
}

Test(bootstrap, root_address_in_use, .timeout = 10)
{
    job_t j;
    job_init(&j);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)j.port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    spec_t s0 = rank_spec(0, 2, "tok", 2000);
    int root = spawn(&j, &s0);
    wait_all(&j, 5000);
    close(fd);
    cr_assert_eq(j.res[root].open_st, GW_ERR_SYSTEM);
    assert_log(&j, root, "cannot bind the root address");
    assert_log(&j, root, "Address already in use");
    job_fini(&j);
}

Test(bootstrap, rank_dies_before_allgather, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[4];
    for (int r = 0; r < 4; r++) {
        spec_t s = rank_spec(r, 4, "tok", 8000);
        s.die_after_open = r == 3;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].open_st, GW_OK);
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_REMOTE, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        assert_log(&j, slots[r], "rank 3");
    }
    job_fini(&j);
}

Test(bootstrap, root_dies_before_allgather, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[3];
    for (int r = 0; r < 3; r++) {
        spec_t s = rank_spec(r, 3, "tok", 8000);
        s.die_after_open = r == 0;
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 1; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_REMOTE, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        cr_assert_lt(j.res[slots[r]].elapsed_ms, 8000);
        assert_log(&j, slots[r], "rank 0");
    }
    job_fini(&j);
}

Test(bootstrap, allgather_length_mismatch, .timeout = 30)
{
    job_t j;
    job_init(&j);
    int slots[3];
    for (int r = 0; r < 3; r++) {
        spec_t s = rank_spec(r, 3, "tok", 8000);
        s.lens[0] = r == 2 ? 64 : 128;
        s.ngathers = 2; /* the second call must fail the same way */
        slots[r] = spawn(&j, &s);
    }
    wait_all(&j, 15000);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(j.res[slots[r]].open_st, GW_OK);
        cr_assert_eq(j.res[slots[r]].gather_st[0], GW_ERR_MISMATCH, "rank %d got %s", r,
                     gw_status_name((gw_status_t)j.res[slots[r]].gather_st[0]));
        cr_assert_eq(j.res[slots[r]].gather_st[1], GW_ERR_MISMATCH, "rank %d: not sticky", r);
        assert_log(&j, slots[r], "length mismatch");
    }
    job_fini(&j);
}

Test(bootstrap, allgather_too_large_fails_everywhere, .timeout = 30)
{
    job_t j;
    job_init(&j);
    spec_t s0 = rank_spec(0, 2, "tok", 8000), s1 = rank_spec(1, 2, "tok", 8000);
    s1.lens[0] = GW_BS_DATA_RANK_MAX + 1;
    int root = spawn(&j, &s0), a = spawn(&j, &s1);
    wait_all(&j, 15000);
    cr_assert_eq(j.res[a].gather_st[0], GW_ERR_INVALID_ARG);
    /* Rank 0 is told instead of waiting for its timeout. */
    cr_assert_eq(j.res[root].gather_st[0], GW_ERR_REMOTE, "rank 0 got %s",
                 gw_status_name((gw_status_t)j.res[root].gather_st[0]));
    assert_log(&j, root, "rank 1 failed");
    job_fini(&j);
}
