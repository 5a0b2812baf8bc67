"""A/B of the two 3-D LNCC strategies (``depth_mode="stream"`` and ``"slab"``) in one process.

For each shape, window size and window type: median time of the forward and of forward + backward (gradient for
pred only), peak memory above the inputs during forward + backward, and the largest differences between the two
strategies (loss, gradient). Usage (GPU): ``python benchmarks/bench_lncc_variants.py [--slab S] [--quick]``.
"""

from __future__ import annotations

import argparse

import torch
from triton.testing import do_bench

from fusedsim.core.registry import op
from fusedsim.registration.lncc_kernel import lncc_plan
from fusedsim.registration.lncc_twin import lncc_constants, lncc_taps, lncc_window_table

SHAPES = [((1, 1, 192, 160, 224), 9), ((1, 1, 384, 320, 448), 9), ((2, 16, 128, 128, 128), 7)]


def _case(shape: tuple[int, ...], k: int, kind: str, options: dict):
    gen = torch.Generator(device="cuda").manual_seed(0)
    pred = torch.rand(shape, device="cuda", generator=gen).requires_grad_()
    target = torch.rand(shape, device="cuda", generator=gen)
    taps = lncc_taps(k, kind, k / 3.0, "monai")
    scalars = (*lncc_constants("monai", taps, 3, 0.0, 1e-5), 1)
    win = lncc_window_table(taps, shape[1], torch.float32, "cuda")
    plan = lncc_plan((pred, target, win), scalars, **options)
    lncc = op("lncc")

    def forward():
        return lncc.run_plan(plan, pred, target, win)

    def both():
        (grad,) = torch.autograd.grad(forward(), pred)
        return grad

    return forward, both


def _peak_mib(fn) -> float:
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--slab", type=int, default=None, help="slices per slab (default: from the memory budget)")
    parser.add_argument("--depth-block", type=int, default=8)
    parser.add_argument("--quick", action="store_true", help="first shape only")
    args = parser.parse_args()
    slab_options = {"depth_mode": "slab", "slab": args.slab, "depth_block": args.depth_block}
    print(f"{'shape':>22} {'k':>2} {'window':>8} {'mode':>6} {'fwd ms':>8} {'f+b ms':>8} {'peak MiB':>9}")
    for shape, k in SHAPES[:1] if args.quick else SHAPES:
        for kind in ("box", "gaussian"):
            results = {}
            for name, options in (("stream", {"depth_mode": "stream"}), ("slab", slab_options)):
                forward, both = _case(shape, k, kind, options)
                fwd_ms, both_ms = do_bench(forward), do_bench(both)
                peak = _peak_mib(both)
                results[name] = (forward().detach(), both())
                print(f"{shape!s:>22} {k:>2} {kind:>8} {name:>6} {fwd_ms:8.3f} {both_ms:8.3f} {peak:9.1f}")
            (l0, g0), (l1, g1) = results["stream"], results["slab"]
            print(f"{'':>22} |Δloss| {abs(l0 - l1).item():.3g}  max|Δgrad| {(g0 - g1).abs().max().item():.3g}"
                  f"  (max|grad| {g0.abs().max().item():.3g})")
            del results
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
