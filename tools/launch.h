/*
 * launch.h - `gradwire launch`: start the ranks of a job on this host.
 *
 * The launcher forks N ranks of one command with the environment that
 * gw_comm_init_env() reads, relays their output line by line with a rank
 * prefix, forwards signals, and turns the ranks' exit statuses into one exit
 * status. It is a command-line tool built on the public API only.
 *
 * With --hosts PREFIX the ranks run on emulated hosts instead: network
 * namespaces PREFIX0, PREFIX1, ... (scripts/cluster.sh makes them), each rank
 * entering its host's namespace with setns(2) before exec, as `ip netns exec`
 * would. The launcher itself stays in its own namespace.
 *
 * With --hostfile FILE they run on the machines the file names, each
 * started over ssh (launch_ssh.c).
 *
 * launch_setup.c prepares a job (command line, command lookup, port, token,
 * environment), launch_hosts.c finds the emulated hosts and the root's
 * address among them; launch.c runs the job, with launch_spawn.c (forking
 * a rank), launch_relay.c (its output), launch_signals.c and launch_reap.c
 * (how the ranks end), which share launch_internal.h.
 */
#ifndef GW_TOOLS_LAUNCH_H
#define GW_TOOLS_LAUNCH_H

#include <stdio.h>

/* Exit statuses of the launcher besides a rank's own status. */
#define GW_LAUNCH_EXIT_USAGE 2      /* bad command line */
#define GW_LAUNCH_EXIT_TIMEOUT 124  /* --timeout expired (as timeout(1)) */
#define GW_LAUNCH_EXIT_NOEXEC 126   /* CMD found but not executable */
#define GW_LAUNCH_EXIT_NOTFOUND 127 /* CMD not found (as the shell) */

#define GW_LAUNCH_MAX_RANKS 1024

/* --bind (launch_bind.c) */
enum { GW_LAUNCH_BIND_AUTO = 0, GW_LAUNCH_BIND_CORE = 1, GW_LAUNCH_BIND_NONE = 2 };

struct gw_launch_opts {
    int nranks; /* 0 with --hosts and no -n: one job slot per host */
    int port;   /* 0: pick a free one */
    const char *host;
    int host_given;       /* --host was on the command line */
    double timeout_s;     /* 0: none */
    int prefix;           /* prefix output lines with "[RANK] " */
    int elastic;          /* --elastic: a rank that fails does not end the job */
    int bind;             /* --bind: GW_LAUNCH_BIND_* (launch_bind.c) */
    const char *netns;    /* --hosts PREFIX: rank r runs in namespace PREFIX<host>, or NULL */
    int ranks_per_host;   /* --ranks-per-host K: K consecutive ranks per host; 0: round robin */
    const char *hostfile; /* --hostfile FILE: ranks over ssh, or NULL */
    const char *ssh;      /* --ssh CMD, or NULL: ssh -T -o BatchMode=yes */
    const struct gw_launch_remote *remote; /* the hosts of --hostfile, once read */
    char **cmd;                            /* NULL-terminated, points into argv */
};

/* The emulated hosts a job with --hosts runs on. */
struct gw_launch_hosts {
    int nhosts; /* hosts the job uses (0: none, run here) */
    int *ns_fd; /* per host, an open descriptor of /run/netns/PREFIX<h> */
};

/* The hosts of --hostfile (launch_ssh.c) and the ssh command. */
struct gw_launch_remote {
    int nhosts;
    char **names; /* as the hostfile spells them */
    int *slots;   /* ranks per host */
    char **ssh_argv;
    int ssh_argc;
    char *ssh_buf;
};

/* Run `gradwire launch`: argv[0] is "launch", the options and the command
 * follow. Returns the process exit status; never calls exit() itself so the
 * caller decides how to leave. Not reentrant: it installs a signal mask and
 * a signalfd for the duration of the call and restores the mask after. */
int gw_launch_main(int argc, char **argv);

/* launch_bind.c: --bind's value into *mode (-1: not auto, core or none). */
int gw_launch_bind_parse(const char *v, int *mode);
/* The CPUs ranks are bound to, in rank order (rank r: cpus[r % n]), at
 * most cap; 0 when nothing is to be bound. */
int gw_launch_bind_plan(const struct gw_launch_opts *o, int *cpus, int cap);
/* In rank r's child: bind it (a failure is said on stderr, not fatal). */
void gw_launch_bind_rank(const int *cpus, int ncpus, int r);

/* Print the launch usage text to out. */
void gw_launch_usage(FILE *out);

