"""``fusedsim sweep REF [REF ...] --codec C --quality A:B:S``: rate-quality curves of lossy codecs.

Each reference is encoded with every codec at every quality through Pillow (and its installed plugins), decoded,
and scored against the reference (prepared once per reference). The table holds bytes and bits per pixel per
encoding; ``--plot`` draws one panel per metric output, quality against bits per pixel, one curve per
reference and codec.

QUALITY is each codec's own 0..100 scale (jpeg, webp, avif, jxl: the encoder's quality option). JPEG 2000 has no
such scale: its rate control is OpenJPEG's, and quality Q asks for a fixed quality of Q dB PSNR (Pillow's
quality_mode="dB", quality_layers=[Q], as ImageMagick maps its -quality); 100 is lossless (ImageMagick's too), and
0, a target of 0 dB, is refused.
"""

from __future__ import annotations

import argparse
import importlib
import io
import math
import sys
from typing import TYPE_CHECKING, Any

from fusedsim.cli.common import DEFAULT_METRICS, chosen_metrics, parse_device, parse_image_metric, parse_memory
from fusedsim.cli.metric_params import PARAM_HELP, chosen_params, parse_param
from fusedsim.core.device import DEVICE_HELP

if TYPE_CHECKING:
    from fusedsim.io.images import ImageData

#: codec name -> (Pillow format, plugin modules that register it when Pillow lacks it); the quality reaches the
#: encoder through :func:`save_options`
CODECS = {
    "jpeg": ("JPEG", ()),
    "webp": ("WEBP", ()),
    "avif": ("AVIF", ("pillow_avif",)),
    "jxl": ("JXL", ("pillow_jxl",)),
    "jpeg2000": ("JPEG2000", ()),
}
COLUMNS = ("ref", "codec", "quality", "bytes", "bpp")


def save_options(codec: str, quality: int) -> dict[str, Any]:
    """Pillow's ``save`` keywords that make ``codec`` encode at ``quality`` (see the module docstring). Pillow's
    JPEG 2000 writer ignores ``quality`` (it would save every quality losslessly), so it gets its rate control."""
    if codec != "jpeg2000":
        return {"quality": quality}
    if quality == 100:
        return {}  # Pillow's default: the reversible wavelet, lossless
    if not 1 <= quality <= 99:
        raise ValueError(f"--quality {quality}: jpeg2000's quality is a PSNR target in dB (1..99, 100 lossless); "
                         "0 dB is no target")
    return {"quality_mode": "dB", "quality_layers": [float(quality)]}


def available_codecs() -> list[str]:
    """The codecs of :data:`CODECS` that Pillow can write on this machine (plugins imported when installed)."""
    from PIL import Image

    Image.init()
    found = []
    for name, (fmt, plugins) in CODECS.items():
        if fmt not in Image.SAVE:
            for module in plugins:
                try:
                    importlib.import_module(module)
                except ImportError:
                    continue
        if fmt in Image.SAVE:
            found.append(name)
    return found


_QUALITY_FORM = "START:STOP:STEP with 0 <= START <= STOP <= 100 and STEP >= 1 (e.g. 10:95:5), or Q[,Q...]"


def _quality_error(text: str, why: str) -> argparse.ArgumentTypeError:
    """Every refusal says what is wrong with ``text`` and which form is expected."""
    return argparse.ArgumentTypeError(f"{text!r}: {why}; expected {_QUALITY_FORM}")


def _whole(part: str, text: str, what: str) -> int:
    try:
        return int(part)
    except ValueError:
        raise _quality_error(text, f"{what} {part.strip()!r} is not a whole number") from None


