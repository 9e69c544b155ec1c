/* stats: the process-wide counters of the contract (../shared/DESIGN.md; docs/design.md), relaxed atomics.
 *
 * VR_COUNTERS is the one list: it names the fields of struct varemap_stats,
 * the enum used to bump them and the keys of the `summary` event.
 * Gauges (execs_active, slices_bound, vmm_bytes, padding_bytes,
 * vmm_leaked_bytes, variants, vmm_cache_bytes) go up and down through vr_stat_add with a negative delta.
 */
#ifndef VR_STATS_H
#define VR_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "varemap/varemap.h"

#define VR_COUNTERS(X)                                                         \
    X(setparams_seen) X(setparams_skipped) X(setparams_forwarded)              \
    X(transition_updates) X(launches) X(execs_active) X(execs_disabled)        \
    X(slices_bound) X(rebinds) X(rebind_waits) X(vmm_bytes) X(padding_bytes)   \
    X(vmm_fallbacks) X(unrouted_procs) X(vmm_leaked_bytes) X(variants)          \
    X(vmm_cache_hits) X(vmm_cache_misses) X(vmm_cache_bytes)                  \
    X(updates_seen) X(updates_absorbed)

enum vr_counter {
#define VR_X(name) VR_C_##name,
    VR_COUNTERS(VR_X)
#undef VR_X
    VR_C_COUNT
};

/* Each counter on its own cache line so threads bumping different counters
 * do not bounce one line between cores. Inline: it sits on the hot path. */
struct vr_padded_counter {
    _Atomic uint64_t value;
    char pad[64 - sizeof(uint64_t)];
};
extern __attribute__((visibility("hidden"))) struct vr_padded_counter vr_counters[VR_C_COUNT];

static inline void vr_stat_add(enum vr_counter c, int64_t delta)
{
    atomic_fetch_add_explicit(&vr_counters[c].value, (uint64_t)delta, memory_order_relaxed);
}

static inline void vr_stat_inc(enum vr_counter c) { vr_stat_add(c, 1); }
uint64_t vr_stat_get(enum vr_counter c);
/* In mode off SetParams are only counted as seen; every one is forwarded, so
 * snapshots report setparams_forwarded = setparams_seen. */
void vr_stats_forward_all(bool on);
bool vr_stats_forwarding_all(void);
/* The counters plus the per-exec sums (summary.c, above the exec layer). */
void vr_stats_snapshot(struct varemap_stats *out);
/* Every counter back to 0: a forked child counts for itself. */
void vr_stats_reset(void);
/* " name=value" for every counter, cut to fit cap (NUL-terminated when
 * cap > 0). Returns the length written. */
size_t vr_stats_text(char *buf, size_t cap, const struct varemap_stats *s);
/* Adds every counter as a field of the object being built. */
void vr_stats_json(struct vr_jw *w, const struct varemap_stats *s);

#endif
