"""``fusedsim video`` end to end on 1080p compressed clips: decoding alone, then SSIMULACRA2, Butteraugli and VMAF
per frame, from the file to the per-frame values.

Clips (written once into ``--dir``): the bundled example photo (or ``--image``), enlarged to 2880 px wide and panned
4 px per frame under a 1920x1080 window, ``--frames`` frames (default 1200) at 25 frames/s, 8-bit 4:2:0:
``ref.mp4`` (H.264, libx264 CRF 12), ``dist_h264.mp4`` (H.264, CRF 32) and ``dist_av1.mkv`` (AV1, SVT-AV1 CRF 45,
when PyAV's FFmpeg has libsvtav1). Encoding is not timed.

Measured, each in frames/s over the whole clip:

* decode alone: PyAV on the CPU (FFmpeg's threads, planes copied out: what ``decoder="cpu"`` feeds the metrics;
  all planes and luma only), and NVDEC when available: FFmpeg's CUDA hwaccel, and PyNvVideoCodec with 1-4
  decoder sessions on the clip (frames left in GPU memory);
* the pair decoded alone: both clips as ``fusedsim video`` feeds a metric (batches of frame pairs on the device),
  per decoder: the decode bound of the end-to-end rows;
* end to end: :func:`fusedsim.engine.video.score_video` of each distorted clip against ``ref.mp4`` for each metric
  and decoder (both clips decoded, R'G'B' conversion, the metric, values back on the host), after a 16-frame
  warm-up run that compiles the kernels.

* the CLI as a whole process: ``fusedsim video REF DIST -m METRIC --json FILE -q`` (interpreter start-up, import,
  kernel loads from the warm cache, decoding, scoring, writing), CPU decoder, default options;
* the FFVship-equivalent peer (``--vship libvship.so``, SSIMULACRA2 and Butteraugli): the same files decoded by
  PyAV (one thread per clip, FFmpeg's own threads inside, as FFVship's default ``-t 1`` decodes) into 4:2:0 planes
  handed to Vship's C API with the clip's matrix, range and siting, on 8 handlers in 8 threads (FFVship's default
  ``-g 8``); frames/s from opening the clips to the last value, after a 16-frame warm-up run. Its mean value is
  printed next to ours: Vship converts YUV to RGB itself (its own chroma upsampling), so means differ slightly.

Goals (issue 35, H100-class GPU): SSIMULACRA2 >= 1,000 frames/s or the decode bound measured here, Butteraugli
>= 500, VMAF >= 1,500; >= 3x the FFVship-equivalent frames/s. FFmpeg's libvmaf filter is not run: PyAV's FFmpeg
has none.

Run: ``PYTHONPATH=src python benchmarks/bench_video.py [--frames 1200] [--dir /tmp/videobench]
[--metrics ssimulacra2,butteraugli,vmaf] [--decoders cpu,nvdec] [--batch-frames 8] [--codecs h264,av1]
[--vship libvship.so] [--skip-cli]``;
``--quick`` is a small CPU smoke run (48 frames at 640x360). JSON goes to ``benchmarks/results/`` (and ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time
from importlib import resources
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, smoke_dir, write_json  # noqa: E402


def source_frames(image: Path | None, frames: int, width: int, height: int):
    """RGB uint8 frames: the photo enlarged to 1.5x the window's width and panned 4 px per frame (back and forth)."""
    from PIL import Image

    path = image or Path(str(resources.files("fusedsim") / "data" / "example_ref.png"))
    photo = Image.open(path).convert("RGB")
    big_w = int(width * 1.5)
    big_h = max(height, round(photo.height * big_w / photo.width))
    big = np.asarray(photo.resize((big_w, big_h), Image.BICUBIC))
    span = big_w - width
    for i in range(frames):
        x = (4 * i) % (2 * span)
        x = x if x < span else 2 * span - x
        y = (big_h - height) // 2
        yield np.ascontiguousarray(big[y:y + height, x:x + width])


def encode(path: Path, codec: str, options: dict, image: Path | None, frames: int, width: int, height: int) -> Path:
    import av

    if path.exists():
        return path
    tmp = path.with_suffix(".part" + path.suffix)
    with av.open(str(tmp), "w") as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = options
        stream.codec_context.thread_count = 0
        for i, rgb in enumerate(source_frames(image, frames, width, height)):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuv420p")
            frame.pts = i
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    tmp.rename(path)
    return path


