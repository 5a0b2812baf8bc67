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
from typing import TYPE_CHECKING

from fusedsim.core.device import DEVICE_HELP, check_device_name
from fusedsim.metrics.registry import list_metrics

if TYPE_CHECKING:  # numpy loads in run(): building the parser stays light
    import numpy as np

#: Features used when no ``--feature`` is given.
DEFAULT_FEATURES = ("ssim",)
# the libvmaf features are the registry's video metrics named vmaf:<feature> (reading it imports no torch)
_FEATURE_SPECS = {s.short_name: s for s in list_metrics("video") if s.name.startswith("vmaf:")}
#: Shown in ``--help``; ``fusedsim.families.vmaf.features`` enforces the same registry entries.
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
fusedsim has no VMAF model: it computes only the requested features (as
libvmaf does with -n/--no_prediction); without -n it says so on stderr.

libvmaf's command line works unchanged when it asks only for these features:
  fusedsim vmaf -r ref.yuv -d dist.yuv -w 576 -h 324 -p 420 -b 8 \\
      --feature ssim -n -q --json -o out.json
and so does the short form: fusedsim vmaf REF DIST [options].
-h is the height, as in libvmaf; help is --help.

Inputs are Y4M (8/10/12/16-bit, 4:2:0/4:2:2/4:4:4, layout from the header)
or raw planar YUV, which needs --width and --height and either -p/-b
(libvmaf's 420/422/444 and 8/10/12/16) or --pix-fmt (yuv420p, yuv422p,
yuv444p or their 10le/12le/16le variants). Use - for standard input,
e.g. ffmpeg -i dist.mp4 -f yuv4mpegpipe - | fusedsim vmaf ref.y4m -
Both clips must have the same size and pixel format and, unless --frames
limits the comparison, the same number of frames.

Outputs, in libvmaf's layouts with round-trip exact numbers:
  -o PATH [--xml|--json|--csv]  libvmaf's form: one file, XML by default
  --xml PATH, --json PATH, --csv PATH  one file per format, combinable
