/* alloc_query: what the program asks about memory the shim backs, answered
 * as for native cuMemAlloc memory (alloc.h), and peer access, which gives
 * the owner's VMM-backed allocations to the new accessor.
 */
#include "alloc_int.h"

#include <stdlib.h>
#include <string.h>

#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "err.h"

int vr_alloc_mem_info(size_t *free_bytes, size_t *total)
{
    /* Memory freed in stream order whose stream is done goes back first, so
     * the answer is the one the driver alone would give; memory the cache
     * keeps counts as free, as it would be without the shim (an allocation
     * that needs it gets it: see vr_alloc_create). */
    vr_park_drain(false);
    CUdevice dev = -1;
    bool kept_some = vr_cache_any() && vr_vmm_current_device(&dev) == 0;
    if (kept_some)
        vr_cache_settle(dev, 0);
    CUresult r = vr_real.cuMemGetInfo_v2(free_bytes, total);
    if (r == CUDA_SUCCESS && kept_some && free_bytes && total) {
        uint64_t idle = vr_cache_idle_bytes(dev);
        size_t room = *total > *free_bytes ? *total - *free_bytes : 0;
        *free_bytes += idle < room ? (size_t)idle : room;
    }
    return vr_err_cu(r);
}

int vr_alloc_address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct vr_alloc_info rec = { 0 };
    CUcontext ctx = NULL;
    bool kept_mem = false;
    int opened = 0;
    if ((vr_reg_find_span(dptr, &rec) != 0 || !rec.vmm) && !(kept_mem = vr_cache_holds(dptr)) &&
        !(opened = vr_alloc_ipc_range(dptr, &rec.base, &rec.size)))
        return vr_err_cu(vr_real.cuMemGetAddressRange_v2(pbase, psize, dptr));
    int rc = vr_alloc_need_context(&ctx);
    if (rc != 0)
        return rc;
    /* memory opened by IPC: the exporter's allocation, as the driver maps it */
    if (opened < 0)
        return vr_err_cu(CUDA_ERROR_NOT_FOUND);
    /* Padding, guard gap and kept memory are the shim's, not memory the
     * program has. */
    if (kept_mem || dptr - rec.base >= rec.size)
        return vr_err_cu(CUDA_ERROR_NOT_FOUND);
    if (pbase)
        *pbase = rec.base;
    if (psize)
        *psize = rec.size;
    return 0;
}

/* Native cuMemAlloc memory has no allocation handle. */
int vr_alloc_retain_handle(CUmemGenericAllocationHandle *handle, void *addr)
{
    struct vr_alloc_info rec;
    CUdeviceptr at = (CUdeviceptr)(uintptr_t)addr;
    if (!handle || ((vr_reg_find_span(at, &rec) != 0 || !rec.vmm) && !vr_cache_holds(at)))
        return vr_err_cu(vr_real.cuMemRetainAllocationHandle(handle, addr));
    return vr_err_cu(CUDA_ERROR_INVALID_VALUE);
}

/* Native memory is not a VMM mapping: the driver's own argument checks
 * first (by asking it), then the answer it gives for unmapped memory. */
int vr_alloc_get_access(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    struct vr_alloc_info rec;
    if ((vr_reg_find_span(ptr, &rec) != 0 || !rec.vmm) && !vr_cache_holds(ptr))
        return vr_err_cu(vr_real.cuMemGetAccess(flags, location, ptr));
    unsigned long long ignored;
    CUresult r = vr_real.cuMemGetAccess(flags ? &ignored : NULL, location, ptr);
    return vr_err_cu(r != CUDA_SUCCESS ? r : CUDA_ERROR_INVALID_VALUE);
}

/* Buffer ids the shim gives its allocations: the driver's id names the
 * physical memory, which a block reused from the cache keeps, while a
 * native cuMemAlloc gets a new one every time (registration caches such as
 * UCX's and NCCL's key on it). The driver counts its ids up from small
 * numbers; the top bit keeps the shim's apart. */
#define VR_BUFFER_ID_BIT (UINT64_C(1) << 63)

