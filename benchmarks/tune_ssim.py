"""Sweep launch configurations of the 2-D SSIM kernels (forward with in-kernel reduction, fused backward) through
``SSIMPlan``'s tuning knobs, at the training shapes. Prints kernel time per variant (no host path: plans are built
once). Run: ``PYTHONPATH=src python benchmarks/tune_ssim.py [--shape N,C,H,W ...]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, write_json  # noqa: E402

from fusedsim.ops.ssim import SSIMPlan  # noqa: E402
from fusedsim.reference.ssim_ref import gaussian_window  # noqa: E402

SHAPES = [(1, 3, 1080, 1920), (1, 3, 800, 800), (1, 3, 546, 980), (1, 3, 135, 240), (1, 3, 68, 120),
          (8, 3, 512, 512), (5, 5, 1080, 1920)]
FWD_TILES = [None, (128, 128, 4), (128, 64, 4), (128, 32, 4)]  # None: the shipped adaptive choice
BWD_TILES = [None, (128, 128, 4), (128, 64, 4), (128, 32, 4)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="N,C,H,W (repeatable); default: the training shapes")
    args = parser.parse_args()
    shapes = [tuple(int(v) for v in s.split(",")) for s in args.shape] if args.shape else SHAPES
    rows = []
    for shape in shapes:
        x = torch.rand(shape, device="cuda")
        y = (x + 0.1 * torch.randn_like(x)).clamp(0, 1)
        win = gaussian_window(11, 1.5, dtype=torch.float32, device="cuda").expand(shape[1], -1).contiguous()
        g = torch.ones((), device="cuda")
        for unroll in (True,):
            for tile in FWD_TILES:
                plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1,
                                fwd_tile=tile, fwd_unroll=unroll)
                ms = median_ms(lambda: plan.forward(x, y, win))
                rows.append({"shape": shape, "kernel": "fwd", "tile": tile, "unroll": unroll, "ms": ms})
                print(rows[-1], flush=True)
        for unroll in (False,):
            for tile in BWD_TILES:
                plan = SSIMPlan(shape, x.stride(), y.stride(), x.dtype, x.device, 11, 1e-4, 9e-4, False, True, 1,
                                bwd_tile=tile, bwd_unroll=unroll)
                ms = median_ms(lambda: plan.backward((x, y, win), (), g, (True, False)))
                rows.append({"shape": shape, "kernel": "bwd(dx)", "tile": tile, "unroll": unroll, "ms": ms})
                print(rows[-1], flush=True)
    write_json("tune-ssim", {"meta": metadata(), "rows": rows}, os.environ.get("OUT"))


if __name__ == "__main__":
    main()
