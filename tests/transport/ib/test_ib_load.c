/*
 * test_ib_load.c - the IB transport where RDMA is missing: libraries opened
 * at run time (and their absence), the one line that says why RDMA is not
 * used (INFO normally, ERROR with GW_TRANSPORT=ib), and the GW_IB_*
 * variables. Runs anywhere: with or without libibverbs, devices or ports.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/log_capture.h"
#include "transport/ib/ib_internal.h"

Test(ib_load, missing_libibverbs)
{
    gw_ib_api_t api;
    char why[256] = "";
    gw_status_t st =
        gw__ib_api_open(&api, "libgw-no-such-verbs.so.1", "librdmacm.so.1", why, sizeof(why));
    cr_assert_eq(st, GW_ERR_UNSUPPORTED);
    cr_assert(strstr(why, "libgw-no-such-verbs.so.1") && strstr(why, "libibverbs1"), "reason: %s",
              why);
    cr_assert_null(api.verbs_lib);
}

Test(ib_load, missing_librdmacm_is_not_fatal)
{
    gw_ib_api_t api;
    char why[256] = "";
    gw_status_t st =
        gw__ib_api_open(&api, "libibverbs.so.1", "libgw-no-such-rdmacm.so.1", why, sizeof(why));
    if (st == GW_ERR_UNSUPPORTED)
        cr_skip_test("libibverbs is not installed here: %s", why);
    cr_assert_eq(st, GW_OK);
    cr_assert_not_null(api.get_device_list);
    cr_assert_not_null(api.reg_mr);
    cr_assert_null(api.rdmacm_lib);
    cr_assert_null(api.connect, "rdmacm functions stay NULL without librdmacm");
    cr_assert(strstr(api.rdmacm_why, "libgw-no-such-rdmacm.so.1"), "%s", api.rdmacm_why);
    gw__ib_api_close(&api);
}

Test(ib_load, real_libraries_resolve)
{
    gw_ib_api_t api;
    char why[256] = "";
    gw_status_t st = gw__ib_api_open(&api, "libibverbs.so.1", "librdmacm.so.1", why, sizeof(why));
    if (st == GW_ERR_UNSUPPORTED)
        cr_skip_test("libibverbs is not installed here: %s", why);
    cr_assert_eq(st, GW_OK);
    if (!api.rdmacm_lib)
        cr_skip_test("librdmacm is not installed here: %s", api.rdmacm_why);
    cr_assert_not_null(api.get_cm_event);
    cr_assert_not_null(api.get_src_port);
    cr_assert_str_eq(api.wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded");
    gw__ib_api_close(&api);
}

static gw_transport_params_t params_for(const gw_logger_t *lg)
{
    gw_transport_params_t p;
    memset(&p, 0, sizeof(p));
    p.rank = 0;
    p.size = 2;
    p.log = lg;
    p.timeout_ms = 1000;
    p.nsocks = 1;
    return p;
}

/* With a device filter that matches nothing, open() must fail on every
 * machine, RDMA or not, with exactly one line saying why. */
static void expect_unavailable(int forced, const char *level)
{
    setenv("GW_IB_HCA", "=gw_no_such_device", 1);
    /* Whether the user asked for ib comes from the selection (params), not
     * from the environment, which may say otherwise. */
    setenv("GW_TRANSPORT", forced ? "auto" : "ib", 1);
    gw_logger_t lg = capture_logger(GW_LOG_INFO);
    gw_transport_params_t p = params_for(&lg);
    p.forced = forced;
    gw_transport_t *t = NULL;
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_status_t st = gw__ib_transport_ops.open(&p, &t, addr);
    char *text = captured(&lg);
    cr_assert(st == GW_ERR_NOT_FOUND || st == GW_ERR_UNSUPPORTED, "open returned %s:\n%s",
              gw_status_name(st), text);
    cr_assert_null(t);
    char want[64];
    snprintf(want, sizeof(want), "ib %s ", level);
    cr_assert_eq(count_in(text, want), 1, "expected one %s line:\n%s", level, text);
    cr_assert(
        strstr(text, forced ? "GW_TRANSPORT=ib, but RDMA is not usable here" : "not using RDMA"),
        "%s", text);
    cr_assert(st == GW_ERR_UNSUPPORTED || strstr(text, "no RDMA device") ||
                  strstr(text, "matches no port"),
              "the line does not say why:\n%s", text);
    free(text);
    fclose(lg.file);
}

