"""How a fresh machine best fills its Triton cache: warm-up strategies timed on empty caches, on one GPU.

Strategies (each on its own empty ``TRITON_CACHE_DIR``, as a fresh machine):

* ``single``: one process compiles one (metric, phase) — a metric's first pair — alone: its wall and CPU seconds
  say whether one compilation uses more than one core (then parallel processes gain less than their count).
* ``phase``: one process per (metric, phase), every process compiling what it launches (the scheme before
  shared compilations).
  This is what :func:`fusedsim.engine.warmup.warmup` does on a GPU.
* ``phase-claims``: the same processes, each compilation claimed by one of them (:func:`claim_hook`: the first
  process to reach a specialisation creates a file named after it; the others skip that launch through Triton's
  ``jit_cache_hook``); a process stops after its own (metric, phase).
* ``shared``: one process per core, each running every (metric, phase) from a different one, compilations
  claimed, so a metric's kernels spread over processes.

A skipped launch leaves its output unwritten, so the processes that skip compute on stale memory: measured on 4x
H200, a stale index reached a torch indexing op (a device-side assert that ends the process's CUDA context) and
the warm-up lost its later phases. The two claiming strategies are measured here, not used.

Per strategy: wall seconds (pool start to last result), the processes' CPU seconds (``RUSAGE_CHILDREN``: Triton's
compiler and ``ptxas`` included), and per process its seconds, compilations and compile seconds (Triton's JIT
hooks).

Run on a GPU machine: ``PYTHONPATH=src python benchmarks/bench_warmup.py [--metric
butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim,ssim] [--size 1024] [--strategies single,phase,phase-claims,shared]``;
JSON to ``benchmarks/results/`` (and ``$OUT``).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import metadata, write_json  # noqa: E402

STRATEGIES = ("single", "phase", "phase-claims", "shared")


def claim_hook(folder: Path):
    """A ``jit_cache_hook`` that lets this process compile a specialisation only when it is the first to claim it
    (creating ``folder/<hash>`` exclusively); True (skip the compilation and the launch) otherwise."""
    import hashlib

    def hook(*, key, fn, **_):
        name = hashlib.sha1(f"{fn.module}.{fn.name}|{key!r}".encode()).hexdigest()
        try:
            os.close(os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return True
        return False

    return hook


def _worker(items: list[tuple[str, str]], size: int, claims: str | None) -> dict:
    """Run ``items`` in this process (claiming in ``claims`` when given); its timings and compilations."""
    from triton import knobs

    from fusedsim.engine.warmup import warm_metric

    started: dict[str, float] = {}
    compiled: list[float] = []
    skip = claim_hook(Path(claims)) if claims else None

    def before(*, key, fn, **kwargs):
        if skip is not None and skip(key=key, fn=fn):
            return True
        started[f"{fn.name}{key!r}"] = time.perf_counter()
        return False

    def after(*, key, fn, **kwargs):
        start = started.pop(f"{fn.name}{key!r}", None)
        if start is not None:
            compiled.append(time.perf_counter() - start)
        return False

    knobs.runtime.jit_cache_hook, knobs.runtime.jit_post_compile_hook = before, after
    t0 = time.perf_counter()
    runs = []
    for metric, phase in items:
        r = warm_metric(metric, "cuda", size, size, None, phase)  # markers land in this strategy's own cache
        runs.append({"metric": metric, "phase": phase, "seconds": round(r.seconds, 2), "error": r.error[:200]})
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"pid": os.getpid(), "seconds": round(time.perf_counter() - t0, 2), "runs": runs,
            "compilations": len(compiled), "compile_s": round(sum(compiled), 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime, 2)}


def run_strategy(name: str, work: list[tuple[str, str]], size: int, cores: int) -> dict:
    """One strategy on a fresh empty kernel cache."""
    cache = tempfile.mkdtemp(prefix=f"triton-{name}-")
    os.environ["TRITON_CACHE_DIR"] = cache  # the spawned workers inherit it
    claims = tempfile.mkdtemp(prefix="claims-") if name in ("phase-claims", "shared") else None
    if name == "single":
        jobs = [work[:1]]
    elif name in ("phase", "phase-claims"):
        jobs = [[item] for item in work]
    else:
        jobs = [work[i % len(work):] + work[:i % len(work)] for i in range(cores)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        procs = [f.result() for f in [pool.submit(_worker, j, size, claims) for j in jobs]]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    cubins = sum(1 for _ in Path(cache).rglob("*.cubin"))
    row = {"strategy": name, "processes": len(jobs), "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
           "cubins": cubins, "compilations": sum(p["compilations"] for p in procs),
           "compile_s": round(sum(p["compile_s"] for p in procs), 2),
           "slowest_process_s": max(p["seconds"] for p in procs),
           "errors": sorted({r["error"] for p in procs for r in p["runs"] if r["error"]})[:5], "per_process": procs}
    print(f"{name:>13}: {len(jobs):2d} processes, wall {wall:6.1f} s, CPU {cpu:7.1f} s, {row['compilations']} "
          f"compilations ({row['compile_s']:.1f} s), {cubins} cubins, slowest process {row['slowest_process_s']} s, "
          f"errors {len(row['errors'])}", flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metric", default="butteraugli,ssimulacra2,dssim,cvvdp,iw-ssim,ssim")
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    from fusedsim.engine.warmup import _phases

    metrics = args.metric.split(",")
    work = [(m, p) for m in metrics for p in _phases(m, "cuda")]
    cores = len(os.sched_getaffinity(0))
    rows = []
    for name in args.strategies.split(","):
        if name not in STRATEGIES:
            raise SystemExit(f"--strategies: {name!r} is not one of {', '.join(STRATEGIES)}")
        rows.append(run_strategy(name, work, args.size, cores))
    write_json("warmup", {"meta": metadata() | {"command": " ".join(sys.argv), "size": args.size,
                                                "metrics": metrics, "cores": cores}, "rows": rows},
               os.environ.get("OUT"))


if __name__ == "__main__":
    main()
