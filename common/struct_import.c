/*
 * struct_import.c - a caller's versioned struct, read into the library's
 * own (see struct_import.h for the rules of the versioning).
 */
#include <string.h>

#include "common/struct_import.h"

gw_status_t gw__struct_import(const void *in, size_t in_size, unsigned int in_magic, size_t v1_size,
                              void *out, size_t out_size, const char *type, const char *how,
                              const gw_logger_t *lg)
{
    if (in_magic != GW_CONFIG_MAGIC || in_size < v1_size) {
        GW_ERROR(lg, "api",
                 "the %s passed was not initialised (magic 0x%x, size %zu; expected 0x%x and at "
                 "least %zu): start from %s",
                 type, in_magic, in_size, GW_CONFIG_MAGIC, v1_size, how);
        return GW_ERR_INVALID_ARG;
    }
    memcpy(out, in, in_size < out_size ? in_size : out_size);
    return GW_OK;
}
