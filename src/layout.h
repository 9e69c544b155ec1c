/* layout: where a kernel's arguments lie in its parameter buffer.
 *
 * Read from the driver once per function (cuFuncGetParamInfo, or
 * cuKernelGetParamInfo for a CUkernel) and cached until the function's
 * module or library is unloaded: the driver may hand the same handle to
 * another function afterwards, so vr_layout_evict_module/_library drop the
 * cached layouts and the next lookup reads the layout again. `words` lists
 * the byte offsets of the 8-byte-aligned words inside every argument of at
 * least 8 bytes: the positions scanned for pointers.
 *
 * Lifetime rule: a layout returned by vr_layout_get is immutable and is
 * never freed while the process runs. Eviction only unlinks it from the
 * cache and moves it to a retired list that stays reachable until exit, so
 * an exec may keep its `const struct vr_layout *` for as long as it likes,
 * even past the unload of the function's module. (Retired layouts are a few
 * dozen bytes per function per unload.)
 */
#ifndef VR_LAYOUT_H
#define VR_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cuda.h>

/* A comparison unit: `size` bytes at byte `skew` of argument `index`, which
 * lie at `offset` in a packed buffer. */
struct vr_arg {
    uint32_t index, offset, skew, size;
};

struct vr_layout {
    uint32_t nparams;
    uint32_t bytes;          /* end of the last argument */
    bool gaps;               /* padding between arguments (zero in every buffer
                              * the shim packs, so whole buffers compare) */
    uint32_t nwords;
    const uint32_t *offset;  /* per argument */
    const uint32_t *size;    /* per argument */
    const uint32_t *words;   /* byte offsets of scanned words */
    /* The arguments as comparison units, in vr_layout_equal's order: units
     * of 8 bytes (whole arguments, then the chunks of larger ones) up to
     * end8, whole 4-byte arguments up to end4, then the rest (under 8 bytes
     * each) up to end. */
    const struct vr_arg *args, *end8, *end4, *end;
    /* How vr_args_same (node.h) compares: VR_PLAN(n8, n4) for n8 units of 8
     * bytes and n4 of 4 and nothing else, within the bounds below (one
     * dispatch, then straight-line code per unit); VR_PLAN_LOOP for more
     * units; VR_PLAN_ODD when there are units under 4 bytes (the caller then
     * asks vr_layout_equal). Set once per kernel signature by vr_layout_build. */
    uint8_t plan;
};

#define VR_PLAN_MAX8 6u
#define VR_PLAN_MAX4 3u
#define VR_PLAN(n8, n4) ((n8) * (VR_PLAN_MAX4 + 1) + (n4))
#define VR_PLAN_LOOP VR_PLAN(VR_PLAN_MAX8 + 1, 0)
#define VR_PLAN_ODD (VR_PLAN_LOOP + 1)
#define VR_PLANS (VR_PLAN_ODD + 1)

/* Returns 0 and the cached layout of func (or of kern when func is NULL),
 * or a negative code when the driver cannot describe it (the node is then
 * opaque). */
int vr_layout_get(CUfunction func, CUkernel kern, const struct vr_layout **out);

/* The module `mod` (library `lib`) is being unloaded: forget the layouts of
 * its functions (kernels), and of those whose owner the driver could not
 * name. A library's functions (cuKernelGetFunction) belong to modules the
 * shim cannot tie to it, so a library unload forgets every CUfunction
 * layout. The hook calls it before forwarding the unload (no lookup after
 * the unload can find the old layout) and again after it (a lookup made
 * meanwhile by a thread still using the module cached it again). */
void vr_layout_evict_module(CUmodule mod);
void vr_layout_evict_library(CUlibrary lib);

/* Changes at every eviction: a layout a caller cached beside a function
 * handle is still that handle's while the generation it read stays.
 * Inline: a captured kernel checks it (graph_rec.c). */
extern _Atomic uint64_t vr_layout_gen;
static inline uint64_t vr_layout_generation(void)
{
    return atomic_load_explicit(&vr_layout_gen, memory_order_acquire);
}

/* Builds a layout from (offset, size) pairs: the pure part, for tests. */
int vr_layout_build(const uint32_t *offset, const uint32_t *size, uint32_t nparams,
                    struct vr_layout **out);
void vr_layout_free(struct vr_layout *l);

/* Copies the arguments kernelParams[i] into buf at their offsets; the
 * padding between them becomes zero. */
void vr_layout_pack(const struct vr_layout *l, void *const *kernelParams, uint8_t *buf);

/* vr_layout_pack into two buffers at once, unit by unit (fixed-size moves
 * for all but the odd-sized rest): both shadows of a forwarded update. */
void vr_layout_pack2(const struct vr_layout *l, void *const *kernelParams, uint8_t *a, uint8_t *b);

/* The 8- and 4-byte units of kernelParams compared with buf: NULL at the
 * first difference, else the first of the remaining units. Inline and
 * call-free (a call would cost the absorbed path a stack frame). */
static inline const struct vr_arg *vr_layout_equal_units(const struct vr_layout *l,
                                                         void *const *kernelParams,
                                                         const uint8_t *buf)
{
    const struct vr_arg *a = l->args;
    for (; a != l->end8; a++) {
        uint64_t x, y;
        memcpy(&x, (const uint8_t *)kernelParams[a->index] + a->skew, 8);
        memcpy(&y, buf + a->offset, 8);
        if (x != y)
            return NULL;
    }
    for (; a != l->end4; a++) {
        uint32_t x, y;
        memcpy(&x, kernelParams[a->index], 4);
        memcpy(&y, buf + a->offset, 4);
        if (x != y)
            return NULL;
    }
    return a;
}

/* Whether the units from `a` on (each under 8 bytes) are equal. */
bool vr_layout_equal_rest(const struct vr_layout *l, void *const *kernelParams,
                          const uint8_t *buf, const struct vr_arg *a);

/* True when every argument kernelParams[i] equals its bytes in buf. */
static inline bool vr_layout_equal(const struct vr_layout *l, void *const *kernelParams,
                                   const uint8_t *buf)
{
    const struct vr_arg *a = vr_layout_equal_units(l, kernelParams, buf);
    return a && (a == l->end || vr_layout_equal_rest(l, kernelParams, buf, a));
}

/* vr_layout_equal without the odd-sized units: false when there are any
 * (the caller then asks vr_layout_equal). */
static inline bool vr_layout_equal_fast(const struct vr_layout *l, void *const *kernelParams,
                                        const uint8_t *buf)
{
    return vr_layout_equal_units(l, kernelParams, buf) == l->end;
}

/* Points params[i] at the arguments inside buf. */
void vr_layout_point(const struct vr_layout *l, uint8_t *buf, void **params);

/* In a forked child: the cache's lock starts free. */
void vr_layout_after_fork(void);

#endif
