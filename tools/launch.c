/*
 * launch.c - `gradwire launch -n N CMD ARGS...`: run the ranks of a job on
 * this host.
 *
 * How a job runs: the launcher picks the rendezvous address (a free port on
 * --host unless --port is given) and a job token, then forks N children.
 * Each child becomes the leader of its own process group, asks the kernel to
 * kill it if the launcher dies (so a SIGKILLed launcher leaves no orphans),
 * points its stdout and stderr at two pipes, sets RANK and friends, and
 * execs CMD. The launcher then sits in one poll() loop over a signalfd and
 * the 2N pipe read ends: output is cut into whole lines, prefixed with
 * "[R] " and written to the launcher's own stdout or stderr, so lines of
 * different ranks never interleave mid-line.
 *
 * Why children get their own process groups: a terminal's ^C then reaches
 * only the launcher, which forwards it once to every rank (instead of every
 * rank receiving it twice, once from the terminal and once from us), and a
 * signal sent to a rank's group also reaches whatever that rank started.
 * A second SIGINT/SIGTERM escalates to SIGKILL for ranks that ignore the
 * first.
 *
 * How a job ends: the first rank that exits non-zero or dies of a signal is
 * reported in one line ("... (first failure)"), the other ranks get SIGTERM
 * and, 2 s later, SIGKILL; the launcher exits with that rank's status (128 +
 * signal number for a signal), and at the end says how the other ranks
 * ended after it. --timeout does the same with exit status 124. With
 * --elastic a failing rank ends nothing: the launcher says which rank was
 * lost and how ("rank 2 killed by signal SIGKILL; --elastic: the job goes
 * on with 3 rank(s)"), leaves the others running (they shrink their
 * communicator to the survivors), and exits 0 when any rank exited 0, the
 * first loss's status otherwise. The
 * launcher returns only after it has reaped every child, so no zombies
 * remain.
 *
 * Which failure was first. Children are reaped as SIGCHLD arrives, in the
 * order waitpid(-1) returns them, which is the order they were forked in,
 * not the order they died in: when the launcher is late (busy relaying
 * output, or not scheduled), rank 3's death and ranks 0-2 exiting because
 * of it are all found in one pass, and rank 0 would be reported. So a pass
 * is taken whole: a rank that died of a signal the launcher did not send
 * comes first (its peers exit because of it, not it because of them), and
 * only among ranks that exited with a status, whose order the kernel does
 * not keep, the lowest rank stands for the others, which the report says.
 */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kit.h"

#define KILL_GRACE_NS (2LL * 1000000000LL)
/* After the last rank exits, output still in the pipes is read; a pipe that
 * stays open longer is held by a rank's own child, which we do not wait for. */
#define DRAIN_GRACE_NS (500LL * 1000000LL)
/* A line longer than this is cut and relayed in pieces. */
#define LINE_CAP 65536
#define READ_MIN 4096

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
    int wstatus; /* as waitpid gave it, once reaped */
    int pass;    /* the reap pass that found it, from 1 */
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
    int out_broken[3]; /* our stdout/stderr is gone (EPIPE): drop output */
    int ncpus;         /* --bind: rank r runs on cpus[r % ncpus]; 0: unbound */
    int cpus[CPU_SETSIZE];
};

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

static int spawn_rank(struct job *job, int r, int devnull, const sigset_t *oldmask)
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

static void signal_ranks(struct job *job, int sig)
{
    for (int r = 0; r < job->opts->nranks; r++) {
        pid_t pid = job->ranks[r].pid;
        /* An unreaped child keeps its pid and group id from being reused. */
        if (pid > 0 && kill(-pid, sig) != 0)
            kill(pid, sig);
    }
}

static void stop_ranks(struct job *job)
{
    job->stopped = 1;
    signal_ranks(job, SIGTERM);
    job->kill_at_ns = gw_kit_now_ns() + KILL_GRACE_NS;
}

static const char *sig_name(int sig, char buf[32])
{
    const char *abbr = sigabbrev_np(sig);
    if (abbr)
        snprintf(buf, 32, "SIG%s", abbr);
    else
        snprintf(buf, 32, "%d", sig);
    return buf;
}

static int failed(int wstatus) { return !(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0); }

