/*
 * cli_main.c - the `gradwire` command's main: a dispatcher for subcommands.
 *
 *   gradwire launch -n N CMD ARGS...   start N local ranks of CMD
 *   gradwire train [options]           the data-parallel SGD trainer
 *   gradwire check [options]           cluster acceptance test, run as a job
 *   gradwire hostlist EXPR...          expand Slurm host lists
 *   gradwire info [--json]             what gradwire would use on this node, and why
 *   gradwire info --env                every variable gradwire reads (the registry)
 *   gradwire fr DIR                    merge the ranks' flight recorder dumps
 *   gradwire status [--json]           how a running job's ranks are doing
 *   gradwire version                   print the version of the library
 *
 * Built on the public API only, like any user of the library.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fr_cmd.h"
#include "gradwire.h"
#include "hostlist_cmd.h"
#include "info.h"
#include "launch.h"
#include "status_cmd.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire COMMAND [ARGS...]\n"
                 "\n"
                 "commands:\n"
                 "  launch -n N [options] CMD [ARGS...]   start N local ranks of CMD\n"
                 "  train [options]                       data-parallel SGD trainer\n"
                 "                                        (gradwire-train --help)\n"
                 "  check [options]                       cluster acceptance test, run as a job:\n"
                 "                                        gradwire launch ... gradwire check\n"
                 "                                        (gradwire-check --help)\n"
                 "  hostlist EXPR...                      expand Slurm host lists, one host\n"
                 "                                        per line (as scontrol show hostnames)\n"
                 "  info [--json]                         what gradwire would use on this node\n"
                 "                                        and why (transports, settings, ports)\n"
                 "  info --env                            every variable gradwire reads, with\n"
                 "                                        its value here, default and meaning\n"
                 "  fr DIR                                merge the ranks' flight recorder\n"
                 "                                        dumps (GW_FR_DUMP=DIR): where each\n"
                 "                                        rank was, where they diverged\n"
                 "  status [--root H:P] [--json]          how a running job's ranks are doing:\n"
                 "                                        current collective, done, bytes per\n"
                 "                                        peer, lagging ranks (asks its rank 0)\n"
                 "  version                               print the gradwire version\n"
                 "  help                                  show this help\n"
                 "\n"
                 "Run `gradwire COMMAND --help` for a command's options.\n");
}

/* Run the program `name` (gradwire-train, gradwire-check): next to this
 * executable (installed), in `subdir` beside it (the build tree), else from
 * PATH. */
static int run_program(const char *name, const char *subdir, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            for (int i = 0; i < 2; i++) {
                char path[PATH_MAX + 64];
                if (i == 0)
                    snprintf(path, sizeof(path), "%s/%s", self, name);
                else
                    snprintf(path, sizeof(path), "%s/%s/%s", self, subdir, name);
                if (access(path, X_OK) == 0) {
                    argv[0] = path;
                    execv(path, argv);
                    fprintf(stderr, "gradwire: cannot run %s: %s\n", path, strerror(errno));
                    return 126;
                }
            }
        }
    }
    argv[0] = (char *)name;
    execvp(name, argv);
    fprintf(stderr, "gradwire: cannot run %s (not beside gradwire nor on PATH): %s\n", name,
            strerror(errno));
    return 127;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "launch") == 0)
        return gw_launch_main(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0)
        return run_program("gradwire-train", "optimizer", argv + 1);
    if (strcmp(cmd, "check") == 0)
        return run_program("gradwire-check", "tools", argv + 1);
    if (strcmp(cmd, "hostlist") == 0)
        return gw_hostlist_main(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0)
        return gw_info_main(argc - 1, argv + 1);
    if (strcmp(cmd, "fr") == 0)
        return gw_fr_main(argc - 1, argv + 1);
    if (strcmp(cmd, "status") == 0)
        return gw_status_main(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        /* Both versions: the header this tool was built against and the
         * library it runs with, which differ after a partial upgrade. */
        printf("gradwire %s (built with %d.%d.%d)\n", gw_version(), GW_VERSION_MAJOR,
               GW_VERSION_MINOR, GW_VERSION_PATCH);
        return 0;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "gradwire: unknown command \"%s\"\n", cmd);
    usage(stderr);
    return 2;
}
