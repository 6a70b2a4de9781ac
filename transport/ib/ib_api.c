/*
 * ib_api.c - libibverbs and librdmacm, opened at run time.
 *
 * The library never links against the RDMA libraries: one binary must run
 * on machines without them (laptops, CI runners, cloud instances without
 * RDMA NICs), where the transport selection then falls back to TCP and says
 * why. So the sonames are opened with dlopen() when the transport opens and
 * every function is resolved with dlsym() into gw_ib_api_t; verbs.h and
 * rdma_cma.h are used for their types only. The data path calls
 * ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq, which
 * verbs.h defines inline as calls through the provider's function table in
 * the context, so they need no symbol at all.
 *
 * librdmacm is optional: without it the transport still works with the
 * out-of-band connection mode.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "transport/ib/ib_internal.h"

typedef struct sym {
    const char *name;
    size_t offset; /* of the function pointer in gw_ib_api_t */
} sym_t;

#define SYM(field, name)                   \
    {                                      \
        name, offsetof(gw_ib_api_t, field) \
    }

static const sym_t verbs_syms[] = {
    SYM(get_device_list, "ibv_get_device_list"),
    SYM(free_device_list, "ibv_free_device_list"),
    SYM(get_device_name, "ibv_get_device_name"),
    SYM(open_device, "ibv_open_device"),
    SYM(close_device, "ibv_close_device"),
    SYM(query_device, "ibv_query_device"),
    SYM(query_port_compat, "ibv_query_port"),
    SYM(query_gid, "ibv_query_gid"),
    SYM(alloc_pd, "ibv_alloc_pd"),
    SYM(dealloc_pd, "ibv_dealloc_pd"),
    SYM(reg_mr, "ibv_reg_mr"),
    SYM(dereg_mr, "ibv_dereg_mr"),
    SYM(create_comp_channel, "ibv_create_comp_channel"),
    SYM(destroy_comp_channel, "ibv_destroy_comp_channel"),
    SYM(create_cq, "ibv_create_cq"),
    SYM(destroy_cq, "ibv_destroy_cq"),
    SYM(resize_cq, "ibv_resize_cq"),
    SYM(get_cq_event, "ibv_get_cq_event"),
    SYM(ack_cq_events, "ibv_ack_cq_events"),
    SYM(create_qp, "ibv_create_qp"),
    SYM(modify_qp, "ibv_modify_qp"),
    SYM(destroy_qp, "ibv_destroy_qp"),
    SYM(get_async_event, "ibv_get_async_event"),
    SYM(ack_async_event, "ibv_ack_async_event"),
    SYM(wc_status_str, "ibv_wc_status_str"),
    SYM(event_type_str, "ibv_event_type_str"),
};

static const sym_t rdmacm_syms[] = {
    SYM(create_event_channel, "rdma_create_event_channel"),
    SYM(destroy_event_channel, "rdma_destroy_event_channel"),
    SYM(create_id, "rdma_create_id"),
    SYM(destroy_id, "rdma_destroy_id"),
    SYM(bind_addr, "rdma_bind_addr"),
    SYM(listen, "rdma_listen"),
    SYM(resolve_addr, "rdma_resolve_addr"),
    SYM(resolve_route, "rdma_resolve_route"),
    SYM(cm_create_qp, "rdma_create_qp"),
    SYM(cm_destroy_qp, "rdma_destroy_qp"),
    SYM(connect, "rdma_connect"),
    SYM(accept, "rdma_accept"),
    SYM(reject, "rdma_reject"),
    SYM(disconnect, "rdma_disconnect"),
    SYM(get_cm_event, "rdma_get_cm_event"),
    SYM(ack_cm_event, "rdma_ack_cm_event"),
    SYM(event_str, "rdma_event_str"),
    SYM(set_option, "rdma_set_option"),
    SYM(get_src_port, "rdma_get_src_port"),
};

