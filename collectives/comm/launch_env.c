/*
 * launch_env.c - the communicator's configuration from what the launcher
 * put in the environment (gw_comm_init_env; contract in launch_env.h).
 *
 * Rank and size: GW_RANK/GW_SIZE, torchrun's RANK/WORLD_SIZE, Open MPI's,
 * MPICH's and Slurm's, the first convention present (or PMIx, which gives
 * everything). The bootstrap root, in this order:
 *   1. GW_ROOT (read by gw_comm_init itself);
 *   2. PMIx, under mpirun or srun --mpi=pmix (launch_pmix.c): rank 0
 *      publishes its address, and a job token it drew, to the job;
 *   3. torchrun's MASTER_ADDR and MASTER_PORT; under torchrun's agent store
 *      (TORCHELASTIC_USE_AGENT_STORE=True: the agent's TCPStore is on
 *      MASTER_PORT), GW_ROOT_PORT or MASTER_PORT + 1 instead;
 *   4. Slurm without PMIx: the first host of SLURM_STEP_NODELIST (else
 *      SLURM_JOB_NODELIST), where srun's default block distribution puts
 *      rank 0 (node 0 by SLURM_NODEID: the node's Slurm name need not be
 *      its host name, and the others reach it by that name), on GW_ROOT_PORT or a port derived from the job and step ids
 *      (10000 + (31 job + step) mod 20000: below Linux's ephemeral ports,
 *      and different for the steps of a job and for jobs that share a
 *      first host).
 * The job token is a secret of the job, never derived from public ids or
 * names: PMIx's (rank 0's, shared through the job's PMIx servers), or
 * GW_JOB_TOKEN, or the first line of GW_JOB_TOKEN_FILE, a regular file of
 * this user that nobody else may read (mode 0600 or stricter). Without any,
 * the job runs unauthenticated, and rank 0's bootstrap says so at WARN.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/comm/launch_env.h"
#include "common/env.h"
#include "common/file_read.h"
#include "common/hostlist.h"

/* Rank and size from the first launcher convention present. */
static gw_status_t env_rank_size(const gw_logger_t *lg, int *rank, int *size)
{
    static const gw_env_id_t ids[][2] = {
        {GW_ENV_GW_RANK, GW_ENV_GW_SIZE},           {GW_ENV_RANK, GW_ENV_WORLD_SIZE},
        {GW_ENV_OMPI_RANK, GW_ENV_OMPI_SIZE},       {GW_ENV_PMI_RANK, GW_ENV_PMI_SIZE},
        {GW_ENV_SLURM_PROCID, GW_ENV_SLURM_NTASKS},
    };
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        const char *pairs[2] = {gw__env_var(ids[i][0])->name, gw__env_var(ids[i][1])->name};
        /* The first convention whose rank variable is set is the one in use:
         * set but empty or malformed is an error, not a reason to look at
         * the next launcher's variables. */
        if (!getenv(pairs[0]))
            continue;
        long rv, sv;
        if (gw__env_int(lg, ids[i][0], &rv) != GW_OK)
            return GW_ERR_CONFIG;
        if (!getenv(pairs[1])) {
            GW_ERROR(lg, "init", "%s is set but %s, the number of ranks, is not", pairs[0],
                     pairs[1]);
            return GW_ERR_CONFIG;
        }
        if (gw__env_int(lg, ids[i][1], &sv) != GW_OK)
            return GW_ERR_CONFIG;
        if (rv >= sv) {
            GW_ERROR(lg, "init", "%s=%ld is not below %s=%ld", pairs[0], rv, pairs[1], sv);
            return GW_ERR_CONFIG;
        }
        *rank = (int)rv;
        *size = (int)sv;
        return GW_OK;
    }
    GW_ERROR(lg, "init",
             "no rank in the environment: set GW_RANK/GW_SIZE or RANK/WORLD_SIZE, "
             "or start the job with gradwire launch, mpirun or srun");
    return GW_ERR_CONFIG;
}

