/*
 * simcuda memory: native cuMemAlloc (anonymous mappings), the virtual
 * memory management API (reservations = PROT_NONE mappings, physical
 * handles = memfds mapped MAP_SHARED|MAP_FIXED), copies and memsets.
 */
#include "sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define SIM_PAGE ((size_t)4096)
/* what a native allocation costs its device: its size rounded up to this */
#define SIM_NATIVE_UNIT ((size_t)512)

struct nat {
    uintptr_t base;
    size_t size;   /* requested */
    size_t maplen; /* page rounded */
    size_t charged; /* counted against its device (SIM_NATIVE_UNIT rounded) */
    int dev;       /* owning device; -1: managed (any device may access) */
    int acct;      /* the device whose memory it uses */
    bool async;    /* from cuMemAllocAsync: cuMemFree does not synchronize */
    bool freeing;  /* cuMemFreeAsync queued */
    uint64_t id;   /* CU_POINTER_ATTRIBUTE_BUFFER_ID */
    struct sim_ctx *ctx;   /* the context it was allocated in: unless async, destroyed with it */
    CUmemoryPool pool;     /* cuMemAllocFromPoolAsync's pool, else NULL */
    /* IPC (sim_ipc.c). Exported: its pages moved into the memfd `fd` at the
     * first cuIpcGetMemHandle, so another process can map them. Imported:
     * another process's memory mapped by cuIpcOpenMemHandle, `refs` opens,
     * released by cuIpcCloseMemHandle only (never by cuMemFree); `src_pid`
     * and `src_id` name the exporter's allocation. */
    bool exported, imported;
    int fd;
    int refs;
    int src_pid;
    uint64_t src_id;
    bool module;   /* a module's variables: its storage, not mapped here */
    bool graph;    /* a graph allocation's address range (sim_graph_mem.c maps it) */
};

/* A memory pool: only the device its allocations come from. */
struct sim_pool {
    int dev;
};

struct sim_phys {
    int dev;   /* prop.location.id */
    int fd;
    uint64_t id;   /* CU_POINTER_ATTRIBUTE_BUFFER_ID / MEMORY_BLOCK_ID */
    size_t size;
    CUmemAllocationProp prop;
    int handle_refs; /* cuMemCreate/cuMemRetainAllocationHandle minus cuMemRelease */
    int maps;        /* live cuMemMap mappings */
    bool imported;   /* cuMemImportFromShareableHandle: the exporter's memory, not charged here */
};

struct vmap {
    uintptr_t base;
    size_t size;
    struct sim_phys *phys;
    CUmemAccess_flags access;  /* the widest of acc[] (the host protection) */
    uint8_t acc[SIM_MAX_DEVICES]; /* cuMemSetAccess per device */
};

struct resv {
    uintptr_t base;
    size_t size;
    struct vmap *maps; /* sorted by base */
    size_t nmaps, cap;
};

static pthread_mutex_t g_mem_mu = PTHREAD_MUTEX_INITIALIZER;
static struct nat *g_nat;        /* sorted by base */
static size_t g_nnat, g_nat_cap;
static struct resv *g_resv;      /* sorted by base */
static size_t g_nresv, g_resv_cap;
static size_t g_native_bytes[SIM_MAX_DEVICES], g_phys_bytes[SIM_MAX_DEVICES];
/* Bumped (under g_mem_mu) by every change to the tables above that a kernel
 * access check reads: allocations, reservations, mappings, access flags.
 * Stream workers remember the ranges they found accessible for as long as it
 * is unchanged (check_word). */
static uint64_t g_mem_gen;
static long g_nphys; /* physical allocations not yet destroyed */
/* Buffer ids: unique over the process's life, never reused (documented). */
static uint64_t g_next_id = 1;

static size_t round_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static void *grow(void *v, size_t *cap, size_t elem)
{
    size_t nc = *cap ? *cap * 2 : 16;
    void *n = sim_realloc(v, nc * elem);
    if (!n)
        abort();
    *cap = nc;
    return n;
}

/* Index of the last entry with base <= p in a sorted array, or -1. */
#define SIM_FLOOR(arr, n, p, out)                                              \
    do {                                                                       \
        size_t lo_ = 0, hi_ = (n);                                             \
        while (lo_ < hi_) {                                                    \
            size_t mid_ = (lo_ + hi_) / 2;                                     \
            if ((arr)[mid_].base <= (p))                                       \
                lo_ = mid_ + 1;                                                \
            else                                                               \
                hi_ = mid_;                                                    \
        }                                                                      \
        (out) = (long)lo_ - 1;                                                 \
    } while (0)

static struct nat *nat_find(uintptr_t p)
{
    long i;
    SIM_FLOOR(g_nat, g_nnat, p, i);
    if (i < 0 || p >= g_nat[i].base + g_nat[i].size)
        return NULL;
    return &g_nat[i];
}

static struct resv *resv_find(uintptr_t p)
{
    long i;
    SIM_FLOOR(g_resv, g_nresv, p, i);
    if (i < 0 || p >= g_resv[i].base + g_resv[i].size)
        return NULL;
    return &g_resv[i];
}

static long map_floor(struct resv *r, uintptr_t p)
{
    long i;
    SIM_FLOOR(r->maps, r->nmaps, p, i);
    return i;
}

static struct vmap *map_find(uintptr_t p, struct resv **rout)
{
    struct resv *r = resv_find(p);
    if (!r)
        return NULL;
    long i = map_floor(r, p);
    if (i < 0 || p >= r->maps[i].base + r->maps[i].size)
        return NULL;
    if (rout)
        *rout = r;
    return &r->maps[i];
}

static bool fits_total(int dev, size_t add)
{
    size_t total = sim_knob.mem_bytes;
    return add <= total && g_native_bytes[dev] + g_phys_bytes[dev] <= total - add;
}

static void phys_maybe_destroy(struct sim_phys *ph)
{
    if (ph->handle_refs > 0 || ph->maps > 0)
        return;
    close(ph->fd);
    if (!ph->imported)
        g_phys_bytes[ph->dev] -= ph->size;
    g_nphys--;
    sim_free(ph);
}

bool sim_mem_valid(uintptr_t p, size_t n, bool write)
{
    if (n == 0)
        return true;
    if (p + n < p)
        return false;
    bool ok = false;
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(p);
    if (a) {
        ok = p + n <= a->base + a->size;
    } else {
        struct resv *r = resv_find(p);
        if (r && p + n <= r->base + r->size) {
            long i = map_floor(r, p);
            uintptr_t cur = p, end = p + n;
            ok = i >= 0;
            for (; ok && cur < end; i++) {
                if ((size_t)i >= r->nmaps || r->maps[i].base > cur ||
                    cur >= r->maps[i].base + r->maps[i].size) {
                    ok = false;
                    break;
                }
                CUmemAccess_flags need =
                    write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
                if (r->maps[i].access < need)
                    ok = false;
                cur = r->maps[i].base + r->maps[i].size;
            }
        }
    }
    pthread_mutex_unlock(&g_mem_mu);
    return ok;
}

/* ---- native allocations ------------------------------------------------------- */

/* Under g_mem_mu: n into the sorted table, charged to its device. */
static void nat_insert(const struct nat *n)
{
    if (g_nnat == g_nat_cap)
        g_nat = grow(g_nat, &g_nat_cap, sizeof *g_nat);
    long i;
    SIM_FLOOR(g_nat, g_nnat, n->base, i);
    size_t at = (size_t)(i + 1);
    memmove(&g_nat[at + 1], &g_nat[at], (g_nnat - at) * sizeof *g_nat);
    g_nat[at] = *n;
    g_nnat++;
    g_mem_gen++;
    g_native_bytes[n->acct] += n->charged;
}

