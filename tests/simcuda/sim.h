/*
 * simcuda internal interface: shared by the files of the simulated driver.
 *
 * Rules (see DESIGN.md, "The simulated driver, simcuda (contract)"):
 * - Every exported cu* function starts with SIM_ENTER(itself) and then calls
 *   static/hidden helpers only; simcuda never calls its own exported names.
 * - Locking order (outer to inner):
 *     exec->mu -> g_submit_mu -> g_streams_mu -> stream->mu
 *     exec->mu -> graph->mu;  g_capture_mu -> graph->mu
 *     graph->mu -> a conditional body's graph->mu (bodies nest, never cycle)
 *     graph->mu -> g_cond_mu;  g_cond_mu is a leaf.
 *     g_capture_mu -> event->mu -> g_submit_mu
 *     g_capture_mu -> g_streams_mu
 *     g_mem_mu -> g_reg_mu;  g_reg_mu is a leaf.
 *     exec->mu, graph->mu -> graph memory's g_mu (sim_graph_mem.c) -> g_mem_mu
 *   No lock is held while a kernel runs (stream workers run operations with
 *   no lock held) or while a caller waits for a stream.
 */
#ifndef SIMCUDA_SIM_H
#define SIMCUDA_SIM_H

#include <cuda.h>

/* cuda.h maps the old name to _v2; simcuda exports both (as the driver does). */
#undef cuGraphExecUpdate
CUresult CUDAAPI cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                   CUgraphNode *hErrorNode_out,
                                   CUgraphExecUpdateResult *updateResult_out);
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- entry points --------------------------------------------------- */

enum sim_entry_id {
#define SIM_ENTRY(sym, base, ver, flav, fail) SIM_ID_##sym,
#include "entries.def"
#undef SIM_ENTRY
    SIM_N_ENTRIES
};

extern _Atomic uint64_t sim_calls[SIM_N_ENTRIES];
extern atomic_bool sim_knobs_any;
CUresult sim_enter_slow(int id, uint64_t nth);

/* Count the call; apply SIMCUDA_COST / SIMCUDA_FAIL (cheap when unset). */
static inline CUresult sim_enter(int id)
{
    uint64_t n = atomic_fetch_add_explicit(&sim_calls[id], 1, memory_order_relaxed) + 1;
    if (__builtin_expect(atomic_load_explicit(&sim_knobs_any, memory_order_relaxed), 0))
        return sim_enter_slow(id, n);
    return CUDA_SUCCESS;
}

