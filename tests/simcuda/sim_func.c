/*
 * simcuda: a function's attributes (cuFuncGetAttribute, cuFuncSetAttribute).
 *
 * simcuda compiles nothing, so the figures a compiler would fix (registers,
 * static shared, local and constant bytes) are plausible constants for the
 * ordinary kernels it runs (assumption: 32 registers, no static shared
 * memory); the two settable ones (the dynamic shared memory limit and the
 * carveout preference) are kept per function and read back, as cuda.h
 * documents. Launches are still checked against the device's per-block
 * limit, whatever a function's setting (assumption: no opt-in beyond 48 KiB).
 */
#include "sim.h"

#include <pthread.h>

/* The functions whose settable attributes were set; few in any program. */
struct func_attrs {
    const struct sim_func *f;
    int max_dynamic_shared;
    int carveout;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct func_attrs *g_attrs;
static size_t g_n, g_cap;

/* The entry of f, made when make is set; NULL when absent or out of memory.
 * g_mu held. */
static struct func_attrs *attrs_of(const struct sim_func *f, bool make)
{
    for (size_t i = 0; i < g_n; i++)
        if (g_attrs[i].f == f)
            return &g_attrs[i];
    if (!make)
        return NULL;
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 16;
        struct func_attrs *a = sim_realloc(g_attrs, cap * sizeof *a);
        if (!a)
            return NULL;
        g_attrs = a;
        g_cap = cap;
    }
    g_attrs[g_n] = (struct func_attrs){f, (int)SIM_MAX_SHARED_PER_BLOCK, -1};
    return &g_attrs[g_n++];
}

CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    SIM_ENTER(cuFuncGetAttribute);
    SIM_CHECK_INIT();
    struct sim_func *f;
    CUresult r = sim_func_get(hfunc, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    const struct func_attrs *a = attrs_of(f, false);
    int dyn = a ? a->max_dynamic_shared : (int)SIM_MAX_SHARED_PER_BLOCK;
    int carveout = a ? a->carveout : -1;
    pthread_mutex_unlock(&g_mu);
    int v;
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = (int)SIM_MAX_THREADS_PER_BLOCK; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: v = 0; break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES: v = 0; break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: v = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: v = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: v = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: v = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: v = dyn; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: v = carveout; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

CUresult cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    SIM_ENTER(cuFuncSetAttribute);
    SIM_CHECK_INIT();
    struct sim_func *f;
    CUresult r = sim_func_get(hfunc, &f);
    if (r != CUDA_SUCCESS)
        return r;
    bool dyn = attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    if (dyn ? value < 0 || (unsigned)value > SIM_MAX_SHARED_PER_BLOCK
            : attrib != CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT || value < -1 ||
                  value > 100)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct func_attrs *a = attrs_of(f, true);
    if (a && dyn)
        a->max_dynamic_shared = value;
    else if (a)
        a->carveout = value;
    pthread_mutex_unlock(&g_mu);
    return a ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
