/*
 * launch_setup.c - what `gradwire launch` does before the first fork: read
 * the command line, make sure the command exists, pick the rendezvous port
 * and the job token, and set the environment every rank shares. Kept apart
 * from launch.c, which runs the job, because none of it involves a child.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kit.h"
#include "launch.h"

void gw_launch_usage(FILE *out)
{
    fprintf(
        out,
        "usage: gradwire launch -n N [options] [--] CMD [ARGS...]\n"
        "       gradwire launch --hosts PREFIX [-n N] [options] [--] CMD [ARGS...]\n"
        "       gradwire launch --hostfile FILE [-n N] [options] [--] CMD [ARGS...]\n"
        "\n"
        "Start N ranks of CMD with the environment gradwire reads: RANK, WORLD_SIZE,\n"
        "LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GW_RANK, GW_SIZE,\n"
        "GW_ROOT=ADDR:PORT2 and GW_JOB_TOKEN (a fresh random token unless GW_JOB_TOKEN\n"
        "is already set). MASTER_PORT and GW_ROOT's port differ, so that\n"
        "torch.distributed's store and gradwire's root can live in one job. They run on this host, or with --hosts on emulated hosts:\n"
        "the network namespaces PREFIX0, PREFIX1, ... that `scripts/cluster.sh up`\n"
        "makes (needs root). There rank 0 runs on host 0, whose eth0 address is the\n"
        "root address, and GROUP_RANK is the number of a rank's host.\n"
        "\n"
        "options:\n"
        "  -n, --nproc N        number of ranks (1..%d); with --hosts the default\n"
        "                       is one per host (K per host with --ranks-per-host);\n"
        "                       mpirun's -np N and torchrun's --nproc-per-node N\n"
        "                       (--nproc_per_node) are the same option\n"
        "  --host ADDR          rendezvous address of rank 0 (default 127.0.0.1, or\n"
        "                       host 0's address with --hosts)\n"
        "  --port P             MASTER_PORT, with GW_ROOT on P+1 (default: two free\n"
        "                       ports on ADDR)\n"
        "  --hosts PREFIX       run rank r in network namespace PREFIX<r mod H>, H the\n"
        "                       number of namespaces PREFIX0..PREFIX<H-1> (--netns:\n"
        "                       the same)\n"
        "  --ranks-per-host K   with --hosts: ranks kK..kK+K-1 run on host k\n"
        "  --hostfile FILE      run the ranks on the machines FILE lists, one per line:\n"
        "                       HOST, HOST slots=N or HOST:N (ranks fill the hosts in\n"
        "                       order; -n N takes the first N slots, default all), each\n"
        "                       started over ssh; rank 0's host is the root; the token\n"
        "                       travels on ssh's stdin, never on a command line\n"
        "  --ssh CMD            the ssh command and its options (default\n"
        "                       \"ssh -T -o BatchMode=yes\"), split on blanks\n"
        "  --timeout S          stop every rank and exit 124 after S seconds\n"
        "  --no-prefix          do not prefix output lines with \"[RANK] \"\n"
        "  --bind auto|core|none  bind rank r to the r-th core the launcher may use:\n"
        "                       auto (the default) when all ranks run on this\n"
        "                       machine and there are no more ranks than those\n"
        "                       cores, else unbound with a note on stderr; core:\n"
        "                       always (round robin); none: never (a machine shared\n"
        "                       with other work); ranks started over ssh are never\n"
        "                       bound\n"
        "  --elastic            a rank that fails or dies does not end the job: the\n"
        "                       others go on (gradwire train --elastic shrinks to\n"
        "                       them); each loss is said on stderr\n"
        "  -h, --help           show this help\n"
        "\n"
        "Output lines of each rank are relayed whole, prefixed with its rank.\n"
        "SIGINT/SIGTERM are forwarded to every rank; a second one kills them.\n"
        "When a rank fails, the others get SIGTERM, then SIGKILL after 2 s.\n"
        "\n"
        "exit status: 0 if every rank exits 0; else the first failing rank's\n"
        "status (128+N if killed by signal N); with --elastic, 0 if any rank\n"
        "exits 0 (the survivors finished), else the first failure's status;\n"
        "124 on --timeout; 126/127 if CMD\n"
        "cannot be run or is not found; 2 for a usage error; 1 if the job could\n"
        "not be set up (e.g. no such emulated hosts).\n",
        GW_LAUNCH_MAX_RANKS);
}

static const gw_kit_prog_t prog = {"gradwire launch",
                                   "\nusage: gradwire launch -n N [options] [--] CMD [ARGS...]"
                                   " (see gradwire launch --help)\n"};
#define usage_error(...) gw_kit_usage_error(&prog, __VA_ARGS__)

/* Fill *o from the command line. Returns -1 to go on, or an exit status.
 * Options end at the first word that is not one ("+" in the option
 * string): that is the command, and its own options are its own. */
