"""``fusedsim vmaf``: per-frame VMAF scores and libvmaf features of a distorted clip against its reference.

The command line of :mod:`fusedsim.families.vmaf.pipeline`: this module parses libvmaf's options, checks them and
every output before any work, shows progress, and writes the results in libvmaf's layouts
(:mod:`fusedsim.cli.vmaf_output`: XML, JSON, CSV, or a pooled table on standard output); reading the clips,
choosing device and threads, scoring and pooling are the pipeline's. Building the parser imports neither torch
nor numpy.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from fusedsim.cli.common import parse_device
from fusedsim.cli.vmaf_output import format_csv, format_json, format_text, format_xml
from fusedsim.cli.vmaf_presets import AOM_CTC, NFLX_CTC, PresetAction
from fusedsim.core.device import DEVICE_HELP
from fusedsim.families.vmaf.model import BUILT_IN_MODELS, DEFAULT_MODEL
from fusedsim.families.vmaf.pipeline import (check_device, feature_specs, load_features, open_clips,
                                             resolve_features, set_threads)

if TYPE_CHECKING:
    from fusedsim.cli.outputs import Output
    from fusedsim.families.vmaf.pipeline import ClipScores, Extract

_FEATURE_SPECS = feature_specs()  # the registry's vmaf:<feature> metrics (reading it imports no torch)
#: Shown in ``--help``; ``fusedsim.families.vmaf.features`` enforces the same registry entries.
HELP_FEATURES = tuple(_FEATURE_SPECS)


def _feature_lines() -> str:
    lines = []
    for name, spec in _FEATURE_SPECS.items():
        lines.append(f"  {name:<14} {spec.summary}")
        if spec.min_size > 1:
            lines.append(f"  {'':<14} (frames of {spec.min_size}x{spec.min_size} or more)")
    return "\n".join(lines)


DESCRIPTION = """\
Compare a distorted clip with its reference frame by frame, as libvmaf's
vmaf tool does: the VMAF score (model vmaf_v0.6.1 unless -m/--model names
others) and the features asked for with --feature:
""" + _feature_lines() + """
Models: -m version=NAME (built in: """ + ", ".join(BUILT_IN_MODELS) + """)
or -m path=FILE.json, then :name=..., :enable_transform, :disable_clip and
:FEATURE.OPTION=VALUE, repeatable (models share their features). -n scores
features only. Features take libvmaf's options: --feature vif=vif_enhn_gain_limit=1.0,
--feature float_ssim=enable_lcs=true. Every value equals libvmaf 3.2.0's. A
feature is computed exactly as named or not at all: a device that cannot run
it is an error, never a substitute.

libvmaf's command line works unchanged:
  fusedsim vmaf -r ref.yuv -d dist.yuv -w 576 -h 324 -p 420 -b 8 \\
      --model version=vmaf_v0.6.1 --feature ssim -q --json -o out.json
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
        help="per-frame VMAF and libvmaf features of two clips (Y4M, YUV, or compressed video)",
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
        "--feature", action="append", metavar="NAME[=OPT=VAL:...]", dest="features",
        help=f"feature to compute besides the model's, repeatable: {', '.join(HELP_FEATURES)}; with libvmaf's "
             "options, e.g. vif=vif_enhn_gain_limit=1.0 or float_ssim=enable_lcs=true",
    )
    parser.add_argument(
        "-m", "--model", action="append", metavar="version=NAME|path=FILE[:OPTIONS]", dest="models",
        help=f"VMAF model, repeatable, as in libvmaf (default: version={DEFAULT_MODEL}); built in: "
             f"{', '.join(BUILT_IN_MODELS)}; options :name=NAME, :enable_transform, :disable_clip, "
             ":FEATURE.OPTION=VALUE",
    )
    for option, table in (("--aom_ctc", AOM_CTC), ("--nflx_ctc", NFLX_CTC)):
        parser.add_argument(option, action=PresetAction, metavar="VERSION",
                            help=f"libvmaf's preset ({', '.join(table)}): adds its models and features here")
    parser.set_defaults(preset_origin=None)
    parser.add_argument("--precision", type=_precision, metavar="N|max",
                        help="digits after the point in the outputs (%%.Nf; 6 is libvmaf's stock output); "
                             "default max: every number round-trips exactly")
    parser.add_argument("--device", type=parse_device, default="auto",
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
                        help="features only, no VMAF model (then --feature names what is computed)")
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


def _precision(text: str) -> int | None:
    if text == "max":
        return None
    value = _int(text)
    if not 0 <= value <= 17:
        raise argparse.ArgumentTypeError(f"expected max or a number of digits from 0 to 17, got {text!r}")
    return value


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
# the command


def _load_features() -> Any:
    """The feature registry (:func:`fusedsim.families.vmaf.pipeline.load_features`); tests put a stand-in here."""
    return load_features()


