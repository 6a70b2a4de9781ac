/*
 * env.h - strict parsing of environment variables, each one declared once
 * in the registry (env_registry.def: type, default, range or choices).
 *
 * Unset means "use the default". A variable that is set but empty, has
 * leading or trailing white space, holds junk or is out of range is an error
 * (GW_ERR_CONFIG, logged once with its name, its value and what is
 * accepted), never silently replaced by the default: a typo in a job script
 * should stop the job, not change what it measures. Every GW_* and launcher
 * variable the library reads goes through these functions, by its id, so
 * that a variable cannot be read without being in the registry.
 */
#ifndef GW_COMMON_ENV_H
#define GW_COMMON_ENV_H

#include <stddef.h>

#include "common/env_registry.h"
#include "gradwire.h"
#include "log.h"

/* *out = the value of the variable, or NULL if it is unset. A value its
 * type refuses (empty, padded, a SECRET too short) is GW_ERR_CONFIG. */
gw_status_t gw__env_str(const gw_logger_t *lg, gw_env_id_t id, const char **out);

/* *out = the value of an INT or BOOL variable, in its range; unset: its
 * default. */
gw_status_t gw__env_int(const gw_logger_t *lg, gw_env_id_t id, long *out);

/* *out = the index of a CHOICE variable's value among its choices,
 * compared without regard to case; unset: its default. */
gw_status_t gw__env_choice(const gw_logger_t *lg, gw_env_id_t id, int *out);

/* *host and *port from a HOSTPORT variable; unset: *found = 0 and nothing
 * else is written. */
gw_status_t gw__env_hostport(const gw_logger_t *lg, gw_env_id_t id, char *host, size_t host_cap,
                             int *port, int *found);

/* Check every GW_* variable of the registry that is set, whether or not
 * this job will use it: each malformed one is logged as the parsers log
 * it, and the result is GW_ERR_CONFIG. A GW_* name the registry lacks is not an error
 * (scripts use their own GW_ names): when it is within a few edits of a
 * known name (gw__env_closest) it is a likely typo, and, if warn_unknown,
 * one WARN line names the closest known one; others get an INFO line. Launcher
 * variables are checked where their launcher's convention is in use. */
gw_status_t gw__env_check_all(const gw_logger_t *lg, int warn_unknown);

#endif
