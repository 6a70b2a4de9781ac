/*
 * env_registry.c - the registry of environment variables (the table comes
 * from env_registry.def) and the value checks that need only the table.
 *
 * A value is checked the same way wherever it is read: by the parser when
 * the setting is used (env.c), by the check of every set GW_* variable
 * when a communicator is created, and by `gradwire info --env`. So a
 * malformed value fails creation even where the setting would not have
 * been used, and the message is the same in all three.
 */
#include "common/env_registry.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const gw_env_var_t registry[GW_ENV_COUNT] = {
#define GW_ENV_VAR(id, name, type, cat, min, max, dflt, choices, dflt_text, help) \
    [GW_ENV_##                                                                    \
        id] = {name, GW_ENV_T_##type, GW_ENV_C_##cat, min, max, dflt, choices, dflt_text, help},
#include "common/env_registry.def"
#undef GW_ENV_VAR
};

const gw_env_var_t *gw__env_var(gw_env_id_t id)
{
    return (unsigned)id < GW_ENV_COUNT ? &registry[id] : NULL;
}

const gw_env_var_t *gw__env_find(const char *name)
{
    for (size_t i = 0; name && i < GW_ENV_COUNT; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

/* Levenshtein distance of a and b, capped: names are short. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63)
        return 64;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t sub = diag + (a[i - 1] != b[j - 1]);
            size_t best = up + 1 < row[j - 1] + 1 ? up + 1 : row[j - 1] + 1;
            row[j] = sub < best ? sub : best;
            diag = up;
        }
    }
    return row[lb];
}

const gw_env_var_t *gw__env_closest(const char *name)
{
    /* One or two edits, and at most one per four characters after "GW_":
     * GW_NSOCK is a typo of GW_NSOCKS, but GW_CI (a script's own) is not
     * one of GW_SIZE, nor GW_RXE_GID_INDEX of GW_IB_GID_INDEX. */
    size_t len = strlen(name), tail = strncmp(name, "GW_", 3) == 0 ? len - 3 : len;
    const gw_env_var_t *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < GW_ENV_COUNT; i++) {
        size_t d = distance(name, registry[i].name);
        if (d < best_d && 4 * d <= tail) {
            best_d = d;
            best = &registry[i];
        }
    }
    return best;
}

gw_status_t gw__parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return GW_ERR_INVALID_ARG;
    /* strtol would skip leading white space and take a '+'; a value that
     * only parses that way is refused, so " 2" is not 2. */
    const char *d = s[0] == '-' ? s + 1 : s;
    if (!isdigit((unsigned char)*d))
        return GW_ERR_INVALID_ARG;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return GW_ERR_INVALID_ARG;
    *out = v;
    return GW_OK;
}

/* A host name's characters (RFC 952/1123, and '_' that some sites use). */
static int host_char(char c)
{
    return isalnum((unsigned char)c) || c == '.' || c == '-' || c == '_';
}

/* An IPv6 literal's characters, with a zone ("%eth0") after the address. */
static int v6_ok(const char *s, size_t n)
{
    size_t i = 0;
    int colons = 0;
    for (; i < n && s[i] != '%'; i++) {
        if (s[i] == ':')
            colons++;
        else if (!isxdigit((unsigned char)s[i]) && s[i] != '.')
            return 0;
    }
    if (colons < 2)
        return 0;
    if (i < n && i + 1 == n)
        return 0; /* a '%' with no zone */
    for (i = i < n ? i + 1 : n; i < n; i++)
        if (!host_char(s[i]))
            return 0;
    return 1;
}

gw_status_t gw__parse_hostport(const char *s, char *host, size_t host_cap, int *port)
{
    if (!s || !*s || host_cap == 0)
        return GW_ERR_INVALID_ARG;
    const char *colon;
    const char *hstart = s;
    size_t hlen;
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return GW_ERR_INVALID_ARG;
        hstart = s + 1;
        hlen = (size_t)(close - hstart);
        colon = close + 1;
        if (!v6_ok(hstart, hlen))
            return GW_ERR_INVALID_ARG;
    } else {
        /* Without brackets the first ':' ends the host: "a:1:2" is a
         * mistake (an IPv6 address needs brackets), not host "a:1". */
        colon = strchr(s, ':');
        if (!colon)
            return GW_ERR_INVALID_ARG;
        hlen = (size_t)(colon - s);
        for (size_t i = 0; i < hlen; i++)
            if (!host_char(s[i]))
                return GW_ERR_INVALID_ARG;
    }
    if (hlen == 0 || hlen >= host_cap)
        return GW_ERR_INVALID_ARG;
    long p;
    if (gw__parse_long(colon + 1, 1, 65535, &p) != GW_OK)
        return GW_ERR_INVALID_ARG;
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return GW_OK;
}

