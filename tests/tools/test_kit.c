/*
 * test_kit.c - the programs' kit (tools/kit): the number parsers every
 * command line uses, the usage errors, the JSON writer's layout and
 * escaping, the order statistics, and the mode of the files the programs
 * write a user's results to. The kit is a separate library of the
 * tools, so its sources are compiled into this test directly.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include <sys/stat.h>
#include <unistd.h>

#include "tools/kit/kit_file.c"
#include "tools/kit/kit_json.c"
#include "tools/kit/kit_parse.c"
#include "tools/kit/kit_time.c"
#include "tools/kit/kit_usage.c"

Test(kit_parse, sizes)
{
    static const struct {
        const char *s;
        size_t v;
    } good[] = {{"0", 0},
                {"4096", 4096},
                {"64K", 64 << 10},
                {"64k", 64 << 10},
                {"32M", (size_t)32 << 20},
                {"1G", (size_t)1 << 30},
                {"2T", (size_t)2 << 40},
                {"1KiB", 1024},
                {"1KB", 1024},
                {"3mB", (size_t)3 << 20}};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 7;
        cr_assert_eq(gw_kit_parse_size(good[i].s, &v), 0, "\"%s\" refused", good[i].s);
        cr_assert_eq(v, good[i].v, "\"%s\": %zu", good[i].s, v);
    }
    static const char *bad[] = {"",
                                "-1",
                                " 1",
                                "+1",
                                "1Q",
                                "1Kx",
                                "1 K",
                                "1B",
                                "K",
                                "1KK",
                                "1KiBB",
                                "20000000000G",
                                "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 7;
        cr_assert_eq(gw_kit_parse_size(bad[i], &v), -1, "\"%s\" accepted", bad[i]);
        cr_assert_eq(v, 7, "\"%s\" changed the output on failure", bad[i]);
    }
    cr_assert_eq(gw_kit_parse_size(NULL, &(size_t){0}), -1);
}

Test(kit_parse, longs_doubles_and_u64)
{
    long l = 0;
    cr_assert_eq(gw_kit_parse_long("42", 1, 100, &l), 0);
    cr_assert_eq(l, 42);
    cr_assert_eq(gw_kit_parse_long("-3", -5, 5, &l), 0);
    cr_assert_eq(l, -3);
    static const char *bad_long[] = {"",     " 5",  "5 ", "5x",
                                     "0x10", "101", "0",  "99999999999999999999"};
    for (size_t i = 0; i < sizeof(bad_long) / sizeof(bad_long[0]); i++)
        cr_assert_eq(gw_kit_parse_long(bad_long[i], 1, 100, &l), -1, "\"%s\" accepted",
                     bad_long[i]);

    double d = 0;
    cr_assert_eq(gw_kit_parse_double("0.5", 0, 1, &d), 0);
    cr_assert_float_eq(d, 0.5, 1e-12);
    cr_assert_eq(gw_kit_parse_double("1e-3", 0, 1, &d), 0);
    static const char *bad_double[] = {"", " 0.5", "0.5x", "nan", "inf", "1.5", "-0.1", "1e"};
    for (size_t i = 0; i < sizeof(bad_double) / sizeof(bad_double[0]); i++)
        cr_assert_eq(gw_kit_parse_double(bad_double[i], 0, 1, &d), -1, "\"%s\" accepted",
                     bad_double[i]);

    uint64_t u = 0;
    cr_assert_eq(gw_kit_parse_u64("18446744073709551615", &u), 0);
    cr_assert_eq(u, UINT64_MAX);
    cr_assert_eq(gw_kit_parse_u64("0x10", &u), 0);
    cr_assert_eq(u, 16);
    cr_assert_eq(gw_kit_parse_u64("010", &u), 0);
    cr_assert_eq(u, 8);
    static const char *bad_u64[] = {"", "-1", "+1", " 1", "1x", "18446744073709551616"};
    for (size_t i = 0; i < sizeof(bad_u64) / sizeof(bad_u64[0]); i++)
        cr_assert_eq(gw_kit_parse_u64(bad_u64[i], &u), -1, "\"%s\" accepted", bad_u64[i]);
}

Test(kit_parse, int_lists)
{
    int v[4];
    cr_assert_eq(gw_kit_parse_int_list("1,2,4,8", v, 4), 4);
    cr_assert(v[0] == 1 && v[1] == 2 && v[2] == 4 && v[3] == 8);
    cr_assert_eq(gw_kit_parse_int_list("16", v, 4), 1);
    cr_assert_eq(v[0], 16);
    static const char *bad[] = {"", ",", "1,", ",1", "1,,2", "0", "-1", "1,x", "1 ,2", "2000000"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(gw_kit_parse_int_list(bad[i], v, 4), -1, "\"%s\" accepted", bad[i]);
    cr_assert_eq(gw_kit_parse_int_list("1,2,3,4,5", v, 4), -1, "more than max accepted");
}

/* Run a writer over a memory stream and return what it wrote. */
static char *json_text(void (*write)(gw_kit_json_t *j))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    gw_kit_json_t j;
    gw_kit_json_start(&j, f, 6);
    write(&j);
    fclose(f);
    return buf;
}