#define SIM_ENTER(sym)                                                         \
    do {                                                                       \
        CUresult sim_enter_r_ = sim_enter(SIM_ID_##sym);                       \
        if (sim_enter_r_ != CUDA_SUCCESS)                                      \
            return sim_enter_r_;                                               \
    } while (0)

/* ---- knobs and global state ----------------------------------------- */

struct sim_knobs {
    uint64_t kernel_delay_us;
    size_t granularity;
    bool vmm;
    /* SIMCUDA_PROC_INTERNAL=1: cuGetProcAddress answers cuGraphLaunch with an
     * unexported internal entry, as real drivers may, so an interposer cannot
     * name what it got. */
    bool proc_internal;
    int devices;             /* SIMCUDA_DEVICES, 1..SIM_MAX_DEVICES */
    size_t mem_bytes;        /* SIMCUDA_MEM_BYTES: each device's total memory */
    bool kernels_ptx;        /* SIMCUDA_KERNELS (default ptx): standard kernels interpreted too */
    bool vmm_fd;             /* SIMCUDA_VMM_FD (default on): cuMemCreate grants POSIX fd handles */
};
extern struct sim_knobs sim_knob;

/* The unexported twin of an exported entry point, or NULL (sim_graph.c). */
void *sim_internal_entry(const char *symbol);
extern atomic_bool sim_initialized;

#define SIM_TOTAL_MEM ((size_t)80 << 30) /* default SIMCUDA_MEM_BYTES */
#define SIM_MAX_DEVICES 64
#define SIM_MAX_THREADS_PER_BLOCK 1024u
#define SIM_MAX_SHARED_PER_BLOCK 49152u

#define SIM_CHECK_INIT()                                                       \
    do {                                                                       \
        if (!atomic_load_explicit(&sim_initialized, memory_order_acquire))     \
            return CUDA_ERROR_NOT_INITIALIZED;                                 \
    } while (0)

/* ---- heap (sim_heap.c): the only allocator simcuda's files call -------
 * Counts the bytes simcuda holds for itself (graphs, execs, streams...),
 * which share the process heap with the program and any interposer; the
 * count is exported as the simcuda-only query simcuda_heap_bytes(). */
void *sim_malloc(size_t n);
void *sim_calloc(size_t n, size_t size);
void *sim_realloc(void *p, size_t n);
char *sim_strdup(const char *s);
char *sim_strndup(const char *s, size_t max);
void sim_free(void *p);
/* Bytes in use in glibc chunk sizes (mallinfo2's unit), less those parked
 * for reuse; -1 without glibc. */
long long sim_heap_bytes(void);
/* The chunk bytes of one allocation (0 for NULL or without glibc). */
long long sim_heap_chunk(const void *p);
/* Counts bytes (negative: takes them back) as parked in a free list. */
void sim_heap_park(long long bytes);

void sim_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t sim_now_ns(void);

/* Objects alive now (SIMCUDA_STATS "live"): events and execs not destroyed. */
extern _Atomic long sim_live_events, sim_live_execs;

/* ---- handle registry: a made-up or stale handle is an error ----------- */

enum sim_type {
    SIM_T_CTX = 1,
    SIM_T_STREAM,
    SIM_T_EVENT,
    SIM_T_MODULE,
    SIM_T_FUNC,
    SIM_T_GRAPH,
    SIM_T_NODE,
    SIM_T_EXEC,
    SIM_T_PHYS,
    SIM_T_KERNEL,
    SIM_T_POOL,
    SIM_T_ARRAY,
    SIM_T_MIPMAP,
    SIM_T_COND,    /* a conditional handle (sim_graph_cond.c) */
};

void sim_reg_add(const void *p, int type);
void sim_reg_del(const void *p);
bool sim_reg_has(const void *p, int type);

/* ---- contexts ------------------------------------------------------- */

struct sim_stream;

struct sim_ctx {
    int dev;
    unsigned flags;
    bool primary;
    int primary_refs;        /* under g_ctx_mu */
    atomic_bool alive;
    struct sim_stream *legacy;
    uint64_t id;
    /* cuCtxEnablePeerAccess: the peer contexts (under the core's lock) and
     * the devices they are on (bit d: device d), read by kernels at run
     * time. */
    struct sim_ctx **peers;
    size_t npeers, peers_cap;
    _Atomic uint64_t peer_devs;
    /* device printf's output not yet flushed (sim_print.c) */
    pthread_mutex_t print_mu;
    char *print_buf;
    size_t print_len, print_cap;
};

/* Device printf (sim_print.c): a kernel running in ctx (a struct sim_ctx *)
 * appends its text; a flush point writes ctx's text to stdout (NULL:
 * nothing). */
void sim_print_append(void *ctx, const char *text, size_t len);
void sim_print_flush(struct sim_ctx *c);

/* May a kernel running in c touch memory of device dev? */
static inline bool sim_ctx_can_access(const struct sim_ctx *c, int dev)
{
    return dev < 0 || c->dev == dev ||
           (atomic_load_explicit(&c->peer_devs, memory_order_acquire) >> dev & 1);
}

/* Current context of the calling thread (NULL if none). */
struct sim_ctx *sim_ctx_current(void);
/* Current context, or the documented error (INVALID_CONTEXT etc.). */
CUresult sim_ctx_need(struct sim_ctx **out);
/* Wait for all work of every stream of ctx (NULL: all contexts). */
void sim_ctx_sync(struct sim_ctx *ctx);

/* ---- streams -------------------------------------------------------- */

enum sim_stream_kind { SIM_S_USER, SIM_S_LEGACY, SIM_S_PER_THREAD };

struct sim_capture;

struct sim_stream {
    atomic_int refs;
    struct sim_ctx *ctx;
    unsigned flags;
    int priority;
    int kind;
    uint64_t id;             /* cuStreamGetId: unique for the process's life */
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    pthread_cond_t cv_done;
    struct sim_op *head, *tail;
    uint64_t submitted;      /* last sequence number handed out (mu + g_submit_mu) */
    uint64_t completed;      /* last sequence number finished (mu) */
    bool destroyed;
    /* global list of streams, under g_streams_mu */
    struct sim_stream *next_all, *prev_all;
    /* stream capture, under g_capture_mu */
    atomic_bool capturing;
    struct sim_capture *cap;
    CUgraphNode *cap_deps;
    size_t n_cap_deps, cap_deps_cap;
};

struct sim_dep {
    struct sim_stream *s;
    uint64_t seq;
};

typedef void (*sim_kernel_fn)(const unsigned char *args);

struct sim_kernel_impl;

/* The work of a graph node that is not a kernel, run in its place. */
struct sim_work {
    int kind;          /* SIM_OP_COPY, SIM_OP_SET8/16/32 (rows of n elements, pitch
                        * bytes apart), SIM_OP_HOST */
    void *dst;
    const void *src;
    size_t n, rows, pitch;
    uint32_t value;
    CUhostFn fn;
    void *arg;
};

struct ptx_kernel;

/* One kernel to run: a host version (fn), or else the PTX interpreter (pk),
 * or else (both NULL) a graph's other node: w. */
struct sim_kcall {
    sim_kernel_fn fn;
    struct ptx_kernel *pk;   /* referenced when set (ptx_kernel_ref) */
    const char *name;        /* for fault messages (the function's name) */
    unsigned dims[6];        /* grid x y z, block x y z */
    unsigned shmem;          /* dynamic shared memory bytes */
    const unsigned char *args;
    const struct sim_kernel_impl *impl;
    size_t argsize;
    struct sim_work w;
};

enum sim_op_kind {
    SIM_OP_NOP,
    SIM_OP_KERNELS,   /* one launch or a whole graph launch: calls in order */
    SIM_OP_COPY,
    SIM_OP_SET8,
    SIM_OP_SET16,
    SIM_OP_SET32,
    SIM_OP_EVENT,
    SIM_OP_FREE,      /* stream-ordered cuMemFreeAsync */
    SIM_OP_HOST,      /* cuLaunchHostFunc */
    SIM_OP_GRAPH,     /* a graph launch: the exec's nodes as launch `gen` saw them */
};

struct sim_event;
struct sim_exec;

struct sim_op {
    struct sim_op *next;
    uint64_t seq;
    int kind;
    size_t ndeps;
    struct sim_dep *deps;    /* owned, each holds a stream reference */
    union {
        struct {
            size_t ncalls;
            struct sim_kcall *calls; /* points into this op's allocation */
            struct sim_ctx *ctx;     /* the context the kernels run in */
        } k;
        struct {
            void *dst;
            const void *src;
            size_t n;
            void *staging;   /* owned copy of pageable host memory */
        } copy;
        struct {
            void *dst;
            uint32_t value;
            size_t n;
            size_t rows, pitch; /* rows of n elements, pitch bytes apart */
        } set;
        struct {
            struct sim_event *ev;
            uint64_t gen;
        } ev;
        struct {
            uintptr_t base;
        } free;
        struct {
            CUhostFn fn;
            void *arg;
        } host;
        struct {
            struct sim_exec *x;      /* referenced */
            uint64_t gen;            /* the launch's number (1, 2, ...) */
        } g;
    } u;
};

/* Allocate an op with `extra` zeroed bytes after it (for kernel calls). */
struct sim_op *sim_op_new(int kind, size_t extra);
void sim_op_free(struct sim_op *op);

/* Resolve a stream argument (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD,
 * or a handle); ptsz: the entry point is a per-thread variant. */
CUresult sim_stream_resolve(CUstream h, bool ptsz, struct sim_stream **out);
/* Queue op on s behind the implicit (legacy stream) and the given extra
 * dependencies. Returns the op's sequence number. Takes ownership of op. */
uint64_t sim_stream_submit(struct sim_stream *s, struct sim_op *op,
                           const struct sim_dep *extra, size_t nextra);
void sim_stream_wait(struct sim_stream *s, uint64_t seq);
bool sim_stream_done(struct sim_stream *s, uint64_t seq);
void sim_stream_ref(struct sim_stream *s);
void sim_stream_unref(struct sim_stream *s);
struct sim_stream *sim_stream_new(struct sim_ctx *ctx, int kind, unsigned flags, int priority);
void sim_stream_release(struct sim_stream *s); /* destroy: drain, then free */
/* Submit a no-op and wait for it: the stream and everything it must wait
 * for (legacy stream semantics) have finished. */
void sim_stream_sync(struct sim_stream *s);
/* A GPU's launch queue is bounded: a launch into a stream with this many
 * operations not yet finished waits (the only wait a launch makes) until
 * one finishes. Assumption: cuda.h documents no depth; 1,024 pending
 * launches per stream is the order of a driver's push buffer. */
#define SIM_LAUNCH_QUEUE 1024u
void sim_stream_throttle(struct sim_stream *s);

/* Stream capture: true if s is capturing (then *cap_err may be set when the
 * capture cannot take this kind of work). */
bool sim_capture_active(struct sim_stream *s);
/* Add a kernel node to the capture of s; the node copies args. */
struct sim_kattrs;
/* a: the launch's attributes (NULL: none). */
CUresult sim_capture_add_kernel(struct sim_stream *s, const CUDA_KERNEL_NODE_PARAMS *p,
                                const struct sim_kattrs *a);
struct sim_onode;
/* Add a memset or memcpy node (validated by sim_onode_*; owned by the node
 * once added, cleared on failure) to the capture of s, in its dependency
 * chain as a kernel would be. */
CUresult sim_capture_add_other(struct sim_stream *s, struct sim_onode *o);
/* Invalidate a capture because of an unsupported operation. */
void sim_capture_invalidate(struct sim_stream *s);
/* Legacy-stream work while a blocking stream captures: CUDA_ERROR_STREAM_CAPTURE_IMPLICIT. */
CUresult sim_capture_check_legacy(struct sim_stream *s);
/* First thing in a "potentially unsafe" call (cuThreadExchangeStreamCaptureMode
 * in cuda.h): CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the captures that
 * prohibit it invalidated, when the calling thread's mode is not relaxed and
 * it has a capture of its own not begun relaxed, or its mode is global and
 * any thread holds a global capture. Lock-free while no capture prohibits
 * anything. The calls simcuda counts as unsafe: README.md. */
CUresult sim_capture_unsafe(void);
/* cuCtxSynchronize (both): refused as sim_capture_unsafe refuses, and also,
 * whatever the calling thread's mode, while any capture of context c runs
 * (it would wait for a capturing stream): those captures invalidated.
 * Measured on an H200 for a relaxed thread beside another thread's global
 * capture; the other modes of the capture are simcuda's assumption. */
CUresult sim_capture_ctx_sync(struct sim_ctx *c);
#define SIM_CHECK_CAPTURE()                                                    \
    do {                                                                       \
        CUresult sim_unsafe_r_ = sim_capture_unsafe();                         \
        if (sim_unsafe_r_ != CUDA_SUCCESS)                                     \
            return sim_unsafe_r_;                                              \
    } while (0)

/* ---- modules and functions ------------------------------------------- */

struct sim_module;

/* A CUfunction record, or (target set) a library's CUkernel record. */
struct sim_func {
    struct sim_module *mod;
    struct sim_func *target;     /* CUkernel: its function */
    struct sim_func *next_free;  /* on the free list of unloaded records */
    char *name;
    size_t nparams;
    size_t *offsets;
    size_t *sizes;
    size_t argsize;          /* end of the last parameter */
    sim_kernel_fn fn;        /* NULL: no host implementation */
    const struct sim_kernel_impl *impl;
    struct ptx_kernel *pk;   /* its decoded PTX (the module holds it), or NULL */
};

/* A valid, launchable function handle (registered, with a host kernel or
 * decoded PTX). */
CUresult sim_func_get(CUfunction h, struct sim_func **out);
/* How a launch of f runs: *fn (a host version, as SIMCUDA_KERNELS chooses)
 * or *pk (the interpreter; referenced for the caller). Refuses (one line on
 * stderr) a kernel the interpreter cannot run, or shared memory over the
 * limit. */
CUresult sim_func_plan(const struct sim_func *f, unsigned shmem, sim_kernel_fn *fn,
                       struct ptx_kernel **pk);
/* Copy arguments from kernelParams or extra into dst (f->argsize bytes). */
/* A malloc'ed copy of PTX text with its comments blanked (newlines and
 * string literals kept, so offsets and names stay): the module loader's and
 * the interpreter's one comment stripper (ptx_parse.c). NULL: no memory. */
char *sim_strip_comments(const char *src);
CUresult sim_pack_args(const struct sim_func *f, void **kernelParams, void **extra,
                       unsigned char *dst);
/* Validate launch dimensions like the driver. */
CUresult sim_check_dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shmem);

