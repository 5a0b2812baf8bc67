"""``fusedsim warmup``: compile the kernels a metric set needs, in parallel, before the first real run
(:mod:`fusedsim.engine.warmup`)."""

from __future__ import annotations

import argparse
import os
import sys

from fusedsim.cli.common import chosen_metrics, parse_device, parse_image_metric, parse_size
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param
from fusedsim.core.device import DEVICE_HELP

DESCRIPTION = """\
Compile every kernel that `fusedsim batch` (or `score`) launches for the
metrics, on synthetic pairs of --size, one process per metric in parallel,
and keep them in Triton's on-disk cache (TRITON_CACHE_DIR, default
~/.triton/cache). Later runs on this machine, or on every machine that
shares the cache folder (set TRITON_CACHE_DIR to a shared path on each
node; `batch --engine ray` passes the driver's on to its workers), load the
kernels instead of compiling them. Where the package's recording of the
metrics' kernels covers --size (FUSEDSIM_KERNEL_SPECS names another, or
`none`; record one with `python -m fusedsim.engine.kernel_specs`), each
recorded kernel is compiled as a task of its own on every core instead,
and where the package carries those kernels compiled for this platform
(Triton build, compiler, GPU architecture: FUSEDSIM_KERNEL_ARCHIVE names
another archive, or `none`), they are unpacked into the cache instead.
Without a GPU the CPU paths run once."""


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("warmup", help="compile the kernels of a metric set in parallel (fills Triton's cache)",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help="metrics to compile, repeatable or comma-separated, or all (default: ssim)")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    parser.add_argument("--size", type=parse_size, default=(1024, 1024), metavar="S|WxH",
                        help="size of the synthetic pairs (default 1024: kernels are compiled per size class)")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.add_argument("--jobs", type=int, default=None,
                        help="processes compiling at once (default: one per task, at most the CPU count)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from fusedsim.engine.warmup import warmup

    metrics = chosen_metrics(args.metric)
    params = chosen_params(args.param, metrics)
    if args.jobs is not None and args.jobs < 1:
        raise ValueError(f"--jobs must be >= 1; got {args.jobs}")
    width, height = args.size
    results = warmup(metrics, args.device, height, width, args.jobs, params)
    cache = os.environ.get("TRITON_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".triton", "cache")
    failed = 0
    for r in results:
        state = f"error: {r.error}" if r.error else ("ready (installed compiled)" if r.precompiled else "ready")
        failed += bool(r.error)
        print(f"{r.metric:<14} {r.device:<7} {r.seconds:7.1f} s  {state}")
    print(f"kernel cache: {cache}", file=sys.stderr)
    return 1 if failed else 0
