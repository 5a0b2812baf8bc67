"""``fusedsim vmaf``: per-frame VMAF SSIM features (and PSNR) of a distorted clip against its reference.

Inputs are Y4M (layout read from the header) or raw planar YUV (``--width/--height/--pix-fmt``, applied to every raw
input). Frames stream from disk in batches, so memory does not grow with clip length. The output follows libvmaf's
JSON layout (``frames[i].frameNum/metrics``, ``pooled_metrics`` with min/max/mean/harmonic_mean, pooled as libvmaf
pools them), so tools written for ``vmaf --json`` read it; numbers are printed round-trip exact instead of
libvmaf's default ``%.6f``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fusedsim._device import DEVICE_HELP, check_device_name
from fusedsim.metrics.registry import list_metrics

if TYPE_CHECKING:  # numpy loads in run(): building the parser stays light
    import numpy as np

#: Features used when no ``--feature`` is given.
DEFAULT_FEATURES = ("ssim",)
# the libvmaf features are the registry's video metrics named vmaf:<feature> (reading it imports no torch)
_FEATURE_SPECS = {s.short_name: s for s in list_metrics("video") if s.name.startswith("vmaf:")}
#: Shown in ``--help``; ``fusedsim.vmaf.features`` enforces the same registry entries.
HELP_FEATURES = tuple(_FEATURE_SPECS)
#: Metric columns a feature must produce (libvmaf names); guards against a backend answering with another algorithm.
EXPECTED_METRICS = {name: spec.outputs for name, spec in _FEATURE_SPECS.items()}
_AUTO_BATCH_BYTES = 128 * 2**20  # per clip, when --batch-frames is not given
_MAX_AUTO_BATCH = 32


def _feature_lines() -> str:
    lines = []
    for name, spec in _FEATURE_SPECS.items():
        lines.append(f"  {name:<14} {spec.summary}")
        if spec.min_size > 1:
            lines.append(f"  {'':<14} (frames of {spec.min_size}x{spec.min_size} or more)")
    return "\n".join(lines)


DESCRIPTION = """\
Compare a distorted clip with its reference frame by frame using libvmaf's
SSIM features:
""" + _feature_lines() + """
Without --feature, ssim is computed. A feature is computed exactly as named
or not at all: a device that cannot run it is an error, never a substitute.

Inputs are Y4M (8/10/12/16-bit, 4:2:0/4:2:2/4:4:4, layout from the header)
or raw planar YUV, which needs --width, --height and --pix-fmt (yuv420p,
yuv422p, yuv444p or their 10le/12le/16le variants). Use - for standard input,
e.g. ffmpeg -i dist.mp4 -f yuv4mpegpipe - | fusedsim vmaf ref.y4m -
Both clips must have the same size and pixel format and, unless --frames
limits the comparison, the same number of frames.

