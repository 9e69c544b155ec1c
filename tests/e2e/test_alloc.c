/* Allocation end to end: alloc_faults with and without the shim. The program
 * must see the driver's own results and bytes whatever the shim's VMM
 * backing does underneath: no context, padding, failing internal calls, a
 * nearly full device, two devices. */
#include <stdio.h>

#include "checks.h"

TestSuite(alloc, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* alloc_faults `args` without and with the shim; `env` goes to both,
 * `shim_env` to the shim run only. Both must exit with `status`. */
static void pair_run(struct pair *p, const char *tag, const char *const *args,
                     const char *const *env, const char *const *shim_env, int status)
{
    pair_run_app(p, tag, "alloc_faults", args, env, NULL, shim_env, status);
}

static void has_line(const struct vr_run *r, const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "%s\n", line);
    cr_assert(strstr(r->proc.out.p, want), "missing '%s' in:\n%s", line, r->proc.out.p);
}

/* A fallback event whose what is `what` and whose reason mentions `why`. */
static bool has_fallback(const struct vr_run *r, const char *what, const char *why)
{
    size_t len;
    const char *line;
    for (size_t i = 0; (line = vr_log_event(&r->log, "fallback", i, &len)) != NULL; i++) {
        char w[64], reason[256];
        if (vr_json_str(line, len, "what", w, sizeof w) && !strcmp(w, what) &&
            vr_json_str(line, len, "reason", reason, sizeof reason) && strstr(reason, why))
            return true;
    }
    return false;
}

/* simcuda's "live" objects at exit: none. */
static void nothing_alive(const struct vr_run *r)
{
    static const char *const kinds[] = { "mappings", "handles", "reservations", "allocations",
                                         NULL };
    for (size_t i = 0; kinds[i]; i++) {
        uint64_t n = 1;
        cr_assert(vr_json_u64(r->stats.p, r->stats.len, kinds[i], &n), "no live %s in %s",
                  kinds[i], r->stats.p);
        cr_assert_eq(n, 0, "%llu %s alive at exit: %s", (unsigned long long)n, kinds[i],
                     r->stats.p);
    }
}

/* ---- item 7: no current context ---- */

Test(alloc, free_without_context_is_the_drivers_error)
{
    static const char *const args[] = { "noctx", NULL };
    /* the kernels reading the buffer are still queued when the thread frees it */
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=20000", NULL };
    struct pair p;
    pair_run(&p, "noctx", args, env, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "noctx free=CUDA_ERROR_INVALID_CONTEXT range=CUDA_ERROR_INVALID_CONTEXT");
    has_line(&p.shim, "free=CUDA_SUCCESS");
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 2, "the buffers were VMM-backed");
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    pair_free(&p);
}

/* ---- items 15 and 3: padding, handles, ends ---- */

Test(alloc, padding_and_handles_look_native)
{
    static const char *const args[] = { "padding", NULL };
    struct pair p;
    pair_run(&p, "padding", args, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "range last=CUDA_SUCCESS base_ok=1 size=3150080");
    has_line(&p.shim, "range end=CUDA_ERROR_NOT_FOUND");
    has_line(&p.shim, "range padding=CUDA_ERROR_NOT_FOUND");
    has_line(&p.shim, "retain base=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "retain inner=CUDA_ERROR_INVALID_VALUE");
    has_line(&p.shim, "access base=CUDA_ERROR_INVALID_VALUE");
    /* a freed buffer's memory may be reused from the cache: no cuMemCreate */
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate") + summary(&p.shim, "vmm_cache_hits"),
                  9, "the buffers were VMM-backed");
    cr_assert(strstr(p.shim.proc.err.p, "vmm_bytes_live=33554432\n"), "%s", p.shim.proc.err.p);
    /* One-past-the-end never lies inside another allocation: a guard gap. */
    cr_assert(strstr(p.shim.proc.err.p, "ends_inside_others=0\n"), "%s", p.shim.proc.err.p);
    cr_assert(strstr(p.shim.proc.err.p, "ends_placeable=0\n"), "%s", p.shim.proc.err.p);
    pair_free(&p);
}

/* ---- item 12: the shim's own calls fail ---- */

