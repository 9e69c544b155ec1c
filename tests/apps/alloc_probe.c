/* alloc_probe: the memory entry points with their error cases, printing
 * only what must be the same with and without the shim: error names, the
 * logical range cuMemGetAddressRange reports, and whether freed memory came
 * back (cuMemGetInfo). While the allocation lives it also reports, on
 * stderr, how much memory the shim backs with VMM (when preloaded). */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "varemap/varemap.h"
#define VR_PROG "alloc_probe"
#include "vr_check.h"

int main(void)
{
    CK(cuInit(0));
    CUdevice dev = vr_ctx_current(0, NULL);

    /* Odd size: the shim pads it to the granularity, the program must not see it. */
    const size_t size = (3u << 20) + 4096;
    size_t free0, free1, free2, total;
    CUdeviceptr p = 0, base = 0;
    size_t got = 0;
    CK(cuMemGetInfo_v2(&free0, &total));
    CK(cuMemAlloc_v2(&p, size));
    CK(cuMemsetD8_v2(p, 0x5a, size));
    CK(cuMemGetInfo_v2(&free1, &total));
    CK(cuMemGetAddressRange_v2(&base, &got, p + 12345));
    printf("range base_ok=%d size=%zu\n", base == p, got);
    unsigned char last = 0;
    CK(cuMemcpyDtoH_v2(&last, p + size - 1, 1));
    printf("last_byte=0x%02x\n", last);

    void *fn = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    if (fn) {
        struct varemap_stats st;
        int (*get)(struct varemap_stats *, size_t);
        memcpy(&get, &fn, sizeof fn);
        if (get(&st, sizeof st) == 0)
            fprintf(stderr, "vmm_bytes_live=%llu padding_bytes_live=%llu\n",
                    (unsigned long long)st.vmm_bytes, (unsigned long long)st.padding_bytes);
    }

    printf("free_interior=%s\n", vr_err_name(cuMemFree_v2(p + 4096)));
    printf("free=%s\n", vr_err_name(cuMemFree_v2(p)));
    printf("free_again=%s\n", vr_err_name(cuMemFree_v2(p)));
    printf("free_unknown=%s\n", vr_err_name(cuMemFree_v2((CUdeviceptr)0x10000)));
    printf("range_after_free=%s\n", vr_err_name(cuMemGetAddressRange_v2(&base, &got, p)));
    CK(cuMemGetInfo_v2(&free2, &total));
    printf("shrunk=%d returned=%d\n", free1 < free0, free2 == free0);

    /* A stream-ordered free of cuMemAlloc memory, after work on that stream. */
    CUstream stream;
    CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc_v2(&p, 4u << 20));
    CK(cuMemsetD8Async(p, 1, 4u << 20, stream));
    printf("free_async=%s\n", vr_err_name(cuMemFreeAsync(p, stream)));
    CK(cuStreamSynchronize(stream));
    CK(cuMemGetInfo_v2(&free2, &total));
    printf("returned_async=%d\n", free2 == free0);
    CK(cuStreamDestroy_v2(stream));
    CK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