Output: the pooled mean of each metric on standard output, or per-frame
values with --json/--csv in libvmaf's layouts (JSON: frames[].frameNum and
.metrics, pooled_metrics with min/max/mean/harmonic_mean; CSV: Frame,<metrics>).
Numbers are printed round-trip exact."""


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "vmaf",
        help="per-frame libvmaf SSIM and PSNR features of two Y4M or YUV clips",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("ref", metavar="REF", help="reference clip (.y4m, or raw .yuv with --width/--height/--pix-fmt)")
    parser.add_argument("dist", metavar="DIST", help="distorted clip, same size and pixel format as REF")
    raw = parser.add_argument_group("raw YUV input (ignored for Y4M, except that they must agree with its header)")
    raw.add_argument("--width", type=_positive_int, metavar="W", help="frame width in pixels")
    raw.add_argument("--height", type=_positive_int, metavar="H", help="frame height in pixels")
    raw.add_argument("--pix-fmt", metavar="FMT", help="pixel format, e.g. yuv420p or yuv420p10le (gives the bit depth)")
    parser.add_argument(
        "--feature", action="append", metavar="NAME", dest="features",
        help=f"feature to compute, repeatable: {', '.join(HELP_FEATURES)} (default: {', '.join(DEFAULT_FEATURES)})",
    )
    parser.add_argument("--device", type=_device, default="auto",
                        help=f"where to compute: {DEVICE_HELP} (default: auto, the GPU when available)")
    parser.add_argument("--json", metavar="OUT", help="write libvmaf-style JSON to OUT (- for standard output)")
    parser.add_argument("--csv", metavar="OUT", help="write per-frame CSV to OUT (- for standard output)")
    parser.add_argument("--frames", type=_non_negative_int, metavar="N",
                        help="compare only the first N frames (both clips need at least N)")
    parser.add_argument("--batch-frames", type=_positive_int, metavar="N",
                        help="frames read and scored per batch (default: as many as fit in 128 MiB, at most 32)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    parser.set_defaults(run=run)
    return parser


def _device(text: str) -> str:
    try:
        return check_device_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_int(text: str) -> int:
    value = _int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


# --------------------------------------------------------------------------------------------------------------
# feature registry


def _load_features():
    """The metric registry ``fusedsim.vmaf.features`` (imported on use: it pulls in torch)."""
    try:
        from fusedsim.vmaf import features
    except ImportError as exc:
        raise RuntimeError(f"the VMAF feature extractors (fusedsim.vmaf.features) cannot be imported: {exc}") from exc
    return features


def resolve_features(requested: Sequence[str] | None, supported: Sequence[str]) -> list[str]:
    """Requested feature names, checked against ``supported``, duplicates dropped, order kept."""
    names = list(requested) if requested else list(DEFAULT_FEATURES)
    unknown = [n for n in names if n not in supported]
    if unknown:
        hint = ""
        if any("=" in n for n in unknown):
            hint = " (feature options such as name=option=value are not supported)"
        raise ValueError(
            f"unknown feature{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}{hint}; "
            f"supported features: {', '.join(supported)}"
        )
    return list(dict.fromkeys(names))


# --------------------------------------------------------------------------------------------------------------
# pooling and writers (libvmaf layouts)


def pool(values: Iterable[float]) -> dict[str, float]:
    """min, max, mean and harmonic mean of a metric over frames, computed as libvmaf computes them.

    Sums run sequentially in frame order in double precision; min/max start from the first frame and take a later
    frame only if it compares smaller/larger (so a NaN after the first frame is skipped); the harmonic mean is
    libvmaf's ``n / sum(1 / (x + 1)) - 1`` (defined for scores of 0 too).
    """
    n = 0
    total = inv_total = 0.0
    lo = hi = math.nan
    for x in values:
        x = float(x)
        total += x
        inv_total += _div(1.0, x + 1.0)
        if n == 0 or x < lo:
            lo = x
        if n == 0 or x > hi:
            hi = x
        n += 1
    if n == 0:
        raise ValueError("cannot pool a metric over zero frames")
    return {"min": lo, "max": hi, "mean": total / n, "harmonic_mean": _div(float(n), inv_total) - 1.0}


def _div(a: float, b: float) -> float:
    """IEEE division (as in C): x/0 is +-inf, 0/0 and nan operands give nan."""
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0.0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def format_number(x: float) -> str:
    """A JSON number that reads back as exactly ``x`` (integral values without ``.0``, as ``%.17g`` prints them);
    ``null`` for NaN and infinities, as libvmaf writes them."""
    x = float(x)
    if not math.isfinite(x):
        return "null"
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def _csv_number(x: float) -> str:
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return format_number(x)


def format_json(metrics: dict[str, np.ndarray], *, version: str, fps: float | None, first_frame: int = 0) -> str:
    """libvmaf's ``--json`` document for per-frame ``metrics`` (name -> values, all of the same length)."""
    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    out = ["{\n", f'  "version": {_json_str(version)},\n']
    fps_text = f"{fps:.2f}" if fps is not None and math.isfinite(fps) else "null"
    out.append(f'  "fps": {fps_text},\n')
    out.append('  "frames": [')
    columns = [metrics[name] for name in names]
    for i in range(n):
        out.append(",\n" if i else "\n")
        out.append(f'    {{\n      "frameNum": {first_frame + i},\n      "metrics": {{\n')
        for j, name in enumerate(names):
            sep = "," if j < len(names) - 1 else ""
            out.append(f"        {_json_str(name)}: {format_number(columns[j][i])}{sep}\n")
        out.append("      }\n    }")
    out.append("\n  ],\n")
    out.append('  "pooled_metrics": {')
    for j, name in enumerate(names):
        out.append(",\n" if j else "\n")
        pooled = pool(columns[j])
        body = ",\n".join(f'      "{key}": {format_number(value)}' for key, value in pooled.items())
        out.append(f"    {_json_str(name)}: {{\n{body}\n    }}")
    out.append("\n  },\n")
    out.append('  "aggregate_metrics": {\n  }\n}\n')
    return "".join(out)


