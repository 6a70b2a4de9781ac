/*
 * launch_internal.h - the running job that launch.c and its helpers share.
 *
 * Once the ranks are forked, the launcher keeps everything about them in
 * one struct job: per rank its pid, the pipes its output arrives on and,
 * once reaped, how it ended; for the job, who failed first, which signals
 * the user sent and the deadlines of the poll loop. launch.c sets the job
 * up and runs the loop; the files named below each do one part of it, and
 * take the job as an argument, as nothing here is global. Only the
 * launcher's files include this header.
 */
#ifndef GW_TOOLS_LAUNCH_INTERNAL_H
#define GW_TOOLS_LAUNCH_INTERNAL_H

#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"

struct stream {
    int fd;     /* read end of the rank's pipe, -1 once closed */
    int out_fd; /* where its lines go: 1 or 2 */
    char *buf;  /* bytes of a line not yet complete */
    size_t len, cap;
};

struct rank {
    pid_t pid;    /* 0 once reaped */
    int token_fd; /* --hostfile: the pipe to ssh's stdin (token, then EOF), else -1 */
    struct stream io[2];
    int wstatus;             /* as waitpid gave it, once reaped */
    int pass;                /* the reap pass that found it, from 1 */
    int setup_in, setup_out; /* gw_comm_init calls entered, and left (launch_formed.c) */
};

struct job {
    const struct gw_launch_opts *opts;
    const struct gw_launch_hosts *hosts; /* nhosts 0: every rank runs here */
    struct rank *ranks;
    int nlive;
    int width; /* digits of the largest rank, for aligned prefixes */
    int sfd;
    int first_fail;  /* rank whose failure ends the job, -1 none */
    int nlost;       /* --elastic: ranks that failed while the job went on */
    int lost_status; /* ... the first one's exit status for the launcher */
    int any_ok;      /* --elastic: a rank exited 0 */
    int npasses;     /* reap passes that found a child */
    int stopped;     /* SIGTERM/SIGKILL sent to the ranks: later signal deaths are ours */
    int fail_status; /* the launcher's exit status for it */
    int launch_error;
    int timed_out;
    int nsignals;
    int first_signal;
    int64_t kill_at_ns;  /* SIGKILL the remaining ranks then; 0: not planned */
    int64_t deadline_ns; /* --timeout; 0: none */
    int64_t drain_until_ns;
    int out_broken[3];      /* our stdout/stderr is gone (EPIPE): drop output */
    int setup_rd, setup_wr; /* the ranks' set-up pipe (launch_formed.c), -1: none */
    char setup_part[32];    /* ... the start of a message a read cut */
    size_t setup_part_len;
    int ncpus; /* --bind: rank r runs on cpus[r % ncpus]; 0: unbound */
    int cpus[CPU_SETSIZE];
};

/* ---- launch_spawn.c: starting the ranks ---- */

/* Fork rank r with its output on two new pipes and exec the command in
 * it (the child restores oldmask first). 0, or -1 after printing why. */
int gw_launch_spawn_rank(struct job *job, int r, int devnull, const sigset_t *oldmask);

/* ---- launch_relay.c: the ranks' output, line by line ---- */

/* Read what one pipe of rank r has and relay the complete lines in it;
 * closes the stream at EOF. */
void gw_launch_relay_pump(struct job *job, int r, struct stream *s);
/* Relay the unterminated last line, if any, and close the stream. */
void gw_launch_relay_close(struct job *job, int r, struct stream *s);

/* ---- launch_signals.c: signals to and from the ranks ---- */

/* "SIGTERM", or the number when the signal has no name. */
const char *gw_launch_sig_name(int sig, char buf[32]);
/* Send sig to the process group of every rank not yet reaped. */
void gw_launch_signal_ranks(struct job *job, int sig);
/* SIGTERM every rank now and plan the SIGKILL 2 s later. */
void gw_launch_stop_ranks(struct job *job);
/* Take what the signalfd has: forward the user's signals (the second one
 * as SIGKILL), then reap the children that exited. */
void gw_launch_handle_signals(struct job *job);

/* ---- launch_reap.c: how the ranks ended, and the job with them ---- */

/* Close the launcher's end of rank's token pipe, if open. */
void gw_launch_close_token(struct rank *rk);
/* Reap every child that exited, in one pass; name the first failure and
 * stop the other ranks (or, --elastic, name the lost ranks). */
void gw_launch_reap(struct job *job);
/* Wait for every child (already sent SIGKILL) without relaying output. */
void gw_launch_reap_all_blocking(struct job *job);
/* Once every rank is reaped: say in one line how the ranks that failed
 * after the first failure ended. */
void gw_launch_report_after(const struct job *job);

/* ---- launch_formed.c: a rank that left before the job formed ---- */

/* Make the pipe the ranks report their gw_comm_init calls on (none over
 * ssh). 0, or -1 after printing why. */
int gw_launch_formed_open(struct job *job);
/* In rank r's child: inherit the pipe and name it in GW_LAUNCH_SETUP. */
int gw_launch_formed_child(const struct job *job, int r);
/* Read the ranks' set-up messages, then gw_launch_formed_check. */
void gw_launch_formed_pump(struct job *job);
/* Fail the job, naming the rank, when a rank exited while another waits
 * for it in gw_comm_init. */
void gw_launch_formed_check(struct job *job);

#endif
