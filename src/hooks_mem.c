/* hooks_mem: the hooks of the memory entry points (hooks.def), behind the
 * exported wrappers of interpose.c: allocations backed by the VMM API,
 * frees, the queries that must answer as for native memory, and the
 * allocators that get kept memory back when they run out.
 */
#include <stdatomic.h>
#include <stddef.h>

#include "alloc.h"
#include "driver.h"
#include "err.h"
#include "exec.h"
#include "hook.h"
#include "layout.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"

/* ---- memory ----------------------------------------------------------- */

/* The entry points that draw device memory (hooks.def's ALLOC): the shim's
 * kept memory is free memory as far as the program can tell, so an
 * allocation that ran out of it gets it back and tries once more. Only then:
 * a retry after nothing went back would turn one failing call into two. */
#define VR_BODY_FWD(name, params, args)
#define VR_BODY_SEEN(name, params, args)
#define VR_BODY_LAUNCH(name, params, args)
#define VR_BODY_FULL(name, params, args)
#define VR_BODY_PROC(name, params, args)
#define VR_BODY_ALLOC(name, params, args)                                       \
    CUresult vr_on_##name params                                         \
    {                                                                           \
        CUresult r = vr_real.name args;                                         \
        if (r == CUDA_ERROR_OUT_OF_MEMORY && vr_alloc_reclaim())                \
            r = vr_real.name args;                                              \
        return r;                                                               \
    }
#define VR_HOOK(name, base, off, params, args) VR_BODY_##off(name, params, args)
#include "hooks.def"

CUresult vr_on_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    vr_hook_note_start();
    return vr_err_to_cu(vr_alloc_create(dptr, bytesize));
}

CUresult vr_on_cuMemFree_v2(CUdeviceptr dptr)
{
    return vr_err_to_cu(vr_alloc_free(dptr));
}

CUresult vr_on_cuMemFreeAsync(CUdeviceptr dptr, CUstream stream)
{
    return vr_err_to_cu(vr_alloc_free_async(dptr, stream, false));
}

CUresult vr_on_cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream stream)
{
    return vr_err_to_cu(vr_alloc_free_async(dptr, stream, true));
}

CUresult vr_on_cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr)
{
    return vr_err_to_cu(vr_alloc_ipc_get(handle, dptr));
}

CUresult vr_on_cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    return vr_err_to_cu(vr_alloc_ipc_open(pdptr, handle, flags));
}

CUresult vr_on_cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    return vr_err_to_cu(vr_alloc_ipc_close(dptr));
}

CUresult vr_on_cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    return vr_err_to_cu(vr_alloc_mem_info(free_bytes, total));
}

CUresult vr_on_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    return vr_err_to_cu(vr_alloc_address_range(pbase, psize, dptr));
}

CUresult vr_on_cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                            CUdeviceptr ptr)
{
    return vr_err_to_cu(vr_alloc_pointer_attributes(true, 1, &attribute, &data, ptr));
}

CUresult vr_on_cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attributes,
                                             void **data, CUdeviceptr ptr)
{
    return vr_err_to_cu(vr_alloc_pointer_attributes(false, n, attributes, data, ptr));
}

CUresult vr_on_cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    return vr_err_to_cu(vr_alloc_retain_handle(handle, addr));
}

CUresult vr_on_cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                     CUdeviceptr ptr)
{
    return vr_err_to_cu(vr_alloc_get_access(flags, location, ptr));
}

CUresult vr_on_cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    return vr_err_to_cu(vr_alloc_enable_peer(peer, flags));
}
