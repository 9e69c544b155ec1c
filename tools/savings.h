/* savings: what the shim would have saved a `varemap --sim` run, at a cost
 * model's prices (conf/cost-model.conf's format: "name ns  # source").
 *
 * In all: simcuda counts every driver call of each run (SIMCUDA_STATS);
 * each entry point's calls without the shim less those with it, times its
 * price, summed, is the host time saved (negative: spent), the shim's own
 * calls (VMM, variants' instantiations) included; entry points the model
 * does not price count as calls, not as time. Per graph exec: the decision
 * log's counters (node updates absorbed and rebinds, per launch) at the
 * prices of a SetParams and of one remap (unmap, map, set access).
 */
#ifndef VR_TOOL_SAVINGS_H
#define VR_TOOL_SAVINGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dlog.h"

struct prices {
    char **names;
    uint64_t *ns;
    size_t n;
    char source[512];  /* the file, or "the built-in model (...)" */
};

/* Loads prices from path, or the built-in model (conf/cost-model.conf, an
 * H200's) when path is NULL. Returns 0, or -1 with why in err. */
int prices_load(struct prices *p, const char *path, char *err, size_t errcap);
void prices_free(struct prices *p);

/* One run's simcuda call counts (its SIMCUDA_STATS file). */
struct calls {
    char **names;
    uint64_t *n;
    size_t count;
};
int calls_read(struct calls *c, const char *stats_path);
void calls_free(struct calls *c);

/* Prints the savings lines ("varemap: ..."): per exec of the run with the
 * shim (m), then in all (the two runs' counts). */
void savings_print(FILE *f, const struct prices *p, const struct calls *without,
                   const struct calls *with, const struct dl_model *m);

#endif
