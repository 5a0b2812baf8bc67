"""The metric registry: one :class:`MetricSpec` per metric, read by the CLI, the VMAF features and the engine.

The registry knows metrics only through their specs; it imports neither torch nor any metric. Each family declares
its specs in its package's ``__init__`` (``fusedsim/families/<family>/``, found on disk: no list names them), with a
loader function whose ``import`` statement brings the implementation (:class:`MetricFunctions`) on first use, so
``fusedsim list-metrics`` and argument parsing stay torch-free. The spec also owns the calling convention
(:meth:`MetricSpec.prepare`, :meth:`MetricSpec.score`): the engine, :class:`fusedsim.Metric` and the CLI call every
metric through it.

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

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fusedsim.core.state import cache_dict

__all__ = ["KINDS", "MetricFunctions", "MetricSpec", "get_metric", "list_metrics", "register_metric"]

#: Input kinds: an image pair (RGB or grey, float values), integer Y'CbCr video planes with a bit depth, or an
#: sRGB-encoded pair for the perceptual metrics.
KINDS = ("image", "video", "srgb")


@dataclass(frozen=True)
class MetricFunctions:
    """A metric's implementation, returned by its spec's ``functions`` loader (see the module docstring for the
    signatures by kind). ``score_map(ref, dist, **params) -> (N, H', W')`` is the per-pixel map ``fusedsim
    diffmap`` draws (None: the metric has no map); ``ops`` are the registered ops the metric launches on a GPU, whose
    kernels a command may import on a thread while the CUDA context starts. ``check_params(**params)`` raises
    ValueError/TypeError naming a parameter whose value the metric refuses, before any image is read."""

    compute: Callable[..., Any]
    prepare: Callable[..., Any] | None = None
    score_prepared: Callable[..., Any] | None = None
    strip_sums: Callable[..., Any] | None = None
    strip_finish: Callable[..., Any] | None = None
    score_map: Callable[..., Any] | None = None
    ops: tuple[Any, ...] = ()
    check_params: Callable[..., Any] | None = None


@dataclass(frozen=True)
class MetricSpec:
    """What the CLI and the engine need to know about a metric, without importing it.

    Attributes:
        name: registry key, e.g. ``"ssim"`` or ``"vmaf:psnr"``.
        kind: ``"image"`` or ``"video"`` (see the module docstring for the calling convention of each).
        functions: a loader ``() -> MetricFunctions``: a function of the family whose ``import`` statement brings
            the implementation (torch, kernels) on first use. Called once; see :meth:`implementation`.
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
        rank: position among the metrics of its kind in listings (``list-metrics``, error messages).
        params: the metric's keyword parameters and their defaults, for ``--help`` and the engine.
        strips: whether the implementation has the strip path (``strip_sums`` and ``strip_finish``; needs
            ``halo_rows``):
            ``strip_sums(ref, dist, rows, device=..., data_range=..., **params) -> Tensor (K,)`` reads from the
            whole images the rows that the body ``rows = (start, stop)`` needs, halo included, and gives additive
            float64 partial sums over the outputs of the body; ``strip_finish(sums, data_range=..., **params) ->
            Tensor`` turns the sums over all bodies (a partition of the rows) into the metric's value.
        planes: video metrics: the planes they read (``"y"``, ``"u"``, ``"v"``); readers skip the others.
    """

    name: str
    kind: str
    functions: Callable[[], MetricFunctions]
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
    params: tuple[tuple[str, Any], ...] = ()
    planes: tuple[str, ...] = ("y", "u", "v")
    strips: bool = False
    rank: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name != self.name.strip().lower():
            raise ValueError(f"name must be a non-empty lower-case string; got {self.name!r}")
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}; got {self.kind!r}")
        if not callable(self.functions):
            raise ValueError(f"functions must be a loader () -> MetricFunctions; got {self.functions!r}")
        if self.strips and self.halo_rows is None:
            raise ValueError(f"{self.name}: strips need halo_rows")
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

    def implementation(self) -> MetricFunctions:
        """The metric's functions (imported on first call, then kept). Checks that they match the spec: a
        cached-reference metric has ``prepare`` and ``score_prepared``, a strip metric both strip functions."""
        loaded = _FUNCTIONS.get(self.name)
        if loaded is None:
            loaded = self.functions()
            if not isinstance(loaded, MetricFunctions):
                raise TypeError(f"{self.name}: its functions loader returned {type(loaded).__name__}, "
                                "not MetricFunctions")
            if self.cached_reference and not (loaded.prepare and loaded.score_prepared):
                raise ValueError(f"{self.name}: cached_reference=True needs prepare and score_prepared")
            if self.strips and not (loaded.strip_sums and loaded.strip_finish):
                raise ValueError(f"{self.name}: strips=True needs strip_sums and strip_finish")
            _FUNCTIONS[self.name] = loaded
        return loaded

    def load(self, which: str = "compute") -> Callable[..., Any]:
        """One function of :meth:`implementation`: ``"compute"``, ``"prepare"``, ``"score_prepared"``,
        ``"strip_sums"``, ``"strip_finish"`` or ``"score_map"``."""
        fn = getattr(self.implementation(), which, None) if which in _LOADABLE else None
        if fn is None:
            raise ValueError(f"{self.name} has no {which} function")
        return fn

    def accepted_params(self) -> tuple[str, ...] | None:
        """The keyword parameters the metric's functions take (imports them): those of ``compute`` and, for a
        cached-reference metric, also taken by ``prepare`` (the engine passes them to either), less the two inputs
        and ``data_range`` (the engine's); None when they take any keyword."""
        fns = [self.load("compute")] + ([self.load("prepare")] if self.cached_reference else [])
        accepted: list[str] | None = None
        for fn in fns:
            parameters = list(inspect.signature(fn).parameters.values())
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
                continue
            named = [p.name for p in parameters[2 if fn is fns[0] else 1:]
                     if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
                     and p.name != "data_range"]
            accepted = named if accepted is None else [n for n in accepted if n in named]
        return None if accepted is None else tuple(accepted)

    def check_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` checked against what the metric accepts (:meth:`accepted_params`; unknown names: ValueError
        listing the known ones, the declared :attr:`params` first), then their values by the implementation's own
        check. Returns them as a dict."""
        if not params:
            return {}
        accepted = self.accepted_params()
        unknown = [name for name in params if accepted is not None and name not in accepted]
        if unknown:
            declared = [name for name, _ in self.params]
            known = declared + [n for n in accepted or () if n not in declared]
            takes = f"its parameters are {', '.join(known)}" if known else "it takes no parameters"
            raise ValueError(f"{self.name} has no parameter {unknown[0]!r}; {takes}")
        check = self.implementation().check_params
        if check is not None:
            check(**{k: v for k, v in params.items() if k in dict(self.params)})
        return dict(params)

    # ---------------------------------------------------------------------------------- calling convention
    def prepare(self, ref: Any, params: dict[str, Any]) -> Any:
        """The reference state :meth:`score` takes: the prepared reference of a cached-reference metric, else
        ``ref`` itself."""
        if self.cached_reference:
            return self.load("prepare")(ref, **params)
        return ref

    def compute(self, ref: Any, dist: Any, params: dict[str, Any], data_range: float | None = None) -> Any:
        """One-shot score of a pair (or of batches of pairs): no prepared reference. ``data_range`` reaches image
        metrics (their default when None)."""
        if self.kind == "image" and data_range is not None:
            return self.load()(ref, dist, data_range=data_range, **params)
        return self.load()(ref, dist, **params)

    def input_channels(self, image_channels: int) -> int:
        """Channels the metric reads from an image of ``image_channels``: the perceptual metrics read sRGB (grey
        is replicated), the image metrics every channel as it is."""
        return 3 if self.kind == "srgb" else image_channels

    def score(self, state: Any, dist: Any, params: dict[str, Any], data_range: float | None = None) -> Any:
        """Score ``dist`` against a state from :meth:`prepare`. ``data_range`` reaches image metrics (their
        default when None); a cached-reference metric's parameters are in its state."""
        if self.kind == "image" and data_range is not None:
            return self.load()(state, dist, data_range=data_range, **params)
        if self.cached_reference:
            return self.load("score_prepared")(state, dist)
        return self.load()(state, dist, **params)

    @property
    def has_map(self) -> bool:
        """Whether the metric gives a per-pixel map (``fusedsim diffmap``); imports the implementation."""
        return self.implementation().score_map is not None

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
            "family": self.functions.__module__,
            "params": {key: value for key, value in self.params}, "planes": list(self.planes),
        }


_LISTING_ORDER = ("image", "srgb", "video")
_LOADABLE = ("compute", "prepare", "score_prepared", "strip_sums", "strip_finish", "score_map")
_FUNCTIONS: dict[str, MetricFunctions] = cache_dict()  # metric name -> its loaded functions
_SPECS: dict[str, MetricSpec] = {}
_ALIASES: dict[str, str] = {}  # alias -> name
_builtins_loaded = False


def _ensure_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        from fusedsim.families import load_families

        load_families()  # each family's __init__ registers its metrics


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
        raise ValueError(f"unknown metric {name!r}; known metrics: {', '.join(s.name for s in list_metrics())}")
    return _SPECS[key]


def list_metrics(kind: str | None = None) -> tuple[MetricSpec, ...]:
    """Every registered spec, or only those of ``kind`` (one of :data:`KINDS`): the image metrics, then the
    perceptual (sRGB) ones, then the video features, each by rank, then in registration order."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)} or None; got {kind!r}")
    _ensure_builtins()
    # image metrics first, the perceptual (sRGB) ones among them, then the video features; stable: registration
    ordered = sorted(_SPECS.values(), key=lambda s: (_LISTING_ORDER.index(s.kind), s.rank))
    return tuple(s for s in ordered if kind is None or s.kind == kind)
