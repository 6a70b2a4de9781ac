/*
 * comm_init.c - communicator lifecycle: configuration from a struct or the
 * environment, bootstrap, transport selection and connection, teardown.
 *
 * Creation is: resolve the configuration (explicit fields first, then GW_*
 * and launcher variables, then defaults), join the job through the bootstrap
 * root, open the transport on the interface that routes to the root (or
 * GW_SOCKET_IFNAME) and all-gather the transport addresses over the
 * bootstrap. TCP and shared memory connect each pair of ranks when a
 * message first needs it (GW_CONNECT=lazy, the default;
 * transport/tcp/tcp_mesh.c, transport/shm/shm_connect.c), so a ring opens
 * two connections, not size - 1; GW_CONNECT=eager connects every pair
 * here, as the verbs transport always does. Every failure is logged once,
 * naming what was wrong, and unwinds what was built so far.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collectives/api/api.h"
#include "collectives/comm/comm.h"
#include "collectives/comm/flight_recorder.h"
#include "collectives/comm/launch_env.h"
#include "collectives/comm/trace.h"
#include "collectives/device/device.h"
#include "common/env.h"
#include "transport/select.h"

#define GW_MAX_NSOCKS 16

int gw_comm_rank(const gw_comm_t *comm) { return comm ? comm->rank : -1; }
int gw_comm_size(const gw_comm_t *comm) { return comm ? comm->size : -1; }
const char *gw_last_error(gw_comm_t *comm)
{
    return gw__log_last_error(comm ? &comm->last_error : NULL);
}

int gw_comm_culprit(const gw_comm_t *comm)
{
    return comm && comm->failed != GW_OK ? comm->culprit : -1;
}

const char *gw_comm_transport(const gw_comm_t *comm)
{
    if (!comm)
        return "none";
    return comm->transport ? comm->transport->name : "self";
}

gw_status_t gw_comm_set_algo(gw_comm_t *comm, gw_algo_t algo)
{
    if (!comm || (unsigned)algo >= GW_ALGO_COUNT)
        return GW_ERR_INVALID_ARG;
    comm->algo = algo;
    return GW_OK;
}

gw_status_t gw_comm_set_p2p_send(gw_comm_t *comm, gw_p2p_send_t mode)
{
    if (!comm || (mode != GW_P2P_SEND_SYNC && mode != GW_P2P_SEND_STANDARD))
        return GW_ERR_INVALID_ARG;
    comm->p2p_send = mode;
    return GW_OK;
}

gw_p2p_send_t gw_comm_p2p_send(const gw_comm_t *comm)
{
    return comm ? comm->p2p_send : GW_P2P_SEND_SYNC;
}

/* value if the caller's config gives one; else the variable name, which
 * must be well formed if it is set (unset: NULL, the default). */
static gw_status_t env_or(const gw_logger_t *lg, const char *value, gw_env_id_t id,
                          const char **out)
{
    if (value) {
        *out = value;
        return GW_OK;
    }
    return gw__env_str(lg, id, out);
}

