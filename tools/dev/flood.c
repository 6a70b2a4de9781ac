/*
 * flood.c - the flood process of flood.h: one epoll loop over `conns`
 * non-blocking connections to the root, each a tiny state machine for its
 * kind of stranger, replaced by a new connection whenever it ends.
 *
 * The parent and the flood process talk over a pipe: the flood process
 * writes one gw_flood_stats_t when its connections are up (the "ready"
 * report) and one more, its totals, when SIGTERM stops it.
 */
#include "tools/dev/flood.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "transport/bootstrap/bootstrap_msg.h"

#define GARBAGE_LEN 64
#define EVENTS 512
/* A connection that failed on our side (no source port left, refused once
 * the root stops listening) is tried again after a pause that doubles from
 * RETRY_MS to RETRY_MAX_MS, so that failing connects cannot eat the CPU that
 * the root and the ranks beside us need. */
#define RETRY_MS 10
#define RETRY_MAX_MS 1000

enum { S_DOWN, S_CONNECTING, S_WAIT_CHALLENGE, S_WAIT_END };

typedef struct slot {
    int fd;
    int state;
    size_t got;     /* bytes of the challenge received */
    int backoff_ms; /* the pause after the last failure; 0 after a success */
    double due;     /* when a failed slot is tried again */
    uint8_t nonce[GW_BS_NONCE_LEN];
    uint8_t buf[GW_BS_CHALLENGE_LEN];
} slot_t;

typedef struct flood {
    gw_flood_opts_t o;
    struct sockaddr_in root;
    int ep;
    slot_t *slots;
    unsigned *now_q, *later_q; /* slots to open at once, and after RETRY_MS */
    size_t n_now, n_later;
    gw_flood_stats_t st;
    uint64_t rng;
    struct timespec t0;
} flood_t;

static volatile sig_atomic_t stop_flag;

static void on_term(int sig)
{
    (void)sig;
    stop_flag = 1;
}

static double ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) * 1e3 + (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static uint64_t next_rand(flood_t *fl)
{
    fl->rng ^= fl->rng << 13;
    fl->rng ^= fl->rng >> 7;
    fl->rng ^= fl->rng << 17;
    return fl->rng;
}

static void fill_random(flood_t *fl, uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(next_rand(fl) >> 56);
}

/* The slot's attempt failed on our side: try again after its pause. */
static void retry_later(flood_t *fl, slot_t *s)
{
    fl->st.failed++;
    s->backoff_ms = s->backoff_ms ? 2 * s->backoff_ms : RETRY_MS;
    if (s->backoff_ms > RETRY_MAX_MS)
        s->backoff_ms = RETRY_MAX_MS;
    s->due = ms_since(&fl->t0) + s->backoff_ms;
    fl->later_q[fl->n_later++] = (unsigned)(s - fl->slots);
}

/* Close the slot's connection; it is replaced at once (later: after its
 * pause, as a failure). */
static void slot_close(flood_t *fl, slot_t *s, int reset, int later)
{
    if (s->fd < 0)
        return;
    if (reset) {
        /* A reset, not a FIN: no TIME_WAIT left on our side. */
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    close(s->fd);
    s->fd = -1;
    s->state = S_DOWN;
    fl->st.open_now--;
    if (later)
        retry_later(fl, s);
    else
        fl->now_q[fl->n_now++] = (unsigned)(s - fl->slots);
}

/* A connect() that failed at once (no source port, no descriptor). */
static void open_failed(flood_t *fl, unsigned i, int fd)
{
    if (fd >= 0)
        close(fd);
    retry_later(fl, &fl->slots[i]);
}

static void slot_open(flood_t *fl, unsigned i)
{
    slot_t *s = &fl->slots[i];
    s->state = S_DOWN;
    s->got = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        open_failed(fl, i, -1);
        return;
    }
    fl->st.opened++;
    if (fl->o.sources > 1) {
        /* The source port is chosen at connect(), per destination. */
        int one = 1;
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
        struct sockaddr_in src = {.sin_family = AF_INET,
                                  .sin_addr.s_addr =
                                      htonl(0x7f000001u + i % (unsigned)fl->o.sources)};
        if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0) {
            open_failed(fl, i, fd);
            return;
        }
    }
    if (connect(fd, (struct sockaddr *)&fl->root, sizeof(fl->root)) != 0 && errno != EINPROGRESS) {
        open_failed(fl, i, fd);
        return;
    }
    struct epoll_event ev = {.events = EPOLLOUT, .data.u32 = i};
    if (epoll_ctl(fl->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        open_failed(fl, i, fd);
        return;
    }
    s->fd = fd;
    s->state = S_CONNECTING;
    fl->st.open_now++;
}

static int send_all(int fd, const void *p, size_t n)
{
    return send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n ? 0 : -1;
}

static void watch_input(flood_t *fl, slot_t *s, unsigned i, int state)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = i};
    epoll_ctl(fl->ep, EPOLL_CTL_MOD, s->fd, &ev);
    s->state = state;
}

