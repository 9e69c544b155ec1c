/* remap.c over a fake driver: an active exec of three kernel nodes built
 * by hand (two buffers A and B, each in its slot): the anchors indexed by
 * home slot, translation of anchors only, the transition that points the
 * nodes at the slices, a moved buffer remapped at an idle launch with no
 * SetParams, a node that would read a remapped slot wrongly fixed first, a
 * refused fix that cancels the remap, a busy exec that remaps nothing, a
 * freed buffer forgotten (unmapped now when idle, never left bound), and
 * the nodes pointed back at the program's addresses (settle). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_int.h"
#include "driver.h"
#include "exec_internal.h"
#include "fake_driver.h"
#include "tomb.h"
#include "waitq.h"

/* ---- the fake driver ---- */

static int setparams, fail_setparams;
static bool event_ready = true;

static uintptr_t next_event = 0x9000;
static CUresult CUDAAPI f_ev_create(CUevent *e, unsigned f) { (void)f; *e = (CUevent)next_event++; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_ev_record(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
static CUresult CUDAAPI f_ev_query(CUevent e) { (void)e; return event_ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; }
static CUresult CUDAAPI f_ev_destroy(CUevent e) { (void)e; return CUDA_SUCCESS; }

/* What the driver holds per node: the first 8 bytes of each argument. */
#define NODES 3
static uint64_t held[NODES][2];

static CUresult CUDAAPI f_setparams(CUgraphExec x, CUgraphNode n, const CUDA_KERNEL_NODE_PARAMS_v2 *p)
{
    (void)x;
    if (fail_setparams > 0) {
        fail_setparams--;
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t i = (size_t)((uintptr_t)n - 0x100);
    cr_assert_lt(i, NODES);
    setparams++;
    for (int k = 0; k < (i == 2 ? 2 : 1); k++)
        memcpy(&held[i][k], p->kernelParams[k], 8);
    return CUDA_SUCCESS;
}

/* ---- the exec ---- */

/* Buffers: A and C have A's size (C is where the program moves A's data),
 * B another. */
static const struct vr_slice_bind A = {1, 0x7000000, 0x1800, 0x2000, 11, 0};
static const struct vr_slice_bind B = {2, 0x9000000, 0x1000, 0x1000, 22, 0};
static const struct vr_slice_bind C = {3, 0xa000000, 0x1800, 0x2000, 33, 0};

static struct vr_exec *e;
static struct vr_layout *one_ptr, *two_ptrs;

/* Node 0 reads A+0x10, node 1 B+0x20, node 2 (A, B+8): its second word is
 * no anchor (the profile did not find it always in one buffer), so it is
 * passed as the program wrote it whatever it looks like. */
static const vr_anchor anchors[] = {0, 1, 0, -1};

static uint64_t word(const uint8_t *p, size_t k)
{
    uint64_t v;
    memcpy(&v, p + 8 * k, 8);
    return v;
}

static void set_word(uint8_t *p, size_t k, uint64_t v)
{
    memcpy(p + 8 * k, &v, 8);
}

static uint64_t installed(size_t i, size_t k)
{
    return word(vr_installed(&e->ns, &e->ns.v[i]), k);
}

static void registered(const struct vr_slice_bind *b)
{
    /* A fresh process per test: the registry numbers them 1, 2, 3. */
    /* Without padding (no budget is configured here): only base and id matter. */
    struct vr_alloc_info rec = { .base = b->base, .size = b->padded, .padded = b->padded,
                                 .reserved = b->padded + 0x1000, .device = 0, .vmm = true,
                                 .eligible = true, .handle = b->handle };
    cr_assert_eq(vr_reg_insert(&rec), 0);
    cr_assert_eq(rec.id, b->id);
}

static void setup(void)
{
    fk.reserve_align = 0x100000;
    fake_vmm_install();
    vr_real.cuEventCreate = f_ev_create;
    vr_real.cuEventRecord = f_ev_record;
    vr_real.cuEventQuery = f_ev_query;
    vr_real.cuEventDestroy_v2 = f_ev_destroy;
    vr_real.cuGraphExecKernelNodeSetParams_v2 = f_setparams;
    registered(&A);
    registered(&B);
    registered(&C);

    static const uint32_t off1[] = {0}, size1[] = {8}, off2[] = {0, 8}, size2[] = {8, 8};
    cr_assert_eq(vr_layout_build(off1, size1, 1, &one_ptr), 0);
    cr_assert_eq(vr_layout_build(off2, size2, 2, &two_ptrs), 0);

    e = vr_ex_new_record(); /* its mutex held; the witness told below */
    cr_assert(e);
    vr_rank_take(VR_RANK_EXEC);
    e->handle = (CUgraphExec)0x77;
    e->ctx = (CUcontext)0x1;
    e->ns.n = NODES;
    e->ns.v = calloc(NODES, sizeof *e->ns.v);
    e->ns.half = 32;
    e->ns.shadows = calloc(2, e->ns.half);
    e->ns.nwords = 4;
    e->ns.max_bytes = 16;
    e->ns.max_params = 2;
    const uint64_t intended[NODES][2] = {{A.base + 0x10, 0}, {B.base + 0x20, 0}, {A.base, B.base + 8}};
    uint32_t at = 0, w0 = 0;
    for (size_t i = 0; i < NODES; i++) {
        struct vr_node *n = &e->ns.v[i];
        n->handle = (CUgraphNode)(0x100 + i);
        n->layout = i == 2 ? two_ptrs : one_ptr;
        n->f.func = (CUfunction)0x55;
        n->f.dims[0] = n->f.dims[3] = 1;
        n->intended = e->ns.shadows + at;
        n->word0 = w0;
        for (uint32_t k = 0; k < n->layout->nwords; k++) {
            set_word(n->intended, k, intended[i][k]);
            set_word(vr_installed(&e->ns, n), k, intended[i][k]);
            held[i][k] = intended[i][k];
        }
        at += n->layout->bytes;
        w0 += n->layout->nwords;
    }
    e->xlat = calloc(1, e->ns.max_bytes);
    e->kp = calloc(e->ns.max_params, sizeof *e->kp);
    e->anchor_slot = malloc(sizeof anchors);
    memcpy(e->anchor_slot, anchors, sizeof anchors);
    vr_track_init(&e->t, e->ctx);
    const size_t sizes[] = {A.padded, B.padded};
    cr_assert_eq(vr_slices_create(&e->slices, sizes, 2), 0);
    cr_assert_eq(vr_slices_bind(e->slices, 0, &A), 0);
    cr_assert_eq(vr_slices_bind(e->slices, 1, &B), 0);
    e->state = ST_ACTIVE;
    vr_ex_insert_exec(e, e->handle);
    fk.maps = fk.unmaps = setparams = 0;
}

TestSuite(remap, .init = setup);

static uint64_t va(size_t s) { return vr_slices_va(e->slices, s); }

/* Indexed and pointed at the slices, as an exec is when it turns active. */
static void activate(void)
{
    cr_assert_eq(vr_ex_index_anchors(e, 2), 0);
    vr_ex_transition(e);
}

/* The program moves A's data to C: what its next SetParams would record. */
static void program_moves_a_to_c(void)
{
    set_word(e->ns.v[0].intended, 0, C.base + 0x10);
    set_word(e->ns.v[2].intended, 0, C.base);
}

Test(remap, anchors_are_indexed_by_their_home_slot)
{
    cr_assert_eq(vr_ex_index_anchors(e, 2), 0);
    cr_assert_eq(e->nanchored, 3, "every node holds an anchor");
    /* Slot 0: nodes 0 and 2; slot 1: node 1 only (node 2's B word is no anchor). */
    cr_assert_eq(e->home_first[0], 0);
    cr_assert_eq(e->home_first[1], 2);
    cr_assert_eq(e->home_first[2], 3);
    cr_assert_eq(e->home_node[0], 0);
    cr_assert_eq(e->home_node[1], 2);
    cr_assert_eq(e->home_node[2], 1);
    vr_ex_unlock(e);
}

Test(remap, translation_touches_anchors_only)
{
    uint8_t out[16];
    vr_ex_translate_node(e, &e->ns.v[2], e->ns.v[2].intended, out, false);
    cr_assert_eq(word(out, 0), va(0), "A's start: slot 0's");
    cr_assert_eq(word(out, 1), B.base + 8, "not an anchor: as the program wrote it");
    vr_ex_translate_node(e, &e->ns.v[1], e->ns.v[1].intended, out, false);
    cr_assert_eq(word(out, 0), va(1) + 0x20);
    vr_ex_unlock(e);
}

Test(remap, the_transition_points_every_anchored_node_at_its_slot)
{
    activate();
    cr_assert_eq(setparams, 3);
    cr_assert_eq(held[0][0], va(0) + 0x10);
    cr_assert_eq(held[1][0], va(1) + 0x20);
    cr_assert_eq(held[2][0], va(0));
    cr_assert_eq(held[2][1], B.base + 8);
    cr_assert_eq(installed(0, 0), held[0][0], "the shadow follows what the driver took");
    cr_assert(vr_ex_check(e));
    /* The checker can fail: an installed word that fk.maps another byte. */
    set_word(vr_installed(&e->ns, &e->ns.v[0]), 0, va(0) + 0x18);
    cr_assert_not(vr_ex_check(e));
    vr_ex_unlock(e);
}

Test(remap, a_moved_buffer_is_remapped_at_an_idle_launch_without_setparams)
{
    activate();
    setparams = 0;
    program_moves_a_to_c();
    cr_assert_eq(vr_ex_retarget(e, 0, &C), 0);
    cr_assert(vr_slices_slot_pending(e->slices, 0));
    cr_assert_eq(vr_ex_apply_pending(e), 0);
    cr_assert_eq(setparams, 0, "the nodes already read slot 0");
    cr_assert_eq(fk.maps, 1);
    cr_assert_eq(fk.last_map_handle, C.handle);
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, C.id);
    cr_assert_not(vr_slices_pending(e->slices));
    cr_assert_eq(e->c.rebinds, 1);
    cr_assert(vr_ex_check(e));
    vr_ex_unlock(e);
}

Test(remap, a_node_that_would_read_a_remapped_slot_wrongly_is_fixed_first)
{
    activate();
    setparams = 0;
    /* Only node 2 moves to C; node 0 still reads A, through slot 0. */
    set_word(e->ns.v[2].intended, 0, C.base);
    cr_assert_eq(vr_ex_retarget(e, 0, &C), 0);
    cr_assert_eq(vr_ex_apply_pending(e), 0);
    cr_assert_eq(setparams, 1, "node 0 alone re-issued");
    cr_assert_eq(held[0][0], A.base + 0x10, "off the slot: A's own address");
    cr_assert_eq(held[2][0], va(0), "node 2 reads C through the slot");
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, C.id);
    cr_assert(vr_ex_check(e));
    vr_ex_unlock(e);
}

Test(remap, a_refused_fix_cancels_the_remap)
{
    activate();
    setparams = 0;
    set_word(e->ns.v[2].intended, 0, C.base);
    cr_assert_eq(vr_ex_retarget(e, 0, &C), 0);
    fail_setparams = 1; /* node 0's fix */
    cr_assert_eq(vr_ex_apply_pending(e), 0, "the graph still means what the program asked");
    cr_assert_eq(fk.maps, 0, "nothing remapped under node 0");
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, A.id);
    cr_assert_not(vr_slices_slot_pending(e->slices, 0), "A is still allocated: given up");
    cr_assert_eq(held[0][0], va(0) + 0x10, "node 0 still reads A through the slot");
    cr_assert_eq(held[2][0], C.base, "node 2 reads C at C's own address");
    cr_assert_eq(setparams, 1);
    cr_assert(vr_ex_check(e));
    vr_ex_unlock(e);
}