def parse_qualities(text: str) -> list[int]:
    """``"10:95:5"`` (start:stop:step, stop included), ``"50,75,90"`` or ``"80"`` as a list of qualities 0..100.
    A descending or empty range is refused (not swept as nothing), saying which part is wrong."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise _quality_error(text, f"a range has 2 or 3 parts, not {len(parts)}")
        start = _whole(parts[0], text, "START")
        stop = _whole(parts[1], text, "STOP")
        step = _whole(parts[2], text, "STEP") if len(parts) == 3 else 5
        if step < 1:
            raise _quality_error(text, f"STEP {step} must be at least 1")
        if stop < start:
            raise _quality_error(text, f"STOP {stop} is below START {start} (ranges ascend: {stop}:{start}:{step})")
        values = list(range(start, stop + 1, step))
    else:
        values = [_whole(p, text, "quality") for p in text.split(",") if p.strip()]
        if not values:
            raise _quality_error(text, "no quality given")
    outside = [q for q in values if not 0 <= q <= 100]
    if outside:
        raise _quality_error(text, f"quality {outside[0]} is outside 0..100")
    return values


def _codec_list(text: str) -> list[str]:
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    for name in names:
        if name not in CODECS:
            raise argparse.ArgumentTypeError(f"unknown codec {name!r}; choose from {', '.join(CODECS)}")
    return names


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sweep", help="encode references with lossy codecs at many qualities and score them",
                            description=__doc__.split("\n\n", 1)[1].replace("``", ""),
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("refs", metavar="REF", nargs="+", help="reference images (8-bit grey or RGB)")
    parser.add_argument("--codec", action="append", type=_codec_list, required=True, metavar="NAME[,NAME...]",
                        help=f"codecs, repeatable or comma-separated: {', '.join(CODECS)} (those Pillow writes "
                             "on this machine)")
    parser.add_argument("--quality", type=parse_qualities, default=parse_qualities("10:95:5"),
                        help="START:STOP:STEP (stop included) or Q[,Q...] (default 10:95:5); each codec's 0..100 "
                             "quality, for jpeg2000 a PSNR target in dB (100: lossless)")
    parser.add_argument("--metric", action="append", type=parse_image_metric, metavar="NAME[,NAME...]",
                        help=f"metrics, repeatable or comma-separated, or all (default: {', '.join(DEFAULT_METRICS)})")
    parser.add_argument("--param", action="append", type=parse_param, metavar="METRIC.NAME=VALUE", help=PARAM_HELP)
    parser.add_argument("-o", "--output", default="-", metavar="TSV", help="the table (default: standard output)")
    parser.add_argument("--plot", metavar="PNG", help="rate-quality curves, one panel per metric output")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.add_argument("--memory", type=parse_memory, default="auto", help="auto, full, strip or strip:ROWS")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress on standard error (a bar on a terminal, else a line every few seconds)")
    parser.set_defaults(run=run)


def encode_decode(ref: ImageData, codec: str, quality: int) -> tuple[int, ImageData]:
    """``ref`` (8-bit) encoded by ``codec`` at ``quality``: the encoded size in bytes and the decoded image."""
    import numpy as np
    import torch
    from PIL import Image

    from fusedsim.io.images import ImageData

    array = ref.pixels[0].permute(1, 2, 0).numpy().astype(np.uint8)
    mode = "L" if ref.channels == "grey" else "RGB"
    image = Image.fromarray(array[..., 0] if mode == "L" else array, mode)
    buffer = io.BytesIO()
    image.save(buffer, format=CODECS[codec][0], **save_options(codec, quality))
    data = buffer.getvalue()
    with Image.open(io.BytesIO(data)) as decoded:
        back = np.asarray(decoded.convert(mode), dtype=np.float32)
    if back.ndim == 2:
        back = back[:, :, None]
    pixels = torch.from_numpy(np.ascontiguousarray(back.transpose(2, 0, 1)))[None]
    path = ref.path.with_name(f"{ref.path.stem}.{codec}-q{quality}")
    return len(data), ImageData(path=path, pixels=pixels, bit_depth=8, channels=ref.channels)


def _sweep_row(scorer: Any, path: str, ref: ImageData, codec: str, quality: int) -> dict[str, Any]:
    """One encoding of ``ref`` scored: the table's row."""
    size, dist = encode_decode(ref, codec, quality)
    result = scorer.score_prepared(dist)
    row: dict[str, Any] = {"ref": path, "codec": codec, "quality": quality, "bytes": size,
                           "bpp": size * 8 / (ref.width * ref.height)}
    for name, value in result.values.items():
        if isinstance(value, dict):
            row.update({f"{name}.{k}": float(v) for k, v in value.items()})
        else:
            row[name] = float(value)
    row["backend"] = result.backend
    return row


