/* graph_rec_launch: a kernel launched into a capture the recorder follows
 * (vr_grec_launch, graph_rec.h), recorded as a node of the capture's graph
 * under graph_rec.c's lock. The common case (a function this capture has
 * launched before, its layout still current, the stream's set the node
 * before, room left) makes no call and no hash lookup: the shim's work per
 * captured kernel is what capture pays for it (issue 19: <= 50 ns;
 * scripts/bench-instr's "captured launch" row counts its instructions).
 * A step's kernels take turns among a few functions, so the capture keeps
 * the layouts of the last VR_GR_LAYOUTS of them: remembering one missed at
 * every launch of graph_bench's four alternating kernels, each miss an
 * unlock, a layout lookup and a relock (docs/bench.md).
 * The lock stays on every launch: another thread may add to the same
 * capture (a stream joined through an event) or end it meanwhile.
 */
#include "graph_rec_int.h"

#include <string.h>

#include "layout.h"
#include "lock.h"
#include "lockrank.h"

/* vr_gr_lock and vr_gr_unlock, inline: the one lock of every captured
 * kernel costs no call. */
static inline void lock(void)
{
    vr_mutex_lock(&vr_gr_mu);
    vr_rank_take(VR_RANK_GREC);
}

static inline void unlock(void)
{
    vr_rank_drop(VR_RANK_GREC);
    vr_mutex_unlock(&vr_gr_mu);
}

/* The calling thread's last stream -> entry lookup (a capture launches
 * into few streams, most into one): no hash per captured kernel. Stream
 * entries are never freed and a key always names the same entry, so the
 * pointer stays right for good (no generation to check); it is only used
 * under the lock, where the entry's capture is read. */
static _Thread_local struct {
    const void *key;
    struct dep_ent *se;
} last_stream;

static inline struct dep_ent *stream_cached(CUstream key)
{
    if (key && last_stream.key == key)
        return last_stream.se;
    struct dep_ent *se = vr_gr_stream_find(key);
    if (se) {
        last_stream.key = key;
        last_stream.se = se;
    }
    return se;
}

/* How launch_fast makes a layout's padding zero (padding compares equal),
 * worked out once per layout a capture caches. PAD_WIDE: every gap is the
 * upper half of a word whose lower half is a 4-byte unit, which is then
 * stored as the whole word, zero-extended (the common pointer, pointer,
 * int, pointer kernel: no padding store at all); PAD_WORDS: every word
 * zeroed first; PAD_SLOW: odd-sized units or no layout, the general path. */
enum pad { PAD_NONE, PAD_TAIL, PAD_WIDE, PAD_WORDS, PAD_SLOW };

static enum pad pad_of(const struct vr_layout *l)
{
    if (!l || l->end4 != l->end)
        return PAD_SLOW;
    size_t bytes = ((size_t)l->bytes + 7) & ~(size_t)7;
    if (!l->gaps)
        return bytes != l->bytes ? PAD_TAIL : PAD_NONE;
    enum { MAXB = 256 };
    uint8_t seen[MAXB] = {0}; /* 1: a unit's byte; 2: zeroed by a widened store */
    if (bytes > MAXB)
        return PAD_WORDS;
    for (const struct vr_arg *u = l->args; u != l->end8; u++)
        memset(seen + u->offset, 1, 8);
    for (const struct vr_arg *u = l->end8; u != l->end4; u++)
        memset(seen + u->offset, 1, 4);
    for (const struct vr_arg *u = l->end8; u != l->end4; u++) {
        if (u->offset % 8)
            return PAD_WORDS;
        for (uint32_t b = 4; b < 8; b++)
            if (seen[u->offset + b])
                return PAD_WORDS; /* its upper half holds (part of) another unit */
        memset(seen + u->offset + 4, 2, 4);
    }
    for (size_t b = 0; b < bytes; b++)
        if (!seen[b])
            return PAD_WORDS;
    return PAD_WIDE;
}

static void hint_changed(struct capture *c, uint32_t h);

/* The common captured kernel in one piece, no call made: room left in
 * every array, a stream whose set is the one node before, the capture's
 * cached layout in 8- and 4-byte units, kernelParams given. Copies the
 * launch into node r->n; false (nothing written) when any of that does not
 * hold, and the general path takes it. Each field is written once; the
 * edge is vr_gr_edge's without its order check (see below). */