def make_clips(folder: Path, image: Path | None, frames: int, width: int, height: int,
               codecs: tuple[str, ...] = ("h264", "av1")) -> dict[str, Path]:
    from fusedsim.io.compressed import import_av

    av = import_av()
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{width}x{height}_{frames}"
    clips = {"ref": encode(folder / f"ref_{tag}.mp4", "libx264", {"crf": "12", "preset": "veryfast"}, image,
                           frames, width, height),
             "dist_h264": encode(folder / f"dist_h264_{tag}.mp4", "libx264", {"crf": "32", "preset": "veryfast"},
                                 image, frames, width, height)}
    if "h264" not in codecs:
        del clips["dist_h264"]
    if "av1" not in codecs:
        return clips
    try:
        av.codec.Codec("libsvtav1", "w")
        clips["dist_av1"] = encode(folder / f"dist_av1_{tag}.mkv", "libsvtav1", {"crf": "45", "preset": "10"},
                                   image, frames, width, height)
    except Exception as exc:  # noqa: BLE001 - no AV1 encoder in this FFmpeg: the H.264 rows still run
        print(f"no AV1 clip: {exc}", file=sys.stderr)
    return clips


def decode_rates(path: Path, decoders: list[str], device: str) -> list[dict]:
    from fusedsim.io.compressed import open_compressed

    reader = open_compressed(path)
    rows = []
    if "cpu" in decoders:
        for planes in (("y", "u", "v"), ("y",)):
            start = time.perf_counter()
            n = sum(1 for _ in reader.frames(planes))
            seconds = time.perf_counter() - start
            rows.append({"clip": path.name, "decoder": "cpu", "planes": "".join(planes), "frames": n,
                         "seconds": seconds, "fps": n / seconds, "threads": os.cpu_count()})
    if "nvdec" in decoders and device == "cuda":
        from fusedsim.io.nvcodec import nvcodec_available, nvcodec_frames
        from fusedsim.io.nvdec import nvdec_available, nvdec_frames

        variants = [("nvdec (FFmpeg hwaccel)", nvdec_frames, {})] if nvdec_available() else []
        if nvcodec_available():
            variants += [(f"nvdec (PyNvVideoCodec, {k} session{'s' if k > 1 else ''})", nvcodec_frames,
                          {"sessions": k}) for k in (1, 2, 3, 4)]
        if not variants:
            rows.append({"clip": path.name, "decoder": "nvdec", "error": "NVDEC not available"})
        for name, frames, options in variants:
            rows.append(_nvdec_rate(reader, name, frames, options))
    return rows


def _nvdec_rate(reader, name: str, frames, options: dict) -> dict:
    import torch

    row = {"clip": reader.path.name, "decoder": name, "planes": "yuv"}
    try:
        for _ in frames(reader, device="cuda", limit=8, **options):
            pass  # the decoder's start-up stays out of the rate
        torch.cuda.synchronize()
        start = time.perf_counter()
        n = sum(1 for _ in frames(reader, device="cuda", **options))
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        row.update(frames=n, seconds=seconds, fps=n / seconds)
    except (ValueError, RuntimeError) as exc:  # a stream NVDEC refuses: recorded, the other rows kept
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def pair_rates(ref: Path, dist: Path, decoders: list[str], device: str, batch_frames: int) -> list[dict]:
    """Both clips decoded together as ``fusedsim video`` feeds a metric (batches of frame pairs on the device,
    no metric): the decode bound of the end-to-end rows."""
    import torch

    from fusedsim.io.clip_pair import open_pair

    rows = []
    for decoder in decoders:
        if decoder == "nvdec" and device != "cuda":
            continue
        row = {"clip": dist.name, "metric": "(decode pair only)", "decoder": decoder, "batch_frames": batch_frames}
        try:
            for _ in open_pair(ref, dist, device=device, decoder=decoder, frames=16).batches(batch_frames):
                pass
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            with open_pair(ref, dist, device=device, decoder=decoder) as pair:
                n = sum(b.ref.y.shape[0] for b in pair.batches(batch_frames))
            if device == "cuda":
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            row.update(frames=n, seconds=seconds, fps=n / seconds)
        except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
        print(_row_text(row), flush=True)
    return rows


