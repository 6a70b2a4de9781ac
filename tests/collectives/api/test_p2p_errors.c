/*
 * test_p2p_errors.c - what the point-to-point calls say when they fail, one
 * thread per rank over the in-memory transport (rank_threads.h): a receive
 * from a peer that never sends times out after GW_TIMEOUT_MS, and the error
 * names a point-to-point call, not a collective (no collective is running,
 * and the waiting rank's tag carries sequence number 0).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "collectives/rank_threads.h"
#include "support/log_capture.h"

static void recv_from_silent_peer(ctx_t *c, const void *arg)
{
    (void)arg;
    if (c->rank == 0) {
        c->comm.log = capture_logger(GW_LOG_ERROR);
        c->comm.log.owns_file = 1; /* threads_run's gw__logger_fini closes it */
        float buf[4];
        gw_status_t st = gw_recv(&c->comm, buf, 4, GW_FLOAT32, 1);
        CHECK(c, st == GW_ERR_TIMEOUT, "gw_recv from a silent peer: %s", gw_status_str(st));
        char *text = captured(&c->comm.log);
        CHECK(c, count_in(text, "no progress for 300 ms while waiting to receive 16 bytes") == 1,
              "the timeout is not reported once: %s", text);
        CHECK(c, count_in(text, "point-to-point") == 1 && count_in(text, "collective #") == 0,
              "the timeout is reported as a collective's: %s", text);
        free(text);
    }
    sync_all(c); /* rank 1 stays until rank 0 gave up, so it times out rather than sees a close */
}

Test(p2p_errors, timeout_names_the_point_to_point_call, .timeout = 30)
{
    threads_opts_t o = {.timeout_ms = 300, .label = "eager"};
    threads_run(2, &o, recv_from_silent_peer, NULL);
}
