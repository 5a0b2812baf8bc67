"""``fusedsim diffmap REF DIST --metric M -o map.png``: a metric's per-pixel map as a heat map beside the images.

Only metrics that define a per-pixel map are offered (:data:`MAPS`): SSIM's map (``fusedsim.families.ssim(...,
reduction="none")``, the valid region, averaged over channels), Butteraugli's distance map (its result's
``distmap``) and ColorVideoVDP's difference map (``cvvdp(..., return_map=True)``, pycvvdp's heatmap values).
Other metrics are refused with the list of those that have a map: a map made up for a metric that does not
define one would show something else under its name.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fusedsim.core.device import DEVICE_HELP
from fusedsim.cli.batch import parse_device
from fusedsim.metrics.registry import get_metric

if TYPE_CHECKING:
    import numpy as np

    from fusedsim.io.images import ImageData

_MARGIN, _TITLE, _BAR = 12, 34, 70  # layout in pixels: margins, title band, colour bar with its labels


@dataclass(frozen=True)
class MapSource:
    """How to get a metric's map: ``compute(ref, dist, device) -> (H, W)`` array aligned with the images (NaN
    where the metric has no value), its colour-bar label and the colour map."""

    compute: Callable[[ImageData, ImageData, Any], np.ndarray]
    label: str
    cmap: str


def _ssim_map(ref: ImageData, dist: ImageData, device: Any) -> np.ndarray:
    import numpy as np

    from fusedsim.families.ssim import ssim

    x, y = ref.pixels.to(device).float(), dist.pixels.to(device).float()
    local = ssim(x, y, data_range=ref.data_range, reduction="none")  # (1, C, H - 10, W - 10): the valid region
    local = local.mean(1)[0].double().cpu().numpy()
    full = np.full((ref.height, ref.width), np.nan)
    top, left = (ref.height - local.shape[0]) // 2, (ref.width - local.shape[1]) // 2
    full[top:top + local.shape[0], left:left + local.shape[1]] = local  # centred: each value at its window centre
    return full


def _butteraugli_map(ref: ImageData, dist: ImageData, device: Any) -> np.ndarray:
    from fusedsim.engine.inputs import srgb
    from fusedsim.families.butteraugli.api import butteraugli

    x = srgb(ref.pixels.to(device), ref.data_range, "REF")
    y = srgb(dist.pixels.to(device), dist.data_range, "DIST")
    return butteraugli(x, y).distmap[0].double().cpu().numpy()


def _cvvdp_map(ref: ImageData, dist: ImageData, device: Any) -> np.ndarray:
    from fusedsim.engine.inputs import srgb
    from fusedsim.families.cvvdp.api import cvvdp

    x = srgb(ref.pixels.to(device), ref.data_range, "REF")
    y = srgb(dist.pixels.to(device), dist.data_range, "DIST")
    return cvvdp(x, y, return_map=True).diff_map[0, 0].double().cpu().numpy()


#: metric name -> its per-pixel map
MAPS = {
    "ssim": MapSource(_ssim_map, "local SSIM (1 = identical)", "magma"),
    "butteraugli": MapSource(_butteraugli_map, "Butteraugli distance (0 = identical)", "inferno"),
    "cvvdp": MapSource(_cvvdp_map, "ColorVideoVDP difference, 1 - JOD/10 (0 = identical)", "inferno"),
}


def _map_metric(text: str) -> str:
    try:
        name = get_metric(text).name
    except ValueError:
        name = text
    if name not in MAPS:
        raise argparse.ArgumentTypeError(f"{text!r} has no per-pixel map; choose from {', '.join(MAPS)}")
    return name


def add_parser(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("diffmap", help="draw a metric's per-pixel map beside the two images",
                            description="Draw REF, DIST and the per-pixel map of a metric as a heat map with a "
                                        f"colour bar, into a PNG. Metrics with a map: {', '.join(MAPS)}. The SSIM "
                                        "map covers the valid region (a 5-px border has no window).")
    parser.add_argument("ref", metavar="REF", help="reference image file")
    parser.add_argument("dist", metavar="DIST", help="distorted image file")
    parser.add_argument("--metric", type=_map_metric, default="ssim", help=f"{', '.join(MAPS)} (default: ssim)")
    parser.add_argument("-o", "--output", required=True, metavar="PNG", help="the figure (PNG)")
    parser.add_argument("--width", type=int, default=1800, help="figure width in pixels (default 1800)")
    parser.add_argument("--device", type=parse_device, default="auto", help=f"{DEVICE_HELP} (auto: cuda when available)")
    parser.set_defaults(run=run)


def figure_size(width: int, image_width: int, image_height: int) -> tuple[int, int]:
    """The PNG's size in pixels for a figure ``width`` wide showing images of ``image_width`` x ``image_height``:
    three panels of the images' aspect, a title band, margins and the colour bar."""
    panel = (width - 4 * _MARGIN - _BAR) / 3
    return width, int(round(panel * image_height / image_width)) + _TITLE + 2 * _MARGIN


def draw(ref: ImageData, dist: ImageData, values: np.ndarray, source: MapSource, width: int, title: str) -> Any:
    """The figure: REF, DIST and the heat map of ``values`` (``(H, W)``) with its colour bar."""
    import numpy as np

    from fusedsim.cli._figures import pyplot

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
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    im = ax.imshow(np.ma.masked_invalid(values), cmap=source.cmap, vmin=lo, vmax=hi if hi > lo else lo + 1e-9,
                   interpolation="nearest", aspect="auto")
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    bar = fig.add_axes(((_MARGIN + 3 * panel + 2 * _MARGIN + 8) / w, _MARGIN / h, 14 / w, panel_h / h))
    fig.colorbar(im, cax=bar).set_label(source.label, fontsize=8)
    bar.tick_params(labelsize=7)
    return fig


def run(args: argparse.Namespace) -> int:
    from fusedsim.core.device import resolve_device
    from fusedsim.cli._figures import pyplot, save_figure
    from fusedsim.cli._outputs import Output, check_outputs
    from fusedsim.engine.inputs import check_min_size
    from fusedsim.io.images import check_image_pair, read_image

    if args.width < 300:
        raise ValueError(f"--width must be at least 300 pixels; got {args.width}")
    out = Output(args.output, "png", "-o")
    check_outputs([out])
    if out.stream:
        raise ValueError(f"-o {args.output}: give a PNG file path")
    plt = pyplot()  # before the work: a missing matplotlib is reported at once
    ref, dist = read_image(args.ref, "REF"), read_image(args.dist, "DIST")
    check_image_pair(ref, dist)
    spec = get_metric(args.metric)
    check_min_size([spec], ref.width, ref.height)
    source = MAPS[spec.name]
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
