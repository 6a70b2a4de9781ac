/*
 * launch_hostfile.c - the hostfile of `gradwire launch --hostfile FILE`,
 * parsed from its bytes (launch_ssh.c reads the file; the fuzz target
 * tests/fuzz/fuzz_hostfile.c and tests/tools/test_hostfile.c call this).
 *
 * One host per line: "HOST", "HOST slots=N" or "HOST:N" (N ranks, 1 to
 * GW_LAUNCH_MAX_RANKS, default 1); '#' starts a comment, blank lines are
 * skipped, words are separated by blanks (spaces, tabs, CR). A host name is
 * what ssh takes as a destination: letters, digits and . _ - @ % : [ ],
 * not starting with '-' (ssh would read an option). Anything else is an
 * error naming the file, the line and the text, never a guess: a line
 * longer than GW_LAUNCH_HOSTFILE_LINE_MAX (a stray binary file), a NUL
 * byte, a third word, a bad count, more than GW_LAUNCH_HOSTS_MAX hosts, or
 * a file that names no host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit.h"
#include "launch.h"

static int bad(char *err, size_t cap, const char *path, int line, const char *what,
               const char *text, size_t n)
{
    snprintf(err, cap, "%s:%d: %s: \"%.*s\" (want HOST, HOST slots=N or HOST:N)", path, line, what,
             (int)(n > 200 ? 200 : n), text);
    return -1;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static int host_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("._-@%:[]", c) != NULL;
}

/* One line's words, at most three (the third is only for the error). */
typedef struct words {
    const char *w[3];
    size_t n[3];
    int count;
} words_t;

static void split_words(const char *s, size_t len, words_t *out)
{
    out->count = 0;
    size_t i = 0;
    while (i < len && out->count < 3) {
        while (i < len && is_blank(s[i]))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && !is_blank(s[i]))
            i++;
        out->w[out->count] = s + start;
        out->n[out->count++] = i - start;
    }
}

/* "N" of slots=N or HOST:N: 1..GW_LAUNCH_MAX_RANKS, digits only. */
static int parse_slots(const char *s, size_t n, long *slots)
{
    char num[16];
    if (n == 0 || n >= sizeof(num))
        return -1;
    memcpy(num, s, n);
    num[n] = '\0';
    return gw_kit_parse_long(num, 1, GW_LAUNCH_MAX_RANKS, slots);
}

static int add_host(struct gw_launch_remote *rm, const char *name, size_t n, long slots, char *err,
                    size_t cap)
{
    if (rm->nhosts == GW_LAUNCH_HOSTS_MAX) {
        snprintf(err, cap, "more than %d hosts in the hostfile", GW_LAUNCH_HOSTS_MAX);
        return -1;
    }
    char *copy = malloc(n + 1);
    if (!copy) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    memcpy(copy, name, n);
    copy[n] = '\0';
    rm->names[rm->nhosts] = copy;
    rm->slots[rm->nhosts++] = (int)slots;
    return 0;
}

static int parse_line(const char *s, size_t len, const char *path, int line,
                      struct gw_launch_remote *rm, char *err, size_t cap)
{
    const char *hash = memchr(s, '#', len);
    if (hash)
        len = (size_t)(hash - s);
    words_t wd;
    split_words(s, len, &wd);
    if (wd.count == 0)
        return 0;
    const char *host = wd.w[0];
    size_t hn = wd.n[0];
    long slots = 1;
    if (wd.count == 3)
        return bad(err, cap, path, line, "too many words", s, len);
    if (wd.count == 2) {
        if (wd.n[1] < 6 || memcmp(wd.w[1], "slots=", 6) != 0 ||
            parse_slots(wd.w[1] + 6, wd.n[1] - 6, &slots) != 0)
            return bad(err, cap, path, line, "slots= wants a number of ranks", wd.w[1], wd.n[1]);
    } else if (host[0] != '[') {
        const char *colon = NULL;
        for (size_t i = 0; i < hn; i++)
            if (host[i] == ':')
                colon = host + i;
        if (colon) {
            if (parse_slots(colon + 1, hn - (size_t)(colon + 1 - host), &slots) != 0)
                return bad(err, cap, path, line, "HOST:N wants a number of ranks", host, hn);
            hn = (size_t)(colon - host);
        }
    }
    if (hn == 0 || host[0] == '-')
        return bad(err, cap, path, line, "not a host name", host, wd.n[0]);
    for (size_t i = 0; i < hn; i++)
        if (!host_char_ok((unsigned char)host[i]))
            return bad(err, cap, path, line,
                       "a host name has letters, digits and . _ - @ % : [ ] only", host, wd.n[0]);
    return add_host(rm, host, hn, slots, err, cap);
}

int gw_launch_hostfile_parse(const char *text, size_t len, const char *path,
                             struct gw_launch_remote *rm, char *err, size_t cap)
{
    rm->nhosts = 0;
    int line = 0;
    size_t at = 0;
    while (at < len) {
        line++;
        const char *s = text + at;
        const char *nl = memchr(s, '\n', len - at);
        size_t n = nl ? (size_t)(nl - s) : len - at;
        at += n + (nl ? 1 : 0);
        if (n > GW_LAUNCH_HOSTFILE_LINE_MAX) {
            snprintf(err, cap, "%s:%d: a line of %zu bytes, longer than %d (is this a hostfile?)",
                     path, line, n, GW_LAUNCH_HOSTFILE_LINE_MAX);
            return -1;
        }
        if (memchr(s, '\0', n)) {
            snprintf(err, cap, "%s:%d: a NUL byte (is this a hostfile?)", path, line);
            return -1;
        }
        if (parse_line(s, n, path, line, rm, err, cap) != 0)
            return -1;
    }
    if (rm->nhosts == 0) {
        snprintf(err, cap, "the hostfile %s names no host", path);
        return -1;
    }
    return 0;
}
