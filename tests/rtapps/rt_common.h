// rt_common: what the nvcc-built test programs share. Each program writes
//   stdout: one line  steps=S launches=L setparams=P checksum=HEX
//   --out FILE: the bytes of its result buffers (compared byte for byte)
//   stderr: one JSON line with timings and, under the shim, its counters
// so the e2e harness (tests/e2e/harness.h) and scripts/gpu-check read all of
// them the same way. Kernels are the standard ones (vr_kernels.cu), which
// simcuda runs on the host.
#ifndef RT_COMMON_H
#define RT_COMMON_H

#include <cuda_runtime.h>

#include <dlfcn.h>

#include <cerrno>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <initializer_list>
#include <vector>

#include <varemap/varemap.h>

#include "vr_kernels.cu"

#define CK(call)                                                                         \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            std::fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #call,      \
                         cudaGetErrorName(e_), (int)e_);                                 \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

static inline uint64_t rt_clock(clockid_t id)
{
    timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline unsigned long rt_num(const char *prog, const char *s)
{
    char *e;
    errno = 0;
    unsigned long v = std::strtoul(s, &e, 10);
    if (errno || e == s || *e || v == 0) {
        std::fprintf(stderr, "%s: bad number '%s'\n", prog, s);
        std::exit(2);
    }
    return v;
}

// One `--name value` option of a program: a string, or a positive whole number.
struct rt_opt {
    const char *name;
    const char **str;
    unsigned long *num;
    rt_opt(const char *n, const char **s) : name(n), str(s), num(nullptr) {}
    rt_opt(const char *n, unsigned long *v) : name(n), str(nullptr), num(v) {}
};

// Reads argv as `--name value` pairs. An unknown option, one missing its value
// or a bad number ends the program with status 2 and a line naming it: a test
// that mistypes an option must not run with a default it did not ask for.
static inline void rt_options(const char *prog, int argc, char **argv,
                              std::initializer_list<rt_opt> opts)
{
    for (int i = 1; i < argc; i += 2) {
        const rt_opt *o = nullptr;
        for (const rt_opt &c : opts)
            if (!std::strcmp(argv[i], c.name))
                o = &c;
        if (!o || i + 1 == argc) {
            std::fprintf(stderr, "%s: %s %s\n", prog, o ? "no value for" : "unknown option",
                         argv[i]);
            std::exit(2);
        }
        if (o->str)
            *o->str = argv[i + 1];
        else
            *o->num = rt_num(prog, argv[i + 1]);
    }
}

// The result: device buffers read back in order, hashed (FNV-1a 64) and
// written to --out.
struct rt_result {
    std::vector<unsigned char> bytes;
    void add(const float *dev, size_t elems)
    {
        size_t at = bytes.size();
        bytes.resize(at + elems * sizeof(float));
        CK(cudaMemcpy(bytes.data() + at, dev, elems * sizeof(float), cudaMemcpyDeviceToHost));
    }
    uint64_t fnv() const
    {
        uint64_t h = 0xcbf29ce484222325ull;
        for (unsigned char c : bytes) {
            h ^= c;
            h *= 0x100000001b3ull;
        }
        return h;
    }
    void write(const char *prog, const char *path) const
    {
        if (!path)
            return;
        FILE *f = std::fopen(path, "wb");
        if (!f || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f)) {
            std::fprintf(stderr, "%s: cannot write %s\n", prog, path);
            std::exit(1);
        }
    }
};

// The shim's counters when it is loaded, else all zero and false.
static inline bool rt_shim_stats(struct varemap_stats *s)
{
    *s = varemap_stats{};
    void *sym = dlsym(RTLD_DEFAULT, "varemap_get_stats");
    int (*get)(struct varemap_stats *, size_t) = nullptr;
    std::memcpy(&get, &sym, sizeof sym);
    return get && get(s, sizeof *s) == 0;
}

static inline void rt_report(const char *prog, const char *pattern, unsigned long steps,
                             unsigned long long launches, unsigned long long setparams,
                             const rt_result &res, uint64_t wall_loop_ns, uint64_t cpu_loop_ns)
{
    uint64_t h = res.fnv();
    std::printf("steps=%lu launches=%llu setparams=%llu checksum=%016" PRIx64 "\n", steps, launches,
                setparams, h);
    std::fflush(stdout);
    struct varemap_stats s;
    bool shim = rt_shim_stats(&s);
    std::fprintf(stderr,
                 "{\"program\": \"%s\", \"pattern\": \"%s\", \"steps\": %lu, \"checksum\": "
                 "\"%016" PRIx64 "\", \"wall_ns_per_step\": %.1f, \"cpu_ns_per_step\": %.1f, "
                 "\"setparams\": %llu, \"launches\": %llu, \"shim\": %s",
                 prog, pattern, steps, h, (double)wall_loop_ns / (double)steps,
                 (double)cpu_loop_ns / (double)steps, setparams, launches, shim ? "true" : "false");
    if (shim)
        std::fprintf(stderr,
                     ", \"setparams_seen\": %" PRIu64 ", \"setparams_skipped\": %" PRIu64
                     ", \"setparams_forwarded\": %" PRIu64 ", \"rebinds\": %" PRIu64
                     ", \"vmm_fallbacks\": %" PRIu64 ", \"unrouted_procs\": %" PRIu64,
                     s.setparams_seen, s.setparams_skipped, s.setparams_forwarded, s.rebinds,
                     s.vmm_fallbacks, s.unrouted_procs);
    std::fprintf(stderr, "}\n");
}

#endif
