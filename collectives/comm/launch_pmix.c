/*
 * launch_pmix.c - the bootstrap agreed through PMIx, the process management
 * interface of Open MPI's mpirun, Slurm's srun --mpi=pmix and PRRTE
 * (contract in launch_env.h).
 *
 * A PMIx server gives each process its rank and the job's size, and a
 * key-value store scoped to the job: rank 0 puts the address its bootstrap
 * root will listen on and a job token it drew from the kernel's random
 * generator, every rank fences (the server's barrier, which also makes the
 * puts visible), and the others get both from rank 0. The token never
 * leaves the job's PMIx servers, so a stranger who knows the job's ids
 * still cannot join; a token the user exported (GW_JOB_TOKEN) is kept
 * instead. libpmix is opened at run time, as the verbs libraries are: one
 * library binary runs with and without it, and only a process that finds
 * itself under a PMIx server (PMIX_NAMESPACE set) needs it.
 *
 * The port: rank 0 binds a socket to its address and port 0, reads the
 * port the kernel gave, and closes it; its bootstrap binds the same port
 * moments later. The kernel hands out ephemeral ports in turn, so another
 * process taking that one in between is unlikely; if it happens, rank 0's
 * bind fails with an error naming the address and the others time out.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "collectives/comm/launch_env.h"
#include "common/env.h"
#include "transport/sock.h"

#ifdef GW_HAVE_PMIX_H
#include <pmix.h>

#define KEY_ROOT "gradwire.root"
#define KEY_TOKEN "gradwire.token"

/* The PMIx client calls gradwire makes, from the library opened at run time. */
typedef struct pmix_api {
    void *lib;
    __typeof__(&PMIx_Init) init;
    __typeof__(&PMIx_Finalize) finalize;
    __typeof__(&PMIx_Get) get;
    __typeof__(&PMIx_Put) put;
    __typeof__(&PMIx_Commit) commit;
    __typeof__(&PMIx_Fence) fence;
    __typeof__(&PMIx_Error_string) error_string;
} pmix_api_t;

static int load(pmix_api_t *p, char *why, size_t cap)
{
    const char *names[] = {"libpmix.so.2", "libpmix.so"};
    for (size_t i = 0; i < 2 && !p->lib; i++)
        p->lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
    if (!p->lib) {
        snprintf(why, cap, "%s (Debian package libpmix2)", dlerror());
        return -1;
    }
#define SYM(field, name)                                                     \
    if (!(*(void **)&p->field = dlsym(p->lib, name))) {                      \
        snprintf(why, cap, "libpmix has no %s: too old a PMIx (< 4)", name); \
        return -1;                                                           \
    }
    SYM(init, "PMIx_Init")
    SYM(finalize, "PMIx_Finalize")
    SYM(get, "PMIx_Get")
    SYM(put, "PMIx_Put")
    SYM(commit, "PMIx_Commit")
    SYM(fence, "PMIx_Fence")
    SYM(error_string, "PMIx_Error_string")
#undef SYM
    return 0;
}