def format_csv(metrics: dict[str, np.ndarray], *, first_frame: int = 0) -> str:
    """libvmaf's ``--csv`` table: a ``Frame,<metric>...`` header, then one row per frame."""
    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    lines = [",".join(["Frame", *names])]
    columns = [metrics[name] for name in names]
    for i in range(n):
        lines.append(",".join([str(first_frame + i), *(_csv_number(col[i]) for col in columns)]))
    return "\n".join(lines) + "\n"


def format_text(metrics: dict[str, np.ndarray]) -> str:
    """One ``name: pooled mean`` line per metric."""
    width = max((len(name) for name in metrics), default=0)
    return "".join(f"{name + ':':<{width + 1}} {format_number(pool(v)['mean'])}\n" for name, v in metrics.items())


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


def write_output(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file beside it, then rename), or to stdout for ``-``."""
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)  # mode follows the umask
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _check_output_path(path: str | None, option: str) -> None:
    if path is None or path == "-":
        return
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a directory")
    parent = target.parent
    if not parent.is_dir():
        raise ValueError(f"{option} {path}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"{option} {path}: folder {parent} is not writable")


# --------------------------------------------------------------------------------------------------------------
# the command


def _auto_batch_frames(frame_bytes: int) -> int:
    return max(1, min(_MAX_AUTO_BATCH, _AUTO_BATCH_BYTES // max(1, frame_bytes)))


def compute(ref_reader, dist_reader, features: Sequence[str], extract: Callable, *, device: str = "auto",
            frames: int | None = None, batch_frames: int | None = None,
            progress: Callable[[int], None] | None = None) -> dict[str, np.ndarray]:
    """Stream both clips in batches and return per-frame metrics (libvmaf name -> float64 array).

    ``extract(feature, ref_batch, dist_batch, device=...)`` is the registry function. Clips must share their format;
    their frame counts must match unless ``frames`` limits the comparison (both then need at least that many).
    """
    rf, df = ref_reader.fmt, dist_reader.fmt
    if rf != df:
        raise ValueError(
            f"reference {ref_reader.path} is {rf.describe()} but distorted {dist_reader.path} is {df.describe()}; "
            "both clips must have the same size and pixel format"
        )
    n_ref, n_dist = ref_reader.frame_count, dist_reader.frame_count
    if frames is not None:
        for role, reader, n in (("reference", ref_reader, n_ref), ("distorted", dist_reader, n_dist)):
            if n is not None and n < frames:
                raise ValueError(f"--frames {frames}: {role} {reader.path} has only {n} frames")
    elif n_ref is not None and n_dist is not None and n_ref != n_dist:
        raise ValueError(
            f"reference {ref_reader.path} has {n_ref} frames but distorted {dist_reader.path} has {n_dist}; "
            "pass --frames N to compare the first N frames"
        )
    import numpy as np

    expected_total = frames if frames is not None else (n_ref if n_ref is not None else n_dist)
    if expected_total == 0:
        raise ValueError("no frames to compare" + ("" if frames is not None else f": {ref_reader.path} is empty"))
    bf = batch_frames or _auto_batch_frames(rf.frame_bytes)

    columns: dict[str, list[np.ndarray]] = {}
    done = 0
    # each clip is read one batch ahead on its own thread while the current batch is scored: end to end the
    # command is bound by reading the files (benchmarks/README.md), so overlapping the reads is what pays
    ref_batches = _read_ahead(ref_reader.batches(bf, limit=frames))
    dist_batches = _read_ahead(dist_reader.batches(bf, limit=frames))
    while True:
        # (not zip_longest: its reused result tuple would keep the previous batch alive during the next read)
        ref_batch = next(ref_batches, None)
        dist_batch = next(dist_batches, None)
        if ref_batch is None and dist_batch is None:
            break
        if ref_batch is None or dist_batch is None or ref_batch.n != dist_batch.n:
            n_r = done + (ref_batch.n if ref_batch is not None else 0)
            n_d = done + (dist_batch.n if dist_batch is not None else 0)
            role, reader = ("reference", ref_reader) if n_r < n_d else ("distorted", dist_reader)
            need = f"the {frames} frames asked for" if frames is not None else "as many frames as the other clip"
            raise ValueError(f"{role} {reader.path} ended after {min(n_r, n_d)} frames; it needs {need}")
        batch_names: list[str] = []
        for feature in features:
            out = extract(feature, ref_batch, dist_batch, device=device)
            _check_extract_output(feature, out, ref_batch.n)
            for name, values in out.items():
                if name in batch_names:
                    raise RuntimeError(f"metric {name!r} is produced by more than one feature")
                batch_names.append(name)
                columns.setdefault(name, []).append(np.asarray(values, dtype=np.float64).reshape(-1))
        if batch_names != list(columns):
            raise RuntimeError(
                f"frames {done}..: the features produced {', '.join(batch_names)} after {', '.join(columns)}"
            )
        done += ref_batch.n
        if progress is not None:
            progress(ref_batch.n)
        del ref_batch, dist_batch, out  # free this batch before the readers allocate the next one
    if done == 0:
        raise ValueError(f"no frames to compare: {ref_reader.path} is empty")
    if frames is not None and done < frames:
        raise ValueError(f"--frames {frames}: both clips ended after {done} frames")
    return {name: np.concatenate(parts) for name, parts in columns.items()}


def _read_ahead(batches: Iterator) -> Iterator:
    """Yield the items of ``batches`` while a background thread already reads the next one (at most two batches
    of a clip are alive at a time)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(next, batches, None)
        while True:
            item = pending.result()
            if item is None:
                return
            pending = pool.submit(next, batches, None)
            yield item
            del item


