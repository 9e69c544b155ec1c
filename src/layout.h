/* layout: where a kernel's arguments lie in its parameter buffer.
 *
 * Read from the driver once per function (cuFuncGetParamInfo, or
 * cuKernelGetParamInfo for a CUkernel) and cached for the life of the
 * process; a returned layout is immutable and never freed, so callers may
 * keep the pointer. `words` lists the byte offsets of the 8-byte-aligned
 * words inside every argument of at least 8 bytes: the positions scanned for
 * pointers.
 */
#ifndef VR_LAYOUT_H
#define VR_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

struct vr_layout {
    uint32_t nparams;
    uint32_t bytes;          /* end of the last argument */
    uint32_t nwords;
    const uint32_t *offset;  /* per argument */
    const uint32_t *size;    /* per argument */
    const uint32_t *words;   /* byte offsets of scanned words */
};

/* Returns 0 and the cached layout of func (or of kern when func is NULL),
 * or a negative code when the driver cannot describe it (the node is then
 * opaque). */
int vr_layout_get(CUfunction func, CUkernel kern, const struct vr_layout **out);

/* Builds a layout from (offset, size) pairs: the pure part, for tests. */
int vr_layout_build(const uint32_t *offset, const uint32_t *size, uint32_t nparams,
                    struct vr_layout **out);
void vr_layout_free(struct vr_layout *l);

/* Copies the arguments kernelParams[i] into buf at their offsets. */
void vr_layout_pack(const struct vr_layout *l, void *const *kernelParams, uint8_t *buf);

/* Points params[i] at the arguments inside buf. */
void vr_layout_point(const struct vr_layout *l, uint8_t *buf, void **params);

#endif
