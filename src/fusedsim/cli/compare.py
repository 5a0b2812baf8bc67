"""``fusedsim compare REF DIST [DIST ...]``: one reference against many distorted images, reference prepared once.

Building the parser imports neither torch nor a metric; ``run`` imports them.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from fusedsim.cli.common import (DEFAULT_METRICS, chosen_metrics, metric_table, parse_device, parse_image_metric,
                                 parse_memory)
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param
from fusedsim.core.device import DEVICE_HELP

DESCRIPTION = """\
Score each DIST against REF with the chosen metrics; REF is decoded and
prepared once (the metrics' reference-side work is cached). Prints one row
per DIST. A DIST that cannot be scored (missing, unreadable, another size)
gets NaN and its error, the others are still scored; the exit status is then 1.

--format plain: an aligned table; tsv: tab-separated with a header, numbers
round-trip exact, NaN as nan, tabs, line breaks and backslashes in cells
escaped as \\t, \\n, \\r and \\\\; json: valid JSON, non-finite values as null.

metrics:
{metrics}"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("compare", help="score many distorted images against one reference",
                            description=DESCRIPTION.format(metrics=metric_table()),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", metavar="REF", help="reference image file")
    parser.add_argument("dists", metavar="DIST", nargs="+", help="distorted image files")
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help=f"metrics, repeatable or comma-separated, or all (default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    parser.add_argument("--format", choices=("plain", "json", "tsv"), default="plain", help="output format")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.add_argument("--memory", type=parse_memory, default="auto", help="auto, full, strip or strip:ROWS")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on standard error (a bar on a terminal, else a line every few seconds)")
    parser.set_defaults(run=run)


def _text(value: Any, exact: bool) -> str:
    if isinstance(value, float):
        if exact:
            return repr(value)
        return f"{value:.6f}" if math.isfinite(value) else str(value)
    return str(value)


def format_rows(columns: list[str], rows: list[list[Any]], fmt: str) -> str:
    """``rows`` under ``columns`` as an aligned table (``plain``) or tab-separated (``tsv``)."""
    if fmt == "tsv":
        from fusedsim.cli.tsv import format_line

        return "".join(format_line(line) for line in [columns, *[[_text(v, True) for v in r] for r in rows]])
    cells = [columns, *[[_text(v, False) for v in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in cells)


def _score_one(scorer: Any, path: str, columns: list[str]) -> dict[str, Any]:
    """One DIST's entry: its values by column (NaN when it cannot be scored), the backend and the error."""
    from fusedsim.io.images import read_image

    values = {c: math.nan for c in columns}
    entry: dict[str, Any] = {"distorted": path, "backend": "", "error": ""}
    try:
        result = scorer.score_prepared(read_image(path, "DIST"))
        for name, value in result.values.items():
            if isinstance(value, dict):
                values.update({f"{name}.{k}": float(v) for k, v in value.items()})
            else:
                values[name] = float(value)
        entry["backend"] = result.backend
    except (ValueError, TypeError, FileNotFoundError, RuntimeError) as exc:
        entry["error"] = " ".join(str(exc).split())
    entry["metrics"] = values
    return entry


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.json_text import dumps
    from fusedsim.cli.progress import Progress
    from fusedsim.engine import Scorer
    from fusedsim.cli.outputs import Output, refuse_outputs_that_are_inputs
    from fusedsim.engine.batch_pairs import metric_columns
    from fusedsim.io.images import read_image
    from fusedsim.metrics.registry import get_metric

    # standard output redirected onto an input (``>> ref.png``) would be appended to it
    refuse_outputs_that_are_inputs([Output("-", args.format, "standard output")],
                                   [("REF", args.ref), *(("DIST", path) for path in args.dists)])
    names = chosen_metrics(args.metric)
    columns = metric_columns([get_metric(n) for n in names])
    scorer = Scorer(names, device=args.device, memory=args.memory, params=chosen_params(args.param, names))
    scorer.set_reference(read_image(args.ref, "REF"))  # a bad reference stops here, before any row
    results: list[dict[str, Any]] = []
    with Progress(len(args.dists), desc="compare", unit="image", enabled=not args.quiet) as progress:
        for path in args.dists:
            results.append(_score_one(scorer, path, columns))
            progress.update()
    failed = sum(1 for r in results if r["error"])
    if args.format == "json":
        print(dumps({"reference": args.ref, "results": results}))
    else:
        header = ["distorted", *columns, "backend"] + (["error"] if failed else [])
        rows = [[r["distorted"], *(r["metrics"][c] for c in columns), r["backend"]] + ([r["error"]] if failed else [])
                for r in results]
        sys.stdout.write(format_rows(header, rows, args.format))
    for r in results:
        if r["error"]:
            print(f"fusedsim compare: {r['distorted']}: {r['error']}", file=sys.stderr)
    return 1 if failed else 0
