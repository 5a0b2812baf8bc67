"""The metric registry: one :class:`MetricSpec` per metric, read by the CLI, the VMAF features and the engine.

The registry knows metrics only through their specs; it imports neither torch nor any metric. A spec names its
compute function as a ``"module:function"`` string that :meth:`MetricSpec.load` imports on first use, so
``fusedsim list-metrics`` and argument parsing stay torch-free.

Keys: image metrics use plain names (``ssim``, ``ms-ssim``, ``psnr``); libvmaf's features live in the ``vmaf:``
namespace (``vmaf:ssim``, ``vmaf:psnr``, ...) because they share names with the image metrics but are different
algorithms on different inputs. ``fusedsim vmaf --feature ssim`` looks up ``vmaf:ssim``.

Calling conventions by :attr:`MetricSpec.kind`:

* ``"image"``: ``fn(ref, dist, data_range=...)`` on float tensors ``(N, C, H, W)`` holding values in
  ``[0, data_range]``; returns a scalar tensor (the mean over images and channels).
* ``"video"``: ``fn(ref_planes, dist_planes, bit_depth)`` on integer planes ``(y, u, v)``, each ``(N, H, W)``
  (chroma may be smaller); returns ``{output name: float64 tensor (N,)}`` holding :attr:`MetricSpec.outputs`.
* ``"srgb"`` (perceptual metrics): ``fn(ref, dist, **params)`` on sRGB tensors ``(N, 3, H, W)`` or ``(3, H, W)``,
  uint8 0..255 or floating in [0, 1] (:mod:`fusedsim.metrics.srgb_input`); returns a tensor ``(N,)`` (a 0-d
  tensor for ``(3, H, W)`` inputs), or a NamedTuple of such tensors whose fields are :attr:`MetricSpec.outputs`.
  A metric with ``cached_reference=True`` also names ``prepare(ref, **params) -> state`` and
  ``score_prepared(state, dist) -> result`` (same result as ``fn``); :class:`fusedsim.Metric` uses them.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["KINDS", "MetricSpec", "get_metric", "list_metrics", "register_metric"]

#: Input kinds: an image pair (RGB or grey, float values), integer Y'CbCr video planes with a bit depth, or an
#: sRGB-encoded pair for the perceptual metrics.
KINDS = ("image", "video", "srgb")


@dataclass(frozen=True)
class MetricSpec:
    """What the CLI and the engine need to know about a metric, without importing it.

    Attributes:
        name: registry key, e.g. ``"ssim"`` or ``"vmaf:psnr"``.
        kind: ``"image"`` or ``"video"`` (see the module docstring for the calling convention of each).
        compute: ``"module:function"`` of the compute function, imported by :meth:`load`.
        summary: one line for ``fusedsim list-metrics`` and ``--help``.
        outputs: names of the values the metric reports (one for image metrics, libvmaf's names for features).
        aliases: other names :func:`get_metric` accepts.
        higher_is_better: whether a larger value means more similar.
        identical_value: the value for identical inputs (``math.inf`` for PSNR); None when it depends on the
            input (libvmaf's PSNR cap depends on the bit depth).
        value_range: smallest and largest possible values for inputs within their data range.
        differentiable: whether gradients flow to both inputs.
        devices: device types the metric runs on.
        min_size: smallest allowed spatial side in pixels; ``min_size_reason`` says why.
        halo_rows: rows of context above and below a horizontal strip that make strip results equal full
            results; None when the metric cannot be computed in strips.
        bytes_per_pixel, fixed_bytes: working-set estimate ``bytes_per_pixel * h * w * channels + fixed_bytes``
            (inputs included; see :meth:`working_set_bytes`).
        cached_reference: whether the metric can prepare a reference once and score many distorted inputs.
        prepared_broadcasts: whether ``score_prepared`` scores ``(N, ...)`` distorted images against a reference
            prepared from one image (the engine then scores a group of pairs sharing it in one call).
        prepare, score_prepared: ``"module:function"`` of the cached-reference pair (required when
            ``cached_reference`` is True; see the module docstring).
        params: the metric's keyword parameters and their defaults, for ``--help`` and the engine.
        strip_sums, strip_finish: ``"module:function"`` of the strip path (both or neither; needs ``halo_rows``):
            ``strip_sums(ref, dist, rows, device=..., data_range=..., **params) -> Tensor (K,)`` reads from the
            whole images the rows that the body ``rows = (start, stop)`` needs, halo included, and gives additive
            float64 partial sums over the outputs of the body; ``strip_finish(sums, data_range=..., **params) ->
            Tensor`` turns the sums over all bodies (a partition of the rows) into the metric's value.
        planes: video metrics: the planes they read (``"y"``, ``"u"``, ``"v"``); readers skip the others.
        ops: the registered ops (:func:`fusedsim.ops.op`) the compute function launches on a GPU; a command can
            import their kernels on a thread while the CUDA context starts (:func:`prepare_ops`).
    """

    name: str
    kind: str
    compute: str
    summary: str
    outputs: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    higher_is_better: bool = True
    identical_value: float | None = None
    value_range: tuple[float, float] = (-math.inf, math.inf)
    differentiable: bool = False
    devices: tuple[str, ...] = ("cpu", "cuda")
    min_size: int = 1
    min_size_reason: str = ""
    halo_rows: int | None = None
    bytes_per_pixel: float = 0.0
    fixed_bytes: int = 0
    cached_reference: bool = False
    prepared_broadcasts: bool = False
    prepare: str | None = None
    score_prepared: str | None = None
    params: tuple[tuple[str, Any], ...] = ()
    planes: tuple[str, ...] = ("y", "u", "v")
    ops: tuple[str, ...] = ()
    strip_sums: str | None = None
    strip_finish: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip().lower():
            raise ValueError(f"name must be a non-empty lower-case string; got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        module, sep, function = self.compute.partition(":")
        if not (module and sep and function):
            raise ValueError(f"compute must be 'module:function'; got {self.compute!r}")
        if self.cached_reference and not (self.prepare and self.score_prepared):
            raise ValueError(f"{self.name}: cached_reference=True needs prepare and score_prepared")
        if (self.strip_sums is None) != (self.strip_finish is None) or (self.strip_sums and self.halo_rows is None):
            raise ValueError(f"{self.name}: strip_sums and strip_finish go together, with halo_rows")
        for field_name in ("prepare", "score_prepared", "strip_sums", "strip_finish"):
            target = getattr(self, field_name)
            if target is not None and not all(target.partition(":")[::2]):
                raise ValueError(f"{self.name}: {field_name} must be 'module:function'; got {target!r}")
        if not self.planes or any(p not in ("y", "u", "v") for p in self.planes):
            raise ValueError(f"{self.name}: planes must name some of 'y', 'u', 'v'; got {self.planes!r}")
        if not self.outputs:
            raise ValueError(f"{self.name}: outputs must name at least one value")
        lo, hi = self.value_range
        if not lo <= hi:
            raise ValueError(f"{self.name}: value_range must be (low, high) with low <= high; got {self.value_range}")
        if isinstance(self.min_size, bool) or not isinstance(self.min_size, int) or self.min_size < 1:
            raise ValueError(f"{self.name}: min_size must be an int >= 1; got {self.min_size!r}")

    @property
    def short_name(self) -> str:
        """The name without its namespace (``"vmaf:psnr"`` -> ``"psnr"``)."""
        return self.name.rpartition(":")[2]

    def load(self, which: str = "compute") -> Callable[..., Any]:
        """Import and return the compute function, or ``"prepare"`` / ``"score_prepared"`` / ``"strip_sums"`` /
        ``"strip_finish"`` (imported once)."""
        target = getattr(self, which) if which in _LOADABLE else None
        if target is None:
            raise ValueError(f"{self.name} has no {which} function")
        fn = _FUNCTIONS.get(target)
        if fn is None:
            module, _, function = target.partition(":")
            fn = _FUNCTIONS[target] = getattr(importlib.import_module(module), function)
        return fn

    def working_set_bytes(self, height: int, width: int, channels: int = 3) -> int:
        """Estimated peak bytes to score one ``height`` x ``width`` pair with ``channels`` channels."""
        return int(math.ceil(self.bytes_per_pixel * height * width * channels)) + self.fixed_bytes

    def as_dict(self) -> dict[str, Any]:
        """The spec as plain values (lists for tuples; infinities stay floats)."""
        return {
            "name": self.name, "kind": self.kind, "summary": self.summary, "aliases": list(self.aliases),
            "outputs": list(self.outputs), "higher_is_better": self.higher_is_better,
            "identical_value": self.identical_value, "value_range": list(self.value_range),
            "differentiable": self.differentiable, "devices": list(self.devices), "min_size": self.min_size,
            "min_size_reason": self.min_size_reason, "halo_rows": self.halo_rows,
            "bytes_per_pixel": self.bytes_per_pixel, "fixed_bytes": self.fixed_bytes,
            "cached_reference": self.cached_reference, "prepared_broadcasts": self.prepared_broadcasts,
            "compute": self.compute,
            "params": {key: value for key, value in self.params}, "planes": list(self.planes),
        }


_LOADABLE = ("compute", "prepare", "score_prepared", "strip_sums", "strip_finish")
_FUNCTIONS: dict[str, Callable[..., Any]] = {}  # "module:function" -> the imported function
_SPECS: dict[str, MetricSpec] = {}
_ALIASES: dict[str, str] = {}  # alias -> name
_builtins_loaded = False


def _ensure_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        from fusedsim.metrics import catalog  # noqa: F401  (registers the built-in metrics)


def register_metric(spec: MetricSpec) -> MetricSpec:
    """Add ``spec`` to the registry; its name and aliases must not be taken. Returns ``spec``."""
    if not isinstance(spec, MetricSpec):
        raise TypeError(f"spec must be a MetricSpec; got {type(spec).__name__}")
    _ensure_builtins()
    for key in (spec.name, *spec.aliases):
        if key in _SPECS or key in _ALIASES:
            owner = _ALIASES.get(key, key)
            raise ValueError(f"metric name {key!r} is already registered (by {owner!r})")
    _SPECS[spec.name] = spec
    _ALIASES.update({alias: spec.name for alias in spec.aliases})
    return spec


def get_metric(name: str) -> MetricSpec:
    """The spec registered under ``name`` or one of its aliases (case-insensitive)."""
    if not isinstance(name, str):
        raise TypeError(f"metric name must be a str; got {type(name).__name__}")
    _ensure_builtins()
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _SPECS:
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(_SPECS)}")
    return _SPECS[key]


def list_metrics(kind: str | None = None) -> tuple[MetricSpec, ...]:
    """Every registered spec in registration order, or only those of ``kind`` (``"image"`` or ``"video"``)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} or None; got {kind!r}")
    _ensure_builtins()
    return tuple(s for s in _SPECS.values() if kind is None or s.kind == kind)