def run(args: argparse.Namespace) -> int:
    # every usage check first: a bad command line is answered before torch, numpy or a file is touched
    jobs = _jobs(args)
    raw = _raw_options(args)
    _check_options(args)
    args.loaded_models = _models(args)
    # feature names and options are checked against the registry's specs (torch-free) before anything loads
    features = _features(args)
    registry = _load_features()
    check_device(args.device)  # a missing GPU is reported before any file is read
    set_threads(args.threads)
    if args.pairs is None:
        ref, dist, outputs = jobs[0]
        _score_and_write(args, ref, dist, outputs, raw, features, registry.extract)
        return 0
    return _run_pairs(args, jobs, raw, features, registry.extract)


def _from_preset(args: argparse.Namespace, entry: str, exc: ValueError) -> ValueError:
    """``exc`` naming the preset that added ``entry`` (unchanged when the user wrote it)."""
    origin = (args.preset_origin or {}).get(entry)
    return ValueError(f"{origin} adds {entry!r}: {exc}") if origin else exc


def _features(args: argparse.Namespace) -> list:
    """The --feature requests (validated against the registry's specs, torch-free); a preset's entry that cannot
    be computed is reported with the preset's name."""
    if not (args.features or not args.loaded_models):
        return []
    for entry in args.features or []:
        try:
            resolve_features([entry], HELP_FEATURES)
        except ValueError as exc:
            raise _from_preset(args, entry, exc) from None
    return resolve_features(args.features, HELP_FEATURES)


def _models(args: argparse.Namespace) -> list:
    """The VMAF models to score (loaded now: a bad model option or file fails before any clip is read); none
    with -n/--no_prediction (which drops a preset's models, as libvmaf does)."""
    from fusedsim.families.vmaf.model import feature_requests, parse_model_option

    models = args.models or []
    if args.no_prediction:
        if any(text not in (args.preset_origin or {}) for text in models):
            raise ValueError("-n/--no_prediction scores no model; drop it or drop -m/--model")
        return []
    loaded = []
    for text in models or [f"version={DEFAULT_MODEL}"]:
        try:
            model = parse_model_option(text).load()
            feature_requests(model)  # a model reading a feature this installation lacks fails now
        except ValueError as exc:
            raise _from_preset(args, text, exc) from None
        loaded.append(model)
    return loaded


def _jobs(args: argparse.Namespace) -> list[tuple[str, str, list[Output]]]:
    """Each clip pair with its outputs: the lines of --pairs FILE, or REF DIST with the output options."""
    if args.pairs is not None:
        jobs = _pair_jobs(args)
    else:
        ref, dist = _inputs(args)
        jobs = [(ref, dist, _outputs(args))]
    for ref, dist, _ in jobs:
        if ref == "-" and dist == "-":
            raise ValueError("only one of REF and DIST can be standard input (-)")
    _refuse_inputs_as_outputs(args, jobs)
    return jobs


_CONVERT = "or convert it first, e.g. ffmpeg -i IN -f yuv4mpegpipe OUT.y4m (or pipe it: ... - | fusedsim vmaf REF -)"


_Y4M_MAGIC = b"YUV4MPEG2 "
_Y4M_HEADER_MAX = 4096  # the reader's limit too (fusedsim.io.video): a header line ends within these bytes


def _y4m_header_problem(head: bytes, complete: bool) -> str:
    """Why the start ``head`` of a Y4M stream has no usable header line ("" when it is fine or not Y4M); ``complete``
    says ``head`` holds the whole input (else a missing newline may just lie beyond it)."""
    if not head.startswith(_Y4M_MAGIC) or b"\n" in head:
        return ""
    if complete or len(head) >= _Y4M_HEADER_MAX:
        first = head[:80].decode("ascii", "replace")
        return (f"the Y4M header line does not end with a newline (\\n) within {len(head)} bytes ({first!r}"
                f"{'...' if len(head) > 80 else ''}): a Y4M header is one line, followed by FRAME lines")
    return ""


def check_clip(role: str, path: str) -> None:
    """Refuse, before any work, a clip fusedsim cannot read: compressed video (by extension or signature) when
    PyAV is missing, and an empty file (which raw YUV would call a size error)."""
    import importlib.util
    import os
    import stat

    from fusedsim.io.compressed import is_compressed

    if path == "-":
        return
    if is_compressed(path):
        if importlib.util.find_spec("av") is None:
            raise ValueError(f"{role} {path}: compressed video needs PyAV: pip install 'fusedsim[video]' "
                             f"({_CONVERT})")
        return  # probed when opened: a file FFmpeg cannot read is named then
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return  # a FIFO or device is read once, by the reader: never opened here
        with open(path, "rb") as f:
            head = f.read(_Y4M_HEADER_MAX)
            complete = len(head) < _Y4M_HEADER_MAX or not f.read(1)
    except OSError:
        return  # missing, unreadable or a directory: the reader says so
    if not head:
        raise ValueError(f"{role} {path}: the file is empty (no Y4M header, no frames)")
    problem = _y4m_header_problem(head, complete)
    if problem:
        raise ValueError(f"{role} {path}: {problem}")


