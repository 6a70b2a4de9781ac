/*
 * info.c - `gradwire info [--json]`: what a rank started on this node, now,
 * with this environment, would use, and why not the rest.
 *
 * Four parts:
 *   - the library's own probe (gw_node_probe): version and build, the
 *     logger's, the launcher's and the communicator's variables as a rank
 *     would resolve them (malformed ones are errors), and every transport
 *     opened as a rank would open it, with what it would use or why not;
 *   - the network interfaces (getifaddrs): state, MTU, addresses;
 *   - the RDMA ports sysfs shows (the kit's reader): state, link layer,
 *     GIDs with their type and Ethernet device;
 *   - the environment in effect: every variable of the registry
 *     (common/env_registry.def: GW_*, and the launchers' that gradwire
 *     reads) that is set, secrets shown only as "set", and other GW_*
 *     names marked as ignored.
 * `gradwire info --env` lists the registry of variables instead, and
 * --env-markdown and --errors-markdown print the reference pages
 * (tools/info_env.c).
 * Exit status: 0, or 1 when a setting is malformed (a rank would refuse to
 * start), 2 for a bad command line. A transport this node cannot offer is
 * not a failure: most nodes have no RDMA.
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/env_registry.h"
#include "gradwire.h"
#include "info.h"
#include "kit.h"

extern char **environ;

#define REPORT_CAP (64 * 1024)

typedef struct finding {
    char *section, *name, *verdict, *text;
} finding_t;

/* The probe's report split in place into findings. */
static int split_report(char *report, finding_t *out, int cap)
{
    int n = 0;
    for (char *line = strtok(report, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        char *f[4] = {line, NULL, NULL, NULL};
        for (int k = 1; k < 4; k++) {
            char *tab = f[k - 1] ? strchr(f[k - 1], '\t') : NULL;
            if (tab) {
                *tab = '\0';
                f[k] = tab + 1;
            }
        }
        if (!f[3])
            continue;
        out[n++] = (finding_t){f[0], f[1], f[2], f[3]};
    }
    return n;
}

/* ---- interfaces ---- */

typedef struct iface {
    char name[IF_NAMESIZE + 1];
    int up, running, loopback, mtu;
    char addrs[400];
} iface_t;

static int interfaces(iface_t *out, int cap)
{
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0)
        return 0;
    int n = 0, fd = socket(AF_INET, SOCK_DGRAM, 0);
    for (const struct ifaddrs *a = all; a; a = a->ifa_next) {
        int i;
        for (i = 0; i < n; i++)
            if (strcmp(out[i].name, a->ifa_name) == 0)
                break;
        if (i == n) {
            if (n == cap)
                continue;
            memset(&out[n], 0, sizeof(out[n]));
            snprintf(out[n].name, sizeof(out[n].name), "%s", a->ifa_name);
            out[n].up = (a->ifa_flags & IFF_UP) != 0;
            out[n].running = (a->ifa_flags & IFF_RUNNING) != 0;
            out[n].loopback = (a->ifa_flags & IFF_LOOPBACK) != 0;
            out[n].mtu = -1;
            struct ifreq req;
            memset(&req, 0, sizeof(req));
            snprintf(req.ifr_name, sizeof(req.ifr_name), "%s", a->ifa_name);
            if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &req) == 0)
                out[n].mtu = req.ifr_mtu;
            n++;
        }
        if (!a->ifa_addr ||
            (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6))
            continue;
        char addr[INET6_ADDRSTRLEN] = "";
        const void *raw =
            a->ifa_addr->sa_family == AF_INET
                ? (const void *)&((const struct sockaddr_in *)a->ifa_addr)->sin_addr
                : (const void *)&((const struct sockaddr_in6 *)a->ifa_addr)->sin6_addr;
        inet_ntop(a->ifa_addr->sa_family, raw, addr, sizeof(addr));
        size_t used = strlen(out[i].addrs);
        snprintf(out[i].addrs + used, sizeof(out[i].addrs) - used, "%s%s", used ? " " : "", addr);
    }
    if (fd >= 0)
        close(fd);
    freeifaddrs(all);
    return n;
}

/* ---- the environment ---- */

/* The registry's entry of environ's "NAME=value", NULL if it has none. */
static const gw_env_var_t *entry_var(const char *entry)
{
    char name[128];
    const char *eq = strchr(entry, '=');
    if (!eq || (size_t)(eq - entry) >= sizeof(name))
        return NULL;
    snprintf(name, sizeof(name), "%.*s", (int)(eq - entry), entry);
    return gw__env_find(name);
}

