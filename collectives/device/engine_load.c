/*
 * engine_load.c - finding the CUDA part at run time: the plugin
 * libgradwire-cuda.so (which links libcudart), a CUDA runtime already in
 * the process, and gw_cuda_info for `gradwire info`.
 *
 * libgradwire never links the CUDA runtime: on a machine without one (or
 * without a driver) it loads and runs exactly as a build without CUDA. The
 * plugin is looked for where GW_CUDA_PLUGIN says, else next to the object
 * this code is part of (libgradwire.so, or the program libgradwire.a was
 * linked into), else by the dynamic loader's search path. Opening it fails
 * with dlerror's words when the plugin or its libcudart is missing; its
 * entry point fails with the CUDA error when there is no device
 * (cudaErrorNoDevice) or the driver is too old for the runtime
 * (cudaErrorInsufficientDriver).
 *
 * The driver itself (libcuda.so.1, which the NVIDIA driver installs, not
 * the toolkit) is looked for before the plugin is opened: without it the
 * plugin could only report cudaErrorInsufficientDriver, after loading
 * cudart and cuBLAS, whose initialisers and relocations cost about 0.4 s
 * of CPU and their memory in every process that asked (a rank of `gradwire
 * check` held to 2% of a CPU spent 20 s of its node checks there).
 */
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectives/device/device.h"

#define PLUGIN_NAME "libgradwire-cuda.so"

#ifdef GW_CUDA_BUILT
static const int cuda_built = 1;
#else
static const int cuda_built = 0;
#endif

/* Where the plugin should be: GW_CUDA_PLUGIN, or beside this object. */
static void plugin_path(char *path, size_t cap)
{
    const char *env = getenv("GW_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(path, cap, "%s", env);
        return;
    }
    Dl_info info;
    if (dladdr((void *)plugin_path, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        const char *slash = strrchr(info.dli_fname, '/');
        snprintf(path, cap, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname, PLUGIN_NAME);
        return;
    }
    snprintf(path, cap, "%s", PLUGIN_NAME);
}

/* Whether the CUDA driver's library can be loaded; why not, in why. It
 * stays loaded when it can (RTLD_NODELETE): the runtime loads it next. */
static int driver_present(char *why, size_t cap)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *err = dlerror();
        snprintf(why, cap,
                 "no usable CUDA driver: libcuda.so.1 (the NVIDIA driver's library) cannot be "
                 "loaded (%s)",
                 err ? err : "not found");
        return 0;
    }
    dlclose(h);
    return 1;
}

gw_status_t gw__cuda_plugin_load(gw_copy_engine_t *engine, void **handle, char *why, size_t cap,
                                 char *path, size_t path_cap)
{
    plugin_path(path, path_cap);
    /* A plugin that is missing where GW_CUDA_PLUGIN says, or a build
     * without one, is reported as such (below); otherwise no driver is
     * reported before anything heavy is loaded. */
    if (cuda_built && (access(path, F_OK) == 0 || !getenv("GW_CUDA_PLUGIN")) &&
        !driver_present(why, cap))
        return GW_ERR_UNSUPPORTED;
    /* RTLD_NODELETE: once loaded, the plugin and what it pulls in (cudart,
     * cuBLAS, libstdc++) stay for the life of the process, as CUDA
     * libraries expect; unloading them left their static allocations (the
     * C++ runtime's 72 KiB exception pool) to LeakSanitizer as leaks of an
     * unknown module. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h && !getenv("GW_CUDA_PLUGIN"))
        h = dlopen(PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h) {
        const char *err = dlerror();
        if (err && strstr(err, "libcudart"))
            snprintf(why, cap, "libcudart missing: %s", err);
        else
            snprintf(why, cap, "plugin %s missing%s (%s)", path,
                     cuda_built ? "" : ": this build has no CUDA part (GW_CUDA=OFF)",
                     err ? err : "not found");
        return GW_ERR_UNSUPPORTED;
    }
    gw_cuda_plugin_open_fn open_fn = (gw_cuda_plugin_open_fn)dlsym(h, GW_CUDA_PLUGIN_ENTRY);
    if (!open_fn) {
        snprintf(why, cap, "plugin %s has no %s: not gradwire's", path, GW_CUDA_PLUGIN_ENTRY);
        dlclose(h);
        return GW_ERR_UNSUPPORTED;
    }
    const gw_copy_engine_ops_t *ops = NULL;
    void *impl = NULL;
    gw_status_t st = open_fn(sizeof(gw_copy_engine_ops_t), &ops, &impl, why, cap);
    if (st == GW_OK && (!ops || ops->size < sizeof(gw_copy_engine_ops_t))) {
        snprintf(why, cap, "plugin %s is of another gradwire version (its ops table is %zu bytes)",
                 path, ops ? ops->size : (size_t)0);
        if (ops)
            ops->destroy(impl);
        st = GW_ERR_UNSUPPORTED;
    }
    if (st != GW_OK) {
        dlclose(h);
        return st;
    }
    engine->ops = ops;
    engine->impl = impl;
    *handle = h;
    return GW_OK;
}

static int find_cuda(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *name = info->dlpi_name;
    return name && (strstr(name, "libcudart") || strstr(name, "/libcuda.so"));
}

int gw__cuda_runtime_in_process(void) { return dl_iterate_phdr(find_cuda, NULL); }

/* cudaPointerAttributes as every runtime since CUDA 10 lays it out: the
 * memory type first (2: device memory), then the device ordinal. */
typedef struct cuda_attrs {
    int type;
    int device;
    void *device_pointer, *host_pointer;
    long reserved[8];
} cuda_attrs_t;

int gw__cuda_runtime_says_device(const void *ptr)
{
    static const char *const names[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0",
                                        "libcudart.so"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        void *h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        int (*get)(cuda_attrs_t *, const void *) =
            (int (*)(cuda_attrs_t *, const void *))dlsym(h, "cudaPointerGetAttributes");
        cuda_attrs_t a = {0};
        int is_dev = get && get(&a, ptr) == 0 && a.type == 2;
        dlclose(h);
        if (get)
            return is_dev;
    }
    return 0;
}

gw_status_t gw_cuda_info(gw_cuda_info_t *out)
{
    if (!out)
        return GW_ERR_INVALID_ARG;
    memset(out, 0, sizeof(*out));
    out->built = cuda_built;
    out->runtime_loaded = gw__cuda_runtime_in_process();
    gw_copy_engine_t eng;
    void *h = NULL;
    if (gw__cuda_plugin_load(&eng, &h, out->why, sizeof(out->why), out->plugin,
                             sizeof(out->plugin)) != GW_OK)
        return GW_OK;
    out->loaded = 1;
    if (eng.ops->device_count(eng.impl, &out->device_count) != GW_OK)
        snprintf(out->why, sizeof(out->why), "%s", eng.ops->error(eng.impl));
    int n = out->device_count < 8 ? out->device_count : 8;
    for (int i = 0; i < n; i++)
        if (eng.ops->device_name(eng.impl, i, out->devices[i], sizeof(out->devices[i])) != GW_OK)
            snprintf(out->devices[i], sizeof(out->devices[i]), "device %d", i);
    eng.ops->destroy(eng.impl);
    dlclose(h);
    return GW_OK;
}