def check_stdin(role: str) -> None:
    """An empty standard input (nothing piped) is said to be empty, not read as a raw YUV clip of the wrong size;
    peeking does not consume the bytes the reader needs."""
    buffer = getattr(sys.stdin, "buffer", None)
    peek = getattr(buffer, "peek", None)
    if peek is None:
        return
    try:
        head = peek(16)
    except (OSError, ValueError):
        return
    if not head:
        raise ValueError(f"{role} - (standard input) is empty: nothing was piped in (e.g. ffmpeg -i IN -f "
                         "yuv4mpegpipe - | fusedsim vmaf REF -)")
    if head.startswith(_Y4M_MAGIC):
        try:
            head = peek(_Y4M_HEADER_MAX)[:_Y4M_HEADER_MAX]
        except (OSError, ValueError):
            return
        problem = _y4m_header_problem(head, complete=False)
        if problem:
            raise ValueError(f"{role} - (standard input): {problem}")
    from fusedsim.io.compressed import has_compressed_magic

    if has_compressed_magic(head):
        raise ValueError(f"{role} - (standard input) is compressed video, which is read from files only: give its "
                         "path, or pipe Y4M: ffmpeg -i IN -f yuv4mpegpipe - | fusedsim vmaf REF -")


def _refuse_inputs_as_outputs(args: argparse.Namespace, jobs: list[tuple[str, str, list[Output]]]) -> None:
    """No output may be a clip (of any pair: a later pair would read what an earlier one wrote) or the --pairs
    file: writing it would destroy it. Without outputs the pooled table goes to standard output, which must not be
    redirected onto a clip either."""
    from fusedsim.cli.outputs import Output, refuse_outputs_that_are_inputs

    inputs = [("--pairs", args.pairs)] if args.pairs is not None else []
    for ref, dist, _ in jobs:
        inputs += [("REF", ref), ("DIST", dist)]
    outputs = [o for *_, outs in jobs for o in outs] or [Output("-", "text", "standard output")]
    refuse_outputs_that_are_inputs(outputs, inputs)


def _check_options(args: argparse.Namespace) -> None:
    """Refuse what fusedsim does not do rather than ignore it: frame skipping, subsampling, feature options."""
    if args.frames is not None and args.frame_cnt is not None:
        raise ValueError("give --frames (exactly N frames) or --frame_cnt (at most N frames), not both")
    if args.subsample not in (None, 0, 1):
        raise ValueError(f"--subsample {args.subsample}: only every frame (0 or 1) is supported")
    if args.frame_skip_ref not in (None, 0):
        raise ValueError(f"--frame_skip_ref {args.frame_skip_ref}: skipping frames is not supported yet; "
                         "trim the clip first (e.g. ffmpeg -vf trim)")


def _run_pairs(args: argparse.Namespace, jobs: list[tuple[str, str, list[Output]]], raw: dict[str, Any],
               features: list[str], extract: Extract) -> int:
    """Score every pair of --pairs: a failing pair is reported and the others still run (exit status 1)."""
    failed = []
    for i, (ref, dist, outputs) in enumerate(jobs, 1):
        line = outputs[0].line or i  # the pair's line in the file (comments and blank lines are not pairs)
        try:
            _score_and_write(args, ref, dist, outputs, raw, features, extract, label=f"pair {i}/{len(jobs)}")
        except (ValueError, OSError) as exc:  # one bad pair does not stop the others; each is reported
            failed.append(line)
            sys.stderr.write(f"fusedsim vmaf: pair {i} (line {line} of {args.pairs}: {ref}, {dist}): {exc}\n")
    if failed:
        sys.stderr.write(f"fusedsim vmaf: {len(failed)} of {len(jobs)} pairs failed (lines "
                         f"{', '.join(map(str, failed))} of {args.pairs}); the others were written\n")
        return 1
    return 0


def _score_and_write(args: argparse.Namespace, ref: str, dist: str, outputs: list[Output], raw: dict[str, Any],
                     features: list[str], extract: Extract, label: str = "vmaf") -> None:
    """Score one clip pair and write its outputs (or the pooled table on stdout when there are none)."""
    scores = _score_pair(args, ref, dist, raw, features, extract, label)
    if not outputs:
        sys.stdout.write(format_text(scores.metrics, args.precision))
        return
    from fusedsim.cli.outputs import write_outputs

    write_outputs(outputs, [_render(out.kind, scores, args.precision) for out in outputs])


