/* Status strings, names and parsing of dtypes/ops/algorithms, environment
 * and host:port parsing. */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "common/env.h"
#include "gradwire.h"

Test(status, every_code_has_a_distinct_string)
{
    const gw_status_t codes[] = {
#define GW__LIST(name, value, text) name,
        GW_STATUS_MAP(GW__LIST)
#undef GW__LIST
    };
    size_t n = sizeof(codes) / sizeof(codes[0]);
    for (size_t i = 0; i < n; i++) {
        cr_expect_str_neq(gw_status_str(codes[i]), "unknown status");
        for (size_t j = i + 1; j < n; j++)
            cr_expect_str_neq(gw_status_str(codes[i]), gw_status_str(codes[j]));
    }
    cr_expect_str_eq(gw_status_str((gw_status_t)12345), "unknown status");
    cr_expect_str_eq(gw_status_name(GW_ERR_TIMEOUT), "GW_ERR_TIMEOUT");
}

Test(status, version_matches_macros)
{
    char want[32];
    snprintf(want, sizeof(want), "%d.%d.%d", GW_VERSION_MAJOR, GW_VERSION_MINOR, GW_VERSION_PATCH);
    cr_expect_str_eq(gw_version(), want);
}

Test(names, dtypes_ops_algos_round_trip)
{
    for (int d = 0; d < GW_DTYPE_COUNT; d++) {
        gw_dtype_t out;
        cr_assert_eq(gw_dtype_parse(gw_dtype_name((gw_dtype_t)d), &out), GW_OK);
        cr_expect_eq(out, (gw_dtype_t)d);
        cr_expect_gt(gw_dtype_size((gw_dtype_t)d), 0);
    }
    for (int o = 0; o < GW_OP_COUNT; o++) {
        gw_op_t out;
        cr_assert_eq(gw_op_parse(gw_op_name((gw_op_t)o), &out), GW_OK);
        cr_expect_eq(out, (gw_op_t)o);
    }
    for (int a = 0; a < GW_ALGO_COUNT; a++) {
        gw_algo_t out;
        cr_assert_eq(gw_algo_parse(gw_algo_name((gw_algo_t)a), &out), GW_OK);
        cr_expect_eq(out, (gw_algo_t)a);
    }
    gw_dtype_t d;
    cr_expect_eq(gw_dtype_parse("bf16", &d), GW_OK);
    cr_expect_eq(d, GW_BFLOAT16);
    cr_expect_eq(gw_dtype_parse("float33", &d), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_dtype_size((gw_dtype_t)99), 0);
    cr_expect_str_eq(gw_dtype_name((gw_dtype_t)-1), "unknown");
}

Test(env, integers_are_parsed_strictly)
{
    long v = 0;
    cr_expect_eq(gw__parse_long("42", 0, 100, &v), GW_OK);
    cr_expect_eq(v, 42);
    cr_expect_eq(gw__parse_long("42x", 0, 100, &v), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_long("", 0, 100, &v), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_long("101", 0, 100, &v), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_long("99999999999999999999999", 0, 100, &v), GW_ERR_INVALID_ARG);

    gw_logger_t lg;
    gw__logger_init(&lg, 0);
    lg.level = GW_LOG_NONE;
    setenv("GW_TEST_INT", "abc", 1);
    cr_expect_eq(gw__env_int(&lg, "GW_TEST_INT", 0, 10, 5, &v), GW_ERR_CONFIG);
    unsetenv("GW_TEST_INT");
    cr_expect_eq(gw__env_int(&lg, "GW_TEST_INT", 0, 10, 5, &v), GW_OK);
    cr_expect_eq(v, 5);
}

Test(env, host_port)
{
    char host[64];
    int port = 0;
    cr_expect_eq(gw__parse_hostport("127.0.0.1:29500", host, sizeof(host), &port), GW_OK);
    cr_expect_str_eq(host, "127.0.0.1");
    cr_expect_eq(port, 29500);
    cr_expect_eq(gw__parse_hostport("[::1]:80", host, sizeof(host), &port), GW_OK);
    cr_expect_str_eq(host, "::1");
    cr_expect_eq(gw__parse_hostport("node7:0", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("node7", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport(":80", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("h:65536", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
}