/* Fill *o from the command line (argv[0] is "launch"). Returns -1 to go on,
 * or the exit status to leave with: 0 after --help, GW_LAUNCH_EXIT_USAGE
 * after printing what is wrong. */
int gw_launch_parse_args(int argc, char **argv, struct gw_launch_opts *o);

/* 0 if cmd can be executed (searched in PATH as execvp does), else the
 * exit status (126 or 127) after printing why. */
int gw_launch_check_command(const char *cmd);

/* *port = a port that is free on host now (not avoid). 0, or -1 after
 * printing why. */
int gw_launch_free_port(const char *host, int avoid, int *port);

/* The two rendezvous ports on host: *port for MASTER_PORT (torch's store,
 * --port P or a free one) and *root_port for gradwire's GW_ROOT (P + 1, or
 * another free one), so that torch.distributed and gradwire can both
 * rendezvous in one job. 0, or -1 after printing why. */
int gw_launch_ports(const char *host, int given, int *port, int *root_port);

/* Find the namespaces PREFIX0, PREFIX1, ... of o->netns and open those the
 * job needs; fills in o->nranks when -n was not given. 0, or -1 after
 * printing why (no such namespace: a hint to run scripts/cluster.sh up). */
int gw_launch_hosts_open(struct gw_launch_opts *o, struct gw_launch_hosts *h);
void gw_launch_hosts_close(struct gw_launch_hosts *h);

/* The host of rank r, and r's index and the rank count on that host. */
int gw_launch_host_of(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int r);
void gw_launch_local_rank(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int r,
                          int *local_rank, int *local_size);

/* Inside host 0's namespace: its address (the IPv4 address of eth0, else of
 * the first other interface that is up, unless --host gave one) into addr,
 * and the two rendezvous ports on it (gw_launch_ports, from o->port). 0, or
 * -1 after printing why. */
int gw_launch_hosts_root(const struct gw_launch_opts *o, const struct gw_launch_hosts *h,
                         char *addr, size_t cap, int *port, int *root_port);

/* Move the calling process into host h's network namespace with a /sys of
 * that namespace, as `ip netns exec` does. For a forked child before exec:
 * prints why on stderr and returns -1 on failure. */
int gw_launch_enter_host(const struct gw_launch_opts *o, const struct gw_launch_hosts *h, int host);

/* Set the variables every rank shares (sizes, rendezvous address, job
 * token) in our own environment, for the children to inherit. 0 or -1. */
int gw_launch_set_env(const struct gw_launch_opts *o, int port, int root_port);

/* ---- --hostfile (launch_ssh.c, launch_hostfile.c) ---- */

#define GW_LAUNCH_HOSTS_MAX 1024
#define GW_LAUNCH_HOSTFILE_LINE_MAX 4096
/* Parse a hostfile's len bytes (path names it in errors) into rm->names
 * and rm->slots, arrays of GW_LAUNCH_HOSTS_MAX the caller allocated (and
 * frees, names included, also after an error). 0, or -1 with the reason in
 * err ("FILE:LINE: what: \"text\" ..."). */
int gw_launch_hostfile_parse(const char *text, size_t len, const char *path,
                             struct gw_launch_remote *rm, char *err, size_t cap);

/* Read o->hostfile and the ssh command; fills in o->nranks when -n was not
 * given. 0, or -1 after printing why. */
int gw_launch_ssh_open(struct gw_launch_opts *o, struct gw_launch_remote *rm);
void gw_launch_ssh_close(struct gw_launch_remote *rm);
/* Rank r's host, its index there and the ranks there (block placement). */
void gw_launch_ssh_place(const struct gw_launch_remote *rm, int r, int *host, int *local,
                         int *nlocal);
/* The rendezvous ports on rank 0's host o->host: checked free when it is
 * this machine, else drawn at random (--port chooses). 0 or -1. */
int gw_launch_ssh_root(const struct gw_launch_opts *o, int *port, int *root_port);
/* A pipe (close-on-exec) holding the job token's line (GW_JOB_TOKEN, or
 * an empty line), for a rank's ssh to read first: tok[0] its stdin, tok[1]
 * kept by the launcher until the rank ends. 0, or -1 with errno. */
int gw_launch_ssh_token_pipe(int tok[2]);
/* In the forked child of rank r, stdin the pipe the launcher writes the
 * token into: exec ssh to r's host with the command line the file's top
 * describes. Does not return. */
__attribute__((noreturn)) void gw_launch_ssh_exec(const struct gw_launch_opts *o,
                                                  const struct gw_launch_remote *rm, int r);

#endif
