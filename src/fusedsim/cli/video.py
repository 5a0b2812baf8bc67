"""``fusedsim video REF DIST``: every image metric of the registry, and VMAF, per frame of two clips
(compressed, Y4M or raw YUV), with FFVship's and libvmaf's frame-selection options.

Building the parser imports neither torch nor PyAV; ``run`` does (:func:`fusedsim.engine.video.score_video`).
"""

from __future__ import annotations

import argparse
import os
import sys

from fusedsim.cli.common import parse_device, parse_image_metric, parse_memory
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Score a distorted clip against its reference frame by frame: any image metric
of the registry (fusedsim list-metrics --kind image) on R'G'B' frames, and
VMAF (vmaf, vmaf_neg) on luma. Clips are compressed files (mp4, mkv, webm, mov,
ivf, ... decoded by PyAV: pip install 'fusedsim[video]'; on NVIDIA GPUs by
NVDEC), Y4M or raw YUV (--width/--height/--pix-fmt).

Frames: --start/--end count reference frames, --every N takes one in N,
--encoded-offset K compares reference frame j with distorted frame j+K
(FFVship), --frame-skip-ref/--frame-skip-dist drop the first frames of a clip
(libvmaf), --frames N compares exactly N pairs. Frames of one clip without a
partner, a variable frame rate and timestamp gaps are reported on stderr.
Different sizes are refused unless --scale (the distorted clip is resized);
different frame rates unless --ignore-fps.

