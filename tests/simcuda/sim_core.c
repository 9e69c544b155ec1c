/*
 * simcuda core: entry table (counters, SIMCUDA_FAIL/COST/STATS), handle
 * registry, initialization, device, contexts, error strings and
 * cuGetProcAddress.
 */
#include "ptx.h"
#include "sim.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the entry table (generated from entries.def) ---------------------- */

enum { SIM_FLAV_P = 0, SIM_FLAV_T = 1 };
enum { SIM_FAIL_U = 0, SIM_FAIL_L = 1, SIM_FAIL_M = 2 };

typedef void (*sim_voidfn)(void);

struct sim_proc {
    const char *sym;
    const char *base;
    int version;
    int flavour;
    int fail;
    sim_voidfn fn;
};

/* The addresses of the exported functions themselves (bound locally by
 * -Bsymbolic-functions), so dladdr() names what cuGetProcAddress returns. */
static const struct sim_proc g_procs[SIM_N_ENTRIES] = {
#define SIM_ENTRY(sym, base, ver, flav, fail)                                  \
    [SIM_ID_##sym] = {#sym, #base, ver, SIM_FLAV_##flav, SIM_FAIL_##fail, (sim_voidfn)sym},
#include "entries.def"
#undef SIM_ENTRY
};

_Atomic uint64_t sim_calls[SIM_N_ENTRIES];
_Atomic long sim_live_events, sim_live_execs;
atomic_bool sim_knobs_any;
atomic_bool sim_initialized;
struct sim_knobs sim_knob = {0, (size_t)2 << 20, true, false, 1, SIM_TOTAL_MEM, false, true};

static _Atomic uint64_t g_fail_nth[SIM_N_ENTRIES]; /* 0: never, UINT64_MAX: every call */
/* SIMCUDA_FAIL=name:N@other:M counts name's calls from the Mth call of
 * other on: g_after[id] = other's id + 1 (0: from the start), g_after_nth[id]
 * = M, g_fail_base[id] = name's count when it happened (UINT64_MAX: not yet). */
static _Atomic int g_after[SIM_N_ENTRIES];
static _Atomic uint64_t g_after_nth[SIM_N_ENTRIES];
static _Atomic uint64_t g_fail_base[SIM_N_ENTRIES];
static atomic_bool g_any_after;
static _Atomic uint64_t g_cost_ns[SIM_N_ENTRIES];
static char *g_stats_path;
static pid_t g_knobs_pid;

void sim_warn(const char *fmt, ...)
{
    va_list ap;
    char buf[512];
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "simcuda: warning: %s\n", buf);
}

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static atomic_bool g_shut_down;

CUresult sim_enter_slow(int id, uint64_t nth)
{
    if (atomic_load_explicit(&g_shut_down, memory_order_relaxed))
        return CUDA_ERROR_DEINITIALIZED;
    uint64_t cost = atomic_load_explicit(&g_cost_ns[id], memory_order_relaxed);
    if (cost) {
        uint64_t end = sim_now_ns() + cost;
        while (sim_now_ns() < end) {
        }
    }
    if (atomic_load_explicit(&g_any_after, memory_order_relaxed)) {
        /* Arm every entry waiting for this call: its count restarts here. */
        for (int i = 0; i < SIM_N_ENTRIES; i++)
            if (atomic_load_explicit(&g_after[i], memory_order_relaxed) == id + 1 &&
                atomic_load_explicit(&g_after_nth[i], memory_order_relaxed) == nth)
                atomic_store(&g_fail_base[i], atomic_load(&sim_calls[i]) - (i == id));
    }
    uint64_t f = atomic_load_explicit(&g_fail_nth[id], memory_order_relaxed);
    if (f && atomic_load_explicit(&g_after[id], memory_order_relaxed)) {
        uint64_t base = atomic_load(&g_fail_base[id]);
        if (base == UINT64_MAX || nth <= base)
            return CUDA_SUCCESS;
        nth -= base;
    }
    if (f && (f == UINT64_MAX || f == nth)) {
        switch (g_procs[id].fail) {
        case SIM_FAIL_L: return CUDA_ERROR_LAUNCH_FAILED;
        case SIM_FAIL_M: return CUDA_ERROR_OUT_OF_MEMORY;
        default: return CUDA_ERROR_UNKNOWN;
        }
    }
    return CUDA_SUCCESS;
}

static int entry_by_name(const char *name, size_t len)
{
    for (int i = 0; i < SIM_N_ENTRIES; i++)
        if (strlen(g_procs[i].sym) == len && memcmp(g_procs[i].sym, name, len) == 0)
            return i;
    return -1;
}

static uint64_t parse_count(const char *s, size_t len)
{
    char num[32];
    if (len == 0 || len >= sizeof num)
        return 0;
    memcpy(num, s, len);
    num[len] = 0;
    char *e;
    errno = 0;
    unsigned long long n = strtoull(num, &e, 10);
    return *e || errno ? 0 : (uint64_t)n;
}

