#include "probe.h"

int vr_probe_target(void)
{
    return 2;
}

/* Referenced by probe_next so --as-needed keeps this library in the link
 * order right after libvr_probe_a. */
int vr_probe_b_loaded(void)
{
    return 1;
}
