#!/usr/bin/env python3
"""PyTorch CUDA graphs under the shim: a small model captured once with
torch.cuda.CUDAGraph and replayed every step on new data copied into its
static input (the framework pattern: the graph's buffers never move, so the
shim should find nothing to update and nothing to break). Also asks what
cudaIpcGetMemHandle returns on a tensor's memory: VMM-backed memory cannot be
exported (a documented limit of the shim), so with the shim it may fail.

Last line of stdout: one JSON object
  {"steps", "replays", "checksum" (sha256 of every step's output), "ipc"
   (the cudaError name cudaIpcGetMemHandle returned), "shim", "stats"}

Usage: torch_graph.py [--steps N]
"""
import argparse
import ctypes
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from shim_stats import shim_stats  # noqa: E402


def ipc_result(t):
    """cudaIpcGetMemHandle on t's memory, through the runtime torch loaded."""
    path = None
    with open("/proc/self/maps") as f:
        for line in f:
            if "libcudart.so" in line:
                path = line.split()[-1]
                break
    if path is None:  # a statically linked runtime: ask torch to export it
        try:
            t.untyped_storage()._share_cuda_()
            return "cudaSuccess"
        except Exception as e:  # noqa: BLE001 - the message is the answer
            return "error: " + str(e).splitlines()[0][:80]
    rt = ctypes.CDLL(path)
    handle = (ctypes.c_char * 64)()
    rt.cudaIpcGetMemHandle.restype = ctypes.c_int
    rt.cudaIpcGetMemHandle.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    err = rt.cudaIpcGetMemHandle(ctypes.byref(handle), ctypes.c_void_p(t.data_ptr()))
    rt.cudaGetErrorName.restype = ctypes.c_char_p
    rt.cudaGetErrorName.argtypes = [ctypes.c_int]
    rt.cudaGetLastError()  # not sticky: clear it for the program
    return rt.cudaGetErrorName(err).decode()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    a = ap.parse_args()

    import torch

    torch.manual_seed(7)
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 512), torch.nn.Tanh()).to(dev)
    static_in = torch.zeros(256, 512, device=dev)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm up on a side stream, as the docs show
            model(static_in)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        static_out = model(static_in)

    h = hashlib.sha256()
    gen = torch.Generator(device="cpu").manual_seed(11)
    for _ in range(a.steps):
        static_in.copy_(torch.randn(256, 512, generator=gen).to(dev))
        g.replay()
        h.update(static_out.cpu().numpy().tobytes())
    torch.cuda.synchronize()

    big = torch.empty(8 << 20, dtype=torch.uint8, device=dev)  # 8 MiB: VMM-sized
    out = {"steps": a.steps, "replays": a.steps, "checksum": h.hexdigest(),
           "ipc": ipc_result(big)}
    st = shim_stats()
    out["shim"] = st is not None
    out["stats"] = st
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