/* Host kernels (sim_kernels.c). */
struct sim_kernel_impl {
    const char *name;
    sim_kernel_fn fn;
    size_t nparams;
    size_t offsets[4];
    size_t sizes[4];
    /* a [begin, end) pair of pointer parameters (indices), or -1: the end
     * word is checked as the end of the range, not as an address */
    int range_begin, range_end;
};
const struct sim_kernel_impl *sim_kernel_find(const char *name);
/* Launches that ran through a host version so far (SIMCUDA_STATS). */
uint64_t sim_kernel_host_runs(void);

/* PTX parsing (sim_module.c), exposed for the module loader. */
struct sim_ptx_entry {
    char *name;
    size_t nparams;
    size_t *offsets;
    size_t *sizes;
    size_t argsize;
};

/* ---- memory ---------------------------------------------------------- */

/* Is [p, p+n) inside one native allocation or contiguous accessible VMM
 * mappings? (copies and memsets are validated like the driver's). */
bool sim_mem_valid(uintptr_t p, size_t n, bool write);
/* A stream worker's memory of the pages its kernels' argument words were
 * found allowed to touch (sim_mem_check_kernel), each valid while no
 * allocation, mapping or access flag changes. Zero-initialized; one worker's. */
enum { SIM_SEEN_SLOTS = 512 };
struct sim_seen_page {
    uint64_t gen;   /* the memory tables' generation it was found in */
    uintptr_t page; /* page number + 1 */
    int owner;      /* a native allocation's device, or SIM_SEEN_MAPPED */
};
struct sim_seen {
    int dev; /* ctx->dev + 1 the slots are for */
    struct sim_seen_page slot[SIM_SEEN_SLOTS];
};
/* Before a kernel runs in ctx: every 8-byte-aligned argument word that lies
 * in an allocation or mapping must be accessible from ctx's device, or the
 * process aborts with a message (a GPU fault kills the context). */
