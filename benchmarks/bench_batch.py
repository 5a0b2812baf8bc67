"""``fusedsim batch`` end to end against the pure compute time of the same work.

For N PNG pairs at S x S (default 1000 at 1024², 8-bit RGB, textured + noise so the files decode like photos):

* **compute**: the median of ``--compute-runs`` (3) runs of the batch's scoring code (:meth:`PairRunner.run_all`:
  ``set_reference`` per reference group, pairs queued in groups of ``--group`` (one call per perceptual metric),
  values read back ``--ahead`` pairs later) on pre-decoded images, host-to-device copies
  included, no decoding, no output. Time does not depend on the
  pixel values, so a pool of at most 64 decoded images is cycled in the plan's reference/distorted pattern.
* **decode**: :func:`fusedsim.engine.batch_pairs.decode_ahead` alone with the same workers and ``--decoder`` (the
  decode bound).
* **end to end (in process)**: ``fusedsim.cli.main.main(["batch", ...])`` writing a CSV (a warm process).
* **end to end (process)**: ``fusedsim batch`` as a fresh process (start-up and CUDA context included), SSIM only.

Layouts: ``1`` (every pair its own reference: two PNG decodes per pair) and ``10`` (ten distorted images per
reference: the reference is decoded and prepared once per ten pairs). Goal: end to end <= 1.5x compute when the
machine has the cores to decode; the decode rate shows the bound.

``--decode-only``: decoding alone, images/s and the time to the first pair for threads and processes at 1, 2,
4, 8 and 16 workers (at most the CPU count), on the first ``--decode-pairs`` pairs of layout 1; nothing else runs.

Run: ``PYTHONPATH=src python benchmarks/bench_batch.py [--pairs 1000] [--size 1024] [--metric ssim,ssimulacra2]
[--layouts 1,10] [--workers N] [--decoder auto|threads|processes] [--ahead 0,2] [--group 1,8] [--compute-runs 3]
[--decode-only]
[--dir /tmp/fusedsim-batch]``.
Smoke run without a GPU: ``--device cpu --quick`` (numbers meaningless; JSON to a temporary folder).
``--engine ray``: the scale-out comparison of ``bench_ray.py`` instead (local engine vs Ray on one and two GPUs
and on two nodes, cold start to the first result), with that script's options.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, smoke_dir, write_json  # noqa: E402


def _image(seed: int, size: int, base: np.ndarray | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if base is None:
        yy, xx = np.mgrid[0:size, 0:size]
        smooth = [128 + 70 * np.sin(xx / (31 + 7 * c + seed % 13)) * np.cos(yy / (19 + 5 * c)) for c in range(3)]
        return np.clip(np.stack(smooth, -1) + rng.normal(0, 10, (size, size, 3)), 0, 255).astype(np.uint8)
    return np.clip(base.astype(np.int16) + rng.normal(0, 6, base.shape).astype(np.int16), 0, 255).astype(np.uint8)


def write_images(folder: Path, pairs: int, size: int, workers: int) -> None:
    """``r{i}.png`` and ``d{i}.png`` for i < pairs (kept between runs when present at the right size)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / f".done-{pairs}-{size}"
    if marker.exists():
        return

    def one(i: int) -> None:
        ref = _image(i, size)
        Image.fromarray(ref).save(folder / f"r{i}.png")
        Image.fromarray(_image(10_000 + i, size, ref)).save(folder / f"d{i}.png")

    with ThreadPoolExecutor(workers) as pool:
        list(pool.map(one, range(pairs)))
    marker.touch()


def write_table(folder: Path, pairs: int, per_ref: int, pool: int | None = None) -> Path:
    """A pair table of ``pairs`` rows, ``per_ref`` distorted images per reference; with ``pool`` the rows cycle
    through the first ``pool`` image pairs (every row still decodes its own files)."""
    pool = pool or pairs
    path = folder / f"pairs-{pairs}-{per_ref}-{pool}.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["ref", "dist"])
        w.writerows((f"r{(i // per_ref * per_ref) % pool}.png", f"d{i % pool}.png") for i in range(pairs))
    return path