/* A uint32 the server holds about the job (wildcard rank). */
static pmix_status_t get_u32(const pmix_api_t *p, const pmix_proc_t *me, const char *key,
                             uint32_t *out)
{
    pmix_proc_t job = *me;
    job.rank = PMIX_RANK_WILDCARD;
    pmix_value_t *v = NULL;
    pmix_status_t rc = p->get(&job, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        return rc;
    rc = v && v->type == PMIX_UINT32 ? PMIX_SUCCESS : PMIX_ERR_BAD_PARAM;
    if (rc == PMIX_SUCCESS)
        *out = v->data.uint32;
    free(v);
    return rc;
}

/* A string rank 0 put. */
static pmix_status_t get_string(const pmix_api_t *p, const pmix_proc_t *me, const char *key,
                                char *out, size_t cap)
{
    pmix_proc_t zero = *me;
    zero.rank = 0;
    pmix_value_t *v = NULL;
    pmix_status_t rc = p->get(&zero, key, NULL, 0, &v);
    if (rc != PMIX_SUCCESS)
        return rc;
    if (!v || v->type != PMIX_STRING || !v->data.string || strlen(v->data.string) >= cap) {
        rc = PMIX_ERR_BAD_PARAM;
    } else {
        strcpy(out, v->data.string);
    }
    if (v)
        free(v->type == PMIX_STRING ? v->data.string : NULL);
    free(v);
    return rc;
}

static pmix_status_t put_string(const pmix_api_t *p, const char *key, const char *s)
{
    pmix_value_t v;
    memset(&v, 0, sizeof(v));
    v.type = PMIX_STRING;
    v.data.string = (char *)s;
    return p->put(PMIX_GLOBAL, key, &v);
}

/* Rank 0's address as text: see launch_env.h. */
static int root_host(const gw_logger_t *lg, int one_host, char *out, size_t cap)
{
    const char *spec_text = NULL;
    if (gw__env_str(lg, GW_ENV_SOCKET_IFNAME, &spec_text) != GW_OK)
        return -1;
    if (!spec_text && one_host) {
        snprintf(out, cap, "127.0.0.1");
        return 0;
    }
    gw_ifspec_t spec;
    char why[512];
    if (gw__ifspec_parse(spec_text ? spec_text : "^lo", &spec, why, sizeof(why)) != GW_OK) {
        GW_ERROR(lg, "init", "GW_SOCKET_IFNAME: %s", why);
        return -1;
    }
    struct ifaddrs *all = NULL;
    if (getifaddrs(&all) != 0) {
        GW_ERROR(lg, "init", "getifaddrs() for rank 0's bootstrap address: %m");
        return -1;
    }
    const struct ifaddrs *a = gw__ifspec_choose(&spec, all, why, sizeof(why));
    char host[INET6_ADDRSTRLEN] = "";
    if (a && a->ifa_addr->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a->ifa_addr)->sin_addr, host,
                  sizeof(host));
    else if (a)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)a->ifa_addr)->sin6_addr, host,
                  sizeof(host));
    if (!a)
        GW_ERROR(lg, "init",
                 "no address for rank 0's bootstrap root (%s): set GW_SOCKET_IFNAME to the "
                 "interface the job's hosts share",
                 why);
    else
        snprintf(out, cap, strchr(host, ':') ? "[%s]" : "%s", host);
    freeifaddrs(all);
    return a ? 0 : -1;
}

/* A port free on host now (see the top). */
static int free_port(const gw_logger_t *lg, const char *host)
{
    struct sockaddr_storage ss;
    socklen_t len;
    memset(&ss, 0, sizeof(ss));
    char bare[INET6_ADDRSTRLEN + 2];
    snprintf(bare, sizeof(bare), "%s", host[0] == '[' ? host + 1 : host);
    bare[strcspn(bare, "]")] = '\0';
    if (inet_pton(AF_INET, bare, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
        len = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, bare, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ss.ss_family = AF_INET6;
        len = sizeof(struct sockaddr_in6);
    } else {
        GW_ERROR(lg, "init", "rank 0's address %s is not an IP address", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, len) == 0 &&
        getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                             : ((struct sockaddr_in6 *)&ss)->sin6_port);
    if (port < 0)
        GW_ERROR(lg, "init", "no free port on %s for the bootstrap root: %m", host);
    if (fd >= 0)
        close(fd);
    return port;
}

static int make_token(char *out, size_t cap)
{
    uint8_t raw[32];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw) || cap < 2 * sizeof(raw) + 1)
        return -1;
    for (size_t i = 0; i < sizeof(raw); i++)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
    return 0;
}

/* Rank 0's puts. */
static pmix_status_t publish(const gw_logger_t *lg, const pmix_api_t *p, int one_host,
                             int token_given, gw_pmix_job_t *job)
{
    char host[INET6_ADDRSTRLEN + 2];
    if (root_host(lg, one_host, host, sizeof(host)) != 0)
        return PMIX_ERR_BAD_PARAM;
    int port = free_port(lg, host);
    if (port < 0)
        return PMIX_ERR_BAD_PARAM;
    snprintf(job->root, sizeof(job->root), "%s:%d", host, port);
    pmix_status_t rc = put_string(p, KEY_ROOT, job->root);
    if (rc == PMIX_SUCCESS && !token_given) {
        if (make_token(job->token, sizeof(job->token)) != 0) {
            GW_ERROR(lg, "init", "getrandom() for the job token: %m");
            return PMIX_ERR_BAD_PARAM;
        }
        rc = put_string(p, KEY_TOKEN, job->token);
    }
    return rc == PMIX_SUCCESS ? p->commit() : rc;
}

