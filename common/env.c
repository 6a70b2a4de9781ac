#include "env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

gw_status_t gw__parse_long(const char *s, long min, long max, long *out)
{
    if (!s || !*s)
        return GW_ERR_INVALID_ARG;
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
        return GW_ERR_INVALID_ARG;
    *out = v;
    return GW_OK;
}

gw_status_t gw__env_int(const gw_logger_t *lg, const char *name, long min, long max, long dflt,
                        long *out)
{
    const char *s = getenv(name);
    if (!s || !*s) {
        *out = dflt;
        return GW_OK;
    }
    long v;
    if (gw__parse_long(s, min, max, &v) != GW_OK) {
        GW_ERROR(lg, "env", "%s=\"%s\" is not an integer in [%ld, %ld]", name, s, min, max);
        return GW_ERR_CONFIG;
    }
    *out = v;
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
    long p;
    if (gw__parse_long(colon + 1, 1, 65535, &p) != GW_OK)
        return GW_ERR_INVALID_ARG;
    memcpy(host, hstart, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return GW_OK;
}
