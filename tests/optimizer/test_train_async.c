/*
 * Parameter-server (asynchronous) training over real ranks: on the seeded
 * synthetic task it must converge (the final weights, assembled from the
 * servers, classify the test set well above chance: 5 classes, chance is
 * 20%), with one server or with the parameters sharded over two, and the
 * staleness bound must hold: no worker gets ahead of the others by more
 * than --staleness pushes, as the workers see it from the versions the
 * servers send back. Bad configurations end with a clear error.
 */
#include "train_util.h"

/* The number after `key` in text, or -1. */
static double number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

static void converges(int ranks, const char *servers, const char *staleness)
{
    char *args[] = {"--async",
                    "--servers",
                    (char *)servers,
                    "--staleness",
                    (char *)staleness,
                    "--data",
                    "synthetic",
                    "--synthetic",
                    "6000,1000,16,5,1.5",
                    "--hidden",
                    "32",
                    "--batch",
                    "96",
                    "--epochs",
                    "3",
                    "--no-progress",
                    NULL};
    run_result_t r = train_run(ranks, args, 280);
    cr_assert(!r.timed_out, "timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "failed (status %d):\n%s", r.status, r.output);
    double acc = number_after(r.output, "assembled from the servers): test accuracy ");
    cr_assert(acc >= 88.0, "async training reached only %.2f%% test accuracy:\n%s", acc, r.output);
    /* The staleness bound, from what the workers observed: the versions the
     * servers sent back count every push applied, so they give the other
     * workers' mean clock at each reply, without the server's own gap
     * bookkeeping (which reads the value its wait loop just enforced). */
    double lead = number_after(r.output, "over the others' mean clock, from the versions it "
                                         "received, ");
    cr_assert(lead >= 0 && lead <= atof(staleness),
              "a worker was %g pushes ahead of the others' mean clock, beyond the bound %s:\n%s",
              lead, staleness, r.output);
    cr_assert(strstr(r.output, "epoch   3"), "no report of epoch 3:\n%s", r.output);
    free(r.output);
}

Test(train_async, converges_with_one_server, .timeout = 300) { converges(4, "1", "2"); }

Test(train_async, converges_with_two_servers_in_lock_step, .timeout = 300)
{
    converges(5, "2", "0");
}

Test(train_async, needs_a_worker, .timeout = 60)
{
    char *args[] = {"--async", "--servers", "2", "--data", "synthetic", NULL};
    run_result_t r = train_run(2, args, 50);
    cr_assert(r.exited && r.status != 0, "%s", r.output);
    cr_assert(strstr(r.output, "needs at least 3 ranks"), "%s", r.output);
    free(r.output);
}

Test(train_async, refuses_checkpoints, .timeout = 60)
{
    char *args[] = {"--async", "--data", "synthetic", "--checkpoint-dir", "/tmp", NULL};
    run_result_t r = train_run(2, args, 50);
    cr_assert(r.exited && r.status != 0, "%s", r.output);
    cr_assert(strstr(r.output, "checkpoints are for synchronous training"), "%s", r.output);
    free(r.output);
}

/* Two servers and eight workers: sixteen private links, each on a port
 * its server reserved, set up concurrently while the job's own connections
 * take ephemeral ports (a reservation that lapsed before the link bound it
 * failed with "address in use" now and then). */
Test(train_async, links_many_workers, .timeout = 300) { converges(10, "2", "4"); }
