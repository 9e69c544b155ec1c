/* Slices over a fake VMM driver: three views of translation, ends of
 * ranges, remaps, refusals, and a failed unmap that keeps what is mapped. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "driver.h"
#include "fake_driver.h"
#include "slice.h"

static struct vr_slices *s;

static void setup(void)
{
    fk.reserve_fixed = 0x100000;
    fk.bad_handle = 0xbad;
    fake_vmm_install();
    const size_t sizes[] = {0x2000, 0x1000};
    cr_assert_eq(vr_slices_create(&s, sizes, 2), 0);
}

static void teardown(void)
{
    vr_slices_destroy(s);
}

static const struct vr_slice_bind A = {1, 0x7000000, 0x1800, 0x2000, 11, 0};
static const struct vr_slice_bind B = {2, 0x9000000, 0x1000, 0x1000, 22, 0};
static const struct vr_slice_bind C = {3, 0xa000000, 0x2800, 0x3000, 33, 0};

TestSuite(slice, .init = setup, .fini = teardown);

Test(slice, packed_slots_and_translation)
{
    cr_assert_eq(vr_slices_va(s, 0), 0x100000);
    cr_assert_eq(vr_slices_va(s, 1), 0x102000);
    cr_assert_eq(vr_slices_reserved(s), 0x3000);
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    cr_assert_eq(fk.maps, 1);
    cr_assert_eq(fk.last_map_va, 0x100000);
    cr_assert_eq(vr_slices_translate(s, 0x7000010, VR_VIEW_MAPPED), 0x100010);
    cr_assert_eq(vr_slices_translate(s, 0x7000000 + 0x1800, VR_VIEW_MAPPED), 0x100000 + 0x1800,
                 "one past the logical end is the end of the slice's copy: [begin, end) pairs");
    cr_assert_eq(vr_slices_translate(s, 0x7000000 + 0x1801, VR_VIEW_MAPPED), 0x7000000 + 0x1801);
    cr_assert_eq(vr_slices_translate(s, 0x6ffffff, VR_VIEW_MAPPED), 0x6ffffff);
    cr_assert_eq(vr_slices_slot_at(s, 0x102fff), 1);
    cr_assert_eq(vr_slices_slot_at(s, 0x100000 + 0x1800), 0);
    cr_assert_eq(vr_slices_slot_at(s, 0x0fffff), -1);
}

Test(slice, adjacent_allocations_prefer_the_one_that_starts_there)
{
    struct vr_slice_bind lo = {7, 0x5000000, 0x1000, 0x1000, 77, 0};
    struct vr_slice_bind hi = {8, 0x5001000, 0x1000, 0x1000, 88, 0};
    cr_assert_eq(vr_slices_bind(s, 0, &lo), 0);
    cr_assert_eq(vr_slices_bind(s, 1, &hi), 0);
    cr_assert_eq(vr_slices_translate(s, 0x5001000, VR_VIEW_MAPPED), 0x102000);
    cr_assert_eq(vr_slices_translate(s, 0x5000fff, VR_VIEW_MAPPED), 0x100fff);
}

Test(slice, views_and_remap)
{
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    cr_assert_eq(vr_slices_retarget(s, 0, &B), 0);
    cr_assert(vr_slices_pending(s));
    cr_assert(vr_slices_slot_pending(s, 0));
    cr_assert_eq(vr_slices_translate(s, 0x9000008, VR_VIEW_TARGET), 0x100008);
    cr_assert_eq(vr_slices_translate(s, 0x9000008, VR_VIEW_MAPPED), 0x9000008);
    cr_assert_eq(vr_slices_translate(s, 0x7000008, VR_VIEW_MAPPED), 0x100008);
    cr_assert_eq(vr_slices_translate(s, 0x7000008, VR_VIEW_STABLE), 0x7000008,
                 "a slot about to change is not stable");
    cr_assert_eq(fk.maps, 1, "nothing remapped before remap");
    cr_assert_eq(vr_slices_remap(s, 0), 0);
    cr_assert_eq(fk.unmaps, 1);
    cr_assert_eq(fk.maps, 2);
    cr_assert_eq(fk.last_map_handle, 22);
    cr_assert_not(vr_slices_pending(s));
    cr_assert_eq(vr_slices_translate(s, 0x9000008, VR_VIEW_STABLE), 0x100008);
}

Test(slice, retarget_refusals_and_cancel)
{
    cr_assert_eq(vr_slices_bind(s, 1, &B), 0);
    cr_assert_eq(vr_slices_retarget(s, 1, &C), -E2BIG, "C does not fit a 0x1000 slot");
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    cr_assert_eq(vr_slices_retarget(s, 0, &B), 0, "B may be two slots' (anchors are positions)");
    cr_assert_eq(vr_slices_target(s, 0)->id, B.id);
    vr_slices_cancel(s, 0);
    struct vr_slice_bind d = {4, 0xb000000, 0x100, 0x1000, 44, 0};
    cr_assert_eq(vr_slices_retarget(s, 0, &d), 0);
    cr_assert_eq(vr_slices_find(s, d.id), 0);
    vr_slices_cancel(s, 0);
    cr_assert_not(vr_slices_pending(s));
    cr_assert_eq(vr_slices_find(s, d.id), -1);
    cr_assert_eq(vr_slices_translate(s, 0x7000000, VR_VIEW_TARGET), 0x100000);
}

Test(slice, failed_unmap_keeps_the_slot_mapped)
{
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    struct vr_slice_bind none = {0};
    cr_assert_eq(vr_slices_retarget(s, 0, &none), 0);
    fk.fail_unmaps = 1;
    cr_assert_neq(vr_slices_remap(s, 0), 0);
    cr_assert_eq(vr_slices_current(s, 0)->id, A.id, "the mapping is still there");
    /* An unbind means A was freed: its address may come back as another
     * allocation, which must never be translated into A's old memory. */
    cr_assert(vr_slices_pending(s), "the unbind stays pending");
    cr_assert_eq(vr_slices_translate(s, 0x7000000, VR_VIEW_STABLE), 0x7000000);
    cr_assert_eq(vr_slices_translate(s, 0x7000000, VR_VIEW_TARGET), 0x7000000);
    fk.fail_unmaps = 1;
    cr_assert_neq(vr_slices_destroy(s), 0, "destroy reports what it could not return");
    cr_assert_eq(vr_slices_current(s, 0)->id, A.id);
    cr_assert_eq(vr_slices_remap(s, 0), 0, "a later remap unmaps it");
    cr_assert_eq(vr_slices_current(s, 0)->id, 0);
    cr_assert_not(vr_slices_pending(s));
}

