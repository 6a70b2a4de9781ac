/*
 * netdelay.c - `gradwire-netdelay`: one emulated host's link with a delay,
 * in user space, for kernels without the netem qdisc (scripts/cluster.sh
 * starts it for each host with a delay when netem is missing, or when
 * asked with --delay-mode user).
 *
 * It creates two TAP devices in the namespace it runs in (the cluster's
 * bridge namespace): --bridge-tap, which cluster.sh makes the host's port
 * of the bridge (h<i>), and --host-tap, which cluster.sh then moves into
 * the host's namespace and renames eth0. The devices live as long as this
 * process holds them (they are not persistent). It forwards frames both
 * ways between them:
 *   - host -> bridge (the host's egress): each frame is stamped with the
 *     time it was read (CLOCK_MONOTONIC) and queued in the delay line
 *     (netdelay_fifo.c) until that time plus --delay-us, then written to
 *     the bridge. The queue holds at most --limit bytes; a frame that finds
 *     it full is dropped and counted (drop-tail, as netem's limit).
 *   - bridge -> host: at once. So the round trip between hosts i and j is
 *     delay(i) + delay(j), as with netem on each host's egress.
 * Rate shaping (tbf on both devices) and loss (the BPF filter on the
 * bridge port's ingress) stay in the kernel where cluster.sh puts them:
 * tbf on eth0 serialises before the delay, which is where a link's
 * propagation delay is; the frames this process writes to the bridge port
 * are its ingress, where the loss filter sees them.
 *
 * Offloads (--offload on, the default): both devices take IFF_VNET_HDR and
 * TSO/checksum offload, so a TCP segment of up to 64 KiB crosses as one
 * frame with its virtio-net header, read and written as is, and the
 * kernel cuts it into MTU-sized frames only where a device without the
 * offload (or tbf) needs it. Off: frames of at most the MTU, one system
 * call each (several times slower; the README has both figures).
 *
 * One thread, one ppoll over the two devices and a signalfd, woken at the
 * due time of the oldest queued frame (timer slack set to 1 ns). Frames
 * leave in the order they came, none is dropped unless the queue is full.
 * It exits on SIGTERM/SIGINT, or when a device goes away (its namespace was
 * deleted: cluster.sh down). Counters go to --stats: rewritten each second
 * when they changed, on SIGUSR1 and at exit.
 *
 * A developer's tool for scripts/cluster.sh; libc and the kit only; not
 * installed.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kit.h"
#include "tools/dev/netdelay_fifo.h"

/* The largest frame read from a device: a 64 KiB GSO segment with its
 * Ethernet, VLAN and virtio-net headers, with room to spare. */
#define FRAME_MAX (65536 + 256)
/* Frames taken from one device per wake-up before the other gets its turn. */
#define BATCH 64
#define DELAY_MAX_US 10000000L
#define STATS_PERIOD_NS 1000000000LL

static const gw_kit_prog_t PROG = {"gradwire-netdelay", "\n(see gradwire-netdelay --help)\n"};

typedef struct opts {
    const char *host_tap;
    const char *bridge_tap;
    long delay_us;
    size_t limit;
    int offload;
    int daemon;
    int realtime;
    const char *pidfile;
    const char *stats;
    const char *log;
} opts_t;

typedef struct counters {
    unsigned long long frames, bytes; /* forwarded */
    unsigned long long dropped_full;  /* egress: the queue was full */
    unsigned long long write_errors;
    unsigned long long late_max_ns, late_sum_ns; /* egress: sent after due */
    unsigned long long queued_max_bytes, queued_max_frames;
} counters_t;

