/*
 * launch_ssh.c - `gradwire launch --hostfile FILE`: the ranks of a job on
 * real machines, each started over ssh, as horovodrun and deepspeed do.
 *
 * The hostfile lists one host per line, "HOST", "HOST slots=N" or
 * "HOST:N" (N ranks on it, default 1); '#' starts a comment. Ranks fill the
 * hosts in order, block by block: host 0 takes ranks 0..slots0-1, and so
 * on; -n N runs the first N slots (at most all of them), without -n every
 * slot runs. Rank 0's host is the bootstrap root; its two rendezvous ports
 * (MASTER_PORT, and GW_ROOT's above it) are checked free when that host is
 * this one, else drawn at random from 20000-59999 (--port chooses them).
 *
 * Each rank is one local ssh process (ssh -T -o BatchMode=yes HOST, or the
 * --ssh command) running one shell command line there: change to the
 * launcher's directory when it exists, read the job token from the first
 * line of its standard input (never on a command line, where `ps` on that
 * host would show it), then run the command with the rank's variables
 * (RANK, LOCAL_RANK, GROUP_RANK, the sizes, MASTER_ADDR/PORT, GW_ROOT),
 * every GW_* variable of the launcher's environment and the sanitizers'
 * options, and wait for it. A watcher there reads the rest of the standard
 * input: when the ssh session ends (the launcher stopped the rank, or died)
 * it gets end of file and sends the command SIGTERM, then SIGKILL 2 s
 * later, so that no rank outlives its launcher on a remote host. The
 * command's exit status comes back as ssh's (a rank killed by signal N
 * there exits 128+N here). Everything else is the local launcher's: output
 * relayed by line with the rank's prefix, the first failure stopping the
 * others, --timeout.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "kit.h"
#include "launch.h"

extern char **environ;

#define WORDS_MAX 64

/* The hostfile's bytes, parsed by launch_hostfile.c. */
static int parse_hostfile(const char *path, struct gw_launch_remote *rm)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "gradwire launch: cannot read the hostfile %s: %s\n", path,
                strerror(errno));
        return -1;
    }
    /* A hostfile is small: 1 MiB is far more than 1024 hosts need. */
    size_t cap = (size_t)1 << 20, len;
    char *text = malloc(cap + 1);
    if (!text) {
        fclose(f);
        fprintf(stderr, "gradwire launch: out of memory\n");
        return -1;
    }
    len = fread(text, 1, cap + 1, f);
    int failed = ferror(f);
    fclose(f);
    char err[512];
    int rc = -1;
    if (failed)
        fprintf(stderr, "gradwire launch: reading the hostfile %s failed\n", path);
    else if (len > cap)
        fprintf(stderr, "gradwire launch: the hostfile %s is larger than %zu bytes\n", path, cap);
    else if ((rc = gw_launch_hostfile_parse(text, len, path, rm, err, sizeof(err))) != 0)
        fprintf(stderr, "gradwire launch: %s\n", err);
    free(text);
    return rc;
}

/* Split the --ssh command on blanks (no quoting: a program and options). */
static int split_ssh(const char *cmd, struct gw_launch_remote *rm)
{
    rm->ssh_buf = strdup(cmd ? cmd : "ssh -T -o BatchMode=yes");
    if (!rm->ssh_buf)
        return -1;
    int n = 0;
    for (char *w = strtok(rm->ssh_buf, " \t"); w; w = strtok(NULL, " \t")) {
        if (n == WORDS_MAX - 1) {
            fprintf(stderr, "gradwire launch: --ssh has more than %d words\n", WORDS_MAX - 1);
            return -1;
        }
        rm->ssh_argv[n++] = w;
    }
    if (n == 0) {
        fprintf(stderr, "gradwire launch: --ssh is empty\n");
        return -1;
    }
    rm->ssh_argv[n] = NULL;
    rm->ssh_argc = n;
    return 0;
}

