/* driver: the real driver, found at run time.
 *
 * vr_real holds one typed pointer per entry of hooks.def, resolved once by
 * vr_driver_load() from libcuda.so.1 (already loaded by the program, else
 * loaded now) through the real dlsym. A pointer is NULL when the driver
 * lacks that entry point. The shim calls the driver only through vr_real,
 * never through its own exported names.
 */
#ifndef VR_DRIVER_H
#define VR_DRIVER_H

#include <stdbool.h>
#include <cuda.h>

struct vr_driver {
#define VR_HOOK(name, base, off, params, args) CUresult (CUDAAPI *name) params;
#define VR_REAL(name, params) CUresult (CUDAAPI *name) params;
#include "hooks.def"
};

extern struct vr_driver vr_real;

/* Returns 0, or -ENOENT when libcuda.so.1 cannot be loaded. */
int vr_driver_load(void);

/* True when addr lies inside libcuda's mapped segments (known after load). */
bool vr_driver_owns(const void *addr);
bool vr_driver_loaded(void);

/* The real dlsym, resolved on first use without calling the shim's own. */
void *vr_real_dlsym_fn(void *handle, const char *name);

/* "CUDA_ERROR_OUT_OF_MEMORY" or "CUresult 42". */
const char *vr_cu_name(CUresult r);

#endif