/* GW_ROOT from torchrun's MASTER_ADDR and MASTER_PORT, when both are set
 * (*root stays NULL when MASTER_ADDR is not). */
static gw_status_t torchrun_root(const gw_logger_t *lg, char *buf, size_t cap, const char **root)
{
    const char *addr;
    long p;
    if (gw__env_str(lg, GW_ENV_MASTER_ADDR, &addr) != GW_OK)
        return GW_ERR_CONFIG;
    if (!addr)
        return GW_OK;
    if (!getenv("MASTER_PORT")) {
        GW_ERROR(lg, "init", "MASTER_ADDR is set but MASTER_PORT is not");
        return GW_ERR_CONFIG;
    }
    if (gw__env_int(lg, GW_ENV_MASTER_PORT, &p) != GW_OK)
        return GW_ERR_CONFIG;
    /* torchrun's agent may hold its own TCPStore on MASTER_PORT and hand it
     * to the workers (TORCHELASTIC_USE_AGENT_STORE=True, the default of
     * torchrun's c10d rendezvous): the port is taken, so gradwire's root
     * goes to GW_ROOT_PORT, else the port above it (what `gradwire launch`
     * gives too). */
    int agent = 0;
    if (getenv("TORCHELASTIC_USE_AGENT_STORE") &&
        gw__env_choice(lg, GW_ENV_TORCHELASTIC_USE_AGENT_STORE, &agent) != GW_OK)
        return GW_ERR_CONFIG;
    if (agent % 2 == 1) {
        long own;
        if (getenv("GW_ROOT_PORT")) {
            if (gw__env_int(lg, GW_ENV_ROOT_PORT, &own) != GW_OK)
                return GW_ERR_CONFIG;
        } else if (p == 65535) {
            GW_ERROR(lg, "init",
                     "torchrun's agent holds its store on MASTER_PORT=65535 "
                     "(TORCHELASTIC_USE_AGENT_STORE) and no port is above it: set GW_ROOT_PORT");
            return GW_ERR_CONFIG;
        } else {
            own = p + 1;
        }
        if (own == p) {
            GW_ERROR(lg, "init",
                     "GW_ROOT_PORT=%ld is MASTER_PORT, where torchrun's agent holds its store "
                     "(TORCHELASTIC_USE_AGENT_STORE): choose another port",
                     own);
            return GW_ERR_CONFIG;
        }
        GW_INFO(lg, "init",
                "torchrun's agent holds its store on MASTER_PORT=%ld: the bootstrap root takes "
                "port %ld (%s)",
                p, own, getenv("GW_ROOT_PORT") ? "GW_ROOT_PORT" : "MASTER_PORT + 1");
        p = own;
    }
    for (const char *c = addr; *c; c++) {
        if (*c == ' ' || *c == '\t' || *c == '[' || *c == ']') {
            GW_ERROR(lg, "init", "MASTER_ADDR=\"%s\" is not a host name or address", addr);
            return GW_ERR_CONFIG;
        }
    }
    int colon = strchr(addr, ':') != NULL; /* an IPv6 literal needs brackets */
    if (snprintf(buf, cap, colon ? "[%s]:%ld" : "%s:%ld", addr, p) >= (int)cap) {
        GW_ERROR(lg, "init", "MASTER_ADDR=\"%s\" is too long", addr);
        return GW_ERR_CONFIG;
    }
    *root = buf;
    return GW_OK;
}

/* Rank 0 listens on the first node of the step, where the others look for
 * it. Slurm says which node a task runs on by its index, SLURM_NODEID (0:
 * the first node of SLURM_STEP_NODELIST), so that is what is checked: a
 * node's Slurm name (NodeName) need not be its host name (NodeName=localhost
 * on host vm, or names that only slurm.conf and /etc/hosts know), and
 * comparing host names refused such a node although it was the first.
 * Only without SLURM_NODEID (a hand-made environment) do the names decide:
 * the host name must be the first host's. */