void sim_mem_check_kernel(struct sim_ctx *ctx, const struct sim_kcall *call,
                          struct sim_seen *seen);
/* Live memory objects: mappings, physical handles whose memory is not yet
 * returned, reservations, native allocations. */
void sim_mem_live(long *mappings, long *handles, long *reservations, long *allocations);
/* cuCtxDestroy, cuDevicePrimaryCtxReset: the memory allocated in c goes with
 * it (cuMemAlloc, cuMemAllocManaged; not cuMemCreate or stream-ordered
 * memory, as documented). The caller has synchronized c. */
void sim_mem_ctx_destroyed(const struct sim_ctx *c);
/* A module's .global/.const storage [base, base + size), owned by the
 * module, as device memory of ctx's device (NULL: device 0) until
 * sim_mem_del_module: copies and pointer queries accept it, the frees
 * refuse it, and it is not counted among live allocations. */
void sim_mem_add_module(uintptr_t base, size_t size, struct sim_ctx *ctx);
void sim_mem_del_module(uintptr_t base);
/* Release a native allocation queued by cuMemFreeAsync (stream worker). */
void sim_mem_free_now(uintptr_t base);
/* A graph allocation's address range [base, base + size) of device dev
 * (sim_graph_mem.c maps and unmaps its pages): valid for copies, kernels
 * and pointer queries until sim_mem_del_graph; cuMemFree and cuMemFreeAsync
 * hand it to sim_gmem_free_outside. */