/* "exited with status 3", "killed by signal SIGKILL" */
static const char *outcome(int wstatus, char buf[64])
{
    char name[32];
    if (WIFSIGNALED(wstatus))
        snprintf(buf, 64, "killed by signal %s", sig_name(WTERMSIG(wstatus), name));
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

static void close_token(struct rank *rk)
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

static void reap(struct job *job)
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
        close_token(&job->ranks[r]);
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
            stop_ranks(job);
    }
    if (job->nlive == 0 && job->drain_until_ns == 0)
        job->drain_until_ns = gw_kit_now_ns() + DRAIN_GRACE_NS;
}

static void handle_signals(struct job *job)
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
                    sig_name(sig, name), job->nlive);
            signal_ranks(job, sig);
        } else {
            fprintf(stderr, "gradwire launch: %s again: killing %d rank(s)\n", sig_name(sig, name),
                    job->nlive);
            signal_ranks(job, SIGKILL);
        }
    }
    reap(job);
}

/* Write all of iov to fd. Output is the launcher's job, so a full pipe
 * downstream makes us wait (and the ranks with us) rather than drop lines. */
static void write_out(struct job *job, int fd, struct iovec *iov, int n)
{
    while (n > 0 && !job->out_broken[fd]) {
        ssize_t w = writev(fd, iov, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};
                poll(&p, 1, 100);
                continue;
            }
            job->out_broken[fd] = 1; /* EPIPE: nobody reads us any more */
            return;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
}

static void emit_line(struct job *job, int r, struct stream *s, const char *line, size_t len,
                      int add_newline)
{
    char prefix[32];
    int plen = job->opts->prefix ? snprintf(prefix, sizeof(prefix), "[%*d] ", job->width, r) : 0;
    struct iovec iov[3] = {
        {.iov_base = prefix, .iov_len = (size_t)plen},
        {.iov_base = (void *)line, .iov_len = len},
        {.iov_base = "\n", .iov_len = add_newline ? 1 : 0},
    };
    write_out(job, s->out_fd, iov, 3);
}

static void close_stream(struct job *job, int r, struct stream *s)
{
    if (s->len > 0)
        emit_line(job, r, s, s->buf, s->len, 1); /* the unterminated last line */
    close(s->fd);
    free(s->buf);
    *s = (struct stream){.fd = -1, .out_fd = s->out_fd};
}

/* Read what one pipe has and relay the complete lines in it. */
static void pump(struct job *job, int r, struct stream *s)
{
    if (s->cap - s->len < READ_MIN && s->cap < LINE_CAP) {
        size_t ncap = s->cap ? s->cap * 2 : READ_MIN * 2;
        char *nb = realloc(s->buf, ncap > LINE_CAP ? LINE_CAP : ncap);
        if (!nb) {
            fprintf(stderr, "gradwire launch: out of memory relaying rank %d\n", r);
            close_stream(job, r, s);
            return;
        }
        s->buf = nb;
        s->cap = ncap > LINE_CAP ? LINE_CAP : ncap;
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        close_stream(job, r, s);
        return;
    }
    size_t start = 0, scan = s->len;
    s->len += (size_t)n;
    for (char *nl; (nl = memchr(s->buf + scan, '\n', s->len - scan)) != NULL;) {
        size_t end = (size_t)(nl - s->buf);
        emit_line(job, r, s, s->buf + start, end + 1 - start, 0);
        start = scan = end + 1;
    }
    if (start == 0 && s->len == s->cap) {
        emit_line(job, r, s, s->buf, s->len, 1); /* overlong line: relay a piece */
        start = s->len;
    }
    memmove(s->buf, s->buf + start, s->len - start);
    s->len -= start;
}

/* Once every rank is reaped: how the ranks that failed after the first one
 * ended, grouped by outcome, in one line ("rank 3 killed by signal SIGKILL
 * (first failure); after it, ranks 0,1,2 exited with status 1"). Ranks
 * the launcher stopped itself are named as such. */
static void report_after(const struct job *job)
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
static void reap_all_blocking(struct job *job)
{
    for (int r = 0; r < job->opts->nranks; r++)
        if (job->ranks[r].pid > 0) {
            while (waitpid(job->ranks[r].pid, NULL, 0) < 0 && errno == EINTR)
                ;
            job->ranks[r].pid = 0;
            close_token(&job->ranks[r]);
            job->nlive--;
        }
}

