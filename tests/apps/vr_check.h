/* vr_check: what the single-file driver-API test programs share. A program
 * defines VR_PROG (its name in messages) before including this, and may
 * define VR_PROG_DETAIL (a const char * expression: what it is doing, such
 * as its --case) to follow the name.
 *
 *   CK(call)            the call must succeed; otherwise one line on stderr,
 *                       "PROG[ DETAIL]: FILE:LINE: CALL: ERROR (CODE)", and exit 1
 *   vr_err_name(r)      a CUresult's name ("?" for one the driver does not know)
 *   vr_ctx_current(n, &ctx)  device n's primary context, retained and made
 *                       current (and stored in ctx unless NULL); returns the device
 *   vr_ptx_or_die(p)    the PTX text at path p (NULL or "": none given), or exit 1
 *   vr_buffer_f32(n, v) a new buffer of n floats, each v, ready when it returns
 *   vr_read_f32(p, i)   float i of buffer p
 *   vr_extent_f32(n)    how many of an n-float buffer's floats the kernels cover:
 *                       n, or VR_EXTENT bytes' worth when that is set and
 *                       smaller (the suites' setting: tests/e2e/meson.build)
 *   vr_gate             a host function (cuLaunchHostFunc) that holds its stream
 *                       until the atomic_int its argument points to is set
 *
 * Header-only, like ptx_text.h.
 */
#ifndef VR_CHECK_H
#define VR_CHECK_H

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#include "ptx_text.h"

#ifndef VR_PROG
#error "define VR_PROG, the program's name in messages, before including vr_check.h"
#endif
#ifndef VR_PROG_DETAIL
#define VR_PROG_DETAIL ""
#endif

static inline const char *vr_err_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

static inline _Noreturn void vr_check_fail(const char *call, const char *file, int line,
                                           CUresult r)
{
    const char *detail = VR_PROG_DETAIL;
    fprintf(stderr, "%s%s%s: %s:%d: %s: %s (%d)\n", VR_PROG, *detail ? " " : "", detail, file,
            line, call, vr_err_name(r), (int)r);
    exit(1);
}

#define CK(call)                                                                   \
    do {                                                                           \
        CUresult r_ = (call);                                                      \
        if (r_ != CUDA_SUCCESS)                                                    \
            vr_check_fail(#call, __FILE__, __LINE__, r_);                          \
    } while (0)

static inline CUdevice vr_ctx_current(int ordinal, CUcontext *ctx_out)
{
    CUdevice dev;
    CUcontext ctx;
    CK(cuDeviceGet(&dev, ordinal));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    if (ctx_out)
        *ctx_out = ctx;
    return dev;
}

static inline char *vr_ptx_or_die(const char *path)
{
    bool given = path && *path;
    char *text = given ? vr_read_text(path) : NULL;
    if (!text) {
        if (given)
            fprintf(stderr, "%s: cannot read the PTX %s: %s\n", VR_PROG, path, strerror(errno));
        else
            fprintf(stderr, "%s: no PTX given (set VR_PTX)\n", VR_PROG);
        exit(1);
    }
    return text;
}

/* The driver up with device 0's primary context current (into *ctx_out
 * unless NULL) and VR_PTX's kernels loaded (a missing PTX exits 1). */
static inline void vr_module_start(CUmodule *mod, CUcontext *ctx_out)
{
    char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
    CK(cuInit(0));
    vr_ctx_current(0, ctx_out);
    CK(cuModuleLoadData(mod, ptx));
    free(ptx);
}

/* The start of a probe with --out and --map files: both opened (NULL when
 * not asked for; one that cannot be opened exits 1), vr_module_start and
 * a non-blocking stream made. */
static inline void vr_probe_start(const char *out_path, const char *map_path, FILE **out,
                                  FILE **map, CUmodule *mod, CUstream *stream)
{
    *out = out_path ? fopen(out_path, "wb") : NULL;
    *map = map_path ? fopen(map_path, "w") : NULL;
    if ((out_path && !*out) || (map_path && !*map)) {
        fprintf(stderr, "%s: --out/--map: %s\n", VR_PROG, strerror(errno));
        exit(1);
    }
    vr_module_start(mod, NULL);
    CK(cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
}

static inline CUdeviceptr vr_buffer_f32(size_t n, float value)
{
    CUdeviceptr p;
    CK(cuMemAlloc_v2(&p, n * sizeof(float)));
    union { float f; unsigned u; } v = {value};
    CK(cuMemsetD32_v2(p, v.u, n));
    CK(cuCtxSynchronize()); /* memsets are asynchronous; graphs run on other streams */
    return p;
}

static inline float vr_read_f32(CUdeviceptr p, size_t i)
{
    float f;
    CK(cuMemcpyDtoH_v2(&f, p + i * sizeof f, sizeof f));
    return f;
}

static inline size_t vr_extent_f32(size_t n)
{
    const char *s = getenv("VR_EXTENT");
    char *end = NULL;
    unsigned long long e = s && *s ? strtoull(s, &end, 0) : 0;
    if (end && (*end == 'K' || *end == 'k'))
        e <<= 10;
    else if (end && (*end == 'M' || *end == 'm'))
        e <<= 20;
    return e / 4 && e / 4 < n ? (size_t)(e / 4) : n;
}

static inline void CUDA_CB vr_gate(void *released)
{
    while (!atomic_load((atomic_int *)released))
        usleep(100);
}

#endif
