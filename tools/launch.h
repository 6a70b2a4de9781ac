/*
 * launch.h - `gradwire launch`: start the ranks of a job on this host.
 *
 * The launcher forks N ranks of one command with the environment that
 * gw_comm_init_env() reads, relays their output line by line with a rank
 * prefix, forwards signals, and turns the ranks' exit statuses into one exit
 * status. It is a command-line tool built on the public API only.
 *
 * launch_setup.c prepares a job (command line, command lookup, port, token,
 * environment); launch.c runs it.
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

struct gw_launch_opts {
    int nranks;
    int port; /* 0: pick a free one */
    const char *host;
    double timeout_s; /* 0: none */
    int prefix;       /* prefix output lines with "[RANK] " */
    char **cmd;       /* NULL-terminated, points into argv */
};

/* Run `gradwire launch`: argv[0] is "launch", the options and the command
 * follow. Returns the process exit status; never calls exit() itself so the
 * caller decides how to leave. Not reentrant: it installs a signal mask and
 * a signalfd for the duration of the call and restores the mask after. */
int gw_launch_main(int argc, char **argv);

/* Print the launch usage text to out. */
void gw_launch_usage(FILE *out);

/* Fill *o from the command line (argv[0] is "launch"). Returns -1 to go on,
 * or the exit status to leave with: 0 after --help, GW_LAUNCH_EXIT_USAGE
 * after printing what is wrong. */
int gw_launch_parse_args(int argc, char **argv, struct gw_launch_opts *o);

/* 0 if cmd can be executed (searched in PATH as execvp does), else the
 * exit status (126 or 127) after printing why. */
int gw_launch_check_command(const char *cmd);

/* *port = a port that is free on host now. 0, or -1 after printing why. */
int gw_launch_free_port(const char *host, int *port);

/* Set the variables every rank shares (sizes, rendezvous address, job
 * token) in our own environment, for the children to inherit. 0 or -1. */
int gw_launch_set_env(const struct gw_launch_opts *o, int port);

#endif
