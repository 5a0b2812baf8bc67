"""VMAF integer SSIM benchmark: the Triton path against the CPU path (PyTorch twin) in one process.

* GPU-resident frames: frames/s of ``fusedsim.vmaf.integer_ssim_kernel.integer_ssim_fwd`` (terms kernel + exact
  sequential pooling) and of the public ``fusedsim.vmaf.integer_ssim`` (adds input checks), 1080p and 2160p,
  8 and 10 bit; the two kernels timed alone; a few block-size variants.
* CPU path: ``integer_ssim_ref`` on the same frames (all CPU threads), checked ``==`` against the GPU values.
* End to end from Y4M files (written here, 1080p 8-bit): the reader alone, host-to-device copies alone, the
  registry call the CLI makes (``features.extract``) batch by batch, and an overlapped pipeline (reader thread,
  pinned buffers, copies on a side stream) -- which shows where the end-to-end path is bound.

Run: ``PYTHONPATH=src python benchmarks/bench_vmaf.py [--out DIR] [--quick]``; ``--smoke`` runs everything tiny on
the CPU (Triton interpreter) to check the script. JSON goes to ``benchmarks/results/`` (and ``--out``).
"""

from __future__ import annotations

import argparse
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if "--smoke" in sys.argv:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import write_json  # noqa: E402

from fusedsim.vmaf.integer_ssim_kernel import integer_ssim_fwd, integer_ssim_terms_fwd  # noqa: E402
from fusedsim.vmaf.sequential_sum_kernel import sequential_sum_fwd  # noqa: E402
from fusedsim.vmaf.integer_ssim_twin import integer_ssim_ref  # noqa: E402
from fusedsim.vmaf import integer_ssim  # noqa: E402