gw_status_t gw__comm_resolve(const gw_config_t *cfg, const gw_logger_t *lg, gw_comm_resolved_t *r)
{
    long v;
    /* Every GW_* variable that is set is checked, used here or not: a
     * malformed one fails creation rather than wait for the day it is used
     * (rank 0 alone names unknown ones, so a job says it once). */
    if (gw__env_check_all(lg, cfg->rank == 0) != GW_OK)
        return GW_ERR_CONFIG;
    r->rank = cfg->rank;
    r->size = cfg->size;
    if (r->size < 1 || r->rank < 0 || r->rank >= r->size) {
        GW_ERROR(lg, "init", "invalid rank %d / size %d: need size >= 1 and 0 <= rank < size",
                 cfg->rank, cfg->size);
        return GW_ERR_CONFIG;
    }
    if (env_or(lg, cfg->root, GW_ENV_ROOT, &r->root) != GW_OK ||
        env_or(lg, cfg->job_token, GW_ENV_JOB_TOKEN, &r->token) != GW_OK ||
        env_or(lg, cfg->transport, GW_ENV_TRANSPORT, &r->transport) != GW_OK ||
        env_or(lg, cfg->socket_ifname, GW_ENV_SOCKET_IFNAME, &r->ifname) != GW_OK)
        return GW_ERR_CONFIG;
    /* A token from the environment was checked with the rest (16
     * characters or more, as GW_JOB_TOKEN_FILE's); one in the caller's
     * config is held to the same. */
    if (cfg->job_token && cfg->job_token[0] && r->size > 1 &&
        strlen(cfg->job_token) < GW_JOB_TOKEN_MIN) {
        GW_ERROR(lg, "init", "the job token in the configuration has %zu characters: at least %d",
                 strlen(cfg->job_token), GW_JOB_TOKEN_MIN);
        return GW_ERR_CONFIG;
    }
    /* A root from the environment is checked here, naming the variable; the
     * bootstrap checks the one a caller's config gives. */
    char host[256];
    int port, found;
    if (!cfg->root && gw__env_hostport(lg, GW_ENV_ROOT, host, sizeof(host), &port, &found) != GW_OK)
        return GW_ERR_CONFIG;
    /* Without a token anyone who reaches a port joins: the bootstrap
     * refuses such a job unless GW_INSECURE=1 asks for it. */
    if (gw__env_int(lg, GW_ENV_INSECURE, &v) != GW_OK)
        return GW_ERR_CONFIG;
    r->insecure = (int)v;
    if (cfg->timeout_ms > 0) {
        r->timeout_ms = cfg->timeout_ms;
    } else {
        if (gw__env_int(lg, GW_ENV_TIMEOUT_MS, &v) != GW_OK)
            return GW_ERR_CONFIG;
        r->timeout_ms = (int)v;
    }
    /* The join's own budget: a job whose ranks start slowly (a busy
     * scheduler) need not lengthen every collective's timeout. */
    if (gw__env_int(lg, GW_ENV_JOIN_TIMEOUT_MS, &v) != GW_OK)
        return GW_ERR_CONFIG;
    r->join_timeout_ms = v > 0 ? (int)v : r->timeout_ms; /* 0: unset */
    if (gw__env_int(lg, GW_ENV_JOIN_PROGRESS_MS, &v) != GW_OK)
        return GW_ERR_CONFIG;
    r->join_progress_ms = (int)v;
    if (cfg->nsocks > 0) {
        if (cfg->nsocks > GW_MAX_NSOCKS) {
            GW_ERROR(lg, "init", "nsocks %d out of range [1, %d]", cfg->nsocks, GW_MAX_NSOCKS);
            return GW_ERR_CONFIG;
        }
        r->nsocks = cfg->nsocks;
    } else {
        if (gw__env_int(lg, GW_ENV_NSOCKS, &v) != GW_OK)
            return GW_ERR_CONFIG;
        r->nsocks = (int)v;
    }
    if ((unsigned)cfg->algo >= GW_ALGO_COUNT) {
        GW_ERROR(lg, "init", "unknown algorithm %d in configuration", (int)cfg->algo);
        return GW_ERR_CONFIG;
    }
    r->algo = cfg->algo;
    static const char algos[] = "one of auto, ring, tree, rd, hier";
    const char *algo_env = NULL;
    if (r->algo == GW_ALGO_AUTO && gw__env_str(lg, GW_ENV_ALGO, &algo_env) != GW_OK)
        return GW_ERR_CONFIG;
    if (algo_env && gw_algo_parse(algo_env, &r->algo) != GW_OK) {
        GW_ERROR(lg, "init", "GW_ALGO=\"%s\" is not %s", algo_env, algos);
        return GW_ERR_CONFIG;
    }
    /* Any case, as every choice of the registry (lazy is its first). */
    int connect;
    if (gw__env_choice(lg, GW_ENV_CONNECT, &connect) != GW_OK)
        return GW_ERR_CONFIG;
    r->lazy = connect == 0;
    int p2p_send;
    if (gw__env_choice(lg, GW_ENV_P2P_SEND, &p2p_send) != GW_OK)
        return GW_ERR_CONFIG;
    r->p2p_send = p2p_send == 1 ? GW_P2P_SEND_STANDARD : GW_P2P_SEND_SYNC;
    if (gw__env_int(lg, GW_ENV_CHUNK_BYTES, &v) != GW_OK)
        return GW_ERR_CONFIG;
    r->chunk_bytes = (size_t)v;
    /* Only rank 0's value decides (it tells the others which way the
     * bootstrap all-gather goes), but every rank refuses a malformed one. */
    if (gw__env_int(lg, GW_ENV_BOOTSTRAP_RING_MIN, &v) != GW_OK)
        return GW_ERR_CONFIG;
    r->ring_min = (int)v;
    if (gw__select_mode_parse(r->transport, &r->mode) != GW_OK) {
        GW_ERROR(lg, "init", "GW_TRANSPORT=\"%s\" is not available in this build (available: %s)",
                 r->transport, gw__select_mode_list());
        return GW_ERR_CONFIG;
    }
    if (r->size > 1 && !r->root) {
        GW_ERROR(lg, "init",
                 "no root address: set GW_ROOT=host:port (or MASTER_ADDR and "
                 "MASTER_PORT), or use `gradwire launch`");
        return GW_ERR_CONFIG;
    }
    return GW_OK;
}