int gw_launch_parse_args(int argc, char **argv, struct gw_launch_opts *o)
{
    enum {
        OPT_PORT = 256,
        OPT_HOSTS,
        OPT_RANKS_PER_HOST,
        OPT_HOST,
        OPT_TIMEOUT,
        OPT_NO_PREFIX,
        OPT_HOSTFILE,
        OPT_SSH,
        OPT_ELASTIC,
        OPT_BIND
    };
    static const struct option longopts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"np", required_argument, NULL, 'n'},
        {"nproc-per-node", required_argument, NULL, 'n'},
        {"nproc_per_node", required_argument, NULL, 'n'},
        {"port", required_argument, NULL, OPT_PORT},
        {"hosts", required_argument, NULL, OPT_HOSTS},
        {"netns", required_argument, NULL, OPT_HOSTS},
        {"ranks-per-host", required_argument, NULL, OPT_RANKS_PER_HOST},
        {"host", required_argument, NULL, OPT_HOST},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"no-prefix", no_argument, NULL, OPT_NO_PREFIX},
        {"hostfile", required_argument, NULL, OPT_HOSTFILE},
        {"ssh", required_argument, NULL, OPT_SSH},
        {"elastic", no_argument, NULL, OPT_ELASTIC},
        {"bind", required_argument, NULL, OPT_BIND},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    long n;
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->prefix = 1;
    o->bind = GW_LAUNCH_BIND_AUTO;
    gw_kit_getopt_begin();
    while ((c = getopt_long(argc, argv, "+:n:h", longopts, NULL)) != -1) {
        const char *v = optarg;
        switch (c) {
        case 'h':
            gw_launch_usage(stdout);
            return 0;
        case OPT_NO_PREFIX:
            o->prefix = 0;
            break;
        case OPT_ELASTIC:
            o->elastic = 1;
            break;
        case OPT_BIND:
            if (gw_launch_bind_parse(v, &o->bind) != 0)
                return usage_error("--bind wants auto, core or none, not \"%s\"", v);
            break;
        case 'n':
            /* mpirun's -np N: getopt reads "-np" as -n with the value "p",
             * so the value is the next word. */
            if (strcmp(v, "p") == 0 && strcmp(argv[optind - 1], "-np") == 0) {
                if (optind >= argc)
                    return usage_error("-np needs a number of ranks");
                v = argv[optind++];
            }
            if (gw_kit_parse_long(v, 1, GW_LAUNCH_MAX_RANKS, &n) != 0)
                return usage_error("-n wants a number of ranks in 1..%d, not \"%s\"",
                                   GW_LAUNCH_MAX_RANKS, v);
            o->nranks = (int)n;
            break;
        case OPT_PORT:
            if (gw_kit_parse_long(v, 1, 65535, &n) != 0)
                return usage_error("--port wants a port in 1..65535, not \"%s\"", v);
            o->port = (int)n;
            break;
        case OPT_HOSTS:
            /* A namespace is a file in /run/netns: its name cannot hold a
             * '/' or be "." or "..". */
            if (!*v)
                return usage_error("%s needs a namespace name prefix", argv[optind - 1]);
            if (strchr(v, '/') || v[0] == '.' || strlen(v) > 200)
                return usage_error("bad namespace prefix \"%s\": no '/', no leading '.', at "
                                   "most 200 characters",
                                   v);
            o->netns = v;
            break;
        case OPT_RANKS_PER_HOST:
            if (gw_kit_parse_long(v, 1, GW_LAUNCH_MAX_RANKS, &n) != 0)
                return usage_error("--ranks-per-host wants a number in 1..%d, not \"%s\"",
                                   GW_LAUNCH_MAX_RANKS, v);
            o->ranks_per_host = (int)n;
            break;
        case OPT_HOST:
            if (!*v)
                return usage_error("--host needs an address");
            o->host = v;
            o->host_given = 1;
            break;
        case OPT_HOSTFILE:
            if (!*v)
                return usage_error("--hostfile needs a file name");
            o->hostfile = v;
            break;
        case OPT_SSH:
            if (!*v)
                return usage_error("--ssh needs a command");
            o->ssh = v;
            break;
        case OPT_TIMEOUT:
            if (gw_kit_parse_double(v, 0, 1e7, &o->timeout_s) != 0 || o->timeout_s == 0)
                return usage_error("--timeout wants seconds in (0, 1e7], not \"%s\"", v);
            break;
        case ':':
            /* Say what the value is, where the option's name does not. */
            if (optopt == OPT_HOSTS)
                return usage_error("%s needs a namespace name prefix", argv[optind - 1]);
            if (optopt == OPT_HOST)
                return usage_error("--host needs an address");
            return gw_kit_getopt_error(&prog, c, argv);
        default:
            return gw_kit_getopt_error(&prog, c, argv);
        }
    }
    if (o->hostfile && o->netns)
        return usage_error("--hostfile and --hosts exclude each other");
    if (o->ssh && !o->hostfile)
        return usage_error("--ssh needs --hostfile FILE");
    if (o->nranks == 0 && !o->netns && !o->hostfile)
        return usage_error("-n N (the number of ranks) is required");
    if (o->ranks_per_host && !o->netns)
        return usage_error("--ranks-per-host needs --hosts PREFIX (a hostfile gives slots)");
    if (optind >= argc)
        return usage_error("no command given");
    o->cmd = argv + optind;
    return -1;
}

