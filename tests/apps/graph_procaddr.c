/* graph_procaddr: the scenario with every entry point resolved the way the
 * CUDA runtime does it: one dlsym for cuGetProcAddress_v2, then
 * cuGetProcAddress_v2(name, version, flags) for everything else, including
 * cuGetProcAddress itself, whose answer then resolves half the table.
 * cuGraphLaunch is asked for with the per-thread-default-stream flag, so
 * the launches go through cuGraphLaunch_ptsz. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "scenario.h"

typedef CUresult (*gpa_fn)(const char *symbol, void **pfn, int version, cuuint64_t flags,
                           CUdriverProcAddressQueryResult *status);

static const char *name_of(const struct vr_drv *d, CUresult rc)
{
    const char *s = NULL;
    if (!d->GetErrorName || d->GetErrorName(rc, &s) != CUDA_SUCCESS || !s)
        return "CUDA_ERROR_UNKNOWN_CODE";
    return s;
}

static void *resolve(gpa_fn gpa, const struct vr_drv *d, const char *name, int version,
                     cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult rc = gpa(name, &fn, version, flags, &st);
    if (rc != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
        fprintf(stderr, "graph_procaddr: cuGetProcAddress(%s@%d, %llu): %s (status %d)\n", name,
                version, (unsigned long long)flags,
                rc != CUDA_SUCCESS ? name_of(d, rc) : "CUDA_ERROR_NOT_FOUND", (int)st);
        return NULL;
    }
    return fn;
}

int main(int argc, char **argv)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "graph_procaddr: %s\n", dlerror());
        return 1;
    }
    void *sym = dlsym(lib, "cuGetProcAddress_v2");
    if (!sym) {
        fprintf(stderr, "graph_procaddr: no cuGetProcAddress_v2 in libcuda.so.1\n");
        return 1;
    }
    gpa_fn first, self;
    memcpy(&first, &sym, sizeof sym);

    struct vr_drv d = { 0 };
    /* The runtime asks for cuGetProcAddress by its base name; at 12000 that
     * is the five-argument _v2. */
    void *fn = resolve(first, &d, "cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    if (!fn)
        return 1;
    memcpy(&self, &fn, sizeof fn);
    for (size_t i = 0; i < vr_nsyms; i++) {
        const struct vr_sym *s = &vr_syms[i];
        fn = resolve(i % 2 ? self : first, &d, s->proc, s->version, s->flags);
        if (!fn)
            return 1;
        vr_drv_put(&d, s->off, fn);
    }
    int rc = vr_scenario_main("graph_procaddr", argc, argv, &d);
    dlclose(lib);
    return rc;
}
