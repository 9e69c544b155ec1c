/* The RTLD_NEXT probe: libvr_probe_a and libvr_probe_b both define
 * vr_probe_target; a's vr_probe_next looks it up with dlsym(RTLD_NEXT),
 * which must find b's (the next object after the caller, a), whatever
 * dlsym hook is preloaded. */
#ifndef VR_PROBE_H
#define VR_PROBE_H

int vr_probe_target(void);
int vr_probe_next(void);
int vr_probe_b_loaded(void);

#endif
