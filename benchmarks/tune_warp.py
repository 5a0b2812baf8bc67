"""Sweep the fused warp forward's launch geometry (:class:`fusedsim.registration.warp_kernel.ForwardLaunch`: voxels and warps per
program, the channel count from which programs take tiles of rows and slices, the tile, its register cap) at the
shapes of ``bench_registration.py``, against ``grid_sample(affine_grid(A) + u)`` in the same process.

Each variant is a plan built with that geometry (kernel time, no dispatcher). Prints the median forward time per
variant, its ratio to torch, the compiled kernel's registers and spills, and checks that every variant's output is
bit-identical to the shipped one's (the geometry moves no arithmetic). JSON to ``benchmarks/results/``.
Run: ``PYTHONPATH=src python benchmarks/tune_warp.py [--shape B,C,D,H,W ...] [--variants all|shipped]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, write_json  # noqa: E402
from bench_registration import warp_inputs  # noqa: E402

from fusedsim.registration.warp_kernel import ForwardLaunch, warp_plan  # noqa: E402

SHAPES = [(1, 1, 192, 160, 224), (1, 1, 384, 320, 448), (2, 16, 128, 128, 128)]
# {}: the shipped geometry; the others override some of its fields
VARIANTS = [{}, dict(tiled_min_channels=10**9), dict(tiled_min_channels=1), dict(tiled_maxnreg=None),
            dict(tiled_maxnreg=32), dict(tiled_block=128, tiled_warps=4, tile_3d=(4, 1)),
            dict(tiled_block=256, tiled_warps=8, tile_3d=(4, 2)), dict(tiled_block=64, tiled_warps=2, tile_3d=(2, 1))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="B,C,D,H,W (repeatable); default: the benchmark's shapes")
    parser.add_argument("--variants", choices=("all", "shipped"), default="all")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    variants = VARIANTS if args.variants == "all" else VARIANTS[:1]
    rows = []
    for shape in shapes:
        image, affine, disp, _ = warp_inputs(shape, "cuda")
        spatial = list(shape[2:])
        scalars = (spatial, True, 0, 0, True)  # bilinear, zeros, align_corners: the benchmark's call

        def torch_warp() -> torch.Tensor:
            grid = F.affine_grid(affine, [shape[0], 1, *spatial], align_corners=True) + disp
            return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=True)

        with torch.no_grad():
            torch_ms = median_ms(torch_warp, rep_ms=300)
            first = None
            for variant in variants:
                plan = warp_plan((image, affine, disp), scalars, ForwardLaunch(**variant))
                ms = median_ms(lambda plan=plan: plan.forward(image, affine, disp), rep_ms=300)
                out = plan.forward(image, affine, disp)[0]
                first = out if first is None else first
                compiled = next(iter(plan._fwd._compiled.values()), None)
                row = {"shape": list(shape), "variant": variant or "shipped", "ms": ms, "torch_ms": torch_ms,
                       "x_torch": torch_ms / ms, "identical": bool(torch.equal(out, first)),
                       "regs": getattr(compiled, "n_regs", None), "spills": getattr(compiled, "n_spills", None)}
                rows.append(row)
                print(f"{str(shape):>24} {str(row['variant']):>62} {ms:8.4f} ms  torch {torch_ms:8.4f}  "
                      f"{row['x_torch']:5.2f}x  identical={row['identical']} regs={row['regs']} spills={row['spills']}",
                      flush=True)
        del image, affine, disp
        torch.cuda.empty_cache()
    write_json("tune-warp", {"meta": metadata("cuda"), "shipped": dataclasses.asdict(ForwardLaunch()), "rows": rows})


if __name__ == "__main__":
    main()
