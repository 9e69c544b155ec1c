/* simcudart: kernels. nvcc's host code registers each compilation unit's
 * fatbin and kernels from a constructor (__cudaRegisterFatBinary,
 * __cudaRegisterFunction per kernel, __cudaRegisterFatBinaryEnd), and each
 * host stub launches through __cudaGetKernel (once), the configuration the
 * <<<>>> pushed (__cudaPopCallConfiguration) and __cudaLaunchKernel(_ptsz).
 * Modules are loaded lazily, per device, at the first use of one of their
 * kernels (as NVIDIA's runtime does by default), from the fatbin's PTX. */
#include "rt.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_KDEV 8 /* devices with their own loaded copy of a module */

struct rt_module {
    void *slot; /* &slot is the handle the registration calls pass around */
    const void *wrapper;
    pthread_mutex_t mu;
    CUmodule mod[RT_KDEV];
    cudaError_t err[RT_KDEV];
    char *ptx;
};

struct rt_func {
    struct rt_func *next;
    const void *host;
    struct rt_module *m;
    char *name;
    _Atomic(CUfunction) fn[RT_KDEV];
};

/* A device variable nvcc registered (__cudaRegisterVar): found by its host
 * shadow, resolved by name in its module (cuModuleGetGlobal). */
struct rt_var {
    struct rt_var *next;
    const void *host;
    struct rt_module *m;
    char *name;
};

/* Pushed at registration (constructors), never removed: readers walk them
 * without a lock. */
static _Atomic(struct rt_func *) g_funcs;
static _Atomic(struct rt_var *) g_vars;

/* A `__managed__` variable: the host reaches it through a pointer nvcc keeps
 * (slot), which __cudaInitModule points at the variable (simcuda's device
 * memory is host memory). */
struct rt_mvar {
    struct rt_mvar *next;
    void **slot;
    struct rt_module *m;
    char *name;
};
static _Atomic(struct rt_mvar *) g_mvars;

RT_API void **__cudaRegisterFatBinary(void *fatCubin)
{
    struct rt_module *m = calloc(1, sizeof *m);
    if (!m) {
        fprintf(stderr, "simcudart: out of memory registering a fatbin\n");
        abort();
    }
    m->wrapper = fatCubin;
    pthread_mutex_init(&m->mu, NULL);
    return &m->slot;
}

RT_API void __cudaRegisterFatBinaryEnd(void **handle)
{
    (void)handle;
}

/* At exit: the driver may already be going away; modules stay loaded. */
RT_API void __cudaUnregisterFatBinary(void **handle)
{
    (void)handle;
}

RT_API void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun,
                                   const char *deviceName, int thread_limit, uint3 *tid,
                                   uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize)
{
    (void)deviceFun, (void)thread_limit, (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
    struct rt_func *f = calloc(1, sizeof *f);
    if (!f || !(f->name = strdup(deviceName))) {
        fprintf(stderr, "simcudart: out of memory registering %s\n", deviceName);
        abort();
    }
    f->host = hostFun;
    f->m = (struct rt_module *)(void *)handle;
    f->next = atomic_load_explicit(&g_funcs, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&g_funcs, &f->next, f, memory_order_release,
                                                  memory_order_relaxed)) {
    }
}

/* hostVar is the variable's host shadow, the address a program names it by
 * (cudaMemcpyToSymbol(sym, ...) passes &sym); deviceName its PTX name. The
 * size and kind are the module's to say (cuModuleGetGlobal). */
RT_API void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress,
                              const char *deviceName, int ext, size_t size, int constant, int global)
{
    (void)deviceAddress, (void)ext, (void)size, (void)constant, (void)global;
    struct rt_var *v = calloc(1, sizeof *v);
    if (!v || !(v->name = strdup(deviceName))) {
        fprintf(stderr, "simcudart: out of memory registering %s\n", deviceName);
        abort();
    }
    v->host = hostVar;
    v->m = (struct rt_module *)(void *)handle;
    v->next = atomic_load_explicit(&g_vars, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&g_vars, &v->next, v, memory_order_release,
                                                  memory_order_relaxed)) {
    }
}

RT_API void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                                     const char *deviceName, int ext, size_t size, int constant,
                                     int global)
{
    (void)deviceAddress, (void)ext, (void)size, (void)constant, (void)global;
    struct rt_mvar *v = calloc(1, sizeof *v);
    if (!v || !(v->name = strdup(deviceName))) {
        fprintf(stderr, "simcudart: out of memory registering %s\n", deviceName);
        abort();
    }
    v->slot = hostVarPtrAddress;
    v->m = (struct rt_module *)(void *)handle;
    v->next = atomic_load_explicit(&g_mvars, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&g_mvars, &v->next, v, memory_order_release,
                                                  memory_order_relaxed)) {
    }
}