def compute_seconds(folder: Path, pairs: int, per_ref: int, metric: str, device: str, ahead: int,
                    runs: int = 3, group: int | None = None) -> tuple[float, list[float]]:
    """Median seconds of ``runs`` runs of the batch's scoring code (:meth:`PairRunner.run_all`, ``ahead`` pairs
    queued beyond the one read back) on pre-decoded pairs, host-to-device copies and reading every value back
    included; and every run's seconds. One run moved by up to 2x between runs of the same code on the GPU
    machines (their hosts' speed drifts), so the ratios take a median."""
    import torch

    from fusedsim.engine import Scorer
    from fusedsim.engine.batch_pairs import DecodedPair, PairRunner, PairTask, metric_columns
    from fusedsim.io.images import read_image
    from fusedsim.metrics.registry import get_metric

    pool = min(64, pairs)
    refs = [read_image(folder / f"r{i}.png") for i in range(0, pool, 1)]
    dists = [read_image(folder / f"d{i}.png") for i in range(pool)]
    scorer = Scorer([metric], device=device)
    scorer.score(refs[0], dists[0])  # warm-up: kernels compiled, caches filled
    runner = PairRunner(scorer, metric_columns([get_metric(metric)]))

    def decoded() -> Iterator[DecodedPair]:
        for i in range(pairs):
            r = (i // per_ref) % pool
            yield DecodedPair(PairTask(i, f"r{r}", f"d{i}"), ref=refs[r], ref_key=f"r{i // per_ref}",
                              dist=dists[i % pool])

    times = []
    for _ in range(runs):
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for outcome in runner.run_all(decoded(), ahead, group):
            assert not outcome.error, outcome.error
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2], times


def table_tasks(table: Path) -> list:
    from fusedsim.cli.pair_table import read_pairs
    from fusedsim.engine.batch_pairs import PairTask, plan

    t = read_pairs(table)
    return plan(PairTask(i, t.image_path(r["ref"]), t.image_path(r["dist"])) for i, r in enumerate(t.rows))


def decode_seconds(table: Path, workers: int, decoder: str) -> tuple[float, float]:
    """Seconds to decode the table, and to its first pair (worker start-up included)."""
    from fusedsim.engine.batch_pairs import decode_ahead, default_prefetch

    tasks = table_tasks(table)
    t0 = time.perf_counter()
    first = 0.0
    for pair in decode_ahead(tasks, workers=workers, prefetch=default_prefetch(workers), mode=decoder):
        assert not pair.error, pair.error
        first = first or time.perf_counter() - t0
    return time.perf_counter() - t0, first


def warm_processes(folder: Path) -> float:
    """Start the decoding processes once (the fork server's first start); seconds to the first pair."""
    return decode_seconds(write_table(folder, 2, 1), 2, "processes")[1]


def decode_scaling(folder: Path, pairs: int) -> list[dict]:
    """Images/s of decoding alone for threads and processes at 1, 2, 4, 8, 16 workers (at most the CPU count)."""
    from fusedsim.engine.decode_workers import plan_jobs

    table = write_table(folder, pairs, 1)
    images = sum(1 for _ in plan_jobs(table_tasks(table)))
    cores = os.cpu_count() or 1
    cold = warm_processes(folder)
    print(f"decode processes: first start in this process {1e3 * cold:.1f} ms to the first pair", flush=True)
    rows = [{"part": "decode-scaling", "decoder": "processes", "workers": 2, "first_pair_s": cold, "cold": True}]
    for workers in [w for w in (1, 2, 4, 8, 16) if w <= cores]:
        for decoder in ("threads", "processes"):
            seconds, first = decode_seconds(table, workers, decoder)
            rows.append({"part": "decode-scaling", "decoder": decoder, "workers": workers, "pairs": pairs,
                         "images": images, "decode_s": seconds, "first_pair_s": first,
                         "images_s": images / seconds})
            print(f"decode {decoder:<9} {workers:>2} workers: {images / seconds:7.1f} images/s  first pair after "
                  f"{1e3 * first:6.1f} ms", flush=True)
    return rows


def e2e_seconds(table: Path, out: Path, metric: str, device: str, workers: int, decoder: str) -> float:
    from fusedsim.cli.main import main

    t0 = time.perf_counter()
    code = main(["batch", str(table), "-o", str(out), "--metric", metric, "--device", device, "--workers",
                 str(workers), "--decoder", decoder, "--overwrite", "--quiet"])
    elapsed = time.perf_counter() - t0
    assert code == 0, f"fusedsim batch failed with {code}"
    return elapsed


def process_seconds(table: Path, out: Path, metric: str, device: str, workers: int, decoder: str) -> float:
    script = Path(sys.executable).parent / "fusedsim"
    cmd = [str(script)] if script.exists() else [sys.executable, "-m", "fusedsim"]
    t0 = time.perf_counter()
    subprocess.run([*cmd, "batch", str(table), "-o", str(out), "--metric", metric, "--device", device,
                    "--workers", str(workers), "--decoder", decoder, "--overwrite", "--quiet"], check=True)
    return time.perf_counter() - t0


