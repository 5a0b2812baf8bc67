"""SSIMULACRA2 and Butteraugli: fusedsim against Vship (libvship's C API) on the same GPU, in one process.

Vship is a CUDA/HIP library that is not part of this repository: build ``libvship.so`` from its public source on
the benchmark machine (its Makefile's ``buildcuda`` target) and pass its path with ``--lib``.

* Agreement: every pair of ``refdata/perceptual`` that the reference tools scored (``scores.csv``:
  ``cloudinary-ssimulacra2-cpp``; ``libjxl-butteraugli_main`` max-norm and 3-norm at intensity target 80), scored
  by fusedsim (GPU) and by Vship: max and median |value - reference| per implementation.
* Speed, one sRGB 8-bit pair per call (batch 1), 1920x1080 and 4096x4096, ``_harness.uint8_pair`` images:
  - Vship as its users call it: host frames (pinned, planar RGB) in, score out, one handler, call after call
    (latency), and three handlers on three threads (the throughput setting its documentation recommends);
  - fusedsim from the same pinned host frames (copy to the GPU included) with the score read back after every
    call (latency), and calls queued with one synchronisation at the end (throughput); and from frames already on
    the GPU (throughput), as when frames come from a GPU decoder or a renderer, one pair per call and 8 per call.

Run: ``PYTHONPATH=src python benchmarks/bench_vship.py --lib /path/to/libvship.so [--frames 200]``
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, uint8_pair, write_json  # noqa: E402
from _vship import Handler, Vship, srgb_rgb8  # noqa: E402

import fusedsim  # noqa: E402

REFDATA = Path(__file__).resolve().parents[2] / "shared" / "refdata" / "perceptual"
BATCH = 8  # pairs per call in the batched row (default of --batch)


# ------------------------------------------------------------------------------------------------- agreement
def fusedsim_score(metric: str, ref: torch.Tensor, dist: torch.Tensor) -> tuple[float, ...]:
    if metric == "ssimulacra2":
        return (float(fusedsim.ssimulacra2(ref, dist)),)
    res = fusedsim.butteraugli(ref, dist)
    return float(res.max_norm), float(res.pnorm3)


def corpus_rows(refdata: Path) -> dict[str, list[dict]]:
    """Reference values per metric: {metric: [{ref, dist, values}]} (butteraugli: max-norm and 3-norm)."""
    rows = list(csv.DictReader((refdata / "scores.csv").open()))
    ssim2 = [{"ref": r["ref"], "dist": r["dist"], "values": (float(r["value"]),)} for r in rows
             if r["metric"] == "ssimulacra2" and r["implementation"] == "cloudinary-ssimulacra2-cpp"]

    def at80(r: dict) -> bool:
        return r["implementation"] == "libjxl-butteraugli_main" and "250" not in r["extra"]

    norm3 = {(r["ref"], r["dist"]): float(r["value"]) for r in rows if r["metric"] == "butteraugli_pnorm3" and at80(r)}
    butter = [{"ref": r["ref"], "dist": r["dist"], "values": (float(r["value"]), norm3[(r["ref"], r["dist"])])}
              for r in rows if r["metric"] == "butteraugli" and at80(r) and (r["ref"], r["dist"]) in norm3]
    return {"ssimulacra2": ssim2, "butteraugli": butter}


def load_chw(path: Path) -> torch.Tensor:
    from PIL import Image

    return torch.from_numpy(np.array(Image.open(path).convert("RGB"))).permute(2, 0, 1).contiguous()


def agreement(vship: Vship, refdata: Path) -> dict:
    out: dict = {}
    images = refdata / "images"
    for metric, rows in corpus_rows(refdata).items():
        per_pair = []
        for row in rows:
            ref, dist = load_chw(images / row["ref"]), load_chw(images / row["dist"])
            h = vship.handler(metric, srgb_rgb8(ref.shape[2], ref.shape[1]))
            try:
                theirs = vship.score(metric, h, ref.pin_memory(), dist.pin_memory())
            finally:
                vship.free(metric, h)
            ours = fusedsim_score(metric, ref.cuda()[None], dist.cuda()[None])
            per_pair.append({"ref": row["ref"], "dist": row["dist"], "reference": row["values"], "fusedsim": ours,
                             "vship": theirs})
        fields = ("value",) if metric == "ssimulacra2" else ("max_norm", "pnorm3")
        summary = {}
        for k, field in enumerate(fields):
            for impl in ("fusedsim", "vship"):
                diffs = [abs(p[impl][k] - p["reference"][k]) for p in per_pair]
                summary[f"{field} {impl}"] = {"max_abs_diff": max(diffs), "median_abs_diff": statistics.median(diffs)}
                print(f"  {metric} {field:8s} {impl:8s} vs reference, {len(diffs)} pairs: max |diff| "
                      f"{max(diffs):.3g}, median {statistics.median(diffs):.3g}", flush=True)
        out[metric] = {"summary": summary, "pairs": per_pair}
    return out


# ----------------------------------------------------------------------------------------------------- speed
def per_frame_ms(fn, frames: int) -> float:
    fn()  # warm-up: compile, handler buffers
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(frames):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / frames * 1e3


def vship_threaded_ms(vship: Vship, metric: str, ref: torch.Tensor, dist: torch.Tensor, frames: int,
                      threads: int = 3) -> float:
    """Frames scored by ``threads`` handlers on as many threads (ctypes releases the GIL during each call)."""
    handlers = [vship.handler(metric, srgb_rgb8(ref.shape[2], ref.shape[1])) for _ in range(threads)]
    try:
        for h in handlers:
            vship.score(metric, h, ref, dist)
        per_thread = max(1, frames // threads)

        def work(h: Handler) -> None:
            for _ in range(per_thread):
                vship.score(metric, h, ref, dist)

        pool = [threading.Thread(target=work, args=(h,)) for h in handlers]
        start = time.perf_counter()
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        return (time.perf_counter() - start) / (per_thread * threads) * 1e3
    finally:
        for h in handlers:
            vship.free(metric, h)


def time_metric(vship: Vship, metric: str, ref_h: torch.Tensor, dist_h: torch.Tensor, frames: int,
                batch: int = BATCH) -> dict:
    """Per-frame times of one metric on one pinned host pair (3, H, W) and its copy on the GPU."""
    _, height, width = ref_h.shape
    ref_d, dist_d = ref_h.cuda()[None], dist_h.cuda()[None]
    compute = fusedsim.ssimulacra2 if metric == "ssimulacra2" else fusedsim.butteraugli

    def ours_host_sync() -> None:
        fusedsim_score(metric, ref_h.cuda(non_blocking=True)[None], dist_h.cuda(non_blocking=True)[None])

    def ours_host_queued() -> None:
        compute(ref_h.cuda(non_blocking=True)[None], dist_h.cuda(non_blocking=True)[None])

    h = vship.handler(metric, srgb_rgb8(width, height))
    try:
        vship_ms = per_frame_ms(lambda: vship.score(metric, h, ref_h, dist_h), frames)
    finally:
        vship.free(metric, h)
    row = {
        "metric": metric, "size": f"{width}x{height}", "frames": frames, "vship_latency_ms": vship_ms,
        "vship_3_threads_ms": vship_threaded_ms(vship, metric, ref_h, dist_h, frames),
        "fusedsim_host_latency_ms": per_frame_ms(ours_host_sync, frames),
        "fusedsim_host_queued_ms": per_frame_ms(ours_host_queued, frames),
        "fusedsim_device_queued_ms": per_frame_ms(lambda: compute(ref_d, dist_d), frames),
    }
    # many pairs per call, as a batch scorer passes them: (batch, 3, H, W) from GPU frames
    refs, dists = ref_d.expand(batch, -1, -1, -1).contiguous(), dist_d.expand(batch, -1, -1, -1).contiguous()
    batched = per_frame_ms(lambda: compute(refs, dists), max(2, frames // batch))
    row["batch"] = batch
    row[f"fusedsim_device_batch{batch}_ms"] = batched / batch
    row["latency_x"] = row["vship_latency_ms"] / row["fusedsim_host_latency_ms"]
    row["throughput_x"] = row["vship_3_threads_ms"] / row["fusedsim_host_queued_ms"]
    row["throughput_batched_x"] = row["vship_3_threads_ms"] / row[f"fusedsim_device_batch{batch}_ms"]
    return row


def speed(vship: Vship, sizes: list[tuple[int, int]], frames: int, batch: int = BATCH) -> list[dict]:
    rows = []
    for height, width in sizes:
        ref_h, dist_h = (t[0].pin_memory() for t in uint8_pair(height, width, "cpu", seed=0))
        n = max(10, frames * 1920 * 1080 // (height * width))
        for metric in ("ssimulacra2", "butteraugli"):
            row = time_metric(vship, metric, ref_h, dist_h, n, batch)
            rows.append(row)
            print(f"  {metric:11s} {width}x{height}: Vship {row['vship_latency_ms']:.2f} ms/frame (1 handler), "
                  f"{row['vship_3_threads_ms']:.2f} (3 threads) | fusedsim from host "
                  f"{row['fusedsim_host_latency_ms']:.2f} (value read each call), {row['fusedsim_host_queued_ms']:.2f} "
                  f"(queued), from GPU frames {row['fusedsim_device_queued_ms']:.2f}, in batches of {batch} "
                  f"{row[f'fusedsim_device_batch{batch}_ms']:.2f} | x Vship: latency "
                  f"{row['latency_x']:.2f}, throughput {row['throughput_x']:.2f}, batched "
                  f"{row['throughput_batched_x']:.2f}", flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", required=True, help="path of libvship.so built from Vship's public source")
    ap.add_argument("--frames", type=int, default=200, help="frames per timing at 1080p (fewer at larger sizes)")
    ap.add_argument("--refdata", type=Path, default=REFDATA, help="the perceptual reference-data folder")
    ap.add_argument("--parts", default="agreement,speed")
    ap.add_argument("--batch", type=int, default=BATCH, help=f"pairs per call in the batched row ({BATCH})")
    ap.add_argument("--out", default=None, help="also write the JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_vship.py needs a GPU (Vship runs on CUDA/HIP)")
    vship = Vship(args.lib)
    parts = set(args.parts.split(","))
    payload: dict = {"meta": metadata("cuda"), "vship_lib": args.lib}
    if "agreement" in parts:
        print("Agreement with the reference tools (refdata/perceptual):", flush=True)
        payload["agreement"] = agreement(vship, args.refdata)
    if "speed" in parts:
        print("Speed, one pair per call:", flush=True)
        payload["speed"] = speed(vship, [(1080, 1920), (4096, 4096)], args.frames, args.batch)
    print("wrote", write_json("vship", payload, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
