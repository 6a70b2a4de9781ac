/*
 * node_probe.c - what a rank started on this node, now, with this
 * environment, would use, and why not the rest (gw_node_probe, behind
 * `gradwire info`).
 *
 * Nothing is guessed from the outside: the probe runs the code a rank
 * runs, with a logger at INFO level that writes into memory, and reports
 * what that code said.
 *   1. The logger's own variables (GW_DEBUG, GW_DEBUG_FILE, which is only
 *      checked, GW_DEBUG_SUBSYS).
 *   2. The launcher (launch_env.c): rank, size, root and job token as
 *      gw_comm_init_env would take them. Under a PMIx server they come
 *      from the job's other processes, a collective step the probe does not
 *      take; it says so. Without any launcher's variables, their absence
 *      is information, not an error.
 *   3. The communicator's variables (gw__comm_resolve: GW_ROOT, GW_TIMEOUT_MS,
 *      GW_NSOCKS, GW_TRANSPORT, GW_SOCKET_IFNAME, GW_ALGO, GW_CHUNK_BYTES).
 *   4. Every transport of this build opened as rank 0 of a two-rank job
 *      opens it, forced (as GW_TRANSPORT=name would), and closed again: its
 *      listening socket on the interface it would pick (towards the root
 *      when one is known, else loopback), its shared memory segment, its
 *      RDMA device, port and GID. What it logged is what it would use, or
 *      why it cannot. Nothing is sent anywhere.
 * First, what the library was built with. Each finding is one line of the
 * report: SECTION, NAME, VERDICT and TEXT, separated by tabs, SECTION one
 * of "build", "cuda", "log", "launcher", "config", "transport", VERDICT one of "ok", "info", "error" (a malformed setting: a
 * rank would refuse to start) and "unusable" (a transport this node cannot
 * offer).
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "collectives/comm/launch_env.h"
#include "common/log.h"

typedef struct report {
    char *buf;
    size_t cap, used;
    int truncated;
} report_t;

static void put(report_t *r, const char *section, const char *name, const char *verdict,
                const char *text)
{
    if (r->truncated)
        return;
    char line[1200];
    int n = snprintf(line, sizeof(line), "%s\t%s\t%s\t%s\n", section, name, verdict, text);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line))
        n = (int)sizeof(line) - 1;
    if (r->used + (size_t)n + 1 > r->cap) {
        r->truncated = 1;
        return;
    }
    memcpy(r->buf + r->used, line, (size_t)n);
    r->used += (size_t)n;
    r->buf[r->used] = '\0';
}

/* A logger at INFO whose lines go into memory (open_memstream). */
typedef struct capture {
    gw_logger_t lg;
    FILE *f;
    char *text;
    size_t len;
} capture_t;

static int capture_begin(capture_t *c)
{
    memset(c, 0, sizeof(*c));
    c->f = open_memstream(&c->text, &c->len);
    if (!c->f)
        return -1;
    memset(&c->lg, 0, sizeof(c->lg));
    c->lg.level = GW_LOG_INFO;
    c->lg.rank = 0;
    c->lg.file = c->f;
    if (gethostname(c->lg.host, sizeof(c->lg.host)) != 0)
        snprintf(c->lg.host, sizeof(c->lg.host), "unknown");
    c->lg.host[sizeof(c->lg.host) - 1] = '\0';
    return 0;
}

/* Each line logged since the capture began (or was last taken) into the
 * report, the log prefix (host, pid, rank, time, subsystem) cut off: ERROR
 * and WARN lines with `bad`, others with `good`. Empties the capture. */
static void capture_take(capture_t *c, report_t *r, const char *section, const char *name,
                         const char *good, const char *bad)
{
    fflush(c->f);
    char *text = c->text && c->len ? strndup(c->text, c->len) : NULL;
    fseek(c->f, 0, SEEK_SET);
    c->len = 0;
    if (c->text)
        c->text[0] = '\0';
    for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        /* "host:pid:rank HH:MM:SS.us gradwire SUBSYS LEVEL message" */
        char *p = strstr(line, " gradwire ");
        char level[16] = "";
        if (p) {
            p += strlen(" gradwire ");
            p = strchr(p, ' '); /* after the subsystem */
            if (p && sscanf(p + 1, "%15s", level) == 1)
                p = p + 1 + strlen(level) + 1;
        }
        const char *msg = p && *p ? p : line;
        int is_bad = strcmp(level, "ERROR") == 0 || strcmp(level, "WARN") == 0;
        put(r, section, name, is_bad ? bad : good, msg);
    }
    free(text);
}

static void capture_end(capture_t *c)
{
    if (c->f)
        fclose(c->f);
    free(c->text);
}

