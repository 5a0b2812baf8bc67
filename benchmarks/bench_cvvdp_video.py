"""ColorVideoVDP on video: fusedsim against pycvvdp 0.5.7 on the same GPU, same clip, same run.

A synthetic 1080p clip (default 300 frames at 30 fps, uint8 sRGB on the GPU: a textured image panning 2 px per
frame, and a copy with temporal noise and a brightness flicker) is scored whole by

    fusedsim.cvvdp(ref, dist, fps=fps, display=display)                 # (1, T, 3, H, W)
    pycvvdp.cvvdp(display_name=display, device=cuda).predict(dist, ref, dim_order="BFCHW", frames_per_second=fps)

after a warm-up call on a short clip each (compilation). With ``--vship libvship.so`` Vship's CVVDP (its C API,
built from its public source) scores the same frames too: one handler at the clip's frame rate and display
(``resizeToDisplay`` off), frames handed one by one from pinned host memory as planar 8-bit sRGB (staged before
the timer), the JOD after the last frame; its memory is the drop in the GPU's free memory while its handler lives.
With ``--encodes K`` (K > 1), K distorted clips against the one reference: one call sharing the reference's side
(``fusedsim.cvvdp(ref, dists)``, ref (1, T, ...), dists (K, T, ...)) and K separate calls (their JODs summed). Reported: wall seconds and frames/s (median of
``--rounds``), peak GPU memory above the inputs, the JODs and their difference. pycvvdp sizes its frame blocks
from the free GPU memory (its ``estimate_block_N``), as its users run it.

    PYTHONPATH=src python benchmarks/bench_cvvdp_video.py [--frames 300] [--size 1080x1920] [--fps 30]
        [--display standard_4k] [--rounds 3] [--skip pycvvdp] [--frames-per-block N] [--vship libvship.so]
        [--encodes K]
    PYTHONPATH=src python benchmarks/bench_cvvdp_video.py --device cpu --quick     # smoke run, numbers mean nothing

pycvvdp needs ``cvvdp==0.5.7`` (pure Python) and its imports: torchvision (the build matching torch), einops,
ffmpeg-python, future, imageio, tqdm, scipy; ``huggingface_hub`` (imported by its unused ``cvvdp_ml`` variant) is
replaced by an empty module when it is not installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
import _harness as h  # noqa: E402

import fusedsim  # noqa: E402


def make_clip(frames: int, height: int, width: int, device: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """(ref, dist) uint8 (1, T, 3, H, W) on ``device``: a smooth textured image panning 2 px per frame; the
    distorted clip adds temporal noise (sigma 3 codes) and a +-2 code flicker."""
    gen = torch.Generator().manual_seed(seed)
    wide = width + 2 * frames
    low = torch.rand(1, 3, max(2, height // 16), max(2, wide // 16), generator=gen)
    base = torch.nn.functional.interpolate(low, size=(height, wide), mode="bilinear", align_corners=False)
    base = (base * 0.8 + 0.2 * torch.rand(1, 3, height, wide, generator=gen)).to(device)
    ref = torch.empty((1, frames, 3, height, width), dtype=torch.uint8, device=device)
    dist = torch.empty_like(ref)
    dgen = torch.Generator(device=device).manual_seed(seed + 1)
    for t in range(frames):
        frame = base[0, :, :, 2 * t:2 * t + width]
        ref[0, t] = (frame * 255).round().clamp(0, 255).to(torch.uint8)
        noisy = frame * 255 + 3 * torch.randn(frame.shape, device=device, generator=dgen) + (2 if t % 2 else -2)
        dist[0, t] = noisy.round().clamp(0, 255).to(torch.uint8)
    return ref, dist


def _import_pycvvdp():
    if importlib.util.find_spec("huggingface_hub") is None:  # only pycvvdp's ML variant (not used here) needs it
        stub = types.ModuleType("huggingface_hub")
        stub.hf_hub_download = None
        sys.modules["huggingface_hub"] = stub
    import pycvvdp

    return pycvvdp


def _timed(fn, device: str, rounds: int) -> tuple[list[float], object]:
    times, out = [], None
    for _ in range(rounds):
        h.sync(device)
        start = time.perf_counter()
        out = fn()
        h.sync(device)
        times.append(time.perf_counter() - start)
    return times, out


def _provider(name: str, fn, warm, ref, device: str, rounds: int) -> dict:
    warm()
    times, value = _timed(fn, device, rounds)
    peak = h.peak_extra_mib(fn, device)
    wall = statistics.median(times)
    frames = ref.shape[1]
    row = {"provider": name, "seconds": wall, "seconds_all": times, "frames_per_s": frames / wall,
           "peak_extra_mib": peak, "jod": float(value)}
    print(f"{name:10s} {wall:8.3f} s  {frames / wall:9.2f} frames/s  peak {h.fmt(peak, 0)} MiB  JOD {float(value):.6f}",
          flush=True)
    return row


def _vship_provider(lib: str, ref: torch.Tensor, dist: torch.Tensor, fps: float, display: str, rounds: int) -> dict:
    from _vship import Vship, srgb_rgb8

    vship = Vship(lib)
    frames, _, height, width = ref.shape[1:]
    ref_h, dist_h = (x[0].cpu().pin_memory() for x in (ref, dist))  # (T, 3, H, W): what a decoder hands over
    space = srgb_rgb8(width, height)

    def clip(n: int) -> tuple[float, int]:
        free_before = torch.cuda.mem_get_info()[0]
        handle = vship.handler("cvvdp", space, fps=fps, display=display)
        try:
            value = None
            for t in range(n):
                value = vship.score("cvvdp", handle, ref_h[t], dist_h[t])[0]
            used = free_before - torch.cuda.mem_get_info()[0]
        finally:
            vship.free("cvvdp", handle)
        return value, used

    clip(8)  # CUDA modules loaded
    times, value, used = [], None, 0
    for _ in range(rounds):
        torch.cuda.synchronize()
        start = time.perf_counter()
        value, used = clip(frames)
        times.append(time.perf_counter() - start)
    wall = statistics.median(times)
    row = {"provider": "vship", "seconds": wall, "seconds_all": times, "frames_per_s": frames / wall,
           "peak_extra_mib": used / 2**20, "jod": float(value)}
    print(f"{'vship':10s} {wall:8.3f} s  {frames / wall:9.2f} frames/s  memory {used / 2**20:.0f} MiB  "
          f"JOD {value:.6f}", flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--size", default="1080x1920", help="HxW")
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--display", default="standard_4k")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--frames-per-block", type=int, default=None)
    ap.add_argument("--skip", default="", help="comma-separated providers to skip: fusedsim, pycvvdp")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--vship", default=None, help="libvship.so: also score the clip with Vship's CVVDP")
    ap.add_argument("--encodes", type=int, default=1,
                    help="also K distorted clips against the one reference: shared (one call) and K separate calls")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 12 frames of 96x128, one round")
    args = ap.parse_args()
    if args.quick:
        args.frames, args.size, args.rounds = 12, "96x128", 1
    height, width = (int(v) for v in args.size.split("x"))
    skip = h.parse_skip(args.skip)
    ref, dist = make_clip(args.frames, height, width, args.device)
    warm_ref, warm_dist = ref[:, :8].clone(), dist[:, :8].clone()
    print(f"clip 1x{args.frames}x3x{height}x{width} uint8 at {args.fps} fps, {args.display}, {args.device}", flush=True)
    rows = []
    if "fusedsim" not in skip:
        def ours(r=ref, d=dist):
            with torch.no_grad():
                return fusedsim.cvvdp(r, d, fps=args.fps, display=args.display,
                                      frames_per_block=args.frames_per_block)
        rows.append(_provider("fusedsim", ours, lambda: ours(warm_ref, warm_dist), ref, args.device, args.rounds))
        if args.encodes > 1:  # one reference, K encodes: shared (reference side once) against K separate calls
            encodes = torch.cat([dist] + [make_clip(args.frames, height, width, args.device, seed=k)[1]
                                          for k in range(2, args.encodes + 1)])
            rows.append(_provider(f"fusedsim {args.encodes} encodes shared", lambda: ours(ref, encodes).sum(),
                                  lambda: ours(warm_ref, encodes[:, :8].clone()), ref, args.device, args.rounds))
            rows.append(_provider(f"fusedsim {args.encodes} encodes separate",
                                  lambda: sum(ours(ref, e[None]) for e in encodes),
                                  lambda: ours(warm_ref, warm_dist), ref, args.device, args.rounds))
    if "pycvvdp" not in skip:
        pycvvdp = _import_pycvvdp()
        metric = pycvvdp.cvvdp(display_name=args.display, device=torch.device(args.device), quiet=True)

        def peer(r=ref, d=dist):
            with torch.no_grad():
                return metric.predict(d, r, dim_order="BFCHW", frames_per_second=args.fps)[0]
        rows.append(_provider("pycvvdp", peer, lambda: peer(warm_ref, warm_dist), ref, args.device, args.rounds))
    if args.vship:
        rows.append(_vship_provider(args.vship, ref, dist, args.fps, args.display, args.rounds))
    payload = {"meta": {**h.metadata(args.device), "frames": args.frames, "size": [height, width], "fps": args.fps,
                        "display": args.display, "pycvvdp": h.version_of("cvvdp")}, "rows": rows}
    by = {row["provider"]: row for row in rows}
    if args.encodes > 1 and f"fusedsim {args.encodes} encodes shared" in by:
        shared, separate = by[f"fusedsim {args.encodes} encodes shared"], by[f"fusedsim {args.encodes} encodes separate"]
        payload["encodes_shared_speedup"] = separate["seconds"] / shared["seconds"]
        print(f"{args.encodes} encodes: shared reference {payload['encodes_shared_speedup']:.2f}x separate calls, "
              f"|dJOD sum| {abs(shared['jod'] - separate['jod']):.2e}")
    if "vship" in by and "fusedsim" in by:
        payload["speedup_vs_vship"] = by["vship"]["seconds"] / by["fusedsim"]["seconds"]
        payload["abs_djod_vship"] = abs(by["vship"]["jod"] - by["fusedsim"]["jod"])
        print(f"vs Vship: speed-up {payload['speedup_vs_vship']:.2f}x, |dJOD| {payload['abs_djod_vship']:.2e}")
    if "fusedsim" in by and "pycvvdp" in by:
        ours_row, peer_row = by["fusedsim"], by["pycvvdp"]
        payload["speedup"] = peer_row["seconds"] / ours_row["seconds"]
        payload["memory_ratio"] = (ours_row["peak_extra_mib"] / peer_row["peak_extra_mib"]
                                   if ours_row["peak_extra_mib"] and peer_row["peak_extra_mib"] else None)
        payload["abs_djod"] = abs(ours_row["jod"] - peer_row["jod"])
        print(f"speed-up {payload['speedup']:.2f}x, memory ratio {h.fmt(payload['memory_ratio'])}, "
              f"|dJOD| {payload['abs_djod']:.2e}")
    results = h.smoke_dir() if args.device != "cuda" else h.RESULTS
    print(h.write_json("cvvdp_video", payload, os.environ.get("OUT"), results_dir=results))


if __name__ == "__main__":
    main()