/* The connection completed: behave as this kind of stranger does. */
static void on_connected(flood_t *fl, slot_t *s, unsigned i)
{
    fl->st.connected++;
    switch (fl->o.kind) {
    case GW_FLOOD_IDLE:
        watch_input(fl, s, i, S_WAIT_END);
        return;
    case GW_FLOOD_GARBAGE: {
        uint8_t junk[GARBAGE_LEN];
        fill_random(fl, junk, sizeof(junk));
        memcpy(junk, "GET ", 4); /* never the bootstrap's magic */
        if (send_all(s->fd, junk, sizeof(junk)) != 0) {
            slot_close(fl, s, 1, 1);
            return;
        }
        watch_input(fl, s, i, S_WAIT_END);
        return;
    }
    case GW_FLOOD_WRONG_TOKEN: {
        int ranks = fl->o.job_size > 1 ? fl->o.job_size - 1 : 1;
        gw_bs_hello_t h = {.rank = 1 + (int32_t)(i % (unsigned)ranks), .size = fl->o.job_size};
        fill_random(fl, s->nonce, sizeof(s->nonce));
        memcpy(h.client_nonce, s->nonce, sizeof(s->nonce));
        uint8_t m[GW_BS_HELLO_LEN];
        gw__bs_encode_hello(&h, m);
        if (send_all(s->fd, m, sizeof(m)) != 0) {
            slot_close(fl, s, 1, 1);
            return;
        }
        watch_input(fl, s, i, S_WAIT_CHALLENGE);
        return;
    }
    case GW_FLOOD_CHURN:
    case GW_FLOOD_KINDS:
        slot_close(fl, s, 1, 0);
        return;
    }
}

/* The challenge arrived: answer it with a proof under the wrong token. */
static void on_challenge(flood_t *fl, slot_t *s)
{
    static const char wrong[] = "not the job token";
    gw_bs_challenge_t ch;
    if (gw__bs_decode_challenge(s->buf, sizeof(s->buf), &ch, NULL) != GW_OK) {
        slot_close(fl, s, 1, 1);
        return;
    }
    int ranks = fl->o.job_size > 1 ? fl->o.job_size - 1 : 1;
    uint32_t rank = 1 + (uint32_t)((s - fl->slots) % ranks);
    uint8_t proof[GW_BS_PROOF_LEN], m[GW_BS_RESPONSE_LEN];
    gw__bs_rank_proof(wrong, sizeof(wrong) - 1, ch.server_nonce, s->nonce, rank, proof);
    gw__bs_encode_response(proof, m);
    if (send_all(s->fd, m, sizeof(m)) != 0) {
        slot_close(fl, s, 1, 1);
        return;
    }
    s->state = S_WAIT_END;
}

static void on_event(flood_t *fl, unsigned i, uint32_t events)
{
    slot_t *s = &fl->slots[i];
    if (s->fd < 0)
        return;
    if (s->state == S_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof(err);
        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0 || err != 0) {
            slot_close(fl, s, 1, 1);
            return;
        }
        if (!(events & EPOLLOUT))
            return;
        s->backoff_ms = 0;
        on_connected(fl, s, i);
        return;
    }
    /* Waiting for the challenge or for the end: read what the root says. */
    for (;;) {
        uint8_t junk[512];
        uint8_t *to = junk;
        size_t want = sizeof(junk);
        if (s->state == S_WAIT_CHALLENGE) {
            to = s->buf + s->got;
            want = sizeof(s->buf) - s->got;
        }
        ssize_t r = recv(s->fd, to, want, MSG_DONTWAIT);
        if (r > 0) {
            if (s->state == S_WAIT_CHALLENGE) {
                s->got += (size_t)r;
                if (s->got == sizeof(s->buf)) {
                    on_challenge(fl, s);
                    if (s->fd < 0)
                        return;
                }
            }
            continue;
        }
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        /* EOF or a reset: the root ended it. */
        fl->st.ended++;
        slot_close(fl, s, 0, 0);
        return;
    }
}

static void raise_nofile(flood_t *fl)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)fl->o.conns + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return;
    if (rl.rlim_cur < want) {
        struct rlimit up = {.rlim_cur = want, .rlim_max = rl.rlim_max < want ? want : rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) != 0) {
            up.rlim_cur = up.rlim_max = rl.rlim_max; /* not root: as far as allowed */
            setrlimit(RLIMIT_NOFILE, &up);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur < want) {
        int can = rl.rlim_cur > 64 ? (int)rl.rlim_cur - 64 : 1;
        fprintf(stderr, "gw_flood: RLIMIT_NOFILE is %llu: holding %d connections instead of %d\n",
                (unsigned long long)rl.rlim_cur, can, fl->o.conns);
        fl->o.conns = can;
    }
}