/* Which launcher's rank variable is set (or PMIx's namespace), NULL: none. */
static const char *launcher_present(void)
{
    static const char *const vars[] = {"PMIX_NAMESPACE",       "GW_RANK",  "RANK",
                                       "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        if (getenv(vars[i]))
            return vars[i];
    return NULL;
}

/* The local address a rank would listen on when GW_SOCKET_IFNAME does not
 * say: the one that routes to the root's host (a UDP socket connected to
 * it sends nothing), else loopback. */
static void default_addr(const char *root, gw_transport_params_t *p, char *said, size_t cap)
{
    struct sockaddr_in *lo = (struct sockaddr_in *)&p->default_addr;
    lo->sin_family = AF_INET;
    lo->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p->default_addr_len = sizeof(*lo);
    snprintf(said, cap, "no root known: loopback");
    char host[256];
    const char *colon = root ? strrchr(root, ':') : NULL;
    if (!colon || (size_t)(colon - root) >= sizeof(host))
        return;
    memcpy(host, root, (size_t)(colon - root));
    host[colon - root] = '\0';
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    /* Numeric addresses only: the probe never asks DNS. */
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_DGRAM}, *ai = NULL;
    if (getaddrinfo(host, "9", &hints, &ai) != 0 || !ai) {
        snprintf(said, cap, "root %s is not a numeric address: loopback", host);
        return;
    }
    int fd = socket(ai->ai_family, SOCK_DGRAM, 0);
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, (struct sockaddr *)&local, &len) == 0) {
        memcpy(&p->default_addr, &local, len);
        p->default_addr_len = len;
        snprintf(said, cap, "the address that routes to the root %s", host);
    } else {
        snprintf(said, cap, "no route to the root %s: loopback", host);
    }
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
}

static void probe_transports(capture_t *c, report_t *r, const gw_comm_resolved_t *res,
                             gw_status_t *worst)
{
    gw_transport_params_t params;
    memset(&params, 0, sizeof(params));
    params.rank = 0;
    params.size = 2;
    params.log = &c->lg;
    params.timeout_ms = res->timeout_ms;
    params.ifname = res->ifname;
    params.nsocks = res->nsocks;
    params.forced = 1;
    char how[320];
    default_addr(res->root, &params, how, sizeof(how));
    if (!res->ifname)
        put(r, "transport", "address", "info", how);
    size_t n;
    const gw_select_candidate_t *cand = gw__select_candidates(&n);
    for (size_t i = 0; i < n; i++) {
        gw_transport_t *t = NULL;
        uint8_t addr[GW_TRANSPORT_ADDR_MAX];
        gw_status_t st = cand[i].ops->open(&params, &t, addr);
        capture_take(c, r, "transport", cand[i].name, "info",
                     st == GW_OK           ? "info"
                     : st == GW_ERR_CONFIG ? "error"
                                           : "unusable");
        char line[160];
        if (st == GW_OK) {
            snprintf(line, sizeof(line), "usable%s",
                     cand[i].local_only ? " (by ranks on this host)" : "");
            put(r, "transport", cand[i].name, "ok", line);
            t->ops->close(t);
            capture_take(c, r, "transport", cand[i].name, "info", "info");
        } else if (st == GW_ERR_CONFIG) {
            /* A setting the transport reads (GW_SOCKET_IFNAME, GW_IB_*) is
             * wrong: a rank would refuse to start. */
            snprintf(line, sizeof(line), "a setting it reads is wrong (%s)", gw_status_name(st));
            put(r, "transport", cand[i].name, "error", line);
            *worst = GW_ERR_CONFIG;
        } else {
            snprintf(line, sizeof(line), "not usable here (%s)", gw_status_name(st));
            put(r, "transport", cand[i].name, "unusable", line);
        }
    }
}

/* What this library was built with. */
/* The CUDA part (collectives/device): built or not, and whether the plugin
 * opens here and finds a driver and devices, or what is missing. */
static void cuda_lines(report_t *r)
{
    gw_cuda_info_t ci;
    char line[600];
    gw_cuda_info(&ci);
    put(r, "cuda", "build", "info",
        ci.built ? "CUDA part built: the plugin libgradwire-cuda.so stages device buffers"
                 : "no CUDA part in this build (GW_CUDA=OFF or no CUDA toolkit): device buffers "
                   "fail with GW_ERR_UNSUPPORTED");
    if (ci.loaded) {
        snprintf(line, sizeof(line), "%s loaded; %d device%s", ci.plugin, ci.device_count,
                 ci.device_count == 1 ? "" : "s");
        put(r, "cuda", "plugin", "ok", line);
        for (int i = 0; i < ci.device_count && i < 8; i++) {
            char name[16];
            snprintf(name, sizeof(name), "device%d", i);
            put(r, "cuda", name, "ok", ci.devices[i]);
        }
    } else {
        snprintf(line, sizeof(line), "not loaded: %s; host buffers work as without CUDA", ci.why);
        put(r, "cuda", "plugin", ci.built ? "unusable" : "info", line);
    }
    if (ci.runtime_loaded)
        put(r, "cuda", "runtime", "info", "a CUDA runtime is already loaded in this process");
}