/* dev: the owning device (-1: managed, charged to acct). */
static CUresult native_alloc(CUdeviceptr *dptr, size_t bytesize, bool async, int dev, int acct,
                             struct sim_ctx *ctx, CUmemoryPool pool)
{
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytesize > sim_knob.mem_bytes)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t len = round_up(bytesize, SIM_PAGE);
    size_t charged = round_up(bytesize, SIM_NATIVE_UNIT);
    pthread_mutex_lock(&g_mem_mu);
    if (!fits_total(acct, charged)) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    uintptr_t b = (uintptr_t)p;
    nat_insert(&(struct nat){.base = b, .size = bytesize, .maplen = len, .charged = charged,
                             .dev = dev, .acct = acct, .async = async, .id = g_next_id++,
                             .ctx = ctx, .pool = pool});
    pthread_mutex_unlock(&g_mem_mu);
    *dptr = (CUdeviceptr)b;
    return CUDA_SUCCESS;
}

/* Under g_mem_mu: remove a native allocation and unmap it. */
static void native_release(struct nat *a)
{
    struct nat n = *a;
    size_t at = (size_t)(a - g_nat);
    memmove(&g_nat[at], &g_nat[at + 1], (g_nnat - at - 1) * sizeof *g_nat);
    g_nnat--;
    g_mem_gen++;
    g_native_bytes[n.acct] -= n.charged;
    if (!n.module && !n.graph)
        munmap((void *)n.base, n.maplen); /* use after free crashes */
    if (n.exported || n.imported)
        close(n.fd); /* a later cuIpcOpenMemHandle of its handle fails */
}

/* A module's storage is device memory of the device it was loaded on, from
 * its load to its unload (or its context's destruction); it costs the
 * device nothing here (assumption: a real driver takes it from the device's
 * memory, too little to matter to a test). */
void sim_mem_add_module(uintptr_t base, size_t size, struct sim_ctx *ctx)
{
    pthread_mutex_lock(&g_mem_mu);
    int dev = ctx ? ctx->dev : 0;
    nat_insert(&(struct nat){.base = base, .size = size, .dev = dev, .acct = dev,
                             .id = g_next_id++, .ctx = ctx, .module = true});
    pthread_mutex_unlock(&g_mem_mu);
}

void sim_mem_del_module(uintptr_t base)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(base);
    if (a && a->base == base && a->module)
        native_release(a);
    pthread_mutex_unlock(&g_mem_mu);
}

/* Graph allocations belong to no context: async, so neither a context's
 * destruction nor cuMemFree's synchronization applies to them here. */
void sim_mem_add_graph(uintptr_t base, size_t size, int dev)
{
    pthread_mutex_lock(&g_mem_mu);
    nat_insert(&(struct nat){.base = base, .size = size, .dev = dev, .acct = dev,
                             .async = true, .id = g_next_id++, .graph = true});
    pthread_mutex_unlock(&g_mem_mu);
}

void sim_mem_del_graph(uintptr_t base)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(base);
    if (a && a->base == base && a->graph)
        native_release(a);
    pthread_mutex_unlock(&g_mem_mu);
}

static bool is_graph(uintptr_t p)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(p);
    bool g = a && a->base == p && a->graph;
    pthread_mutex_unlock(&g_mem_mu);
    return g;
}

void sim_mem_ctx_destroyed(const struct sim_ctx *c)
{
    pthread_mutex_lock(&g_mem_mu);
    for (size_t i = g_nnat; i-- > 0;)
        if (g_nat[i].ctx == c && !g_nat[i].async && !g_nat[i].freeing)
            native_release(&g_nat[i]);
    pthread_mutex_unlock(&g_mem_mu);
}

void sim_mem_free_now(uintptr_t base)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(base);
    if (a && a->base == base && a->freeing)
        native_release(a);
    pthread_mutex_unlock(&g_mem_mu);
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    SIM_ENTER(cuMemAlloc_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    return native_alloc(dptr, bytesize, false, c->dev, c->dev, c, NULL);
}

/* Pitched memory is linear memory whose rows start at a multiple of the
 * pitch; ElementSizeBytes may be 4, 8 or 16 (documented). Assumption: the
 * pitch is the width rounded up to 512 bytes. */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    SIM_ENTER(cuMemAllocPitch_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    if (WidthInBytes > SIZE_MAX - 511)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t pitch = round_up(WidthInBytes, 512);
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr p;
    r = native_alloc(&p, pitch * Height, false, c->dev, c->dev, c, NULL);
    if (r)
        return r;
    *dptr = p;
    *pPitch = pitch;
    return CUDA_SUCCESS;
}

/* A CUDA array: device memory the program cannot address (only copies and
 * textures reach it, which simcuda does not model), so only its charge. */
struct sim_array {
    int dev;
    size_t charged;
};

static size_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0; /* other formats are not modelled */
    }
}

/* Height and Depth 0 mean a dimension less (documented); NumChannels 1, 2
 * or 4; a mipmapped array has `levels` levels, each half the one before in
 * every dimension (at least 1). Assumption: an array costs its element
 * bytes, rounded up like a native allocation. */
