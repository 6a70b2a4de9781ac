/*
 * launch_formed.c - `gradwire launch` failing a job whose rank left before
 * the job formed.
 *
 * A rank that exits 0 is normally left alone: ranks end at slightly
 * different times. But a rank that exits, with any status, while other
 * ranks wait for it in gw_comm_init leaves them waiting until the join
 * timeout, in silence. mpirun's rule is that a process that called
 * MPI_Init and exits without MPI_Finalize aborts the job; ours is the part
 * of it that needs no cooperation after set-up:
 *
 *   the job fails, naming the rank, when a rank has exited while another
 *   rank is inside gw_comm_init and the exited rank never got as far as
 *   that rank (it completed fewer gw_comm_init calls than the waiting rank
 *   has entered).
 *
 * So a rank that exits 0 before the job formed fails the job at once; a
 * program that never calls gw_comm_init (hostname, a shell script) is
 * never judged, and neither is any exit once every rank has formed the
 * job. How the launcher learns: every rank inherits the write end of one
 * pipe, named in GW_LAUNCH_SETUP="FD:RANK", and gw_comm_init writes
 * "RANK I" when it starts and "RANK J" (joined) or "RANK F" (failed) when
 * it returns (collectives/comm/launch_env.c). Each message is shorter than
 * PIPE_BUF, so the ranks' writes never interleave. Ranks started over ssh
 * (--hostfile) cannot inherit the pipe and are not judged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch_internal.h"

int gw_launch_formed_open(struct job *job)
{
    job->setup_rd = job->setup_wr = -1;
    if (job->opts->remote)
        return 0;
    int p[2];
    /* Non-blocking at both ends: a rank never waits on the launcher. */
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
        fprintf(stderr, "gradwire launch: cannot make the set-up pipe: %m\n");
        return -1;
    }
    job->setup_rd = p[0];
    job->setup_wr = p[1];
    return 0;
}

int gw_launch_formed_child(const struct job *job, int r)
{
    if (job->setup_wr < 0)
        return 0;
    /* A copy without close-on-exec is the one the command inherits. */
    int fd = fcntl(job->setup_wr, F_DUPFD, 3);
    char v[32];
    snprintf(v, sizeof(v), "%d:%d", fd, r);
    return fd < 0 || setenv("GW_LAUNCH_SETUP", v, 1) != 0 ? -1 : 0;
}

/* The rule at the top of the file; the first rank it finds, or -1. */
static int left_before_formed(const struct job *job, int *waiter)
{
    int nr = job->opts->nranks;
    for (int w = 0; w < nr; w++) {
        const struct rank *k = &job->ranks[w];
        if (k->pid <= 0 || k->setup_in <= k->setup_out)
            continue;
        for (int x = 0; x < nr; x++)
            if (job->ranks[x].pid == 0 && job->ranks[x].pass > 0 &&
                job->ranks[x].setup_out < k->setup_in) {
                *waiter = w;
                return x;
            }
    }
    return -1;
}

/* Every message in the pipe now. A rank writes its messages before it
 * exits, so once its exit is reaped, draining gives all it said. */
static void drain(struct job *job)
{
    char buf[4096 + sizeof(job->setup_part)];
    while (job->setup_rd >= 0) {
        /* A read may end inside a message: its start waits in setup_part. */
        size_t have = job->setup_part_len;
        memcpy(buf, job->setup_part, have);
        ssize_t n = read(job->setup_rd, buf + have, 4096);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(job->setup_rd); /* every rank is gone, or the pipe broke */
                job->setup_rd = -1;
            }
            break;
        }
        char *p = buf, *end = buf + have + (size_t)n;
        for (char *nl; (nl = memchr(p, '\n', (size_t)(end - p))) != NULL; p = nl + 1) {
            int r;
            char what;
            if (sscanf(p, "%d %c", &r, &what) == 2 && r >= 0 && r < job->opts->nranks) {
                if (what == 'I')
                    job->ranks[r].setup_in++;
                else if (what == 'J' || what == 'F')
                    job->ranks[r].setup_out++;
            }
        }
        /* What a well-formed rank writes never exceeds the part buffer. */
        job->setup_part_len = (size_t)(end - p) < sizeof(job->setup_part) ? (size_t)(end - p) : 0;
        memcpy(job->setup_part, p, job->setup_part_len);
    }
}

void gw_launch_formed_check(struct job *job)
{
    if (job->first_fail >= 0 || job->timed_out || job->launch_error || job->stopped ||
        job->nsignals || job->opts->elastic)
        return;
    drain(job);
    int w, x = left_before_formed(job, &w);
    if (x < 0)
        return;
    int st = job->ranks[x].wstatus;
    job->first_fail = x;
    job->fail_status = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st) ? WEXITSTATUS(st) : 1;
    fprintf(stderr,
            "gradwire launch: rank %d exited (status %d) before the job formed, while rank %d "
            "waits for it in gw_comm_init; stopping the job\n",
            x, WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), w);
    if (job->nlive > 0)
        gw_launch_stop_ranks(job);
}

void gw_launch_formed_pump(struct job *job)
{
    drain(job);
    gw_launch_formed_check(job);
}
