"""Ray Data against the Ray engine's own actors (issue 36: "consider the idiomatic design ... measure both").

The same work as ``bench_ray.py`` (a pair table of 1024² PNGs cycling through a pool, the five perceptual metrics),
scored by a Ray Data pipeline written the way Ray Data's documentation writes batch inference:

* ``ray.data.from_items`` of the table's rows in the engine's plan order (equal references consecutive);
* ``map_batches(decode, batch_size=8, num_cpus=1)``: CPU tasks decode a batch of pairs (the engine's decoders:
  :func:`~fusedsim.engine.batch_pairs.read_reference`, :func:`~fusedsim.engine.batch_pairs.read_distorted`) into
  tensor columns (the pixels in their decoded memory order) plus each reference's pixel hash;
* ``map_batches(Score, batch_size=B, num_gpus=1, concurrency=G)``: one actor per GPU holds a
  :class:`~fusedsim.engine.Scorer` and scores each batch with :class:`~fusedsim.engine.batch_pairs.PairRunner`
  (groups of 8 and run-ahead inside a batch; each batch ends by reading its values back);
* the driver iterates the results (streaming execution, Ray Data's back-pressure).

Each run is a fresh process (``python bench_ray_data.py --child ...``), timed as ``fusedsim batch`` is: pairs/s
from the first result to the last (Ray Data starts its actors lazily, so their start is inside the run: the rate
from the start of execution is printed too), and the process's wall time. Compare with ``bench_ray.py``'s ``rayN``
rows on the same machine. Ray Data needs pandas (``pip install pandas``: a benchmark dependency, not fusedsim's).

Run: ``PYTHONPATH=src python benchmarks/bench_ray_data.py [--gpus 1,2,4] [--pairs-per-gpu 4000] [--pool 1000]
[--batch 64] [--metric ...] [--dir /tmp/fusedsim-batch]``; without a GPU ``--device cpu --quick`` is a smoke run
(CPU actors, numbers meaningless). JSON to ``benchmarks/results/`` (and ``$OUT``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, smoke_dir, write_json  # noqa: E402
from bench_batch import write_images, write_table  # noqa: E402

PERCEPTUAL = "butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim"


def decode(batch: dict) -> dict:
    """A batch of table rows -> decoded pixels (tensor columns in the decoders' memory order) and reference keys."""
    import numpy as np

    from fusedsim.engine.batch_pairs import memory_order, read_distorted, read_reference

    refs, dists, keys, layouts, depths, channels = [], [], [], [], [], []
    last_path, last = None, None
    for ref_path, dist_path in zip(batch["ref"], batch["dist"]):
        if ref_path != last_path:  # a reference once per run of rows that name it, as the engine's chunks do
            last_path, last = ref_path, read_reference(str(ref_path))
        image, key = last
        ref_pixels, layout = memory_order(image.pixels)
        dist_pixels, _ = memory_order(read_distorted(str(dist_path)).pixels)
        refs.append(ref_pixels.numpy())
        dists.append(dist_pixels.numpy())
        keys.append(key)
        layouts.append(layout)
        depths.append(image.bit_depth)
        channels.append(image.channels)
    return {"index": np.asarray(batch["index"]), "ref_path": np.asarray(batch["ref"]),
            "dist_path": np.asarray(batch["dist"]), "ref_key": np.asarray(keys), "layout": np.asarray(layouts),
            "bit_depth": np.asarray(depths), "channels": np.asarray(channels),
            "ref_pixels": np.stack(refs), "dist_pixels": np.stack(dists)}


class Score:
    """One scoring actor: a Scorer and a PairRunner over each batch."""

    def __init__(self, metrics: list[str], device: str) -> None:
        from fusedsim.engine import Scorer
        from fusedsim.engine.batch_pairs import PairRunner, metric_columns
        from fusedsim.metrics.registry import get_metric

        self.columns = metric_columns([get_metric(m) for m in metrics])
        self.runner = PairRunner(Scorer(metrics, device=device), self.columns)

    def __call__(self, batch: dict) -> dict:
        import warnings

        import numpy as np
        import torch

        from fusedsim.engine.batch_pairs import DecodedPair, PairTask, from_memory_order
        from fusedsim.io.images import ImageData

        def image(i: int, path: str, pixels: np.ndarray) -> ImageData:
            """Row ``i``'s image from its (1, H, W, C) or (1, C, H, W) pixels in their memory order."""
            layout = str(batch["layout"][i])
            with warnings.catch_warnings():  # Ray Data's batches are read-only, as the decoders' pixels are
                warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
                flat = torch.from_numpy(pixels)
            _, a, b, c = pixels.shape
            shape = (1, c, a, b) if layout == "hwc" else (1, a, b, c)
            return ImageData(path=Path(path), pixels=from_memory_order(flat, shape, layout),
                             bit_depth=int(batch["bit_depth"][i]), channels=str(batch["channels"][i]))

        pairs, ref, ref_key = [], None, None
        for i in range(len(batch["index"])):
            if batch["ref_key"][i] != ref_key:  # one reference object per run of equal references
                ref_key = batch["ref_key"][i]
                ref = image(i, batch["ref_path"][i], batch["ref_pixels"][i])
            task = PairTask(int(batch["index"][i]), str(batch["ref_path"][i]), str(batch["dist_path"][i]))
            pairs.append(DecodedPair(task, ref=ref, ref_key=str(ref_key),
                                     dist=image(i, task.dist, batch["dist_pixels"][i])))
        out: dict[str, list] = {"index": [], "error": [], **{c: [] for c in self.columns}}
        for outcome in self.runner.run_all(iter(pairs)):
            out["index"].append(outcome.index)
            out["error"].append(outcome.error)
            for c in self.columns:
                out[c].append(outcome.values.get(c, float("nan")))
        return {k: np.asarray(v) for k, v in out.items()}


def child(table: Path, metrics: list[str], gpus: int, device: str, batch: int) -> dict:
    """One run in this process: the pipeline over ``table``; its rates."""
    import csv

    import ray

    from fusedsim.engine.batch_pairs import PairTask, plan

    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    ordered = plan([PairTask(i, r["ref"] if os.path.isabs(r["ref"]) else str(table.parent / r["ref"]),
                             r["dist"] if os.path.isabs(r["dist"]) else str(table.parent / r["dist"]))
                    for i, r in enumerate(rows)])
    t0 = time.perf_counter()
    ray.init(include_dashboard=False, logging_level="ERROR")
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = False
    ctx.enable_progress_bars = False
    ds = ray.data.from_items([{"index": t.index, "ref": t.ref, "dist": t.dist} for t in ordered],
                             override_num_blocks=max(1, len(ordered) // 8))
    ds = ds.map_batches(decode, batch_size=8, num_cpus=1)
    actors = gpus if device == "cuda" else max(1, gpus)
    ds = ds.map_batches(Score, fn_constructor_args=(metrics, device), batch_size=batch,
                        num_gpus=1 if device == "cuda" else 0, concurrency=actors)
    start = time.perf_counter()
    first, done, failed = None, 0, 0
    for out in ds.iter_batches(batch_size=None, batch_format="numpy"):
        first = first or time.perf_counter()
        done += len(out["index"])
        failed += int(sum(1 for e in out["error"] if e))
    end = time.perf_counter()
    ray.shutdown()
    return {"pairs": done, "failed": failed, "pairs_s": (done - 1) / max(end - first, 1e-9) if first else None,
            "pairs_s_from_start": done / (end - start), "first_result_s": (first - t0) if first else None,
            "init_s": start - t0}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="1,2")
    parser.add_argument("--pairs-per-gpu", type=int, default=4000)
    parser.add_argument("--pool", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=64, help="pairs per call of a scoring actor (8 groups of 8)")
    parser.add_argument("--metric", default=PERCEPTUAL)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "fusedsim-batch"))
    parser.add_argument("--quick", action="store_true", help="16 pairs a GPU at 128² (smoke run)")
    parser.add_argument("--child", nargs=3, metavar=("TABLE", "GPUS", "BATCH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    metrics = args.metric.split(",")
    if args.child:
        table, gpus, batch = args.child
        print(json.dumps(child(Path(table), metrics, int(gpus), args.device, int(batch))))
        return
    if args.quick:
        args.pairs_per_gpu, args.size, args.pool = 16, 128, 16
    folder = Path(args.dir) / f"{args.size}"
    pool = max(1, min(args.pool, args.pairs_per_gpu))
    write_images(folder, pool, args.size, os.cpu_count() or 2)
    rows = []
    for gpus in (int(g) for g in args.gpus.split(",")):
        table = write_table(folder, args.pairs_per_gpu * gpus, 1, pool)
        env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
        if args.device == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, range(gpus)))
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, __file__, "--child", str(table), str(gpus), str(args.batch),
                               "--metric", args.metric, "--device", args.device], env=env, capture_output=True,
                              text=True)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"the Ray Data run on {gpus} GPU(s) failed:\n{proc.stderr[-3000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1]) | {"gpus": gpus, "wall_s": wall}
        rows.append(result)
        print(f"ray-data {gpus} GPU(s): {result['pairs_s']:.1f} pairs/s first result to last "
              f"({result['pairs_s_from_start']:.1f} from execution start), {result['pairs']} pairs, "
              f"{result['failed']} failed, first result {result['first_result_s']:.1f} s, process {wall:.1f} s",
              flush=True)
    gpu = args.device == "cuda"
    path = write_json("ray-data", {"meta": metadata(args.device) | {"command": " ".join(sys.argv)}, "rows": rows},
                      os.environ.get("OUT"), smoke_dir() if not gpu else Path(__file__).resolve().parent / "results")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