static CUresult array_create(void **out, int type, size_t w, size_t h, size_t d, CUarray_format f,
                             unsigned channels, unsigned flags, unsigned levels)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    size_t elem = format_bytes(f);
    if (!out || w == 0 || (d != 0 && h == 0) || flags != 0 || levels == 0 ||
        (channels != 1 && channels != 2 && channels != 4))
        return CUDA_ERROR_INVALID_VALUE;
    if (elem == 0)
        return CUDA_ERROR_NOT_SUPPORTED;
    size_t bytes = 0;
    for (unsigned l = 0; l < levels && l < 64; l++) {
        size_t lw = w >> l ? w >> l : 1, lh = h >> l ? h >> l : 1, ld = d >> l ? d >> l : 1;
        size_t n = lw, level;
        if ((h && __builtin_mul_overflow(n, lh, &n)) || (d && __builtin_mul_overflow(n, ld, &n)) ||
            __builtin_mul_overflow(n, elem * channels, &level) ||
            __builtin_add_overflow(bytes, level, &bytes))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (bytes > SIZE_MAX - SIM_NATIVE_UNIT)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_array *a = sim_calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    a->dev = c->dev;
    a->charged = round_up(bytes, SIM_NATIVE_UNIT);
    pthread_mutex_lock(&g_mem_mu);
    bool fits = fits_total(a->dev, a->charged);
    if (fits)
        g_native_bytes[a->dev] += a->charged;
    pthread_mutex_unlock(&g_mem_mu);
    if (!fits) {
        sim_free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_reg_add(a, type);
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult array_destroy(void *h, int type)
{
    SIM_CHECK_INIT();
    if (!h || !sim_reg_has(h, type))
        return CUDA_ERROR_INVALID_HANDLE;
    struct sim_array *a = h;
    sim_reg_del(a);
    pthread_mutex_lock(&g_mem_mu);
    g_native_bytes[a->dev] -= a->charged;
    pthread_mutex_unlock(&g_mem_mu);
    sim_free(a);
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    SIM_ENTER(cuArrayCreate_v2);
    const CUDA_ARRAY_DESCRIPTOR *a = pAllocateArray;
    void *h = NULL;
    CUresult r = !a || !pHandle ? CUDA_ERROR_INVALID_VALUE
                 : array_create(&h, SIM_T_ARRAY, a->Width, a->Height, 0, a->Format,
                                a->NumChannels, 0, 1);
    if (r == CUDA_SUCCESS)
        *pHandle = h;
    return r;
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    SIM_ENTER(cuArray3DCreate_v2);
    const CUDA_ARRAY3D_DESCRIPTOR *a = pAllocateArray;
    void *h = NULL;
    CUresult r = !a || !pHandle ? CUDA_ERROR_INVALID_VALUE
                 : array_create(&h, SIM_T_ARRAY, a->Width, a->Height, a->Depth, a->Format,
                                a->NumChannels, a->Flags, 1);
    if (r == CUDA_SUCCESS)
        *pHandle = h;
    return r;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                unsigned int numMipmapLevels)
{
    SIM_ENTER(cuMipmappedArrayCreate);
    const CUDA_ARRAY3D_DESCRIPTOR *a = pMipmappedArrayDesc;
    void *h = NULL;
    CUresult r = !a || !pHandle ? CUDA_ERROR_INVALID_VALUE
                 : array_create(&h, SIM_T_MIPMAP, a->Width, a->Height, a->Depth, a->Format,
                                a->NumChannels, a->Flags, numMipmapLevels);
    if (r == CUDA_SUCCESS)
        *pHandle = h;
    return r;
}

CUresult cuArrayDestroy(CUarray hArray)
{
    SIM_ENTER(cuArrayDestroy);
    return array_destroy(hArray, SIM_T_ARRAY);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    SIM_ENTER(cuMipmappedArrayDestroy);
    return array_destroy(hMipmappedArray, SIM_T_MIPMAP);
}

/* Managed memory is host memory here like everything else: a native
 * allocation the host may touch directly, freed with cuMemFree. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    SIM_ENTER(cuMemAllocManaged);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    return native_alloc(dptr, bytesize, false, -1, c->dev, c, NULL);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    SIM_ENTER(cuMemFree_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    if ((r = sim_capture_unsafe()) != CUDA_SUCCESS)
        return r;
    if (is_graph((uintptr_t)dptr))
        return sim_gmem_free_outside((uintptr_t)dptr, NULL);
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find((uintptr_t)dptr);
    /* memory opened by cuIpcOpenMemHandle goes by cuIpcCloseMemHandle only */
    bool ok = a && a->base == (uintptr_t)dptr && !a->freeing && !a->imported && !a->module;
    bool async = ok && a->async;
    pthread_mutex_unlock(&g_mem_mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE; /* unknown, freed, interior or VMM pointer */
    /* The native free synchronizes the context before releasing (not for
     * stream-ordered allocations, as documented). */
    if (!async)
        sim_ctx_sync(c);
    pthread_mutex_lock(&g_mem_mu);
    a = nat_find((uintptr_t)dptr);
    if (!a || a->base != (uintptr_t)dptr || a->freeing || a->imported) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE; /* freed concurrently */
    }
    native_release(a);
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    SIM_ENTER(cuMemGetAddressRange_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    uintptr_t base = 0;
    size_t size = 0;
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find((uintptr_t)dptr);
    struct vmap *m = a ? NULL : map_find((uintptr_t)dptr, NULL);
    if (a) {
        base = a->base;
        size = a->size;
    } else if (m) {
        base = m->base;
        size = m->size;
    }
    pthread_mutex_unlock(&g_mem_mu);
    if (!a && !m)
        return CUDA_ERROR_NOT_FOUND; /* assumption: no allocation contains dptr */
    if (pbase)
        *pbase = (CUdeviceptr)base;
    if (psize)
        *psize = size;
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_out, size_t *total_out)
{
    SIM_ENTER(cuMemGetInfo_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!free_out || !total_out)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    size_t used = g_native_bytes[c->dev] + g_phys_bytes[c->dev];
    pthread_mutex_unlock(&g_mem_mu);
    size_t total = sim_knob.mem_bytes;
    *total_out = total;
    *free_out = used >= total ? 0 : total - used;
    return CUDA_SUCCESS;
}

/* ---- copies and memsets ---------------------------------------------------------- */

enum copy_kind { HTOD, DTOH, DTOD };

/* cap: where the work may be captured (async copies and memsets), *cap is
 * set when s is capturing and the work must become a node instead of
 * running; other work into a capturing stream is refused as unsupported. */
static CUresult stream_for(CUstream h, bool pt, struct sim_stream **s, bool *cap)
{
    CUresult r = sim_stream_resolve(h, pt, s);
    if (r)
        return r;
    if (sim_capture_active(*s)) {
        if (cap) {
            *cap = true;
            return CUDA_SUCCESS;
        }
        sim_capture_invalidate(*s);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return sim_capture_check_legacy(*s);
}

/* The context a captured node runs in: the stream's, else the current. */
static CUcontext capture_ctx(const struct sim_stream *s, struct sim_ctx *cur)
{
    return (CUcontext)(s->ctx ? s->ctx : cur);
}

/* cuda.h: an async copy into a capturing stream adds a memcpy node, which
 * reads and writes at each launch (pageable host memory is not staged at
 * capture). Synchronous work in a capturing stream stays unsupported. */
static CUresult capture_copy(struct sim_stream *s, struct sim_ctx *c, enum copy_kind k,
                             void *dst, const void *src, size_t n)
{
    CUDA_MEMCPY3D p = {0};
    p.srcMemoryType = k == HTOD ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    p.dstMemoryType = k == DTOH ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (k == HTOD)
        p.srcHost = src;
    else
        p.srcDevice = (CUdeviceptr)src;
    if (k == DTOH)
        p.dstHost = dst;
    else
        p.dstDevice = (CUdeviceptr)dst;
    p.WidthInBytes = n;
    p.Height = 1;
    p.Depth = 1;
    struct sim_onode o = {0};
    CUresult r = sim_onode_memcpy(&o, &p, capture_ctx(s, c));
    if (r != CUDA_SUCCESS) {
        sim_capture_invalidate(s);
        return r;
    }
    return sim_capture_add_other(s, &o);
}

/* sync: the call returns when the copy is done. */
static CUresult do_copy(enum copy_kind k, void *dst, const void *src, size_t n, CUstream h,
                        bool pt, bool sync)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (n == 0)
        return CUDA_SUCCESS;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    if (k != HTOD && !sim_mem_valid((uintptr_t)src, n, false))
        return CUDA_ERROR_INVALID_VALUE;
    if (k != DTOH && !sim_mem_valid((uintptr_t)dst, n, true))
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_stream *s;
    bool cap = false;
    /* The synchronous copies pass no stream and sync: not capturable.
     * Simcuda limit: cuMemcpyDtoHAsync given the NULL handle of a capturing
     * per-thread stream is taken for one of them and refused. */
    if ((r = stream_for(h, pt, &s, sync && h == NULL ? NULL : &cap)) != CUDA_SUCCESS)
        return r;
    if (cap)
        return capture_copy(s, c, k, dst, src, n);
    struct sim_op *op = sim_op_new(SIM_OP_COPY, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.copy.dst = dst;
    op->u.copy.src = src;
    op->u.copy.n = n;
    if (k == HTOD && !sync) {
        /* Pageable host memory is staged at call time, so the caller may
         * reuse its buffer as soon as the call returns (documented). */
        op->u.copy.staging = sim_malloc(n);
        if (!op->u.copy.staging) {
            sim_op_free(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(op->u.copy.staging, src, n);
    }
    uint64_t seq = sim_stream_submit(s, op, NULL, 0);
    if (sync) {
        sim_stream_wait(s, seq);
        sim_print_flush(s->ctx ? s->ctx : c); /* a blocking copy flushes device printf */
    }
    return CUDA_SUCCESS;
}

/* The synchronous copies ("exhibits synchronous behavior for most use
 * cases") are ordered in the legacy (or per-thread) stream and return once
 * the copy is done. */
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyHtoD_v2);
    return do_copy(HTOD, (void *)dstDevice, srcHost, ByteCount, NULL, false, true);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyHtoD_v2_ptds);
    return do_copy(HTOD, (void *)dstDevice, srcHost, ByteCount, NULL, true, true);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoH_v2);
    return do_copy(DTOH, dstHost, (const void *)srcDevice, ByteCount, NULL, false, true);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoH_v2_ptds);
    return do_copy(DTOH, dstHost, (const void *)srcDevice, ByteCount, NULL, true, true);
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoD_v2);
    return do_copy(DTOD, (void *)dstDevice, (const void *)srcDevice, ByteCount, NULL, false,
                   true);
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    SIM_ENTER(cuMemcpyDtoD_v2_ptds);
    return do_copy(DTOD, (void *)dstDevice, (const void *)srcDevice, ByteCount, NULL, true,
                   true);
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    SIM_ENTER(cuMemcpyHtoDAsync_v2);
    return do_copy(HTOD, (void *)dstDevice, srcHost, ByteCount, hStream, false, false);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    SIM_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
    return do_copy(HTOD, (void *)dstDevice, srcHost, ByteCount, hStream, true, false);
}

/* To pageable host memory the async copy returns once it is complete. */
CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoHAsync_v2);
    return do_copy(DTOH, dstHost, (const void *)srcDevice, ByteCount, hStream, false, true);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
    return do_copy(DTOH, dstHost, (const void *)srcDevice, ByteCount, hStream, true, true);
}

