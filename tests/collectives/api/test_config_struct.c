/*
 * The versioned config structs (gradwire.h, collectives/api/config.c):
 * the initializer macros and the _init functions agree, an uninitialised
 * struct is refused rather than read as settings, and a struct from a newer
 * header (longer, its tail at the defaults) is accepted.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "gradwire.h"

static void quiet(void)
{
    setenv("GW_DEBUG", "NONE", 1);
    unsetenv("GW_DEBUG_FILE");
    unsetenv("GW_TUNING_FILE");
}

TestSuite(config_struct, .init = quiet);

Test(config_struct, initializer_and_init_agree)
{
    gw_config_t a = GW_CONFIG_INITIALIZER, b;
    memset(&b, 0xa5, sizeof(b));
    gw_config_init(&b);
    cr_expect_eq(a.struct_size, sizeof(gw_config_t));
    cr_expect_eq(a.magic, GW_CONFIG_MAGIC);
    cr_expect_eq(a.version, GW_VERSION_CODE);
    cr_expect(a.rank == -1 && a.size == -1 && !a.root && !a.job_token && a.timeout_ms == 0 &&
              !a.transport && !a.socket_ifname && a.nsocks == 0 && a.algo == GW_ALGO_AUTO);
    cr_expect(b.struct_size == a.struct_size && b.magic == a.magic && b.version == a.version &&
              b.rank == a.rank && b.size == a.size && b.root == a.root &&
              b.job_token == a.job_token && b.timeout_ms == a.timeout_ms &&
              b.transport == a.transport && b.socket_ifname == a.socket_ifname &&
              b.nsocks == a.nsocks && b.algo == a.algo);

    gw_compress_config_t c = GW_COMPRESS_CONFIG_INITIALIZER, d;
    memset(&d, 0xa5, sizeof(d));
    gw_compress_config_init(&d);
    cr_expect(c.struct_size == sizeof(c) && c.magic == GW_CONFIG_MAGIC &&
              c.version == GW_VERSION_CODE);
    /* The defaults the header documents. */
    cr_expect(c.codec == GW_CODEC_NONE && c.error_feedback == 1 && c.warmup_steps == 0 &&
              c.min_elements == 1024 && c.bucket_elements == 4096 && c.topk_ratio == 0.01 &&
              c.powersgd_rank == 4 && c.momentum == 0.0);
    cr_expect(d.struct_size == c.struct_size && d.magic == c.magic && d.version == c.version &&
              d.codec == c.codec && d.error_feedback == c.error_feedback &&
              d.warmup_steps == c.warmup_steps && d.min_elements == c.min_elements &&
              d.bucket_elements == c.bucket_elements && d.topk_ratio == c.topk_ratio &&
              d.powersgd_rank == c.powersgd_rank && d.seed == c.seed && d.momentum == c.momentum);
}

/* A one-rank communicator from cfg: its status, the communicator freed. */
static gw_status_t one_rank(const gw_config_t *cfg)
{
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init(cfg, &comm);
    if (st == GW_OK)
        gw_comm_destroy(comm);
    return st;
}

Test(config_struct, an_uninitialised_config_is_refused)
{
    gw_config_t cfg;
    memset(&cfg, 0, sizeof(cfg)); /* "= {0}" and set the fields, as before */
    cfg.rank = 0;
    cfg.size = 1;
    cfg.algo = GW_ALGO_AUTO;
    cr_expect_eq(one_rank(&cfg), GW_ERR_INVALID_ARG);
    gw_comm_t *comm = NULL;
    cr_expect_eq(gw_comm_join(&cfg, 10, &comm), GW_ERR_INVALID_ARG);

    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    cr_expect_eq(one_rank(&cfg), GW_OK);
    cfg.struct_size = 8; /* shorter than any versioned header's */
    cr_expect_eq(one_rank(&cfg), GW_ERR_INVALID_ARG);

    gw_compress_config_t cc;
    memset(&cc, 0, sizeof(cc));
    cc.codec = GW_CODEC_INT8;
    cc.bucket_elements = 4096;
    gw_compress_state_t *s = NULL;
    cr_expect_eq(gw_compress_state_create(&cc, 1, 4096, &s), GW_ERR_INVALID_ARG);
    gw_compress_config_init(&cc);
    cc.codec = GW_CODEC_INT8;
    cr_assert_eq(gw_compress_state_create(&cc, 1, 4096, &s), GW_OK);
    gw_compress_state_destroy(s);
}

/* A program built against a newer header passes a longer struct whose new
 * fields hold their defaults: the library reads what it knows. */
Test(config_struct, a_newer_headers_longer_struct_is_read)
{
    struct {
        gw_config_t known;
        long newer_fields[4];
    } newer;
    memset(&newer, 0, sizeof(newer));
    gw_config_init(&newer.known);
    newer.known.struct_size = sizeof(newer);
    newer.known.rank = 0;
    newer.known.size = 1;
    cr_expect_eq(one_rank(&newer.known), GW_OK);
}
