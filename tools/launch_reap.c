/*
 * launch_reap.c - `gradwire launch` collecting its ranks' exits, and saying
 * how the job ended.
 *
 * Children are reaped as SIGCHLD arrives (launch_signals.c). The first rank
 * that exits non-zero or dies of a signal is reported in one line ("...
 * (first failure)") and the other ranks are stopped; once all are reaped,
 * one more line says how the others ended after it, grouped by outcome.
 * With --elastic a failing rank ends nothing: each lost rank is named with
 * the number of ranks that go on, and the rest run to their end. The poll
 * loop (launch.c) turns what is recorded here into the launcher's exit
 * status.
 *
 * Which failure was first. Children are reaped in the order waitpid(-1)
 * returns them, which is the order they were forked in, not the order
 * they died in: when the launcher is late (busy relaying output, or not
 * scheduled), rank 3's death and ranks 0-2 exiting because of it are all
 * found in one pass, and rank 0 would be reported. So a pass is taken
 * whole: a rank that died of a signal the launcher did not send comes
 * first (its peers exit because of it, not it because of them), and only
 * among ranks that exited with a status, whose order the kernel does not
 * keep, the lowest rank stands for the others, which the report says.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit.h"
#include "launch_internal.h"

/* After the last rank exits, output still in the pipes is read; a pipe that
 * stays open longer is held by a rank's own child, which we do not wait for. */
#define DRAIN_GRACE_NS (500LL * 1000000LL)

static int failed(int wstatus) { return !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0); }

/* "exited with status 3", "killed by signal SIGKILL" */
static const char *outcome(int wstatus, char buf[64])
{
    char name[32];
    if (WIFSIGNALED(wstatus))
        snprintf(buf, 64, "killed by signal %s", gw_launch_sig_name(WTERMSIG(wstatus), name));
    else
        snprintf(buf, 64, "exited with status %d", WEXITSTATUS(wstatus));
    return buf;
}

/* The first failure among the ranks found in reap pass `pass` (see the top
 * of the file), or -1; *ties: other ranks of the pass that exited with a
 * status, which may have been as early. */
static int first_of_pass(const struct job *job, int pass, int *ties)
{
    int best = -1;
    *ties = 0;
    for (int r = 0; r < job->opts->nranks; r++) {
        const struct rank *k = &job->ranks[r];
        if (k->pass != pass || !failed(k->wstatus))
            continue;
        if (best < 0 || (WIFSIGNALED(k->wstatus) && !WIFSIGNALED(job->ranks[best].wstatus)))
            best = r;
    }
    for (int r = 0; best >= 0 && !WIFSIGNALED(job->ranks[best].wstatus) && r < job->opts->nranks;
         r++)
        *ties += r != best && job->ranks[r].pass == pass && failed(job->ranks[r].wstatus);
    return best;
}

void gw_launch_close_token(struct rank *rk)
{
    if (rk->token_fd >= 0)
        close(rk->token_fd);
    rk->token_fd = -1;
}

/* --elastic: the ranks of reap pass `pass` that failed are lost, said on
 * stderr; the others go on (gradwire train --elastic shrinks to them). */
static void elastic_losses(struct job *job, int pass)
{
    for (int r = 0; r < job->opts->nranks; r++) {
        struct rank *k = &job->ranks[r];
        if (k->pass != pass)
            continue;
        if (!failed(k->wstatus)) {
            job->any_ok = 1;
            continue;
        }
        char what[64];
        if (job->nlost++ == 0)
            job->lost_status =
                WIFSIGNALED(k->wstatus) ? 128 + WTERMSIG(k->wstatus) : WEXITSTATUS(k->wstatus);
        if (job->timed_out || job->stopped || job->nsignals)
            continue; /* ours, or the user's: not a loss to announce */
        fprintf(stderr, "gradwire launch: rank %d %s; --elastic: the job goes on with %d rank(s)\n",
                r, outcome(k->wstatus, what), job->nlive);
    }
}

