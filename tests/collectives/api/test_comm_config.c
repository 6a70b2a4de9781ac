/*
 * Communicator configuration and argument checking that need no peers:
 * environment conventions, clear configuration errors, and the one-rank
 * communicator (where every collective is a local copy).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradwire.h"

static void clear_env(void)
{
    const char *vars[] = {"GW_RANK",
                          "GW_SIZE",
                          "RANK",
                          "WORLD_SIZE",
                          "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE",
                          "PMI_RANK",
                          "PMI_SIZE",
                          "SLURM_PROCID",
                          "SLURM_NTASKS",
                          "GW_ROOT",
                          "MASTER_ADDR",
                          "MASTER_PORT",
                          "GW_TRANSPORT",
                          "GW_ALGO",
                          "GW_NSOCKS",
                          "GW_TIMEOUT_MS",
                          "GW_CHUNK_BYTES",
                          "GW_JOB_TOKEN",
                          "GW_SOCKET_IFNAME",
                          "GW_DEBUG_FILE",
                          "GW_TUNING_FILE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    setenv("GW_DEBUG", "NONE", 1);
}

TestSuite(comm_config, .init = clear_env);

Test(comm_config, no_rank_in_environment_is_a_config_error)
{
    gw_comm_t *comm = (gw_comm_t *)0x1;
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG);
    cr_expect_eq(comm, (gw_comm_t *)0x1, "output written on failure");
}

Test(comm_config, malformed_rank_variables_are_rejected)
{
    gw_comm_t *comm = NULL;
    setenv("RANK", "one", 1);
    setenv("WORLD_SIZE", "2", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG);
    setenv("RANK", "2", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "rank >= size accepted");
    setenv("RANK", "0", 1);
    unsetenv("WORLD_SIZE");
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "missing size accepted");
    setenv("WORLD_SIZE", "2", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "missing root accepted");
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "MASTER_ADDR without port accepted");
}

Test(comm_config, bad_knobs_are_rejected)
{
    gw_comm_t *comm = NULL;
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    setenv("GW_ALGO", "bogus", 1);
    cr_expect_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    unsetenv("GW_ALGO");
    setenv("GW_NSOCKS", "99", 1);
    cr_expect_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    unsetenv("GW_NSOCKS");
    setenv("GW_TRANSPORT", "carrier-pigeon", 1);
    cr_expect_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    unsetenv("GW_TRANSPORT");
    setenv("GW_TIMEOUT_MS", "-5", 1);
    cr_expect_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    unsetenv("GW_TIMEOUT_MS");
    cfg.rank = 3;
    cr_expect_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    cr_expect_eq(gw_comm_init(NULL, &comm), GW_ERR_INVALID_ARG);
}

/* A one-rank gw_comm_init_env with var=value fails with GW_ERR_CONFIG, the
 * output untouched, and exactly one line of the log (at the default level,
 * in a GW_DEBUG_FILE) names var; that line is an ERROR holding want. */
static void expect_env_refused(const char *var, const char *value, const char *want)
{
    char path[] = "/tmp/gw_comm_config_log_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    unsetenv("GW_DEBUG");
    setenv("GW_DEBUG_FILE", path, 1);
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    setenv(var, value, 1);
    gw_comm_t *comm = (gw_comm_t *)0x1;
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "%s=\"%s\" accepted", var, value);
    cr_expect_eq(comm, (gw_comm_t *)0x1, "output written on failure");
    unsetenv(var);
    unsetenv("GW_DEBUG_FILE");
    setenv("GW_DEBUG", "NONE", 1);

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    char line[2048];
    int naming = 0;
    while (fgets(line, sizeof(line), f)) {
        if (!strstr(line, var))
            continue;
        naming++;
        cr_expect(strstr(line, " ERROR "), "not an ERROR line: %s", line);
        cr_expect(strstr(line, want), "%s=\"%s\": line lacks \"%s\": %s", var, value, want, line);
    }
    fclose(f);
    unlink(path);
    cr_expect_eq(naming, 1, "%s=\"%s\": %d lines name the variable, want 1", var, value, naming);
}

