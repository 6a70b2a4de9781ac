/*
 * test_launch.c - `gradwire launch` end to end: the built launcher runs
 * worker_launch_probe as its ranks, and we check what the ranks saw, how
 * their output was relayed, and how failures, signals and timeouts end a
 * job (exit status, and no rank left running).
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gradwire.h"
#include "support/proc_state.h"

#define LAUNCHER GW_BUILD_DIR "/gradwire"
#define PROBE GW_BUILD_DIR "/tests/worker_launch_probe"

extern char **environ;

/* Start the launcher with SIGCHLD ignored, as some parents leave it. */
static int ignore_sigchld;

struct run {
    pid_t pid;
    int fd[2]; /* the launcher's stdout and stderr */
    char *buf[2];
    size_t len[2];
    int status;
    double secs;
    struct timespec t0;
};

static double since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static void need_binaries(void)
{
    if (access(LAUNCHER, X_OK) != 0 || access(PROBE, X_OK) != 0)
        cr_assert_fail(
            "%s or %s is missing: build the gradwire_cli and worker_launch_probe targets", LAUNCHER,
            PROBE);
}

/* environ with changes: "K=V" sets K, "K" removes it. Built before fork
 * because the child may only call async-signal-safe functions. */
static char **make_env(const char *const *changes)
{
    size_t n = 0, m = 0, k = 0;
    while (environ[n])
        n++;
    while (changes && changes[m])
        m++;
    char **env = calloc(n + m + 1, sizeof(*env));
    cr_assert_not_null(env);
    for (size_t i = 0; i < n; i++) {
        int drop = 0;
        for (size_t j = 0; j < m; j++) {
            size_t kl = strcspn(changes[j], "=");
            drop |= strncmp(environ[i], changes[j], kl) == 0 && environ[i][kl] == '=';
        }
        if (!drop)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        if (strchr(changes[j], '='))
            env[k++] = (char *)changes[j];
    return env;
}

static void start(struct run *r, const char *const *env_changes, const char *const *argv)
{
    int out[2], err[2];
    need_binaries();
    memset(r, 0, sizeof(*r));
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(err, O_CLOEXEC), 0);
    char **env = make_env(env_changes);
    clock_gettime(CLOCK_MONOTONIC, &r->t0);
    r->pid = fork();
    cr_assert_geq(r->pid, 0);
    if (r->pid == 0) {
        if (ignore_sigchld)
            signal(SIGCHLD, SIG_IGN);
        dup2(out[1], 1);
        dup2(err[1], 2);
        execve(argv[0], (char *const *)argv, env);
        _exit(99);
    }
    free(env);
    close(out[1]);
    close(err[1]);
    r->fd[0] = out[0];
    r->fd[1] = err[0];
}

/* Collect all output and the exit status; a launcher that takes longer than
 * timeout_s is killed and the test fails. */
