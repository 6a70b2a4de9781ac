/*
 * kit_parse.c - the numbers on gradwire's command lines. Every program
 * reads them with these few functions, so "64K" means the same everywhere
 * and a value with trailing junk, a leading space or a sign where none
 * belongs is refused everywhere rather than read halfway (strtol alone
 * accepts " 12abc" as 12).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"

int gw_kit_parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int gw_kit_parse_double(const char *s, double min, double max, double *out)
{
    char *end = NULL;
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !(v >= min && v <= max))
        return -1;
    *out = v;
    return 0;
}

int gw_kit_parse_u64(const char *s, uint64_t *out)
{
    char *end = NULL;
    /* strtoull would accept "-1" and wrap it to the largest value. */
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0')
        return -1;
    *out = (uint64_t)v;
    return 0;
}

int gw_kit_parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    if (!s || !isdigit((unsigned char)*s))
        return -1; /* no sign, no space: strtoull would accept and wrap "-1" */
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0)
        return -1;
    int shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        break;
    case 'm':
    case 'M':
        shift = 20;
        break;
    case 'g':
    case 'G':
        shift = 30;
        break;
    case 't':
    case 'T':
        shift = 40;
        break;
    case '\0':
        break;
    default:
        return -1;
    }
    if (shift) {
        end++;
        if (strcmp(end, "B") == 0 || strcmp(end, "iB") == 0)
            end += strlen(end);
    }
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)v << shift;
    return 0;
}

int gw_kit_parse_int_list(const char *s, int *out, int max)
{
    int n = 0;
    const char *p = s;
    if (!s || !*s)
        return -1;
    for (;;) {
        char *end = NULL;
        if (!isdigit((unsigned char)*p))
            return -1;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || v <= 0 || v > 1000000 || n == max)
            return -1;
        out[n++] = (int)v;
        if (*end == '\0')
            return n;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}