static int ms_until(int64_t t, int64_t now)
{
    if (t <= now)
        return 0;
    int64_t ms = (t - now + 999999) / 1000000;
    return ms > 60000 ? 60000 : (int)ms;
}

static int run_loop(struct job *job)
{
    int nr = job->opts->nranks;
    struct pollfd *pfds = calloc((size_t)(1 + 2 * nr), sizeof(*pfds));
    struct stream **map = calloc((size_t)(1 + 2 * nr), sizeof(*map));
    int *owner = calloc((size_t)(1 + 2 * nr), sizeof(*owner));
    if (!pfds || !map || !owner) {
        fprintf(stderr, "gradwire launch: out of memory\n");
        signal_ranks(job, SIGKILL);
        job->launch_error = 1;
    }
    reap(job);
    for (;;) {
        int64_t now = gw_kit_now_ns();
        if (job->deadline_ns && !job->timed_out && now >= job->deadline_ns && job->nlive > 0) {
            job->timed_out = 1;
            fprintf(stderr,
                    "gradwire launch: job did not finish within %g s; stopping %d rank(s)\n",
                    job->opts->timeout_s, job->nlive);
            stop_ranks(job);
        }
        if (job->kill_at_ns && now >= job->kill_at_ns) {
            job->kill_at_ns = 0;
            signal_ranks(job, SIGKILL);
        }
        if (!pfds) {
            reap_all_blocking(job); /* without memory to relay output */
            break;
        }
        int n = 1;
        pfds[0] = (struct pollfd){.fd = job->sfd, .events = POLLIN};
        for (int r = 0; r < nr; r++)
            for (int k = 0; k < 2; k++)
                if (job->ranks[r].io[k].fd >= 0) {
                    pfds[n] = (struct pollfd){.fd = job->ranks[r].io[k].fd, .events = POLLIN};
                    map[n] = &job->ranks[r].io[k];
                    owner[n++] = r;
                }
        if (job->nlive == 0 && (n == 1 || now >= job->drain_until_ns))
            break;
        int tmo = -1;
        int64_t due[3] = {job->timed_out ? 0 : job->deadline_ns, job->kill_at_ns,
                          job->nlive == 0 ? job->drain_until_ns : 0};
        for (int i = 0; i < 3; i++)
            if (due[i] && (tmo < 0 || ms_until(due[i], now) < tmo))
                tmo = ms_until(due[i], now);
        if (poll(pfds, (nfds_t)n, tmo) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "gradwire launch: poll failed: %m; killing all ranks\n");
            signal_ranks(job, SIGKILL);
            job->launch_error = 1;
            reap_all_blocking(job);
            break;
        }
        if (pfds[0].revents)
            handle_signals(job);
        for (int i = 1; i < n; i++)
            if (pfds[i].revents)
                pump(job, owner[i], map[i]);
    }
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 2; k++)
            if (job->ranks[r].io[k].fd >= 0)
                close_stream(job, r, &job->ranks[r].io[k]);
    free(owner);
    free(map);
    free(pfds);
    report_after(job);
    if (job->launch_error)
        return 1;
    if (job->timed_out)
        return GW_LAUNCH_EXIT_TIMEOUT;
    if (job->first_fail >= 0)
        return job->fail_status;
    if (job->opts->elastic && job->nlost > 0) {
        if (job->any_ok)
            fprintf(stderr, "gradwire launch: --elastic: %d rank(s) lost; the survivors finished\n",
                    job->nlost);
        if (!job->any_ok)
            return job->lost_status;
    }
    return job->nsignals ? 128 + job->first_signal : 0;
}

/* File descriptors 0-2 must be open, or a pipe could land on them and be
 * clobbered by the child's dup2. Also make room for 2 pipes per rank. */
static int prepare_fds(int nranks, int per_rank)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            return -1;
    struct rlimit rl;
    rlim_t need = (rlim_t)nranks * (rlim_t)per_rank + 32;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < need) {
        rl.rlim_cur = rl.rlim_max < need ? rl.rlim_max : need;
        setrlimit(RLIMIT_NOFILE, &rl);
        if (rl.rlim_cur < need) {
            fprintf(stderr, "gradwire launch: %d ranks need %lu open files; the limit is %lu\n",
                    nranks, (unsigned long)need, (unsigned long)rl.rlim_cur);
            return -1;
        }
    }
    return 0;
}

