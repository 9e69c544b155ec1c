/* hooks_table: the table of wrappers that route.c hands out, one entry per
 * hook of hooks.def: its exported name, the entry point it stands for, the
 * wrapper and where its real function lies in the driver table.
 *
 * It names every exported wrapper, so it sits above the files that define
 * them (interpose.c, absorb.c); route.c, which they call for
 * cuGetProcAddress, reads it through the section's bounds the linker
 * defines (__start_vr_hooks, __stop_vr_hooks) instead of by name. The
 * section holds this one array; being written only by the loader's
 * relocations, it is as writable as the driver table vr_real.
 */
#include <stddef.h>

#include "driver.h"
#include "hook.h"

#define VR_HOOK(name, base, off, params, args) VR_EXPORT CUresult CUDAAPI name params;
#include "hooks.def"

static const struct hook hooks[] __attribute__((section("vr_hooks"), used)) = {
#define VR_HOOK(name, base, off, params, args) \
    {#name, #base, __extension__(void *)name, offsetof(struct vr_driver, name)},
#include "hooks.def"
};