/* The optional "@other:M" of a SIMCUDA_FAIL item whose value starts at v
 * (*vlen: up to the item's end): records it and cuts it off *vlen. False
 * (after a warning) when it is malformed. */
static bool parse_after(const char *var, int id, const char *v, size_t *vlen, size_t len,
                        const char *item)
{
    atomic_store(&g_after[id], 0);
    const char *at = memchr(v, '@', *vlen);
    if (!at)
        return true;
    const char *rest = at + 1;
    size_t rlen = *vlen - (size_t)(rest - v);
    const char *colon = memchr(rest, ':', rlen);
    int other = colon ? entry_by_name(rest, (size_t)(colon - rest)) : -1;
    uint64_t m = colon ? parse_count(colon + 1, rlen - (size_t)(colon + 1 - rest)) : 0;
    if (other < 0 || m == 0) {
        sim_warn("%s: bad '@entry:N' in '%.*s'", var, (int)len, item);
        return false;
    }
    atomic_store(&g_after[id], other + 1);
    atomic_store(&g_after_nth[id], m);
    atomic_store(&g_fail_base[id], UINT64_MAX);
    atomic_store(&g_any_after, true);
    *vlen = (size_t)(at - v);
    return true;
}

/* Parse "name:value[,name:value...]"; star: value "*" allowed (UINT64_MAX)
 * and an "@other:M" suffix (SIMCUDA_FAIL). */
static bool parse_entry_list(const char *var, const char *s, _Atomic uint64_t *dst, bool star)
{
    bool any = false;
    while (s && *s) {
        const char *end = strchr(s, ',');
        size_t len = end ? (size_t)(end - s) : strlen(s);
        const char *colon = memchr(s, ':', len);
        if (!colon) {
            sim_warn("%s: ignoring '%.*s' (expected name:value)", var, (int)len, s);
        } else {
            int id = entry_by_name(s, (size_t)(colon - s));
            const char *v = colon + 1;
            size_t vlen = len - (size_t)(v - s);
            char num[32];
            if (id < 0) {
                sim_warn("%s: unknown entry point '%.*s'", var, (int)(colon - s), s);
            } else if (star && !parse_after(var, id, v, &vlen, len, s)) {
                /* warned */
            } else if (star && vlen == 1 && *v == '*') {
                atomic_store(&dst[id], UINT64_MAX);
                any = true;
            } else if (vlen == 0 || vlen >= sizeof num) {
                sim_warn("%s: bad value in '%.*s'", var, (int)len, s);
            } else {
                char *e;
                memcpy(num, v, vlen);
                num[vlen] = 0;
                errno = 0;
                unsigned long long n = strtoull(num, &e, 10);
                if (*e || errno || (star && n == 0)) {
                    sim_warn("%s: bad value in '%.*s'", var, (int)len, s);
                } else {
                    atomic_store(&dst[id], (uint64_t)n);
                    any = any || n != 0;
                }
            }
        }
        s = end ? end + 1 : NULL;
    }
    return any;
}

static size_t parse_size(const char *var, const char *s, size_t dflt)
{
    char *e;
    errno = 0;
    unsigned long long v = strtoull(s, &e, 10);
    if (e == s || errno)
        goto bad;
    switch (*e) {
    case 'k': case 'K': v <<= 10; e++; break;
    case 'm': case 'M': v <<= 20; e++; break;
    case 'g': case 'G': v <<= 30; e++; break;
    default: break;
    }
    if (*e == 'i' || *e == 'B' || *e == 'b') /* accept "2MiB", "2MB" */
        e += (*e == 'i' && e[1] == 'B') ? 2 : 1;
    if (*e || v < 4096 || v % 4096)
        goto bad;
    return (size_t)v;
bad:
    sim_warn("%s='%s' is not a multiple of 4096 bytes (K/M/G suffixes); using %zu", var, s, dflt);
    return dflt;
}