/* Without the cache of freed memory (VAREMAP_VMM_CACHE=0): every free
 * releases at once. */
static const char *const no_cache[] = { "VAREMAP_VMM_CACHE=0", NULL };

static void free_fault_with(const char *tag, const char *fault, const char *step,
                            const char *const *shim_env)
{
    static const char *const args[] = { "free", NULL };
    const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=3000", fault, NULL };
    struct pair p;
    pair_run(&p, tag, args, env, shim_env, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    for (int round = 0; round < 3; round++) {
        char line[64];
        snprintf(line, sizeof line, "round=%d free=CUDA_SUCCESS", round);
        has_line(&p.shim, line);
    }
    has_line(&p.shim, "returned=1");
    cr_assert(has_fallback(&p.shim, "cuMemFree", step), "no fallback naming %s:\n%s", step,
              p.shim.log.p);
    /* Retried at a later hook, so nothing is left over. */
    cr_assert(strstr(p.shim.proc.err.p, "vmm_leaked_bytes=0\n"), "%s", p.shim.proc.err.p);
    cr_assert_eq(summary(&p.shim, "vmm_leaked_bytes"), 0);
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate") + summary(&p.shim, "vmm_cache_hits"),
                  5, "the buffers were VMM-backed");
    nothing_alive(&p.shim);
    pair_free(&p);
}

static void free_fault(const char *tag, const char *fault, const char *step)
{
    free_fault_with(tag, fault, step, no_cache);
}

Test(alloc, free_survives_a_failed_unmap)
{
    free_fault("unmap", "SIMCUDA_FAIL=cuMemUnmap:1", "cuMemUnmap");
}

Test(alloc, free_survives_a_failed_release)
{
    free_fault("release", "SIMCUDA_FAIL=cuMemRelease:1", "cuMemRelease");
}

Test(alloc, free_survives_a_failed_address_free)
{
    free_fault("afree", "SIMCUDA_FAIL=cuMemAddressFree:1", "cuMemAddressFree");
}

/* The wait failed: the kernels still read the buffer, so it stays mapped
 * (unmapping it would crash them) until a later wait succeeds. */
Test(alloc, free_survives_a_failed_synchronize)
{
    free_fault("sync", "SIMCUDA_FAIL=cuCtxSynchronize:1", "cuCtxSynchronize");
}

/* No cuCtxSynchronize of the shim's succeeds: the driver's own free (of a
 * scrap allocation) waits for the kernels instead, so the memory is
 * returned as without the shim, cached or not. */
Test(alloc, free_survives_every_synchronize_failing)
{
    free_fault("sync_all", "SIMCUDA_FAIL=cuCtxSynchronize:*", "cuCtxSynchronize");
}

Test(alloc, free_survives_every_synchronize_failing_with_the_cache)
{
    free_fault_with("sync_all_cache", "SIMCUDA_FAIL=cuCtxSynchronize:*", "cuCtxSynchronize", NULL);
}

/* Neither wait works at the first free: the memory stays mapped (counted)
 * and goes back at a later one. */
Test(alloc, a_failed_wait_is_retried_later)
{
    free_fault("wait_later", "SIMCUDA_FAIL=cuCtxSynchronize:*,cuMemAlloc_v2:1@cuCtxSynchronize:1",
               "memory kept mapped, released later");
}

Test(alloc, memory_never_returned_is_counted)
{
    static const char *const args[] = { "free", NULL };
    static const char *const env[] = { "SIMCUDA_FAIL=cuMemUnmap:*", NULL };
    struct pair p;
    pair_run(&p, "leak", args, env, no_cache, 0);
    for (int round = 0; round < 3; round++) {
        char line[64];
        snprintf(line, sizeof line, "round=%d free=CUDA_SUCCESS", round);
        has_line(&p.shim, line);
    }
    has_line(&p.shim, "last free=CUDA_SUCCESS");
    /* four 4 MiB buffers freed by then, plus `out` at the end */
    cr_assert(strstr(p.shim.proc.err.p, "vmm_leaked_bytes=16777216\n"), "%s", p.shim.proc.err.p);
    cr_assert_eq(summary(&p.shim, "vmm_leaked_bytes"), 20971520);
    cr_assert(has_fallback(&p.shim, "cuMemFree", "cuMemUnmap"), "%s", p.shim.log.p);
    pair_free(&p);
}

