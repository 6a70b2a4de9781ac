/*
 * hostlist_cmd.c - `gradwire hostlist EXPR...`: print the host names of
 * Slurm host list expressions, one per line, exactly as `scontrol show
 * hostnames EXPR` does (common/hostlist.c has the rules, shared with the
 * library, which reads SLURM_JOB_NODELIST with them). Several expressions
 * are expanded in turn; "-" reads them from standard input, one per line.
 * Exit status: 0, 1 for an expression that is not a host list (the message
 * says what and where), 2 for a bad command line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"
#include "hostlist_cmd.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: gradwire hostlist EXPR... | -\n"
                 "\n"
                 "Print the hosts of Slurm host list expressions, one per line, as\n"
                 "`scontrol show hostnames` does: gradwire hostlist 'n[01-03],gpu[1-2]-ib[0-1]'.\n"
                 "With -, read the expressions from standard input, one per line.\n");
}

static int expand_one(const char *expr)
{
    gw_hostlist_t list;
    char err[512];
    gw_status_t st = gw__hostlist_expand(expr, &list, err, sizeof(err));
    if (st != GW_OK) {
        fprintf(stderr, "gradwire hostlist: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < list.count; i++)
        puts(list.names[i]);
    gw__hostlist_free(&list);
    return 0;
}

int gw_hostlist_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    int rc = 0;
    for (int i = 1; i < argc && rc == 0; i++) {
        if (strcmp(argv[i], "-") != 0) {
            rc = expand_one(argv[i]);
            continue;
        }
        char *line = NULL;
        size_t cap = 0;
        ssize_t n;
        while (rc == 0 && (n = getline(&line, &cap, stdin)) >= 0) {
            if (n > 0 && line[n - 1] == '\n')
                line[n - 1] = '\0';
            rc = expand_one(line);
        }
        free(line);
    }
    if (fflush(stdout) != 0) {
        perror("gradwire hostlist: writing the names");
        return 1;
    }
    return rc;
}