Test(remap, a_busy_exec_remaps_nothing)
{
    activate();
    vr_track_launched(&e->t, 0, (CUstream)0x500, false, VR_TRACK_NORMAL);
    e->v0_last = e->t.seq;
    event_ready = false;
    setparams = 0;
    program_moves_a_to_c();
    cr_assert_eq(vr_ex_retarget(e, 0, &C), 0);
    cr_assert_eq(vr_ex_apply_pending(e), 0);
    cr_assert_eq(fk.maps, 0, "a kernel may still read slot 0");
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, A.id);
    /* Nodes 0 and 2 now mean C: re-issued at C's own addresses. */
    cr_assert_eq(setparams, 2);
    cr_assert_eq(held[0][0], C.base + 0x10);
    cr_assert_eq(held[2][0], C.base);
    cr_assert(vr_ex_check(e));
    vr_ex_unlock(e);
}

Test(remap, a_freed_buffer_leaves_an_idle_exec_at_once)
{
    activate();
    vr_ex_unlock(e);
    vr_exec_forget_alloc(A.id, false);
    cr_assert_eq(fk.unmaps, 1, "unmapped now: nothing can read it");
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, 0);
    cr_assert_eq(vr_slices_target(e->slices, 0)->id, 0);
    cr_assert_eq(vr_slices_current(e->slices, 1)->id, B.id, "B stays");
}