typedef struct relay {
    opts_t o;
    int host_fd, bridge_fd, sig_fd;
    gw_nd_fifo_t q;
    uint8_t *buf; /* for the undelayed direction and dropped frames */
    counters_t egress, ingress;
    int dirty;
    int64_t stats_due;
    unsigned long long stats_seq; /* counts the stats file's rewrites */
} relay_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gradwire-netdelay --host-tap NAME --bridge-tap NAME --delay-us N [options]\n"
            "\n"
            "Creates TAP devices NAME (host side) and NAME (bridge side) in this network\n"
            "namespace and forwards frames between them, those read from the host side\n"
            "held for the delay first (scripts/cluster.sh's user-space delay).\n"
            "\n"
            "  --host-tap NAME    the host's device (cluster.sh moves it into the host)\n"
            "  --bridge-tap NAME  the bridge's port towards the host\n"
            "  --delay-us N       delay of the host's egress, 0..%ld microseconds\n"
            "  --limit BYTES      the delay queue's bound, e.g. 4M (default 4M); frames\n"
            "                     that find it full are dropped and counted\n"
            "  --offload on|off   TSO/checksum offload through IFF_VNET_HDR (default on)\n"
            "  --daemon           go to the background once both devices exist\n"
            "  --realtime         run at SCHED_FIFO priority 1 (where allowed), so that a\n"
            "                     busy machine does not add its scheduling delays\n"
            "  --pidfile PATH     write the (daemon's) pid there\n"
            "  --stats PATH       counters, key=value lines: each second when changed,\n"
            "                     on SIGUSR1 and at exit\n"
            "  --log PATH         the daemon's stderr (default /dev/null)\n"
            "  -h, --help         this text\n",
            DELAY_MAX_US);
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"host-tap", required_argument, NULL, 'H'}, {"bridge-tap", required_argument, NULL, 'B'},
        {"delay-us", required_argument, NULL, 'd'}, {"limit", required_argument, NULL, 'l'},
        {"offload", required_argument, NULL, 'o'},  {"daemon", no_argument, NULL, 'D'},
        {"realtime", no_argument, NULL, 'R'},       {"pidfile", required_argument, NULL, 'p'},
        {"stats", required_argument, NULL, 's'},    {"log", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    gw_kit_getopt_begin();
    int c;
    while ((c = getopt_long(argc, argv, "+:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'H':
        case 'B':
            if (optarg[0] == '\0' || strlen(optarg) >= IFNAMSIZ || strchr(optarg, '/') ||
                strchr(optarg, '%'))
                return gw_kit_usage_error(&PROG,
                                          "%s wants a device name of 1..%d characters, "
                                          "not '%s'",
                                          c == 'H' ? "--host-tap" : "--bridge-tap", IFNAMSIZ - 1,
                                          optarg);
            *(c == 'H' ? &o->host_tap : &o->bridge_tap) = optarg;
            break;
        case 'd':
            if (gw_kit_parse_long(optarg, 0, DELAY_MAX_US, &o->delay_us) != 0)
                return gw_kit_usage_error(&PROG, "--delay-us wants 0..%ld, not '%s'", DELAY_MAX_US,
                                          optarg);
            break;
        case 'l':
            if (gw_kit_parse_size(optarg, &o->limit) != 0 || o->limit < 2 * FRAME_MAX ||
                o->limit > ((size_t)1 << 34))
                return gw_kit_usage_error(&PROG, "--limit wants %d bytes..16G, not '%s'",
                                          2 * FRAME_MAX, optarg);
            break;
        case 'o':
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                return gw_kit_usage_error(&PROG, "--offload wants on or off, not '%s'", optarg);
            o->offload = strcmp(optarg, "on") == 0;
            break;
        case 'D':
            o->daemon = 1;
            break;
        case 'R':
            o->realtime = 1;
            break;
        case 'p':
            o->pidfile = optarg;
            break;
        case 's':
            o->stats = optarg;
            break;
        case 'L':
            o->log = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return gw_kit_getopt_error(&PROG, c, argv);
        }
    }
    int r = gw_kit_no_operands(&PROG, argc, argv);
    if (r >= 0)
        return r;
    if (!o->host_tap || !o->bridge_tap || o->delay_us < 0)
        return gw_kit_usage_error(&PROG, "--host-tap, --bridge-tap and --delay-us are required");
    if (strcmp(o->host_tap, o->bridge_tap) == 0)
        return gw_kit_usage_error(&PROG, "--host-tap and --bridge-tap are both '%s'", o->host_tap);
    return 0;
}

/* A new TAP device `name` in this namespace, non-blocking, with or without
 * offloads. Returns the fd, or -1 having said why. */
static int tap_create(const char *name, int offload)
{
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "gradwire-netdelay: cannot open /dev/net/tun: %s\n", strerror(errno));
        return -1;
    }
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    ifr.ifr_flags = IFF_TAP | IFF_NO_PI | (offload ? IFF_VNET_HDR : 0);
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
    if (ioctl(fd, TUNSETIFF, &ifr) != 0) {
        fprintf(stderr, "gradwire-netdelay: cannot create TAP device %s: %s\n", name,
                strerror(errno));
        close(fd);
        return -1;
    }
    if (strcmp(ifr.ifr_name, name) != 0) {
        fprintf(stderr, "gradwire-netdelay: asked for TAP device %s, got %s\n", name, ifr.ifr_name);
        close(fd);
        return -1;
    }
    if (offload) {
        int hdr = (int)sizeof(struct virtio_net_hdr);
        unsigned long feat = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        if (ioctl(fd, TUNSETVNETHDRSZ, &hdr) != 0 || ioctl(fd, TUNSETOFFLOAD, feat) != 0) {
            fprintf(stderr, "gradwire-netdelay: cannot set offloads on %s: %s\n", name,
                    strerror(errno));
            close(fd);
            return -1;
        }
    }
    return fd;
}

