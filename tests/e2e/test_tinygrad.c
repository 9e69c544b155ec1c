/* tinygrad's way in (issue 30, items 5 and 8): tiny_jit instantiates with
 * the legacy cuGraphInstantiate_v2, passes every kernel's arguments through
 * `extra` and re-sets every kernel node through the v1 SetParams at every
 * step. Run on simcuda without and with the shim in every mode, compared
 * byte for byte; the shim must know the exec, read the `extra` arguments
 * (no opaque node) and, profiled, keep at least 90% of the steady state's
 * SetParams from the driver. Then every exec-creating entry point reached
 * by linking, dlsym and cuGetProcAddress.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checks.h"

TestSuite(tinygrad, .init = vr_tmp_setup, .fini = vr_tmp_teardown);

enum { NODES = 20 };

struct jit_run {
    struct vr_run r;
    struct vr_buf out;
};

/* tiny_jit with `args` (at most 10) and --steps; with the shim in `mode`
 * unless mode is NULL. */
static void jit(struct jit_run *j, const char *tag, const char *mode, int steps,
                const char *const *args)
{
    char steps_s[16], mode_env[64];
    snprintf(steps_s, sizeof steps_s, "%d", steps);
    const char *out = vr_tmp_path(tag);
    const char *argv[16];
    size_t n = 0;
    argv[n++] = "--steps";
    argv[n++] = steps_s;
    argv[n++] = "--out";
    argv[n++] = out;
    for (size_t i = 0; args && args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    snprintf(mode_env, sizeof mode_env, "VAREMAP_MODE=%s", mode ? mode : "off");
    const char *env[] = {mode_env, NULL};
    run_ok(&j->r, tag, "tiny_jit", argv, mode ? VR_RUN_SHIM : 0, mode ? env : NULL);
    cr_assert(vr_read_file(out, &j->out), "%s: no --out file", tag);
    cr_assert_eq(j->r.setparams, (unsigned long long)steps * NODES);
}

static void jit_free(struct jit_run *j)
{
    vr_run_free(&j->r);
    vr_buf_free(&j->out);
}

static void same_bytes(const struct jit_run *a, const struct jit_run *b, const char *what)
{
    cr_assert_gt(a->out.len, 0, "%s: no output", what);
    cr_assert_eq(a->out.len, b->out.len, "%s: output sizes differ", what);
    cr_assert(memcmp(a->out.p, b->out.p, a->out.len) == 0, "%s: output bytes differ", what);
    cr_assert_str_eq(a->r.proc.out.p, b->r.proc.out.p, "%s: stdout differs", what);
}

static uint64_t driver_setparams(const struct jit_run *j)
{
    return sim_sum(&j->r, setparams_syms);
}

/* The exec the shim saw instantiated: every kernel node readable. */
static void known_exec(const struct jit_run *j, const char *what)
{
    size_t len;
    const char *ev = vr_log_event(&j->r.log, "exec_instantiated", 0, &len);
    cr_assert(ev, "%s: the shim never saw the exec instantiated:\n%s", what, j->r.log.p);
    uint64_t nodes = 0, opaque = 99;
    cr_assert(vr_json_u64(ev, len, "kernel_nodes", &nodes));
    cr_assert(vr_json_u64(ev, len, "opaque_nodes", &opaque));
    cr_assert_eq(nodes, NODES, "%s", what);
    cr_assert_eq(opaque, 0, "%s: nodes whose arguments come through `extra` are opaque", what);
}

/* Steady-state share of the program's SetParams that reached the driver,
 * in percent: two runs of 12 and 24 steps, so the profile window and the
 * transition drop out. */
static double steady_forwarded_pct(const char *tag, const char *mode, const char *const *args)
{
    struct jit_run a, b;
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "%s_12", tag);
    snprintf(t2, sizeof t2, "%s_24", tag);
    jit(&a, t1, mode, 12, args);
    jit(&b, t2, mode, 24, args);
    known_exec(&b, tag);
    uint64_t da = driver_setparams(&a), db = driver_setparams(&b);
    cr_assert_geq(db, da);
    double pct = 100.0 * (double)(db - da) / (12.0 * NODES);
    jit_free(&a);
    jit_free(&b);
    return pct;
}

