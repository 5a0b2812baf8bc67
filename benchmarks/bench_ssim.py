"""SSIM / MS-SSIM / L1+SSIM benchmark of what users call: default arguments, peers side by side in one process.

Parts (``--parts``, default all):
  table  per-call time of SSIM providers at the shapes users train and score on: forward+backward (gradient for
         img1 only, ``(1 - f(x, y)).backward()``; loss providers ``loss.backward()``), inference under
         ``torch.no_grad()``, peak extra memory of forward+backward, and each provider's value; each time is the
         median of ``--rounds`` rounds (default 3) that visit the providers in turn, so host drift hits all alike
  ms     the same for MS-SSIM
  train  a 3DGS-like training step (parameter image -> 1x1 conv -> sigmoid -> 0.8 L1 + 0.2 (1 - SSIM) -> Adam),
         wall clock over many steps with one synchronize at the end; "SSIM share" = step - L1-only step

Every provider is called exactly as its documentation shows, with default arguments (fused-ssim's inference
uses its documented ``train=False``). A peer that cannot be imported or cannot run a case is recorded, not fatal.
Ratios are peers' time over fusedsim's time measured in the same run (> 1: fusedsim is faster).

GPU:  PYTHONPATH=src python benchmarks/bench_ssim.py [--quick] [--skip NAME,...] [--parts table,ms,train]
CPU smoke (proves the code paths, numbers meaningless):
      PYTHONPATH=src python benchmarks/bench_ssim.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (RESULTS, available, fmt, kernel_times_us, median_ms, metadata,  # noqa: E402
                      optional_import, parse_skip, peak_extra_mib, random_pair, run_stamp, smoke_dir, sync, write_json)

Tensor = torch.Tensor
Shape = tuple[int, ...]

SSIM_SHAPES: list[Shape] = [(1, 3, 1080, 1920), (1, 3, 800, 800), (1, 3, 546, 980), (8, 3, 512, 512),
                            (1, 1, 4096, 4096), (5, 5, 1080, 1920), (1, 1, 128, 128, 128)]
MS_SHAPES: list[Shape] = [(1, 3, 1080, 1920), (8, 3, 512, 512)]
TRAIN_SIZES: list[tuple[int, int]] = [(1080, 1920), (800, 800)]  # (H, W)
QUICK_SSIM_SHAPES = [(1, 3, 1080, 1920), (1, 3, 800, 800), (1, 1, 128, 128, 128)]
CPU_SSIM_SHAPES = [(1, 3, 48, 64), (2, 1, 40, 40), (1, 1, 16, 16, 16)]  # smoke only
CPU_MS_SHAPES = [(1, 3, 192, 192)]
CPU_TRAIN_SIZES = [(48, 64)]

PEER_SOURCE = Path(__file__).resolve().parents[1] / ".peers" / "fused-ssim" / "SOURCE_COMMIT"


# ------------------------------------------------------------------------------------------------- providers
@dataclass
class Provider:
    name: str
    call: str  # the call as a user writes it (recorded with every row)
    fn: Callable[[Tensor, Tensor], Tensor]  # returns a scalar; graph recorded when grad is enabled
    infer: Callable[[Tensor, Tensor], Tensor] | None = None  # inference call, when it differs from fn
    loss: bool = False  # fn returns a loss (backward of fn itself; no inference timing)
    dims: tuple[int, ...] = (4, 5)  # input ranks it accepts


def l1(x: Tensor, y: Tensor) -> Tensor:
    return (x - y).abs().mean()


def ssim_providers(skip: set[str]) -> tuple[list[Provider], dict[str, str]]:
    """SSIM-family providers for the per-call table, and name -> reason for those that cannot be loaded."""
    specs: list[tuple[str, object, Callable[[], Provider]]] = []
    fusedsim = optional_import("fusedsim")
    peer = optional_import("fused_ssim")
    msssim = optional_import("pytorch_msssim")
    tm = optional_import("torchmetrics.functional.image")

    def add(name: str, module: object, build: Callable[[], Provider]) -> None:
        specs.append((name, module, build))

    def peer_ssim(x: Tensor, y: Tensor, **kw: object) -> Tensor:
        return (peer.fused_ssim3d if x.dim() == 5 else peer.fused_ssim)(x, y, **kw)

    add("fusedsim.fused_ssim", fusedsim, lambda: Provider(
        "fusedsim.fused_ssim", "fusedsim.fused_ssim(x, y)", fusedsim.fused_ssim))
    add("fused_ssim", peer, lambda: Provider(
        "fused_ssim", "fused_ssim.fused_ssim(x, y) (3-D: fused_ssim3d); inference: train=False", peer_ssim,
        infer=lambda x, y: peer_ssim(x, y, train=False)))
    add("fusedsim.ssim", fusedsim, lambda: Provider(
        "fusedsim.ssim", "fusedsim.ssim(x, y, data_range=1.0)",
        lambda x, y: fusedsim.ssim(x, y, data_range=1.0)))
    add("pytorch_msssim.ssim", msssim, lambda: Provider(
        "pytorch_msssim.ssim", "pytorch_msssim.ssim(x, y, data_range=1.0)",
        lambda x, y: msssim.ssim(x, y, data_range=1.0)))
    add("torchmetrics.ssim", tm, lambda: Provider(
        "torchmetrics.ssim", "structural_similarity_index_measure(x, y, data_range=1.0)",
        lambda x, y, f=tm.structural_similarity_index_measure: f(x, y, data_range=1.0)))
    # L1 + SSIM losses (what 3DGS trainers compute): the fused loss against the unfused compositions
    add("fusedsim.l1_ssim_loss", fusedsim, lambda: Provider(
        "fusedsim.l1_ssim_loss", "fusedsim.l1_ssim_loss(x, y)",
        lambda x, y, f=fusedsim.l1_ssim_loss: f(x, y), loss=True))
    add("fusedsim L1+SSIM unfused", fusedsim, lambda: Provider(
        "fusedsim L1+SSIM unfused", "0.8*(x-y).abs().mean() + 0.2*(1-fusedsim.fused_ssim(x, y))",
        lambda x, y: 0.8 * l1(x, y) + 0.2 * (1 - fusedsim.fused_ssim(x, y)), loss=True))
    add("fused_ssim L1+SSIM unfused", peer, lambda: Provider(
        "fused_ssim L1+SSIM unfused", "0.8*(x-y).abs().mean() + 0.2*(1-fused_ssim.fused_ssim(x, y))",
        lambda x, y: 0.8 * l1(x, y) + 0.2 * (1 - peer_ssim(x, y)), loss=True))
    return available(specs, skip)


def ms_providers(skip: set[str]) -> tuple[list[Provider], dict[str, str]]:
    providers: list[Provider] = []
    missing: dict[str, str] = {}
    specs = [
        ("fusedsim.ms_ssim", "fusedsim", "fusedsim.ms_ssim(x, y, data_range=1.0)", "ms_ssim"),
        ("pytorch_msssim.ms_ssim", "pytorch_msssim", "pytorch_msssim.ms_ssim(x, y, data_range=1.0)", "ms_ssim"),
        ("torchmetrics.ms_ssim", "torchmetrics.functional.image",
         "multiscale_structural_similarity_index_measure(x, y, data_range=1.0)",
         "multiscale_structural_similarity_index_measure"),
    ]
    for name, module_name, call, attr in specs:
        if name in skip:
            continue
        module = optional_import(module_name)
        fn = module if isinstance(module, str) else getattr(module, attr, f"no attribute {attr}")
        if isinstance(fn, str):
            missing[name] = fn
        else:
            providers.append(Provider(name, call, lambda x, y, f=fn: f(x, y, data_range=1.0), dims=(4,)))
    return providers, missing


# Same-run comparisons: (kind, ours, theirs, label). Ratio = theirs / ours, so > 1 means ours is faster.
RATIOS = [
    ("ssim", "fusedsim.fused_ssim", "fused_ssim", "fusedsim.fused_ssim vs fused-ssim"),
    ("ssim", "fusedsim.ssim", "pytorch_msssim.ssim", "fusedsim.ssim vs pytorch-msssim"),
    ("ssim", "fusedsim.ssim", "torchmetrics.ssim", "fusedsim.ssim vs torchmetrics"),
    ("ssim", "fusedsim.l1_ssim_loss", "fusedsim.fused_ssim", "l1_ssim_loss vs fusedsim.fused_ssim alone"),
    ("ssim", "fusedsim.l1_ssim_loss", "fusedsim L1+SSIM unfused", "l1_ssim_loss vs fusedsim unfused"),
    ("ssim", "fusedsim.l1_ssim_loss", "fused_ssim L1+SSIM unfused", "l1_ssim_loss vs fused-ssim unfused"),
    ("ms_ssim", "fusedsim.ms_ssim", "pytorch_msssim.ms_ssim", "fusedsim.ms_ssim vs pytorch-msssim"),
    ("ms_ssim", "fusedsim.ms_ssim", "torchmetrics.ms_ssim", "fusedsim.ms_ssim vs torchmetrics"),
]
# Same-function pairs checked for agreement (value and gradient of img1) at every shape.
AGREEMENT = [("fusedsim.fused_ssim", "fused_ssim"), ("fusedsim.ssim", "pytorch_msssim.ssim"),
             ("fusedsim.l1_ssim_loss", "fusedsim L1+SSIM unfused"), ("fusedsim.ms_ssim", "pytorch_msssim.ms_ssim")]


# ------------------------------------------------------------------------------------------- per-call table
# Memory bandwidth of the GPUs the floor model knows: the H200's device copy as measured on the lent machines,
# the H100 SXM's HBM3 peak from its data sheet (not measured here, so its byte floors are optimistic)
FLOOR_BYTES_PER_S = {"H200": 4.3e12, "H100": 3.35e12}


def floor_ms(shape: Shape, train: bool, device: str) -> float | None:
    """Memory/arithmetic floor of fused SSIM (fp32, 11 taps) on an H200 or H100, from the model in NOTES.md:
    bytes 8 B/px (inference) or 20 B/px (fwd+bwd) at the chip's bandwidth (``FLOOR_BYTES_PER_S``); FP
    instructions 55·p+25 per px forward, 2·(55·p+25)+33·p+34 fwd+bwd (p = spatial passes) at 128 lanes/SM at
    1.98 GHz. None on other GPUs: the constants are these chips'."""
    name = torch.cuda.get_device_name(0) if device == "cuda" else ""
    bandwidth = next((b for chip, b in FLOOR_BYTES_PER_S.items() if chip in name), None)
    if bandwidth is None:
        return None
    px = 1
    for s in shape:
        px *= s
    passes = len(shape) - 2
    fwd_instr = 55 * passes + 25
    instr = (2 * fwd_instr + 33 * passes + 34) if train else fwd_instr
    lanes_per_s = torch.cuda.get_device_properties(0).multi_processor_count * 128 * 1.98e9
    return 1e3 * max(px * (20 if train else 8) / bandwidth, px * instr / lanes_per_s)


