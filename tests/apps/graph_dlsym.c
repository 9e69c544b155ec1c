/* graph_dlsym: the scenario with every entry point looked up by its
 * exported name, as loaders of optional CUDA support do. */
#include <dlfcn.h>
#include <stdio.h>

#include "scenario.h"

int main(int argc, char **argv)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "graph_dlsym: %s\n", dlerror());
        return 1;
    }
    struct vr_drv d = { 0 };
    for (size_t i = 0; i < vr_nsyms; i++) {
        void *fn = dlsym(lib, vr_syms[i].sym);
        if (!fn) {
            fprintf(stderr, "graph_dlsym: no %s in libcuda.so.1\n", vr_syms[i].sym);
            return 1;
        }
        vr_drv_put(&d, vr_syms[i].off, fn);
    }
    int rc = vr_scenario_main("graph_dlsym", argc, argv, &d);
    dlclose(lib);
    return rc;
}
