/* driver: the real driver, found at run time.
 *
 * vr_real holds one typed pointer per entry of hooks.def. A pointer is NULL
 * when the driver lacks that entry point. The shim calls the driver only
 * through vr_real, never through its own exported names.
 *
 * Finding the driver is split in two so that no loader call ever happens
 * under a lock: vr_driver_resolve() makes the loader calls (dlopen of
 * libcuda.so.1, already loaded by the program or loaded now; the real
 * dlsym; dl_iterate_phdr for its address range) into a caller-owned image
 * and writes no global, so concurrent callers may each resolve (dlopen is
 * refcounted). vr_driver_publish() then copies one image into vr_real and
 * the range, and only after everything is set publishes the handle with a
 * release store; vr_driver_loaded()/vr_driver_owns() acquire it.
 */
#ifndef VR_DRIVER_H
#define VR_DRIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <cuda.h>

struct vr_driver {
#define VR_HOOK(name, base, off, params, args) CUresult (CUDAAPI *name) params;
#define VR_REAL(name, params) CUresult (CUDAAPI *name) params;
#include "hooks.def"
};

extern __attribute__((visibility("hidden"))) struct vr_driver vr_real;

/* One entry of the exec layer's per-thread cache of the execs a thread
 * used last (exec_internal.h says what it means). */
struct vr_exec;
struct vr_exec_cached {
    CUgraphExec handle;
    struct vr_exec *e;
    uint64_t serial;
};
#define VR_EXEC_CACHED 4

/* All the shim's thread-local state, one object: the absorbed path reads
 * the exec cache and the guard through one GOT entry (initial-exec TLS,
 * meson: -ftls-model, so no call either). Defined in exec_table.c. */
struct vr_thread {
    struct vr_exec_cached last_exec[VR_EXEC_CACHED];
    /* Non-zero while this thread runs the shim's own work: a driver entry
     * point reached again from inside it (a driver calling its exported
     * names, a host callback, the loader) goes straight to the driver. A
     * hook's complete path sets it on entry; a shorter path that calls the
     * driver with the exec's lock held (the absorbed path's direct update)
     * sets it around that call. A path that drops every lock before its
     * driver call (a passing exec's update, mode off) leaves it clear, as
     * mode off does. */
    int in_shim;
};
extern __attribute__((visibility("hidden"))) _Thread_local struct vr_thread vr_thread;
#define vr_in_shim (vr_thread.in_shim)

struct vr_driver_image {
    void *handle;          /* NULL: libcuda.so.1 could not be loaded */
    uintptr_t lo, hi;      /* libcuda's mapped segments */
    struct vr_driver fns;
};

/* Returns 0, or -ENOENT (and an empty image) when libcuda.so.1 cannot be
 * loaded. Loader calls only: the caller must hold no lock. */
int vr_driver_resolve(struct vr_driver_image *img);

/* Makes img the driver (at most once per process). */
void vr_driver_publish(const struct vr_driver_image *img);

/* True when addr lies inside libcuda's mapped segments (known after load). */
bool vr_driver_owns(const void *addr);
bool vr_driver_loaded(void);

/* The real dlsym, resolved on first use without calling the shim's own. */
void *vr_real_dlsym_fn(void *handle, const char *name);

/* "CUDA_ERROR_OUT_OF_MEMORY" or "CUresult 42". */
const char *vr_cu_name(CUresult r);

#endif