Test(remap, a_freed_buffer_never_stays_bound_in_a_busy_exec)
{
    activate();
    vr_track_launched(&e->t, 0, (CUstream)0x500, false, VR_TRACK_NORMAL);
    e->v0_last = e->t.seq;
    event_ready = false;
    vr_ex_unlock(e);
    vr_exec_forget_alloc(A.id, false);
    cr_assert_eq(fk.unmaps, 0, "a kernel may still read it");
    cr_assert_eq(vr_slices_target(e->slices, 0)->id, 0, "the unbinding is pending");
    vr_ex_lock(e);
    vr_ex_cancel_all(e);
    cr_assert(vr_slices_slot_pending(e->slices, 0), "cancelling rebinds keeps an unbinding");
    event_ready = true;
    vr_track_launched(&e->t, 0, (CUstream)0x500, false, VR_TRACK_NORMAL);
    e->v0_last = e->t.seq;
    cr_assert_eq(vr_ex_apply_pending(e), 0);
    cr_assert_eq(fk.unmaps, 1, "unmapped once idle");
    cr_assert_eq(vr_slices_current(e->slices, 0)->id, 0);
    vr_ex_unlock(e);
}

Test(remap, settle_points_the_nodes_back_and_drops_the_slices)
{
    activate();
    setparams = 0;
    vr_ex_settle(e);
    cr_assert_eq(setparams, 3, "each node that read a slice");
    cr_assert_eq(held[0][0], A.base + 0x10);
    cr_assert_eq(held[1][0], B.base + 0x20);
    cr_assert_eq(held[2][0], A.base);
    cr_assert_null(e->slices);
    cr_assert_eq(e->state, ST_DISABLED);
    /* Idle, but A and B are still allocated: a kernel may have stored a
     * slice address (issue 30, item 4). Each slot goes with its buffer,
     * the reservation with the last. */
    cr_assert_eq(fk.unmaps, 0, "slots of live buffers unmapped");
    vr_ex_unlock(e);
    struct vr_alloc_info rec;
    cr_assert_eq(vr_reg_detach(A.base, &rec), 0);
    vr_exec_forget_alloc(A.id, true);
    cr_assert_eq(fk.unmaps, 1, "A's slot goes with A");
    cr_assert_eq(fk.va_frees, 0);
    cr_assert_eq(vr_reg_detach(B.base, &rec), 0);
    vr_exec_forget_alloc(B.id, true);
    cr_assert_eq(fk.unmaps, 2, "B's slot goes with B");
    cr_assert_eq(fk.va_frees, 1, "the reservation with its last slot");
}