/* ---- item 14: a nearly full device ---- */

/* Allocates `size` until out of memory on a device of `mem` bytes: the
 * count must be the one without the shim. */
static void fill(const char *tag, const char *size, const char *mem, const char *const *shim_env,
                 const char *want)
{
    const char *const args[] = { "fill", size, NULL };
    char knob[64];
    snprintf(knob, sizeof knob, "SIMCUDA_MEM_BYTES=%s", mem);
    const char *const env[] = { knob, NULL };
    struct pair p;
    pair_run(&p, tag, args, env, shim_env, 0);
    has_line(&p.plain, want);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    pair_free(&p);
}

/* 1 MiB of padding on 3 MiB: more than 1/8, so native, even where memory
 * is plentiful enough for VMM backing otherwise. */
Test(alloc, padding_ratio_keeps_the_native_count)
{
    static const char *const shim_env[] = { "VAREMAP_MAX_PADDING_RATIO=0.125",
                                             "VAREMAP_MAX_PADDING=16M", NULL };
    fill("ratio", "3149824", "256M", shim_env,
         "fill size=3149824 count=85 stop=CUDA_ERROR_OUT_OF_MEMORY");
}

/* 17 MiB + 4 KiB carries under 1/8 of padding, but the device has less
 * free memory than the padding budget (1G): nothing is VMM-backed. */
Test(alloc, low_memory_keeps_the_native_count)
{
    static const char *const shim_env[] = { "VAREMAP_MAX_PADDING_RATIO=0.125", NULL };
    const char *const args[] = { "fill", "17829888", NULL };
    static const char *const env[] = { "SIMCUDA_MEM_BYTES=512M", NULL };
    struct pair p;
    pair_run(&p, "lowmem", args, env, shim_env, 0);
    has_line(&p.plain, "fill size=17829888 count=30 stop=CUDA_ERROR_OUT_OF_MEMORY");
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert(strstr(p.shim.proc.err.p, "vmm_bytes_live=0\n"), "%s", p.shim.proc.err.p);
    /* The free memory is asked now and then, not at every allocation. */
    uint64_t asked = vr_sim_calls(&p.shim.stats, "cuMemGetInfo_v2");
    cr_assert(asked >= 1 && asked <= 12, "cuMemGetInfo called %llu times for 31 allocations",
              (unsigned long long)asked);
    pair_free(&p);
}

/* With room to spare the same allocations are VMM-backed (up to the
 * point where free memory falls below the padding budget), and the count
 * stays the native one when the padding fits the device's slack. */
Test(alloc, ample_memory_is_still_vmm_backed)
{
    static const char *const shim_env[] = { "VAREMAP_MAX_PADDING_RATIO=0.125",
                                             "VAREMAP_MAX_PADDING=8M", NULL };
    const char *const args[] = { "fill", "17829888", NULL };
    /* 61 allocations leave 10.8 MiB of 1048 MiB: the 8M of padding fits */
    static const char *const env[] = { "SIMCUDA_MEM_BYTES=1048M", NULL };
    struct pair p;
    pair_run(&p, "ample", args, env, shim_env, 0);
    has_line(&p.plain, "fill size=17829888 count=61 stop=CUDA_ERROR_OUT_OF_MEMORY");
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert(!strstr(p.shim.proc.err.p, "vmm_bytes_live=0\n"), "%s", p.shim.proc.err.p);
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 1);
    pair_free(&p);
}

/* ---- two devices ---- */

/* A kernel on device 1 reads device 0's buffers (one allocated before peer
 * access was enabled, one after): the same bytes with and without the shim. */
Test(alloc, peer_access_covers_vmm_backed_memory)
{
    static const char *const args[] = { "peer", NULL };
    static const char *const env[] = { "SIMCUDA_DEVICES=2", NULL };
    struct pair p;
    pair_run(&p, "peer", args, env, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "enable=CUDA_SUCCESS");
    has_line(&p.shim, "read before=CUDA_SUCCESS sum=6291456.0");
    has_line(&p.shim, "read after=CUDA_SUCCESS sum=15728640.0");
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 3, "the buffers were VMM-backed");
    pair_free(&p);
}

