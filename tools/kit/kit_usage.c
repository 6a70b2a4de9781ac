/*
 * kit_usage.c - usage errors in one form for every program: "NAME: what is
 * wrong", then the program's pointer to its --help, exit status 2. And the
 * two cases of a getopt_long loop that are the same in every program: an
 * option without its value and an option nobody knows.
 */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <string.h>

#include "kit.h"

int gw_kit_usage_error(const gw_kit_prog_t *p, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", p->name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(p->tail, stderr);
    return GW_KIT_EXIT_USAGE;
}

void gw_kit_getopt_begin(void)
{
    opterr = 0;
    optind = 0;
}

int gw_kit_getopt_error(const gw_kit_prog_t *p, int c, char **argv)
{
    /* optind has moved past the option, except for an unknown letter
     * inside a cluster such as -vx, which only optopt names; an unknown
     * long option leaves optopt 0, and a long option given a value it does
     * not take is named best by what was typed. */
    const char *typed = argv[optind - 1];
    if (c == ':')
        return gw_kit_usage_error(p, "option %s needs a value", typed);
    if (optopt > 0 && optopt < 128 && isprint(optopt) && strncmp(typed, "--", 2) != 0)
        return gw_kit_usage_error(p, "unknown option \"-%c\"", optopt);
    return gw_kit_usage_error(p, "unknown option \"%s\"", typed);
}

int gw_kit_no_operands(const gw_kit_prog_t *p, int argc, char **argv)
{
    if (optind < argc)
        return gw_kit_usage_error(p, "unexpected argument \"%s\"", argv[optind]);
    return -1;
}
