/*
 * bootstrap_flood.c - `gradwire-bootstrap-flood`: how long a job takes to
 * form while strangers flood its root port, against the same job without
 * them, side by side in one run.
 *
 * Each run forms a job twice, once quiet and once flooded (in turns, the
 * quiet one first in odd runs), on a fresh root port of 127.0.0.1: rank 0
 * starts and listens; for the flooded job the flood process (flood.c) then
 * opens its connections and waits until they are all up; then the other
 * ranks start, and the time to form is from their start until the last
 * rank's gw_comm_init returns. The delay of a run is its flooded time less
 * its quiet time. The ranks are processes of this program calling the
 * public gw_comm_init (transport auto, so shared memory between them) with
 * a job token, and they start with a soft RLIMIT_NOFILE of --nofile (1024,
 * a login shell's usual limit): raising it is the root's business.
 *
 * A developer's tool: the flood speaks the bootstrap's wire format
 * (bootstrap_msg.h) for its wrong-token hellos, so it links the static
 * library; not installed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gradwire.h"
#include "kit.h"
#include "tools/dev/flood.h"

#define MAX_RANKS 64
#define MAX_RUNS 100
#define TOKEN "gradwire-bootstrap-flood token"

static const gw_kit_prog_t PROG = {"gradwire-bootstrap-flood",
                                   "\n(see gradwire-bootstrap-flood --help)\n"};

typedef struct opts {
    int ranks;
    int conns;
    unsigned kinds; /* bit per gw_flood_kind_t */
    int runs;
    int timeout_ms; /* GW_TIMEOUT_MS of the ranks */
    long nofile;    /* the ranks' soft RLIMIT_NOFILE; 0: as inherited */
    long hard;      /* and their hard one; 0: as inherited */
    int ready_ms;
    int sources;
    double max_delay_ms; /* < 0: no check */
    const char *logdir;
} opts_t;

typedef struct rank_result {
    int done;
    int status;
    int64_t t_ns; /* when gw_comm_init returned */
} rank_result_t;

typedef struct shared {
    volatile int release; /* the ranks may destroy their communicators */
    rank_result_t r[MAX_RANKS];
} shared_t;

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) != 0) {
        perror("gradwire-bootstrap-flood: a free port");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* The body of one rank process; never returns. */
static void rank_main(const opts_t *o, shared_t *sh, int rank, const char *root, int flooded)
{
    struct rlimit rl;
    if ((o->nofile > 0 || o->hard > 0) && getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (o->hard > 0)
            rl.rlim_max = (rlim_t)o->hard;
        if (o->nofile > 0)
            rl.rlim_cur = (rlim_t)o->nofile;
        if (rl.rlim_cur > rl.rlim_max)
            rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            perror("gradwire-bootstrap-flood: setrlimit for a rank");
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s-rank%d.log", o->logdir, flooded ? "flood" : "quiet", rank);
    setenv("GW_DEBUG_FILE", path, 1);
    if (!getenv("GW_DEBUG"))
        setenv("GW_DEBUG", "WARN", 1);
    gw_config_t cfg;
    gw_config_init(&cfg);
    cfg.rank = rank;
    cfg.size = o->ranks;
    cfg.root = root;
    cfg.job_token = TOKEN;
    cfg.timeout_ms = o->timeout_ms;
    gw_comm_t *comm = NULL;
    gw_status_t st = gw_comm_init(&cfg, &comm);
    sh->r[rank].t_ns = gw_kit_now_ns();
    sh->r[rank].status = st;
    __atomic_store_n(&sh->r[rank].done, 1, __ATOMIC_RELEASE);
    /* Stay until every rank is in: a rank that left at once would fail
     * the others' connections to it. */
    int64_t give_up = gw_kit_now_ns() + (int64_t)(o->timeout_ms + 10000) * 1000000;
    while (st == GW_OK && !__atomic_load_n(&sh->release, __ATOMIC_ACQUIRE) &&
           gw_kit_now_ns() < give_up)
        usleep(1000);
    gw_comm_destroy(comm);
    _exit(st == GW_OK ? 0 : 1);
}

static pid_t spawn_rank(const opts_t *o, shared_t *sh, int rank, const char *root, int flooded)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("gradwire-bootstrap-flood: fork");
        exit(1);
    }
    if (pid == 0)
        rank_main(o, sh, rank, root, flooded);
    return pid;
}

/* Until rank 0 accepts connections (the probe is a stranger to it too, in
 * both jobs alike). */
static int wait_listening(int port, int timeout_ms)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int64_t give_up = gw_kit_now_ns() + (int64_t)timeout_ms * 1000000;
    while (gw_kit_now_ns() < give_up) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        int r = connect(fd, (struct sockaddr *)&a, sizeof(a));
        close(fd);
        if (r == 0)
            return 0;
        usleep(2000);
    }
    return -1;
}