void gw_launch_reap(struct job *job)
{
    int st;
    pid_t pid;
    int pass = 0;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
        int r;
        for (r = 0; r < job->opts->nranks && job->ranks[r].pid != pid; r++)
            ;
        if (r == job->opts->nranks)
            continue;
        if (!pass)
            pass = ++job->npasses;
        job->ranks[r].pid = 0;
        gw_launch_close_token(&job->ranks[r]);
        job->ranks[r].wstatus = st;
        job->ranks[r].pass = pass;
        job->nlive--;
    }
    if (job->opts->elastic && pass) {
        elastic_losses(job, pass);
        pass = 0; /* nothing ends the job */
    }
    int ties = 0, r = pass ? first_of_pass(job, pass, &ties) : -1;
    if (r >= 0 && job->first_fail < 0 && !job->timed_out && !job->launch_error) {
        char what[64];
        job->first_fail = r;
        st = job->ranks[r].wstatus;
        job->fail_status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        fprintf(stderr, "gradwire launch: rank %d %s (first failure%s)\n", r, outcome(st, what),
                ties ? "; other ranks exited non-zero at the same moment" : "");
        if (job->nlive > 0)
            gw_launch_stop_ranks(job);
    }
    if (pass)
        gw_launch_formed_check(job);
    if (job->nlive == 0 && job->drain_until_ns == 0)
        job->drain_until_ns = gw_kit_now_ns() + DRAIN_GRACE_NS;
}

/* Once every rank is reaped: how the ranks that failed after the first one
 * ended, grouped by outcome, in one line ("rank 3 killed by signal SIGKILL
 * (first failure); after it, ranks 0,1,2 exited with status 1"). Ranks
 * the launcher stopped itself are named as such. */
void gw_launch_report_after(const struct job *job)
{
    int nr = job->opts->nranks, f = job->first_fail;
    if (f < 0)
        return;
    char first[64], line[4096];
    int n = snprintf(line, sizeof(line), "gradwire launch: rank %d %s (first failure); after it,",
                     f, outcome(job->ranks[f].wstatus, first));
    int groups = 0;
    unsigned char *done = calloc((size_t)nr, 1);
    if (!done)
        return;
    for (int r = 0; r < nr; r++) {
        int st = job->ranks[r].wstatus;
        if (r == f || done[r] || job->ranks[r].pass == 0 || !failed(st))
            continue;
        char what[64], who[2048];
        outcome(st, what);
        int w = 0, count = 0;
        for (int q = r; q < nr; q++) {
            char other[64];
            if (q == f || done[q] || job->ranks[q].pass == 0 || !failed(job->ranks[q].wstatus) ||
                strcmp(outcome(job->ranks[q].wstatus, other), what) != 0)
                continue;
            done[q] = 1;
            count++;
            if (w < (int)sizeof(who) - 16)
                w += snprintf(who + w, sizeof(who) - (size_t)w, "%s%d", count > 1 ? "," : "", q);
        }
        int ours =
            job->stopped && WIFSIGNALED(st) && (WTERMSIG(st) == SIGTERM || WTERMSIG(st) == SIGKILL);
        if (n < (int)sizeof(line))
            n += snprintf(line + n, sizeof(line) - (size_t)n, "%s rank%s %s %s%s",
                          groups++ ? ";" : "", count > 1 ? "s" : "", who, what,
                          ours ? " (stopped by the launcher)" : "");
    }
    free(done);
    if (groups)
        fprintf(stderr, "%s\n", line);
}

/* Last resort when the loop cannot go on: wait for every child (already
 * sent SIGKILL) so that none is left a zombie. */
void gw_launch_reap_all_blocking(struct job *job)
{
    for (int r = 0; r < job->opts->nranks; r++)
        if (job->ranks[r].pid > 0) {
            while (waitpid(job->ranks[r].pid, NULL, 0) < 0 && errno == EINTR)
                ;
            job->ranks[r].pid = 0;
            gw_launch_close_token(&job->ranks[r]);
            job->nlive--;
        }
}
