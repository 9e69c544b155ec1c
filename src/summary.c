/* summary: the totals the program and the exit summary read, the one file
 * of the stats that sits above the exec layer.
 *
 * The shim's counters (stats.c) plus the per-exec sums, pulled from the exec
 * layer (vr_exec_add_stats), so that no module below the exec layer calls
 * into it. varemap_get_stats is the exported face (include/varemap.h).
 */
#include "stats.h"

#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "exec.h"

void vr_stats_snapshot(struct varemap_stats *out)
{
#define VR_X(name) out->name = vr_stat_get(VR_C_##name);
    VR_COUNTERS(VR_X)
#undef VR_X
    vr_exec_add_stats(out);
    if (vr_stats_forwarding_all())
        out->setparams_forwarded = out->setparams_seen;
}

__attribute__((visibility("default"))) int varemap_get_stats(struct varemap_stats *out,
                                                             size_t size)
{
    if (!out || size < sizeof(uint64_t))
        return -EINVAL;
    struct varemap_stats all;
    vr_stats_snapshot(&all);
    size_t n = size < sizeof all ? size - size % sizeof(uint64_t) : sizeof all;
    memcpy(out, &all, n);
    return 0;
}
