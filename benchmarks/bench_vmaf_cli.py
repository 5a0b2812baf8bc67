"""``fusedsim vmaf`` as a user runs it: whole processes on 1080p 8-bit 4:2:0 Y4M clips in the page cache.

* Start-up: ``python -c "import torch; torch.zeros(1, device='cuda')"`` (torch + CUDA context), ``fusedsim --help``,
  ``fusedsim vmaf --help`` and ``fusedsim vmaf`` on a 1-frame pair (goal: <= torch + CUDA + 0.5 s).
* Throughput: ``fusedsim vmaf -r REF -d DIST --feature F -n -o out.xml`` on 1, 600 and 2400 frames per feature
  (``--features vmaf``: ``fusedsim vmaf -r REF -d DIST -o out.xml``, the default model's score);
  frames/s of the whole process, the marginal rate (least-squares slope of wall time over frames across every run;
  start-up removed, but only as exact as start-up's run-to-run spread allows) and the CLI's own rate (the ``fps``
  it writes into its XML, as libvmaf does: frames over the time from opening the clips to the last value).
  Goals: ssim >= 1500 frames/s, every other feature >= 1000 frames/s.
* The file-read limit in the same run: ``cat`` of both files, and the package's positioned reads
  (:func:`fusedsim.io.frame_stream.read_planes`) of the planes each feature needs, into pinned memory, with
  1..16 threads.
* In-process variants of the streamed path (batch frames x reader threads) for ``ssim``.

Run: ``PYTHONPATH=src python benchmarks/bench_vmaf_cli.py [--frames 2400] [--runs 2] [--dir /tmp/vmafbench]``.
The clips (about 15 GB for 2400 frames) are written once into ``--dir``; JSON goes to ``benchmarks/results/``
(and ``$OUT``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import add_bytecode_option, process_env, version_of, write_json  # noqa: E402

PY = sys.executable
W, H = 1920, 1080
FEATURES = ("ssim", "float_ssim", "float_ms_ssim", "psnr")
#: ``--features vmaf``: the VMAF score of the default model (``fusedsim vmaf`` without ``-n``: its features
#: computed, then the model).
MODELS = {"vmaf": "vmaf_v0.6.1"}


def feature_args(f: str) -> list[str]:
    """The ``fusedsim vmaf`` arguments that compute ``f``: a feature with ``-n`` (no model), or the model's score."""
    return [] if f in MODELS else ["--feature", f, "-n"]


def cli() -> list[str]:
    script = Path(PY).parent / "fusedsim"
    return [str(script)] if script.exists() else [PY, "-m", "fusedsim"]