def score_rates(ref: Path, dist: Path, metrics: list[str], decoders: list[str], device: str,
                batch_frames: int) -> list[dict]:
    from fusedsim.engine.video import score_video
    from fusedsim.io.nvcodec import nvcodec_available
    from fusedsim.io.nvdec import nvdec_available

    rows = []
    for metric in metrics:
        for decoder in decoders:
            if decoder == "nvdec" and not (device == "cuda" and (nvdec_available() or nvcodec_available())):
                continue
            row = {"clip": dist.name, "metric": metric, "decoder": decoder, "batch_frames": batch_frames}
            try:
                score_video(ref, dist, [metric], device=device, decoder=decoder, frames=16,
                            batch_frames=batch_frames)  # warm-up: kernels compiled, decoders started
                start = time.perf_counter()
                scores = score_video(ref, dist, [metric], device=device, decoder=decoder, batch_frames=batch_frames)
                seconds = time.perf_counter() - start
                column = next(iter(scores.columns))
                row.update(frames=scores.frames, seconds=seconds, fps=scores.frames / seconds,
                           mean=scores.pooled[column]["mean"], backends=scores.info.get("backends"))
            except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
                row["error"] = f"{type(exc).__name__}: {exc}"
            rows.append(row)
            print(_row_text(row), flush=True)
    return rows


def cli_rates(ref: Path, dist: Path, metrics: list[str], folder: Path) -> list[dict]:
    """``fusedsim video`` as a user runs it, one whole process per metric (the kernel cache is warm by now)."""
    rows = []
    for metric in metrics:
        out = folder / f"cli_{metric}.json"
        command = [sys.executable, "-m", "fusedsim", "video", str(ref), str(dist), "-m", metric, "--json", str(out),
                   "-q"]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        row = {"clip": dist.name, "metric": metric, "decoder": "cli", "command": " ".join(command[1:])}
        if done.returncode != 0:
            row["error"] = f"exit {done.returncode}: {done.stderr.strip()[-400:]}"
        else:
            frames = len(json.loads(out.read_text())["frames"])
            row.update(frames=frames, seconds=seconds, fps=frames / seconds)
        rows.append(row)
        print(_row_text(row), flush=True)
    return rows


