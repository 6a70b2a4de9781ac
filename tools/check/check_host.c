/*
 * check_host.c - host sanity: what every rank finds out about the machine
 * it runs on, before anything is measured, and the grouping of ranks into
 * hosts that every verdict is given in.
 *
 * Each rank looks at:
 *   - its host name, and a key that is equal on ranks sharing a host: a
 *     hash of the host name, the kernel's boot id and the identity of the
 *     network namespace (so emulated hosts, one namespace each, are told
 *     apart, as gradwire's own transport selection tells them apart);
 *   - the interface that reaches the job's root (GW_ROOT or MASTER_ADDR):
 *     a UDP socket connected to the root's address sends nothing, but the
 *     kernel picks the route and the source address, which getifaddrs maps
 *     to an interface; its MTU (SIOCGIFMTU), whether it is up and running
 *     (SIOCGIFFLAGS), operstate and speed from /sys/class/net, and whether
 *     it is a device's (/sys/class/net/IF/device), whose speed is a line
 *     rate that links between too few hosts are judged against;
 *   - RDMA devices from /sys/class/infiniband: each port's state, link
 *     layer and first GID that is not link-local, when the directory
 *     exists;
 *   - the transport the communicator chose (gw_comm_transport);
 *   - the CPUs: online, and its affinity mask; ranks sharing a kernel (its
 *     boot id: namespaces and containers share their machine's CPUs) are
 *     counted against the union of their masks, and a machine whose ranks
 *     outnumber those CPUs is oversubscribed: a rank waiting for a CPU
 *     makes its links look slow (a healthy node FAILed 1 run in 4 so), so
 *     the verdicts take no timing there as evidence to FAIL on.
 * The records are gathered to every rank (gw_allgather of fixed records),
 * so that every rank can name the host of any rank in an error.
 *
 * The transport between two ranks and why: gw_comm_transport names the
 * transports a rank uses ("tcp", "shm+tcp", ...); in a mix, gradwire's
 * selection routes peers on the same host through shared memory and the
 * others through the network transport, which is what is reported.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ c[i]) * 1099511628211ULL;
    return h;
}

static uint64_t host_key(const char *hostname)
{
    uint64_t h = 1469598103934665603ULL;
    char boot[64];
    struct stat sb;
    h = fnv(h, hostname, strlen(hostname));
    gw_kit_read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
    h = fnv(h, boot, strlen(boot));
    if (stat("/proc/self/ns/net", &sb) == 0) {
        uint64_t v[2] = {(uint64_t)sb.st_dev, (uint64_t)sb.st_ino};
        h = fnv(h, v, sizeof(v));
    }
    return h;
}

/* The root's host part from GW_ROOT ("host:port", "[v6]:port") or
 * MASTER_ADDR, into out; 0 or -1. */
static int root_host(char *out, size_t cap)
{
    const char *root = getenv("GW_ROOT");
    if (root && *root) {
        const char *start = root, *end;
        if (*root == '[') {
            start = root + 1;
            end = strchr(start, ']');
        } else {
            end = strrchr(root, ':');
        }
        size_t n = end ? (size_t)(end - start) : strlen(start);
        if (n == 0 || n >= cap)
            return -1;
        memcpy(out, start, n);
        out[n] = '\0';
        return 0;
    }
    const char *ma = getenv("MASTER_ADDR");
    if (ma && *ma && strlen(ma) < cap) {
        strcpy(out, ma);
        return 0;
    }
    return -1;
}