typedef struct outcome {
    int formed;        /* every rank's gw_comm_init returned GW_OK */
    double ms;         /* from the start of ranks 1.. to the last return */
    gw_status_t worst; /* the first failure, when not formed */
    gw_flood_stats_t ready, total;
} outcome_t;

/* Form one job, flooded with `kind` (or quiet when kind < 0). */
static int form_job(const opts_t *o, int kind, outcome_t *out)
{
    memset(out, 0, sizeof(*out));
    shared_t *sh =
        mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("gradwire-bootstrap-flood: mmap");
        return -1;
    }
    memset(sh, 0, sizeof(*sh));
    int port = free_port();
    char root[64];
    snprintf(root, sizeof(root), "127.0.0.1:%d", port);
    pid_t pids[MAX_RANKS];
    int flooded = kind >= 0;
    pids[0] = spawn_rank(o, sh, 0, root, flooded);
    int rc = 0;
    gw_flood_t fl = {0};
    int flooding = 0;
    if (wait_listening(port, 10000) != 0) {
        fprintf(stderr, "gradwire-bootstrap-flood: rank 0 does not listen on %s\n", root);
        rc = -1;
        goto out_reap;
    }
    if (flooded) {
        gw_flood_opts_t fo = {.host = "127.0.0.1",
                              .port = port,
                              .conns = o->conns,
                              .kind = (gw_flood_kind_t)kind,
                              .job_size = o->ranks,
                              .sources = o->sources};
        if (gw_flood_start(&fl, &fo, o->ready_ms, &out->ready) != 0) {
            rc = -1;
            goto out_reap;
        }
        flooding = 1;
    }
    int64_t t0 = gw_kit_now_ns();
    for (int r = 1; r < o->ranks; r++)
        pids[r] = spawn_rank(o, sh, r, root, flooded);
    int64_t give_up = t0 + (int64_t)(o->timeout_ms + 5000) * 1000000;
    int done = 0;
    while (done < o->ranks && gw_kit_now_ns() < give_up) {
        done = 0;
        for (int r = 0; r < o->ranks; r++)
            done += __atomic_load_n(&sh->r[r].done, __ATOMIC_ACQUIRE);
        if (done < o->ranks)
            usleep(500);
    }
    out->formed = done == o->ranks;
    out->worst = out->formed ? GW_OK : GW_ERR_TIMEOUT;
    int64_t last = t0;
    for (int r = 0; r < o->ranks; r++) {
        if (sh->r[r].done && sh->r[r].status != GW_OK && out->formed) {
            out->formed = 0;
            out->worst = (gw_status_t)sh->r[r].status;
        }
        if (sh->r[r].done && sh->r[r].t_ns > last)
            last = sh->r[r].t_ns;
    }
    out->ms = (double)(last - t0) / 1e6;
    if (flooding) {
        flooding = 0;
        if (gw_flood_stop(&fl, &out->total) != 0)
            fprintf(stderr, "gradwire-bootstrap-flood: the flood process failed\n");
    }

out_reap:
    if (flooding)
        gw_flood_stop(&fl, NULL);
    __atomic_store_n(&sh->release, 1, __ATOMIC_RELEASE);
    int nspawned = rc == 0 ? o->ranks : 1;
    int64_t reap_by = gw_kit_now_ns() + 10000000000LL;
    for (int r = 0; r < nspawned; r++) {
        for (;;) {
            pid_t w = waitpid(pids[r], NULL, WNOHANG);
            if (w == pids[r] || (w < 0 && errno != EINTR))
                break;
            if (gw_kit_now_ns() > reap_by)
                kill(pids[r], SIGKILL);
            usleep(1000);
        }
    }
    munmap(sh, sizeof(*sh));
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gradwire-bootstrap-flood [--ranks N] [--conns N] [--kind LIST] [--runs N]\n"
            "                                [--timeout-ms MS] [--nofile N] [--hard-nofile N]\n"
            "                                [--sources N] [--ready-ms MS]\n"
            "                                [--max-delay-ms MS] [--log-dir DIR]\n"
            "\n"
            "  --ranks N        ranks of the job, 2..%d (default 4)\n"
            "  --conns N        strangers held on the root port at once (default 10000)\n"
            "  --kind LIST      comma-separated: idle, garbage, wrongtoken, churn\n"
            "                   (default all four)\n"
            "  --runs N         quiet and flooded jobs per kind, 1..%d (default 5)\n"
            "  --timeout-ms MS  GW_TIMEOUT_MS of the ranks (default 20000)\n"
            "  --nofile N       the ranks' soft RLIMIT_NOFILE (default 1024; 0: inherited)\n"
            "  --hard-nofile N  the ranks' hard RLIMIT_NOFILE (default 0: inherited)\n"
            "  --sources N      loopback source addresses of the flood, 1..64 (default 8)\n"
            "  --ready-ms MS    wait at most this long for the flood to be up (default 15000)\n"
            "  --max-delay-ms MS  exit 1 when any run's delay exceeds MS\n"
            "  --log-dir DIR    keep the ranks' logs there (default: a temporary\n"
            "                   directory, removed)\n"
            "\n"
            "Prints per kind: runs formed, the median and largest time to form quiet and\n"
            "flooded (from the start of ranks 1.. until the last gw_comm_init returns),\n"
            "the delay (flooded less quiet, per run: median and largest) and what the\n"
            "flood did (connections completed, ended by the root). Exits 1 when a\n"
            "flooded job did not form, or with --max-delay-ms when a delay exceeds it.\n",
            MAX_RANKS, MAX_RUNS);
}