def time_provider(p: Provider, x: Tensor, y: Tensor, device: str, rep_ms: int, memory: bool = True) -> dict:
    xg = x.clone().requires_grad_(True)

    def fwd_bwd() -> None:
        out = p.fn(xg, y)
        (out if p.loss else 1 - out).backward()

    def infer() -> Tensor:
        with torch.no_grad():
            return (p.infer or p.fn)(x, y)

    row: dict = {"call": p.call}
    try:
        row["value"] = float(infer())
        row["fwd_bwd_ms"] = median_ms(fwd_bwd, 25, rep_ms, grad_to_none=[xg], device=device)
        xg.grad = None  # the gradient's allocation counts, as in a training step after zero_grad()
        if memory:
            row["peak_extra_mib"] = peak_extra_mib(fwd_bwd, device)
        if not p.loss:
            row["infer_ms"] = median_ms(infer, 25, rep_ms, device=device)
    except Exception as exc:  # a provider that cannot run a case is recorded, not fatal
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return row


def time_interleaved(providers: list[Provider], x: Tensor, y: Tensor, device: str, rep_ms: int,
                     rounds: int) -> dict[str, dict]:
    """Each provider's row, its times the median over ``rounds`` rounds that visit the providers in turn: the
    host's speed drifts by up to 2x within a run on the GPU machine, and interleaving makes the drift hit every
    provider alike (each round's times are kept in ``*_rounds``)."""
    rows: dict[str, dict] = {}
    for r in range(rounds):
        for p in providers:
            row = time_provider(p, x, y, device, rep_ms, memory=r == 0)
            if r == 0:
                rows[p.name] = row
                for mode in ("fwd_bwd_ms", "infer_ms"):
                    if mode in row:
                        row[mode.replace("_ms", "_rounds")] = [row[mode]]
                continue
            for mode in ("fwd_bwd_ms", "infer_ms"):
                if mode in row and mode.replace("_ms", "_rounds") in rows[p.name]:
                    rows[p.name][mode.replace("_ms", "_rounds")].append(row[mode])
    for row in rows.values():
        for mode in ("fwd_bwd_ms", "infer_ms"):
            if mode.replace("_ms", "_rounds") in row:
                row[mode] = statistics.median(row[mode.replace("_ms", "_rounds")])
    return rows