def _vship_run(vship, metric: str, ref: Path, dist: Path, gpu_threads: int, limit: int | None) -> tuple[int, float]:
    """FFVship's pipeline on Vship's C API: both clips decoded in a thread each, pairs scored by ``gpu_threads``
    handlers in as many threads. Returns (frames, mean of the first value)."""
    from _vship import yuv420

    from fusedsim.io.compressed import open_compressed

    readers = [open_compressed(ref), open_compressed(dist)]
    spaces = []
    for r in readers:
        c, f = r.info.colour, r.fmt
        spaces.append(yuv420(f.width, f.height, f.bit_depth, c.matrix, c.range, c.siting))
    handlers = [vship.handler(metric, *spaces) for _ in range(gpu_threads)]
    pairs: queue.Queue = queue.Queue(maxsize=4 * gpu_threads)
    values: dict[int, float] = {}
    errors: list[BaseException] = []

    def decode(reader, out: queue.Queue) -> None:
        try:
            for frame in reader.frames(("y", "u", "v"), limit=limit):
                out.put([frame.y, frame.u, frame.v])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)
        out.put(None)

    def pair_up(a: queue.Queue, b: queue.Queue) -> None:
        index = 0
        while True:
            x, y = a.get(), b.get()
            if x is None or y is None:
                break
            pairs.put((index, x, y))
            index += 1
        for _ in handlers:
            pairs.put(None)

    def score(h) -> None:
        try:
            while (item := pairs.get()) is not None:
                index, x, y = item
                values[index] = vship.score(metric, h, x, y)[0]
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            while pairs.get() is not None:
                pass

    frames_q = [queue.Queue(maxsize=8), queue.Queue(maxsize=8)]
    threads = [threading.Thread(target=decode, args=(r, q)) for r, q in zip(readers, frames_q)]
    threads.append(threading.Thread(target=pair_up, args=tuple(frames_q)))
    threads += [threading.Thread(target=score, args=(h,)) for h in handlers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for h in handlers:
            vship.free(metric, h)
    if errors:
        raise errors[0]
    return len(values), float(np.mean([values[i] for i in sorted(values)]))


def vship_rates(lib: str, ref: Path, dist: Path, metrics: list[str], gpu_threads: int = 8) -> list[dict]:
    from _vship import Vship

    vship = Vship(lib)
    rows = []
    for metric in (m for m in metrics if m in ("ssimulacra2", "butteraugli")):
        row = {"clip": dist.name, "metric": metric, "decoder": "vship", "gpu_threads": gpu_threads}
        try:
            _vship_run(vship, metric, ref, dist, gpu_threads, limit=16)  # CUDA modules loaded, buffers sized
            start = time.perf_counter()
            frames, mean = _vship_run(vship, metric, ref, dist, gpu_threads, limit=None)
            seconds = time.perf_counter() - start
            row.update(frames=frames, seconds=seconds, fps=frames / seconds, mean=mean)
        except Exception as exc:  # noqa: BLE001 - one failing row must not lose the others
            row["error"] = f"{type(exc).__name__}: {exc}"
        rows.append(row)
        print(_row_text(row), flush=True)
    return rows


def _row_text(row: dict) -> str:
    if "error" in row:
        return f"{row['clip']:<28} {row.get('metric', row.get('planes', '')):<12} {row['decoder']:<6} {row['error']}"
    what = row.get("metric", row.get("planes"))
    mean = f"  mean {row['mean']:.6f}" if row.get("mean") is not None else ""
    return (f"{row['clip']:<28} {what:<12} {row['decoder']:<6} {row['frames']:>6} frames "
            f"{row['seconds']:8.2f} s {row['fps']:9.1f} frames/s{mean}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1200)
    parser.add_argument("--dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "fusedsim-videobench")
    parser.add_argument("--image", type=Path, default=None, help="photo to pan (default: the bundled example)")
    parser.add_argument("--metrics", default="ssimulacra2,butteraugli,vmaf")
    parser.add_argument("--decoders", default="cpu,nvdec")
    parser.add_argument("--batch-frames", type=int, default=8)
    parser.add_argument("--codecs", default="h264,av1", help="distorted clips: h264, av1")
    parser.add_argument("--device", default=None)
    parser.add_argument("--vship", default=None, help="libvship.so: also run the FFVship-equivalent peer")
    parser.add_argument("--skip-cli", action="store_true", help="no whole-process `fusedsim video` rows")
    parser.add_argument("--quick", action="store_true", help="CPU smoke run: 48 frames at 640x360")
    args = parser.parse_args()
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    width, height, frames = (640, 360, 48) if args.quick else (1920, 1080, args.frames)
    clips = make_clips(args.dir, args.image, frames, width, height, tuple(args.codecs.split(",")))
    decoders = [d for d in args.decoders.split(",") if d]
    metrics = [m for m in args.metrics.split(",") if m]
    payload = {"meta": metadata(device), "size": [width, height], "frames": frames, "decode": [], "score": []}
    print(f"clips in {args.dir}: {', '.join(p.name for p in clips.values())}")
    print("decode alone:")
    for path in clips.values():
        for row in decode_rates(path, decoders, device):
            payload["decode"].append(row)
            print(_row_text(row), flush=True)
    print("end to end (both clips decoded, RGB, metric, values on the host):")
    for name, path in clips.items():
        if name != "ref":
            payload["score"].extend(pair_rates(clips["ref"], path, decoders, device, args.batch_frames))
            payload["score"].extend(score_rates(clips["ref"], path, metrics, decoders, device, args.batch_frames))
            if not args.skip_cli:
                payload["score"].extend(cli_rates(clips["ref"], path, metrics, args.dir))
            if args.vship:
                payload["score"].extend(vship_rates(args.vship, clips["ref"], path, metrics))
    out = write_json("video", payload, os.environ.get("OUT"), results_dir=smoke_dir() if args.quick else
                     Path(__file__).resolve().parent / "results")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