/* Torn-down reservations whose buffers live on linger (issue 30, item 4),
 * at most 256: past that the oldest go, their slots unmapped; the rest go
 * with their buffer. */
Test(remap, lingering_reservations_are_capped)
{
    vr_ex_unlock(e);
    /* a buffer of no exec's */
    static const struct vr_slice_bind D = {4, 0xb000000, 0x1000, 0x1000, 44, 0};
    registered(&D);
    for (int i = 0; i < 300; i++) {
        const size_t size = D.padded;
        struct vr_slices *s;
        cr_assert_eq(vr_slices_create(&s, &size, 1), 0);
        cr_assert_eq(vr_slices_bind(s, 0, &D), 0);
        vr_tomb_retire(s, NULL);
    }
    cr_assert_eq(vr_waitq_count(VR_WAIT_MASK(VR_WAIT_LINGER)), 256);
    cr_assert_eq(fk.unmaps, 300 - 256, "the oldest went");
    cr_assert_eq(fk.va_frees, 300 - 256);
    struct vr_alloc_info rec;
    cr_assert_eq(vr_reg_detach(D.base, &rec), 0);
    vr_exec_forget_alloc(D.id, true);
    cr_assert_eq(vr_waitq_count(VR_WAIT_MASK(VR_WAIT_LINGER)), 0);
    cr_assert_eq(fk.unmaps, 300, "the rest with their buffer");
    cr_assert_eq(fk.va_frees, 300);
}