/* Identical bytes in all four modes; the decision log says what the shim
 * did; off and observe forward every SetParams, dedup keeps the unchanged
 * ones from the driver. */
Test(tinygrad, identical_in_every_mode)
{
    struct jit_run plain;
    jit(&plain, "plain", NULL, 12, NULL);
    cr_assert_eq(driver_setparams(&plain), 12 * NODES);
    static const char *const modes[] = {"off", "observe", "dedup", "profiled"};
    for (size_t i = 0; i < 4; i++) {
        struct jit_run s;
        jit(&s, modes[i], modes[i], 12, NULL);
        same_bytes(&plain, &s, modes[i]);
        uint64_t fwd = driver_setparams(&s);
        if (i < 2) {
            cr_assert_eq(fwd, 12 * NODES, "%s forwards every SetParams", modes[i]);
            cr_assert_eq(summary(&s.r, "setparams_skipped"), 0);
        } else {
            known_exec(&s, modes[i]);
            cr_assert_gt(summary(&s.r, "setparams_skipped"), 0, "%s absorbed nothing",
                         modes[i]);
        }
        if (i == 1)
            known_exec(&s, modes[i]);
        if (i == 2) /* the input nodes and the step's scalar change */
            cr_assert_leq(fwd, 20 + 11 * 3, "dedup forwarded %llu", (unsigned long long)fwd);
        if (i == 3) {
            size_t len;
            const char *d = vr_log_event(&s.r.log, "profile_decision", 0, &len);
            cr_assert(d, "no profile decision:\n%s", s.r.log.p);
            char state[32];
            cr_assert(vr_json_str(d, len, "state", state, sizeof state));
            cr_assert_str_eq(state, "active", "%.*s", (int)len, d);
        }
        cr_assert_eq(vr_log_count(&s.r.log, "fallback"), 0, "%s", s.r.log.p);
        jit_free(&s);
    }
    jit_free(&plain);
}

/* The target: >= 90% of the steady state's SetParams absorbed, profiled. */
Test(tinygrad, profiled_absorbs_nine_in_ten)
{
    double pct = steady_forwarded_pct("prof", "profiled", NULL);
    cr_assert_leq(pct, 10.0, "%.1f%% of the steady state's SetParams reached the driver", pct);
}

/* Each half of the shape alone: cuGraphInstantiate_v2 with kernelParams,
 * and `extra` with cuGraphInstantiateWithFlags. */
Test(tinygrad, legacy_instantiate_with_kernel_params)
{
    static const char *const args[] = {"--args", "params", NULL};
    double pct = steady_forwarded_pct("kp", "profiled", args);
    cr_assert_leq(pct, 10.0, "%.1f%% reached the driver", pct);
}

Test(tinygrad, extra_arguments_with_instantiate_with_flags)
{
    static const char *const args[] = {"--inst", "flags", NULL};
    double pct = steady_forwarded_pct("flags", "profiled", args);
    cr_assert_leq(pct, 10.0, "%.1f%% reached the driver", pct);
}

/* The same updates through the other two SetParams entry points: `extra`
 * is read (and translated) in each, identical bytes in dedup and
 * profiled. */
static void other_entry(const char *entry)
{
    const char *const args[] = {"--setparams", entry, NULL};
    char tag[64];
    struct jit_run plain;
    snprintf(tag, sizeof tag, "%s_plain", entry);
    jit(&plain, tag, NULL, 12, args);
    static const char *const modes[] = {"dedup", "profiled"};
    for (size_t i = 0; i < 2; i++) {
        struct jit_run s;
        snprintf(tag, sizeof tag, "%s_%s", entry, modes[i]);
        jit(&s, tag, modes[i], 12, args);
        same_bytes(&plain, &s, tag);
        known_exec(&s, tag);
        jit_free(&s);
    }
    jit_free(&plain);
    snprintf(tag, sizeof tag, "%s_steady", entry);
    double pct = steady_forwarded_pct(tag, "profiled", args);
    cr_assert_leq(pct, 10.0, "%s: %.1f%% reached the driver", entry, pct);
}