gw_status_t gw__pmix_job(const gw_logger_t *lg, int token_given, int timeout_ms, gw_pmix_job_t *job)
{
    memset(job, 0, sizeof(*job));
    if (!getenv("PMIX_NAMESPACE"))
        return GW_ERR_NOT_FOUND;
    pmix_api_t p = {0};
    char why[256];
    if (load(&p, why, sizeof(why)) != 0) {
        GW_ERROR(lg, "init",
                 "started under a PMIx server (PMIX_NAMESPACE is set) but libpmix cannot be "
                 "loaded: %s; or set GW_ROOT and GW_JOB_TOKEN",
                 why);
        if (p.lib)
            dlclose(p.lib);
        return GW_ERR_CONFIG;
    }
    pmix_proc_t me;
    uint32_t size = 0, local = 0;
    const char *what = "PMIx_Init";
    pmix_status_t rc = p.init(&me, NULL, 0);
    if (rc == PMIX_SUCCESS && (what = "the job size (PMIX_JOB_SIZE)") &&
        (rc = get_u32(&p, &me, PMIX_JOB_SIZE, &size)) == PMIX_SUCCESS &&
        (what = "the ranks on this host (PMIX_LOCAL_SIZE)"))
        rc = get_u32(&p, &me, PMIX_LOCAL_SIZE, &local);
    int inited = rc == PMIX_SUCCESS || strcmp(what, "PMIx_Init") != 0;
    /* Rank 0 fences even when it could not publish, so that the others
     * fail at once on the missing key instead of waiting out the fence. */
    pmix_status_t published = PMIX_SUCCESS;
    if (rc == PMIX_SUCCESS && me.rank == 0)
        published = publish(lg, &p, local == size, token_given, job);
    if (rc == PMIX_SUCCESS) {
        pmix_info_t info;
        memset(&info, 0, sizeof(info));
        snprintf(info.key, sizeof(info.key), "%s", PMIX_TIMEOUT);
        info.value.type = PMIX_INT;
        info.value.data.integer = timeout_ms / 1000 > 0 ? timeout_ms / 1000 : 1;
        pmix_proc_t all = me;
        all.rank = PMIX_RANK_WILDCARD;
        what = "the fence of every rank";
        rc = p.fence(&all, 1, &info, 1);
        if (rc == PMIX_SUCCESS && published != PMIX_SUCCESS) {
            rc = published;
            what = "publishing rank 0's address and token";
        }
    }
    if (rc == PMIX_SUCCESS && me.rank != 0 && (what = "rank 0's address") &&
        (rc = get_string(&p, &me, KEY_ROOT, job->root, sizeof(job->root))) == PMIX_SUCCESS &&
        !token_given && (what = "the job token"))
        rc = get_string(&p, &me, KEY_TOKEN, job->token, sizeof(job->token));
    if (rc != PMIX_SUCCESS && rc != PMIX_ERR_BAD_PARAM)
        GW_ERROR(lg, "init", "PMIx (namespace %s): %s failed: %s", me.nspace, what,
                 p.error_string(rc));
    else if (rc != PMIX_SUCCESS)
        GW_ERROR(lg, "init", "PMIx (namespace %s): %s failed", me.nspace, what);
    else
        GW_INFO(lg, "init", "PMIx (namespace %s): rank %u of %u, bootstrap root %s, %s", me.nspace,
                (unsigned)me.rank, (unsigned)size, job->root,
                token_given ? "GW_JOB_TOKEN from the environment" : "job token from rank 0");
    job->rank = (int)me.rank;
    job->size = (int)size;
    if (inited)
        p.finalize(NULL, 0);
    /* libpmix stays loaded: its threads may outlive finalize briefly. */
    return rc == PMIX_SUCCESS ? GW_OK : GW_ERR_CONFIG;
}

#else /* built without PMIx's headers */

gw_status_t gw__pmix_job(const gw_logger_t *lg, int token_given, int timeout_ms, gw_pmix_job_t *job)
{
    (void)token_given;
    (void)timeout_ms;
    memset(job, 0, sizeof(*job));
    if (!getenv("PMIX_NAMESPACE"))
        return GW_ERR_NOT_FOUND;
    GW_ERROR(lg, "init",
             "started under a PMIx server (PMIX_NAMESPACE is set) but this gradwire was built "
             "without PMIx (libpmix-dev): set GW_ROOT and GW_JOB_TOKEN");
    return GW_ERR_CONFIG;
}

#endif
