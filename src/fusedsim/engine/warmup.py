"""Compile what a metric set needs before the first real pair: one process per metric, in parallel.

A fresh machine (a new cloud node, a container) has an empty Triton cache: ``fusedsim batch`` with the five
perceptual metrics spent about 90 s compiling kernels one after the other before its first pair. Triton compiles
in the thread that launches, and a process compiles one kernel at a time, so :func:`warmup` scores synthetic pairs
in one process per metric (``jobs`` at once): every kernel a batch run launches is compiled and written to
Triton's on-disk cache (``TRITON_CACHE_DIR``, default ``~/.triton/cache``), where later processes load it in
milliseconds. Each process runs what ``fusedsim batch`` runs (:class:`~fusedsim.engine.batch_pairs.PairRunner`):
one pair, a group against a shared reference and a group of pairs with their own references (stacked calls
specialise kernels on other sizes), at the size asked for.

A cache directory on a shared file system, set as ``TRITON_CACHE_DIR`` on every node, is filled once; the Ray
engine passes the driver's ``TRITON_CACHE_DIR`` on to its workers (:data:`~fusedsim.engine.ray_batch.
FORWARDED_ENV`). Without a GPU the metrics' CPU paths run (numba compiles what it caches).

The parent process never touches CUDA: the workers are started with ``spawn`` (a CUDA context does not survive
``fork``).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["WarmupResult", "warm_metric", "warmup"]


@dataclass(frozen=True)
class WarmupResult:
    """One metric's warm-up: its seconds (process start excluded), the device it ran on, and its error
    (``""`` when it ran)."""

    metric: str
    seconds: float
    device: str
    error: str = ""


def _pairs(height: int, width: int, count: int, shared: bool, seed: int) -> list[Any]:
    """``count`` decoded pairs of 8-bit RGB noise (kernels do not depend on the values)."""
    import numpy as np
    import torch

    from fusedsim.engine.batch_pairs import DecodedPair, PairTask
    from fusedsim.io.images import ImageData

    rng = np.random.default_rng(seed)

    def image(name: str) -> ImageData:
        pixels = torch.from_numpy(rng.integers(0, 256, (1, 3, height, width), dtype=np.uint8))
        return ImageData(path=Path(name), pixels=pixels, bit_depth=8, channels="RGB")

    ref = image("warmup-ref")
    out = []
    for i in range(count):
        own = ref if shared else image(f"warmup-ref{i}")
        key = "shared" if shared else f"own{seed}-{i}"
        out.append(DecodedPair(PairTask(i, str(own.path), f"warmup-dist{i}"), ref=own, ref_key=key,
                               dist=image(f"warmup-dist{i}")))
    return out


def warm_metric(metric: str, device: str = "auto", height: int = 1024, width: int = 1024,
                params: dict[str, Any] | None = None) -> WarmupResult:
    """Score synthetic ``height`` x ``width`` pairs with ``metric`` as ``fusedsim batch`` would (one pair, a group
    against one reference, a group of own references), in this process. Errors are returned, not raised."""
    start = time.perf_counter()
    try:
        from fusedsim.engine.batch_pairs import GROUP, PairRunner
        from fusedsim.engine.scorer import Scorer

        scorer = Scorer([metric], device=device, params={metric: params} if params else None)
        runner = PairRunner(scorer, [metric])
        batches = [_pairs(height, width, 1, True, 0)]
        if scorer.scores_groups:
            batches += [_pairs(height, width, GROUP, True, 1), _pairs(height, width, GROUP, False, 2)]
        for pairs in batches:
            for outcome in runner.run_all(pairs):
                if outcome.error:
                    return WarmupResult(metric, time.perf_counter() - start, str(scorer.device), outcome.error)
        if scorer.device.type == "cuda":
            import torch

            torch.cuda.synchronize()
        return WarmupResult(metric, time.perf_counter() - start, str(scorer.device))
    except Exception as exc:  # one metric's failure must not hide the others' results
        return WarmupResult(metric, time.perf_counter() - start, device, f"{type(exc).__name__}: {exc}")


def warmup(metrics: Sequence[str], device: str = "auto", height: int = 1024, width: int = 1024,
           jobs: int | None = None, params: dict[str, dict[str, Any]] | None = None) -> list[WarmupResult]:
    """:func:`warm_metric` for every metric of ``metrics``, each in its own process, ``jobs`` at a time (default:
    one per metric, at most the CPU count). Results in the order of ``metrics``."""
    if not metrics:
        raise ValueError("metrics must name at least one metric")
    if height < 1 or width < 1:
        raise ValueError(f"size must be positive; got {width}x{height}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    jobs = jobs or max(1, min(len(metrics), cores))
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1; got {jobs}")
    params = params or {}
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(warm_metric, m, device, height, width, params.get(m)) for m in metrics]
        return [f.result() for f in futures]