Test(tinygrad, extra_through_setparams_v2) { other_entry("v2"); }
Test(tinygrad, extra_through_exec_node_setparams) { other_entry("node"); }

/* Every exec-creating entry point, by every way in: the shim sees the exec
 * and the bytes are the program's own. */
static void way_in(const char *inst, const char *how)
{
    const char *const args[] = {"--inst", inst, "--resolve", how, NULL};
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "%s_%s_plain", inst, how);
    snprintf(t2, sizeof t2, "%s_%s_shim", inst, how);
    struct jit_run plain, shim;
    jit(&plain, t1, NULL, 8, args);
    jit(&shim, t2, "profiled", 8, args);
    same_bytes(&plain, &shim, t2);
    known_exec(&shim, t2);
    cr_assert_gt(summary(&shim.r, "setparams_skipped"), 8 * (NODES - 4), "%s", t2);
    jit_free(&plain);
    jit_free(&shim);
}

Test(tinygrad, instantiate_v2_by_dlsym) { way_in("v2", "dlsym"); }
Test(tinygrad, instantiate_v2_by_procaddr) { way_in("v2", "procaddr"); }
Test(tinygrad, instantiate_v1_linked) { way_in("v1", "link"); }
Test(tinygrad, instantiate_v1_by_dlsym) { way_in("v1", "dlsym"); }
Test(tinygrad, instantiate_v1_by_procaddr) { way_in("v1", "procaddr"); }
Test(tinygrad, instantiate_with_flags_by_dlsym) { way_in("flags", "dlsym"); }
Test(tinygrad, instantiate_with_params_linked) { way_in("params", "link"); }
Test(tinygrad, instantiate_with_params_by_procaddr) { way_in("params", "procaddr"); }

/* The names NVIDIA's driver exports (its link stub) that create, launch,
 * update or re-set an exec are all hooked: a binding that resolves any of
 * them by name gets the shim. */
static const char *const hooked[] = {
#define VR_HOOK(name, base, off, params, args) #name,
#include "../../src/hooks.def"
};

Test(tinygrad, every_exec_entry_point_the_driver_exports_is_hooked)
{
    const char *stub = vr_env_path("VR_CUDA_STUB");
    if (access(stub, R_OK) != 0)
        cr_skip_test("no NVIDIA link stub at %s", stub);
    const char *pe = getenv("PATH");
    char path[4096];
    snprintf(path, sizeof path, "PATH=%s", pe ? pe : "/usr/bin:/bin");
    char *const env[] = {path, (char *)"LC_ALL=C", NULL};
    char *const argv[] = {(char *)"nm", (char *)"--dynamic", (char *)"--defined-only",
                          (char *)stub, NULL};
    struct vr_proc p;
    cr_assert_eq(vr_spawn("stub_nm", argv, env, true, &p), 0);
    cr_assert_eq(p.status, 0, "nm failed:\n%s", p.err.p);
    static const char *const prefixes[] = {"cuGraphInstantiate", "cuGraphLaunch",
                                           "cuGraphExecUpdate", "cuGraphExecKernelNodeSetParams",
                                           "cuGraphExecNodeSetParams"};
    size_t checked = 0;
    char *save = NULL;
    for (char *line = strtok_r(p.out.p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char addr[64], type[8], name[256];
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3)
            continue;
        name[strcspn(name, "@")] = '\0';
        bool wanted = false;
        for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
            wanted = wanted || strncmp(name, prefixes[i], strlen(prefixes[i])) == 0;
        if (!wanted)
            continue;
        bool hooked_here = false;
        for (size_t i = 0; i < sizeof hooked / sizeof hooked[0]; i++)
            hooked_here = hooked_here || strcmp(hooked[i], name) == 0;
        cr_expect(hooked_here, "the driver exports %s; hooks.def does not hook it", name);
        checked++;
    }
    cr_assert_geq(checked, 10, "only %zu such names in %s", checked, stub);
    vr_proc_free(&p);
}
