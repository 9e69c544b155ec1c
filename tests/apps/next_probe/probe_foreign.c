/* Prints what dlsym(dlopen(libvr_fake_cu.so), "cuGraphLaunch") returns when
 * called: 777 is the library's own function. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include <cuda.h>

int main(int argc, char **argv)
{
    void *h = dlopen(argc > 1 ? argv[1] : "libvr_fake_cu.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "probe_foreign: %s\n", dlerror());
        return 1;
    }
    void *sym = dlsym(h, "cuGraphLaunch");
    if (!sym) {
        fprintf(stderr, "probe_foreign: no cuGraphLaunch\n");
        return 1;
    }
    CUresult (*fn)(CUgraphExec, CUstream);
    memcpy(&fn, &sym, sizeof sym);
    printf("%d\n", (int)fn(NULL, NULL));
    return 0;
}
