"""Compile what a metric set needs before the first real pair: one process per metric, in parallel.

A fresh machine (a new cloud node, a container) has an empty Triton cache: ``fusedsim batch`` with the five
perceptual metrics spent about 90 s compiling kernels one after the other before its first pair. Triton compiles
in the thread that launches, and a process compiles one kernel at a time, so :func:`warmup` scores synthetic pairs
in one process per metric (``jobs`` at once): every kernel a batch run launches is compiled and written to
Triton's on-disk cache (``TRITON_CACHE_DIR``, default ``~/.triton/cache``), where later processes load it in
milliseconds. Each process runs what ``fusedsim batch`` runs (:class:`~fusedsim.engine.batch_pairs.PairRunner`):
one pair, a group against a shared reference and a group of pairs with their own references (stacked calls
specialise kernels on other sizes), at the size asked for.

The three kinds of calls compile mostly different specialisations (a stacked call of 8 images is another
kernel than a call of 1), so a perceptual metric's three phases run in processes of their own (:data:`PHASES`):
the wall time is the slowest phase's, not the metric's sum. A phase that succeeds on a GPU leaves a marker in
the cache directory (:func:`marker_path`), so ``fusedsim batch`` knows which metrics a fresh cache lacks and
compiles them this way before scoring (:func:`cold_metrics`; its ``--warmup never`` does not).

A metric's first pair launches its kernels one after another, so a phase compiles them on one core (the slowest,
Butteraugli's first pair, ~17 s of compiling). Where the package's manifest recorded a phase's compilations at this
size (:mod:`~fusedsim.engine.kernel_specs`), :func:`warmup` compiles them without running the phase: each
specialisation is a task of its own, longest first, over all the processes.

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

__all__ = ["MARKER_FOLDER", "PHASES", "WarmupResult", "cold_metrics", "gpu_jobs", "leave_markers", "marker_path",
           "metric_phases", "triton_cache_dir", "warm_metric", "warmup"]

MARKER_FOLDER = "fusedsim-warm"  # the markers' folder inside a Triton cache folder

#: the calls a batch makes, each warmed in a process of its own: one pair, a group of pairs against one shared
#: reference, a group of pairs with their own references (the last two for metrics that score groups)
PHASES = ("one", "shared", "own")


@dataclass(frozen=True)
class WarmupResult:
    """One metric's warm-up: its seconds (process start excluded), the device it ran on, its error (``""`` when it
    ran), and whether every phase came compiled from an archive (``precompiled``)."""

    metric: str
    seconds: float
    device: str
    error: str = ""
    precompiled: bool = False


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


def triton_cache_dir() -> Path:
    """Triton's on-disk kernel cache: ``TRITON_CACHE_DIR``, else ``~/.triton/cache``."""
    return Path(os.environ.get("TRITON_CACHE_DIR") or Path.home() / ".triton" / "cache")


def marker_path(metric: str, device: str, height: int, width: int, params: dict[str, Any] | None = None,
                phase: str = "all") -> Path:
    """The file that says ``metric``'s ``phase`` ran at this size on a ``device`` type with this Triton cache,
    fusedsim, Triton and torch (a new version of any compiles anew). The GPU model is not part of it: a cache
    shared by nodes of several models compiles what a model lacks in the run itself, as without a marker."""
    import hashlib
    import json

    import torch
    import triton

    import fusedsim

    key = json.dumps([fusedsim.__version__, triton.__version__, torch.__version__, device.split(":")[0], metric,
                      params or {}, height, width, phase], sort_keys=True, default=str)
    name = f"{metric}-{hashlib.sha256(key.encode()).hexdigest()[:24]}-{phase}"
    return triton_cache_dir() / MARKER_FOLDER / name


def leave_markers(metric: str, height: int, width: int, params: dict[str, Any] | None,
                  phases: Sequence[str]) -> None:
    """The markers of ``metric``'s ``phases`` that ran on a GPU. A cache folder that cannot take them (read-only,
    full) loses only the hint: the kernels are compiled all the same, and a later batch warms up again."""
    for phase in phases:
        marker = marker_path(metric, "cuda", height, width, params, phase)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError:
            return


