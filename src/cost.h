/* cost: the prices the policy weighs with, per driver call the shim times.
 *
 * Each price starts as the cost model's (conf/cost-model.conf: the H200's
 * measured figures) and follows what this process measures, robustly: the
 * median of the last VR_COST_RING samples, once there are VR_COST_MIN of
 * them, and only where that median lies outside VR_COST_BAND of the
 * model's figure. Inside the band the model's figure stands, so timing noise
 * (a loaded machine, simcuda's own overhead around a modelled cost) never
 * moves a price, and two runs of one program at one set of prices weigh with
 * the same numbers; a driver really dearer or cheaper than the model is
 * followed. Measured with clock_gettime around calls the shim makes anyway
 * (no extra driver call). Relaxed atomics: a price may lag a concurrent
 * measurement; never read on the absorbed path.
 */
#ifndef VR_COST_H
#define VR_COST_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum vr_cost { VR_COST_SETPARAMS, VR_COST_MAP, VR_COST_UNMAP, VR_COST_ACCESS, VR_COST_COUNT };

/* Samples the median is taken over (the last ones), and the fewest that
 * make it a measurement. */
#define VR_COST_RING 64
#define VR_COST_MIN 16
/* A median within this share of the model's figure (in 1/8: 3/8 = 37.5%)
 * keeps the model's figure. */
#define VR_COST_BAND_EIGHTHS 3

static inline uint64_t vr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void vr_cost_note(enum vr_cost c, uint64_t since_ns);
/* The price: the model's, or the median measured outside the band. */
uint64_t vr_cost_get(enum vr_cost c);
/* The cost model's figure (conf/cost-model.conf). */
uint64_t vr_cost_prior(enum vr_cost c);
/* True once VR_COST_MIN samples were taken. */
bool vr_cost_measured(enum vr_cost c);
const char *vr_cost_name(enum vr_cost c);
/* The conf/cost-model.conf entry point each price is of. */
const char *vr_cost_entry(enum vr_cost c);

/* Prices the shim never measures (it makes these calls too rarely, or not
 * on the paths it times): the cost model's figures, in ns. */
#define VR_PRICE_INSTANTIATE 1000000u /* cuGraphInstantiateWithFlags (estimate) */
#define VR_PRICE_RESERVE 478u         /* cuMemAddressReserve (H200) */
#define VR_PRICE_LAUNCH 2600u         /* cuGraphLaunch (H200) */

#endif
