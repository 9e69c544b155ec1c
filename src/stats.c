#include "stats.h"

#include <errno.h>
#include <stdatomic.h>

/* Cache-line padding keeps hot counters bumped from different threads from
 * bouncing one line between cores. */
struct vr_padded_counter {
    _Atomic uint64_t value;
    char pad[64 - sizeof(uint64_t)];
};

static struct vr_padded_counter counters[VR_C_COUNT];

void vr_stat_add(enum vr_counter c, int64_t delta)
{
    atomic_fetch_add_explicit(&counters[c].value, (uint64_t)delta, memory_order_relaxed);
}

uint64_t vr_stat_get(enum vr_counter c)
{
    return atomic_load_explicit(&counters[c].value, memory_order_relaxed);
}

void vr_stats_snapshot(struct varemap_stats *out)
{
#define VR_X(name) out->name = vr_stat_get(VR_C_##name);
    VR_COUNTERS(VR_X)
#undef VR_X
}

void vr_stats_json(struct vr_jw *w, const struct varemap_stats *s)
{
#define VR_X(name) vr_jw_u64(w, #name, s->name);
    VR_COUNTERS(VR_X)
#undef VR_X
}

__attribute__((visibility("default"))) int varemap_get_stats(struct varemap_stats *out)
{
    if (!out)
        return -EINVAL;
    vr_stats_snapshot(out);
    return 0;
}
