"""``fusedsim diffmap REF DIST --metric M -o map.png``: a metric's per-pixel map as a heat map beside the images.

Only metrics whose spec gives a per-pixel map are offered (``MetricSpec.has_map``; the map is the family's
``score_map``): SSIM's map (the valid region, averaged over channels), Butteraugli's distance map (its result's
``distmap``) and ColorVideoVDP's difference map (pycvvdp's heatmap values). Other metrics are refused with the list
of those that have a map: a map made up for a metric that does not define one would show something else under its
name. Asking a spec for its map imports the metric, so the list is found when it is shown (``--help``, a refusal),
never while the parser is built.

How a map is drawn is :func:`map_view`'s to say, one convention for every metric: bright is worse (the colour map
is reversed for a metric where higher is better, and the colour bar says so); a bounded map has a fixed range
(SSIM 0..1, its float32 values just above 1 clipped); Butteraugli's runs from 0 to its maximum, the max-norm the
metric reports; a heavy-tailed map (ColorVideoVDP's) is scaled to its 99.5th percentile, the few values above
drawn in the top colour (the colour bar's arrow). A map of the valid region only is padded (NaN, drawn blank) to
the image's size, each value at its window's centre, so it overlays the photo.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fusedsim.cli.common import IMAGE_KINDS, parse_device, score_metric_specs
from fusedsim.core.device import DEVICE_HELP
from fusedsim.metrics.registry import MetricSpec, get_metric

if TYPE_CHECKING:
    import numpy as np

    from fusedsim.io.images import ImageData

_MARGIN, _TITLE, _BAR = 12, 34, 70  # layout in pixels: margins, title band, colour bar with its labels
_MAPS = "{maps}"  # in the description and --metric's help: the metrics with a map, filled in by --help


@dataclass(frozen=True)
class MapLook:
    """How a metric's map is scaled: the quantity on its colour bar, whether a higher map value means more similar
    (the map's own sense, not always its score's: ColorVideoVDP's JOD rises with quality, its difference map falls),
    a fixed range for a bounded map, else the top of the range as a percentile of the finite values (100: the
    maximum; the bottom is then the identical value)."""

    quantity: str
    higher_is_better: bool = False
    fixed: tuple[float, float] | None = None
    percentile: float = 100.0
    note: str = ""  # how the range was chosen, for the panel's title


@dataclass(frozen=True)
class MapSource:
    """How to get a metric's map: ``compute(ref, dist, device) -> (H, W)`` array aligned with the images (NaN
    where the metric has no value), and how it is scaled."""

    compute: Callable[[ImageData, ImageData, Any], np.ndarray]
    look: MapLook


@dataclass(frozen=True)
class MapView:
    """What the map panel draws: ``values`` as drawn (clipped to the range, NaN where there is no value), the colour
    range, the colour map (bright = worse), the colour bar's label and its arrows (``extend``: values clipped), and
    how the range was chosen (``note``, shown in the panel's title)."""

    values: np.ndarray
    vmin: float
    vmax: float
    cmap: str
    label: str
    extend: str
    note: str


#: Presentation only; which metrics have a map is the registry's to say (a map not named here is drawn under its
#: metric's name, from its identical value to its maximum)
_LOOKS = {
    "ssim": MapLook("local SSIM", higher_is_better=True, fixed=(0.0, 1.0), note="scale 0..1"),
    "butteraugli": MapLook("Butteraugli distance", note="scale 0..max-norm"),
    "cvvdp": MapLook("CVVDP difference", percentile=99.5, note="scale 0..99.5th percentile"),
}
_COLOURS = "inferno"  # dark to bright: reversed for a metric where higher is better, so bright is always worse


def map_view(source: MapSource, values: np.ndarray) -> MapView:
    """The map ``values`` (H, W) as drawn: see the module docstring."""
    import numpy as np

    look = source.look
    finite = values[np.isfinite(values)]
    if look.fixed is not None:
        lo, hi = look.fixed
    elif finite.size:
        hi = float(np.percentile(finite, look.percentile)) if look.percentile < 100 else float(finite.max())
        lo = min(0.0, float(finite.min()))
    else:
        lo, hi = 0.0, 1.0
    if not hi > lo:
        hi = lo + 1e-9  # a constant map (identical images): one colour, a valid range
    below, above = bool((finite < lo).any()), bool((finite > hi).any())
    extend = {(False, False): "neither", (True, False): "min", (False, True): "max", (True, True): "both"}
    drawn = np.clip(values, lo, hi)  # NaN stays NaN
    return MapView(drawn, lo, hi, _COLOURS + ("_r" if look.higher_is_better else ""),
                   f"{look.quantity} (bright = worse)", extend[(below, above)], look.note)


def metric_map(spec: MetricSpec, ref: ImageData, dist: ImageData, device: Any) -> np.ndarray:
    """``spec``'s per-pixel map of the pair as float64 ``(H, W)`` aligned with the images: a map of the valid
    region only (smaller than the images) is centred, each value at its window's centre, with NaN around it."""
    import numpy as np

    from fusedsim.engine.inputs import metric_input

    x = metric_input(spec, ref.pixels.to(device), ref.data_range, "REF")
    y = metric_input(spec, dist.pixels.to(device), dist.data_range, "DIST")
    params = {"data_range": ref.data_range} if spec.kind == "image" else {}
    local = spec.load("score_map")(x, y, **params)[0].double().cpu().numpy()
    full = np.full((ref.height, ref.width), np.nan)
    top, left = (ref.height - local.shape[0]) // 2, (ref.width - local.shape[1]) // 2
    full[top:top + local.shape[0], left:left + local.shape[1]] = local
    return full


def map_source(spec: MetricSpec) -> MapSource:
    """The map of a metric that has one (``spec.has_map``), with how it is drawn."""
    look = _LOOKS.get(spec.name, MapLook(f"{spec.name} map", higher_is_better=spec.higher_is_better))
    return MapSource(functools.partial(metric_map, spec), look)


def map_sources() -> dict[str, MapSource]:
    """Metric name -> map, for every image metric whose spec gives one, in listing order (imports the metrics)."""
    return {spec.name: map_source(spec) for spec in score_metric_specs() if spec.has_map}


def __getattr__(name: str) -> Any:
    """``MAPS`` is :func:`map_sources`, found on first use: importing this module must not import the metrics."""
    if name == "MAPS":
        return map_sources()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _map_metric(text: str) -> str:
    try:
        spec = get_metric(text)
    except ValueError:
        spec = None
    if spec is None or spec.kind not in IMAGE_KINDS or not spec.has_map:
        raise argparse.ArgumentTypeError(f"{text!r} has no per-pixel map; choose from {', '.join(map_sources())}")
    return spec.name


class _HelpNamingMaps(argparse.Action):
    """``-h/--help`` that first names the metrics with a map where the help says ``{maps}``: finding them imports
    the metrics, which building the parser (``fusedsim --help`` builds every command's) must not do."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, default: Any = argparse.SUPPRESS,
                 help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)
        self.naming: list[argparse.Action] = []  # actions whose help says {maps}

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        names = ", ".join(map_sources())
        parser.description = parser.description.replace(_MAPS, names)
        for action in self.naming:
            action.help = action.help.replace(_MAPS, names)
        parser.print_help()
        parser.exit()


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diffmap", help="draw a metric's per-pixel map beside the two images", add_help=False,
                            description="Draw REF, DIST and the per-pixel map of a metric as a heat map with a "
                                        f"colour bar, into a PNG. Metrics with a map: {_MAPS}. The SSIM "
                                        "map covers the valid region (a 5-px border has no window).")
    show_help = parser.add_argument("-h", "--help", action=_HelpNamingMaps, help="show this help message and exit")
    parser.add_argument("ref", metavar="REF", help="reference image file")
    parser.add_argument("dist", metavar="DIST", help="distorted image file")
    show_help.naming.append(parser.add_argument("--metric", type=_map_metric, default="ssim",
                                                help=f"{_MAPS} (default: ssim)"))
    parser.add_argument("-o", "--output", required=True, metavar="PNG", help="the figure (PNG)")
    parser.add_argument("--width", type=int, default=1800, help="figure width in pixels (default 1800)")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.set_defaults(run=run)


def figure_size(width: int, image_width: int, image_height: int) -> tuple[int, int]:
    """The PNG's size in pixels for a figure ``width`` wide showing images of ``image_width`` x ``image_height``:
    three panels of the images' aspect, a title band, margins and the colour bar."""
    panel = (width - 4 * _MARGIN - _BAR) / 3
    return width, int(round(panel * image_height / image_width)) + _TITLE + 2 * _MARGIN


#: The widest figure drawn: a few times a 4K screen, well inside matplotlib's limit of 2**16 pixels a side (a
#: wider one would compute the map first and then fail in the renderer, or exhaust the memory).
MAX_WIDTH = 16000
_MAX_SIDE = 2**16 - 1  # matplotlib's Agg renderer refuses 2**16 pixels or more in either direction


def check_width(width: int) -> None:
    """Refuse a ``--width`` outside 300..MAX_WIDTH before any image is read or any map computed."""
    if not 300 <= width <= MAX_WIDTH:
        raise ValueError(f"--width must lie in 300..{MAX_WIDTH} pixels; got {width}")


def check_figure_height(width: int, image_width: int, image_height: int) -> None:
    """Refuse a figure too tall to render (a very tall image at a large width) before the map is computed."""
    height = figure_size(width, image_width, image_height)[1]
    if height > _MAX_SIDE:
        raise ValueError(f"--width {width}: the figure of {image_width}x{image_height} images would be {height} "
                         f"pixels tall (at most {_MAX_SIDE}); give a smaller --width")


def draw(ref: ImageData, dist: ImageData, values: np.ndarray, source: MapSource, width: int, title: str) -> Any:
    """The figure: REF, DIST and the heat map of ``values`` (``(H, W)``) with its colour bar."""
    import numpy as np

    from fusedsim.cli.figures import pyplot

    plt = pyplot()
    dpi = 100
    w, h = figure_size(width, ref.width, ref.height)
    fig = plt.figure(figsize=(w / dpi, h / dpi), dpi=dpi)
    panel = (w - 4 * _MARGIN - _BAR) / 3
    panel_h = h - _TITLE - 2 * _MARGIN

    def axes(left_px: float, width_px: float) -> Any:
        return fig.add_axes((left_px / w, _MARGIN / h, width_px / w, panel_h / h))

    def shown(image: ImageData) -> np.ndarray:
        array = image.pixels[0].permute(1, 2, 0).numpy() / image.data_range
        return array[..., 0] if array.shape[-1] == 1 else array

    for i, (image, name) in enumerate(((ref, "REF"), (dist, "DIST"))):
        ax = axes(_MARGIN + i * (panel + _MARGIN), panel)
        ax.imshow(shown(image), cmap="gray", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
        ax.set_title(f"{name}: {image.path.name}", fontsize=9)
        ax.axis("off")
    ax = axes(_MARGIN + 2 * (panel + _MARGIN), panel)
    view = map_view(source, values)
    im = ax.imshow(np.ma.masked_invalid(view.values), cmap=view.cmap, vmin=view.vmin, vmax=view.vmax,
                   interpolation="nearest", aspect="auto")
    ax.set_title(f"{title}; {view.note}" if view.note else title, fontsize=9)
    ax.axis("off")
    bar = fig.add_axes(((_MARGIN + 3 * panel + 2 * _MARGIN + 8) / w, _MARGIN / h, 14 / w, panel_h / h))
    fig.colorbar(im, cax=bar, extend=view.extend).set_label(view.label, fontsize=8)
    bar.tick_params(labelsize=7)
    return fig


def run(args: argparse.Namespace) -> int:
    from fusedsim.core.device import resolve_device
    from fusedsim.cli.figures import pyplot, save_figure
    from fusedsim.cli.outputs import Output, check_outputs, refuse_outputs_that_are_inputs
    from fusedsim.engine.inputs import check_min_size
    from fusedsim.io.images import check_image_pair, read_image

    check_width(args.width)
    out = Output(args.output, "png", "-o")
    check_outputs([out])
    refuse_outputs_that_are_inputs([out], [("REF", args.ref), ("DIST", args.dist)])
    if out.stream:
        raise ValueError(f"-o {args.output}: give a PNG file path")
    plt = pyplot()  # before the work: a missing matplotlib is reported at once
    ref, dist = read_image(args.ref, "REF"), read_image(args.dist, "DIST")
    check_image_pair(ref, dist)
    spec = get_metric(args.metric)
    check_min_size([spec], ref.width, ref.height)
    check_figure_height(args.width, ref.width, ref.height)
    source = map_source(spec)
    values = source.compute(ref, dist, resolve_device(args.device))
    import numpy as np

    finite = values[np.isfinite(values)]
    summary = f"mean {finite.mean():.4f}, max {finite.max():.4f}" if finite.size else "no values"
    fig = draw(ref, dist, values, source, args.width, f"{spec.name} map ({summary})")
    try:
        save_figure(fig, out.target, dpi=100)
    finally:
        plt.close(fig)
    print(f"{spec.name} map of {args.dist} against {args.ref} ({summary}) written to {args.output}")
    return 0
