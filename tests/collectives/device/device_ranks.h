/*
 * device_ranks.h - real ranks (forked processes, gw_comm_init over
 * loopback TCP or shared memory) whose communicators stage "device"
 * buffers through the host copy engine (collectives/device/engine_host.c):
 * each rank declares an arena of ordinary memory device memory, so every
 * call with a pointer into it goes through the staging pipeline on the
 * same wire as host buffers. Ranks report through their exit status and
 * stderr; the parent collects both. Header-only.
 */
#ifndef GW_TESTS_DEVICE_RANKS_H
#define GW_TESTS_DEVICE_RANKS_H

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives/comm/comm.h"
#include "collectives/device/device.h"
#include "gradwire.h"
#include "tests/support/root_port.h"

typedef struct rank_env {
    int rank, size;
    gw_comm_t *comm;
    gw_copy_engine_t engine; /* owned by comm once set */
    char *arena;             /* declared device memory */
    size_t arena_len;
    int nerr;
} rank_env_t;

#define RFAIL(e, ...)                            \
    do {                                         \
        (e)->nerr++;                             \
        fprintf(stderr, "rank %d: ", (e)->rank); \
        fprintf(stderr, __VA_ARGS__);            \
        fprintf(stderr, "\n");                   \
    } while (0)
#define RCHECK(e, cond, ...)         \
    do {                             \
        if (!(cond))                 \
            RFAIL((e), __VA_ARGS__); \
    } while (0)

typedef void (*rank_body_fn)(rank_env_t *e, const void *arg);

typedef struct ranks_opts {
    const char *transport;
    int n;
    gw_host_engine_opts_t engine; /* every rank's */
    int fail_rank;                /* this rank's engine gets fail_copy (-1: none) */
    int fail_copy;
    size_t arena_len;
    int expect_exit[8]; /* per rank: the exit status wanted (0 default) */
} ranks_opts_t;

static inline int rank_main(const ranks_opts_t *o, int rank, int port, rank_body_fn body,
                            const void *arg)
{
    rank_env_t e = {.rank = rank, .size = o->n};
    char root[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = o->n;
    cfg.root = root;
    cfg.job_token = "device-ranks-test-token";
    cfg.transport = o->transport;
    cfg.timeout_ms = 20000;
    if (gw_comm_init(&cfg, &e.comm) != GW_OK) {
        fprintf(stderr, "rank %d: gw_comm_init failed\n", rank);
        return 3;
    }
    gw_host_engine_opts_t eo = o->engine;
    if (rank == o->fail_rank)
        eo.fail_copy = o->fail_copy;
    e.arena_len = o->arena_len ? o->arena_len : (4u << 20);
    e.arena = calloc(1, e.arena_len);
    if (!e.arena || gw__host_engine_create(&eo, &e.engine) != GW_OK ||
        gw__host_engine_declare(&e.engine, e.arena, e.arena_len, 0) != GW_OK) {
        fprintf(stderr, "rank %d: no host engine\n", rank);
        return 3;
    }
    gw__comm_set_copy_engine(e.comm, &e.engine);
    body(&e, arg);
    size_t live = gw__host_engine_live_allocs(&e.engine);
    gw_comm_destroy(e.comm);
    free(e.arena);
    (void)live;
    return e.nerr ? 1 : 0;
}

/* Run body on o->n forked ranks; fail the test with their stderr when a
 * rank's exit status is not the one wanted. */
static inline void ranks_run(const ranks_opts_t *o, rank_body_fn body, const void *arg)
{
    static int round;
    int port = test_root_port(round++);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/gw-devranks-%d-%d", (int)getpid(), round);
    FILE *errf = fopen(path, "w+");
    cr_assert_not_null(errf);
    pid_t pids[8];
    cr_assert(o->n >= 1 && o->n <= 8);
    fflush(NULL);
    for (int r = 0; r < o->n; r++) {
        pids[r] = fork();
        cr_assert(pids[r] >= 0);
        if (pids[r] == 0) {
            dup2(fileno(errf), 2);
            alarm(120);
            exit(rank_main(o, r, port, body, arg));
        }
    }
    int bad = 0;
    char why[512] = "";
    for (int r = 0; r < o->n; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code != o->expect_exit[r]) {
            bad = 1;
            size_t used = strlen(why);
            snprintf(why + used, sizeof(why) - used, " rank %d exit %d (want %d);", r, code,
                     o->expect_exit[r]);
        }
    }
    if (bad) {
        char out[8192] = "";
        fflush(errf);
        rewind(errf);
        size_t len = fread(out, 1, sizeof(out) - 1, errf);
        out[len] = 0;
        fclose(errf);
        unlink(path);
        cr_assert_fail("%s over %s on %d ranks:%s\n%s", "device buffers", o->transport, o->n, why,
                       out);
    }
    fclose(errf);
    unlink(path);
}

#endif