/* Without peer access the kernel faults in both runs, at the same point. */
Test(alloc, no_peer_access_faults_the_same_way)
{
    static const char *const args[] = { "peer", "--no-peer", NULL };
    static const char *const env[] = { "SIMCUDA_DEVICES=2", NULL };
    struct pair p;
    pair_run(&p, "nopeer", args, env, NULL, 128 + 6 /* SIGABRT */);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert(strstr(p.shim.proc.err.p, "simcuda: fatal: kernel vr_scale_f32"), "%s",
              p.shim.proc.err.p);
    cr_assert(strstr(p.plain.proc.err.p, "simcuda: fatal: kernel vr_scale_f32"), "%s",
              p.plain.proc.err.p);
    pair_free(&p);
}

/* cuMemFreeAsync of a VMM-backed buffer returns at once, as the driver's
 * does, though the stream is held by a host function waiting for the
 * program's next step (a free that waits for the stream hangs: status 142);
 * the kernel queued before the free still reads the buffer, and the memory
 * is back once the stream is done. */
Test(alloc, stream_ordered_free_does_not_block)
{
    static const char *const args[] = { "freeasync", NULL };
    struct pair p;
    pair_run(&p, "freeasync", args, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "free_async=CUDA_SUCCESS");
    has_line(&p.shim, "sum=1572864.0");
    has_line(&p.shim, "returned=1");
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    cr_assert_gt(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 0, "nothing was VMM-backed");
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemFreeAsync"), 0);
    pair_free(&p);
}

/* ---- the cache of freed VMM memory (VAREMAP_VMM_CACHE) ---- */

/* Re-allocations of one padded size: the same bytes as without the shim,
 * and past the first round no VMM call at all (a longer run makes exactly
 * the VMM calls of a shorter one). Without the cache every round pays. */
static void churn_run(struct pair *p, const char *tag, const char *rounds,
                      const char *const *shim_env)
{
    const char *const args[] = { "churn", rounds, NULL };
    pair_run(p, tag, args, NULL, shim_env, 0);
    cr_assert_str_eq(p->plain.proc.out.p, p->shim.proc.out.p);
    has_line(&p->shim, "round=1 range=3153920 base_ok=1 sum=1572864.0");
    cr_assert_eq(summary(&p->shim, "vmm_bytes"), 0);
    cr_assert_eq(summary(&p->shim, "vmm_cache_bytes"), 0, "released at exit");
    cr_assert_eq(vr_sim_calls(&p->shim.stats, "cuMemRelease"),
                 vr_sim_calls(&p->shim.stats, "cuMemCreate"), "every handle released at exit");
}

static const char *const vmm_calls[] = { "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                         "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                         "cuMemAddressFree", NULL };

Test(alloc, reallocation_of_the_same_size_makes_no_vmm_call)
{
    struct pair s, l;
    churn_run(&s, "churn4", "4", NULL);
    churn_run(&l, "churn12", "12", NULL);
    for (size_t i = 0; vmm_calls[i]; i++)
        cr_assert_eq(vr_sim_calls(&l.shim.stats, vmm_calls[i]),
                     vr_sim_calls(&s.shim.stats, vmm_calls[i]), "%s: %llu in 12 rounds, %llu in 4",
                     vmm_calls[i], (unsigned long long)vr_sim_calls(&l.shim.stats, vmm_calls[i]),
                     (unsigned long long)vr_sim_calls(&s.shim.stats, vmm_calls[i]));
    /* out + the two buffers of the first round */
    cr_assert_eq(vr_sim_calls(&l.shim.stats, "cuMemCreate"), 3);
    cr_assert_eq(summary(&l.shim, "vmm_cache_hits"), 22);
    cr_assert(strstr(l.shim.proc.err.p, "vmm_cache_hits=22 vmm_bytes_live=4194304\n"), "%s",
              l.shim.proc.err.p);
    pair_free(&s);
    pair_free(&l);
}

