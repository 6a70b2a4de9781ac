/*
 * hostlist_cmd.h - `gradwire hostlist`: Slurm host list expressions
 * expanded, one host per line (hostlist_cmd.c).
 */
#ifndef GW_TOOLS_HOSTLIST_CMD_H
#define GW_TOOLS_HOSTLIST_CMD_H

/* argv[0] is "hostlist"; returns the exit status. */
int gw_hostlist_main(int argc, char **argv);

#endif
