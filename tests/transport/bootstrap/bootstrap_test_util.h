/*
 * bootstrap_test_util.h - the harness of the bootstrap tests
 * (test_bootstrap.c, test_bootstrap_faults.c): rank processes that join a
 * root and all-gather, each described by a spec and reporting its result
 * through shared memory, a log file per rank, and a hand-made peer that
 * speaks the protocol from the test process (to forge, stall or lie).
 *
 * Header-only, every function static inline: each test file uses a
 * different part of it.
 */
#ifndef GW_TESTS_BOOTSTRAP_TEST_UTIL_H
#define GW_TESTS_BOOTSTRAP_TEST_UTIL_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "transport/bootstrap/bootstrap.h"
#include "transport/bootstrap/bootstrap_msg.h"

#define MAX_SLOTS 24
#define MAX_GATHERS 3

typedef struct spec {
    int rank, size, timeout_ms;
    const char *token;
    int insecure;     /* GW_INSECURE=1: a job without a token runs (warned) */
    const char *root; /* NULL: the job's 127.0.0.1 root */
    int ngathers;
    size_t lens[MAX_GATHERS];
    int die_after_open;  /* exit right after joining, before any all-gather */
    int gather_delay_ms; /* sleep this long after joining, before the all-gathers */
    long nofile_soft;    /* > 0: the rank process's soft RLIMIT_NOFILE */
    long nofile_hard;    /* > 0: and its hard one */
    int nofile_spare;    /* > 0: a soft RLIMIT_NOFILE leaving exactly this many free descriptors */
    int ring_min;        /* the bootstrap's ring_min (0: its default) */
} spec_t;

