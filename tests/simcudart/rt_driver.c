/* simcudart: the driver table, initialization, contexts and the last error.
 *
 * Like NVIDIA's runtime, the driver is reached through dlopen("libcuda.so.1")
 * and cuGetProcAddress_v2 only, with the versions and flags that runtime asks
 * for (driver.def); an interposer on the driver sees the same requests. */
#include "rt.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct rt_driver rt_d;

struct want {
    const char *name;
    int version;
    cuuint64_t flags;
    void **slot;
};

static const struct want wants[] = {
#define RT_D(name, ver) {#name, ver, CU_GET_PROC_ADDRESS_DEFAULT, (void **)&rt_d.name},
#define RT_T(name, ver, sfx)                                                   \
    {#name, ver, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, (void **)&rt_d.name##_pt},
#include "driver.def"
#undef RT_D
#undef RT_T
};

#define RT_MAX_DEV 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static cudaError_t g_init_err;
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext g_primary[RT_MAX_DEV];

static __thread int t_dev;
static __thread CUcontext t_ctx; /* the primary context this thread last made current */
static __thread cudaError_t t_last;

static void init(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "simcudart: cannot load libcuda.so.1: %s\n", dlerror());
        g_init_err = cudaErrorInsufficientDriver;
        return;
    }
    PFN_cuGetProcAddress_v12000 gpa;
    void *p = dlsym(h, "cuGetProcAddress_v2");
    memcpy(&gpa, &p, sizeof p);
    if (!p) {
        g_init_err = cudaErrorInsufficientDriver;
        return;
    }
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
        CUdriverProcAddressQueryResult st;
        if (gpa(wants[i].name, wants[i].slot, wants[i].version, wants[i].flags, &st) != CUDA_SUCCESS)
            *wants[i].slot = NULL; /* a call through it reports cudaErrorNotSupported */
    }
    if (!rt_d.cuInit || !rt_d.cuDeviceGet || !rt_d.cuDeviceGetCount ||
        !rt_d.cuDevicePrimaryCtxRetain || !rt_d.cuCtxGetCurrent || !rt_d.cuCtxSetCurrent ||
        rt_d.cuInit(0) != CUDA_SUCCESS)
        g_init_err = cudaErrorInitializationError;
}

cudaError_t rt_ret(cudaError_t e)
{
    if (e != cudaSuccess)
        t_last = e;
    return e;
}

int rt_device(void)
{
    return t_dev;
}

static cudaError_t primary(int dev, CUcontext *out)
{
    if (dev < 0 || dev >= RT_MAX_DEV)
        return cudaErrorInvalidDevice;
    pthread_mutex_lock(&g_ctx_mu);
    CUresult r = CUDA_SUCCESS;
    if (!g_primary[dev]) {
        CUdevice d;
        r = rt_d.cuDeviceGet(&d, dev);
        if (r == CUDA_SUCCESS)
            r = rt_d.cuDevicePrimaryCtxRetain(&g_primary[dev], d);
    }
    *out = g_primary[dev];
    pthread_mutex_unlock(&g_ctx_mu);
    return r == CUDA_ERROR_INVALID_DEVICE ? cudaErrorInvalidDevice : (cudaError_t)r;
}

/* The runtime's rule: a thread without a current context gets its device's
 * primary one. A context the program set through the driver stays. */
cudaError_t rt_enter(void)
{
    pthread_once(&g_once, init);
    if (g_init_err)
        return rt_ret(g_init_err);
    if (t_ctx)
        return cudaSuccess;
    CUcontext cur = NULL, want;
    if (rt_d.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
        return cudaSuccess;
    cudaError_t e = primary(t_dev, &want);
    if (e == cudaSuccess)
        e = (cudaError_t)rt_d.cuCtxSetCurrent(want);
    if (e == cudaSuccess)
        t_ctx = want;
    return rt_ret(e);
}

/* ---- device and errors ------------------------------------------------ */

RT_API cudaError_t cudaSetDevice(int device)
{
    pthread_once(&g_once, init);
    if (g_init_err)
        return rt_ret(g_init_err);
    int n = 0;
    if (rt_d.cuDeviceGetCount(&n) != CUDA_SUCCESS || device < 0 || device >= n)
        return rt_ret(cudaErrorInvalidDevice);
    CUcontext c;
    cudaError_t e = primary(device, &c);
    if (e == cudaSuccess)
        e = (cudaError_t)rt_d.cuCtxSetCurrent(c);
    if (e == cudaSuccess) {
        t_dev = device;
        t_ctx = c;
    }
    return rt_ret(e);
}

RT_API cudaError_t cudaGetDevice(int *device)
{
    if (!device)
        return rt_ret(cudaErrorInvalidValue);
    *device = t_dev;
    return cudaSuccess;
}

RT_API cudaError_t cudaGetDeviceCount(int *count)
{
    pthread_once(&g_once, init);
    if (g_init_err)
        return rt_ret(g_init_err);
    if (!count)
        return rt_ret(cudaErrorInvalidValue);
    return rt_cu(rt_d.cuDeviceGetCount(count));
}

RT_API cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    /* The runtime's attribute numbers are the driver's. */
    return rt_cu(rt_d.cuDeviceGetAttribute(value, (CUdevice_attribute)attr, (CUdevice)device));
}