Test(slice, failed_unmap_of_a_rebind_gives_it_up)
{
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    struct vr_slice_bind other = {7, 0x9000000, 0x100, 0x1000, 0x77, 0};
    cr_assert_eq(vr_slices_retarget(s, 0, &other), 0);
    fk.fail_unmaps = 1;
    cr_assert_neq(vr_slices_remap(s, 0), 0);
    cr_assert_eq(vr_slices_current(s, 0)->id, A.id, "the mapping is still there");
    cr_assert_not(vr_slices_pending(s), "the change is given up, not half done");
    cr_assert_eq(vr_slices_translate(s, 0x7000000, VR_VIEW_STABLE), 0x100000);
}

Test(slice, failed_map_leaves_slot_unbound)
{
    cr_assert_eq(vr_slices_bind(s, 0, &A), 0);
    struct vr_slice_bind bad = {9, 0xd000000, 0x100, 0x1000, 0xbad, 0};
    cr_assert_eq(vr_slices_retarget(s, 0, &bad), 0);
    cr_assert_neq(vr_slices_remap(s, 0), 0);
    cr_assert_eq(vr_slices_translate(s, 0xd000000, VR_VIEW_TARGET), 0xd000000,
                 "a failed map is not translated");
    cr_assert_eq(vr_slices_find(s, bad.id), -1);
    cr_assert_eq(vr_slices_current(s, 0)->id, 0);
}

/* Four slots of one page each, all bound: the fixture's two slots stay
 * aside (their own reservation). */
static struct vr_slices *four(void)
{
    fk.reserve_fixed = 0;
    struct vr_slices *t;
    const size_t sizes[] = {0x1000, 0x1000, 0x1000, 0x1000};
    cr_assert_eq(vr_slices_create(&t, sizes, 4), 0);
    for (size_t k = 0; k < 4; k++) {
        struct vr_slice_bind b = {100 + k, 0x20000000 + k * 0x100000, 0x1000, 0x1000, 200 + k, 0};
        cr_assert_eq(vr_slices_bind(t, k, &b), 0);
    }
    return t;
}

static void retarget(struct vr_slices *t, size_t k, uint64_t id, size_t padded, int device)
{
    struct vr_slice_bind b = {id, 0x30000000 + id * 0x100000, padded, padded, 300 + id, device};
    cr_assert_eq(vr_slices_retarget(t, k, &b), 0);
}

/* Adjacent slots mapped anew share one cuMemSetAccess over their range; a
 * gap (a slot not remapped), a mapping short of its window or another
 * device starts a new call. Fails if each slot gets its own call, or if a
 * call spans a slot that is not freshly mapped. */