static void write_report(gw_kit_json_t *j)
{
    gw_kit_json_object(j, NULL, "\n  ");
    gw_kit_json_str(j, "name", "a \"b\"\\\n");
    gw_kit_json_num(j, "pi", 3.14159265);
    gw_kit_json_num(j, "nan", NAN);
    gw_kit_json_int(j, "neg", -5);
    gw_kit_json_uint(j, "big", 18446744073709551615ull);
    gw_kit_json_int_or_null(j, "gone", 0, 3);
    gw_kit_json_num_or_null(j, "here", 1, 0.25);
    gw_kit_json_array(j, "list", NULL);
    gw_kit_json_str(j, NULL, "x");
    gw_kit_json_bool(j, NULL, 1);
    gw_kit_json_null(j, NULL);
    gw_kit_json_close(j, NULL);
    gw_kit_json_array(j, "rows", "\n    ");
    gw_kit_json_object(j, NULL, NULL);
    gw_kit_json_int(j, "a", 1);
    gw_kit_json_break(j, "\n     ");
    gw_kit_json_int(j, "b", 2);
    gw_kit_json_close(j, NULL);
    gw_kit_json_object(j, NULL, NULL);
    gw_kit_json_close(j, NULL);
    gw_kit_json_close(j, "\n  ");
    gw_kit_json_array(j, "empty", "\n    ");
    gw_kit_json_close(j, "\n  ");
    gw_kit_json_str(j, "error", NULL);
    gw_kit_json_close(j, "\n");
}

Test(kit_json, layout_escaping_and_null)
{
    char *t = json_text(write_report);
    cr_assert_str_eq(t, "{\n"
                        "  \"name\": \"a \\\"b\\\"\\\\\\u000a\",\n"
                        "  \"pi\": 3.14159,\n"
                        "  \"nan\": null,\n"
                        "  \"neg\": -5,\n"
                        "  \"big\": 18446744073709551615,\n"
                        "  \"gone\": null,\n"
                        "  \"here\": 0.25,\n"
                        "  \"list\": [\"x\", true, null],\n"
                        "  \"rows\": [\n"
                        "    {\"a\": 1,\n"
                        "     \"b\": 2},\n"
                        "    {}\n"
                        "  ],\n"
                        "  \"empty\": [],\n"
                        "  \"error\": null\n"
                        "}");
    free(t);
}

static void write_digits(gw_kit_json_t *j)
{
    j->digits = 9;
    gw_kit_json_array(j, NULL, NULL);
    gw_kit_json_num(j, NULL, 1.0 / 3);
    gw_kit_json_num(j, NULL, 1e300 * 1e10);
    gw_kit_json_num(j, NULL, 2);
    gw_kit_json_close(j, NULL);
}

Test(kit_json, digits_and_infinity)
{
    char *t = json_text(write_digits);
    cr_assert_str_eq(t, "[0.333333333, null, 2]");
    free(t);
}

