/*
 * config.h - how the library reads the public config structs (config.c).
 */
#ifndef GW_COLLECTIVES_CORE_CONFIG_H
#define GW_COLLECTIVES_CORE_CONFIG_H

#include "common/log.h"
#include "gradwire.h"

/* *out = the library's reading of a caller's config struct: its defaults,
 * then the caller's bytes up to the caller's struct_size.
 * GW_ERR_INVALID_ARG, logged on lg, for a struct that was not initialised. */
gw_status_t gw__config_import(const gw_config_t *in, gw_config_t *out, const gw_logger_t *lg);
gw_status_t gw__compress_config_import(const gw_compress_config_t *in, gw_compress_config_t *out,
                                       const gw_logger_t *lg);

#endif