Test(alloc, without_the_cache_every_reallocation_pays)
{
    struct pair p;
    churn_run(&p, "churn_nocache", "12", no_cache);
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 25);
    cr_assert_eq(summary(&p.shim, "vmm_cache_hits"), 0);
    pair_free(&p);
}

/* Memory freed in stream order is not handed out again while a kernel
 * queued before the free may still read it; once the stream passed the
 * free it is. */
Test(alloc, stream_ordered_free_is_reused_only_once_done)
{
    static const char *const args[] = { "asyncreuse", NULL };
    struct pair p;
    pair_run(&p, "asyncreuse", args, NULL, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "sum=1572864.0 next=104857600.0");
    cr_assert(strstr(p.shim.proc.err.p, "reused_pending=0\n"), "%s", p.shim.proc.err.p);
    cr_assert(strstr(p.shim.proc.err.p, "reused_done=1\n"), "%s", p.shim.proc.err.p);
    cr_assert_eq(summary(&p.shim, "vmm_cache_hits"), 1);
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemFreeAsync"), 0);
    pair_free(&p);
}

/* Fill the device, free everything (kept by the cache), fill it again: the
 * program gets as many allocations as without the shim, of another size
 * (the cache is released when memory runs out) or of the same size (served
 * from it). */
static void refill(const char *tag, const char *a, const char *b, const char *want)
{
    const char *const args[] = { "refill", a, b, NULL };
    static const char *const env[] = { "SIMCUDA_MEM_BYTES=256M", NULL };
    static const char *const shim_env[] = { "VAREMAP_MAX_PADDING=8M", "VAREMAP_VMM_CACHE=1G",
                                             NULL };
    struct pair p;
    pair_run(&p, tag, args, env, shim_env, 0);
    has_line(&p.plain, want);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    /* The first fill was VMM-backed, and its memory kept when freed. */
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 50);
    cr_assert(!strstr(p.shim.proc.err.p, "vmm_cache_bytes_after_free=0\n"), "%s",
              p.shim.proc.err.p);
    cr_assert_eq(summary(&p.shim, "vmm_bytes"), 0);
    cr_assert_eq(summary(&p.shim, "vmm_leaked_bytes"), 0);
    pair_free(&p);
}

Test(alloc, kept_memory_goes_back_when_memory_runs_out)
{
    refill("refill_other", "4194304", "6291456",
           "refill size=6291456 count=42 stop=CUDA_ERROR_OUT_OF_MEMORY");
}

Test(alloc, kept_memory_serves_the_same_size_again)
{
    refill("refill_same", "4194304", "4194304",
           "refill size=4194304 count=64 stop=CUDA_ERROR_OUT_OF_MEMORY");
}

/* Every other allocator that draws device memory, each right after a
 * VMM-backed buffer was freed (kept mapped by the cache): each gets the
 * memory it gets without the shim, which cuMemGetInfo says is free. */
Test(alloc, kept_memory_goes_back_to_every_allocator)
{
    static const char *const args[] = { "others", NULL };
    static const char *const env[] = { "SIMCUDA_MEM_BYTES=256M", NULL };
    static const char *const shim_env[] = { "VAREMAP_MAX_PADDING=8M", "VAREMAP_VMM_CACHE=1G",
                                             NULL };
    static const char *const names[] = { "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
                                         "cuMemAllocFromPoolAsync",
                                         "cuMemAllocFromPoolAsync_ptsz", "cuMemAllocManaged",
                                         "cuMemAllocPitch", "cuArrayCreate", "cuArray3DCreate",
                                         "cuMipmappedArrayCreate", "cuMemCreate", NULL };
    struct pair p;
    pair_run(&p, "others", args, env, shim_env, 0);
    for (size_t i = 0; names[i]; i++) {
        char line[96];
        snprintf(line, sizeof line, "%s free=1 CUDA_SUCCESS", names[i]);
        has_line(&p.plain, line);
        snprintf(line, sizeof line, "%s kept=167772160\n", names[i]);
        cr_assert(strstr(p.shim.proc.err.p, line), "the cache did not keep the buffer before %s:\n%s",
                  names[i], p.shim.proc.err.p);
    }
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert_eq(summary(&p.shim, "vmm_leaked_bytes"), 0);
    nothing_alive(&p.shim);
    pair_free(&p);
}

