"""libvmaf's psnr_hvs and ciede features: frames/s at 1080p on the GPU (Triton) and the CPU (numba).

* GPU-resident 4:2:0 frames, 8 and 10 bit, batches of ``--batch`` frames: the public ``psnr_hvs`` / ``ciede``
  (input checks, the exact sequential sums, the dB conversion on the host) and the kernels alone (per plane: the
  block kernel; the float32 running sum; ciede's per-pixel kernel; the double running sum).
* CPU (numba): the same public calls on CPU tensors with every thread and with one (frames/s per core), and GPU ==
  CPU on the frames.
* ``--libvmaf PATH``: libvmaf's ``vmaf`` tool on the same frames written as raw 4:2:0 (``-n --feature psnr_hvs`` /
  ``--feature ciede``, ``--threads 1``), whole process, for the per-core comparison.

Run: ``PYTHONPATH=src python benchmarks/bench_psnr_hvs_ciede.py [--out DIR] [--libvmaf build/tools/vmaf]``;
``--smoke`` runs tiny frames on the CPU (Triton interpreter) to check the script (JSON to a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import median_ms, metadata, smoke_dir, write_json  # noqa: E402

from fusedsim.core.backend import use_backend  # noqa: E402
from fusedsim.families.ciede.api import ciede  # noqa: E402
from fusedsim.families.psnr_hvs.api import psnr_hvs  # noqa: E402


def make_planes(n: int, h: int, w: int, bit_depth: int, seed: int) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """A smooth textured 4:2:0 reference and a noisy, slightly shifted copy (uint8 / uint16 CPU tensors)."""
    gen = torch.Generator().manual_seed(seed)
    top = (1 << bit_depth) - 1
    dtype = torch.uint8 if bit_depth == 8 else torch.uint16
    ref, dist = [], []
    for ph, pw in ((h, w), ((h + 1) // 2, (w + 1) // 2), ((h + 1) // 2, (w + 1) // 2)):
        yy = torch.linspace(0, 6.0, ph)[:, None]
        xx = torch.linspace(0, 9.0, pw)[None, :]
        base = (0.5 + 0.3 * torch.sin(yy * 3 + xx * 2) + 0.1 * torch.cos(xx * 7)) * top
        r = (base[None] + torch.randn(n, ph, pw, generator=gen) * top / 40).clamp(0, top)
        d = (torch.roll(r, 1, dims=2) + torch.randn(n, ph, pw, generator=gen) * top / 25).clamp(0, top)
        ref.append(r.round().to(torch.int32).to(dtype))
        dist.append(d.round().to(torch.int32).to(dtype))
    return ref, dist


def write_yuv(path: Path, planes: list[torch.Tensor]) -> None:
    n = planes[0].shape[0]
    with open(path, "wb") as f:
        for i in range(n):
            for p in planes:
                a = p[i].numpy()
                f.write((a.astype("<u2") if a.dtype != np.uint8 else a).tobytes())


def bench_gpu(ref, dist, bd, device, rows):
    from fusedsim.families.ciede.kernel import ciede_de_fwd
    from fusedsim.families.psnr_hvs.kernel import psnr_hvs_terms
    from fusedsim.families.psnr_hvs.sequential_sum32_kernel import sequential_sum32
    from fusedsim.families.vmaf.sequential_sum_kernel import sequential_sum_fwd

    n, h, w = ref[0].shape
    r = [p.to(device) for p in ref]
    d = [p.to(device) for p in dist]
    full = [torch.repeat_interleave(torch.repeat_interleave(p, 2, 1), 2, 2)[:, :h, :w].contiguous() for p in r + d]
    full = [r[0]] + full[1:3] + [d[0]] + full[4:6]
    cases = {
        "psnr_hvs (public, 3 planes)": lambda: psnr_hvs(r, d, bd),
        "ciede (public)": lambda: ciede(r, d, bd),
        "psnr_hvs block kernel, luma": lambda: psnr_hvs_terms(r[0], d[0], 0),
        "psnr_hvs float32 running sum, luma": (lambda t=psnr_hvs_terms(r[0], d[0], 0): sequential_sum32(t)),
        "ciede per-pixel kernel": lambda: ciede_de_fwd(*full, bd),
        "ciede double running sum": (lambda de=ciede_de_fwd(*full, bd): sequential_sum_fwd(de)),
    }
    for name, fn in cases.items():
        ms = median_ms(fn, device=device.type)
        rows.append({"path": "gpu", "what": name, "bit_depth": bd, "frames": n, "ms": ms, "fps": n / ms * 1e3})
        print(f"  GPU {bd:2d}-bit {name:38s} {ms:9.3f} ms / {n} frames = {n / ms * 1e3:9.1f} frames/s", flush=True)
    with use_backend("auto"):
        return psnr_hvs(r, d, bd), ciede(r, d, bd)


def bench_cpu(ref, dist, bd, threads, rows, frames):
    r = [p[:frames] for p in ref]
    d = [p[:frames] for p in dist]
    out = {}
    for nthreads in sorted({1, threads}):
        numba.set_num_threads(nthreads)
        for name, fn in (("psnr_hvs", psnr_hvs), ("ciede", ciede)):
            fn([p[:1] for p in r], [p[:1] for p in d], bd)  # compile
            t = time.perf_counter()
            value = fn(r, d, bd)
            s = time.perf_counter() - t
            rows.append({"path": "cpu-numba", "what": name, "bit_depth": bd, "threads": nthreads, "frames": frames,
                         "s": s, "fps": frames / s, "fps_per_thread": frames / s / nthreads})
            print(f"  CPU {bd:2d}-bit {name:9s} {nthreads:3d} threads: {frames / s:8.2f} frames/s "
                  f"({frames / s / nthreads:.2f} per thread)", flush=True)
            if nthreads == threads:
                out[name] = value
    numba.set_num_threads(threads)
    return out["psnr_hvs"], out["ciede"]


def bench_libvmaf(binary, ref, dist, bd, rows, frames, tmp):
    n, h, w = ref[0].shape
    paths = []
    for name, planes in (("ref", ref), ("dist", dist)):
        path = Path(tmp) / f"{name}_{bd}.yuv"
        write_yuv(path, [p[:frames] for p in planes])
        paths.append(path)
    for feature in ("psnr_hvs", "ciede"):
        cmd = [binary, "-r", str(paths[0]), "-d", str(paths[1]), "-w", str(w), "-h", str(h), "-p", "420", "-b",
               str(bd), "-n", "--feature", feature, "--threads", "1", "-q", "--json", "-o", str(Path(tmp) / "o.json")]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        s = time.perf_counter() - t
        rows.append({"path": "libvmaf", "what": feature, "bit_depth": bd, "threads": 1, "frames": frames, "s": s,
                     "fps": frames / s})
        print(f"  libvmaf {bd:2d}-bit {feature:9s} 1 thread, whole process: {frames / s:8.2f} frames/s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--smoke", action="store_true", help="tiny frames on the CPU through the Triton interpreter")
    ap.add_argument("--batch", type=int, default=16, help="GPU frames per call")
    ap.add_argument("--cpu-frames", type=int, default=8)
    ap.add_argument("--libvmaf", help="path of libvmaf's vmaf tool, for the per-core comparison")
    args = ap.parse_args()
    device = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    h, w = (32, 48) if args.smoke else (1080, 1920)
    batch = 2 if args.smoke else args.batch
    cpu_frames = 2 if args.smoke else args.cpu_frames
    threads = numba.get_num_threads()
    rows: list[dict] = []
    checks = {}
    with tempfile.TemporaryDirectory() as tmp:
        for bd in (8, 10):
            ref, dist = make_planes(batch, h, w, bd, seed=bd)
            gpu = bench_gpu(ref, dist, bd, device, rows) if device.type == "cuda" or args.smoke else None
            cpu = bench_cpu(ref, dist, bd, threads, rows, min(cpu_frames, batch))
            if gpu is not None:
                k = min(cpu_frames, batch)
                same_hvs = all(gpu[0][c][:k].tolist() == cpu[0][c].tolist() for c in cpu[0])
                same_ciede = gpu[1]["ciede2000"][:k].tolist() == cpu[1]["ciede2000"].tolist()
                checks[f"{bd}-bit"] = {"psnr_hvs gpu == cpu": same_hvs, "ciede gpu == cpu": same_ciede}
                print(f"  {bd}-bit: psnr_hvs GPU == CPU {same_hvs}, ciede GPU == CPU {same_ciede}", flush=True)
            if args.libvmaf:
                bench_libvmaf(args.libvmaf, ref, dist, bd, rows, min(cpu_frames, batch), tmp)
    payload = {"meta": metadata(device.type), "size": [h, w], "rows": rows, "checks": checks,
               "command": " ".join(sys.argv)}
    if args.smoke:
        path = write_json("psnr_hvs_ciede", payload, args.out, results_dir=smoke_dir())
    else:
        path = write_json("psnr_hvs_ciede", payload, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