PATH - (or /dev/stdout) is standard output. Every output path is checked
before the computation; all outputs are written or none is changed, and if
writing fails after the run the results are saved and the error says where.
Without an output, the pooled mean of each metric goes to standard output."""

#: libvmaf options fusedsim does not have, with the reason given when one is used.
_REFUSED_OPTIONS = {
    ("-m", "--model"): "fusedsim has no VMAF model; pass -n/--no_prediction and request features with --feature",
    ("--aom_ctc",): "the AOM CTC presets need the VMAF model and features fusedsim does not have",
    ("--nflx_ctc",): "the Netflix CTC preset needs the VMAF model and features fusedsim does not have",
    ("--sub",): "the subtitle output is not supported; use --xml, --json or --csv",
    ("--cpumask",): "fusedsim has no CPU instruction-set mask (its results do not depend on one)",
    ("--gpumask",): "fusedsim has no GPU operation mask; choose the device with --device",
    ("--frame_skip_dist",): "skipping frames is not supported yet; trim the clip first (e.g. ffmpeg -vf trim)",
    ("--skip_ref_frame",): "this is not a libvmaf option (libvmaf's is --frame_skip_ref); skipping frames is not "
                           "supported yet, trim the clip first (e.g. ffmpeg -vf trim)",
}
_FORMAT_FLAG = object()  # --xml/--json/--csv given without a path: the format of -o/--output


class _Refused(argparse.Action):
    def __init__(self, option_strings, dest, reason="", **kwargs):
        self.reason = reason
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string}: {self.reason}")


class _OutputOption(argparse.Action):
    """--xml/--json/--csv [PATH]: with a path, write that format there; without, set the format of -o."""

    def __call__(self, parser, namespace, values, option_string=None):
        kind = option_string.lstrip("-")
        if values is _FORMAT_FLAG:
            namespace.format_flags = [*(getattr(namespace, "format_flags", None) or []), kind]
        else:
            namespace.format_paths = [*(getattr(namespace, "format_paths", None) or []), (kind, values)]


def add_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        "vmaf",
        help="per-frame libvmaf SSIM and PSNR features of two Y4M or YUV clips",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,  # -h is the height, as in libvmaf
        allow_abbrev=False,
    )
    parser.add_argument("--help", action="help", help="show this help message and exit")
    parser.add_argument("paths", nargs="*", metavar="REF DIST",
                        help="reference and distorted clips (or give them with -r/-d)")
    parser.add_argument("-r", "--reference", metavar="PATH", help="reference clip (.y4m, or raw .yuv)")
    parser.add_argument("-d", "--distorted", metavar="PATH", help="distorted clip, same size and format as the "
                                                                  "reference")
    raw = parser.add_argument_group("raw YUV input (ignored for Y4M, except that they must agree with its header)")
    raw.add_argument("-w", "--width", type=_positive_int, metavar="W", help="frame width in pixels")
    raw.add_argument("-h", "--height", type=_positive_int, metavar="H", help="frame height in pixels")
    raw.add_argument("-p", "--pixel_format", type=_chroma, metavar="420|422|444",
                     help="chroma subsampling, as in libvmaf (with -b)")
    raw.add_argument("-b", "--bitdepth", type=_bitdepth, metavar="8|10|12|16", help="bits per sample (with -p)")
    raw.add_argument("--pix-fmt", metavar="FMT", help="or: pixel format, e.g. yuv420p or yuv420p10le")
    parser.add_argument(
        "--feature", action="append", metavar="NAME", dest="features",
        help=f"feature to compute, repeatable: {', '.join(HELP_FEATURES)} (default: {', '.join(DEFAULT_FEATURES)}); "
             "libvmaf's NAME=option=value settings are not supported",
    )
    parser.add_argument("--device", type=_device, default="auto",
                        help=f"where to compute: {DEVICE_HELP} (default: auto, the GPU when available)")
    out = parser.add_argument_group("outputs")
    out.add_argument("-o", "--output", metavar="PATH", help="write to PATH in the format of --xml (default), "
                                                            "--json or --csv given without a path")
    for kind in ("xml", "json", "csv"):
        out.add_argument(f"--{kind}", action=_OutputOption, nargs="?", const=_FORMAT_FLAG, metavar="PATH",
                         help=f"without PATH: -o writes {kind.upper()}; with PATH: write {kind.upper()} to PATH")
    parser.set_defaults(format_flags=None, format_paths=None)
    parser.add_argument("--pairs", metavar="FILE",
                        help="score many clip pairs in one process (start-up paid once): one 'REF DIST OUTPUT' line "
                             "per pair (shell quoting, # comments); OUTPUT in the format of a bare --xml (default), "
                             "--json or --csv; a failing pair is reported and the others still run")
    parser.add_argument("--frames", type=_non_negative_int, metavar="N",
                        help="compare exactly the first N frames (both clips need at least N)")
    parser.add_argument("--frame_cnt", type=_non_negative_int, metavar="N",
                        help="as in libvmaf: compare at most N frames (fewer when the clips are shorter)")
    parser.add_argument("--frame_skip_ref", type=_non_negative_int, metavar="N",
                        help="as in libvmaf; only 0 is supported")
    parser.add_argument("--subsample", type=_non_negative_int, metavar="N",
                        help="as in libvmaf; only 0 and 1 (every frame) are supported")
    parser.add_argument("--threads", type=_non_negative_int, metavar="N",
                        help="CPU threads for computing on the CPU (default 0: automatic)")
    parser.add_argument("--batch-frames", type=_positive_int, metavar="N",
                        help="frames read and scored per batch (default: as many as fit in 128 MiB, at most 32)")
    parser.add_argument("-n", "--no_prediction", action="store_true",
                        help="features only, no VMAF model (what fusedsim always does; silences the note)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    from fusedsim import __version__

    parser.add_argument("-v", "--version", action="version", version=f"fusedsim-{__version__}",
                        help="print the version and exit")
    for names, reason in _REFUSED_OPTIONS.items():
        parser.add_argument(*names, action=_Refused, reason=reason, nargs="?", help=argparse.SUPPRESS)
    parser.set_defaults(run=run)
    return parser


def _chroma(text: str) -> str:
    if text not in ("420", "422", "444"):
        raise argparse.ArgumentTypeError(f"expected 420, 422 or 444, got {text!r}")
    return text


def _bitdepth(text: str) -> int:
    value = _int(text)
    if value not in (8, 10, 12, 16):
        raise argparse.ArgumentTypeError(f"expected 8, 10, 12 or 16, got {text!r}")
    return value


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
    """The metric registry ``fusedsim.families.vmaf.features`` (imported on use: it pulls in torch)."""
    try:
        from fusedsim.families.vmaf import features
    except ImportError as exc:
        raise RuntimeError(f"the VMAF feature extractors (fusedsim.families.vmaf.features) cannot be imported: {exc}") from exc
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


def _text_number(x: float) -> str:
    """A CSV cell or XML attribute value that ``float()`` reads back as exactly ``x`` (nan/inf/-inf for
    non-finite values)."""
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
        lines.append(",".join([str(first_frame + i), *(_text_number(col[i]) for col in columns)]))
    return "\n".join(lines) + "\n"


def format_xml(metrics: dict[str, np.ndarray], *, version: str, width: int, height: int, fps: float | None,
               first_frame: int = 0) -> str:
    """libvmaf's default (``--xml``) document: ``<VMAF version>`` with ``params`` (qualityWidth/qualityHeight),
    ``fyi`` (fps), ``frames`` (one ``frame`` element per frame, a ``frameNum`` attribute and one attribute per
    metric), ``pooled_metrics`` (``metric`` elements: name, min, max, mean, harmonic_mean) and
    ``aggregate_metrics``; numbers round-trip exact instead of libvmaf's ``%.6f``."""
    from xml.sax.saxutils import quoteattr

    names = list(metrics)
    n = len(next(iter(metrics.values()))) if metrics else 0
    columns = [metrics[name] for name in names]
    fps_text = f"{fps:.2f}" if fps is not None and math.isfinite(fps) else "nan"
    out = [f"<VMAF version={quoteattr(version)}>\n",
           f'  <params qualityWidth="{int(width)}" qualityHeight="{int(height)}" />\n',
           f'  <fyi fps="{fps_text}" />\n', "  <frames>\n"]
    for i in range(n):
        cells = "".join(f'{name}="{_text_number(col[i])}" ' for name, col in zip(names, columns))
        out.append(f'    <frame frameNum="{first_frame + i}" {cells}/>\n')
    out.append("  </frames>\n  <pooled_metrics>\n")
    for name, col in zip(names, columns):
        cells = "".join(f'{key}="{_text_number(value)}" ' for key, value in pool(col).items())
        out.append(f"    <metric name={quoteattr(name)} {cells}/>\n")
    out.append("  </pooled_metrics>\n  <aggregate_metrics />\n</VMAF>\n")
    return "".join(out)


