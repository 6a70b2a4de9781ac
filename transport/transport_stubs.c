/*
 * transport_stubs.c - the slots of gw_transport_ops_t that a transport does
 * not support point here, so that callers get GW_ERR_UNSUPPORTED instead of
 * a NULL function pointer.
 */
#include "transport/transport.h"

gw_status_t gw__transport_mem_reg_unsupported(gw_transport_t *t, void *buf, size_t len,
                                              void **handle)
{
    (void)t;
    (void)buf;
    (void)len;
    (void)handle;
    return GW_ERR_UNSUPPORTED;
}

gw_status_t gw__transport_mem_dereg_unsupported(gw_transport_t *t, void *handle)
{
    (void)t;
    (void)handle;
    return GW_ERR_UNSUPPORTED;
}
