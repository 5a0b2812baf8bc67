"""libvmaf's float features (``float_vif``, ``float_adm``, ``float_motion``): frames/s at 1080p, GPU and CPU.

* GPU (Triton kernels, frames resident on the GPU): the op each feature launches (``fusedsim.vmaf_float.ops``:
  ``float_vif``, ``float_adm``, ``float_motion_sad``) on a batch of 1080p frame pairs, 8 and 10 bit; frames/s
  from the median batch time (``triton.testing.do_bench``). Each GPU result is checked ``==`` the numba result on
  the same frames (both are the twin's bits).
* CPU (numba, the path CPU tensors take): the same ops with 1 thread and with every thread; frames/s and per core.

Run: ``PYTHONPATH=src python benchmarks/bench_vmaf_float.py [--frames 16] [--cpu-frames 4] [--out DIR]``;
``--smoke`` runs tiny frames on the CPU (numba and the Triton interpreter) to check the script, JSON to a
temporary folder. JSON goes to ``benchmarks/results/vmaf_float-<stamp>.json`` (and ``--out``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, smoke_dir, write_json  # noqa: E402

from fusedsim.families.vmaf_float import cpu as float_cpu  # noqa: E402
from fusedsim.families.vmaf_float import kernel as float_kernel  # noqa: E402

_PLAIN_ADM = (100.0, 3.0, 1080, 0.03125, 3.0, 0, 0) + (-1.0,) * 8


def make_frames(n: int, h: int, w: int, bit_depth: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Natural-ish content (smooth field + texture) and a distorted copy (blur, noise); never flat."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bit_depth) - 1
    coarse = torch.rand(n, 1, h // 16 + 2, w // 16 + 2, generator=gen)
    base = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)[:, 0]
    ref = ((base * 0.85 + torch.rand(n, h, w, generator=gen) * 0.08) * top).round().clamp(0, top)
    dist = ((torch.roll(ref, 1, 2) + ref) / 2 + torch.randn(n, h, w, generator=gen) * 0.01 * top).round()
    dt = torch.uint8 if bit_depth == 8 else torch.int16
    return ref.to(dt), dist.clamp(0, top).to(dt)


def _calls(ref: torch.Tensor, dist: torch.Tensor, bd: int, gpu: bool) -> dict:
    if gpu:
        return {"float_vif": lambda: float_kernel.float_vif_fwd(ref, dist, bd),
                "float_adm": lambda: float_kernel.float_adm_fwd(ref, dist, bd, *_PLAIN_ADM),
                "float_motion": lambda: float_kernel.float_motion_sad_fwd(ref[:-1], ref[1:], bd)}
    return {"float_vif": lambda: float_cpu.float_vif_numba(ref, dist, bd),
            "float_adm": lambda: float_cpu.float_adm_numba(ref, dist, bd, *_PLAIN_ADM),
            "float_motion": lambda: float_cpu.float_motion_sad_numba(ref[:-1], ref[1:], bd)}


def _cpu_seconds(fn, runs: int = 2) -> float:
    fn()  # JIT compile / cache load
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def libvmaf_rows(binary: str, ref: torch.Tensor, dist: torch.Tensor, bd: int) -> list[dict]:
    """libvmaf's ``vmaf -n --feature F --threads 1`` on the same frames (planar 4:2:0, grey chroma), whole
    processes: its frames/s per core for each float feature."""
    import subprocess
    import tempfile

    n, h, w = ref.shape
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, frames in (("ref", ref), ("dist", dist)):
            dtype = np.uint8 if bd == 8 else np.dtype("<u2")
            luma = frames.numpy().astype(dtype).reshape(n, -1)
            grey = np.full((n, 2 * ((h + 1) // 2) * ((w + 1) // 2)), 1 << (bd - 1), dtype)
            path = Path(tmp) / f"{name}.yuv"
            path.write_bytes(np.concatenate([luma, grey], axis=1).tobytes())
            paths.append(path)
        for feature in ("float_vif", "float_adm", "float_motion"):
            command = [binary, "-r", str(paths[0]), "-d", str(paths[1]), "-w", str(w), "-h", str(h), "-p", "420",
                       "-b", str(bd), "-n", "--feature", feature, "--threads", "1", "-q", "--json", "-o",
                       str(Path(tmp) / "out.json")]
            t0 = time.perf_counter()
            subprocess.run(command, check=True)
            sec = time.perf_counter() - t0
            rows.append({"feature": feature, "path": "libvmaf", "threads": 1, "bit_depth": bd, "frames": n,
                         "frames_per_s": n / sec})
            print(f"libvmaf {feature:12s} {bd:2d}-bit {h}x{w}: {n / sec:9.2f} frames/s with 1 thread (whole process)")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=16, help="frames per GPU batch")
    parser.add_argument("--cpu-frames", type=int, default=4, help="frames per CPU batch")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    parser.add_argument("--smoke", action="store_true", help="tiny frames on the CPU, to check the script")
    parser.add_argument("--libvmaf", help="libvmaf's vmaf tool (built with -Denable_float=true): its frames/s on "
                                          "one core on the same frames")
    args = parser.parse_args()
    gpu = torch.cuda.is_available() and not args.smoke
    h, w = (1080, 1920) if not args.smoke else (33, 34)
    rows = []
    for bd in (8, 10):
        ref, dist = make_frames(max(args.frames, args.cpu_frames) + 1, h, w, bd, seed=bd)
        cpu_ref, cpu_dist = ref[:args.cpu_frames + 1], dist[:args.cpu_frames + 1]
        expected = {name: fn() for name, fn in _calls(cpu_ref, cpu_dist, bd, gpu=False).items()}
        if gpu or args.smoke:
            dev = "cuda" if gpu else "cpu"
            g_ref, g_dist = ref[:args.frames + 1].to(dev), dist[:args.frames + 1].to(dev)
            for name, fn in _calls(g_ref, g_dist, bd, gpu=True).items():
                n = g_ref.shape[0] - (1 if name == "float_motion" else 0)
                ms = median_ms(fn, device=dev)
                check = _calls(g_ref[:args.cpu_frames + 1], g_dist[:args.cpu_frames + 1], bd, gpu=True)[name]()
                equal = bool(torch.equal(check.cpu(), expected[name]))
                rows.append({"feature": name, "path": "triton", "bit_depth": bd, "frames": n, "ms_per_batch": ms,
                             "frames_per_s": n / ms * 1e3, "equals_numba": equal})
                print(f"triton {name:13s} {bd:2d}-bit {h}x{w}: {n / ms * 1e3:9.1f} frames/s  == numba: {equal}")
        for threads in sorted({1, numba.config.NUMBA_NUM_THREADS}):
            numba.set_num_threads(threads)
            for name, fn in _calls(cpu_ref, cpu_dist, bd, gpu=False).items():
                n = cpu_ref.shape[0] - (1 if name == "float_motion" else 0)
                sec = _cpu_seconds(fn)
                rows.append({"feature": name, "path": "numba", "threads": threads, "bit_depth": bd, "frames": n,
                             "frames_per_s": n / sec, "frames_per_s_per_core": n / sec / threads})
                print(f"numba  {name:13s} {bd:2d}-bit {h}x{w}: {n / sec:9.2f} frames/s with {threads} thread(s)")
        if args.libvmaf and not args.smoke:
            rows += libvmaf_rows(args.libvmaf, cpu_ref, cpu_dist, bd)
    payload = {"meta": metadata("cuda" if gpu else "cpu"), "shape": [h, w], "rows": rows}
    path = write_json("vmaf_float", payload, extra_dir=args.out, **({"results_dir": smoke_dir()} if args.smoke else {}))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
