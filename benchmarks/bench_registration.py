"""Registration-op benchmark: fusedsim vs its peers, forward+backward time and peak extra memory, in one run.

Parts (``--parts``, default all):
  warp   ``fusedsim.registration.warp(image, affine, disp)`` vs ``grid_sample(image, affine_grid(A) + u)``
         (trilinear, zeros padding, align_corners=True as FireANTs calls it): forward, and forward+backward
         with gradients for the displacement and the affine (what an optimiser over the transform needs), and
         with the image gradient too (what a network producing the moving image needs)
  loss   LNCC / MI rows (fusedsim vs MONAI): providers are listed in ``loss_cases``; see there

Shapes: 1×1×192×160×224 (FireANTs' example volume), 1×1×384×320×448 and 2×16×128³. Inputs are fresh random
data (smooth-ish random displacements of a few voxels, near-identity affines), never zeros. Each row records the
provider's call, the median time (``triton.testing.do_bench``), the peak memory allocated above the inputs, the
bytes-moved floor of the fused op and agreement with the peer (max |Δ| of the output and relative L2 of the
gradients). Ratios are the peer's time (memory) over fusedsim's, measured in the same run.

GPU:  PYTHONPATH=src python benchmarks/bench_registration.py [--quick] [--skip NAME,...] [--parts warp,loss]
      [--rounds 3]
CPU smoke (proves the code paths, numbers meaningless):
      PYTHONPATH=src python benchmarks/bench_registration.py --device cpu --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import (RESULTS, fmt, median_ms, metadata, optional_import, parse_skip,  # noqa: E402
                      peak_extra_mib, run_stamp, smoke_dir, sync, write_json)

Tensor = torch.Tensor
Shape = tuple[int, ...]

SHAPES: list[Shape] = [(1, 1, 192, 160, 224), (1, 1, 384, 320, 448), (2, 16, 128, 128, 128)]
QUICK_SHAPES: list[Shape] = [(1, 1, 192, 160, 224), (2, 16, 128, 128, 128)]
CPU_SHAPES: list[Shape] = [(1, 1, 12, 10, 14), (2, 3, 8, 8, 8)]  # smoke only
HBM_TBPS = {"H200": 4.8, "H100": 3.35, "A100": 2.0}  # peak memory bandwidth for the bytes-moved floor


# ------------------------------------------------------------------------------------------------- cases
@dataclass
class Case:
    """One timed callable. ``run()`` does the whole measured work (forward, or forward+backward);
    ``result()`` returns tensors to compare with the peer of the same ``group``; ``floor_bytes`` is the
    minimum traffic of the fused op (None: not modelled)."""

    group: str
    provider: str
    call: str
    shape: Shape
    run: Callable[[], object]
    result: Callable[[], list[Tensor]] | None = None
    grads: list[Tensor] = field(default_factory=list)
    floor_bytes: int | None = None


def warp_inputs(shape: Shape, device: str, seed: int = 0) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """image (B, C, *S), affine (B, 3, 4) near identity, displacement (B, *S, 3) of a few voxels, and a random
    upstream gradient (B, C, *S)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    b, _, *spatial = shape
    image = torch.rand(shape, device=device, generator=gen)
    eye = torch.eye(3, 4, device=device).expand(b, 3, 4)
    affine = (eye + 0.03 * torch.randn(b, 3, 4, device=device, generator=gen)).contiguous()
    coarse = 0.03 * torch.randn(b, 3, *(max(2, s // 16) for s in spatial), device=device, generator=gen)
    disp = F.interpolate(coarse, size=tuple(spatial), mode="trilinear", align_corners=True)
    disp = disp.movedim(1, -1).contiguous()
    grad_out = torch.randn(shape, device=device, generator=gen)
    return image, affine, disp, grad_out


def warp_floor_bytes(shape: Shape, image_grad: bool, backward: bool) -> int:
    """Bytes a fused warp must move at least (fp32): forward reads the image once and the displacement, writes
    the output; backward reads the upstream gradient, the displacement and the image again, writes the
    displacement gradient (and the image gradient)."""
    b, c, *spatial = shape
    n = 1
    for s in spatial:
        n *= s
    image, field_, out = b * c * n * 4, b * n * 3 * 4, b * c * n * 4
    fwd = image + field_ + out
    if not backward:
        return fwd
    bwd = out + field_ + image + field_ + (image if image_grad else 0)
    return fwd + bwd


def warp_cases(shape: Shape, device: str, skip: set[str]) -> tuple[list[Case], dict[str, str]]:
    """fusedsim.registration.warp vs grid_sample(affine_grid(A) + u), forward and forward+backward."""
    image, affine, disp, grad_out = warp_inputs(shape, device)
    spatial = list(shape[2:])
    missing: dict[str, str] = {}
    fused = optional_import("fusedsim.registration")
    if isinstance(fused, str):
        missing["fusedsim"] = fused

    def torch_warp(img: Tensor, a: Tensor, u: Tensor) -> Tensor:
        grid = F.affine_grid(a, [a.shape[0], 1, *spatial], align_corners=True) + u
        return F.grid_sample(img, grid, mode="bilinear", padding_mode="zeros", align_corners=True)

    providers: list[tuple[str, str, Callable[[Tensor, Tensor, Tensor], Tensor]]] = [
        ("torch", "F.grid_sample(image, F.affine_grid(A, size, align_corners=True) + u, align_corners=True)",
         torch_warp)]
    if not isinstance(fused, str):
        providers.insert(0, ("fusedsim", "fusedsim.registration.warp(image, A, u)",
                             lambda img, a, u: fused.warp(img, a, u)))
    cases: list[Case] = []
    for name, call, fn in providers:
        if name in skip:
            continue
        for mode, image_grad in (("fwd", False), ("fwd+bwd", False), ("fwd+bwd+img", True)):
            leaves = (image.clone().requires_grad_(image_grad), affine.clone().requires_grad_(mode != "fwd"),
                      disp.clone().requires_grad_(mode != "fwd"))
            holder: dict[str, Tensor] = {}

            def run(fn=fn, leaves=leaves, mode=mode, holder=holder) -> None:
                if mode == "fwd":
                    with torch.no_grad():
                        holder["out"] = fn(*leaves)
                    return
                out = fn(*leaves)
                out.backward(grad_out)
                holder["out"] = out.detach()

            def result(leaves=leaves, holder=holder) -> list[Tensor]:
                return [holder["out"], *[t.grad for t in leaves if t.grad is not None]]

            grads = [t for t in leaves if t.requires_grad]
            cases.append(Case(f"warp {mode}", name, call, shape, run, result, grads,
                              warp_floor_bytes(shape, image_grad, mode != "fwd")))
    return cases, missing


# ------------------------------------------------------------------------------------------------ losses
def loss_inputs(shape: Shape, device: str, seed: int = 1) -> tuple[Tensor, Tensor]:
    """A smooth random volume in [0, 1] and a noisy, slightly shifted copy: realistic local variances."""
    gen = torch.Generator(device=device).manual_seed(seed)
    b, c, *spatial = shape
    coarse = torch.rand(b, c, *(max(2, s // 8) for s in spatial), device=device, generator=gen)
    fixed = F.interpolate(coarse, size=tuple(spatial), mode="trilinear", align_corners=True)
    moving = (fixed.roll(1, dims=-1) + 0.02 * torch.randn(shape, device=device, generator=gen)).clamp(0, 1)
    return moving.contiguous(), fixed.contiguous()


def loss_floor_bytes(shape: Shape) -> int:
    """A fused loss with the gradient for pred reads both volumes and writes one gradient (fp32)."""
    n = 1
    for s in shape:
        n *= s
    return 3 * n * 4


def loss_cases(shape: Shape, device: str, skip: set[str]) -> tuple[list[Case], dict[str, str]]:
    """LNCC / mutual-information rows, forward+backward with the gradient for pred (what registration needs):
    fusedsim (MONAI convention) vs MONAI's LocalNormalizedCrossCorrelationLoss and GlobalMutualInformationLoss
    (same numbers), and FireANTs' fused ops and fused-lncc when importable (their own conventions: FireANTs'
    approximate gradients, fused-lncc's 1 - mean(ncc), so its values sit 1 above MONAI's -mean(ncc); agreement
    rows show those differences). LNCC uses k=9, and k=7 at 2×16×128³ (the fused-lncc comparison)."""
    pred0, target = loss_inputs(shape, device)
    k = 7 if shape[0] == 2 else 9
    missing: dict[str, str] = {}
    fused = optional_import("fusedsim.registration")
    monai = optional_import("monai.losses")
    fa_cc, fa_mi = optional_import("fireants.losses.fusedcc"), optional_import("fireants.losses.fusedmi")
    flncc = optional_import("fused_lncc")
    for name, mod in (("fusedsim", fused), ("monai", monai), ("fireants-fused-cc", fa_cc),
                      ("fireants-fused-mi", fa_mi), ("fused-lncc", flncc)):
        if isinstance(mod, str):
            missing[name] = mod
    groups: list[tuple[str, list[tuple[str, str, Callable[[], Callable[[Tensor, Tensor], Tensor]]]]]] = []
    for kind, monai_kind, fa_kind in (("box", "rectangular", "rectangular"), ("gaussian", "gaussian", "gaussian")):
        providers = []
        if not isinstance(fused, str):
            providers.append(("fusedsim", f"lncc_loss(pred, target, {k}, {kind!r})",
                              lambda kind=kind: lambda p, t: fused.lncc_loss(p, t, k, kind)))
        if not isinstance(monai, str):
            providers.append(("monai", f"LocalNormalizedCrossCorrelationLoss(3, {k}, {monai_kind!r})",
                              lambda mk=monai_kind: monai.LocalNormalizedCrossCorrelationLoss(3, k, mk).to(device)))
        if not isinstance(fa_cc, str):
            providers.append(("fireants", f"FusedLocalNormalizedCrossCorrelationLoss(3, {k}, kernel_type={fa_kind!r})",
                              lambda fk=fa_kind: fa_cc.FusedLocalNormalizedCrossCorrelationLoss(
                                  3, k, kernel_type=fk)))
        if kind == "box" and not isinstance(flncc, str):
            providers.append(("fused-lncc", f"fused_lncc_loss(pred, target, kernel_size={k})",
                              lambda: lambda p, t: flncc.fused_lncc_loss(p, t, kernel_size=k)))
        groups.append((f"lncc {kind} k{k}", providers))
    providers = []
    if not isinstance(fused, str):
        providers.append(("fusedsim", "mutual_information_loss(pred, target, 32)",
                          lambda: lambda p, t: fused.mutual_information_loss(p, t, 32)))
    if not isinstance(monai, str):
        providers.append(("monai", "GlobalMutualInformationLoss(num_bins=32)",
                          lambda: monai.GlobalMutualInformationLoss(num_bins=32).to(device)))
    if not isinstance(fa_mi, str):
        providers.append(("fireants", "FusedGlobalMutualInformationLoss(num_bins=32)",
                          lambda: fa_mi.FusedGlobalMutualInformationLoss(num_bins=32)))
    groups.append(("mi 32 bins", providers))
    cases: list[Case] = []
    for group, members in groups:
        for name, call, build in members:
            if name in skip:
                continue
            fn = build()
            pred = pred0.clone().requires_grad_()
            holder: dict[str, Tensor] = {}

            def run(fn=fn, pred=pred, holder=holder) -> None:
                loss = fn(pred, target)
                loss.backward()
                holder["out"] = loss.detach()

            def result(pred=pred, holder=holder) -> list[Tensor]:
                return [holder["out"], pred.grad]

            cases.append(Case(f"{group} fwd+bwd", name, call, shape, run, result, [pred],
                              loss_floor_bytes(shape)))
    return cases, missing


PART_CASES: dict[str, Callable[[Shape, str, set[str]], tuple[list[Case], dict[str, str]]]] = {
    "warp": warp_cases,
    "loss": loss_cases,
}


# ------------------------------------------------------------------------------------------------ timing
def time_case(case: Case, device: str, rep_ms: int) -> dict:
    row = {"group": case.group, "provider": case.provider, "call": case.call, "shape": list(case.shape)}
    try:
        row["ms"] = median_ms(case.run, rep_ms=rep_ms, grad_to_none=case.grads, device=device)
        for t in case.grads:
            t.grad = None
        row["peak_mib"] = peak_extra_mib(case.run, device)
        sync(device)
    except Exception as exc:  # a provider that cannot run a case is a row, not a crash
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        if device == "cuda":
            torch.cuda.empty_cache()
        return row
    if case.floor_bytes is not None and device == "cuda":
        name = torch.cuda.get_device_properties(0).name
        tbps = next((v for k, v in HBM_TBPS.items() if k in name), None)
        if tbps:
            row["floor_ms"] = case.floor_bytes / (tbps * 1e12) * 1e3
            row["x_floor"] = row["ms"] / row["floor_ms"]
    return row


def agreement(cases: list[Case]) -> list[dict]:
    """Per group: every provider's results against the first provider's (fusedsim when present)."""
    out: list[dict] = []
    by_group: dict[tuple, list[Case]] = {}
    for c in cases:
        by_group.setdefault((c.group, c.shape), []).append(c)
    for (group, shape), members in by_group.items():
        ref = members[0]
        if ref.result is None:
            continue
        try:
            for c in members:  # gradients accumulate: start every provider from none
                for t in c.grads:
                    t.grad = None
            ref.run()
            base = [t.detach().double() for t in ref.result()]
            for t in ref.grads:
                t.grad = None
            for other in members[1:]:
                if other.result is None:
                    continue
                other.run()
                got = [t.detach().double() for t in other.result()]
                for t in other.grads:
                    t.grad = None
                out.append({"group": group, "shape": list(shape), "a": ref.provider, "b": other.provider,
                            "out_max_abs": (got[0] - base[0]).abs().max().item(),
                            "grad_rel_l2": [((g - r).norm() / r.norm().clamp_min(1e-30)).item()
                                            for g, r in zip(got[1:], base[1:])]})
        except Exception as exc:
            out.append({"group": group, "shape": list(shape), "error": f"{type(exc).__name__}: {exc}"[:200]})
    return out


def ratio_rows(rows: list[dict], ours: str = "fusedsim") -> list[dict]:
    """Peer time (memory) over fusedsim's for every (group, shape)."""
    out = []
    mine = {(r["group"], tuple(r["shape"])): r for r in rows if r["provider"] == ours and "ms" in r}
    for r in rows:
        m = mine.get((r["group"], tuple(r["shape"])))
        if r["provider"] == ours or m is None or "ms" not in r:
            continue
        mem = (r["peak_mib"] / m["peak_mib"]) if r.get("peak_mib") and m.get("peak_mib") else None
        out.append({"group": r["group"], "shape": r["shape"], "peer": r["provider"],
                    "time_x": r["ms"] / m["ms"], "memory_x": mem})
    return out


def print_report(rows: list[dict], ratios: list[dict], checks: list[dict]) -> None:
    print(f"\n{'group':<18} {'shape':<22} {'provider':<14} {'ms':>9} {'peak MiB':>9} {'floor ms':>9} {'x floor':>8}")
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            print(f"{r['group']:<18} {shape:<22} {r['provider']:<14} {r['error']}")
            continue
        print(f"{r['group']:<18} {shape:<22} {r['provider']:<14} {fmt(r['ms']):>9} {fmt(r.get('peak_mib'), 1):>9} "
              f"{fmt(r.get('floor_ms')):>9} {fmt(r.get('x_floor'), 1):>8}")
    print("\nratios (peer / fusedsim, > 1: fusedsim better)")
    for r in ratios:
        print(f"  {r['group']:<18} {'x'.join(map(str, r['shape'])):<22} vs {r['peer']:<12} time "
              f"{fmt(r['time_x'], 2)}x  memory {fmt(r['memory_x'], 2)}x")
    print("\nagreement")
    for c in checks:
        print("  ", c)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer shapes, shorter timing")
    parser.add_argument("--skip", default="", help="comma-separated provider names to skip")
    parser.add_argument("--parts", default=",".join(PART_CASES), help="comma-separated: " + ", ".join(PART_CASES))
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: smoke run of the code")
    parser.add_argument("--rounds", type=int, default=3,
                        help="timings per case, visiting the cases in turn (the median is reported: the host's speed "
                             "drifts within a run, and host-bound cases follow it)")
    args = parser.parse_args()
    device, skip, parts = args.device, parse_skip(args.skip), parse_skip(args.parts)
    if device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: run with --device cpu --quick for a smoke run")
    gpu = device == "cuda"
    rep_ms = 50 if args.quick else 150
    shapes = (QUICK_SHAPES if args.quick else SHAPES) if gpu else CPU_SHAPES
    meta = {**metadata(device), "dtype": "float32", "rep_ms": rep_ms, "shapes": shapes}
    print(meta, flush=True)
    rows: list[dict] = []
    checks: list[dict] = []
    missing: dict[str, str] = {}
    stamp = run_stamp()

    def save() -> Path:  # after each shape, so that a run cut short keeps what it measured
        payload = {"meta": meta, "rows": rows, "ratios": ratio_rows(rows), "agreement": checks, "missing": missing}
        return write_json("registration", payload, os.environ.get("OUT"), RESULTS if gpu else smoke_dir(), stamp)

    for part, make in PART_CASES.items():
        if part not in parts:
            continue
        for shape in shapes:
            cases, why = make(shape, device, skip)
            missing.update(why)
            shape_rows = [time_case(case, device, rep_ms) for case in cases]
            for _ in range(args.rounds - 1):
                for case, row in zip(cases, shape_rows):
                    if "ms" in row:
                        row.setdefault("ms_rounds", [row["ms"]]).append(
                            median_ms(case.run, rep_ms=rep_ms, grad_to_none=case.grads, device=device))
                        for t in case.grads:
                            t.grad = None
            for row in shape_rows:
                if "ms_rounds" in row:
                    row["ms"] = statistics.median(row["ms_rounds"])
                    if "floor_ms" in row:
                        row["x_floor"] = row["ms"] / row["floor_ms"]
                rows.append(row)
                print(row, flush=True)
            checks += agreement(cases)
            del cases
            if gpu:
                torch.cuda.empty_cache()
            save()
    path = save()
    print_report(rows, ratio_rows(rows), checks)
    if missing:
        print("\nnot measured:", missing)
    print("wrote", path)


if __name__ == "__main__":
    main()