static void finish(struct run *r, double timeout_s)
{
    while (r->fd[0] >= 0 || r->fd[1] >= 0) {
        struct pollfd p[2] = {{.fd = r->fd[0], .events = POLLIN},
                              {.fd = r->fd[1], .events = POLLIN}};
        double left = timeout_s - since(&r->t0);
        if (left <= 0)
            break;
        if (poll(p, 2, (int)(left * 1000) + 1) < 0 && errno != EINTR)
            break;
        for (int k = 0; k < 2; k++) {
            if (r->fd[k] < 0 || !p[k].revents)
                continue;
            char chunk[65536];
            ssize_t n = read(r->fd[k], chunk, sizeof(chunk));
            if (n <= 0) {
                close(r->fd[k]);
                r->fd[k] = -1;
                continue;
            }
            r->buf[k] = realloc(r->buf[k], r->len[k] + (size_t)n + 1);
            cr_assert_not_null(r->buf[k]);
            memcpy(r->buf[k] + r->len[k], chunk, (size_t)n);
            r->len[k] += (size_t)n;
            r->buf[k][r->len[k]] = '\0';
        }
    }
    int st = 0;
    pid_t w;
    while ((w = waitpid(r->pid, &st, WNOHANG)) == 0 && since(&r->t0) < timeout_s)
        usleep(10000);
    r->secs = since(&r->t0);
    if (w != r->pid) {
        kill(r->pid, SIGKILL);
        waitpid(r->pid, &st, 0);
        cr_assert_fail("launcher did not finish within %.1f s", timeout_s);
    }
    for (int k = 0; k < 2; k++) {
        if (r->fd[k] >= 0)
            close(r->fd[k]);
        if (!r->buf[k])
            r->buf[k] = strdup("");
    }
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void run(struct run *r, const char *const *env_changes, const char *const *argv,
                double timeout_s)
{
    start(r, env_changes, argv);
    finish(r, timeout_s);
}

static void run_free(struct run *r)
{
    free(r->buf[0]);
    free(r->buf[1]);
}

/* The value of KEY in the line "PREFIX KEY=VALUE" of out, copied to val. */
static int value_of(const char *out, const char *prefix, const char *key, char *val, size_t cap)
{
    char want[256];
    snprintf(want, sizeof(want), "%s%s=", prefix, key);
    for (const char *line = out; line && *line;
         line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, want, strlen(want)) != 0)
            continue;
        const char *v = line + strlen(want);
        size_t n = strcspn(v, "\n");
        if (n >= cap)
            return -1;
        memcpy(val, v, n);
        val[n] = '\0';
        return 0;
    }
    return -1;
}

static int is_hex32(const char *s)
{
    if (strlen(s) != 32)
        return 0;
    for (; *s; s++)
        if (!strchr("0123456789abcdef", *s))
            return 0;
    return 1;
}

/* Runs the 4-rank env probe and checks everything but the token's value,
 * which it returns. */
static void check_env_run(const char *const *env, char token[64])
{
    struct run r;
    const char *argv[] = {LAUNCHER, "launch", "-n", "4", PROBE, "env", NULL};
    run(&r, env, argv, 20);
    cr_assert_eq(r.status, 0, "status %d, stderr:\n%s", r.status, r.buf[1]);
    char root[600], addr[256], port[64], v[256];
    for (int rank = 0; rank < 4; rank++) {
        char pfx[16], want[16];
        snprintf(pfx, sizeof(pfx), "[%d] ", rank);
        snprintf(want, sizeof(want), "%d", rank);
        cr_assert_eq(value_of(r.buf[0], pfx, "RANK", v, sizeof(v)), 0, "no RANK of %d in:\n%s",
                     rank, r.buf[0]);
        cr_assert_str_eq(v, want);
        cr_assert_eq(value_of(r.buf[0], pfx, "LOCAL_RANK", v, sizeof(v)), 0);
        cr_assert_str_eq(v, want);
        cr_assert_eq(value_of(r.buf[0], pfx, "WORLD_SIZE", v, sizeof(v)), 0);
        cr_assert_str_eq(v, "4");
        cr_assert_eq(value_of(r.buf[0], pfx, "LOCAL_WORLD_SIZE", v, sizeof(v)), 0);
        cr_assert_str_eq(v, "4");
        cr_assert_eq(value_of(r.buf[0], pfx, "MASTER_ADDR", addr, sizeof(addr)), 0);
        cr_assert_eq(value_of(r.buf[0], pfx, "MASTER_PORT", port, sizeof(port)), 0);
        cr_assert(atoi(port) > 0 && atoi(port) < 65536, "MASTER_PORT=%s", port);
        cr_assert_eq(value_of(r.buf[0], pfx, "GW_ROOT", v, sizeof(v)), 0);
        /* gradwire's root on the same host, on another port than torch's
         * store, so that both can rendezvous in one job. */
        snprintf(root, sizeof(root), "%s:", addr);
        cr_assert(strncmp(v, root, strlen(root)) == 0, "GW_ROOT=%s, MASTER_ADDR=%s", v, addr);
        cr_assert(atoi(v + strlen(root)) > 0 && atoi(v + strlen(root)) != atoi(port),
                  "GW_ROOT=%s takes MASTER_PORT=%s", v, port);
        cr_assert_eq(value_of(r.buf[0], pfx, "GW_JOB_TOKEN", v, sizeof(v)), 0);
        if (rank == 0) {
            cr_assert_lt(strlen(v), 64, "token too long: %s", v);
            memcpy(token, v, strlen(v) + 1);
        }
        cr_assert_str_eq(v, token, "rank %d has token %s, rank 0 has %s", rank, v, token);
        char line[64];
        snprintf(line, sizeof(line), "[%d] stderr of rank %d\n", rank, rank);
        cr_assert(strstr(r.buf[1], line), "no \"%s\" on stderr:\n%s", line, r.buf[1]);
    }
    cr_assert_str_eq(addr, "127.0.0.1");
    run_free(&r);
}

