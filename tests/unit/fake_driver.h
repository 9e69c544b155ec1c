/* fake_driver: the VMM, context and synchronization calls that the unit
 * suites over a fake driver share, as one set of stubs with knobs and
 * counters in `fk`. A suite calls fake_vmm_install() in its .init, after
 * setting the knobs it needs; the install zeroes the counters. Suites keep
 * their own stubs for what they check closely (events, SetParams,
 * cuMemAlloc).
 *
 * Knobs: gran (granularity), vmm (the device attribute every query
 * answers), next_va/reserve_gap/reserve_align/reserve_fixed (where a
 * reservation lands: after a gap, sizes rounded to reserve_align, or always
 * at reserve_fixed), bad_handle (a map of it fails OUT_OF_MEMORY),
 * fail_unmaps (that many unmaps fail UNKNOWN), fail_accesses (that many
 * cuMemSetAccess calls fail UNKNOWN; every call's range is kept in
 * access_va/access_size, the first 16). */
#ifndef VR_TEST_FAKE_DRIVER_H
#define VR_TEST_FAKE_DRIVER_H

#include <stdint.h>

#include "driver.h"

static struct fake_driver {
    size_t gran;
    int vmm;
    CUdeviceptr next_va, reserve_fixed;
    size_t reserve_gap, reserve_align;
    CUmemGenericAllocationHandle bad_handle;
    int fail_unmaps, fail_accesses;
    int maps, unmaps, releases, va_frees, syncs, accesses;
    CUdeviceptr access_va[16];
    size_t access_size[16];
    CUdeviceptr last_map_va;
    CUmemGenericAllocationHandle last_map_handle;
    CUdeviceptr last_reserve_va, last_va_free; /* what the last reserve gave, the last free named */
    size_t last_reserve_size, last_va_free_size;
} fk = { .gran = 0x1000, .vmm = 1, .next_va = 0x100000, .reserve_align = 1 };

static inline CUresult CUDAAPI fk_get_device(CUdevice *d)
{
    *d = 0;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_current(CUcontext *c)
{
    *c = (CUcontext)0x1;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_attr(int *v, CUdevice_attribute a, CUdevice d)
{
    (void)a;
    (void)d;
    *v = fk.vmm;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_gran(size_t *g, const CUmemAllocationProp *p,
                                       CUmemAllocationGranularity_flags o)
{
    (void)p;
    (void)o;
    *g = fk.gran;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_reserve(CUdeviceptr *p, size_t s, size_t a, CUdeviceptr h,
                                          unsigned long long f)
{
    (void)a;
    (void)h;
    (void)f;
    if (fk.reserve_fixed) {
        *p = fk.reserve_fixed;
        return CUDA_SUCCESS;
    }
    fk.next_va += fk.reserve_gap;
    *p = fk.next_va;
    fk.last_reserve_va = *p;
    fk.last_reserve_size = s;
    fk.next_va += (s + fk.reserve_align - 1) / fk.reserve_align * fk.reserve_align;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_va_free(CUdeviceptr p, size_t s)
{
    fk.last_va_free = p;
    fk.last_va_free_size = s;
    fk.va_frees++;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_create(CUmemGenericAllocationHandle *h, size_t s,
                                         const CUmemAllocationProp *p, unsigned long long f)
{
    (void)s;
    (void)p;
    (void)f;
    *h = 0x77;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_map(CUdeviceptr p, size_t s, size_t o,
                                      CUmemGenericAllocationHandle h, unsigned long long f)
{
    (void)s;
    (void)o;
    (void)f;
    if (fk.bad_handle && h == fk.bad_handle)
        return CUDA_ERROR_OUT_OF_MEMORY;
    fk.maps++;
    fk.last_map_va = p;
    fk.last_map_handle = h;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_unmap(CUdeviceptr p, size_t s)
{
    (void)p;
    (void)s;
    if (fk.fail_unmaps) {
        fk.fail_unmaps--;
        return CUDA_ERROR_UNKNOWN;
    }
    fk.unmaps++;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_access(CUdeviceptr p, size_t s, const CUmemAccessDesc *d,
                                         size_t n)
{
    (void)d;
    if (fk.accesses < 16) {
        fk.access_va[fk.accesses] = p;
        fk.access_size[fk.accesses] = s;
    }
    fk.accesses++;
    if (fk.fail_accesses) {
        fk.fail_accesses--;
        return CUDA_ERROR_UNKNOWN;
    }
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
static inline CUresult CUDAAPI fk_release(CUmemGenericAllocationHandle h)
{
    (void)h;
    fk.releases++;
    return CUDA_SUCCESS;
}
static inline CUresult CUDAAPI fk_sync(void)
{
    fk.syncs++;
    return CUDA_SUCCESS;
}

static inline void fake_vmm_install(void)
{
    fk.maps = fk.unmaps = fk.releases = fk.va_frees = fk.syncs = fk.accesses = 0;
    vr_real.cuCtxGetDevice = fk_get_device;
    vr_real.cuCtxGetCurrent = fk_current;
    vr_real.cuDeviceGetAttribute = fk_attr;
    vr_real.cuMemGetAllocationGranularity = fk_gran;
    vr_real.cuMemAddressReserve = fk_reserve;
    vr_real.cuMemAddressFree = fk_va_free;
    vr_real.cuMemCreate = fk_create;
    vr_real.cuMemMap = fk_map;
    vr_real.cuMemUnmap = fk_unmap;
    vr_real.cuMemSetAccess = fk_access;
    vr_real.cuMemRelease = fk_release;
    vr_real.cuCtxSynchronize = fk_sync;
}

#endif
