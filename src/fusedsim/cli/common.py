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

__all__ = ["DEFAULT_METRICS", "IMAGE_KINDS", "chosen_metrics", "metric_table", "parse_device", "parse_image_metric",
           "parse_memory", "score_metric_specs"]

#: Metrics computed when no ``--metric`` is given.
DEFAULT_METRICS = ("ssim",)
#: Metric kinds that score an image pair: pixel metrics, and the perceptual metrics on sRGB images.
IMAGE_KINDS = ("image", "srgb")


def score_metric_specs() -> list[MetricSpec]:
    """The metrics an image pair can be scored with, in listing order."""
    return [s for kind in IMAGE_KINDS for s in list_metrics(kind)]


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
