"""``fusedsim score REF DIST``: compare two image files."""

from __future__ import annotations

import argparse
import json
import math
from importlib import resources
from pathlib import Path

import torch

METRICS = ("ssim", "ms-ssim", "psnr")


def example_pair() -> tuple[Path, Path]:
    """The bundled photo pair (a crop of scikit-image's chelsea.png, CC0, and its JPEG q=10 version)."""
    root = resources.files("fusedsim") / "data"
    return Path(str(root / "example_ref.png")), Path(str(root / "example_dist.png"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("score", help="score a distorted image against a reference image",
                            description="Compare two image files (RGB, data range 255, pytorch-msssim semantics).")
    parser.add_argument("ref", nargs="?", help="reference image file")
    parser.add_argument("dist", nargs="?", help="distorted image file")
    parser.add_argument("--example", action="store_true", help="score the bundled example photo pair")
    parser.add_argument("--metric", action="append", choices=METRICS,
                        help="metric to compute; repeat for several (default: ssim)")
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:N] (auto: cuda when available)")
    parser.set_defaults(run=run)


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda was asked for, but PyTorch sees no CUDA device")
    return device


def compute(metric: str, x: torch.Tensor, y: torch.Tensor) -> float:
    import fusedsim
    from fusedsim.metrics import psnr

    if metric == "ssim":
        return float(fusedsim.ssim(x, y, data_range=255))
    if metric == "ms-ssim":
        return float(fusedsim.ms_ssim(x, y, data_range=255))
    return float(psnr(x, y, data_range=255))


def run(args: argparse.Namespace) -> int:
    from fusedsim.io.images import load_image

    if args.example:
        if args.ref or args.dist:
            raise ValueError("give either --example or REF and DIST, not both")
        ref_path, dist_path = example_pair()
    elif args.ref and args.dist:
        ref_path, dist_path = Path(args.ref), Path(args.dist)
    else:
        raise ValueError("REF and DIST image files are required (or --example)")
    device = _device(args.device)
    x = load_image(ref_path).to(device)
    y = load_image(dist_path).to(device)
    if x.shape != y.shape:
        raise ValueError(f"images differ in size: {ref_path} is {tuple(x.shape[2:])} (H, W), "
                         f"{dist_path} is {tuple(y.shape[2:])}")
    results = {m: compute(m, x, y) for m in (args.metric or ["ssim"])}
    if args.format == "json":
        payload = {"reference": str(ref_path), "distorted": str(dist_path),
                   "metrics": {k: (v if math.isfinite(v) else str(v)) for k, v in results.items()}}
        print(json.dumps(payload, indent=2))
    else:
        for name, value in results.items():
            print(f"{name}: {value:.6f}")
    return 0
