#!/usr/bin/env python3
"""A JAX program whose jitted step runs as XLA command buffers (CUDA graphs)
and whose inputs change address every step: three input arrays are kept
alive and used in turn, so consecutive steps never see the same buffer and
XLA must update the command buffer's kernel nodes (it skips the update when
every allocation is unchanged). scripts/gpu-check runs it with and without
the shim (XLA_FLAGS enabling command buffers) and compares the results; the
shim's counters say how many cuGraphExecKernelNodeSetParams calls XLA made
and how many graphs it launched.

Last line of stdout: one JSON object
  {"steps", "checksum" (sha256 of the results), "values", "wall_s",
   "backend", "shim" (bool), "stats" (the shim's counters or null)}

Usage: jax_update.py [--steps N] [--width W]
"""
import argparse
import hashlib
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shim_stats import shim_stats  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--width", type=int, default=256)
    a = ap.parse_args()

    import jax
    import jax.numpy as jnp
    import numpy as np

    w = a.width
    rng = np.random.default_rng(4321)
    params = [jnp.asarray(rng.standard_normal((w, w), dtype=np.float32) / np.sqrt(w))
              for _ in range(4)]

    @jax.jit
    def step(params, x, state):
        h = x
        for i, p in enumerate(params):
            h = jnp.tanh(h @ p) * (1.0 - 0.05 * i) + 0.01 * i
        state = 0.9 * state + 0.1 * h
        return state, jnp.sum(h * h)

    inputs = [jnp.asarray(rng.standard_normal((64, w), dtype=np.float32)) for _ in range(3)]
    state = jnp.zeros((64, w), dtype=jnp.float32)
    losses = []
    t0 = time.perf_counter()
    for s in range(a.steps):
        state, loss = step(params, inputs[s % 3], state)  # a new address every step
        losses.append(loss)
    state.block_until_ready()
    wall = time.perf_counter() - t0

    host = [np.asarray(state), np.asarray(jnp.stack(losses))]
    out = {
        "steps": a.steps,
        "checksum": hashlib.sha256(b"".join(v.tobytes() for v in host)).hexdigest(),
        "values": [float(host[0].sum()), float(host[1][-1])],
        "wall_s": wall,
        "backend": jax.default_backend(),
    }
    st = shim_stats()
    out["shim"] = st is not None
    out["stats"] = st
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
