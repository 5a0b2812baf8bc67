"""Why a Ray actor scores slower per GPU than the local engine (issue 36): the same scoring worker in a plain process
and as a Ray actor, with its scoring thread's CPU time measured (a probe, not a benchmark).

A py-spy profile showed the actor's scoring thread spending 20-33 % more samples per pair in the same functions as
the local engine's main thread, with the host's CPUs mostly idle. This probe runs
:class:`~fusedsim.engine.ray_actor.ScoringWorker` (one scoring thread over a stream of decoded chunks, as the Ray
engine does) on the same chunks:

* ``plain``: in this process; chunks decoded by a pool of processes (:func:`~fusedsim.engine.ray_wire.decode_chunk`)
  and handed over pickled;
* ``actor``: as a Ray actor of one GPU, chunks decoded by one-CPU Ray tasks on the same node and passed through the
  object store (what ``fusedsim batch --engine ray`` does);
* ``actor-predecoded``: the same actor, every chunk decoded beforehand by the driver and put in the object store
  (no decoding runs while it scores: what is left is the actor's process and the object store's data path).

Per variant: pairs/s from the first chunk's result to the last, and the scoring thread's CPU seconds per pair
(``pthread_getcpuclockid``), its garbage collections (count, seconds) and the process's thread count. Equal CPU per
pair but a longer wall per pair: the thread waits (the GIL, the scheduler); more CPU per pair: it executes slower
(collections, caches); equal both: the gap is elsewhere (decoding, start-up).

Run on a GPU machine: ``PYTHONPATH=src python benchmarks/probe_ray_actor.py [--pairs 4000] [--pool 500]
[--metric ...] [--variants plain,actor,actor-predecoded]``; ``--device cpu --quick`` is a smoke run. JSON to
``benchmarks/results/`` (and ``$OUT``).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, smoke_dir, write_json  # noqa: E402
from bench_batch import write_images, write_table  # noqa: E402

from fusedsim.engine.ray_actor import ScoringWorker  # noqa: E402

PERCEPTUAL = "butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim"


class ProbedWorker(ScoringWorker):
    """A scoring worker that reports its scoring thread's CPU time and the process's garbage collections."""

    def __init__(self, *args, **kwargs) -> None:
        self._ident: int | None = None
        self._gc = {"count": 0, "seconds": 0.0}
        self._gc_start = 0.0
        gc.callbacks.append(self._on_gc)
        super().__init__(*args, **kwargs)

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self._gc["count"] += 1
            self._gc["seconds"] += time.perf_counter() - self._gc_start

    def _loop(self) -> None:
        self._ident = threading.get_ident()
        super()._loop()

    def probe(self) -> dict:
        """The scoring thread's CPU seconds so far, the collections, the live objects and the process's threads."""
        cpu = time.clock_gettime(time.pthread_getcpuclockid(self._ident)) if self._ident else None
        return {"thread_cpu_s": cpu, "gc_count": self._gc["count"], "gc_s": self._gc["seconds"],
                "objects": len(gc.get_objects()), "threads": threading.active_count(),
                "switch_interval_s": sys.getswitchinterval()}


def _tasks(table: Path):
    import csv

    from fusedsim.engine.batch_pairs import PairTask

    with open(table, newline="") as f:
        rows = list(csv.DictReader(f))
    return [PairTask(i, str(table.parent / r["ref"]), str(table.parent / r["dist"])) for i, r in enumerate(rows)]


def _measure(score_chunk, chunks, probe) -> dict:
    """Score every chunk (``score_chunk(i)`` returns a future-like with ``result()``), keeping up to 16 in flight."""
    start_probe = probe()
    start = time.perf_counter()
    pending, done, first = [], 0, None
    for i in range(len(chunks)):
        pending.append(score_chunk(i))
        if len(pending) >= 16:
            done += len(pending.pop(0).result().outcomes)
            first = first or time.perf_counter()
    for p in pending:
        done += len(p.result().outcomes)
        first = first or time.perf_counter()
    end = time.perf_counter()
    end_probe = probe()
    cpu = (end_probe["thread_cpu_s"] or 0) - (start_probe["thread_cpu_s"] or 0)
    return {"pairs": done, "seconds": end - start, "pairs_s": done / (end - start),
            "thread_cpu_ms_per_pair": 1000 * cpu / max(done, 1), "wall_ms_per_pair": 1000 * (end - start) / max(done, 1),
            "gc_count": end_probe["gc_count"] - start_probe["gc_count"],
            "gc_s": end_probe["gc_s"] - start_probe["gc_s"], "objects": end_probe["objects"],
            "threads": end_probe["threads"]}


def run_plain(chunks, metrics, device, workers) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from fusedsim.engine.ray_wire import decode_chunk

    worker = ProbedWorker(metrics, metrics, device, "auto")
    with ProcessPoolExecutor(workers) as decoders, ThreadPoolExecutor(16) as callers:
        decoded = [decoders.submit(decode_chunk, c) for c in chunks]
        worker.score(chunks[0], decoded[0].result())  # kernels loaded, caches filled: not measured
        rest = chunks[1:]
        return _measure(lambda i: callers.submit(lambda: worker.score(rest[i], decoded[i + 1].result())), rest,
                        worker.probe)


def run_actor(chunks, metrics, device, predecoded: bool = False) -> dict:
    import ray

    from fusedsim.engine.ray_wire import decode_chunk

    ray.init(include_dashboard=False, logging_level="ERROR")
    if ProbedWorker.__module__ != "__main__":  # imported: the workers cannot import this script by name
        ray.cloudpickle.register_pickle_by_value(sys.modules[ProbedWorker.__module__])
    try:
        gpu = device != "cpu"
        actor = ray.remote(ProbedWorker).options(num_gpus=1 if gpu else 0, num_cpus=1, max_concurrency=20).remote(
            metrics, metrics, "cuda" if gpu else "cpu", "auto")
        decode = ray.remote(num_cpus=1)(decode_chunk)
        if predecoded:
            stored = [ray.put(decode_chunk(c)) for c in chunks]
            source = lambda i: stored[i]  # noqa: E731
        else:
            source = lambda i: decode.remote(chunks[i])  # noqa: E731
        ray.get(actor.score.remote(chunks[0], source(0)))  # warm, not measured
        rest = chunks[1:]

        class Ref:
            def __init__(self, ref):
                self.ref = ref

            def result(self):
                return ray.get(self.ref)

        return _measure(lambda i: Ref(actor.score.remote(rest[i], source(i + 1))), rest,
                        lambda: ray.get(actor.probe.remote()))
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--pool", type=int, default=500)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--metric", default=PERCEPTUAL)
    parser.add_argument("--variants", default="plain,actor,actor-predecoded")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dir", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "fusedsim-batch"))
    parser.add_argument("--quick", action="store_true", help="48 pairs at 128² (smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.pairs, args.pool, args.size = 48, 16, 128
    from fusedsim.engine.ray_batch import CHUNK, chunks

    folder = Path(args.dir) / f"{args.size}"
    pool = min(args.pool, args.pairs)
    write_images(folder, pool, args.size, os.cpu_count() or 2)
    work = chunks(_tasks(write_table(folder, args.pairs, 1, pool)), CHUNK)
    metrics = args.metric.split(",")
    workers = max(1, (os.cpu_count() or 2) - 1)
    rows = []
    for variant in args.variants.split(","):
        if variant == "plain":
            row = run_plain(work, metrics, args.device, workers)
        elif variant in ("actor", "actor-predecoded"):
            row = run_actor(work, metrics, args.device, predecoded=variant == "actor-predecoded")
        else:
            raise SystemExit(f"--variants: {variant!r} is not plain, actor or actor-predecoded")
        rows.append({"variant": variant, **row})
        print(f"{variant:<16} {row['pairs_s']:8.1f} pairs/s  wall {row['wall_ms_per_pair']:.2f} ms/pair  scoring "
              f"thread CPU {row['thread_cpu_ms_per_pair']:.2f} ms/pair  gc {row['gc_count']} ({row['gc_s']:.2f} s)  "
              f"objects {row['objects']}  threads {row['threads']}", flush=True)
    gpu = args.device != "cpu"
    path = write_json("probe-ray-actor", {"meta": metadata(args.device) | {"command": " ".join(sys.argv)},
                                          "rows": rows}, os.environ.get("OUT"),
                      smoke_dir() if not gpu else Path(__file__).resolve().parent / "results")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