static inline __attribute__((always_inline)) bool
launch_fast(struct dep_ent *se, struct capture *c, CUfunction f, const unsigned dims[7],
            void **kp)
{
    struct vr_grec *r = c->r;
    const struct vr_layout *l = c->last_l;
    size_t bytes = c->last_bytes;
    unsigned pad = c->last_pad;
    if (__builtin_expect(pad == PAD_SLOW || r->n == r->cap || r->ne == r->ecap ||
                         se->n != 1 || !se->ncap || (!kp && l->nparams) ||
                         r->nb + bytes > r->bcap, 0))
        return false;
    uint32_t i = r->n++;
    r->nkernels++;
    struct gnode *g = &r->v[i];
    g->type = CU_GRAPH_NODE_TYPE_KERNEL;
    g->f.func = f;
    g->f.kern = NULL;
    g->f.ctx = NULL;
    memcpy(g->f.dims, dims, VR_DIMS_BYTES);
    g->layout = l;
    g->ctx = NULL;
    g->handle = NULL;
    g->aoff = g->alen = 0; /* no launch attributes (graph_rec_attrs.c records those) */
    uint8_t *dst = r->bytes + r->nb;
    if (pad == PAD_WORDS)
        for (size_t w = 0; w < bytes; w += 8)
            memcpy(dst + w, &(uint64_t){0}, 8);
    else if (pad == PAD_TAIL)
        memcpy(dst + bytes - 8, &(uint64_t){0}, 8); /* the rounding past the end */
    const struct vr_arg *u = l->args, *end8 = l->end8, *end4 = l->end4;
    for (; u != end8; u++) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)kp[u->index] + u->skew, 8);
        memcpy(dst + u->offset, &v, 8);
    }
    if (pad == PAD_WIDE) {
        for (; u != end4; u++) {
            uint32_t v;
            memcpy(&v, kp[u->index], 4);
            uint64_t w = v;
            memcpy(dst + u->offset, &w, 8);
        }
    } else {
        for (; u != end4; u++) {
            uint32_t v;
            memcpy(&v, kp[u->index], 4);
            memcpy(dst + u->offset, &v, 4);
        }
    }
    g->off = (uint32_t)r->nb;
    g->len = l->bytes;
    r->nb += bytes;
    /* Every edge held so far ends at a node before i: this one, ending at
     * i, sorts after them all, so `sorted` stays as it is. */
    r->edges[r->ne++] = (uint64_t)i << 32 | se->deps[0];
    se->deps[0] = i;
    /* The function's last shape is the hint (a capture's kernels take
     * turns, each mostly in one launch shape); a miss asks the table and
     * makes the answer the hint. The hint only ever names a shape of a
     * node written here (a kernel without CUkernel or context), so the
     * launch's own fields are compared: no load of the node back. A loose
     * record needs no check here: vr_gr_packed_same refuses it. */
    uint32_t h = c->last_sid;
    const struct vr_gshape *s = &vr_gr_shapes[h ? h - 1 : 0];
    if (__builtin_expect(h && i == r->nsid && i < r->sidcap && s->f.func == f && s->layout == l &&
                         vr_gr_dims_eq(s->f.dims, dims), 1)) {
        r->sid[r->nsid++] = h - 1;
        return true;
    }
    h = vr_gr_shape_node_hint(r, i, 0);
    if (h != c->last_sid)
        hint_changed(c, h);
    return true;
}

/* The shape hint of the capture's last function is h now: its cached
 * layout's entry keeps it for the function's next turn. */
static __attribute__((noinline)) void hint_changed(struct capture *c, uint32_t h)
{
    c->last_sid = h;
    for (unsigned k = 0; k < c->nl; k++)
        if (c->lc[k].f == c->last_f)
            c->lc[k].sid = h;
}

/* f's layout, looked up before in this capture and still current, made
 * the capture's last one; false when not there. */
static inline bool recall(struct capture *c, CUfunction f, uint64_t gen)
{
    for (unsigned k = 0; k < c->nl; k++) {
        const struct cap_layout *e = &c->lc[k];
        if (e->f == f && e->gen == gen) {
            c->last_f = f;
            c->last_l = e->l;
            c->last_gen = gen;
            c->last_bytes = e->bytes;
            c->last_pad = e->pad;
            c->last_sid = e->sid;
            return true;
        }
    }
    return false;
}

/* Remembers the last_* fields for recall. */
static void remember(struct capture *c)
{
    struct cap_layout *e = NULL;
    for (unsigned k = 0; k < c->nl && !e; k++)
        if (c->lc[k].f == c->last_f)
            e = &c->lc[k]; /* a stale generation's entry */
    if (!e && c->nl < VR_GR_LAYOUTS)
        e = &c->lc[c->nl++];
    if (!e) {
        e = &c->lc[c->lnext];
        c->lnext = (uint8_t)((c->lnext + 1) % VR_GR_LAYOUTS);
    }
    *e = (struct cap_layout){.f = c->last_f, .l = c->last_l, .gen = c->last_gen,
                             .bytes = c->last_bytes, .pad = c->last_pad, .sid = c->last_sid};
}