void sim_mem_add_graph(uintptr_t base, size_t size, int dev);
void sim_mem_del_graph(uintptr_t base);

/* ---- IPC (sim_ipc.c; the tables are sim_mem.c's) ---- */

/* memfd names: a VMM handle's ("...d<device>") and an exported native
 * allocation's ("...<buffer id>"); an importer reads them back through
 * /proc to tell what an fd is. */
#define SIM_VMM_MEMFD "simcuda-vmm-d"
#define SIM_IPC_MEMFD "simcuda-ipc-"

struct sim_ipc_mem {
    int fd;          /* export: the allocation's memfd (still its own); import: handed over */
    uint64_t id;     /* the exporter's buffer id */
    size_t size, maplen;
    int dev;
};
/* cuIpcGetMemHandle's work: the allocation based at p shared (its memfd). */
CUresult sim_mem_ipc_export(uintptr_t p, struct sim_ipc_mem *out);
/* Maps another process's exported allocation for c (or counts one more
 * open of it); takes m->fd either way. */
CUresult sim_mem_ipc_import(struct sim_ctx *c, int pid, const struct sim_ipc_mem *m,
                            CUdeviceptr *out);
/* Already opened by c: one more open, the same pointer (no /proc needed:
 * the exporter may have freed it since). */
bool sim_mem_ipc_reopen(struct sim_ctx *c, int pid, uint64_t id, CUdeviceptr *out);
CUresult sim_mem_ipc_close(struct sim_ctx *c, uintptr_t p);
/* cuMemExportToShareableHandle / cuMemImportFromShareableHandle, POSIX fds. */
CUresult sim_phys_export_fd(CUmemGenericAllocationHandle h, int *fd);
CUresult sim_phys_import_fd(int fd, int dev, CUmemGenericAllocationHandle *out);

