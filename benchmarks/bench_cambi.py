"""CAMBI (libvmaf's banding score, ``fusedsim.cambi.cambi``): GPU and CPU frames/s, work per frame, and libvmaf.

* GPU, frames already on the device: ``cambi(frames, bits, **options)`` on batches of 1920x1080 (and 3840x2160)
  frames, 8-bit and 10-bit, with libvmaf's default options and with the VMAF v1 model's
  (``cambi_high_res_speedup=1080``, ``cambi_vis_lum_threshold=0.06``, ``cambi_max_val=17``); frames/s, and the
  GPU time of each kernel (torch.profiler) for one batch.
* CPU: the same call on CPU tensors (the numba kernel) at 1920x1080, 1 thread and every thread.
* Work per frame (a model, printed with the rates): DRAM bytes (each buffer written once and read once; window
  reads served by the caches; the pooling's passes over the c-values in full) and the time they take at an
  H200's ~4.8 TB/s, the floor; and the window's area per pixel summed (the work of a window walk).
* libvmaf (``--libvmaf PATH`` to its ``vmaf`` tool): ``vmaf -r X -d X -n --feature cambi`` on the same frames as
  raw YUV with ``--threads 1`` and every core; its frames/s, and its per-frame values compared with ours (stock
  libvmaf prints 6 decimals: ours must round to them).

Content: a smooth gradient quantised to a few codes (banding) under a textured, noisy patch, panned across frames.

Run: ``PYTHONPATH=src python benchmarks/bench_cambi.py [--frames 64] [--batch 16] [--libvmaf build/tools/vmaf]``;
``--smoke`` runs tiny sizes on the CPU. JSON goes to ``benchmarks/results/`` (and ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, kernel_times_us, metadata, smoke_dir, write_json  # noqa: E402

V1_OPTIONS = {"cambi_high_res_speedup": 1080, "cambi_vis_lum_threshold": 0.06, "cambi_max_val": 17.0}


def banded_clip(n: int, height: int, width: int, bits: int, seed: int = 0) -> np.ndarray:
    """(n, H, W) luma: a diagonal gradient in steps of one 8-bit code (banding) panned by a pixel per frame, with
    a textured noisy block over a third of it."""
    rng = np.random.default_rng(seed)
    unit = 1 << (bits - 8)
    yy, xx = np.mgrid[0:height, 0:width]
    frames = []
    for i in range(n):
        ramp = 40 + ((xx + i) * 60 // width + yy * 30 // height)
        frame = ramp * unit
        block = (slice(height // 3, 2 * height // 3), slice(width // 3, 2 * width // 3))
        frame[block] += rng.integers(-6 * unit, 6 * unit + 1, frame[block].shape)
        frames.append(np.clip(frame, 0, (1 << bits) - 1))
    return np.stack(frames).astype(np.uint8 if bits == 8 else np.uint16)


def work_per_frame(height: int, width: int, bits: int, options: dict) -> dict:
    """The model of one frame's DRAM traffic on the GPU path (each buffer written once and read once, the
    pooling's nine passes over the c-values counted in full: the worst case, every scale selecting), and the
    window's area: the work of the window walk it replaced. The code-by-code c-value kernel's work follows the
    number of distinct codes near each tile (the content), so it is measured, not modelled."""
    from fusedsim.families.cambi.settings import cambi_settings

    settings, _ = cambi_settings(width, height, bits, **{k.removeprefix("cambi_"): v for k, v in options.items()
                                                         if k != "cambi_max_val"})
    pixels = height * width
    bytes_ = pixels * (1 if bits == 8 else 2) + pixels * (2 + 2) + pixels * (1 + 1) * 2 + pixels * 1
    window_visits = 0
    for h, w in settings.scale_sizes:
        n = h * w
        bytes_ += n * (2 + 2) * 2 + n * 4 * (1 + 9)  # filtered + counted codes written and read; c-values
        window_visits += n * settings.window * settings.window
    return {"window": settings.window, "scales": settings.scale_sizes, "dram_bytes": bytes_,
            "memory_floor_us_at_4_8_tb_s": bytes_ / 4.8e6, "window_visits": window_visits}


def gpu_rows(args: argparse.Namespace) -> list[dict]:
    from fusedsim import use_backend
    from fusedsim.cambi import cambi

    rows = []
    for (height, width) in args.sizes:
        for bits in (8, 10):
            clip = banded_clip(args.batch, height, width, bits)
            frames = torch.from_numpy(clip if bits == 8 else clip.astype(np.int16)).to("cuda")
            for label, options in (("default", {}), ("v1", V1_OPTIONS)):
                def call(frames=frames, bits=bits, options=options):
                    with use_backend("triton"):  # the kernels, never the twin
                        return cambi(frames, bits, **options)

                call()
                torch.cuda.synchronize()
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    call()
                    torch.cuda.synchronize()
                    times.append(time.perf_counter() - t0)
                best = min(times)
                kernels = kernel_times_us(call, 1)
                row = {"device": "cuda", "size": f"{width}x{height}", "bits": bits, "options": label,
                       "batch": args.batch, "frames_per_s": args.batch / best, "ms_per_frame": best * 1e3 / args.batch,
                       "kernel_us_per_frame": sum(kernels) / args.batch, "kernel_launches": len(kernels),
                       **work_per_frame(height, width, bits, options)}
                rows.append(row)
                print(json.dumps(row))
    return rows


def cpu_rows(args: argparse.Namespace) -> list[dict]:
    import numba

    from fusedsim.cambi import cambi

    rows = []
    height, width = args.cpu_size
    frames = torch.from_numpy(banded_clip(args.cpu_frames, height, width, 8))
    for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
        numba.set_num_threads(threads)
        for label, options in (("default", {}), ("v1", V1_OPTIONS)):
            cambi(frames[:1], 8, **options)  # compile
            t0 = time.perf_counter()
            cambi(frames, 8, **options)
            elapsed = time.perf_counter() - t0
            row = {"device": "cpu", "threads": threads, "size": f"{width}x{height}", "bits": 8, "options": label,
                   "frames_per_s": args.cpu_frames / elapsed}
            rows.append(row)
            print(json.dumps(row))
    return rows


def timed_process(command: list[str], repeats: int = 2) -> float:
    """Seconds ``command`` takes as a whole process, the best of ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
        best = min(best, time.perf_counter() - t0)
    return best