static gw_status_t slurm_rank0_first(const gw_logger_t *lg, const char *first, const char *list)
{
    if (getenv("SLURM_NODEID")) {
        long node;
        if (gw__env_int(lg, GW_ENV_SLURM_NODEID, &node) != GW_OK)
            return GW_ERR_CONFIG;
        if (node == 0)
            return GW_OK;
        GW_ERROR(lg, "init",
                 "rank 0 runs on node %ld of the step (SLURM_NODEID), not on node 0 (%s, the "
                 "first host of %s), where the others look for it: use srun's default (block) "
                 "distribution or set GW_ROOT",
                 node, first, list);
        return GW_ERR_CONFIG;
    }
    char me[256] = "";
    gethostname(me, sizeof(me) - 1);
    size_t a = strcspn(me, "."), b = strcspn(first, ".");
    if (a == b && strncmp(me, first, a) == 0)
        return GW_OK;
    GW_ERROR(lg, "init",
             "rank 0 runs on %s, not on %s, the first host of %s, where the others look "
             "for it: use srun's default (block) distribution or set GW_ROOT",
             me, first, list);
    return GW_ERR_CONFIG;
}

/* GW_ROOT from Slurm's node list (step 4 above); *root stays NULL when
 * this is no Slurm job. */
static gw_status_t slurm_root(const gw_logger_t *lg, int rank, char *buf, size_t cap,
                              const char **root)
{
    gw_env_id_t id = getenv("SLURM_STEP_NODELIST")  ? GW_ENV_SLURM_STEP_NODELIST
                     : getenv("SLURM_JOB_NODELIST") ? GW_ENV_SLURM_JOB_NODELIST
                                                    : GW_ENV_COUNT;
    if (id == GW_ENV_COUNT || !getenv("SLURM_PROCID"))
        return GW_OK;
    const char *name = gw__env_var(id)->name;
    const char *list;
    if (gw__env_str(lg, id, &list) != GW_OK)
        return GW_ERR_CONFIG;
    gw_hostlist_t hosts;
    char err[256];
    if (gw__hostlist_expand(list, &hosts, err, sizeof(err)) != GW_OK || hosts.count == 0) {
        GW_ERROR(lg, "init", "%s=\"%s\": %s", name, list, hosts.count ? err : "no host");
        gw__hostlist_free(&hosts);
        return GW_ERR_CONFIG;
    }
    long port;
    gw_status_t st = GW_OK;
    if (getenv("GW_ROOT_PORT")) {
        st = gw__env_int(lg, GW_ENV_ROOT_PORT, &port);
    } else {
        long job, step = 0;
        st = gw__env_int(lg, GW_ENV_SLURM_JOB_ID, &job);
        if (st == GW_OK && job < 0) {
            GW_ERROR(lg, "init", "%s is set but SLURM_JOB_ID is not: set GW_ROOT_PORT", name);
            st = GW_ERR_CONFIG;
        }
        if (st == GW_OK && getenv("SLURM_STEP_ID"))
            st = gw__env_int(lg, GW_ENV_SLURM_STEP_ID, &step);
        port = 10000 + (31 * job + step) % 20000;
    }
    if (st == GW_OK && rank == 0)
        st = slurm_rank0_first(lg, hosts.names[0], name);
    if (st == GW_OK) {
        const char *h = hosts.names[0];
        if (snprintf(buf, cap, strchr(h, ':') ? "[%s]:%ld" : "%s:%ld", h, port) >= (int)cap) {
            GW_ERROR(lg, "init", "%s's first host %s is too long", name, h);
            st = GW_ERR_CONFIG;
        } else {
            *root = buf;
            GW_INFO(lg, "init", "bootstrap root %s: the first host of %s, port %s", buf, name,
                    getenv("GW_ROOT_PORT") ? "GW_ROOT_PORT" : "from SLURM_JOB_ID/SLURM_STEP_ID");
        }
    }
    gw__hostlist_free(&hosts);
    return st;
}

