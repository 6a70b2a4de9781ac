/*
 * cuda_status.cu - the one place where CUDA's errors become gw_status_t.
 *
 * Every launcher of collectives/cuda returns a gw_status_t, and CUDA's
 * errors reach it only through gw__cuda_status: out of memory stays out of
 * memory, bad pointers and sizes are invalid arguments, a machine without a
 * usable device or a kernel built for other GPUs is unsupported, and
 * everything else (a fault in a kernel, a lost device) is a system
 * failure. The launchers log nothing (they have no logger): the caller,
 * which knows which collective was running, logs once with
 * gw_status_str() and, where it wants CUDA's own words, cudaGetErrorString
 * of the error it peeks.
 */
#include "collectives/cuda/cuda_device.cuh"
#include "collectives/cuda/cuda_kernels.h"

gw_status_t gw__cuda_status(cudaError_t err)
{
    switch (err) {
    case cudaSuccess:
        return GW_OK;
    case cudaErrorMemoryAllocation:
        return GW_ERR_NO_MEMORY;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidMemcpyDirection:
    case cudaErrorInvalidConfiguration:
    case cudaErrorInvalidResourceHandle:
        return GW_ERR_INVALID_ARG;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorNotSupported:
    case cudaErrorInvalidDevice:
        return GW_ERR_UNSUPPORTED;
    case cudaErrorLaunchTimeout:
        return GW_ERR_TIMEOUT;
    default:
        return GW_ERR_SYSTEM;
    }
}

extern "C" gw_status_t gw__cuda_status_of(int cuda_error)
{
    return gw__cuda_status((cudaError_t)cuda_error);
}
