"""Where the host time of a 3DGS-like training step goes, per phase and per provider (probe, not a benchmark).

The step of ``bench_ssim.py --parts train`` (parameter image -> 1x1 conv -> sigmoid -> loss -> Adam) is host-bound
at batch 1, so SSIM's share of it is host time. This times each phase on the host without synchronising (loss
forward, backward, optimizer step), the Python inside each provider's autograd forward/backward, and prints a
cProfile of the provider's own Python (forward on the main thread, backward on autograd's device thread).

Run: ``PYTHONPATH=src python benchmarks/probe_train_host.py [--size 1080x1920] [--steps 300] [--rounds 5]``
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import optional_import  # noqa: E402
from bench_ssim import l1  # noqa: E402  (the same L1 term as the benchmark's training step)

PROFILES: dict[str, cProfile.Profile] = {}  # per "<provider>.<forward|backward>", filled while PROFILE_ON[0]
INSIDE: dict[str, list[float]] = {}  # seconds spent inside each wrapped autograd method, per call
PROFILE_ON = [False]


def wrap(cls, label: str) -> None:
    """Time (and profile) ``cls.forward`` / ``cls.backward`` of an autograd.Function subclass."""
    for phase in ("forward", "backward"):
        orig = getattr(cls, phase)
        key = f"{label}.{phase}"
        INSIDE[key] = []
        PROFILES[key] = cProfile.Profile()

        def timed(*args, _orig=orig, _key=key):
            prof = PROFILES[_key] if PROFILE_ON[0] else None
            t0 = time.perf_counter()
            if prof is not None:
                prof.enable()
            out = _orig(*args)
            if prof is not None:
                prof.disable()
            INSIDE[_key].append(time.perf_counter() - t0)
            return out

        setattr(cls, phase, staticmethod(timed))



def make_step(loss_fn, h, w):
    torch.manual_seed(0)
    param = torch.nn.Parameter(torch.rand(1, 3, h, w, device="cuda"))
    target = torch.rand(1, 3, h, w, device="cuda")
    conv = torch.nn.Conv2d(3, 3, 1).cuda()
    opt = torch.optim.Adam([param, *conv.parameters()], lr=1e-3)
    phases = {"zero+fwd": [], "loss": [], "backward": [], "opt": [], "step": []}

    def step():
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        out = torch.sigmoid(conv(param))
        t1 = time.perf_counter()
        loss = loss_fn(out, target)
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        t4 = time.perf_counter()
        for k, dt in zip(phases, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0)):
            phases[k].append(dt)

    return step, phases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", action="append")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--label", default="", help="tag of the JSON file name")
    ap.add_argument("--no-profile", action="store_true", help="phase timings only (no cProfile / torch.profiler)")
    args = ap.parse_args()
    sizes = [tuple(int(v) for v in s.split("x")) for s in (args.size or ["1080x1920", "800x800"])]
    fusedsim = optional_import("fusedsim")
    peer = optional_import("fused_ssim")
    variants = {"L1 only": l1}
    if not isinstance(fusedsim, str):
        from fusedsim.core.registry import PlannedFunction

        wrap(PlannedFunction, "fusedsim")
        variants["+ fusedsim.fused_ssim"] = lambda o, t: 0.8 * l1(o, t) + 0.2 * (1 - fusedsim.fused_ssim(o, t))
        variants["fusedsim.l1_ssim_loss"] = fusedsim.l1_ssim_loss
    if not isinstance(peer, str):
        import fused_ssim as fs_mod

        cls = getattr(fs_mod, "FusedSSIMMap", None)
        if cls is not None:
            wrap(cls, "fused_ssim")
        variants["+ fused_ssim"] = lambda o, t: 0.8 * l1(o, t) + 0.2 * (1 - peer.fused_ssim(o, t))
    else:
        print("fused_ssim missing:", peer)
    result = {"meta": {"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}, "rows": []}
    for h, w in sizes:
        steps = {}
        for name, fn in variants.items():
            step, phases = make_step(fn, h, w)
            for _ in range(50):
                step()
            torch.cuda.synchronize()
            steps[name] = (step, phases)
        walls = {name: [] for name in variants}
        for key in INSIDE:
            INSIDE[key].clear()
        for name, (_, phases) in steps.items():
            for v in phases.values():
                v.clear()
        for _ in range(args.rounds):
            for name, (step, _) in steps.items():
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    step()
                torch.cuda.synchronize()
                walls[name].append((time.perf_counter() - t0) * 1e3 / args.steps)
        print(f"\n== {h}x{w}: ms per step (wall, median of {args.rounds} rounds) and host µs per phase (median)")
        base = statistics.median(walls["L1 only"])
        for name, (_, phases) in steps.items():
            wall = statistics.median(walls[name])
            ph = {k: statistics.median(v) * 1e6 for k, v in phases.items()}
            print(f"{name:24} wall {wall:.3f} (share {wall - base:+.3f}) rounds {[round(x, 3) for x in walls[name]]}")
            print("    host µs: " + ", ".join(f"{k} {v:.1f}" for k, v in ph.items()))
            result["rows"].append({"size": [h, w], "variant": name, "wall_ms": wall, "walls": walls[name],
                                   "host_us": ph})
        for key, v in INSIDE.items():
            if v:
                print(f"    inside {key}: median {statistics.median(v) * 1e6:.1f} µs over {len(v)} calls")
                result["rows"].append({"size": [h, w], "inside": key, "us": statistics.median(v) * 1e6})
    out = os.environ.get("OUT")
    if out:
        Path(out, f"probe_train_host{'-' + args.label if args.label else ''}.json").write_text(json.dumps(result, indent=1))
    if args.no_profile:
        return
    # profiles of each provider's own Python at the first size
    h, w = sizes[0]
    PROFILE_ON[0] = True
    for name, fn in variants.items():
        if name == "L1 only":
            continue
        step, _ = make_step(fn, h, w)
        for _ in range(300):
            step()
        torch.cuda.synchronize()
    PROFILE_ON[0] = False
    for key, prof in PROFILES.items():
        prof.create_stats()
        if not prof.stats:
            continue
        s = io.StringIO()
        st = pstats.Stats(prof, stream=s)
        st.sort_stats("tottime").print_stats(22)
        print(f"\n---- cProfile {key} (300 calls, tottime) ----\n" + s.getvalue()[:6000])
    # autograd profiler view of one step per provider (CPU ops with their host time)
    from torch.profiler import ProfilerActivity, profile

    for name, fn in variants.items():
        step, _ = make_step(fn, h, w)
        for _ in range(20):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                step()
            torch.cuda.synchronize()
        print(f"\n---- torch.profiler {name}: 20 steps ----")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=50))


if __name__ == "__main__":
    main()
