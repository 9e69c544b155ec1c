/* err: the shim's internal error codes.
 *
 * Internal functions return 0 or a negative code: -errno for the shim's own
 * failures, or a driver result carried unchanged (vr_err_cu). The hook turns
 * a code into a CUresult once, with vr_err_to_cu, so the program always sees
 * the driver's own error when the driver produced one.
 */
#ifndef VR_ERR_H
#define VR_ERR_H

#include <cuda.h>
#include <errno.h>

#define VR_ECU_BASE 0x40000000

static inline int vr_err_cu(CUresult r)
{
    return r == CUDA_SUCCESS ? 0 : -(VR_ECU_BASE + (int)r);
}

static inline CUresult vr_err_to_cu(int rc)
{
    if (rc == 0)
        return CUDA_SUCCESS;
    if (rc <= -VR_ECU_BASE)
        return (CUresult)(-rc - VR_ECU_BASE);
    switch (-rc) {
    case EINVAL: return CUDA_ERROR_INVALID_VALUE;
    case ENOMEM: return CUDA_ERROR_OUT_OF_MEMORY;
    case ENOENT: return CUDA_ERROR_NOT_FOUND;
    case ENOTSUP: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_UNKNOWN;
    }
}

#endif
