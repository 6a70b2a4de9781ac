/*
 * test_env_check.c - gw_comm_init checks every GW_* variable that is set,
 * used or not (issue 28):
 *   - each variable of the registry with a malformed value fails creation
 *     with GW_ERR_CONFIG naming it, even on a 1-rank job that uses none of
 *     the network's settings (GW_ROOT_PORT=abc was accepted without a word);
 *   - a malformed GW_SHM_* fails a 2-rank job on one host, instead of an
 *     ERROR line and the job quietly running over TCP;
 *   - GW_JOB_TOKEN needs 16 characters, as GW_JOB_TOKEN_FILE does, and the
 *     error never shows the token;
 *   - GW_ROOT=127.0.0.1:5000:6000 is refused, not given to the resolver;
 *   - an unknown GW_* name is no error: a likely typo gets one WARN line
 *     naming the closest variable, a script's own GW_ name no WARN.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/env_registry.h"
#include "gradwire.h"

static char log_path[64];

static void setup(void)
{
    snprintf(log_path, sizeof(log_path), "/tmp/gw-env-check-XXXXXX");
    int fd = mkstemp(log_path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("GW_DEBUG_FILE", log_path, 1);
    unsetenv("GW_DEBUG");
}

static void teardown(void) { unlink(log_path); }

/* Everything the log file holds so far (freed by the caller). */
static char *log_read(void)
{
    FILE *f = fopen(log_path, "r");
    cr_assert_not_null(f);
    char *s = calloc(1, 1 << 16);
    size_t n = fread(s, 1, (1 << 16) - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* A 1-rank communicator: no root, no network, no peer. */
static gw_status_t init_alone(void)
{
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = 0;
    cfg.size = 1;
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init(&cfg, &comm);
    if (st == GW_OK)
        gw_comm_destroy(comm);
    return st;
}

/* A value the variable's type refuses. */
static const char *malformed(const gw_env_var_t *v)
{
    switch (v->type) {
    case GW_ENV_T_INT:
    case GW_ENV_T_BOOL:
        return "abc";
    case GW_ENV_T_CHOICE:
        return "bogus";
    case GW_ENV_T_HOSTPORT:
        return "127.0.0.1:5000:6000";
    case GW_ENV_T_SECRET:
        return "short";
    case GW_ENV_T_STR:
    case GW_ENV_T_PATH:
        break;
    }
    return "padded ";
}

TestSuite(env_check, .init = setup, .fini = teardown);

Test(env_check, every_malformed_variable_fails_init_used_or_not)
{
    cr_assert_eq(init_alone(), GW_OK, "a plain 1-rank job fails");
    int checked = 0;
    for (int i = 0; i < GW_ENV_COUNT; i++) {
        const gw_env_var_t *v = gw__env_var((gw_env_id_t)i);
        if (v->category == GW_ENV_C_LAUNCHER || strcmp(v->name, "GW_DEBUG_FILE") == 0)
            continue;
        const char *bad = malformed(v);
        setenv(v->name, bad, 1);
        gw_status_t st = init_alone();
        unsetenv(v->name);
        cr_expect_eq(st, GW_ERR_CONFIG, "%s=\"%s\": gw_comm_init gave %s", v->name, bad,
                     gw_status_name(st));
        char *log = log_read();
        char want[128];
        snprintf(want, sizeof(want), " ERROR %s", v->name);
        cr_expect(strstr(log, want), "%s=\"%s\" not named at ERROR:\n%s", v->name, bad, log);
        free(log);
        truncate(log_path, 0);
        checked++;
    }
    cr_expect_geq(checked, 35, "only %d variables checked", checked);
    /* GW_DEBUG_FILE itself: the log goes to stderr then. */
    setenv("GW_DEBUG_FILE", "padded ", 1);
    cr_expect_eq(init_alone(), GW_ERR_CONFIG);
}

Test(env_check, unused_root_port_and_root_are_checked)
{
    setenv("GW_ROOT_PORT", "abc", 1);
    cr_expect_eq(init_alone(), GW_ERR_CONFIG, "GW_ROOT_PORT=abc accepted");
    unsetenv("GW_ROOT_PORT");
    setenv("GW_ROOT", "127.0.0.1:5000:6000", 1);
    cr_expect_eq(init_alone(), GW_ERR_CONFIG, "GW_ROOT=127.0.0.1:5000:6000 accepted");
    char *log = log_read();
    cr_expect(strstr(log, "GW_ROOT_PORT=\"abc\" is not an integer in [1, 65535]"), "%s", log);
    cr_expect(strstr(log, "GW_ROOT=\"127.0.0.1:5000:6000\" is not host:port"), "%s", log);
    free(log);
}

Test(env_check, a_short_job_token_is_refused_without_showing_it)
{
    setenv("GW_JOB_TOKEN", "fifteen-chars-x", 1);
    cr_expect_eq(init_alone(), GW_ERR_CONFIG, "a 15-character token accepted");
    setenv("GW_JOB_TOKEN", "x", 1);
    cr_expect_eq(init_alone(), GW_ERR_CONFIG, "a 1-character token accepted");
    setenv("GW_JOB_TOKEN", "sixteen-chars-xy", 1);
    cr_expect_eq(init_alone(), GW_OK, "a 16-character token refused");
    unsetenv("GW_JOB_TOKEN");
    char *log = log_read();
    cr_expect(strstr(log, "GW_JOB_TOKEN is 15 characters long: a job token needs at least 16"),
              "%s", log);
    cr_expect(!strstr(log, "fifteen-chars-x"), "the token was logged:\n%s", log);
    free(log);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* Two ranks on this host with a malformed GW_SHM_* value: both refuse to
 * start (before: each logged an ERROR and the pair ran over TCP). */
Test(env_check, malformed_shm_setting_fails_a_two_rank_job, .timeout = 60)
{
    char root[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", free_port());
    setenv("GW_SHM_SPIN_US", "20us", 1);
    setenv("GW_TIMEOUT_MS", "10000", 1);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        pids[r] = fork();
        cr_assert_geq(pids[r], 0);
        if (pids[r] == 0) {
            gw_config_t cfg;
            gw_config_init(&cfg);
            cfg.rank = r;
            cfg.size = 2;
            cfg.root = root;
            gw_comm_t *comm = NULL;
            gw_status_t st = gw_comm_init(&cfg, &comm);
            if (st == GW_OK) {
                fprintf(stderr, "rank %d: created over %s\n", r, gw_comm_transport(comm));
                gw_comm_destroy(comm);
            }
            _exit((int)st);
        }
    }
    for (int r = 0; r < 2; r++) {
        int status;
        cr_assert_eq(waitpid(pids[r], &status, 0), pids[r]);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == GW_ERR_CONFIG,
                  "rank %d: exit %d, not GW_ERR_CONFIG", r, WEXITSTATUS(status));
    }
    char *log = log_read();
    cr_expect(strstr(log, "GW_SHM_SPIN_US=\"20us\" is not an integer"), "%s", log);
    free(log);
}

Test(env_check, unknown_names_warn_only_when_close_to_a_known_one)
{
    setenv("GW_NSOCK", "2", 1);
    setenv("GW_RXE_CLUSTER", "1", 1);
    cr_expect_eq(init_alone(), GW_OK, "an unknown name failed init");
    unsetenv("GW_NSOCK");
    unsetenv("GW_RXE_CLUSTER");
    char *log = log_read();
    cr_expect(strstr(log, " WARN GW_NSOCK is not a gradwire variable (ignored): did you mean "
                          "GW_NSOCKS?"),
              "%s", log);
    cr_expect(!strstr(log, "GW_RXE_CLUSTER"), "a script's own variable warned:\n%s", log);
    free(log);
}
