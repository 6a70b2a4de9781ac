/*
 * train_util.h - helpers for the trainer's integration tests: where the
 * programs are, running gradwire-train (alone or under `gradwire launch`)
 * with a deadline, starting a job in the background to kill it, and
 * comparing weight files.
 */
#ifndef GW_TESTS_OPTIMIZER_TRAIN_UTIL_H
#define GW_TESTS_OPTIMIZER_TRAIN_UTIL_H

#include <criterion/criterion.h>
#include <math.h>

#include "support/run.h"

#define TRAINER GW_BUILD_DIR "/optimizer/gradwire-train"
#define LAUNCHER GW_BUILD_DIR "/gradwire"

static inline void require_trainer(void)
{
    cr_assert(access(TRAINER, X_OK) == 0,
              "%s is not built: the top-level CMakeLists.txt needs add_subdirectory(optimizer)",
              TRAINER);
}

/* Fill argv with "LAUNCHER launch -n N -- TRAINER" (n > 0) or "TRAINER"
 * (n == 0), then the NULL-terminated extra arguments. Returns the count. */
static inline int train_argv(char **argv, int n, char *nbuf, char *const *extra)
{
    int k = 0;
    if (n > 0) {
        sprintf(nbuf, "%d", n);
        argv[k++] = LAUNCHER;
        argv[k++] = "launch";
        argv[k++] = "-n";
        argv[k++] = nbuf;
        argv[k++] = "--";
    }
    argv[k++] = TRAINER;
    for (int i = 0; extra[i]; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    return k;
}

static inline run_result_t train_run(int n, char *const *extra, double timeout)
{
    char *argv[128], nbuf[16];
    char timeout_env[] = "GW_TIMEOUT_MS=60000";
    char *env[] = {timeout_env, NULL};
    require_trainer();
    train_argv(argv, n, nbuf, extra);
    return run_cmd(argv, env, timeout);
}

/* Start a job in its own process group, output to a file; returns the pid. */
static inline pid_t train_spawn(int n, char *const *extra, const char *log)
{
    char *argv[128], nbuf[16];
    require_trainer();
    train_argv(argv, n, nbuf, extra);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        putenv("GW_TIMEOUT_MS=60000");
        execv(argv[0], argv);
        _exit(127);
    }
    setpgid(pid, pid);
    return pid;
}

/* Wait for pid until the deadline, then kill its group; the exit status
 * (128 + signal for a signal), or -1 on timeout. */
static inline int train_reap(pid_t pid, double timeout)
{
    double start = run__now();
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (run__now() - start > timeout) {
            kill(-pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(5000);
    }
}

static inline int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* Read a whole binary file; *len its size. NULL when it cannot be read. */
static inline unsigned char *read_bin(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)n + 1);
    *len = fread(p, 1, (size_t)n, f);
    fclose(f);
    return p;
}

static inline void write_bin(const char *path, const void *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot write %s", path);
    cr_assert_eq(fwrite(p, 1, len, f), len);
    fclose(f);
}

/* Run a job that must succeed (exit 0) within 280 s. */
static inline void train_run_ok(int n, char *const *args)
{
    run_result_t r = train_run(n, args, 280);
    cr_assert(!r.timed_out, "timed out:\n%s", r.output);
    cr_assert(r.exited && r.status == 0, "failed (status %d):\n%s", r.status, r.output);
    free(r.output);
}

/* Two weight files equal byte for byte. */
static inline void train_assert_same_file(const char *a, const char *b)
{
    size_t la, lb;
    unsigned char *pa = read_bin(a, &la), *pb = read_bin(b, &lb);
    cr_assert_not_null(pa, "%s missing", a);
    cr_assert_not_null(pb, "%s missing", b);
    cr_assert_eq(la, lb);
    size_t diff = 0;
    for (size_t i = 0; i < la; i++)
        diff += pa[i] != pb[i];
    cr_assert_eq(diff, 0, "%zu of %zu bytes of the resumed weights differ", diff, la);
    free(pa);
    free(pb);
}

/* The step a checkpoint directory's `latest` file names, or -1. */
static inline long train_latest_step(const char *latest)
{
    char *text = read_file(latest);
    long step = text ? strtol(text, NULL, 10) : -1;
    free(text);
    return step;
}

/* Start the job of n ranks (output in dir/interrupted.log), wait until its
 * checkpoint directory ck names step min_step or later, then send sig (to
 * the launcher, which forwards it to every rank; SIGKILL to the whole
 * group); its exit status. It must not have written its weights: a job
 * that finished was not interrupted. */
static inline int train_interrupt(int n, char *const *args, const char *dir, const char *ck,
                                  long min_step, const char *weights, int sig)
{
    char log[1024], latest[1024];
    snprintf(log, sizeof(log), "%s/interrupted.log", dir);
    snprintf(latest, sizeof(latest), "%s/latest", ck);
    pid_t pid = train_spawn(n, args, log);
    double start = run__now();
    while (train_latest_step(latest) < min_step && run__now() - start < 120) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            cr_assert_fail("the job ended before its checkpoint of step %ld:\n%s", min_step,
                           read_file(log));
        usleep(2000);
    }
    cr_assert(train_latest_step(latest) >= min_step, "no checkpoint of step %ld after 120 s:\n%s",
              min_step, read_file(log));
    usleep(30000); /* a few more steps, so the stop is not at the checkpoint */
    if (sig == SIGKILL)
        kill(-pid, SIGKILL);
    else
        kill(pid, sig);
    int rc = train_reap(pid, 120);
    cr_assert(!file_exists(weights),
              "the job finished before it was interrupted: the test proves nothing");
    return rc;
}

#endif