gw_status_t gw__launch_env_token_file(const gw_logger_t *lg, char *buf, size_t cap,
                                      const char **token)
{
    const char *path;
    if (gw__env_str(lg, GW_ENV_JOB_TOKEN_FILE, &path) != GW_OK)
        return GW_ERR_CONFIG;
    if (!path)
        return GW_OK;
    /* A token file holds one line; more than a page is not a token file. */
    char what[4096 + 32], *text;
    size_t n;
    struct stat sb;
    snprintf(what, sizeof(what), "GW_JOB_TOKEN_FILE=%s", path);
    gw_status_t st = gw__file_read(lg, "init", what, path, 4096, GW_FILE_NOFOLLOW, &text, &n, &sb);
    if (st != GW_OK)
        return st;
    const char *bad = sb.st_uid != geteuid()    ? "belongs to another user"
                      : (sb.st_mode & 077) != 0 ? "may be read by others (chmod 600 it)"
                                                : NULL;
    if (!bad) {
        text[strcspn(text, "\r\n")] = '\0';
        if (strlen(text) < 16)
            bad = "holds less than 16 characters on its first line";
        else if (strlen(text) >= cap)
            bad = "has a first line too long for a token";
        else
            memcpy(buf, text, strlen(text) + 1);
    }
    free(text);
    if (bad) {
        GW_ERROR(lg, "init", "GW_JOB_TOKEN_FILE=%s %s", path, bad);
        return GW_ERR_CONFIG;
    }
    *token = buf;
    return GW_OK;
}

gw_status_t gw__launch_env_config(const gw_logger_t *lg, int default_timeout_ms, gw_config_t *cfg,
                                  gw_launch_env_t *keep)
{
    memset(keep, 0, sizeof(*keep));
    int have_pmix = 0;
    gw_status_t st = GW_OK;
    if (!getenv("GW_ROOT") && !getenv("MASTER_ADDR")) {
        long timeout;
        (void)default_timeout_ms; /* the registry's default */
        st = gw__env_int(lg, GW_ENV_TIMEOUT_MS, &timeout);
        gw_status_t ps = st == GW_OK ? gw__pmix_job(lg, getenv("GW_JOB_TOKEN") != NULL,
                                                    (int)timeout, &keep->pmix)
                                     : st;
        if (ps == GW_OK) {
            have_pmix = 1;
            cfg->rank = keep->pmix.rank;
            cfg->size = keep->pmix.size;
            cfg->root = keep->pmix.root;
            if (keep->pmix.token[0])
                cfg->job_token = keep->pmix.token;
        } else if (ps != GW_ERR_NOT_FOUND) {
            st = ps;
        }
    }
    if (st == GW_OK && !have_pmix)
        st = env_rank_size(lg, &cfg->rank, &cfg->size);
    if (st == GW_OK && !have_pmix && !getenv("GW_ROOT"))
        st = torchrun_root(lg, keep->root, sizeof(keep->root), &cfg->root);
    if (st == GW_OK && !have_pmix && !getenv("GW_ROOT") && !cfg->root)
        st = slurm_root(lg, cfg->rank, keep->root, sizeof(keep->root), &cfg->root);
    if (st == GW_OK && !cfg->job_token && !getenv("GW_JOB_TOKEN"))
        st = gw__launch_env_token_file(lg, keep->token, sizeof(keep->token), &cfg->job_token);
    return st;
}

/* The launcher's own variable, set for its children only: not a user's
 * setting, so a value that does not parse disables the message rather than
 * failing the job (a program may have passed the variable on to another). */
void gw__launch_tell_setup(char what)
{
    const char *v = getenv("GW_LAUNCH_SETUP");
    int fd, rank;
    char extra;
    if (!v || sscanf(v, "%d:%d%c", &fd, &rank, &extra) != 2 || fd < 3 || rank < 0)
        return;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISFIFO(sb.st_mode))
        return;
    /* Shorter than PIPE_BUF: one write is one whole message. */
    char msg[32];
    int n = snprintf(msg, sizeof(msg), "%d %c\n", rank, what);
    int saved = errno;
    while (write(fd, msg, (size_t)n) < 0 && errno == EINTR)
        ;
    errno = saved;
}
