/* Prints what libvr_probe_a's dlsym(RTLD_NEXT, "vr_probe_target") finds:
 * 2 (libvr_probe_b's) is right. */
#include <stdio.h>

#include "probe.h"

int main(void)
{
    if (!vr_probe_b_loaded())
        return 1;
    printf("%d\n", vr_probe_next());
    return 0;
}
