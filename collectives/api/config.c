/*
 * config.c - gw_config_t's defaults, and how the library reads a caller's
 * gw_config_t (the versioning: common/struct_import.h).
 */
#include <stddef.h>

#include "collectives/api/config.h"
#include "common/struct_import.h"

/* The first versioned header's struct ended with this field. */
#define CONFIG_V1_SIZE (offsetof(gw_config_t, algo) + sizeof(gw_algo_t))

void gw_config_init(gw_config_t *cfg)
{
    if (!cfg)
        return;
    static const gw_config_t defaults = GW_CONFIG_INITIALIZER;
    *cfg = defaults;
}

gw_status_t gw__config_import(const gw_config_t *in, gw_config_t *out, const gw_logger_t *lg)
{
    gw_config_init(out);
    gw_status_t st =
        gw__struct_import(in, in->struct_size, in->magic, CONFIG_V1_SIZE, out, sizeof(*out),
                          "gw_config_t", "GW_CONFIG_INITIALIZER or gw_config_init()", lg);
    out->struct_size = sizeof(*out);
    return st;
}