def _score_pair(args: argparse.Namespace, ref: str, dist: str, raw: dict[str, Any], features: list[str],
                extract: Extract, label: str) -> ClipScores:
    """The pipeline's scores of one pair, with progress on stderr unless --quiet: a bar on a terminal, a line
    every few seconds elsewhere (frames per second and the time left)."""
    from fusedsim.cli.progress import Progress

    for role, path in (("REF", ref), ("DIST", dist)):  # per pair: with --pairs a bad clip fails its pair only
        if path == "-":
            check_stdin(role)
        else:
            check_clip(role, path)
    with open_clips(ref, dist, **raw) as clips:
        total = clips.expected_frames(args.frames, args.frame_cnt)
        with Progress(total, desc=label, unit="frame", enabled=not args.quiet, file=sys.stderr) as bar:
            return clips.score(features, extract, device=args.device, frames=args.frames, frame_cnt=args.frame_cnt,
                               batch_frames=args.batch_frames, progress=bar.update,
                               models=getattr(args, "loaded_models", ()))


def _render(kind: str, scores: ClipScores, precision: int | None = None) -> str:
    """One output's text in libvmaf's layout ``kind`` (xml, json or csv)."""
    from fusedsim import __version__

    version = f"fusedsim-{__version__}"
    if kind == "json":
        return format_json(scores.metrics, version=version, fps=scores.fps, precision=precision)
    if kind == "csv":
        return format_csv(scores.metrics, precision=precision)
    return format_xml(scores.metrics, version=version, width=scores.width, height=scores.height, fps=scores.fps,
                      precision=precision)


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


def _raw_options(args: argparse.Namespace) -> dict[str, Any]:
    """Width, height and pixel format of raw YUV input, from --pix-fmt or libvmaf's -p/-b."""
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


def _outputs(args: argparse.Namespace) -> list[Output]:
    """The outputs asked for: -o with the format of a bare --xml/--json/--csv (XML by default, as in libvmaf), and
    --xml/--json/--csv PATH (today's form). Checked (writable, no directory, no path twice) before any work."""
    from fusedsim.cli.outputs import Output, check_outputs

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


def _pair_jobs(args: argparse.Namespace) -> list[tuple[str, str, list[Output]]]:
    """``--pairs FILE``: one ``REF DIST OUTPUT`` line per pair (shell quoting, ``#`` comments, blank lines skipped);
    every OUTPUT gets the format of a bare --xml/--json/--csv (XML by default). All outputs are checked first."""
    from fusedsim.cli.outputs import check_outputs

    given = [name for name, value in (("REF DIST", args.paths), ("-r", args.reference), ("-d", args.distorted),
                                      ("-o", args.output), ("--xml/--json/--csv PATH", args.format_paths))
             if value]
    if given:
        raise ValueError(f"--pairs names every clip and output; drop {', '.join(given)}")
    flags = list(dict.fromkeys(args.format_flags or []))
    if len(flags) > 1:
        raise ValueError(f"--pairs writes one format, got {' and '.join('--' + f for f in flags)}")
    jobs = _read_pairs(args.pairs, flags[0] if flags else "xml")
    if not jobs:
        raise ValueError(f"--pairs {args.pairs}: no pairs (lines of REF DIST OUTPUT)")
    check_outputs([o for *_, outs in jobs for o in outs])  # every output is writable before any work
    return jobs


def _read_pairs(path: str, kind: str) -> list[tuple[str, str, list[Output]]]:
    """The pairs of a --pairs file, each with its OUTPUT in format ``kind``."""
    import shlex

    from fusedsim.cli.outputs import Output

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ValueError(f"--pairs {path}: {exc.strerror or exc}") from None
    # split at line feeds only: str.splitlines() also splits at \v, \f, \x1c-\x1e, \x85 and \u2028, so the line
    # numbers in messages would not be the editor's
    lines = data.split(b"\n")
    jobs = []
    for number, raw_line in enumerate(lines, 1):
        try:
            line = raw_line.decode("utf-8").removesuffix("\r")
        except UnicodeDecodeError as exc:
            raise ValueError(f"--pairs {path} line {number}: not UTF-8 text (byte 0x{raw_line[exc.start]:02x}, the "
                             f"line's byte {exc.start + 1}); save the file as UTF-8") from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        try:
            fields = shlex.split(line, comments=True)
        except ValueError as exc:
            raise ValueError(f"--pairs {path} line {number}: {exc}") from None
        if not fields:
            continue
        if len(fields) != 3:
            raise ValueError(f"--pairs {path} line {number}: expected REF DIST OUTPUT, got {len(fields)} "
                             f"field{'s' if len(fields) != 1 else ''}: {line.strip()!r}")
        ref, dist, out = fields
        jobs.append((ref, dist, [Output(out, kind, f"--pairs line {number}", line=number)]))
    return jobs