static void write_stats(relay_t *r)
{
    if (!r->o.stats)
        return;
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s.tmp", r->o.stats) >= (int)sizeof(tmp))
        return;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    const counters_t *e = &r->egress, *i = &r->ingress;
    fprintf(f, "seq=%llu\n", ++r->stats_seq);
    fprintf(f, "pid=%ld\ndelay_us=%ld\nlimit_bytes=%zu\noffload=%s\n", (long)getpid(),
            r->o.delay_us, r->o.limit, r->o.offload ? "on" : "off");
    fprintf(f, "egress_frames=%llu\negress_bytes=%llu\negress_dropped_full=%llu\n", e->frames,
            e->bytes, e->dropped_full);
    fprintf(f, "egress_write_errors=%llu\negress_queued_frames=%zu\negress_queued_bytes=%zu\n",
            e->write_errors, r->q.frames, r->q.bytes);
    fprintf(f, "egress_queued_max_frames=%llu\negress_queued_max_bytes=%llu\n",
            e->queued_max_frames, e->queued_max_bytes);
    fprintf(f, "egress_late_max_us=%.1f\negress_late_mean_us=%.1f\n", (double)e->late_max_ns / 1e3,
            e->frames ? (double)e->late_sum_ns / (double)e->frames / 1e3 : 0.0);
    fprintf(f, "ingress_frames=%llu\ningress_bytes=%llu\ningress_write_errors=%llu\n", i->frames,
            i->bytes, i->write_errors);
    if (fclose(f) == 0)
        rename(tmp, r->o.stats);
    else
        unlink(tmp);
    r->dirty = 0;
}

/* Whether a read from a device says it is gone (deleted with its
 * namespace) rather than merely empty. */
static int device_gone(int err)
{
    return err == EBADFD || err == EIO || err == ENXIO || err == ENODEV;
}

static void forward(int fd, const uint8_t *p, size_t len, counters_t *c)
{
    ssize_t w = write(fd, p, len);
    if (w == (ssize_t)len) {
        c->frames++;
        c->bytes += len;
    } else {
        c->write_errors++;
    }
}

/* Egress: read up to BATCH frames from the host into the delay line.
 * Returns 0, or -1 when the device is gone. */
static int take_egress(relay_t *r, int64_t now)
{
    for (int k = 0; k < BATCH; k++) {
        uint8_t *slot = gw_nd_fifo_slot(&r->q);
        ssize_t n = read(r->host_fd, slot ? slot : r->buf, FRAME_MAX);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return device_gone(errno) ? -1 : 0;
        }
        if (!slot || gw_nd_fifo_push(&r->q, (size_t)n, now + r->o.delay_us * 1000) != 0) {
            r->egress.dropped_full++;
        } else {
            if (r->q.bytes > r->egress.queued_max_bytes)
                r->egress.queued_max_bytes = r->q.bytes;
            if (r->q.frames > r->egress.queued_max_frames)
                r->egress.queued_max_frames = r->q.frames;
        }
        r->dirty = 1;
    }
    return 0;
}

/* Ingress: up to BATCH frames from the bridge to the host, at once. */
static int take_ingress(relay_t *r)
{
    for (int k = 0; k < BATCH; k++) {
        ssize_t n = read(r->bridge_fd, r->buf, FRAME_MAX);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return device_gone(errno) ? -1 : 0;
        }
        forward(r->host_fd, r->buf, (size_t)n, &r->ingress);
        r->dirty = 1;
    }
    return 0;
}

/* Send every queued frame that is due by `now`. */
static void send_due(relay_t *r, int64_t now)
{
    size_t len;
    int64_t due;
    const uint8_t *p;
    while ((p = gw_nd_fifo_front(&r->q, &len, &due)) && due <= now) {
        forward(r->bridge_fd, p, len, &r->egress);
        unsigned long long late = (unsigned long long)(now - due);
        r->egress.late_sum_ns += late;
        if (late > r->egress.late_max_ns)
            r->egress.late_max_ns = late;
        gw_nd_fifo_pop(&r->q);
        r->dirty = 1;
    }
}

/* Handle the signals; returns 1 to stop. */
static int take_signals(relay_t *r)
{
    struct signalfd_siginfo si;
    while (read(r->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGUSR1)
            write_stats(r);
        else
            return 1;
    }
    return 0;
}

