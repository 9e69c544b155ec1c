/* variant_ops: what reaches every variant from the program's calls (an
 * enabled flag, another node type's setter, an upload, a freed allocation,
 * a peer's access). */
#include "variant_internal.h"
#include "setters.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "assert.h"
#include "capture_guard.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "policy.h"
#include "setters.h"
#include "stats.h"

uint64_t vr_variants_id(const struct vr_variants *vs, int var)
{
    return var > 0 ? vs->v[var].id : 0;
}

void vr_variants_launched(struct vr_variants *vs, int var, uint64_t seq)
{
    if (vs && var > 0)
        vs->v[var].last = seq;
}

void vr_variants_upload(const struct vr_variants *vs, CUstream stream, bool ptsz)
{
    for (unsigned k = 1; vs && k < vs->cap; k++) {
        CUgraphExec h = vs->v[k].handle;
        if (!h)
            continue;
        CUresult r = ptsz && vr_real.cuGraphUpload_ptsz ? vr_real.cuGraphUpload_ptsz(h, stream)
                                                        : vr_real.cuGraphUpload(h, stream);
        (void)r;
    }
}

void vr_variants_forget_alloc(struct vr_variants *vs, struct vr_track *t,
                              const struct vr_var_ctx *cx, uint64_t id)
{
    if (!vs)
        return;
    for (unsigned k = 1; k < vs->cap; k++) {
        struct variant *v = &vs->v[k];
        if (!v->handle)
            continue;
        for (size_t s = 0; s < vr_slices_count(v->slices); s++) {
            if (vr_slices_current(v->slices, s)->id != id &&
                vr_slices_target(v->slices, s)->id != id)
                continue;
            struct vr_slice_bind none = {0};
            vr_slices_retarget(v->slices, s, &none);
            if (!vr_track_complete(t, v->last) || vr_slices_remap(v->slices, s) != 0 ||
                vr_slices_current(v->slices, s)->id) {
                vr_var_drop_one(vs, cx, k);
                break;
            }
        }
    }
}

bool vr_variants_holds(const struct vr_variants *vs, uint64_t id)
{
    for (unsigned k = 1; vs && k < vs->cap; k++) {
        const struct variant *v = &vs->v[k];
        for (size_t s = 0; v->handle && s < vr_slices_count(v->slices); s++)
            if (vr_slices_current(v->slices, s)->id == id)
                return true;
    }
    return false;
}

void vr_variants_reaccess(struct vr_variants *vs)
{
    for (unsigned k = 1; vs && k < vs->cap; k++)
        if (vs->v[k].handle)
            vr_slices_reaccess(vs->v[k].slices);
}

void vr_variants_set_enabled(struct vr_variants *vs, const struct vr_var_ctx *cx, size_t i,
                             CUgraphNode node, unsigned enabled)
{
    if (!vs)
        return;
    CUgraphNode h;
    struct other *o = NULL;
    if (i < vs->n) {
        if (enabled)
            vs->nflags[i] &= (uint8_t)~VR_DISABLED;
        else
            vs->nflags[i] |= VR_DISABLED;
        h = vs->cnode[i];
    } else if ((o = find_other(vs->other, vs->nother, node))) {
        o->disabled = enabled == 0;
        h = o->clone;
    } else {
        vr_variants_drop(vs, cx, true);
        return;
    }
    for (unsigned k = 1; k < vs->cap; k++)
        if (vs->v[k].handle &&
            vr_real.cuGraphNodeSetEnabled(vs->v[k].handle, h, enabled) != CUDA_SUCCESS)
            vr_var_drop_one(vs, cx, k);
}

void vr_variants_set_node(struct vr_variants *vs, const struct vr_var_ctx *cx, CUgraphNode node,
                          const struct vr_set *set)
{
    if (!vr_variants_usable(vs))
        return;
    struct other *o = find_other(vs->other, vs->nother, node);
    struct vr_set *kept = NULL;
    int rc = !o || o->type != vr_set_type(set) ? -EINVAL : vr_set_keep(&kept, set);
    if (rc != 0) {
        vr_warn("a node setter the variants cannot replay (%d): this exec is not varied again",
                rc);
        vr_variants_drop(vs, cx, true);
        return;
    }
    vr_set_free(o->last);
    o->last = kept;
    for (unsigned k = 1; k < vs->cap; k++) {
        if (!vs->v[k].handle)
            continue;
        CUresult r = vr_set_issue(vs->v[k].handle, o->clone, kept);
        if (r != CUDA_SUCCESS) {
            /* The program's exec took it: the variants can no longer be
             * trusted to hold what it holds. */
            vr_warn("a variant refused a node setter the program's exec took (%d): this exec "
                    "is not varied again",
                    (int)r);
            vr_variants_drop(vs, cx, true);
            return;
        }
    }
}