int gw_launch_ssh_open(struct gw_launch_opts *o, struct gw_launch_remote *rm)
{
    memset(rm, 0, sizeof(*rm));
    rm->names = calloc(GW_LAUNCH_HOSTS_MAX, sizeof(*rm->names));
    rm->slots = calloc(GW_LAUNCH_HOSTS_MAX, sizeof(*rm->slots));
    rm->ssh_argv = calloc(WORDS_MAX, sizeof(*rm->ssh_argv));
    if (!rm->names || !rm->slots || !rm->ssh_argv) {
        fprintf(stderr, "gradwire launch: out of memory\n");
        return -1;
    }
    if (parse_hostfile(o->hostfile, rm) != 0 || split_ssh(o->ssh, rm) != 0)
        return -1;
    int total = 0;
    for (int h = 0; h < rm->nhosts; h++)
        total += rm->slots[h];
    if (total > GW_LAUNCH_MAX_RANKS) {
        fprintf(stderr, "gradwire launch: the hostfile has %d slots, more than %d ranks\n", total,
                GW_LAUNCH_MAX_RANKS);
        return -1;
    }
    if (o->nranks == 0)
        o->nranks = total;
    if (o->nranks > total) {
        fprintf(stderr, "gradwire launch: -n %d, but the hostfile %s has %d slot%s\n", o->nranks,
                o->hostfile, total, total == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

void gw_launch_ssh_close(struct gw_launch_remote *rm)
{
    for (int h = 0; rm->names && h < rm->nhosts; h++)
        free(rm->names[h]);
    free(rm->names);
    free(rm->slots);
    free(rm->ssh_argv);
    free(rm->ssh_buf);
    memset(rm, 0, sizeof(*rm));
}

void gw_launch_ssh_place(const struct gw_launch_remote *rm, int r, int *host, int *local,
                         int *nlocal)
{
    int first = 0;
    for (int h = 0; h < rm->nhosts; h++) {
        if (r < first + rm->slots[h]) {
            *host = h;
            *local = r - first;
            *nlocal = rm->slots[h];
            return;
        }
        first += rm->slots[h];
    }
    *host = rm->nhosts - 1;
    *local = 0;
    *nlocal = 1;
}

/* Whether host is an address of this machine (a port binds on it). */
static int is_here(const char *host)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV}, *res = NULL;
    if (getaddrinfo(host, "0", &hints, &res) != 0)
        return 0;
    int here = 0;
    for (struct addrinfo *ai = res; ai && !here; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && bind(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            here = 1;
        if (fd >= 0)
            close(fd);
    }
    freeaddrinfo(res);
    return here;
}

int gw_launch_ssh_root(const struct gw_launch_opts *o, int *port, int *root_port)
{
    /* Free here means free there when rank 0's host is this one. */
    if (o->port || is_here(o->host))
        return gw_launch_ports(o->host, o->port, port, root_port);
    uint16_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        r = (uint16_t)getpid();
    *port = 20000 + r % 40000;
    *root_port = *port + 1;
    fprintf(stderr,
            "gradwire launch: rank 0's host %s is not this one: rendezvous ports %d and %d drawn "
            "at random (--port P chooses them)\n",
            o->host, *port, *root_port);
    return 0;
}

/* ---- the token on ssh's stdin ---- */

int gw_launch_ssh_token_pipe(int tok[2])
{
    tok[0] = tok[1] = -1;
    if (pipe2(tok, O_CLOEXEC) != 0)
        return -1;
    const char *token = getenv("GW_JOB_TOKEN");
    char line[600];
    int n = snprintf(line, sizeof(line), "%s\n", token ? token : "");
    if (n < 0 || (size_t)n >= sizeof(line) || write(tok[1], line, (size_t)n) != n) {
        close(tok[0]);
        close(tok[1]);
        errno = EINVAL;
        return -1;
    }
    return 0;
}

/* ---- the remote command line ---- */

struct line {
    char *buf;
    size_t len, cap;
    int failed;
};

static void put(struct line *l, const char *s, size_t n)
{
    if (l->failed)
        return;
    if (l->len + n + 1 > l->cap) {
        size_t cap = (l->len + n + 1) * 2;
        char *b = realloc(l->buf, cap);
        if (!b) {
            l->failed = 1;
            return;
        }
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    l->buf[l->len] = '\0';
}

static void put_str(struct line *l, const char *s) { put(l, s, strlen(s)); }

/* One word, single-quoted for a POSIX shell. */
static void put_word(struct line *l, const char *w)
{
    put_str(l, " '");
    for (const char *c = w; *c; c++) {
        if (*c == '\'')
            put_str(l, "'\\''");
        else
            put(l, c, 1);
    }
    put_str(l, "'");
}

static int travels(const char *entry)
{
    static const char *const names[] = {
        "RANK=",        "LOCAL_RANK=",  "GROUP_RANK=",   "WORLD_SIZE=",    "LOCAL_WORLD_SIZE=",
        "MASTER_ADDR=", "MASTER_PORT=", "ASAN_OPTIONS=", "UBSAN_OPTIONS=", "LSAN_OPTIONS=",
        "TSAN_OPTIONS="};
    /* The token travels on stdin; a token file names a file of this
     * machine, which the remote host has not. */
    if (strncmp(entry, "GW_", 3) == 0)
        return strncmp(entry, "GW_JOB_TOKEN=", 13) != 0 &&
               strncmp(entry, "GW_JOB_TOKEN_FILE=", 18) != 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(entry, names[i], strlen(names[i])) == 0)
            return 1;
    return 0;
}

void gw_launch_ssh_exec(const struct gw_launch_opts *o, const struct gw_launch_remote *rm, int r)
{
    int host, local, nlocal;
    gw_launch_ssh_place(rm, r, &host, &local, &nlocal);
    char num[16];
    snprintf(num, sizeof(num), "%d", local);
    setenv("LOCAL_RANK", num, 1);
    snprintf(num, sizeof(num), "%d", nlocal);
    setenv("LOCAL_WORLD_SIZE", num, 1);
    snprintf(num, sizeof(num), "%d", host);
    setenv("GROUP_RANK", num, 1);

    struct line l = {0};
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd))) {
        put_str(&l, "cd");
        put_word(&l, cwd);
        put_str(&l, " 2>/dev/null;");
    }
    put_str(&l, " exec 3<&0; IFS= read -r GW_JOB_TOKEN <&3 || exit 111; export GW_JOB_TOKEN;"
                " [ -n \"$GW_JOB_TOKEN\" ] || unset GW_JOB_TOKEN; env");
    for (char **e = environ; *e; e++)
        if (travels(*e))
            put_word(&l, *e);
    for (char **w = o->cmd; *w; w++)
        put_word(&l, *w);
    /* A background list's stdin is /dev/null unless redirected: the
     * watcher reads the session's through a copy on fd 3. */
    put_str(&l, " </dev/null 3<&- & p=$!;"
                " ( cat <&3 >/dev/null; kill -TERM $p; sleep 2; kill -KILL $p ) >/dev/null 2>&1 &"
                " w=$!; exec 3<&-; wait $p; s=$?; kill $w 2>/dev/null; exit $s");
    if (l.failed) {
        dprintf(STDERR_FILENO, "gradwire launch: out of memory\n");
        _exit(1);
    }
    char *argv[WORDS_MAX + 4];
    int a = 0;
    for (int i = 0; i < rm->ssh_argc; i++)
        argv[a++] = rm->ssh_argv[i];
    argv[a++] = rm->names[host];
    argv[a++] = l.buf;
    argv[a] = NULL;
    execvp(argv[0], argv);
    int e = errno;
    dprintf(STDERR_FILENO, "gradwire launch: cannot run %s: %s\n", argv[0], strerror(e));
    _exit(e == ENOENT ? GW_LAUNCH_EXIT_NOTFOUND : GW_LAUNCH_EXIT_NOEXEC);
}
