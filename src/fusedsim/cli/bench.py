"""``fusedsim bench``: measure time and peak memory per pixel of each metric on each backend, for the chooser
(:mod:`fusedsim.engine.chooser`); the cache is :mod:`fusedsim.engine.bench_cache`."""

from __future__ import annotations

import argparse
import sys

from fusedsim.cli.common import chosen_metrics, parse_device, parse_image_metric
from fusedsim.core.device import DEVICE_HELP

DEFAULT_METRICS = ("ssim", "ms-ssim", "psnr")
DEFAULT_SIZES = (256, 512, 1024)

DESCRIPTION = """\
Measure each metric on each backend (CPU and GPU, full mode and strips) at a
few square sizes, on random pairs (not zeros): one warm-up call, then the
median of --repeats calls. Peak memory is the allocator's peak on a GPU and
the sampled growth of the resident set on the CPU (approximate). The results
replace this machine's bench cache (in the user cache folder, or
FUSEDSIM_CACHE_DIR), which `fusedsim score` and the engine's chooser read;
the cache is stale after a week or when the GPU or its driver changes."""


#: The largest square side measured: 32768² pixels (1 Gpx) is past any image the chooser plans for, and a larger
#: side would be refused by the allocator with a message that does not name --sizes.
MAX_SIDE = 32768


def _pair_bytes(side: int, channels: int) -> int:
    """Bytes of the random float32 pair one measurement holds before the metric's own working set."""
    return 2 * 4 * channels * side * side


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"--sizes must be comma-separated positive side lengths; got {text!r}")
    if max(sizes) > MAX_SIDE:
        side = max(sizes)
        raise argparse.ArgumentTypeError(f"side {side} is over the limit of {MAX_SIDE} pixels (a {side}x{side} RGB "
                                         f"pair alone needs {_pair_bytes(side, 3) / 1e9:.1f} GB)")
    return sizes


def check_sizes_fit(sizes: list[int], channels: int, devices: list) -> None:
    """Refuse, before any measurement, a side whose input pair alone exceeds a device's memory budget
    (:func:`fusedsim.engine.memory.budget_bytes`), naming the budget, instead of the allocator's message."""
    from fusedsim.engine.memory import budget_bytes

    for dev in devices:
        budget = budget_bytes(dev)
        for side in sizes:
            need = _pair_bytes(side, channels)
            if need > budget:
                raise ValueError(f"--sizes {side}: a {side}x{side} pair needs {need / 1e9:.2f} GB before the "
                                 f"metric's work, over the {dev.type} memory budget of {budget / 1e9:.2f} GB; "
                                 "give smaller sizes")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer; got {text!r}")
    return int(text)


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("bench", help="measure metrics per backend into the bench cache used by the chooser",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help=f"metrics to measure, or all (default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--sizes", type=_sizes, default=list(DEFAULT_SIZES), metavar="S[,S...]",
                        help=f"square sides in pixels (default: {','.join(map(str, DEFAULT_SIZES))}); sizes below "
                             "a metric's minimum are skipped")
    parser.add_argument("--device", type=parse_device, default="auto",
                        help=f"{DEVICE_HELP}; auto: the CPU and, when present, the first GPU")
    parser.add_argument("--strip-rows", type=_positive, default=256, help="strip body rows measured (default 256)")
    parser.add_argument("--repeats", type=_positive, default=3, help="timed calls per measurement (median)")
    parser.add_argument("--channels", type=_positive, default=3, choices=(1, 3), help="1 (grey) or 3 (RGB)")
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on standard error (a bar on a terminal, else a line every few seconds)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import time

    from fusedsim.cli.json_text import dumps
    from fusedsim.cli.progress import Progress
    from fusedsim.engine.bench_cache import BenchCache, save_bench_cache
    from fusedsim.engine.machine import cache_path, machine_identity
    from fusedsim.engine.measure import cold_start_seconds, devices_for, measure
    from fusedsim.metrics.registry import get_metric

    names = chosen_metrics(args.metric, DEFAULT_METRICS)
    specs = [get_metric(n) for n in names]
    devices = devices_for(args.device)
    check_sizes_fit(args.sizes, args.channels, devices)
    identity = machine_identity()
    cache = BenchCache(identity=identity, created=time.time())
    cache.cold_seconds = {dev.type: cold_start_seconds(dev) for dev in devices}
    skipped: list[str] = []
    cases = [(spec, dev, side) for spec in specs for dev in devices for side in args.sizes]
    with Progress(len(cases), desc="bench", unit="measurement", enabled=not args.quiet) as progress:
        for spec, dev, side in cases:
            if side < spec.min_size:
                skipped.append(f"{spec.name} at {side}px: below its minimum size {spec.min_size}")
            else:
                for m, note in measure(spec, dev, side, args.channels, args.strip_rows, args.repeats):
                    if m is not None:
                        cache.measurements.append(m)
                        if args.format == "plain":
                            progress.write(f"{m.metric:<12} {m.backend:<16} {side:>5}px  {m.seconds * 1e3:10.3f} ms  "
                                           f"{m.seconds / m.values * 1e9:8.3f} ns/value  "
                                           f"{m.peak_bytes / m.values:8.1f} B/value", file=sys.stdout)
                    if note:
                        skipped.append(note)
            progress.update()
    save_bench_cache(cache)
    path = cache_path("bench", identity)
    if args.format == "json":
        print(dumps({**cache.to_dict(), "path": str(path), "skipped": skipped}))
    else:
        for line in skipped:
            print(f"skipped: {line}", file=sys.stderr)
        print("cold start: " + ", ".join(f"{k} {v:.2f} s" for k, v in cache.cold_seconds.items()))
        print(f"bench cache written to {path}")
    return 0
