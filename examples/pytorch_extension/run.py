#!/usr/bin/env python3
"""Builds the cohort PyTorch extension with torch.utils.cpp_extension.load and checks it against
torch: in place on tensors (one per visible GPU), on the default stream and on a side stream.
Prints "pytorch_extension ok"; exits 77 (skipped) where torch or a GPU is missing."""
import os
import sys

root = os.path.dirname(os.path.abspath(__file__))
include = os.path.normpath(os.path.join(root, "..", "..", "include"))

try:
    import torch
    from torch.utils.cpp_extension import load
except ImportError as e:
    print(f"SKIPPED: torch is not importable here ({e})")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIPPED: torch sees no GPU")
    sys.exit(77)

# PyTorch's default nvcc flags stay; cohort needs C++20 and extended lambdas, and must not warn.
ext = load(name="cohort_torch", sources=[os.path.join(root, "cohort_torch.cu")],
           extra_include_paths=[include],
           extra_cuda_cflags=["-std=c++20", "--extended-lambda", "-Werror=all-warnings"],
           extra_cflags=["-std=c++20"], verbose=False)

torch.manual_seed(0)
devices = range(torch.cuda.device_count())
sizes = [1_000_003 + 17 * d for d in devices]


def fresh():
    return [torch.randn(n, device=f"cuda:{d}", dtype=torch.float32) for d, n in zip(devices, sizes)]


def check(label):
    xs = fresh()
    want = [x.double() * 1.5 - 0.25 for x in xs]
    ext.scale_add_(xs, 1.5, -0.25)  # in place, on each GPU's current stream
    for x, w in zip(xs, want):
        err = (x.double() - w).abs().max().item()
        assert err < 1e-5, f"{label}: scale_add_ off by {err}"
    got = ext.sum(xs)
    ref = sum(x.double().sum().item() for x in xs)
    assert abs(got - ref) <= 1e-9 * max(1.0, abs(ref)), f"{label}: sum {got} != {ref}"
    print(f"{label}: {len(xs)} tensor(s), sum {got:.6f} matches torch")


check("default stream")
side = [torch.cuda.Stream(device=d) for d in devices]
with torch.cuda.stream(side[0]):
    # Only device 0's current stream changes here; the rest stay on their default streams.
    check("side stream on GPU 0")
before = torch.cuda.memory_allocated(0)
ext.sum(fresh())
torch.cuda.synchronize()
assert torch.cuda.memory_allocated(0) <= before + sum(sizes) * 4 + (1 << 20), "scratch leaked"
print("pytorch_extension ok")