def metric_phases(metric: str, device: str) -> tuple[str, ...]:
    """The phases ``metric`` runs: all three where it scores groups on ``device`` (``auto``: the GPU when there is
    one, as the Scorer chooses), else ``one``."""
    import torch

    from fusedsim.engine.scorer import GROUP_DEVICES
    from fusedsim.metrics.registry import get_metric

    spec = get_metric(metric)
    kind = device.split(":")[0]
    if kind == "auto":
        kind = "cuda" if torch.cuda.is_available() else "cpu"
    groups = spec.kind == "srgb" and spec.cached_reference and kind in GROUP_DEVICES
    return PHASES if groups else PHASES[:1]


def cold_metrics(metrics: Sequence[str], device: str, height: int, width: int,
                 params: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """The metrics of ``metrics`` with a phase that has no marker for this size and ``device`` type."""
    params = params or {}
    return [m for m in metrics
            if not all(marker_path(m, device, height, width, params.get(m), phase).exists()
                       for phase in metric_phases(m, device))]


#: a warm-up process's own device memory beside its pairs (CUDA context, kernels, allocator slack)
PROCESS_OVERHEAD_BYTES = 1 << 30


def gpu_jobs(metrics: Sequence[str], height: int, width: int, free_bytes: int) -> int:
    """Warm-up processes that fit ``free_bytes`` of device memory at once: each holds a group of the largest
    working set among ``metrics`` (``GROUP`` pairs of ``height`` x ``width``) and :data:`PROCESS_OVERHEAD_BYTES`;
    at least one (a process that runs out of memory reports it, and the batch then compiles as it goes)."""
    from fusedsim.engine.batch_pairs import GROUP
    from fusedsim.metrics.registry import get_metric

    largest = max(get_metric(m).working_set_bytes(height, width, 3) for m in metrics)
    return max(1, free_bytes // (GROUP * largest + PROCESS_OVERHEAD_BYTES))


def warm_metric(metric: str, device: str = "auto", height: int = 1024, width: int = 1024,
                params: dict[str, Any] | None = None, phase: str | None = None) -> WarmupResult:
    """Score synthetic ``height`` x ``width`` pairs with ``metric`` as ``fusedsim batch`` would (one pair, a group
    against one reference, a group of own references; only ``phase`` of :data:`PHASES` when given), in this
    process. Errors are returned, not raised. On a GPU each phase that ran leaves its marker."""
    if phase is not None and phase not in PHASES:
        raise ValueError(f"phase must be one of {', '.join(PHASES)}; got {phase!r}")
    start = time.perf_counter()
    try:
        from fusedsim.engine.batch_pairs import GROUP, PairRunner
        from fusedsim.engine.scorer import Scorer

        scorer = Scorer([metric], device=device, params={metric: params} if params else None)
        runner = PairRunner(scorer, [metric])
        calls = {"one": lambda: _pairs(height, width, 1, True, 0)}
        if scorer.scores_groups:
            calls |= {"shared": lambda: _pairs(height, width, GROUP, True, 1),
                      "own": lambda: _pairs(height, width, GROUP, False, 2)}
        run = [p for p in calls if phase in (None, p)]
        for name in run:
            for outcome in runner.run_all(calls[name]()):
                if outcome.error:
                    return WarmupResult(metric, time.perf_counter() - start, str(scorer.device), outcome.error)
        if scorer.device.type == "cuda":
            import torch

            torch.cuda.synchronize()
            leave_markers(metric, height, width, params, run)
        return WarmupResult(metric, time.perf_counter() - start, str(scorer.device))
    except Exception as exc:  # one metric's failure must not hide the others' results
        return WarmupResult(metric, time.perf_counter() - start, device, f"{type(exc).__name__}: {exc}")


def _archived_runs(manifest: dict[str, Any] | None) -> frozenset[str]:
    """The runs of ``manifest`` whose kernels the package's archives (installed into the cache here) hold compiled
    for this machine; none without a manifest. An archive that cannot be read is reported and skipped: the
    kernels are then compiled."""
    if not manifest:
        return frozenset()
    import sys

    from fusedsim.engine.kernel_archive import install_archives, ready_runs

    try:
        return ready_runs(install_archives(triton_cache_dir(), manifest))
    except ValueError as exc:
        print(f"fusedsim: {exc}; compiling instead", file=sys.stderr)
        return frozenset()


def _on_gpu(device: str) -> bool:
    """Whether ``device`` (``auto``: the GPU when there is one) is a CUDA device."""
    kind = device.split(":")[0]
    if kind == "auto":
        import torch

        return torch.cuda.is_available()
    return kind == "cuda"


def warmup(metrics: Sequence[str], device: str = "auto", height: int = 1024, width: int = 1024,
           jobs: int | None = None, params: dict[str, dict[str, Any]] | None = None,
           manifest: dict[str, Any] | None | bool = True, archives: bool = True) -> list[WarmupResult]:
    """Compile what ``metrics`` need at ``height`` x ``width`` in ``jobs`` processes (default: one per task, at most
    the CPU count). On a GPU, a phase (:data:`PHASES`) whose compilations ``manifest`` recorded
    (:mod:`~fusedsim.engine.kernel_specs`; True: the package's own, None/False: none) is compiled as one task per
    recorded specialisation, longest first, spread over every process; the other phases run :func:`warm_metric`
    in a process each, and so does a recorded phase when one of its kernels fails to compile. Before that, with
    ``archives``, the package's ahead-of-time compiled kernels (:mod:`~fusedsim.engine.kernel_archive`) are
    installed into the cache: a recorded phase they cover on this platform is ready without any process. One
    result per metric, in the order of ``metrics``: its slowest phase's seconds and its first error."""
    if not metrics:
        raise ValueError("metrics must name at least one metric")
    if height < 1 or width < 1:
        raise ValueError(f"size must be positive; got {width}x{height}")
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs must be >= 1; got {jobs}")
    from fusedsim.engine.kernel_specs import compile_recorded, load_manifest, recorded_phase, run_key

    params = params or {}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    work = [(m, phase) for m in metrics for phase in metric_phases(m, device)]
    if manifest is True:
        manifest = load_manifest() if _on_gpu(device) else None
    recorded = {w: recorded_phase(manifest or None, w[0], w[1], height, width, params.get(w[0])) for w in work}
    start = time.perf_counter()
    wanted = archives and _on_gpu(device) and any(v is not None for v in recorded.values())
    archived = _archived_runs(manifest if wanted else None)
    installed = [w for w in work if recorded[w] is not None and run_key(w[0], w[1], height, width) in archived]
    for metric, phase in installed:
        leave_markers(metric, height, width, params.get(metric), [phase])
    work = [w for w in work if w not in installed]
    recorded = {w: recorded[w] for w in work}
    run = [w for w in work if recorded[w] is None]
    kernels: dict[Any, list[tuple[str, str]]] = {}  # each distinct specialisation once, with the phases it serves
    for w, specs in recorded.items():
        for kernel in specs or ():
            kernels.setdefault(kernel, []).append(w)
    tasks = len(run) + len(kernels)
    # a recorded phase with nothing to compile (a metric without Triton kernels) is ready as it is, and so is one
    # whose kernels an archive installed
    done: dict[tuple[str, str], WarmupResult] = {w: WarmupResult(w[0], time.perf_counter() - start, "cuda",
                                                              precompiled=True) for w in installed}
    done |= {w: WarmupResult(w[0], 0.0, "cuda") for w, specs in recorded.items() if specs is not None}
    failed: dict[tuple[str, str], str] = {}
    if tasks:
        with ProcessPoolExecutor(jobs or max(1, min(tasks, cores)),
                                 mp_context=multiprocessing.get_context("spawn")) as pool:
            def submit(ws: Sequence[tuple[str, str]]) -> list[tuple[tuple[str, str], Any]]:
                return [(w, pool.submit(warm_metric, w[0], device, height, width, params.get(w[0]), w[1]))
                        for w in ws]

            phase_runs = submit(run)  # the long tasks first
            compiles = [(k, pool.submit(compile_recorded, k)) for k in sorted(kernels, key=lambda k: -k.seconds)]
            for kernel, future in compiles:
                _, error = future.result()
                for w in kernels[kernel]:
                    if error:
                        failed.setdefault(w, error)
                    done[w] = WarmupResult(w[0], time.perf_counter() - start, "cuda")
            phase_runs += submit(list(failed))  # recorded phases whose kernels did not all compile
            done |= {w: f.result() for w, f in phase_runs}
    preloaded = [w for w in recorded if recorded[w] is not None and w not in failed]
    for metric, phase in preloaded:
        leave_markers(metric, height, width, params.get(metric), [phase])
    results = []
    for metric in metrics:
        mine = [done[w] for w in (*installed, *work) if w[0] == metric]
        errors = [r.error for r in mine if r.error]
        results.append(WarmupResult(metric, max(r.seconds for r in mine), mine[0].device,
                                    errors[0] if errors else "", all(r.precompiled for r in mine)))
    return results