/* The topology from every rank's composite address: its host id is the one
 * the transport selection routes by (shared memory between equal ids), so
 * "same host" means the same thing to the rings as to the transports. */
static gw_status_t topo_from_addrs(gw_comm_t *comm, const uint8_t *all)
{
    uint64_t *ids = malloc((size_t)comm->size * sizeof(*ids));
    if (!ids)
        return GW_ERR_NO_MEMORY;
    for (int r = 0; r < comm->size; r++) {
        gw_select_blob_t v;
        if (gw__select_blob_decode(all + (size_t)r * GW_TRANSPORT_ADDR_MAX, &v) != GW_OK) {
            GW_ERROR(&comm->log, "init", "rank %d's address is not a gradwire address", r);
            free(ids);
            return GW_ERR_PROTOCOL;
        }
        ids[r] = v.host_id;
    }
    gw_status_t st = gw__topo_build(ids, comm->size, &comm->topo);
    free(ids);
    if (st != GW_OK)
        return st;
    GW_INFO(&comm->log, "init", "%d rank%s on %d host%s (at most %d on one); this rank's host: %d",
            comm->size, comm->size == 1 ? "" : "s", comm->topo.nhosts,
            comm->topo.nhosts == 1 ? "" : "s", comm->topo.local_max,
            comm->topo.host_of[comm->rank]);
    return GW_OK;
}

/* Open the transports GW_TRANSPORT allows (select.c decides per peer which
 * one carries it: shared memory on this host, the network elsewhere),
 * exchange the composite addresses over the bootstrap and connect. A job
 * whose peers all use one transport gets that transport itself, not the
 * routing layer. */
static gw_status_t connect_transport(gw_comm_t *comm, const gw_comm_resolved_t *r,
                                     const gw_tuning_t *file)
{
    gw_transport_params_t params;
    memset(&params, 0, sizeof(params));
    params.rank = comm->rank;
    params.size = comm->size;
    params.log = &comm->log;
    params.timeout_ms = comm->timeout_ms;
    params.ifname = r->ifname;
    params.nsocks = r->nsocks;
    params.lazy = r->lazy;
    gw__bootstrap_job_id(comm->bootstrap, params.job_id);
    gw__bootstrap_data_key(comm->bootstrap, params.data_key);
    gw_status_t st =
        gw__bootstrap_local_addr(comm->bootstrap, &params.default_addr, &params.default_addr_len);
    if (st != GW_OK)
        return st;

    uint8_t addr[GW_TRANSPORT_ADDR_MAX];
    memset(addr, 0, sizeof(addr));
    st = gw__select_open(&params, r->mode, &comm->transport, addr);
    if (st != GW_OK)
        return st;
    uint8_t *all = malloc((size_t)comm->size * GW_TRANSPORT_ADDR_MAX);
    if (!all) {
        st = GW_ERR_NO_MEMORY;
        goto err_close_transport;
    }
    st = gw__bootstrap_allgather(comm->bootstrap, addr, GW_TRANSPORT_ADDR_MAX, all);
    if (st != GW_OK)
        goto err_free_addrs;
    st = topo_from_addrs(comm, all);
    if (st == GW_OK) /* the figures of the transports the pairs will use */
        st = gw__comm_tuning_from_addrs(comm, all, file, r->chunk_bytes);
    if (st == GW_OK)
        st = comm->transport->ops->connect(comm->transport, all);
    /* Connected or not, every rank tells rank 0, which answers whether the
     * job formed and, if not, whom every rank blames (bootstrap_settle.c):
     * each rank alone sees only the peer it could not reach. */
    st = gw__bootstrap_settle(comm->bootstrap, st, -1, gw__comm_grace_ms(comm->timeout_ms));
    if (st != GW_OK)
        goto err_free_addrs;
    free(all);
    comm->transport = gw__select_unwrap(comm->transport);
    GW_INFO(&comm->log, "init",
            "gradwire %s: rank %d of %d connected over %s (GW_TRANSPORT=%s, %d socket%s per "
            "TCP peer)",
            gw_version(), comm->rank, comm->size, comm->transport->name,
            gw__select_mode_name(r->mode), r->nsocks, r->nsocks == 1 ? "" : "s");
    return GW_OK;

err_free_addrs:
    free(all);
    gw__topo_free(&comm->topo);
err_close_transport:
    comm->transport->ops->close(comm->transport);
    comm->transport = NULL;
    return st;
}

