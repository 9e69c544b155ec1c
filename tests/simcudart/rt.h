/* simcudart internals: a test-only CUDA runtime (libcudart.so.13) for nvcc
 * programs built with -cudart shared, written from the public ABI
 * (cuda_runtime_api.h, crt/host_runtime.h, nvcc's generated stubs).
 *
 * rt_driver.c  the driver, reached only through dlopen("libcuda.so.1") and
 *              cuGetProcAddress_v2; init; primary contexts; last error
 * rt_fatbin.c  the PTX of a fatbin (zstd-compressed or plain)
 * rt_kernels.c registration (__cudaRegister*), host stub -> CUfunction,
 *              launch configuration, kernel launches
 * rt_api.c     the cuda* calls graph programs use
 *
 * Every exported function enters with rt_enter() (init + a current context)
 * and leaves through rt_ret(), which records a failure as the thread's last
 * error. CUresult codes map to cudaError_t by number: the runtime's codes
 * equal the driver's for every error the driver calls here return.
 */
#ifndef RT_H
#define RT_H

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <stdbool.h>

#define RT_API __attribute__((visibility("default")))

struct rt_driver {
#define RT_D(name, ver) PFN_##name##_v##ver name;
#define RT_T(name, ver, sfx) PFN_##name##_v##ver##_##sfx name##_pt;
#include "driver.def"
#undef RT_D
#undef RT_T
};
extern struct rt_driver rt_d;
/* A driver call through the table; an entry the driver did not answer is
 * not supported. */
#define RT_CALL(fn, args) (rt_d.fn ? rt_d.fn args : CUDA_ERROR_NOT_SUPPORTED)

/* Initializes once, makes the thread's device's primary context current. */
cudaError_t rt_enter(void);
/* Records a failure as the thread's last error; returns e. */
cudaError_t rt_ret(cudaError_t e);
static inline cudaError_t rt_cu(CUresult r)
{
    return rt_ret((cudaError_t)r);
}
int rt_device(void);

/* The PTX text (NUL-terminated, malloc'ed) of the fatbin behind an nvcc
 * __fatBinC_Wrapper_t: the entry of the highest architecture. 0 or -errno. */
int rt_fatbin_ptx(const void *wrapper, char **ptx);

/* Host stub (or cudaKernel_t) -> the function in the current device's
 * context; NULL when unknown or not loadable (*err says which). */
CUfunction rt_function(const void *host, cudaError_t *err);
/* CUfunction -> the host stub it was registered with; NULL when unknown. */
void *rt_host_of(CUfunction f);

/* A device variable (`__device__`, `__constant__`) by its host shadow (what
 * a program passes as `symbol`): its address and size in the current
 * device's copy of its module, loaded if it was not. cudaErrorInvalidSymbol
 * when no variable is registered at symbol. */
cudaError_t rt_symbol(const void *symbol, CUdeviceptr *addr, size_t *size);

#endif