/* Every variable of the registry (common/env_registry.def), and any other
 * GW_* name, which a rank ignores and the text view marks. */
static int relevant(const char *entry)
{
    return strncmp(entry, "GW_", 3) == 0 || entry_var(entry) != NULL;
}

static int secret(const char *entry)
{
    const gw_env_var_t *v = entry_var(entry);
    return v && v->type == GW_ENV_T_SECRET;
}

static int by_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int environment(const char **out, int cap)
{
    int n = 0;
    for (char **e = environ; *e && n < cap; e++)
        if (relevant(*e))
            out[n++] = *e;
    qsort(out, (size_t)n, sizeof(*out), by_str);
    return n;
}

/* ---- text ---- */

/* A GW_* name the registry lacks: a rank ignores it; a likely typo is
 * named, as rank 0's WARN line does. */
static void unknown(const char *entry)
{
    char name[128];
    snprintf(name, sizeof(name), "%.*s", (int)(strcspn(entry, "=")), entry);
    const gw_env_var_t *near = gw__env_closest(name);
    printf("  %s (not a gradwire variable: ignored%s%s%s)\n", entry, near ? "; did you mean " : "",
           near ? near->name : "", near ? "?" : "");
}

static void print_text(const finding_t *f, int nf, const iface_t *ifs, int nif,
                       const gw_kit_rdma_port_t *ports, int np, const char **env, int nenv)
{
    const char *last = "";
    for (int i = 0; i < nf; i++) {
        if (strcmp(f[i].section, last) != 0) {
            printf("%s%s:\n", i ? "\n" : "", f[i].section);
            last = f[i].section;
        }
        const char *mark = strcmp(f[i].verdict, "ok") == 0         ? "ok  "
                           : strcmp(f[i].verdict, "error") == 0    ? "ERR "
                           : strcmp(f[i].verdict, "unusable") == 0 ? "no  "
                                                                   : "    ";
        printf("  %s %-12s %s\n", mark, f[i].name, f[i].text);
    }
    printf("\ninterfaces:\n");
    for (int i = 0; i < nif; i++)
        printf("  %-12s %-4s %-7s mtu %-5d %s\n", ifs[i].name, ifs[i].up ? "up" : "down",
               ifs[i].running ? "running" : "-", ifs[i].mtu, ifs[i].addrs[0] ? ifs[i].addrs : "-");
    printf("\nrdma ports (sysfs):\n");
    if (np == 0)
        printf("  none (no /sys/class/infiniband: no RDMA device, or rdma modules not loaded)\n");
    for (int i = 0; i < np; i++) {
        printf("  %s:%d %s %s\n", ports[i].device, ports[i].port, ports[i].state,
               ports[i].link_layer[0] ? ports[i].link_layer : "?");
        for (int g = 0; g < ports[i].ngids; g++)
            printf("    gid %d %s %s%s%s\n", ports[i].gids[g].index, ports[i].gids[g].gid,
                   ports[i].gids[g].type[0] ? ports[i].gids[g].type : "",
                   ports[i].gids[g].netdev[0] ? " on " : "", ports[i].gids[g].netdev);
    }
    printf("\nenvironment:\n");
    if (nenv == 0)
        printf("  none of gradwire's or a launcher's variables is set\n");
    for (int i = 0; i < nenv; i++) {
        if (secret(env[i]))
            printf("  %.*s (set, not shown)\n", (int)(strchr(env[i], '=') - env[i]), env[i]);
        else if (!entry_var(env[i]))
            unknown(env[i]);
        else
            printf("  %s\n", env[i]);
    }
}

/* ---- JSON ---- */

