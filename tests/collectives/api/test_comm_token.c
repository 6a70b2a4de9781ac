/*
 * No token, no job, unless asked (transport/bootstrap/bootstrap.c): a
 * communicator of several ranks whose job has no token (neither the
 * config's nor GW_JOB_TOKEN, GW_JOB_TOKEN_FILE or a launcher's) is refused
 * by gw_comm_init with GW_ERR_CONFIG and a message saying how to set one,
 * at once and before any connection; GW_INSECURE=1 lets it run, and every
 * rank warns once that anyone who reaches a port gets in; a malformed
 * GW_INSECURE is itself refused. Each rank is a process of its own with
 * its stderr in a file.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"

#define RANKS 2

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(in);
    cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&in, sizeof(in)) == 0 &&
              getsockname(fd, (struct sockaddr *)&in, &len) == 0);
    close(fd);
    return ntohs(in.sin_port);
}

typedef struct ranks {
    char log[RANKS][64];
    int status[RANKS]; /* exit status; -1 killed */
    double took_s[RANKS];
} ranks_t;

/* Rank r: gw_comm_init with env set (NAME=VALUE pairs, NULL-ended) and
 * stderr in r->log[rank]; then an allreduce checked. Exit 0 on success,
 * 10 + the status gw_comm_init returned, 2 on a wrong result. */
static void rank_main(int rank, int port, const char *const *env, const char *log)
{
    FILE *f = freopen(log, "w", stderr);
    if (!f)
        _exit(3);
    setvbuf(stderr, NULL, _IONBF, 0);
    unsetenv("GW_JOB_TOKEN");
    unsetenv("GW_JOB_TOKEN_FILE");
    unsetenv("GW_INSECURE");
    unsetenv("GW_DEBUG_FILE");
    setenv("GW_DEBUG", "WARN", 1);
    for (int i = 0; env && env[i]; i += 2)
        setenv(env[i], env[i + 1], 1);
    char root[32];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = RANKS;
    cfg.root = root;
    cfg.timeout_ms = 10000;
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init(&cfg, &comm);
    if (st != GW_OK)
        _exit(10 + (int)st);
    float x = (float)(rank + 1), sum = 0;
    st = gw_allreduce(comm, &x, &sum, 1, GW_FLOAT32, GW_SUM);
    gw_comm_destroy(comm);
    _exit(st == GW_OK && sum == 3.0f ? 0 : 2);
}

static ranks_t run_ranks(const char *const *env)
{
    ranks_t r;
    memset(&r, 0, sizeof(r));
    int port = free_port();
    pid_t pids[RANKS];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < RANKS; k++) {
        snprintf(r.log[k], sizeof(r.log[k]), "/tmp/gw-token-test-%d-%d.log", (int)getpid(), k);
        pids[k] = fork();
        cr_assert_geq(pids[k], 0);
        if (pids[k] == 0)
            rank_main(k, port, env, r.log[k]);
    }
    for (int k = 0; k < RANKS; k++) {
        int ws = 0;
        for (int i = 0; i < 3000 && waitpid(pids[k], &ws, WNOHANG) == 0; i++)
            usleep(10000);
        if (waitpid(pids[k], &ws, WNOHANG) == 0) {
            kill(pids[k], SIGKILL);
            waitpid(pids[k], &ws, 0);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        r.status[k] = WIFEXITED(ws) ? WEXITSTATUS(ws) : -1;
        r.took_s[k] = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    return r;
}

/* How often needle occurs in rank k's log (removed afterwards by fini). */
static int count_in_log(const ranks_t *r, int k, const char *needle, char *text, size_t cap)
{
    FILE *f = fopen(r->log[k], "r");
    cr_assert_not_null(f, "%s", r->log[k]);
    size_t n = fread(text, 1, cap - 1, f);
    fclose(f);
    text[n] = '\0';
    int c = 0;
    for (const char *p = text; (p = strstr(p, needle)); p++)
        c++;
    return c;
}

static void fini(const ranks_t *r)
{
    for (int k = 0; k < RANKS; k++)
        unlink(r->log[k]);
}

Test(comm_token, a_job_without_a_token_is_refused_saying_how_to_set_one, .timeout = 60)
{
    ranks_t r = run_ranks(NULL);
    char text[8192];
    for (int k = 0; k < RANKS; k++) {
        cr_expect_eq(r.status[k], 10 + GW_ERR_CONFIG,
                     "rank %d: exit %d, want gw_comm_init's GW_ERR_CONFIG (%d)", k, r.status[k],
                     10 + GW_ERR_CONFIG);
        cr_expect_lt(r.took_s[k], 5.0, "rank %d took %.1f s to refuse", k, r.took_s[k]);
        cr_expect_eq(count_in_log(&r, k, "no job token", text, sizeof(text)), 1, "rank %d: %s", k,
                     text);
        cr_expect(strstr(text, "GW_JOB_TOKEN_FILE") && strstr(text, "GW_INSECURE=1"),
                  "rank %d does not say how to set a token: %s", k, text);
    }
    fini(&r);
}

Test(comm_token, insecure_runs_without_a_token_and_every_rank_warns_once, .timeout = 60)
{
    static const char *const env[] = {"GW_INSECURE", "1", NULL};
    ranks_t r = run_ranks(env);
    char text[8192];
    for (int k = 0; k < RANKS; k++) {
        int n = count_in_log(&r, k, "anyone who can reach its ports", text, sizeof(text));
        cr_expect_eq(r.status[k], 0, "rank %d exit %d: %s", k, r.status[k], text);
        cr_expect_eq(n, 1, "rank %d warned %d times: %s", k, n, text);
    }
    fini(&r);
}

Test(comm_token, a_token_runs_without_a_warning, .timeout = 60)
{
    static const char *const env[] = {"GW_JOB_TOKEN", "comm-token-test-0123456789", NULL};
    ranks_t r = run_ranks(env);
    char text[8192];
    for (int k = 0; k < RANKS; k++) {
        int n = count_in_log(&r, k, "token", text, sizeof(text));
        cr_expect_eq(r.status[k], 0, "rank %d exit %d: %s", k, r.status[k], text);
        cr_expect_eq(n, 0, "rank %d speaks of tokens: %s", k, text);
    }
    fini(&r);
}

Test(comm_token, a_malformed_insecure_is_refused, .timeout = 60)
{
    static const char *const env[] = {"GW_INSECURE", "yes", NULL};
    ranks_t r = run_ranks(env);
    char text[8192];
    for (int k = 0; k < RANKS; k++) {
        cr_expect_eq(r.status[k], 10 + GW_ERR_CONFIG, "rank %d: exit %d", k, r.status[k]);
        cr_expect_geq(count_in_log(&r, k, "GW_INSECURE", text, sizeof(text)), 1, "rank %d: %s", k,
                      text);
    }
    fini(&r);
}