static gw_status_t comm_init(const gw_config_t *cfg, gw_comm_t **out, int *culprit)
{
    *culprit = -1;
    gw_comm_t *comm = calloc(1, sizeof(*comm));
    if (!comm)
        return GW_ERR_NO_MEMORY;
    int joining = 0; /* from the bootstrap on, the culprit is the job's verdict */
    /* A malformed GW_DEBUG fails the communicator: the logger could not log
     * at the level asked for. */
    gw_status_t st = gw__logger_init(&comm->log, cfg->rank);
    comm->log.slot = &comm->last_error;
    gw_comm_resolved_t r;
    if (st == GW_OK)
        st = gw__comm_resolve(cfg, &comm->log, &r);
    if (st != GW_OK)
        goto err_free_comm;
    comm->rank = r.rank;
    comm->size = r.size;
    comm->timeout_ms = r.timeout_ms;
    comm->algo = r.algo;
    comm->p2p_send = r.p2p_send;
    /* Measured figures (gradwire-bench tune) replace the defaults; GW_ALGO
     * and GW_CHUNK_BYTES, resolved above, still override what they set.
     * The file is read now, the transports' defaults under it are set
     * once the addresses say which transports the pairs use
     * (comm_tuning.c). */
    gw_tuning_t file;
    st = gw__comm_tuning_file(&file, &comm->log);
    if (st != GW_OK)
        goto err_free_comm;
    gw__comm_tuning_apply(comm, 0, 0, &file, r.chunk_bytes);
    /* Device buffers' settings (GW_CUDA_CHUNK), checked now like the rest;
     * the plugin itself is opened on first need. */
    gw_device_t *device;
    if ((st = gw__device_state(comm, &device)) != GW_OK)
        goto err_free_comm;
    comm->failed = GW_OK;
    comm->culprit = -1;
    comm->origin = -1;
    if ((st = gw__comm_recipe_keep(comm, &r)) != GW_OK)
        goto err_free_comm;
    if ((st = gw__fr_from_env(&comm->log, r.rank, r.size, 0, &comm->fr)) != GW_OK)
        goto err_free_comm;
    if (comm->size == 1)
        goto done;

    joining = 1;
    gw_bootstrap_params_t bp = {
        .rank = r.rank,
        .size = r.size,
        .root = r.root,
        .token = r.token,
        .timeout_ms = r.timeout_ms,
        .join_timeout_ms = r.join_timeout_ms,
        .join_progress_ms = r.join_progress_ms,
        .log = &comm->log,
        .culprit = culprit,
        .ring_min = r.ring_min,
        .insecure = r.insecure,
    };
    st = gw__bootstrap_open(&bp, &comm->bootstrap);
    if (st != GW_OK)
        goto err_free_comm;
    st = connect_transport(comm, &r, &file);
    if (st != GW_OK) {
        *culprit = gw__bootstrap_culprit(comm->bootstrap);
        goto err_close_bootstrap;
    }
    /* Where each rank would lead the survivors if rank 0 died
     * (gw_comm_shrink): the last all-gather before the watch. */
    st = gw__bootstrap_heirs_open(comm->bootstrap);
    if (st != GW_OK) {
        *culprit = gw__bootstrap_culprit(comm->bootstrap);
        comm->transport->ops->close(comm->transport);
        comm->transport = NULL;
        gw__topo_free(&comm->topo);
        goto err_close_bootstrap;
    }
    gw__comm_watch_start(comm);
    /* The timeline's timestamps are rank 0's clock: this rank's offset
     * from it, measured now through the bootstrap (trace.h). */
    int64_t offset_ns, rtt_ns;
    if (gw__fr_trace(comm->fr) && comm->watching &&
        gw__bootstrap_clock(comm->bootstrap, &offset_ns, &rtt_ns) == GW_OK)
        gw__trace_set_offset(gw__fr_trace(comm->fr), offset_ns, rtt_ns);
done:
    *out = comm;
    return GW_OK;

err_close_bootstrap:
    gw__bootstrap_close(comm->bootstrap);
err_free_comm:
    if (!joining) /* its own configuration, tuning file or memory */
        *culprit = cfg->rank >= 0 && cfg->rank < cfg->size ? cfg->rank : -1;
    if (*culprit >= 0)
        GW_ERROR_SUMMARY(&comm->log, "init", "communicator creation failed: %s; blaming rank %d",
                         gw_status_str(st), *culprit);
    else
        GW_ERROR_SUMMARY(&comm->log, "init", "communicator creation failed: %s", gw_status_str(st));
    gw__fr_destroy(comm->fr);
    gw__comm_recipe_free(comm);
    gw__device_destroy(comm);
    gw__logger_fini(&comm->log);
    free(comm);
    return st;
}

