"""Engine memory modes on a large pair: full vs strip values, wall time and peak memory, per device.

Scores SSIM and PSNR (and MS-SSIM, full only: it has no strip path) of one random RGB pair (uniform noise with a
smooth pattern and a noisy copy, never zeros) through ``fusedsim.engine.Scorer``, once per memory mode, each mode
in a fresh process so its peak is its own: peak resident memory (``ru_maxrss``) on the CPU, the allocator's peak
on a GPU (``torch.cuda.max_memory_allocated``). Reports |strip - full| per metric.

    PYTHONPATH=src python benchmarks/bench_engine.py --device cpu --side 8000 --modes full,strip:512
    PYTHONPATH=src FUSEDSIM_VRAM_CAP_BYTES=1000000000 python benchmarks/bench_engine.py --device cuda --side 8000

The GPU goal: a 64 MP pair under a 1 GB VRAM cap in ``auto`` mode, with the full-mode values. JSON goes to
``benchmarks/results/`` (and ``$OUT`` when set).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path


def _pair(side: int, dtype: str, chunk: int = 512):
    """Pair (1, 3, side, side) in 0..255 as float32 (what ``read_image`` gives) or uint8 (an 8-bit decode kept
    at its own width: the engine converts strip by strip), built in row chunks (no full-size temporaries)."""
    import torch

    from fusedsim.io.images import ImageData

    g = torch.Generator().manual_seed(0)
    x = torch.empty(1, 3, side, side, dtype=getattr(torch, dtype))
    y = torch.empty(1, 3, side, side, dtype=getattr(torch, dtype))
    cols = torch.arange(side, dtype=torch.float32)
    for r0 in range(0, side, chunk):
        r1 = min(side, r0 + chunk)
        rows = torch.arange(r0, r1, dtype=torch.float32)[:, None]
        base = (torch.sin(cols / 37.0) * torch.cos(rows / 23.0) + 1) * 100
        xs = (base + torch.rand((1, 3, r1 - r0, side), generator=g) * 55).floor_()
        x[..., r0:r1, :] = xs.to(x.dtype)
        y[..., r0:r1, :] = (xs + torch.randn(xs.shape, generator=g) * 12).clamp_(0, 255).round_().to(y.dtype)
    return ImageData(Path("<ref>"), x, 8, "RGB"), ImageData(Path("<dist>"), y, 8, "RGB")


def _child(args: argparse.Namespace) -> None:
    import resource

    import torch

    from fusedsim.engine import Scorer

    ref, dist = _pair(args.side, args.dtype)
    device = torch.device(args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    metrics = args.metrics.split(",")
    start = time.perf_counter()
    result = Scorer(metrics, device=device, memory=args.mode).score(ref, dist)
    seconds = time.perf_counter() - start
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = {"mode": args.mode, "values": result.values, "backends": result.backends, "downgrades": result.downgrades,
           "seconds": seconds, "peak_rss_bytes": peak_rss, "input_bytes": 2 * ref.pixels.nbytes}
    if device.type == "cuda":
        out["peak_cuda_bytes"] = torch.cuda.max_memory_allocated(device)
        out["gpu"] = torch.cuda.get_device_name(device)
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--side", type=int, default=8000)
    parser.add_argument("--metrics", default="ssim,psnr")
    parser.add_argument("--modes", default="full,auto,strip:512")
    parser.add_argument("--dtype", choices=("float32", "uint8"), default="float32",
                        help="pixels held in memory: float32 (read_image) or uint8 (8-bit samples as decoded)")
    parser.add_argument("--mode", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.mode:
        _child(args)
        return
    runs = []
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--device", args.device, "--side", str(args.side), "--metrics",
               args.metrics, "--mode", mode, "--dtype", args.dtype]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode:
            runs.append({"mode": mode, "error": proc.stderr.strip().splitlines()[-1:]})
        else:
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    full = next((r for r in runs if r.get("mode") == "full" and "values" in r), None)
    if full:
        for r in runs:
            if "values" in r and r is not full:
                r["max_abs_diff_vs_full"] = {k: abs(v - full["values"][k]) for k, v in r["values"].items()
                                             if isinstance(v, float)}
                print(r["mode"], "vs full:", r["max_abs_diff_vs_full"])
    import torch

    payload = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "host": platform.node(), "torch": torch.__version__,
               "side": args.side, "metrics": args.metrics, "dtype": args.dtype, "device": args.device, "runs": runs,
               "env": {k: v for k, v in os.environ.items() if k.startswith("FUSEDSIM_")},
               "command": " ".join(sys.argv)}
    name = f"engine-{time.strftime('%Y%m%d-%H%M%S')}.json"
    for folder in filter(None, (Path(__file__).parent / "results", os.environ.get("OUT"))):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_text(json.dumps(payload, indent=1))


if __name__ == "__main__":
    main()