static cudaError_t module_on(struct rt_module *m, int dev, const char *what);

/* nvcc's host code calls it (through __nv_init_managed_rt) before its first
 * access to a `__managed__` variable of the module, and takes 0 for "not
 * initialized": the module is loaded on the current device and each
 * managed variable's host pointer set to its address there. Assumption:
 * the variables live in the first device the program touches them from
 * (managed memory is one copy for every device on a real system). */
RT_API char __cudaInitModule(void **handle)
{
    struct rt_module *m = (struct rt_module *)(void *)handle;
    int dev = rt_device();
    if (rt_enter() != cudaSuccess || dev >= RT_KDEV)
        return 0;
    pthread_mutex_lock(&m->mu);
    cudaError_t e = module_on(m, dev, "a __managed__ variable");
    CUmodule mod = m->mod[dev];
    pthread_mutex_unlock(&m->mu);
    if (e)
        return 0;
    for (struct rt_mvar *v = atomic_load_explicit(&g_mvars, memory_order_acquire); v; v = v->next) {
        CUdeviceptr a;
        size_t size;
        if (v->m != m)
            continue;
        if (RT_CALL(cuModuleGetGlobal, (&a, &size, mod, v->name)) != CUDA_SUCCESS)
            return 0;
        *v->slot = (void *)(uintptr_t)a;
    }
    return 1;
}

static struct rt_func *func_of(const void *host)
{
    for (struct rt_func *f = atomic_load_explicit(&g_funcs, memory_order_acquire); f; f = f->next)
        if (f->host == host || (const void *)f == host) /* a stub or a cudaKernel_t */
            return f;
    return NULL;
}

/* Under m->mu: m loaded on dev (once; a failure is remembered). what
 * names the kernel or variable that needed it, for the message. */
static cudaError_t module_on(struct rt_module *m, int dev, const char *what)
{
    cudaError_t e = m->err[dev];
    if (!e && !m->mod[dev]) {
        if (!m->ptx && rt_fatbin_ptx(m->wrapper, &m->ptx) != 0) {
            fprintf(stderr, "simcudart: no PTX in the fatbin of %s (simcuda loads PTX only)\n",
                    what);
            e = cudaErrorInvalidKernelImage;
        } else {
            CUresult r = RT_CALL(cuModuleLoadData, (&m->mod[dev], m->ptx));
            if (r != CUDA_SUCCESS)
                e = (cudaError_t)r;
        }
        m->err[dev] = e;
    }
    return e;
}

static cudaError_t load(struct rt_func *f, int dev, CUfunction *out)
{
    struct rt_module *m = f->m;
    pthread_mutex_lock(&m->mu);
    cudaError_t e = module_on(m, dev, f->name);
    CUfunction fn = NULL;
    if (!e && RT_CALL(cuModuleGetFunction, (&fn, m->mod[dev], f->name)) != CUDA_SUCCESS)
        e = cudaErrorInvalidDeviceFunction; /* simcuda runs the standard kernels only */
    pthread_mutex_unlock(&m->mu);
    if (!e) {
        atomic_store_explicit(&f->fn[dev], fn, memory_order_release);
        *out = fn;
    }
    return e;
}

CUfunction rt_function(const void *host, cudaError_t *err)
{
    struct rt_func *f = host ? func_of(host) : NULL;
    int dev = rt_device();
    if (!f || dev >= RT_KDEV) {
        *err = cudaErrorInvalidDeviceFunction;
        return NULL;
    }
    CUfunction fn = atomic_load_explicit(&f->fn[dev], memory_order_acquire);
    if (!fn && (*err = load(f, dev, &fn)) != cudaSuccess)
        return NULL;
    return fn;
}

cudaError_t rt_symbol(const void *symbol, CUdeviceptr *addr, size_t *size)
{
    struct rt_var *v = atomic_load_explicit(&g_vars, memory_order_acquire);
    while (v && (!symbol || v->host != symbol))
        v = v->next;
    int dev = rt_device();
    if (!v)
        return cudaErrorInvalidSymbol;
    if (dev >= RT_KDEV)
        return cudaErrorInvalidDevice;
    pthread_mutex_lock(&v->m->mu);
    cudaError_t e = module_on(v->m, dev, v->name);
    CUmodule mod = v->m->mod[dev];
    pthread_mutex_unlock(&v->m->mu);
    if (e)
        return e;
    CUresult r = RT_CALL(cuModuleGetGlobal, (addr, size, mod, v->name));
    return r == CUDA_SUCCESS ? cudaSuccess
           : r == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidSymbol : (cudaError_t)r;
}