def write_clip(path: Path, frames: int, seed: int, distorted: bool) -> None:
    """A 1080p 4:2:0 Y4M clip cycling through 24 textured frames (content is irrelevant to the speed; never flat)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:H, 0:W]
    base = []
    for k in range(24):
        luma = 128 + 60 * np.sin(xx / (37 + k)) * np.cos(yy / (23 + k)) + rng.normal(0, 12, (H, W))
        if distorted:
            luma = luma + rng.normal(0, 6, (H, W))
        chroma = 128 + rng.normal(0, 20, (2, H // 2, W // 2))
        base.append(np.concatenate([np.clip(luma, 0, 255).astype(np.uint8).ravel(),
                                    np.clip(chroma, 0, 255).astype(np.uint8).ravel()]).tobytes())
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{W} H{H} F25:1 Ip A1:1 C420jpeg\n".encode())
        for i in range(frames):
            f.write(b"FRAME\n")
            f.write(base[i % len(base)])


#: Environment of every timed process (``--bytecode``, :func:`_harness.process_env`).
ENV = dict(os.environ)


def run_once(argv: list[str]) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=ENV)
    return time.perf_counter() - t0, proc.returncode, proc.stderr[-400:]


def marginal_rate(points: list[tuple[int, float]]) -> float:
    """Frames per second from the least-squares slope of wall time over frames (inf when not positive)."""
    n = len(points)
    mean_f = sum(f for f, _ in points) / n
    mean_t = sum(t for _, t in points) / n
    var = sum((f - mean_f) ** 2 for f, _ in points)
    slope = sum((f - mean_f) * (t - mean_t) for f, t in points) / var if var else 0.0
    return 1.0 / slope if slope > 0 else float("inf")


def xml_fps(path: Path) -> float | None:
    """The ``fps`` the CLI wrote into its XML output (libvmaf's ``<fyi fps=...>``: frames over the time from
    opening the clips to the last value, inside the process, start-up excluded)."""
    try:
        fyi = ElementTree.parse(path).getroot().find("fyi")
        return float(fyi.get("fps")) if fyi is not None else None
    except (OSError, ElementTree.ParseError, TypeError, ValueError):
        return None


def timed(label: str, argv: list[str], runs: int, rows: list[dict], frames: int | None = None,
          xml: Path | None = None) -> dict:
    walls, fps, failed = [], [], None
    for _ in range(runs):
        if xml is not None:
            xml.unlink(missing_ok=True)
        wall, rc, err = run_once(argv)
        walls.append(wall)
        if rc != 0:
            failed = f"rc {rc}: {err}"
        elif xml is not None and (value := xml_fps(xml)) is not None:
            fps.append(value)
    row = {"command": label, "argv": argv[len(cli()):] if argv[:len(cli())] == cli() else argv[1:],
           "wall_s_median": statistics.median(walls), "wall_s": walls, "frames": frames}
    if frames:
        row["frames_per_s"] = frames / row["wall_s_median"]
    if fps:
        row["cli_fps"] = fps
        row["cli_fps_median"] = statistics.median(fps)
    if failed:
        row["failed"] = failed
    rows.append(row)
    print(f"{label:55s} {row['wall_s_median']:8.3f} s" + (f"  {row.get('frames_per_s', 0):8.1f} frames/s"
                                                          if frames else "")
          + (f"  (the CLI's own fps: {row['cli_fps_median']:.0f})" if fps else "")
          + (f"  FAILED {failed}" if failed else ""), flush=True)
    return row


def read_limit(ref: Path, dist: Path, frames: int, planes: tuple[str, ...], threads: int) -> float:
    """frames/s of the package's positioned reads of ``planes`` of both clips into pinned memory."""
    import torch

    from fusedsim.io.frame_stream import plane_groups, plane_layout, read_planes, row_bytes
    from fusedsim.io.video import open_video

    with open_video(ref) as r, open_video(dist) as d:
        layout = plane_layout(r.fmt, planes)
        groups = plane_groups(layout, 1)
        batch = 32
        slots = torch.empty((2, threads, batch, row_bytes(layout, 1)), dtype=torch.uint8, pin_memory=True).numpy()
        offsets = (r.frame_offsets(), d.frame_offsets())
        fds = [os.open(p, os.O_RDONLY) for p in (ref, dist)]

        def work(k: int) -> None:
            for first in range(k * batch, frames, threads * batch):
                n = min(batch, frames - first)
                for clip in (0, 1):
                    read_planes(fds[clip], offsets[clip], groups, slots[clip, k], first, 0, n, "")

        t0 = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(threads)))
        elapsed = time.perf_counter() - t0
        for fd in fds:
            os.close(fd)
    return frames / elapsed


def in_process_features(ref: Path, dist: Path, frames: int, features: list[str]) -> dict[str, float]:
    """frames/s of the pipeline per feature (on a GPU: the streamed path), in one warm process, with the CLI's
    default batch and threads; the clips are opened once, outside the timing."""
    import torch

    from fusedsim.families.vmaf.pipeline import open_clips
    from fusedsim.vmaf import load_model

    out = {}
    with open_clips(ref, dist) as clips:
        for f in features:
            what = dict(models=[load_model(MODELS[f])]) if f in MODELS else dict(features=[f])
            clips.score(**what, device="cuda", frames=32)  # warm: compile, allocate
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            clips.score(**what, device="cuda", frames=frames)
            out[f] = frames / (time.perf_counter() - t0)
            print(f"in-process streamed {f:15s}: {out[f]:8.1f} frames/s", flush=True)
    return out