/* Find a port that is free on host now by binding port 0 and asking the
 * kernel which one it gave. Another process could take it before rank 0
 * binds it; rank 0 then fails with a clear "address in use" error. */
static int free_port_once(const char *host, int *port);

int gw_launch_free_port(const char *host, int avoid, int *port)
{
    /* The kernel hands out ports in turn; a few tries give another one. */
    for (int tries = 0; tries < 8; tries++) {
        if (free_port_once(host, port) != 0)
            return -1;
        if (*port != avoid)
            return 0;
    }
    fprintf(stderr, "gradwire launch: no second free port on %s\n", host);
    return -1;
}

int gw_launch_ports(const char *host, int given, int *port, int *root_port)
{
    if (given) {
        *port = given;
        *root_port = given < 65535 ? given + 1 : given - 1;
        return 0;
    }
    if (gw_launch_free_port(host, 0, port) != 0)
        return -1;
    return gw_launch_free_port(host, *port, root_port);
}

static int free_port_once(const char *host, int *port)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int rc = getaddrinfo(host, "0", &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "gradwire launch: cannot resolve host \"%s\": %s\n", host,
                gai_strerror(rc));
        return -1;
    }
    int err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&ss, &len) == 0) {
            *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
            close(fd);
            freeaddrinfo(res);
            return 0;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    fprintf(stderr, "gradwire launch: cannot bind a port on %s: %s\n", host, strerror(err));
    return -1;
}

