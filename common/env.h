/*
 * env.h - strict parsing of environment variables and "host:port" strings.
 * A variable that is set but malformed is an error (GW_ERR_CONFIG, logged
 * with its name and value), never silently replaced by a default.
 */
#ifndef GW_COMMON_ENV_H
#define GW_COMMON_ENV_H

#include "gradwire.h"
#include "log.h"

/* *out = value of name as a decimal integer in [min, max]; if the variable is
 * unset or empty, *out = dflt. */
gw_status_t gw__env_int(const gw_logger_t *lg, const char *name, long min, long max, long dflt,
                        long *out);

/* Parse a decimal integer in [min, max] from s (whole string). */
gw_status_t gw__parse_long(const char *s, long min, long max, long *out);

/* Split "host:port" (or "[v6addr]:port") into host and port. */
gw_status_t gw__parse_hostport(const char *s, char *host, size_t host_cap, int *port);

#endif
