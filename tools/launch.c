/*
 * launch.c - `gradwire launch -n N CMD ARGS...`: run the ranks of a job on
 * this host.
 *
 * How a job runs: the launcher picks the rendezvous address (a free port on
 * --host unless --port is given) and a job token (launch_setup.c), then
 * forks N children (launch_spawn.c), each the leader of its own process
 * group, with its stdout and stderr on two pipes and RANK and friends set,
 * exec'ing CMD. The launcher then sits in one poll() loop, below, over a
 * signalfd (launch_signals.c) and the 2N pipe read ends, whose output is
 * relayed line by line with a "[R] " prefix (launch_relay.c).
 *
 * How a job ends: the first rank that exits non-zero or dies of a signal is
 * reported in one line ("... (first failure)"), the other ranks get SIGTERM
 * and, 2 s later, SIGKILL; the launcher exits with that rank's status (128 +
 * signal number for a signal), and at the end says how the other ranks
 * ended after it (launch_reap.c). --timeout does the same with exit status
 * 124. With --elastic a failing rank ends nothing: the launcher says which
 * rank was lost and how ("rank 2 killed by signal SIGKILL; --elastic: the
 * job goes on with 3 rank(s)"), leaves the others running (they shrink
 * their communicator to the survivors), and exits 0 when any rank exited
 * 0, the first loss's status otherwise. The launcher returns only after it
 * has reaped every child, so no zombies remain.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "kit.h"
#include "launch_internal.h"

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
    struct pollfd *pfds = calloc((size_t)(2 + 2 * nr), sizeof(*pfds));
    struct stream **map = calloc((size_t)(2 + 2 * nr), sizeof(*map));
    int *owner = calloc((size_t)(2 + 2 * nr), sizeof(*owner));
    if (!pfds || !map || !owner) {
        fprintf(stderr, "gradwire launch: out of memory\n");
        gw_launch_signal_ranks(job, SIGKILL);
        job->launch_error = 1;
    }
    gw_launch_reap(job);
    for (;;) {
        int64_t now = gw_kit_now_ns();
        if (job->deadline_ns && !job->timed_out && now >= job->deadline_ns && job->nlive > 0) {
            job->timed_out = 1;
            fprintf(stderr,
                    "gradwire launch: job did not finish within %g s; stopping %d rank(s)\n",
                    job->opts->timeout_s, job->nlive);
            gw_launch_stop_ranks(job);
        }
        if (job->kill_at_ns && now >= job->kill_at_ns) {
            job->kill_at_ns = 0;
            gw_launch_signal_ranks(job, SIGKILL);
        }
        if (!pfds) {
            gw_launch_reap_all_blocking(job); /* without memory to relay output */
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
        /* The set-up pipe last, and not counted as output to drain. */
        int setup_at = -1;
        if (job->setup_rd >= 0 && job->nlive > 0) {
            setup_at = n;
            pfds[n++] = (struct pollfd){.fd = job->setup_rd, .events = POLLIN};
        }
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
            gw_launch_signal_ranks(job, SIGKILL);
            job->launch_error = 1;
            gw_launch_reap_all_blocking(job);
            break;
        }
        if (pfds[0].revents)
            gw_launch_handle_signals(job);
        for (int i = 1; i < n; i++)
            if (pfds[i].revents && i != setup_at)
                gw_launch_relay_pump(job, owner[i], map[i]);
        if (setup_at > 0 && pfds[setup_at].revents)
            gw_launch_formed_pump(job);
    }
    for (int r = 0; r < nr; r++)
        for (int k = 0; k < 2; k++)
            if (job->ranks[r].io[k].fd >= 0)
                gw_launch_relay_close(job, r, &job->ranks[r].io[k]);
    free(owner);
    free(map);
    free(pfds);
    gw_launch_report_after(job);
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
    job.setup_rd = job.setup_wr = -1;
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
    if (gw_launch_formed_open(&job) != 0) {
        rc = 1;
        goto err_restore;
    }
    for (int r = 0; r < o.nranks; r++)
        if (gw_launch_spawn_rank(&job, r, devnull, &oldmask) != 0) {
            /* Take down what was started; the loop reaps it. */
            job.launch_error = 1;
            gw_launch_signal_ranks(&job, SIGKILL);
            break;
        }
    /* Only the ranks hold the write end now: it reads EOF once all left. */
    if (job.setup_wr >= 0)
        close(job.setup_wr);
    job.setup_wr = -1;
    rc = run_loop(&job);
    /* GW_TRACE: the ranks' timelines become one file (kit_trace.c). */
    const char *trace = getenv("GW_TRACE");
    if (trace && trace[0]) {
        int merged, events;
        if (gw_kit_trace_merge(trace, o.nranks, 0, &merged, &events) != 0 && rc == 0)
            rc = 1;
        else if (merged)
            fprintf(stderr, "gradwire launch: trace of %d of %d ranks (%d events) in %s\n", merged,
                    o.nranks, events, trace);
    }

err_restore:
    if (job.setup_rd >= 0)
        close(job.setup_rd);
    if (devnull >= 0)
        close(devnull);
    if (job.sfd >= 0)
        close(job.sfd);
    sigaction(SIGCHLD, &old_chld, NULL);
    sigaction(SIGPIPE, &old_pipe, NULL);
    sigprocmask(SIG_SETMASK, &oldmask, NULL);
    for (int r = 0; r < o.nranks; r++)
        gw_launch_close_token(&job.ranks[r]);
    free(job.ranks);
    gw_launch_hosts_close(&hosts);
    gw_launch_ssh_close(&remote);
    return rc;
}
