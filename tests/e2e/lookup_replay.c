/* lookup_replay: replays recorded cuGetProcAddress requests (the lists
 * scripts/record-cudart-lookups writes) through the preloaded shim and checks
 * every answer against the driver's own.
 *
 *   LD_PRELOAD=libvaremap_shim.so LD_LIBRARY_PATH=<simcuda> lookup_replay [--strict] LIST...
 *
 * Per request: the shim and the driver give the same result and status; an
 * entry point the shim intercepts is answered by the shim's wrapper of
 * exactly the variant the driver chose for that version and flags, the
 * cuGetProcAddress request by the shim's resolver, everything else by the
 * driver's own entry. "Intercepted" is found at run time: the shim exports a
 * symbol of the name the driver's answer carries (dladdr), so hooks added to
 * src/hooks.def are covered without a list here. Every answered hook is
 * called once with all-zero arguments and must give the driver's own result.
 * --strict: the shim's answer must also carry the list's ANSWER name (for
 * hand-written lists naming the variant each request must get).
 *
 * The driver's own entries come from the real dlsym (libc's, reached by a
 * name the shim's dlsym hook does not touch): the program's dlsym is the
 * shim's, which answers driver names with its wrappers.
 *
 * Output: one "FAIL ..." line per broken check, then one line
 *   requests=N answered=N intercepted=N resolver=N zero_calls=N unrouted=N failures=N
 * Exit status 0 when failures is 0.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <varemap/varemap.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
/* Every driver entry point the shim can intercept takes integer or pointer
 * arguments (cuda.h); surplus zero arguments are ignored by the x86-64 and
 * aarch64 calling conventions. */
typedef CUresult (*zero_fn)(uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t, uintptr_t);
typedef void *(*dlsym_fn)(void *, const char *);

static dlsym_fn real_dlsym;
static void *drv, *shim, *drv_base, *shim_base;
static bool strict;
static unsigned long requests, answered, intercepted, resolver, zero_calls, failures;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    failures++;
}

static void *fbase(const void *p)
{
    Dl_info i;
    return p && dladdr(p, &i) ? i.dli_fbase : NULL;
}

static const char *sname(const void *p)
{
    Dl_info i;
    if (!p || !dladdr(p, &i) || !i.dli_sname || i.dli_saddr != p)
        return "?";
    return i.dli_sname;
}

static const char *where(const void *p)
{
    void *b = fbase(p);
    return b == shim_base ? "the shim" : b == drv_base ? "the driver" : "elsewhere";
}

static void setup(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *libdl = dlopen("libdl.so.2", RTLD_NOW | RTLD_NOLOAD);
    /* "dlsym" is no driver name: the shim's hook hands it to the real one. */
    void *p = libc ? dlsym(libc, "dlsym") : NULL;
    if (!p && libdl)
        p = dlsym(libdl, "dlsym");
    memcpy(&real_dlsym, &p, sizeof p);
    drv = dlopen("libcuda.so.1", RTLD_NOW);
    Dl_info i;
    void *stats = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    if (!real_dlsym || !drv || !stats || !dladdr(stats, &i)) {
        printf("FAIL setup: real dlsym %p, libcuda.so.1 %p, varemap_get_stats %p (is the shim "
               "preloaded?)\n", p, drv, stats);
        exit(1);
    }
    shim = dlopen(i.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    shim_base = i.dli_fbase;
    drv_base = fbase(real_dlsym(drv, "cuInit"));
    if (!shim || !drv_base || drv_base == shim_base) {
        printf("FAIL setup: cannot tell the shim (%s) from the driver\n", i.dli_fname);
        exit(1);
    }
    /* A current context, so the zero-argument calls reach argument checks
     * rather than all stopping at CUDA_ERROR_NOT_INITIALIZED. */
    CUresult (*init)(unsigned);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*set)(CUcontext);
    void *a = real_dlsym(drv, "cuInit"), *b = real_dlsym(drv, "cuDevicePrimaryCtxRetain"),
         *c = real_dlsym(drv, "cuCtxSetCurrent");
    memcpy(&init, &a, sizeof a);
    memcpy(&retain, &b, sizeof b);
    memcpy(&set, &c, sizeof c);
    CUcontext ctx;
    if (!a || !b || !c || init(0) || retain(&ctx, 0) || set(ctx)) {
        printf("FAIL setup: no context on the driver\n");
        exit(1);
    }
}

/* Ends the capture of the stream NULL (the per-thread one with flags) and
 * destroys its graph. */
static void end_capture(gpa_fn gpa, unsigned long long flags)
{
    void *end = NULL, *destroy = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa("cuStreamEndCapture", &end, 10000, flags, &st) != CUDA_SUCCESS ||
        gpa("cuGraphDestroy", &destroy, 10000, 0, &st) != CUDA_SUCCESS)
        return;
    CUresult (*end_fn)(CUstream, CUgraph *);
    CUresult (*destroy_fn)(CUgraph);
    memcpy(&end_fn, &end, sizeof end);
    memcpy(&destroy_fn, &destroy, sizeof destroy);
    CUgraph g = NULL;
    if (end_fn(NULL, &g) == CUDA_SUCCESS && g)
        destroy_fn(g);
}