/* ---- pointer attributes ---- */

/* A VMM-backed buffer answers as native cuMemAlloc memory: its context,
 * its own base and size as range and mapping (not the reservation or the
 * padded mapping), no allocation in its padding or once freed (kept by
 * the cache), and a new buffer id when its memory is handed out again. */
Test(alloc, pointer_attributes_look_native)
{
    static const char *const args[] = { "attrs", NULL };
    struct pair p;
    pair_run(&p, "attrs", args, NULL, NULL, 0);
    has_line(&p.plain, "buffer range_size=CUDA_SUCCESS size=1");
    has_line(&p.plain, "ids distinct=1");
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert(strstr(p.shim.proc.err.p, "reused_address=1\n"), "%s", p.shim.proc.err.p);
    cr_assert_geq(summary(&p.shim, "vmm_cache_hits"), 1, "the freed buffer was reused");
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 2, "the buffers were VMM-backed");
    pair_free(&p);
}

/* ---- contexts destroyed ---- */

/* cuCtxDestroy and cuDevicePrimaryCtxReset take the context's cuMemAlloc
 * memory: VMM-backed and kept memory go with it (issue 15, item 12d). */
Test(alloc, a_destroyed_context_takes_its_memory)
{
    static const char *const args[] = { "ctxgone", NULL };
    struct pair p;
    pair_run(&p, "ctxgone", args, NULL, NULL, 0);
    has_line(&p.plain, "created range=CUDA_ERROR_NOT_FOUND free_back=1");
    has_line(&p.plain, "primary range=CUDA_ERROR_NOT_FOUND free_back=1");
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    cr_assert_geq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 4, "the buffers were VMM-backed");
    nothing_alive(&p.shim);
    pair_free(&p);
}

/* ---- exit and fork ---- */

/* The program's exit handler runs after the shim's exit work and frees
 * VMM-backed buffers (one in stream order, behind a kernel still queued):
 * the memory goes back to the driver, not into a cache or a list that
 * nothing would release any more. */
Test(alloc, a_free_after_the_exit_work_returns_the_memory)
{
    static const char *const args[] = { "atexit", NULL };
    static const char *const env[] = { "SIMCUDA_KERNEL_DELAY_US=20000", NULL };
    struct pair p;
    pair_run(&p, "atexit", args, env, NULL, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "late free=CUDA_SUCCESS");
    has_line(&p.shim, "late free_async=CUDA_SUCCESS");
    cr_assert_eq(vr_sim_calls(&p.shim.stats, "cuMemCreate"), 2, "the buffers were VMM-backed");
    nothing_alive(&p.shim);
    pair_free(&p);
}

/* A child forked before cuInit (the parent's shim had started: an entry
 * point was resolved) does the CUDA work: it has its own log, with its own
 * summary, and leaves nothing alive. */
Test(alloc, a_forked_child_is_its_own_process)
{
    static const char *const args[] = { "fork", NULL };
    char logv[4200];
    snprintf(logv, sizeof logv, "VAREMAP_LOG=%s", vr_tmp_path("fork-%p.jsonl"));
    const char *const shim_env[] = { logv, NULL };
    struct pair p;
    pair_run(&p, "fork", args, NULL, shim_env, 0);
    cr_assert_str_eq(p.plain.proc.out.p, p.shim.proc.out.p);
    has_line(&p.shim, "child sum=6291456.0");
    has_line(&p.shim, "child exit=0");
    const char *at = strstr(p.shim.proc.err.p, "child pid=");
    cr_assert(at, "%s", p.shim.proc.err.p);
    long pid = strtol(at + strlen("child pid="), NULL, 10);
    char name[64];
    snprintf(name, sizeof name, "fork-%ld.jsonl", pid);
    struct vr_run child = { 0 };
    cr_assert(vr_read_file(vr_tmp_path(name), &child.log), "the child wrote no log %s", name);
    uint64_t logged = 0;
    size_t len;
    const char *line = vr_log_event(&child.log, "summary", 0, &len);
    cr_assert(line, "the child's log has no summary:\n%s", child.log.p);
    cr_assert(vr_json_u64(line, len, "pid", &logged) && logged == (uint64_t)pid, "%s", line);
    cr_assert_eq(summary(&child, "vmm_bytes"), 0);
    cr_assert_eq(summary(&child, "vmm_cache_bytes"), 0, "released at the child's exit");
    const char *path = vr_tmp_path("fork_shim.stats.child");
    cr_assert(vr_read_file(path, &child.stats), "no child stats at %s", path);
    cr_assert_geq(vr_sim_calls(&child.stats, "cuMemCreate"), 1, "the child's buffers were VMM-backed");
    nothing_alive(&child);
    vr_buf_free(&child.log);
    vr_buf_free(&child.stats);
    pair_free(&p);
}