static void report(int wfd, flood_t *fl)
{
    fl->st.ms = ms_since(&fl->t0);
    fl->st.conns = fl->o.conns;
    ssize_t w = write(wfd, &fl->st, sizeof(fl->st));
    (void)w;
}

static void flood_main(const gw_flood_opts_t *o, int ready_ms, int wfd)
{
    flood_t fl;
    memset(&fl, 0, sizeof(fl));
    fl.o = *o;
    clock_gettime(CLOCK_MONOTONIC, &fl.t0);
    fl.rng = (uint64_t)fl.t0.tv_nsec * 0x9e3779b97f4a7c15ull + (uint64_t)getpid() + 1;
    fl.root.sin_family = AF_INET;
    fl.root.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &fl.root.sin_addr) != 1) {
        fprintf(stderr, "gw_flood: '%s' is not an IPv4 address\n", o->host);
        _exit(1);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_nofile(&fl);
    size_t n = (size_t)fl.o.conns;
    fl.ep = epoll_create1(EPOLL_CLOEXEC);
    fl.slots = calloc(n, sizeof(*fl.slots));
    fl.now_q = calloc(n, sizeof(*fl.now_q));
    fl.later_q = calloc(n, sizeof(*fl.later_q));
    if (fl.ep < 0 || !fl.slots || !fl.now_q || !fl.later_q) {
        perror("gw_flood: epoll or memory");
        _exit(1);
    }
    for (unsigned i = 0; i < n; i++) {
        fl.slots[i].fd = -1;
        fl.now_q[fl.n_now++] = i;
    }
    int ready = 0;
    double last_retry = 0;
    struct epoll_event evs[EVENTS];
    while (!stop_flag) {
        /* Replace what ended at once, what failed to start after a pause.
         * Each slot is in at most one queue (it is down in both). */
        while (fl.n_now > 0)
            slot_open(&fl, fl.now_q[--fl.n_now]);
        double now = ms_since(&fl.t0);
        if (now - last_retry >= RETRY_MS) {
            last_retry = now;
            size_t k = 0;
            for (size_t i = 0; i < fl.n_later; i++) {
                unsigned q = fl.later_q[i];
                if (fl.slots[q].due <= now)
                    fl.now_q[fl.n_now++] = q;
                else
                    fl.later_q[k++] = q;
            }
            fl.n_later = k;
        }
        if (!ready && (fl.st.connected >= fl.o.conns || now >= ready_ms)) {
            ready = 1;
            report(wfd, &fl);
        }
        int got = epoll_wait(fl.ep, evs, EVENTS, fl.n_now ? 0 : RETRY_MS);
        for (int k = 0; k < got; k++)
            on_event(&fl, evs[k].data.u32, evs[k].events);
    }
    if (!ready)
        report(wfd, &fl);
    report(wfd, &fl);
    _exit(0);
}

static int read_report(int rfd, int timeout_ms, gw_flood_stats_t *st)
{
    struct pollfd p = {.fd = rfd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return -1;
    ssize_t n = read(rfd, st, sizeof(*st));
    return n == (ssize_t)sizeof(*st) ? 0 : -1;
}

int gw_flood_start(gw_flood_t *f, const gw_flood_opts_t *o, int ready_ms, gw_flood_stats_t *ready)
{
    int p[2];
    if (o->conns < 1 || o->kind < 0 || o->kind >= GW_FLOOD_KINDS || pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "gw_flood: bad options or no pipe\n");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("gw_flood: fork");
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        flood_main(o, ready_ms, p[1]);
    }
    close(p[1]);
    f->pid = pid;
    f->rfd = p[0];
    gw_flood_stats_t st;
    if (read_report(f->rfd, ready_ms + 5000, &st) != 0) {
        fprintf(stderr, "gw_flood: the flood process reported nothing\n");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(f->rfd);
        return -1;
    }
    if (ready)
        *ready = st;
    return 0;
}

int gw_flood_stop(gw_flood_t *f, gw_flood_stats_t *total)
{
    kill(f->pid, SIGTERM);
    gw_flood_stats_t st;
    int r = read_report(f->rfd, 10000, &st);
    if (r != 0)
        kill(f->pid, SIGKILL);
    int status = 0;
    waitpid(f->pid, &status, 0);
    close(f->rfd);
    if (r == 0 && total)
        *total = st;
    return r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static const char *const kind_names[GW_FLOOD_KINDS] = {"idle", "garbage", "wrongtoken", "churn"};

const char *gw_flood_kind_name(gw_flood_kind_t k)
{
    return k >= 0 && k < GW_FLOOD_KINDS ? kind_names[k] : "?";
}

int gw_flood_kind_parse(const char *s, gw_flood_kind_t *k)
{
    for (int i = 0; i < GW_FLOOD_KINDS; i++)
        if (strcmp(s, kind_names[i]) == 0) {
            *k = (gw_flood_kind_t)i;
            return 0;
        }
    return -1;
}
