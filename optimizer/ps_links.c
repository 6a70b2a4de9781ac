/*
 * ps_links.c - the private links of parameter-server training: one two-rank
 * communicator per (server, worker) pair.
 *
 * Why not the job's communicator: its point-to-point calls are blocking and
 * name their peer, and a communicator is used from one thread at a time, so
 * a server on it could only serve its workers in a fixed order, and a slow
 * worker would hold up every fast one. With a communicator per pair, a
 * server runs one thread per worker, each blocked only on its own worker,
 * and the workers really do go at their own pace.
 *
 * Setting them up: each server finds the address its peers reach it at
 * (the local address of a UDP socket "connected" to the job's root, i.e.
 * the route the kernel would take; no packet is sent) and one free port per
 * worker; an allgather over the job's communicator tells everyone. Each port
 * stays reserved until its link is up: the server keeps a socket bound to it
 * (with SO_REUSEADDR and never listening, which lets the library's root
 * socket, also SO_REUSEADDR, bind the same port and listen), so neither the
 * kernel's choice of ephemeral ports for the many connections a job opens
 * nor the next port pick can hand it out in between. Then
 * every pair runs gw_comm_init with the server as rank 0 of 2. Server
 * threads create their ends concurrently; a worker creates its ends one
 * server after the other, and the library's connect retries cover a server
 * thread that is not listening yet.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "param_server.h"

#define ADDR_LEN 64

/* The host part of GW_ROOT (or MASTER_ADDR): where rank 0 listens. */
static int root_host(char *host, size_t len, char *port, size_t plen)
{
    const char *r = getenv("GW_ROOT");
    if (r) {
        const char *colon = strrchr(r, ':');
        if (!colon)
            return -1;
        const char *h = r, *he = colon;
        if (*h == '[' && he > h && he[-1] == ']') {
            h++;
            he--;
        }
        snprintf(host, len, "%.*s", (int)(he - h), h);
        snprintf(port, plen, "%s", colon + 1);
        return 0;
    }
    const char *a = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
    if (!a || !p)
        return -1;
    snprintf(host, len, "%s", a);
    snprintf(port, plen, "%s", p);
    return 0;
}

/* The address of this host as the root sees it, as text. */
static gw_status_t own_address(char *out, size_t len)
{
    char host[256], port[32];
    if (root_host(host, sizeof(host), port, sizeof(port)) != 0) {
        fprintf(stderr, "gradwire-train: --async needs GW_ROOT (or MASTER_ADDR and MASTER_PORT) "
                        "to find the servers' addresses\n");
        return GW_ERR_CONFIG;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV}, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "gradwire-train: cannot resolve %s: %s\n", host, gai_strerror(rc));
        return GW_ERR_CONFIG;
    }
    gw_status_t st = GW_ERR_SYSTEM;
    int fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
        getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)len, NULL, 0, NI_NUMERICHOST) == 0)
        st = GW_OK;
    else
        fprintf(stderr, "gradwire-train: cannot find the local address towards %s: %m\n", host);
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return st;
}

/* Reserve a free port on addr: *fd is a socket bound to it (SO_REUSEADDR,
 * not listening) that the caller closes once the link's root has bound it. */
static gw_status_t reserve_port(const char *addr, int *port, int *hold)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *res;
    if (getaddrinfo(addr, "0", &hints, &res) != 0)
        return GW_ERR_SYSTEM;
    gw_status_t st = GW_ERR_SYSTEM;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    const char *what = "socket";
    if (fd >= 0 && (what = "setsockopt(SO_REUSEADDR)") &&
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == 0 && (what = "bind") &&
        bind(fd, res->ai_addr, res->ai_addrlen) == 0 && (what = "getsockname") &&
        getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
        *hold = fd;
        fd = -1;
        st = GW_OK;
    } else {
        fprintf(stderr, "gradwire-train: cannot reserve a port on %s: %s: %m\n", addr, what);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    return st;
}

gw_status_t gw_train_ps_links_exchange(gw_train_ps_t *ps)
{
    int W = ps->nworkers;
    size_t rec = ADDR_LEN + (size_t)W * sizeof(int32_t);
    unsigned char *mine = calloc(1, rec), *all = calloc((size_t)ps->world, rec);
    gw_status_t st = GW_OK;
    if (!mine || !all || !ps->port || !ps->hold_fd) {
        /* Out of memory here, or setup failed before its arrays (and said
         * why): an empty address tells the others. */
        st = GW_ERR_NO_MEMORY;
    } else if (ps->is_server) {
        char addr[ADDR_LEN] = {0};
        st = own_address(addr, sizeof(addr));
        memcpy(mine, addr, ADDR_LEN);
        for (int w = 0; st == GW_OK && w < W; w++) {
            int port = 0;
            st = reserve_port(addr, &port, &ps->hold_fd[w]);
            int32_t p32 = port;
            memcpy(mine + ADDR_LEN + (size_t)w * sizeof(int32_t), &p32, sizeof(p32));
        }
    }
    /* Every rank joins the allgather even after a local failure (marked by
     * an empty address), so nobody is left waiting in it. */
    gw_status_t cst = gw_allgather(ps->comm, mine, all, rec, GW_UINT8);
    if (cst != GW_OK) {
        fprintf(stderr, "gradwire-train: exchanging the servers' addresses failed: %s\n",
                gw_status_str(cst));
        st = cst;
    }
    for (int s = 0; st == GW_OK && s < ps->nservers; s++) {
        const unsigned char *r = all + (size_t)s * rec;
        if (r[0] == 0) {
            st = GW_ERR_REMOTE; /* that server said why */
            break;
        }
        memcpy(ps->addr[s], r, ADDR_LEN);
        ps->addr[s][ADDR_LEN - 1] = '\0';
        for (int w = 0; w < W; w++) {
            int32_t p;
            memcpy(&p, r + ADDR_LEN + (size_t)w * sizeof(int32_t), sizeof(p));
            ps->port[s * W + w] = p;
        }
    }
    free(mine);
    free(all);
    return st;
}

gw_status_t gw_train_ps_link_open(const gw_train_ps_t *ps, int server, int worker, int as_server,
                                  gw_comm_t **out)
{
    char root[ADDR_LEN + 16];
    const char *a = ps->addr[server];
    snprintf(root, sizeof(root), strchr(a, ':') ? "[%s]:%d" : "%s:%d", a,
             ps->port[server * ps->nworkers + worker]);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = as_server ? 0 : 1;
    cfg.size = 2;
    cfg.root = root;
    gw_status_t st = gw_comm_init(&cfg, out);
    if (as_server && ps->hold_fd[worker] >= 0) {
        /* The root socket is bound (or gave up): the reservation is done. */
        close(ps->hold_fd[worker]);
        ps->hold_fd[worker] = -1;
    }
    if (st != GW_OK)
        fprintf(stderr, "gradwire-train: cannot link server %d and worker %d at %s: %s\n", server,
                worker, root, gw_status_str(st));
    return st;
}

void gw_train_ps_links_release(gw_train_ps_t *ps)
{
    for (int w = 0; ps->hold_fd && w < ps->nworkers; w++) {
        if (ps->hold_fd[w] >= 0)
            close(ps->hold_fd[w]);
        ps->hold_fd[w] = -1;
    }
}