Test(launch, environment_and_fresh_token, .timeout = 60)
{
    char t1[64], t2[64];
    const char *env[] = {"GW_JOB_TOKEN", NULL};
    check_env_run(env, t1);
    check_env_run(env, t2);
    cr_assert(is_hex32(t1), "token \"%s\" is not 32 hex digits", t1);
    cr_assert(is_hex32(t2), "token \"%s\" is not 32 hex digits", t2);
    cr_assert_str_neq(t1, t2, "two jobs got the same token");
}

Test(launch, given_token_host_and_port, .timeout = 30)
{
    struct run r;
    const char *env[] = {"GW_JOB_TOKEN=sekrit-token", NULL};
    const char *argv[] = {LAUNCHER, "launch", "--host", "127.0.0.2", "--port=23456",
                          "-n2",    "--",     PROBE,    "env",       NULL};
    char v[256];
    run(&r, env, argv, 20);
    cr_assert_eq(r.status, 0, "stderr:\n%s", r.buf[1]);
    for (int rank = 0; rank < 2; rank++) {
        char pfx[16];
        snprintf(pfx, sizeof(pfx), "[%d] ", rank);
        cr_assert_eq(value_of(r.buf[0], pfx, "GW_ROOT", v, sizeof(v)), 0);
        cr_assert_str_eq(v, "127.0.0.2:23457");
        cr_assert_eq(value_of(r.buf[0], pfx, "MASTER_PORT", v, sizeof(v)), 0);
        cr_assert_str_eq(v, "23456");
        cr_assert_eq(value_of(r.buf[0], pfx, "GW_JOB_TOKEN", v, sizeof(v)), 0);
        cr_assert_str_eq(v, "sekrit-token");
    }
    run_free(&r);
}

/* A GW_JOB_TOKEN that is set but empty or padded is a mistake in the job
 * script: refused, naming it, before any rank starts; not replaced by a
 * random token the ranks of another launch would not know. */
Test(launch, empty_or_padded_token_is_refused, .timeout = 30)
{
    const char *tokens[] = {"GW_JOB_TOKEN=", "GW_JOB_TOKEN= sekrit", "GW_JOB_TOKEN=sekrit\t"};
    for (size_t i = 0; i < sizeof(tokens) / sizeof(tokens[0]); i++) {
        struct run r;
        const char *env[] = {tokens[i], NULL};
        const char *argv[] = {LAUNCHER, "launch", "-n", "2", PROBE, "env", NULL};
        run(&r, env, argv, 10);
        cr_expect_eq(r.status, 1, "%s: status %d", tokens[i], r.status);
        cr_expect(strstr(r.buf[1], "gradwire launch: GW_JOB_TOKEN="), "%s: stderr:\n%s", tokens[i],
                  r.buf[1]);
        cr_expect_eq(r.len[0], 0, "%s started something:\n%s", tokens[i], r.buf[0]);
        run_free(&r);
    }
}

/* Every relayed line must be one whole line of one rank, in order per rank,
 * however the rank's writes cut it. */