/* The properties the driver has attributes for; the rest read as 0, as
 * attributes simcuda does not model do. */
RT_API cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    if (!prop)
        return rt_ret(cudaErrorInvalidValue);
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    CUdevice d = (CUdevice)device;
    CUresult r = RT_CALL(cuDeviceGetName, (p.name, (int)sizeof p.name, d));
    size_t total = 0;
    if (r == CUDA_SUCCESS)
        r = RT_CALL(cuDeviceTotalMem, (&total, d));
    p.totalGlobalMem = total;
    const struct {
        int *field;
        CUdevice_attribute attr;
    } ints[] = {
        {&p.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR},
        {&p.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR},
        {&p.multiProcessorCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT},
        {&p.warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE},
        {&p.maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK},
        {&p.maxThreadsDim[0], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X},
        {&p.maxThreadsDim[1], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y},
        {&p.maxThreadsDim[2], CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z},
        {&p.maxGridSize[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X},
        {&p.maxGridSize[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y},
        {&p.maxGridSize[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z},
        {&p.maxThreadsPerMultiProcessor, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR},
        {&p.concurrentKernels, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS},
        {&p.unifiedAddressing, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING},
        {&p.memoryPoolsSupported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED},
    };
    for (size_t i = 0; r == CUDA_SUCCESS && i < sizeof ints / sizeof ints[0]; i++)
        r = rt_d.cuDeviceGetAttribute(ints[i].field, ints[i].attr, d);
    int smem = 0;
    if (r == CUDA_SUCCESS)
        r = rt_d.cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, d);
    if (r != CUDA_SUCCESS)
        return rt_cu(r);
    p.sharedMemPerBlock = (size_t)smem;
    *prop = p;
    return cudaSuccess;
}

RT_API cudaError_t cudaDeviceSynchronize(void)
{
    cudaError_t e = rt_enter();
    return e ? e : rt_cu(rt_d.cuCtxSynchronize());
}

/* Assumption: nothing here is torn down; reset only waits for the device. */
RT_API cudaError_t cudaDeviceReset(void)
{
    return cudaDeviceSynchronize();
}

RT_API cudaError_t cudaDriverGetVersion(int *version)
{
    pthread_once(&g_once, init);
    if (!version)
        return rt_ret(cudaErrorInvalidValue);
    if (g_init_err) {
        *version = 0; /* documented: 0 when no driver is installed */
        return cudaSuccess;
    }
    return rt_cu(rt_d.cuDriverGetVersion(version));
}

RT_API cudaError_t cudaRuntimeGetVersion(int *version)
{
    if (!version)
        return rt_ret(cudaErrorInvalidValue);
    *version = CUDART_VERSION;
    return cudaSuccess;
}

RT_API cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}

RT_API cudaError_t cudaPeekAtLastError(void)
{
    return t_last;
}

struct errname {
    cudaError_t code;
    const char *name;
};

static const struct errname errs[] = {
#define RT_ERR(name, value) {(cudaError_t)(value), #name},
#include "errors.def"
#undef RT_ERR
};

RT_API const char *cudaGetErrorName(cudaError_t error)
{
    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++)
        if (errs[i].code == error)
            return errs[i].name;
    return "cudaErrorUnknown";
}

/* The driver's text for the same number; the runtime's own wording for the
 * few codes the driver does not know. */
RT_API const char *cudaGetErrorString(cudaError_t error)
{
    const char *s = NULL;
    pthread_once(&g_once, init);
    if (!g_init_err && rt_d.cuGetErrorString &&
        rt_d.cuGetErrorString((CUresult)error, &s) == CUDA_SUCCESS && s)
        return s;
    return error == cudaSuccess ? "no error" : "unrecognized error code";
}
