/* cost: the prices the policy weighs with, per driver call the shim times.
 *
 * Two modes (VAREMAP_COST_PRICES, read once at start):
 *  - model (the default): every price is the cost model's figure
 *    (conf/cost-model.conf: the H200's measured ones), always. The policy's
 *    decisions are then a function of the program's pattern and those
 *    figures alone: the same program makes the same decisions in every run,
 *    on a loaded machine, under a sanitizer, on simcuda. What this process
 *    measures is still kept (vr_cost_median) and logged beside the prices
 *    weighed, so a driver far from the model shows; the cure for one is a
 *    cost model of that host (scripts/gpu-check prints one), not a verdict
 *    that depends on the run.
 *  - measured: a price follows this process's measurements, coarsely: it is
 *    the model's figure times a power of two (a level), and moves to the
 *    level nearest the median of the last VR_COST_RING samples only once
 *    that median lies beyond VR_COST_STEP_TENTHS/10 of the current price
 *    (either way). Noise (simcuda's overhead around a modelled cost, 2x on
 *    a quiet machine) moves no price; a driver several times dearer or
 *    cheaper than the model is followed, and one level held until the
 *    driver changes by as much again. Decisions near a boundary may then
 *    differ between runs: the mode is for finding out, not for production.
 *
 * Measured with clock_gettime around calls the shim makes anyway (no extra
 * driver call). Relaxed atomics: a price may lag a concurrent measurement;
 * never read on the absorbed path.
 */
#ifndef VR_COST_H
#define VR_COST_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* The first four are timed (vr_cost_note); the others only priced. */
enum vr_cost {
    VR_COST_SETPARAMS,
    VR_COST_MAP,
    VR_COST_UNMAP,
    VR_COST_ACCESS,
    VR_COST_RESERVE,
    VR_COST_INSTANTIATE,
    VR_COST_LAUNCH,
    VR_COST_COUNT
};

/* Samples the median is taken over (the last ones), and the fewest that
 * make it a measurement. */
#define VR_COST_RING 64
#define VR_COST_MIN 16
/* Mode measured: a median beyond 2.5x the current price (or below 1/2.5 of
 * it) moves the price to another level; levels are the model's figure times
 * 2^k, |k| <= VR_COST_LEVELS. */
#define VR_COST_STEP_TENTHS 25
#define VR_COST_LEVELS 6

static inline uint64_t vr_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The mode: false (model, the default) or true (measured). */
void vr_cost_configure(bool measured);
bool vr_cost_follows(void);
void vr_cost_note(enum vr_cost c, uint64_t since_ns);
/* The price the policy weighs with: the model's figure, or in mode measured
 * its level (above). */
uint64_t vr_cost_get(enum vr_cost c);
/* The median of the last samples, 0 before VR_COST_MIN of them. */
uint64_t vr_cost_median(enum vr_cost c);
/* The cost model's figure: conf/cost-model.conf's, built in, or the file
 * VAREMAP_COST_MODEL names (vr_cost_load). */
uint64_t vr_cost_prior(enum vr_cost c);
/* Reads a cost model in conf/cost-model.conf's format ("name ns  # ..."
 * lines; other entry points ignored) and takes its figures for the entry
 * points above (1 ns to VR_COST_MAX_NS; the others keep theirs). Before any
 * price is read (the shim's start). No heap, no stdio. Returns the number
 * of figures taken, or -errno when the file cannot be read (every figure
 * then stays). */
#define VR_COST_MAX_NS 10000000u
int vr_cost_load(const char *path);
void vr_cost_set_prior(enum vr_cost c, uint64_t ns);
/* True once VR_COST_MIN samples were taken. */
bool vr_cost_measured(enum vr_cost c);
const char *vr_cost_name(enum vr_cost c);
/* The conf/cost-model.conf entry point each price is of. */
const char *vr_cost_entry(enum vr_cost c);

/* Prices the shim never measures (it makes these calls too rarely, or not
 * on the paths it times): the cost model's figures, in ns. */
#define VR_PRICE_INSTANTIATE vr_cost_prior(VR_COST_INSTANTIATE)
#define VR_PRICE_RESERVE vr_cost_prior(VR_COST_RESERVE)
#define VR_PRICE_LAUNCH vr_cost_prior(VR_COST_LAUNCH)

#endif