def main() -> None:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--engine", choices=("local", "ray"), default="local")
    engine, rest = pre.parse_known_args()
    if engine.engine == "ray":  # the scale-out comparison: local vs Ray on 1 and 2 GPUs, two nodes, cold start
        from bench_ray import main as ray_main

        ray_main(rest)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=("local", "ray"), default="local",
                        help="ray: benchmarks/bench_ray.py with the other options (local vs Ray, cold start)")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--metric", default="ssim,ssimulacra2")
    parser.add_argument("--layouts", default="1,10", help="distorted images per reference, comma-separated")
    parser.add_argument("--workers", type=int, default=None,
                        help="decoding workers (default: the batch command's default for --decoder)")
    parser.add_argument("--decoder", choices=("auto", "threads", "processes"), default="auto",
                        help="decoding in threads or processes, for the decode bound and end to end (auto)")
    parser.add_argument("--decode-only", action="store_true",
                        help="only decoding's images/s for threads and processes at 1..16 workers")
    parser.add_argument("--decode-pairs", type=int, default=200, help="pairs of the --decode-only run (200)")
    parser.add_argument("--ahead", default=None,
                        help="pairs queued beyond the one read back (the batch command's RUN_AHEAD), comma-separated "
                             "to compare (default: the batch command's)")
    parser.add_argument("--group", default=None,
                        help="pairs of one size handed to the scorer together (the batch command's GROUP), "
                             "comma-separated to compare (default: the batch command's)")
    parser.add_argument("--compute-runs", type=int, default=3, help="runs of the compute baseline (median)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "fusedsim-batch"))
    parser.add_argument("--quick", action="store_true", help="24 pairs at 256² (smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.size = 24, 256
    folder = Path(args.dir) / f"{args.size}"
    t0 = time.perf_counter()
    if args.workers is None:
        from fusedsim.engine.batch_pairs import default_workers

        args.workers = default_workers(args.decoder)
    write_images(folder, args.pairs, args.size, args.workers)
    print(f"images ready in {time.perf_counter() - t0:.1f} s: {args.pairs} pairs at {args.size}² in {folder}")
    from fusedsim.engine.batch_pairs import decoder_mode

    if args.decode_only:
        rows = decode_scaling(folder, min(args.pairs, args.decode_pairs))
        path = write_json("batch", {"meta": metadata(args.device), "rows": rows}, os.environ.get("OUT"),
                          smoke_dir() if args.device == "cpu" else Path(__file__).resolve().parent / "results")
        print(f"wrote {path}")
        return
    used = decoder_mode(args.decoder, args.workers)
    if used == "processes":
        warm_processes(folder)  # the decode bound is the steady rate; the whole-process run keeps the start-up
    from fusedsim.engine import batch_pairs

    default_ahead = batch_pairs.RUN_AHEAD
    aheads = [int(x) for x in args.ahead.split(",")] if args.ahead else [default_ahead]
    default_group = batch_pairs.GROUP
    groups = [int(x) for x in args.group.split(",")] if args.group else [default_group]
    rows = []
    for per_ref in (int(x) for x in args.layouts.split(",")):
        table = write_table(folder, args.pairs, per_ref)
        dec, first = decode_seconds(table, args.workers, args.decoder)
        for metric, ahead, group in ((m, a, g) for m in args.metric.split(",") for a in aheads for g in groups):
            # the batch command's defaults, for the end-to-end runs in this process
            batch_pairs.RUN_AHEAD, batch_pairs.GROUP = ahead, group
            comp, comp_runs = compute_seconds(folder, args.pairs, per_ref, metric, args.device, ahead,
                                              args.compute_runs, group)
            e2e = e2e_seconds(table, folder / "out.csv", metric, args.device, args.workers, args.decoder)
            proc = (process_seconds(table, folder / "out.csv", metric, args.device, args.workers, args.decoder)
                    if metric == "ssim" and per_ref == 1 and ahead == default_ahead and group == default_group
                    else None)
            row = {"layout": per_ref, "metric": metric, "pairs": args.pairs, "size": args.size, "ahead": ahead,
                   "group": group,
                   "workers": args.workers, "decoder": args.decoder, "decoder_used": used,
                   "decode_first_pair_s": first, "compute_s": comp, "compute_runs_s": comp_runs,
                   "decode_s": dec, "e2e_s": e2e,
                   "process_s": proc,
                   "compute_pairs_s": args.pairs / comp, "decode_pairs_s": args.pairs / dec,
                   "e2e_pairs_s": args.pairs / e2e, "e2e_over_compute": e2e / comp,
                   "bound_s": max(comp, dec), "e2e_over_bound": e2e / max(comp, dec)}
            rows.append(row)
            print(f"{per_ref:>2}/ref {metric:<12} ahead {ahead} group {group} {used:<9} "
                  f"compute {row['compute_pairs_s']:8.1f} pairs/s  decode "
                  f"{row['decode_pairs_s']:8.1f} pairs/s  end-to-end {row['e2e_pairs_s']:8.1f} pairs/s  "
                  f"e2e/compute {row['e2e_over_compute']:.2f}  e2e/bound {row['e2e_over_bound']:.2f}"
                  + (f"  whole process {proc:.1f} s" if proc else ""), flush=True)
    payload = {"meta": metadata(args.device), "rows": rows}
    path = write_json("batch", payload, os.environ.get("OUT"), smoke_dir() if args.device == "cpu" else
                      Path(__file__).resolve().parent / "results")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