Test(comm_config, set_but_malformed_variables_fail_naming_them)
{
    expect_env_refused("GW_NSOCKS", " 2",
                       "GW_NSOCKS=\" 2\" has white space at an end; accepted: "
                       "an integer in [1, 16]");
    expect_env_refused("GW_NSOCKS", "",
                       "GW_NSOCKS is set but empty; accepted: an integer in [1, "
                       "16]");
    expect_env_refused("GW_DEBUG", "LOUD",
                       "GW_DEBUG=\"LOUD\" is not one of NONE, ERROR, WARN, INFO, TRACE");
    expect_env_refused("GW_NSOCKS", "2 ", "GW_NSOCKS=\"2 \" has white space");
    expect_env_refused("GW_NSOCKS", "+2", "GW_NSOCKS=\"+2\" is not an integer in [1, 16]");
    expect_env_refused("GW_NSOCKS", "17", "GW_NSOCKS=\"17\" is not an integer in [1, 16]");
    expect_env_refused("GW_TIMEOUT_MS", "5s", "GW_TIMEOUT_MS=\"5s\" is not an integer");
    expect_env_refused("GW_CHUNK_BYTES", "", "GW_CHUNK_BYTES is set but empty");
    expect_env_refused("GW_ALGO", "", "GW_ALGO is set but empty; accepted: one of auto, ring");
    expect_env_refused("GW_ALGO", "ring ", "GW_ALGO=\"ring \" has white space");
    expect_env_refused("GW_TRANSPORT", "", "GW_TRANSPORT is set but empty");
    expect_env_refused("GW_SOCKET_IFNAME", " lo", "GW_SOCKET_IFNAME=\" lo\" has white space");
    expect_env_refused("GW_JOB_TOKEN", "", "GW_JOB_TOKEN is set but empty");
    expect_env_refused("GW_ROOT", "", "GW_ROOT is set but empty");
    expect_env_refused("GW_ROOT", "127.0.0.1", "GW_ROOT=\"127.0.0.1\" is not host:port");
    expect_env_refused("GW_TUNING_FILE", "", "GW_TUNING_FILE is set but empty");
    expect_env_refused("GW_DEBUG", "", "GW_DEBUG is set but empty");
    expect_env_refused("GW_DEBUG", "warn ", "GW_DEBUG=\"warn \" has white space");
    /* The launcher's variables, read before the communicator exists. */
    expect_env_refused("GW_RANK", "", "GW_RANK is set but empty; accepted: an integer");
    expect_env_refused("GW_RANK", " 0", "GW_RANK=\" 0\" has white space");
    expect_env_refused("GW_SIZE", "1 ", "GW_SIZE=\"1 \" has white space");
    expect_env_refused("MASTER_ADDR", "", "MASTER_ADDR is set but empty");
}

Test(comm_config, torchrun_and_launcher_variables_are_checked)
{
    gw_comm_t *comm = (gw_comm_t *)0x1;
    /* A set but empty rank variable is the convention in use: an error, not
     * a reason to read the next launcher's. */
    setenv("RANK", "", 1);
    setenv("WORLD_SIZE", "1", 1);
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "RANK= accepted");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    setenv("OMPI_COMM_WORLD_SIZE", "", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "OMPI_COMM_WORLD_SIZE= accepted");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");
    setenv("SLURM_PROCID", "0", 1);
    setenv("SLURM_NTASKS", "1", 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("MASTER_PORT", "29500x", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "MASTER_PORT=29500x accepted");
    setenv("MASTER_PORT", "", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "MASTER_PORT= accepted");
    setenv("MASTER_PORT", "70000", 1);
    cr_expect_eq(gw_comm_init_env(&comm), GW_ERR_CONFIG, "MASTER_PORT=70000 accepted");
    cr_expect_eq(comm, (gw_comm_t *)0x1, "output written on failure");
    /* Well formed, they make a one-rank communicator. */
    setenv("MASTER_PORT", "29500", 1);
    cr_assert_eq(gw_comm_init_env(&comm), GW_OK);
    cr_expect_eq(gw_comm_size(comm), 1);
    gw_comm_destroy(comm);
}

