"""Argument types and metric lists shared by the image commands (``score``, ``compare``, ``batch``, ``sweep``,
``bench``, ``diffmap``, and ``--device`` of ``vmaf``).

Everything here runs while the parser is built or the arguments are parsed, so it reads only the torch-free metric
registry: ``fusedsim --help`` and usage errors answer without importing torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence

from fusedsim.core.device import check_device_name
from fusedsim.metrics.registry import MetricSpec, get_metric, list_metrics

__all__ = ["DEFAULT_METRICS", "IMAGE_KINDS", "INPUTS", "LISTED_KINDS", "chosen_metrics", "listed_kind", "metric_table",
           "parse_device", "parse_image_metric", "parse_memory", "parse_size", "score_metric_specs",
           "specs_of_kind"]

#: Metrics computed when no ``--metric`` is given.
DEFAULT_METRICS = ("ssim",)
#: Registry kinds that score an image pair: pixel metrics, and the perceptual metrics on sRGB images.
IMAGE_KINDS = ("image", "srgb")
#: The kinds the command line speaks of (``list-metrics --kind``, help texts): ``image`` is every metric that
#: scores an image pair (``score``, ``compare``, ``batch``, ``sweep``), the perceptual ones included; ``perceptual``
#: those of them that read sRGB; ``video`` the libvmaf features of ``fusedsim vmaf``.
LISTED_KINDS = ("image", "perceptual", "video")
_REGISTRY_KINDS = {"image": IMAGE_KINDS, "perceptual": ("srgb",), "video": ("video",)}
#: What each registry kind reads, as ``list-metrics`` shows it.
INPUTS = {"image": "values", "srgb": "sRGB", "video": "YUV planes"}


def score_metric_specs() -> list[MetricSpec]:
    """The metrics an image pair can be scored with, in listing order."""
    return [s for kind in IMAGE_KINDS for s in list_metrics(kind)]


def listed_kind(spec: MetricSpec) -> str:
    """``spec``'s kind in the command line's words: ``image`` (pixel and perceptual metrics) or ``video``."""
    return "image" if spec.kind in IMAGE_KINDS else spec.kind


def specs_of_kind(kind: str | None) -> list[MetricSpec]:
    """The metrics of a :data:`LISTED_KINDS` kind (every metric for None), in listing order."""
    if kind is None:
        return list(list_metrics())
    if kind not in _REGISTRY_KINDS:
        raise ValueError(f"kind must be one of {', '.join(LISTED_KINDS)}; got {kind!r}")
    return [s for s in list_metrics() if s.kind in _REGISTRY_KINDS[kind]]


def metric_table() -> str:
    """One ``name  summary`` line per image metric, aligned, for a command's description."""
    specs = score_metric_specs()
    width = max(len(s.name) for s in specs)
    return "\n".join(f"  {s.name:<{width}}  {s.summary}" for s in specs)


def parse_image_metric(text: str) -> list[str]:
    """argparse type of ``--metric``: a metric name or alias, a comma list of them, or ``all``; returned as
    registry names."""
    names = []
    for item in text.split(","):
        item = item.strip()
        if item.lower() == "all":
            names.extend(s.name for s in score_metric_specs())
            continue
        try:
            spec = get_metric(item)
        except ValueError:
            spec = None
        if spec is None or spec.kind not in IMAGE_KINDS:
            known = ", ".join(s.name for s in score_metric_specs())
            raise argparse.ArgumentTypeError(f"unknown image metric {item!r}; choose from {known} (or all)")
        names.append(spec.name)
    return names


def chosen_metrics(groups: Iterable[Sequence[str]] | None, default: Sequence[str] = DEFAULT_METRICS) -> list[str]:
    """The metrics of repeated ``--metric`` options (lists from :func:`parse_image_metric`), duplicates dropped
    and order kept; ``default`` when none was given."""
    return list(dict.fromkeys(n for group in (groups or [default]) for n in group))


def parse_device(text: str) -> str:
    """argparse type of ``--device``: ``auto``, ``cpu`` or ``cuda[:N]`` (whether the GPU exists is checked later,
    where torch is imported)."""
    try:
        return check_device_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_memory(text: str) -> str:
    """argparse type of ``--memory``: ``auto``, ``full``, ``strip`` or ``strip:ROWS``, normalised."""
    from fusedsim.engine.memory import parse_memory as parse  # torch-free

    try:
        return str(parse(text, "--memory"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_size(text: str) -> tuple[int, int]:
    """``--size``: ``S`` (square) or ``WxH`` in pixels -> ``(width, height)``."""
    parts = text.lower().split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 1:
        raise argparse.ArgumentTypeError(f"--size must be S or WxH in pixels; got {text!r}")
    return values[0], values[-1]