/* Events as graph nodes use them (sim_stream.c): a referenced event, or
 * NULL for a handle that names none. */
struct sim_event *sim_event_ref(CUevent h);
void sim_event_unref(struct sim_event *e);
/* What waiting on e now means: false when it was never recorded. */
bool sim_event_dep(struct sim_event *e, struct sim_dep *d);
/* Records e in s after the work queued there so far. */
CUresult sim_event_record_in(struct sim_event *e, struct sim_stream *s);
/* Runs one work item of a graph launch (sim_stream.c). */
void sim_work_run(const struct sim_work *w);
/* Runs one call of a kernel operation in ctx on a stream worker: the
 * memory check, then the kernel (sim_stream.c). */
void sim_run_kcall(const struct sim_kcall *c, struct sim_ctx *ctx, struct sim_seen *seen);
/* A graph launch on its stream's worker: every node as the launch saw it
 * (sim_graph.c); and the release of the op's exec reference. */
void sim_exec_run(const struct sim_op *op, struct sim_seen *seen);
void sim_exec_op_release(struct sim_op *op);

/* ---- graphs ----------------------------------------------------------- */

/* A graph node that is not a kernel or empty (sim_gnode.c): its parameters,
 * validated as the driver does when the node is added or set. */
struct sim_onode {
    CUgraphNodeType type;
    struct sim_ctx *ctx;       /* memcpy, memset: the context it runs in */
    CUDA_MEMCPY3D cp;          /* memcpy: one-dimensional */
    CUDA_MEMSET_NODE_PARAMS ms;
    CUDA_HOST_NODE_PARAMS host;
    struct sim_event *ev;      /* event record / wait: referenced */
    struct sim_gmem *gm;       /* memory alloc / free: the allocation (referenced) */
    struct sim_cond *cond;     /* conditional: referenced (sim_graph_cond.c) */
    struct sim_condx *condx;   /* conditional in an exec: its bodies' execs (owned) */
};

