/*
 * fuzz_env.c - libFuzzer target for the parsers of environment values
 * (common/env.c: integers, "host:port" of GW_ROOT and MASTER_ADDR; the
 * GW_DEBUG level and the GW_DEBUG_FILE pattern of common/log.c; the codec
 * names of gw_codec_parse; GW_SOCKET_IFNAME's interface lists,
 * transport/sock_ifspec.c; GW_DEBUG_SUBSYS), which read whatever a user or
 * a launcher set.
 *
 * The first byte picks the parser, the rest is the value (up to its first
 * NUL, as an environment string ends there). Beyond not crashing, what a
 * parser accepts must be in range and round-trip: an integer prints back to
 * a string that parses to the same value, a host:port gives a non-empty host
 * that fits its buffer and a port in 1..65535.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/log.h"
#include "fuzz_util.h"
#include "transport/sock.h"

static const long ranges[][2] = {
    {1, 64}, {0, 1000000}, {-1, 255}, {LONG_MIN, LONG_MAX}, {1, 65535}, {0, 0}, {-5, -1}, {2, 2},
};

static void fuzz_long(const char *s, unsigned pick)
{
    long min = ranges[pick % 8][0], max = ranges[pick % 8][1], v = 12345;
    gw_status_t st = gw__parse_long(s, min, max, &v);
    if (st != GW_OK) {
        FUZZ_CHECK(st == GW_ERR_INVALID_ARG && v == 12345); /* output untouched */
        return;
    }
    FUZZ_CHECK(v >= min && v <= max);
    char buf[32];
    snprintf(buf, sizeof(buf), "%ld", v);
    long w = 0;
    FUZZ_CHECK(gw__parse_long(buf, min, max, &w) == GW_OK && w == v);

    /* The same value through the registry's check, as GW_NSOCKS is read. */
    gw_env_var_t var = {.name = "GW_FUZZ_VALUE", .type = GW_ENV_T_INT, .min = min, .max = max};
    long e = 0;
    char why[320];
    FUZZ_CHECK(gw__env_check(&var, s, &e, NULL, why, sizeof(why)) == GW_OK && e == v);
}

/* A real registry entry (GW_NSOCKS, or GW_IB_GID_INDEX whose range starts
 * at -1) through the environment. */
static void fuzz_env_int(const char *s, unsigned pick)
{
    gw_env_id_t id = pick & 1 ? GW_ENV_IB_GID_INDEX : GW_ENV_NSOCKS;
    const gw_env_var_t *v = gw__env_var(id);
    long e = 12345;
    setenv(v->name, s, 1);
    gw_status_t st = gw__env_int(fuzz_logger(), id, &e);
    if (st != GW_OK)
        FUZZ_CHECK(st == GW_ERR_CONFIG && e == 12345);
    else
        FUZZ_CHECK(e >= v->min && e <= v->max);
    unsetenv(v->name);
}

static void fuzz_hostport(const char *s, unsigned pick)
{
    size_t cap = (pick & 1) ? 8 : 256; /* a small buffer finds a missed bound */
    char *host = malloc(cap);
    if (!host)
        abort();
    int port = -1;
    gw_status_t st = gw__parse_hostport(s, host, cap, &port);
    if (st == GW_OK) {
        FUZZ_CHECK(port >= 1 && port <= 65535);
        size_t n = strnlen(host, cap);
        FUZZ_CHECK(n > 0 && n < cap);
        FUZZ_CHECK(strstr(s, host) != NULL);
    } else {
        FUZZ_CHECK(st == GW_ERR_INVALID_ARG && port == -1);
    }
    free(host);
}

/* GW_DEBUG and GW_DEBUG_FILE. The file pattern goes below a directory that
 * does not exist, so whatever it expands to, nothing is created. */
