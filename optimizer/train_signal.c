/*
 * train_signal.c - SIGTERM, the polite way to stop a training run (a batch
 * system's time limit, or `gradwire launch` stopping the other ranks after
 * a failure). The handler only sets a flag. The synchronous loop reads it
 * at the start of every step and allreduces it with the other ranks
 * (train_sync.c), so that all of them stop after the same step, with a
 * checkpoint when there is a directory for one.
 */
#include <signal.h>
#include <string.h>

#include "trainer.h"

/* The one piece of global state: a signal handler can reach nothing else. */
static volatile sig_atomic_t stop_flag;

static void on_sigterm(int sig)
{
    (void)sig;
    stop_flag = 1;
}

int gw_train_stop_requested(void) { return stop_flag != 0; }

void gw_train_install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigterm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
}
