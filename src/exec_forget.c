/* exec_forget: a freed allocation leaves every exec's slots (and its
 * variants'): the slots bound to it are unbound, now when the exec is idle,
 * else at a later launch; a slot is never left to translate a new
 * allocation at the freed one's address into the old memory. The allocator
 * tells of an id when its memory goes (alloc.h): memory its cache keeps
 * stays mapped at its address with its handle and may come back under the
 * same id, so its slots and variants stay until then.
 */
#include "exec_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cost.h"
#include "driver.h"
#include "err.h"
#include "log.h"
#include "stats.h"
#include "tomb.h"
#include "xlat.h"

/* A freed allocation, as vr_exec_forget_alloc tells each exec of it. */
struct freed {
    uint64_t id;
    bool synced;
    CUcontext cur; /* current when the caller synchronized */
};

static void forget_in(struct vr_exec *e, void *arg)
{
    VR_ASSERT_HELD(VR_RANK_EXEC);
    const struct freed *f = arg;
    uint64_t id = f->id;
    bool holds = vr_variants_holds(e->vars, id);
    for (size_t s = 0; e->slices && s < vr_slices_count(e->slices) && !holds; s++)
        holds = vr_slices_current(e->slices, s)->id == id ||
                vr_slices_target(e->slices, s)->id == id;
    /* The free synchronized this exec's context. Only an exec that reads
     * the buffer is told: another thread may have launched another exec
     * since, which the synchronization did not cover. */
    if (holds && f->synced && f->cur && f->cur == e->ctx)
        vr_track_synced(&e->t);
    /* Several slots may hold one buffer (anchors are positions). */
    for (size_t s = 0; e->slices && s < vr_slices_count(e->slices); s++) {
        if (vr_slices_current(e->slices, s)->id != id &&
            vr_slices_target(e->slices, s)->id != id)
            continue;
        if (vr_slices_target(e->slices, s)->id == id) {
            struct vr_slice_bind none = {0};
            vr_ex_retarget(e, s, &none);
            e->retargeted = true;
        }
        /* Unmapped now when nothing can read it, else at a later launch. */
        if (vr_slices_current(e->slices, s)->id == id && exec_idle(e) &&
            vr_ex_remap(e, s) != 0)
            vr_log_fallback("free", "a slice of a freed buffer could not be unmapped yet");
        if (vr_slices_current(e->slices, s)->id != id)
            vr_ex_cancel(e, s);
    }
    if (e->slices) {
        struct vr_var_ctx cx = var_ctx(e);
        vr_variants_forget_alloc(e->vars, &e->t, &cx, id);
    }
    /* No slot will bind the freed buffer again. */
    for (size_t s = 0; VR_ASSERT_ON && e->slices && s < vr_slices_count(e->slices); s++)
        VR_ASSERT(vr_slices_target(e->slices, s)->id != id);
}

void vr_exec_forget_alloc(uint64_t id, bool synced)
{
    struct freed f = {id, synced, NULL};
    if (synced)
        vr_real.cuCtxGetCurrent(&f.cur);
    vr_ex_each_exec(forget_in, &f);
    /* Slots of torn-down execs kept while the buffer lived go with it. */
    vr_tomb_buffer_freed(id);
}