static void knobs_load(void)
{
    const char *s;
    for (int i = 0; i < SIM_N_ENTRIES; i++) {
        atomic_store(&g_fail_nth[i], 0);
        atomic_store(&g_cost_ns[i], 0);
        atomic_store(&g_after[i], 0);
    }
    atomic_store(&g_any_after, false);
    bool any = false;
    any |= parse_entry_list("SIMCUDA_FAIL", getenv("SIMCUDA_FAIL"), g_fail_nth, true);
    any |= parse_entry_list("SIMCUDA_COST", getenv("SIMCUDA_COST"), g_cost_ns, false);
    atomic_store(&sim_knobs_any, any);

    sim_knob.kernel_delay_us = 0;
    if ((s = getenv("SIMCUDA_KERNEL_DELAY_US")) && *s) {
        char *e;
        unsigned long long v = strtoull(s, &e, 10);
        if (*e)
            sim_warn("SIMCUDA_KERNEL_DELAY_US='%s' is not a number; using 0", s);
        else
            sim_knob.kernel_delay_us = v;
    }
    sim_knob.granularity = (size_t)2 << 20;
    if ((s = getenv("SIMCUDA_GRANULARITY")) && *s)
        sim_knob.granularity = parse_size("SIMCUDA_GRANULARITY", s, (size_t)2 << 20);
    sim_knob.vmm = true;
    if ((s = getenv("SIMCUDA_VMM")) && *s)
        sim_knob.vmm = !(strcmp(s, "0") == 0 || strcmp(s, "false") == 0 || strcmp(s, "no") == 0 ||
                         strcmp(s, "off") == 0);
    sim_knob.vmm_fd = true;
    if ((s = getenv("SIMCUDA_VMM_FD")) && *s)
        sim_knob.vmm_fd = !(strcmp(s, "0") == 0 || strcmp(s, "false") == 0 ||
                            strcmp(s, "no") == 0 || strcmp(s, "off") == 0);

    sim_free(g_stats_path);
    g_stats_path = NULL;
    if ((s = getenv("SIMCUDA_STATS")) && *s)
        g_stats_path = sim_strdup(s);
    sim_knob.proc_internal = (s = getenv("SIMCUDA_PROC_INTERNAL")) && strcmp(s, "1") == 0;
    /* The standard kernels run through the interpreter like every other
     * kernel unless asked otherwise: a program is then checked against
     * kernels nvcc compiled, not against host versions written here. */
    sim_knob.kernels_ptx = true;
    if ((s = getenv("SIMCUDA_KERNELS")) && *s) {
        if (strcmp(s, "host") == 0)
            sim_knob.kernels_ptx = false;
        else if (strcmp(s, "ptx") != 0)
            sim_warn("SIMCUDA_KERNELS='%s' is not host or ptx; using ptx", s);
    }
    /* Worker threads per interpreted launch (ptx.h); 0: the cores. */
    unsigned threads = 0;
    if ((s = getenv("SIMCUDA_THREADS")) && *s) {
        char *e;
        unsigned long v = strtoul(s, &e, 10);
        if (*e || v < 1 || v > PTX_MAX_THREADS)
            sim_warn("SIMCUDA_THREADS='%s' is not 1..%d; using the cores", s, PTX_MAX_THREADS);
        else
            threads = (unsigned)v;
    }
    ptx_set_threads(threads);
    /* The device count is fixed once initialized (contexts exist per device). */
    if (!atomic_load(&sim_initialized)) {
        sim_knob.devices = 1;
        if ((s = getenv("SIMCUDA_DEVICES")) && *s) {
            char *e;
            long v = strtol(s, &e, 10);
            if (*e || v < 1 || v > SIM_MAX_DEVICES)
                sim_warn("SIMCUDA_DEVICES='%s' is not 1..%d; using 1", s, SIM_MAX_DEVICES);
            else
                sim_knob.devices = (int)v;
        }
        sim_knob.mem_bytes = SIM_TOTAL_MEM;
        if ((s = getenv("SIMCUDA_MEM_BYTES")) && *s)
            sim_knob.mem_bytes = parse_size("SIMCUDA_MEM_BYTES", s, SIM_TOTAL_MEM);
    }
    g_knobs_pid = getpid();
}

__attribute__((constructor)) static void sim_ctor(void)
{
    knobs_load();
}

__attribute__((destructor)) static void sim_dtor(void)
{
    /* Only the process that read the knobs writes (not forked children). */
    if (!g_stats_path || getpid() != g_knobs_pid)
        return;
    FILE *f = fopen(g_stats_path, "w");
    if (!f) {
        sim_warn("SIMCUDA_STATS: cannot write '%s'", g_stats_path);
        return;
    }
    /* Every exported entry point, keyed by its exported name (0 if never
     * called), in entries.def order. */
    fputs("{\"calls\": {", f);
    for (int i = 0; i < SIM_N_ENTRIES; i++) {
        uint64_t n = atomic_load_explicit(&sim_calls[i], memory_order_relaxed);
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", g_procs[i].sym, (unsigned long long)n);
    }
    /* What the process left alive at exit, so a test can see leaks. */
    long maps, handles, resv, allocs;
    sim_mem_live(&maps, &handles, &resv, &allocs);
    /* Which way the kernels ran: host versions or the interpreter. */
    uint64_t launches, tins;
    ptx_totals(&launches, &tins);
    fprintf(f,
            "}, \"live\": {\"mappings\": %ld, \"handles\": %ld, \"reservations\": %ld, "
            "\"allocations\": %ld, \"events\": %ld, \"execs\": %ld}, \"kernels\": "
            "{\"host\": %llu, \"ptx\": %llu, \"ptx_thread_instructions\": %llu}}\n",
            maps, handles, resv, allocs, atomic_load(&sim_live_events),
            atomic_load(&sim_live_execs), (unsigned long long)sim_kernel_host_runs(),
            (unsigned long long)launches, (unsigned long long)tins);
    fclose(f);
}

