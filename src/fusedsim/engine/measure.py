"""Measurements for ``fusedsim bench``: warm time and peak memory of one metric on one backend at one size."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator

import torch

from fusedsim.core.device import resolve_device
from fusedsim.engine.bench_cache import Measurement
from fusedsim.engine.strips import can_strip, plan_strips
from fusedsim.io.images import ImageData
from fusedsim.metrics.registry import MetricSpec

__all__ = ["cold_start_seconds", "devices_for", "measure", "random_pair"]


def devices_for(device: str) -> list[torch.device]:
    """``auto``: the CPU and the first GPU when there is one; else the named device."""
    if device == "auto":
        return [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
    return [resolve_device(device)]


def cold_start_seconds(device: torch.device) -> float:
    """Seconds a fresh process pays before its first kernel on ``device`` (context creation); 0 for the CPU."""
    if device.type != "cuda":
        return 0.0
    start = time.perf_counter()
    torch.zeros(1, device=device)
    torch.cuda.synchronize(device)
    return time.perf_counter() - start


def random_pair(side: int, channels: int, seed: int = 0) -> tuple[ImageData, ImageData]:
    """An 8-bit pair: uniform noise and a noisy copy (never zeros, so no kernel takes a shortcut)."""
    from pathlib import Path

    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (1, channels, side, side), generator=g).float()
    y = (x + torch.randint(-20, 21, x.shape, generator=g)).clamp(0, 255)
    mode = "RGB" if channels == 3 else "grey"
    return (ImageData(Path("<random ref>"), x, 8, mode), ImageData(Path("<random dist>"), y, 8, mode))


def _trim_heap() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class _RssPeak:
    """Peak resident set growth while active, sampled every millisecond from /proc/self/statm (approximate)."""

    def __enter__(self) -> _RssPeak:
        _trim_heap()  # hand freed memory back, so the growth is seen again
        self.base = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())

    def _sample(self) -> None:
        while not self._stop.wait(0.001):
            self.peak = max(self.peak, self._rss())

    @staticmethod
    def _rss() -> int:
        try:
            with open("/proc/self/statm", encoding="ascii") as f:
                import os

                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    @property
    def growth(self) -> int:
        return max(self.peak - self.base, 0)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure(spec: MetricSpec, device: torch.device, side: int, channels: int, strip_rows: int,
            repeats: int) -> Iterator[tuple[Measurement | None, str]]:
    """``(measurement, note)`` for ``spec`` on ``device`` in full mode and, when it has a strip path, in strips of
    ``strip_rows`` body rows (only when that makes more than one strip: one strip is full mode). ``note`` says
    why one was not measured."""
    from fusedsim.engine.scorer import Scorer

    ref, dist = random_pair(side, channels)
    several = can_strip(spec) and len(plan_strips(side, strip_rows, spec.halo_rows or 0)) > 1
    modes = ["full"] + ([f"strip:{strip_rows}"] if several else [])
    for mode in modes:
        scorer = Scorer([spec.name], device=device, memory=mode)
        scorer.set_reference(ref)
        expected = f"{device.type} " + ("full" if mode == "full" else f"strip {strip_rows}")
        try:
            result = scorer.score_prepared(dist)  # warm-up: compilation, caches, the prepared reference
        except Exception as exc:  # noqa: BLE001  (a failed measurement is reported, not fatal)
            yield None, f"{spec.name} {expected} at {side}px: {type(exc).__name__}: {exc}"
            continue
        if result.backends[spec.name] != expected:
            yield None, f"{spec.name} {expected} at {side}px: ran as {result.backends[spec.name]} ({result.downgrades})"
            continue
        times = []
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
            base = torch.cuda.memory_allocated(device)
        with _RssPeak() as rss:
            for _ in range(repeats):
                _sync(device)
                start = time.perf_counter()
                scorer.score_prepared(dist)  # returns Python floats: the device work is finished
                times.append(time.perf_counter() - start)
        peak = torch.cuda.max_memory_allocated(device) - base if device.type == "cuda" else rss.growth
        yield Measurement(spec.name, expected, side, side, channels, statistics.median(times), int(peak)), ""
