/* cost: the shim's running estimates of what the driver calls it weighs cost.
 *
 * Measured with clock_gettime around calls the shim makes anyway (no extra
 * driver call): the least of the first 8 samples per kind, then an
 * exponentially weighted mean; the priors of conf/cost-model.conf until the
 * first measurement. A sample counts for at most 4 times the estimate (a
 * preempted call is no verdict). Relaxed
 * atomics: an estimate may lag a concurrent measurement; never on the
 * absorbed path.
 */
#ifndef VR_COST_H
#define VR_COST_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum vr_cost { VR_COST_SETPARAMS, VR_COST_MAP, VR_COST_UNMAP, VR_COST_ACCESS, VR_COST_COUNT };

static inline uint64_t vr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vr_cost_note(enum vr_cost c, uint64_t since_ns);
uint64_t vr_cost_get(enum vr_cost c);
/* True once the estimate rests on a measurement, not the prior. */
bool vr_cost_measured(enum vr_cost c);
const char *vr_cost_name(enum vr_cost c);

#endif