def _check_extract_output(feature: str, out, n: int) -> None:
    import numpy as np

    if not isinstance(out, dict):
        raise RuntimeError(f"feature {feature!r} returned {type(out).__name__}, expected a dict of per-frame arrays")
    missing = [m for m in EXPECTED_METRICS.get(feature, ()) if m not in out]
    if missing:
        got = ", ".join(out) or "nothing"
        raise RuntimeError(f"feature {feature!r} did not produce {', '.join(missing)} (got {got})")
    for name, values in out.items():
        shape = np.shape(values)
        if shape != (n,):
            raise RuntimeError(f"feature {feature!r} returned {name} with shape {shape}, expected ({n},)")


def run(args: argparse.Namespace) -> int:
    from fusedsim import __version__
    from fusedsim.io.video import open_video

    if args.ref == "-" and args.dist == "-":
        raise ValueError("only one of REF and DIST can be standard input (-)")
    if args.json == "-" and args.csv == "-":
        raise ValueError("only one of --json and --csv can write to standard output (-)")
    _check_output_path(args.json, "--json")
    _check_output_path(args.csv, "--csv")

    registry = _load_features()
    features = resolve_features(args.features, tuple(registry.SUPPORTED_FEATURES))
    if args.device != "auto":
        from fusedsim._device import resolve_device

        resolve_device(args.device)  # a missing GPU is reported before any file is read

    raw = {"width": args.width, "height": args.height, "pix_fmt": args.pix_fmt}
    with open_video(args.ref, **raw) as ref_reader, open_video(args.dist, **raw) as dist_reader:
        total = args.frames
        if total is None:
            try:
                total = ref_reader.frame_count if ref_reader.frame_count is not None else dist_reader.frame_count
            except ValueError:
                total = None  # compute() reports it with the clip's name
        from tqdm import tqdm

        show = not args.quiet and sys.stderr.isatty()
        start = time.perf_counter()
        with tqdm(total=total, unit="frame", desc="vmaf", file=sys.stderr, disable=not show, leave=False) as bar:
            metrics = compute(
                ref_reader, dist_reader, features, registry.extract, device=args.device, frames=args.frames,
                batch_frames=args.batch_frames, progress=bar.update,
            )
        elapsed = time.perf_counter() - start

    n = len(next(iter(metrics.values())))
    fps = n / elapsed if elapsed > 0 else None
    if args.json:
        write_output(args.json, format_json(metrics, version=f"fusedsim-{__version__}", fps=fps))
    if args.csv:
        write_output(args.csv, format_csv(metrics))
    if not args.json and not args.csv:
        sys.stdout.write(format_text(metrics))
    return 0