CUresult sim_onode_memcpy(struct sim_onode *o, const CUDA_MEMCPY3D *p, CUcontext ctx);
CUresult sim_onode_memset(struct sim_onode *o, const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx);
CUresult sim_onode_host(struct sim_onode *o, const CUDA_HOST_NODE_PARAMS *p);
CUresult sim_onode_event(struct sim_onode *o, CUgraphNodeType type, CUevent e);
/* The node parameters of a generic CUgraphNodeParams (memcpy, memset, host,
 * events; other types CUDA_ERROR_NOT_SUPPORTED). */
CUresult sim_onode_generic(struct sim_onode *o, const CUgraphNodeParams *p);
/* May an exec's node holding `from` be set to `to` (cuGraphExec*SetParams)? */
CUresult sim_onode_exec_check(const struct sim_onode *from, const struct sim_onode *to);
void sim_onode_copy(struct sim_onode *dst, const struct sim_onode *src);
void sim_onode_clear(struct sim_onode *o);
/* The work of a memcpy, memset or host node. */
void sim_onode_work(const struct sim_onode *o, struct sim_work *w);

/* ---- graph memory nodes (sim_graph_mem.c) ---- */

struct sim_gmem;  /* one allocation node's allocation */
struct sim_gexec; /* an exec's allocation and free nodes */
void sim_gmem_ref(struct sim_gmem *gm);
void sim_gmem_unref(struct sim_gmem *gm);
/* A memory node being added to graph graph_id (under its lock): the free
 * rules of cuda.h checked and recorded; other nodes pass. */
CUresult sim_gmem_node_added(const struct sim_onode *o, uint64_t graph_id);
/* the checks and the node of cuGraphAddMemAllocNode / FreeNode, which
 * cuGraphAddNode shares; the graph's handle already checked */
struct sim_graph;
CUresult sim_gmem_add_alloc(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                            CUDA_MEM_ALLOC_NODE_PARAMS *p, CUgraphNode *out);
CUresult sim_gmem_add_free(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                           CUdeviceptr dptr, CUgraphNode *out);
/* cuMemAllocAsync / cuMemFreeAsync into a capturing stream. */
CUresult sim_gmem_capture_alloc(struct sim_stream *s, int dev, size_t size, CUdeviceptr *dptr);
CUresult sim_gmem_capture_free(struct sim_stream *s, uintptr_t dptr);
/* cuMemFree (s NULL) or cuMemFreeAsync of a graph allocation. */
CUresult sim_gmem_free_outside(uintptr_t dptr, struct sim_stream *s);
/* Instantiation: the exec's memory nodes (n onodes), one exec per graph. */
CUresult sim_gmem_exec_new(const struct sim_onode *const *nodes, size_t n, uint64_t graph_id,
                           unsigned long long flags, struct sim_gexec **out);
void sim_gmem_exec_free(struct sim_gexec *gx);
/* A launch (the exec's lock held), before it is queued: may it run, and
 * its allocations made and frees done; then, once queued, where it went. */
CUresult sim_gmem_launch(struct sim_gexec *gx);
void sim_gmem_launched(struct sim_gexec *gx, struct sim_stream *s, uint64_t seq);
static inline bool sim_gmem_type(CUgraphNodeType t)
{
    return t == CU_GRAPH_NODE_TYPE_MEM_ALLOC || t == CU_GRAPH_NODE_TYPE_MEM_FREE;
}

struct sim_graph;
struct sim_graph *sim_graph_new(void);
void sim_graph_free(struct sim_graph *g);
CUresult sim_graph_add_kernel(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS *p, CUgraphNode *out);
/* The launch attributes simcuda models (cuLaunchKernelEx): values only,
 * no effect on how a kernel runs (assumption: priority is a scheduling
 * hint, and every block of a launch runs anyway, as cooperative asks). */
