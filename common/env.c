#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Room for a quoted value in an error line. */
#define QUOTE_MAX 256

static int is_blank(char c) { return isspace((unsigned char)c) || iscntrl((unsigned char)c); }

/* s between double quotes, with what would break the log line (control
 * characters, quotes, backslashes) written as C escapes, and cut short
 * with "..." past what a log line should hold. */
static const char *quote(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    buf[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n' || c == '\t' || c == '"' || c == '\\') {
            buf[n++] = '\\';
            buf[n++] = c == '\n' ? 'n' : c == '\t' ? 't' : (char)c;
        } else if (iscntrl(c)) {
            n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
        } else {
            buf[n++] = (char)c;
        }
    }
    if (*s) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n++] = '"';
    buf[n] = '\0';
    return buf;
}

/* The value of name, NULL if unset; set but empty or padded is refused with
 * one line that says what would have been accepted. */
static gw_status_t get_set(const gw_logger_t *lg, const char *name, const char *accepted,
                           const char **out)
{
    const char *s = getenv(name);
    *out = NULL;
    if (!s)
        return GW_OK;
    if (!*s) {
        GW_ERROR(lg, "env", "%s is set but empty; accepted: %s (unset it for the default)", name,
                 accepted);
        return GW_ERR_CONFIG;
    }
    if (is_blank(s[0]) || is_blank(s[strlen(s) - 1])) {
        char q[QUOTE_MAX];
        GW_ERROR(lg, "env", "%s=%s has white space at an end; accepted: %s", name,
                 quote(s, q, sizeof(q)), accepted);
        return GW_ERR_CONFIG;
    }
    *out = s;
    return GW_OK;
}

gw_status_t gw__env_str(const gw_logger_t *lg, const char *name, const char *accepted,
                        const char **out)
{
    return get_set(lg, name, accepted, out);
}

gw_status_t gw__env_int(const gw_logger_t *lg, const char *name, long min, long max, long dflt,
                        long *out)
{
    char accepted[96];
    snprintf(accepted, sizeof(accepted), "an integer in [%ld, %ld]", min, max);
    const char *s;
    long v;
    if (get_set(lg, name, accepted, &s) != GW_OK)
        return GW_ERR_CONFIG;
    if (!s) {
        *out = dflt;
        return GW_OK;
    }
    if (gw__parse_long(s, min, max, &v) != GW_OK) {
        char q[QUOTE_MAX];
        GW_ERROR(lg, "env", "%s=%s is not %s", name, quote(s, q, sizeof(q)), accepted);
        return GW_ERR_CONFIG;
    }
    *out = v;
    return GW_OK;
}

gw_status_t gw__env_choice(const gw_logger_t *lg, const char *name, const char *const *choices,
                           size_t n, int dflt, int *out)
{
    char list[256] = "one of ";
    size_t len = strlen(list);
    for (size_t i = 0; i < n; i++) {
        int w = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", choices[i]);
        if (w < 0 || (size_t)w >= sizeof(list) - len)
            break;
        len += (size_t)w;
    }
    const char *s;
    if (get_set(lg, name, list, &s) != GW_OK)
        return GW_ERR_CONFIG;
    if (!s) {
        *out = dflt;
        return GW_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(s, choices[i]) == 0) {
            *out = (int)i;
            return GW_OK;
        }
    }
    char q[QUOTE_MAX];
    GW_ERROR(lg, "env", "%s=%s is not %s", name, quote(s, q, sizeof(q)), list);
    return GW_ERR_CONFIG;
}

gw_status_t gw__env_hostport(const gw_logger_t *lg, const char *name, char *host, size_t host_cap,
                             int *port, int *found)
{
    static const char accepted[] = "host:port (or [v6addr]:port) with a port in [1, 65535]";
    const char *s;
    *found = 0;
    if (get_set(lg, name, accepted, &s) != GW_OK)
        return GW_ERR_CONFIG;
    if (!s)
        return GW_OK;
    if (gw__parse_hostport(s, host, host_cap, port) != GW_OK) {
        char q[QUOTE_MAX];
        GW_ERROR(lg, "env", "%s=%s is not %s", name, quote(s, q, sizeof(q)), accepted);
        return GW_ERR_CONFIG;
    }
    *found = 1;
    return GW_OK;
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
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return GW_ERR_INVALID_ARG;
        hlen = (size_t)(colon - s);
    }
    if (hlen == 0 || hlen >= host_cap)
        return GW_ERR_INVALID_ARG;
    /* A host name holds no white space, so "node1 :29500" is a typo. */
    for (size_t i = 0; i < hlen; i++)
        if (is_blank(hstart[i]))
            return GW_ERR_INVALID_ARG;
    long p;
    if (gw__parse_long(colon + 1, 1, 65535, &p) != GW_OK)
        return GW_ERR_INVALID_ARG;
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return GW_OK;
}