static int parse_kinds(const char *s, unsigned *out)
{
    char buf[128];
    if (!s || !*s || strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    unsigned bits = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        gw_flood_kind_t k;
        if (gw_flood_kind_parse(tok, &k) != 0)
            return -1;
        bits |= 1u << k;
    }
    *out = bits;
    return bits ? 0 : -1;
}

static int parse_args(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {{"ranks", required_argument, NULL, 'n'},
                                             {"conns", required_argument, NULL, 'c'},
                                             {"kind", required_argument, NULL, 'k'},
                                             {"runs", required_argument, NULL, 'r'},
                                             {"timeout-ms", required_argument, NULL, 't'},
                                             {"nofile", required_argument, NULL, 'f'},
                                             {"hard-nofile", required_argument, NULL, 'H'},
                                             {"sources", required_argument, NULL, 's'},
                                             {"ready-ms", required_argument, NULL, 'R'},
                                             {"max-delay-ms", required_argument, NULL, 'm'},
                                             {"log-dir", required_argument, NULL, 'l'},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};
    gw_kit_getopt_begin();
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "+:n:c:k:r:t:f:H:s:R:m:l:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (gw_kit_parse_long(optarg, 2, MAX_RANKS, &v) != 0)
                return gw_kit_usage_error(&PROG, "--ranks wants 2..%d, not '%s'", MAX_RANKS,
                                          optarg);
            o->ranks = (int)v;
            break;
        case 'c':
            if (gw_kit_parse_long(optarg, 1, 1000000, &v) != 0)
                return gw_kit_usage_error(&PROG, "--conns wants 1..1000000, not '%s'", optarg);
            o->conns = (int)v;
            break;
        case 'k':
            if (parse_kinds(optarg, &o->kinds) != 0)
                return gw_kit_usage_error(&PROG,
                                          "--kind wants a list of idle, garbage, wrongtoken, "
                                          "churn, not '%s'",
                                          optarg);
            break;
        case 'r':
            if (gw_kit_parse_long(optarg, 1, MAX_RUNS, &v) != 0)
                return gw_kit_usage_error(&PROG, "--runs wants 1..%d, not '%s'", MAX_RUNS, optarg);
            o->runs = (int)v;
            break;
        case 't':
            if (gw_kit_parse_long(optarg, 100, 3600000, &v) != 0)
                return gw_kit_usage_error(&PROG, "--timeout-ms wants 100..3600000, not '%s'",
                                          optarg);
            o->timeout_ms = (int)v;
            break;
        case 'f':
        case 'H':
            if (gw_kit_parse_long(optarg, 0, 1L << 30, &v) != 0 || (v > 0 && v < 64))
                return gw_kit_usage_error(&PROG, "%s wants 0 or 64..2^30, not '%s'",
                                          c == 'f' ? "--nofile" : "--hard-nofile", optarg);
            *(c == 'f' ? &o->nofile : &o->hard) = v;
            break;
        case 's':
            if (gw_kit_parse_long(optarg, 1, 64, &v) != 0)
                return gw_kit_usage_error(&PROG, "--sources wants 1..64, not '%s'", optarg);
            o->sources = (int)v;
            break;
        case 'R':
            if (gw_kit_parse_long(optarg, 100, 600000, &v) != 0)
                return gw_kit_usage_error(&PROG, "--ready-ms wants 100..600000, not '%s'", optarg);
            o->ready_ms = (int)v;
            break;
        case 'm':
            if (gw_kit_parse_double(optarg, 0, 1e9, &o->max_delay_ms) != 0)
                return gw_kit_usage_error(&PROG, "--max-delay-ms wants a number of ms, not '%s'",
                                          optarg);
            break;
        case 'l':
            o->logdir = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            return gw_kit_getopt_error(&PROG, c, argv);
        }
    }
    int r = gw_kit_no_operands(&PROG, argc, argv);
    return r >= 0 ? r : 0;
}

