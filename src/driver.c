#include "driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

struct vr_driver vr_real;

/* Published last, with release: whoever acquires it non-NULL sees vr_real
 * and the range complete. */
static void *_Atomic cuda_handle;
static uintptr_t cuda_lo, cuda_hi;

/* Read by the dlsym stub (dlsym_stub.S) without any call. */
void *_Atomic vr_real_dlsym __attribute__((visibility("hidden")));

typedef void *(*dlsym_fn)(void *, const char *);

static const char *const dlsym_versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};

/* RTLD_NEXT from here is right: the shim wants the dlsym after itself.
 * Not instrumented: a sanitizer runtime resolves its interceptors with
 * dlsym(RTLD_NEXT, ...) before its shadow memory exists, and lands here. */
__attribute__((visibility("hidden"), no_sanitize("address", "undefined", "thread")))
void *vr_resolve_real_dlsym(void)
{
    void *fn = atomic_load_explicit(&vr_real_dlsym, memory_order_acquire);
    if (fn)
        return fn;
    for (size_t i = 0; i < sizeof dlsym_versions / sizeof dlsym_versions[0] && !fn; i++)
        fn = dlvsym(RTLD_NEXT, "dlsym", dlsym_versions[i]);
    atomic_store_explicit(&vr_real_dlsym, fn, memory_order_release);
    return fn;
}

void *vr_real_dlsym_fn(void *handle, const char *name)
{
    dlsym_fn fn = __extension__(dlsym_fn)vr_resolve_real_dlsym();
    return fn ? fn(handle, name) : NULL;
}

static int find_segments(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct vr_driver_image *img = data;
    if (info->dlpi_addr != img->lo)
        return 0;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < lo)
            lo = start;
        if (start + ph->p_memsz > hi)
            hi = start + ph->p_memsz;
    }
    img->lo = lo;
    img->hi = hi;
    return 1;
}

int vr_driver_resolve(struct vr_driver_image *img)
{
    memset(img, 0, sizeof *img);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h)
        return -ENOENT;
#define VR_HOOK(name, base, off, params, args) \
    *(void **)&img->fns.name = vr_real_dlsym_fn(h, #name);
#define VR_REAL(name, params) VR_HOOK(name, name, FWD, params, ())
#include "hooks.def"
    Dl_info info;
    void *probe = vr_real_dlsym_fn(h, "cuInit");
    if (probe && dladdr(probe, &info) && info.dli_fbase) {
        /* dlpi_addr is the load bias; for a shared object it equals the
         * base. `lo` carries the base in, the range comes out. */
        img->lo = (uintptr_t)info.dli_fbase;
        if (dl_iterate_phdr(find_segments, img) == 0)
            img->lo = 0;
    }
    if (img->hi <= img->lo)
        img->lo = img->hi = 0; /* no range: nothing is libcuda's */
    img->handle = h;
    return 0;
}

void vr_driver_publish(const struct vr_driver_image *img)
{
    vr_real = img->fns;
    cuda_lo = img->lo;
    cuda_hi = img->hi;
    atomic_store_explicit(&cuda_handle, img->handle, memory_order_release);
}

bool vr_driver_loaded(void)
{
    return atomic_load_explicit(&cuda_handle, memory_order_acquire) != NULL;
}

bool vr_driver_owns(const void *addr)
{
    if (!atomic_load_explicit(&cuda_handle, memory_order_acquire))
        return false;
    uintptr_t a = (uintptr_t)addr;
    return a >= cuda_lo && a < cuda_hi;
}

const char *vr_cu_name(CUresult r)
{
    const char *name = NULL;
    if (vr_real.cuGetErrorName && vr_real.cuGetErrorName(r, &name) == CUDA_SUCCESS && name)
        return name;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "CUresult %d", (int)r);
    return buf;
}
