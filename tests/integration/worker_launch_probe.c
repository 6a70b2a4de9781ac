/*
 * worker_launch_probe.c - a rank program for the launcher tests
 * (tests/integration/test_launch.c). It reports what a rank sees and
 * misbehaves on request; it needs no communicator.
 *
 *   env                    print the launch environment as KEY=VALUE lines,
 *                          and one line on stderr
 *   lines K                print K numbered lines in odd-sized writes, then
 *                          a last line without a newline
 *   exit DIR R CODE [ign]  rank R exits with CODE once every rank is up;
 *                          the others sleep (ignoring SIGTERM with "ign")
 *   kill DIR R             rank R dies of SIGKILL once every rank is up
 *   cascade DIR R          once DIR/go exists, rank R dies of SIGKILL and
 *                          every other rank, once it sees R dead (a zombie
 *                          or gone), writes DIR/done.RANK and exits with 1:
 *                          survivors of a dead peer, as a job's would
 *   trap DIR               on SIGTERM write DIR/term.RANK and exit 0
 *   ignore DIR             ignore SIGINT and SIGTERM and sleep
 *   sleep DIR              sleep
 *
 * Modes with DIR write DIR/pid.RANK (the pid) once their signal handling
 * is in place, so the test knows when to signal and which pids must be
 * gone afterwards. Sleeping means 30 s: far longer than any test waits.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../support/proc_state.h"

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
    (void)sig;
    got_term = 1;
}

static int env_int(const char *name)
{
    const char *v = getenv(name);
    return v ? atoi(v) : -1;
}

/* The signal mask to sleep with. In trap mode SIGTERM is blocked from
 * before the rank writes its pid file (the test's cue to send it) and
 * unblocked only inside ppoll, atomically: a SIGTERM that came between the
 * check of got_term and the start of a plain sleep would have slept the
 * whole 30 s (it did once on a loaded machine, and the launcher's test
 * timed out). */
static sigset_t sleep_mask;

/* Sleep ms milliseconds, or until SIGTERM when it is trapped. */
static void sleep_ms(long ms)
{
    struct timespec end, now;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    while (!got_term) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        struct timespec left = {.tv_sec = end.tv_sec - now.tv_sec,
                                .tv_nsec = end.tv_nsec - now.tv_nsec};
        if (left.tv_nsec < 0) {
            left.tv_sec--;
            left.tv_nsec += 1000000000L;
        }
        if (left.tv_sec < 0)
            return;
        if (ppoll(NULL, 0, &left, &sleep_mask) == 0)
            return;
    }
}

static int write_file(const char *dir, const char *what, int rank, long value)
{
    char path[4096], tmp[4096];
    snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
    snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, what, rank);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "%ld\n", value) < 0 || fclose(f) != 0) {
        perror(tmp);
        return -1;
    }
    return rename(tmp, path); /* appears whole, never half-written */
}

/* Wait until DIR/pid.R exists for every rank (at most 10 s). */
static void wait_all_up(const char *dir, int size)
{
    for (int tries = 0; tries < 1000; tries++) {
        int up = 0;
        for (int r = 0; r < size; r++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/pid.%d", dir, r);
            up += access(path, F_OK) == 0;
        }
        if (up == size)
            return;
        sleep_ms(10);
    }
}

/* Whether pid is dead: a zombie not yet reaped, or gone. */
static int dead(long pid)
{
    char state = proc_state(pid);
    return state == 0 || state == 'Z';
}

static long read_pid(const char *dir, int rank)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/pid.%d", dir, rank);
    FILE *f = fopen(path, "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static int mode_cascade(const char *dir, int rank, int size, int victim)
{
    char go[4096];
    snprintf(go, sizeof(go), "%s/go", dir);
    wait_all_up(dir, size);
    for (int tries = 0; access(go, F_OK) != 0 && tries < 3000; tries++)
        sleep_ms(10);
    if (rank == victim)
        raise(SIGKILL);
    long pid = read_pid(dir, victim);
    for (int tries = 0; pid > 0 && !dead(pid) && tries < 3000; tries++)
        sleep_ms(5);
    write_file(dir, "done", rank, 1);
    return 1;
}

static int mode_env(int rank)
{
    static const char *const keys[] = {
        "RANK",        "WORLD_SIZE",  "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "MASTER_ADDR", "MASTER_PORT", "GW_ROOT",    "GW_JOB_TOKEN"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = getenv(keys[i]);
        printf("%s=%s\n", keys[i], v ? v : "(unset)");
    }
    fprintf(stderr, "stderr of rank %d\n", rank);
    return 0;
}

/* Lines go out in writes of odd sizes that cut lines anywhere, so the
 * launcher's reassembly of whole lines is exercised. */
static int mode_lines(int rank, int k)
{
    size_t cap = (size_t)k * 128 + 128, len = 0;
    char *buf = malloc(cap);
    if (!buf)
        return 1;
    for (int j = 0; j < k; j++)
        len += (size_t)snprintf(buf + len, cap - len, "rank %d line %d %.*s\n", rank, j, j % 61,
                                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
    len += (size_t)snprintf(buf + len, cap - len, "rank %d tail", rank);
    size_t off = 0, step = 1;
    while (off < len) {
        size_t n = step < len - off ? step : len - off;
        ssize_t w = write(STDOUT_FILENO, buf + off, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return 1;
        }
        off += (size_t)w;
        step = (step * 7 + 13) % 997 + 1;
    }
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int rank = env_int("RANK"), size = env_int("WORLD_SIZE");
    const char *mode = argc > 1 ? argv[1] : "";
    const char *dir = argc > 2 ? argv[2] : NULL;
    struct sigaction sa = {.sa_handler = on_term};

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "env") == 0)
        return mode_env(rank);
    if (strcmp(mode, "lines") == 0 && argc == 3)
        return mode_lines(rank, atoi(argv[2]));
    if (!dir || rank < 0 || size < 1) {
        fprintf(stderr, "worker_launch_probe: bad arguments or no RANK/WORLD_SIZE\n");
        return 64;
    }
    sigprocmask(SIG_SETMASK, NULL, &sleep_mask);
    if (strcmp(mode, "trap") == 0) {
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigaction(SIGTERM, &sa, NULL);
        sigprocmask(SIG_BLOCK, &term, NULL); /* until ppoll (sleep_ms) */
    } else if (strcmp(mode, "ignore") == 0 ||
               (strcmp(mode, "exit") == 0 && argc > 5 && strcmp(argv[5], "ign") == 0)) {
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
    }
    if (write_file(dir, "pid", rank, (long)getpid()) != 0)
        return 65;
    if (strcmp(mode, "cascade") == 0 && argc > 3)
        return mode_cascade(dir, rank, size, atoi(argv[3]));
    if ((strcmp(mode, "exit") == 0 || strcmp(mode, "kill") == 0) && argc > 3 &&
        rank == atoi(argv[3])) {
        wait_all_up(dir, size);
        if (strcmp(mode, "kill") == 0)
            raise(SIGKILL);
        return argc > 4 ? atoi(argv[4]) : 1;
    }
    sleep_ms(30000);
    if (got_term) {
        write_file(dir, "term", rank, 1);
        return 0;
    }
    return 0;
}
