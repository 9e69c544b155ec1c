/* vmm: device VMM support, granularity and peer access (vmm.h). */
#include "vmm.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "assert.h"
#include "driver.h"
#include "err.h"

/* peer_access[D]: a bit per device E that enabled peer access to D. */
static _Atomic uint64_t peer_access[VR_MAX_DEVICES];
_Atomic unsigned vr_peer_generation_; /* vmm.h */

/* Per device: 0 unknown, 1 supported, 2 not supported. */
static _Atomic int vmm_state[VR_MAX_DEVICES];
static _Atomic size_t granularity[VR_MAX_DEVICES];
/* Per device: whether cuMemCreate refused the POSIX fd handle type once. */
static _Atomic bool fd_refused[VR_MAX_DEVICES];

_Static_assert(VR_MAX_DEVICES <= 64, "a device's peers fit one 64-bit mask");

int vr_vmm_current_device(CUdevice *dev)
{
    CUresult r = vr_real.cuCtxGetDevice ? vr_real.cuCtxGetDevice(dev) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS)
        return vr_err_cu(r);
    return vr_vmm_valid_device(*dev) ? 0 : -ERANGE;
}

void vr_vmm_device_prop(CUmemAllocationProp *prop, CUdevice dev)
{
    memset(prop, 0, sizeof *prop);
    prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id = dev;
}

bool vr_vmm_shareable(int dev)
{
    return vr_vmm_valid_device(dev) && !atomic_load(&fd_refused[dev]);
}

void vr_vmm_unshareable(int dev)
{
    if (vr_vmm_valid_device(dev))
        atomic_store(&fd_refused[dev], true);
}

/* Asks the driver once per device. */
size_t vr_alloc_granularity_for(int dev)
{
    if (!vr_vmm_valid_device(dev))
        return 0;
    int state = atomic_load(&vmm_state[dev]);
    if (state == 0) {
        int supported = 0;
        size_t gran = 0;
        if (vr_real.cuDeviceGetAttribute &&
            vr_real.cuDeviceGetAttribute(&supported,
                CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev) != CUDA_SUCCESS)
            supported = 0;
        if (supported && vr_real.cuMemGetAllocationGranularity) {
            CUmemAllocationProp prop;
            vr_vmm_device_prop(&prop, dev);
            if (vr_real.cuMemGetAllocationGranularity(&gran, &prop,
                    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS || gran == 0)
                supported = 0;
        }
        atomic_store(&granularity[dev], supported ? gran : 0);
        atomic_store(&vmm_state[dev], supported ? 1 : 2);
        state = supported ? 1 : 2;
    }
    VR_ASSERT(state == 1 || state == 2);
    return state == 1 ? atomic_load(&granularity[dev]) : 0;
}

size_t vr_alloc_granularity(void)
{
    CUdevice dev;
    return vr_vmm_current_device(&dev) == 0 ? vr_alloc_granularity_for(dev) : 0;
}

bool vr_alloc_vmm_supported(void)
{
    return vr_alloc_granularity() != 0;
}

size_t vr_alloc_access_for(int dev, CUmemAccessDesc *desc, size_t cap)
{
    size_t n = 0;
    if (cap == 0 || !vr_vmm_valid_device(dev))
        return 0;
    desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc[n].location.id = dev;
    desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    n++;
    uint64_t peers = atomic_load(&peer_access[dev]);
    for (int d = 0; d < VR_MAX_DEVICES && n < cap; d++) {
        if (d == dev || !(peers & (UINT64_C(1) << d)))
            continue;
        desc[n].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        desc[n].location.id = d;
        desc[n].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        n++;
    }
    VR_ASSERT(n <= cap);
    return n;
}

bool vr_vmm_peer_add(int owner, int accessor)
{
    VR_ASSERT(vr_vmm_valid_device(owner) && vr_vmm_valid_device(accessor) && owner != accessor);
    uint64_t bit = UINT64_C(1) << accessor;
    if (atomic_fetch_or(&peer_access[owner], bit) & bit)
        return false; /* another context of the same device did already */
    vr_vmm_peer_bump();
    return true;
}

void vr_vmm_peer_bump(void)
{
    atomic_fetch_add_explicit(&vr_peer_generation_, 1, memory_order_release);
}
