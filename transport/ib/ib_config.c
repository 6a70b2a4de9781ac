/*
 * ib_config.c - the GW_IB_* environment variables, named like NCCL's
 * NCCL_IB_* so that its users recognise them. Their types, defaults,
 * ranges and meanings are declared once, in common/env_registry.def
 * (`gradwire info --env` lists them); a variable that is set but malformed
 * is an error naming it, never silently replaced by the default.
 */
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "transport/ib/ib_internal.h"

static gw_status_t env_int(const gw_logger_t *lg, gw_env_id_t id, int *out)
{
    long v;
    if (gw__env_int(lg, id, &v) != GW_OK)
        return GW_ERR_CONFIG;
    *out = (int)v;
    return GW_OK;
}

gw_status_t gw__ib_config_read(const gw_logger_t *lg, gw_ib_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    const char *s;
    long v;
    int cm;
    if (gw__env_str(lg, GW_ENV_IB_HCA, &cfg->hca) != GW_OK ||
        gw__env_str(lg, GW_ENV_IB_SYSFS, &s) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->sysfs = s ? s : "/sys";
    if (env_int(lg, GW_ENV_IB_GID_INDEX, &cfg->gid_index) != GW_OK ||
        env_int(lg, GW_ENV_IB_QPS, &cfg->qps) != GW_OK ||
        env_int(lg, GW_ENV_IB_TIMEOUT, &cfg->timeout) != GW_OK ||
        env_int(lg, GW_ENV_IB_RETRY_CNT, &cfg->retry_cnt) != GW_OK ||
        env_int(lg, GW_ENV_IB_SL, &cfg->sl) != GW_OK ||
        env_int(lg, GW_ENV_IB_TC, &cfg->tc) != GW_OK ||
        env_int(lg, GW_ENV_IB_REG_CACHE, &cfg->reg_cache) != GW_OK ||
        env_int(lg, GW_ENV_IB_SPIN_US, &cfg->spin_us) != GW_OK ||
        env_int(lg, GW_ENV_IB_EAGER, &cfg->eager_max) != GW_OK ||
        env_int(lg, GW_ENV_IB_CTS_DEFER_US, &cfg->cts_defer_us) != GW_OK ||
        env_int(lg, GW_ENV_IB_TEST_QP_ERROR, &cfg->test_qp_error) != GW_OK ||
        env_int(lg, GW_ENV_IB_TEST_REJECT, &cfg->test_reject) != GW_OK ||
        env_int(lg, GW_ENV_IB_RAILS, &cfg->rails) != GW_OK)
        return GW_ERR_CONFIG;
    if (gw__env_int(lg, GW_ENV_IB_REG_CACHE_MAX, &v) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->reg_cache_max = v;
    /* Unset leaves the choice to the device (cm_mode 0); the two modes are
     * rdmacm and oob, in the registry's order. */
    if (gw__env_choice(lg, GW_ENV_IB_CM, &cm) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->cm_mode = cm < 0 ? 0 : cm == 0 ? GW_IB_CM_RDMACM : GW_IB_CM_OOB;
    return GW_OK;
}
