/*
 * launch_hosts.c - `gradwire launch --hosts PREFIX`: run the ranks of a job
 * on emulated hosts, the network namespaces PREFIX0, PREFIX1, ... that
 * scripts/cluster.sh (or `ip netns add`) created.
 *
 * The hosts are found the way `ip netns` names them: a namespace NAME is the
 * file /run/netns/NAME, and hosts are numbered from 0 without gaps, so the
 * first missing number ends the list. Only the namespaces the job uses are
 * opened, once, before the first rank is forked; each forked rank enters its
 * host with setns(2) on that descriptor and execs the command, so a rank is
 * started exactly as `ip netns exec PREFIX<h> CMD` would start it, without a
 * shell or an extra process in between (signals and exit statuses reach the
 * launcher unchanged).
 *
 * Placement: without --ranks-per-host, rank r runs on host r mod nhosts, so
 * consecutive ranks are on different hosts and every link is used even when
 * there are fewer ranks than hosts. With --ranks-per-host K, ranks kK ..
 * kK+K-1 share host k (the usual block placement of real clusters, where
 * neighbours in a ring talk through memory). LOCAL_RANK, LOCAL_WORLD_SIZE
 * and GROUP_RANK (the host's number, as torchrun names it) follow the
 * placement.
 *
 * The root address is that of host 0, where rank 0 runs. The launcher does
 * not guess it from the naming scheme: a short-lived child enters host 0's
 * namespace, reads the IPv4 address of its eth0 (cluster.sh's 198.18.0.1)
 * and binds a free port there, because a port free in the launcher's own
 * namespace says nothing about host 0's.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"

#define NETNS_DIR "/run/netns"

static void ns_path(char *buf, size_t cap, const char *prefix, int h)
{
    snprintf(buf, cap, NETNS_DIR "/%s%d", prefix, h);
}

int gw_launch_host_of(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int r)
{
    if (o->ranks_per_host > 0)
        return r / o->ranks_per_host;
    return r % h->nhosts;
}

void gw_launch_local_rank(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int r,
                          int *local_rank, int *local_size)
{
    int host = gw_launch_host_of(o, h, r);
    if (o->ranks_per_host > 0) {
        int k = o->ranks_per_host, left = o->nranks - host * k;
        *local_rank = r % k;
        *local_size = left < k ? left : k;
    } else {
        *local_rank = r / h->nhosts;
        *local_size = (o->nranks - host + h->nhosts - 1) / h->nhosts;
    }
}

/* How many hosts PREFIX0, PREFIX1, ... exist; -1 after printing why when
 * the directory cannot be read for another reason than absence. */
static int count_hosts(const char *prefix)
{
    char path[4096];
    int n;
    for (n = 0; n < GW_LAUNCH_MAX_RANKS; n++) {
        ns_path(path, sizeof(path), prefix, n);
        if (access(path, F_OK) == 0)
            continue;
        if (errno == ENOENT || errno == ENOTDIR)
            break;
        fprintf(stderr, "gradwire launch: cannot look up network namespace %s: %m\n", path);
        return -1;
    }
    return n;
}

int gw_launch_hosts_open(struct gw_launch_opts *o, struct gw_launch_hosts *h)
{
    char path[4096];
    memset(h, 0, sizeof(*h));
    int avail = count_hosts(o->netns);
    if (avail < 0)
        return -1;
    if (avail == 0) {
        ns_path(path, sizeof(path), o->netns, 0);
        fprintf(stderr,
                "gradwire launch: no emulated host %s0 (%s does not exist): run "
                "`scripts/cluster.sh up N --prefix %s` first\n",
                o->netns, path, o->netns);
        return -1;
    }
    int k = o->ranks_per_host;
    if (o->nranks == 0) {
        long n = (long)avail * (k > 0 ? k : 1);
        if (n > GW_LAUNCH_MAX_RANKS) {
            fprintf(stderr, "gradwire launch: %d hosts x %d ranks is more than %d ranks: give -n\n",
                    avail, k > 0 ? k : 1, GW_LAUNCH_MAX_RANKS);
            return -1;
        }
        o->nranks = (int)n;
    }
    int need = k > 0 ? (o->nranks + k - 1) / k : (o->nranks < avail ? o->nranks : avail);
    if (need > avail) {
        fprintf(stderr,
                "gradwire launch: %d ranks at %d per host need %d hosts, but only %s0..%s%d "
                "exist: run `scripts/cluster.sh up %d --prefix %s` or lower -n\n",
                o->nranks, k, need, o->netns, o->netns, avail - 1, need, o->netns);
        return -1;
    }
    h->ns_fd = malloc((size_t)need * sizeof(*h->ns_fd));
    if (!h->ns_fd) {
        fprintf(stderr, "gradwire launch: out of memory\n");
        return -1;
    }
    for (int i = 0; i < need; i++) {
        ns_path(path, sizeof(path), o->netns, i);
        h->ns_fd[i] = open(path, O_RDONLY | O_CLOEXEC);
        if (h->ns_fd[i] < 0) {
            fprintf(stderr, "gradwire launch: cannot open network namespace %s: %m\n", path);
            h->nhosts = i;
            gw_launch_hosts_close(h);
            return -1;
        }
        h->nhosts = i + 1;
    }
    return 0;
}