/* Unified addressing: the direction follows from where each pointer lies;
 * memory outside every allocation is the host's. */
static enum copy_kind uva_kind(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    bool dev_src = sim_mem_valid((uintptr_t)src, n, false);
    bool dev_dst = sim_mem_valid((uintptr_t)dst, n, true);
    return dev_src && dev_dst ? DTOD : dev_src ? DTOH : HTOD;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_ENTER(cuMemcpy);
    return do_copy(uva_kind(dst, src, ByteCount), (void *)dst, (const void *)src, ByteCount, NULL,
                   false, true);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    SIM_ENTER(cuMemcpy_ptds);
    return do_copy(uva_kind(dst, src, ByteCount), (void *)dst, (const void *)src, ByteCount, NULL,
                   true, true);
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyAsync);
    return do_copy(uva_kind(dst, src, ByteCount), (void *)dst, (const void *)src, ByteCount,
                   hStream, false, false);
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream)
{
    SIM_ENTER(cuMemcpyAsync_ptsz);
    return do_copy(uva_kind(dst, src, ByteCount), (void *)dst, (const void *)src, ByteCount,
                   hStream, true, false);
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoDAsync_v2);
    return do_copy(DTOD, (void *)dstDevice, (const void *)srcDevice, ByteCount, hStream, false,
                   false);
}

CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    SIM_ENTER(cuMemcpyDtoDAsync_v2_ptsz);
    return do_copy(DTOD, (void *)dstDevice, (const void *)srcDevice, ByteCount, hStream, true,
                   false);
}

/* Memsets are asynchronous with respect to the host (documented for device
 * memory), ordered in their stream. rows rows of n elements, pitch bytes
 * apart (one row: pitch unused, 0). */
static CUresult do_memset2d(CUdeviceptr dst, size_t pitch, uint32_t value, size_t n, size_t rows,
                            size_t elem, CUstream h, bool pt, bool async)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (n == 0 || rows == 0)
        return CUDA_SUCCESS;
    if ((uintptr_t)dst % elem != 0 || n > SIZE_MAX / elem)
        return CUDA_ERROR_INVALID_VALUE;
    /* 2-D: the pitch holds a row and keeps the elements aligned
     * (assumption: cuda.h asks for a cuMemAllocPitch pitch, which does). */
    if (rows > 1 && (pitch < n * elem || pitch % elem || (rows - 1) > (SIZE_MAX - n * elem) / pitch))
        return CUDA_ERROR_INVALID_VALUE;
    size_t span = (rows - 1) * (rows > 1 ? pitch : 0) + n * elem;
    if (!sim_mem_valid((uintptr_t)dst, span, true))
        return CUDA_ERROR_INVALID_VALUE;
    if (elem < 4)
        value &= elem == 1 ? 0xffu : 0xffffu; /* one element's bytes */
    struct sim_stream *s;
    bool cap = false;
    if ((r = stream_for(h, pt, &s, async ? &cap : NULL)) != CUDA_SUCCESS)
        return r;
    if (cap) {
        /* cuda.h: an async memset into a capturing stream adds a memset
         * node (rows of n elements; one row: pitch 0). */
        CUDA_MEMSET_NODE_PARAMS p = {.dst = dst, .pitch = rows > 1 ? pitch : 0, .value = value,
                                     .elementSize = (unsigned)elem, .width = n, .height = rows};
        struct sim_onode o = {0};
        if ((r = sim_onode_memset(&o, &p, capture_ctx(s, c))) != CUDA_SUCCESS) {
            sim_capture_invalidate(s);
            return r;
        }
        return sim_capture_add_other(s, &o);
    }
    struct sim_op *op =
        sim_op_new(elem == 1 ? SIM_OP_SET8 : elem == 2 ? SIM_OP_SET16 : SIM_OP_SET32, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.set.dst = (void *)dst;
    op->u.set.value = value;
    op->u.set.n = n;
    op->u.set.rows = rows;
    op->u.set.pitch = rows > 1 ? pitch : 0;
    sim_stream_submit(s, op, NULL, 0);
    return CUDA_SUCCESS;
}

static CUresult do_memset(CUdeviceptr dst, uint32_t value, size_t n, size_t elem, CUstream h,
                          bool pt, bool async)
{
    return do_memset2d(dst, 0, value, n, 1, elem, h, pt, async);
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_ENTER(cuMemsetD8_v2);
    return do_memset(dstDevice, uc, N, 1, NULL, false, false);
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    SIM_ENTER(cuMemsetD8_v2_ptds);
    return do_memset(dstDevice, uc, N, 1, NULL, true, false);
}

CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_ENTER(cuMemsetD32_v2);
    return do_memset(dstDevice, ui, N, 4, NULL, false, false);
}

CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    SIM_ENTER(cuMemsetD32_v2_ptds);
    return do_memset(dstDevice, ui, N, 4, NULL, true, false);
}

CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD8Async);
    return do_memset(dstDevice, uc, N, 1, hStream, false, true);
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD8Async_ptsz);
    return do_memset(dstDevice, uc, N, 1, hStream, true, true);
}

CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD32Async);
    return do_memset(dstDevice, ui, N, 4, hStream, false, true);
}

CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD32Async_ptsz);
    return do_memset(dstDevice, ui, N, 4, hStream, true, true);
}

CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    SIM_ENTER(cuMemsetD16Async);
    return do_memset(dstDevice, us, N, 2, hStream, false, true);
}

CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                               CUstream hStream)
{
    SIM_ENTER(cuMemsetD16Async_ptsz);
    return do_memset(dstDevice, us, N, 2, hStream, true, true);
}

CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char v, size_t Width,
                          size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D8Async);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 1, hStream, false, true);
}

CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char v, size_t Width,
                               size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D8Async_ptsz);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 1, hStream, true, true);
}

CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short v, size_t Width,
                           size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D16Async);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 2, hStream, false, true);
}

CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short v, size_t Width,
                                size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D16Async_ptsz);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 2, hStream, true, true);
}

CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int v, size_t Width,
                           size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D32Async);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 4, hStream, false, true);
}

CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int v, size_t Width,
                                size_t Height, CUstream hStream)
{
    SIM_ENTER(cuMemsetD2D32Async_ptsz);
    return do_memset2d(dstDevice, dstPitch, v, Width, Height, 4, hStream, true, true);
}

/* ---- stream-ordered allocation ---------------------------------------------------------- */