Test(launch, whole_prefixed_lines, .timeout = 60)
{
    enum { NR = 4, K = 3000 };
    struct run r;
    const char *argv[] = {LAUNCHER, "launch", "-n", "4", PROBE, "lines", "3000", NULL};
    int next[NR] = {0}, tail[NR] = {0};
    run(&r, NULL, argv, 40);
    cr_assert_eq(r.status, 0, "stderr:\n%s", r.buf[1]);
    cr_assert(r.len[0] > 0 && r.buf[0][r.len[0] - 1] == '\n', "output must end with a newline");
    for (char *line = r.buf[0], *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        *nl = '\0';
        int pr, rank, j, n = -1;
        if (sscanf(line, "[%d] rank %d tail%n", &pr, &rank, &n) == 2 && n == (int)strlen(line)) {
            cr_assert_eq(pr, rank);
            cr_assert_eq(next[rank], K, "tail of rank %d before its line %d", rank, next[rank]);
            tail[rank]++;
            continue;
        }
        n = -1;
        cr_assert(sscanf(line, "[%d] rank %d line %d %n", &pr, &rank, &j, &n) == 3 && n > 0,
                  "mangled line \"%s\"", line);
        cr_assert(pr == rank && rank >= 0 && rank < NR, "line \"%s\" under the wrong prefix", line);
        cr_assert_eq(j, next[rank], "rank %d: line %d where %d was due", rank, j, next[rank]);
        cr_assert_eq(strspn(line + n, "x"), strlen(line + n));
        cr_assert_eq(strlen(line + n), (size_t)(j % 61), "line \"%s\" cut or joined", line);
        next[rank]++;
    }
    for (int rank = 0; rank < NR; rank++) {
        cr_assert_eq(next[rank], K, "rank %d: %d of %d lines", rank, next[rank], K);
        cr_assert_eq(tail[rank], 1, "rank %d: unterminated last line not relayed once", rank);
    }
    run_free(&r);
}

Test(launch, prefix_width_and_no_prefix, .timeout = 30)
{
    struct run r;
    const char *argv[] = {LAUNCHER, "launch", "-n", "11", PROBE, "env", NULL};
    char v[64];
    run(&r, NULL, argv, 20);
    cr_assert_eq(r.status, 0, "stderr:\n%s", r.buf[1]);
    cr_assert_eq(value_of(r.buf[0], "[ 3] ", "RANK", v, sizeof(v)), 0, "out:\n%s", r.buf[0]);
    cr_assert_str_eq(v, "3");
    cr_assert_eq(value_of(r.buf[0], "[10] ", "RANK", v, sizeof(v)), 0);
    cr_assert_str_eq(v, "10");
    run_free(&r);

    const char *argv2[] = {LAUNCHER, "launch", "--no-prefix", "-n", "2", PROBE, "env", NULL};
    run(&r, NULL, argv2, 20);
    cr_assert_eq(r.status, 0);
    cr_assert_eq(strncmp(r.buf[0], "RANK=", 5), 0, "out:\n%s", r.buf[0]);
    cr_assert_null(strstr(r.buf[0], "[0]"));
    run_free(&r);
}