/* Index of value among v's '|'-separated choices (any case), -1: none. */
static int choice_index(const gw_env_var_t *v, const char *value)
{
    int i = 0;
    for (const char *c = v->choices; c && *c; i++) {
        size_t n = strcspn(c, "|");
        if (strlen(value) == n && strncasecmp(c, value, n) == 0)
            return i;
        c += n + (c[n] == '|');
    }
    return -1;
}

void gw__env_accepted(const gw_env_var_t *v, char *buf, size_t cap)
{
    switch (v->type) {
    case GW_ENV_T_INT:
        snprintf(buf, cap, "an integer in [%ld, %ld]", v->min, v->max);
        return;
    case GW_ENV_T_BOOL:
        snprintf(buf, cap, "0 or 1");
        return;
    case GW_ENV_T_SECRET:
        snprintf(buf, cap, "a secret of at least %ld characters", v->min);
        return;
    case GW_ENV_T_PATH:
        snprintf(buf, cap, "a file name");
        return;
    case GW_ENV_T_HOSTPORT:
        snprintf(buf, cap, "host:port (or [v6addr]:port) with a port in [1, 65535]");
        return;
    case GW_ENV_T_CHOICE: {
        size_t n = (size_t)snprintf(buf, cap, "one of ");
        for (const char *c = v->choices; c && *c && n < cap;) {
            size_t len = strcspn(c, "|");
            n += (size_t)snprintf(buf + n, cap - n, "%s%.*s", c == v->choices ? "" : ", ", (int)len,
                                  c);
            c += len + (c[len] == '|');
        }
        return;
    }
    case GW_ENV_T_STR:
        break;
    }
    snprintf(buf, cap, "text without white space at either end");
}

void gw__env_default_text(const gw_env_var_t *v, char *buf, size_t cap)
{
    if (v->dflt_text) {
        snprintf(buf, cap, "%s", v->dflt_text);
    } else if (v->type == GW_ENV_T_CHOICE) {
        const char *c = v->choices;
        for (long i = 0; c && i < v->dflt; i++)
            c += strcspn(c, "|") + 1;
        snprintf(buf, cap, "%.*s", c ? (int)strcspn(c, "|") : 0, c ? c : "");
    } else {
        snprintf(buf, cap, "%ld", v->dflt);
    }
}

static int blank(char c) { return isspace((unsigned char)c) || iscntrl((unsigned char)c); }

gw_status_t gw__env_check(const gw_env_var_t *v, const char *value, long *num, int *index,
                          char *why, size_t cap)
{
    char accepted[160];
    gw__env_accepted(v, accepted, sizeof(accepted));
    if (!*value && v->type == GW_ENV_T_STR && v->min < 0)
        return GW_OK;
    if (!*value) {
        snprintf(why, cap, "is set but empty; accepted: %s (unset it for the default)", accepted);
        return GW_ERR_CONFIG;
    }
    if (blank(value[0]) || blank(value[strlen(value) - 1])) {
        snprintf(why, cap, "has white space at an end; accepted: %s", accepted);
        return GW_ERR_CONFIG;
    }
    long n;
    int i;
    char host[256];
    int port;
    switch (v->type) {
    case GW_ENV_T_INT:
    case GW_ENV_T_BOOL:
        if (gw__parse_long(value, v->min, v->max, &n) != GW_OK)
            break;
        if (num)
            *num = n;
        return GW_OK;
    case GW_ENV_T_CHOICE:
        if ((i = choice_index(v, value)) < 0)
            break;
        if (index)
            *index = i;
        return GW_OK;
    case GW_ENV_T_HOSTPORT:
        if (gw__parse_hostport(value, host, sizeof(host), &port) != GW_OK)
            break;
        return GW_OK;
    case GW_ENV_T_SECRET:
        if (strlen(value) < (size_t)v->min) {
            snprintf(why, cap, "is %zu characters long: a job token needs at least %ld",
                     strlen(value), v->min);
            return GW_ERR_CONFIG;
        }
        return GW_OK;
    case GW_ENV_T_STR:
    case GW_ENV_T_PATH:
        return GW_OK;
    }
    snprintf(why, cap, "is not %s", accepted);
    return GW_ERR_CONFIG;
}

const char *gw__env_type_name(gw_env_type_t type)
{
    static const char *const names[] = {"int",    "bool",   "str",     "path",
                                        "secret", "choice", "hostport"};
    return (unsigned)type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

const char *gw__env_category_name(gw_env_category_t category)
{
    static const char *const names[GW_ENV_C_COUNT] = {"system", "tuning", "debug", "test-only",
                                                      "launcher"};
    return (unsigned)category < GW_ENV_C_COUNT ? names[category] : "?";
}