def libvmaf_rows(args: argparse.Namespace) -> list[dict]:
    """libvmaf's ``vmaf -n --feature cambi`` (default options, and the v1 model's) on the same frames, as whole
    processes, 1 thread and every core: frames/s, and frames/s after its start-up (the time of a one-frame run
    taken off, its rate on the other frames); whether its printed values equal ours rounded to its 6 decimals."""
    from fusedsim.cambi import cambi

    rows = []
    height, width = args.cpu_size
    frames = banded_clip(args.cpu_frames, height, width, 8)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "clip.yuv"
        grey = np.full((args.cpu_frames, (height // 2) * (width // 2) * 2), 128, np.uint8)
        path.write_bytes(np.concatenate([frames.reshape(args.cpu_frames, -1), grey], axis=1).tobytes())
        for label, options in (("default", {}), ("v1", V1_OPTIONS)):
            (name, values), = cambi(frames, 8, **options).items()  # libvmaf's column name, option suffix included
            ours = values.tolist()
            feature = "cambi" + ("=" + ":".join(f"{k}={v}" for k, v in options.items()) if options else "")
            for threads in sorted({1, os.cpu_count() or 1}):
                out = Path(tmp) / f"out{threads}.json"
                command = [args.libvmaf, "-r", str(path), "-d", str(path), "-w", str(width), "-h", str(height),
                           "-p", "420", "-b", "8", "-n", "--feature", feature, "--threads", str(threads), "-q",
                           "--json", "-o", str(out)]
                one_frame = timed_process(command + ["--frame_cnt", "1"])  # start-up and one frame
                elapsed = timed_process(command)
                theirs = [f["metrics"][name] for f in json.loads(out.read_text())["frames"]]
                agree = all(round(a, 6) == round(b, 6) for a, b in zip(ours, theirs))
                # one thread only: with more, libvmaf scores frames side by side and one frame's run is no start-up
                after_start = ((args.cpu_frames - 1) / (elapsed - one_frame)
                               if threads == 1 < args.cpu_frames and elapsed > one_frame else None)
                row = {"device": "libvmaf", "threads": threads, "size": f"{width}x{height}", "options": label,
                       "frames_per_s": args.cpu_frames / elapsed, "frames_per_s_after_start": after_start,
                       "values_agree_to_printed_digits": agree}
                rows.append(row)
                print(json.dumps(row))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-frames", type=int, default=8)
    parser.add_argument("--libvmaf", default=None, help="path to libvmaf's vmaf tool")
    parser.add_argument("--uhd", action="store_true", help="also 3840x2160 on the GPU")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU (numbers mean nothing)")
    args = parser.parse_args()
    args.sizes = [(1080, 1920)] + ([(2160, 3840)] if args.uhd else [])
    args.cpu_size = (1080, 1920)
    results_dir = RESULTS
    if args.smoke:
        args.cpu_size, args.cpu_frames, results_dir = (40, 240), 2, smoke_dir()
    rows = []
    if torch.cuda.is_available() and not args.smoke:
        rows += gpu_rows(args)
    rows += cpu_rows(args)
    if args.libvmaf:
        rows += libvmaf_rows(args)
    device = "cuda" if torch.cuda.is_available() and not args.smoke else "cpu"
    write_json("cambi", {"meta": metadata(device), "rows": rows}, os.environ.get("OUT"), results_dir=results_dir)


if __name__ == "__main__":
    main()