/* ---- pairs stay pairs (issue 30, item 2) ---------------------------------- */

/* A property over random nodes: NB buffers whose sizes are multiples of the
 * granularity (so size == padded, and a slot's end is the next slot's
 * start), the first NS of them in adjacent slots; each node has PW words,
 * each a scalar or a pointer into a buffer (its start, its end, or a random
 * offset), and each position an anchor of a random slot or none. Whatever
 * the anchors, translation must keep (1) every word's target: a changed
 * word is a slice address mapping the very byte it named, and (2) every
 * pair: two words into one buffer (its end included) keep their
 * difference. */
#define NB 4
#define NS 3
#define PN 8
#define PW 4

static struct vr_slice_bind pb[NB];
static struct vr_layout *four;

static uint64_t rnd_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

static void pairs_setup(void)
{
    fk.reserve_align = 0x1000;
    fake_vmm_install();
    vr_real.cuEventCreate = f_ev_create;
    vr_real.cuEventRecord = f_ev_record;
    vr_real.cuEventQuery = f_ev_query;
    vr_real.cuEventDestroy_v2 = f_ev_destroy;
    for (int i = 0; i < NB; i++) {
        size_t size = fk.gran * (1 + (size_t)(rnd() % 4));
        /* 2 granules apart at least: a guard gap after each, as alloc.h's */
        pb[i] = (struct vr_slice_bind){(uint64_t)i + 1, 0x40000000u + (uint64_t)i * 0x100000u,
                                       size, size, (CUmemGenericAllocationHandle)(100 + i), 0};
        struct vr_alloc_info rec = {.base = pb[i].base, .size = size, .padded = size,
                                    .reserved = size + fk.gran, .device = 0, .vmm = true,
                                    .eligible = true, .handle = pb[i].handle};
        cr_assert_eq(vr_reg_insert(&rec), 0);
        cr_assert_eq(rec.id, pb[i].id);
    }
    static const uint32_t off[PW] = {0, 8, 16, 24}, size[PW] = {8, 8, 8, 8};
    cr_assert_eq(vr_layout_build(off, size, PW, &four), 0);
    e = vr_ex_new_record();
    cr_assert(e);
    vr_rank_take(VR_RANK_EXEC);
    e->handle = (CUgraphExec)0x78;
    e->ctx = (CUcontext)0x1;
    e->ns.n = PN;
    e->ns.v = calloc(PN, sizeof *e->ns.v);
    e->ns.half = PN * PW * 8;
    e->ns.shadows = calloc(2, e->ns.half);
    e->ns.nwords = PN * PW;
    e->ns.max_bytes = PW * 8;
    e->ns.max_params = PW;
    for (size_t i = 0; i < PN; i++) {
        struct vr_node *n = &e->ns.v[i];
        n->handle = (CUgraphNode)(0x200 + i);
        n->layout = four;
        n->f.func = (CUfunction)0x55;
        n->f.dims[0] = n->f.dims[3] = 1;
        n->intended = e->ns.shadows + i * PW * 8;
        n->word0 = (uint32_t)(i * PW);
    }
    e->xlat = calloc(1, e->ns.max_bytes);
    e->kp = calloc(e->ns.max_params, sizeof *e->kp);
    e->anchor_slot = malloc(PN * PW * sizeof *e->anchor_slot);
    vr_track_init(&e->t, e->ctx);
    size_t sizes[NS];
    for (int s = 0; s < NS; s++)
        sizes[s] = pb[s].padded;
    cr_assert_eq(vr_slices_create(&e->slices, sizes, NS), 0);
    for (int s = 0; s < NS; s++)
        cr_assert_eq(vr_slices_bind(e->slices, (size_t)s, &pb[s]), 0);
    cr_assert_eq(vr_slices_va(e->slices, 1), vr_slices_va(e->slices, 0) + pb[0].padded,
                 "slots side by side: a full slot's end is the next one's start");
    e->state = ST_ACTIVE;
    vr_ex_insert_exec(e, e->handle);
}

