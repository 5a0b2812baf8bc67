"""Host time per call (Python + launch) of the public SSIM-family functions, with the GPU work made negligible.

On a tiny input (1x3x32x32; MS-SSIM 1x3x192x192, near its smallest legal size) the kernels take a few µs, so
N back-to-back calls with no synchronisation in the loop measure what the host spends per call:
  host_us   loop time before the final synchronize / N (time to enqueue; = host cost while the GPU keeps up)
  wall_us   loop time including the final synchronize / N (host_us ~ wall_us: the host is the bottleneck or
            the GPU queue filled; compare with gpu_us)
  gpu_us    device time per call (sum of kernel/memcpy durations from torch.profiler), ops_per_call = how many
  no_sync   the same calls, after warm-up, under torch.cuda.set_sync_debug_mode("error") raised nothing
            (with sync_debug_host_us, the host time under that mode)
Modes: fwd+bwd (x.grad = None; (1 - f(x, y)).backward(), loss providers loss.backward()) and inference
(torch.no_grad()), default arguments. A provider that cannot be imported is recorded as missing.

GPU:  PYTHONPATH=src python benchmarks/bench_host.py [--quick] [--skip NAME,...] [--label before]
(``--label`` tags the JSON, e.g. ``PYTHONPATH=<older checkout>/src ... --label before`` for a before/after pair.)
CPU smoke (numbers meaningless): PYTHONPATH=src python benchmarks/bench_host.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (RESULTS, available, fmt, metadata, optional_import, parse_skip,  # noqa: E402
                      random_pair, smoke_dir, sync, write_json)

Tensor = torch.Tensor
TINY = (1, 3, 32, 32)
MS_TINY = (1, 3, 192, 192)


@dataclass
class Case:
    name: str
    call: str
    shape: tuple[int, ...]
    fn: Callable[[Tensor, Tensor], Tensor]
    infer: Callable[[Tensor, Tensor], Tensor] | None = None
    loss: bool = False


def cases(skip: set[str]) -> tuple[list[Case], dict[str, str]]:
    fusedsim = optional_import("fusedsim")
    peer = optional_import("fused_ssim")
    msssim = optional_import("pytorch_msssim")
    specs: list[tuple[str, object, Callable[[], Case]]] = [
        ("fusedsim.fused_ssim", fusedsim, lambda: Case(
            "fusedsim.fused_ssim", "fusedsim.fused_ssim(x, y)", TINY, fusedsim.fused_ssim)),
        ("fusedsim.ssim", fusedsim, lambda: Case(
            "fusedsim.ssim", "fusedsim.ssim(x, y, data_range=1.0)", TINY,
            lambda x, y: fusedsim.ssim(x, y, data_range=1.0))),
        ("fusedsim.ms_ssim", fusedsim, lambda: Case(
            "fusedsim.ms_ssim", "fusedsim.ms_ssim(x, y, data_range=1.0)", MS_TINY,
            lambda x, y: fusedsim.ms_ssim(x, y, data_range=1.0))),
        ("fusedsim.l1_ssim_loss", fusedsim, lambda: Case(
            "fusedsim.l1_ssim_loss", "fusedsim.l1_ssim_loss(x, y)", TINY,
            lambda x, y, f=fusedsim.l1_ssim_loss: f(x, y), loss=True)),
        ("fused_ssim", peer, lambda: Case(
            "fused_ssim", "fused_ssim.fused_ssim(x, y); inference: train=False", TINY, peer.fused_ssim,
            infer=lambda x, y: peer.fused_ssim(x, y, train=False))),
        ("pytorch_msssim.ssim", msssim, lambda: Case(
            "pytorch_msssim.ssim", "pytorch_msssim.ssim(x, y, data_range=1.0)", TINY,
            lambda x, y: msssim.ssim(x, y, data_range=1.0))),
        # reference point: the host cost of a two-op eager PyTorch loss
        ("torch L1", torch, lambda: Case(
            "torch L1", "(x - y).abs().mean()", TINY, lambda x, y: (x - y).abs().mean(), loss=True)),
    ]
    return available(specs, skip)


def loop_us(fn: Callable[[], object], n: int, repeats: int, device: str,
            stat: Callable[[list[float]], float] = statistics.median) -> tuple[float, float]:
    """(host µs/call, wall µs/call): ``stat`` (median, or min on a noisy host) over ``repeats`` loops of ``n``
    calls."""
    host, wall = [], []
    for _ in range(repeats):
        sync(device)
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        sync(device)
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6 / n)
        wall.append((t2 - t0) * 1e6 / n)
    return stat(host), stat(wall)


def device_work(fn: Callable[[], object], calls: int = 20) -> dict:
    """Device ops per call and their summed duration, from torch.profiler (CUPTI); {} if it cannot run."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
        ops = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        if not ops:  # CUPTI unavailable: say so rather than report zero device work
            return {"profiler_error": "no device events recorded"}
        return {"ops_per_call": len(ops) / calls,
                "gpu_us": sum(e.time_range.elapsed_us() for e in ops) / calls}
    except Exception as exc:
        return {"profiler_error": f"{type(exc).__name__}: {str(exc)[:160]}"}