static char *make_dir(void)
{
    char *dir = strdup("/tmp/gw_launch_test_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    return dir;
}

static void remove_dir(char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        char path[4096];
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
    free(dir);
}

static long read_num(const char *dir, const char *what, int rank)
{
    char path[4096];
    long v = -1;
    snprintf(path, sizeof(path), "%s/%s.%d", dir, what, rank);
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

/* After the launcher has returned, none of the ranks may still run. */
static void assert_ranks_gone(const char *dir, int n)
{
    for (int rank = 0; rank < n; rank++) {
        long pid = read_num(dir, "pid", rank);
        cr_assert_gt(pid, 0, "rank %d never started", rank);
        cr_assert(kill((pid_t)pid, 0) != 0 && errno == ESRCH, "rank %d (pid %ld) still exists",
                  rank, pid);
    }
}

/* Wait until ranks 0..n-1 (their pid.* files) have all ended, unreaped. */
static void wait_ended(const char *dir, int n)
{
    for (int tries = 0; tries < 2000; tries++) {
        int ended = 0;
        for (int rank = 0; rank < n; rank++)
            ended += proc_state(read_num(dir, "pid", rank)) == 'Z';
        if (ended == n)
            return;
        usleep(10000);
    }
    cr_assert_fail("ranks 0..%d did not all end within 20 s", n - 1);
}

static void wait_files(const char *dir, const char *what, int n)
{
    for (int tries = 0; tries < 1000; tries++) {
        int have = 0;
        for (int rank = 0; rank < n; rank++)
            have += read_num(dir, what, rank) > 0;
        if (have == n)
            return;
        usleep(10000);
    }
    cr_assert_fail("ranks did not write %s/%s.* in 10 s", dir, what);
}

Test(launch, failing_rank_stops_the_others, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "3", PROBE, "exit", dir, "1", "3", NULL};
    run(&r, NULL, argv, 15);
    cr_assert_eq(r.status, 3, "status %d, stderr:\n%s", r.status, r.buf[1]);
    cr_assert(strstr(r.buf[1], "gradwire launch: rank 1 exited with status 3 (first failure)\n"),
              "stderr:\n%s", r.buf[1]);
    /* The others sleep 30 s unless stopped; SIGTERM ends them at once. */
    cr_assert_lt(r.secs, 10.0, "took %.1f s: the other ranks were not stopped", r.secs);
    assert_ranks_gone(dir, 3);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, sigterm_ignored_escalates_to_sigkill, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "3", PROBE, "exit", dir, "2", "5", "ign", NULL};
    run(&r, NULL, argv, 15);
    cr_assert_eq(r.status, 5, "status %d, stderr:\n%s", r.status, r.buf[1]);
    /* Ranks that ignore SIGTERM are killed after the grace period. */
    cr_assert_gt(r.secs, 1.5, "SIGKILL came before the grace period (%.2f s)", r.secs);
    cr_assert_lt(r.secs, 10.0);
    assert_ranks_gone(dir, 3);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, killed_rank_gives_128_plus_signal, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "2", PROBE, "kill", dir, "0", NULL};
    run(&r, NULL, argv, 15);
    cr_assert_eq(r.status, 137, "status %d, stderr:\n%s", r.status, r.buf[1]);
    cr_assert(
        strstr(r.buf[1], "gradwire launch: rank 0 killed by signal SIGKILL (first failure)\n"),
        "stderr:\n%s", r.buf[1]);
    assert_ranks_gone(dir, 2);
    run_free(&r);
    remove_dir(dir);
}

/* Rank 3 is killed and ranks 0-2 exit with status 1 because of it, all
 * while the launcher is stopped, so that one reap finds all four: the
 * launcher reports rank 3 as the first failure (waitpid alone returns
 * rank 0 first, in fork order), exits 137, and says how the others ended
 * after it. */