TestSuite(pairs, .init = pairs_setup);

/* The buffer word w points into (end included), or -1. */
static int buffer_of(uint64_t w)
{
    for (int i = 0; i < NB; i++)
        if (w >= pb[i].base && w <= pb[i].base + pb[i].size)
            return i;
    return -1;
}

/* Slice address t maps byte w: through some slot whose binding holds w at
 * t's offset (a full slot's end is also the next one's start). */
static bool maps_byte(uint64_t w, uint64_t t)
{
    for (size_t s = 0; s < NS; s++) {
        uint64_t va = vr_slices_va(e->slices, s);
        const struct vr_slice_bind *c = vr_slices_current(e->slices, s);
        if (t >= va && t - va <= c->size && c->id && w == c->base + (t - va))
            return true;
    }
    return false;
}

/* A scalar, or a pointer into one of the first nb buffers. */
static uint64_t random_word_of(int nb)
{
    uint64_t r = rnd();
    int b = (int)(r % (uint64_t)(nb + 1));
    if (b == nb)
        return (r >> 8) % 4096; /* a scalar */
    switch ((r >> 4) % 3) {
    case 0: return pb[b].base;
    case 1: return pb[b].base + pb[b].size; /* one past the end */
    default: return pb[b].base + ((r >> 12) % (pb[b].size / 4)) * 4;
    }
}

static uint64_t random_word(void)
{
    return random_word_of(NB);
}

Test(pairs, translation_keeps_every_pair_and_every_target_byte)
{
    size_t translated = 0, split_before = 0;
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < PN * PW; i++) {
            uint64_t r = rnd() % 3;
            e->anchor_slot[i] = (vr_anchor)(r == 0 ? -1 : (int)(rnd() % NS));
        }
        for (size_t i = 0; i < PN; i++) {
            struct vr_node *n = &e->ns.v[i];
            for (uint32_t k = 0; k < PW; k++)
                set_word(n->intended, k, random_word());
            uint8_t out[PW * 8];
            vr_ex_translate_node(e, n, n->intended, out, false);
            bool any_anchor_in = false, any_loose_in = false;
            for (uint32_t k = 0; k < PW; k++) {
                uint64_t w = word(n->intended, k), t = word(out, k);
                if (t != w) {
                    translated++;
                    cr_assert(maps_byte(w, t), "round %d node %zu word %u: %#lx -> %#lx maps "
                              "another byte", round, i, k, (unsigned long)w, (unsigned long)t);
                }
                any_anchor_in |= e->anchor_slot[n->word0 + k] >= 0;
                any_loose_in |= e->anchor_slot[n->word0 + k] < 0;
                for (uint32_t j = 0; j < k; j++) {
                    uint64_t v = word(n->intended, j), u = word(out, j);
                    int b = buffer_of(w);
                    if (b < 0 || buffer_of(v) != b)
                        continue;
                    cr_assert_eq(t - u, w - v, "round %d node %zu: words %u and %u into "
                                 "buffer %d: %#lx, %#lx became %#lx, %#lx", round, i, j, k, b,
                                 (unsigned long)v, (unsigned long)w, (unsigned long)u,
                                 (unsigned long)t);
                }
            }
            split_before += any_anchor_in && any_loose_in;
        }
    }
    /* The property is not vacuous: many words moved into slices, and many
     * nodes mixed anchors with words that are not. */
    cr_assert_gt(translated, 1000, "%zu words translated", translated);
    cr_assert_gt(split_before, 1000);
    vr_ex_unlock(e);
}

/* The two cases by hand: an end pointer that is no anchor beside its
 * buffer's anchored start, and the end of a slot-filling buffer beside the
 * next slot's buffer. */
