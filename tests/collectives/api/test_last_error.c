/*
 * gw_last_error: the full message of the last error, per thread (NULL) and
 * per communicator (from any thread), recorded even when GW_DEBUG keeps
 * it off the log, and never NULL.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradwire.h"

static void quiet_env(void)
{
    const char *vars[] = {
        "GW_RANK",       "GW_SIZE",        "RANK",         "WORLD_SIZE",     "GW_ROOT",
        "MASTER_ADDR",   "MASTER_PORT",    "GW_TRANSPORT", "GW_ALGO",        "GW_TIMEOUT_MS",
        "GW_DEBUG_FILE", "GW_TUNING_FILE", "GW_JOB_TOKEN", "GW_CHUNK_BYTES", "OMPI_COMM_WORLD_RANK",
        "SLURM_PROCID",  "PMI_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    /* NONE: nothing is written, yet every error must still be recorded. */
    setenv("GW_DEBUG", "NONE", 1);
}

static gw_comm_t *one_rank(void)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *comm = NULL;
    cr_assert_eq(gw_comm_init(&cfg, &comm), GW_OK);
    return comm;
}

typedef struct ask {
    gw_comm_t *comm;
    char own[1024], about_comm[1024];
} ask_t;

static void *ask_from_another_thread(void *arg)
{
    ask_t *a = arg;
    snprintf(a->own, sizeof(a->own), "%s", gw_last_error(NULL));
    snprintf(a->about_comm, sizeof(a->about_comm), "%s", gw_last_error(a->comm));
    return NULL;
}

Test(last_error, empty_never_null, .init = quiet_env)
{
    const char *e = gw_last_error(NULL);
    cr_assert_not_null(e);
    cr_expect_str_empty(e);
    gw_comm_t *comm = one_rank();
    cr_assert_not_null(gw_last_error(comm));
    cr_expect_str_empty(gw_last_error(comm));
    gw_comm_destroy(comm);
}

/* A malformed variable fails gw_comm_init with GW_ERR_CONFIG; no
 * communicator exists, but the thread knows why. */
Test(last_error, config_reason_of_failed_init, .init = quiet_env)
{
    setenv("GW_TIMEOUT_MS", "soon", 1);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *comm = NULL;
    cr_assert_eq(gw_comm_init(&cfg, &comm), GW_ERR_CONFIG);
    unsetenv("GW_TIMEOUT_MS");
    const char *e = gw_last_error(NULL);
    cr_expect(strstr(e, "GW_TIMEOUT_MS") && strstr(e, "soon"), "last error: \"%s\"", e);
    /* The message, not the log line: no host:pid:rank prefix. */
    cr_expect(!strstr(e, " gradwire "), "prefix kept: \"%s\"", e);
}

/* An invalid argument fails the call; the thread and the communicator
 * both know the reason, and another thread can ask about the communicator
 * but has no error of its own. */
Test(last_error, per_thread_and_per_communicator, .init = quiet_env)
{
    gw_comm_t *comm = one_rank();
    float x = 1.0f, y = 0.0f;
    cr_assert_eq(gw_allreduce(comm, &x, &y, 1, (gw_dtype_t)77, GW_SUM), GW_ERR_INVALID_ARG);
    const char *e = gw_last_error(NULL);
    cr_expect(strstr(e, "gw_allreduce") && strstr(e, "unknown dtype 77"), "thread: \"%s\"", e);
    e = gw_last_error(comm);
    cr_expect(strstr(e, "unknown dtype 77"), "communicator: \"%s\"", e);

    ask_t a = {.comm = comm};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, ask_from_another_thread, &a), 0);
    pthread_join(th, NULL);
    cr_expect_str_empty(a.own, "another thread's own last error: \"%s\"", a.own);
    cr_expect(strstr(a.about_comm, "unknown dtype 77"), "asked from another thread: \"%s\"",
              a.about_comm);
    /* A later success leaves the message in place. */
    gw_comm_t *other = one_rank();
    cr_expect(strstr(gw_last_error(comm), "unknown dtype 77"));
    cr_expect_str_empty(gw_last_error(other), "a fresh communicator has no error");
    gw_comm_destroy(other);
    gw_comm_destroy(comm);
}

/* A duplicated communicator's errors are its own, not its parent's. */
Test(last_error, child_has_its_own_slot, .init = quiet_env)
{
    gw_comm_t *comm = one_rank();
    gw_comm_t *dup = NULL;
    cr_assert_eq(gw_comm_dup(comm, &dup), GW_OK);
    float x = 1.0f;
    cr_assert_eq(gw_broadcast(dup, &x, &x, 1, GW_FLOAT32, 5), GW_ERR_INVALID_ARG);
    cr_expect(strstr(gw_last_error(dup), "root 5 out of range"), "dup: \"%s\"", gw_last_error(dup));
    cr_expect_str_empty(gw_last_error(comm), "parent got its child's error");
    gw_comm_destroy(dup);
    gw_comm_destroy(comm);
}
