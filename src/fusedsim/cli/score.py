"""``fusedsim score REF DIST``: compare two image files with the image metrics of the registry.

Building the parser imports neither torch nor a metric (the choices come from :mod:`fusedsim.metrics.registry`);
``run`` imports them.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path

from fusedsim.cli.common import (DEFAULT_METRICS, chosen_metrics, metric_table, parse_device, parse_image_metric,
                                 parse_memory, score_metric_specs)
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param
from fusedsim.core.device import DEVICE_HELP
from fusedsim.engine.inputs import check_min_size
from fusedsim.metrics.registry import get_metric

__all__ = ["DEFAULT_METRICS", "add_parser", "check_min_size", "example_pair", "parse_image_metric", "run",
           "score_metric_specs"]

DESCRIPTION = """\
Compare a distorted image file with its reference (8- or 16-bit, grey or RGB).
The data range is the files' (255 or 65535); both files must have the same
size, channels and bit depth. Opaque alpha is dropped, transparency refused,
palette images are read as RGB. The perceptual metrics read the files as sRGB
(grey images as R = G = B).

metrics:
{metrics}

--format json writes valid JSON; non-finite values (PSNR of identical images
is +inf) are written as null. --format value prints the bare number, as the
ssimulacra2 and dssim tools do (one per line when several: the TSV columns'
order), round-trip exact, inf and nan as such."""


def example_pair() -> tuple[Path, Path]:
    """The bundled photo pair (a crop of scikit-image's chelsea.png, CC0, and its JPEG q=10 version)."""
    root = resources.files("fusedsim") / "data"
    return Path(str(root / "example_ref.png")), Path(str(root / "example_dist.png"))


def add_parser(sub: argparse._SubParsersAction) -> None:
    specs = score_metric_specs()
    parser = sub.add_parser("score", help="score a distorted image against a reference image",
                            description=DESCRIPTION.format(metrics=metric_table()),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", metavar="REF", nargs="?", help="reference image file")
    parser.add_argument("dist", metavar="DIST", nargs="?", help="distorted image file")
    parser.add_argument("--example", action="store_true", help="score the bundled example photo pair")
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help=f"metrics to compute, repeatable or comma-separated, or all: "
                             f"{', '.join(s.name for s in specs)} (default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--format", choices=("plain", "json", "tsv", "value"), default="plain",
                        help="output format (tsv: a header line and one row; fields of multi-output metrics as "
                             "metric.field; tabs, line breaks and backslashes in cells escaped as \\t, \\n, \\r, "
                             "\\\\)")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    parser.add_argument("--memory", type=parse_memory, default="auto", metavar="auto|full|strip[:ROWS]",
                        help="full: the whole pair at once; strip: horizontal strips (ROWS body rows, default from "
                             "the memory budget) for metrics that support them; auto: full when it fits")
    parser.add_argument("--device", type=parse_device, default="auto",
                        help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.json_text import dumps
    from fusedsim.engine.scorer import Scorer
    from fusedsim.io.images import check_image_pair, read_image

    if args.example:
        if args.ref or args.dist:
            raise ValueError("give either --example or REF and DIST, not both")
        ref_path, dist_path = example_pair()
    elif args.ref and args.dist:
        ref_path, dist_path = Path(args.ref), Path(args.dist)
    else:
        raise ValueError("REF and DIST image files are required (or --example)")
    from fusedsim.cli.outputs import Output, refuse_outputs_that_are_inputs

    # standard output redirected onto an input (``>> ref.png``) would be appended to it
    refuse_outputs_that_are_inputs([Output("-", args.format, "standard output")],
                                   [("REF", str(ref_path)), ("DIST", str(dist_path))])
    specs_names = chosen_metrics(args.metric)
    specs = [get_metric(name) for name in specs_names]
    params = chosen_params(args.param, specs_names)
    ref = read_image(ref_path, "REF")
    dist = read_image(dist_path, "DIST")
    check_image_pair(ref, dist)
    check_min_size(specs, ref.width, ref.height)
    scorer = Scorer(specs_names, device=args.device, memory=args.memory, params=params, context="one-shot")
    result = scorer.score(ref, dist)
    for line in result.downgrades:
        print(f"fusedsim score: {line}", file=sys.stderr)
    results = result.values
    if args.format == "value":
        for value in results.values():
            for v in (value.values() if isinstance(value, dict) else (value,)):
                print(repr(float(v)))
    elif args.format == "json":
        print(dumps({"reference": str(ref_path), "distorted": str(dist_path), "data_range": ref.data_range,
                     "metrics": results, "params": params, "backend": result.backend,
                     "downgrades": result.downgrades}))
    elif args.format == "tsv":
        columns = {"reference": str(ref_path), "distorted": str(dist_path)}
        for name, value in results.items():
            columns.update({f"{name}.{k}": v for k, v in value.items()} if isinstance(value, dict)
                           else {name: value})
        columns["backend"] = result.backend
        from fusedsim.cli.tsv import format_line

        sys.stdout.write(format_line(columns))
        sys.stdout.write(format_line(v if isinstance(v, str) else repr(float(v)) for v in columns.values()))
    else:
        for name, value in results.items():
            if isinstance(value, dict):
                for field, v in value.items():
                    print(f"{name} {field}: {v:.6f}")
            else:
                print(f"{name}: {value:.6f}")
    return 0