Test(pairs, a_pair_with_one_anchor_is_passed_as_written)
{
    struct vr_node *n = &e->ns.v[0];
    for (size_t i = 0; i < PW; i++)
        e->anchor_slot[i] = -1;
    e->anchor_slot[0] = 0; /* begin anchored; end (word 1) not */
    e->anchor_slot[2] = 1; /* buffer 1's start, anchored */
    set_word(n->intended, 0, pb[0].base + 16);
    set_word(n->intended, 1, pb[0].base + pb[0].size);
    set_word(n->intended, 2, pb[1].base);
    set_word(n->intended, 3, 7);
    uint8_t out[PW * 8];
    vr_ex_translate_node(e, n, n->intended, out, false);
    cr_assert_eq(word(out, 0), pb[0].base + 16, "begin stays with its end");
    cr_assert_eq(word(out, 1), pb[0].base + pb[0].size);
    cr_assert_eq(word(out, 2), vr_slices_va(e->slices, 1), "another buffer: translated");
    cr_assert_eq(word(out, 3), 7);
    /* Both anchored: both translated, the end at slot 0's end, which is
     * slot 1's start, and still a pair. */
    e->anchor_slot[1] = 0;
    vr_ex_translate_node(e, n, n->intended, out, false);
    cr_assert_eq(word(out, 0), vr_slices_va(e->slices, 0) + 16);
    cr_assert_eq(word(out, 1), vr_slices_va(e->slices, 0) + pb[0].size);
    cr_assert_eq(word(out, 1), vr_slices_va(e->slices, 1));
    cr_assert_eq(word(out, 2), vr_slices_va(e->slices, 1));
    vr_ex_unlock(e);
}

/* Slice address t maps byte w now or once the slot's pending remap is made
 * (a SetParams translates through a retargeted slot as if remapped). */
static bool maps_byte_soon(uint64_t w, uint64_t t)
{
    for (size_t s = 0; s < NS; s++) {
        uint64_t va = vr_slices_va(e->slices, s);
        const struct vr_slice_bind *b[2] = {vr_slices_current(e->slices, s),
                                            vr_slices_target(e->slices, s)};
        for (int i = 0; i < 2; i++)
            if (t >= va && t - va <= b[i]->size && b[i]->id && w == b[i]->base + (t - va))
                return true;
    }
    return false;
}

/* The same property through the SetParams translation (a word's own slot
 * first, else the slot that holds its buffer). Buffers outside every slot
 * are left out here: an anchor naming one retargets its home slot, and a
 * second retarget of that slot within the same node leaves the first word
 * to the fix made before the next launch's remap (fix_nodes), so the
 * translation alone is not the installed result there. */
Test(pairs, setparams_translation_keeps_every_pair_and_every_target_byte)
{
    for (size_t i = 0; i < PN * PW; i++)
        e->anchor_slot[i] = (vr_anchor)(rnd() % 3 == 0 ? -1 : (int)(rnd() % NS));
    cr_assert_eq(vr_ex_index_anchors(e, NS), 0);
    size_t translated = 0;
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < PN; i++) {
            struct vr_node *n = &e->ns.v[i];
            for (uint32_t k = 0; k < PW; k++)
                set_word(n->intended, k, random_word_of(NS));
            uint8_t out[PW * 8];
            vr_ex_translate_node(e, n, n->intended, out, true);
            for (uint32_t k = 0; k < PW; k++) {
                uint64_t w = word(n->intended, k), t = word(out, k);
                if (t != w) {
                    translated++;
                    cr_assert(maps_byte_soon(w, t), "round %d node %zu word %u: %#lx -> %#lx",
                              round, i, k, (unsigned long)w, (unsigned long)t);
                }
                for (uint32_t j = 0; j < k; j++) {
                    uint64_t v = word(n->intended, j), u = word(out, j);
                    int b = buffer_of(w);
                    if (b >= 0 && buffer_of(v) == b)
                        cr_assert_eq(t - u, w - v, "round %d node %zu: words %u and %u into "
                                     "buffer %d", round, i, j, k, b);
                }
            }
        }
    }
    cr_assert_gt(translated, 1000, "%zu words translated", translated);
    vr_ex_unlock(e);
}
