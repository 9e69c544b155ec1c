/* varemap public interface.
 *
 * A program running under libvaremap_shim.so may look up varemap_get_stats
 * with dlsym(RTLD_DEFAULT, "varemap_get_stats") to read the shim's counters;
 * without the shim the lookup returns NULL. Counters are process-wide and
 * monotonic except execs_active (execs currently in the active state),
 * slices_bound (slices currently bound), vmm_bytes and padding_bytes
 * (bytes currently backed by varemap's own VMM allocations), vmm_leaked_bytes
 * variants and vmm_cache_bytes. Fields are only ever appended, and
 * VAREMAP_STATS_VERSION changes with them. The caller passes the size of
 * its struct: the shim writes no byte past it, so a program built against
 * an older header gets the fields it knows and a newer one finds the
 * fields the shim lacks untouched.
 */
#ifndef VAREMAP_VAREMAP_H
#define VAREMAP_VAREMAP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VAREMAP_STATS_VERSION 5

struct varemap_stats {
    uint64_t setparams_seen;      /* SetParams calls that reached the shim */
    uint64_t setparams_skipped;   /* absorbed: the driver already held the same parameters */
    uint64_t setparams_forwarded; /* sent to the driver on the program's behalf */
    uint64_t transition_updates;  /* driver updates issued to point a graph at its slices */
    uint64_t launches;            /* cuGraphLaunch calls that reached the shim */
    uint64_t execs_active;        /* execs now remapped */
    uint64_t execs_disabled;      /* execs whose profile selected nothing */
    uint64_t slices_bound;        /* slices now bound to an allocation */
    uint64_t rebinds;             /* slices remapped to another allocation */
    uint64_t rebind_waits;        /* host waits the shim made for a launch: the last resort
                                     of ordering an exec's launches when no event could be
                                     had (should stay 0) */
    uint64_t vmm_bytes;           /* bytes now served by varemap's VMM backing */
    uint64_t padding_bytes;       /* granularity padding in vmm_bytes */
    uint64_t vmm_fallbacks;       /* cuMemAlloc calls that fell back to native */
    uint64_t unrouted_procs;      /* cuGetProcAddress results we could not route */
    uint64_t vmm_leaked_bytes;    /* VMM memory the program freed that the shim could not yet
                                     return to the driver (an internal unmap/release failed;
                                     retried later) */
    uint64_t variants;            /* executable-graph variants the shim now keeps */
    /* since version 3 */
    uint64_t vmm_cache_hits;      /* cuMemAlloc calls served from freed VMM memory kept mapped
                                     (VAREMAP_VMM_CACHE): no VMM call */
    uint64_t vmm_cache_misses;    /* VMM-backed cuMemAlloc calls the cache could not serve */
    uint64_t vmm_cache_bytes;     /* freed VMM memory now kept for reuse (not the program's) */
    /* since version 5 */
    uint64_t updates_seen;        /* cuGraphExecUpdate calls (v2 and v1) that reached the shim */
    uint64_t updates_absorbed;    /* of them, answered without a cuGraphExecUpdate to the driver
                                     (the update graph equals the exec's, or differs only in
                                     kernel arguments the SetParams path applied) */
};

/* Copies the current counters into out, at most `size` bytes (pass
 * sizeof *out) and whole counters only. Returns 0, or -22 (EINVAL) when
 * out is NULL or size is under one counter. Safe to call from any thread
 * at any time. Since version 4 (before it the call took no size). */
int varemap_get_stats(struct varemap_stats *out, size_t size);

#ifdef __cplusplus
}
#endif

#endif
