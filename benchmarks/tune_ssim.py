"""Sweep launch configurations of the 2-D SSIM kernels through ``SSIMPlan``'s tuning knobs, at the training shapes:
the forward with in-kernel reduction, the recomputing fused backward, and the training pair (forward saving the
unit gradient maps + the backward filtering them), for SSIM and the fused L1 + SSIM loss. Prints kernel time per variant (no host path: plans are built
once) and the largest gradient difference between the two backward paths.
Run: ``PYTHONPATH=src python benchmarks/tune_ssim.py [--shape N,C,H,W ...] [--parts fwd,bwd,saved,l1]``."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import kernel_times_us, median_ms, metadata, write_json  # noqa: E402

from fusedsim.ssim.kernels import SSIMPlan  # noqa: E402
from fusedsim.core.moments.twin import gaussian_window

SHAPES = [(1, 3, 1080, 1920), (1, 3, 800, 800), (1, 3, 546, 980), (1, 3, 135, 240), (1, 3, 68, 120),
          (8, 3, 512, 512), (5, 5, 1080, 1920)]
FWD_TILES = [None, (128, 128, 4), (128, 64, 4), (128, 32, 4)]  # None: the shipped adaptive choice
BWD_TILES = [None, (128, 128, 4), (128, 64, 4), (128, 32, 4)]
# the training pair: {} is the shipped plan; the backward's W taps by shifted loads (the previous default, capped
# at 80 registers) or by warp shuffles under other register caps, unrolled, at fixed tiles
SAVED_VARIANTS = [{}, dict(saved_bwd_lanes=False, saved_bwd_maxnreg=80), dict(saved_bwd_maxnreg=None),
                  dict(saved_bwd_maxnreg=64), dict(saved_bwd_maxnreg=80), dict(bwd_unroll=True),
                  dict(bwd_tile=(128, 64, 4)), dict(bwd_tile=(128, 32, 4))]
ROW_SWEEP = (32, 48, 57, 64, 96, 103, 128, 144, 155, 256)
# the fused L1 + SSIM training pair (ssim_weight 0.2): the saving forward's register cap ({}: the shipped 120)
# and its tiles and unrolling (the fused L1 adds per-row work and registers to the saving forward)
L1_VARIANTS = [{}, dict(save_maxnreg=128), dict(save_maxnreg=136), dict(save_maxnreg=112), dict(save_maxnreg=None),
               dict(fwd_tile=(128, 128, 4)), dict(fwd_tile=(128, 64, 4)), dict(fwd_tile=(128, 32, 4)),
               dict(fwd_tile=(64, 64, 2)), dict(fwd_tile=(128, 64, 8)), dict(fwd_unroll=False)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="N,C,H,W (repeatable); default: the training shapes")
    parser.add_argument("--parts", default="fwd,bwd,saved,l1", help="comma list of fwd, bwd, saved, l1, rows")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    rows = []
    for shape in shapes:
        x = torch.rand(shape, device="cuda")
        y = (x + 0.1 * torch.randn_like(x)).clamp(0, 1)
        win = gaussian_window(11, 1.5, dtype=torch.float32, device="cuda").expand(shape[1], -1).contiguous()
        g = torch.ones((), device="cuda")
        for unroll in (True,) if "fwd" in parts else ():
            for tile in FWD_TILES:
                plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1,
                                fwd_tile=tile, fwd_unroll=unroll)
                ms = median_ms(lambda: plan.forward(x, y, win))
                rows.append({"shape": shape, "kernel": "fwd", "tile": tile, "unroll": unroll, "ms": ms})
                print(rows[-1], flush=True)
        for unroll in (False,) if "bwd" in parts else ():
            for tile in BWD_TILES:
                plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1,
                                bwd_tile=tile, bwd_unroll=unroll)
                ms = median_ms(lambda: plan.backward((x, y, win), (), g, (True, False)))
                rows.append({"shape": shape, "kernel": "bwd(dx)", "tile": tile, "unroll": unroll, "ms": ms})
                print(rows[-1], flush=True)
        if "saved" in parts:
            rows += _saved_maps(shape, x, y, win, g, SAVED_VARIANTS)
        if "rows" in parts:
            rows += _rows_sweep(shape, x, y, win, g)
        if "l1" in parts:  # SSIM alone first: the fused loss's goal is to cost no more
            rows += _saved_maps(shape, x, y, win, g, [{}]) if "saved" not in parts else []
            rows += _saved_maps(shape, x, y, win, g, L1_VARIANTS, ssim_weight=0.2)
    write_json("tune-ssim", {"meta": metadata(), "rows": rows}, os.environ.get("OUT"))


def _kernel_us(fn, calls: int = 30) -> list[float]:
    """Median GPU time (µs) of each kernel ``fn`` launches, in launch order (torch.profiler: no host time, no L2
    flush; inputs stay as a training step leaves them)."""
    fn()
    torch.cuda.synchronize()
    kernels = kernel_times_us(fn, calls)
    per_call = len(kernels) // calls
    return [statistics.median(kernels[i::per_call]) for i in range(per_call)]


def _rows_sweep(shape, x, y, win, g) -> list[dict]:
    """Output rows per program of the inference forward, the saving forward, the saved-maps backward and the
    recomputing backward (the same value for all; the shipped choices first, ``None``): kernel time per row count,
    to check the makespan model that picks them (``ops/waves.py``). Rows are a launch argument, so no row count
    compiles a kernel of its own."""
    out = []
    for r in (None, *ROW_SWEEP):
        tile = None if r is None else (128, r, 4)
        plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1,
                        fwd_tile=tile, bwd_tile=tile)
        infer = _kernel_us(lambda: plan.forward(x, y, win))
        pair = _kernel_us(lambda: plan.backward((x, y, win), plan.forward_for_grad((True, False), x, y, win)[1], g,
                                                (True, False)))
        recompute = _kernel_us(lambda: plan.backward((x, y, win), (), g, (True, False)))
        chosen = {"fwd_rows": plan._fwd_tail[-6], "bwd_saved_rows": plan._saved_backward_entry(True, False)[3][-3],
                  "bwd_recompute_rows": plan._backward_entry(True, False, False)[3]}
        out.append({"shape": shape, "kernel": "rows", "rows": r, **chosen, "infer_us": infer[-1],
                    "fwd_save_us": pair[0], "bwd_saved_us": pair[-1], "bwd_recompute_us": recompute[-1]})
        print(out[-1], flush=True)
    return out


def _saved_maps(shape, x, y, win, g, variants: list[dict], ssim_weight: float = -1.0) -> list[dict]:
    """The training pair: forward + saved unit gradient maps, then the backward filtering them (``variants`` of
    the plan's knobs; ``ssim_weight`` >= 0: the fused L1 + SSIM loss), against forward + recomputing backward at
    the shipped tiles."""
    rows = []
    base = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1, ssim_weight)
    ref = base.backward((x, y, win), (), g, (True, False))[0]
    ms = median_ms(lambda: (base.forward(x, y, win), base.backward((x, y, win), (), g, (True, False))))
    l1 = "+l1" if ssim_weight >= 0 else ""
    rows.append({"shape": shape, "kernel": f"fwd+bwd(recompute){l1}", "variant": None, "ms": ms})
    print(rows[-1], flush=True)
    for variant in variants:
        plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1, ssim_weight,
                        **variant)
        _, saved = plan.forward_for_grad((True, False), x, y, win)
        dx = plan.backward((x, y, win), saved, g, (True, False))[0]
        diff = ((dx - ref).abs().max() / ref.abs().max()).item()
        fwd = median_ms(lambda: plan.forward_for_grad((True, False), x, y, win))
        bwd = median_ms(lambda: plan.backward((x, y, win), saved, g, (True, False)))
        both = median_ms(lambda: plan.backward((x, y, win), plan.forward_for_grad((True, False), x, y, win)[1],
                                               g, (True, False)))
        rows.append({"shape": shape, "kernel": f"fwd(save)+bwd(saved){l1}", "variant": variant, "ms": both,
                     "fwd_ms": fwd, "bwd_ms": bwd, "max_rel_diff": diff})
        print(rows[-1], flush=True)
    return rows


if __name__ == "__main__":
    main()