def sync_check(fn: Callable[[], object], n: int) -> dict:
    """Run ``fn`` under set_sync_debug_mode("error"): any device->host synchronisation raises."""
    torch.cuda.set_sync_debug_mode("error")
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        host = (time.perf_counter() - t0) * 1e6 / n
        return {"no_sync": True, "sync_debug_host_us": host}
    except Exception as exc:
        return {"no_sync": False, "sync_error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    finally:
        torch.cuda.set_sync_debug_mode(0)
        torch.cuda.synchronize()


def measure(case: Case, mode: str, n: int, repeats: int, device: str, stat: str = "median",
            host_only: bool = False) -> dict:
    x, y = random_pair(case.shape, device)
    xg = x.clone().requires_grad_(True)

    def fwd_bwd() -> None:
        xg.grad = None  # as optimizer.zero_grad() does each step
        out = case.fn(xg, y)
        (out if case.loss else 1 - out).backward()

    def infer() -> None:
        with torch.no_grad():
            (case.infer or case.fn)(x, y)

    fn = fwd_bwd if mode == "fwd_bwd" else infer
    row: dict = {"provider": case.name, "call": case.call, "shape": list(case.shape), "mode": mode}
    try:
        for _ in range(20):  # compile, caches, allocator
            fn()
        sync(device)
        row["host_us"], row["wall_us"] = loop_us(fn, n, repeats, device, getattr(statistics, stat, min))
        row["stat"] = stat
        if device == "cuda" and not host_only:
            row.update(device_work(fn))
            row.update(sync_check(fn, max(10, n // 10)))
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls per loop")
    parser.add_argument("--skip", default="", help="comma-separated provider names to skip")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: smoke run of the code")
    parser.add_argument("--calls", type=int, default=None, help="calls per timed loop (default 500, quick 100)")
    parser.add_argument("--label", default="", help="tag for the output file, e.g. 'before' for an older src/")
    parser.add_argument("--repeats", type=int, default=None, help="timed loops per row (default 5, quick 3)")
    parser.add_argument("--stat", default="median", choices=("median", "min"),
                        help="statistic over the loops; min for before/after pairs on a host shared with others")
    parser.add_argument("--host-only", action="store_true", help="skip the profiler and sync-debug passes")
    args = parser.parse_args()
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu --quick for a smoke run")
    n = args.calls or (100 if args.quick else 500)
    repeats = args.repeats or (3 if args.quick else 5)
    meta = {**metadata(device), "dtype": "float32", "calls_per_loop": n, "loops": repeats, "stat": args.stat}
    print(meta, flush=True)
    found, missing = cases(parse_skip(args.skip))
    rows = []
    for case in found:
        for mode in ("fwd_bwd", "infer"):
            rows.append(measure(case, mode, n, repeats, device, args.stat, args.host_only))
            r = rows[-1]
            print(f"  {case.name} {mode}: host {fmt(r.get('host_us'), 1)} µs, wall {fmt(r.get('wall_us'), 1)} µs "
                  f"{r.get('error', '')}", flush=True)
    rows += [{"provider": name, "missing": why} for name, why in missing.items()]
    meta["label"] = args.label
    name = f"host-{args.label}" if args.label else "host"
    path = write_json(name, {"meta": meta, "rows": rows}, os.environ.get("OUT"),
                      RESULTS if device == "cuda" else smoke_dir())
    print(f"\nHost time per call (µs), {device}, no sync in the loop:")
    print(f"{'provider':24} {'mode':8} {'shape':12} {'host':>8} {'wall':>8} {'gpu':>7} {'ops':>5} "
          f"{'no sync':>8} {'host(dbg)':>9}")
    for r in rows:
        if "missing" in r or "error" in r:
            print(f"{r['provider']:24} {r.get('mode', ''):8} {'':12} {r.get('missing') or r.get('error')}")
            continue
        shape = "x".join(map(str, r["shape"]))
        print(f"{r['provider']:24} {r['mode']:8} {shape:12} {fmt(r.get('host_us'), 1):>8} "
              f"{fmt(r.get('wall_us'), 1):>8} {fmt(r.get('gpu_us'), 1):>7} {fmt(r.get('ops_per_call'), 1):>5} "
              f"{fmt(r.get('no_sync')):>8} {fmt(r.get('sync_debug_host_us'), 1):>9}"
              + (f"  {r['sync_error']}" if "sync_error" in r else ""))
    print("wrote", path)


if __name__ == "__main__":
    main()
