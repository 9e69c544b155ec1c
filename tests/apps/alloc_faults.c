/* alloc_faults: the allocation entry points where the shim's own VMM
 * backing could show through. Every line on stdout must be the same with and
 * without the shim (the e2e suite compares them); lines on stderr are for
 * the suite to read about the shim only.
 *
 *   alloc_faults noctx     cuMemFree / cuMemGetAddressRange from a thread
 *                          without a context, while a kernel still reads
 *                          the buffer
 *   alloc_faults padding   addresses past the end: range, allocation handle,
 *                          access; on stderr whether any allocation's end
 *                          lies inside another allocation
 *   alloc_faults free      three rounds of: allocate, queue kernels reading
 *                          the buffer, free it at once; then the output
 *   alloc_faults fill SIZE allocate SIZE bytes until out of memory: the count
 *   alloc_faults peer [--no-peer]  (2 devices) a kernel on device 1 reads
 *                          device 0's buffer, after enabling peer access
 *   alloc_faults freeasync a stream-ordered free of a buffer that a kernel
 *                          queued behind a host function still reads; the
 *                          host function waits for the program's next step,
 *                          so a free that blocks hangs (the alarm fires)
 *   alloc_faults churn R   R rounds of: allocate two buffers (sizes that
 *                          differ from round to round but round up to the
 *                          same granularity multiple), compute into them,
 *                          free them; their ranges and sums
 *   alloc_faults asyncreuse  a buffer freed in stream order while a kernel
 *                          queued behind a gate still reads it, then a new
 *                          allocation of the same size written at once: the
 *                          kernel must still read the old values; on stderr
 *                          whether the new allocation got the old address
 *                          (before and after the stream passed the free)
 *   alloc_faults refill A B  allocate A bytes until out of memory, free them
 *                          all, then B bytes until out of memory: both counts
 *   alloc_faults others    (a 256 MiB device) before each of the other
 *                          allocators (stream-ordered, from a pool, managed,
 *                          pitched, arrays, cuMemCreate), a 160 MiB buffer
 *                          allocated and freed: each then allocates 160 MiB;
 *                          on stderr the memory the shim kept before each
 *   alloc_faults ctxgone   a created context destroyed, then the primary
 *                          context reset, each holding a buffer and one
 *                          freed: the kept buffer's range and free memory
 *   alloc_faults attrs     pointer attributes (cuPointerGetAttribute and
 *                          cuPointerGetAttributes) of a padded buffer, of
 *                          its padding, of it once freed, and of the buffer
 *                          of the same size allocated next; on stderr
 *                          whether that one got the freed one's address
 *   alloc_faults atexit    an exit handler registered after cuInit but
 *                          before the first allocation (so it runs after
 *                          a handler registered there) frees a buffer, then
 *                          another in stream order behind a kernel
 *   alloc_faults fork      resolves an entry point before cuInit (as
 *                          runtimes do), forks; the child (its simcuda
 *                          stats in SIMCUDA_STATS.child) initializes,
 *                          allocates, computes, frees and exits; on stderr
 *                          the child's pid
 *
 * The kernels come from the PTX named by VR_PTX.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cudaTypedefs.h>

#include "varemap/varemap.h"
#define VR_PROG "alloc_faults"
#include "vr_check.h"

#define MIB ((size_t)1 << 20)

static CUmodule module;

static CUfunction kernel(const char *fn)
{
    if (!module) {
        char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
        CK(cuModuleLoadData(&module, ptx));
        free(ptx);
    }
    CUfunction f;
    CK(cuModuleGetFunction(&f, module, fn));
    return f;
}

static void launch(CUfunction f, CUstream s, void **args)
{
    CK(cuLaunchKernel(f, 4, 1, 1, 128, 1, 1, 0, s, args, NULL));
}

static void fill(CUstream s, CUdeviceptr out, float value, unsigned long long n)
{
    void *args[] = { &out, &value, &n };
    launch(kernel("vr_fill_f32"), s, args);
}

static void scale(CUstream s, CUdeviceptr out, CUdeviceptr in, float k, unsigned long long n)
{
    void *args[] = { &out, &in, &k, &n };
    launch(kernel("vr_scale_f32"), s, args);
}

static double sum_floats(CUdeviceptr p, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        exit(1);
    CK(cuMemcpyDtoH_v2(h, p, n * sizeof *h));
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += h[i];
    free(h);
    return s;
}

static int stats(struct varemap_stats *st)
{
    void *fn = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    if (!fn)
        return -1;
    int (*get)(struct varemap_stats *, size_t);
    memcpy(&get, &fn, sizeof fn);
    return get(st, sizeof *st);
}

/* ---- noctx ---- */