typedef struct result {
    int done;
    int open_st;
    int gather_st[MAX_GATHERS];
    int gather_ok[MAX_GATHERS];
    int gather_culprit[MAX_GATHERS];  /* gw__bootstrap_culprit after the all-gather */
    long long gather_ms[MAX_GATHERS]; /* how long the all-gather took */
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

static inline int free_port(void)
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

static inline void job_init(job_t *j)
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

/* The job's root at host (an IPv6 address in brackets) and its port. */
static inline void job_root_at(job_t *j, const char *host)
{
    if (strchr(host, ':'))
        snprintf(j->root, sizeof(j->root), "[%s]:%d", host, j->port);
    else
        snprintf(j->root, sizeof(j->root), "%s:%d", host, j->port);
}

static inline void log_path(const job_t *j, int slot, char *out, size_t cap)
{
    snprintf(out, cap, "%s/slot%d.log", j->dir, slot);
}

/* Remove the logs of a passed test (a failed one keeps them for a look). */
static inline void job_fini(job_t *j)
{
    for (int i = 0; i < j->nslots; i++) {
        char path[128];
        log_path(j, i, path, sizeof(path));
        unlink(path);
    }
    rmdir(j->dir);
    munmap(j->res, MAX_SLOTS * sizeof(result_t));
}

static inline uint8_t pattern(int rank, size_t i, size_t len)
{
    return (uint8_t)(rank * 31 + i * 7 + len + 1);
}

static inline void fmt_sockaddr(const struct sockaddr_storage *ss, socklen_t len, char *out,
                                size_t cap)
{
    char host[64], serv[16];
    if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        snprintf(out, cap, "?");
    else
        snprintf(out, cap, "%s", host);
}

/* A rank process's logger: INFO and up, into the slot's log file. */
static inline void slot_logger(const job_t *j, int slot, int rank, gw_logger_t *lg)
{
    gw__logger_init(lg, rank);
    char path[128];
    log_path(j, slot, path, sizeof(path));
    FILE *f = fopen(path, "w");
    if (f) {
        setvbuf(f, NULL, _IOLBF, 0);
        lg->file = f;
        lg->owns_file = 1;
    }
    lg->level = GW_LOG_INFO;
}

/* The body of a rank process. Never returns. */
static inline void run_rank(const job_t *j, const spec_t *s, int slot)
{
    result_t *res = &j->res[slot];
    gw_logger_t lg;
    slot_logger(j, slot, s->rank, &lg);
    struct rlimit rl;
    if ((s->nofile_soft > 0 || s->nofile_hard > 0) && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (s->nofile_hard > 0)
            rl.rlim_max = (rlim_t)s->nofile_hard;
        if (s->nofile_soft > 0)
            rl.rlim_cur = (rlim_t)s->nofile_soft;
        if (rl.rlim_cur > rl.rlim_max)
            rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            _exit(3);
    }
    if (s->nofile_spare > 0) {
        /* New descriptors take the lowest free numbers: below the limit
         * set here, exactly nofile_spare numbers are free. */
        int fd = 0, spare = 0;
        for (;; fd++) {
            if (fcntl(fd, F_GETFD) != -1)
                continue;
            if (spare == s->nofile_spare)
                break;
            spare++;
        }
        struct rlimit lim;
        if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
            _exit(3);
        lim.rlim_cur = (rlim_t)fd;
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
            _exit(3);
    }
    gw_bootstrap_params_t p = {
        .rank = s->rank,
        .size = s->size,
        .root = s->root ? s->root : j->root,
        .token = s->token,
        .insecure = s->insecure,
        .timeout_ms = s->timeout_ms,
        .log = &lg,
        .ring_min = s->ring_min,
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
        if (s->gather_delay_ms > 0)
            usleep((useconds_t)s->gather_delay_ms * 1000);
        for (int g = 0; g < s->ngathers; g++) {
            size_t len = s->lens[g];
            int64_t g0 = gw__now_ms();
            uint8_t *mine = malloc(len + 1), *all = malloc((size_t)s->size * len + 1);
            for (size_t i = 0; i < len; i++)
                mine[i] = pattern(s->rank, i, len);
            res->gather_st[g] = gw__bootstrap_allgather(bs, mine, len, all);
            res->gather_ms[g] = (long long)(gw__now_ms() - g0);
            res->gather_culprit[g] = gw__bootstrap_culprit(bs);
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

static inline int spawn(job_t *j, const spec_t *s)
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

static inline spec_t rank_spec(int rank, int size, const char *token, int timeout_ms)
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
static inline void wait_slot(job_t *j, int slot, int timeout_ms)
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

static inline void wait_all(job_t *j, int timeout_ms)
{
    for (int i = 0; i < j->nslots; i++)
        if (j->pids[i] > 0)
            wait_slot(j, i, timeout_ms);
}

static inline int slurp_contains(const job_t *j, int slot, const char *needle)
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

static inline void assert_log(const job_t *j, int slot, const char *needle)
{
    cr_assert(slurp_contains(j, slot, needle), "log of slot %d lacks \"%s\"", slot, needle);
}

static inline void assert_completed(const job_t *j, int slot, int ngathers)
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

static inline void assert_same_job_id(const job_t *j, const int *slots, int n)
{
    static const uint8_t zero[GW_BS_JOB_ID_LEN];
    cr_assert(memcmp(j->res[slots[0]].job_id, zero, sizeof(zero)) != 0, "job id is zero");
    for (int i = 1; i < n; i++)
        cr_assert_arr_eq(j->res[slots[i]].job_id, j->res[slots[0]].job_id, GW_BS_JOB_ID_LEN,
                         "slot %d has another job id", slots[i]);
}

/* ---- a hand-made peer speaking the protocol from the test process ---- */

static inline int connect_retry(int port, int timeout_ms)
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
static inline void wait_listening(int port) { close(connect_retry(port, 5000)); }

static inline int read_full(int fd, void *buf, size_t len)
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
static inline long long wait_closed(int fd, int timeout_ms)
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
static inline gw_status_t fake_rank(int fd, const char *token, int rank, int size, int forge,
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

#endif /* GW_TESTS_BOOTSTRAP_TEST_UTIL_H */
