/*
 * gradwire.c - the `gradwire` command: a dispatcher for subcommands.
 *
 *   gradwire launch -n N CMD ARGS...   start N local ranks of CMD
 *   gradwire version                   print the version of the library
 *
 * Built on the public API only, like any user of the library.
 */
#include <stdio.h>
#include <string.h>

#include "gradwire.h"
#include "launch.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire COMMAND [ARGS...]\n"
                 "\n"
                 "commands:\n"
                 "  launch -n N [options] CMD [ARGS...]   start N local ranks of CMD\n"
                 "  version                               print the gradwire version\n"
                 "  help                                  show this help\n"
                 "\n"
                 "Run `gradwire COMMAND --help` for a command's options.\n");
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