static int make_token(char out[33])
{
    uint8_t b[16];
    size_t got = 0;
    while (got < sizeof(b)) {
        ssize_t n = getrandom(b + got, sizeof(b) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "gradwire launch: getrandom failed: %m\n");
            return -1;
        }
        got += (size_t)n;
    }
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", b[i]);
    return 0;
}

/* Check up front, as execvp would search, that cmd can be run, so that a
 * typo gives one clear message instead of N failing ranks. Returns 0 or the
 * exit status to leave with. */
int gw_launch_check_command(const char *cmd)
{
    struct stat st;
    if (strchr(cmd, '/')) {
        if (stat(cmd, &st) != 0) {
            fprintf(stderr, "gradwire launch: %s: %m\n", cmd);
            return GW_LAUNCH_EXIT_NOTFOUND;
        }
        if (!S_ISREG(st.st_mode) || access(cmd, X_OK) != 0) {
            fprintf(stderr, "gradwire launch: %s: not an executable file\n", cmd);
            return GW_LAUNCH_EXIT_NOEXEC;
        }
        return 0;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/bin:/usr/bin";
    int denied = 0;
    char buf[4096];
    while (1) {
        const char *colon = strchr(path, ':');
        size_t dl = colon ? (size_t)(colon - path) : strlen(path);
        int n = snprintf(buf, sizeof(buf), "%.*s/%s", (int)(dl ? dl : 1), dl ? path : ".", cmd);
        if (n > 0 && (size_t)n < sizeof(buf) && stat(buf, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(buf, X_OK) == 0)
                return 0;
            denied = 1;
        }
        if (!colon)
            break;
        path = colon + 1;
    }
    if (denied) {
        fprintf(stderr, "gradwire launch: %s: permission denied\n", cmd);
        return GW_LAUNCH_EXIT_NOEXEC;
    }
    fprintf(stderr, "gradwire launch: %s: command not found\n", cmd);
    return GW_LAUNCH_EXIT_NOTFOUND;
}

/* The environment every rank shares; RANK and LOCAL_RANK are set per child. */
int gw_launch_set_env(const struct gw_launch_opts *o, int port, int root_port)
{
    char num[16], root[512], token[33];
    const char *tok = getenv("GW_JOB_TOKEN");
    /* As in the library, set but empty or padded is a mistake to report,
     * not a reason to make up a token the user did not ask for. */
    if (tok &&
        (!*tok || isspace((unsigned char)tok[0]) || isspace((unsigned char)tok[strlen(tok) - 1]))) {
        fprintf(stderr,
                "gradwire launch: GW_JOB_TOKEN=\"%s\" is set but empty or has white space at an "
                "end; give the job's secret or unset it for a random one\n",
                tok);
        return -1;
    }
    snprintf(num, sizeof(num), "%d", o->nranks);
    if (setenv("WORLD_SIZE", num, 1) || setenv("LOCAL_WORLD_SIZE", num, 1) ||
        setenv("GW_SIZE", num, 1))
        goto err_setenv;
    /* An IPv6 literal needs brackets in "host:port". */
    if (snprintf(root, sizeof(root), strchr(o->host, ':') ? "[%s]:%d" : "%s:%d", o->host,
                 root_port) >= (int)sizeof(root)) {
        fprintf(stderr, "gradwire launch: --host is too long\n");
        return -1;
    }
    snprintf(num, sizeof(num), "%d", port);
    if (setenv("MASTER_ADDR", o->host, 1) || setenv("MASTER_PORT", num, 1) ||
        setenv("GW_ROOT", root, 1))
        goto err_setenv;
    if (!tok) {
        if (make_token(token) != 0)
            return -1;
        if (setenv("GW_JOB_TOKEN", token, 1))
            goto err_setenv;
    }
    return 0;
err_setenv:
    fprintf(stderr, "gradwire launch: setenv failed: %m\n");
    return -1;
}
