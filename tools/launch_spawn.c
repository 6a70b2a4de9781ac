/*
 * launch_spawn.c - `gradwire launch` starting one rank: the fork, and what
 * the child does before it becomes the command.
 *
 * Each rank gets two fresh pipes for its stdout and stderr (and, with
 * --hostfile, a third that carries the job token to ssh's stdin). In the
 * child, before exec: it becomes the leader of its own process group, so
 * that a terminal's ^C reaches only the launcher, which forwards it
 * (launch_signals.c); it asks the kernel to kill it when the launcher dies,
 * so a SIGKILLed launcher leaves no orphans; it reads stdin only if it is
 * rank 0 and stdin is not a terminal; it sets RANK, LOCAL_RANK and GW_RANK
 * (and, on emulated hosts, enters its host's namespace and sets the
 * per-host ranks); it is bound to its CPU when --bind says so; and it gets
 * back the signal mask and SIGPIPE disposition the launcher had before it
 * took them over. A command that cannot be run exits 127 or 126, as the
 * shell would. The launcher keeps the pipes' read ends, non-blocking, for
 * its poll loop (launch.c, launch_relay.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "launch_internal.h"

/* Runs in the forked child: become a process group leader, wire up stdio
 * and the rank's environment, exec. Only the launcher's single thread
 * existed at fork time, so setenv and snprintf are safe here. */
__attribute__((noreturn)) static void child_exec(const struct job *job, int r, int out_w, int err_w,
                                                 int devnull, int token_r, pid_t launcher,
                                                 const sigset_t *oldmask)
{
    const struct gw_launch_opts *o = job->opts;
    char num[16];
    setpgid(0, 0);
    /* Die with the launcher, even if it is SIGKILLed. Check after setting it
     * in case the launcher died before that. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher)
        _exit(1);
    if (dup2(out_w, STDOUT_FILENO) < 0 || dup2(err_w, STDERR_FILENO) < 0)
        _exit(1);
    /* Only rank 0 may read the launcher's stdin, and not from a terminal:
     * a background process group reading the terminal would be stopped. */
    if ((r != 0 || isatty(STDIN_FILENO)) && dup2(devnull, STDIN_FILENO) < 0)
        _exit(1);
    snprintf(num, sizeof(num), "%d", r);
    if (setenv("RANK", num, 1) || setenv("LOCAL_RANK", num, 1) || setenv("GW_RANK", num, 1))
        _exit(1);
    if (o->remote) {
        /* ssh reads the token, then holds the pipe until the launcher ends. */
        if (dup2(token_r, STDIN_FILENO) < 0)
            _exit(1);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, oldmask, NULL);
        gw_launch_ssh_exec(o, o->remote, r);
    }
    if (gw_launch_formed_child(job, r) != 0)
        _exit(1);
    gw_launch_bind_rank(job->cpus, job->ncpus, r);
    if (job->hosts->nhosts > 0) {
        int host = gw_launch_host_of(o, job->hosts, r), local, nlocal;
        gw_launch_local_rank(o, job->hosts, r, &local, &nlocal);
        if (gw_launch_enter_host(o, job->hosts, host) != 0)
            _exit(1);
        snprintf(num, sizeof(num), "%d", local);
        if (setenv("LOCAL_RANK", num, 1))
            _exit(1);
        snprintf(num, sizeof(num), "%d", nlocal);
        if (setenv("LOCAL_WORLD_SIZE", num, 1))
            _exit(1);
        snprintf(num, sizeof(num), "%d", host);
        if (setenv("GROUP_RANK", num, 1))
            _exit(1);
    }
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, oldmask, NULL);
    execvp(o->cmd[0], o->cmd);
    int e = errno;
    dprintf(STDERR_FILENO, "gradwire launch: cannot run %s: %s\n", o->cmd[0], strerror(e));
    _exit(e == ENOENT ? GW_LAUNCH_EXIT_NOTFOUND : GW_LAUNCH_EXIT_NOEXEC);
}

int gw_launch_spawn_rank(struct job *job, int r, int devnull, const sigset_t *oldmask)
{
    int out[2], err[2], tok[2] = {-1, -1};
    if (job->opts->remote && gw_launch_ssh_token_pipe(tok) != 0)
        goto err_log;
    if (pipe2(out, O_CLOEXEC) != 0)
        goto err_close_tok;
    if (pipe2(err, O_CLOEXEC) != 0)
        goto err_close_out;
    fflush(NULL);
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid < 0)
        goto err_close_err;
    if (pid == 0)
        child_exec(job, r, out[1], err[1], devnull, tok[0], launcher, oldmask);
    if (tok[0] >= 0)
        close(tok[0]);
    /* Set the group from this side too, so it exists before we signal it;
     * EACCES means the child already exec'ed, after doing it itself. */
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    struct rank *rk = &job->ranks[r];
    rk->pid = pid;
    rk->token_fd = tok[1];
    rk->io[0] = (struct stream){.fd = out[0], .out_fd = STDOUT_FILENO};
    rk->io[1] = (struct stream){.fd = err[0], .out_fd = STDERR_FILENO};
    job->nlive++;
    return 0;

err_close_err:
    close(err[0]);
    close(err[1]);
err_close_out:
    close(out[0]);
    close(out[1]);
err_close_tok:
    if (tok[0] >= 0) {
        close(tok[0]);
        close(tok[1]);
    }
err_log:
    fprintf(stderr, "gradwire launch: cannot start rank %d: %m\n", r);
    return -1;
}
