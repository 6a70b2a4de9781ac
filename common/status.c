/* status.c - status strings and the names of dtypes, ops and algorithms. */
#include <string.h>
#include <strings.h>

#include "gradwire.h"

#define GW__STR(s) #s
#define GW__XSTR(s) GW__STR(s)

const char *gw_version(void)
{
    return GW__XSTR(GW_VERSION_MAJOR) "." GW__XSTR(GW_VERSION_MINOR) "." GW__XSTR(GW_VERSION_PATCH);
}

const char *gw_status_str(gw_status_t status)
{
    switch (status) {
#define GW__STATUS_CASE(name, value, text) \
    case name:                             \
        return text;
        GW_STATUS_MAP(GW__STATUS_CASE)
#undef GW__STATUS_CASE
    }
    return "unknown status";
}

const char *gw_status_name(gw_status_t status)
{
    switch (status) {
#define GW__STATUS_NAME(name, value, text) \
    case name:                             \
        return #name;
        GW_STATUS_MAP(GW__STATUS_NAME)
#undef GW__STATUS_NAME
    }
    return "GW_UNKNOWN_STATUS";
}

static const struct {
    const char *name;
    size_t size;
} dtype_table[GW_DTYPE_COUNT] = {
    [GW_FLOAT32] = {"float32", 4},
    [GW_FLOAT64] = {"float64", 8},
    [GW_FLOAT16] = {"float16", 2},
    [GW_BFLOAT16] = {"bfloat16", 2},
    [GW_INT8] = {"int8", 1},
    [GW_UINT8] = {"uint8", 1},
    [GW_INT32] = {"int32", 4},
    [GW_INT64] = {"int64", 8},
    [GW_FLOAT8_E4M3] = {"float8_e4m3", 1},
    [GW_FLOAT8_E5M2] = {"float8_e5m2", 1},
    [GW_UINT32] = {"uint32", 4},
    [GW_UINT64] = {"uint64", 8},
};

static const char *const op_names[GW_OP_COUNT] = {"sum",  "prod", "min",  "max",       "avg",
                                                  "band", "bor",  "bxor", "premul_sum"};
static const char *const algo_names[GW_ALGO_COUNT] = {"auto", "ring", "tree",
                                                      "rd",   "hier", "direct"};

size_t gw_dtype_size(gw_dtype_t dtype)
{
    return (unsigned)dtype < GW_DTYPE_COUNT ? dtype_table[dtype].size : 0;
}

const char *gw_dtype_name(gw_dtype_t dtype)
{
    return (unsigned)dtype < GW_DTYPE_COUNT ? dtype_table[dtype].name : "unknown";
}

const char *gw_op_name(gw_op_t op) { return (unsigned)op < GW_OP_COUNT ? op_names[op] : "unknown"; }

const char *gw_algo_name(gw_algo_t algo)
{
    return (unsigned)algo < GW_ALGO_COUNT ? algo_names[algo] : "unknown";
}

gw_status_t gw_dtype_parse(const char *name, gw_dtype_t *out)
{
    static const struct {
        const char *alias;
        gw_dtype_t dtype;
    } aliases[] = {{"float", GW_FLOAT32},    {"fp32", GW_FLOAT32},
                   {"double", GW_FLOAT64},   {"fp64", GW_FLOAT64},
                   {"half", GW_FLOAT16},     {"fp16", GW_FLOAT16},
                   {"bf16", GW_BFLOAT16},    {"char", GW_INT8},
                   {"int", GW_INT32},        {"long", GW_INT64},
                   {"uchar", GW_UINT8},      {"float8_e4m3fn", GW_FLOAT8_E4M3},
                   {"e4m3", GW_FLOAT8_E4M3}, {"fp8_e4m3", GW_FLOAT8_E4M3},
                   {"e5m2", GW_FLOAT8_E5M2}, {"fp8_e5m2", GW_FLOAT8_E5M2},
                   {"uint", GW_UINT32},      {"ulong", GW_UINT64}};
    if (!name || !out)
        return GW_ERR_INVALID_ARG;
    for (int i = 0; i < GW_DTYPE_COUNT; i++)
        if (strcasecmp(name, dtype_table[i].name) == 0) {
            *out = (gw_dtype_t)i;
            return GW_OK;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].dtype;
            return GW_OK;
        }
    return GW_ERR_INVALID_ARG;
}

gw_status_t gw_op_parse(const char *name, gw_op_t *out)
{
    if (!name || !out)
        return GW_ERR_INVALID_ARG;
    static const struct {
        const char *alias;
        gw_op_t op;
    } aliases[] = {
        {"and", GW_BAND}, {"or", GW_BOR}, {"xor", GW_BXOR}, {"premulsum", GW_PREMUL_SUM}};
    for (int i = 0; i < GW_OP_COUNT; i++)
        if (strcasecmp(name, op_names[i]) == 0) {
            *out = (gw_op_t)i;
            return GW_OK;
        }
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strcasecmp(name, aliases[i].alias) == 0) {
            *out = aliases[i].op;
            return GW_OK;
        }
    return GW_ERR_INVALID_ARG;
}

gw_status_t gw_algo_parse(const char *name, gw_algo_t *out)
{
    if (!name || !out)
        return GW_ERR_INVALID_ARG;
    for (int i = 0; i < GW_ALGO_COUNT; i++)
        if (strcasecmp(name, algo_names[i]) == 0) {
            *out = (gw_algo_t)i;
            return GW_OK;
        }
    if (strcasecmp(name, "recursive_doubling") == 0) {
        *out = GW_ALGO_RD;
        return GW_OK;
    }
    return GW_ERR_INVALID_ARG;
}
