"""A/B of SSIMULACRA2's scales on side CUDA streams (``fusedsim.core.side_streams``) against one stream, in one
process on one GPU: per-call time one-shot and with a prepared reference (CUDA events over back-to-back calls,
median of 5 timings, each variant twice in turn), peak extra memory, and whether the scores are identical.

The two variants are the metric's own paths: ``MIN_ELEMENTS`` set to 0 (every call on side streams) or past any
image (every call on one stream); the shipped threshold decides which one a call takes. JSON to
``benchmarks/results/``. Run: ``PYTHONPATH=src python benchmarks/ab_side_streams.py [--shapes 1x1080x1920,...]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, write_json  # noqa: E402

from fusedsim.families.ssimulacra2.api import prepare_ssimulacra2, score_prepared_ssimulacra2, ssimulacra2  # noqa: E402
import fusedsim.core.side_streams as side_streams  # noqa: E402

SHAPES = ["1x1080x1920", "8x1080x1920", "1x1024x1024", "1x4096x4096"]
VARIANTS = {"one stream": 2**62, "side streams": 0}


def event_ms(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return sorted(times)[2]


def pair(n: int, h: int, w: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    ref = torch.randint(0, 256, (n, 3, h, w), dtype=torch.uint8, device="cuda", generator=g)
    noise = torch.randint(-20, 21, ref.shape, device="cuda", generator=g)
    return ref, (ref.int() + noise).clamp(0, 255).to(torch.uint8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default=",".join(SHAPES), help="NxHxW, comma-separated")
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    shipped = side_streams.MIN_ELEMENTS
    rows = []
    for shape in args.shapes.split(","):
        n, h, w = (int(v) for v in shape.split("x"))
        ref, dist = pair(n, h, w, 0)
        scores = {}
        for name in [*VARIANTS, *VARIANTS]:
            side_streams.MIN_ELEMENTS = VARIANTS[name]
            one_shot = event_ms(lambda: ssimulacra2(ref, dist), args.reps)
            prepared = prepare_ssimulacra2(ref)
            cached = event_ms(lambda: score_prepared_ssimulacra2(prepared, dist), args.reps)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            scores[name] = ssimulacra2(ref, dist)
            torch.cuda.synchronize()
            peak = (torch.cuda.max_memory_allocated() - base) / 2**20
            rows.append({"shape": [n, 3, h, w], "variant": name, "one_shot_ms": one_shot, "cached_ms": cached,
                         "peak_mib": peak})
            print(f"{shape:<12} {name:<13} one-shot {one_shot:.3f} ms ({one_shot / n:.3f}/frame)  cached reference "
                  f"{cached:.3f} ms  peak {peak:.0f} MiB", flush=True)
        same = torch.equal(scores["one stream"], scores["side streams"])
        rows.append({"shape": [n, 3, h, w], "identical_scores": same})
        print(f"  identical scores: {same}  (shipped path: {'side streams' if n * 3 * h * w >= shipped else 'one stream'})")
    side_streams.MIN_ELEMENTS = shipped
    path = write_json("side-streams", {"meta": metadata("cuda"), "min_elements": shipped, "rows": rows},
                      None)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
