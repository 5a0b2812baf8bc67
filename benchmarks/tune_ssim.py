"""Sweep launch configurations of the 2-D SSIM kernels (forward, fused backward) at one shape; prints time,
registers and spills per variant. Run: ``PYTHONPATH=src python benchmarks/tune_ssim.py``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, write_json  # noqa: E402

from fusedsim.ops import ssim as ops  # noqa: E402
from fusedsim.reference.ssim_ref import gaussian_window  # noqa: E402

SHAPE = (5, 5, 1080, 1920)
FWD_TILES = [(128, 128, 4), (64, 128, 2), (128, 128, 2), (64, 256, 1)]
BWD_TILES = [(128, 128, 4), (128, 256, 4), (64, 128, 2), (128, 128, 2)]


def main() -> None:
    x = torch.rand(SHAPE, device="cuda")
    y = (x + 0.1 * torch.randn_like(x)).clamp(0, 1)
    win = gaussian_window(11, 1.5, dtype=torch.float32, device="cuda").expand(SHAPE[1], -1).contiguous()
    g_s = torch.full((SHAPE[0] * SHAPE[1],), 1e-6, device="cuda")
    rows = []
    for unroll, tile in [(u, t) for u in (True, False) for t in FWD_TILES]:
        ops.CONFIG.update(fwd_tile=tile, fwd_unroll=unroll)
        fn = lambda: ops.ssim_sums_fwd(x, y, win, 1e-4, 9e-4, False)  # noqa: E731
        fn()
        k = ops.LAST_LAUNCH["fwd"]
        rows.append({"kernel": "fwd", "unroll": unroll, "tile": tile, "ms": median_ms(fn),
                     "regs": k.n_regs, "spills": k.n_spills})
        print(rows[-1], flush=True)
    for unroll, tile in [(u, t) for u in (True, False) for t in BWD_TILES]:
        ops.CONFIG.update(bwd_tile=tile, bwd_unroll=unroll)
        fn = lambda: ops.ssim_bwd(x, y, win, 1e-4, 9e-4, False, g_s, None, None, True, False)  # noqa: E731
        fn()
        k = ops.LAST_LAUNCH["bwd"]
        rows.append({"kernel": "bwd_dx", "unroll": unroll, "tile": tile, "ms": median_ms(fn),
                     "regs": k.n_regs, "spills": k.n_spills})
        print(rows[-1], flush=True)
    write_json("tune_ssim", {"meta": metadata(), "shape": SHAPE, "rows": rows}, os.environ.get("OUT"))
    for r in sorted(rows, key=lambda r: (r["kernel"], r["ms"])):
        print(f"{r['kernel']:7} unroll={r['unroll']!s:5} tile={r['tile']!s:15} {r['ms']:.3f} ms  "
              f"regs={r['regs']} spills={r['spills']}")


if __name__ == "__main__":
    main()
