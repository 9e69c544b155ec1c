/* Churn end to end (issue 17, item 4): buffers freed and allocated again
 * every step (churn_probe), with and without the shim. The shim's cache
 * hands a freed buffer back at its address under its id, so the exec sees
 * its buffers come back and settles; every way in which memory kept for
 * reuse could name the wrong bytes must still give the bytes of a run
 * without the shim: another size at the same address, memory the cache
 * evicts (and the driver hands out again), a free while a launch still
 * reads the buffer, a second exec still pointing at freed (then live again)
 * addresses, threads. */
#include <stdio.h>

#include "checks.h"

TestSuite(churn, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

/* churn_probe `args` without and with the shim (mode profiled); `env` goes
 * to both, `shim_env` to the shim run only. Both must succeed and print the
 * same. */
static void pair_run(struct pair *p, const char *tag, const char *const *args,
                     const char *const *env, const char *const *shim_env)
{
    pair_run_app(p, tag, "churn_probe", args, env, "VAREMAP_MODE=profiled", shim_env, 0);
    cr_assert(strstr(p->plain.proc.out.p, "ok thread 0"), "%s", p->plain.proc.out.p);
    cr_assert_str_eq(p->plain.proc.out.p, p->shim.proc.out.p, "%s: the output differs", tag);
}

static uint64_t calls(const struct pair *p, const char *name)
{
    return vr_sim_calls(&p->shim.stats, name);
}

/* The second exec ran on addresses that came back more than once. */
static void shared_ran(const struct pair *p)
{
    const char *s = strstr(p->shim.proc.err.p, "shared_launches=");
    cr_assert(s && strtoul(s + 16, NULL, 10) > 1, "%s", p->shim.proc.err.p);
}

static const char *const vmm_calls[] = { "cuMemMap", "cuMemUnmap", "cuMemSetAccess",
                                         "cuMemCreate", "cuMemAddressReserve", NULL };

/* The steady state: 20 steps more cost no VMM call and no forwarded
 * SetParams (graph_bench --pattern churn's shape). */
Test(churn, settles_with_no_vmm_call_and_no_update)
{
    const char *shortr[] = { "--steps", "20", NULL }, *longr[] = { "--steps", "40", NULL };
    struct pair s, l;
    pair_run(&s, "settle_short", shortr, NULL, NULL);
    pair_run(&l, "settle_long", longr, NULL, NULL);
    for (size_t i = 0; vmm_calls[i]; i++)
        cr_assert_eq(calls(&l, vmm_calls[i]), calls(&s, vmm_calls[i]), "%s: %llu in 40 steps, %llu in 20",
                     vmm_calls[i], (unsigned long long)calls(&l, vmm_calls[i]),
                     (unsigned long long)calls(&s, vmm_calls[i]));
    const char *sp = "cuGraphExecKernelNodeSetParams_v2";
    cr_assert_eq(calls(&l, sp), calls(&s, sp), "SetParams: %llu in 40 steps, %llu in 20",
                 (unsigned long long)calls(&l, sp), (unsigned long long)calls(&s, sp));
    cr_assert(strstr(l.shim.proc.out.p, "memory_back=1"), "%s", l.shim.proc.out.p);
    pair_free(&s);
    pair_free(&l);
}

/* The same cached memory (one padded size) at the same address, another
 * size: another buffer for the program (its own range, a new buffer id:
 * churn_probe checks both at every allocation) served with no VMM call,
 * and the bytes stay the program's, with a second exec still on step 0's
 * addresses. */
Test(churn, another_size_at_the_same_address_is_another_buffer)
{
    const char *shortr[] = { "--sizes", "class", "--shared", "1", "--steps", "20", NULL };
    const char *longr[] = { "--sizes", "class", "--shared", "1", "--steps", "40", NULL };
    struct pair s, l;
    pair_run(&s, "class_short", shortr, NULL, NULL);
    pair_run(&l, "class_long", longr, NULL, NULL);
    shared_ran(&l);
    cr_assert_eq(calls(&l, "cuMemCreate"), calls(&s, "cuMemCreate"), "the cache served them");
    pair_free(&s);
    pair_free(&l);
}

/* Other padded sizes (2 and 4 MiB): the cache never serves one for the
 * other. */
Test(churn, another_padded_size_is_never_served)
{
    const char *args[] = { "--sizes", "padded", "--shared", "1", NULL };
    struct pair p;
    pair_run(&p, "padded", args, NULL, NULL);
    cr_assert(strstr(p.shim.proc.out.p, "memory_back=1"), "%s", p.shim.proc.out.p);
    pair_free(&p);
}

/* A cache too small for a generation: frees evict, the memory goes back to
 * the driver, which hands the addresses out again. The second exec, still
 * on step 0's addresses, must read the new memory there, not the evicted
 * (3 buffers kept of 4 freed a step); and no slot may hold evicted memory,
 * so all of it is free again once the program freed its buffers (2 kept). */
static void evicts(const char *cache, uint64_t releases)
{
    const char *args[] = { "--shared", "1", NULL };
    char knob[64], tag[32];
    snprintf(knob, sizeof knob, "VAREMAP_VMM_CACHE=%s", cache);
    snprintf(tag, sizeof tag, "evict_%s", cache);
    const char *small[] = { knob, NULL };
    struct pair p;
    pair_run(&p, tag, args, NULL, small);
    shared_ran(&p);
    cr_assert_gt(calls(&p, "cuMemRelease"), releases, "the cache evicted: %llu releases",
                 (unsigned long long)calls(&p, "cuMemRelease"));
    cr_assert(strstr(p.shim.proc.out.p, "memory_back=1"), "%s", p.shim.proc.out.p);
    pair_free(&p);
}

Test(churn, evicted_memory_leaves_the_execs) { evicts("6M", 40); }
Test(churn, evicted_memory_goes_back) { evicts("4M", 40); }

/* This step's buffers freed right after the launch that reads them, with
 * slow kernels: cuMemFree waits for the device (so must the shim's), a
 * stream-ordered free does not (the memory may serve the next allocation
 * only once the stream passed the free). */
static void inflight(const char *how)
{
    const char *args[] = { "--keep", "0", "--free", how, "--steps", "24", NULL };
    const char *slow[] = { "SIMCUDA_KERNEL_DELAY_US=300", NULL };
    struct pair p;
    char tag[32];
    snprintf(tag, sizeof tag, "inflight_%s", how);
    pair_run(&p, tag, args, slow, NULL);
    pair_free(&p);
}

Test(churn, a_free_while_a_launch_reads_waits) { inflight("sync"); }
Test(churn, a_stream_ordered_free_is_reused_only_once_passed) { inflight("async"); }

/* Three threads churning at once, each its own exec, sharing the cache. */
Test(churn, threads)
{
    const char *args[] = { "--threads", "3", "--steps", "30", NULL };
    const char *small[] = { "VAREMAP_VMM_CACHE=16M", NULL };
    struct pair p, q;
    pair_run(&p, "threads", args, NULL, NULL);
    pair_run(&q, "threads_evict", args, NULL, small);
    pair_free(&p);
    pair_free(&q);
}
