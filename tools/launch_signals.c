/*
 * launch_signals.c - `gradwire launch` and signals: sending them to the
 * ranks, and forwarding the ones the user sends the launcher.
 *
 * Why children get their own process groups (launch_spawn.c): a terminal's
 * ^C then reaches only the launcher, which forwards it once to every rank
 * (instead of every rank receiving it twice, once from the terminal and
 * once from us), and a signal sent to a rank's group also reaches whatever
 * that rank started. A second SIGINT/SIGTERM escalates to SIGKILL for ranks
 * that ignore the first.
 *
 * When the launcher ends a job itself (a failed rank, --timeout) it sends
 * SIGTERM and plans a SIGKILL 2 s later for ranks still running, which the
 * poll loop in launch.c sends when that time comes. The signals arrive
 * through a signalfd, blocked since before the first fork (launch.c), so
 * none is lost between the poll loop's turns.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kit.h"
#include "launch_internal.h"

#define KILL_GRACE_NS (2LL * 1000000000LL)

void gw_launch_signal_ranks(struct job *job, int sig)
{
    for (int r = 0; r < job->opts->nranks; r++) {
        pid_t pid = job->ranks[r].pid;
        /* An unreaped child keeps its pid and group id from being reused. */
        if (pid > 0 && kill(-pid, sig) != 0)
            kill(pid, sig);
    }
}

void gw_launch_stop_ranks(struct job *job)
{
    job->stopped = 1;
    gw_launch_signal_ranks(job, SIGTERM);
    job->kill_at_ns = gw_kit_now_ns() + KILL_GRACE_NS;
}

const char *gw_launch_sig_name(int sig, char buf[32])
{
    const char *abbr = sigabbrev_np(sig);
    if (abbr)
        snprintf(buf, 32, "SIG%s", abbr);
    else
        snprintf(buf, 32, "%d", sig);
    return buf;
}

void gw_launch_handle_signals(struct job *job)
{
    struct signalfd_siginfo si;
    while (read(job->sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        char name[32];
        if (sig == SIGCHLD)
            continue;
        if (++job->nsignals == 1) {
            job->first_signal = sig;
            fprintf(stderr,
                    "gradwire launch: forwarding %s to %d rank(s); send it again to kill them\n",
                    gw_launch_sig_name(sig, name), job->nlive);
            gw_launch_signal_ranks(job, sig);
        } else {
            fprintf(stderr, "gradwire launch: %s again: killing %d rank(s)\n",
                    gw_launch_sig_name(sig, name), job->nlive);
            gw_launch_signal_ranks(job, SIGKILL);
        }
    }
    gw_launch_reap(job);
}
