/* graph_rec_attrs: kernel launches with attributes (cuLaunchKernelEx with
 * numAttrs > 0) into a capture, recorded as a kernel node with the
 * attributes' bytes beside its arguments (graph_rec.h states the contract).
 * Apart from vr_grec_launch so that the plain launch keeps its fast path:
 * launches with attributes are rarer, and pay one layout lookup each.
 *
 * An attribute's bytes: its id (8 bytes), then its value (64 bytes), in
 * the order given. For the ids whose value is one int (cuda.h: priority,
 * cooperative, ...) only those 4 bytes are kept, the rest zero, so that the
 * union's unused bytes (often stack garbage) do not make two equal
 * launches differ. Any other id keeps all 64 bytes: at worst an equal
 * launch compares unequal and its update is forwarded.
 */
#include "graph_rec_int.h"

#include <string.h>

#include "lockrank.h"

enum { ATTR_BYTES = 8 + sizeof(CUlaunchAttributeValue) };

static bool int_valued(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
        return true;
    default:
        return false;
    }
}

void vr_gr_set_attrs(struct vr_grec *r, struct gnode *g, const CUlaunchAttribute *a, unsigned n)
{
    size_t bytes = (size_t)n * ATTR_BYTES;
    r->loose = true; /* the arena holds more than arguments */
    if (bytes > UINT32_MAX || !vr_gr_reserve(r, bytes)) {
        r->unknown = true;
        return;
    }
    uint8_t *dst = r->bytes + r->nb;
    memset(dst, 0, bytes);
    for (unsigned i = 0; i < n; i++, dst += ATTR_BYTES) {
        uint64_t id = (uint64_t)a[i].id;
        memcpy(dst, &id, 8);
        memcpy(dst + 8, &a[i].value, int_valued(a[i].id) ? sizeof(int) : sizeof a[i].value);
    }
    g->aoff = (uint32_t)r->nb;
    g->alen = (uint32_t)bytes;
    r->nb += bytes;
}

void vr_grec_launch_attrs(CUstream s, bool ptsz, CUresult res, CUfunction f,
                          const unsigned dims[7], void **kernelParams, void **extra,
                          const CUlaunchAttribute *attrs, unsigned n)
{
    /* The layout is looked up outside the lock (it may ask the driver). */
    const struct vr_layout *l = NULL;
    if (res == CUDA_SUCCESS && !extra && f && vr_layout_get(f, NULL, &l) != 0)
        l = NULL;
    vr_gr_lock();
    struct dep_ent *se;
    struct vr_grec *r = vr_gr_capture_rec(s, ptsz, &se);
    if (r && (res != CUDA_SUCCESS || !attrs)) {
        r->unknown = true; /* a failed call invalidates the capture anyway */
    } else if (r) {
        uint32_t i = vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
        if (i != UINT32_MAX) {
            struct gnode *g = &r->v[i];
            g->f.func = f;
            memcpy(g->f.dims, dims, VR_DIMS_BYTES);
            vr_gr_set_args(r, g, l, kernelParams);
            vr_gr_set_attrs(r, g, attrs, n);
            vr_gr_chain(se, r, i);
        }
    }
    vr_gr_unlock();
}
