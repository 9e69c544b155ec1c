/* stats: the shim's own counters (stats.h); the totals a program reads
 * (summary.c) add the per-exec sums on top. */
#include "stats.h"

#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <stdatomic.h>

struct vr_padded_counter vr_counters[VR_C_COUNT];
static bool forward_all;

void vr_stats_forward_all(bool on)
{
    forward_all = on;
}

bool vr_stats_forwarding_all(void)
{
    return forward_all;
}

uint64_t vr_stat_get(enum vr_counter c)
{
    return atomic_load_explicit(&vr_counters[c].value, memory_order_relaxed);
}

void vr_stats_reset(void)
{
    for (int c = 0; c < VR_C_COUNT; c++)
        atomic_store_explicit(&vr_counters[c].value, 0, memory_order_relaxed);
}

size_t vr_stats_text(char *buf, size_t cap, const struct varemap_stats *s)
{
    size_t len = 0;
    if (cap == 0)
        return 0;
    buf[0] = '\0';
#define VR_X(name)                                                                        \
    if (len < cap) {                                                                      \
        int n = snprintf(buf + len, cap - len, " %s=%llu", #name,                         \
                         (unsigned long long)s->name);                                    \
        len = n < 0 ? len : len + (size_t)n < cap ? len + (size_t)n : cap - 1;             \
    }
    VR_COUNTERS(VR_X)
#undef VR_X
    return len;
}

void vr_stats_json(struct vr_jw *w, const struct varemap_stats *s)
{
#define VR_X(name) vr_jw_u64(w, #name, s->name);
    VR_COUNTERS(VR_X)
#undef VR_X
}