Test(slice, adjacent_remaps_share_one_access_call)
{
    struct vr_slices *t = four();
    CUdeviceptr va0 = vr_slices_va(t, 0);
    retarget(t, 0, 1, 0x1000, 0);
    retarget(t, 1, 2, 0x1000, 0);
    retarget(t, 3, 3, 0x1000, 0);
    fk.accesses = 0;
    size_t slots[] = {0, 1, 3};
    int rc[3] = {-1, -1, -1};
    struct vr_remap_tally tally = {0};
    vr_slices_remap_many(t, slots, 3, rc, &tally);
    cr_assert(rc[0] == 0 && rc[1] == 0 && rc[2] == 0);
    cr_assert_eq(fk.accesses, 2, "slots 0 and 1 in one call, 3 in another");
    cr_assert_eq(fk.access_va[0], va0);
    cr_assert_eq(fk.access_size[0], 0x2000);
    cr_assert_eq(fk.access_va[1], va0 + 0x3000);
    cr_assert_eq(fk.access_size[1], 0x1000);
    cr_assert_eq(tally.slots, 3);
    cr_assert_eq(tally.calls, 2);
    cr_assert_not(vr_slices_pending(t));
    for (size_t k = 0; k < 3; k++)
        cr_assert_eq(vr_slices_current(t, slots[k])->id, (uint64_t)k + 1);

    /* Slot 0 mapped short of its window, then slot 2 on another device. */
    retarget(t, 0, 4, 0x800, 0);
    retarget(t, 1, 5, 0x1000, 0);
    retarget(t, 2, 6, 0x1000, 1);
    fk.accesses = 0;
    size_t slots2[] = {0, 1, 2};
    vr_slices_remap_many(t, slots2, 3, rc, &tally);
    cr_assert_eq(fk.accesses, 3, "no run across a short mapping or another device");
    cr_assert_eq(fk.access_size[0], 0x800);
    cr_assert_eq(tally.slots, 6);
    cr_assert_eq(tally.calls, 5);
    cr_assert_eq(vr_slices_destroy(t), 0);
}

/* A peer enabled: access is set again over each run of adjacent bound
 * slots, one call per run; an unbound slot ends a run, and a refused run
 * is asked slot by slot. Fails if every slot gets its own call, or if a
 * call spans an unbound slot. */
Test(slice, reaccess_sets_access_per_run)
{
    struct vr_slices *t = four();
    CUdeviceptr va0 = vr_slices_va(t, 0);
    fk.accesses = 0;
    vr_slices_reaccess(t);
    cr_assert_eq(fk.accesses, 1, "four adjacent bound slots: one call");
    cr_assert_eq(fk.access_va[0], va0);
    cr_assert_eq(fk.access_size[0], 0x4000);

    static const struct vr_slice_bind none = {0};
    cr_assert_eq(vr_slices_retarget(t, 2, &none), 0);
    size_t two = 2;
    int rc;
    vr_slices_remap_many(t, &two, 1, &rc, NULL);
    cr_assert_eq(vr_slices_current(t, 2)->id, 0);
    fk.accesses = 0;
    vr_slices_reaccess(t);
    cr_assert_eq(fk.accesses, 2, "slots 0-1, then 3");
    cr_assert_eq(fk.access_size[0], 0x2000);
    cr_assert_eq(fk.access_va[1], va0 + 0x3000);
    cr_assert_eq(fk.access_size[1], 0x1000);

    fk.accesses = 0;
    fk.fail_accesses = 1;
    vr_slices_reaccess(t);
    cr_assert_eq(fk.accesses, 4, "the refused run, its two slots, then slot 3");
    cr_assert_eq(fk.access_size[1], 0x1000);
    cr_assert_eq(fk.access_va[2], va0 + 0x1000);
    cr_assert_eq(vr_slices_current(t, 0)->id, 100, "a refused re-access unbinds nothing");
    cr_assert_eq(vr_slices_destroy(t), 0);
}

/* A refused access over the run is asked slot by slot; a slot still
 * refused is unmapped and gives its rebind up (unbound, not pending), the
 * others are bound. Fails if the run's refusal leaves any slot mapped
 * without access, or fails a slot the driver accepted. */
Test(slice, refused_run_access_falls_back_slot_by_slot)
{
    struct vr_slices *t = four();
    retarget(t, 0, 1, 0x1000, 0);
    retarget(t, 1, 2, 0x1000, 0);
    retarget(t, 2, 3, 0x1000, 0);
    fk.accesses = 0;
    fk.fail_accesses = 2; /* the run's call and slot 0's own */
    int unmaps = fk.unmaps;
    size_t slots[] = {0, 1, 2};
    int rc[3];
    struct vr_remap_tally tally = {0};
    vr_slices_remap_many(t, slots, 3, rc, &tally);
    cr_assert_eq(fk.accesses, 4, "one for the run, then one per slot");
    cr_assert_neq(rc[0], 0);
    cr_assert(rc[1] == 0 && rc[2] == 0);
    cr_assert_eq(vr_slices_current(t, 0)->id, 0, "refused: unmapped again");
    cr_assert_eq(fk.unmaps, unmaps + 4, "three old mappings and the refused new one");
    cr_assert_eq(vr_slices_current(t, 1)->id, 2);
    cr_assert_eq(vr_slices_current(t, 2)->id, 3);
    cr_assert_not(vr_slices_pending(t), "the refused rebind is given up");
    cr_assert_eq(tally.calls, 4);
    cr_assert_eq(vr_slices_destroy(t), 0);
}
