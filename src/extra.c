#include "extra.h"

#include <string.h>

#include "driver.h"

/* More pairs than any well-formed array holds: a corrupt one ends the
 * walk instead of running off. */
#define VR_EXTRA_PAIRS 8

bool vr_extra_read(void *const *extra, const struct vr_layout *l, struct vr_extra *x)
{
    const void *buf = NULL;
    const size_t *size = NULL;
    bool seen_buf = false;
    for (size_t i = 0;; i += 2) {
        if (i / 2 >= VR_EXTRA_PAIRS)
            return false;
        void *key = extra[i];
        if (key == CU_LAUNCH_PARAM_END)
            break;
        if (key == CU_LAUNCH_PARAM_BUFFER_POINTER && !seen_buf) {
            seen_buf = true;
            buf = extra[i + 1];
        } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE && !size) {
            size = extra[i + 1];
            if (!size)
                return false;
        } else {
            return false;
        }
    }
    if (!buf || !size || *size < l->bytes || *size > VR_EXTRA_MAX)
        return false;
    x->buf = buf;
    x->size = *size;
    return true;
}

void vr_extra_pack(const struct vr_layout *l, const struct vr_extra *x, uint8_t *buf)
{
    if (l->gaps)
        memset(buf, 0, l->bytes);
    for (uint32_t i = 0; i < l->nparams; i++)
        memcpy(buf + l->offset[i], x->buf + l->offset[i], l->size[i]);
}

CUresult vr_forward_extra(CUgraphExec exec, CUgraphNode node, enum vr_sp_entry entry,
                          const void *params, const struct vr_extra *x,
                          const struct vr_layout *l, const uint8_t *args)
{
    uint8_t buf[VR_EXTRA_MAX];
    size_t size = x->size;
    memcpy(buf, x->buf, size);
    for (uint32_t i = 0; i < l->nparams; i++)
        memcpy(buf + l->offset[i], args + l->offset[i], l->size[i]);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    switch (entry) {
    case VR_SP_V1: {
        CUDA_KERNEL_NODE_PARAMS_v1 p = *(const CUDA_KERNEL_NODE_PARAMS_v1 *)params;
        p.extra = extra;
        return vr_real.cuGraphExecKernelNodeSetParams(exec, node, &p);
    }
    case VR_SP_V2: {
        CUDA_KERNEL_NODE_PARAMS_v2 p = *(const CUDA_KERNEL_NODE_PARAMS_v2 *)params;
        p.extra = extra;
        return vr_real.cuGraphExecKernelNodeSetParams_v2(exec, node, &p);
    }
    default: {
        CUgraphNodeParams p = *(const CUgraphNodeParams *)params;
        p.kernel.extra = extra;
        return vr_real.cuGraphExecNodeSetParams(exec, node, &p);
    }
    }
}
