"""The shim's counters from inside a Python process (varemap_get_stats via
ctypes), or None without the shim. Shared by the framework programs."""
import ctypes

NAMES = ["setparams_seen", "setparams_skipped", "setparams_forwarded",
         "transition_updates", "launches", "execs_active", "execs_disabled",
         "slices_bound", "rebinds", "rebind_waits", "vmm_bytes", "padding_bytes",
         "vmm_fallbacks", "unrouted_procs"]


def shim_stats():
    try:
        fn = ctypes.CDLL(None).varemap_get_stats
    except (AttributeError, OSError):
        return None
    buf = (ctypes.c_uint64 * 64)()  # room for counters added later
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    if fn(ctypes.byref(buf), ctypes.sizeof(buf)) != 0:
        return None
    return dict(zip(NAMES, (int(v) for v in buf)))