static double max_of(const double *v, int n)
{
    double m = v[0];
    for (int i = 1; i < n; i++)
        if (v[i] > m)
            m = v[i];
    return m;
}

static double median_of(double *v, int n)
{
    gw_kit_sort(v, (size_t)n);
    return gw_kit_median_sorted(v, (size_t)n);
}

int main(int argc, char **argv)
{
    opts_t o = {.ranks = 4,
                .conns = 10000,
                .kinds = (1u << GW_FLOOD_KINDS) - 1,
                .runs = 5,
                .timeout_ms = 20000,
                .nofile = 1024,
                .ready_ms = 15000,
                .sources = 8,
                .max_delay_ms = -1};
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc;
    char tmp[] = "/tmp/gw-flood-XXXXXX";
    int own_dir = !o.logdir;
    if (own_dir && !(o.logdir = mkdtemp(tmp))) {
        perror("gradwire-bootstrap-flood: mkdtemp");
        return 1;
    }
    if (!own_dir && mkdir(o.logdir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "gradwire-bootstrap-flood: cannot make %s: %s\n", o.logdir,
                strerror(errno));
        return 1;
    }
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    printf("# gradwire-bootstrap-flood: %d ranks, %d strangers, GW_TIMEOUT_MS=%d, %d runs; ranks' "
           "RLIMIT_NOFILE soft %ld, hard %ld\n",
           o.ranks, o.conns, o.timeout_ms, o.runs, o.nofile ? o.nofile : (long)rl.rlim_cur,
           o.hard ? o.hard : (long)rl.rlim_max);
    printf("%-10s %6s %6s %9s %9s %9s %9s %9s %9s %10s %10s\n", "kind", "conns", "formed",
           "quiet_med", "quiet_max", "flood_med", "flood_max", "delay_med", "delay_max",
           "connected", "ended");
    fflush(stdout);
    int failed = 0;
    for (int k = 0; k < GW_FLOOD_KINDS; k++) {
        if (!(o.kinds & (1u << k)))
            continue;
        double quiet[MAX_RUNS], flood[MAX_RUNS], delay[MAX_RUNS];
        int formed = 0, quiet_formed = 0;
        long long connected = 0, ended = 0;
        int up_min = -1;
        for (int run = 0; run < o.runs; run++) {
            outcome_t q, f;
            int quiet_first = run % 2 == 0;
            if ((quiet_first && form_job(&o, -1, &q) != 0) || form_job(&o, k, &f) != 0 ||
                (!quiet_first && form_job(&o, -1, &q) != 0))
                return 1;
            quiet[run] = q.ms;
            flood[run] = f.ms;
            delay[run] = f.ms - q.ms;
            quiet_formed += q.formed;
            formed += f.formed;
            connected += f.total.connected;
            ended += f.total.ended;
            if (up_min < 0 || f.ready.connected < up_min)
                up_min = (int)f.ready.connected;
            if (!f.formed)
                fprintf(stderr, "# %s run %d: the flooded job did not form (%s after %.0f ms)\n",
                        gw_flood_kind_name((gw_flood_kind_t)k), run + 1, gw_status_name(f.worst),
                        f.ms);
            if (!q.formed)
                fprintf(stderr, "# %s run %d: the quiet job did not form (%s)\n",
                        gw_flood_kind_name((gw_flood_kind_t)k), run + 1, gw_status_name(q.worst));
            if (o.max_delay_ms >= 0 && delay[run] > o.max_delay_ms)
                failed = 1;
        }
        double fmax = max_of(flood, o.runs), qmax = max_of(quiet, o.runs),
               dmax = max_of(delay, o.runs);
        double qmed = median_of(quiet, o.runs), fmed = median_of(flood, o.runs),
               dmed = median_of(delay, o.runs);
        char fm[16];
        snprintf(fm, sizeof(fm), "%d/%d", formed, o.runs);
        printf("%-10s %6d %6s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %10lld %10lld\n",
               gw_flood_kind_name((gw_flood_kind_t)k), o.conns, fm, qmed, qmax, fmed, fmax, dmed,
               dmax, connected, ended);
        if (up_min < o.conns)
            printf("# %s: the flood had only %d of %d connections up when the ranks started\n",
                   gw_flood_kind_name((gw_flood_kind_t)k), up_min, o.conns);
        fflush(stdout);
        if (formed < o.runs || quiet_formed < o.runs)
            failed = 1;
    }
    if (own_dir) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o.logdir);
        if (!failed && system(cmd) != 0)
            fprintf(stderr, "gradwire-bootstrap-flood: could not remove %s\n", o.logdir);
        if (failed)
            fprintf(stderr, "# the ranks' logs are in %s\n", o.logdir);
    }
    return failed;
}