Colour: each clip's matrix (BT.601/709/2020), range and chroma siting come
from its tags (untagged: FFmpeg's defaults, BT.601, limited range); the
perceptual metrics read 8-bit R'G'B' codes from 8-bit clips and float32 from
deeper ones (--rgb).

ColorVideoVDP (cvvdp) is a video metric: by default its temporal model scores
the clip at the clips' frame rate (--fps to set it, divided by --every) and
gives one JOD per clip; its per-frame column is the JOD of the clip cut after
each frame (the last value is the clip's). --cvvdp frames scores each frame
pair as a still image instead.

Outputs: --json/--csv PATH per frame (- for stdout), --ffvship-json PATH in
FFVship's --json layout (one metric); without them the pooled table (mean,
harmonic mean, min, p1, p5, p10, max; pN: the value N% of frames are worse
than) and the clip scores go to stdout."""


def parse_video_metric(text: str) -> list[str]:
    """argparse type of ``--metric``: image metrics (as :func:`parse_image_metric`) and ``vmaf``/``vmaf_neg``."""
    from fusedsim.engine.video import VMAF_MODELS

    names: list[str] = []
    for item in text.split(","):
        item = item.strip()
        if item.lower() in VMAF_MODELS:
            names.append(item.lower())
        elif item:
            names.extend(parse_image_metric(item))
    return names


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0; got {text!r}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1; got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number; got {text!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("video", help="score image metrics and VMAF per frame of two video clips",
                            description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", metavar="REF DIST", nargs="*", help="reference and distorted clips")
    parser.add_argument("-m", "--metric", action="append", type=parse_video_metric, metavar="NAME[,NAME...]",
                        help="metrics, repeatable or comma-separated (default: ssimulacra2)")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    sel = parser.add_argument_group("frames")
    sel.add_argument("--start", type=_non_negative, default=0, help="first reference frame (default 0)")
    sel.add_argument("--end", type=_non_negative, default=None, help="reference frame to stop before")
    sel.add_argument("-e", "--every", type=_positive, default=1, help="compare one frame in N (default 1)")
    sel.add_argument("--encoded-offset", type=int, default=0, help="distorted frame j+K against reference frame j")
    sel.add_argument("--frame-skip-ref", type=_non_negative, default=0, help="skip the first N reference frames")
    sel.add_argument("--frame-skip-dist", type=_non_negative, default=0, help="skip the first N distorted frames")
    sel.add_argument("--frames", type=_positive, default=None, help="compare exactly N frame pairs")
    geo = parser.add_argument_group("geometry and colour")
    geo.add_argument("--crop", metavar="L,T,R,B", help="samples removed from each edge of both clips")
    geo.add_argument("--crop-ref", metavar="L,T,R,B", help="crop of the reference (replaces --crop for it)")
    geo.add_argument("--crop-dist", metavar="L,T,R,B", help="crop of the distorted clip (replaces --crop for it)")
    geo.add_argument("--scale", choices=("bicubic", "bilinear"), default=None,
                     help="resize the distorted clip to the reference's size (torch interpolate, antialiased "
                          "when shrinking)")
    geo.add_argument("--ignore-fps", action="store_true", help="compare clips of different frame rates by index")
    geo.add_argument("--rgb", choices=("auto", "uint8", "float"), default="auto",
                     help="R'G'B' given to the metrics (auto: uint8 for 8-bit clips, else float)")
    geo.add_argument("--fps", type=_positive_float, default=None,
                     help="frame rate of the clips for cvvdp's temporal model (default: the clips' own; raw YUV "
                          "has none)")
    geo.add_argument("--cvvdp", choices=("video", "frames"), default="video",
                     help="video: cvvdp's temporal model on the clip, one JOD per clip and the running JOD per "
                          "frame (default); frames: each frame pair scored as a still image")
    geo.add_argument("--cvvdp-heatmap", metavar="PATH",
                     help="write cvvdp's per-pixel maps over the distorted frames as a video (.mp4, .mkv, .mov, "
                          ".webm), as pycvvdp's --heatmap draws them")
    geo.add_argument("--heatmap-type", choices=("threshold", "supra-threshold", "raw"), default="supra-threshold",
                     help="colours of --cvvdp-heatmap (pycvvdp's types; default supra-threshold)")
    geo.add_argument("--width", type=_positive, help="raw YUV width")
    geo.add_argument("--height", type=_positive, help="raw YUV height")
    geo.add_argument("--pix-fmt", help="raw YUV pixel format (yuv420p, yuv420p10le, ...)")
    run_ = parser.add_argument_group("running")
    run_.add_argument("--device", type=parse_device, default="auto", help="auto, cpu or cuda[:N]")
    run_.add_argument("--gpu", type=_non_negative, default=None, metavar="N", help="GPU N (as --device cuda:N)")
    run_.add_argument("--decoder", choices=("auto", "cpu", "nvdec"), default="auto",
                      help="auto: PyAV on the CPU (faster than NVDEC where measured); nvdec: the GPU's decoder "
                           "(PyNvVideoCodec when installed, else FFmpeg's CUDA hwaccel)")
    run_.add_argument("-t", "--threads", type=_non_negative, default=0, help="decoder threads per clip (0: auto)")
    run_.add_argument("--batch-frames", type=_positive, default=8, help="frame pairs per batch (default 8)")
    run_.add_argument("--memory", type=parse_memory, default="auto", metavar="auto|full|strip[:ROWS]")
    run_.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    out = parser.add_argument_group("outputs")
    out.add_argument("--json", metavar="PATH", help="per-frame JSON (- for stdout)")
    out.add_argument("--csv", metavar="PATH", help="per-frame CSV (- for stdout)")
    out.add_argument("--ffvship-json", metavar="PATH", help="FFVship's --json layout (one metric)")
    out.add_argument("--precision", type=_non_negative, default=None, help="digits after the point (default: exact)")
    parser.set_defaults(run=run)


def _outputs(args: argparse.Namespace) -> list:
    from fusedsim.cli.outputs import Output

    outs = []
    for kind, option in (("json", "--json"), ("csv", "--csv"), ("ffvship", "--ffvship-json")):
        path = getattr(args, "ffvship_json" if kind == "ffvship" else kind)
        if path is not None:
            outs.append(Output(path, kind, option))
    return outs


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.outputs import check_outputs, refuse_outputs_that_are_inputs, write_outputs
    from fusedsim.cli.progress import Progress
    from fusedsim.cli.video_output import (ffvship_columns, format_csv, format_ffvship, format_json,
                                           format_plain)

    paths = list(args.paths or [])
    if len(paths) != 2:
        raise ValueError(f"give two clips, REF and DIST; got {len(paths)}")
    ref, dist = paths
    for role, path in (("REF", ref), ("DIST", dist)):
        if not os.path.exists(path):
            raise FileNotFoundError(f"{role} {path}: no such file")
    metrics = list(dict.fromkeys(n for group in (args.metric or [["ssimulacra2"]]) for n in group))
    device = args.device
    if args.gpu is not None:
        if device not in ("auto", f"cuda:{args.gpu}"):
            raise ValueError(f"--gpu {args.gpu} and --device {device} disagree")
        device = f"cuda:{args.gpu}"
    outputs = _outputs(args)
    refuse_outputs_that_are_inputs(outputs, [("REF", ref), ("DIST", dist)])
    check_outputs(outputs)  # before any frame is decoded: a bad path fails now, nothing half-written later
    image_metrics = [m for m in metrics if m not in ("vmaf", "vmaf_neg")]
    if any(o.kind == "ffvship" for o in outputs):
        from fusedsim.metrics.registry import get_metric

        columns = []
        for m in image_metrics:
            fields = get_metric(m).outputs
            columns += [f"{m}.{f}" for f in fields] if len(fields) > 1 else [m]
        ffvship_columns(columns + [m for m in metrics if m not in image_metrics])
    params = chosen_params(args.param, image_metrics)

    from fusedsim.engine.video import score_pair
    from fusedsim.io.clip_pair import open_pair

    import importlib.util

    from fusedsim.io.compressed import is_compressed

    if any(is_compressed(p) for p in (ref, dist)) and importlib.util.find_spec("av") is None:
        raise RuntimeError("reading compressed video (mp4, mkv, webm, ...) needs PyAV: pip install 'fusedsim[video]'")
    with open_pair(ref, dist, device=device, decoder=args.decoder,
                   planes=("y", "u", "v") if image_metrics else ("y",), start=args.start, end=args.end,
                   every=args.every, encoded_offset=args.encoded_offset, frame_skip_ref=args.frame_skip_ref,
                   frame_skip_dist=args.frame_skip_dist, frames=args.frames, crop=args.crop, crop_ref=args.crop_ref,
                   crop_dist=args.crop_dist, scale=args.scale, ignore_fps=args.ignore_fps, threads=args.threads,
                   width=args.width, height=args.height, pix_fmt=args.pix_fmt) as pair:
        with Progress(len(pair), desc="video", unit="frame", enabled=not args.quiet, file=sys.stderr) as bar:
            scores = score_pair(pair, metrics, rgb=args.rgb, batch_frames=args.batch_frames, params=params,
                                memory=args.memory, cvvdp=args.cvvdp, fps=args.fps,
                                cvvdp_heatmap=args.cvvdp_heatmap, heatmap_type=args.heatmap_type,
                                progress=bar.update)
    for note in scores.notes:
        print(f"fusedsim video: note: {note}", file=sys.stderr)
    if not outputs:
        sys.stdout.write(format_plain(scores, 6 if args.precision is None else args.precision))
        return 0
    texts = []
    for o in outputs:
        if o.kind == "json":
            texts.append(format_json(scores, ref, dist, args.precision))
        elif o.kind == "csv":
            texts.append(format_csv(scores, args.precision))
        else:
            texts.append(format_ffvship(scores, args.precision))
    write_outputs(outputs, texts)
    return 0