void gw_launch_hosts_close(struct gw_launch_hosts *h)
{
    for (int i = 0; i < h->nhosts; i++)
        close(h->ns_fd[i]);
    free(h->ns_fd);
    memset(h, 0, sizeof(*h));
}

int gw_launch_enter_host(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int host)
{
    char name[4096];
    snprintf(name, sizeof(name), "%s%d", o->netns, host);
    if (setns(h->ns_fd[host], CLONE_NEWNET) != 0) {
        fprintf(stderr, "gradwire launch: cannot enter network namespace %s: %m%s\n", name,
                errno == EPERM ? " (entering a namespace needs root or CAP_SYS_ADMIN)" : "");
        return -1;
    }
    /* As `ip netns exec`: a private mount namespace whose /sys is a sysfs of
     * the new network namespace, so /sys/class/net lists the host's own
     * interfaces, and no mount made here propagates back to the machine. */
    if (unshare(CLONE_NEWNS) != 0) {
        fprintf(stderr, "gradwire launch: cannot make a mount namespace for %s: %m\n", name);
        return -1;
    }
    if (mount("", "/", "none", MS_SLAVE | MS_REC, NULL) != 0) {
        fprintf(stderr, "gradwire launch: cannot make / a mount slave for %s: %m\n", name);
        return -1;
    }
    unsigned long flags = 0;
    struct statvfs sv;
    if (statvfs("/sys", &sv) == 0 && (sv.f_flag & ST_RDONLY))
        flags = MS_RDONLY;
    umount2("/sys", MNT_DETACH); /* fails when nothing was mounted there: fine */
    if (mount(name, "/sys", "sysfs", flags, NULL) != 0) {
        fprintf(stderr, "gradwire launch: cannot mount /sys for %s: %m\n", name);
        return -1;
    }
    return 0;
}

/* The address ranks reach a host at: the IPv4 address of eth0 (cluster.sh's
 * interface), else of the first interface that is up and not loopback. */
static int host_addr(const char *name, char *out, size_t cap)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) {
        fprintf(stderr, "gradwire launch: cannot list the interfaces of %s: %m\n", name);
        return -1;
    }
    const struct ifaddrs *best = NULL;
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET)
            continue;
        if (strcmp(a->ifa_name, "eth0") == 0) {
            best = a;
            break;
        }
        if (!best && (a->ifa_flags & IFF_UP) && !(a->ifa_flags & IFF_LOOPBACK))
            best = a;
    }
    if (!best) {
        freeifaddrs(all);
        fprintf(stderr,
                "gradwire launch: emulated host %s has no IPv4 address on eth0 or any "
                "other interface that is up: give --host ADDR\n",
                name);
        return -1;
    }
    inet_ntop(AF_INET, &((const struct sockaddr_in *)best->ifa_addr)->sin_addr, out,
              (socklen_t)cap);
    freeifaddrs(all);
    return 0;
}

/* Runs in the helper child: answers "ADDR PORT" on fd. */
__attribute__((noreturn)) static void root_probe(const struct gw_launch_opts *o,
                                                 const struct gw_launch_hosts *h, int fd)
{
    char name[4096], addr[256];
    snprintf(name, sizeof(name), "%s0", o->netns);
    if (setns(h->ns_fd[0], CLONE_NEWNET) != 0) {
        fprintf(stderr, "gradwire launch: cannot enter network namespace %s: %m%s\n", name,
                errno == EPERM ? " (entering a namespace needs root or CAP_SYS_ADMIN)" : "");
        _exit(1);
    }
    if (o->host_given)
        snprintf(addr, sizeof(addr), "%s", o->host);
    else if (host_addr(name, addr, sizeof(addr)) != 0)
        _exit(1);
    int port, root_port;
    if (gw_launch_ports(addr, o->port, &port, &root_port) != 0)
        _exit(1);
    dprintf(fd, "%s %d %d\n", addr, port, root_port);
    _exit(0);
}

int gw_launch_hosts_root(const struct gw_launch_opts *o, const struct gw_launch_hosts *h,
                         char *addr, size_t cap, int *port, int *root_port)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        fprintf(stderr, "gradwire launch: pipe failed: %m\n");
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "gradwire launch: fork failed: %m\n");
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        close(p[0]);
        root_probe(o, h, p[1]);
    }
    close(p[1]);
    char buf[512];
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(buf) - 1 && (n = read(p[0], buf + len, sizeof(buf) - 1 - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    char a[256];
    int got_port, got_root;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        sscanf(buf, "%255s %d %d", a, &got_port, &got_root) != 3)
        return -1; /* the child said why */
    if (strlen(a) >= cap) {
        fprintf(stderr, "gradwire launch: root address %s is too long\n", a);
        return -1;
    }
    memcpy(addr, a, strlen(a) + 1);
    *port = got_port;
    *root_port = got_root;
    return 0;
}
