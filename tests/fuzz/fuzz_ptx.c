/* fuzz target: simcuda's PTX parser, through cuModuleLoadData as a program
 * reaches it. The input (plus a terminating NUL) is the PTX text; a module
 * that loads is asked for every standard kernel and its parameter layout,
 * which must be consistent, then unloaded. simcuda is compiled into the
 * target, so no change to it is needed. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz_ptx: check failed: %s at %s:%d\n", #cond,      \
                    __FILE__, __LINE__);                                         \
            abort();                                                             \
        }                                                                        \
    } while (0)

static const char *const kernels[] = {
    "vr_fill_f32", "vr_scale_f32", "vr_axpy_f32", "vr_add_f32",
    "vr_affine_struct", "vr_copy_u8", "vr_sum_range_f32",
};

static void setup(void)
{
    static int done;
    CUdevice dev;
    CUcontext ctx;

    if (done)
        return;
    CHECK(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    CHECK(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    done = 1;
}

static void check_layout(CUfunction f)
{
    size_t end = 0;

    for (size_t i = 0; i < 4096; i++) {
        size_t off = 0, sz = 0;
        if (cuFuncGetParamInfo(f, i, &off, &sz) != CUDA_SUCCESS)
            return;
        CHECK(sz > 0);
        CHECK(off >= end); /* in order, not overlapping */
        end = off + sz;
    }
    CHECK(!"more than 4096 parameters");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    CUmodule mod;
    char *text = malloc(size + 1);

    setup();
    CHECK(text != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    if (cuModuleLoadData(&mod, text) == CUDA_SUCCESS) {
        for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
            CUfunction f;
            if (cuModuleGetFunction(&f, mod, kernels[i]) == CUDA_SUCCESS)
                check_layout(f);
        }
        CHECK(cuModuleUnload(mod) == CUDA_SUCCESS);
    }
    free(text);
    return 0;
}
