/* hook: what the files of the hook layer share (interpose.c holds the
 * exported wrappers, init and routing; hooks_mem.c and hooks_graph.c the
 * bodies of most hooks). Every hook of hooks.def has a body vr_on_<name>,
 * called by its wrapper under the shim's guard with the shim initialized;
 * hidden like everything but the exports.
 */
#ifndef VR_HOOK_H
#define VR_HOOK_H

#include <cuda.h>

#define VR_HOOK(name, base, off, params, args) CUresult vr_on_##name params;
#include "hooks.def"

/* The log's `start` event, once, at the first hook that runs with a
 * context (it asks the device whether VMM is supported). */
void vr_hook_note_start(void);

#endif
