/*
 * test_hostfile.c - the hostfile parser of `gradwire launch --hostfile`
 * (tools/launch_hostfile.c), compiled in: the three spellings of a host
 * and its slots, comments and blank lines, and every refusal naming the
 * file and line (a line too long used to be split by fgets into two
 * lines, the second read as a host).
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tools/kit/kit_parse.c"
#include "tools/launch_hostfile.c"

typedef struct parsed {
    struct gw_launch_remote rm;
    char err[512];
    int rc;
} parsed_t;

static void parse(parsed_t *p, const char *text, size_t len)
{
    memset(p, 0, sizeof(*p));
    p->rm.names = calloc(GW_LAUNCH_HOSTS_MAX, sizeof(*p->rm.names));
    p->rm.slots = calloc(GW_LAUNCH_HOSTS_MAX, sizeof(*p->rm.slots));
    cr_assert(p->rm.names && p->rm.slots);
    p->rc = gw_launch_hostfile_parse(text, len, "hosts", &p->rm, p->err, sizeof(p->err));
}

static void done(parsed_t *p)
{
    for (int h = 0; h < p->rm.nhosts; h++)
        free(p->rm.names[h]);
    free(p->rm.names);
    free(p->rm.slots);
}

static void expect_hosts(const char *text, int n, const char *const *names, const int *slots)
{
    parsed_t p;
    parse(&p, text, strlen(text));
    cr_assert_eq(p.rc, 0, "refused: %s", p.err);
    cr_assert_eq(p.rm.nhosts, n, "%d hosts, want %d", p.rm.nhosts, n);
    for (int h = 0; h < n; h++) {
        cr_assert_str_eq(p.rm.names[h], names[h]);
        cr_assert_eq(p.rm.slots[h], slots[h], "host %s: %d slots, want %d", names[h], p.rm.slots[h],
                     slots[h]);
    }
    done(&p);
}

static void expect_refused(const char *text, size_t len, const char *needle)
{
    parsed_t p;
    parse(&p, text, len);
    cr_assert_eq(p.rc, -1, "accepted (%d hosts)", p.rm.nhosts);
    cr_assert(strstr(p.err, needle), "\"%s\" lacks \"%s\"", p.err, needle);
    done(&p);
}

Test(hostfile, the_three_spellings_comments_and_blanks)
{
    static const char *const names[] = {"n0", "n1", "n2", "user@n3.example", "[::1]", "10.0.0.5"};
    static const int slots[] = {2, 1, 4, 3, 1, 8};
    expect_hosts("n0 slots=2\n# a comment\nn1\n\n  n2:4\t# trailing\r\nuser@n3.example   slots=3\n"
                 "[::1]\n10.0.0.5:8",
                 6, names, slots);
}

Test(hostfile, refusals_name_the_file_and_line)
{
    expect_refused("n0\nn1 slots=two\n", 16,
                   "hosts:2: slots= wants a number of ranks: \"slots=two\"");
    expect_refused("n0 slots=0\n", 11, "hosts:1: slots= wants");
    expect_refused("n0 slots=1025\n", 14, "slots= wants");
    expect_refused("n0:x\n", 5, "hosts:1: HOST:N wants a number of ranks: \"n0:x\"");
    expect_refused("n0:\n", 4, "HOST:N wants");
    expect_refused("n0 slots=2 extra\n", 17, "hosts:1: too many words");
    expect_refused("-oProxyCommand=x\n", 17, "hosts:1: not a host name");
    expect_refused(":4\n", 3, "not a host name");
    expect_refused("n0;reboot\n", 10, "a host name has letters, digits");
    expect_refused("n$(id)\n", 7, "a host name has letters");
    expect_refused("# only a comment\n\n", 18, "the hostfile hosts names no host");
    expect_refused("", 0, "names no host");
    expect_refused("n0\nn\0 1\n", 7, "hosts:2: a NUL byte");
}

Test(hostfile, a_long_line_is_refused_not_split)
{
    /* 5000 bytes of comment, then "n1": fgets(1024) read the comment's
     * tail as host names. */
    size_t len = 5000 + 4;
    char *text = malloc(len);
    cr_assert_not_null(text);
    text[0] = '#';
    memset(text + 1, 'x', 4999);
    memcpy(text + 5000, "\nn1\n", 4);
    expect_refused(text, len, "hosts:1: a line of 5000 bytes, longer than 4096");
    free(text);
    /* 4096 bytes is still a line. */
    len = 4096 + 4;
    text = malloc(len);
    cr_assert_not_null(text);
    memset(text, ' ', 4096);
    memcpy(text + 4090, "n0  \n", 5);
    memcpy(text + 4095, "\nn1\n", 4);
    parsed_t p;
    parse(&p, text, 4099);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.rm.nhosts, 2);
    done(&p);
    free(text);
}

Test(hostfile, at_most_the_host_limit)
{
    size_t cap = (GW_LAUNCH_HOSTS_MAX + 1) * 8;
    char *text = malloc(cap);
    cr_assert_not_null(text);
    size_t len = 0;
    for (int h = 0; h < GW_LAUNCH_HOSTS_MAX; h++)
        len += (size_t)snprintf(text + len, cap - len, "h%d\n", h);
    parsed_t p;
    parse(&p, text, len);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.rm.nhosts, GW_LAUNCH_HOSTS_MAX);
    done(&p);
    len += (size_t)snprintf(text + len, cap - len, "one-more\n");
    expect_refused(text, len, "more than 1024 hosts");
    free(text);
}