int gw_launch_main(int argc, char **argv)
{
    struct gw_launch_opts o;
    struct job job;
    sigset_t mask, oldmask;
    struct sigaction ign = {.sa_handler = SIG_IGN}, dfl = {.sa_handler = SIG_DFL}, old_pipe,
                     old_chld;
    struct gw_launch_hosts hosts = {0};
    struct gw_launch_remote remote = {0};
    char root_addr[256];
    int rc = gw_launch_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    /* Over ssh the command is the remote hosts' to find. */
    if (!o.hostfile && (rc = gw_launch_check_command(o.cmd[0])) != 0)
        return rc;
    int port = 0, root_port = 0;
    if (o.hostfile) {
        if (gw_launch_ssh_open(&o, &remote) != 0) {
            gw_launch_ssh_close(&remote);
            return 1;
        }
        o.remote = &remote;
        if (!o.host_given)
            o.host = remote.names[0];
        if (gw_launch_ssh_root(&o, &port, &root_port) != 0) {
            gw_launch_ssh_close(&remote);
            return 1;
        }
    }
    if (o.netns) {
        /* The root is host 0's, and its ports must be free there. */
        if (gw_launch_hosts_open(&o, &hosts) != 0)
            return 1;
        if (gw_launch_hosts_root(&o, &hosts, root_addr, sizeof(root_addr), &port, &root_port) !=
            0) {
            gw_launch_hosts_close(&hosts);
            return 1;
        }
        o.host = root_addr;
    }
    if (prepare_fds(o.nranks, o.hostfile ? 3 : 2) != 0 ||
        (!o.netns && !o.hostfile && gw_launch_ports(o.host, o.port, &port, &root_port) != 0) ||
        gw_launch_set_env(&o, port, root_port) != 0) {
        gw_launch_hosts_close(&hosts);
        gw_launch_ssh_close(&remote);
        return 1;
    }

    memset(&job, 0, sizeof(job));
    job.opts = &o;
    job.hosts = &hosts;
    job.first_fail = -1;
    for (int v = o.nranks - 1; v > 0 || job.width == 0; v /= 10)
        job.width++;
    job.ncpus = gw_launch_bind_plan(&o, job.cpus, CPU_SETSIZE);
    job.ranks = calloc((size_t)o.nranks, sizeof(*job.ranks));
    if (!job.ranks) {
        fprintf(stderr, "gradwire launch: out of memory\n");
        gw_launch_hosts_close(&hosts);
        gw_launch_ssh_close(&remote);
        return 1;
    }
    for (int r = 0; r < o.nranks; r++) {
        job.ranks[r].io[0].fd = job.ranks[r].io[1].fd = -1;
        job.ranks[r].token_fd = -1;
    }

    /* Signals are taken through a signalfd in the poll loop; blocking them
     * before the first fork means no child exit or ^C can slip past. */
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, &oldmask);
    sigaction(SIGPIPE, &ign, &old_pipe);
    /* An ignored SIGCHLD (inherited from whoever started us) would make the
     * kernel reap the ranks itself, and we would wait for them forever. */
    sigaction(SIGCHLD, &dfl, &old_chld);
    job.sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (job.sfd < 0 || devnull < 0) {
        fprintf(stderr, "gradwire launch: cannot set up signal handling: %m\n");
        rc = 1;
        goto err_restore;
    }
    if (o.timeout_s > 0)
        job.deadline_ns = gw_kit_now_ns() + (int64_t)(o.timeout_s * 1e9);
    for (int r = 0; r < o.nranks; r++)
        if (spawn_rank(&job, r, devnull, &oldmask) != 0) {
            /* Take down what was started; the loop reaps it. */
            job.launch_error = 1;
            signal_ranks(&job, SIGKILL);
            break;
        }
    rc = run_loop(&job);

err_restore:
    if (devnull >= 0)
        close(devnull);
    if (job.sfd >= 0)
        close(job.sfd);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    for (int r = 0; r < o.nranks; r++)
        close_token(&job.ranks[r]);
    free(job.ranks);
    gw_launch_hosts_close(&hosts);
    gw_launch_ssh_close(&remote);
    return rc;
}