struct noctx_result {
    CUdeviceptr p;
    CUresult free, range, range_size;
};

static void *noctx_thread(void *arg)
{
    struct noctx_result *r = arg;
    CUdeviceptr base;
    size_t size;
    r->range = cuMemGetAddressRange_v2(&base, &size, r->p);
    r->free = cuMemFree_v2(r->p);
    return NULL;
}

static int run_noctx(void)
{
    CUcontext ctx;
    CUstream s;
    vr_ctx_current(0, &ctx);
    CK(cuStreamCreate(&s, 0));
    const size_t n = (4 * MIB) / sizeof(float);
    CUdeviceptr p, out;
    CK(cuMemAlloc_v2(&p, 4 * MIB));
    CK(cuMemAlloc_v2(&out, 4 * MIB));
    fill(s, p, 3.0f, n);
    scale(s, out, p, 2.0f, n); /* still queued (SIMCUDA_KERNEL_DELAY_US) below */

    struct noctx_result r = { .p = p };
    pthread_t t;
    if (pthread_create(&t, NULL, noctx_thread, &r) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    printf("noctx free=%s range=%s\n", vr_err_name(r.free), vr_err_name(r.range));
    CK(cuStreamSynchronize(s));
    printf("sum out=%.1f p=%.1f\n", sum_floats(out, n), sum_floats(p, n));
    printf("free=%s\n", vr_err_name(cuMemFree_v2(p)));
    CK(cuMemFree_v2(out));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- padding ---- */

static int run_padding(void)
{
    CUcontext ctx;
    vr_ctx_current(0, &ctx);
    /* Not a multiple of the granularity or the page: the shim pads it. */
    const size_t size = 3 * MIB + 4096 + 256;
    CUdeviceptr p, base = 0;
    size_t got = 0;
    CK(cuMemAlloc_v2(&p, size));
    CUresult r = cuMemGetAddressRange_v2(&base, &got, p + size - 1);
    printf("range last=%s base_ok=%d size=%zu\n", vr_err_name(r), base == p, got);
    printf("range end=%s\n", vr_err_name(cuMemGetAddressRange_v2(&base, &got, p + size)));
    printf("range padding=%s\n",
           vr_err_name(cuMemGetAddressRange_v2(&base, &got, p + 4 * MIB - 1)));

    CUmemGenericAllocationHandle h;
    printf("retain base=%s\n", vr_err_name(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)p)));
    printf("retain inner=%s\n",
           vr_err_name(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)(p + 4096))));
    printf("retain null=%s\n",
           vr_err_name(cuMemRetainAllocationHandle(NULL, (void *)(uintptr_t)p)));
    unsigned long long flags = 0;
    CUmemLocation loc = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    printf("access base=%s\n", vr_err_name(cuMemGetAccess(&flags, &loc, p)));
    printf("access null=%s\n", vr_err_name(cuMemGetAccess(NULL, &loc, p)));
    CUmemLocation bad = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 99 };
    printf("access baddev=%s\n", vr_err_name(cuMemGetAccess(&flags, &bad, p)));
    printf("free=%s\n", vr_err_name(cuMemFree_v2(p)));

    /* Whole-granularity allocations: no padding, so only a guard gap keeps
     * one's end out of the next one. */
    enum { N = 8 };
    CUdeviceptr a[N];
    for (int i = 0; i < N; i++)
        CK(cuMemAlloc_v2(&a[i], 4 * MIB));
    int inside = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++)
            inside += j != i && a[i] + 4 * MIB >= a[j] && a[i] + 4 * MIB < a[j] + 4 * MIB;
    fprintf(stderr, "ends_inside_others=%d\n", inside);
    /* Nothing else can ever be placed at one-past-the-end either: asking
     * for exactly that address (a hint simcuda honours when it is free). */
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    size_t gran = 0;
    CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    int placeable = 0;
    for (int i = 0; i < N; i++) {
        CUdeviceptr x = 0;
        if (cuMemAddressReserve(&x, gran, 0, a[i] + 4 * MIB, 0) == CUDA_SUCCESS) {
            placeable += x == a[i] + 4 * MIB;
            CK(cuMemAddressFree(x, gran));
        }
    }
    fprintf(stderr, "ends_placeable=%d\n", placeable);
    struct varemap_stats st = { 0 };
    if (stats(&st) == 0)
        fprintf(stderr, "vmm_bytes_live=%llu\n", (unsigned long long)st.vmm_bytes);
    for (int i = 0; i < N; i++)
        CK(cuMemFree_v2(a[i]));
    return 0;
}