Test(launch, first_failure_in_time_is_reported, .timeout = 60)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "4", PROBE, "cascade", dir, "3", NULL};
    start(&r, NULL, argv);
    wait_files(dir, "pid", 4);
    cr_assert_eq(kill(r.pid, SIGSTOP), 0);
    char go[4096];
    snprintf(go, sizeof(go), "%s/go", dir);
    FILE *f = fopen(go, "w");
    cr_assert(f && fclose(f) == 0, "cannot create %s", go);
    /* All four have ended (zombies: their parent, stopped, cannot reap
     * them). A fixed wait after rank 0-2's done.* files was too short once
     * on a loaded machine: rank 2 had not exited when the launcher woke,
     * and the launcher rightly stopped it with SIGTERM. */
    wait_ended(dir, 4);
    cr_assert_eq(kill(r.pid, SIGCONT), 0);
    finish(&r, 30);
    cr_assert_eq(r.status, 137, "status %d, stderr:\n%s", r.status, r.buf[1]);
    cr_assert(
        strstr(r.buf[1], "gradwire launch: rank 3 killed by signal SIGKILL (first failure)\n"),
        "the first failure is not rank 3's death; stderr:\n%s", r.buf[1]);
    cr_assert(strstr(r.buf[1], "after it, ranks 0,1,2 exited with status 1\n"), "stderr:\n%s",
              r.buf[1]);
    assert_ranks_gone(dir, 4);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, sigterm_is_forwarded, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "3", PROBE, "trap", dir, NULL};
    start(&r, NULL, argv);
    wait_files(dir, "pid", 3);
    cr_assert_eq(kill(r.pid, SIGTERM), 0);
    finish(&r, 15);
    for (int rank = 0; rank < 3; rank++)
        cr_assert_eq(read_num(dir, "term", rank), 1, "rank %d did not get SIGTERM", rank);
    /* Every rank exited 0, but the job was terminated: 128 + SIGTERM. */
    cr_assert_eq(r.status, 128 + SIGTERM, "status %d, stderr:\n%s", r.status, r.buf[1]);
    assert_ranks_gone(dir, 3);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, second_sigint_kills, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "2", PROBE, "ignore", dir, NULL};
    start(&r, NULL, argv);
    wait_files(dir, "pid", 2);
    cr_assert_eq(kill(r.pid, SIGINT), 0);
    usleep(300000);
    cr_assert_eq(waitpid(r.pid, NULL, WNOHANG), 0, "launcher left after one SIGINT");
    cr_assert_eq(kill(r.pid, SIGINT), 0);
    finish(&r, 10);
    cr_assert_eq(r.status, 128 + SIGKILL, "status %d, stderr:\n%s", r.status, r.buf[1]);
    assert_ranks_gone(dir, 2);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, timeout_gives_124, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "--timeout", "0.5", "-n",
                          "2",      PROBE,    "sleep",     dir,   NULL};
    run(&r, NULL, argv, 15);
    cr_assert_eq(r.status, 124, "status %d, stderr:\n%s", r.status, r.buf[1]);
    cr_assert_lt(r.secs, 10.0);
    /* Half a second may end the job before a rank has written its pid
     * (it did once under ASan, the machine loaded): what must hold is that
     * no rank is left, started or not. Each rank has dir among its
     * arguments. */
    for (int rank = 0; rank < 2; rank++) {
        long pid = read_num(dir, "pid", rank);
        cr_assert(pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH),
                  "rank %d (pid %ld) still exists", rank, pid);
    }
    cr_assert_eq(procs_with_arg(dir), 0, "a rank of the job (argument %s) is left", dir);
    run_free(&r);
    remove_dir(dir);
}

Test(launch, missing_command_gives_127, .timeout = 30)
{
    struct run r;
    const char *argv[] = {LAUNCHER, "launch", "-n", "2", "/nonexistent/gw-no-such-cmd", NULL};
    run(&r, NULL, argv, 10);
    cr_assert_eq(r.status, 127, "status %d", r.status);
    cr_assert(strstr(r.buf[1], "/nonexistent/gw-no-such-cmd"), "stderr:\n%s", r.buf[1]);
    run_free(&r);
    const char *argv2[] = {LAUNCHER, "launch", "-n", "2", "gw-no-such-cmd-in-path", NULL};
    run(&r, NULL, argv2, 10);
    cr_assert_eq(r.status, 127, "status %d", r.status);
    cr_assert(strstr(r.buf[1], "gw-no-such-cmd-in-path: command not found"), "stderr:\n%s",
              r.buf[1]);
    run_free(&r);
}