static uint64_t layout_lookups; /* under mu */

uint64_t vr_grec_layout_lookups(void)
{
    lock();
    uint64_t n = layout_lookups;
    unlock();
    return n;
}

/* Everything but launch_fast's case, out of line (the fast path saves no
 * registers for it). Called and returns with mu held. */
static __attribute__((noinline)) void launch_slow(CUstream key, struct dep_ent *se,
                                                  struct capture *c, CUfunction f,
                                                  const unsigned dims[7], void **kernelParams,
                                                  void **extra)
{
    struct vr_grec *r = c->r;
    const struct vr_layout *l = NULL;
    uint64_t gen = vr_layout_generation();
    if (!extra && f && ((c->last_f == f && c->last_gen == gen) || recall(c, f, gen))) {
        l = c->last_l;
    } else if (!extra && f) {
        /* The layout is looked up outside the lock (its own rank is below
         * none of ours, and it may ask the driver). */
        uint64_t id = c->id;
        layout_lookups++;
        unlock();
        if (vr_layout_get(f, NULL, &l) != 0)
            l = NULL;
        lock();
        se = stream_cached(key);
        c = se ? se->cap : NULL;
        if (!c || c->id != id)
            return; /* the capture ended meanwhile (another thread) */
        r = c->r;
        if (r->unknown)
            return;
        c->last_f = f;
        c->last_l = l;
        c->last_gen = gen;
        c->last_bytes = l ? ((l->bytes + 7u) & ~7u) : 0;
        c->last_pad = (uint8_t)pad_of(l);
        c->last_sid = 0;
        remember(c);
        if (launch_fast(se, c, f, dims, kernelParams))
            return;
    }
    /* vr_gr_add_node's work where room is left (r is not UNKNOWN here),
     * each field written once instead of a zeroed node written over;
     * layout, off and len are vr_gr_set_args's. */
    uint32_t i;
    if (__builtin_expect(r->n < r->cap, 1)) {
        i = r->n++;
        r->nkernels++;
        struct gnode *g = &r->v[i];
        g->type = CU_GRAPH_NODE_TYPE_KERNEL;
        g->f.kern = NULL;
        g->f.ctx = NULL;
        g->ctx = NULL;
        g->handle = NULL;
    } else {
        i = vr_gr_add_node(r, CU_GRAPH_NODE_TYPE_KERNEL, NULL);
    }
    if (i != UINT32_MAX) {
        struct gnode *g = &r->v[i];
        g->f.func = f;
        memcpy(g->f.dims, dims, VR_DIMS_BYTES);
        vr_gr_set_args(r, g, l, kernelParams);
        vr_gr_chain(se, r, i);
    }
}

static inline __attribute__((always_inline)) void
launch_rec(CUstream s, bool ptsz, CUresult res, CUfunction f, const unsigned dims[7],
           void **kernelParams, void **extra, bool attrs)
{
    CUstream key = vr_gr_stream_key(s, ptsz);
    lock();
    struct dep_ent *se = stream_cached(key);
    struct capture *c = se ? se->cap : NULL;
    if (!c) {
        unlock();
        return;
    }
    if (res != CUDA_SUCCESS || attrs || c->r->unknown) {
        c->r->unknown = true; /* a failed call invalidates the capture anyway */
        unlock();
        return;
    }
    /* The same function as the capture's last launch, its layout still
     * current: the common case, no call. */
    uint64_t gen = vr_layout_generation();
    if (f && !extra && ((c->last_f == f && c->last_gen == gen) || recall(c, f, gen))) {
        if (launch_fast(se, c, f, dims, kernelParams)) {
            unlock();
            return;
        }
    }
    launch_slow(key, se, c, f, dims, kernelParams, extra);
    unlock();
}

void vr_grec_launch(CUstream s, bool ptsz, CUresult res, CUfunction f, const unsigned dims[7],
                    void **kernelParams, void **extra, bool attrs)
{
    launch_rec(s, ptsz, res, f, dims, kernelParams, extra, attrs);
}

/* Every argument in a register: the common launch pays no stack pushes. */
void vr_grec_launch_kp(CUstream s, bool ptsz, CUresult res, CUfunction f, const unsigned dims[7],
                       void **kernelParams)
{
    launch_rec(s, ptsz, res, f, dims, kernelParams, NULL, false);
}