Test(ib_load, unavailable_says_why_once) { expect_unavailable(0, "INFO"); }

Test(ib_load, forced_unavailable_is_an_error) { expect_unavailable(1, "ERROR"); }

static void expect_config_error(const char *name, const char *value)
{
    gw_logger_t lg = capture_logger(GW_LOG_WARN);
    setenv(name, value, 1);
    gw_ib_config_t cfg;
    gw_status_t st = gw__ib_config_read(&lg, &cfg);
    char *text = captured(&lg);
    cr_assert_eq(st, GW_ERR_CONFIG, "%s=%s accepted", name, value);
    cr_assert(strstr(text, name), "the error does not name %s: %s", name, text);
    unsetenv(name);
    free(text);
    fclose(lg.file);
}

Test(ib_load, config_variables)
{
    gw_logger_t lg = capture_logger(GW_LOG_WARN);
    gw_ib_config_t cfg;
    cr_assert_eq(gw__ib_config_read(&lg, &cfg), GW_OK);
    cr_assert_eq(cfg.qps, 1);
    cr_assert_eq(cfg.gid_index, -1);
    cr_assert_eq(cfg.cm_mode, 0);
    cr_assert_eq(cfg.timeout, 18);
    cr_assert_eq(cfg.retry_cnt, 7);
    cr_assert_eq(cfg.reg_cache, 1);
    cr_assert_eq(cfg.cts_defer_us, GW_IB_CTS_DEFER_US);
    cr_assert_null(cfg.hca);
    setenv("GW_IB_QPS", "4", 1);
    setenv("GW_IB_CM", "OOB", 1);
    setenv("GW_IB_GID_INDEX", "3", 1);
    setenv("GW_IB_HCA", "mlx5_0:1", 1);
    cr_assert_eq(gw__ib_config_read(&lg, &cfg), GW_OK);
    cr_assert_eq(cfg.qps, 4);
    cr_assert_eq(cfg.cm_mode, GW_IB_CM_OOB);
    cr_assert_eq(cfg.gid_index, 3);
    cr_assert_str_eq(cfg.hca, "mlx5_0:1");
    unsetenv("GW_IB_QPS");
    unsetenv("GW_IB_CM");
    unsetenv("GW_IB_GID_INDEX");
    unsetenv("GW_IB_HCA");
    fclose(lg.file);
    expect_config_error("GW_IB_QPS", "0");
    expect_config_error("GW_IB_QPS", "17");
    expect_config_error("GW_IB_CM", "verbs");
    expect_config_error("GW_IB_TIMEOUT", "32");
    expect_config_error("GW_IB_RETRY_CNT", "8");
    expect_config_error("GW_IB_GID_INDEX", "x");
    expect_config_error("GW_IB_REG_CACHE", "2");
    expect_config_error("GW_IB_CTS_DEFER_US", "-1");
}

Test(ib_load, bad_hca_list_is_a_config_error)
{
    setenv("GW_IB_HCA", "mlx5_0:zero", 1);
    gw_logger_t lg = capture_logger(GW_LOG_WARN);
    gw_transport_params_t p = params_for(&lg);
    gw_transport_t *t = NULL;
    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    gw_status_t st = gw__ib_transport_ops.open(&p, &t, addr);
    char *text = captured(&lg);
    if (st == GW_ERR_UNSUPPORTED)
        cr_skip_test("libibverbs is not installed here");
    cr_assert_eq(st, GW_ERR_CONFIG, "%s", text);
    cr_assert(strstr(text, "GW_IB_HCA") && strstr(text, "port"), "%s", text);
    free(text);
    fclose(lg.file);
}
