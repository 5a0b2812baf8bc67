"""VMAF v0.6.1 (integer VIF, ADM, motion and the model): GPU and CPU paths, the whole command, and libvmaf.

* GPU, frames already on the device: ``fusedsim.vmaf.VmafStream`` (the public streaming API, default options)
  fed batches of 8-bit frames at 1920x1080 and 3840x2160: frames/s, and each feature op alone.
* CPU: the same API on CPU tensors (the numba kernels) at 1920x1080, 1 thread and every thread.
* Whole process: ``fusedsim vmaf REF.y4m DIST.y4m --json OUT`` on 1080p clips written here (page cache), start-up
  and first-run compilation included; the read bound is a pass that only reads the clips' luma.
* libvmaf (``--libvmaf PATH`` to its ``vmaf`` tool, ``--libvmaf-model`` to ``vmaf_v0.6.1.json``): the same clips
  with ``--threads 1`` and every core; per-frame VMAF compared with ours (stock libvmaf prints 6 decimals: ours
  must round to them). ``--libvmaf-cuda PATH``: a CUDA build of the tool (its VIF, ADM and motion on the GPU, on by
  default in such a build) on the same clips with every core, on the same GPU. Each row gives the whole process's
  wall time and the tool's own ``fps`` (its timer runs while frames are scored). ``--vmaf-torch``: VMAF-torch
  (a float re-implementation in PyTorch) on the same GPU frames and batches, its frames/s and its largest
  per-frame VMAF difference to ours.

Content: a smooth random texture panned across the frame (so motion is not zero), distorted by noise and a blur.

Run: ``PYTHONPATH=src python benchmarks/bench_vmaf_score.py [--frames 240] [--libvmaf build/tools/vmaf]
[--libvmaf-cuda build-cuda/tools/vmaf]``;
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
from _harness import RESULTS, process_env, smoke_dir, write_json  # noqa: E402


def clip(n: int, height: int, width: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(ref, dist) uint8 luma (n, H, W): a panned smooth texture and a noisy, blurred copy."""
    gen = torch.Generator().manual_seed(seed)
    big = torch.rand(1, 1, height // 8 + 8, width // 8 + 8 + n, generator=gen)
    tex = torch.nn.functional.interpolate(big, scale_factor=8, mode="bicubic", align_corners=False)[0, 0]
    frames = torch.stack([tex[:height, i:i + width] for i in range(n)])
    ref = (frames.clamp(0, 1) * 219 + 16).round()
    noise = torch.randn(ref.shape, generator=gen) * 4
    blurred = torch.nn.functional.avg_pool2d(ref[:, None], 3, 1, 1, count_include_pad=False)[:, 0]
    dist = (0.5 * ref + 0.5 * blurred + noise).clamp(0, 255).round()
    return ref.to(torch.uint8).numpy(), dist.to(torch.uint8).numpy()


def write_y4m(path: Path, frames: np.ndarray) -> None:
    n, h, w = frames.shape
    grey = np.full((h // 2, w // 2), 128, np.uint8).tobytes()
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420jpeg\n".encode())
        for frame in frames:
            f.write(b"FRAME\n" + frame.tobytes() + grey + grey)


def stream_fps(ref: torch.Tensor, dist: torch.Tensor, batch: int, repeats: int = 3) -> tuple[float, np.ndarray]:
    """Frames/s of VmafStream over the clip in batches (best of ``repeats``), and its VMAF column."""
    from fusedsim.vmaf import VmafStream

    best, scores = float("inf"), None
    for _ in range(repeats):
        if ref.is_cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        stream = VmafStream(8)
        parts = [stream.push(ref[i:i + batch], dist[i:i + batch])["vmaf"] for i in range(0, ref.shape[0], batch)]
        parts.append(stream.flush()["vmaf"])
        if ref.is_cuda:
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
        scores = np.concatenate(parts)
    return ref.shape[0] / best, scores


def vmaf_torch_fps(ref: torch.Tensor, dist: torch.Tensor, batch: int, repeats: int = 3) -> dict:
    """VMAF-torch (``pip install vmaf-torch``, a float re-implementation) on the same frames in batches of
    ``batch`` (its motion restarts at each batch, as a caller streaming batches gets it), with ``clip_score=True``
    as libvmaf's model clips; frames/s (best of ``repeats``) and its per-frame VMAF. Its default construction (no
    ``.compile()``)."""
    try:
        from vmaf_torch import VMAF
    except ImportError as exc:
        return {"error": f"vmaf-torch is not installed: {exc}"}
    model = VMAF(clip_score=True).to(ref.device)
    as_float = [(ref[i:i + batch, None].float(), dist[i:i + batch, None].float())
                for i in range(0, ref.shape[0], batch)]
    best, scores = float("inf"), None
    with torch.no_grad():
        model(*as_float[0])  # first call: allocations, cuDNN choices
        for _ in range(repeats):
            if ref.is_cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            parts = [model(r, d).reshape(-1) for r, d in as_float]
            if ref.is_cuda:
                torch.cuda.synchronize()
            best = min(best, time.perf_counter() - t0)
            scores = torch.cat(parts).double().cpu().numpy()
    return {"fps": ref.shape[0] / best, "vmaf": scores}


def op_ms(ref: torch.Tensor, dist: torch.Tensor) -> dict[str, float]:
    """Milliseconds per batch of each feature op alone (GPU: triton.testing.do_bench median)."""
    from triton.testing import do_bench

    from fusedsim.families.adm.api import integer_adm
    from fusedsim.families.motion.api import integer_motion
    from fusedsim.families.vif.api import integer_vif

    calls = {"vif": lambda: integer_vif(ref, dist, 8), "adm": lambda: integer_adm(ref, dist, 8),
             "motion": lambda: integer_motion(ref, 8)}
    return {name: float(do_bench(fn, warmup=100, rep=500, return_mode="median")) for name, fn in calls.items()}


def whole_process(ref_path: Path, dist_path: Path, out: Path, device: str) -> dict:
    """``fusedsim vmaf`` as a process, after one untimed run (byte-code and kernel caches warm, as after
    ``pip install`` and a first use: :func:`_harness.process_env`)."""
    cmd = [sys.executable, "-m", "fusedsim", "vmaf", str(ref_path), str(dist_path), "--device", device, "-q",
           "--json", str(out)]
    env = process_env("cached", out.parent)
    subprocess.run(cmd, capture_output=True, text=True, env=env)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode:
        return {"error": proc.stderr[-2000:]}
    doc = json.loads(out.read_text())
    return {"wall_s": wall, "frames": len(doc["frames"]), "own_fps": doc.get("fps"),
            "vmaf": [f["metrics"]["vmaf"] for f in doc["frames"]], "cmd": " ".join(cmd[1:])}


def read_bound(path: Path, frame_bytes: int, luma_bytes: int) -> float:
    """Seconds to read every frame's luma of a Y4M file (the page cache's speed for what VMAF reads)."""
    t0 = time.perf_counter()
    with open(path, "rb") as f:
        f.readline()
        buf = bytearray(luma_bytes)
        while f.read(6):
            f.readinto(buf)
            f.seek(frame_bytes - luma_bytes, 1)
    return time.perf_counter() - t0


def libvmaf(binary: str, model: str, ref: Path, dist: Path, out: Path, threads: int,
            extra: tuple[str, ...] = ()) -> dict:
    """libvmaf's ``vmaf`` tool as a whole process: wall seconds, its own ``fps`` (its timer runs from the first
    frame read to the last score) and the per-frame VMAF."""
    cmd = [binary, "-r", str(ref), "-d", str(dist), "--model", f"path={model}", "-q", "--json", "-o", str(out),
           *(("--threads", str(threads)) if threads else ()), *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode:
        return {"error": proc.stderr[-2000:]}
    doc = json.loads(out.read_text())
    return {"wall_s": wall, "threads": threads, "own_fps": doc.get("fps"),
            "vmaf": [f["metrics"]["vmaf"] for f in doc["frames"]], "cmd": " ".join(cmd), "stderr": proc.stderr[-500:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=240, help="frames of the 1080p clips (default 240)")
    parser.add_argument("--batch", type=int, default=16, help="frames per VmafStream push on the GPU")
    parser.add_argument("--libvmaf", help="libvmaf's vmaf tool, to run on the same clips")
    parser.add_argument("--libvmaf-cuda", help="a CUDA build of libvmaf's vmaf tool, run on the GPU on the same clips")
    parser.add_argument("--vmaf-torch", action="store_true",
                        help="also run VMAF-torch (pip install vmaf-torch) on the GPU frames, same batches")
    parser.add_argument("--libvmaf-model", help="vmaf_v0.6.1.json for --libvmaf (default: fusedsim's copy)")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: gpu,cpu,process,libvmaf")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU, to check the script")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    results: dict = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__}
    cuda = torch.cuda.is_available() and not args.smoke
    if cuda:
        results["gpu"] = torch.cuda.get_device_name()
    sizes = [(1080, 1920), (2160, 3840)] if not args.smoke else [(72, 128)]
    n = args.frames if not args.smoke else 6

    if cuda and "gpu" not in skip:
        for h, w in sizes:
            ref, dist = clip(min(n, 256 if h <= 1080 else 128), h, w)  # 16 pushes at 1080p: the steady rate
            r, d = torch.from_numpy(ref).cuda(), torch.from_numpy(dist).cuda()
            stream_fps(r[:args.batch], d[:args.batch], args.batch, repeats=1)  # compile
            fps, scores = stream_fps(r, d, args.batch)
            ops = op_ms(r[:args.batch], d[:args.batch])
            row = {"size": f"{w}x{h}", "frames": r.shape[0], "batch": args.batch, "fps": fps, "op_ms_per_batch": ops,
                   "luma_bytes_per_frame_pair": 2 * h * w}
            if args.vmaf_torch:
                peer = vmaf_torch_fps(r, d, args.batch)
                if "fps" in peer:
                    peer["ratio_ours_to_peer"] = fps / peer["fps"]
                    diff = np.abs(peer.pop("vmaf") - scores)
                    peer["max_abs_diff_to_ours"] = float(diff.max())
                    # its motion starts at 0 on each batch's first frame: the other frames compare like for like
                    peer["max_abs_diff_past_batch_starts"] = float(np.delete(diff, np.s_[::args.batch]).max())
                row["vmaf_torch"] = peer
            results.setdefault("gpu_stream", []).append(row)
            print(f"GPU VmafStream {w}x{h}: {fps:.0f} frames/s (batch {args.batch}); ops ms/batch {ops}"
                  + (f"; VMAF-torch {row['vmaf_torch']}" if args.vmaf_torch else ""), flush=True)

    if "cpu" not in skip:
        h, w = sizes[0]
        cores = os.cpu_count() or 1
        ref, dist = clip(max(8, 2 * cores) if not args.smoke else 4, h, w)  # every thread takes frames
        r, d = torch.from_numpy(ref), torch.from_numpy(dist)
        for threads in sorted({1, os.cpu_count() or 1}):
            torch.set_num_threads(threads)
            import numba

            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            stream_fps(r[:2], d[:2], 2, repeats=1)  # numba compile / cache
            frames = 8 if threads == 1 else r.shape[0]
            fps, _ = stream_fps(r[:frames], d[:frames], frames, repeats=2)
            results.setdefault("cpu", []).append({"size": f"{w}x{h}", "threads": threads, "fps": fps})
            print(f"CPU {w}x{h}, {threads} threads: {fps:.1f} frames/s", flush=True)

    if "process" not in skip or ((args.libvmaf or args.libvmaf_cuda) and "libvmaf" not in skip):
        h, w = sizes[0]
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            ref, dist = clip(n, h, w, seed=1)
            write_y4m(tmp / "ref.y4m", ref)
            write_y4m(tmp / "dist.y4m", dist)
            for p in ("ref.y4m", "dist.y4m"):
                (tmp / p).read_bytes()  # into the page cache
            frame_bytes, luma = h * w * 3 // 2, h * w
            seconds = read_bound(tmp / "ref.y4m", frame_bytes, luma) + read_bound(tmp / "dist.y4m", frame_bytes, luma)
            results["read_bound_fps"] = n / seconds
            print(f"read bound (both clips' luma, one thread): {n / seconds:.0f} frames/s", flush=True)
            ours = None
            if "process" not in skip:
                device = "cuda" if cuda else "cpu"
                ours = whole_process(tmp / "ref.y4m", tmp / "dist.y4m", tmp / "ours.json", device)
                if "wall_s" in ours:
                    ours["fps"] = ours["frames"] / ours["wall_s"]
                    print(f"fusedsim vmaf ({device}) whole process, {n} frames {w}x{h}: {ours['wall_s']:.2f} s, "
                          f"{ours['fps']:.0f} frames/s (its own timer: {ours.get('own_fps')})", flush=True)
                results["process"] = {k: v for k, v in ours.items() if k != "vmaf"}
            elif "libvmaf" not in skip:  # the peers' values against the API's on the same frames
                from fusedsim.families.vmaf.score_api import vmaf

                device = "cuda" if cuda else "cpu"
                ours = {"vmaf": vmaf(torch.from_numpy(ref).to(device), torch.from_numpy(dist).to(device))["vmaf"]}
            peers = []
            if "libvmaf" not in skip:
                cores = os.cpu_count() or 1
                if args.libvmaf:
                    peers += [("libvmaf", args.libvmaf, threads, ()) for threads in sorted({1, cores})]
                if args.libvmaf_cuda and cuda:
                    # libvmaf's CUDA backend is on by default in a CUDA build (--gpumask 0): VIF, ADM and motion
                    # run on the GPU, the frames are read and uploaded by the tool itself. No --threads: with a
                    # thread pool 3.2.0's CUDA path aborts at the end ("context could not be synchronized", its
                    # motion extractor flushed twice; upstream pull requests 1538, 1553, 1583)
                    peers.append(("libvmaf_cuda", args.libvmaf_cuda, 0, ()))
            model = args.libvmaf_model or str(Path(__file__).resolve().parents[1] / "src" / "fusedsim" /
                                              "families" / "vmaf" / "models" / "vmaf_v0.6.1.json")
            for label, binary, threads, extra in peers:
                peer = libvmaf(binary, model, tmp / "ref.y4m", tmp / "dist.y4m", tmp / "lv.json", threads, extra)
                peer["peer"] = label
                if "wall_s" in peer:
                    peer["fps"] = n / peer["wall_s"]
                    if ours and "vmaf" in ours:
                        # stock libvmaf prints %.6f: ours must round to what it printed
                        diff = float(np.abs(np.array(peer["vmaf"]) - np.array(ours["vmaf"])).max())
                        peer["max_abs_diff_to_ours"] = diff
                        peer["equal_to_printed_digits"] = diff <= 5e-7
                    print(f"{label} --threads {threads}: {peer['wall_s']:.2f} s whole process = {peer['fps']:.1f} "
                          f"frames/s (its own timer: {peer.get('own_fps')}), VMAF max |diff| to ours "
                          f"{peer.get('max_abs_diff_to_ours')}", flush=True)
                else:
                    print(f"{label} --threads {threads} failed: {peer['error']}", flush=True)
                results.setdefault("libvmaf", []).append({k: v for k, v in peer.items() if k != "vmaf"})
    path = write_json("vmaf-score", results, os.environ.get("OUT"), smoke_dir() if args.smoke else RESULTS)
    print("wrote", path)


if __name__ == "__main__":
    main()
