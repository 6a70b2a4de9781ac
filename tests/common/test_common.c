/* Status strings, names and parsing of dtypes/ops/algorithms, environment
 * and host:port parsing. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    setenv("GW_IB_TIMEOUT", "abc", 1);
    cr_expect_eq(gw__env_int(&lg, GW_ENV_IB_TIMEOUT, &v), GW_ERR_CONFIG);
    unsetenv("GW_IB_TIMEOUT");
    cr_expect_eq(gw__env_int(&lg, GW_ENV_IB_TIMEOUT, &v), GW_OK);
    cr_expect_eq(v, 18, "the registry's default");
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
    /* Strict: a host is a name or an address, never handed to the resolver
     * with a port still in it (issue 28). */
    cr_expect_eq(gw__parse_hostport("127.0.0.1:5000:6000", host, sizeof(host), &port),
                 GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("no de:80", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("node/1:80", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("[node1]:80", host, sizeof(host), &port), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_hostport("[fe80::1%eth0]:80", host, sizeof(host), &port), GW_OK);
    cr_expect_str_eq(host, "fe80::1%eth0");
    cr_expect_eq(gw__parse_hostport("node-7.example_x:1", host, sizeof(host), &port), GW_OK);
    cr_expect_str_eq(host, "node-7.example_x");
}

/* The text the logger wrote to a temporary file, as a string (freed by the
 * caller). */
static char *log_text(FILE *f)
{
    fflush(f);
    long n = ftell(f);
    cr_assert_geq(n, 0);
    char *s = calloc(1, (size_t)n + 1);
    cr_assert_not_null(s);
    rewind(f);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    return s;
}

/* A logger at the default level writing to a temporary file. */
static gw_logger_t file_logger(void)
{
    gw_logger_t lg;
    unsetenv("GW_DEBUG");
    unsetenv("GW_DEBUG_FILE");
    cr_assert_eq(gw__logger_init(&lg, 0), GW_OK);
    lg.file = tmpfile();
    cr_assert_not_null(lg.file);
    lg.owns_file = 1;
    return lg;
}

/* value of GW_NSOCKS is refused by gw__env_int with one ERROR line that
 * names the variable, quotes the value (when there is one) and gives the
 * range. */
static void expect_int_refused(const char *value, const char *want)
{
    gw_logger_t lg = file_logger();
    long v = 77;
    setenv("GW_NSOCKS", value, 1);
    cr_expect_eq(gw__env_int(&lg, GW_ENV_NSOCKS, &v), GW_ERR_CONFIG, "GW_NSOCKS=\"%s\" accepted",
                 value);
    cr_expect_eq(v, 77, "output written for \"%s\"", value);
    char *log = log_text(lg.file);
    cr_expect(strstr(log, want), "log for \"%s\" lacks \"%s\":\n%s", value, want, log);
    cr_expect(strstr(log, "an integer in [1, 16]"), "log lacks the range:\n%s", log);
    cr_expect_eq(strchr(log, '\n'), log + strlen(log) - 1, "not one line:\n%s", log);
    cr_expect(strstr(log, " ERROR "), "not an ERROR line:\n%s", log);
    free(log);
    unsetenv("GW_NSOCKS");
    gw__logger_fini(&lg);
}

Test(env, malformed_integers_are_refused_naming_the_variable)
{
    expect_int_refused("", "GW_NSOCKS is set but empty");
    expect_int_refused(" 2", "GW_NSOCKS=\" 2\" has white space at an end");
    expect_int_refused("2 ", "GW_NSOCKS=\"2 \" has white space at an end");
    expect_int_refused("\t2", "GW_NSOCKS=\"\\t2\" has white space at an end");
    expect_int_refused("2\n", "GW_NSOCKS=\"2\\n\" has white space at an end");
    expect_int_refused("+2", "GW_NSOCKS=\"+2\" is not an integer");
    expect_int_refused("0x2", "GW_NSOCKS=\"0x2\" is not an integer");
    expect_int_refused("2x", "GW_NSOCKS=\"2x\" is not an integer");
    expect_int_refused("2 2", "GW_NSOCKS=\"2 2\" is not an integer");
    expect_int_refused("17", "GW_NSOCKS=\"17\" is not an integer");
    expect_int_refused("0", "GW_NSOCKS=\"0\" is not an integer");
    expect_int_refused("- 2", "GW_NSOCKS=\"- 2\" is not an integer");

    /* The parser under them takes a leading '-' and digits, nothing else. */
    long v = 0;
    cr_expect_eq(gw__parse_long(" 2", 0, 100, &v), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_long("+2", 0, 100, &v), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw__parse_long("-1", -1, 100, &v), GW_OK);
    cr_expect_eq(v, -1);

    /* Unset is the default; a well-formed value is taken. */
    gw_logger_t lg = file_logger();
    unsetenv("GW_NSOCKS");
    cr_expect_eq(gw__env_int(&lg, GW_ENV_NSOCKS, &v), GW_OK);
    cr_expect_eq(v, 1, "the registry's default");
    setenv("GW_NSOCKS", "16", 1);
    cr_expect_eq(gw__env_int(&lg, GW_ENV_NSOCKS, &v), GW_OK);
    cr_expect_eq(v, 16);
    char *log = log_text(lg.file);
    cr_expect_str_eq(log, "", "good values logged:\n%s", log);
    free(log);
    unsetenv("GW_NSOCKS");
    gw__logger_fini(&lg);
}

Test(env, strings_choices_and_addresses_are_checked)
{
    gw_logger_t lg = file_logger();
    const char *s = "untouched";
    int c = 9, port = 0, found = 9;
    char host[64];

    setenv("GW_CONNECT", "", 1);
    cr_expect_eq(gw__env_str(&lg, GW_ENV_CONNECT, &s), GW_ERR_CONFIG);
    cr_expect_null(s);
    cr_expect_eq(gw__env_choice(&lg, GW_ENV_CONNECT, &c), GW_ERR_CONFIG);
    setenv("GW_CONNECT", "red ", 1);
    cr_expect_eq(gw__env_str(&lg, GW_ENV_CONNECT, &s), GW_ERR_CONFIG);
    cr_expect_eq(gw__env_choice(&lg, GW_ENV_CONNECT, &c), GW_ERR_CONFIG);
    setenv("GW_CONNECT", "LOUD", 1);
    cr_expect_eq(gw__env_choice(&lg, GW_ENV_CONNECT, &c), GW_ERR_CONFIG);
    cr_expect_eq(c, 9, "output written on failure");
    char *log = log_text(lg.file);
    cr_expect(strstr(log, "GW_CONNECT is set but empty; accepted: one of lazy, eager"), "log:\n%s",
              log);
    cr_expect(strstr(log, "GW_CONNECT is set but empty; accepted: one of lazy, eager"), "log:\n%s",
              log);
    cr_expect(strstr(log, "GW_CONNECT=\"red \" has white space at an end; accepted: one of lazy, "
                          "eager"),
              "log:\n%s", log);
    cr_expect(strstr(log, "GW_CONNECT=\"LOUD\" is not one of lazy, eager"), "log:\n%s", log);
    free(log);

    setenv("GW_CONNECT", "EAGER", 1);
    cr_expect_eq(gw__env_choice(&lg, GW_ENV_CONNECT, &c), GW_OK);
    cr_expect_eq(c, 1);
    unsetenv("GW_CONNECT");
    cr_expect_eq(gw__env_choice(&lg, GW_ENV_IB_CM, &c), GW_OK);
    cr_expect_eq(c, -1);
    cr_expect_eq(gw__env_str(&lg, GW_ENV_CONNECT, &s), GW_OK);
    cr_expect_null(s);

    const char *bad_roots[] = {"",      " node1:29500", "node1:29500 ", "node1 :29500", "node1:",
                               "node1", "node1:0",      "node1:2x",     "node1: 29500"};
    for (size_t i = 0; i < sizeof(bad_roots) / sizeof(bad_roots[0]); i++) {
        setenv("GW_ROOT", bad_roots[i], 1);
        cr_expect_eq(gw__env_hostport(&lg, GW_ENV_ROOT, host, sizeof(host), &port, &found),
                     GW_ERR_CONFIG, "GW_ROOT=\"%s\" accepted", bad_roots[i]);
        cr_expect_eq(found, 0);
    }
    setenv("GW_ROOT", "[::1]:29500", 1);
    cr_expect_eq(gw__env_hostport(&lg, GW_ENV_ROOT, host, sizeof(host), &port, &found), GW_OK);
    cr_expect_eq(found, 1);
    cr_expect_str_eq(host, "::1");
    cr_expect_eq(port, 29500);
    unsetenv("GW_ROOT");
    gw__logger_fini(&lg);
}

Test(env, malformed_log_level_is_refused_at_the_default_level)
{
    char path[] = "/tmp/gw_test_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    gw_logger_t lg;
    setenv("GW_DEBUG_FILE", path, 1);
    setenv("GW_DEBUG", "LOUD", 1);
    cr_expect_eq(gw__logger_init(&lg, 0), GW_ERR_CONFIG);
    cr_expect_eq(lg.level, GW_LOG_WARN, "the logger is left at the default level");
    gw__logger_fini(&lg);
    setenv("GW_DEBUG", "info", 1);
    cr_expect_eq(gw__logger_init(&lg, 0), GW_OK);
    cr_expect_eq(lg.level, GW_LOG_INFO);
    gw__logger_fini(&lg);
    setenv("GW_DEBUG", "", 1);
    cr_expect_eq(gw__logger_init(&lg, 0), GW_ERR_CONFIG);
    gw__logger_fini(&lg);
    unsetenv("GW_DEBUG");
    setenv("GW_DEBUG_FILE", "", 1);
    cr_expect_eq(gw__logger_init(&lg, 0), GW_ERR_CONFIG);
    gw__logger_fini(&lg);
    unsetenv("GW_DEBUG_FILE");

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    char *log = log_text(f);
    fclose(f);
    unlink(path);
    cr_expect(strstr(log, " ERROR GW_DEBUG=\"LOUD\" is not one of NONE, ERROR, WARN, INFO, TRACE"),
              "log:\n%s", log);
    cr_expect(strstr(log, " ERROR GW_DEBUG is set but empty"), "log:\n%s", log);
    free(log);
}
