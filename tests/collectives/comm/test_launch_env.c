/* The configuration gw_comm_init_env takes from the launcher's variables
 * (collectives/comm/launch_env.c): Slurm's node list for the root (the
 * first host, the port from the job and step ids or GW_ROOT_PORT, rank 0
 * on that host), torchrun's variables before it, and the job token from a
 * file only this user can read. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/launch_env.h"

static const char *const vars[] = {"GW_ROOT",
                                   "GW_RANK",
                                   "GW_SIZE",
                                   "RANK",
                                   "WORLD_SIZE",
                                   "MASTER_ADDR",
                                   "MASTER_PORT",
                                   "OMPI_COMM_WORLD_RANK",
                                   "OMPI_COMM_WORLD_SIZE",
                                   "PMI_RANK",
                                   "PMI_SIZE",
                                   "SLURM_PROCID",
                                   "SLURM_NTASKS",
                                   "SLURM_STEP_NODELIST",
                                   "SLURM_JOB_NODELIST",
                                   "SLURM_JOB_ID",
                                   "SLURM_STEP_ID",
                                   "SLURM_NODEID",
                                   "GW_ROOT_PORT",
                                   "GW_JOB_TOKEN",
                                   "GW_JOB_TOKEN_FILE",
                                   "PMIX_NAMESPACE",
                                   "GW_TIMEOUT_MS",
                                   "TORCHELASTIC_USE_AGENT_STORE"};

static char token_path[64];

static void clean(void)
{
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    snprintf(token_path, sizeof(token_path), "/tmp/gw-token-%d", (int)getpid());
    unlink(token_path);
}

static void fini(void)
{
    unlink(token_path);
    clean();
}

static gw_status_t config(gw_config_t *cfg, gw_launch_env_t *keep)
{
    gw_logger_t lg = {.level = GW_LOG_NONE, .rank = -1, .file = stderr};
    gw_config_init(cfg);
    return gw__launch_env_config(&lg, 1000, cfg, keep);
}

static void slurm(const char *procid, const char *nodelist)
{
    setenv("SLURM_PROCID", procid, 1);
    setenv("SLURM_NTASKS", "4", 1);
    setenv("SLURM_STEP_NODELIST", nodelist, 1);
    setenv("SLURM_JOB_ID", "12345", 1);
    setenv("SLURM_STEP_ID", "2", 1);
}

Test(launch_env, slurm_root_on_the_first_host, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    slurm("1", "localhost,n[2-3]");
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_eq(cfg.rank, 1);
    cr_expect_eq(cfg.size, 4);
    char want[64];
    snprintf(want, sizeof(want), "localhost:%d", 10000 + (31 * 12345 + 2) % 20000);
    cr_expect_str_eq(cfg.root, want);
    /* Another step of the job: another port. */
    setenv("SLURM_STEP_ID", "3", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_neq(cfg.root, want);
    setenv("GW_ROOT_PORT", "4242", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "localhost:4242");
    /* SLURM_JOB_NODELIST when there is no step list. */
    unsetenv("SLURM_STEP_NODELIST");
    setenv("SLURM_JOB_NODELIST", "node[07-08]", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "node07:4242");
}

Test(launch_env, slurm_rank_0_must_be_on_the_first_host, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    char me[256] = "";
    gethostname(me, sizeof(me) - 1);
    char list[300];
    snprintf(list, sizeof(list), "%s,gwnowhere[1-3]", me);
    slurm("0", list);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    slurm("0", "gwnowhere[1-3]");
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
}

/* Slurm's node name need not be the host name (NodeName=localhost on host
 * vm): SLURM_NODEID says which node of the step a task is on, and rank 0
 * on node 0 is where the others look, whatever the names. */
Test(launch_env, slurm_rank_0_by_node_index_not_name, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    slurm("0", "gwnowhere[1-3]");
    setenv("SLURM_NODEID", "0", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK, "rank 0 on node 0 refused for its host name");
    char want[64];
    snprintf(want, sizeof(want), "gwnowhere1:%d", 10000 + (31 * 12345 + 2) % 20000);
    cr_expect_str_eq(cfg.root, want);
    /* Rank 0 on another node of the step (a plane or arbitrary
     * distribution): the others would look for it on node 0. */
    setenv("SLURM_NODEID", "2", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
    setenv("SLURM_NODEID", "x", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
    /* Only rank 0 is checked: rank 1 on node 2 is fine. */
    slurm("1", "gwnowhere[1-3]");
    setenv("SLURM_NODEID", "2", 1);
    cr_expect_eq(config(&cfg, &keep), GW_OK);
}

Test(launch_env, slurm_errors_name_the_variable, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    slurm("1", "n[3-1]");
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
    slurm("1", "n1");
    unsetenv("SLURM_JOB_ID");
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
    setenv("GW_ROOT_PORT", "70000", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG);
}

Test(launch_env, torchrun_and_gw_root_come_first, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    slurm("1", "n1");
    setenv("MASTER_ADDR", "10.9.8.7", 1);
    setenv("MASTER_PORT", "29500", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "10.9.8.7:29500");
    unsetenv("MASTER_ADDR");
    unsetenv("MASTER_PORT");
    setenv("GW_ROOT", "127.0.0.1:5000", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_null(cfg.root, "GW_ROOT is gw_comm_init's to read");
}

/* torchrun's agent store holds MASTER_PORT: the root moves off it. */
Test(launch_env, torchrun_agent_store_leaves_master_port_alone, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "10.9.8.7", 1);
    setenv("MASTER_PORT", "29500", 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "10.9.8.7:29501");
    setenv("GW_ROOT_PORT", "31000", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "10.9.8.7:31000");
    setenv("GW_ROOT_PORT", "29500", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "GW_ROOT_PORT on the agent's port");
    unsetenv("GW_ROOT_PORT");
    setenv("MASTER_PORT", "65535", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "no port above 65535");
    setenv("MASTER_PORT", "29500", 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.root, "10.9.8.7:29500", "without the agent store, MASTER_PORT itself");
    setenv("TORCHELASTIC_USE_AGENT_STORE", "yes please", 1);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "a malformed value is an error");
}

static void write_token(const char *text, mode_t mode)
{
    int fd = open(token_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    cr_assert_eq(chmod(token_path, mode), 0);
}

Test(launch_env, token_from_a_private_file, .init = clean, .fini = fini)
{
    gw_config_t cfg;
    gw_launch_env_t keep;
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "2", 1);
    setenv("GW_JOB_TOKEN_FILE", token_path, 1);
    write_token("0123456789abcdef0123\nsecond line\n", 0600);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_str_eq(cfg.job_token, "0123456789abcdef0123");
    write_token("0123456789abcdef0123\n", 0640);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "a token others may read was taken");
    write_token("short\n", 0600);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "a 5-character token was taken");
    unlink(token_path);
    cr_expect_eq(config(&cfg, &keep), GW_ERR_CONFIG, "a missing file was not an error");
    /* An exported GW_JOB_TOKEN wins: the file is not read at all. */
    setenv("GW_JOB_TOKEN", "from-the-environment", 1);
    cr_assert_eq(config(&cfg, &keep), GW_OK);
    cr_expect_null(cfg.job_token, "GW_JOB_TOKEN is gw_comm_init's to read");
}