Test(launch, usage_errors_give_2, .timeout = 30)
{
    const char *cases[][8] = {
        {LAUNCHER, "launch", "-n", "0", PROBE, "env", NULL},
        {LAUNCHER, "launch", "-n", "abc", PROBE, "env", NULL},
        {LAUNCHER, "launch", "-n", "-3", PROBE, "env", NULL},
        {LAUNCHER, "launch", PROBE, "env", NULL},
        {LAUNCHER, "launch", "-n", "2", NULL},
        {LAUNCHER, "launch", "-n", NULL},
        {LAUNCHER, "launch", "--port", "70000", "-n", "2", PROBE, NULL},
        {LAUNCHER, "launch", "--frobnicate", "-n", "2", PROBE, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct run r;
        run(&r, NULL, cases[i], 10);
        cr_assert_eq(r.status, 2, "case %zu: status %d", i, r.status);
        cr_assert(strstr(r.buf[1], "usage: gradwire launch"), "case %zu: stderr:\n%s", i, r.buf[1]);
        cr_assert_eq(r.len[0], 0, "case %zu started something:\n%s", i, r.buf[0]);
        run_free(&r);
    }
}

Test(launch, cli_version_and_help, .timeout = 30)
{
    struct run r;
    const char *v[] = {LAUNCHER, "version", NULL};
    run(&r, NULL, v, 10);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.buf[0], gw_version()), "out:\n%s", r.buf[0]);
    run_free(&r);
    const char *h[] = {LAUNCHER, "launch", "--help", NULL};
    run(&r, NULL, h, 10);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.buf[0], "usage: gradwire launch"));
    run_free(&r);
    const char *bad[] = {LAUNCHER, "frobnicate", NULL};
    run(&r, NULL, bad, 10);
    cr_assert_eq(r.status, 2);
    cr_assert(strstr(r.buf[1], "unknown command"));
    run_free(&r);
}

Test(launch, inherited_ignored_sigchld, .timeout = 30)
{
    struct run r;
    char *dir = make_dir();
    const char *argv[] = {LAUNCHER, "launch", "-n", "2", PROBE, "exit", dir, "1", "4", NULL};
    ignore_sigchld = 1;
    run(&r, NULL, argv, 15);
    cr_assert_eq(r.status, 4, "status %d, stderr:\n%s", r.status, r.buf[1]);
    assert_ranks_gone(dir, 2);
    run_free(&r);
    remove_dir(dir);
}

/* A rank that exits, even with 0, before the job formed leaves the others
 * waiting in gw_comm_init until the join timeout; the launcher fails the
 * job at once, naming it (tools/launch_formed.c). Before, it waited in
 * silence for GW_TIMEOUT_MS, here 120 s, and the finish timeout failed. */
Test(launch, rank_leaving_before_the_job_formed_fails_it, .timeout = 60)
{
    struct run r;
    char *dir = make_dir();
    char script[1024];
    snprintf(script, sizeof(script),
             "[ \"$RANK\" = 2 ] && exit 0; exec %s/tests/worker_collectives %s 1 ring float32 sum "
             "allreduce",
             GW_BUILD_DIR, dir);
    const char *env[] = {"GW_TIMEOUT_MS=120000", NULL};
    const char *argv[] = {LAUNCHER, "launch", "-n", "3", "/bin/sh", "-c", script, NULL};
    run(&r, env, argv, 40);
    cr_expect_neq(r.status, 0, "stderr:\n%s", r.buf[1]);
    cr_expect(strstr(r.buf[1], "gradwire launch: rank 2 exited (status 0) before the job formed"),
              "stderr:\n%s", r.buf[1]);
    cr_expect_lt(r.secs, 30.0, "took %.1f s", r.secs);
    run_free(&r);
    remove_dir(dir);
}

/* Ranks that never call gw_comm_init are never judged: the first exits 0
 * long before the last, and the job succeeds. */
Test(launch, programs_without_gradwire_may_end_at_any_time, .timeout = 60)
{
    struct run r;
    const char *argv[] = {LAUNCHER, "launch", "-n", "3", "/bin/sh", "-c", "sleep $RANK", NULL};
    run(&r, NULL, argv, 30);
    cr_expect_eq(r.status, 0, "stderr:\n%s", r.buf[1]);
    run_free(&r);
}
