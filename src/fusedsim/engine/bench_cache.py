"""The benchmark cache: time and peak memory of each metric on each backend at a few sizes, per machine.

Written by ``fusedsim bench`` to ``bench-<machine>.json`` (see :mod:`fusedsim.engine.machine`) and read by the
chooser (:mod:`fusedsim.engine.chooser`). A cache is *stale* after a week, or when the GPU model or the driver it
was measured with differs from this machine's: :func:`staleness` says why, and :func:`load_bench_cache` then
returns None.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

from fusedsim.engine.machine import cache_path, load_json, machine_identity, save_json

__all__ = ["MAX_AGE_S", "BenchCache", "Measurement", "load_bench_cache", "save_bench_cache", "staleness"]

MAX_AGE_S = 7 * 24 * 3600.0
_VERSION = 1


@dataclass(frozen=True)
class Measurement:
    """One metric on one backend (``"cuda full"``, ``"cpu strip 512"``) at one size: warm ``seconds`` per pair
    (median) and ``peak_bytes`` above the baseline."""

    metric: str
    backend: str
    height: int
    width: int
    channels: int
    seconds: float
    peak_bytes: int

    @property
    def values(self) -> int:
        """Pixels times channels: the unit of the per-pixel rates."""
        return self.height * self.width * self.channels


@dataclass
class BenchCache:
    """Measurements of one machine. ``cold_seconds``: one-off start cost per device type (a CUDA context and the
    first kernel compilations for ``"cuda"``), paid by a one-shot process."""

    identity: dict[str, Any]
    created: float
    measurements: list[Measurement] = field(default_factory=list)
    cold_seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"version": _VERSION, "identity": self.identity, "created": self.created,
                "cold_seconds": self.cold_seconds, "measurements": [asdict(m) for m in self.measurements]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchCache | None:
        """The cache in ``data``, or None when it is not a cache of this version."""
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return None
        try:
            return cls(identity=dict(data["identity"]), created=float(data["created"]),
                       measurements=[Measurement(**m) for m in data.get("measurements", [])],
                       cold_seconds={str(k): float(v) for k, v in data.get("cold_seconds", {}).items()})
        except (KeyError, TypeError, ValueError):
            return None


def staleness(cache: BenchCache, identity: dict[str, Any], now: float) -> str | None:
    """Why ``cache`` must not be used on a machine with ``identity`` at time ``now``, or None when it is fresh."""
    age = now - cache.created
    if age > MAX_AGE_S or age < 0:
        return f"measured {age / 86400:.1f} days ago (caches are kept a week)"
    for key in ("gpu", "driver"):
        if cache.identity.get(key) != identity.get(key):
            return f"{key} changed: measured on {cache.identity.get(key)!r}, this machine has {identity.get(key)!r}"
    return None


def load_bench_cache(identity: dict[str, Any] | None = None, now: float | None = None) -> BenchCache | None:
    """This machine's bench cache, or None when there is none or it is stale."""
    ident = machine_identity() if identity is None else identity
    cache = BenchCache.from_dict(load_json(cache_path("bench", ident)))
    if cache is None or staleness(cache, ident, time.time() if now is None else now) is not None:
        return None
    return cache


def save_bench_cache(cache: BenchCache) -> None:
    """Write ``cache`` as this machine's bench cache (replacing the previous one)."""
    save_json(cache_path("bench", cache.identity), cache.to_dict())
