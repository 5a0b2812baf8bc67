"""SSIM / MS-SSIM benchmark: fusedsim (Triton) vs pytorch-msssim vs torchmetrics vs the fusedsim torch twin
(and fused-ssim when importable), in one process on one GPU.

Modes: forward (graph recorded), forward+backward (gradient for img1 only, as in training), inference (no grad),
and peak extra memory of forward+backward. Run: ``PYTHONPATH=src python benchmarks/bench_ssim.py [--quick]``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, peak_extra_mib, write_json  # noqa: E402

import fusedsim  # noqa: E402
from fusedsim.backend import use_backend  # noqa: E402

SHAPES = [(5, 5, 1080, 1920), (1, 3, 1080, 1920), (8, 3, 512, 512), (1, 1, 4096, 4096), (1, 1, 128, 128, 128)]
MS_SHAPES = [(1, 3, 1080, 1920), (8, 3, 512, 512)]


def providers(kind: str) -> dict:
    """name -> f(x, y) returning a scalar, for kind 'ssim' or 'ms_ssim' (valid, pytorch-msssim semantics)."""
    out = {}

    def fused(x, y):
        with use_backend("triton"):
            return (fusedsim.ssim if kind == "ssim" else fusedsim.ms_ssim)(x, y, data_range=1.0, check_finite=False)

    def twin(x, y):
        with use_backend("reference"):
            return (fusedsim.ssim if kind == "ssim" else fusedsim.ms_ssim)(x, y, data_range=1.0, check_finite=False)

    out["fusedsim"] = fused
    try:
        import pytorch_msssim

        fn = pytorch_msssim.ssim if kind == "ssim" else pytorch_msssim.ms_ssim
        out["pytorch_msssim"] = lambda x, y: fn(x, y, data_range=1.0)
    except ImportError:
        pass
    try:
        from torchmetrics.functional.image import multiscale_structural_similarity_index_measure as tm_ms
        from torchmetrics.functional.image import structural_similarity_index_measure as tm_ssim

        if kind == "ssim":
            out["torchmetrics"] = lambda x, y: tm_ssim(x, y, data_range=1.0)
        else:
            out["torchmetrics"] = lambda x, y: tm_ms(x, y, data_range=1.0)
    except ImportError:
        pass
    out["torch_twin"] = twin
    if kind == "ssim":
        try:
            from fused_ssim import fused_ssim as peer

            out["fused_ssim(same)"] = lambda x, y: peer(x, y, padding="same", train=torch.is_grad_enabled())
            out["fusedsim.fused_ssim(same)"] = lambda x, y: fusedsim.fused_ssim(
                x, y, padding="same", train=torch.is_grad_enabled(), check_finite=False)
        except ImportError:
            pass
    return out


def measure(name, fn, shape, dtype, modes):
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.rand(shape, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
    y = (x.float() + 0.1 * torch.randn(shape, device="cuda", generator=gen)).clamp(0, 1).to(dtype)
    xg = x.clone().requires_grad_(True)
    row = {"provider": name, "shape": list(shape), "dtype": str(dtype).replace("torch.", "")}

    def fwd():
        return fn(xg, y)

    def fwd_bwd():
        return torch.autograd.grad(fn(xg, y), xg)

    def infer():
        with torch.no_grad():
            return fn(x, y)

    try:
        value = infer()
        row["value"] = float(value)
        if "fwd" in modes:
            row["fwd_ms"] = median_ms(fwd)
        if "fwd_bwd" in modes:
            row["fwd_bwd_ms"] = median_ms(fwd_bwd)
            row["peak_extra_mib"] = peak_extra_mib(fwd_bwd)
        if "infer" in modes:
            row["infer_ms"] = median_ms(infer)
    except Exception as exc:  # a peer that cannot run a case is recorded, not fatal
        row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="first shape only, fp32 only")
    parser.add_argument("--skip", default="", help="comma-separated providers to skip")
    parser.add_argument("--fp32-only", action="store_true", help="skip the bfloat16 rows")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    rows = []
    shapes = SHAPES[:1] if args.quick else SHAPES
    dtypes = [torch.float32] if args.quick or args.fp32_only else [torch.float32, torch.bfloat16]
    for dtype in dtypes:
        for shape in shapes:
            for name, fn in providers("ssim").items():
                if name in skip:
                    continue
                rows.append({"kind": "ssim", **measure(name, fn, shape, dtype, ("fwd", "fwd_bwd", "infer"))})
                print(rows[-1], flush=True)
    for shape in MS_SHAPES[: 1 if args.quick else None]:
        for name, fn in providers("ms_ssim").items():
            if name in skip:
                continue
            rows.append({"kind": "ms_ssim", **measure(name, fn, shape, torch.float32, ("fwd_bwd", "infer"))})
            print(rows[-1], flush=True)
            torch.cuda.empty_cache()
    path = write_json("ssim", {"meta": metadata(), "rows": rows}, os.environ.get("OUT"))
    print_table(rows)
    print("wrote", path)


def print_table(rows) -> None:
    base = {(r["kind"], tuple(r["shape"]), r["dtype"]): r for r in rows if r["provider"] == "pytorch_msssim"}
    print(f"{'kind':8} {'shape':22} {'dtype':9} {'provider':26} {'fwd+bwd ms':>10} {'infer ms':>9} "
          f"{'peak MiB':>9} {'x msssim train':>14} {'x msssim infer':>14}")
    for r in rows:
        ref = base.get((r["kind"], tuple(r["shape"]), r["dtype"]), {})
        fb, inf = r.get("fwd_bwd_ms"), r.get("infer_ms")
        ratio_t = f"{ref['fwd_bwd_ms'] / fb:.1f}" if fb and ref.get("fwd_bwd_ms") else "-"
        ratio_i = f"{ref['infer_ms'] / inf:.1f}" if inf and ref.get("infer_ms") else "-"
        shape = "x".join(map(str, r["shape"]))
        error = f"  {r['error']}" if "error" in r else ""
        print(f"{r['kind']:8} {shape:22} {r['dtype']:9} {r['provider']:26} {_fmt(fb):>10} {_fmt(inf):>9} "
              f"{_fmt(r.get('peak_extra_mib')):>9} {ratio_t:>14} {ratio_i:>14}{error}")


def _fmt(value) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "-"


if __name__ == "__main__":
    main()