struct sim_kattrs {
    int priority, cooperative;
};
/* A kernel node holding launch attributes (a NULL a: none). */
CUresult sim_graph_add_kernel_attrs(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                                    const CUDA_KERNEL_NODE_PARAMS *p,
                                    const struct sim_kattrs *a, CUgraphNode *out);
/* o: owned by the node once added (the caller's to clear on failure). */
CUresult sim_graph_add_other(struct sim_graph *g, const CUgraphNode *deps, size_t ndeps,
                             struct sim_onode *o, CUgraphNode *out);
/* A graph node's parameters of another type (not referenced: valid while
 * the node is); false when h is not a node of that type. */
bool sim_graph_node_onode(CUgraphNode h, CUgraphNodeType type, struct sim_onode *o);
/* Whether h is a node of g. */
bool sim_graph_owns(struct sim_graph *g, CUgraphNode h);
bool sim_graph_has_type(struct sim_graph *g, CUgraphNodeType t);
/* Whether node `target` of g is one of `from` or an ancestor of one. */
bool sim_graph_reaches(struct sim_graph *g, const CUgraphNode *from, size_t nfrom,
                       CUgraphNode target);

/* ---- conditional nodes (sim_graph_cond.c) ------------------------------ */

struct sim_exec;
struct sim_cond;
struct sim_condx;
struct sim_cond_list;
/* CU_GRAPH_NODE_TYPE_CONDITIONAL node parameters into o, for a node of g:
 * makes the body graphs and writes p->phGraph_out. */
CUresult sim_cond_new(struct sim_onode *o, struct sim_graph *g, CUDA_CONDITIONAL_NODE_PARAMS *p);
void sim_cond_ref(struct sim_cond *c);
void sim_cond_unref(struct sim_cond *c);
/* Instantiates the bodies of the conditional node o (an exec's copy) in
 * ctx: o->condx. *res says why it failed. */
CUresult sim_cond_instantiate(struct sim_onode *o, struct sim_ctx *ctx,
                              CUgraphInstantiateResult *res);
void sim_condx_free(struct sim_condx *cx);
/* cuGraphExecUpdate of the exec's conditional node xo from the graph's no:
 * the same type and size, and bodies that update (cuda.h); the exec then
 * follows no's handle. */
CUgraphExecUpdateResult sim_cond_update_check(const struct sim_onode *xo,
                                              const struct sim_onode *no);
CUresult sim_cond_update_apply(struct sim_onode *xo, const struct sim_onode *no);
/* On the stream worker: runs the conditional node's body as its handle's
 * value says, now. */
void sim_cond_run(const struct sim_condx *cx, struct sim_seen *seen);
/* The handles created for g: their defaults, applied each time an exec of
 * g starts (x: the list, NULL when g has none); an instantiation of g with
 * a handle no conditional node uses fails. */
CUresult sim_cond_exec_handles(const struct sim_graph *g, struct sim_cond_list **out);
void sim_cond_exec_start(const struct sim_cond_list *l);
void sim_cond_list_free(struct sim_cond_list *l);
/* A graph destroyed: the handles created for it go with it. */
void sim_cond_graph_gone(const struct sim_graph *g);
/* Whether g is a conditional node's body (CUDA-owned: not destroyable). */
bool sim_cond_is_body(const struct sim_graph *g);
/* cudaGraphSetConditional from device code: 0, or -EINVAL for a handle
 * that names none. */
int sim_cond_set(uint64_t handle, uint32_t value);

/* Graph internals the conditional nodes use (sim_graph.c): instantiating a
 * body (its graph's lock taken here), running an exec's nodes once. */
CUresult sim_graph_instantiate_body(struct sim_graph *g, struct sim_ctx *ctx,
                                    struct sim_exec **out, CUgraphInstantiateResult *res);
void sim_exec_run_body(struct sim_exec *x, struct sim_seen *seen);
void sim_exec_release(struct sim_exec *x);
/* cuGraphExecUpdate of a body's exec from the new graph's body. */
CUgraphExecUpdateResult sim_exec_update_body_check(struct sim_exec *x, struct sim_graph *g);
CUresult sim_exec_update_body_apply(struct sim_exec *x, struct sim_graph *g);

#endif
