/*
 * test_ib_dmabuf.c - GPUDirect RDMA's decision and its fallback
 * (transport/ib/ib_dmabuf.c) without a GPU or an RDMA NIC: the host copy
 * engine stands in for the CUDA driver's dmabuf export (it exports declared
 * device memory as a memfd, or refuses), and a verbs stand-in for
 * ibv_reg_dmabuf_mr (it records its arguments and accepts or refuses with
 * an errno). Checked: the registration gets the export's descriptor and
 * offset and the buffer's own address as iova, and the descriptor is
 * closed afterwards; each refusal (no engine, no export, an old libibverbs,
 * the driver's refusal, the NIC's) is GW_ERR_UNSUPPORTED naming its step
 * and reason; the communicator's decision logs one line however many
 * buffers fall back, and a usable path keeps registering.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collectives/device/copy_engine.h"
#include "support/log_capture.h"
#include "transport/ib/ib_dmabuf.h"

static struct {
    int calls, refuse_errno, fd_was_open;
    uint64_t offset, iova;
    size_t len;
    int access;
    struct ibv_pd *pd;
} verbs;
static char fake_mr[64];

static struct ibv_mr *reg_standin(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                  int fd, int access)
{
    struct stat sb;
    verbs.calls++;
    verbs.fd_was_open = fstat(fd, &sb) == 0;
    verbs.offset = offset, verbs.iova = iova, verbs.len = len, verbs.access = access;
    verbs.pd = pd;
    if (verbs.refuse_errno) {
        errno = verbs.refuse_errno;
        return NULL;
    }
    return (struct ibv_mr *)fake_mr;
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    cr_assert_not_null(d);
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static char device_mem[1 << 16];

static gw_copy_engine_t engine(int dmabuf)
{
    gw_copy_engine_t e;
    gw_host_engine_opts_t o = {.dmabuf = dmabuf};
    cr_assert_eq(gw__host_engine_create(&o, &e), GW_OK);
    cr_assert_eq(gw__host_engine_declare(&e, device_mem, sizeof(device_mem), 0), GW_OK);
    memset(&verbs, 0, sizeof(verbs));
    return e;
}

Test(ib_dmabuf, registers_the_export_at_the_buffers_address)
{
    gw_copy_engine_t e = engine(1);
    struct ibv_mr *mr = NULL;
    char why[256] = "";
    int before = open_fds();
    struct ibv_pd *pd = (struct ibv_pd *)0x1234;
    gw_status_t st =
        gw__ib_dmabuf_reg(&e, reg_standin, pd, device_mem + 4096, 8192, 7, &mr, why, sizeof(why));
    cr_assert_eq(st, GW_OK, "%s", why);
    cr_expect_eq(mr, (struct ibv_mr *)fake_mr);
    cr_expect_eq(verbs.calls, 1);
    cr_expect(verbs.fd_was_open, "the dmabuf descriptor was not open during the registration");
    cr_expect_eq(verbs.iova, (uint64_t)(uintptr_t)(device_mem + 4096));
    cr_expect_eq(verbs.len, 8192);
    cr_expect_eq(verbs.access, 7);
    cr_expect_eq(verbs.pd, pd);
    cr_expect_eq(verbs.offset, 0);
    cr_expect_eq(open_fds(), before, "the dmabuf descriptor was left open");
    e.ops->destroy(e.impl);
}

Test(ib_dmabuf, every_refusal_names_its_step)
{
    struct ibv_mr *mr = (struct ibv_mr *)1;
    char why[256];
    cr_expect_eq(
        gw__ib_dmabuf_reg(NULL, reg_standin, NULL, device_mem, 64, 0, &mr, why, sizeof(why)),
        GW_ERR_UNSUPPORTED);
    cr_expect_null(mr);
    cr_expect(strstr(why, "no CUDA copy engine"), "%s", why);

    gw_copy_engine_t e = engine(1);
    cr_expect_eq(gw__ib_dmabuf_reg(&e, NULL, NULL, device_mem, 64, 0, &mr, why, sizeof(why)),
                 GW_ERR_UNSUPPORTED);
    cr_expect(strstr(why, "ibv_reg_dmabuf_mr") && strstr(why, "v34"), "%s", why);
    e.ops->destroy(e.impl);

    e = engine(0); /* the driver refuses the export */
    cr_expect_eq(gw__ib_dmabuf_reg(&e, reg_standin, NULL, device_mem, 64, 0, &mr, why, sizeof(why)),
                 GW_ERR_UNSUPPORTED);
    cr_expect(strstr(why, "exporting the device memory") && strstr(why, "refused"), "%s", why);
    cr_expect_eq(verbs.calls, 0, "the NIC was asked without a descriptor");
    e.ops->destroy(e.impl);

    e = engine(1); /* host memory is not exported */
    static char host_mem[64];
    cr_expect_eq(gw__ib_dmabuf_reg(&e, reg_standin, NULL, host_mem, 64, 0, &mr, why, sizeof(why)),
                 GW_ERR_UNSUPPORTED);
    cr_expect(strstr(why, "not device memory"), "%s", why);
    e.ops->destroy(e.impl);

    e = engine(1); /* the NIC refuses */
    verbs.refuse_errno = EOPNOTSUPP;
    int before = open_fds();
    cr_expect_eq(gw__ib_dmabuf_reg(&e, reg_standin, NULL, device_mem, 64, 0, &mr, why, sizeof(why)),
                 GW_ERR_UNSUPPORTED);
    cr_expect_null(mr);
    cr_expect(strstr(why, "ibv_reg_dmabuf_mr of 64 bytes") && strstr(why, strerror(EOPNOTSUPP)),
              "%s", why);
    cr_expect_eq(open_fds(), before, "a refused registration left its descriptor open");
    e.ops->destroy(e.impl);
}

static int count_lines(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        n++;
    return n;
}

Test(ib_dmabuf, a_refusal_falls_back_to_staging_with_one_line)
{
    gw_copy_engine_t e = engine(1);
    verbs.refuse_errno = EPERM;
    gw_ib_gdr_t g = {0};
    gw_logger_t lg = capture_logger(GW_LOG_INFO);
    struct ibv_mr *mr;
    for (int i = 0; i < 5; i++)
        cr_expect_eq(gw__ib_gdr_decide(&g, &lg, &e, reg_standin, NULL, device_mem, 256, 0, &mr), 0,
                     "buffer %d: not staged", i);
    cr_expect_eq(verbs.calls, 1, "the NIC was asked again after it refused");
    char *text = captured(&lg);
    cr_expect_eq(count_lines(text, "GPUDirect RDMA unavailable"), 1, "log:\n%s", text);
    cr_expect(strstr(text, "staged through host memory") && strstr(text, strerror(EPERM)),
              "the line does not say why: %s", text);
    free(text);
    fclose(lg.file);
    e.ops->destroy(e.impl);

    /* Usable: every buffer registered, one INFO line. */
    e = engine(1);
    gw_ib_gdr_t ok = {0};
    lg = capture_logger(GW_LOG_INFO);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(
            gw__ib_gdr_decide(&ok, &lg, &e, reg_standin, NULL, device_mem + i * 512, 512, 0, &mr),
            1);
        cr_expect_eq(mr, (struct ibv_mr *)fake_mr);
    }
    cr_expect_eq(verbs.calls, 3);
    text = captured(&lg);
    cr_expect_eq(count_lines(text, "GPUDirect RDMA"), 1, "log:\n%s", text);
    free(text);
    fclose(lg.file);
    e.ops->destroy(e.impl);
}
