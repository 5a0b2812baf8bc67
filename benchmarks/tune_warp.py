"""Sweep launch configurations of the fused warp's forward kernel through the module knobs of
:mod:`fusedsim.ops.warp` (voxels and warps per program, the channel count from which programs take tiles of rows
and slices, the tile, its register cap), at the shapes of ``bench_registration.py``, against
``grid_sample(affine_grid(A) + u)`` in the same process.

Prints the median forward time per variant, its ratio to torch, the compiled kernel's registers and spills, and
checks that every variant's output is bit-identical to the first one's (the knobs move no arithmetic). JSON to
``benchmarks/results/``.
Run: ``PYTHONPATH=src python benchmarks/tune_warp.py [--shape B,C,D,H,W ...] [--variants all|shipped]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, write_json  # noqa: E402
from bench_registration import warp_inputs  # noqa: E402

import fusedsim.ops.warp as warp_ops  # noqa: E402
from fusedsim.registration import warp  # noqa: E402

SHAPES = [(1, 1, 192, 160, 224), (1, 1, 384, 320, 448), (2, 16, 128, 128, 128)]
KNOBS = ("FWD_BLOCK", "FWD_WARPS", "FWD_TILED_MIN_CHANNELS", "FWD_TILED_BLOCK", "FWD_TILED_WARPS",
         "FWD_TILED_MAXNREG", "FWD_TILE_3D")
# {}: the shipped configuration; the others override some of its knobs
VARIANTS = [{}, dict(FWD_TILED_MIN_CHANNELS=10**9), dict(FWD_TILED_MIN_CHANNELS=1),
            dict(FWD_TILED_MAXNREG=0), dict(FWD_TILED_MAXNREG=32),
            dict(FWD_TILED_BLOCK=128, FWD_TILED_WARPS=4, FWD_TILE_3D=(4, 1)),
            dict(FWD_TILED_BLOCK=256, FWD_TILED_WARPS=8, FWD_TILE_3D=(4, 2)),
            dict(FWD_TILED_BLOCK=64, FWD_TILED_WARPS=2, FWD_TILE_3D=(2, 1))]


def _set(knobs: dict) -> None:
    for name, value in knobs.items():
        setattr(warp_ops, name, value)
    warp_ops._warp_plan_cached.cache_clear()
    from fusedsim.registration import _warp

    _warp._CALLS.clear()  # plans (and their launchers) are rebuilt with the new knobs


def _plan_of_last_call() -> warp_ops.WarpPlan:
    """The plan of the one call in the warp call table (cleared before each variant)."""
    from fusedsim.registration import _warp

    return next(iter(_warp._CALLS._calls.values())).plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="B,C,D,H,W (repeatable); default: the benchmark's shapes")
    parser.add_argument("--variants", choices=("all", "shipped"), default="all")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    shipped = {name: getattr(warp_ops, name) for name in KNOBS}
    variants = VARIANTS if args.variants == "all" else VARIANTS[:1]
    rows = []
    for shape in shapes:
        image, affine, disp, _ = warp_inputs(shape, "cuda")
        spatial = list(shape[2:])

        def torch_warp() -> torch.Tensor:
            grid = F.affine_grid(affine, [shape[0], 1, *spatial], align_corners=True) + disp
            return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=True)

        with torch.no_grad():
            torch_ms = median_ms(torch_warp, rep_ms=300)
            first = None
            for variant in variants:
                _set({**shipped, **variant})
                ms = median_ms(lambda: warp(image, affine, disp), rep_ms=300)
                out = warp(image, affine, disp)
                first = out if first is None else first
                compiled = next(iter(_plan_of_last_call()._fwd._compiled.values()), None)
                row = {"shape": list(shape), "variant": variant or "shipped", "ms": ms, "torch_ms": torch_ms,
                       "x_torch": torch_ms / ms, "identical": bool(torch.equal(out, first)),
                       "regs": getattr(compiled, "n_regs", None), "spills": getattr(compiled, "n_spills", None)}
                rows.append(row)
                print(f"{str(shape):>24} {str(row['variant']):>62} {ms:8.4f} ms  torch {torch_ms:8.4f}  "
                      f"{row['x_torch']:5.2f}x  identical={row['identical']} regs={row['regs']} spills={row['spills']}",
                      flush=True)
        _set(shipped)
        del image, affine, disp
        torch.cuda.empty_cache()
    write_json("tune-warp", {"meta": metadata("cuda"), "shipped": shipped, "rows": rows})


if __name__ == "__main__":
    main()
