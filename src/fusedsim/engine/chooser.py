"""The backend chooser: a pure function of (bench cache, task, context) -> the choice and the candidates weighed.

Each backend measured for the task's metric is a candidate. Its time is interpolated linearly in the number of
values (pixels x channels) between the measured sizes (extrapolated with the rate of the nearest end), its memory
scales with the bytes per value of the largest measurement (a strip backend's with the image width, not its area).
A candidate whose memory exceeds the task's budget for its device type is infeasible. Context ``"one-shot"`` adds the device's cold start (a CUDA context costs
seconds, so small single jobs may run faster on the CPU); ``"batch"`` ranks by warm time alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field

from fusedsim.engine.bench_cache import BenchCache, Measurement

__all__ = ["CONTEXTS", "Candidate", "Choice", "Task", "choose"]

CONTEXTS = ("one-shot", "batch")


@dataclass(frozen=True)
class Task:
    """One pair to score: ``metric`` (registry name), its size, and optional memory budgets per device type."""

    metric: str
    height: int
    width: int
    channels: int = 3
    budgets: Mapping[str, int] = field(default_factory=dict)

    @property
    def values(self) -> int:
        return self.height * self.width * self.channels


@dataclass(frozen=True)
class Candidate:
    """A backend weighed for a task: estimated ``seconds`` (cold start included in one-shot context), estimated
    ``peak_bytes``, whether it fits the budget, and why it was ranked or excluded."""

    backend: str
    seconds: float
    peak_bytes: int
    feasible: bool
    why: str


@dataclass(frozen=True)
class Choice:
    """The chosen backend (None when the cache holds nothing for the metric) and every candidate, best first."""

    backend: str | None
    candidates: tuple[Candidate, ...]
    reason: str


def _interpolate(points: list[Measurement], values: int) -> float:
    """Seconds at ``values`` from measurements sorted by size (linear between them, rate at the ends)."""
    if values <= points[0].values:
        return points[0].seconds * values / points[0].values
    for lo, hi in itertools.pairwise(points):
        if values <= hi.values:
            if hi.values == lo.values:
                return hi.seconds
            t = (values - lo.values) / (hi.values - lo.values)
            return lo.seconds + t * (hi.seconds - lo.seconds)
    last = points[-1]
    return last.seconds * values / last.values


def choose(cache: BenchCache | None, task: Task, context: str) -> Choice:
    """The fastest feasible backend for ``task`` in ``context`` (``"one-shot"`` or ``"batch"``) by ``cache``."""
    if context not in CONTEXTS:
        raise ValueError(f"context must be one of {', '.join(CONTEXTS)}; got {context!r}")
    by_backend: dict[str, list[Measurement]] = {}
    for m in (cache.measurements if cache is not None else ()):
        if m.metric == task.metric and m.values > 0:
            by_backend.setdefault(m.backend, []).append(m)
    if not by_backend:
        return Choice(None, (), f"no measurements of {task.metric} in the bench cache (run `fusedsim bench`)")
    candidates = []
    for backend, points in by_backend.items():
        points.sort(key=lambda m: m.values)
        device_type = backend.partition(" ")[0]
        seconds = _interpolate(points, task.values)
        largest = points[-1]
        if backend.partition(" ")[2].startswith("strip"):  # one strip at a time: bytes per row of values
            peak = int(largest.peak_bytes / (largest.width * largest.channels) * task.width * task.channels)
        else:
            peak = int(largest.peak_bytes / largest.values * task.values)
        cold = cache.cold_seconds.get(device_type, 0.0) if context == "one-shot" and cache is not None else 0.0
        budget = task.budgets.get(device_type)
        feasible = budget is None or peak <= budget
        if not feasible:
            why = f"needs ~{peak / 2**20:.0f} MiB > budget {budget / 2**20:.0f} MiB"
        else:
            why = f"warm {seconds * 1e3:.3g} ms" + (f" + cold start {cold:.3g} s" if cold else "")
        candidates.append(Candidate(backend, seconds + cold, peak, feasible, why))
    candidates.sort(key=lambda c: (not c.feasible, c.seconds, c.peak_bytes))
    best = candidates[0]
    if not best.feasible:
        return Choice(None, tuple(candidates), "no measured backend fits the memory budget")
    return Choice(best.backend, tuple(candidates), f"fastest feasible in {context} context: {best.why}")