def format_text(metrics: dict[str, np.ndarray]) -> str:
    """One ``name: pooled mean`` line per metric."""
    width = max((len(name) for name in metrics), default=0)
    return "".join(f"{name + ':':<{width + 1}} {format_number(pool(v)['mean'])}\n" for name, v in metrics.items())


def _json_str(text: str) -> str:
    import json

    return json.dumps(text)


# --------------------------------------------------------------------------------------------------------------
# the command


def _auto_batch_frames(frame_bytes: int) -> int:
    return max(1, min(_MAX_AUTO_BATCH, _AUTO_BATCH_BYTES // max(1, frame_bytes)))


def compute(ref_reader, dist_reader, features: Sequence[str], extract: Callable, *, device: str = "auto",
            frames: int | None = None, batch_frames: int | None = None,
            progress: Callable[[int], None] | None = None, frame_cnt: int | None = None) -> dict[str, np.ndarray]:
    """Stream both clips in batches and return per-frame metrics (libvmaf name -> float64 array).

    ``extract(feature, ref_batch, dist_batch, device=...)`` is the registry function. Clips must share their format;
    their frame counts must match unless ``frames`` limits the comparison (both then need at least that many).
    ``frame_cnt`` (libvmaf's ``--frame_cnt``) compares at most that many frames: clips of the same length that are
    shorter are compared whole.
    """
    if frame_cnt is not None and frames is None:
        n_ref, n_dist = ref_reader.frame_count, dist_reader.frame_count
        if n_ref is not None and n_dist is not None and min(n_ref, n_dist) < frame_cnt:
            if n_ref != n_dist:
                raise ValueError(
                    f"--frame_cnt {frame_cnt}: reference {ref_reader.path} has {n_ref} frames but distorted "
                    f"{dist_reader.path} has {n_dist}"
                )
        elif n_ref is not None or n_dist is not None:
            frames = frame_cnt
        else:  # two pipes: read up to frame_cnt, and accept fewer
            return _compute(ref_reader, dist_reader, features, extract, device=device, frames=None,
                           batch_frames=batch_frames, progress=progress, _limit=frame_cnt)
    return _compute(ref_reader, dist_reader, features, extract, device=device, frames=frames,
                   batch_frames=batch_frames, progress=progress, _limit=frames)


def _compute(ref_reader, dist_reader, features: Sequence[str], extract: Callable, *, device: str = "auto",
             frames: int | None = None, batch_frames: int | None = None,
             progress: Callable[[int], None] | None = None, _limit: int | None = None) -> dict[str, np.ndarray]:
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
    streamed = _score_streamed(ref_reader, dist_reader, features, extract, device, expected_total, batch_frames,
                               progress)
    if streamed is not None:
        return streamed

    columns: dict[str, list[np.ndarray]] = {}
    done = 0
    # each clip is read one batch ahead on its own thread while the current batch is scored: end to end the
    # command is bound by reading the files (benchmarks/README.md), so overlapping the reads is what pays
    ref_batches = _read_ahead(ref_reader.batches(bf, limit=_limit))
    dist_batches = _read_ahead(dist_reader.batches(bf, limit=_limit))
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


def _score_streamed(ref_reader, dist_reader, features, extract, device, frames, batch_frames, progress):
    """On a GPU, with two regular files and the registry's features: the streamed path
    (:mod:`fusedsim.families.vmaf.device_scoring`, same values, reads only the planes the features need); else None."""
    if not (ref_reader.seekable and dist_reader.seekable and frames):
        return None
    from fusedsim.families.vmaf import features as registry
    from fusedsim.families.vmaf.features import resolve_device

    dev = resolve_device(device)
    if dev.type != "cuda" or extract is not registry.extract:
        return None
    from fusedsim.families.vmaf.device_scoring import score_on_device

    return score_on_device(ref_reader, dist_reader, features, device=dev, frames=frames, batch_frames=batch_frames,
                           progress=progress)


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


_MODEL_NOTE = ("fusedsim vmaf: note: the VMAF model is not computed (fusedsim has no VMAF model); only the "
               "requested features are reported, as libvmaf does with -n/--no_prediction. Pass -n to silence this "
               "note.\n")


def _inputs(args: argparse.Namespace) -> tuple[str, str]:
    """REF and DIST from -r/-d and the positional paths (-r/-d take their role; positionals fill the rest)."""
    paths = list(args.paths or [])
    roles = {"reference": args.reference, "distorted": args.distorted}
    for role, value in roles.items():
        if value is None and paths:
            roles[role] = paths.pop(0)
    if paths:
        given = " and ".join(f"-{r[0]}" for r in ("reference", "distorted") if getattr(args, r) is not None)
        extra = " ".join(paths)
        raise ValueError(f"too many clips: {extra!r} besides {given or 'REF and DIST'}; give the reference and "
                         "the distorted clip either as REF DIST or as -r REF -d DIST")
    missing = [f"the {r} clip ({'REF or -r' if r == 'reference' else 'DIST or -d'})" for r, v in roles.items()
               if v is None]
    if missing:
        raise ValueError(f"missing {' and '.join(missing)}")
    return roles["reference"], roles["distorted"]


def _raw_options(args: argparse.Namespace) -> dict:
    pix_fmt = args.pix_fmt
    if args.pixel_format is not None or args.bitdepth is not None:
        if args.pixel_format is None or args.bitdepth is None:
            given = "-p/--pixel_format" if args.pixel_format is not None else "-b/--bitdepth"
            needed = "-b/--bitdepth" if args.pixel_format is not None else "-p/--pixel_format"
            raise ValueError(f"{given} needs {needed} too (as in libvmaf)")
        from_pb = (f"yuv{args.pixel_format}p" if args.bitdepth == 8
                   else f"yuv{args.pixel_format}p{args.bitdepth}le")
        if pix_fmt is not None and pix_fmt != from_pb:
            raise ValueError(f"--pix-fmt {pix_fmt} disagrees with -p {args.pixel_format} -b {args.bitdepth} "
                             f"({from_pb}); give one or the other")
        pix_fmt = from_pb
    return {"width": args.width, "height": args.height, "pix_fmt": pix_fmt}


def _outputs(args: argparse.Namespace) -> list:
    """The outputs asked for: -o with the format of a bare --xml/--json/--csv (XML by default, as in libvmaf), and
    --xml/--json/--csv PATH (today's form). Checked (writable, no directory, no path twice) before any work."""
    from fusedsim.cli._outputs import Output, check_outputs

    flags = list(dict.fromkeys(args.format_flags or []))
    outputs = [Output(path, kind, f"--{kind}") for kind, path in (args.format_paths or [])]
    if args.output is not None:
        if len(flags) > 1:
            raise ValueError(f"-o/--output takes one format, got {' and '.join('--' + f for f in flags)}; "
                             "write more formats with --json PATH, --csv PATH or --xml PATH")
        kind = flags[0] if flags else "xml"
        outputs.insert(0, Output(args.output, kind, "-o"))
    elif flags:
        raise ValueError(f"--{flags[0]} without a path writes the format of -o/--output PATH, and no -o was given "
                         f"(or write --{flags[0]} PATH)")
    check_outputs(outputs)
    return outputs


def run(args: argparse.Namespace) -> int:
    # every usage check first: a bad command line is answered before torch, numpy or a file is touched
    if args.pairs is not None:
        jobs = _pair_jobs(args)
    else:
        ref, dist = _inputs(args)
        jobs = [(ref, dist, _outputs(args))]
    for ref, dist, _ in jobs:
        if ref == "-" and dist == "-":
            raise ValueError("only one of REF and DIST can be standard input (-)")
    raw = _raw_options(args)
    if args.frames is not None and args.frame_cnt is not None:
        raise ValueError("give --frames (exactly N frames) or --frame_cnt (at most N frames), not both")
    if args.subsample not in (None, 0, 1):
        raise ValueError(f"--subsample {args.subsample}: only every frame (0 or 1) is supported")
    if args.frame_skip_ref not in (None, 0):
        raise ValueError(f"--frame_skip_ref {args.frame_skip_ref}: skipping frames is not supported yet; "
                         "trim the clip first (e.g. ffmpeg -vf trim)")
    with_options = [f for f in args.features or () if "=" in f]
    if with_options:
        raise ValueError(
            f"--feature {with_options[0]}: feature options (name=option=value) are not supported; give the name "
            f"alone; supported features: {', '.join(HELP_FEATURES)}"
        )

    registry = _load_features()
    features = resolve_features(args.features, tuple(registry.SUPPORTED_FEATURES))
    if args.device != "auto":
        from fusedsim.core.device import resolve_device

        resolve_device(args.device)  # a missing GPU is reported before any file is read
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
        # the CPU path of integer_ssim is a numba kernel: size its thread pool without importing numba here
        # (a GPU run never needs it); if something already imported it, set its threads directly
        numba = sys.modules.get("numba")
        if numba is None:
            os.environ["NUMBA_NUM_THREADS"] = str(args.threads)
        else:
            numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    if args.pairs is None:
        ref, dist, outputs = jobs[0]
        _score_and_write(args, ref, dist, outputs, raw, features, registry)
        _model_note(args)
        return 0
    failed = []
    for i, (ref, dist, outputs) in enumerate(jobs, 1):
        try:
            _score_and_write(args, ref, dist, outputs, raw, features, registry, label=f"pair {i}/{len(jobs)}")
        except (ValueError, OSError) as exc:  # one bad pair does not stop the others; each is reported
            failed.append(i)
            sys.stderr.write(f"fusedsim vmaf: pair {i} ({ref}, {dist}): {exc}\n")
    _model_note(args)
    if failed:
        sys.stderr.write(f"fusedsim vmaf: {len(failed)} of {len(jobs)} pairs failed (lines "
                         f"{', '.join(map(str, failed))} of {args.pairs}); the others were written\n")
        return 1
    return 0


def _score_and_write(args, ref: str, dist: str, outputs: list, raw: dict, features: list[str], registry,
                     label: str = "vmaf") -> None:
    """Score one clip pair and write its outputs (or the text table on stdout when there are none)."""
    from fusedsim import __version__
    from fusedsim.io.video import open_video

    with open_video(ref, **raw) as ref_reader, open_video(dist, **raw) as dist_reader:
        total = args.frames if args.frames is not None else args.frame_cnt
        try:
            counts = [c for c in (ref_reader.frame_count, dist_reader.frame_count) if c is not None]
            total = min([*counts, *([total] if total is not None else [])]) if counts or total else total
        except ValueError:
            pass  # compute() reports it with the clip's name
        from tqdm import tqdm

        show = not args.quiet and sys.stderr.isatty()
        start = time.perf_counter()
        with tqdm(total=total, unit="frame", desc=label, file=sys.stderr, disable=not show, leave=False) as bar:
            metrics = compute(
                ref_reader, dist_reader, features, registry.extract, device=args.device, frames=args.frames,
                batch_frames=args.batch_frames, progress=bar.update, frame_cnt=args.frame_cnt,
            )
        elapsed = time.perf_counter() - start
        fmt = ref_reader.fmt

    n = len(next(iter(metrics.values())))
    fps = n / elapsed if elapsed > 0 else None
    version = f"fusedsim-{__version__}"
    if not outputs:
        sys.stdout.write(format_text(metrics))
        return
    texts = []
    for out in outputs:
        if out.kind == "json":
            texts.append(format_json(metrics, version=version, fps=fps))
        elif out.kind == "csv":
            texts.append(format_csv(metrics))
        else:
            texts.append(format_xml(metrics, version=version, width=fmt.width, height=fmt.height, fps=fps))
    from fusedsim.cli._outputs import write_outputs

    write_outputs(outputs, texts)


def _pair_jobs(args: argparse.Namespace) -> list[tuple[str, str, list]]:
    """``--pairs FILE``: one ``REF DIST OUTPUT`` line per pair (shell quoting, ``#`` comments, blank lines skipped);
    every OUTPUT gets the format of a bare --xml/--json/--csv (XML by default). All outputs are checked first."""
    import shlex

    from fusedsim.cli._outputs import Output, check_outputs

    given = [name for name, value in (("REF DIST", args.paths), ("-r", args.reference), ("-d", args.distorted),
                                      ("-o", args.output), ("--xml/--json/--csv PATH", args.format_paths))
             if value]
    if given:
        raise ValueError(f"--pairs names every clip and output; drop {', '.join(given)}")
    flags = list(dict.fromkeys(args.format_flags or []))
    if len(flags) > 1:
        raise ValueError(f"--pairs writes one format, got {' and '.join('--' + f for f in flags)}")
    kind = flags[0] if flags else "xml"
    try:
        with open(args.pairs, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ValueError(f"--pairs {args.pairs}: {exc.strerror or exc}") from None
    jobs = []
    for number, line in enumerate(lines, 1):
        try:
            fields = shlex.split(line, comments=True)
        except ValueError as exc:
            raise ValueError(f"--pairs {args.pairs} line {number}: {exc}") from None
        if not fields:
            continue
        if len(fields) != 3:
            raise ValueError(f"--pairs {args.pairs} line {number}: expected REF DIST OUTPUT, got {len(fields)} "
                             f"field{'s' if len(fields) != 1 else ''}: {line.strip()!r}")
        ref, dist, out = fields
        jobs.append((ref, dist, [Output(out, kind, f"--pairs line {number}")]))
    if not jobs:
        raise ValueError(f"--pairs {args.pairs}: no pairs (lines of REF DIST OUTPUT)")
    check_outputs([o for *_, outs in jobs for o in outs])  # every output is writable before any work
    return jobs


def _model_note(args: argparse.Namespace) -> None:
    """libvmaf predicts the VMAF model unless -n is given; fusedsim never does, and says so (after the run)."""
    if not args.no_prediction:
        sys.stdout.flush()
        sys.stderr.write(_MODEL_NOTE)
        sys.stderr.flush()