static void one(const char *list, unsigned line, gpa_fn drv_gpa, gpa_fn shim_gpa, const char *name,
                int version, unsigned long long flags, const char *want)
{
    void *dp = NULL, *sp = NULL;
    CUdriverProcAddressQueryResult ds = (CUdriverProcAddressQueryResult)77, ss = ds;
    CUresult rd = drv_gpa(name, &dp, version, flags, &ds);
    CUresult rs = shim_gpa(name, &sp, version, flags, &ss);
    requests++;
    if (rs != rd || ss != ds)
        fail("%s:%u %s@%d flags %llu: shim result %d status %d, driver %d status %d", list, line,
             name, version, flags, rs, ss, rd, ds);
    if (rd != CUDA_SUCCESS) {
        if (sp != dp)
            fail("%s:%u %s@%d: refused by the driver, yet the shim answered %p", list, line, name,
                 version, sp);
        return;
    }
    answered++;
    if (strict && strcmp(sname(sp), want))
        fail("%s:%u %s@%d flags %llu: answered by %s in %s, want %s", list, line, name, version,
             flags, sname(sp), where(sp), want);
    const char *chosen = sname(dp);
    void *wrapper = strcmp(chosen, "?") ? real_dlsym(shim, chosen) : NULL;
    bool hooked = wrapper && fbase(wrapper) == shim_base;
    if (!strcmp(name, "cuGetProcAddress")) {
        resolver++;
        if (!hooked)
            fail("%s:%u cuGetProcAddress@%d: the shim exports no %s", list, line, version, chosen);
    }
    if (!hooked) {
        if (sp != dp)
            fail("%s:%u %s@%d flags %llu: not intercepted, yet answered by %s in %s instead of the "
                 "driver's %s", list, line, name, version, flags, sname(sp), where(sp), chosen);
        return;
    }
    intercepted++;
    if (sp != wrapper) {
        fail("%s:%u %s@%d flags %llu: the driver chose %s, the shim answered %s in %s", list, line,
             name, version, flags, chosen, sname(sp), where(sp));
        return;
    }
    zero_fn via_shim, direct;
    memcpy(&via_shim, &sp, sizeof sp);
    memcpy(&direct, &dp, sizeof dp);
    CUresult a = via_shim(0, 0, 0, 0, 0, 0);
    /* A begun capture (the per-thread stream can capture) would make the
     * driver's own call refuse: it is ended first, through the shim. */
    if (a == CUDA_SUCCESS && !strcmp(name, "cuStreamBeginCapture"))
        end_capture(shim_gpa, flags);
    CUresult b = direct(0, 0, 0, 0, 0, 0);
    if (b == CUDA_SUCCESS && !strcmp(name, "cuStreamBeginCapture"))
        end_capture(shim_gpa, flags);
    zero_calls++;
    if (a != b)
        fail("%s:%u %s with zero arguments: %d through the shim, %d from the driver", list, line,
             chosen, a, b);
}

static void replay(const char *list)
{
    FILE *f = fopen(list, "r");
    if (!f) {
        fail("cannot read %s", list);
        return;
    }
    /* Through the driver's handle, as a program asks: RTLD_DEFAULT would find
     * nothing, libcuda.so.1 being opened RTLD_LOCAL (and the shim answers as
     * the loader would). */
    void *a = real_dlsym(drv, "cuGetProcAddress_v2"), *b = dlsym(drv, "cuGetProcAddress_v2");
    gpa_fn drv_gpa, shim_gpa;
    memcpy(&drv_gpa, &a, sizeof a);
    memcpy(&shim_gpa, &b, sizeof b);
    if (!a || fbase(b) != shim_base) {
        fail("cuGetProcAddress_v2: driver %p, shim's %p in %s", a, b, where(b));
        fclose(f);
        return;
    }
    char buf[512];
    unsigned line = 0, n = 0;
    while (fgets(buf, sizeof buf, f)) {
        line++;
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        char name[256], answer[256];
        int version;
        unsigned long long flags;
        if (sscanf(buf, "%255s %d %llu %255s", name, &version, &flags, answer) != 4) {
            fail("%s:%u: not NAME VERSION FLAGS ANSWER", list, line);
            continue;
        }
        one(list, line, drv_gpa, shim_gpa, strcmp(name, "\"\"") ? name : "", version, flags, answer);
        n++;
    }
    fclose(f);
    if (!n)
        fail("%s: no request", list);
}

int main(int argc, char **argv)
{
    int first = 1;
    if (argc > 1 && !strcmp(argv[1], "--strict")) {
        strict = true;
        first = 2;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: lookup_replay [--strict] LIST...\n");
        return 2;
    }
    setup();
    for (int i = first; i < argc; i++)
        replay(argv[i]);
    int (*get)(struct varemap_stats *, size_t);
    void *g = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    memcpy(&get, &g, sizeof g);
    struct varemap_stats s = { 0 };
    if (get(&s, sizeof s) != 0)
        fail("varemap_get_stats failed");
    if (s.unrouted_procs)
        fail("unrouted_procs = %llu", (unsigned long long)s.unrouted_procs);
    printf("requests=%lu answered=%lu intercepted=%lu resolver=%lu zero_calls=%lu unrouted=%llu "
           "failures=%lu\n",
           requests, answered, intercepted, resolver, zero_calls,
           (unsigned long long)s.unrouted_procs, failures);
    return failures ? 1 : 0;
}