/* ---- free ---- */

static int run_free(void)
{
    CUcontext ctx;
    CUstream s;
    vr_ctx_current(0, &ctx);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t n = (4 * MIB) / sizeof(float);
    size_t free0, free1, total;
    CUdeviceptr out;
    CK(cuMemAlloc_v2(&out, 4 * MIB));
    CK(cuMemGetInfo_v2(&free0, &total));
    double sum = 0;
    for (int round = 0; round < 3; round++) {
        CUdeviceptr p;
        CK(cuMemAlloc_v2(&p, 4 * MIB));
        fill(s, p, (float)(round + 1), n);
        scale(s, out, p, 0.5f, n);
        /* The native free waits for the kernels; with the shim, a failed
         * wait must not unmap under them either. */
        printf("round=%d free=%s\n", round, vr_err_name(cuMemFree_v2(p)));
        CK(cuStreamSynchronize(s));
        sum += sum_floats(out, n);
    }
    printf("sum=%.1f\n", sum);
    CUdeviceptr q;
    CK(cuMemAlloc_v2(&q, 4 * MIB)); /* a later hook: a retry may release now */
    printf("last free=%s\n", vr_err_name(cuMemFree_v2(q)));
    CK(cuMemGetInfo_v2(&free1, &total));
    printf("returned=%d\n", free1 == free0);
    struct varemap_stats st = { 0 };
    if (stats(&st) == 0)
        fprintf(stderr, "vmm_leaked_bytes=%llu\n", (unsigned long long)st.vmm_leaked_bytes);
    CK(cuMemFree_v2(out));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- freeasync ---- */

static atomic_int gate_open;

static void CUDA_CB gate(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        usleep(1000);
}

static int run_freeasync(void)
{
    CUcontext ctx;
    CUstream s;
    vr_ctx_current(0, &ctx);
    alarm(20); /* a blocking free never returns: SIGALRM, status 142 */
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t n = (4 * MIB) / sizeof(float);
    size_t free0, free1, total;
    CUdeviceptr in, out;
    CK(cuMemAlloc_v2(&out, 4 * MIB));
    CK(cuMemGetInfo_v2(&free0, &total));
    CK(cuMemAlloc_v2(&in, 4 * MIB));
    fill(s, in, 3.0f, n);
    CK(cuLaunchHostFunc(s, gate, NULL));
    scale(s, out, in, 0.5f, n); /* reads `in` once the gate opens */
    printf("free_async=%s\n", vr_err_name(cuMemFreeAsync(in, s)));
    atomic_store(&gate_open, 1);
    CK(cuStreamSynchronize(s));
    printf("sum=%.1f\n", sum_floats(out, n));
    CK(cuMemGetInfo_v2(&free1, &total));
    printf("returned=%d\n", free1 == free0);
    CK(cuMemFree_v2(out));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- churn ---- */

static int run_churn(int rounds)
{
    CUcontext ctx;
    CUstream s;
    vr_ctx_current(0, &ctx);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const size_t n = MIB / sizeof(float);
    CUdeviceptr out;
    CK(cuMemAlloc_v2(&out, 4 * MIB));
    for (int round = 0; round < rounds; round++) {
        /* 3 MiB + 4 KiB .. 3 MiB + 16 KiB: all padded to 4 MiB */
        size_t size = 3 * MIB + 4096 * (size_t)(1 + round % 4);
        CUdeviceptr a, b, base;
        size_t got;
        CK(cuMemAlloc_v2(&a, size));
        CK(cuMemAlloc_v2(&b, 4 * MIB));
        CK(cuMemGetAddressRange_v2(&base, &got, a));
        fill(s, a, (float)round, n);
        fill(s, b, 0.5f, n);
        scale(s, out, a, 2.0f, n);
        scale(s, b, out, 3.0f, n); /* b = 6 * round */
        CK(cuStreamSynchronize(s));
        printf("round=%d range=%zu base_ok=%d sum=%.1f\n", round, got, base == a,
               sum_floats(b, n));
        CK(cuMemFree_v2(a));
        CK(cuMemFree_v2(b));
    }
    struct varemap_stats st = { 0 };
    if (stats(&st) == 0)
        fprintf(stderr, "vmm_cache_hits=%llu vmm_bytes_live=%llu\n",
                (unsigned long long)st.vmm_cache_hits, (unsigned long long)st.vmm_bytes);
    CK(cuMemFree_v2(out));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- asyncreuse ---- */

static int run_asyncreuse(void)
{
    CUcontext ctx;
    CUstream s, s2;
    vr_ctx_current(0, &ctx);
    alarm(20);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    const size_t n = (4 * MIB) / sizeof(float);
    CUdeviceptr in, out, next, later;
    CK(cuMemAlloc_v2(&out, 4 * MIB));
    CK(cuMemAlloc_v2(&in, 4 * MIB));
    fill(s, in, 3.0f, n);
    CK(cuLaunchHostFunc(s, gate, NULL));
    scale(s, out, in, 0.5f, n); /* reads `in` once the gate opens */
    printf("free_async=%s\n", vr_err_name(cuMemFreeAsync(in, s)));
    /* Written at once on another stream, while `in` is still to be read. */
    CK(cuMemAlloc_v2(&next, 4 * MIB));
    fill(s2, next, 100.0f, n);
    CK(cuStreamSynchronize(s2));
    atomic_store(&gate_open, 1);
    CK(cuStreamSynchronize(s));
    printf("sum=%.1f next=%.1f\n", sum_floats(out, n), sum_floats(next, n));
    fprintf(stderr, "reused_pending=%d\n", next == in);
    /* The stream passed the free: its memory may serve again. */
    CK(cuMemAlloc_v2(&later, 4 * MIB));
    fprintf(stderr, "reused_done=%d\n", later == in);
    CK(cuMemFree_v2(later));
    CK(cuMemFree_v2(next));
    CK(cuMemFree_v2(out));
    CK(cuStreamDestroy_v2(s2));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- fill ---- */

/* Allocates `size` until out of memory; the pointers stay in *out. */
static size_t fill_up(size_t size, CUdeviceptr **out, CUresult *stop)
{
    size_t cap = 1024, count = 0;
    CUdeviceptr *p = malloc(cap * sizeof *p);
    CUresult r = CUDA_SUCCESS;
    while (p) {
        if (count == cap) {
            CUdeviceptr *grown = realloc(p, 2 * cap * sizeof *p);
            if (!grown)
                break;
            p = grown;
            cap *= 2;
        }
        r = cuMemAlloc_v2(&p[count], size);
        if (r != CUDA_SUCCESS)
            break;
        count++;
    }
    if (!p)
        exit(1);
    *out = p;
    *stop = r;
    return count;
}

static int run_fill(size_t size)
{
    CUcontext ctx;
    vr_ctx_current(0, &ctx);
    CUdeviceptr *p;
    CUresult r;
    size_t count = fill_up(size, &p, &r);
    printf("fill size=%zu count=%zu stop=%s\n", size, count, vr_err_name(r));
    struct varemap_stats st = { 0 };
    if (stats(&st) == 0)
        fprintf(stderr, "vmm_bytes_live=%llu\n", (unsigned long long)st.vmm_bytes);
    for (size_t i = 0; i < count; i++)
        CK(cuMemFree_v2(p[i]));
    free(p);
    return 0;
}

static int run_refill(size_t a, size_t b)
{
    CUcontext ctx;
    vr_ctx_current(0, &ctx);
    CUdeviceptr *p;
    CUresult r;
    size_t count = fill_up(a, &p, &r);
    printf("fill size=%zu count=%zu stop=%s\n", a, count, vr_err_name(r));
    for (size_t i = 0; i < count; i++)
        CK(cuMemFree_v2(p[i]));
    free(p);
    struct varemap_stats st = { 0 };
    if (stats(&st) == 0)
        fprintf(stderr, "vmm_cache_bytes_after_free=%llu\n",
                (unsigned long long)st.vmm_cache_bytes);
    count = fill_up(b, &p, &r);
    printf("refill size=%zu count=%zu stop=%s\n", b, count, vr_err_name(r));
    for (size_t i = 0; i < count; i++)
        CK(cuMemFree_v2(p[i]));
    free(p);
    return 0;
}

/* ---- others ---- */

static CUresult other_alloc(int which, CUstream s, CUmemoryPool pool, size_t size)
{
    CUdeviceptr p = 0;
    CUresult r;
    if (which <= 3) {
        /* the per-thread variants are reached by their exported names */
        PFN_cuMemAllocAsync_v11020 async = cuMemAllocAsync;
        PFN_cuMemAllocFromPoolAsync_v11020 from = cuMemAllocFromPoolAsync;
        void *sym = NULL;
        if (which & 1) {
            sym = dlsym(RTLD_DEFAULT, which < 2 ? "cuMemAllocAsync_ptsz"
                                                : "cuMemAllocFromPoolAsync_ptsz");
            if (!sym)
                return CUDA_ERROR_NOT_FOUND;
            if (which < 2)
                memcpy(&async, &sym, sizeof sym);
            else
                memcpy(&from, &sym, sizeof sym);
        }
        r = which < 2 ? async(&p, size, s) : from(&p, size, pool, s);
        if (r == CUDA_SUCCESS) {
            CK(cuMemFreeAsync(p, s));
            CK(cuStreamSynchronize(s));
        }
        return r;
    }
    if (which == 4 || which == 5) {
        size_t pitch = 0;
        r = which == 4 ? cuMemAllocManaged(&p, size, CU_MEM_ATTACH_GLOBAL)
                       : cuMemAllocPitch_v2(&p, &pitch, 64 * 1024, size / (64 * 1024), 4);
        if (r == CUDA_SUCCESS)
            CK(cuMemFree_v2(p));
        return r;
    }
    if (which >= 6 && which <= 8) {
        /* 16384 x 2560 floats; the mipmapped one's second level is half */
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = 16384, .Height = size / 16384 / 4,
                                       .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1 };
        if (which == 8) {
            CUmipmappedArray m;
            d3.Height = d3.Height * 4 / 5;
            r = cuMipmappedArrayCreate(&m, &d3, 2);
            if (r == CUDA_SUCCESS)
                CK(cuMipmappedArrayDestroy(m));
            return r;
        }
        CUDA_ARRAY_DESCRIPTOR d2 = { .Width = d3.Width, .Height = d3.Height,
                                     .Format = d3.Format, .NumChannels = 1 };
        CUarray a;
        r = which == 6 ? cuArrayCreate_v2(&a, &d2) : cuArray3DCreate_v2(&a, &d3);
        if (r == CUDA_SUCCESS)
            CK(cuArrayDestroy(a));
        return r;
    }
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    r = cuMemCreate(&h, size, &prop, 0);
    if (r == CUDA_SUCCESS)
        CK(cuMemRelease(h));
    return r;
}

static int run_others(void)
{
    static const char *const names[] = { "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
                                         "cuMemAllocFromPoolAsync",
                                         "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocManaged",
                                         "cuMemAllocPitch", "cuArrayCreate", "cuArray3DCreate",
                                         "cuMipmappedArrayCreate", "cuMemCreate" };
    const size_t size = 160 * MIB;
    CUcontext ctx;
    CUstream s;
    CUmemoryPool pool;
    vr_ctx_current(0, &ctx);
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CK(cuMemPoolCreate(&pool, &props));
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++) {
        CUdeviceptr big;
        size_t fr, total;
        CK(cuMemAlloc_v2(&big, size));
        CK(cuMemFree_v2(big));
        CK(cuMemGetInfo_v2(&fr, &total));
        struct varemap_stats st = { 0 };
        if (stats(&st) == 0)
            fprintf(stderr, "%s kept=%llu\n", names[i], (unsigned long long)st.vmm_cache_bytes);
        printf("%s free=%d %s\n", names[i], fr == total, vr_err_name(other_alloc(i, s, pool, size)));
    }
    CK(cuMemPoolDestroy(pool));
    CK(cuStreamDestroy_v2(s));
    return 0;
}

/* ---- attrs ---- */

/* Every value read into 8 zeroed bytes, whatever width the driver writes. */
static CUresult attr(CUpointer_attribute a, CUdeviceptr p, unsigned long long *v)
{
    *v = 0;
    return cuPointerGetAttribute(v, a, p);
}

/* One line per attribute of p, in words that do not depend on where the
 * driver put things: relative to base and size, or to the context. */
static void show_attrs(const char *what, CUdeviceptr p, CUdeviceptr base, size_t size,
                       CUcontext ctx, unsigned long long *id)
{
    unsigned long long v;
    CUresult r;
    r = attr(CU_POINTER_ATTRIBUTE_CONTEXT, p, &v);
    printf("%s context=%s ours=%d\n", what, vr_err_name(r), v == (uintptr_t)ctx);
    r = attr(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p, &v);
    printf("%s memory_type=%s %llu\n", what, vr_err_name(r), v);
    r = attr(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p, &v);
    printf("%s device=%s %llu\n", what, vr_err_name(r), v);
    r = attr(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p, &v);
    printf("%s device_pointer=%s same=%d\n", what, vr_err_name(r), v == p);
    r = attr(CU_POINTER_ATTRIBUTE_IS_MANAGED, p, &v);
    printf("%s managed=%s %llu\n", what, vr_err_name(r), v);
    r = attr(CU_POINTER_ATTRIBUTE_MAPPED, p, &v);
    printf("%s mapped=%s %llu\n", what, vr_err_name(r), v);
    r = attr(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p, &v);
    printf("%s range_start=%s base=%d\n", what, vr_err_name(r), v == base);
    r = attr(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p, &v);
    printf("%s range_size=%s size=%d\n", what, vr_err_name(r), v == size);
    r = attr(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p, &v);
    printf("%s mapping_base=%s base=%d\n", what, vr_err_name(r), v == base);
    r = attr(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p, &v);
    printf("%s mapping_size=%s size=%d\n", what, vr_err_name(r), v == size);
    r = attr(CU_POINTER_ATTRIBUTE_BUFFER_ID, p, &v);
    printf("%s buffer_id=%s nonzero=%d\n", what, vr_err_name(r), v != 0);
    if (id)
        *id = v;
    r = attr(CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p, &v);
    printf("%s block_id=%s nonzero=%d\n", what, vr_err_name(r), v != 0);

    CUpointer_attribute as[] = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_MAPPED, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
    unsigned long long vs[6] = { 0 };
    void *data[6];
    for (int i = 0; i < 6; i++)
        data[i] = &vs[i];
    r = cuPointerGetAttributes(6, as, data, p);
    printf("%s attributes=%s ctx=%d start=%d size=%d id_same=%d mapped=%llu device=%llu\n", what,
           vr_err_name(r), vs[0] == (uintptr_t)ctx, vs[1] == base, vs[2] == size,
           id && vs[3] == *id, vs[4], vs[5]);
}

static int run_attrs(void)
{
    CUcontext ctx;
    vr_ctx_current(0, &ctx);
    const size_t size = 3 * MIB + 4096 + 256;
    CUdeviceptr p, q, other;
    unsigned long long id_p = 0, id_q = 0, id_other = 0;
    CK(cuMemAlloc_v2(&p, size));
    show_attrs("buffer", p, p, size, ctx, &id_p);
    show_attrs("last_byte", p + size - 1, p, size, ctx, NULL);
    show_attrs("past_end", p + size, p, size, ctx, NULL);
    CK(cuMemFree_v2(p));
    show_attrs("freed", p, p, size, ctx, NULL);
    CK(cuMemAlloc_v2(&q, size));
    fprintf(stderr, "reused_address=%d\n", q == p);
    show_attrs("next", q, q, size, ctx, &id_q);
    CK(cuMemAlloc_v2(&other, 4 * MIB));
    show_attrs("other", other, other, 4 * MIB, ctx, &id_other);
    printf("ids distinct=%d\n", id_p != id_q && id_q != id_other && id_p != id_other);
    CK(cuMemFree_v2(q));
    CK(cuMemFree_v2(other));
    return 0;
}

/* ---- contexts destroyed ---- */

/* In a created context: a buffer kept, one freed (into the shim's cache);
 * the context destroyed. Then the same in the primary context, reset. What
 * the driver says of the kept buffer after, and how much memory is free,
 * must be the same with the shim; nothing of it stays alive. */
static void ctx_round(const char *what, CUcontext ctx, CUdevice dev, bool primary)
{
    CUdeviceptr kept_p, freed, base;
    size_t size, free_before, free_after, total;
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemGetInfo_v2(&free_before, &total));
    CK(cuMemAlloc_v2(&kept_p, 4 * MIB));
    CK(cuMemAlloc_v2(&freed, 4 * MIB));
    fill(NULL, kept_p, 1.0f, (4 * MIB) / sizeof(float));
    CK(cuMemFree_v2(freed));
    if (primary)
        CK(cuDevicePrimaryCtxReset_v2(dev));
    else
        CK(cuCtxDestroy_v2(ctx));
    CUcontext p0;
    vr_ctx_current(0, &p0);
    CK(cuMemGetInfo_v2(&free_after, &total));
    printf("%s range=%s free_back=%d\n", what,
           vr_err_name(cuMemGetAddressRange_v2(&base, &size, kept_p)),
           free_after >= free_before);
}

static int run_ctxgone(void)
{
    CUcontext primary, b;
    CUdevice dev = vr_ctx_current(0, &primary);
    CK(cuCtxCreate_v4(&b, NULL, 0, dev));
    ctx_round("created", b, dev, false);
    ctx_round("primary", primary, dev, true);
    return 0;
}

/* ---- atexit, fork ---- */

static CUdeviceptr late, late_async;
static CUstream late_stream;

static void free_late(void)
{
    printf("late free=%s\n", vr_err_name(cuMemFree_v2(late)));
    /* the last call: nothing after it could release what it leaves */
    fill(late_stream, late_async, 1.0f, (4 * MIB) / sizeof(float));
    printf("late free_async=%s\n", vr_err_name(cuMemFreeAsync(late_async, late_stream)));
}

static int run_atexit(void)
{
    CUcontext ctx;
    vr_ctx_current(0, &ctx);
    const size_t n = (4 * MIB) / sizeof(float);
    if (atexit(free_late) != 0)
        return 1;
    CK(cuStreamCreate(&late_stream, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc_v2(&late, 4 * MIB));
    CK(cuMemAlloc_v2(&late_async, 4 * MIB));
    fill(NULL, late, 2.0f, n);
    printf("sum=%.1f\n", sum_floats(late, n));
    return 0;
}

static int run_fork(void)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult q;
    printf("resolve=%s\n", vr_err_name(cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &q)));
    fflush(stdout);
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child == 0) {
        const char *stats_path = getenv("SIMCUDA_STATS");
        char mine[4096];
        if (stats_path) {
            snprintf(mine, sizeof mine, "%s.child", stats_path);
            setenv("SIMCUDA_STATS", mine, 1); /* read again at cuInit */
        }
        fprintf(stderr, "child pid=%ld\n", (long)getpid());
        CK(cuInit(0));
        CUcontext ctx;
        vr_ctx_current(0, &ctx);
        const size_t n = (4 * MIB) / sizeof(float);
        CUdeviceptr a, b;
        CK(cuMemAlloc_v2(&a, 4 * MIB));
        CK(cuMemAlloc_v2(&b, 4 * MIB));
        fill(NULL, a, 3.0f, n);
        scale(NULL, b, a, 2.0f, n);
        printf("child sum=%.1f\n", sum_floats(b, n));
        CK(cuMemFree_v2(a));
        CK(cuMemFree_v2(b));
        exit(0);
    }
    int status = 0;
    if (waitpid(child, &status, 0) != child)
        return 1;
    printf("child exit=%d\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

/* ---- peer ---- */

static int run_peer(int enable)
{
    int count = 0;
    CK(cuDeviceGetCount(&count));
    if (count < 2) {
        fprintf(stderr, "alloc_faults: peer needs 2 devices, found %d\n", count);
        return 1;
    }
    CUcontext c0, c1;
    CUdevice d0, d1;
    CK(cuDeviceGet(&d0, 0));
    CK(cuDeviceGet(&d1, 1));
    CK(cuDevicePrimaryCtxRetain(&c0, d0));
    CK(cuDevicePrimaryCtxRetain(&c1, d1));
    const size_t n = (4 * MIB) / sizeof(float);

    /* One buffer on device 0 before peer access is enabled, one after. */
    CUdeviceptr before, after, out;
    CK(cuCtxSetCurrent(c0));
    CK(cuMemAlloc_v2(&before, 4 * MIB));
    fill(NULL, before, 2.0f, n);
    CK(cuCtxSynchronize());
    int can = 0;
    CK(cuDeviceCanAccessPeer(&can, d1, d0));
    printf("can_access=%d\n", can);
    CK(cuCtxSetCurrent(c1));
    if (enable)
        printf("enable=%s\n", vr_err_name(cuCtxEnablePeerAccess(c0, 0)));
    CK(cuMemAlloc_v2(&out, 4 * MIB)); /* device 1's own */
    CK(cuCtxSetCurrent(c0));
    CK(cuMemAlloc_v2(&after, 4 * MIB));
    fill(NULL, after, 5.0f, n);
    CK(cuCtxSynchronize());

    /* Kernels on device 1 read device 0's buffers. */
    CK(cuCtxSetCurrent(c1));
    CUmodule m1;
    CUfunction sc;
    {
        char *ptx = vr_ptx_or_die(getenv("VR_PTX"));
        CK(cuModuleLoadData(&m1, ptx));
        free(ptx);
        CK(cuModuleGetFunction(&sc, m1, "vr_scale_f32"));
    }
    fflush(stdout); /* without access the kernel faults: what came before stays */
    for (int i = 0; i < 2; i++) {
        CUdeviceptr in = i ? after : before;
        float k = 3.0f;
        unsigned long long nn = n;
        void *args[] = { &out, &in, &k, &nn };
        CK(cuLaunchKernel(sc, 4, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
        CUresult r = cuCtxSynchronize();
        printf("read %s=%s sum=%.1f\n", i ? "after" : "before", vr_err_name(r),
               r == CUDA_SUCCESS ? sum_floats(out, n) : 0.0);
        fflush(stdout);
    }
    CK(cuMemFree_v2(out));
    CK(cuCtxSetCurrent(c0));
    CK(cuMemFree_v2(before));
    CK(cuMemFree_v2(after));
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "fork"))
        return run_fork(); /* forks before cuInit */
    CK(cuInit(0));
    if (!strcmp(mode, "noctx"))
        return run_noctx();
    if (!strcmp(mode, "padding"))
        return run_padding();
    if (!strcmp(mode, "free"))
        return run_free();
    if (!strcmp(mode, "fill") && argc > 2)
        return run_fill((size_t)strtoull(argv[2], NULL, 0));
    if (!strcmp(mode, "peer"))
        return run_peer(!(argc > 2 && !strcmp(argv[2], "--no-peer")));
    if (!strcmp(mode, "freeasync"))
        return run_freeasync();
    if (!strcmp(mode, "churn") && argc > 2)
        return run_churn(atoi(argv[2]));
    if (!strcmp(mode, "asyncreuse"))
        return run_asyncreuse();
    if (!strcmp(mode, "refill") && argc > 3)
        return run_refill((size_t)strtoull(argv[2], NULL, 0), (size_t)strtoull(argv[3], NULL, 0));
    if (!strcmp(mode, "others"))
        return run_others();
    if (!strcmp(mode, "atexit"))
        return run_atexit();
    if (!strcmp(mode, "attrs"))
        return run_attrs();
    if (!strcmp(mode, "ctxgone"))
        return run_ctxgone();
    fprintf(stderr, "usage: alloc_faults noctx|padding|free|fill SIZE|peer [--no-peer]|freeasync|"
                    "churn ROUNDS|asyncreuse|refill SIZE SIZE|others|attrs|ctxgone|atexit|fork\n");
    return 2;
}
