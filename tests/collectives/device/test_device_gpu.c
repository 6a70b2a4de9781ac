/*
 * test_device_gpu.c - device buffers in real GPU memory need a GPU and its
 * driver: here the test only says whether one is present. The checks on a
 * GPU (issue #19 item 5: collectives with cudaMalloc'd buffers on 2 and 4
 * ranks, staging throughput against pinned copies) run in the GPU
 * session's script; without a GPU this test reports itself skipped, with
 * the reason the plugin gave.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "gradwire.h"

/* Device buffers on a real GPU need one; they are checked by the GPU
 * session's script, not here. */
Test(staging, real_device_memory)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/libgradwire-cuda.so", GW_BUILD_DIR);
    setenv("GW_CUDA_PLUGIN", path, 1);
    gw_cuda_info_t ci;
    gw_cuda_info(&ci);
    unsetenv("GW_CUDA_PLUGIN");
    if (!ci.loaded)
        cr_skip_test("needs a CUDA GPU and driver: %s", ci.why);
    cr_skip_test("a GPU is here (%s): run the GPU checks of issue #19 item 5 on it", ci.devices[0]);
}