/* ---- call counters, for a program to read ------------------------------ */

/* simcuda-only queries (found with dlsym; a real driver has none): entry i's
 * exported name (NULL past the last), its calls so far and its SIMCUDA_COST
 * price. A benchmark reads them before and after a part of its run, so the
 * driver calls of that part come from one run, whatever the shim decided. */
__attribute__((visibility("default"))) const char *simcuda_entry_name(int i)
{
    return i >= 0 && i < SIM_N_ENTRIES ? g_procs[i].sym : NULL;
}

__attribute__((visibility("default"))) unsigned long long simcuda_entry_calls(int i)
{
    if (i < 0 || i >= SIM_N_ENTRIES)
        return 0;
    return atomic_load_explicit(&sim_calls[i], memory_order_relaxed);
}

__attribute__((visibility("default"))) unsigned long long simcuda_entry_cost_ns(int i)
{
    if (i < 0 || i >= SIM_N_ENTRIES)
        return 0;
    return atomic_load_explicit(&g_cost_ns[i], memory_order_relaxed);
}

/* ---- handle registry -------------------------------------------------- */

struct reg_slot {
    uintptr_t key; /* 0: empty */
    int type;      /* -1: tombstone */
};

static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct reg_slot *g_reg;
static size_t g_reg_cap, g_reg_used;