/* The interface and address this rank reaches the root from. */
static void find_interface(gwc_rank_info_t *ri)
{
    char host[128];
    snprintf(ri->ifname, sizeof(ri->ifname), "?");
    snprintf(ri->addr, sizeof(ri->addr), "?");
    if (root_host(host, sizeof(host)) != 0)
        return;
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_DGRAM,
                             .ai_flags = AI_NUMERICHOST},
                    *ai = NULL;
    if (getaddrinfo(host, "9", &hints, &ai) != 0 || !ai)
        return;
    int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    int ok = fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&local, &len) == 0;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    if (!ok)
        return;
    getnameinfo((struct sockaddr *)&local, len, ri->addr, sizeof(ri->addr), NULL, 0,
                NI_NUMERICHOST);
    struct ifaddrs *ifs = NULL, *i;
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != local.ss_family)
            continue;
        char a[48];
        socklen_t sl =
            local.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
        if (getnameinfo(i->ifa_addr, sl, a, sizeof(a), NULL, 0, NI_NUMERICHOST) == 0 &&
            strcmp(a, ri->addr) == 0) {
            snprintf(ri->ifname, sizeof(ri->ifname), "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
    if (strcmp(ri->ifname, "?") == 0)
        return;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%.15s", ri->ifname);
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd >= 0) {
        if (ioctl(fd, SIOCGIFMTU, &ifr) == 0)
            ri->mtu = ifr.ifr_mtu;
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) == 0)
            ri->link_up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
        close(fd);
    }
    char path[160], v[32];
    snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", ri->ifname);
    gw_kit_read_line(path, ri->operstate, sizeof(ri->operstate));
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", ri->ifname);
    gw_kit_read_line(path, v, sizeof(v));
    if (v[0] && atoi(v) > 0)
        ri->speed_mbps = atoi(v);
    /* A virtual interface (veth, bridge, tun, bond) reports a nominal
     * speed or none, not what its wire carries: only a device's speed is
     * taken for a line rate. */
    snprintf(path, sizeof(path), "/sys/class/net/%s/device", ri->ifname);
    ri->physical = access(path, F_OK) == 0;
}

/* The GID to show for a port: the first that is not link-local (fe80:),
 * which is the one that reaches other subnets, else the first. */
static const char *shown_gid(const gw_kit_rdma_port_t *p)
{
    for (int g = 0; g < p->ngids; g++)
        if (strncmp(p->gids[g].gid, "fe80:", 5) != 0)
            return p->gids[g].gid;
    return p->ngids ? p->gids[0].gid : "?";
}

/* "mlx5_0/1 ACTIVE InfiniBand gid fe80::...; ..." into ri->rdma. */
static void find_rdma(gwc_rank_info_t *ri)
{
    gw_kit_rdma_port_t ports[16];
    int n = gw_kit_rdma_ports(ports, 16);
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        const gw_kit_rdma_port_t *p = &ports[i];
        int w = snprintf(ri->rdma + used, sizeof(ri->rdma) - used, "%s%s/%d %s %s gid %s",
                         used ? "; " : "", p->device, p->port, p->state,
                         p->link_layer[0] ? p->link_layer : "?", shown_gid(p));
        if (w < 0 || (size_t)w >= sizeof(ri->rdma) - used) {
            ri->rdma[used] = '\0';
            break;
        }
        used += (size_t)w;
    }
}

static void probe(gwc_run_t *r, gwc_rank_info_t *ri)
{
    memset(ri, 0, sizeof(*ri));
    ri->rank = r->rank;
    ri->mtu = -1;
    ri->link_up = -1;
    ri->speed_mbps = -1;
    if (gethostname(ri->hostname, sizeof(ri->hostname) - 1) != 0)
        snprintf(ri->hostname, sizeof(ri->hostname), "?");
    ri->host_key = host_key(ri->hostname);
    snprintf(ri->transport, sizeof(ri->transport), "%s", gw_comm_transport(r->comm));
    find_interface(ri);
    find_rdma(ri);
    char boot[64];
    gw_kit_read_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
    ri->machine_key = boot[0] ? fnv(1469598103934665603ULL, boot, strlen(boot)) : ri->host_key;
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    ri->cpus_online = online > 0 ? (int32_t)online : -1;
    cpu_set_t set;
    CPU_ZERO(&set);
    ri->cpus_allowed = -1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        ri->cpus_allowed = CPU_COUNT(&set);
        for (int c = 0; c < 1024 && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                ri->cpumask[c / 8] |= (uint8_t)(1u << (c % 8));
    }
}