/* Assumption: the allocation is made at call time (allowed: it only has to
 * be usable by work ordered after it); the free is ordered in the stream. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, CUstream h,
                            bool pt)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    struct sim_stream *s;
    if ((r = sim_stream_resolve(h, pt, &s)) != CUDA_SUCCESS)
        return r;
    struct sim_ctx *owner = s->ctx ? s->ctx : c;
    int dev = owner->dev; /* the stream's device's pool */
    if (pool) {
        /* the pool may be another device's than the stream's (documented) */
        if (!sim_reg_has(pool, SIM_T_POOL))
            return CUDA_ERROR_INVALID_VALUE;
        dev = ((const struct sim_pool *)(const void *)pool)->dev;
    }
    /* cuda.h: captured, it adds an allocation node; the graph owns the memory. */
    if (sim_capture_active(s))
        return sim_gmem_capture_alloc(s, dev, size, dptr);
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    return native_alloc(dptr, size, true, dev, dev, owner, pool);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props)
{
    SIM_ENTER(cuMemPoolCreate);
    SIM_CHECK_INIT();
    if (!pool || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_NOT_SUPPORTED; /* simcuda models device pools only */
    if (props->location.id < 0 || props->location.id >= sim_knob.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    struct sim_pool *p = sim_calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = props->location.id;
    sim_reg_add(p, SIM_T_POOL);
    *pool = (CUmemoryPool)(void *)p;
    return CUDA_SUCCESS;
}

/* Assumption: allocations made from the pool stay valid until freed (the
 * driver releases a destroyed pool's resources once none is left). */
CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    SIM_ENTER(cuMemPoolDestroy);
    SIM_CHECK_INIT();
    if (!pool || !sim_reg_has(pool, SIM_T_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    sim_reg_del(pool);
    sim_free(pool);
    return CUDA_SUCCESS;
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, bool pt)
{
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    struct sim_stream *s;
    if ((r = sim_stream_resolve(h, pt, &s)) != CUDA_SUCCESS)
        return r;
    /* Into a capture: a free node, of a graph allocation only (cuda.h). An
     * H200 refuses the rest with CUDA_ERROR_INVALID_VALUE and the capture
     * goes on (capture.mem_free_async.outside_allocation); the memory stays. */
    if (sim_capture_active(s))
        return sim_gmem_capture_free(s, (uintptr_t)dptr);
    if ((r = sim_capture_check_legacy(s)) != CUDA_SUCCESS)
        return r;
    if (is_graph((uintptr_t)dptr))
        return sim_gmem_free_outside((uintptr_t)dptr, s);
    struct sim_op *op = sim_op_new(SIM_OP_FREE, 0);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find((uintptr_t)dptr);
    bool ok = a && a->base == (uintptr_t)dptr && !a->freeing && !a->imported && !a->module;
    if (ok)
        a->freeing = true;
    pthread_mutex_unlock(&g_mem_mu);
    if (!ok) {
        sim_op_free(op);
        return CUDA_ERROR_INVALID_VALUE;
    }
    op->u.free.base = (uintptr_t)dptr;
    sim_stream_submit(s, op, NULL, 0);
    return CUDA_SUCCESS;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_ENTER(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, NULL, hStream, false);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    SIM_ENTER(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, NULL, hStream, true);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    SIM_ENTER(cuMemAllocFromPoolAsync);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, false);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    SIM_ENTER(cuMemAllocFromPoolAsync_ptsz);
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, true);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    SIM_ENTER(cuMemFreeAsync);
    return free_async(dptr, hStream, false);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    SIM_ENTER(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream, true);
}

/* ---- virtual memory management ------------------------------------------------------ */

static CUresult check_prop(const CUmemAllocationProp *p)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE; /* simcuda models device memory only */
    if (p->location.id < 0 || p->location.id >= sim_knob.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    if (p->requestedHandleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    SIM_ENTER(cuMemGetAllocationGranularity);
    SIM_CHECK_INIT();
    if (!granularity || (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
                         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r)
        return r;
    *granularity = sim_knob.granularity;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    SIM_ENTER(cuMemAddressReserve);
    SIM_CHECK_INIT();
    size_t g = sim_knob.granularity;
    if (!ptr || size == 0 || flags != 0 || size % g != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (alignment & (alignment - 1))
        return CUDA_ERROR_INVALID_VALUE; /* a power of two or zero */
    size_t a = alignment > g ? alignment : g;
    if (size > SIZE_MAX - a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const int mflags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uintptr_t base = 0;
    if (addr && addr % a == 0) {
        /* the address is a hint */
        void *p = mmap((void *)addr, size, PROT_NONE, mflags | MAP_FIXED_NOREPLACE, -1, 0);
        if (p != MAP_FAILED && (uintptr_t)p == addr)
            base = addr;
        else if (p != MAP_FAILED)
            munmap(p, size);
    }
    if (!base) {
        void *p = mmap(NULL, size + a, PROT_NONE, mflags, -1, 0);
        if (p == MAP_FAILED)
            return CUDA_ERROR_OUT_OF_MEMORY;
        uintptr_t raw = (uintptr_t)p;
        base = round_up(raw, a);
        if (base > raw)
            munmap(p, base - raw);
        if (raw + size + a > base + size)
            munmap((void *)(base + size), raw + size + a - (base + size));
    }
    pthread_mutex_lock(&g_mem_mu);
    if (g_nresv == g_resv_cap)
        g_resv = grow(g_resv, &g_resv_cap, sizeof *g_resv);
    long i;
    SIM_FLOOR(g_resv, g_nresv, base, i);
    size_t at = (size_t)(i + 1);
    memmove(&g_resv[at + 1], &g_resv[at], (g_nresv - at) * sizeof *g_resv);
    g_resv[at] = (struct resv){base, size, NULL, 0, 0};
    g_nresv++;
    g_mem_gen++;
    pthread_mutex_unlock(&g_mem_mu);
    *ptr = (CUdeviceptr)base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER(cuMemAddressFree);
    SIM_CHECK_INIT();
    pthread_mutex_lock(&g_mem_mu);
    struct resv *r = resv_find((uintptr_t)ptr);
    if (!r || r->base != (uintptr_t)ptr || r->size != size) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE; /* documented: ptr and size must match */
    }
    if (r->nmaps) {
        /* Assumption: a reservation with live mappings cannot be freed. */
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    munmap((void *)r->base, r->size);
    sim_free(r->maps);
    size_t at = (size_t)(r - g_resv);
    memmove(&g_resv[at], &g_resv[at + 1], (g_nresv - at - 1) * sizeof *g_resv);
    g_nresv--;
    g_mem_gen++;
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    SIM_ENTER(cuMemCreate);
    SIM_CHECK_INIT();
    if (!sim_knob.vmm)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (!handle || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = check_prop(prop);
    if (r)
        return r;
    if (size == 0 || size % sim_knob.granularity != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* SIMCUDA_VMM_FD=0: a device without POSIX fd handles (the attribute
     * reads 0); asking for one is refused, as cuda.h lets a driver. */
    if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) && !sim_knob.vmm_fd)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct sim_phys *ph = sim_calloc(1, sizeof *ph);
    if (!ph)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&g_mem_mu);
    if (!fits_total(prop->location.id, size)) {
        pthread_mutex_unlock(&g_mem_mu);
        sim_free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* The name tells cuMemImportFromShareableHandle what the fd is. */
    char name[32];
    snprintf(name, sizeof name, "%s%d", SIM_VMM_MEMFD, prop->location.id);
    ph->fd = memfd_create(name, MFD_CLOEXEC);
    if (ph->fd < 0 || ftruncate(ph->fd, (off_t)size) != 0) {
        if (ph->fd >= 0)
            close(ph->fd);
        pthread_mutex_unlock(&g_mem_mu);
        sim_free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->size = size;
    ph->id = g_next_id++;
    ph->prop = *prop;
    ph->dev = prop->location.id;
    ph->handle_refs = 1;
    g_phys_bytes[ph->dev] += size;
    g_nphys++;
    sim_reg_add(ph, SIM_T_PHYS);
    pthread_mutex_unlock(&g_mem_mu);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

static struct sim_phys *phys_get(CUmemGenericAllocationHandle h)
{
    void *p = (void *)(uintptr_t)h;
    return sim_reg_has(p, SIM_T_PHYS) ? p : NULL;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    SIM_ENTER(cuMemRelease);
    SIM_CHECK_INIT();
    pthread_mutex_lock(&g_mem_mu);
    struct sim_phys *ph = phys_get(handle);
    if (!ph) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (--ph->handle_refs == 0) {
        sim_reg_del(ph);
        phys_maybe_destroy(ph); /* memory goes once also unmapped everywhere */
    }
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    SIM_ENTER(cuMemMap);
    SIM_CHECK_INIT();
    size_t g = sim_knob.granularity;
    uintptr_t p = (uintptr_t)ptr;
    if (flags != 0 || offset != 0) /* documented: offset currently must be zero */
        return CUDA_ERROR_INVALID_VALUE;
    if (size == 0 || size % g != 0 || p % g != 0 || p + size < p)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    CUresult res = CUDA_ERROR_INVALID_VALUE;
    struct sim_phys *ph = phys_get(handle);
    struct resv *r = resv_find(p);
    if (!ph || size > ph->size || !r || p + size > r->base + r->size)
        goto out;
    long i = map_floor(r, p);
    if (i >= 0 && r->maps[i].base + r->maps[i].size > p)
        goto out; /* overlaps a mapping that starts before */
    if ((size_t)(i + 1) < r->nmaps && r->maps[i + 1].base < p + size)
        goto out; /* overlaps the next mapping */
    void *m = mmap((void *)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED, ph->fd, 0);
    if (m == MAP_FAILED) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (r->nmaps == r->cap)
        r->maps = grow(r->maps, &r->cap, sizeof *r->maps);
    size_t at = (size_t)(i + 1);
    memmove(&r->maps[at + 1], &r->maps[at], (r->nmaps - at) * sizeof *r->maps);
    memset(&r->maps[at], 0, sizeof r->maps[at]);
    r->maps[at].base = p;
    r->maps[at].size = size;
    r->maps[at].phys = ph;
    r->maps[at].access = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    r->nmaps++;
    ph->maps++;
    g_mem_gen++;
    res = CUDA_SUCCESS;
out:
    pthread_mutex_unlock(&g_mem_mu);
    return res;
}

/* Mappings [first, last) of r cover exactly [p, p+size) contiguously? */
static bool exact_cover(struct resv *r, uintptr_t p, size_t size, size_t *first, size_t *last)
{
    long i = map_floor(r, p);
    if (i < 0 || r->maps[i].base != p)
        return false;
    uintptr_t cur = p, end = p + size;
    size_t j = (size_t)i;
    while (cur < end) {
        if (j >= r->nmaps || r->maps[j].base != cur)
            return false;
        cur += r->maps[j].size;
        j++;
    }
    if (cur != end)
        return false;
    *first = (size_t)i;
    *last = j;
    return true;
}

/* No mapping of r overlaps [p, p + size). */
static bool nothing_mapped(struct resv *r, uintptr_t p, size_t size)
{
    long i = map_floor(r, p);
    if (i >= 0 && r->maps[i].base + r->maps[i].size > p)
        return false;
    size_t next = (size_t)(i + 1);
    return next >= r->nmaps || r->maps[next].base >= p + size;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    SIM_ENTER(cuMemUnmap);
    SIM_CHECK_INIT();
    uintptr_t p = (uintptr_t)ptr;
    size_t first, last;
    pthread_mutex_lock(&g_mem_mu);
    struct resv *r = resv_find(p);
    if (!r || size == 0 || p + size > r->base + r->size) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!exact_cover(r, p, size, &first, &last)) {
        /* Whole mapped ranges only (documented); a reserved range with
         * nothing mapped in it at all is accepted as a no-op, as an H200
         * with driver 580 does (driver-answers.txt: vmm.unmap_unmapped). */
        bool none = nothing_mapped(r, p, size);
        pthread_mutex_unlock(&g_mem_mu);
        return none ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    /* Back to a reservation, without waiting for in-flight work (like the
     * real driver): a kernel still using the range faults. */
    mmap((void *)p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
         0);
    for (size_t j = first; j < last; j++) {
        struct sim_phys *ph = r->maps[j].phys;
        ph->maps--;
        phys_maybe_destroy(ph);
    }
    memmove(&r->maps[first], &r->maps[last], (r->nmaps - last) * sizeof *r->maps);
    r->nmaps -= last - first;
    g_mem_gen++;
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    SIM_ENTER(cuMemSetAccess);
    SIM_CHECK_INIT();
    if (!desc || count == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id < 0 || desc[i].location.id >= sim_knob.devices)
            return CUDA_ERROR_INVALID_DEVICE;
        if (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t p = (uintptr_t)ptr;
    size_t first, last;
    pthread_mutex_lock(&g_mem_mu);
    struct resv *r = resv_find(p);
    /* Assumption: the range is whole mappings (documented: "a fully mapped
     * address range containing all allocations"). */
    if (!r || size == 0 || p + size > r->base + r->size || !exact_cover(r, p, size, &first, &last)) {
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    /* Each mapping keeps one flag per device (later descriptors win); the
     * host protection is the widest, the kernels' check is per device. */
    g_mem_gen++; /* before: a failed mprotect leaves the earlier ones changed */
    for (size_t j = first; j < last; j++) {
        uint8_t acc[SIM_MAX_DEVICES];
        memcpy(acc, r->maps[j].acc, sizeof acc);
        for (size_t i = 0; i < count; i++)
            acc[desc[i].location.id] = (uint8_t)desc[i].flags;
        CUmemAccess_flags wide = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        for (int d = 0; d < sim_knob.devices; d++)
            if (acc[d] > wide)
                wide = acc[d];
        int prot = wide == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ? PROT_READ | PROT_WRITE
                   : wide == CU_MEM_ACCESS_FLAGS_PROT_READ    ? PROT_READ
                                                              : PROT_NONE;
        if (mprotect((void *)r->maps[j].base, r->maps[j].size, prot) != 0) {
            pthread_mutex_unlock(&g_mem_mu);
            return CUDA_ERROR_UNKNOWN;
        }
        memcpy(r->maps[j].acc, acc, sizeof acc);
        r->maps[j].access = wide;
    }
    pthread_mutex_unlock(&g_mem_mu);
    return CUDA_SUCCESS;
}

CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr)
{
    SIM_ENTER(cuMemGetAccess);
    SIM_CHECK_INIT();
    if (!flags || !location)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    if (location->id < 0 || location->id >= sim_knob.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mem_mu);
    /* native memory is not a mapping: fails as cuMemRetainAllocationHandle */
    struct vmap *m = map_find((uintptr_t)ptr, NULL);
    if (m)
        *flags = (unsigned long long)m->acc[location->id];
    pthread_mutex_unlock(&g_mem_mu);
    return m ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    SIM_ENTER(cuMemRetainAllocationHandle);
    SIM_CHECK_INIT();
    if (!handle)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    struct vmap *m = map_find((uintptr_t)addr, NULL);
    if (!m) {
        /* not mapped by cuMemMap: native memory fails as on a GPU */
        pthread_mutex_unlock(&g_mem_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_phys *ph = m->phys;
    if (ph->handle_refs++ == 0)
        sim_reg_add(ph, SIM_T_PHYS); /* the same handle value, valid again */
    pthread_mutex_unlock(&g_mem_mu);
    *handle = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                CUmemGenericAllocationHandle handle)
{
    SIM_ENTER(cuMemGetAllocationPropertiesFromHandle);
    SIM_CHECK_INIT();
    if (!prop)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mem_mu);
    struct sim_phys *ph = phys_get(handle);
    if (ph)
        *prop = ph->prop;
    pthread_mutex_unlock(&g_mem_mu);
    return ph ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pointer attributes ---------------------------------------------------------------- */

/* What one address is, looked up once for every attribute asked about it. */
struct ptr_info {
    enum { PI_NONE, PI_NATIVE, PI_RESERVED, PI_MAPPED } kind;
    struct nat nat;              /* PI_NATIVE */
    uintptr_t rbase, mbase;      /* PI_RESERVED, PI_MAPPED: reservation, mapping */
    size_t rsize, msize;
    uint64_t block;              /* PI_MAPPED: the physical allocation's id */
    int dev;                     /* PI_MAPPED: its device */
    unsigned handle_types;       /* PI_MAPPED: its requested handle types */
};

static void ptr_lookup(uintptr_t p, struct ptr_info *pi)
{
    memset(pi, 0, sizeof *pi);
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(p);
    struct resv *r = a ? NULL : resv_find(p);
    struct vmap *m = r ? map_find(p, NULL) : NULL;
    if (a) {
        pi->kind = PI_NATIVE;
        pi->nat = *a;
    } else if (r) {
        pi->kind = m ? PI_MAPPED : PI_RESERVED;
        pi->rbase = r->base;
        pi->rsize = r->size;
    }
    if (m) {
        pi->mbase = m->base;
        pi->msize = m->size;
        pi->block = m->phys->id;
        pi->dev = m->phys->dev;
        pi->handle_types = (unsigned)m->phys->prop.requestedHandleTypes;
    }
    pthread_mutex_unlock(&g_mem_mu);
}

/* The answer for one attribute as a value of *size bytes (4 or 8; written
 * little-endian into the caller's data). VMM memory belongs to no context
 * (assumption: CONTEXT is NULL); a native allocation's range is itself, a
 * VMM pointer's the reservation it lies in (documented). Not modelled:
 * P2P tokens, sync memops, RDMA, access flags, decompression. */
static CUresult ptr_attr(const struct ptr_info *pi, CUpointer_attribute a, uintptr_t p,
                         bool have_ctx, uint64_t *v, size_t *size)
{
    bool nat = pi->kind == PI_NATIVE, mapped = pi->kind == PI_MAPPED;
    bool managed = nat && pi->nat.dev < 0;
    *size = 8;
    *v = 0;
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *v = nat ? (uint64_t)(uintptr_t)pi->nat.ctx : 0;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *size = 4;
        *v = CU_MEMORYTYPE_DEVICE;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (!have_ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
        *v = p;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        *v = p;
        return managed ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *v = nat ? pi->nat.id : pi->block;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *size = 4;
        *v = managed;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *size = 4;
        *v = (uint64_t)(nat ? pi->nat.acct : pi->dev);
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *size = 4;
        *v = nat && !managed && !pi->nat.async; /* cuMemAlloc and pitched memory */
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *v = nat ? pi->nat.base : pi->rbase;
        return pi->kind != PI_NONE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *v = nat ? pi->nat.size : pi->rsize;
        return pi->kind != PI_NONE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *size = 4;
        *v = nat || mapped;
        return pi->kind != PI_NONE ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *size = 4;
        *v = mapped ? pi->handle_types : 0;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *v = nat ? (uint64_t)(uintptr_t)pi->nat.pool : 0;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *v = nat ? pi->nat.base : pi->mbase;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *v = nat ? pi->nat.size : pi->msize;
        return nat || mapped ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static bool have_context(void)
{
    struct sim_ctx *c;
    return sim_ctx_need(&c) == CUDA_SUCCESS;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttribute);
    SIM_CHECK_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    struct ptr_info pi;
    ptr_lookup((uintptr_t)ptr, &pi);
    uint64_t v;
    size_t size;
    CUresult r = ptr_attr(&pi, attribute, (uintptr_t)ptr, have_context(), &v, &size);
    if (r == CUDA_SUCCESS)
        memcpy(data, &v, size);
    return r;
}

/* Documented: an address that is no CUDA pointer gets every attribute's
 * NULL value and CUDA_SUCCESS. Assumption: so does an attribute that does
 * not apply to a valid pointer (a device allocation's host pointer). */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                void **data, CUdeviceptr ptr)
{
    SIM_ENTER(cuPointerGetAttributes);
    SIM_CHECK_INIT();
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    struct ptr_info pi;
    ptr_lookup((uintptr_t)ptr, &pi);
    bool ctx = have_context();
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; i < numAttributes; i++) {
            uint64_t v;
            size_t size;
            CUresult r = ptr_attr(&pi, attributes[i], (uintptr_t)ptr, ctx, &v, &size);
            /* an unknown attribute stays an error */
            if (r == CUDA_ERROR_INVALID_VALUE && attributes[i] >= CU_POINTER_ATTRIBUTE_CONTEXT &&
                attributes[i] <= CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE) {
                r = CUDA_SUCCESS;
                v = 0;
            }
            if (r != CUDA_SUCCESS)
                return r; /* nothing written: checked in the first pass */
            if (pass == 1 && data[i])
                memcpy(data[i], &v, size);
        }
    }
    return CUDA_SUCCESS;
}

void sim_mem_live(long *mappings, long *handles, long *reservations, long *allocations)
{
    pthread_mutex_lock(&g_mem_mu);
    long m = 0;
    for (size_t i = 0; i < g_nresv; i++)
        m += (long)g_resv[i].nmaps;
    *mappings = m;
    *handles = g_nphys;
    *reservations = (long)g_nresv;
    long mods = 0;
    for (size_t i = 0; i < g_nnat; i++)
        mods += g_nat[i].module || g_nat[i].graph;
    *allocations = (long)g_nnat - mods; /* a module's storage goes with the module */
    pthread_mutex_unlock(&g_mem_mu);
}

/* ---- kernel access checks ------------------------------------------------------------ */

static _Noreturn void fault(const struct sim_ctx *ctx, const struct sim_kcall *call,
                            uintptr_t addr, int owner, const char *why)
{
    fprintf(stderr,
            "simcuda: fatal: kernel %s running on device %d touched %#lx (memory of device %d) "
            "%s: an illegal memory access; the context is lost, aborting\n",
            call->name ? call->name : call->impl ? call->impl->name : "?", ctx->dev, (unsigned long)addr, owner, why);
    fflush(stderr);
    abort();
}

/* Under g_mem_mu: every allocation or mapping overlapping [lo, hi) must be
 * accessible from ctx's device. */
static void check_range(struct sim_ctx *ctx, const struct sim_kcall *call, uintptr_t lo,
                        uintptr_t hi)
{
    long i;
    SIM_FLOOR(g_nat, g_nnat, hi - 1, i);
    for (; i >= 0 && g_nat[i].base + g_nat[i].size > lo; i--)
        if (!sim_ctx_can_access(ctx, g_nat[i].dev))
            fault(ctx, call, lo > g_nat[i].base ? lo : g_nat[i].base, g_nat[i].dev,
                  "without peer access (cuCtxEnablePeerAccess)");
    SIM_FLOOR(g_resv, g_nresv, hi - 1, i);
    for (; i >= 0 && g_resv[i].base + g_resv[i].size > lo; i--) {
        struct resv *r = &g_resv[i];
        long j = map_floor(r, hi - 1);
        for (; j >= 0 && r->maps[j].base + r->maps[j].size > lo; j--) {
            const struct vmap *m = &r->maps[j];
            if (m->acc[ctx->dev] != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
                fault(ctx, call, lo > m->base ? lo : m->base, m->phys->dev,
                      "without read/write access for its device (cuMemSetAccess)");
        }
    }
}

/* Under g_mem_mu: the lowest and highest address any allocation or
 * reservation covers, as of generation gen, so that the scalars among a
 * kernel's argument words (counts, float bits) skip the searches. */
static struct {
    uint64_t gen;
    uintptr_t lo, hi;
} g_span = { .gen = UINT64_MAX };

static void span_refresh(void)
{
    /* each table is sorted by base and its ranges do not overlap */
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    if (g_nnat) {
        lo = g_nat[0].base;
        hi = g_nat[g_nnat - 1].base + g_nat[g_nnat - 1].size;
    }
    if (g_nresv) {
        if (g_resv[0].base < lo)
            lo = g_resv[0].base;
        if (g_resv[g_nresv - 1].base + g_resv[g_nresv - 1].size > hi)
            hi = g_resv[g_nresv - 1].base + g_resv[g_nresv - 1].size;
    }
    g_span.lo = lo, g_span.hi = hi, g_span.gen = g_mem_gen;
}

enum { SIM_SEEN_MAPPED = -2 };
_Static_assert(SIM_SEEN_SLOTS == 1 << (64 - 55), "check_word's hash picks one of SIM_SEEN_SLOTS");

/* Under g_mem_mu: check_range(w, w + 1), answered from seen when a kernel of
 * this worker touched w's page since the last change to the tables. The
 * searches were half of a stream worker's time, and a third more on mapped
 * memory than on native: the simulated GPU was slower on VMM memory, which
 * a real one is not. Only a page wholly inside one allocation or mapping is
 * remembered, so the answer is the search's. */
static void check_word(struct sim_ctx *ctx, const struct sim_kcall *call, uintptr_t w,
                       struct sim_seen *seen)
{
    uintptr_t pg = w / SIM_PAGE;
    /* hashed: buffers a power of two apart would share slots page by page */
    struct sim_seen_page *e = &seen->slot[(uint64_t)pg * 0x9E3779B97F4A7C15u >> 55];
    if (e->gen == g_mem_gen && e->page == pg + 1 &&
        (e->owner == SIM_SEEN_MAPPED || sim_ctx_can_access(ctx, e->owner)))
        return;
    check_range(ctx, call, w, w + 1); /* faults, or w may be touched */
    uintptr_t lo, hi;
    int owner;
    struct nat *a = nat_find(w);
    struct vmap *m = a ? NULL : map_find(w, NULL);
    if (a)
        lo = a->base, hi = a->base + a->size, owner = a->dev;
    else if (m)
        lo = m->base, hi = m->base + m->size, owner = SIM_SEEN_MAPPED;
    else
        return; /* in a gap between allocations */
    if (pg * SIM_PAGE < lo || pg * SIM_PAGE + SIM_PAGE > hi)
        return;
    *e = (struct sim_seen_page){ g_mem_gen, pg + 1, owner };
}

void sim_mem_check_kernel(struct sim_ctx *ctx, const struct sim_kcall *call,
                          struct sim_seen *seen)
{
    if (!ctx)
        return;
    if (seen->dev != ctx->dev + 1) {
        memset(seen, 0, sizeof *seen);
        seen->dev = ctx->dev + 1;
    }
    const struct sim_kernel_impl *k = call->impl;
    size_t skip = SIZE_MAX;
    pthread_mutex_lock(&g_mem_mu);
    if (k && k->range_begin >= 0) {
        /* [begin, end): the range, and the end word only as its end */
        uintptr_t b, e;
        memcpy(&b, call->args + k->offsets[k->range_begin], sizeof b);
        memcpy(&e, call->args + k->offsets[k->range_end], sizeof e);
        if (e > b)
            check_range(ctx, call, b, e);
        skip = k->offsets[k->range_end];
    }
    if (g_span.gen != g_mem_gen)
        span_refresh();
    for (size_t off = 0; off + 8 <= call->argsize; off += 8) {
        if (off == skip)
            continue;
        uintptr_t w;
        memcpy(&w, call->args + off, sizeof w);
        if (w >= g_span.lo && w < g_span.hi)
            check_word(ctx, call, w, seen);
    }
    pthread_mutex_unlock(&g_mem_mu);
}

/* ---- IPC (sim_ipc.c) ---------------------------------------------------------- */

static bool write_all(int fd, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(fd, p + done, n - done, (off_t)done);
        if (w <= 0)
            return false;
        done += (size_t)w;
    }
    return true;
}

/* Under g_mem_mu: a's pages move into a memfd mapped at the same address,
 * so that another process can map them too. */
static CUresult nat_share(struct nat *a)
{
    char name[48];
    snprintf(name, sizeof name, "%s%llu", SIM_IPC_MEMFD, (unsigned long long)a->id);
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, (off_t)a->maplen) != 0 || !write_all(fd, (const char *)a->base, a->maplen)) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (mmap((void *)a->base, a->maplen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
        MAP_FAILED) {
        close(fd);
        return CUDA_ERROR_MAP_FAILED;
    }
    a->exported = true;
    a->fd = fd;
    g_mem_gen++;
    return CUDA_SUCCESS;
}

/* What cuIpcGetMemHandle may export: cuMemAlloc'd (or pitched) memory,
 * its base or an interior pointer (an H200 makes a handle of either: the
 * handle names the allocation); not managed, stream-ordered or imported
 * memory (what CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE answers). */
static CUresult ipc_exportable(struct nat *a, uintptr_t p)
{
    if (!a || a->freeing || a->imported || a->dev < 0 || a->async)
        return CUDA_ERROR_INVALID_VALUE;
    return p - a->base < a->size ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_mem_ipc_export(uintptr_t p, struct sim_ipc_mem *out)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(p);
    CUresult r = ipc_exportable(a, p);
    bool first = r == CUDA_SUCCESS && !a->exported;
    pthread_mutex_unlock(&g_mem_mu);
    if (r != CUDA_SUCCESS)
        return r;
    /* Its bytes are copied once: no kernel may write them meanwhile. */
    if (first)
        sim_ctx_sync(NULL);
    pthread_mutex_lock(&g_mem_mu);
    a = nat_find(p);
    r = ipc_exportable(a, p);
    if (r == CUDA_SUCCESS && !a->exported)
        r = nat_share(a);
    if (r == CUDA_SUCCESS)
        *out = (struct sim_ipc_mem){.fd = a->fd, .id = a->id, .size = a->size,
                                    .maplen = a->maplen, .dev = a->dev};
    pthread_mutex_unlock(&g_mem_mu);
    return r;
}

/* Under g_mem_mu: c's mapping of the exporter's allocation, one more open. */
static bool reopen(struct sim_ctx *c, int pid, uint64_t id, CUdeviceptr *out)
{
    for (size_t i = 0; i < g_nnat; i++) {
        struct nat *a = &g_nat[i];
        if (a->imported && a->src_pid == pid && a->src_id == id && a->ctx == c) {
            a->refs++; /* opened again by this context: the same pointer (documented) */
            *out = (CUdeviceptr)a->base;
            return true;
        }
    }
    return false;
}

bool sim_mem_ipc_reopen(struct sim_ctx *c, int pid, uint64_t id, CUdeviceptr *out)
{
    pthread_mutex_lock(&g_mem_mu);
    bool ok = reopen(c, pid, id, out);
    pthread_mutex_unlock(&g_mem_mu);
    return ok;
}

CUresult sim_mem_ipc_import(struct sim_ctx *c, int pid, const struct sim_ipc_mem *m,
                            CUdeviceptr *out)
{
    pthread_mutex_lock(&g_mem_mu);
    if (reopen(c, pid, m->id, out)) {
        pthread_mutex_unlock(&g_mem_mu);
        close(m->fd);
        return CUDA_SUCCESS;
    }
    void *p = mmap(NULL, m->maplen, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&g_mem_mu);
        close(m->fd);
        return CUDA_ERROR_MAP_FAILED;
    }
    nat_insert(&(struct nat){.base = (uintptr_t)p, .size = m->size, .maplen = m->maplen,
                             .dev = c->dev, .acct = c->dev, .id = g_next_id++, .ctx = c,
                             .imported = true, .fd = m->fd, .refs = 1, .src_pid = pid,
                             .src_id = m->id});
    pthread_mutex_unlock(&g_mem_mu);
    *out = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult sim_mem_ipc_close(struct sim_ctx *c, uintptr_t p)
{
    pthread_mutex_lock(&g_mem_mu);
    struct nat *a = nat_find(p);
    bool ok = a && a->base == p && a->imported;
    bool last = ok && a->refs == 1;
    if (ok && !last)
        a->refs--;
    pthread_mutex_unlock(&g_mem_mu);
    if (!ok)
        return CUDA_ERROR_INVALID_VALUE;
    if (!last)
        return CUDA_SUCCESS;
    sim_ctx_sync(c); /* unmapped as cuMemFree releases: after the work that may use it */
    pthread_mutex_lock(&g_mem_mu);
    a = nat_find(p);
    ok = a && a->base == p && a->imported;
    if (ok && --a->refs == 0)
        native_release(a);
    pthread_mutex_unlock(&g_mem_mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult sim_phys_export_fd(CUmemGenericAllocationHandle h, int *fd)
{
    pthread_mutex_lock(&g_mem_mu);
    struct sim_phys *ph = phys_get(h);
    CUresult r = CUDA_SUCCESS;
    /* Assumption: only a handle type requested at cuMemCreate can be
     * exported (cuda.h: "if requested via cuMemCreate"). */
    if (!ph || !(ph->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((*fd = fcntl(ph->fd, F_DUPFD_CLOEXEC, 0)) < 0)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&g_mem_mu);
    return r;
}

CUresult sim_phys_import_fd(int fd, int dev, CUmemGenericAllocationHandle *out)
{
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size % sim_knob.granularity != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct sim_phys *ph = sim_calloc(1, sizeof *ph);
    if (!ph)
        return CUDA_ERROR_OUT_OF_MEMORY;
    ph->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* the caller keeps its own fd */
    if (ph->fd < 0) {
        sim_free(ph);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    ph->size = (size_t)st.st_size;
    ph->dev = dev;
    ph->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ph->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ph->prop.location.id = dev;
    ph->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    ph->handle_refs = 1;
    ph->imported = true;
    pthread_mutex_lock(&g_mem_mu);
    ph->id = g_next_id++;
    g_nphys++;
    sim_reg_add(ph, SIM_T_PHYS);
    pthread_mutex_unlock(&g_mem_mu);
    *out = (CUmemGenericAllocationHandle)(uintptr_t)ph;
    return CUDA_SUCCESS;
}