/* Overrides, in the driver's answer for a live shim-backed allocation, what
 * would show the padded mapping, the reservation or the cache, and the
 * IPC answers: cuIpcGetMemHandle works on memory created exportable
 * (alloc_ipc.c), and cuMemAlloc memory has no shareable handle type. */
static void native_attribute(const struct vr_alloc_info *rec, CUpointer_attribute a, void *data)
{
    uint64_t v;
    int flag; /* the 4-byte answers */
    switch (a) {
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        flag = rec->shareable;
        memcpy(data, &flag, sizeof flag);
        return;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        flag = CU_MEM_HANDLE_TYPE_NONE;
        memcpy(data, &flag, sizeof flag);
        return;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        if (!rec->ctx)
            return;
        memcpy(data, &rec->ctx, sizeof rec->ctx);
        return;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        v = rec->base;
        break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        v = rec->size;
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        v = VR_BUFFER_ID_BIT | rec->serial;
        break;
    default:
        return;
    }
    memcpy(data, &v, sizeof v); /* each of these is 8 bytes wide */
}

int vr_alloc_pointer_attributes(bool single, unsigned n, CUpointer_attribute *attrs, void **data,
                                CUdeviceptr ptr)
{
    struct vr_alloc_info rec = { 0 };
    bool kept_mem = false;
    bool ours = (vr_reg_find_span(ptr, &rec) == 0 && rec.vmm) || (kept_mem = vr_cache_holds(ptr));
    /* Padding, guard gap and kept memory are no allocation of the
     * program's: the driver's answer for an address that is none (0). */
    CUdeviceptr ask = ours && (kept_mem || ptr - rec.base >= rec.size) ? 0 : ptr;
    CUresult r = single ? vr_real.cuPointerGetAttribute(data[0], attrs[0], ask)
                        : vr_real.cuPointerGetAttributes(n, attrs, data, ask);
    if (r != CUDA_SUCCESS || !ours || ask == 0)
        return vr_err_cu(r);
    for (unsigned i = 0; i < n; i++)
        if (data[i])
            native_attribute(&rec, attrs[i], data[i]);
    return 0;
}

/* ---- peers ---- */

static int context_device(CUcontext ctx, CUdevice *dev)
{
    CUresult r = vr_real.cuCtxPushCurrent_v2(ctx);
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    int rc = vr_vmm_current_device(dev);
    CUcontext popped;
    vr_real.cuCtxPopCurrent_v2(&popped);
    return rc;
}

/* Called in the accessor's context with the owner's context as the peer:
 * the accessor's device may now touch the owner device's memory. */
int vr_alloc_enable_peer(CUcontext peer, unsigned int flags)
{
    CUresult r = vr_real.cuCtxEnablePeerAccess(peer, flags);
    if (r != CUDA_SUCCESS || vr_alloc_cfg.mode != VR_MODE_PROFILED)
        return vr_err_cu(r);
    CUdevice accessor, owner;
    if (vr_vmm_current_device(&accessor) != 0 || context_device(peer, &owner) != 0 ||
        accessor == owner)
        return 0;
    if (!vr_vmm_peer_add(owner, accessor))
        return 0; /* another context of the same device did already */

    /* The owner's VMM allocations: copied out so no driver call runs under
     * the lock. One freed meanwhile only makes cuMemSetAccess fail. */
    size_t n = 0;
    struct vr_reg_span *todo = vr_reg_vmm_of_device(owner, &n);
    CUmemAccessDesc access[VR_MAX_DEVICES];
    size_t na = vr_alloc_access_for(owner, access, VR_MAX_DEVICES);
    vr_capture_relax(); /* the program's call is the peer's enabling, not this */
    for (size_t i = 0; i < n; i++)
        vr_real.cuMemSetAccess(todo[i].base, todo[i].padded, access, na);
    vr_capture_restore();
    free(todo);
    /* Again once done: a free that read the generation before the first
     * bump may have left the registry before the walk above, and its cached
     * memory must see a newer generation when reused (reuse). */
    vr_vmm_peer_bump();
    return 0;
}
