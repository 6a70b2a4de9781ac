/*
 * env_registry.h - the table of every environment variable gradwire reads
 * (env_registry.def), and the checks that need nothing but the table: no
 * logger, no allocation, so that `gradwire info` compiles it in.
 */
#ifndef GW_COMMON_ENV_REGISTRY_H
#define GW_COMMON_ENV_REGISTRY_H

#include <stddef.h>

#include "gradwire.h"

typedef enum gw_env_type {
    GW_ENV_T_INT,
    GW_ENV_T_BOOL,
    GW_ENV_T_STR,
    GW_ENV_T_PATH,
    GW_ENV_T_SECRET,
    GW_ENV_T_CHOICE,
    GW_ENV_T_HOSTPORT
} gw_env_type_t;

typedef enum gw_env_category {
    GW_ENV_C_SYSTEM,
    GW_ENV_C_TUNING,
    GW_ENV_C_DEBUG,
    GW_ENV_C_TEST,
    GW_ENV_C_LAUNCHER,
    GW_ENV_C_COUNT
} gw_env_category_t;

/* GW_ENV_ROOT, GW_ENV_TIMEOUT_MS, ...: what callers pass the parsers. */
typedef enum gw_env_id {
#define GW_ENV_VAR(id, ...) GW_ENV_##id,
#include "common/env_registry.def"
#undef GW_ENV_VAR
    GW_ENV_COUNT
} gw_env_id_t;

typedef struct gw_env_var {
    const char *name;
    gw_env_type_t type;
    gw_env_category_t category;
    long min, max, dflt;
    const char *choices;   /* CHOICE: '|'-separated */
    const char *dflt_text; /* NULL: the default is dflt (or choice dflt) */
    const char *help;
} gw_env_var_t;

/* The entry of id; never NULL for an id below GW_ENV_COUNT. */
const gw_env_var_t *gw__env_var(gw_env_id_t id);

/* The entry named name, NULL if there is none. */
const gw_env_var_t *gw__env_find(const char *name);

/* The entry whose name is closest to name (one or two edits, at most one
 * per four characters after "GW_"), NULL if none is that close: for "did
 * you mean" on an unknown GW_* name. */
const gw_env_var_t *gw__env_closest(const char *name);

/* Is value acceptable for v? GW_OK, or GW_ERR_CONFIG with what is wrong in
 * why (e.g. "is not an integer in [1, 16]"), to follow "NAME=value". For a
 * CHOICE, *index (if not NULL) is the position of the value in choices;
 * for an INT or BOOL, *num (if not NULL) is its value. */
gw_status_t gw__env_check(const gw_env_var_t *v, const char *value, long *num, int *index,
                          char *why, size_t cap);

/* What v accepts, in words ("an integer in [1, 16]", "one of lazy, eager"). */
void gw__env_accepted(const gw_env_var_t *v, char *buf, size_t cap);

/* The default in words: dflt_text, else the number or the choice. */
void gw__env_default_text(const gw_env_var_t *v, char *buf, size_t cap);

const char *gw__env_type_name(gw_env_type_t type);
const char *gw__env_category_name(gw_env_category_t category);

/* Parse a decimal integer in [min, max] from the whole of s: an optional
 * '-' then digits, nothing else (no spaces, no '+', no "0x"). */
gw_status_t gw__parse_long(const char *s, long min, long max, long *out);

/* Split "host:port" (or "[v6addr]:port") into host and port, strictly: a
 * host without brackets holds only letters, digits, '.', '-' and '_' (so
 * "127.0.0.1:5000:6000" is refused, not handed to the resolver), a
 * bracketed one only hex digits, ':' and '.' (an IPv6 literal), and the
 * port is a number in [1, 65535]. */
gw_status_t gw__parse_hostport(const char *s, char *host, size_t host_cap, int *port);

#endif