def in_process_variants(ref: Path, dist: Path, frames: int) -> list[dict]:
    import torch

    from fusedsim.io.video import open_video
    from fusedsim.vmaf.device_scoring import score_on_device

    rows = []
    device = torch.device("cuda")
    with open_video(ref) as r, open_video(dist) as d:
        score_on_device(r, d, ["ssim"], device=device, frames=64, batch_frames=16)  # compile, warm
        reference = None
        for batch in (8, 16, 32):
            for threads in (4, 8, 16):
                t0 = time.perf_counter()
                out = score_on_device(r, d, ["ssim"], device=device, frames=frames, batch_frames=batch,
                                      threads=threads)
                elapsed = time.perf_counter() - t0
                reference = out["ssim"] if reference is None else reference
                rows.append({"batch_frames": batch, "threads": threads, "frames_per_s": frames / elapsed,
                             "same_values": bool(np.array_equal(out["ssim"], reference))})
                print(f"in-process ssim batch {batch:3d} threads {threads:3d}: {frames / elapsed:8.1f} frames/s",
                      flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=2400)
    ap.add_argument("--mid-frames", type=int, default=600)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--dir", default="/tmp/vmafbench")
    ap.add_argument("--features", default=",".join(FEATURES))
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--variants", action="store_true", help="also time batch-size x thread-count variants (ssim)")
    add_bytecode_option(ap)
    args = ap.parse_args()
    ENV.clear()  # replaced, not updated: process_env drops PYTHONDONTWRITEBYTECODE
    ENV.update(process_env(args.bytecode, Path(args.dir)))
    features = [f for f in args.features.split(",") if f]
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    clips = {}
    for n in (1, args.frames):
        for role, seed in (("ref", 1), ("dist", 2)):
            path = root / f"{role}_{n}.y4m"
            if not path.exists():
                t0 = time.perf_counter()
                write_clip(path, n, seed, role == "dist")
                print(f"wrote {path} in {time.perf_counter() - t0:.1f} s", flush=True)
            clips[role, n] = path
    ref, dist = clips["ref", args.frames], clips["dist", args.frames]
    rows: list[dict] = []
    timed("cat both files > /dev/null (warms the page cache)", ["sh", "-c", f"cat {ref} {dist} > /dev/null"], 1,
          [])
    cat = timed("cat both files > /dev/null", ["sh", "-c", f"cat {ref} {dist} > /dev/null"], args.runs, rows,
                frames=args.frames)
    limits = {}
    for planes in (("y",), ("y", "u", "v")):
        for threads in (1, 4, 8, 16):
            fps = read_limit(ref, dist, args.frames, planes, threads)
            limits[f"{''.join(planes)} x{threads}"] = fps
            print(f"read limit, planes {''.join(planes):3s} threads {threads:2d}: {fps:8.1f} frames/s", flush=True)
    per_feature = in_process_features(ref, dist, args.frames, features)
    out_xml = root / "out.xml"
    warm = [*cli(), "vmaf", "-r", str(clips["ref", 1]), "-d", str(clips["dist", 1]), "-q"]
    for f in features:  # Triton's on-disk cache filled once, as on any user's machine after the first run
        run_once([*warm, *feature_args(f)])
    torch_cuda = timed("import torch + CUDA context", [PY, "-c", "import torch; torch.zeros(1, device='cuda')"],
                       args.runs + 1, rows)
    timed("fusedsim --help", [*cli(), "--help"], args.runs + 1, rows)
    timed("fusedsim vmaf --help", [*cli(), "vmaf", "--help"], args.runs + 1, rows)
    for f in features:
        base = [*cli(), "vmaf", *feature_args(f), "-q", "-o", str(out_xml)]
        one = timed(f"vmaf {f}: 1 frame", [*base, "-r", str(clips["ref", 1]), "-d", str(clips["dist", 1])],
                    args.runs + 1, rows, frames=1)
        mid = timed(f"vmaf {f}: {args.mid_frames} frames",
                    [*base, "-r", str(ref), "-d", str(dist), "--frame_cnt", str(args.mid_frames)], args.runs, rows,
                    frames=args.mid_frames, xml=out_xml)
        full = timed(f"vmaf {f}: {args.frames} frames", [*base, "-r", str(ref), "-d", str(dist)], args.runs, rows,
                     frames=args.frames, xml=out_xml)
        # whole-process differences are only meaningful when the work outweighs start-up's run-to-run spread
        marginal = marginal_rate([(1, w) for w in one["wall_s"]] + [(args.mid_frames, w) for w in mid["wall_s"]]
                                 + [(args.frames, w) for w in full["wall_s"]])
        spread = max(one["wall_s"]) - min(one["wall_s"])
        full["marginal_frames_per_s"] = marginal
        one["startup_over_torch_cuda_s"] = one["wall_s_median"] - torch_cuda["wall_s_median"]
        print(f"  {f}: marginal {marginal:.0f} frames/s (least squares over every run; 1-frame runs spread "
              f"{spread:.2f} s); the CLI's own rate on {args.frames} frames {full.get('cli_fps_median', 0):.0f} "
              f"frames/s", flush=True)
    variants = in_process_variants(ref, dist, args.frames) if args.variants else []
    import torch

    meta = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "gpu": torch.cuda.get_device_name(0),
            "torch": version_of("torch"), "triton": version_of("triton"), "cpu_count": os.cpu_count(),
            "frames": args.frames, "size": f"{W}x{H} yuv420p", "runs": args.runs, "bytecode": args.bytecode,
            "cat_frames_per_s":
            cat.get("frames_per_s")}
    write_json("vmaf_cli", {"meta": meta, "rows": rows, "read_limit_frames_per_s": limits,
                            "in_process_per_feature": per_feature, "in_process_variants": variants}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