void gwc_find_oversubscribed(gwc_run_t *r)
{
    for (int h = 0; h < r->nhosts; h++) {
        gwc_host_t *host = &r->hosts[h];
        uint64_t key = r->info[host->first_rank].machine_key;
        uint8_t mask[128] = {0};
        int ranks = 0, online = 0, masked = 0;
        for (int q = 0; q < r->size; q++) {
            const gwc_rank_info_t *ri = &r->info[q];
            if (ri->machine_key != key)
                continue;
            ranks++;
            if (ri->cpus_online > online)
                online = ri->cpus_online;
            if (ri->cpus_allowed > 0) {
                masked = 1;
                for (int i = 0; i < 128; i++)
                    mask[i] |= ri->cpumask[i];
            }
        }
        int cpus = 0;
        for (int i = 0; masked && i < 128; i++)
            cpus += __builtin_popcount(mask[i]);
        if (!masked || cpus == 0)
            cpus = online;
        host->machine_ranks = ranks;
        host->machine_cpus = cpus;
        host->oversubscribed = cpus > 0 && ranks > cpus;
    }
}

gw_status_t gwc_hosts_gather(gwc_run_t *r)
{
    gwc_rank_info_t mine;
    probe(r, &mine);
    r->info = calloc((size_t)r->size, sizeof(*r->info));
    r->host_of = calloc((size_t)r->size, sizeof(int));
    r->hosts = calloc((size_t)r->size, sizeof(*r->hosts));
    if (!r->info || !r->host_of || !r->hosts)
        return GW_ERR_NO_MEMORY;
    gw_status_t st = gw_allgather(r->comm, &mine, r->info, sizeof(mine), GW_UINT8);
    if (st != GW_OK)
        return st;
    r->nhosts = 0;
    for (int q = 0; q < r->size; q++) {
        int h;
        for (h = 0; h < r->nhosts; h++)
            if (r->info[r->hosts[h].first_rank].host_key == r->info[q].host_key)
                break;
        if (h == r->nhosts) {
            r->hosts[h].first_rank = q;
            r->nhosts++;
        }
        r->hosts[h].nranks++;
        r->host_of[q] = h;
    }
    /* Names: the host name, or the address when two hosts share a name
     * (emulated hosts, containers). */
    for (int h = 0; h < r->nhosts; h++) {
        const gwc_rank_info_t *ri = &r->info[r->hosts[h].first_rank];
        int repeated = 0;
        for (int g = 0; g < r->nhosts; g++)
            repeated |=
                g != h && strcmp(r->info[r->hosts[g].first_rank].hostname, ri->hostname) == 0;
        snprintf(r->hosts[h].name, sizeof(r->hosts[h].name), "%s",
                 repeated ? ri->addr : ri->hostname);
    }
    gwc_find_oversubscribed(r);
    return GW_OK;
}

void gwc_transport_to(const gwc_run_t *r, int a, int b, char *out, size_t cap)
{
    const char *t = r->info[a].transport;
    int same = r->host_of[a] == r->host_of[b];
    if (!strchr(t, '+')) {
        snprintf(out, cap, "%s (%s)", t,
                 strcmp(t, "shm") == 0  ? "every peer on this host"
                 : strcmp(t, "ib") == 0 ? "RDMA to every peer"
                 : r->info[a].rdma[0]   ? "the job's network transport; RDMA ports present"
                                        : "the job's network transport; no RDMA device");
        return;
    }
    if (same && strstr(t, "shm")) {
        snprintf(out, cap, "shm (same host)");
        return;
    }
    const char *net = strstr(t, "ib") ? "ib" : "tcp";
    snprintf(out, cap, "%s (other host; %s)", net,
             strcmp(net, "ib") == 0 ? "RDMA device" : "no usable RDMA device");
}