static int run(relay_t *r)
{
    struct pollfd pf[3] = {{.fd = r->host_fd, .events = POLLIN},
                           {.fd = r->bridge_fd, .events = POLLIN},
                           {.fd = r->sig_fd, .events = POLLIN}};
    r->stats_due = gw_kit_now_ns() + STATS_PERIOD_NS;
    for (;;) {
        int64_t now = gw_kit_now_ns();
        send_due(r, now);
        if (now >= r->stats_due) {
            if (r->dirty)
                write_stats(r);
            r->stats_due = now + STATS_PERIOD_NS;
        }
        int64_t wake = r->stats_due;
        size_t len;
        int64_t due;
        if (gw_nd_fifo_front(&r->q, &len, &due) && due < wake)
            wake = due;
        int64_t wait = wake > now ? wake - now : 0;
        struct timespec ts = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
        int n = ppoll(pf, 3, &ts, NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "gradwire-netdelay: poll: %s\n", strerror(errno));
            return 1;
        }
        if (n == 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (pf[k].revents & (POLLERR | POLLHUP | POLLNVAL)) {
                fprintf(stderr, "gradwire-netdelay: device %s is gone; exiting\n",
                        k == 0 ? r->o.host_tap : r->o.bridge_tap);
                return 0;
            }
        }
        if (pf[2].revents & POLLIN && take_signals(r))
            return 0;
        now = gw_kit_now_ns();
        if (pf[0].revents & POLLIN && take_egress(r, now) != 0)
            return 0;
        if (pf[1].revents & POLLIN && take_ingress(r) != 0)
            return 0;
    }
}

/* Fork to the background: the parent writes the child's pid to the pidfile
 * and exits 0 once the devices exist (they already do). */
static int daemonise(const opts_t *o)
{
    int nul = open("/dev/null", O_RDWR);
    int logfd = o->log ? open(o->log, O_WRONLY | O_CREAT | O_APPEND, 0600) : -1;
    if (nul < 0 || (o->log && logfd < 0)) {
        fprintf(stderr, "gradwire-netdelay: cannot open %s: %s\n", o->log ? o->log : "/dev/null",
                strerror(errno));
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gradwire-netdelay: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid > 0) {
        if (o->pidfile) {
            FILE *f = fopen(o->pidfile, "w");
            if (!f || fprintf(f, "%ld\n", (long)pid) < 0 || fclose(f) != 0) {
                fprintf(stderr, "gradwire-netdelay: cannot write %s: %s\n", o->pidfile,
                        strerror(errno));
                kill(pid, SIGTERM);
                _exit(1);
            }
        }
        _exit(0);
    }
    setsid();
    if (chdir("/") != 0)
        return -1;
    dup2(nul, STDIN_FILENO);
    dup2(nul, STDOUT_FILENO);
    dup2(logfd >= 0 ? logfd : nul, STDERR_FILENO);
    close(nul);
    if (logfd >= 0)
        close(logfd);
    return 0;
}

int main(int argc, char **argv)
{
    relay_t r;
    memset(&r, 0, sizeof(r));
    r.o.delay_us = -1;
    r.o.limit = (size_t)4 << 20;
    r.o.offload = 1;
    int rc = parse_args(argc, argv, &r.o);
    if (rc != 0)
        return rc;
    /* Signals are taken through the signalfd only, daemon or not. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGUSR1);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    r.sig_fd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    r.buf = malloc(FRAME_MAX);
    if (r.sig_fd < 0 || !r.buf || gw_nd_fifo_init(&r.q, FRAME_MAX, r.o.limit) != 0) {
        fprintf(stderr, "gradwire-netdelay: cannot set up: %s\n", strerror(errno));
        return 1;
    }
    /* Frames are due to the nanosecond; the default slack of 50 us would
     * add to every delay. And on a machine whose cores are all busy, a
     * relay of normal priority waits for one for milliseconds (measured
     * here at a load of 8 on 2 cores: frames late by 0.08-3.8 ms on average,
     * up to 127 ms; at SCHED_FIFO 13-51 us, up to 3 ms). The relay only runs
     * when frames come or fall due, so it cannot take a core for itself;
     * the kernel's RT throttling bounds it even so. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (r.o.realtime) {
        struct sched_param sp = {.sched_priority = 1};
        if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0)
            fprintf(stderr, "gradwire-netdelay: SCHED_FIFO refused (%s): normal priority\n",
                    strerror(errno));
    }
    r.host_fd = tap_create(r.o.host_tap, r.o.offload);
    if (r.host_fd < 0)
        return 1;
    r.bridge_fd = tap_create(r.o.bridge_tap, r.o.offload);
    if (r.bridge_fd < 0)
        return 1;
    if (r.o.daemon && daemonise(&r.o) != 0)
        return 1;
    if (!r.o.daemon && r.o.pidfile) {
        FILE *f = fopen(r.o.pidfile, "w");
        if (f) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    write_stats(&r);
    rc = run(&r);
    write_stats(&r);
    gw_nd_fifo_free(&r.q);
    free(r.buf);
    return rc;
}