static gw_comm_t *single(void)
{
    gw_comm_t *comm = NULL;
    setenv("GW_RANK", "0", 1);
    setenv("GW_SIZE", "1", 1);
    cr_assert_eq(gw_comm_init_env(&comm), GW_OK);
    cr_assert_eq(gw_comm_rank(comm), 0);
    cr_assert_eq(gw_comm_size(comm), 1);
    cr_assert_str_eq(gw_comm_transport(comm), "self");
    return comm;
}

Test(comm_config, one_rank_collectives_are_local_copies)
{
    gw_comm_t *comm = single();
    int32_t in[5] = {1, -2, 3, -4, 5}, out[5] = {0};
    cr_expect_eq(gw_allreduce(comm, in, out, 5, GW_INT32, GW_SUM), GW_OK);
    cr_expect_arr_eq(in, out, sizeof(in));
    cr_expect_eq(gw_allreduce(comm, in, in, 5, GW_INT32, GW_AVG), GW_OK);
    cr_expect_eq(in[1], -2);
    int32_t gathered[5];
    cr_expect_eq(gw_allgather(comm, in, gathered, 5, GW_INT32), GW_OK);
    cr_expect_arr_eq(in, gathered, sizeof(in));
    cr_expect_eq(gw_broadcast(comm, in, out, 5, GW_INT32, 0), GW_OK);
    cr_expect_eq(gw_reduce(comm, in, out, 5, GW_INT32, GW_MAX, 0), GW_OK);
    cr_expect_eq(gw_reduce_scatter(comm, in, out, 5, GW_INT32, GW_MIN), GW_OK);
    cr_expect_eq(gw_barrier(comm), GW_OK);
    cr_expect_eq(gw_allreduce(comm, NULL, NULL, 0, GW_FLOAT32, GW_SUM), GW_OK);
    gw_comm_destroy(comm);
}

Test(comm_config, bad_arguments_fail_and_break_the_communicator)
{
    gw_comm_t *comm = single();
    float x[4] = {0};
    cr_expect_eq(gw_allreduce(NULL, x, x, 4, GW_FLOAT32, GW_SUM), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_allreduce(comm, NULL, x, 4, GW_FLOAT32, GW_SUM), GW_ERR_INVALID_ARG);
    /* The communicator stays failed: its peers could never match this call. */
    cr_expect_eq(gw_allreduce(comm, x, x, 4, GW_FLOAT32, GW_SUM), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_barrier(comm), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);

    comm = single();
    cr_expect_eq(gw_allreduce(comm, x, x, SIZE_MAX / 2, GW_FLOAT32, GW_SUM), GW_ERR_OVERFLOW);
    gw_comm_destroy(comm);
    comm = single();
    cr_expect_eq(gw_allgather(comm, x, x, SIZE_MAX / 4, GW_FLOAT32), GW_ERR_OVERFLOW);
    gw_comm_destroy(comm);
    comm = single();
    cr_expect_eq(gw_allreduce(comm, x, x, 4, (gw_dtype_t)42, GW_SUM), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);
    comm = single();
    cr_expect_eq(gw_allreduce(comm, x, x, 4, GW_FLOAT32, (gw_op_t)-1), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);
    comm = single();
    cr_expect_eq(gw_broadcast(comm, x, x, 4, GW_FLOAT32, 1), GW_ERR_INVALID_ARG);
    gw_comm_destroy(comm);
    comm = single();
    cr_expect_eq(gw_comm_set_algo(comm, GW_ALGO_COUNT), GW_ERR_INVALID_ARG);
    cr_expect_eq(gw_comm_abort(comm), GW_OK);
    cr_expect_eq(gw_barrier(comm), GW_ERR_ABORTED);
    gw_comm_destroy(comm);
    cr_expect_eq(gw_comm_destroy(NULL), GW_OK);
}