static void build_lines(report_t *r)
{
#ifndef GW_BUILD_TYPE
#define GW_BUILD_TYPE "unknown"
#endif
    char line[300];
    snprintf(line, sizeof(line), "gradwire %s, build type %s, sanitizers %s", gw_version(),
             GW_BUILD_TYPE[0] ? GW_BUILD_TYPE : "(none set)",
#if defined(__SANITIZE_ADDRESS__)
             "address,undefined"
#elif defined(__SANITIZE_THREAD__)
             "thread"
#else
             "none"
#endif
    );
    put(r, "build", "library", "info", line);
    put(r, "build", "verbs", "info",
        "RDMA verbs built in; libibverbs and librdmacm loaded at run time, when the ib "
        "transport opens");
#ifdef GW_HAVE_PMIX_H
    put(r, "build", "pmix", "info",
        "PMIx bootstrap built in; libpmix loaded at run time, under a "
        "PMIx server only");
#else
    put(r, "build", "pmix", "info", "built without PMIx (libpmix-dev was missing)");
#endif
    cuda_lines(r);
}

gw_status_t gw_node_probe(char *buf, size_t cap)
{
    if (!buf || cap == 0)
        return GW_ERR_INVALID_ARG;
    buf[0] = '\0';
    report_t r = {buf, cap, 0, 0};
    gw_status_t worst = GW_OK;
    char line[700];
    build_lines(&r);

    /* 1. The logger's variables: what gw__logger_init says about them. */
    capture_t c;
    if (capture_begin(&c) != 0)
        return GW_ERR_NO_MEMORY;
    {
        gw_logger_t lg;
        gw_status_t st = gw__logger_init_into(&lg, 0, c.f);
        gw__logger_fini(&lg);
        capture_take(&c, &r, "log", "GW_DEBUG", "info", "error");
        if (st != GW_OK)
            worst = GW_ERR_CONFIG;
        else
            put(&r, "log", "GW_DEBUG", "ok",
                "GW_DEBUG, GW_DEBUG_FILE and GW_DEBUG_SUBSYS are well formed");
    }

    /* 2. The launcher. */
    gw_config_t cfg;
    gw_config_init(&cfg);
    gw_launch_env_t keep;
    const char *which = launcher_present();
    int launched = 0;
    if (which && strcmp(which, "PMIX_NAMESPACE") == 0) {
        snprintf(line, sizeof(line),
                 "a PMIx server (PMIX_NAMESPACE=%s): rank, size, root and job token come from it "
                 "when the ranks start (a collective step, not taken by this probe)",
                 getenv("PMIX_NAMESPACE"));
        put(&r, "launcher", "pmix", "info", line);
    } else {
        gw_status_t st = gw__launch_env_config(&c.lg, GW_DEFAULT_TIMEOUT_MS, &cfg, &keep);
        capture_take(&c, &r, "launcher", which ? which : "none", "info", which ? "error" : "info");
        if (st == GW_OK) {
            launched = 1;
            const char *root = cfg.root ? cfg.root : getenv("GW_ROOT");
            const char *token = cfg.job_token ? cfg.job_token : getenv("GW_JOB_TOKEN");
            snprintf(line, sizeof(line), "rank %d of %d (from %s), root %s, job token %s", cfg.rank,
                     cfg.size, which, root && root[0] ? root : "none",
                     token && token[0] ? "set (not shown)"
                                       : "none: the job would run unauthenticated");
            put(&r, "launcher", which, "ok", line);
        } else if (which) {
            worst = GW_ERR_CONFIG;
        } else {
            put(&r, "launcher", "none", "info",
                "no launcher's variables: a rank started here alone would be rank 0 of 1 "
                "(gradwire launch, torchrun, mpirun or srun set them)");
        }
    }

    /* 3. The communicator's own variables, as gw_comm_init would resolve
     * them (a one-rank job when no launcher says otherwise: a root is then
     * not needed, but a malformed one is still an error). */
    if (!launched) {
        gw_config_init(&cfg);
        cfg.rank = 0;
        cfg.size = 1;
    }
    gw_comm_resolved_t res;
    gw_status_t st = gw__comm_resolve(&cfg, &c.lg, &res);
    capture_take(&c, &r, "config", "environment", "info", "error");
    if (st != GW_OK) {
        worst = GW_ERR_CONFIG;
        put(&r, "config", "environment", "error", "a rank would refuse to start (above)");
        memset(&res, 0, sizeof(res));
        res.timeout_ms = GW_DEFAULT_TIMEOUT_MS;
        res.nsocks = 1;
    } else {
        snprintf(line, sizeof(line),
                 "GW_TRANSPORT=%s, timeout %d ms, %d socket%s per TCP peer, algorithm %s%s%s",
                 gw__select_mode_name(res.mode), res.timeout_ms, res.nsocks,
                 res.nsocks == 1 ? "" : "s", gw_algo_name(res.algo),
                 res.ifname ? ", GW_SOCKET_IFNAME=" : "", res.ifname ? res.ifname : "");
        put(&r, "config", "environment", "ok", line);
    }

    /* 4. The transports. */
    probe_transports(&c, &r, &res, &worst);
    capture_end(&c);
    if (r.truncated)
        return GW_ERR_NO_MEMORY;
    return worst;
}