def agreement(a: Provider, b: Provider, x: Tensor, y: Tensor) -> dict:
    """|value_a - value_b| and ||grad_a - grad_b|| / ||grad_b|| for the gradient of img1."""
    try:
        out = []
        for p in (a, b):
            xg = x.clone().requires_grad_(True)
            value = p.fn(xg, y)
            out.append((float(value.detach()), torch.autograd.grad(value, xg)[0].double()))
        (va, ga), (vb, gb) = out
        return {"pair": [a.name, b.name], "value_abs_diff": abs(va - vb),
                "grad_rel_diff": float((ga - gb).norm() / gb.norm().clamp_min(1e-300))}
    except Exception as exc:
        return {"pair": [a.name, b.name], "error": f"{type(exc).__name__}: {str(exc)[:200]}"}


def run_table(kind: str, shapes: list[Shape], providers: list[Provider], missing: dict[str, str], device: str,
              rep_ms: int, rounds: int = 3) -> tuple[list[dict], list[dict]]:
    rows: list[dict] = []
    checks: list[dict] = []
    for seed, shape in enumerate(shapes):
        x, y = random_pair(shape, device, seed=seed)  # fresh data per shape
        here = [p for p in providers if len(shape) in p.dims]
        timed = time_interleaved(here, x, y, device, rep_ms, rounds)
        for p in here:
            row = {"kind": kind, "shape": list(shape), "dtype": "float32", "provider": p.name, **timed[p.name]}
            if p.name in ("fusedsim.fused_ssim", "fusedsim.ssim"):
                row["floor_fwd_bwd_ms"] = floor_ms(shape, True, device)
                row["floor_infer_ms"] = floor_ms(shape, False, device)
            rows.append(row)
            print(f"  {kind} {'x'.join(map(str, shape))} {p.name}: fwd+bwd {fmt(row.get('fwd_bwd_ms'))} ms, "
                  f"infer {fmt(row.get('infer_ms'))} ms {row.get('error', '')}", flush=True)
            if device == "cuda":
                torch.cuda.empty_cache()
        by_name = {p.name: p for p in providers if len(shape) in p.dims}
        for a, b in AGREEMENT:
            if a in by_name and b in by_name:
                checks.append({"kind": kind, "shape": list(shape), **agreement(by_name[a], by_name[b], x, y)})
        for name, why in missing.items():
            rows.append({"kind": kind, "shape": list(shape), "dtype": "float32", "provider": name, "missing": why})
        del x, y
    return rows, checks


