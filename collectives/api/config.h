/*
 * config.h - how the library reads a caller's gw_config_t (config.c; the
 * compression settings are read by collectives/compress/compress_state.c,
 * both by common/struct_import.h's rules).
 */
#ifndef GW_COLLECTIVES_API_CONFIG_H
#define GW_COLLECTIVES_API_CONFIG_H

#include "common/log.h"
#include "gradwire.h"

/* *out = the library's reading of a caller's config struct: its defaults,
 * then the caller's bytes up to the caller's struct_size.
 * GW_ERR_INVALID_ARG, logged on lg, for a struct that was not initialised. */
gw_status_t gw__config_import(const gw_config_t *in, gw_config_t *out, const gw_logger_t *lg);

#endif /* GW_COLLECTIVES_API_CONFIG_H */
