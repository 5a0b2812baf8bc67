"""CPU path of integer_ssim (libvmaf ``ssim``) at 1080p 8-bit: frames/s, and per core, with 1..N threads.

    python benchmarks/bench_vmaf_cpu.py [--frames 8] [--threads 1 2] [--twin]

Times the numba kernel (the CPU path ``fusedsim.vmaf.integer_ssim`` takes) on random 1080p frames after one
warm-up call (JIT compile / cache load), checks its output ``==`` the PyTorch twin on the first frame, and with
``--twin`` also times the twin.
"""

from __future__ import annotations

import argparse
import os
import time

import numba
import torch

from fusedsim.vmaf.integer_ssim_cpu import integer_ssim_numba
from fusedsim.vmaf.integer_ssim_twin import integer_ssim_ref


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, os.cpu_count() or 1])
    parser.add_argument("--twin", action="store_true", help="also time the PyTorch twin (slow)")
    args = parser.parse_args()

    gen = torch.Generator().manual_seed(0)
    shape = (args.frames, 1080, 1920)
    ref = torch.randint(0, 256, shape, generator=gen).to(torch.uint8)
    dist = (ref.to(torch.int16) + torch.randint(-20, 21, shape, generator=gen)).clamp(0, 255).to(torch.uint8)

    integer_ssim_numba(ref[:1], dist[:1], 8)  # compile or load the cache
    assert torch.equal(integer_ssim_numba(ref[:1], dist[:1], 8), integer_ssim_ref(ref[:1], dist[:1], 8))
    print(f"integer_ssim CPU (numba {numba.__version__}), {args.frames} frames 1920x1080 8-bit, "
          f"{os.cpu_count()} CPUs")
    for threads in sorted(set(args.threads)):
        numba.set_num_threads(threads)
        integer_ssim_numba(ref, dist, 8)  # warm the thread pool
        t0 = time.perf_counter()
        integer_ssim_numba(ref, dist, 8)
        dt = time.perf_counter() - t0
        fps = args.frames / dt
        print(f"  numba  threads={threads}: {fps:7.2f} frames/s  {fps / threads:7.2f} frames/s per core  "
              f"({dt / args.frames * 1e3:.1f} ms/frame)")
        one = ref[:1], dist[:1]
        t0 = time.perf_counter()
        integer_ssim_numba(*one, 8)
        dt1 = time.perf_counter() - t0
        print(f"           single frame (row bands): {1 / dt1:7.2f} frames/s")
    if args.twin:
        torch.set_num_threads(1)
        t0 = time.perf_counter()
        integer_ssim_ref(ref[:1], dist[:1], 8)
        dt = time.perf_counter() - t0
        print(f"  twin   threads=1: {1 / dt:7.2f} frames/s ({dt:.2f} s/frame)")


if __name__ == "__main__":
    main()