gw_status_t gw_comm_init(const gw_config_t *cfg, gw_comm_t **out)
{
    if (!cfg)
        return GW_ERR_INVALID_ARG;
    return gw_comm_init_culprit(cfg, out, NULL);
}

gw_status_t gw_comm_init_env(gw_comm_t **out) { return gw_comm_init_culprit(NULL, out, NULL); }

/* The configuration from the environment (gw_comm_init_env), then
 * comm_init. */
static gw_status_t comm_init_env(gw_comm_t **out, int *culprit)
{
    gw_logger_t lg;
    gw_config_t cfg;
    gw_launch_env_t keep;
    gw_config_init(&cfg);
    gw_status_t st = gw__logger_init(&lg, -1);
    if (st == GW_OK)
        st = gw__launch_env_config(&lg, GW_DEFAULT_TIMEOUT_MS, &cfg, &keep);
    gw__logger_fini(&lg);
    if (st != GW_OK) {
        *culprit = -1; /* this rank's, but it has no rank to name */
        return st;
    }
    return comm_init(&cfg, out, culprit);
}

gw_status_t gw_comm_init_culprit(const gw_config_t *cfg, gw_comm_t **out, int *culprit)
{
    int ignored;
    if (!culprit)
        culprit = &ignored;
    *culprit = -1;
    if (!out)
        return GW_ERR_INVALID_ARG;
    gw_config_t mine;
    if (cfg) {
        gw_logger_t lg;
        gw_status_t st = gw__logger_init(&lg, -1);
        if (st == GW_OK)
            st = gw__config_import(cfg, &mine, &lg);
        gw__logger_fini(&lg);
        if (st != GW_OK)
            return st;
        cfg = &mine;
    }
    /* A one-rank communicator waits for nobody: not the launcher's to judge
     * (tools/launch_formed.c). */
    int tell = !cfg || cfg->size != 1;
    if (tell)
        gw__launch_tell_setup('I');
    gw_status_t st = cfg ? comm_init(cfg, out, culprit) : comm_init_env(out, culprit);
    if (tell)
        gw__launch_tell_setup(st == GW_OK ? 'J' : 'F');
    return st;
}

gw_status_t gw_comm_abort(gw_comm_t *comm)
{
    if (!comm)
        return GW_ERR_INVALID_ARG;
    GW_WARN(&comm->log, "api", "communicator aborted by the application");
    /* Another thread may be driving the transport right now (a collective
     * on the caller's thread or on the progress thread): then the abort is
     * left to it (p2p.c checks the flag every progress round, and giving the
     * transport back checks it too). When nobody is, tell the peers now. */
    atomic_store(&comm->abort_requested, 1);
    /* A sub-communicator shares its root's transport and claim: aborting
     * one aborts the transport, so every communicator on it (comm.h). */
    gw_comm_t *root = gw__comm_root(comm);
    atomic_store(&root->abort_requested, 1);
    int free_ = 0;
    if (atomic_compare_exchange_strong(&root->driving, &free_, 1)) {
        gw__comm_fail(comm, GW_ERR_ABORTED);
        atomic_store(&root->driving, 0);
    }
    return GW_OK;
}

gw_status_t gw_comm_destroy(gw_comm_t *comm)
{
    if (!comm)
        return GW_OK;
    gw__group_discard(comm);
    /* A sub-communicator, or a root that sub-communicators still use: the
     * transport stays until the last of them goes (comm_split.c). */
    if (comm->root || atomic_fetch_sub(&comm->refs, 1) > 1) {
        gw__comm_release(comm);
        return GW_OK;
    }
    gw__async_stop(comm);
    gw__p2p_abandon(comm);
    gw__device_destroy(comm);
    if (comm->transport)
        comm->transport->ops->close(comm->transport);
    if (comm->bootstrap)
        gw__bootstrap_close(comm->bootstrap);
    free(comm->scratch);
    gw__topo_free(&comm->topo);
    gw__comm_recipe_free(comm);
    gw__fr_destroy(comm->fr);
    gw__logger_fini(&comm->log);
    free(comm);
    return GW_OK;
}
