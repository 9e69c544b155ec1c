#include <dlfcn.h>
#include <string.h>

#include "probe.h"

int vr_probe_target(void)
{
    return 1;
}

/* -1 when the lookup found nothing: a hook that substituted its own frame
 * for ours would search after the wrong object. */
int vr_probe_next(void)
{
    void *sym = dlsym(RTLD_NEXT, "vr_probe_target");
    int (*fn)(void);
    if (!sym)
        return -1;
    memcpy(&fn, &sym, sizeof sym);
    return fn();
}
