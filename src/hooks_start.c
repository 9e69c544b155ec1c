/* hooks_start: the decision log's `start` event, once per process. It sits
 * below every hook file: the memory and graph hooks note it at their first
 * call with a context, interpose.c at exit (without one) and after a fork,
 * and none of them calls up to the exported wrappers for it.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "alloc.h"
#include "config.h"
#include "driver.h"
#include "hook.h"
#include "log.h"

/* The settings the event reports: interpose.c's, copied once at init. */
static struct vr_config cfg;
static atomic_bool started;

void vr_hook_start_configure(const struct vr_config *c)
{
    cfg = *c;
}

/* A forked child writes its own `start` in its own log. */
void vr_hook_start_forget(void)
{
    atomic_store(&started, false);
}

/* `start` needs the device for vmm_supported, so it waits for the first
 * hook that runs with a context; at exit without one, it says false. */
void vr_hook_emit_start(bool ask_device)
{
    if (atomic_exchange(&started, true) || !vr_log_enabled(VR_LEVEL_INFO))
        return; /* without a log, no query the program did not make */
    int version = 0;
    if (vr_real.cuDriverGetVersion)
        vr_real.cuDriverGetVersion(&version);
    char buf[512];
    struct vr_jw w;
    vr_jw_begin(&w, buf, sizeof buf, "start");
    vr_jw_str(&w, "mode", vr_mode_name(cfg.mode));
    vr_jw_u64(&w, "profile_launches", cfg.profile_launches);
    vr_jw_i64(&w, "driver_version", version);
    vr_jw_bool(&w, "vmm_supported", ask_device && vr_alloc_vmm_supported());
    vr_jw_u64(&w, "vmm_min_bytes", cfg.vmm_min_bytes);
    vr_jw_u64(&w, "max_padding", cfg.max_padding);
    vr_log_emit(&w, VR_LEVEL_INFO);
}

void vr_hook_note_start(void)
{
    if (!atomic_load_explicit(&started, memory_order_relaxed))
        vr_hook_emit_start(true);
}