void *rt_host_of(CUfunction fn)
{
    for (struct rt_func *f = atomic_load_explicit(&g_funcs, memory_order_acquire); f; f = f->next)
        for (int d = 0; d < RT_KDEV; d++)
            if (fn && atomic_load_explicit(&f->fn[d], memory_order_acquire) == fn)
                return (void *)(uintptr_t)f->host;
    return NULL;
}

RT_API cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *fun)
{
    struct rt_func *f = func_of(fun);
    if (!kernel || !f)
        return rt_ret(cudaErrorInvalidDeviceFunction);
    *kernel = (cudaKernel_t)(void *)f;
    return cudaSuccess;
}

/* ---- launch configuration ----------------------------------------------- */

struct config {
    dim3 grid, block;
    size_t shmem;
    void *stream;
};

#define RT_CONFIGS 32
static __thread struct config t_cfg[RT_CONFIGS];
static __thread int t_ncfg;

RT_API unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                            struct CUstream_st *stream)
{
    if (t_ncfg == RT_CONFIGS)
        return 1;
    t_cfg[t_ncfg++] = (struct config){ gridDim, blockDim, sharedMem, stream };
    return 0;
}

RT_API cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                              void *stream)
{
    if (!t_ncfg)
        return rt_ret(cudaErrorMissingConfiguration);
    struct config c = t_cfg[--t_ncfg];
    *gridDim = c.grid;
    *blockDim = c.block;
    *sharedMem = c.shmem;
    memcpy(stream, &c.stream, sizeof c.stream);
    return cudaSuccess;
}

/* ---- launches --------------------------------------------------------------- */

static cudaError_t launch(const void *fun, dim3 g, dim3 b, void **args, size_t shmem,
                          cudaStream_t s, bool pt)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    CUfunction f = rt_function(fun, &e);
    if (!f)
        return rt_ret(e);
    CUresult r = pt ? RT_CALL(cuLaunchKernel_pt, (f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shmem,
                                                  (CUstream)s, args, NULL))
                    : RT_CALL(cuLaunchKernel, (f, g.x, g.y, g.z, b.x, b.y, b.z, (unsigned)shmem,
                                               (CUstream)s, args, NULL));
    return rt_cu(r);
}

RT_API cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                    size_t sharedMem, cudaStream_t stream)
{
    return launch(func, gridDim, blockDim, args, sharedMem, stream, false);
}

RT_API cudaError_t cudaLaunchKernel_ptsz(const void *func, dim3 gridDim, dim3 blockDim, void **args,
                                         size_t sharedMem, cudaStream_t stream)
{
    return launch(func, gridDim, blockDim, args, sharedMem, stream, true);
}

RT_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                                      size_t sharedMem, cudaStream_t stream)
{
    return launch((const void *)kernel, gridDim, blockDim, args, sharedMem, stream, false);
}

RT_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                           void **args, size_t sharedMem, cudaStream_t stream)
{
    return launch((const void *)kernel, gridDim, blockDim, args, sharedMem, stream, true);
}

/* ---- function attributes -------------------------------------------------- */

RT_API cudaError_t cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    if (!attr)
        return rt_ret(cudaErrorInvalidValue);
    CUfunction f = rt_function(func, &e);
    if (!f)
        return rt_ret(e);
    static const CUfunction_attribute which[] = {
        CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,   CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES,
        CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES,    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
        CU_FUNC_ATTRIBUTE_NUM_REGS,            CU_FUNC_ATTRIBUTE_PTX_VERSION,
        CU_FUNC_ATTRIBUTE_BINARY_VERSION,      CU_FUNC_ATTRIBUTE_CACHE_MODE_CA,
        CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
        CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
    };
    int v[sizeof which / sizeof which[0]];
    for (size_t i = 0; i < sizeof which / sizeof which[0]; i++) {
        CUresult r = RT_CALL(cuFuncGetAttribute, (&v[i], which[i], f));
        if (r != CUDA_SUCCESS)
            return rt_cu(r);
    }
    /* Output written only once every attribute was answered. */
    *attr = (struct cudaFuncAttributes){
        .sharedSizeBytes = (size_t)v[0], .constSizeBytes = (size_t)v[1],
        .localSizeBytes = (size_t)v[2], .maxThreadsPerBlock = v[3], .numRegs = v[4],
        .ptxVersion = v[5], .binaryVersion = v[6], .cacheModeCA = v[7],
        .maxDynamicSharedSizeBytes = v[8], .preferredShmemCarveout = v[9],
    };
    return cudaSuccess;
}

RT_API cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    CUfunction f = rt_function(func, &e);
    if (!f)
        return rt_ret(e);
    /* The runtime's attribute numbers are the driver's. */
    return rt_cu(RT_CALL(cuFuncSetAttribute, (f, (CUfunction_attribute)attr, value)));
}