/* Resolve syms from lib; the name of the first missing one in *missing. */
static int resolve(void *lib, const sym_t *syms, size_t n, gw_ib_api_t *api, const char **missing)
{
    for (size_t i = 0; i < n; i++) {
        void *f = dlsym(lib, syms[i].name);
        if (!f) {
            *missing = syms[i].name;
            return -1;
        }
        /* POSIX guarantees that a data pointer from dlsym converts to a
         * function pointer; memcpy keeps -Wpedantic quiet about it. */
        memcpy((char *)api + syms[i].offset, &f, sizeof(f));
    }
    return 0;
}

static void clear_rdmacm(gw_ib_api_t *api)
{
    for (size_t i = 0; i < sizeof(rdmacm_syms) / sizeof(rdmacm_syms[0]); i++)
        memset((char *)api + rdmacm_syms[i].offset, 0, sizeof(void (*)(void)));
}

gw_status_t gw__ib_api_open(gw_ib_api_t *api, const char *verbs_soname, const char *rdmacm_soname,
                            char *why, size_t why_cap)
{
    memset(api, 0, sizeof(*api));
    const char *missing = NULL;
    /* RTLD_LOCAL: the providers libibverbs loads find its symbols through
     * their own dependency on it, not through the global namespace. */
    api->verbs_lib = dlopen(verbs_soname, RTLD_NOW | RTLD_LOCAL);
    if (!api->verbs_lib) {
        const char *err = dlerror();
        snprintf(why, why_cap, "cannot load %s (%s): install rdma-core's libibverbs1 for RDMA",
                 verbs_soname, err ? err : "unknown error");
        return GW_ERR_UNSUPPORTED;
    }
    if (resolve(api->verbs_lib, verbs_syms, sizeof(verbs_syms) / sizeof(verbs_syms[0]), api,
                &missing) != 0) {
        snprintf(why, why_cap, "%s lacks %s: too old a libibverbs", verbs_soname, missing);
        dlclose(api->verbs_lib);
        memset(api, 0, sizeof(*api));
        return GW_ERR_UNSUPPORTED;
    }
    /* Optional: an older libibverbs just has no GPUDirect RDMA (ib_dmabuf.c). */
    void *dmabuf = dlsym(api->verbs_lib, "ibv_reg_dmabuf_mr");
    memcpy(&api->reg_dmabuf_mr, &dmabuf, sizeof(dmabuf));
    if (!rdmacm_soname) {
        snprintf(api->rdmacm_why, sizeof(api->rdmacm_why), "librdmacm not requested");
        return GW_OK;
    }
    api->rdmacm_lib = dlopen(rdmacm_soname, RTLD_NOW | RTLD_LOCAL);
    if (!api->rdmacm_lib) {
        const char *err = dlerror();
        snprintf(api->rdmacm_why, sizeof(api->rdmacm_why), "cannot load %s (%s)", rdmacm_soname,
                 err ? err : "unknown error");
        return GW_OK;
    }
    if (resolve(api->rdmacm_lib, rdmacm_syms, sizeof(rdmacm_syms) / sizeof(rdmacm_syms[0]), api,
                &missing) != 0) {
        snprintf(api->rdmacm_why, sizeof(api->rdmacm_why), "%s lacks %s", rdmacm_soname, missing);
        dlclose(api->rdmacm_lib);
        api->rdmacm_lib = NULL;
        clear_rdmacm(api);
    }
    return GW_OK;
}

void gw__ib_api_close(gw_ib_api_t *api)
{
    /* librdmacm first: it holds device contexts of libibverbs. */
    if (api->rdmacm_lib)
        dlclose(api->rdmacm_lib);
    if (api->verbs_lib)
        dlclose(api->verbs_lib);
    memset(api, 0, sizeof(*api));
}

int gw__ib_query_port(const gw_ib_api_t *api, struct ibv_context *ctx, uint8_t port,
                      struct ibv_port_attr *attr)
{
    /* What verbs.h's inline ___ibv_query_port does: the provider's extended
     * entry point when it has one (it fills the whole struct, link layer
     * included), else the exported compatibility function. */
    struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);
    memset(attr, 0, sizeof(*attr));
    if (!vctx)
        return api->query_port_compat(ctx, port, (struct _compat_ibv_port_attr *)attr);
    return vctx->query_port(ctx, port, attr, sizeof(*attr));
}
