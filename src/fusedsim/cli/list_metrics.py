"""``fusedsim list-metrics``: the metric registry as a table or as JSON (torch is never imported).

Kinds are the command line's (:data:`fusedsim.cli.common.LISTED_KINDS`): ``image`` is every metric ``fusedsim
score`` takes, the perceptual ones included (they read sRGB: the ``input`` column), ``perceptual`` only those,
``video`` the libvmaf features."""

from __future__ import annotations

import argparse
import math

from fusedsim.cli.common import INPUTS, LISTED_KINDS, listed_kind, specs_of_kind
from fusedsim.metrics.registry import MetricSpec

_COLUMNS = ("name", "kind", "input", "outputs", "better", "identical", "range", "min px", "grad", "devices",
            "summary")


def _kind(text: str) -> str:
    # "srgb", the registry's word for the perceptual metrics' input, is still understood
    return "perceptual" if text == "srgb" else text


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("list-metrics", help="list the metrics and what is known about each",
                            description="List the registered metrics: image metrics (fusedsim score, compare, batch, "
                                        "sweep: the pixel metrics and the perceptual ones, which read sRGB) and "
                                        "libvmaf features (fusedsim vmaf, registered as vmaf:<feature>). JSON "
                                        "output writes non-finite numbers as null.")
    parser.add_argument("--kind", type=_kind, choices=LISTED_KINDS,
                        help="image: every image metric (pixel and perceptual); perceptual: only the perceptual "
                             "image metrics (sRGB input); video: the libvmaf features")
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.set_defaults(run=run)


def _number(value: float | None) -> str:
    if value is None:
        return "varies"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:g}"


def _row(spec: MetricSpec) -> tuple[str, ...]:
    lo, hi = spec.value_range
    return (spec.name, listed_kind(spec), INPUTS[spec.kind], ",".join(spec.outputs),
            "higher" if spec.higher_is_better else "lower", _number(spec.identical_value),
            f"[{_number(lo)}, {_number(hi)}]", str(spec.min_size), "yes" if spec.differentiable else "no",
            ",".join(spec.devices), spec.summary)


def format_table(specs: tuple[MetricSpec, ...] | list[MetricSpec]) -> str:
    """Aligned columns, one row per metric (the summary last, unpadded)."""
    rows = [_COLUMNS, *(_row(s) for s in specs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS) - 1)]
    return "".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() + "\n" for r in rows)


def as_listed(spec: MetricSpec) -> dict:
    """A metric's JSON record: the registry's fields, with the command line's kind and what the metric reads."""
    return {**spec.as_dict(), "kind": listed_kind(spec), "input": INPUTS[spec.kind]}


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.json_text import dumps

    specs = specs_of_kind(args.kind)
    if args.format == "json":
        print(dumps([as_listed(s) for s in specs]))
    else:
        print(format_table(specs), end="")
    return 0
