"""The benchmark cache: time and peak memory of each metric on each backend at a few sizes, per machine.

Written by ``fusedsim bench`` to ``bench-<machine>.json`` (see :mod:`fusedsim.engine.machine`) and read by the
chooser (:mod:`fusedsim.engine.chooser`). A cache is *stale* after a week, or when the GPU model or the driver it
was measured with differs from this machine's: :func:`staleness` says why, and :func:`load_bench_cache` then
returns None. A cache file whose content is malformed (not a version-1 cache with typed measurements) is ignored
with a :class:`~fusedsim.engine.machine.CacheFileWarning` naming it, and :func:`save_bench_cache` raises
:class:`~fusedsim.engine.machine.CacheWriteError` when the file cannot be written (``bench`` must not report a
cache it did not save).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fusedsim.engine.machine import (
    CacheWriteError,
    cache_dir,
    cache_path,
    load_json,
    machine_identity,
    report_bad_cache,
    save_json,
)

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

    @classmethod
    def from_dict(cls, data: Any) -> Measurement:
        """The measurement in ``data``; ``ValueError`` naming the field when a field is missing, extra or of the
        wrong type (the chooser does arithmetic on them: a string there would crash ``score``, not this load)."""
        if not isinstance(data, dict):
            raise ValueError(f"a measurement is {type(data).__name__}, not an object")
        names = [f.name for f in fields(cls)]
        if set(data) != set(names):
            raise ValueError(f"a measurement has the fields {sorted(data)}, not {names}")
        for name in ("metric", "backend"):
            if not isinstance(data[name], str):
                raise ValueError(f"a measurement's {name} is {data[name]!r}, not a string")
        for name in ("height", "width", "channels", "peak_bytes"):
            value, least = data[name], -(1 << 62) if name == "peak_bytes" else 1  # a peak is only compared
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise ValueError(f"a measurement's {name} is {value!r}, not an integer >= {least}")
        seconds = data["seconds"]
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
                or seconds < 0:
            raise ValueError(f"a measurement's seconds is {seconds!r}, not a number >= 0")
        return cls(**{**data, "seconds": float(seconds)})


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
        """The cache in ``data``, or None when it is not a cache of this version (see :meth:`parse` for why)."""
        try:
            return cls.parse(data)
        except ValueError:
            return None

    @classmethod
    def parse(cls, data: Any) -> BenchCache | None:
        """The cache in ``data``; None when it is no cache of this version (another fusedsim wrote it: not an
        error); ``ValueError`` saying what is wrong when it claims to be one and is malformed."""
        if not isinstance(data, dict) or data.get("version") != _VERSION:
            return None
        try:
            identity, created = data["identity"], float(data["created"])
            measurements, cold = data.get("measurements", []), data.get("cold_seconds", {})
            if not isinstance(identity, dict) or not isinstance(measurements, list) or not isinstance(cold, dict):
                raise ValueError("identity, measurements or cold_seconds has the wrong type")
            return cls(identity=dict(identity), created=created,
                       measurements=[Measurement.from_dict(m) for m in measurements],
                       cold_seconds={str(k): float(v) for k, v in cold.items()})
        except (KeyError, TypeError) as exc:
            raise ValueError(f"missing or mistyped field: {exc}") from None


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
    path = cache_path("bench", ident)
    try:
        cache = BenchCache.parse(load_json(path))
    except ValueError as exc:
        report_bad_cache(path, str(exc))
        return None
    if cache is None or staleness(cache, ident, time.time() if now is None else now) is not None:
        return None
    return cache


def save_bench_cache(cache: BenchCache) -> None:
    """Write ``cache`` as this machine's bench cache (replacing the previous one); :class:`CacheWriteError` when it
    cannot be written (the measurements are the command's product: reporting them saved would be false)."""
    path = cache_path("bench", cache.identity)
    problem = save_json(path, cache.to_dict())
    if problem:
        raise CacheWriteError(f"could not save the bench cache to {path}: {problem}; set FUSEDSIM_CACHE_DIR to a "
                              f"writable folder (now {cache_dir()})")