Test(kit_time, order_statistics)
{
    double v[] = {5, 1, 4, 2, 3};
    gw_kit_sort(v, 5);
    for (int i = 0; i < 5; i++)
        cr_assert_eq(v[i], i + 1);
    cr_assert_eq(gw_kit_median_sorted(v, 5), 3);
    cr_assert_eq(gw_kit_median_sorted(v, 4), 2.5);
    cr_assert_eq(gw_kit_median_sorted(v, 1), 1);
    cr_assert_eq(gw_kit_percentile_sorted(v, 5, 50), 3);
    cr_assert_eq(gw_kit_percentile_sorted(v, 5, 90), 5);
    cr_assert_eq(gw_kit_percentile_sorted(v, 5, 0), 1);
    cr_assert_eq(gw_kit_percentile_sorted(v, 5, 100), 5);
    int64_t a = gw_kit_now_ns();
    double us = gw_kit_now_us(), s = gw_kit_now_s();
    cr_assert(gw_kit_now_ns() >= a && us > 0 && s > 0);
}

static const gw_kit_prog_t prog = {"prog sub", "\n(see prog sub --help)\n"};

Test(kit_usage, messages_and_status, .init = cr_redirect_stderr)
{
    cr_assert_eq(gw_kit_usage_error(&prog, "bad %s", "thing"), GW_KIT_EXIT_USAGE);
    char *argv[] = {"prog", "--json", "extra", NULL};
    optind = 2;
    cr_assert_eq(gw_kit_getopt_error(&prog, ':', argv), GW_KIT_EXIT_USAGE);
    optopt = 0;
    cr_assert_eq(gw_kit_getopt_error(&prog, '?', argv), GW_KIT_EXIT_USAGE);
    optopt = 'x';
    optind = 3;
    argv[2] = "-x";
    cr_assert_eq(gw_kit_getopt_error(&prog, '?', argv), GW_KIT_EXIT_USAGE);
    optind = 2;
    cr_assert_eq(gw_kit_no_operands(&prog, 3, argv), GW_KIT_EXIT_USAGE);
    optind = 3;
    cr_assert_eq(gw_kit_no_operands(&prog, 3, argv), -1);
    fflush(stderr);
    cr_assert_stderr_eq_str("prog sub: bad thing\n(see prog sub --help)\n"
                            "prog sub: option --json needs a value\n(see prog sub --help)\n"
                            "prog sub: unknown option \"--json\"\n(see prog sub --help)\n"
                            "prog sub: unknown option \"-x\"\n(see prog sub --help)\n"
                            "prog sub: unexpected argument \"-x\"\n(see prog sub --help)\n");
}

Test(kit_file, results_are_created_for_the_owner_alone)
{
    char dir[] = "/tmp/gw_kit_file_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/report.json", dir);
    /* Under umask 0 a file created 0644 or 0666 would keep those bits. */
    mode_t old = umask(0);
    FILE *f = gw_kit_fopen_private(path);
    umask(old);
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    cr_expect_geq(fputs("{}\n", f), 0);
    cr_expect_eq(fclose(f), 0);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_mode & 07777, 0600, "mode %04o", (unsigned)(st.st_mode & 07777));
    cr_expect_eq(st.st_size, 3);
    /* A second open truncates, as fopen(path, "w") does. */
    f = gw_kit_fopen_private(path);
    cr_assert_not_null(f);
    cr_expect_eq(fclose(f), 0);
    cr_assert_eq(stat(path, &st), 0);
    cr_expect_eq(st.st_size, 0);
    /* A directory that does not exist: NULL and errno, no crash. */
    snprintf(path, sizeof(path), "%s/no/such/report.json", dir);
    errno = 0;
    cr_expect_null(gw_kit_fopen_private(path));
    cr_expect_eq(errno, ENOENT);
    snprintf(path, sizeof(path), "%s/report.json", dir);
    unlink(path);
    rmdir(dir);
}