static void print_json(const finding_t *f, int nf, const iface_t *ifs, int nif,
                       const gw_kit_rdma_port_t *ports, int np, const char **env, int nenv,
                       int malformed)
{
    gw_kit_json_t j;
    gw_kit_json_start(&j, stdout, 6);
    gw_kit_json_object(&j, NULL, "\n  ");
    gw_kit_json_str(&j, "version", gw_version());
    gw_kit_json_bool(&j, "malformed_settings", malformed);
    gw_kit_json_array(&j, "findings", "\n    ");
    for (int i = 0; i < nf; i++) {
        gw_kit_json_object(&j, NULL, " ");
        gw_kit_json_str(&j, "section", f[i].section);
        gw_kit_json_str(&j, "name", f[i].name);
        gw_kit_json_str(&j, "verdict", f[i].verdict);
        gw_kit_json_str(&j, "text", f[i].text);
        gw_kit_json_close(&j, " ");
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_array(&j, "interfaces", "\n    ");
    for (int i = 0; i < nif; i++) {
        gw_kit_json_object(&j, NULL, " ");
        gw_kit_json_str(&j, "name", ifs[i].name);
        gw_kit_json_bool(&j, "up", ifs[i].up);
        gw_kit_json_bool(&j, "running", ifs[i].running);
        gw_kit_json_bool(&j, "loopback", ifs[i].loopback);
        gw_kit_json_int_or_null(&j, "mtu", ifs[i].mtu > 0, ifs[i].mtu);
        gw_kit_json_str(&j, "addresses", ifs[i].addrs);
        gw_kit_json_close(&j, " ");
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_array(&j, "rdma_ports", "\n    ");
    for (int i = 0; i < np; i++) {
        gw_kit_json_object(&j, NULL, " ");
        gw_kit_json_str(&j, "device", ports[i].device);
        gw_kit_json_int(&j, "port", ports[i].port);
        gw_kit_json_str(&j, "state", ports[i].state);
        gw_kit_json_str(&j, "link_layer", ports[i].link_layer);
        gw_kit_json_array(&j, "gids", " ");
        for (int g = 0; g < ports[i].ngids; g++) {
            gw_kit_json_object(&j, NULL, " ");
            gw_kit_json_int(&j, "index", ports[i].gids[g].index);
            gw_kit_json_str(&j, "gid", ports[i].gids[g].gid);
            gw_kit_json_str(&j, "type", ports[i].gids[g].type);
            gw_kit_json_str(&j, "netdev", ports[i].gids[g].netdev);
            gw_kit_json_close(&j, " ");
        }
        gw_kit_json_close(&j, " ");
        gw_kit_json_close(&j, " ");
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_object(&j, "environment", "\n    ");
    for (int i = 0; i < nenv; i++) {
        char name[128];
        const char *eq = strchr(env[i], '=');
        snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
        if (secret(env[i]))
            gw_kit_json_str(&j, name, "(set, not shown)");
        else
            gw_kit_json_str(&j, name, eq + 1);
    }
    gw_kit_json_close(&j, "\n  ");
    gw_kit_json_close(&j, "\n");
    fputc('\n', stdout);
}

int gw_info_main(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (argc == 2 && (strcmp(argv[i], "--env") == 0 || strcmp(argv[i], "-c") == 0 ||
                                 strcmp(argv[i], "--env-markdown") == 0 ||
                                 strcmp(argv[i], "--errors-markdown") == 0)) {
            return gw_info_env_main(argv[i]);
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: gradwire info [--json]\n"
                   "       gradwire info --env | -c | --env-markdown | --errors-markdown\n"
                   "\n"
                   "What a rank started here, now, with this environment, would use, and why\n"
                   "not the rest: build, settings (malformed ones are errors), transports,\n"
                   "interfaces, RDMA ports, and the variables in effect. Sends nothing.\n"
                   "\n"
                   "  --env, -c          every variable gradwire reads: value here, default,\n"
                   "                     what it accepts, category and meaning\n"
                   "  --env-markdown     the same as Markdown (docs/reference/environment.md)\n"
                   "  --errors-markdown  every error status (docs/reference/errors.md)\n"
                   "\n"
                   "Exit status: 0; 1 when a setting is malformed; 2 for a bad command line.\n");
            return 0;
        } else {
            fprintf(stderr, "gradwire info: unknown argument \"%s\" (try --help)\n", argv[i]);
            return GW_KIT_EXIT_USAGE;
        }
    }
    char *report = malloc(REPORT_CAP);
    if (!report) {
        fprintf(stderr, "gradwire info: out of memory\n");
        return 1;
    }
    gw_status_t st = gw_node_probe(report, REPORT_CAP);
    if (st != GW_OK && st != GW_ERR_CONFIG)
        fprintf(stderr, "gradwire info: the probe failed: %s\n", gw_status_str(st));
    static finding_t f[256];
    int nf = split_report(report, f, 256);
    static iface_t ifs[64];
    int nif = interfaces(ifs, 64);
    static gw_kit_rdma_port_t ports[32];
    int np = gw_kit_rdma_ports(ports, 32);
    const char *env[256];
    int nenv = environment(env, 256);
    if (json)
        print_json(f, nf, ifs, nif, ports, np, env, nenv, st == GW_ERR_CONFIG);
    else
        print_text(f, nf, ifs, nif, ports, np, env, nenv);
    free(report);
    if (st == GW_ERR_CONFIG && !json)
        fprintf(stderr,
                "gradwire info: a setting above is malformed: a rank would refuse to start\n");
    return st == GW_OK ? 0 : 1;
}
