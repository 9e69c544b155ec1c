/* loader_probe: ways of reaching the driver by the loader that an
 * interposer must answer as the loader alone would (issue 15, item 9). One
 * line per answer, the same with and without the shim.
 *
 *   loader_probe newlm     the driver opened with dlmopen(LM_ID_NEWLM) into a
 *                          private namespace and used through dlsym on that
 *                          handle: first before the default namespace has a
 *                          driver, then again after it has one (and an
 *                          interposer has set itself up from it)
 *   loader_probe default   dlsym(RTLD_DEFAULT, "cu...") before the driver is
 *                          loaded, after it is loaded with RTLD_GLOBAL, and
 *                          for an entry point the driver lacks
 *
 * Not linked with the driver: everything goes through the loader.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dlmopen */
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*device_get_fn)(CUdevice *, int);
typedef CUresult (*retain_fn)(CUcontext *, CUdevice);
typedef CUresult (*set_current_fn)(CUcontext);
typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*htod_fn)(CUdeviceptr, const void *, size_t);
typedef CUresult (*dtoh_fn)(void *, CUdeviceptr, size_t);
typedef CUresult (*name_fn)(CUresult, const char **);

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p)
        printf("missing %s\n", name);
    return p;
}

#define FN(type, h, name) (__extension__(type)sym(h, name))

static const char *err_name(name_fn fn, CUresult r)
{
    const char *s = NULL;
    return fn && fn(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

/* Allocates, writes and reads back through the driver behind handle h,
 * which this function initializes. */
static int use_driver(const char *tag, void *h)
{
    name_fn ename = FN(name_fn, h, "cuGetErrorName");
    init_fn init = FN(init_fn, h, "cuInit");
    device_get_fn dget = FN(device_get_fn, h, "cuDeviceGet");
    retain_fn retain = FN(retain_fn, h, "cuDevicePrimaryCtxRetain");
    set_current_fn setcur = FN(set_current_fn, h, "cuCtxSetCurrent");
    alloc_fn alloc = FN(alloc_fn, h, "cuMemAlloc_v2");
    free_fn mfree = FN(free_fn, h, "cuMemFree_v2");
    htod_fn htod = FN(htod_fn, h, "cuMemcpyHtoD_v2");
    dtoh_fn dtoh = FN(dtoh_fn, h, "cuMemcpyDtoH_v2");
    if (!ename || !init || !dget || !retain || !setcur || !alloc || !mfree || !htod || !dtoh)
        return 1;
    CUdevice dev = 0;
    CUcontext ctx = NULL;
    CUdeviceptr p = 0;
    CUresult r = init(0);
    printf("%s.cuInit %s\n", tag, err_name(ename, r));
    r = dget(&dev, 0);
    printf("%s.cuDeviceGet %s\n", tag, err_name(ename, r));
    r = retain(&ctx, dev);
    printf("%s.cuDevicePrimaryCtxRetain %s\n", tag, err_name(ename, r));
    r = setcur(ctx);
    printf("%s.cuCtxSetCurrent %s\n", tag, err_name(ename, r));
    r = alloc(&p, 4096);
    printf("%s.cuMemAlloc %s\n", tag, err_name(ename, r));
    if (r != CUDA_SUCCESS)
        return 0;
    char in[64], out[64];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (char)i;
    memset(out, 0, sizeof out);
    CUresult w = htod(p, in, sizeof in), rd = dtoh(out, p, sizeof out);
    printf("%s.copies %s %s %s\n", tag, err_name(ename, w), err_name(ename, rd),
           memcmp(in, out, sizeof in) == 0 ? "same-bytes" : "other-bytes");
    printf("%s.cuMemFree %s\n", tag, err_name(ename, mfree(p)));
    return 0;
}

static int newlm(void)
{
    void *priv = dlmopen(LM_ID_NEWLM, "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!priv) {
        fprintf(stderr, "loader_probe: dlmopen: %s\n", dlerror());
        return 1;
    }
    if (use_driver("private", priv))
        return 1;
    /* Now a driver in the default namespace too, used first (an interposer
     * sets itself up from it), then the private one again. */
    void *base = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!base) {
        fprintf(stderr, "loader_probe: dlopen: %s\n", dlerror());
        return 1;
    }
    if (use_driver("base", base) || use_driver("private.again", priv))
        return 1;
    return 0;
}

static void ask_default(const char *tag, const char *name)
{
    printf("%s.%s %s\n", tag, name, dlsym(RTLD_DEFAULT, name) ? "present" : "absent");
}

static int rtld_default(void)
{
    /* cuMemAlloc_v2 and cuGraphLaunch: entry points every driver has (and
     * the shim exports: before the driver is loaded, absent all the same);
     * cuGraphExecKernelNodeSetParams_v3: one no driver of this toolkit has
     * (simcuda exports every function cuda.h declares). */
    static const char *const names[] = { "cuMemAlloc_v2", "cuGraphLaunch",
                                         "cuGraphExecKernelNodeSetParams_v3", "cuInit" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ask_default("unloaded", names[i]);
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        fprintf(stderr, "loader_probe: dlopen: %s\n", dlerror());
        return 1;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ask_default("loaded", names[i]);
    init_fn init = FN(init_fn, RTLD_DEFAULT, "cuInit");
    alloc_fn alloc = FN(alloc_fn, RTLD_DEFAULT, "cuMemAlloc_v2");
    if (!init || !alloc)
        return 1;
    CUdeviceptr p;
    printf("loaded.cuMemAlloc.before_init %d\n", (int)alloc(&p, 4096));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        ask_default("used", names[i]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "";
    if (strcmp(what, "newlm") == 0)
        return newlm();
    if (strcmp(what, "default") == 0)
        return rtld_default();
    fprintf(stderr, "usage: loader_probe newlm|default\n");
    return 2;
}
