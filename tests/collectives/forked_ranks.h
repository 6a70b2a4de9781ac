/*
 * forked_ranks.h - real ranks for the tests of the public calls: n forked
 * processes, each with a communicator from gw_comm_init over loopback TCP
 * or shared memory, running one body. Ranks never assert (a rank that
 * stops early leaves the others waiting until the timeout); they note
 * failures on stderr (FR_CHECK) and report through their exit status,
 * which the parent collects with their output. Header-only.
 */
#ifndef GW_TESTS_FORKED_RANKS_H
#define GW_TESTS_FORKED_RANKS_H

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradwire.h"
#include "tests/support/root_port.h"

typedef struct fr_rank {
    int rank, size;
    gw_comm_t *comm;
    int nerr;
} fr_rank_t;

#define FR_CHECK(r, cond, ...)                                                  \
    do {                                                                        \
        if (!(cond)) {                                                          \
            (r)->nerr++;                                                        \
            fprintf(stderr, "rank %d: %s:%d: ", (r)->rank, __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
        }                                                                       \
    } while (0)

typedef void (*fr_body_fn)(fr_rank_t *r, const void *arg);

static inline int fr_rank_main(const char *transport, int n, int rank, int port, fr_body_fn body,
                               const void *arg)
{
    fr_rank_t r = {.rank = rank, .size = n};
    char root[64], token[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    /* A token of this run's own: a rank of another run that dials this
     * root (two runs that picked one port) is refused, not admitted. */
    snprintf(token, sizeof(token), "forked-ranks-%d-%d", (int)getppid(), port);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = n;
    cfg.root = root;
    cfg.job_token = token;
    cfg.transport = transport;
    cfg.timeout_ms = 20000;
    gw_status_t st = gw_comm_init(&cfg, &r.comm);
    if (st != GW_OK) {
        fprintf(stderr, "rank %d: gw_comm_init: %s\n", rank, gw_status_name(st));
        return 3;
    }
    body(&r, arg);
    gw_comm_destroy(r.comm);
    return r.nerr ? 1 : 0;
}

/* Fork n ranks on port into errf; their exit codes in codes. When rank 0
 * could not bind the port (taken by another process), the other ranks are
 * stopped at once and 1 is returned: run again on another port. */
static inline int fr_fork_ranks(const char *transport, int n, int port, fr_body_fn body,
                                const void *arg, FILE *errf, int *codes)
{
    pid_t pids[8];
    fflush(NULL);
    for (int r = 0; r < n; r++) {
        pids[r] = fork();
        cr_assert(pids[r] >= 0);
        if (pids[r] == 0) {
            dup2(fileno(errf), 2);
            alarm(60);
            _exit(fr_rank_main(transport, n, r, port, body, arg));
        }
    }
    int taken = 0;
    for (int r = 0; r < n; r++) {
        int status = 0;
        waitpid(pids[r], &status, 0);
        codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (r == 0 && codes[0] == 3) {
            char buf[8192];
            fflush(errf);
            rewind(errf);
            size_t len = fread(buf, 1, sizeof(buf) - 1, errf);
            buf[len] = 0;
            fseek(errf, 0, SEEK_END);
            if (strstr(buf, "cannot bind the root address") && strstr(buf, "already in use")) {
                taken = 1;
                for (int k = 1; k < n; k++)
                    kill(pids[k], SIGKILL);
            }
        }
    }
    return taken;
}

/* The number of ports picked so far: the next run's pick is
 * test_root_port(fr_round). */
static int fr_round;

/* Run body on n forked ranks over transport; fail the test with their
 * stderr unless every rank exits 0. */
static inline void fr_run(const char *transport, int n, fr_body_fn body, const void *arg)
{
    cr_assert(n >= 1 && n <= 8);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/gw-frranks-%d-%d", (int)getpid(), fr_round);
    FILE *errf = fopen(path, "w+");
    cr_assert_not_null(errf);
    int codes[8], port = 0;
    for (int attempt = 0; attempt < 5; attempt++) {
        port = test_root_port(fr_round++);
        if (!fr_fork_ranks(transport, n, port, body, arg, errf, codes))
            break;
        fprintf(stderr, "forked ranks: port %d was taken, trying another\n", port);
        if (attempt < 4) { /* the next try's output only */
            fflush(errf);
            cr_assert(ftruncate(fileno(errf), 0) == 0);
            rewind(errf);
        }
    }
    int bad = 0;
    char why[256] = "";
    for (int r = 0; r < n; r++) {
        if (codes[r] != 0) {
            bad = 1;
            size_t used = strlen(why);
            snprintf(why + used, sizeof(why) - used, " rank %d exit %d;", r, codes[r]);
        }
    }
    char out[8192] = "";
    fflush(errf);
    rewind(errf);
    size_t len = fread(out, 1, sizeof(out) - 1, errf);
    out[len] = 0;
    fclose(errf);
    unlink(path);
    cr_assert(!bad, "%d ranks over %s (root port %d):%s\n%s", n, transport, port, why, out);
}

#endif
