/*
 * run.h - helpers for integration tests that start real processes: run a
 * command with a deadline (killing its process group when it overruns),
 * capture its output, make temporary directories and compare rank files.
 * Header-only so every test executable can include it.
 */
#ifndef GW_TESTS_SUPPORT_RUN_H
#define GW_TESTS_SUPPORT_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run_result {
    int exited;     /* 1 if exited normally */
    int status;     /* exit status, or signal number when !exited */
    int timed_out;  /* killed by us after the deadline */
    double seconds; /* wall time */
    char *output;   /* stdout + stderr, NUL-terminated (malloc'd) */
} run_result_t;

static inline double run__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Run argv (NULL-terminated) with extra environment entries "K=V" (NULL-
 * terminated, may be NULL), capturing output, killing after timeout_s. */
static inline run_result_t run_cmd(char *const argv[], char *const env_extra[], double timeout_s)
{
    run_result_t r = {0};
    int pipefd[2];
    if (pipe(pipefd) != 0) {
        r.status = -1;
        return r;
    }
    double start = run__now();
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        dup2(pipefd[1], 1);
        dup2(pipefd[1], 2);
        close(pipefd[0]);
        close(pipefd[1]);
        for (int i = 0; env_extra && env_extra[i]; i++)
            putenv(env_extra[i]);
        execvp(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(pipefd[1]);
    fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    size_t cap = 65536, len = 0;
    r.output = malloc(cap);
    int status = 0, done = 0;
    while (!done) {
        char buf[8192];
        ssize_t n;
        while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) {
            if (len + (size_t)n + 1 > cap) {
                cap = (len + (size_t)n + 1) * 2;
                r.output = realloc(r.output, cap);
            }
            memcpy(r.output + len, buf, (size_t)n);
            len += (size_t)n;
        }
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) {
            done = 1;
            break;
        }
        if (run__now() - start > timeout_s) {
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            r.timed_out = 1;
            done = 1;
            break;
        }
        usleep(2000);
    }
    /* Drain what is left after exit. */
    fcntl(pipefd[0], F_SETFL, 0);
    char buf[8192];
    ssize_t n;
    while (!r.timed_out && (n = read(pipefd[0], buf, sizeof(buf))) > 0) {
        if (len + (size_t)n + 1 > cap) {
            cap = (len + (size_t)n + 1) * 2;
            r.output = realloc(r.output, cap);
        }
        memcpy(r.output + len, buf, (size_t)n);
        len += (size_t)n;
    }
    close(pipefd[0]);
    r.output[len] = '\0';
    r.seconds = run__now() - start;
    if (WIFEXITED(status)) {
        r.exited = 1;
        r.status = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        r.status = WTERMSIG(status);
    }
    return r;
}

/* Make a fresh temporary directory; returns a malloc'd path. */
static inline char *make_tmpdir(const char *tag)
{
    char tmpl[256];
    snprintf(tmpl, sizeof(tmpl), "/tmp/gw-%s-XXXXXX", tag);
    char *p = mkdtemp(tmpl);
    return p ? strdup(p) : NULL;
}

static inline char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static inline void remove_tree(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) { /* best effort */
    }
}

#endif