def _text(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def plot_curves(rows: list[dict[str, Any]], columns: list[str], target: str) -> None:
    """:func:`curves_figure` saved as a PNG at ``target``."""
    from fusedsim.cli.figures import pyplot, save_figure

    plt = pyplot()
    fig = curves_figure(rows, columns)
    try:
        save_figure(fig, target, dpi=100)
    finally:
        plt.close(fig)


def curves_figure(rows: list[dict[str, Any]], columns: list[str]) -> Any:
    """One panel per metric column: the metric (axis in its unit) against bits per pixel, one curve per
    (reference, codec)."""
    from fusedsim.cli.figures import axis_label, pyplot

    plt = pyplot()
    n = len(columns)
    cols = min(n, 3)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 3.6 * nrows), dpi=100, squeeze=False)
    curves: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        curves.setdefault((row["ref"], row["codec"]), []).append(row)
    for k, column in enumerate(columns):
        ax = axes[k // cols][k % cols]
        for (ref, codec), points in curves.items():
            points = sorted(points, key=lambda r: r["bpp"])
            ax.plot([p["bpp"] for p in points], [p[column] for p in points], marker="o", markersize=3,
                    label=f"{ref.rsplit('/', 1)[-1]} {codec}")
        ax.set_xlabel("bits per pixel")
        ax.set_ylabel(axis_label(column))
        ax.set_title(column)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for k in range(n, nrows * cols):
        axes[k // cols][k % cols].axis("off")
    fig.tight_layout()
    return fig


def run(args: argparse.Namespace) -> int:
    from fusedsim.cli.outputs import Output, check_outputs, refuse_outputs_that_are_inputs, write_outputs
    from fusedsim.cli.progress import Progress
    from fusedsim.cli.tsv import format_line
    from fusedsim.engine import Scorer
    from fusedsim.engine.batch_pairs import metric_columns
    from fusedsim.io.images import read_image
    from fusedsim.metrics.registry import get_metric

    codecs = list(dict.fromkeys(c for group in args.codec for c in group))
    have = available_codecs()
    missing = [c for c in codecs if c not in have]
    if missing:
        raise ValueError(f"--codec {', '.join(missing)}: Pillow cannot write it on this machine (available: "
                         f"{', '.join(have) or 'none'})")
    for codec in codecs:  # a quality the codec cannot encode is refused before any work
        for quality in args.quality:
            save_options(codec, quality)
    names = chosen_metrics(args.metric)
    params = chosen_params(args.param, names)
    columns = metric_columns([get_metric(n) for n in names])
    outputs = [Output(args.output, "tsv", "-o")]
    if args.plot:
        outputs.append(Output(args.plot, "png", "--plot"))
    check_outputs(outputs)
    refuse_outputs_that_are_inputs(outputs, [("REF", path) for path in args.refs])
    if args.plot:
        if outputs[1].stream:
            raise ValueError(f"--plot {args.plot}: give a PNG file path")
        from fusedsim.cli.figures import pyplot

        pyplot()  # a missing matplotlib is reported before the work
    refs = [read_image(path, "REF") for path in args.refs]  # every reference checked before the first encoding
    for path, ref in zip(args.refs, refs):
        if ref.bit_depth != 8:
            raise ValueError(f"REF {path} is {ref.describe()}; the codecs are swept on 8-bit images")
    scorer = Scorer(names, device=args.device, memory=args.memory, params=params)
    rows: list[dict[str, Any]] = []
    total = len(refs) * len(codecs) * len(args.quality)
    with Progress(total, desc="sweep", unit="encoding", enabled=not args.quiet) as progress:
        for path, ref in zip(args.refs, refs):
            scorer.set_reference(ref)
            for codec in codecs:
                for quality in args.quality:
                    rows.append(_sweep_row(scorer, path, ref, codec, quality))
                    progress.update()
    header = [*COLUMNS, *columns, "backend"]
    text = "".join(format_line(line) for line in [header, *[[_text(r.get(c, math.nan)) for c in header] for r in rows]])
    write_outputs(outputs[:1], [text])
    if args.plot:
        plot_curves(rows, columns, outputs[1].target)
    if args.output != "-":
        print(f"fusedsim sweep: {len(rows)} encodings of {len(refs)} reference(s) scored; table: {args.output}"
              + (f"; curves: {args.plot}" if args.plot else ""), file=sys.stderr)
    return 0