static size_t reg_hash(uintptr_t k, size_t cap)
{
    uint64_t h = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* Rehash without tombstones, to at least 4x the live entries. */
static void reg_grow(void)
{
    size_t live = 0;
    for (size_t i = 0; i < g_reg_cap; i++)
        live += g_reg[i].key && g_reg[i].type >= 0;
    size_t ncap = 1024;
    while (ncap < 4 * (live + 1))
        ncap *= 2;
    struct reg_slot *n = sim_calloc(ncap, sizeof *n);
    if (!n)
        abort();
    size_t used = 0;
    for (size_t i = 0; i < g_reg_cap; i++) {
        if (!g_reg[i].key || g_reg[i].type < 0)
            continue;
        size_t j = reg_hash(g_reg[i].key, ncap);
        while (n[j].key)
            j = (j + 1) & (ncap - 1);
        n[j] = g_reg[i];
        used++;
    }
    sim_free(g_reg);
    g_reg = n;
    g_reg_cap = ncap;
    g_reg_used = used;
}

static struct reg_slot *reg_find(uintptr_t k)
{
    if (!g_reg_cap)
        return NULL;
    size_t j = reg_hash(k, g_reg_cap);
    while (g_reg[j].key) {
        if (g_reg[j].key == k && g_reg[j].type >= 0)
            return &g_reg[j];
        j = (j + 1) & (g_reg_cap - 1);
    }
    return NULL;
}

void sim_reg_add(const void *p, int type)
{
    uintptr_t k = (uintptr_t)p;
    pthread_mutex_lock(&g_reg_mu);
    struct reg_slot *live = reg_find(k);
    if (live) {
        live->type = type;
        pthread_mutex_unlock(&g_reg_mu);
        return;
    }
    if ((g_reg_used + 1) * 2 > g_reg_cap)
        reg_grow();
    size_t j = reg_hash(k, g_reg_cap);
    while (g_reg[j].key && g_reg[j].type >= 0) /* first empty slot or tombstone */
        j = (j + 1) & (g_reg_cap - 1);
    if (!g_reg[j].key)
        g_reg_used++;
    g_reg[j].key = k;
    g_reg[j].type = type;
    pthread_mutex_unlock(&g_reg_mu);
}

void sim_reg_del(const void *p)
{
    pthread_mutex_lock(&g_reg_mu);
    struct reg_slot *s = reg_find((uintptr_t)p);
    if (s)
        s->type = -1;
    pthread_mutex_unlock(&g_reg_mu);
}

bool sim_reg_has(const void *p, int type)
{
    if (!p)
        return false;
    pthread_mutex_lock(&g_reg_mu);
    struct reg_slot *s = reg_find((uintptr_t)p);
    bool ok = s && s->type == type;
    pthread_mutex_unlock(&g_reg_mu);
    return ok;
}

/* ---- initialization, device ---------------------------------------------- */

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct sim_ctx *g_primaries[SIM_MAX_DEVICES];
static bool g_init_ok;
static struct sim_ctx **g_ctxs; /* every context ever created (never freed) */
static size_t g_nctxs, g_ctxs_cap;
static atomic_uint_fast64_t g_ctx_ids;

static struct sim_ctx *ctx_new(int dev, bool primary, unsigned flags)
{
    struct sim_ctx *c = sim_calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->dev = dev;
    c->primary = primary;
    c->flags = flags;
    c->id = atomic_fetch_add(&g_ctx_ids, 1) + 1;
    pthread_mutex_init(&c->print_mu, NULL); /* contexts are never freed */
    c->legacy = sim_stream_new(c, SIM_S_LEGACY, 0, 0);
    if (!c->legacy) {
        sim_free(c);
        return NULL;
    }
    pthread_mutex_lock(&g_ctx_mu);
    if (g_nctxs == g_ctxs_cap) {
        size_t ncap = g_ctxs_cap ? g_ctxs_cap * 2 : 8;
        struct sim_ctx **n = sim_realloc(g_ctxs, ncap * sizeof *n);
        if (!n)
            abort();
        g_ctxs = n;
        g_ctxs_cap = ncap;
    }
    g_ctxs[g_nctxs++] = c;
    pthread_mutex_unlock(&g_ctx_mu);
    sim_reg_add(c, SIM_T_CTX);
    return c;
}

static pthread_once_t g_knobs_once = PTHREAD_ONCE_INIT;

/* The driver shuts down from an exit handler registered at the first
 * cuInit: handlers registered before it (an interposer's, a program's
 * atexit before cuInit) run later and find every entry point, even
 * cuGetErrorName, answering CUDA_ERROR_DEINITIALIZED, as an H200 with driver
 * 580 does (driver-answers.txt: exit.*). Device memory needs no release
 * then: the process is ending. */
static void shut_down(void)
{
    if (getpid() != g_knobs_pid)
        return; /* a forked child exiting leaves its parent's driver alone */
    atomic_store(&g_shut_down, true);
    atomic_store(&sim_knobs_any, true); /* every entry takes the slow path */
}

static void init_once(void)
{
    atexit(shut_down);
    g_init_ok = true;
    for (int d = 0; d < sim_knob.devices; d++)
        g_init_ok = g_init_ok && (g_primaries[d] = ctx_new(d, true, 0)) != NULL;
}

CUresult cuInit(unsigned int Flags)
{
    /* Knobs are read again at the first cuInit: programs and tests may
     * setenv() them before initializing (SIMCUDA_FAIL=cuInit:1 included). */
    pthread_once(&g_knobs_once, knobs_load);
    SIM_ENTER(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&g_init_once, init_once);
    if (!g_init_ok)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_store_explicit(&sim_initialized, true, memory_order_release);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    SIM_ENTER(cuDriverGetVersion);
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = 13000;
    return CUDA_SUCCESS;
}

#define SIM_CHECK_DEV(d)                                                       \
    do {                                                                       \
        if ((d) < 0 || (d) >= sim_knob.devices)                                \
            return CUDA_ERROR_INVALID_DEVICE;                                  \
    } while (0)

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    SIM_ENTER(cuDeviceGet);
    SIM_CHECK_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim_knob.devices)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    SIM_ENTER(cuDeviceGetCount);
    SIM_CHECK_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = sim_knob.devices;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetName);
    SIM_CHECK_INIT();
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    snprintf(name, (size_t)len, "simcuda simulated GPU %d", (int)dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    SIM_ENTER(cuDeviceTotalMem_v2);
    SIM_CHECK_INIT();
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    *bytes = sim_knob.mem_bytes;
    return CUDA_SUCCESS;
}

