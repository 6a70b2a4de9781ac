/*
 * ib_config.c - the GW_IB_* environment variables, named like NCCL's
 * NCCL_IB_* so that its users recognise them. A variable that is set but
 * malformed is an error naming it, never silently replaced by the default.
 *
 *   GW_IB_HCA          devices and ports to use (see ib_hca.c)
 *   GW_IB_GID_INDEX    GID index; default: chosen from sysfs on RoCE
 *   GW_IB_QPS          queue pairs per peer, 1..16 (default 1); messages of
 *                      at least 2 x 128 KiB are striped over them
 *   GW_IB_CM           rdmacm (default when librdmacm loads and the port
 *                      has an IP address) or oob
 *   GW_IB_TIMEOUT      local ACK timeout exponent: 4.096 us x 2^N (default
 *                      18, about 1 s, as NCCL)
 *   GW_IB_RETRY_CNT    transport retries, 0..7 (default 7)
 *   GW_IB_SL, GW_IB_TC service level and traffic class
 *   GW_IB_REG_CACHE    0 turns the registration cache off
 *   GW_IB_REG_CACHE_MAX entries the cache keeps (default 1024)
 *   GW_IB_SPIN_US      busy polling before sleeping in the kernel (default
 *                      50; at most 100 s, which in practice never sleeps)
 *   GW_IB_EAGER        messages up to this many bytes (default and most 4096;
 *                      0: none) go eagerly, without waiting for the
 *                      receiver's CTS
 *   GW_IB_CTS_DEFER_US the receive of a message that may come eagerly
 *                      waits this long for it before sending its CTS
 *                      (default 200; 0: at once), and never longer than
 *                      until the rank would sleep
 *   GW_IB_SYSFS        where sysfs is mounted (default /sys), for containers
 *                      that mount the host's elsewhere
 *   GW_IB_TEST_QP_ERROR test-only fault injection: once this rank has
 *                      completed N messages over verbs, it moves its QPs to
 *                      the lowest-ranked peer into the error state, as a
 *                      NIC does with a QP that hit a fatal error (0, the
 *                      default: never). Never set it in a real job.
 *   GW_IB_TEST_REJECT  test-only: this rank rejects the first N rdmacm
 *                      connection requests of its peers (not knocks) that it
 *                      would accept, so that their dials are retried (0, the
 *                      default). Never set it in a real job.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/env.h"
#include "transport/ib/ib_internal.h"

static gw_status_t env_int(const gw_logger_t *lg, const char *name, long min, long max, long dflt,
                           int *out)
{
    long v;
    if (gw__env_int(lg, name, min, max, dflt, &v) != GW_OK)
        return GW_ERR_CONFIG;
    *out = (int)v;
    return GW_OK;
}

gw_status_t gw__ib_config_read(const gw_logger_t *lg, gw_ib_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    static const char *const cms[] = {"rdmacm", "oob"};
    const char *s;
    long v;
    int cm;
    if (gw__env_str(lg, "GW_IB_HCA", "a list of devices like mlx5_0:1,mlx5_1:1", &cfg->hca) !=
            GW_OK ||
        gw__env_str(lg, "GW_IB_SYSFS", "the directory where sysfs is mounted", &s) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->sysfs = s ? s : "/sys";
    if (env_int(lg, "GW_IB_GID_INDEX", -1, 1023, -1, &cfg->gid_index) != GW_OK ||
        env_int(lg, "GW_IB_QPS", 1, GW_IB_MAX_QPS, 1, &cfg->qps) != GW_OK ||
        env_int(lg, "GW_IB_TIMEOUT", 1, 31, 18, &cfg->timeout) != GW_OK ||
        env_int(lg, "GW_IB_RETRY_CNT", 0, 7, 7, &cfg->retry_cnt) != GW_OK ||
        env_int(lg, "GW_IB_SL", 0, 15, 0, &cfg->sl) != GW_OK ||
        env_int(lg, "GW_IB_TC", 0, 255, 0, &cfg->tc) != GW_OK ||
        env_int(lg, "GW_IB_REG_CACHE", 0, 1, 1, &cfg->reg_cache) != GW_OK ||
        env_int(lg, "GW_IB_SPIN_US", 0, 100000000, 50, &cfg->spin_us) != GW_OK ||
        env_int(lg, "GW_IB_EAGER", 0, GW_IB_EAGER_MAX, GW_IB_EAGER_MAX, &cfg->eager_max) != GW_OK ||
        env_int(lg, "GW_IB_CTS_DEFER_US", 0, 10000000, GW_IB_CTS_DEFER_US, &cfg->cts_defer_us) !=
            GW_OK ||
        env_int(lg, "GW_IB_TEST_QP_ERROR", 0, 1 << 30, 0, &cfg->test_qp_error) != GW_OK ||
        env_int(lg, "GW_IB_TEST_REJECT", 0, 1 << 20, 0, &cfg->test_reject) != GW_OK)
        return GW_ERR_CONFIG;
    if (gw__env_int(lg, "GW_IB_REG_CACHE_MAX", 1, 1L << 20, 1024, &v) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->reg_cache_max = v;
    /* Unset leaves the choice to the device (cm_mode 0); the two modes are
     * rdmacm and oob, in the order of cms. */
    if (gw__env_choice(lg, "GW_IB_CM", cms, 2, -1, &cm) != GW_OK)
        return GW_ERR_CONFIG;
    cfg->cm_mode = cm < 0 ? 0 : cm == 0 ? GW_IB_CM_RDMACM : GW_IB_CM_OOB;
    return GW_OK;
}
