#!/usr/bin/env python3
"""A short JAX program whose XLA executable runs as command buffers (CUDA
graphs). scripts/gpu-check runs it with and without the shim, with XLA_FLAGS
enabling command buffers, and compares the printed results.

Each step feeds a freshly computed input (new device buffers, so XLA updates
the command buffer's node parameters) through a jitted chain of fusions and
matmuls. The last line of stdout is one JSON object:
  {"steps", "checksum" (sha256 of the final arrays' bytes), "values" (a few
   floats), "wall_s", "backend", "devices", "shim" (bool), "stats" (the shim's
   counters when loaded)}

Usage: jax_cmdbuf.py [--steps N] [--width W]
"""
import argparse
import ctypes
import hashlib
import json
import sys
import time


def shim_stats():
    """The shim's counters via varemap_get_stats, or None without the shim."""
    names = ["setparams_seen", "setparams_skipped", "setparams_forwarded",
             "transition_updates", "launches", "execs_active", "execs_disabled",
             "slices_bound", "rebinds", "rebind_waits", "vmm_bytes", "padding_bytes",
             "vmm_fallbacks", "unrouted_procs"]
    try:
        fn = ctypes.CDLL(None).varemap_get_stats
    except (AttributeError, OSError):
        return None
    buf = (ctypes.c_uint64 * len(names))()
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    fn.restype = ctypes.c_int
    if fn(ctypes.byref(buf), ctypes.sizeof(buf)) != 0:
        return None
    return dict(zip(names, (int(v) for v in buf)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--width", type=int, default=256)
    a = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np

    w = a.width
    rng = np.random.default_rng(1234)
    params = [jnp.asarray(rng.standard_normal((w, w), dtype=np.float32) * (1.0 / np.sqrt(w)))
              for _ in range(6)]
    biases = [jnp.asarray(rng.standard_normal((w,), dtype=np.float32) * 0.1) for _ in range(6)]

    @jax.jit
    def step(params, biases, x, state):
        h = x
        for i, (p, b) in enumerate(zip(params, biases)):
            h = jnp.tanh(h @ p + b) * (1.0 - 0.05 * i) + 0.01 * i
        state = 0.9 * state + 0.1 * h
        return h, state, jnp.sum(h * h)

    x0 = jnp.asarray(rng.standard_normal((64, w), dtype=np.float32))
    state = jnp.zeros((64, w), dtype=jnp.float32)
    losses = []
    t0 = time.perf_counter()
    for s in range(a.steps):
        x = x0 * (1.0 + 0.01 * (s % 7))  # a new input buffer every step
        h, state, loss = step(params, biases, x, state)
        losses.append(loss)
    h.block_until_ready()
    wall = time.perf_counter() - t0

    host = [np.asarray(h), np.asarray(state), np.asarray(jnp.stack(losses))]
    digest = hashlib.sha256(b"".join(v.tobytes() for v in host)).hexdigest()
    out = {
        "steps": a.steps,
        "checksum": digest,
        "values": [float(host[0].sum()), float(host[1].sum()), float(host[2][-1])],
        "wall_s": wall,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }
    st = shim_stats()
    out["shim"] = st is not None
    out["stats"] = st
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