def ratio_rows(rows: list[dict]) -> list[dict]:
    index = {(r["kind"], tuple(r["shape"]), r["provider"]): r for r in rows}
    out = []
    for kind, ours, theirs, label in RATIOS:
        for (k, shape, name), r in index.items():
            other = index.get((k, shape, theirs))
            if k != kind or name != ours or other is None:
                continue
            entry = {"kind": kind, "shape": list(shape), "comparison": label}
            for mode in ("fwd_bwd_ms", "infer_ms"):
                if r.get(mode) and other.get(mode):
                    entry[mode.replace("_ms", "_x")] = other[mode] / r[mode]
                    # per round (the two ran back to back): robust to the host's drift between rounds
                    pairs = list(zip(other.get(mode.replace("_ms", "_rounds"), []),
                                     r.get(mode.replace("_ms", "_rounds"), [])))
                    if len(pairs) > 1:
                        entry[mode.replace("_ms", "_x_paired")] = statistics.median(a / b for a, b in pairs)
                        entry[mode.replace("_ms", "_rounds_faster")] = f"{sum(a > b for a, b in pairs)}/{len(pairs)}"
            if len(entry) > 3:
                out.append(entry)
    return out


# --------------------------------------------------------------------------------------------- training loop
def make_step(loss_fn: Callable[[Tensor, Tensor], Tensor], h: int, w: int, device: str) -> Callable[[], None]:
    """One 3DGS-like step: parameter image -> 1x1 conv (3->3) -> sigmoid -> loss vs a fixed target -> Adam."""
    torch.manual_seed(0)
    gen = torch.Generator(device=device).manual_seed(1)
    param = torch.nn.Parameter(torch.rand(1, 3, h, w, device=device, generator=gen))
    target = torch.rand(1, 3, h, w, device=device, generator=gen)
    conv = torch.nn.Conv2d(3, 3, 1).to(device)
    opt = torch.optim.Adam([param, *conv.parameters()], lr=1e-3)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        loss_fn(torch.sigmoid(conv(param)), target).backward()
        opt.step()

    return step


