"""``fusedsim list-metrics``: the metric registry as a table or as JSON (torch is never imported)."""

from __future__ import annotations

import argparse
import math

from fusedsim.metrics.registry import KINDS, MetricSpec, list_metrics

_COLUMNS = ("name", "kind", "outputs", "better", "identical", "range", "min px", "grad", "devices", "summary")


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("list-metrics", help="list the metrics and what is known about each",
                            description="List the registered metrics: image metrics (fusedsim score) and libvmaf "
                                        "features (fusedsim vmaf, registered as vmaf:<feature>). JSON output "
                                        "writes non-finite numbers as null.")
    parser.add_argument("--kind", choices=KINDS, help="only image metrics, video features or perceptual (sRGB) metrics")
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
    return (spec.name, spec.kind, ",".join(spec.outputs), "higher" if spec.higher_is_better else "lower",
            _number(spec.identical_value), f"[{_number(lo)}, {_number(hi)}]", str(spec.min_size),
            "yes" if spec.differentiable else "no", ",".join(spec.devices), spec.summary)


def format_table(specs: tuple[MetricSpec, ...]) -> str:
    """Aligned columns, one row per metric (the summary last, unpadded)."""
    rows = [_COLUMNS, *(_row(s) for s in specs)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_COLUMNS) - 1)]
    return "".join("  ".join([*(c.ljust(w) for c, w in zip(r, widths)), r[-1]]).rstrip() + "\n" for r in rows)


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.json_text import dumps

    specs = list_metrics(args.kind)
    if args.format == "json":
        print(dumps([s.as_dict() for s in specs]))
    else:
        print(format_table(specs), end="")
    return 0