def median_ms(fn, device: torch.device, warmup_ms: int = 100, rep_ms: int = 500) -> float:
    if device.type == "cuda":
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    fn()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def make_frames(n: int, h: int, w: int, bit_depth: int, device: torch.device, seed: int):
    """Natural-ish content (smooth field + texture) and a distorted copy (noise, small shift); never zeros."""
    gen = torch.Generator(device=device).manual_seed(seed)
    top = (1 << bit_depth) - 1
    kw = dict(generator=gen, device=device)
    coarse = torch.rand(n, 1, h // 16 + 2, w // 16 + 2, **kw)
    base = torch.nn.functional.interpolate(coarse, size=(h, w), mode="bilinear", align_corners=False)[:, 0]
    tex = torch.rand(n, h, w, **kw) * 0.08
    ref = ((base * 0.85 + tex) * top).round().clamp(0, top)
    noise = torch.randn(n, h, w, **kw) * (0.01 * top)
    dist = (torch.roll(ref, shifts=1, dims=2) * 0.5 + ref * 0.5 + noise).round().clamp(0, top)
    dt = torch.uint8 if bit_depth == 8 else torch.int16
    return ref.to(dt), dist.to(dt)


def bench_resident(cases, device, cpu_frames, quick):
    rows = []
    for (h, w, bd, n) in cases:
        ref, dist = make_frames(n, h, w, bd, device, seed=h + bd)
        buf = torch.empty(n, h * w, dtype=torch.float64, device=device)
        gpu_vals = integer_ssim_fwd(ref, dist, bd, max_buffer_bytes=buf.numel() * 8 + 1)
        t_path = median_ms(lambda: integer_ssim_fwd(ref, dist, bd, max_buffer_bytes=buf.numel() * 8 + 1), device)
        t_api = median_ms(lambda: integer_ssim(ref, dist, bd), device)
        t_terms = median_ms(lambda: integer_ssim_terms_fwd(ref, dist, bd, out=buf), device)
        integer_ssim_terms_fwd(ref, dist, bd, out=buf)
        t_pool = median_ms(lambda: sequential_sum_fwd(buf), device)
        t_walk = median_ms(lambda: sequential_sum_fwd(buf, use_summary=False), device, rep_ms=200)
        t_chunkwise = median_ms(lambda: sequential_sum_fwd(buf, vector_scan=False), device, rep_ms=200)
        # CPU path on a few of the same frames, and its values against the GPU's
        k = min(cpu_frames, n)
        rc, dc = ref[:k].cpu(), dist[:k].cpu()
        times = []
        for _ in range(1 if quick else 2):
            t0 = time.perf_counter()
            cpu_vals = integer_ssim_ref(rc, dc, bd)
            times.append(time.perf_counter() - t0)
        t_cpu_frame = min(times) / k
        equal = cpu_vals.tolist() == gpu_vals[:k].cpu().tolist()
        row = {
            "height": h, "width": w, "bit_depth": bd, "frames": n,
            "gpu_fps": n / (t_path / 1e3), "api_fps": n / (t_api / 1e3),
            "terms_ms_per_frame": t_terms / n, "pool_ms_per_frame": t_pool / n,
            "pool_walk_only_ms_per_frame": t_walk / n, "pool_chunkwise_scan_ms_per_frame": t_chunkwise / n,
            "cpu_fps": 1.0 / t_cpu_frame, "cpu_frames": k, "cpu_threads": torch.get_num_threads(),
            "speedup_vs_cpu": (n / (t_path / 1e3)) * t_cpu_frame,
            "cpu_equals_gpu": equal,
        }
        rows.append(row)
        print(f"{w}x{h} {bd}-bit x{n}: GPU {row['gpu_fps']:.0f} fps (API {row['api_fps']:.0f}), terms "
              f"{row['terms_ms_per_frame'] * 1e3:.1f} us/frame, pool {row['pool_ms_per_frame'] * 1e3:.1f} us/frame "
              f"(walk-only {row['pool_walk_only_ms_per_frame'] * 1e3:.1f}, one-chunk scan "
              f"{row['pool_chunkwise_scan_ms_per_frame'] * 1e3:.1f}), CPU {row['cpu_fps']:.2f} fps "
              f"({row['cpu_threads']} threads) -> x{row['speedup_vs_cpu']:.0f}; CPU == GPU: {equal}", flush=True)
        del ref, dist, buf
    return rows


def bench_variants(device, quick):
    """Block sizes of the terms kernel and chunk/block of the pooling, 1080p 8-bit."""
    h, w, bd, n = (1080, 1920, 8, 32) if not quick else (1080, 1920, 8, 8)
    if device.type != "cuda":
        h, w, n = 24, 40, 2
    ref, dist = make_frames(n, h, w, bd, device, seed=5)
    buf = torch.empty(n, h * w, dtype=torch.float64, device=device)
    out = {"terms": [], "pool": []}
    for bw, rows, warps in [(128, 32, 4), (128, 64, 4), (64, 32, 2), (64, 64, 2), (256, 32, 8), (256, 64, 4),
                            (128, 128, 4), (32, 64, 1)]:
        t = median_ms(lambda: integer_ssim_terms_fwd(ref, dist, bd, out=buf, block_w=bw, rows=rows, bands=1,
                                                     num_warps=warps), device, rep_ms=200)
        out["terms"].append({"block_w": bw, "rows": rows, "num_warps": warps, "us_per_frame": t / n * 1e3})
        print(f"terms BLOCK_W={bw} ROWS={rows} warps={warps}: {t / n * 1e3:.1f} us/frame", flush=True)
    integer_ssim_terms_fwd(ref, dist, bd, out=buf)
    want = sequential_sum_fwd(buf).tolist()
    for chunk, block, vec in [(2048, 512, True), (4096, 512, True), (1024, 256, True), (2048, 256, True),
                              (8192, 1024, True), (4096, 1024, True), (8192, 1024, False), (2048, 512, False)]:
        ok = sequential_sum_fwd(buf, chunk=chunk, block=block, vector_scan=vec).tolist() == want
        t = median_ms(lambda: sequential_sum_fwd(buf, chunk=chunk, block=block, vector_scan=vec), device, rep_ms=200)
        out["pool"].append({"chunk": chunk, "block": block, "vector_scan": vec, "us_per_frame": t / n * 1e3,
                            "same_bits": ok})
        print(f"pool chunk={chunk} block={block} vector_scan={vec}: {t / n * 1e3:.1f} us/frame (same bits: {ok})",
              flush=True)
    return out


# --------------------------------------------------------------------------------------------- end to end (Y4M)

def write_y4m(path: Path, n: int, h: int, w: int, seed: int, shift: bool, device: torch.device) -> None:
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F25:1 Ip A1:1 C420jpeg\n".encode())
        step = 16
        for s in range(0, n, step):
            k = min(step, n - s)
            y, _ = make_frames(k, h, w, 8, device, seed=seed + s)
            if shift:
                y = torch.roll(y, 1, dims=2)
            yc = y.cpu().numpy()
            cb = np.ascontiguousarray(yc[:, ::2, ::2]) // 2 + 64
            for i in range(k):
                f.write(b"FRAME\n")
                f.write(yc[i].tobytes())
                f.write(cb[i].tobytes())
                f.write(cb[i].tobytes())


def drop_page_cache() -> bool:
    try:
        subprocess.run(["sync"], check=False)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def bench_end_to_end(device, n_frames, batch, tmpdir: Path):
    from fusedsim.io.video import open_video
    from fusedsim.vmaf import features

    h, w = (1080, 1920) if device.type == "cuda" else (36, 64)
    ref_p, dist_p = tmpdir / "ref.y4m", tmpdir / "dist.y4m"
    t0 = time.perf_counter()
    write_y4m(ref_p, n_frames, h, w, seed=1, shift=False, device=device)
    write_y4m(dist_p, n_frames, h, w, seed=1, shift=True, device=device)
    file_mb = (ref_p.stat().st_size + dist_p.stat().st_size) / 1e6
    print(f"wrote 2 x {n_frames} frames {w}x{h} Y4M ({file_mb:.0f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
    res = {"width": w, "height": h, "frames": n_frames, "batch_frames": batch, "file_mb_both": file_mb}

    def read_all():
        with open_video(ref_p) as rr, open_video(dist_p) as dr:
            for rb, db in zip(rr.batches(batch), dr.batches(batch)):
                yield rb, db

    # 1. reader alone, cold page cache if we may drop it, then warm
    cold = drop_page_cache() if device.type == "cuda" else False
    t0 = time.perf_counter()
    for _ in read_all():
        pass
    t_read_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in read_all():
        pass
    t_read = time.perf_counter() - t0
    res["read_fps_first_pass"] = n_frames / t_read_first
    res["first_pass_cold_cache"] = cold
    res["read_fps_warm"] = n_frames / t_read
    res["read_gb_s_warm"] = file_mb / 1e3 / t_read

    if device.type == "cuda":
        # 2. host->device copies of the luma planes alone (pageable and pinned)
        y = torch.from_numpy(np.zeros((batch, h, w), np.uint8) + 1)
        yp = y.pin_memory()
        t_pageable = median_ms(lambda: y.to(device), device, rep_ms=200)
        t_pinned = median_ms(lambda: yp.to(device, non_blocking=True), device, rep_ms=200)
        res["h2d_luma_fps_pageable"] = batch / (t_pageable / 1e3) / 2  # two clips
        res["h2d_luma_fps_pinned"] = batch / (t_pinned / 1e3) / 2

    # 3. what the CLI does: registry call per batch, sequentially
    torch_sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    vals = []
    t0 = time.perf_counter()
    for rb, db in read_all():
        vals.append(features.extract("ssim", rb, db, device=device.type)["ssim"])
    torch_sync()
    t_cli = time.perf_counter() - t0
    ref_vals = np.concatenate(vals)
    res["registry_sequential_fps"] = n_frames / t_cli

    # 4. overlapped: one reader thread per clip -> (pinned) staging -> side-stream copy -> compute on the main stream
    for pin in (True, False):
        t0 = time.perf_counter()
        got = overlapped(ref_p, dist_p, device, batch, pin=pin)
        t_ovl = time.perf_counter() - t0
        key = "overlapped_pinned" if pin else "overlapped_pageable"
        res[f"{key}_fps"] = n_frames / t_ovl
        res[f"{key}_equals_registry"] = bool(np.array_equal(got, ref_vals))

    # 5. the two readers in parallel threads with no GPU work: the reading limit of this layout
    def read_clip(path):
        with open_video(path) as reader:
            for _ in reader.batches(batch):
                pass

    t0 = time.perf_counter()
    ths = [threading.Thread(target=read_clip, args=(p,)) for p in (ref_p, dist_p)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    res["read_fps_two_threads_warm"] = n_frames / (time.perf_counter() - t0)
    print("end to end:", {k: (round(v, 1) if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
    return res


def overlapped(ref_path, dist_path, device, batch, pin=True):
    """Read both clips in their own threads (file reads and the pinned copy release the GIL), copy the luma
    planes on a side stream, compute on the main stream while the next batches are read and copied."""
    from fusedsim.io.video import open_video

    cuda = device.type == "cuda"

    def producer(path, q):
        with open_video(path) as reader:
            for b in reader.batches(batch):
                y = torch.from_numpy(b.y)
                q.put((y.pin_memory() if cuda and pin else y, b.bit_depth))
        q.put(None)

    queues = [queue.Queue(maxsize=3), queue.Queue(maxsize=3)]
    threads = [threading.Thread(target=producer, args=(p, q), daemon=True)
               for p, q in zip((ref_path, dist_path), queues)]
    for th in threads:
        th.start()
    copy_stream = torch.cuda.Stream() if cuda else None
    outs, pending = [], []
    while True:
        ri, di = queues[0].get(), queues[1].get()
        if ri is None or di is None:
            break
        (r, bd), (d, _) = ri, di
        if cuda:
            with torch.cuda.stream(copy_stream):
                rg = r.to(device, non_blocking=True)
                dg = d.to(device, non_blocking=True)
                ev = torch.cuda.Event()
                ev.record(copy_stream)
            torch.cuda.current_stream().wait_event(ev)
            rg.record_stream(torch.cuda.current_stream())
            dg.record_stream(torch.cuda.current_stream())
        else:
            rg, dg = r, d
        pending.append((integer_ssim_fwd(rg, dg, bd), r, d))  # keep pinned sources alive until copied
        if len(pending) > 2:
            outs.append(pending.pop(0)[0].cpu().numpy())
    outs.extend(p[0].cpu().numpy() for p in pending)
    for th in threads:
        th.join()
    return np.concatenate(outs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU through the Triton interpreter")
    ap.add_argument("--e2e-frames", type=int, default=240)
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    if device.type == "cuda":
        from _harness import metadata

        meta = metadata()
    else:
        meta = {"device": "cpu (interpreter smoke run)"}
    meta["cpu_threads"] = torch.get_num_threads()
    meta["command"] = "PYTHONPATH=src python benchmarks/bench_vmaf.py" + (" --quick" if args.quick else "")
    print(meta, flush=True)

    if device.type == "cuda":
        n1080 = 16 if args.quick else 64
        cases = [(1080, 1920, 8, n1080), (1080, 1920, 10, n1080), (2160, 3840, 8, n1080 // 4),
                 (2160, 3840, 10, n1080 // 4), (1080, 1920, 8, 1)]
        cpu_frames = 2
    else:
        cases = [(24, 40, 8, 2), (20, 33, 10, 2)]
        cpu_frames = 2
    payload = {"meta": meta, "resident": bench_resident(cases, device, cpu_frames, args.quick)}
    payload["variants"] = bench_variants(device, args.quick)
    with tempfile.TemporaryDirectory(dir=os.environ.get("FUSEDSIM_BENCH_TMP")) as tmp:
        n = args.e2e_frames if device.type == "cuda" else 8
        payload["end_to_end"] = bench_end_to_end(device, n, 32 if device.type == "cuda" else 4, Path(tmp))
    path = write_json("vmaf", payload, args.out)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
