/* extra: kernel arguments passed through `extra` instead of kernelParams.
 *
 * A kernel node or SetParams may hand the driver one buffer of argument
 * bytes (CU_LAUNCH_PARAM_BUFFER_POINTER, CU_LAUNCH_PARAM_BUFFER_SIZE,
 * CU_LAUNCH_PARAM_END), laid out as the function's parameter buffer is:
 * argument i at its cuFuncGetParamInfo offset. Bindings that pack arguments
 * themselves (tinygrad, ctypes-based frameworks) pass every kernel's
 * arguments this way. The shim reads such a buffer with the function's
 * layout, exactly as it reads kernelParams, and sends a translated update in
 * the same form: a copy of the program's buffer (same size, padding kept)
 * with the arguments replaced; the program's buffer is never written.
 */
#ifndef VR_EXTRA_H
#define VR_EXTRA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cuda.h>

#include "layout.h"
#include "node.h"

/* The largest buffer the shim reads (the classic 4 KiB parameter limit): a
 * translated copy lives on the stack. A larger one leaves the node opaque. */
#define VR_EXTRA_MAX 4096

struct vr_extra {
    const uint8_t *buf;
    size_t size;
};

/* Whether `extra` passes one readable argument buffer for layout l: exactly
 * one BUFFER_POINTER (not NULL) and one BUFFER_SIZE (its size_t at least
 * l->bytes and at most VR_EXTRA_MAX) before CU_LAUNCH_PARAM_END, nothing
 * else. Fills *x when it does. */
bool vr_extra_read(void *const *extra, const struct vr_layout *l, struct vr_extra *x);

/* Copies the arguments of the buffer x->buf into buf at the same offsets;
 * the padding between them becomes zero (as vr_layout_pack's). */
void vr_extra_pack(const struct vr_layout *l, const struct vr_extra *x, uint8_t *buf);

/* The program's struct with its `extra` replaced by a buffer that is the
 * program's (x) with layout l's arguments taken from args. */
CUresult vr_forward_extra(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                          const void *params, const struct vr_extra *x,
                          const struct vr_layout *l, const uint8_t *args);

#endif