static void fuzz_logger_env(const char *s, unsigned pick)
{
    char pattern[4200];
    if (pick & 1) {
        unsetenv("GW_DEBUG_FILE");
        setenv("GW_DEBUG", s, 1);
    } else {
        setenv("GW_DEBUG", "NONE", 1);
        snprintf(pattern, sizeof(pattern), "/nonexistent-gw-fuzz/%s", s);
        setenv("GW_DEBUG_FILE", pattern, 1);
    }
    gw_logger_t lg;
    gw__logger_init(&lg, 3);
    FUZZ_CHECK(lg.level >= GW_LOG_NONE && lg.level <= GW_LOG_TRACE);
    FUZZ_CHECK(memchr(lg.host, '\0', sizeof(lg.host)) != NULL);
    FUZZ_CHECK(!lg.owns_file); /* nothing can be opened below the missing directory */
    gw__logger_fini(&lg);
}

static void fuzz_codec(const char *s)
{
    gw_codec_t c = GW_CODEC_COUNT;
    if (gw_codec_parse(s, &c) != GW_OK)
        return;
    FUZZ_CHECK(c >= GW_CODEC_NONE && c < GW_CODEC_COUNT);
    gw_codec_t again = GW_CODEC_COUNT;
    FUZZ_CHECK(gw_codec_parse(gw_codec_name(c), &again) == GW_OK && again == c);
}

/* GW_SOCKET_IFNAME: what parses is a list of 1..GW_IFSPEC_MAX names, each
 * non-empty, NUL-terminated within its buffer, free of white space and
 * '/', a substring of the value; matching never reads past a name, and a
 * name the list holds exactly is allowed unless the list excludes. */
static void fuzz_ifspec(const char *s)
{
    gw_ifspec_t spec;
    char err[200];
    memset(&spec, 0x5a, sizeof(spec));
    if (gw__ifspec_parse(s, &spec, err, sizeof(err)) != GW_OK) {
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0');
        return;
    }
    FUZZ_CHECK(spec.count >= 1 && spec.count <= GW_IFSPEC_MAX);
    for (int i = 0; i < spec.count; i++) {
        const char *name = spec.items[i].name;
        size_t n = strnlen(name, sizeof(spec.items[i].name));
        FUZZ_CHECK(n > 0 && n < sizeof(spec.items[i].name));
        FUZZ_CHECK(strpbrk(name, " \t\n/") == NULL);
        FUZZ_CHECK(strstr(s, name) != NULL);
        /* A listed name is allowed, or, in an excluding list, refused. */
        FUZZ_CHECK(gw__ifspec_match(&spec, name) == !spec.exclude);
    }
}

/* GW_DEBUG_SUBSYS through the logger: the list it keeps is within bounds,
 * every kept name NUL-terminated, and the logger usable whatever the value. */
static void fuzz_debug_subsys(const char *s)
{
    unsetenv("GW_DEBUG_FILE");
    setenv("GW_DEBUG", "NONE", 1);
    setenv("GW_DEBUG_SUBSYS", s, 1);
    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    /* -1 is "^ALL": no INFO or TRACE line at all. */
    FUZZ_CHECK(lg.nsubsys >= -1 && lg.nsubsys <= GW_LOG_SUBSYS_MAX);
    for (int i = 0; i < lg.nsubsys; i++)
        FUZZ_CHECK(memchr(lg.subsys[i], '\0', GW_LOG_SUBSYS_LEN) != NULL);
    FUZZ_CHECK(lg.file == stderr && !lg.owns_file);
    gw__logger_fini(&lg);
    unsetenv("GW_DEBUG_SUBSYS");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = fuzz_strdup(data + 1, size - 1);
    unsigned pick = data[0] >> 3;
    switch ((data[0] & 7) % 7) {
    case 0:
        fuzz_long(s, pick);
        break;
    case 1:
        fuzz_env_int(s, pick);
        break;
    case 2:
        fuzz_hostport(s, pick);
        break;
    case 3:
        fuzz_logger_env(s, pick);
        break;
    case 4:
        fuzz_codec(s);
        break;
    case 5:
        fuzz_ifspec(s);
        break;
    default:
        fuzz_debug_subsys(s);
        break;
    }
    free(s);
    return 0;
}
