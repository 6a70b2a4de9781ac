/*
 * struct_import.h - how the library reads a caller's versioned struct
 * (gw_config_t, gw_compress_config_t: gradwire.h, GW_CONFIG_MAGIC).
 *
 * A versioned struct starts with its size as the caller's header declared
 * it, a magic number and the header's version. The library never reads a
 * caller's struct directly: it imports it into a struct of its own, which
 * starts from the library's defaults and takes the caller's bytes up to the
 * caller's size. A program built against an older header (a shorter
 * struct) so gets the defaults for every field added since, and one built
 * against a newer header (a longer struct) has its unknown tail ignored,
 * as long as that tail holds the defaults a newer library would read as
 * "unset". A struct whose magic is wrong, or whose size does not even cover
 * the fields of the first versioned header, was not initialised: it is
 * refused with a message saying how to initialise it, never read as
 * settings.
 */
#ifndef GW_COMMON_STRUCT_IMPORT_H
#define GW_COMMON_STRUCT_IMPORT_H

#include <stddef.h>

#include "common/log.h"
#include "gradwire.h"

/* Copy the caller's struct `in` (its size in_size and magic in_magic read
 * from its first fields) over `out`, which holds the library's defaults,
 * up to the smaller of the two sizes. GW_ERR_INVALID_ARG, logged on lg
 * naming `type` and how to initialise one (`how`), when in_magic is not
 * GW_CONFIG_MAGIC or in_size is below v1_size (the first versioned
 * header's size). */
gw_status_t gw__struct_import(const void *in, size_t in_size, unsigned int in_magic, size_t v1_size,
                              void *out, size_t out_size, const char *type, const char *how,
                              const gw_logger_t *lg);

#endif /* GW_COMMON_STRUCT_IMPORT_H */
