/*
 * config.c - the public configuration structs' defaults, and how the
 * library reads a caller's struct.
 *
 * A config struct starts with its size as the caller's header declared it,
 * a magic number and the header's version (gradwire.h, GW_CONFIG_MAGIC).
 * The library never reads a caller's struct directly: it imports it into a
 * struct of its own, which starts from the library's defaults and takes the
 * caller's bytes up to the caller's size. A program built against an older
 * header (a shorter struct) so gets the defaults for every field added
 * since, and one built against a newer header (a longer struct) has its
 * unknown tail ignored, as long as that tail holds the defaults a newer
 * library would read as "unset". A struct whose magic is wrong, or whose
 * size does not even cover the fields of the first versioned header, was
 * not initialised: it is refused with a message saying how to initialise
 * it, never read as settings.
 */
#include <stddef.h>
#include <string.h>

#include "collectives/core/config.h"

/* The first versioned headers' structs ended with these fields. */
#define CONFIG_V1_SIZE (offsetof(gw_config_t, algo) + sizeof(gw_algo_t))
#define COMPRESS_V1_SIZE (offsetof(gw_compress_config_t, momentum) + sizeof(double))

void gw_config_init(gw_config_t *cfg)
{
    if (!cfg)
        return;
    static const gw_config_t defaults = GW_CONFIG_INITIALIZER;
    *cfg = defaults;
}

/* *out = what the library reads of in, whose first fields (size, magic)
 * have the layout every versioned header shares. */
static gw_status_t import_struct(const void *in, size_t in_size, unsigned int in_magic,
                                 size_t v1_size, void *out, size_t out_size, const char *type,
                                 const char *how, const gw_logger_t *lg)
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

gw_status_t gw__config_import(const gw_config_t *in, gw_config_t *out, const gw_logger_t *lg)
{
    gw_config_init(out);
    gw_status_t st =
        import_struct(in, in->struct_size, in->magic, CONFIG_V1_SIZE, out, sizeof(*out),
                      "gw_config_t", "GW_CONFIG_INITIALIZER or gw_config_init()", lg);
    out->struct_size = sizeof(*out);
    return st;
}

gw_status_t gw__compress_config_import(const gw_compress_config_t *in, gw_compress_config_t *out,
                                       const gw_logger_t *lg)
{
    gw_compress_config_init(out);
    gw_status_t st = import_struct(
        in, in->struct_size, in->magic, COMPRESS_V1_SIZE, out, sizeof(*out), "gw_compress_config_t",
        "GW_COMPRESS_CONFIG_INITIALIZER or gw_compress_config_init()", lg);
    out->struct_size = sizeof(*out);
    return st;
}
