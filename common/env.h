/*
 * env.h - strict parsing of environment variables and "host:port" strings.
 *
 * Unset means "use the default". A variable that is set but empty, has
 * leading or trailing white space, holds junk or is out of range is an error
 * (GW_ERR_CONFIG, logged once with its name, its value and what is
 * accepted), never silently replaced by the default: a typo in a job script
 * should stop the job, not change what it measures. Every GW_* and launcher
 * variable the library reads goes through these functions.
 */
#ifndef GW_COMMON_ENV_H
#define GW_COMMON_ENV_H

#include <stddef.h>

#include "gradwire.h"
#include "log.h"

/* *out = the value of name, or NULL if it is unset. Set but empty, or with
 * white space or a control character at either end, is GW_ERR_CONFIG; the
 * error says accepted (e.g. "a network interface name") is what is wanted. */
gw_status_t gw__env_str(const gw_logger_t *lg, const char *name, const char *accepted,
                        const char **out);

/* *out = value of name as a decimal integer in [min, max]; unset: dflt. */
gw_status_t gw__env_int(const gw_logger_t *lg, const char *name, long min, long max, long dflt,
                        long *out);

/* *out = the index in choices[0..n) of the value of name, compared without
 * regard to case; unset: dflt. The error lists the choices. */
gw_status_t gw__env_choice(const gw_logger_t *lg, const char *name, const char *const *choices,
                           size_t n, int dflt, int *out);

/* *host and *port from name's "host:port" (or "[v6addr]:port"); unset:
 * *found = 0 and nothing else is written. */
gw_status_t gw__env_hostport(const gw_logger_t *lg, const char *name, char *host, size_t host_cap,
                             int *port, int *found);

/* Parse a decimal integer in [min, max] from the whole of s: an optional
 * '-' then digits, nothing else (no spaces, no '+', no "0x"). */
gw_status_t gw__parse_long(const char *s, long min, long max, long *out);

/* Split "host:port" (or "[v6addr]:port") into host and port. */
gw_status_t gw__parse_hostport(const char *s, char *host, size_t host_cap, int *port);

#endif
