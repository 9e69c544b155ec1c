/* simcudart: device variables named by their host shadow (`symbol`, the
 * address of the `__device__` or `__constant__` variable in host code):
 * cudaGetSymbolAddress, cudaGetSymbolSize and the copies to and from them,
 * each the driver's copy at the address cuModuleGetGlobal gives in the
 * current device's module (rt_symbol). */
#include "rt.h"


#define PICK(pt, fn, args) ((pt) ? RT_CALL(fn##_pt, args) : RT_CALL(fn, args))

static CUdeviceptr dp(const void *p)
{
    return (CUdeviceptr)(uintptr_t)p;
}

/* The bytes [offset, offset + count) of symbol's variable, or why not. */
static cudaError_t span(const void *symbol, size_t count, size_t offset, CUdeviceptr *at)
{
    CUdeviceptr base;
    size_t size;
    cudaError_t e = rt_symbol(symbol, &base, &size);
    if (e)
        return e;
    if (offset > size || count > size - offset)
        return cudaErrorInvalidValue;
    *at = base + offset;
    return cudaSuccess;
}

RT_API cudaError_t cudaGetSymbolAddress(void **devPtr, const void *symbol)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    CUdeviceptr a;
    size_t size;
    if (!devPtr)
        return rt_ret(cudaErrorInvalidValue);
    if ((e = rt_symbol(symbol, &a, &size)) != cudaSuccess)
        return rt_ret(e); /* documented: *devPtr unchanged */
    *devPtr = (void *)(uintptr_t)a;
    return cudaSuccess;
}

RT_API cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    CUdeviceptr a;
    size_t n;
    if (!size)
        return rt_ret(cudaErrorInvalidValue);
    if ((e = rt_symbol(symbol, &a, &n)) != cudaSuccess)
        return rt_ret(e);
    *size = n;
    return cudaSuccess;
}

/* to: into the variable (kinds HostToDevice, DeviceToDevice, Default), else
 * out of it (DeviceToHost, DeviceToDevice, Default), as documented. async:
 * ordered in s; else synchronous. pt: the per-thread variants. */
static cudaError_t symbol_copy(bool to, void *mem, const void *symbol, size_t count,
                               size_t offset, enum cudaMemcpyKind kind, bool async,
                               cudaStream_t s, bool pt)
{
    cudaError_t e = rt_enter();
    if (e)
        return e;
    if (kind != cudaMemcpyDeviceToDevice && kind != cudaMemcpyDefault &&
        kind != (to ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost))
        return rt_ret(cudaErrorInvalidMemcpyDirection);
    CUdeviceptr v;
    if ((e = span(symbol, count, offset, &v)) != cudaSuccess)
        return rt_ret(e);
    if (count == 0)
        return cudaSuccess;
    CUstream cs = (CUstream)s;
    CUresult r;
    if (kind == cudaMemcpyDefault) {
        CUdeviceptr dst = to ? v : dp(mem), src = to ? dp(mem) : v;
        r = async ? PICK(pt, cuMemcpyAsync, (dst, src, count, cs))
                  : PICK(pt, cuMemcpy, (dst, src, count));
    } else if (kind == cudaMemcpyDeviceToDevice) {
        CUdeviceptr dst = to ? v : dp(mem), src = to ? dp(mem) : v;
        r = async ? PICK(pt, cuMemcpyDtoDAsync, (dst, src, count, cs))
                  : PICK(pt, cuMemcpyDtoD, (dst, src, count));
    } else if (to) {
        r = async ? PICK(pt, cuMemcpyHtoDAsync, (v, mem, count, cs))
                  : PICK(pt, cuMemcpyHtoD, (v, mem, count));
    } else {
        r = async ? PICK(pt, cuMemcpyDtoHAsync, (mem, v, count, cs))
                  : PICK(pt, cuMemcpyDtoH, (mem, v, count));
    }
    return rt_cu(r);
}

#define RT_SYM_TO(name, async, pt)                                                          \
    RT_API cudaError_t name(const void *symbol, const void *src, size_t count, size_t offset, \
                            enum cudaMemcpyKind kind)                                       \
    {                                                                                       \
        return symbol_copy(true, (void *)(uintptr_t)src, symbol, count, offset, kind, async, \
                           NULL, pt);                                                       \
    }
#define RT_SYM_FROM(name, async, pt)                                                       \
    RT_API cudaError_t name(void *dst, const void *symbol, size_t count, size_t offset,     \
                            enum cudaMemcpyKind kind)                                      \
    {                                                                                      \
        return symbol_copy(false, dst, symbol, count, offset, kind, async, NULL, pt);      \
    }
RT_SYM_TO(cudaMemcpyToSymbol, false, false)
RT_SYM_TO(cudaMemcpyToSymbol_ptds, false, true)
RT_SYM_FROM(cudaMemcpyFromSymbol, false, false)
RT_SYM_FROM(cudaMemcpyFromSymbol_ptds, false, true)

RT_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                           size_t offset, enum cudaMemcpyKind kind,
                                           cudaStream_t stream)
{
    return symbol_copy(true, (void *)(uintptr_t)src, symbol, count, offset, kind, true, stream,
                       false);
}

RT_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
                                                size_t offset, enum cudaMemcpyKind kind,
                                                cudaStream_t stream)
{
    return symbol_copy(true, (void *)(uintptr_t)src, symbol, count, offset, kind, true, stream,
                       true);
}

RT_API cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                             size_t offset, enum cudaMemcpyKind kind,
                                             cudaStream_t stream)
{
    return symbol_copy(false, dst, symbol, count, offset, kind, true, stream, false);
}

RT_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count,
                                                  size_t offset, enum cudaMemcpyKind kind,
                                                  cudaStream_t stream)
{
    return symbol_copy(false, dst, symbol, count, offset, kind, true, stream, true);
}