/* ---- graph_bench's re-allocating patterns ---- */

struct gb {
    struct vr_proc proc;
    struct vr_buf stats;
    char checksum[40];
};

/* graph_bench with `args` after the executable, with or without the shim;
 * `extra` (NULL-terminated, may be NULL): more of the environment. */
static void gb_spawn(struct gb *b, const char *tag, const char *const *args, bool shim,
                     const char *const *extra)
{
    char exe[4096], ld[4096], ptx[4096], stats[4096], pre[4096], name[128];
    snprintf(exe, sizeof exe, "%s/bench/graph_bench", vr_env_path("VR_APPS_DIR"));
    snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s", vr_env_path("VR_SIMCUDA_DIR"));
    snprintf(ptx, sizeof ptx, "VR_PTX=%s", vr_env_path("VR_PTX"));
    snprintf(name, sizeof name, "%s.stats.json", tag);
    snprintf(stats, sizeof stats, "SIMCUDA_STATS=%s", vr_tmp_path(name));
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", vr_env_path("VR_SHIM"));
    char *argv[32] = { exe };
    size_t n = 1;
    for (size_t i = 0; args[i] && n + 1 < sizeof argv / sizeof argv[0]; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    /* As in the harness's own runs under -Db_sanitize=address. */
    const char *asan = getenv("ASAN_OPTIONS"), *l = getenv("LSAN_OPTIONS");
    char aopt[1024], lsan[1024];
    snprintf(aopt, sizeof aopt, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", asan ? asan : "",
             asan && *asan ? ":" : "");
    snprintf(lsan, sizeof lsan, "LSAN_OPTIONS=%s", l ? l : "");
    char *env[16] = { ld, ptx, stats, aopt, lsan };
    size_t k = 5;
    for (size_t i = 0; extra && extra[i] && k + 2 < sizeof env / sizeof env[0]; i++)
        env[k++] = (char *)extra[i];
    env[k++] = shim ? pre : NULL;
    env[k] = NULL;
    memset(b, 0, sizeof *b);
    cr_assert_eq(vr_spawn(tag, argv, env, false, &b->proc), 0);
    cr_assert_eq(b->proc.status, 0, "%s: graph_bench exited with %d (3: wrong values): %s", tag,
                 b->proc.status, b->proc.err.p);
    cr_assert(vr_read_file(vr_tmp_path(name), &b->stats), "%s: no SIMCUDA_STATS", tag);
    bench_checksum(tag, b->proc.out.p, b->checksum, sizeof b->checksum);
}

/* graph_bench --pattern `pattern` (2 MiB buffers, VMM-backed at simcuda's
 * granularity), with or without the shim. */
static void gb_run(struct gb *b, const char *tag, const char *pattern, const char *steps,
                   bool shim, const char *cache)
{
    char knob[64];
    snprintf(knob, sizeof knob, "VAREMAP_VMM_CACHE=%s", cache);
    const char *args[] = { "--pattern", pattern, "--nodes", "200", "--steps", steps,
                           "--warmup", "10", "--bytes", "2M", "--sync-every", "1", NULL };
    const char *extra[] = { knob, NULL };
    gb_spawn(b, tag, args, shim, extra);
}

static void gb_free(struct gb *b)
{
    vr_proc_free(&b->proc);
    vr_buf_free(&b->stats);
}

/* The same checksum as without the shim, and in steady state (a long run
 * minus a short one) no allocation-side VMM call: every re-allocation is
 * served from the cache. */
static void reallocates(const char *pattern, const char *cache, bool steady)
{
    static const char *const alloc_side[] = { "cuMemCreate", "cuMemRelease", NULL };
    struct gb plain, s, l;
    char t[3][64];
    snprintf(t[0], sizeof t[0], "%s_%s_plain", pattern, cache);
    snprintf(t[1], sizeof t[1], "%s_%s_short", pattern, cache);
    snprintf(t[2], sizeof t[2], "%s_%s_long", pattern, cache);
    gb_run(&plain, t[0], pattern, "60", false, cache);
    gb_run(&s, t[1], pattern, "20", true, cache);
    gb_run(&l, t[2], pattern, "60", true, cache);
    cr_assert_str_eq(plain.checksum, l.checksum, "%s: checksums differ", pattern);
    for (size_t i = 0; alloc_side[i]; i++) {
        uint64_t a = vr_sim_calls(&l.stats, alloc_side[i]), b = vr_sim_calls(&s.stats, alloc_side[i]);
        cr_assert(steady ? a == b : a > b, "%s, VAREMAP_VMM_CACHE=%s: %s %llu in 60 steps, %llu in 20",
                  pattern, cache, alloc_side[i], (unsigned long long)a, (unsigned long long)b);
    }
    gb_free(&plain);
    gb_free(&s);
    gb_free(&l);
}

Test(alloc, realloc_pattern_reuses_freed_memory) { reallocates("realloc", "256M", true); }
Test(alloc, churn_pattern_reuses_freed_memory) { reallocates("churn", "256M", true); }
/* The same assertions can fail: without the cache every step pays. */
Test(alloc, churn_pattern_without_cache_pays) { reallocates("churn", "0", false); }

/* A pipeline bound by the GPU (kernels slower than the host's steps) keeps
 * the exec and every variant busy: a new buffer can then only be passed as
 * written and its nodes re-pointed later, more updates than dedup sends (an
 * H200 ran fanout 0.66x of dedup so). The exec weighs what its slices cost
 * against what they saved and stops rebinding: once, with the numbers, and
 * no rebind after; the checksum stays the run's without the shim. */
Test(alloc, busy_pipeline_stops_rebinding)
{
    const char *args[] = { "--pattern", "fanout", "--nodes", "400", "--steps", "200",
                           "--warmup", "100", "--bytes", "2M", NULL };
    const char *slow[] = { "SIMCUDA_KERNEL_DELAY_US=2", NULL };
    char logv[4200];
    snprintf(logv, sizeof logv, "VAREMAP_LOG=%s", vr_tmp_path("busy.jsonl"));
    const char *with_log[] = { "SIMCUDA_KERNEL_DELAY_US=2", logv, NULL };
    struct gb plain, s;
    gb_spawn(&plain, "busy_plain", args, false, slow);
    gb_spawn(&s, "busy_shim", args, true, with_log);
    cr_assert_str_eq(plain.checksum, s.checksum, "checksums differ");
    struct vr_buf log;
    cr_assert(vr_read_file(vr_tmp_path("busy.jsonl"), &log), "no log");
    static const char *const settled[] = { "\"event\":\"fallback\"", "\"what\":\"rebind\"",
                                           "the exec goes on without slices", NULL };
    cr_assert_eq(vr_count_lines_with(&log, settled), 1, "%s", log.p);
    /* graph_bench's counters at the end of the warmup (launch 100, after the
     * settling: the ledger's second window of 32 launches after the
     * decision, 2.3-3.3x its savings) and at the end */
    const char *w = strstr(s.proc.out.p, "\"shim_at_warmup\"");
    const char *f = strstr(s.proc.out.p, "\"shim_final\"");
    cr_assert(w && f, "%s", s.proc.out.p);
    const char *rw = strstr(w, "\"rebinds\": "), *rf = strstr(f, "\"rebinds\": ");
    cr_assert(rw && rf, "%s", s.proc.out.p);
    cr_assert_eq(strtoull(rw + 11, NULL, 10), strtoull(rf + 11, NULL, 10),
                 "rebinds went on after the settling: %s", s.proc.out.p);
    vr_buf_free(&log);
    gb_free(&plain);
    gb_free(&s);
}