PEER_STEP = "+ fused_ssim"  # the training variant the others are paired with


def step_gpu_us(step: Callable[[], None], device: str) -> dict:
    """GPU kernel time per step (torch.profiler over 10 steps) and kernels per step: a step whose CPU time
    exceeds its GPU time is host-bound, and its wall time is the host's."""
    if device != "cuda":
        return {}
    kernels = kernel_times_us(step, 10)
    return {"gpu_kernel_us_per_step": sum(kernels) / 10, "kernels_per_step": len(kernels) / 10}


def train_variants(skip: set[str]) -> tuple[dict[str, Callable[[Tensor, Tensor], Tensor]], dict[str, str]]:
    variants: dict[str, Callable[[Tensor, Tensor], Tensor]] = {"L1 only": l1}
    missing: dict[str, str] = {}
    fusedsim = optional_import("fusedsim")
    peer = optional_import("fused_ssim")
    msssim = optional_import("pytorch_msssim")

    def with_ssim(ssim: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
        return lambda out, tgt: 0.8 * l1(out, tgt) + 0.2 * (1 - ssim(out, tgt))

    candidates = {
        "+ fusedsim.fused_ssim": (fusedsim, lambda: with_ssim(fusedsim.fused_ssim)),
        "+ fused_ssim": (peer, lambda: with_ssim(peer.fused_ssim)),
        "+ pytorch_msssim.ssim": (msssim, lambda: with_ssim(lambda a, b: msssim.ssim(a, b, data_range=1.0))),
        "fusedsim.l1_ssim_loss": (fusedsim, lambda: fusedsim.l1_ssim_loss),
    }
    for name, (module, build) in candidates.items():
        if name in skip:
            continue
        if isinstance(module, str):
            missing[name] = module
            continue
        try:
            variants[name] = build()
        except AttributeError as exc:
            missing[name] = f"AttributeError: {exc}"
    return variants, missing


def run_train(sizes: list[tuple[int, int]], steps: int, warmup: int, repeats: int, device: str,
              skip: set[str]) -> list[dict]:
    """Wall clock per step; variants interleaved over ``repeats`` rounds (median), so drift hits all alike."""
    variants, missing = train_variants(skip)
    rows: list[dict] = []
    for h, w in sizes:
        steps_fn: dict[str, Callable[[], None]] = {}
        errors: dict[str, str] = {}
        for name, loss_fn in variants.items():
            try:
                step = make_step(loss_fn, h, w, device)
                for _ in range(warmup):
                    step()
                sync(device)
                steps_fn[name] = step
            except Exception as exc:
                errors[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        times: dict[str, list[float]] = {name: [] for name in steps_fn}
        cpu: dict[str, list[float]] = {name: [] for name in steps_fn}  # process CPU time: every thread's host work
        order = random.Random(0)  # each round runs the variants in a new order: no variant always follows another
        for _ in range(repeats):
            for name, step in order.sample(list(steps_fn.items()), len(steps_fn)):
                sync(device)
                t0, c0 = time.perf_counter(), time.process_time()
                for _ in range(steps):
                    step()
                c1 = time.process_time()
                sync(device)
                times[name].append((time.perf_counter() - t0) * 1e3 / steps)
                cpu[name].append((c1 - c0) * 1e3 / steps)
        base = statistics.median(times["L1 only"]) if times.get("L1 only") else None
        peer = times.get(PEER_STEP)
        for name, ts in times.items():
            ms = statistics.median(ts)
            row = {"size": [h, w], "variant": name, "ms_per_step": ms, "runs_ms": ts,
                   "ssim_share_ms": None if base is None or name == "L1 only" else ms - base,
                   "cpu_ms_per_step": statistics.median(cpu[name]), **step_gpu_us(steps_fn[name], device)}
            if peer is not None and name != PEER_STEP:
                # paired by round (the two ran back to back): robust to the host's drift between rounds
                diffs = [a - b for a, b in zip(ts, peer)]
                row["minus_peer_paired_ms"] = statistics.median(diffs)
                row["minus_peer_paired_ci95_ms"] = median_ci95(diffs)
                row["rounds_faster_than_peer"] = sum(d < 0 for d in diffs)
            rows.append(row)
            print(f"  train {w}x{h} {name}: {ms:.3f} ms/step", flush=True)
        rows += [{"size": [h, w], "variant": n, "error": e} for n, e in errors.items()]
        rows += [{"size": [h, w], "variant": n, "missing": e} for n, e in missing.items()]
    return rows


def median_ci95(values: list[float], resamples: int = 2000) -> list[float]:
    """A 95% bootstrap interval of the median (percentile method, fixed seed): how far the paired difference of a
    host-bound step could move with other rounds of the same run."""
    rng = random.Random(1)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return [medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]]


# -------------------------------------------------------------------------------------------------- report
def goals(rows: list[dict], ratios: list[dict], train: list[dict]) -> list[tuple[str, str]]:
    """The issue's speed goals, read off this run: (goal, verdict with the worst case)."""
    out: list[tuple[str, str]] = []

    def pick(label: str) -> list[dict]:
        return [r for r in ratios if r["comparison"] == label]

    def verdict(values: list[tuple[str, float]], need: float, unit: str = "x") -> str:
        if not values:
            return "n/a (not measured)"
        worst = min(values, key=lambda v: v[1])
        return f"{'met' if worst[1] >= need else 'NOT met'} (worst {worst[1]:.2f}{unit} at {worst[0]})"

    shp = lambda r: "x".join(map(str, r["shape"]))  # noqa: E731
    peer = pick("fusedsim.fused_ssim vs fused-ssim")
    for mode in ("fwd_bwd_x", "infer_x"):
        out.append((f"fused_ssim >= fused-ssim, {mode[:-2]}, every shape",
                    verdict([(shp(r), r[mode]) for r in peer if mode in r], 1.0)))
    out.append(("fused_ssim >= 2x fused-ssim fwd+bwd at 5x5x1080x1920",
                verdict([(shp(r), r["fwd_bwd_x"]) for r in peer if r["shape"] == [5, 5, 1080, 1920]
                         and "fwd_bwd_x" in r], 2.0)))
    out.append(("ms_ssim fwd+bwd >= 10x pytorch-msssim at 1x3x1080x1920",
                verdict([(shp(r), r["fwd_bwd_x"]) for r in pick("fusedsim.ms_ssim vs pytorch-msssim")
                         if r["shape"] == [1, 3, 1080, 1920] and "fwd_bwd_x" in r], 10.0)))
    out.append(("l1_ssim_loss fwd+bwd <= fusedsim.fused_ssim alone, every shape",
                verdict([(shp(r), r["fwd_bwd_x"]) for r in pick("l1_ssim_loss vs fusedsim.fused_ssim alone")
                         if "fwd_bwd_x" in r], 1.0)))
    shares = {(tuple(r["size"]), r["variant"]): r.get("ssim_share_ms") for r in train}
    pairs = []
    for (size, name), share in shares.items():
        theirs = shares.get((size, "+ fused_ssim"))
        if name == "+ fusedsim.fused_ssim" and share is not None and theirs is not None:
            pairs.append((f"{size[1]}x{size[0]} ({share:.3f} vs {theirs:.3f} ms)", theirs - share))
    out.append(("training step: SSIM share <= fused-ssim's (margin)", verdict(pairs, 0.0, " ms")))
    paired = [(f"{r['size'][1]}x{r['size'][0]} (faster in {r['rounds_faster_than_peer']} of {len(r['runs_ms'])} "
               f"rounds)", -r["minus_peer_paired_ms"]) for r in train
              if r["variant"] == "+ fusedsim.fused_ssim" and "minus_peer_paired_ms" in r]
    out.append(("training step: fused-ssim's step - ours, paired by round (margin)", verdict(paired, 0.0, " ms")))
    return out


def print_report(rows: list[dict], ratios: list[dict], checks: list[dict], train: list[dict]) -> None:
    print("\nPer call, fp32, default arguments (ms; medians of do_bench):")
    print(f"{'kind':8} {'shape':16} {'provider':28} {'fwd+bwd':>8} {'infer':>8} {'peak MiB':>9} "
          f"{'floor f+b':>9} {'floor inf':>9} {'value':>8}")
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        note = f"  missing: {r['missing']}" if "missing" in r else (f"  error: {r['error']}" if "error" in r else "")
        print(f"{r['kind']:8} {shape:16} {r['provider']:28} {fmt(r.get('fwd_bwd_ms')):>8} "
              f"{fmt(r.get('infer_ms')):>8} {fmt(r.get('peak_extra_mib'), 0):>9} "
              f"{fmt(r.get('floor_fwd_bwd_ms')):>9} {fmt(r.get('floor_infer_ms')):>9} "
              f"{fmt(r.get('value'), 4):>8}{note}")
    print("\nRatios, same run (other's time / fusedsim's time; > 1: fusedsim faster):")
    for r in ratios:
        cells = [f"{mode} {r[key]:6.2f}x" + (f" (paired {r[key + '_paired']:.2f}x, faster in "
                                             f"{r[key.replace('_x', '_rounds_faster')]})" if key + "_paired" in r
                                             else "")
                 for mode, key in (("fwd+bwd", "fwd_bwd_x"), ("infer", "infer_x")) if key in r]
        print(f"  {r['kind']:8} {'x'.join(map(str, r['shape'])):16} {r['comparison']:44} {'  '.join(cells)}")
    print("\nAgreement (same function, same inputs): |value diff|, relative gradient difference:")
    for c in checks:
        what = c.get("error") or f"{c['value_abs_diff']:.2e}  {c['grad_rel_diff']:.2e}"
        print(f"  {'x'.join(map(str, c['shape'])):16} {c['pair'][0]} vs {c['pair'][1]}: {what}")
    if train:
        print("\nTraining step (ms/step, wall clock; SSIM share = step - L1-only step; cpu: process CPU time per step, "
              "gpu: kernel time per step):")
        for r in train:
            size = f"{r['size'][1]}x{r['size'][0]}"
            extra = r.get("missing") or r.get("error")
            ci = r.get("minus_peer_paired_ci95_ms")
            paired = ("" if "minus_peer_paired_ms" not in r else
                      f"  vs fused-ssim paired {r['minus_peer_paired_ms']:+.3f} "
                      + (f"[{ci[0]:+.3f}, {ci[1]:+.3f}] " if ci else "")
                      + f"(faster in {r['rounds_faster_than_peer']}/{len(r['runs_ms'])})")
            split = f"  cpu {r['cpu_ms_per_step']:.3f}" if "cpu_ms_per_step" in r else ""
            if "gpu_kernel_us_per_step" in r:
                split += f"  gpu {r['gpu_kernel_us_per_step'] / 1e3:.3f} ({r['kernels_per_step']:.0f} kernels)"
            print(f"  {size:10} {r['variant']:24} " + (f"  {extra}" if extra else
                  f"{r['ms_per_step']:.3f}  share {fmt(r.get('ssim_share_ms'))}{split}{paired}"))
    print("\nGoals (issue 6), this run:")
    for goal, result in goals(rows, ratios, train):
        print(f"  {goal}: {result}")


def peer_info() -> dict:
    peer = optional_import("fused_ssim")
    info: dict = {"fused_ssim": getattr(peer, "__file__", peer)}
    if PEER_SOURCE.exists():
        info["fused_ssim_source"] = PEER_SOURCE.read_text().strip()
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes, shorter timing (a few seconds' work)")
    parser.add_argument("--skip", default="", help="comma-separated provider or training-variant names to skip")
    parser.add_argument("--parts", default="table,ms,train", help="comma-separated: table, ms, train")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: smoke run of the code")
    parser.add_argument("--steps", type=int, default=None, help="training steps per timing (default 300)")
    parser.add_argument("--shapes", default=None,
                        help="per-call table shapes instead of the default list, e.g. 1x3x546x980,1x3x800x800")
    parser.add_argument("--rounds", type=int, default=None,
                        help="rounds over the providers (per-call tables) and the training variants, median "
                        "reported (default 3, 1 with --quick)")
    args = parser.parse_args()
    device, skip, parts = args.device, parse_skip(args.skip), parse_skip(args.parts)
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu --quick for a smoke run")
    gpu = device == "cuda"
    rep_ms = 50 if args.quick else 150
    rounds = args.rounds or (1 if args.quick else 3)
    ssim_shapes = (QUICK_SSIM_SHAPES if args.quick else SSIM_SHAPES) if gpu else CPU_SSIM_SHAPES
    if args.shapes:
        ssim_shapes = [tuple(int(v) for v in text.split("x")) for text in args.shapes.split(",")]
    ms_shapes = (MS_SHAPES[:1] if args.quick else MS_SHAPES) if gpu else CPU_MS_SHAPES
    train_sizes = TRAIN_SIZES if gpu else CPU_TRAIN_SIZES
    steps = args.steps or (300 if gpu and not args.quick else 100 if gpu else 5)
    warmup = 50 if gpu and not args.quick else 20 if gpu else 2
    repeats = rounds if gpu else 1

    meta = {**metadata(device), **peer_info(), "dtype": "float32", "rep_ms": rep_ms, "rounds": rounds}
    print(meta, flush=True)
    rows: list[dict] = []
    checks: list[dict] = []
    train: list[dict] = []
    stamp = run_stamp()

    def save() -> Path:  # after each part, so that a run cut short keeps what it measured
        ratios = ratio_rows(rows)
        payload = {"meta": meta, "shapes": {"ssim": ssim_shapes, "ms_ssim": ms_shapes, "train": train_sizes},
                   "train_setup": {"steps": steps, "warmup": warmup, "repeats": repeats}, "rows": rows,
                   "ratios": ratios, "agreement": checks, "train": train,
                   "goals": dict(goals(rows, ratios, train))}
        return write_json("ssim", payload, os.environ.get("OUT"), RESULTS if gpu else smoke_dir(), stamp)

    for part, kind, shapes, make in (("table", "ssim", ssim_shapes, ssim_providers),
                                     ("ms", "ms_ssim", ms_shapes, ms_providers)):
        if part in parts:
            r, c = run_table(kind, shapes, *make(skip), device, rep_ms, rounds)
            rows += r
            checks += c
            save()
    if "train" in parts:
        train = run_train(train_sizes, steps, warmup, repeats, device, skip)
    path = save()
    ratios = ratio_rows(rows)
    print_report(rows, ratios, checks, train)
    print("wrote", path)


if __name__ == "__main__":
    main()