/* Deprecated, still called by bindings: the attributes' answer (9.0). */
CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev)
{
    SIM_ENTER(cuDeviceComputeCapability);
    SIM_CHECK_INIT();
    if (!major || !minor)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    SIM_ENTER(cuDeviceGetAttribute);
    SIM_CHECK_INIT();
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    if ((int)attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    int v = 0; /* attributes simcuda does not model read as 0 */
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: v = sim_knob.vmm ? 1 : 0; break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        v = sim_knob.vmm && sim_knob.vmm_fd;
        break;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED: v = 1; break; /* cuda.h: tells IPC works */
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = (int)SIM_MAX_THREADS_PER_BLOCK; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: v = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: v = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: v = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: v = (int)SIM_MAX_SHARED_PER_BLOCK; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: v = 1; break; /* cuMemAllocAsync */
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: v = 2048; break;
    default: break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    SIM_ENTER(cuDeviceCanAccessPeer);
    SIM_CHECK_INIT();
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    SIM_CHECK_DEV(peerDev);
    *canAccessPeer = dev != peerDev; /* every pair; a device is not its own peer */
    return CUDA_SUCCESS;
}

/* ---- contexts ------------------------------------------------------------ */

#define SIM_CTX_STACK 64
static __thread struct sim_ctx *t_ctx_stack[SIM_CTX_STACK];
static __thread int t_ctx_depth;

struct sim_ctx *sim_ctx_current(void)
{
    return t_ctx_depth ? t_ctx_stack[t_ctx_depth - 1] : NULL;
}

CUresult sim_ctx_need(struct sim_ctx **out)
{
    struct sim_ctx *c = sim_ctx_current();
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!atomic_load(&c->alive))
        return c->primary ? CUDA_ERROR_INVALID_CONTEXT : CUDA_ERROR_CONTEXT_IS_DESTROYED;
    *out = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_check(CUcontext h, struct sim_ctx **out)
{
    struct sim_ctx *c = (struct sim_ctx *)h;
    if (!sim_reg_has(c, SIM_T_CTX))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxRetain);
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    struct sim_ctx *pc = g_primaries[dev];
    pthread_mutex_lock(&g_ctx_mu);
    pc->primary_refs++;
    atomic_store(&pc->alive, true);
    pthread_mutex_unlock(&g_ctx_mu);
    *pctx = (CUcontext)pc;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxRelease_v2);
    SIM_CHECK_INIT();
    SIM_CHECK_DEV(dev);
    struct sim_ctx *pc = g_primaries[dev];
    pthread_mutex_lock(&g_ctx_mu);
    if (pc->primary_refs == 0) {
        pthread_mutex_unlock(&g_ctx_mu);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    bool last = --pc->primary_refs == 0;
    pthread_mutex_unlock(&g_ctx_mu);
    if (last) {
        /* Assumption: the driver finishes the context's work when the last
         * reference goes; simcuda keeps its memory (not modelled). */
        sim_ctx_sync(pc);
        pthread_mutex_lock(&g_ctx_mu);
        if (pc->primary_refs == 0)
            atomic_store(&pc->alive, false);
        pthread_mutex_unlock(&g_ctx_mu);
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    SIM_ENTER(cuDevicePrimaryCtxGetState);
    SIM_CHECK_INIT();
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    pthread_mutex_lock(&g_ctx_mu);
    *flags = g_primaries[dev]->flags;
    *active = g_primaries[dev]->primary_refs > 0;
    pthread_mutex_unlock(&g_ctx_mu);
    return CUDA_SUCCESS;
}

/* Destroys what the primary context holds: its work is finished and its
 * cuMemAlloc/cuMemAllocManaged memory released (documented); VMM and
 * stream-ordered memory stay (they belong to no context). The context stays
 * retained and usable (assumption: a real driver makes it anew at the next
 * use; modules, streams and events of it are not modelled as lost). */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    SIM_ENTER(cuDevicePrimaryCtxReset_v2);
    SIM_CHECK_INIT();
    SIM_CHECK_DEV(dev);
    struct sim_ctx *pc = g_primaries[dev];
    sim_ctx_sync(pc);
    sim_print_flush(pc);
    sim_mem_ctx_destroyed(pc);
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (t_ctx_depth == SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_ctx *c = ctx_new(dev, false, flags);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    atomic_store(&c->alive, true);
    t_ctx_stack[t_ctx_depth++] = c; /* the new context is pushed */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v4);
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    if (ctxCreateParams && (ctxCreateParams->execAffinityParams ||
                            ctxCreateParams->numExecAffinityParams || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED; /* affinity / CIG are not modelled */
    return ctx_create(pctx, flags, dev);
}

/* v3: affinity parameters, which are not modelled (as v4's). */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v3);
    SIM_CHECK_INIT();
    if (!pctx || numParams < 0 || (numParams && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    if (numParams)
        return CUDA_ERROR_NOT_SUPPORTED;
    return ctx_create(pctx, flags, dev);
}

/* The legacy entry point (cuda.h 11's cuCtxCreate) that ctypes bindings
 * still call: v4 without the create params. */
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    SIM_ENTER(cuCtxCreate_v2);
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    SIM_CHECK_DEV(dev);
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxDestroy_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = ctx_check(ctx, &c);
    if (r)
        return r;
    if (c->primary || !atomic_load(&c->alive))
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_ctx_sync(c);
    sim_print_flush(c);
    sim_mem_ctx_destroyed(c); /* documented: its cuMemAlloc memory goes with it */
    atomic_store(&c->alive, false);
    sim_reg_del(c);
    /* Popped from the calling thread's stack if current (as documented). */
    if (t_ctx_depth && t_ctx_stack[t_ctx_depth - 1] == c)
        t_ctx_depth--;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    SIM_ENTER(cuCtxGetCurrent);
    SIM_CHECK_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = (CUcontext)sim_ctx_current();
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    SIM_ENTER(cuCtxSetCurrent);
    SIM_CHECK_INIT();
    if (!ctx) {
        if (t_ctx_depth)
            t_ctx_depth--;
        return CUDA_SUCCESS;
    }
    struct sim_ctx *c;
    CUresult r = ctx_check(ctx, &c);
    if (r)
        return r;
    if (t_ctx_depth)
        t_ctx_stack[t_ctx_depth - 1] = c;
    else
        t_ctx_stack[t_ctx_depth++] = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxPushCurrent_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = ctx_check(ctx, &c);
    if (r)
        return r;
    if (t_ctx_depth == SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    t_ctx_stack[t_ctx_depth++] = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    SIM_ENTER(cuCtxPopCurrent_v2);
    SIM_CHECK_INIT();
    if (!t_ctx_depth)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct sim_ctx *c = t_ctx_stack[--t_ctx_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    SIM_ENTER(cuCtxGetDevice);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    SIM_ENTER(cuCtxGetDevice_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = ctx ? ctx_check(ctx, &c) : sim_ctx_need(&c);
    if (r)
        return r;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = c->dev;
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    SIM_ENTER(cuCtxSynchronize);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if ((r = sim_capture_ctx_sync(c)) != CUDA_SUCCESS)
        return r;
    sim_ctx_sync(c);
    sim_print_flush(c);
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    SIM_ENTER(cuCtxSynchronize_v2);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = ctx ? ctx_check(ctx, &c) : sim_ctx_need(&c);
    if (r)
        return r;
    if ((r = sim_capture_ctx_sync(c)) != CUDA_SUCCESS)
        return r;
    sim_ctx_sync(c);
    sim_print_flush(c);
    return CUDA_SUCCESS;
}

/* Under g_ctx_mu: the devices c may reach through its peer contexts. */
static void peers_publish(struct sim_ctx *c)
{
    uint64_t m = 0;
    for (size_t i = 0; i < c->npeers; i++)
        m |= (uint64_t)1 << c->peers[i]->dev;
    atomic_store_explicit(&c->peer_devs, m, memory_order_release);
}

CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    SIM_ENTER(cuCtxEnablePeerAccess);
    SIM_CHECK_INIT();
    struct sim_ctx *cur, *peer;
    CUresult r = sim_ctx_need(&cur);
    if (r)
        return r;
    if (ctx_check(peerContext, &peer) != CUDA_SUCCESS || peer == cur ||
        !atomic_load(&peer->alive))
        return CUDA_ERROR_INVALID_CONTEXT; /* documented: invalid or current context */
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* cuDeviceCanAccessPeer: every pair of distinct devices, not a device
     * with itself (so not two contexts of one device). */
    if (peer->dev == cur->dev)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&g_ctx_mu);
    r = CUDA_SUCCESS;
    for (size_t i = 0; i < cur->npeers; i++)
        if (cur->peers[i] == peer)
            r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    if (!r && cur->npeers == cur->peers_cap) {
        size_t nc = cur->peers_cap ? cur->peers_cap * 2 : 4;
        struct sim_ctx **v = sim_realloc(cur->peers, nc * sizeof *v);
        if (!v)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            cur->peers = v;
            cur->peers_cap = nc;
        }
    }
    if (!r) {
        cur->peers[cur->npeers++] = peer;
        peers_publish(cur);
    }
    pthread_mutex_unlock(&g_ctx_mu);
    return r;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    SIM_ENTER(cuCtxDisablePeerAccess);
    SIM_CHECK_INIT();
    struct sim_ctx *cur, *peer;
    CUresult r = sim_ctx_need(&cur);
    if (r)
        return r;
    if (ctx_check(peerContext, &peer) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&g_ctx_mu);
    r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    for (size_t i = 0; i < cur->npeers; i++) {
        if (cur->peers[i] == peer) {
            cur->peers[i] = cur->peers[--cur->npeers];
            peers_publish(cur);
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&g_ctx_mu);
    return r;
}

CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    SIM_ENTER(cuCtxGetStreamPriorityRange);
    SIM_CHECK_INIT();
    struct sim_ctx *c;
    CUresult r = sim_ctx_need(&c);
    if (r)
        return r;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

/* ---- errors ----------------------------------------------------------------- */

struct sim_errinfo {
    CUresult code;
    const char *name;
    const char *str;
};

static const struct sim_errinfo g_errs[] = {
#define SIM_ERR(code, str) {code, #code, str},
#include "errors.def"
#undef SIM_ERR
};

static const struct sim_errinfo *err_find(CUresult e)
{
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == e)
            return &g_errs[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    SIM_ENTER(cuGetErrorName);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_errinfo *e = err_find(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    SIM_ENTER(cuGetErrorString);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const struct sim_errinfo *e = err_find(error);
    *pStr = e ? e->str : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- cuGetProcAddress ---------------------------------------------------------- */

static void *proc_internal_self(const char *symbol);

static CUresult proc_lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;
    /* Documented: a version newer than the driver's is an error. */
    if (cudaVersion > 13000)
        return CUDA_ERROR_INVALID_VALUE;
    /* DEFAULT (0) at the driver level is the legacy stream; the header's
     * inline wrapper adds PER_THREAD for per-thread compilation units. */
    bool ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const struct sim_proc *best = NULL;
    bool named = false;
    for (int i = 0; i < SIM_N_ENTRIES; i++) {
        const struct sim_proc *e = &g_procs[i];
        if (strcmp(e->base, symbol) != 0)
            continue;
        named = true;
        if (e->version > cudaVersion)
            continue;
        if (e->flavour == SIM_FLAV_T && !ptds)
            continue;
        /* newest version that fits; at equal version the per-thread one */
        if (!best || e->version > best->version ||
            (e->version == best->version && e->flavour == SIM_FLAV_T))
            best = e;
    }
    if (!best) {
        /* Assumption (observed driver behaviour, not the doc's SUCCESS):
         * CUDA_ERROR_NOT_FOUND with a NULL pointer. */
        *pfn = NULL;
        if (status)
            *status = named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    void *internal = NULL;
    if (sim_knob.proc_internal) {
        internal = proc_internal_self(best->sym);
        if (!internal)
            internal = sim_internal_entry(best->sym);
    }
    if (internal)
        *pfn = internal;
    else
        memcpy(pfn, &best->fn, sizeof(void *));
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

_Static_assert(sizeof(sim_voidfn) == sizeof(void *), "function pointers are data-pointer sized");

/* Internal entries of the resolver itself (SIMCUDA_PROC_INTERNAL): the same
 * work, counted under the exported name, without a dynamic symbol. */
static CUresult internal_get_proc_address(const char *symbol, void **pfn, int cudaVersion,
                                          cuuint64_t flags)
{
    SIM_ENTER(cuGetProcAddress);
    return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

static CUresult internal_get_proc_address_v2(const char *symbol, void **pfn, int cudaVersion,
                                             cuuint64_t flags,
                                             CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_ENTER(cuGetProcAddress_v2);
    return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

static void *proc_internal_self(const char *symbol)
{
    if (strcmp(symbol, "cuGetProcAddress") == 0)
        return __extension__(void *)internal_get_proc_address;
    if (strcmp(symbol, "cuGetProcAddress_v2") == 0)
        return __extension__(void *)internal_get_proc_address_v2;
    return NULL;
}

/* SIMCUDA_PROC_LOG=path: one line per request, in order, "NAME VERSION FLAGS
 * ANSWER". ANSWER is the exported name of the returned entry,
 * "internal:NAME" for an unexported one (SIMCUDA_PROC_INTERNAL), or the
 * CUresult name of a failed request. Read once, at the first request: a
 * runtime asks before it calls cuInit. */
static pthread_once_t g_proc_log_once = PTHREAD_ONCE_INIT;
static int g_proc_log_fd = -1;

static void proc_log_open(void)
{
    const char *s = getenv("SIMCUDA_PROC_LOG");
    if (!s || !*s)
        return;
    g_proc_log_fd = open(s, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (g_proc_log_fd < 0)
        sim_warn("SIMCUDA_PROC_LOG: cannot write '%s'", s);
}

static CUresult proc_logged(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    pthread_once(&g_proc_log_once, proc_log_open);
    CUresult r = proc_lookup(symbol, pfn, cudaVersion, flags, status);
    if (g_proc_log_fd < 0)
        return r;
    char answer[160];
    if (r != CUDA_SUCCESS) {
        const struct sim_errinfo *e = err_find(r);
        snprintf(answer, sizeof answer, "%s", e ? e->name : "CUDA_ERROR");
    } else {
        const char *name = NULL;
        for (int i = 0; i < SIM_N_ENTRIES && !name; i++)
            if (memcmp(&g_procs[i].fn, pfn, sizeof(void *)) == 0)
                name = g_procs[i].sym;
        if (name) {
            snprintf(answer, sizeof answer, "%s", name);
        } else {
            const struct sim_proc *b = NULL; /* the variant the internal entry stands for */
            void *internal;
            for (int i = 0; i < SIM_N_ENTRIES && !b; i++)
                if ((internal = sim_internal_entry(g_procs[i].sym)) && internal == *pfn)
                    b = &g_procs[i];
            snprintf(answer, sizeof answer, "internal:%s", b ? b->sym : "?");
        }
    }
    char line[512];
    /* An empty name (NVIDIA's cudart asks for one first) is written "". */
    int n = snprintf(line, sizeof line, "%s %d %llu %s\n",
                     !symbol ? "(null)" : *symbol ? symbol : "\"\"", cudaVersion,
                     (unsigned long long)flags, answer);
    if (n > 0) {
        ssize_t w = write(g_proc_log_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    return r;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    SIM_ENTER(cuGetProcAddress);
    return proc_logged(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    SIM_ENTER(cuGetProcAddress_v2);
    return proc_logged(symbol, pfn, cudaVersion, flags, symbolStatus);
}
