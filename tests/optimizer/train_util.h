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

#endif
